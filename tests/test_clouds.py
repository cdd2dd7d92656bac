"""The cloud registry (inferstack/clouds.py): one entry per cloud, and each cloud's facts in that one place."""

from __future__ import annotations

import ast
import importlib
import ipaddress
import re
import urllib.parse
from pathlib import Path
from typing import get_args

import pytest

from inferstack.bootstrap import bucket_problem
from inferstack.bootstrap.files import cloud_access
from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.sizing.coldstart import block_volume_bytes_per_s
from inferstack.sizing.refresh import CloudPricing
from inferstack.spec import CLOUDS, PROVIDER_REGION_KEYS

ROOT = Path(__file__).resolve().parents[1]

CLOUD_IDS = frozenset(get_args(Cloud))
PROVIDER_PACKAGE_NAMES = frozenset(facts.pulumi_package for facts in CLOUD_FACTS.values())
ALLOWED_PER_CLOUD_LITERALS = {
    "inferstack/clouds.py": "the registry itself",
    "inferstack/bootstrap/files": "runs on the server, where inferstack cannot be imported",
    **{f"inferstack/components/{cloud}": "the cloud's own backend package" for cloud in CLOUD_IDS},
    "policy": "the policy pack ships alone and imports only the standard library (its provider-package map is "
              "checked against the registry in tests/policy)",
}
"""Where a literal keyed by (or listing) cloud ids may be written, and why; `tests/` is not scanned."""


def test_the_registry_has_one_entry_per_cloud_of_the_spec_literal_in_its_order() -> None:
    assert tuple(CLOUD_FACTS) == get_args(Cloud) == CLOUDS
    assert all(facts.id == cloud for cloud, facts in CLOUD_FACTS.items())


def test_the_stack_config_key_of_each_clouds_region_is_under_its_provider_package() -> None:
    assert PROVIDER_REGION_KEYS == {"aws": "aws:region", "gcp": "gcp:region", "alibaba": "alicloud:region",
                                    "huawei": "huaweicloud:region"}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_clouds_catalog_region_is_one_of_its_own_region_names(cloud: str) -> None:
    facts = CLOUD_FACTS[cloud]
    assert facts.region_pattern.fullmatch(facts.catalog_region)
    assert re.fullmatch(cloud_access.REGION_PATTERN, facts.catalog_region)  # and one the server accepts


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_bucket_grammar_is_the_one_the_server_checks(cloud: str) -> None:
    """(That the server programs know every cloud of the registry: tests/bootstrap/test_bootstrap_clouds.py.)"""
    assert CLOUD_FACTS[cloud].bucket_name_pattern is cloud_access.BUCKET_NAME_PATTERNS[cloud]
    assert bucket_problem(cloud, "inferstack-models-1", "model_bucket") is None  # type: ignore[arg-type]
    assert bucket_problem(cloud, "Not_A_Bucket!", "model_bucket") is not None  # type: ignore[arg-type]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_clouds_metadata_addresses_are_ip_addresses_and_hold_the_server_programs_endpoint(cloud: str) -> None:
    """boot.sh and IPAddressDeny= take addresses, never names: Google's metadata.google.internal is 169.254.169.254
    (its gcp-metadata client's HOST_ADDRESS and SECONDARY_HOST_ADDRESS); the other clouds' programs use the IP."""
    addresses = CLOUD_FACTS[cloud].metadata_addresses
    assert addresses and not [a for a in addresses if ipaddress.ip_address(a).is_global], addresses  # none routed
    host = urllib.parse.urlsplit(cloud_access.METADATA_ENDPOINTS[cloud]).hostname
    assert {"metadata.google.internal": "169.254.169.254"}.get(host, host) in addresses


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_clouds_pricing_module_has_the_shape_the_refresh_reads(cloud: str) -> None:
    module = importlib.import_module(CLOUD_FACTS[cloud].pricing_module)
    for name in (*CloudPricing.__annotations__, "connect", "fetch_prices"):
        assert hasattr(module, name), f"{module.__name__} lacks {name}"


def test_each_clouds_provider_sdk_is_a_requirement_of_the_package() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert [facts.pip_package for facts in CLOUD_FACTS.values() if f'"{facts.pip_package}' not in pyproject] == []


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_clouds_boot_disk_has_a_throughput_for_the_cold_start_estimate(cloud: str) -> None:
    assert block_volume_bytes_per_s(cloud, 100) > 0  # type: ignore[arg-type]


#### Each cloud's facts in one place ####


def per_cloud_literals(source: str) -> list[tuple[int, list[str]]]:
    """The line and cloud names of each literal that keys or lists two or more clouds (by id or by provider
    package): a dict display, a `dict(aws=...)` call, a set, tuple or list display. A `Literal[...]` type is not
    one: the spec's `Cloud` is where the ids are declared."""
    tree = ast.parse(source)
    in_literal_type = {id(inner) for node in ast.walk(tree)
                       if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                       and node.value.id == "Literal" for inner in ast.walk(node.slice)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            names = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List)) and id(node) not in in_literal_type:
            names = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            names = [k.arg for k in node.keywords]
        else:
            continue
        clouds = sorted({n for n in names if isinstance(n, str) and n in CLOUD_IDS | PROVIDER_PACKAGE_NAMES})
        if len(clouds) >= 2:
            found.append((node.lineno, clouds))
    return found


def production_sources() -> list[Path]:
    skipped = ("tests", "benchmarks", "docs", "examples", "stacks")
    return [path for path in sorted(ROOT.rglob("*.py"))
            if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
            and path.relative_to(ROOT).parts[0] not in skipped]


def allowed(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return any(relative == place or relative.startswith(f"{place}/") for place in ALLOWED_PER_CLOUD_LITERALS)


def test_the_scan_finds_a_dict_keyed_by_clouds_and_passes_other_literals() -> None:
    assert per_cloud_literals('REGIONS = {"aws": "us-east-1", "gcp": "us-central1"}') == [(1, ["aws", "gcp"])]
    assert per_cloud_literals('KEYS = {"alicloud": "alibaba", "huaweicloud": "huawei"}') == [
        (1, ["alicloud", "huaweicloud"])]
    assert per_cloud_literals('FIREWALLED = frozenset({"gcp", "huawei"})') == [(1, ["gcp", "huawei"])]
    assert per_cloud_literals('COLOURS = dict(aws="#ff9900", huawei="#7b3fb0")') == [(1, ["aws", "huawei"])]
    assert per_cloud_literals('Cloud = Literal["aws", "gcp", "alibaba", "huawei"]') == []
    assert per_cloud_literals('ENDPOINT = {"aws": "https://ssm"}; PATHS = ["models", "gcp-cache"]') == []


def test_no_production_module_outside_the_registry_keys_facts_by_cloud() -> None:
    """Each cloud's facts live in inferstack/clouds.py (CLOUD_FACTS): derive a per-cloud mapping from it there,
    or add the fact to the registry entry, instead of writing a new literal keyed by cloud ids."""
    sources = production_sources()
    assert ROOT / "inferstack" / "sizing" / "planner.py" in sources  # the scan looks where the facts were spread
    found = [f"{path.relative_to(ROOT)}:{line} {clouds}" for path in sources if not allowed(path)
             for line, clouds in per_cloud_literals(path.read_text(encoding="utf-8"))]
    assert found == []

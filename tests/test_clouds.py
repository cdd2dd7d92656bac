"""The cloud registry (inferstack/clouds.py): one entry per cloud, and each cloud's facts in that one place."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import get_args

import pytest

from inferstack.bootstrap import bucket_problem
from inferstack.bootstrap.files import cloud_access
from inferstack.clouds import CLOUD_FACTS
from inferstack.sizing.coldstart import block_volume_bytes_per_s
from inferstack.sizing.refresh import CloudPricing
from inferstack.spec import CLOUDS, PROVIDER_REGION_KEYS, Cloud

ROOT = Path(__file__).resolve().parents[1]


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


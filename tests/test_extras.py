"""`pip install inferstack` plans; previewing or deploying on a cloud needs its extra, and says so in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from inferstack.extras import ALL_CLOUDS_EXTRA, CLOUD_EXTRAS
from inferstack.spec import CLOUDS

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "examples" / "workloads" / "chat-8b-public.yaml"


def _without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter in which `modules` cannot be imported, as if not installed."""
    hide = "; ".join(f"sys.modules[{module!r}] = None" for module in modules)
    return subprocess.run([sys.executable, "-c", f"import sys; {hide}; {code}"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.parametrize(("cloud", "provider"), [("gcp", "Google Cloud"), ("huawei", "Huawei Cloud")])
def test_preview_without_the_clouds_provider_names_that_clouds_extra(cloud, provider):
    module = CLOUD_EXTRAS[cloud].provider_module
    result = _without([module], "from inferstack.cli import main; "
                                f"raise SystemExit(main(['preview', {str(WORKLOAD)!r}, '--cloud', {cloud!r}]))")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"error: inferstack preview --cloud {cloud} needs Pulumi and the {provider} provider "
                             f"({module} is not installed). Fix: pip install 'inferstack[{cloud}]'\n")


def test_importing_the_components_without_pulumi_names_the_extras():
    result = _without(["pulumi"], "import inferstack.components")
    last_line = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1
    assert last_line == ("inferstack.errors.MissingExtraError: inferstack.components needs Pulumi and a cloud's "
                         "provider (pulumi is not installed). Fix: pip install 'inferstack[aws]' (or [gcp], "
                         "[alibaba], [huawei], [all])")


def test_the_missing_extra_is_an_import_error_a_program_can_catch():
    result = _without(["pulumi"], "from inferstack.errors import MissingExtraError\n"
                                  "try:\n    import inferstack.preview\n"
                                  "except ImportError as error:\n"
                                  "    print(type(error).__name__, error.name, error.extras)")
    assert result.stdout == "MissingExtraError pulumi ['aws', 'gcp', 'alibaba', 'huawei', 'all']\n", result.stderr


def test_a_backend_without_its_provider_names_its_extra():
    result = _without(["pulumi_alicloud"], "from inferstack.components import backend_for; backend_for('alibaba')")
    assert result.stderr.strip().splitlines()[-1].endswith(
        "deploying on alibaba (inferstack.components) needs Pulumi and the Alibaba Cloud provider (pulumi_alicloud is "
        "not installed). Fix: pip install 'inferstack[alibaba]'")


def test_planning_needs_no_extra():
    result = _without(["pulumi", *(extra.provider_module for extra in CLOUD_EXTRAS.values())],
                      f"from inferstack.cli import main; raise SystemExit(main(['plan', {str(WORKLOAD)!r}, '--json']))")
    assert result.returncode == 0, result.stderr


#### pyproject.toml agrees ####


def _extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    return extras


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0].lower() for requirement in requirements}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_clouds_extra_brings_pulumi_and_the_provider_the_error_names(cloud):
    extra = CLOUD_EXTRAS[cloud]
    undeclared = {"huawei": {"setuptools"}}.get(cloud, set())  # pkg_resources, which pulumi-huaweicloud imports
    assert _names(_extras()[extra.extra]) == {"pulumi", extra.provider_module.replace("_", "-")} | undeclared


def test_the_all_extra_brings_every_clouds_extra():
    assert set(_extras()[ALL_CLOUDS_EXTRA]) == {f"inferstack[{extra.extra}]" for extra in CLOUD_EXTRAS.values()}


def test_the_library_pins_nothing_exactly():
    """inferstack is imported into other people's Pulumi programs: ranges, so their own pins can resolve with it."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = project["dependencies"] + [r for name, reqs in project["optional-dependencies"].items()
                                         if name != "dev" for r in reqs]
    assert [requirement for requirement in runtime if "==" in requirement] == []


#### The lock files agree ####

LOCKS = ROOT / "requirements"


def _locked(lock: str) -> dict[str, list[str]]:
    """Package → the versions a lock pins (more than one where they differ by Python version)."""
    pins: dict[str, list[str]] = {}
    for match in re.finditer(r"^([A-Za-z0-9._-]+)==([^ ;\\\n]+)", (LOCKS / lock).read_text(), re.MULTILINE):
        pins.setdefault(match[1].lower().replace("_", "-"), []).append(match[2])
    return pins


def test_the_demo_lock_holds_the_aws_extra_and_nothing_the_demo_does_not_run():
    demo = _locked("demo.lock")
    assert {"pulumi", "pulumi-aws", "pydantic", "rich", "simpy"} <= demo.keys()
    left_out = {"pulumi-gcp", "pulumi-alicloud", "pulumi-huaweicloud", "boto3", "scipy", "moto", "pytest", "mypy"}
    assert left_out.isdisjoint(demo.keys())


LOCKED_EXTRAS = {"dev.lock": "dev", "demo.lock": "aws", "policy.lock": "all"}
"""The extra each lock is made from (Makefile, `lock`)."""


def _asked(extra: str, extras: dict[str, list[str]]) -> list[str]:
    """The requirements an extra brings, its references to other extras (`inferstack[aws]`) followed."""
    asked = []
    for requirement in extras[extra]:
        inner = re.fullmatch(r"inferstack\[(.+)\]", requirement)
        asked += [r for name in inner[1].split(",") for r in _asked(name, extras)] if inner else [requirement]
    return asked


@pytest.mark.parametrize("lock", LOCKED_EXTRAS)
def test_every_locked_version_is_in_the_range_pyproject_asks_for(lock):
    """A lock older than a range it was made from fails here: `make lock` rewrites it."""
    requirements = pytest.importorskip("packaging.requirements")
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    asked = project["dependencies"] + _asked(LOCKED_EXTRAS[lock], project["optional-dependencies"])
    pins = _locked(lock)
    outside = []
    for text in asked:
        requirement = requirements.Requirement(text)
        for version in pins.get(requirement.name.lower().replace("_", "-"), []):
            if not requirement.specifier.contains(version, prereleases=True):
                outside.append(f"{requirement.name}=={version} (asked {requirement.specifier})")
    assert asked and outside == []

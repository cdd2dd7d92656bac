"""Known regions (issue 25): a region name no cloud has is refused where it is given, naming the field, with the
closest names, and the list it is checked against (sizing/data/regions.csv) has a source for every row."""

import csv
import datetime
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inferstack.clouds import CLOUD_FACTS
from inferstack.errors import InputError
from inferstack.sizing.catalog import CATALOG_REGIONS
from inferstack.sizing.planner import plan_workload
from inferstack.spec import parse_workload
from inferstack.stack_file import read_stack_workload

ROOT = Path(__file__).resolve().parents[2]
REGIONS_CSV = ROOT / "inferstack" / "sizing" / "data" / "regions.csv"
REFRESH = "tools/refresh_regions.py"
WORKLOAD = {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 1}}


def rows() -> list[dict[str, str]]:
    """regions.csv read here on its own, so the data tests do not trust the module they check."""
    with REGIONS_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def regions_of(cloud: str) -> set[str]:
    return {row["region"] for row in rows() if row["cloud"] == cloud}


def refresh_script():
    spec = importlib.util.spec_from_file_location("refresh_regions", ROOT / REFRESH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- refused where it is given ---------------------------------------------------------------------------


def test_a_workload_region_aws_does_not_have_is_refused_naming_the_field_with_the_closest_names():
    spec = parse_workload({**WORKLOAD, "placement": {"clouds": ["aws"], "regions": {"aws": ["us-east-9"]}}})
    with pytest.raises(InputError) as error:
        plan_workload(spec)
    text = str(error.value)
    assert "placement.regions.aws: is not an aws region name (got 'us-east-9')" in text
    suggested = text.split("did you mean ", 1)[1].split("?", 1)[0].split(", ")
    assert {"us-east-1", "us-east-2"} <= set(suggested)
    assert "inferstack/sizing/data/regions.csv" in text and REFRESH in text


def test_plan_refuses_an_unknown_workload_region_with_exit_2_and_one_line_naming_it(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump({**WORKLOAD, "placement": {"regions": {"aws": ["us-east-9"]}}}))
    result = subprocess.run([sys.executable, "-m", "inferstack.cli", "plan", str(workload)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1
    assert problems[0].startswith("  - placement.regions.aws: is not an aws region name (got 'us-east-9')")
    assert "us-east-1" in problems[0] and "us-east-2" in problems[0]


def test_a_stack_whose_provider_region_aws_does_not_have_is_refused_naming_the_config_key(tmp_path):
    data = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-prod.yaml").read_text())
    data["config"]["aws:region"] = "us-east-9"
    stack = tmp_path / "Pulumi.aws-prod.yaml"
    stack.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as error:
        read_stack_workload(stack)
    text = str(error.value)
    assert "aws:region: is not an aws region name (got 'us-east-9')" in text
    assert "us-east-1" in text and "us-east-2" in text


def test_a_region_flag_no_allowed_cloud_has_is_refused_with_close_names_of_each_cloud():
    spec = parse_workload(WORKLOAD)
    with pytest.raises(InputError) as error:
        plan_workload(spec, region="europe-west13")
    text = str(error.value)
    assert "--region: is not a region name of the workload's clouds (aws, gcp, alibaba, huawei)" in text
    assert "europe-west12 (gcp)" in text


def test_a_close_name_several_clouds_share_is_shown_under_the_first_allowed_cloud():
    with pytest.raises(InputError) as error:
        plan_workload(parse_workload(WORKLOAD), region="us-east-9")  # us-east-1: AWS and Alibaba both have one
    assert "us-east-1 (aws)" in str(error.value) and "(alibaba)" not in str(error.value)


def test_a_region_flag_for_one_cloud_names_the_flag():
    with pytest.raises(InputError, match=r"--region: is not a gcp region name \(got 'us-central9'\)"):
        plan_workload(parse_workload(WORKLOAD), clouds=["gcp"], region="us-central9")


def test_a_region_only_one_allowed_cloud_has_picks_that_cloud():
    report = plan_workload(parse_workload(WORKLOAD), region="europe-west4")
    assert [outcome.cloud for outcome in report.clouds] == ["gcp"]


def test_a_known_region_without_a_price_row_is_planned_at_a_borrowed_price():
    spec = parse_workload({**WORKLOAD, "placement": {"clouds": ["aws"], "regions": {"aws": ["ca-central-1"]}}})
    plan = plan_workload(spec).outcome("aws").chosen
    assert plan is not None and plan.region == "ca-central-1"
    assert "borrowed" in plan.price.flags and plan.price.priced_region == "us-east-1"


def test_a_region_with_prices_of_its_own_is_planned_at_them():
    spec = parse_workload({**WORKLOAD, "placement": {"clouds": ["aws"], "regions": {"aws": ["eu-west-1"]}}})
    plan = plan_workload(spec).outcome("aws").chosen
    assert plan is not None and plan.region == "eu-west-1"
    assert plan.price.flags == [] and plan.price.priced_region == "eu-west-1"


# ---- the list and its sources ----------------------------------------------------------------------------


def test_every_row_names_a_cloud_a_region_once_a_source_and_the_date_it_was_read():
    seen: set[tuple[str, str]] = set()
    for row in rows():
        key = (row["cloud"], row["region"])
        assert row["cloud"] in CLOUD_FACTS, row
        assert key not in seen, f"{key} is listed twice"
        seen.add(key)
        assert row["source"].strip(), f"{key} has no source"
        assert datetime.date.fromisoformat(row["source_date"]) <= datetime.date.today(), f"{key}: a date to come"
        assert all(zone.startswith(row["region"]) for zone in row["zones"].split()), row
    assert {cloud for cloud, _ in seen} == set(CLOUD_FACTS), "every cloud has its regions"


def test_every_region_fits_its_clouds_region_names():
    # A row filed under the wrong cloud (Google's us-central1 under aws) shows up here.
    misfiled = [(row["cloud"], row["region"]) for row in rows()
                if not CLOUD_FACTS[row["cloud"]].region_pattern.fullmatch(row["region"])]
    assert misfiled == []


def test_the_aws_rows_are_what_the_installed_botocore_says():
    pytest.importorskip("botocore", reason="botocore comes with the refresh and dev extras")
    script = refresh_script()
    installed = script.aws_regions()
    listed = {row["region"]: row["source"] for row in rows() if row["cloud"] == "aws"}
    added, gone = sorted(set(installed) - set(listed)), sorted(set(listed) - set(installed))
    assert not added and not gone, (
        f"botocore's regions changed (new: {added}, gone: {gone}): run `.venv/bin/python {REFRESH}` and review "
        "the diff of inferstack/sizing/data/regions.csv")
    assert listed == installed, f"the sources differ from botocore's: run `.venv/bin/python {REFRESH}`"


def test_the_refresh_keeps_the_documented_rows_and_rewrites_only_the_sdk_ones():
    pytest.importorskip("botocore", reason="botocore comes with the refresh and dev extras")
    script = refresh_script()
    current = rows()
    refreshed = script.refreshed_rows(current, "2999-01-01")
    documented = [row for row in current if row["cloud"] != "aws"]
    assert [row for row in refreshed if row["cloud"] != "aws"] == documented
    assert refreshed == current, "regions.csv is not what the refresh writes: run the refresh and review its diff"


def test_the_isolated_aws_partitions_are_left_out():
    assert not {region for region in regions_of("aws") if "-iso" in region or region.startswith("eusc-")}


@pytest.mark.parametrize("cloud", list(CLOUD_FACTS))
def test_each_clouds_catalog_region_is_a_known_region(cloud):
    assert CATALOG_REGIONS[cloud] in regions_of(cloud)


def test_every_priced_region_is_a_known_region():
    with (ROOT / "inferstack" / "sizing" / "data" / "prices.csv").open(newline="", encoding="utf-8") as f:
        priced = {(row["cloud"], row["region"]) for row in csv.DictReader(f)}
    assert {(cloud, region) for cloud, region in priced if region not in regions_of(cloud)} == set()


def test_every_stack_and_example_provider_region_is_a_known_region():
    keys = {facts.region_config_key: facts.id for facts in CLOUD_FACTS.values()}
    used = set()
    for path in [*ROOT.glob("stacks/Pulumi.*.yaml"), *ROOT.glob("examples/*/Pulumi.*.yaml")]:
        config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
        used |= {(keys[key], value, path.name) for key, value in config.items() if key in keys}
    assert used, "the stacks give their provider region"
    assert [entry for entry in used if entry[1] not in regions_of(entry[0])] == []

"""Plans pinned per stack: `inferstack pin` writes the plan next to the stack config with the catalog rows it was made
from, the program deploys it only when those inputs plan to exactly it, and a workload changed since (or a pin edited
by hand) is refused naming the command that re-plans."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from inferstack.cli import main
from inferstack.components.program import deploy, read_stack_config
from inferstack.diff import diff_workload_files
from inferstack.errors import InputError
from inferstack.pin import PinnedPlan, pin_stack, pinned_path, read_pinned, workload_sha256
from inferstack.sizing import catalog as catalog_module
from inferstack.sizing.planner import plan_workload
from inferstack.stack_file import read_stack_calibration_of, read_stack_workload

REPO = Path(__file__).resolve().parents[2]
STACK = "aws-prod"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A Pulumi project with the repository's aws-prod stack file, its stack files under stacks/."""
    (tmp_path / "stacks").mkdir()
    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copy(REPO / "stacks" / f"Pulumi.{STACK}.yaml", tmp_path / "stacks" / f"Pulumi.{STACK}.yaml")
    return tmp_path


def _stack_file(project: Path) -> Path:
    return project / "stacks" / f"Pulumi.{STACK}.yaml"


def _config(project: Path) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(_stack_file(project).read_text())["config"]
    return {**config, "inferstack:apiKey": "k"}


def _deploy(run: Any, project: Path) -> Any:
    deployments = []

    def program() -> Any:
        deployments.append(deploy(read_stack_config(project)))
        return deployments[-1].plan.instance_count

    run(program, config=_config(project), stack=STACK)
    return deployments[0]


def test_pin_writes_the_stacks_plan_next_to_its_config(project: Path, capsys: Any) -> None:
    assert main(["pin", str(_stack_file(project))]) == 0
    path = project / "stacks" / f"Pulumi.{STACK}.plan.json"
    assert path == pinned_path(_stack_file(project)) and path.is_file()
    pinned = json.loads(path.read_text())
    (outcome,) = pinned["report"]["clouds"]
    assert outcome["cloud"] == "aws" and outcome["chosen"]["stage"] == "production"
    assert outcome["chosen"]["region"] == "us-east-1"
    assert set(pinned) == {"inferstack_version", "written_on", "workload_sha256", "calibration_sha256",
                           "prices_file_sha256", "catalog", "report"}
    assert pinned["calibration_sha256"] is None and pinned["prices_file_sha256"] is None  # the stack names neither
    # What the plan was made from: the cloud's instance types and prices, one CSV line each, header first.
    instances, prices = pinned["catalog"]["instances"], pinned["catalog"]["prices"]
    assert instances[0].startswith("cloud,region,instance_type,") and "notes" not in instances[0]
    assert prices[0] == "cloud,region,instance_type,currency,price_per_hour,source,source_date,from_override_file"
    assert all(line.startswith("aws,") for line in instances[1:] + prices[1:])
    assert any(line.startswith(f"aws,us-east-1,{outcome['chosen']['instance_type']},") for line in prices)
    assert outcome["chosen"]["price"]["source_date"]  # what the price was, and when
    assert str(path) in capsys.readouterr().out


def test_pin_prints_what_the_new_pin_replaces(project: Path, capsys: Any) -> None:
    _, first = pin_stack(_stack_file(project))
    _set_config(project, "inferstack:workload", {
        **yaml.safe_load(_stack_file(project).read_text())["config"]["inferstack:workload"],
        "traffic": {"concurrent_users": 300, "prompt_tokens": {"mean": 800, "p95": 2000},
                    "output_tokens": {"mean": 300, "p95": 800}, "context_tokens": 8192}})
    capsys.readouterr()
    assert main(["pin", str(_stack_file(project))]) == 0
    out = capsys.readouterr().out
    second = PinnedPlan.model_validate_json(pinned_path(_stack_file(project)).read_text())
    assert f"was {first.chosen().summary()}" in out and f"now {second.chosen().summary()}" in out
    assert first.chosen().summary() != second.chosen().summary()
    assert main(["pin", str(_stack_file(project))]) == 0
    assert "(the same deployment as before)" in capsys.readouterr().out


def _edit_pin(path: Path, edit: Any) -> None:
    pinned = json.loads(path.read_text())
    edit(pinned["report"]["clouds"][0]["chosen"])
    path.write_text(json.dumps(pinned, indent=2))


def _internal_and_without_a_fleet(chosen: dict[str, Any]) -> None:
    """The reproduction in issue 23: the workload's hash kept, the stage set to internal, the fleet removed."""
    chosen["stage"] = "internal"
    chosen["fleet"] = None


def test_a_hand_edited_pin_is_refused_by_the_program_with_the_fields_that_differ(run: Any, project: Path) -> None:
    path, _ = pin_stack(_stack_file(project))
    _edit_pin(path, _internal_and_without_a_fleet)
    message = _refusal(run, project)
    assert f"Pulumi.{STACK}.plan.json: is not the plan its workload and its own catalog rows give" in message
    assert "edited by hand" in message
    assert 'stage: pinned "internal", planned "production"' in message
    assert "fleet: pinned null, planned {" in message
    assert f"inferstack pin stacks/Pulumi.{STACK}.yaml" in message


@pytest.mark.parametrize("edit", [
    lambda chosen: chosen.update(instance_count=chosen["instance_count"] + 1, replicas=chosen["replicas"] + 1),
    lambda chosen: chosen["serving"].update(port=8080),
    lambda chosen: chosen.update(zones=1),
    lambda chosen: chosen["price"].update(substitute=True),
    lambda chosen: chosen["rationale"].append("reviewed"),
], ids=["count", "port", "zones", "price", "rationale"])
def test_any_edit_of_the_pinned_plan_is_refused(run: Any, project: Path, edit: Any) -> None:
    path, _ = pin_stack(_stack_file(project))
    _edit_pin(path, edit)
    assert "is not the plan its workload and its own catalog rows give" in _refusal(run, project)


def test_an_edited_catalog_row_in_the_pin_plans_to_another_plan_and_is_refused(run: Any, project: Path) -> None:
    # The pin's own price rows are what it is checked against: a price row edited alone no longer gives its plan.
    path, pinned = pin_stack(_stack_file(project))
    chosen = pinned.chosen()
    data = json.loads(path.read_text())
    data["catalog"]["prices"] = [line.replace(f",{chosen.price.hourly_per_instance.amount},", ",0.01,")
                                 if line.startswith(f"aws,us-east-1,{chosen.instance_type},") else line
                                 for line in data["catalog"]["prices"]]
    path.write_text(json.dumps(data, indent=2))
    assert "price.hourly_per_instance.amount: pinned" in _refusal(run, project)


def test_a_pin_written_before_pins_recorded_their_catalog_is_refused(run: Any, project: Path) -> None:
    path, _ = pin_stack(_stack_file(project))
    data = json.loads(path.read_text())
    del data["catalog"], data["prices_file_sha256"]
    path.write_text(json.dumps(data))
    message = _refusal(run, project)
    assert "did not record their catalog and price file" in message
    assert f"inferstack pin stacks/Pulumi.{STACK}.yaml" in message


def test_an_unedited_pin_plans_to_exactly_its_report_from_its_own_rows(project: Path) -> None:
    _, pinned = pin_stack(_stack_file(project))
    workload, _ = read_stack_workload(_stack_file(project))
    assert pinned.replanned(workload, None) == pinned.report
    assert pinned.differences(pinned.replanned(workload, None)) == []


def test_a_workload_changed_since_its_pin_is_refused_naming_the_command_that_re_plans(run: Any,
                                                                                      project: Path) -> None:
    pin_stack(_stack_file(project))
    stack = yaml.safe_load(_stack_file(project).read_text())
    stack["config"]["inferstack:workload"]["traffic"]["concurrent_users"] = 150
    _stack_file(project).write_text(yaml.safe_dump(stack))

    def program() -> str:
        with pytest.raises(InputError) as caught:
            read_stack_config(project)
        return str(caught.value)

    message = run(program, config=_config(project), stack=STACK).value
    assert "inferstack:workload: changed since its plan was pinned in Pulumi.aws-prod.plan.json" in message
    assert f"inferstack pin stacks/Pulumi.{STACK}.yaml" in message


def test_a_region_changed_since_the_pin_is_refused_too(run: Any, project: Path) -> None:
    pin_stack(_stack_file(project))

    def program() -> str:
        with pytest.raises(InputError) as caught:
            read_stack_config(project)
        return str(caught.value)

    assert "changed since its plan was pinned" in run(program, config={**_config(project),
                                                                         "aws:region": "eu-west-1"}, stack=STACK).value


def test_a_stack_without_a_pin_is_sized_at_deployment_with_a_warning(run: Any, project: Path,
                                                                      monkeypatch: Any) -> None:
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    deployment = _deploy(run, project)
    assert deployment.plan.stage == "production"
    assert any(f"pin its plan with `inferstack pin stacks/Pulumi.{STACK}.yaml`" in w for w in warnings)


def test_a_pin_for_an_infeasible_stack_is_not_written(project: Path) -> None:
    stack = yaml.safe_load(_stack_file(project).read_text())
    stack["config"]["inferstack:workload"]["placement"] = {"monthly_budget": 10}
    _stack_file(project).write_text(yaml.safe_dump(stack))
    assert main(["pin", str(_stack_file(project))]) == 3
    assert not pinned_path(_stack_file(project)).exists()


#### The repository's own stacks ####

SIZING_STACKS = sorted(  # a stack that gives a plan (inferstack:plan, planFile) deploys it as it is: no pin
    path for path in (REPO / "stacks").glob("Pulumi.*.yaml")
    if {"inferstack:workload", "inferstack:workloadFile"} & set(yaml.safe_load(path.read_text())["config"]))


@pytest.mark.parametrize("stack_file", SIZING_STACKS, ids=lambda p: p.stem)
def test_every_stack_that_sizes_a_workload_has_a_pin_its_inputs_plan_to(stack_file: Path) -> None:
    pin = pinned_path(stack_file)
    assert pin.is_file(), f"pin the stack: inferstack pin stacks/{stack_file.name}"
    workload, prices_file = read_stack_workload(stack_file)
    pinned = PinnedPlan.model_validate_json(pin.read_text())
    assert pinned.workload_sha256 == workload_sha256(workload), f"re-pin: inferstack pin stacks/{stack_file.name}"
    measured = read_stack_calibration_of(stack_file)
    assert pinned.calibration_sha256 == (measured.sha256 if measured else None), f"re-pin: stacks/{stack_file.name}"
    assert read_pinned(pin, workload, stack_file=f"stacks/{stack_file.name}", calibration=measured,
                       prices_file=prices_file) == pinned.chosen(), f"re-pin: stacks/{stack_file.name}"


def test_the_aws_prod_stack_deploys_its_committed_pin(run: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(REPO)
    config = yaml.safe_load((REPO / "stacks" / "Pulumi.aws-prod.yaml").read_text())["config"]
    settings = run(lambda: read_stack_config(REPO), config=config, stack="aws-prod").value
    pinned = PinnedPlan.model_validate_json((REPO / "stacks" / "Pulumi.aws-prod.plan.json").read_text())
    assert settings.workload is None and settings.plan == pinned.chosen()


def test_a_price_change_alone_changes_no_deployment_and_the_diff_shows_it(run: Any, project: Path, tmp_path: Path,
                                                                          monkeypatch: Any) -> None:
    # The pinned plan's server type becomes ten times dearer in the packaged catalog (a price update, nothing else).
    _, pinned = pin_stack(_stack_file(project))
    chosen = pinned.chosen()
    data = tmp_path / "data"
    shutil.copytree(catalog_module.DATA_DIR, data)
    rows = (data / "prices.csv").read_text().splitlines()
    amount = chosen.price.hourly_per_instance.amount
    rows = [row.replace(f",{amount},", f",{10 * amount},") if row.startswith(f"aws,us-east-1,{chosen.instance_type},")
            else row for row in rows]
    (data / "prices.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(catalog_module, "DATA_DIR", data)
    fresh = plan_workload(pinned.report.workload, clouds=["aws"]).outcome("aws").chosen
    assert fresh is not None and fresh.instance_type != chosen.instance_type  # re-planning would move

    def program() -> Any:
        return deploy(read_stack_config(project)).plan

    assert run(program, config=_config(project), stack=STACK).value == chosen  # the pin's own rows are planned

    diff = diff_workload_files([_stack_file(project), _stack_file(project)])
    assert not diff.changed and diff.workload_changes == []  # the workload did not change
    (drift,) = diff.catalog_changes  # the price alone did, since the pin
    assert drift.cloud == "aws" and chosen.instance_type in (drift.before or "")
    assert fresh.instance_type in (drift.after or "")
    assert "Re-planned today it would be" in (diff.pin or "")


def test_a_price_file_changed_since_the_pin_is_refused_naming_the_command(run: Any, project: Path) -> None:
    prices = project / "prices.yaml"
    prices.write_text(yaml.safe_dump({"discounts": {"aws": 10}}))
    _set_config(project, "inferstack:pricesFile", "prices.yaml")
    _, pinned = pin_stack(_stack_file(project))
    assert pinned.prices_file_sha256 == hashlib.sha256(prices.read_bytes()).hexdigest()
    assert "less 10 %" in (pinned.chosen().price.source or "")
    assert _deploy(run, project).plan == pinned.chosen()
    prices.write_text(yaml.safe_dump({"discounts": {"aws": 20}}))
    message = _refusal(run, project)
    assert "inferstack:pricesFile: changed since its plan was pinned in Pulumi.aws-prod.plan.json" in message


#### A stack's calibration file (inferstack:calibrationFile) ####

CALIBRATION = "calibrations/measured.json"


def _calibrate(project: Path, ttft: float = 1.1, tpot: float = 1.2) -> Path:
    """A calibration file for the aws-prod plan's deployment (llama-3.1-8b bf16 on vLLM, one L40S), named by the
    stack file."""
    path = project / CALIBRATION
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"inferstack_calibration": 1, "rows": [{
        "model": "llama-3.1-8b", "precision": "bf16", "engine": "vllm", "hardware": "1x L40S",
        "ttft_factor": ttft, "tpot_factor": tpot, "load_tests": 1, "sources": ["result.json"]}]}))
    _set_config(project, "inferstack:calibrationFile", CALIBRATION)
    return path


def _set_config(project: Path, key: str, value: Any) -> None:
    stack = yaml.safe_load(_stack_file(project).read_text())
    stack["config"][key] = value
    _stack_file(project).write_text(yaml.safe_dump(stack))


def _refusal(run: Any, project: Path) -> str:
    def program() -> str:
        with pytest.raises(InputError) as caught:
            read_stack_config(project)
        return str(caught.value)

    return str(run(program, config=_config(project), stack=STACK).value)


def test_a_stacks_calibration_file_sizes_its_pin_which_records_the_files_sha256(project: Path) -> None:
    _, plain = pin_stack(_stack_file(project))
    calibration = _calibrate(project)
    _, pinned = pin_stack(_stack_file(project))
    assert pinned.calibration_sha256 == hashlib.sha256(calibration.read_bytes()).hexdigest()
    before, after = plain.chosen().performance, pinned.chosen().performance
    # A slower decode step: the planner keeps fewer sequences per server, and TPOT still rises.
    assert before.tpot_p95_ms and after.tpot_p95_ms and after.tpot_p95_ms > before.tpot_p95_ms
    assert after.concurrency_per_replica < before.concurrency_per_replica
    rationale = " ".join(pinned.chosen().rationale)
    assert f"Speed calibrated by 1 load test(s) of llama-3.1-8b bf16 on vllm, 1x L40S ({CALIBRATION})" in rationale
    assert ("The TTFT, TPOT and output tokens/s above, and the replicas sized from them, are the calibrated model's "
            "predictions at this plan's load, not measurements") in rationale


def test_the_program_deploys_a_pin_made_with_the_calibration_it_still_names(run: Any, project: Path) -> None:
    _calibrate(project)
    _, pinned = pin_stack(_stack_file(project))
    assert _deploy(run, project).plan == pinned.chosen()


def test_a_calibration_file_changed_since_the_pin_is_refused_naming_the_command(run: Any, project: Path) -> None:
    calibration = _calibrate(project)
    pin_stack(_stack_file(project))
    calibration.write_text(calibration.read_text().replace('"tpot_factor": 1.2', '"tpot_factor": 1.3'))
    message = _refusal(run, project)
    assert "inferstack:calibrationFile: changed since its plan was pinned in Pulumi.aws-prod.plan.json" in message
    assert f"inferstack pin stacks/Pulumi.{STACK}.yaml" in message


def test_a_calibration_file_added_after_the_pin_is_refused_too(run: Any, project: Path) -> None:
    pin_stack(_stack_file(project))
    _calibrate(project)
    assert "inferstack:calibrationFile: changed since its plan was pinned" in _refusal(run, project)


def test_an_unpinned_stack_is_sized_with_its_calibration(run: Any, project: Path) -> None:
    plain = plan_workload(read_stack_workload(_stack_file(project))[0], clouds=["aws"]).outcome("aws").chosen
    _calibrate(project, ttft=1.5, tpot=1.3)
    deployed = _deploy(run, project).plan
    assert plain is not None and plain.performance.tpot_p95_ms and deployed.performance.tpot_p95_ms
    assert deployed.performance.tpot_p95_ms > plain.performance.tpot_p95_ms
    assert any("calibrated model's predictions at this plan's load" in line for line in deployed.rationale)


@pytest.mark.parametrize("value", ["../outside.json", "/etc/passwd", "calibrations/../../outside.json",
                                   "calibrations/sub/measured.json", "measured.json", "calibrations/.hidden.json",
                                   "calibrations/measured.yaml", "calibrations/a b.json"])
def test_a_calibration_path_outside_calibrations_is_refused_by_the_program_and_by_pin(
        run: Any, project: Path, value: Any) -> None:
    _set_config(project, "inferstack:calibrationFile", value)
    message = _refusal(run, project)
    assert "inferstack:calibrationFile" in message and "calibrations/<name>.json" in message, message
    with pytest.raises(InputError, match=re.escape("must be a file calibrations/<name>.json")):
        pin_stack(_stack_file(project))
    assert not pinned_path(_stack_file(project)).exists()


def test_a_calibration_link_that_leads_out_of_the_project_is_refused(run: Any, project: Path,
                                                                     tmp_path_factory: Any) -> None:
    outside = tmp_path_factory.mktemp("elsewhere") / "measured.json"
    outside.write_text(_calibrate(project).read_text())
    (project / CALIBRATION).unlink()
    os.symlink(outside, project / CALIBRATION)
    assert "leads outside the Pulumi project" in _refusal(run, project)
    with pytest.raises(InputError, match="leads outside the Pulumi project"):
        pin_stack(_stack_file(project))


def test_a_stack_that_gives_a_plan_refuses_a_calibration_file(run: Any, project: Path) -> None:
    _, pinned = pin_stack(_stack_file(project))
    plan_file = project / "plan.json"
    plan_file.write_text(pinned.chosen().model_dump_json())
    stack = yaml.safe_load(_stack_file(project).read_text())
    del stack["config"]["inferstack:workload"]
    stack["config"]["inferstack:planFile"] = "plan.json"
    _stack_file(project).write_text(yaml.safe_dump(stack))
    _calibrate(project)
    assert "inferstack:calibrationFile: applies to a workload the stack sizes" in _refusal(run, project)


def test_a_calibration_change_shows_in_the_diff_as_a_plan_change(project: Path) -> None:
    base = project / "stacks" / "Pulumi.aws-base.yaml"
    shutil.copy(_stack_file(project), base)
    _calibrate(project)
    diff = diff_workload_files([base, _stack_file(project)])
    assert diff.changed
    (change,) = diff.workload_changes
    assert change.field == "inferstack:calibrationFile" and change.before is None
    assert str(change.after).startswith(f"{CALIBRATION} (sha256 ")
    (cloud,) = diff.clouds
    assert "performance.tpot_p95_ms" in {c.field for c in cloud.changes}
    assert (diff.pin or "").startswith("**Not pinned**")
    pin_stack(_stack_file(project))
    (project / CALIBRATION).write_text((project / CALIBRATION).read_text().replace("1.2", "1.25"))
    again = diff_workload_files([base, _stack_file(project)])
    assert (again.pin or "").startswith("**Pin out of date**")


def test_diff_against_a_git_ref_reads_the_calibration_file_as_it_was_there(project: Path) -> None:
    from git_repo import git

    calibration = _calibrate(project, tpot=1.2)
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "calibrated")
    committed = hashlib.sha256(calibration.read_bytes()).hexdigest()
    calibration.write_text(calibration.read_text().replace('"tpot_factor": 1.2', '"tpot_factor": 1.6'))
    diff = diff_workload_files([_stack_file(project)], base_ref="HEAD")
    (change,) = diff.workload_changes
    assert change.before == f"{CALIBRATION} (sha256 {committed[:12]})"  # read from git, not the working tree
    assert change.after == f"{CALIBRATION} (sha256 {hashlib.sha256(calibration.read_bytes()).hexdigest()[:12]})"
    (cloud,) = diff.clouds
    assert cloud.status == "changed"
    git(project, "rm", "-q", "--cached", CALIBRATION)  # still in the working tree, not at HEAD
    git(project, "commit", "-q", "-m", "the calibration file is not committed")
    with pytest.raises(InputError, match="inferstack:calibrationFile: does not exist at HEAD"):
        diff_workload_files([_stack_file(project)], base_ref="HEAD")


@pytest.mark.parametrize(("workload", "cloud", "region"), [
    ("chat-70b.yaml", "alibaba", "ap-southeast-1"),   # types its price list leaves out: not sold there
    ("chat-70b.yaml", "alibaba", "me-east-1"),        # no price list: borrowed from the cheapest region
    ("chat-8b-public.yaml", "aws", "eu-west-1"),      # the region's own prices
    ("chat-8b-public.yaml", "aws", "ca-central-1"),   # the catalog region's price
    ("embeddings-bert.yaml", "gcp", "europe-west4"),
])
def test_a_pin_keeps_only_the_price_rows_its_plan_reads_and_they_plan_the_same(workload: str, cloud: str,
                                                                                  region: str) -> None:
    from inferstack.pin import PinnedCatalog
    from inferstack.spec import load_workload

    full = catalog_module.load_catalog()
    spec = load_workload(REPO / "examples" / "workloads" / workload)
    planned = plan_workload(spec, clouds=[cloud], region=region, catalog=full)
    pinned = PinnedCatalog.of(cloud, full.prices, (), planned.outcome(cloud).regions)
    all_rows = PinnedCatalog.of(cloud, full.prices)
    assert len(pinned.prices) < len(all_rows.prices)
    again = plan_workload(spec, clouds=[cloud], region=region, catalog=pinned.catalog(full.today))
    assert again.model_dump_json() == planned.model_dump_json()


def _pinned_round_trip(spec: Any, cloud: str, prices_file: Path | None = None) -> tuple[str, str]:
    """The report planned from the full catalog, and from the rows a pin of it keeps (as pin_stack keeps them)."""
    from inferstack.pin import PinnedCatalog

    full = catalog_module.load_catalog(prices_file)
    planned = plan_workload(spec, clouds=[cloud], catalog=full)
    outcome = planned.outcome(cloud)
    spot_read = any(plan.spot_above_floor for plan in (outcome.require_chosen("test"), *outcome.alternatives))
    pinned = PinnedCatalog.of(cloud, full.prices, outcome.regions if spot_read else (), outcome.regions)
    again = plan_workload(spec, clouds=[cloud], catalog=pinned.catalog(full.today))
    return planned.model_dump_json(), again.model_dump_json()


def test_a_pin_plans_to_itself_when_a_price_of_your_own_elsewhere_is_a_types_cheapest(tmp_path: Path) -> None:
    """A type known to the packaged lists only outside the plan's regions, priced lower by the user's own row in a
    third region: the pin must keep a packaged row of it, or the type stops being "not sold" in the plan's region."""
    from inferstack.spec import parse_workload

    rows = [row for row in catalog_module.PriceBook.load().rows if row["cloud"] == "alibaba"]
    listed_in = {region: {r["instance_type"] for r in rows if r["region"] == region}
                 for region in ("ap-southeast-1", "cn-qingdao")}
    elsewhere = sorted({r["instance_type"] for r in rows} - listed_in["ap-southeast-1"] - listed_in["cn-qingdao"])
    assert elsewhere
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"prices": [
        {"cloud": "alibaba", "region": "eu-west-1", "instance_type": name, "price_per_hour": 0.5, "currency": "USD",
         "source": "our contract", "date": "2026-11-01"} for name in elsewhere]}))
    workload = yaml.safe_load((REPO / "examples" / "workloads" / "chat-70b.yaml").read_text())
    spec = parse_workload({**workload, "placement": {"clouds": ["alibaba"], "regions": {"alibaba": ["cn-qingdao"]}}})
    planned, again = _pinned_round_trip(spec, "alibaba", prices)
    assert again == planned


def test_a_pin_of_spot_above_the_floor_in_two_regions_keeps_the_spot_prices_of_both() -> None:
    from inferstack.spec import parse_workload

    bert = yaml.safe_load((REPO / "examples" / "workloads" / "embeddings-bert.yaml").read_text())
    for regions in (["us-west-2", "eu-west-1"], ["eu-west-1", "us-west-2"]):
        spec = parse_workload({**bert, "stage": "production", "placement": {
            "device": "cpu", "spot": True, "clouds": ["aws"], "regions": {"aws": regions}}})
        planned, again = _pinned_round_trip(spec, "aws")
        assert again == planned and planned.count('"spot_hourly_per_instance":{') > 1

"""Plans pinned per stack: `inferstack pin` writes the plan next to the stack config, the program deploys it, and a
workload changed since is refused naming the command that re-plans."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from inferstack.cli import main
from inferstack.components.program import deploy, read_stack_config
from inferstack.diff import diff_workload_files, read_stack_workload
from inferstack.errors import InputError
from inferstack.pin import PinnedPlan, pin_stack, pinned_path, workload_sha256
from inferstack.sizing.planner import plan_workload

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
    assert set(pinned) == {"inferstack_version", "written_on", "workload_sha256", "report"}
    assert outcome["chosen"]["price"]["source_date"]  # what the price was, and when
    assert str(path) in capsys.readouterr().out


def test_the_program_deploys_the_pinned_plan_not_a_fresh_one(run: Any, project: Path) -> None:
    path, _ = pin_stack(_stack_file(project))
    pinned = json.loads(path.read_text())
    # A catalog update would change a fresh plan; the pinned one is what deploys. Shown by editing the pin's plan.
    chosen = pinned["report"]["clouds"][0]["chosen"]
    chosen["fleet"]["min_replicas"] = chosen["instance_count"] = chosen["instance_count"] + 1
    path.write_text(json.dumps(pinned))
    deployment = _deploy(run, project)
    assert deployment.plan.instance_count == chosen["instance_count"]


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
def test_every_stack_that_sizes_a_workload_has_a_pin_written_for_that_workload(stack_file: Path) -> None:
    pin = pinned_path(stack_file)
    assert pin.is_file(), f"pin the stack: inferstack pin stacks/{stack_file.name}"
    workload, _ = read_stack_workload(stack_file)
    pinned = PinnedPlan.model_validate_json(pin.read_text())
    assert pinned.workload_sha256 == workload_sha256(workload), f"re-pin: inferstack pin stacks/{stack_file.name}"


def test_the_aws_prod_stack_deploys_its_committed_pin(run: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(REPO)
    config = yaml.safe_load((REPO / "stacks" / "Pulumi.aws-prod.yaml").read_text())["config"]
    settings = run(lambda: read_stack_config(REPO), config=config, stack="aws-prod").value
    pinned = PinnedPlan.model_validate_json((REPO / "stacks" / "Pulumi.aws-prod.plan.json").read_text())
    assert settings.workload is None and settings.plan == pinned.chosen()


def test_a_price_change_alone_changes_no_deployment_and_the_diff_shows_it(run: Any, project: Path) -> None:
    # The pinned plan's server type becomes ten times dearer (a catalog or price update, nothing else).
    _, pinned = pin_stack(_stack_file(project))
    chosen = pinned.chosen()
    dearer = project / "prices.yaml"
    dearer.write_text(yaml.safe_dump({"prices": [{
        "cloud": "aws", "region": chosen.region, "instance_type": chosen.instance_type,
        "price_per_hour": 10 * chosen.price.hourly_per_instance.amount, "currency": "USD",
        "source": "a price update", "date": "2026-11-30"}]}))
    fresh = plan_workload(pinned.report.workload, clouds=["aws"], prices_file=dearer).outcome("aws").chosen
    assert fresh is not None and fresh.instance_type != chosen.instance_type  # re-planning would move

    def program() -> Any:
        return deploy(read_stack_config(project)).plan

    config = {**_config(project), "inferstack:pricesFile": str(dearer)}
    assert run(program, config=config, stack=STACK).value == chosen

    diff = diff_workload_files([_stack_file(project), _stack_file(project)], prices_file=dearer)
    assert not diff.changed and diff.workload_changes == []  # the workload did not change
    (drift,) = diff.catalog_changes  # the price alone did, since the pin
    assert drift.cloud == "aws" and chosen.instance_type in (drift.before or "")
    assert fresh.instance_type in (drift.after or "")
    assert "Re-planned today it would be" in (diff.pin or "")

"""A canary splits the fleet in two groups by its weight: each keeps the machine, serving settings and model files of
its version at full traffic, and is sized for its share; the weight is a strict whole percent."""

from __future__ import annotations

from typing import Any

import pytest

from inferstack.errors import InputError
from inferstack.sizing.planner import plan_workload
from inferstack.spec import parse_workload

BASE: dict[str, Any] = {"name": "chat", "model": "llama-3.1-8b", "precision": "bf16", "stage": "production",
                        "traffic": {"requests_per_s": 20}, "placement": {"clouds": ["aws"]}}
# What the canary changes: the precision (a model revision would slot in the same way, in canary.model).
CANARY = {"model": "llama-3.1-8b", "precision": "fp8"}
# What only the share may change in a group's plan; everything else is its template and must not move.
SIZED_BY_SHARE = {"instance_count", "replicas", "fleet", "price", "performance", "rationale", "canary", "warnings"}


def _chosen(**canary: Any) -> Any:
    workload = parse_workload({**BASE, "canary": {**CANARY, **canary}} if canary else BASE)
    plan = plan_workload(workload, clouds=["aws"]).outcome("aws").chosen
    assert plan is not None
    return plan


def _template(plan: Any) -> dict[str, Any]:
    return {key: value for key, value in plan.model_dump().items() if key not in SIZED_BY_SHARE}


def test_the_main_group_keeps_its_template_and_is_sized_for_the_rest_of_the_requests() -> None:
    alone, split = _chosen(), _chosen(weight=10)
    assert _template(split) == _template(alone)
    assert split.canary is not None and split.canary.weight == 10
    assert split.performance.load_requests_per_s == pytest.approx(alone.performance.load_requests_per_s * 0.9, 1e-3)
    assert split.fleet.min_replicas == split.replicas <= alone.replicas


def test_the_canary_group_runs_its_version_as_promoting_it_would_and_is_sized_for_its_share() -> None:
    split = _chosen(weight=10)
    promoted = plan_workload(parse_workload({**BASE, **CANARY}), clouds=["aws"]).outcome("aws").chosen
    canary = split.canary.plan
    assert _template(canary) == _template(promoted)
    assert canary.precision == "fp8" and canary.model.bucket_prefix == "models/llama-3.1-8b/fp8/"
    # production: one server carries 10 %, plus the stage's spare
    assert canary.replicas == canary.fleet.min_replicas == 2 < promoted.replicas
    assert canary.performance.load_requests_per_s == pytest.approx(promoted.performance.load_requests_per_s * 0.1,
                                                                   1e-3)
    assert canary.price.monthly.amount < promoted.price.monthly.amount
    assert "canary 10 %" in split.summary()


@pytest.mark.parametrize(("weight", "idle"), [(0, "canary"), (100, "main")])
def test_a_group_without_a_share_keeps_one_server_and_the_other_carries_everything(weight: int, idle: str) -> None:
    alone, split = _chosen(), _chosen(weight=weight)
    groups = {"main": split, "canary": split.canary.plan}
    busy = groups["main" if idle == "canary" else "canary"]
    assert groups[idle].replicas == groups[idle].fleet.max_replicas == 1
    assert busy.replicas >= 2
    if idle == "canary":
        assert split.replicas == alone.replicas and split.fleet == alone.fleet


@pytest.mark.parametrize("weight", [True, "10", 10.0, -1, 101])
def test_the_weight_is_a_whole_percent_refused_in_any_other_form(weight: Any) -> None:
    with pytest.raises(InputError) as caught:
        parse_workload({**BASE, "canary": {**CANARY, "weight": weight}})
    assert "canary.weight" in str(caught.value) and "whole number from 0 to 100" in str(caught.value)


def test_a_canary_that_changes_nothing_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        parse_workload({**BASE, "canary": {"model": "llama-3.1-8b", "precision": "bf16", "weight": 10}})
    assert "canary: its model, precision, engine and KV-cache type are all the workload's own" in str(caught.value)


def test_a_one_server_plan_has_no_load_balancer_to_split_and_says_so() -> None:
    workload = parse_workload({**BASE, "stage": "validation", "traffic": {"requests_per_s": 0.5},
                               "canary": {**CANARY, "weight": 10}})
    plan = plan_workload(workload, clouds=["aws"]).outcome("aws").chosen
    assert plan.fleet is None and plan.canary is None
    assert any(w.startswith("canary: this plan is one server") for w in plan.warnings)


def test_plan_output_and_the_plan_diff_show_the_canary() -> None:
    from inferstack.diff import diff_reports
    from inferstack.report import _plan_details

    base = plan_workload(parse_workload(BASE), clouds=["aws"])
    head = plan_workload(parse_workload({**BASE, "canary": {**CANARY, "weight": 10}}), clouds=["aws"])
    details = "\n".join(_plan_details(head))
    assert "canary: canary 10 %: llama-3.1-8b fp8" in details and "The canary group takes 10 %" in details
    (cloud,) = diff_reports(base, head).clouds
    changed = {change.field: change.after for change in cloud.changes}
    assert changed["canary.weight"] == 10 and changed["canary.plan.precision"] == "fp8"
    assert changed["canary.plan.instance_count"] == head.outcome("aws").chosen.canary.plan.instance_count


def test_a_canary_of_a_new_model_revision_runs_its_own_files_and_the_main_group_keeps_the_old_ones() -> None:
    """The issue's example: model {registry: llama-3.1-8b, revision: r1} with canary {model: {registry:
    llama-3.1-8b, revision: r2}, weight: 10}."""
    workload = parse_workload({**BASE, "model": {"registry": "llama-3.1-8b", "revision": "r1"},
                               "canary": {"model": {"registry": "llama-3.1-8b", "revision": "r2"}, "weight": 10}})
    split = plan_workload(workload, clouds=["aws"]).outcome("aws").chosen
    assert split is not None and split.canary is not None
    assert split.model.bucket_prefix == "models/llama-3.1-8b/bf16/r1/"
    assert split.canary.plan.model.bucket_prefix == "models/llama-3.1-8b/bf16/r2/"
    assert split.canary.plan.instance_type == split.instance_type  # same model and precision: the same machine

"""The fleet in the plan: when there is one, its floor and ceiling, the per-server target the autoscaler holds (the
most one server carries within the SLO, at most 80 % of its saturation and 2 % of arrivals waiting for a slot),
and the warm-up its health checks
and cooldowns wait for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inferstack.plan import DeploymentPlan
from inferstack.sizing import plan_workload
from inferstack.sizing.catalog import offers
from inferstack.sizing.coldstart import MIN_SCALE_IN_COOLDOWN_S
from inferstack.sizing.demand import demand_of
from inferstack.sizing.evaluate import Candidate, _LlmLoadModel, highest_feasible_rate, llm_replica
from inferstack.sizing.models import resolve
from inferstack.spec import Engine, Precision, WorkloadSpec, load_workload

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"


def chosen(spec: WorkloadSpec, cloud: str = "aws") -> DeploymentPlan:
    plan = plan_workload(spec, clouds=[cloud]).outcome(cloud).chosen  # type: ignore[list-item,arg-type]
    assert plan is not None
    return plan


def test_a_production_plan_is_a_fleet_from_its_replicas_to_twice_as_many() -> None:
    plan = chosen(load_workload(WORKLOADS / "chat-8b-public.yaml"))
    assert plan.stage == "production" and plan.replicas > 1
    assert plan.fleet is not None
    assert (plan.fleet.min_replicas, plan.fleet.max_replicas) == (plan.replicas, 2 * plan.replicas)
    assert any(line.startswith("Fleet: ") for line in plan.rationale)


def test_the_target_is_the_most_one_server_carries_within_the_slo_and_the_ceiling() -> None:
    spec = load_workload(WORKLOADS / "chat-8b-public.yaml")
    plan = chosen(spec)
    assert plan.fleet is not None
    target = plan.fleet.target_requests_per_s
    per_server_capacity = plan.performance.capacity_requests_per_s / plan.replicas
    serving = plan.replicas - 1  # production keeps one spare
    assert plan.performance.load_requests_per_s / serving <= target
    # Its 1000 ms TTFT target is loose for an 8B model on an L40S, and its 52 slots fill before 80 % of saturation:
    # the ceiling binds where 2 % of arrivals would wait for a slot.
    model, slots = load_model(spec, plan)
    assert target == pytest.approx(model.ceiling_rps(slots, per_server_capacity), rel=1e-3)
    assert target < 0.8 * per_server_capacity * 0.99


def test_the_rationale_names_the_slot_wait_limit_where_it_binds_below_the_utilization_cap() -> None:
    plan = chosen(load_workload(WORKLOADS / "chat-8b-public.yaml"))
    line = next(line for line in plan.rationale if " replica(s), each at " in line)
    limit = re.search(r"\(limit (\d+)%, where 2% of requests would wait for a slot\)", line)
    assert limit is not None and int(limit.group(1)) < 80, line
    roomy = chosen(load_workload(WORKLOADS / "chat-8b-public.yaml"), "gcp")  # A100s: the 80 % cap binds
    assert any("(limit 80%)" in line for line in roomy.rationale)


def test_a_tight_ttft_target_stops_the_per_server_target_where_the_ttft_would_be_missed() -> None:
    spec = load_workload(WORKLOADS / "chat-8b-public.yaml")
    spec = spec.model_copy(update={"slo": spec.slo.model_copy(update={"ttft_p95_ms": 95})})
    plan = chosen(spec, "gcp")  # two A100s per server: queueing, not the utilization cap, binds at 95 ms
    assert plan.fleet is not None
    target = plan.fleet.target_requests_per_s
    assert target < 0.8 * plan.performance.capacity_requests_per_s / plan.replicas * 0.99
    model, slots = load_model(spec, plan)
    # the plan rounds the target to 4 decimals; the TTFT steps where the concurrency does
    assert ttft_ms(model, slots, target - 1e-4) <= 95 < ttft_ms(model, slots, target * 1.01)


def load_model(spec: WorkloadSpec, plan: DeploymentPlan) -> tuple[_LlmLoadModel, int]:
    """The queueing model the planner sized `plan` with (its offer, engine and precision), and its batch slots."""
    demand = demand_of(spec, resolve(spec.model))
    offer = next(o for o in offers() if o.cloud == plan.cloud and o.name == plan.offer and o.region == plan.region)
    candidate = Candidate(offer, Engine(plan.serving.engine), Precision(plan.precision))
    assert plan.serving.max_num_seqs is not None
    return _LlmLoadModel(demand, llm_replica(demand, candidate)), plan.serving.max_num_seqs


def ttft_ms(model: _LlmLoadModel, slots: int, rate: float) -> float:
    return model.ttft_p95_s(model.concurrency_at(rate, slots), rate, slots) * 1e3


def test_one_validation_server_is_no_fleet_unless_the_workload_lets_it_grow() -> None:
    spec = load_workload(WORKLOADS / "chat-8b-public.yaml").model_copy(update={"stage": "validation"})
    single = chosen(spec.model_copy(update={"traffic": spec.traffic.model_copy(update={"concurrent_users": 2})}))
    assert single.replicas == 1 and single.fleet is None
    growing = chosen(single_spec := spec.model_copy(update={
        "traffic": spec.traffic.model_copy(update={"concurrent_users": 2}),
        "scaling": spec.scaling.model_copy(update={"max_replicas": 3})}))
    assert single_spec.scaling.max_replicas == 3
    assert growing.fleet is not None and (growing.fleet.min_replicas, growing.fleet.max_replicas) == (1, 3)


def test_a_ceiling_below_the_planned_replicas_fixes_the_fleet_and_says_so() -> None:
    spec = load_workload(WORKLOADS / "chat-8b-public.yaml")
    plan = chosen(spec.model_copy(update={"scaling": spec.scaling.model_copy(update={"max_replicas": 2})}))
    assert plan.fleet is not None and plan.fleet.max_replicas == plan.fleet.min_replicas == plan.replicas
    assert any("scaling.max_replicas (2) is below" in warning for warning in plan.warnings)


def test_health_checks_and_cooldowns_wait_for_the_cold_start() -> None:
    plan = chosen(load_workload(WORKLOADS / "chat-8b-public.yaml"))
    fleet = plan.fleet
    assert fleet is not None and plan.cold_start is not None
    assert plan.cold_start.total_s <= fleet.cold_start_s < plan.cold_start.total_s + 10
    assert fleet.health_check_grace_s >= 1.5 * fleet.cold_start_s
    assert fleet.scale_out_cooldown_s >= fleet.cold_start_s
    assert fleet.scale_in_cooldown_s >= max(MIN_SCALE_IN_COOLDOWN_S, 2 * fleet.cold_start_s)


def test_highest_feasible_rate_finds_the_edge() -> None:
    assert highest_feasible_rate(1.0, 10.0, lambda rate: rate <= 6.5) == pytest.approx(6.5, rel=1e-6)
    assert highest_feasible_rate(1.0, 10.0, lambda rate: True) == 10.0


def test_an_encoder_fleet_holds_a_request_rate_within_its_latency_target() -> None:
    spec = load_workload(WORKLOADS / "embeddings-bert.yaml").model_copy(update={"stage": "production"})
    plan = chosen(spec)
    assert plan.fleet is not None and plan.fleet.target_requests_per_s > 0
    assert plan.fleet.target_requests_per_s >= plan.performance.load_requests_per_s / max(plan.replicas - 1, 1)
    assert plan.fleet.target_requests_per_s <= 0.8 * plan.performance.capacity_requests_per_s / plan.replicas * 1.0001

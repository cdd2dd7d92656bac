"""A canary's sizing: the workload's main group and its canary group behind one load balancer, each for its share.

Both versions are first planned at full traffic, as each would run alone: the main version is the plan the workload
has without a canary, and the canary version is what promoting it deploys (same machine, serving settings and boot
script). Each group then keeps its plan's machine and is cut to its share of the requests: a group whose servers each
carry at most the load they carried in the full plan still meets the targets, so the servers the share needs are the
full plan's serving servers times the share, rounded up, plus the stage's spare (production: at least two). So adding,
reweighting or dropping a canary never changes the main group's template, only its size.

A group with no share (the canary at weight 0, the main group at weight 100) keeps one server and takes no requests:
the canary's stays up for inspection until `canary` is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from inferstack.plan import CanaryPlan, CloudOutcome, DeploymentPlan, Fleet, Money, Performance, PlanReport, Price
from inferstack.sizing.demand import STAGES
from inferstack.spec import WorkloadSpec

FULL_PERCENT = 100


def with_canary(report: PlanReport, plan_once: Callable[[WorkloadSpec], PlanReport]) -> PlanReport:
    """The report with each cloud's chosen plan split into its main and canary groups (the workload's `canary`).

    `plan_once` plans a workload (the planner's own pass, with the report's catalog and calibration). The canary version
    is planned on the cloud and in the region of each chosen plan; a cloud where it has no feasible
    deployment becomes infeasible, with the canary's reasons. Plans without a fleet are one server with no load
    balancer to weigh traffic: they keep their plan, with a warning.
    """
    spec = report.workload
    assert spec.canary is not None, "with_canary needs a workload with a canary"
    chosen = {o.cloud: o.chosen for o in report.clouds if o.chosen is not None and o.chosen.fleet is not None}
    canary_report = None
    if chosen:
        canary_spec = spec.canary_workload()
        placement = canary_spec.placement.model_copy(update={
            "clouds": list(chosen), "regions": {cloud: [plan.region] for cloud, plan in chosen.items()}})
        canary_report = plan_once(canary_spec.model_copy(update={"placement": placement}))
    outcomes = []
    for outcome in report.clouds:
        main = outcome.chosen
        if main is not None and main.fleet is None:
            warning = ("canary: this plan is one server, with no load balancer to weigh requests between two groups; "
                       "the canary is not deployed (a canary needs a fleet: stage production, or "
                       "scaling.max_replicas above 1)")
            outcomes.append(outcome.model_copy(update={"chosen": main.model_copy(
                update={"warnings": [*main.warnings, warning]})}))
            continue
        if main is None or canary_report is None:
            outcomes.append(outcome)
            continue
        canary_outcome = canary_report.outcome(outcome.cloud)
        outcomes.append(_split(outcome, canary_outcome, spec.canary.weight))
    ranked = sorted((o.chosen for o in outcomes if o.chosen and total_ranking_cost(o.chosen) is not None),
                    key=lambda p: total_ranking_cost(p) or 0.0)
    return report.model_copy(update={"clouds": outcomes, "best": ranked[0] if ranked else None})


def total_ranking_cost(plan: DeploymentPlan) -> float | None:
    """The monthly cost of both groups in the ranking currency; None when either price is unknown."""
    plans = [plan, plan.canary.plan] if plan.canary else [plan]
    amounts = [p.price.monthly_ranking.amount for p in plans if p.price.monthly_ranking is not None]
    return sum(amounts) if len(amounts) == len(plans) else None


def _split(outcome: CloudOutcome, canary_outcome: CloudOutcome, weight: int) -> CloudOutcome:
    main, canary = outcome.chosen, canary_outcome.chosen
    assert main is not None
    if canary is None:
        reasons = "; ".join(canary_outcome.blocked_by) or "no candidate fits"
        return outcome.model_copy(update={"chosen": None, "alternatives": [], "blocked_by": [
            f"the canary version has no feasible deployment in {main.region}: {reasons}"]})
    canary_group = share_of(canary, weight, role="canary")
    main_group = share_of(main, FULL_PERCENT - weight, role="main")
    return outcome.model_copy(update={"chosen": main_group.model_copy(update={
        "canary": CanaryPlan(weight=weight, plan=canary_group)})})


def share_of(plan: DeploymentPlan, percent: int, *, role: str) -> DeploymentPlan:
    """`plan` (sized for all the requests) cut to `percent` % of them, on the same machine (see the module's doc)."""
    rules = STAGES[plan.stage]
    serving_full = max(1, plan.replicas - rules.spare_replicas)
    share = percent / FULL_PERCENT
    if percent == 0:
        replicas = 1
        why = f"The {role} group takes no requests (weight {percent} %): one server, kept for inspection."
    else:
        serving = max(1, math.ceil(serving_full * share - 1e-9))
        replicas = rules.servers(serving)
        why = (f"The {role} group takes {percent} % of the requests: {serving} of the full plan's {serving_full} "
               f"serving server(s), each carrying no more than in the full plan, plus the {plan.stage} stage's "
               f"{rules.spare_replicas} spare: {replicas} server(s).")
    scale = replicas / plan.replicas
    fleet = plan.fleet
    assert fleet is not None, "only a fleet's plan is split"
    ceiling = replicas if percent == 0 else max(replicas, math.ceil(fleet.max_replicas * share))
    performance = plan.performance
    serving_now = max(1, replicas - rules.spare_replicas) if percent else 1
    per_replica_ratio = share * serving_full / serving_now
    return plan.model_copy(update={
        "instance_count": replicas * plan.nodes_per_replica,
        "replicas": replicas,
        "fleet": Fleet(**{**fleet.model_dump(), "min_replicas": replicas, "max_replicas": ceiling}),
        "price": _scaled_price(plan.price, scale, share),
        "performance": Performance(**{
            **performance.model_dump(),
            "capacity_requests_per_s": round(performance.capacity_requests_per_s * scale, 3),
            "load_requests_per_s": round(performance.load_requests_per_s * share, 3),
            "output_tokens_per_s": (None if performance.output_tokens_per_s is None
                                    else round(performance.output_tokens_per_s * share, 1)),
            "utilization": round(performance.utilization * per_replica_ratio, 3)}),
        "rationale": [*plan.rationale, why],
    })


def _scaled_price(price: Price, scale: float, share: float) -> Price:
    """Cost scales with the servers, the cost per token with servers over requests."""
    def times(money: Money | None, factor: float) -> Money | None:
        return None if money is None else Money(amount=money.amount * factor, currency=money.currency)

    per_token = times(price.per_million_output_tokens, scale / share) if share else None
    return price.model_copy(update={"monthly": times(price.monthly, scale),
                                    "monthly_ranking": times(price.monthly_ranking, scale),
                                    "per_million_output_tokens": per_token})

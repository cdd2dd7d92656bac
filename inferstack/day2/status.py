"""What the cloud says beside what the plan says: each group's floor and ceiling, the canary's weight, the price, and
the hours the servers running now have run this month. Cloud-neutral: the cloud modules fill the groups and the
load balancer, this module adds the rest and says where the two differ."""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from inferstack.day2.records import GroupStatus, LoadBalancerStatus, StatusReport
from inferstack.day2.stack import DeployedStack
from inferstack.plan import DeploymentPlan, Money

SECONDS_PER_HOUR = 3600
COST_INCLUDES = (
    "the servers running now, each from its launch (or the month's start, UTC) until now, at the plan's price per "
    "hour (the catalog's list price, on-demand or spot as planned). Left out: servers stopped or already gone this "
    "month (scaled in, replaced), disks, the load balancer, NAT, traffic, logs and the cache; your bill (the cloud's "
    "cost explorer) has them")


def assess(stack: DeployedStack, groups: list[GroupStatus], load_balancer: LoadBalancerStatus | None,
           now: datetime.datetime) -> StatusReport:
    """The status report of `stack`: the cloud's groups and load balancer, the plan's figures beside them."""
    plan = stack.plan
    month_start = now.astimezone(datetime.timezone.utc).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    priced = [_with_plan(group, _plan_of(plan, group), month_start, now) for group in groups]
    canary = plan.canary
    return StatusReport(
        stack=stack.stack, project=stack.project, cloud=stack.cloud, region=stack.region, checked_at=now,
        plan_source=stack.plan_source, plan_summary=plan.summary(), model=plan.model.name,
        model_revision=plan.model.revision, planned_canary_weight_percent=canary.weight if canary else None,
        monthly_cost=_added(p.price.monthly for p in (plan, *([canary.plan] if canary else []))),
        groups=priced, load_balancer=load_balancer,
        server_hours_this_month=round(sum(group.server_hours_this_month for group in priced), 2),
        cost_this_month=_added(group.cost_this_month for group in priced) if priced else None,
        cost_includes=COST_INCLUDES, notes=_differences(plan, priced, load_balancer))


def _plan_of(plan: DeploymentPlan, group: GroupStatus) -> DeploymentPlan | None:
    """The plan a group runs: the canary's for the canary group (None when the plan has no canary)."""
    if group.role != "canary":
        return plan
    return plan.canary.plan if plan.canary else None


def _with_plan(group: GroupStatus, plan: DeploymentPlan | None, month_start: datetime.datetime,
               now: datetime.datetime) -> GroupStatus:
    """`group` with its plan's floor, ceiling and price, and its servers' hours and cost this month."""
    hours = sum(max(0.0, (now - max(server.launched_at, month_start)).total_seconds()) / SECONDS_PER_HOUR
                for server in group.servers if server.billed)
    if plan is None:
        return group.model_copy(update={"server_hours_this_month": round(hours, 2)})
    hourly = plan.price.hourly_per_instance
    return group.model_copy(update={
        "planned_min": plan.fleet.min_replicas if plan.fleet else plan.instance_count,
        "planned_max": plan.fleet.max_replicas if plan.fleet else plan.instance_count,
        "hourly_price": hourly, "server_hours_this_month": round(hours, 2),
        "cost_this_month": Money(amount=round(hours * hourly.amount, 2), currency=hourly.currency) if hourly else None})


def _added(amounts: Iterable[Money | None]) -> Money | None:
    """The sum, or None when one is unknown or the currencies differ (figures in two currencies are never added)."""
    known = list(amounts)
    if not known or any(amount is None for amount in known):
        return None
    currencies = {amount.currency for amount in known if amount is not None}
    if len(currencies) != 1:
        return None
    return Money(amount=round(sum(amount.amount for amount in known if amount is not None), 2),
                 currency=currencies.pop())


def _differences(plan: DeploymentPlan, groups: list[GroupStatus],
                 load_balancer: LoadBalancerStatus | None) -> list[str]:
    """Where what runs differs from the plan, one sentence each."""
    notes = [note for group in groups for note in _group_differences(group)]
    roles = {group.role for group in groups}
    if plan.canary is not None and "canary" not in roles and plan.fleet is not None:
        notes.append(f"the plan has a canary ({plan.canary.weight} %), and no canary group was found: not deployed "
                     "yet (pulumi up)")
    if plan.canary is None and "canary" in roles:
        notes.append("a canary group runs that the plan does not have: promoted or rolled back in the workload, and "
                     "not yet deployed (pulumi up)")
    weight = load_balancer.canary_weight_percent if load_balancer else None
    if weight is not None and plan.canary is not None and weight != plan.canary.weight:
        notes.append(f"the load balancer sends {weight} % of requests to the canary, the plan {plan.canary.weight} %: "
                     "deploy the plan (pulumi up), or the weight was changed outside Pulumi")
    for target_group in load_balancer.targets if load_balancer else []:
        unhealthy = sum(count for state, count in target_group.states.items() if state != "healthy")
        if unhealthy:
            notes.append(f"{target_group.role}: {unhealthy} of the load balancer's {sum(target_group.states.values())} "
                         f"targets are not healthy: {'; '.join(target_group.problems)}")
    return notes


def _group_differences(group: GroupStatus) -> list[str]:
    notes = []
    planned = (group.planned_min, group.planned_max)
    if group.min_size is not None and None not in planned and (group.min_size, group.max_size) != planned:
        notes.append(f"{group.role}: the group's size is {group.min_size}..{group.max_size} servers, the plan's "
                     f"{planned[0]}..{planned[1]}: a `pulumi up` is pending, or it was changed outside Pulumi")
    if group.in_service < group.desired:
        notes.append(f"{group.role}: {group.in_service} of {group.desired} servers in service (others starting, "
                     "stopped or being replaced)")
    if group.healthy < group.in_service:
        notes.append(f"{group.role}: {group.in_service - group.healthy} server(s) in service are not healthy")
    if group.on_other_revision:
        notes.append(f"{group.role}: {group.on_other_revision} of {len(group.servers)} servers run another template "
                     f"version than the group's ({group.revision}): a rollout is under way, or stopped")
    return notes

"""Plan diffs for review: what a change to a workload file does to the deployment on each cloud.

`diff_reports(base, head)` compares two PlanReports (pure), `render_markdown(diff)` writes the pull-request
comment, and `diff_workload_files(...)` plans both sides: two files, or one file against its own path at a
git ref (`git show REF:path`). Both sides are planned with the same catalog and prices, so the diff shows
what the workload change alone does.

A quantity counts as changed when it reads differently at the precision shown (costs to the cent, latency to
the millisecond, memory to 0.1 GiB): the diff never reports noise a reader cannot see.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.errors import InputError, input_error
from inferstack.fields import flatten
from inferstack.git_ref import workload_at_ref
from inferstack.pin import PinnedPlan, check_pin, pinned_path, read_pin
from inferstack.plan import CloudOutcome, DeploymentPlan, Money, PlanReport, Price
from inferstack.sizing.calibration import (
    STACK_CALIBRATION_KEY,
    StackCalibration,
)
from inferstack.spec import WorkloadSpec
from inferstack.stack_file import (
    is_stack_file,
    read_stack_calibration_of,
    read_stack_workload,
    read_workload_file,
)

CloudStatus = Literal["unchanged", "changed", "became_infeasible", "became_feasible", "added", "removed"]
PinStatus = Literal["pinned", "not_pinned", "out_of_date", "refused"]
Scalar = str | int | float | None


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Change(_Frozen):
    """One quantity that reads differently in the head than in the base."""

    field: str = Field(description="Where the value lives: a DeploymentPlan path, or a workload spec path.")
    label: str = Field(description="What a reader calls it, with its unit.")
    before: JsonValue = Field(description="Base value (None: absent or unknown).")
    after: JsonValue = Field(description="Head value (None: absent or unknown).")
    delta: float | None = Field(default=None, description="after - before, for numbers in the same unit.")
    percent: float | None = Field(default=None, description="delta as a percentage of before (costs).")
    unit: str | None = Field(default=None, description="ms, GiB, %, or a currency code for money per month.")


class CloudDiff(_Frozen):
    """How one cloud's chosen deployment changed."""

    cloud: Cloud
    status: CloudStatus
    before: str | None = Field(description="The base deployment: instances, GPUs, region; None if none feasible.")
    after: str | None = Field(description="The head deployment: instances, GPUs, region; None if none feasible.")
    monthly_cost: Change = Field(description="Monthly cost in the ranking currency, base → head (None: unknown).")
    changes: list[Change] = Field(description="Every quantity that changed (cost included), in reading order.")
    warnings_added: list[str]
    warnings_cleared: list[str]
    blocked_before: list[str] = Field(description="Why nothing was feasible in the base (empty when feasible).")
    blocked_after: list[str] = Field(description="Why nothing is feasible in the head (empty when feasible).")
    rollout: str | None = Field(
        default=None, description="When the change replaces the running servers (a new model revision, or another "
        "server the plan builds): what changes, how many servers are replaced with what surge, and about how long it "
        "takes; None when the servers stay as they are.")


class BestDiff(_Frozen):
    """The cheapest priced deployment across all clouds, base → head."""

    before: str | None
    after: str | None
    monthly_cost: Change


class PlanDiff(_Frozen):
    """What `inferstack diff` returns: the workload changes and what they do to each cloud's deployment."""

    workload: str = Field(description="The head workload's name.")
    base_source: str = Field(description="Where the base came from: a file, or REF:path.")
    head_source: str
    currency: str = Field(description="Ranking currency of the head; base costs are converted to it if needed.")
    base_currency: str | None = Field(description="Ranking currency of the base (None: no base, a new file).")
    changed: bool = Field(description="True when any deployment, feasibility or the best overall changed.")
    workload_changes: list[Change]
    clouds: list[CloudDiff]
    best: BestDiff
    suggestions: list[str] = Field(description="Nearest feasible changes, when nothing is feasible in the head.")
    pin: str | None = Field(default=None, description="For a stack file: whether the head's plan is pinned "
                            "(inferstack pin), and what `pulumi up` will deploy, or why it refuses.")
    pin_status: PinStatus | None = Field(
        default=None, description="For a stack file: pinned (its pin is what `pulumi up` deploys), not_pinned, "
        "out_of_date (a stack input changed since the pin) or refused (the pin is not the plan its inputs give): "
        "`pulumi up` refuses the last two.")
    catalog_changes: list[CloudDiff] = Field(
        default_factory=list,
        description="For a pinned base: what today's catalog and prices change in the base workload's plan, "
        "apart from the workload change (base pin → the base re-planned today).",
    )
    catalog_pinned_on: str | None = Field(default=None, description="When the base's plan was pinned.")


# ---- what is compared, and how it reads ------------------------------------------------------------------


@dataclass(frozen=True)
class _Quantity:
    field: str
    label: str
    read: Callable[[DeploymentPlan], Scalar]
    unit: str | None = None
    decimals: int = 0


def _gpus(plan: DeploymentPlan) -> str:
    return f"{plan.accelerator.count}x {plan.accelerator.id}" if plan.accelerator else "none"


def capacity_mix(plan: DeploymentPlan) -> str:
    """What the servers run on: all on-demand, all spot, or an on-demand floor with spot above it and the types the
    group falls back on."""
    floor = plan.spot_above_floor
    if floor is not None:
        return (f"{floor.on_demand_base} on-demand + up to {floor.spot_above} spot "
                f"({', '.join(floor.instance_types)})")
    return "all spot" if plan.spot else "all on-demand"


def _percent(value: float | None) -> float | None:
    return None if value is None else value * 100


QUANTITIES: tuple[_Quantity, ...] = (
    _Quantity("region", "region", lambda p: p.region),
    _Quantity("offer", "instance type", lambda p: p.offer),
    _Quantity("instance_count", "instances", lambda p: p.instance_count),
    _Quantity("accelerator", "GPUs per instance", _gpus),
    _Quantity("zones", "zones", lambda p: p.zones),
    _Quantity("spot", "capacity (on-demand / spot)", lambda p: capacity_mix(p)),
    _Quantity("precision", "precision", lambda p: p.precision),
    _Quantity("tensor_parallel", "tensor parallel", lambda p: p.tensor_parallel),
    _Quantity("replica_nodes.nodes", "servers per replica", lambda p: p.nodes_per_replica),
    _Quantity("serving.max_model_len", "max sequence (tokens)", lambda p: p.serving.max_model_len),
    _Quantity("memory.weights_gib", "weights per device (GiB)", lambda p: p.memory.weights_gib, "GiB", 1),
    _Quantity(
        "memory.kv_cache_needed_gib",
        "KV cache needed per device (GiB)",
        lambda p: p.memory.kv_cache_needed_gib,
        "GiB",
        1,
    ),
    _Quantity("memory.total_gib", "memory needed per device (GiB)", lambda p: p.memory.total_gib, "GiB", 1),
    _Quantity("memory.usable_gib", "usable memory per device (GiB)", lambda p: p.memory.usable_gib, "GiB", 1),
    _Quantity("disk_gib", "disk (GiB)", lambda p: p.disk_gib, "GiB"),
    _Quantity("performance.ttft_p95_ms", "TTFT p95 (ms)", lambda p: p.performance.ttft_p95_ms, "ms"),
    _Quantity("performance.tpot_p95_ms", "TPOT p95 (ms)", lambda p: p.performance.tpot_p95_ms, "ms", 1),
    _Quantity("performance.latency_p95_ms", "latency p95 (ms)", lambda p: p.performance.latency_p95_ms, "ms"),
    _Quantity(
        "performance.output_tokens_per_s", "output tokens/s at peak", lambda p: p.performance.output_tokens_per_s
    ),
    _Quantity(
        "performance.capacity_requests_per_s",
        "capacity (requests/s)",
        lambda p: p.performance.capacity_requests_per_s,
        None,
        2,
    ),
    _Quantity("performance.utilization", "utilization at peak (%)", lambda p: _percent(p.performance.utilization), "%"),
    # How a new server starts (workload `startup`) and what follows from it (sizing/coldstart.py, sizing/startup.py)
    _Quantity("startup.image", "server image", lambda p: p.startup.image_id or p.startup.image),
    _Quantity("startup.runtime_caches", "runtime caches in the image", lambda p: p.startup.runtime_caches),
    _Quantity("startup.model_loading", "model loading", lambda p: p.startup.model_loading),
    _Quantity("cold_start.total_s", "cold start (s)", lambda p: p.cold_start.total_s if p.cold_start else None, "s"),
    _Quantity("startup.warm_pool.servers", "warm pool (stopped servers)",
              lambda p: p.startup.warm_pool.servers if p.startup.warm_pool else None),
    _Quantity("startup.warm_start.total_s", "start from the warm pool (s)",
              lambda p: p.startup.warm_start.total_s if p.startup.warm_start else None, "s"),
    _Quantity("fleet.scale_out_cooldown_s", "scale-out warm-up (s)",
              lambda p: p.fleet.scale_out_cooldown_s if p.fleet else None, "s"),
    _Quantity("startup.warm_pool.monthly_storage.amount", "warm pool disks per month",
              lambda p: p.startup.warm_pool.monthly_storage.amount
              if p.startup.warm_pool and p.startup.warm_pool.monthly_storage else None, None, 2),
    # The canary group (sizing/canary.py): the lines above are the main group's.
    _Quantity("canary.weight", "canary's share of requests (%)", lambda p: p.canary.weight if p.canary else None, "%"),
    _Quantity("canary.plan.model.name", "canary model", lambda p: p.canary.plan.model.name if p.canary else None),
    _Quantity("canary.plan.precision", "canary precision", lambda p: p.canary.plan.precision if p.canary else None),
    _Quantity("canary.plan.offer", "canary instance type", lambda p: p.canary.plan.offer if p.canary else None),
    _Quantity("canary.plan.instance_count", "canary instances",
              lambda p: p.canary.plan.instance_count if p.canary else None),
    _Quantity("canary.plan.price.monthly_ranking.amount", "canary cost per month",
              lambda p: p.canary.plan.price.monthly_ranking.amount
              if p.canary and p.canary.plan.price.monthly_ranking else None, None, 2),
)


def _shown(value: JsonValue, decimals: int = 0) -> str:
    """A value as the diff prints it; two values are equal for the diff when they print the same."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{decimals}f}"
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value) or "[]"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _spec_value(value: JsonValue) -> str:
    """A workload spec value as it is written in the file (no thousands separators)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return _shown(value)


def _brief(plan: DeploymentPlan | None) -> str | None:
    """One deployment in a table cell: instances, GPUs and region (cost has its own column)."""
    if plan is None:
        return None
    gpus = f" ({_gpus(plan)})" if plan.accelerator else ""
    return f"{plan.instance_count}x {plan.offer}{gpus}, {plan.region}"


def _change(quantity: _Quantity, before: DeploymentPlan, after: DeploymentPlan) -> Change | None:
    old, new = quantity.read(before), quantity.read(after)
    if _shown(old, quantity.decimals) == _shown(new, quantity.decimals):
        return None
    delta = None
    # of the shown values (the table adds up); a yes/no is not a number
    if isinstance(old, int | float) and isinstance(new, int | float) and not isinstance(old, bool) \
            and not isinstance(new, bool):
        delta = round(round(new, quantity.decimals) - round(old, quantity.decimals), quantity.decimals)
    return Change(field=quantity.field, label=quantity.label, before=old, after=new, delta=delta, unit=quantity.unit)


# ---- money -----------------------------------------------------------------------------------------------


def _convert(money: Money | None, currency: str, rates: dict[str, float]) -> Money | None:
    """`money` in `currency`, with `rates` (units of `currency` per unit of each listed currency)."""
    if money is None or money.currency == currency:
        return money
    rate = rates.get(money.currency)
    return None if rate is None else Money(amount=round(money.amount * rate, 2), currency=currency)


def _money(field: str, label: str, before: Money | None, after: Money | None) -> Change:
    """A money comparison (None: unknown); the delta only when both sides are known and in one currency."""
    old = None if before is None else round(before.amount, 2)
    new = None if after is None else round(after.amount, 2)
    delta = percent = None
    if before is not None and after is not None and before.currency == after.currency:
        delta = round(round(after.amount, 2) - round(before.amount, 2), 2)
        percent = round(delta / before.amount * 100, 1) if before.amount else None
    unit = after.currency if after else before.currency if before else None
    return Change(field=field, label=label, before=old, after=new, delta=delta, percent=percent, unit=unit)


@dataclass(frozen=True)
class _Currency:
    """The head's ranking currency and the rates that bring base figures into it."""

    code: str
    rates: dict[str, float]

    def monthly(self, before: DeploymentPlan | None, after: DeploymentPlan | None) -> Change:
        """Monthly cost in the ranking currency, base → head (None where unknown or infeasible)."""
        return _money(
            "price.monthly_ranking",
            f"cost per month ({self.code})",
            _convert(before.price.monthly_ranking, self.code, self.rates) if before else None,
            after.price.monthly_ranking if after else None,
        )

    def cost_changes(self, before: DeploymentPlan | None, after: DeploymentPlan | None) -> list[Change]:
        """Monthly cost (ranking), list price where the cloud bills in another currency, cost per M tokens."""
        old = before.price if before else None
        new = after.price if after else None
        monthly = self.monthly(before, after)
        per_token = _money(
            "price.per_million_output_tokens",
            f"per million output tokens ({self.code})",
            _convert(old.per_million_output_tokens, self.code, self.rates) if old else None,
            new.per_million_output_tokens if new else None,
        )
        changes = [monthly, _list_price(old, new, self.code), per_token]
        return [c for c in changes if c is not None and c.before != c.after]


def _list_price(old: Price | None, new: Price | None, ranking_currency: str) -> Change | None:
    """The monthly list price as the cloud bills it, when that is not the ranking currency."""
    before = old.monthly if old else None
    after = new.monthly if new else None
    currencies = {m.currency for m in (before, after) if m}
    if not currencies - {ranking_currency}:
        return None
    if len(currencies) == 1:
        return _money("price.monthly", f"list price per month ({currencies.pop()})", before, after)
    # billed in another currency than before (a region move): amounts in two currencies have no delta
    return Change(
        field="price.monthly",
        label="list price per month",
        before=str(before) if before else None,
        after=str(after) if after else None,
    )


# ---- comparing two reports ---------------------------------------------------------------------------------


def diff_reports(
    base: PlanReport | None,
    head: PlanReport,
    *,
    base_source: str = "base",
    head_source: str = "head",
) -> PlanDiff:
    """Compare two plan reports of one workload. `base` None means the workload is new (every cloud added)."""
    currency = _Currency(head.currency, head.exchange_rates)
    base_outcomes = {o.cloud: o for o in base.clouds} if base else {}
    head_outcomes = {o.cloud: o for o in head.clouds}
    clouds = [*head_outcomes, *(c for c in base_outcomes if c not in head_outcomes)]
    cloud_diffs = [_cloud_diff(c, base_outcomes.get(c), head_outcomes.get(c), currency) for c in clouds]
    best_before = base.best if base else None
    best = BestDiff(
        before=best_before.summary() if best_before else None,
        after=head.best.summary() if head.best else None,
        monthly_cost=currency.monthly(best_before, head.best),
    )
    best_changed = best.before != best.after or best.monthly_cost.before != best.monthly_cost.after
    return PlanDiff(
        workload=head.workload.name,
        base_source=base_source,
        head_source=head_source,
        currency=head.currency,
        base_currency=base.currency if base else None,
        changed=best_changed or any(d.status != "unchanged" for d in cloud_diffs),
        workload_changes=workload_changes(base.workload if base else None, head.workload),
        clouds=cloud_diffs,
        best=best,
        suggestions=head.suggestions if not any(o.chosen for o in head.clouds) else [],
    )


# What the servers are built from: a change to any of these is a new template (or server), so a rollout. The fleet's
# scaling numbers, prices and predictions are not. (A new bootstrap is a rollout too; it shows in the preview, not in
# a plan.)
SERVER_FIELDS = ("instance_type", "offer", "device", "accelerator", "tensor_parallel", "model", "precision",
                 "serving", "disk_gib", "spot", "spot_above_floor", "startup")
_SERVER_DUMP: dict[str, Any] = {**dict.fromkeys(SERVER_FIELDS, True),
                                # the group's capacity mix, not the spot prices and costs beside it
                                "spot_above_floor": {"on_demand_base", "spot_above", "instance_types"},
                                # the image the servers boot and how they load the weights (their template and boot),
                                # not the warm pool beside them
                                "startup": {"image", "image_id", "runtime_caches", "model_loading"}}


def rollout_text(before: DeploymentPlan, after: DeploymentPlan) -> str | None:
    """`Rollout: model revision r1 → r2, 4 servers replaced with surge 2, about 19 minutes`, or None when the
    servers stay as they are."""
    old, new = before.model_dump(include=_SERVER_DUMP), after.model_dump(include=_SERVER_DUMP)
    changed = [f for f in SERVER_FIELDS if old[f] != new[f]]
    if not changed:
        return None
    if before.model.revision != after.model.revision:
        what = f"model revision {before.model.revision or '(none)'} → {after.model.revision or '(none)'}"
    else:
        what = "server " + ", ".join(changed).replace("_", " ")
    rollout = after.rolling_update
    minutes = math.ceil(rollout.duration_s / 60)
    facts = CLOUD_FACTS[after.cloud]
    if rollout.strategy == "rolling" and not facts.rolling_update:
        return (f"Rollout: {what}; {facts.display_name} does not replace the {rollout.servers} running servers by "
                f"itself (docs/deploy-{after.cloud}.md, rolling-update): "
                + ("after pulumi up, `inferstack rollout STACK` replaces them" if facts.rollout_command else
                   "replace them by hand") + f" with surge {rollout.surge}, about {minutes} minutes")
    if rollout.strategy == "replace":
        return (f"Rollout: {what}, the one server replaced delete-first: the endpoint is down for about {minutes} "
                "minutes")
    return (f"Rollout: {what}, {rollout.servers} servers replaced with surge {rollout.surge}, about {minutes} "
            "minutes")


def _cloud_diff(cloud: Cloud, base: CloudOutcome | None, head: CloudOutcome | None, currency: _Currency) -> CloudDiff:
    before = base.chosen if base else None
    after = head.chosen if head else None
    changes = [c for q in QUANTITIES if (c := _change(q, before, after))] if before and after else []
    changes += currency.cost_changes(before, after)
    warnings_before = before.warnings if before else []
    warnings_after = after.warnings if after else []
    blocked_before = base.blocked_by if base else []
    blocked_after = head.blocked_by if head else []
    added = [w for w in warnings_after if w not in warnings_before]
    # the warnings of a deployment that no longer exists are not news: its blockers are
    cleared = [w for w in warnings_before if w not in warnings_after] if after or not before else []
    rollout = rollout_text(before, after) if before and after else None
    status: CloudStatus
    if base is None or head is None:
        status = "added" if base is None else "removed"
    elif before and not after:
        status = "became_infeasible"
    elif after and not before:
        status = "became_feasible"
    else:
        changed = changes or added or cleared or blocked_before != blocked_after or rollout
        status = "changed" if changed else "unchanged"
    return CloudDiff(
        cloud=cloud,
        status=status,
        before=_brief(before),
        after=_brief(after),
        monthly_cost=currency.monthly(before, after),
        changes=changes,
        warnings_added=added,
        warnings_cleared=cleared,
        blocked_before=blocked_before,
        blocked_after=blocked_after,
        rollout=rollout,
    )


def workload_changes(before: WorkloadSpec | None, after: WorkloadSpec) -> list[Change]:
    """The spec fields whose values differ (defaults included, so spelling out a default is no change)."""
    old = flatten(before.model_dump(mode="json")) if before else {}
    new = flatten(after.model_dump(mode="json"))
    return [Change(field=path, label=path, before=old.get(path), after=new.get(path),
                   delta=_number_delta(old, new, path))
            for path in [*new, *(p for p in old if p not in new)] if old.get(path) != new.get(path)]


def _number_delta(old: dict[str, JsonValue], new: dict[str, JsonValue], path: str) -> float | None:
    before, after = old.get(path), new.get(path)
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (before, after))
    return float(after) - float(before) if numbers else None  # type: ignore[arg-type]


# ---- markdown ----------------------------------------------------------------------------------------------

STATUS_TEXT: dict[CloudStatus, str] = {
    "unchanged": "no change",
    "changed": "changed",
    "became_infeasible": "**became infeasible**",
    "became_feasible": "**became feasible**",
    "added": "new",
    "removed": "removed",
}


def heading(workload: str, head_source: str) -> str:
    """The comment's first line: stable for a workload file, so a workflow can find and update the comment."""
    return f"### inferstack plan diff: `{workload}` (`{head_source}`)"


def render_markdown(diff: PlanDiff) -> str:
    """The diff as GitHub-flavoured markdown for a pull-request comment."""
    lines = [heading(diff.workload, diff.head_source), "", _sources_line(diff), ""]
    if diff.pin:
        lines += [diff.pin, ""]
    if diff.workload_changes:
        lines += ["**Workload changes**", "", "| field | base | head |", "|---|---|---|"]
        lines += [
            f"| `{c.field}` | {_cell(_spec_value(c.before))} | {_cell(_spec_value(c.after))} |"
            for c in diff.workload_changes
        ]
        lines.append("")
    if not diff.changed and diff.pin_status in ("out_of_date", "refused"):
        lines += ["**No change** to the workload's plan, but `pulumi up` refuses this stack's pin (above).", ""]
    elif not diff.changed:
        lines += [
            "**No change** to any deployment: every cloud plans the same instances, memory, latency and cost.",
            "",
        ]
    lines += [_best_line(diff), ""]
    if diff.changed:
        lines += _summary_table(diff)
        for cloud in diff.clouds:
            if cloud.status != "unchanged":
                lines += _cloud_section(cloud)
    lines += _bullets("Nearest feasible changes", diff.suggestions)
    if diff.catalog_changes:
        lines += [f"**Catalog and price changes** since the base was pinned ({diff.catalog_pinned_on}), apart from "
                  "the workload change: the base workload re-planned today", ""]
        for cloud in diff.catalog_changes:
            lines += _cloud_section(cloud)
    return "\n".join(lines).rstrip() + "\n"


def _sources_line(diff: PlanDiff) -> str:
    converted = (
        f" (base costs converted from {diff.base_currency} at the head's exchange rates)"
        if diff.base_currency and diff.base_currency != diff.currency
        else ""
    )
    base = (
        f"New workload (`{diff.base_source}` does not exist)"
        if diff.base_currency is None
        else f"Base `{diff.base_source}`"
    )
    return (
        f"{base} → head `{diff.head_source}`. Costs per month in {diff.currency}{converted}; "
        "both sides are planned with the same catalog and prices."
    )


def _best_line(diff: PlanDiff) -> str:
    best = diff.best
    cost = best.monthly_cost
    if best.before == best.after and cost.before == cost.after:
        return f"**Best overall**: {best.after or 'none feasible'} (unchanged)"
    text = f"**Best overall**: {best.before or 'none feasible'} → {best.after or 'none feasible'}"
    if cost.delta is not None and cost.delta != 0:
        text += f" ({_signed(cost.delta, 2)} {diff.currency}/month, {_signed_percent(cost)})"
    return text


def _summary_table(diff: PlanDiff) -> list[str]:
    lines = [f"| cloud | base | head | {diff.currency}/month | change |", "|---|---|---|---:|---|"]
    for cloud in diff.clouds:
        before = "–" if cloud.status == "added" else cloud.before or "none feasible"
        after = "–" if cloud.status == "removed" else cloud.after or "none feasible"
        lines.append(
            f"| {cloud.cloud} | {_cell(before)} | {_cell(after)} | {_cost_cell(cloud)} | {_status_cell(cloud)} |"
        )
    return [*lines, ""]


def _cost_cell(cloud: CloudDiff) -> str:
    """Base → head cost; 'unknown' for a deployment without a price, '–' where there is no deployment."""

    def text(value: JsonValue, plan: str | None) -> str:
        return _shown(value, 2) if value is not None else "unknown" if plan else "–"

    cost = cloud.monthly_cost
    after = text(cost.after, cloud.after)
    same = cost.before == cost.after and (cloud.before is None) == (cloud.after is None)
    return after if same else f"{text(cost.before, cloud.before)} → {after}"


def _status_cell(cloud: CloudDiff) -> str:
    cost = cloud.monthly_cost
    if cloud.status == "changed" and cost.delta:
        return f"{_signed(cost.delta, 2)} ({_signed_percent(cost)})"
    return STATUS_TEXT[cloud.status]


def _cloud_section(cloud: CloudDiff) -> list[str]:
    lines = [f"#### {cloud.cloud}: {STATUS_TEXT[cloud.status].strip('*')}", ""]
    if cloud.rollout:
        lines += [f"**{cloud.rollout}**", ""]
    if cloud.changes:
        lines += ["| | base | head | change |", "|---|---:|---:|---:|"]
        for change in cloud.changes:
            decimals = 2 if change.field.startswith("price.") else _decimals(change.field)
            lines.append(
                f"| {change.label} | {_cell(_shown(change.before, decimals))} | {_cell(_shown(change.after, decimals))}"
                f" | {_delta_text(change, decimals)} |"
            )
        lines.append("")
    lines += _bullets("New warnings", cloud.warnings_added)
    lines += _bullets("Cleared warnings", cloud.warnings_cleared)
    if cloud.status == "became_feasible" or (cloud.blocked_before and cloud.blocked_before != cloud.blocked_after):
        lines += _bullets("Was blocked by", cloud.blocked_before)
    lines += _bullets("Blocked by", cloud.blocked_after)
    return lines


def _decimals(field: str) -> int:
    return next((q.decimals for q in QUANTITIES if q.field == field), 0)


def _delta_text(change: Change, decimals: int) -> str:
    if change.delta is None:
        return ""
    text = _signed(change.delta, decimals)
    return f"{text} ({_signed_percent(change)})" if change.percent is not None else text


def _signed(value: float, decimals: int) -> str:
    return f"{value:+,.{decimals}f}"


def _signed_percent(change: Change) -> str:
    return "n/a" if change.percent is None else f"{change.percent:+,.1f}%"


def _bullets(title: str, items: Iterable[str]) -> list[str]:
    items = list(items)
    return [f"**{title}**", "", *(f"- {item}" for item in items), ""] if items else []


def _cell(text: str) -> str:
    """Table cells may not contain pipes or newlines."""
    return text.replace("|", "\\|").replace("\n", " ")


# ---- loading and planning both sides ---------------------------------------------------------------------


def diff_workload_files(
    workloads: Sequence[Path],
    *,
    base_ref: str | None = None,
    clouds: Iterable[Cloud] | None = None,
    prices_file: Path | None = None,
) -> PlanDiff:
    """`inferstack diff`: BASE HEAD, or HEAD alone with `base_ref` (HEAD's own path at that git commit).

    Each file is a workload file, or a Pulumi stack file whose workload is inline (`inferstack:workload`).
    """
    from inferstack.sizing.planner import plan_workload

    expected = 1 if base_ref else 2
    if len(workloads) != expected:
        raise input_error(
            "WORKLOAD",
            f"expects {'one file with --base-ref' if base_ref else 'two files, BASE and HEAD'}",
            value=[str(w) for w in workloads],
            fix="inferstack diff BASE.yaml HEAD.yaml, or inferstack diff --base-ref origin/main HEAD.yaml",
        )
    head_path = Path(workloads[-1])
    cloud_list = list(clouds) if clouds else None
    head_measured = read_stack_calibration_of(head_path) if is_stack_file(head_path) else None
    head = plan_workload(read_workload_file(head_path), clouds=cloud_list, prices_file=prices_file,
                         calibration=head_measured.calibration if head_measured else None)
    base: PlanReport | None
    if base_ref is None:
        base_path = Path(workloads[0])
        base_measured = read_stack_calibration_of(base_path) if is_stack_file(base_path) else None
        base = plan_workload(read_workload_file(base_path), clouds=cloud_list, prices_file=prices_file,
                             calibration=base_measured.calibration if base_measured else None)
        base_pin = _pin_text(base_path)
        diff = diff_reports(base, head, base_source=str(base_path), head_source=str(head_path))
    else:
        at_ref = workload_at_ref(base_ref, head_path)
        base_measured = at_ref.calibration() if at_ref.text is not None else None
        base = at_ref.plan(cloud_list, prices_file, base_measured) if at_ref.text is not None else None
        base_pin = at_ref.pin_text()
        diff = diff_reports(base, head, base_source=at_ref.source, head_source=str(head_path))
    diff = _with_calibration_change(diff, base_measured, head_measured)
    if not is_stack_file(head_path):
        return diff
    return _with_pins(diff, base, head, head_path, base_pin, _sha(base_measured), head_measured)


def _sha(measured: StackCalibration | None) -> str | None:
    return measured.sha256 if measured else None


def _with_calibration_change(diff: PlanDiff, base: StackCalibration | None, head: StackCalibration | None) -> PlanDiff:
    """A stack's calibration file (inferstack:calibrationFile) that changed is listed with the workload changes: the
    plan changes it causes are measured speeds replacing the model's (or other measurements)."""
    if _sha(base) == _sha(head):
        return diff

    def shown(measured: StackCalibration | None) -> str | None:
        return f"{measured.calibration.source} (sha256 {measured.sha256[:12]})" if measured else None

    change = Change(field=STACK_CALIBRATION_KEY, label="calibration file", before=shown(base), after=shown(head))
    return diff.model_copy(update={"workload_changes": [*diff.workload_changes, change]})


# ---- pinned plans (stack files) ----------------------------------------------------------------------------


def _pin_text(stack_file: Path) -> str | None:
    path = pinned_path(stack_file)
    return path.read_text(encoding="utf-8") if is_stack_file(stack_file) and path.is_file() else None


def _matching_pin(text: str | None, report: PlanReport | None,
                  calibration_sha256: str | None = None) -> PinnedPlan | None:
    """The pin in `text` when it was written for the workload `report` plans, with that calibration file (else
    None: absent, unreadable or out of date)."""
    if text is None or report is None:
        return None
    try:
        pinned = PinnedPlan.model_validate_json(text)
    except ValidationError:
        return None
    return pinned if pinned.written_for(report.workload, calibration_sha256) else None


def _with_pins(diff: PlanDiff, base: PlanReport | None, head: PlanReport, head_path: Path,
               base_pin: str | None, base_calibration: str | None = None,
               head_measured: StackCalibration | None = None) -> PlanDiff:
    """The diff of two stack files, with what their pins add: what `pulumi up` deploys for the head (or why it
    refuses), and what the catalog and prices alone changed since the base was pinned (the diff itself compares both
    workloads planned today, so it shows the workload change alone)."""
    status, note = _pin_note(head, head_path, head_measured)
    update: dict[str, object] = {"pin": note, "pin_status": status}
    pinned_base = _matching_pin(base_pin, base, base_calibration)
    if pinned_base is not None and base is not None:
        drift = diff_reports(pinned_base.report, base).clouds
        update["catalog_changes"] = [cloud for cloud in drift if cloud.status != "unchanged"]
        update["catalog_pinned_on"] = pinned_base.written_on.isoformat()
    return diff.model_copy(update=update)


def _pin_note(head: PlanReport, head_path: Path, measured: StackCalibration | None = None) -> tuple[PinStatus, str]:
    """What `pulumi up` does with the head stack's pin: the program's own check (`pin.check_pin`), so the review and
    the deployment never disagree."""
    path = pinned_path(head_path)
    command = f"`inferstack pin {head_path}`"
    if not path.is_file():
        return "not_pinned", (f"**Not pinned**: `pulumi up` sizes this stack with the catalog and prices of the day it "
                              f"runs; pin the plan with {command} and commit {path.name}.")
    workload, prices_file = read_stack_workload(head_path)
    try:
        pinned = read_pin(path, stack_file=str(head_path))
        deployed = check_pin(pinned, workload, pin_name=path.name, stack_file=str(head_path), calibration=measured,
                             prices_file=prices_file).summary()
    except InputError as refusal:
        changed = [p.field for p in refusal.problems if p.field.startswith("inferstack:")]  # a stack input changed
        if changed:
            return "out_of_date", (f"**Pin out of date**: {', '.join(changed)} changed since {path.name} was written, "
                                   f"so `pulumi up` refuses this stack until {command} is run and {path.name} "
                                   "committed.")
        reasons = "; ".join(f"{p.field}: {p.message}" for p in refusal.problems)
        return "refused", (f"**Pin refused**: `pulumi up` refuses this stack until {command} is run and {path.name} "
                           f"committed. {_cell(reasons)}")
    fresh = next((o.chosen for o in head.clouds if o.chosen is not None), None)
    note = f"**Pinned** in {path.name} ({pinned.written_on}): `pulumi up` deploys {deployed}."
    if fresh is not None and fresh.summary() != deployed:
        note += f" Re-planned today it would be {fresh.summary()}: run {command} to take that."
    return "pinned", note

"""Nearest feasible changes: when nothing fits, which one-step change to the workload would make it fit.

Each change is a small edit of the spec (a lower precision, a looser latency target, more clouds or
accelerators, no budget cap, a shorter context); the planner runs on each, and the feasible ones are
reported cheapest first with the deployment they would get.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from inferstack.clouds import Cloud
from inferstack.errors import InputError
from inferstack.plan import PlanReport
from inferstack.sizing.models import resolve
from inferstack.spec import CLOUDS, Precision, WorkloadSpec

MAX_SUGGESTIONS = 4
Change = tuple[str, Callable[[WorkloadSpec], dict[str, Any] | None]]


def _update(spec: WorkloadSpec, section: str, **fields: Any) -> dict[str, Any]:
    return {section: getattr(spec, section).model_copy(update=fields)}


def _slo_times(factor: float) -> Callable[[WorkloadSpec], dict[str, Any] | None]:
    def change(spec: WorkloadSpec) -> dict[str, Any] | None:
        slo = spec.slo
        fields = {
            k: getattr(slo, k) * factor
            for k in ("ttft_p95_ms", "tpot_p95_ms", "latency_p95_ms")
            if getattr(slo, k) is not None
        }
        if not fields:  # defaults apply: state them explicitly, relaxed (token targets only for LLMs)
            fields = {"latency_p95_ms": 1000.0 * factor}
            if resolve(spec.model).is_llm:
                fields |= {"ttft_p95_ms": 2000.0 * factor, "tpot_p95_ms": 100.0 * factor}
        return {"slo": slo.model_copy(update=fields)}

    return change


CHANGES: list[Change] = [
    (
        "precision int4-awq",
        lambda s: (
            None
            if s.precision in (Precision.INT4_AWQ, Precision.INT4_GPTQ, Precision.Q4_K_M, Precision.Q4_0)
            else {"precision": Precision.INT4_AWQ}
        ),
    ),
    (
        "precision fp8",
        lambda s: (
            None
            if s.precision in (Precision.FP8, Precision.INT4_AWQ, Precision.INT4_GPTQ)
            else {"precision": Precision.FP8}
        ),
    ),
    *((f"latency targets x{factor:g}", _slo_times(factor)) for factor in (1.5, 2, 3, 5, 10, 20, 50)),
    (
        "any accelerator",
        lambda s: (
            _update(s, "placement", gpus_allow=[], gpus_deny=[])
            if s.placement.gpus_allow or s.placement.gpus_deny
            else None
        ),
    ),
    ("CPU or GPU", lambda s: _update(s, "placement", device="auto") if s.placement.device != "auto" else None),
    (
        "all four clouds",
        lambda s: (
            _update(s, "placement", clouds=list(CLOUDS), regions={}) if len(s.placement.clouds) < len(CLOUDS) else None
        ),
    ),
    (
        "no monthly budget",
        lambda s: _update(s, "placement", monthly_budget=None) if s.placement.monthly_budget else None,
    ),
    (
        "context 8192 tokens",
        lambda s: _update(s, "traffic", context_tokens=8192) if s.traffic.max_sequence_tokens > 8192 else None,
    ),
]


def nearest_feasible_changes(spec: WorkloadSpec, clouds: Iterable[Cloud],
                             plan_once: Callable[[WorkloadSpec, list[Cloud]], PlanReport]) -> list[str]:
    """Feasible one-step changes, cheapest first: 'with precision int4-awq: 1x g6.xlarge on aws, 587.50 USD/month'.
    `plan_once(workload, clouds)` plans a changed workload (the planner's own pass, its region and catalog)."""
    clouds = list(clouds)
    found: list[tuple[float, str]] = []
    relaxed_latency = False
    for label, change in CHANGES:
        if relaxed_latency and label.startswith("latency targets"):
            continue  # the smallest factor that works is the nearest change
        update = change(spec)
        if update is None:
            continue
        changed = spec.model_copy(update=update)
        target_clouds = list(changed.placement.clouds) if label == "all four clouds" else clouds
        try:
            report = plan_once(changed, target_clouds)
        except InputError:
            continue
        feasible = [o.chosen for o in report.clouds if o.chosen]
        if not feasible:
            continue
        relaxed_latency = relaxed_latency or label.startswith("latency targets")
        best = report.best or feasible[0]
        cost = best.price.monthly_ranking.amount if best.price.monthly_ranking else float("inf")
        found.append((cost, f"with {label}: {best.summary()}"))
    found.sort(key=lambda item: item[0])
    return [line for _, line in found[:MAX_SUGGESTIONS]] or [
        "no single change makes it feasible: consider a smaller model, fewer users, or a looser target"
    ]

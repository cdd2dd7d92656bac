"""Rendering for people: plan reports, estimates and listings as rich tables (imported only for table output)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from inferstack.plan import DeploymentPlan, PlanReport
from inferstack.sizing.estimate import Estimate

console = Console(highlight=False)


def _cost(plan: DeploymentPlan) -> str:
    """The monthly cost in the report's currency (a warning under the table says when it was converted)."""
    price = plan.price
    if price.monthly is None:
        return "unknown"
    if price.monthly_ranking is None:
        return f"{price.monthly} (no exchange rate)"
    return str(price.monthly_ranking) + (" *" if price.substitute else "")


def _price_basis(plan: DeploymentPlan) -> str:
    """The price's date and region, and its flags in capitals: what a reader checks before trusting the cost."""
    price = plan.price
    if price.monthly is None:
        return "–"
    age = f" ({price.age_days // 30} months)" if price.age_days is not None else ""
    parts = [f"{price.source_date}{age}" + (" STALE" if "stale" in price.flags else "")]
    if "undated" in price.flags:
        parts = ["UNDATED"]
    if "borrowed" in price.flags:
        parts.append(f"BORROWED from {price.priced_region}")
    return "\n".join(parts)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f} ms"


def _plan_column(plan: DeploymentPlan | None) -> list[str]:
    if plan is None:
        return ["[red]none feasible[/red]"] + [""] * (len(PLAN_ROWS) - 1)
    gpus = f"{plan.accelerator.count}x {plan.accelerator.id}" if plan.accelerator else "–"
    memory, performance = plan.memory, plan.performance
    per_m = plan.price.per_million_output_tokens
    return [
        f"{plan.instance_count}x {plan.offer}",
        plan.region,
        plan.device.upper(),
        gpus,
        str(plan.tensor_parallel),
        f"{plan.replicas} in {plan.zones} zone(s)",
        f"{memory.weights_gib:.1f} + {memory.overhead_gib:.1f} + {memory.kv_cache_needed_gib:.1f}"
        f" / {memory.usable_gib:.1f}",
        _ms(performance.ttft_p95_ms),
        _ms(performance.tpot_p95_ms),
        _ms(performance.latency_p95_ms),
        "n/a" if performance.output_tokens_per_s is None else f"{performance.output_tokens_per_s:,.0f}",
        f"{performance.capacity_requests_per_s:,.2f}",
        _cost(plan),
        _price_basis(plan),
        "n/a" if performance.output_tokens_per_s is None else str(per_m) if per_m else "–",
        f"{1 - performance.utilization:.0%}",
        _cold_start(plan),
        _fleet(plan),
    ]


def _cold_start(plan: DeploymentPlan) -> str:
    """Total and the two longest phases (the whole breakdown is in the rationale and the JSON)."""
    if plan.cold_start is None:
        return "–"
    longest = sorted(plan.cold_start.phases, key=lambda p: p.seconds, reverse=True)[:2]
    return (f"{plan.cold_start.total_s / 60:.1f} min ("
            + ", ".join(f"{p.phase} {p.seconds} s" for p in longest if p.seconds) + ")")


def _fleet(plan: DeploymentPlan) -> str:
    fleet = plan.fleet
    if fleet is None:
        return "one server"
    return (f"{fleet.min_replicas}–{fleet.max_replicas} at {fleet.target_requests_per_s:.3g} req/s each, "
            f"warm-up {fleet.cold_start_s // 60} min")


PLAN_ROWS = [
    "instances",
    "region",
    "device",
    "GPUs per instance",
    "tensor parallel",
    "replicas",
    "GiB per device: weights + overhead + KV / usable",
    "TTFT p95",
    "TPOT p95",
    "latency p95",
    "output tokens/s at peak",
    "capacity, requests/s",
    "cost per month",
    "price as of",
    "per M output tokens",
    "headroom at peak",
    "cold start (longest phases)",
    "fleet (autoscaled, behind HTTPS)",
]


def print_plan_report(report: PlanReport) -> None:
    spec = report.workload
    console.print(
        f"[bold]Plan for {spec.name}[/bold]: {spec.model_name}, stage {spec.stage}, ranking currency {report.currency}"
    )
    table = Table(
        "", *(o.cloud for o in report.clouds), show_lines=False, title="Cheapest feasible deployment per cloud"
    )
    columns = [_plan_column(o.chosen) for o in report.clouds]
    for index, label in enumerate(PLAN_ROWS):
        table.add_row(label, *(column[index] for column in columns))
    console.print(table)
    console.out("\n".join(_plan_details(report)), highlight=False)


def _plan_details(report: PlanReport) -> list[str]:
    """The reasons, warnings and alternatives under the table: plain lines (no markup to parse)."""
    lines = []
    for outcome in report.clouds:
        lines.append(f"\n{outcome.cloud} ({outcome.candidates_checked} offers checked)")
        if outcome.chosen is None:
            lines.append("  blocked by:")
            lines += [f"   - {reason}" for reason in outcome.blocked_by]
            continue
        lines += [f"  • {line}" for line in outcome.chosen.rationale]
        lines += [f"  ! {warning}" for warning in outcome.chosen.warnings]
        if outcome.alternatives:
            lines.append("  alternatives: " + "; ".join(a.summary() for a in outcome.alternatives))
    lines.append(
        f"\nBest overall: {report.best.summary()}" if report.best else "\nNo feasible deployment with a known price."
    )
    lines += [f"  {line}" for line in _passed_over(report)]
    budget_line = report.over_budget_message()
    if budget_line:
        lines.append(f"  {budget_line}")
    lines += [f"  → {suggestion}" for suggestion in report.suggestions]
    lines += [f"  assumed: {assumption}" for assumption in report.assumptions]
    lines.append(
        f"  all costs in {report.currency}; exchange rates: {report.exchange_rates_source}; "
        "* = price from another region; STALE = price over a year old; doubtful prices lose ties within 5 %"
    )
    return lines


def _passed_over(report: PlanReport) -> list[str]:
    """Cheaper per-cloud choices that lost "best overall" because their price is doubtful, and why."""
    best = report.best
    if best is None or best.price.monthly_ranking is None:
        return []
    lines = []
    for outcome in report.clouds:
        plan = outcome.chosen
        if plan is None or plan.price.monthly_ranking is None or plan is best:
            continue
        cheaper = 1 - plan.price.monthly_ranking.amount / best.price.monthly_ranking.amount
        if cheaper > 0:
            lines.append(
                f"not {plan.summary()}: {cheaper:.1%} cheaper, but its price is {', '.join(plan.price.flags)} "
                f"(source {plan.price.source_date}, {plan.price.priced_region}); doubtful prices lose ties within 5 %"
            )
    return lines


def print_simulated(simulated: dict[str, dict[str, float]]) -> None:
    """The chosen plans' predicted p95 latencies beside one simulated replica at the planned rate."""
    if not simulated:
        console.out("\nNothing to simulate: no chosen LLM plan.", highlight=False)
        return
    table = Table(
        "cloud",
        "req/s per replica",
        "TTFT p95 ms",
        "TPOT p95 ms",
        "end-to-end p95 ms",
        title="Predicted / simulated (one replica, discrete-event, seeded)",
    )
    for cloud, figures in simulated.items():
        table.add_row(
            cloud,
            f"{figures['requests_per_s_per_replica']:g}",
            *(
                f"{figures['predicted_' + metric]:,.0f} / {figures[metric]:,.0f} "
                f"({(figures['predicted_' + metric] - figures[metric]) / figures[metric]:+.0%})"
                for metric in ("ttft_p95_ms", "tpot_p95_ms", "latency_p95_ms")
            ),
        )
    console.print(table)


def print_estimate(result: Estimate) -> None:
    table = Table(
        "quantity",
        "value",
        title=f"{result.model} on {result.hardware} ({result.precision}, "
        f"{result.engine}, concurrency {result.concurrency})",
    )
    for key, value in result.model_dump().items():
        if key in ("model", "hardware", "notes"):
            continue
        table.add_row(key, _estimate_value(key, value, unknown=_unknown_without_memory(result)))
    console.print(table)
    for note in result.notes:
        console.print(f"  note: {note}", markup=False)


def _unknown_without_memory(result: Estimate) -> set[str]:
    """Fields that are None because no memory size was given (unknown), not because they do not apply (n/a)."""
    if result.capacity_gib is not None:
        return set()
    fields = {"capacity_gib", "fits", "max_concurrency"}
    return fields if result.items_per_s is not None else fields | {"kv_cache_capacity_tokens"}


def _estimate_value(key: str, value: Any, *, unknown: set[str]) -> str:
    if value is None:
        return "unknown (no memory size)" if key in unknown else "n/a"
    return f"{value:,.3f}" if isinstance(value, float) else str(value)


def print_rows(title: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        console.print(f"{title}: none")
        return
    table = Table(*rows[0].keys(), title=title)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row.values()))
    console.print(table)


def models_rows() -> list[dict[str, Any]]:
    from inferstack.sizing.models import lookup, registry

    rows = []
    for name in registry():
        model = lookup(name)
        rows.append(
            {
                "name": name,
                "kind": model.kind,
                "display_name": model.display_name,
                "params_b": round(model.params / 1e9, 3),
                "source": model.source,
            }
        )
    return rows


def gpus_rows() -> list[dict[str, Any]]:
    from inferstack.sizing.hardware import gpu_specs

    return [
        {
            "id": g.id,
            "name": g.name,
            "memory_gb": g.memory_gb,
            "visible_gib": round(g.visible_memory_gib, 2),  # what CUDA can allocate (estimated: no nvidia-smi reading)
            "compute_capability": g.compute_capability,
            "bandwidth_gbps": g.memory_bandwidth_gbps,
            "fp16_tflops": g.fp16_tflops,
            "fp8_tflops": g.fp8_tflops,
            "int8_tops": g.int8_tops,
            "gpu_link_gbps": g.link_gbps,
            "source": g.source,
        }
        for g in gpu_specs().values()
    ]


def catalog_rows(clouds: list[str] | None, prices_file: Path | None) -> list[dict[str, Any]]:
    from inferstack.sizing.catalog import PriceBook, offers

    book = PriceBook.load(prices_file)
    rows = []
    for offer in offers():
        if clouds and offer.cloud not in clouds:
            continue
        found = book.lookup(offer.cloud, offer.region, offer.name)
        price = found[0] if found else None
        rows.append(
            {
                "cloud": offer.cloud,
                "region": offer.region,
                "instance_type": offer.name,
                "vcpus": offer.vcpus,
                "memory_gib": offer.memory_gib,
                "gpus": f"{offer.gpu_count}x {offer.gpu_model}" if offer.gpu_count else "",
                "price_per_hour": f"{price.amount_per_hour:g} {price.currency}" if price else None,
                "priced_region": price.region if price else None,
                "price_date": price.source_date if price else None,
                "spec_source": offer.spec_source,
            }
        )
    return rows


def print_preview(result: Any) -> None:
    console.out(result.render_tree(), highlight=False)

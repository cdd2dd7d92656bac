"""Rendering for people: plan reports, estimates and listings as rich tables (imported only for table output)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from inferstack.errors import input_error
from inferstack.plan import UNPRICED_CACHE, DeploymentPlan, MemoryBreakdown, PlanReport
from inferstack.sizing.estimate import Estimate
from inferstack.spec import CLOUDS

if TYPE_CHECKING:
    from inferstack.sizing.catalog import Offer

console = Console(highlight=False)


# ---- tables that fit the terminal ----------------------------------------------------------------------

# Every table wraps between words only and is given column widths that fit the terminal (COLUMNS, else its
# size, else 80), so an id a user must type (an instance type, a GPU id) is never cut with an ellipsis: rich's
# own layout shrinks the widest columns first, ids included.

Cell = str | Text
LISTING_STYLE: dict[str, Any] = {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False}


@dataclass(frozen=True)
class Column:
    """One column of a listing: the row key it shows and how it gives way on a narrow terminal."""

    key: str
    header: str
    whole: bool = False
    """An id a user types: widened to its longest line before other columns grow."""
    optional: bool = False
    """Left out (the last optional column first) when the table would not fit otherwise."""
    justify: Literal["left", "right"] = "left"


def _longest_word(cell: Cell) -> int:
    return max((cell_len(word) for word in str(cell).split()), default=0)


def _longest_line(cell: Cell) -> int:
    return max((cell_len(line) for line in str(cell).split("\n")), default=0)


def fitted_widths(columns: Sequence[Sequence[Cell]], whole: Sequence[bool], available: int) -> list[int] | None:
    """Content widths for `columns` (each its header and cells) within `available` terminal cells, or None when
    even their longest words do not fit side by side. Each column gets at least its longest word; whole columns
    then grow to their longest line, leftmost (the id) first, while there is room; then the others: a column that
    lacks no more than an equal share gets its longest line, and the rest share what is left in proportion."""
    least = [max(map(_longest_word, cells)) for cells in columns]
    most = [max(map(_longest_line, cells)) for cells in columns]
    spare = available - sum(least)
    if spare < 0:
        return None
    widths = list(least)
    for group, greedy in (([i for i, w in enumerate(whole) if w], True), ([i for i, w in enumerate(whole) if not w],
                                                                          False)):
        pending = group if greedy else sorted(group, key=lambda i: most[i] - least[i])
        while pending and most[pending[0]] - least[pending[0]] <= spare // (1 if greedy else len(pending)):
            satisfied = pending.pop(0)
            spare -= most[satisfied] - least[satisfied]
            widths[satisfied] = most[satisfied]
        lacking = sum(most[i] - least[i] for i in pending)
        for i in pending:
            widths[i] += (most[i] - least[i]) * spare // lacking
        spare -= sum(widths[i] - least[i] for i in pending)
    return widths


def _overhead(column_count: int, style: dict[str, Any]) -> int:
    """Terminal cells a table of this style spends on borders and padding."""
    probe = Table(*["x"] * column_count, **style)
    probe.add_row(*["x"] * column_count)
    return console.measure(probe).maximum - column_count


def fitted_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[Cell]],
                 style: dict[str, Any]) -> tuple[Table, list[Column]]:
    """A table whose columns fit the terminal, and the optional columns left out to make them fit."""
    shown = list(range(len(columns)))
    optional = [i for i, column in enumerate(columns) if column.optional]
    while (widths := _layout([columns[i] for i in shown], [[row[i] for i in shown] for row in rows], style)) is None:
        if not optional:
            break
        shown.remove(optional.pop())
    table = Table(title=title, **style)
    for n, i in enumerate(shown):
        table.add_column(columns[i].header, justify=columns[i].justify, width=widths[n] if widths else None)
    for row in rows:
        table.add_row(*(_text(row[i]) for i in shown))
    return table, [column for i, column in enumerate(columns) if i not in shown]


def _text(cell: Cell) -> Text:
    """A cell as text, never as markup: ids and sources may hold brackets."""
    return Text(cell) if isinstance(cell, str) else cell


def _layout(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], style: dict[str, Any]) -> list[int] | None:
    """The columns' content widths at the terminal's width, or None when they do not fit in it."""
    cells = [[column.header, *(row[i] for row in rows)] for i, column in enumerate(columns)]
    return fitted_widths(cells, [c.whole for c in columns], console.width - _overhead(len(columns), style))


def wrapped(lines: Sequence[str]) -> list[str]:
    """Lines wrapped to the terminal between words (never inside an id), continued under their first word."""
    result = []
    for line in (part for text in lines for part in text.split("\n")):
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        result += textwrap.wrap(line, width=console.width, subsequent_indent=indent, break_long_words=False,
                                break_on_hyphens=False) or [line]
    return result


def _cost(plan: DeploymentPlan) -> str:
    """The monthly cost in the report's currency (a warning under the table says when it was converted)."""
    price = plan.price
    extra = f" + {UNPRICED_CACHE}" if plan.cache is not None else ""
    if price.monthly is None:
        return "unknown" + extra
    if price.monthly_ranking is None:
        return f"{price.monthly} (no exchange rate){extra}"
    return str(price.monthly_ranking) + (" *" if price.substitute else "") + extra


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


def _plan_column(plan: DeploymentPlan | None) -> list[Cell]:
    if plan is None:
        return [Text("none feasible", style="red"), *[""] * (len(PLAN_ROWS) - 1)]
    gpus = f"{plan.accelerator.count}x {plan.accelerator.id}" if plan.accelerator else "–"
    memory, performance = plan.memory, plan.performance
    per_m = plan.price.per_million_output_tokens
    return [
        plan.offer,
        str(plan.instance_count),
        plan.region,
        plan.device.upper(),
        gpus,
        str(plan.tensor_parallel) + (f" x pipeline {plan.serving.pipeline_parallel}"
                                     if plan.serving.pipeline_parallel > 1 else ""),
        str(plan.serving.processes),
        f"{plan.replicas}" + (f" of {plan.nodes_per_replica} servers" if plan.replica_nodes else "")
        + f" in {plan.zones} zone(s)",
        _memory_cell(memory),
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
        _rollout(plan),
        _capacity_mix(plan),
        _startup(plan),
    ]


def _memory_cell(memory: MemoryBreakdown) -> str:
    """weights + overhead + KV / usable; CPU processes share the RAM, so theirs is N x (...) / usable."""
    parts = f"{memory.weights_gib:.1f} + {memory.overhead_gib:.1f} + {memory.kv_cache_needed_gib:.1f}"
    if memory.device == "cpu" and memory.processes > 1:
        return f"{memory.processes} x ({parts}) / {memory.usable_gib:.1f}"
    return f"{parts} / {memory.usable_gib:.1f}"


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
            f"warm-up {fleet.scale_out_cooldown_s / 60:.1f} min")


def _rollout(plan: DeploymentPlan) -> str:
    rollout = plan.rolling_update
    minutes = f"~{math.ceil(rollout.duration_s / 60)} min"
    if rollout.strategy == "replace":
        return f"replace, {minutes} down"
    return f"{rollout.servers} by {rollout.surge}, {minutes}"


def _capacity_mix(plan: DeploymentPlan) -> str:
    """On-demand and spot servers at the fleet's ceiling, and the blend's monthly cost where both prices are known."""
    spot = plan.spot_above_floor
    if spot is None:
        return "all spot" if plan.spot else "all on-demand"
    mix = f"{spot.on_demand_base} + up to {spot.spot_above} spot ({spot.spot_share_at_ceiling:.0%})"
    if spot.monthly_at_ceiling is None or spot.on_demand_monthly_at_ceiling is None:
        return f"{mix}, spot price unknown"
    return f"{mix}: {spot.monthly_at_ceiling} at the ceiling vs {spot.on_demand_monthly_at_ceiling}"


def _startup(plan: DeploymentPlan) -> str:
    """The image, how the weights load, and the warm pool with its disks' monthly cost (beside the servers' cost)."""
    startup = plan.startup
    text = f"{startup.image} image, {startup.model_loading}"
    pool = startup.warm_pool
    if pool is None:
        return text
    storage = f"{pool.monthly_storage}/month" if pool.monthly_storage else "disk price unknown"
    return f"{text}; warm pool {pool.servers} stopped ({storage})"


PLAN_ROWS = [
    "instance type",
    "instances",
    "region",
    "device",
    "GPUs per instance",
    "tensor parallel",
    "model processes per instance",
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
    "rollout (servers by surge, time)",
    "capacity (on-demand + spot)",
    "startup (image, weights, warm pool)",
]


def print_plan_report(report: PlanReport) -> None:
    spec = report.workload
    console.print(
        f"[bold]Plan for {spec.name}[/bold]: {spec.model_name}, stage {spec.stage}, ranking currency {report.currency}"
    )
    for table in _plan_tables(report):
        console.print(table)
    console.out("\n".join(wrapped(_plan_details(report))), highlight=False)


def _plan_tables(report: PlanReport) -> list[Table]:
    """The clouds side by side, in as few tables as keep every id whole at the terminal's width."""
    label = Column("", "", whole=True)
    clouds = [Column(outcome.cloud, outcome.cloud, whole=True) for outcome in report.clouds]
    cells: dict[str, list[Cell]] = {outcome.cloud: _plan_column(outcome.chosen) for outcome in report.clouds}

    def rows(group: list[Column]) -> list[list[Cell]]:
        return [[name, *(cells[cloud.key][index] for cloud in group)] for index, name in enumerate(PLAN_ROWS)]

    for table_count in range(1, len(clouds) + 1):
        per_table = -(-len(clouds) // table_count)
        groups = [clouds[start:start + per_table] for start in range(0, len(clouds), per_table)]
        if per_table == 1 or all(_layout([label, *group], rows(group), {}) for group in groups):
            break
    title = "Cheapest feasible deployment per cloud"
    return [fitted_table(title, [label, *group], rows(group), {})[0] for group in groups]


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
        lines += _canary_details(outcome.chosen)
        if outcome.alternatives:
            lines.append("  alternatives:")
            lines += [f"    {alternative.summary()}" for alternative in outcome.alternatives]
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


def _canary_details(plan: DeploymentPlan) -> list[str]:
    """The canary group under its cloud's reasons: what it runs, its share, why that many servers (the table's columns
    are the main group's)."""
    canary = plan.canary
    if canary is None:
        return []
    return [f"  canary: {canary.summary()}", f"    • {canary.plan.rationale[-1]}",
            *(f"    ! {warning}" for warning in canary.plan.warnings if warning not in plan.warnings)]


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


class Notes:
    """Long provenance text (a source) listed once under the tables, the cells showing its number: [1]."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def mark(self, text: str) -> str:
        return f"[{self.numbers.setdefault(text, len(self.numbers) + 1)}]"

    def print(self, heading: str) -> None:
        if self.numbers:
            console.out("\n".join(wrapped([heading, *(f"[{n}] {text}" for text, n in self.numbers.items())])),
                        highlight=False)


def print_rows(title: str, rows: list[dict[str, Any]], columns: Sequence[Column], notes: Notes | None = None) -> None:
    """A listing as a table that fits the terminal. A column keyed in `notes` shows note numbers; columns with
    nothing to show are left out, and so are optional ones the terminal has no room for (said under the table)."""
    if not rows:
        console.print(f"{title}: none")
        return
    cells = [[_listing_cell(row.get(column.key), notes if column.key == "source" else None) for column in columns]
             for row in rows]
    filled = [i for i in range(len(columns)) if any(row[i] for row in cells)]
    table, left_out = fitted_table(title, [columns[i] for i in filled], [[row[i] for i in filled] for row in cells],
                                   LISTING_STYLE)
    console.print(table)
    if left_out:
        console.out("\n".join(wrapped([f"  not shown at {console.width} columns: "
                                        f"{', '.join(c.header for c in left_out)} (`--json` has every field)"])),
                    highlight=False)


def _listing_cell(value: Any, notes: Notes | None) -> str:
    text = "" if value is None else str(value)
    return notes.mark(text) if notes is not None and text else text


MODEL_COLUMNS = (
    Column("name", "name", whole=True),
    Column("kind", "kind"),
    Column("display_name", "display name", optional=True),
    Column("params_b", "params (B)", justify="right"),
    Column("source", "source"),
)
GPU_COLUMNS = (
    Column("id", "id", whole=True),
    Column("name", "family", whole=True),
    Column("memory_gb", "memory GB", justify="right"),
    Column("visible_gib", "visible GiB", justify="right"),
    Column("compute_capability", "compute cap.", justify="right"),
    Column("bandwidth_gbps", "memory GB/s", justify="right"),
    Column("fp16_tflops", "FP16 TFLOPS", justify="right"),
    Column("fp8_tflops", "FP8 TFLOPS", justify="right", optional=True),
    Column("int8_tops", "INT8 TOPS", justify="right", optional=True),
    Column("gpu_link_gbps", "GPU link GB/s", justify="right", optional=True),
    Column("source", "source"),
)
COVERAGE_COLUMNS = (
    Column("cloud", "cloud", whole=True),
    Column("region", "region", whole=True),
    Column("types", "types priced", justify="right"),
    Column("spot_types_priced", "spot", justify="right"),
    Column("currencies", "currency"),
    Column("age", "oldest price"),
    Column("source", "sources"),
)
CATALOG_COLUMNS = (
    Column("instance_type", "instance type", whole=True),
    Column("vcpus", "vCPUs", justify="right"),
    Column("memory_gib", "memory GiB", justify="right"),
    Column("gpus", "GPUs", whole=True),
    Column("price_per_hour", "price per hour", justify="right"),
    Column("price_date", "price as of", optional=True),
    Column("priced_region", "priced in (when another region)", optional=True),
    Column("source", "spec source"),
)


def print_models(rows: list[dict[str, Any]]) -> None:
    notes = Notes()
    print_rows("Built-in models", rows, MODEL_COLUMNS, notes)
    notes.print("Sources:")


def print_gpus(rows: list[dict[str, Any]]) -> None:
    notes = Notes()
    print_rows("Accelerators (datasheet figures, dense peaks)", rows, GPU_COLUMNS, notes)
    notes.print("Sources:")


def print_catalog(rows: list[dict[str, Any]]) -> None:
    """One table per cloud and region (their names in its title), a price borrowed from another region flagged."""
    notes = Notes()
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["cloud"], row["region"]), []).append(
            {**row, "source": row["spec_source"],
             "priced_region": row["priced_region"] if row["priced_region"] != row["region"] else None}
        )
    if not groups:
        console.print("Instance catalog: none")
    for (cloud, region), group in groups.items():
        title = f"{cloud} {region}: {len(group)} instance types"
        print_rows(title, *_one_currency_in_header(group), notes)
    notes.print("Spec sources:")


def _one_currency_in_header(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Sequence[Column]]:
    """Prices in one currency show it once, in the header ("USD per hour"), not on every row."""
    currencies = {price.split()[-1] for row in rows if (price := row["price_per_hour"])}
    if len(currencies) != 1:
        return rows, CATALOG_COLUMNS
    currency = currencies.pop()
    columns = [replace(c, header=f"{currency} per hour") if c.key == "price_per_hour" else c for c in CATALOG_COLUMNS]
    amounts = [{**row, "price_per_hour": (row["price_per_hour"] or "").split(" ")[0] or None} for row in rows]
    return amounts, columns


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


def catalog_rows(clouds: list[str] | None, prices_file: Path | None, *, regions: list[str] | None = None,
                 gpus: list[str] | None = None) -> list[dict[str, Any]]:
    """The catalog's instance types with their prices, narrowed to `clouds`, `regions` and accelerators (`gpus`:
    ids or families, any case); a region or accelerator that no type of those clouds has is an input error."""
    from inferstack.sizing.catalog import PriceBook, offers

    chosen = [offer for offer in offers() if not clouds or offer.cloud in clouds]
    chosen = _narrowed(chosen, "--region", regions, lambda offer: [offer.region])
    chosen = _narrowed(chosen, "--gpu", gpus, _accelerator_names)
    book = PriceBook.load(prices_file)
    rows = []
    for offer in chosen:
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


def coverage_rows(clouds: list[str] | None, prices_file: Path | None) -> list[dict[str, Any]]:
    """What `catalog --coverage` lists: per cloud and priced region, how many of the cloud's catalogued types have an
    on-demand price there (and a spot price, data/spot_prices.csv), in which currency, from which sources, how old
    the oldest dated one is (None: none dated) and how many carry no date."""
    from inferstack.sizing.catalog import PriceBook, offers, price_age_days, run_date, spot_price_rows

    types = {(offer.cloud, offer.name) for offer in offers()}
    catalogued = {cloud: sum(1 for c, _ in types if c == cloud) for cloud in CLOUDS}
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in PriceBook.load(prices_file).rows:
        if (row["cloud"], row["instance_type"]) in types and (not clouds or row["cloud"] in clouds):
            groups.setdefault((row["cloud"], row["region"]), []).append(row)
    spot = {(row["cloud"], row["region"], row["instance_type"]) for row in spot_price_rows()}
    today = run_date()
    rows = []
    for cloud in CLOUDS:
        if clouds and cloud not in clouds:
            continue
        regions: list[str | None] = [region for c, region in sorted(groups) if c == cloud]
        for region in regions or [None]:
            group = groups.get((cloud, region), []) if region else []
            ages = [price_age_days(row["source_date"], today) for row in group]
            rows.append({
                "cloud": cloud,
                "region": region,
                "types_priced": len({row["instance_type"] for row in group}),
                "types_catalogued": catalogued[cloud],
                "spot_types_priced": sum(1 for c, r, _ in spot if (c, r) == (cloud, region)),
                "currencies": ", ".join(sorted({row["currency"] for row in group})) or None,
                "sources": sorted({row["source"] for row in group}),
                "oldest_price_days": max((age for age in ages if age is not None), default=None),
                "undated_prices": sum(1 for age in ages if age is None),
            })
    return rows


def print_coverage(rows: list[dict[str, Any]]) -> None:
    """One line per cloud and priced region (a cloud without any price says so), sources as numbered notes."""
    notes = Notes()
    shown = [{**row,
              "region": row["region"] or "no region priced",
              "types": f"{row['types_priced']} of {row['types_catalogued']}",
              "age": _age(row),
              "source": "; ".join(row["sources"]) or None} for row in rows]
    print_rows("Prices: instance types priced per region", shown, COVERAGE_COLUMNS, notes)
    notes.print("Price sources:")


def _age(row: dict[str, Any]) -> str | None:
    if not row["types_priced"]:
        return None
    if row["oldest_price_days"] is None:
        return "undated"
    undated = f", {row['undated_prices']} undated" if row["undated_prices"] else ""
    return f"{row['oldest_price_days']} days{undated}"


def _accelerator_names(offer: Offer) -> list[str]:
    """What `catalog --gpu` matches: the catalog's accelerator name, and the GPU's id and family when known."""
    names = [offer.gpu_model] if offer.gpu_count else []
    return names + ([offer.gpu.id, offer.gpu.name] if offer.gpu else [])


def _narrowed(offers: list[Offer], flag: str, wanted: list[str] | None,
              names_of: Callable[[Offer], list[str]]) -> list[Offer]:
    if not wanted:
        return offers
    choices = sorted({name for offer in offers for name in names_of(offer)}, key=str.lower)
    known = {choice.lower() for choice in choices}
    for value in wanted:
        if value.lower() not in known:
            clouds = sorted({offer.cloud for offer in offers})
            raise input_error(flag, f"matches no instance type of {', '.join(clouds) or 'the chosen filters'}",
                              value=value, fix=f"use one of {', '.join(choices)}" if choices else "drop a filter")
    lowered = {value.lower() for value in wanted}
    return [offer for offer in offers if lowered & {name.lower() for name in names_of(offer)}]


def print_preview(result: Any) -> None:
    console.out(result.render_tree(), highlight=False)

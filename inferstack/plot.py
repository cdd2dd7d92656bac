"""`inferstack plan --plot`: every feasible offer's monthly cost against its predicted p95 latency, in one picture.

One panel per latency target (TTFT and TPOT for LLMs, end-to-end latency for other models) and one for the
throughput headroom at peak, all sharing the cost axis. Each cloud has its colour; the cost/latency frontier (the
offers no other offer beats on both), each cloud's chosen plan, the best overall and the targets are marked.

matplotlib (the `plot` extra) is imported with this module, which the CLI imports only for `--plot`. The figure is
drawn without pyplot (no global state, no display): `Figure.savefig` picks the Agg or SVG canvas by the file's
suffix, and SVG keeps its text as text, so the labels can be searched and read by a screen reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from inferstack.clouds import CLOUD_FACTS
from inferstack.plan import DeploymentPlan, PlanReport
from inferstack.sizing.demand import Demand, demand_of
from inferstack.sizing.models import resolve

PLOT_SUFFIXES = (".svg", ".png")
FIGURE_INCHES_PER_PANEL = (4.6, 5.4)
MIN_FIGURE_INCHES_WIDE = 10.0  # room for the two-line title and the legend under two panels
DPI = 120


@dataclass(frozen=True)
class Panel:
    """One x axis: a figure of each plan, and the target drawn across it (None: no target)."""

    key: str
    label: str
    value: Callable[[DeploymentPlan], float | None]
    target: float | None
    target_label: str
    latency: bool  # lower is better, so the cost/latency frontier applies


def write_plot(report: PlanReport, path: Path) -> Path:
    """Draw `report` (planned with every alternative kept) into `path`, an .svg or .png file."""
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays <text>, not glyph outlines
    plans = feasible_priced_plans(report)
    panels = _panels(demand_of(report.workload, resolve(report.workload.model)), plans)
    wide = max(FIGURE_INCHES_PER_PANEL[0] * len(panels), MIN_FIGURE_INCHES_WIDE)
    figure = Figure(figsize=(wide, FIGURE_INCHES_PER_PANEL[1]), dpi=DPI, layout="constrained")
    axes = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for axis, panel in zip(axes, panels, strict=True):
        _draw_panel(axis, panel, plans, report)
    axes[0].set_ylabel(f"monthly cost, {report.currency} (log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3 if len(panels) < 3 else 6),
                  frameon=False, fontsize=9)
    figure.suptitle(_title(report, plans))
    figure.savefig(path, format=path.suffix.lstrip(".").lower())
    return path


def feasible_priced_plans(report: PlanReport) -> list[DeploymentPlan]:
    """Every feasible plan of every cloud whose monthly cost is known in the report's currency."""
    return [plan for outcome in report.clouds for plan in (outcome.chosen, *outcome.alternatives)
            if plan is not None and plan.price.monthly_ranking is not None]


def _panels(demand: Demand, plans: list[DeploymentPlan]) -> list[Panel]:
    """TTFT and TPOT for token-streaming models, end-to-end latency otherwise; then the headroom."""
    streamed = any(plan.performance.ttft_p95_ms is not None for plan in plans)
    latency = [
        Panel("ttft_p95_ms", "p95 time to first token, ms", lambda p: p.performance.ttft_p95_ms, demand.ttft_p95_ms,
              "TTFT target", latency=True),
        Panel("tpot_p95_ms", "p95 time per output token, ms", lambda p: p.performance.tpot_p95_ms,
              demand.tpot_p95_ms, "TPOT target", latency=True),
    ] if streamed else [
        Panel("latency_p95_ms", "p95 end-to-end latency, ms", lambda p: p.performance.latency_p95_ms,
              demand.latency_p95_ms, "latency target", latency=True),
    ]
    limit = 1 - demand.stage.max_utilization
    headroom = Panel("headroom", "throughput headroom at peak, %", lambda p: 100 * (1 - p.performance.utilization),
                     100 * limit, "least headroom the planner keeps", latency=False)
    return [*latency, headroom]


def _draw_panel(axis: Axes, panel: Panel, plans: list[DeploymentPlan], report: PlanReport) -> None:
    points = [(x, _cost(plan), plan) for plan in plans if (x := panel.value(plan)) is not None]
    for cloud, facts in CLOUD_FACTS.items():
        mine = [(x, y) for x, y, plan in points if plan.cloud == cloud]
        if mine:
            axis.scatter([x for x, _ in mine], [y for _, y in mine], s=22, color=facts.plot_colour, alpha=0.55,
                         label=f"{cloud} offers", edgecolors="none")
    if panel.latency and points:
        frontier = cost_latency_frontier([(x, y) for x, y, _ in points])
        line = axis.step([x for x, _ in frontier], [y for _, y in frontier], where="post", color="#333333",
                         linewidth=1, label="cost/latency frontier")[0]
        line.set_gid(f"frontier-{panel.key}")
    chosen = sorted(((plan, x) for o in report.clouds
                     if (plan := o.chosen) in plans and (x := panel.value(plan)) is not None),
                    key=lambda pair: _cost(pair[0]))
    for stacked, (plan, x) in enumerate(chosen):  # labels stacked upwards, cheapest lowest: near-ties stay legible
        best = plan is report.best
        marker = axis.scatter([x], [_cost(plan)], s=180 if best else 110, marker="*",
                              color=CLOUD_FACTS[plan.cloud].plot_colour, edgecolors="black", linewidths=0.8, zorder=3,
                              label="chosen plan per cloud (★ best overall is larger)" if best else None)
        marker.set_gid(f"chosen-{plan.cloud}-{panel.key}")
        axis.annotate(chosen_label(plan, best=best), (x, _cost(plan)), xytext=(8, -4 + 10 * stacked),
                      textcoords="offset points", fontsize=7, fontweight="bold" if best else "normal",
                      arrowprops={"arrowstyle": "-", "linewidth": 0.4, "color": "#555555"})
    if panel.target is not None:
        target = axis.axvline(panel.target, color="#c00000", linestyle="--", linewidth=1.2,
                              label="targets (SLO, planner limit)" if panel.latency else None)
        target.set_gid(f"slo-{panel.key}")
        # Every feasible offer meets a latency target, so its line is at the right: its words go inside, leftwards.
        axis.annotate(f"{panel.target_label} {panel.target:,.0f}" + (" ms" if panel.latency else " %"),
                      (panel.target, 1), xycoords=("data", "axes fraction"), xytext=(-3 if panel.latency else 3, -12),
                      textcoords="offset points", fontsize=7, color="#c00000",
                      horizontalalignment="right" if panel.latency else "left")
    _scale(axis, [x for x, _, _ in points] + ([panel.target] if panel.target else []), log=panel.latency)
    axis.set_yscale("log")
    costs = [y for _, y, _ in points]
    _plain_numbers(axis.yaxis, max(costs) / min(costs) if costs else 10)
    axis.set_xlabel(panel.label)
    axis.grid(True, which="major", linewidth=0.4, alpha=0.5)


def cost_latency_frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both latency (x) and cost (y), fastest first."""
    frontier: list[tuple[float, float]] = []
    for x, y in sorted(points):
        if not frontier or y < frontier[-1][1]:
            frontier.append((x, y))
    return frontier


def chosen_label(plan: DeploymentPlan, *, best: bool) -> str:
    """The words beside a chosen plan's star: the same summary the table prints under "Best overall"."""
    return ("best: " if best else "") + f"{plan.instance_count}x {plan.instance_type} ({plan.cloud})"


def _cost(plan: DeploymentPlan) -> float:
    assert plan.price.monthly_ranking is not None  # feasible_priced_plans keeps priced plans only
    return plan.price.monthly_ranking.amount


def _scale(axis: Axes, values: list[float], *, log: bool) -> None:
    """Log scale where the values span more than a factor of ten (latencies often do), else linear."""
    positive = [v for v in values if v > 0]
    if log and positive and max(positive) / min(positive) > 10:
        axis.set_xscale("log")
        _plain_numbers(axis.xaxis, max(positive) / min(positive))


def _plain_numbers(scale: Axis, span: float) -> None:
    """Log-scale ticks written 2,000 rather than 2x10^3: at 1, 2 and 5 of each decade, more within one decade."""
    scale.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if span > 10 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    scale.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    scale.set_minor_formatter(NullFormatter())


def _title(report: PlanReport, plans: list[DeploymentPlan]) -> str:
    unpriced = sum(1 for outcome in report.clouds for plan in (outcome.chosen, *outcome.alternatives)
                   if plan is not None and plan.price.monthly_ranking is None)
    spec = report.workload
    counted = f"{len(plans)} feasible priced offers" + (f" ({unpriced} more without a known price)" if unpriced else "")
    return f"{spec.name}: {spec.model_name}, stage {spec.stage}\n{counted}, as predicted at peak load"

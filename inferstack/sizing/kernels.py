"""Which precisions an engine can run on which GPU: compute-capability floors of its kernels.

data/engine_kernels.csv has one row per (engine, precision) the planner can emit: the kernel the engine uses,
the lowest CUDA compute capability it runs on (empty: no floor known, none applied), the precision served
instead below the floor when that costs nothing (bf16 → fp16: same bytes), and a source per row. The planner
asks `served_precision` before sizing an offer, so no plan names a dtype or kernel its runtime refuses.
"""

from __future__ import annotations

import csv
from functools import cache
from typing import NamedTuple

from inferstack.sizing.hardware import DATA_DIR, GpuSpec
from inferstack.spec import Engine, Precision


class KernelFloor(NamedTuple):
    """One row of engine_kernels.csv."""

    engine: Engine
    precision: Precision
    kernel: str
    min_compute_capability: float | None
    served_below_as: Precision | None
    source: str


class Served(NamedTuple):
    """What the server runs for a requested precision, and why when it differs."""

    precision: Precision
    note: str | None = None


@cache
def kernel_floors() -> dict[tuple[Engine, Precision], KernelFloor]:
    """All rows of engine_kernels.csv, by (engine, precision)."""
    floors = {}
    with (DATA_DIR / "engine_kernels.csv").open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            floor = KernelFloor(
                engine=Engine(row["engine"]),
                precision=Precision(row["precision"]),
                kernel=row["kernel"],
                min_compute_capability=float(row["min_compute_capability"]) if row["min_compute_capability"] else None,
                served_below_as=Precision(row["served_below_as"]) if row["served_below_as"] else None,
                source=row["source"],
            )
            floors[(floor.engine, floor.precision)] = floor
    return floors


def runs_on(engine: Engine, precision: Precision, gpu: GpuSpec) -> bool:
    """Whether the engine's kernel for `precision` runs on `gpu` (no row, or no floor: not restricted)."""
    floor = kernel_floors().get((engine, precision))
    minimum = floor.min_compute_capability if floor else None
    return minimum is None or gpu.compute_capability >= minimum


def served_precision(engine: Engine, precision: Precision, gpu: GpuSpec) -> Served | str:
    """The precision `engine` serves `precision` at on `gpu`, or why it cannot (a sentence naming the floor)."""
    if runs_on(engine, precision, gpu):
        return Served(precision)
    floor = kernel_floors()[(engine, precision)]
    assert floor.min_compute_capability is not None
    why = (f"{engine.value} runs {precision.value} ({floor.kernel}) from compute capability "
           f"{floor.min_compute_capability:.1f}; {gpu.id} has {gpu.compute_capability:.1f}")
    fallback = floor.served_below_as
    if fallback is not None and runs_on(engine, fallback, gpu):
        note = f"the server runs the {precision.value} weights as {fallback.value} (same bytes): {why}"
        return Served(fallback, note)
    return f"{precision.value} on {engine.value} excluded on {gpu.id}: {why}"

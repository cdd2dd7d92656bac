"""Fidelity of the sizing model: `estimate` against every measured calibration row, held out first.

    python benchmarks/fidelity.py [--rows]

Headline, out of sample: the rows are grouped by model × hardware; for each group every fit of
benchmarks/fit.py that covers one of its rows is refitted without the group (from the fit's priors), and the
group is predicted with those constants. A group that is its fit's only data has no held-out prediction and is
counted as such. Second, in sample: the package's constants (fitted on all rows) on every row.

Both tables give, per engine and metric family (memory; TTFT/prefill; TPOT/decode; throughput), the median and
worst absolute relative error and how many rows are off by more than 1.5x (a ratio outside [1/1.5, 1.5]).

The gate (exit status 1) fails when the figures regress past `OUT_OF_SAMPLE_LIMITS` or `IN_SAMPLE_LIMITS`: for each
engine × family, the median and worst error and the count of rows off by more than 1.5x measured when the limits
were set (2026-12-01, 122 rows), plus a margin of 3 percentage points on the median and 10 on the worst error
(relative errors of a refit move by about that much when one row is added), or when an in-sample family median
misses the issue's target (memory 3 %, the others 20 %).

Encoders on CPU (calibration_cases.ENCODER_ROWS, MLPerf bert-99 int8) are a table of their own: one constant (the
AMX efficiency) is solved on row e02, the other rows are held out; the gate fails when a held-out encoder row is
off by more than `ENCODER_HELD_OUT_LIMIT`. The same table carries MLPerf's Triton + TensorRT single-GPU rows
(bert-99, resnet50) as a bound on the onnxruntime GPU profile (a prior): the gate fails if it predicts more items/s
than TensorRT measured.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_cases import CASES, ENCODER_ROWS, calibration_rows, engine_label, predict, run_case
from fit import FITS, constants_kept, fit

FAMILIES = ("memory", "prefill", "decode", "throughput")
IN_SAMPLE_MEDIAN_TARGET = {"memory": 0.03, "prefill": 0.20, "decode": 0.20, "throughput": 0.20}
OFF_RATIO = 1.5

# (engine, family) -> (median, worst, rows off by more than 1.5x) allowed out of sample. See the module docstring.
# Measured 2026-12-01 on 122 rows (median, worst): gpt-fast decode 10.9 %, 65.7 %; llama.cpp GPU prefill 14.7 %,
# 55.1 %; llama.cpp GPU decode 12.4 %, 34.4 %; TensorRT-LLM prefill 5.7 %, 29.9 %, decode 4.9 %, 23.4 %,
# throughput 5.1 %, 9.2 %; vLLM memory 1.4 %, 125.2 %; vLLM decode (6 rows, 3 groups) 6.1 %, 9.5 %; vLLM
# throughput (8 serving rows, 1 to 200 requests in flight, 2 groups) 6.0 %, 15.2 %. llama.cpp on CPU has a single
# model x hardware group: no held-out figure exists; its in-sample error is gated below.
OUT_OF_SAMPLE_LIMITS: dict[tuple[str, str], tuple[float, float, int]] = {
    ("gpt-fast (vllm profile)", "decode"): (0.139, 0.757, 1),
    ("llamacpp gpu", "prefill"): (0.177, 0.651, 1),
    ("llamacpp gpu", "decode"): (0.154, 0.444, 0),
    ("trtllm gpu", "prefill"): (0.087, 0.399, 0),
    ("trtllm gpu", "decode"): (0.079, 0.334, 0),
    ("trtllm gpu", "throughput"): (0.081, 0.192, 0),
    ("vllm gpu", "memory"): (0.044, 1.352, 1),
    ("vllm gpu", "decode"): (0.091, 0.195, 0),
    ("vllm gpu", "throughput"): (0.090, 0.252, 0),
}
# The package's constants on every row, measured the same day, with the same margins. The held-out gate cannot
# see a wrongly pasted constant (it refits them); this one can.
IN_SAMPLE_LIMITS: dict[tuple[str, str], tuple[float, float, int]] = {
    ("gpt-fast (vllm profile)", "decode"): (0.085, 0.757, 1),
    ("llamacpp cpu", "prefill"): (0.038, 0.113, 0),
    ("llamacpp cpu", "decode"): (0.082, 0.152, 0),
    ("llamacpp gpu", "prefill"): (0.156, 0.610, 1),
    ("llamacpp gpu", "decode"): (0.130, 0.405, 0),
    ("trtllm gpu", "prefill"): (0.088, 0.346, 0),
    ("trtllm gpu", "decode"): (0.042, 0.134, 0),
    ("trtllm gpu", "throughput"): (0.066, 0.168, 0),
    ("vllm gpu", "memory"): (0.049, 1.326, 1),
    ("vllm gpu", "decode"): (0.056, 0.168, 0),
    ("vllm gpu", "throughput"): (0.076, 0.221, 0),
}


@dataclass(frozen=True)
class RowResult:
    row_id: str
    engine: str
    family: str
    group: str
    metric: str
    measured: float
    predicted: float | None  # None: no held-out prediction (the group is its fit's only data)

    @property
    def error(self) -> float:
        assert self.predicted is not None
        return abs(self.predicted - self.measured) / self.measured

    @property
    def off(self) -> bool:
        assert self.predicted is not None
        return not 1 / OFF_RATIO <= self.predicted / self.measured <= OFF_RATIO


@dataclass(frozen=True)
class Cell:
    engine: str
    family: str
    rows: int
    held_out: int  # rows with a prediction
    median: float
    worst: float
    worst_row: str
    off: int


def _rows() -> list[dict[str, str]]:
    rows = calibration_rows()
    for row in rows:
        if row["id"] not in CASES:
            raise SystemExit(f"calibration row {row['id']} has no case in benchmarks/calibration_cases.py")
    return rows


def _result(row: dict[str, str], predicted: float | None) -> RowResult:
    case = CASES[row["id"]]
    label = engine_label(row, case)
    return RowResult(row["id"], label, case.family, case.group, row["metric"], float(row["value"]), predicted)


def in_sample() -> list[RowResult]:
    """Every row predicted with the package's constants."""
    return [_result(row, run_case(row["id"])) for row in _rows()]


def out_of_sample() -> list[RowResult]:
    """Every row predicted with constants refitted without its model × hardware group."""
    rows = _rows()
    measured = {row["id"]: float(row["value"]) for row in rows}
    by_group: dict[str, list[str]] = {}
    for row in rows:
        by_group.setdefault(CASES[row["id"]].group, []).append(row["id"])
    predicted: dict[str, float | None] = {}
    for held in by_group.values():
        with constants_kept():
            refitted = True
            for spec in FITS:
                if not spec.rows(held):
                    continue
                training = [r for r in spec.rows(list(measured)) if r not in held]
                if not training:
                    refitted = False
                    break
                fit(spec, training, measured, run_case)
            for row_id in held:
                predicted[row_id] = run_case(row_id) if refitted else None
    return [_result(row, predicted[row["id"]]) for row in rows]


def cells(results: list[RowResult]) -> list[Cell]:
    table = []
    for engine in sorted({r.engine for r in results}):
        for family in FAMILIES:
            rows = [r for r in results if r.engine == engine and r.family == family]
            scored = [r for r in rows if r.predicted is not None]
            if not rows:
                continue
            if not scored:
                table.append(Cell(engine, family, len(rows), 0, float("nan"), float("nan"), "-", 0))
                continue
            worst = max(scored, key=lambda r: r.error)
            table.append(
                Cell(
                    engine,
                    family,
                    len(rows),
                    len(scored),
                    statistics.median(r.error for r in scored),
                    worst.error,
                    worst.row_id,
                    sum(r.off for r in scored),
                )
            )
    return table


def print_table(title: str, table: list[Cell]) -> None:
    print(f"\n{title}\n")
    print("| engine | family | rows | scored | median abs. rel. error | worst | worst row | off by > 1.5x |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    for c in table:
        if not c.held_out:
            print(f"| {c.engine} | {c.family} | {c.rows} | 0 | n/a | n/a | - | - |")
            continue
        print(
            f"| {c.engine} | {c.family} | {c.rows} | {c.held_out} | {c.median:.1%} | {c.worst:.1%} | {c.worst_row} "
            f"| {c.off} |"
        )


def gate(table: list[Cell], limits: dict[tuple[str, str], tuple[float, float, int]], label: str) -> list[str]:
    """What regressed past the limits (empty: the gate passes)."""
    failures = []
    for c in table:
        if not c.held_out:
            continue
        limit = limits.get((c.engine, c.family))
        if limit is None:
            failures.append(f"{label} {c.engine} {c.family}: no limit set (add one)")
            continue
        median, worst, off = limit
        if c.median > median or c.worst > worst or c.off > off:
            failures.append(
                f"{label} {c.engine} {c.family}: median {c.median:.1%} (limit {median:.1%}), worst {c.worst:.1%} "
                f"(limit {worst:.1%}), off by > 1.5x {c.off} (limit {off})"
            )
    return failures


def in_sample_target_misses(fitted: list[RowResult]) -> list[str]:
    misses = []
    for family in FAMILIES:
        median = statistics.median(r.error for r in fitted if r.family == family)
        if median > IN_SAMPLE_MEDIAN_TARGET[family]:
            target = IN_SAMPLE_MEDIAN_TARGET[family]
            misses.append(f"in sample {family}: median {median:.1%} over its target {target:.0%}")
    return misses


# Measured 2026-12-01: e01 (Ice Lake, VNNI prior, not fitted) and e03/e04 (AMX, held out); see ENCODER_ROWS.
ENCODER_HELD_OUT_LIMIT = 0.25


def encoder_failures() -> list[str]:
    """Print the item-model rows (fitted, held out, or a bound) and return those past their limit: a held-out row
    off by more than ENCODER_HELD_OUT_LIMIT, a bound row (Triton + TensorRT on a GPU) predicted faster than measured."""
    print("\nItem models (MLPerf Offline int8, items/s): encoders on CPU; Triton + TensorRT on GPUs as a bound\n")
    print("| row | role | hardware | model | measured | predicted | predicted / measured |")
    print("|---|---|---|---|---:|---:|---:|")
    failures = []
    for row_id, row in ENCODER_ROWS.items():
        predicted = predict(row.case)
        ratio = predicted / row.measured
        hardware = row.case.gpu or (row.case.cpu.description if row.case.cpu else "-")
        print(
            f"| {row_id} | {row.role} | {hardware} | {row.case.model} | {row.measured:,.0f} | "
            f"{predicted:,.0f} | {ratio:.2f} |"
        )
        if row.role == "held-out" and abs(ratio - 1) > ENCODER_HELD_OUT_LIMIT:
            failures.append(f"encoder {row_id}: {abs(ratio - 1):.1%} off (limit {ENCODER_HELD_OUT_LIMIT:.0%})")
        if row.role == "bound" and ratio > 1:
            failures.append(f"{row_id}: onnxruntime predicts {ratio:.2f}x TensorRT's measured items/s (bound: 1.0)")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every row")
    args = parser.parse_args()
    held_out, fitted = out_of_sample(), in_sample()
    if args.rows:
        print(f"{'row':5} {'engine':24} {'family':10} {'measured':>10} {'held out':>10} {'in sample':>10}  group")
        for h, f in zip(held_out, fitted, strict=True):
            ho = f"{h.predicted:10.4g}" if h.predicted is not None else f"{'-':>10}"
            print(f"{h.row_id:5} {h.engine:24} {h.family:10} {h.measured:10.4g} {ho} {f.predicted:10.4g}  {h.group}")
    groups = len({r.group for r in held_out})
    held_cells = cells(held_out)
    title = f"Out of sample (leave one model x hardware group out; {len(held_out)} rows, {groups} groups)"
    print_table(title, held_cells)
    fitted_cells = cells(fitted)
    print_table("In sample (constants fitted on every row)", fitted_cells)
    failures = gate(held_cells, OUT_OF_SAMPLE_LIMITS, "out of sample")
    failures += gate(fitted_cells, IN_SAMPLE_LIMITS, "in sample") + in_sample_target_misses(fitted)
    failures += encoder_failures()
    print()
    for failure in failures:
        print(f"REGRESSION: {failure}")
    print("fidelity gate passed" if not failures else "FIDELITY GATE FAILED")
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())

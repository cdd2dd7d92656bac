"""Fidelity of the sizing model: `estimate` on every row of calibration.csv against what was measured.

    python benchmarks/fidelity.py [--rows]

Prints, per metric family (memory; TTFT/prefill; TPOT/decode; throughput; encoder items/s), the median and
worst absolute relative error. Encoder rows (calibration_cases.ENCODER_ROWS) are marked fit or held-out; the
held-out median is printed on its own. Targets (issue "Sizing"): memory ≤ 3 % median; the others ≤ 20 %
median; no row off by more than 2× (a ratio outside [0.5, 2]). Exits non-zero when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_cases import CASES, ENCODER_ROWS, Case, calibration_rows

from inferstack.sizing.estimate import estimate
from inferstack.sizing.hardware import gpu_spec
from inferstack.sizing.models import lookup
from inferstack.spec import Engine, KvCacheDtype, Precision

FAMILIES = ("memory", "prefill", "decode", "throughput", "encoder")
MEDIAN_TARGET = {"memory": 0.03, "prefill": 0.20, "decode": 0.20, "throughput": 0.20, "encoder": 0.20}


@dataclass(frozen=True)
class RowResult:
    row_id: str
    family: str
    metric: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return abs(self.predicted - self.measured) / self.measured

    @property
    def ratio(self) -> float:
        return self.predicted / self.measured


def run_case(row_id: str) -> float:
    return predict(CASES[row_id])


def predict(case: Case) -> float:
    result = estimate(
        lookup(case.model),
        precision=Precision(case.precision),
        kv_dtype=KvCacheDtype(case.kv_dtype),
        engine=Engine(case.engine),
        gpu=gpu_spec(case.gpu) if case.gpu else None,
        gpus=case.gpus,
        cpu=case.cpu,
        concurrency=case.concurrency,
        input_tokens=case.input_tokens,
        output_tokens=case.output_tokens,
    )
    return case.predict(result)


def evaluate() -> list[RowResult]:
    results = []
    for row in calibration_rows():
        case = CASES.get(row["id"])
        if case is None:
            raise SystemExit(f"calibration row {row['id']} has no case in benchmarks/calibration_cases.py")
        results.append(RowResult(row["id"], case.family, row["metric"], float(row["value"]), run_case(row["id"])))
    for row_id, encoder_row in ENCODER_ROWS.items():
        metric = f"samples/s ({encoder_row.role})"
        results.append(RowResult(row_id, "encoder", metric, encoder_row.measured, predict(encoder_row.case)))
    return results


def summarise(results: list[RowResult]) -> list[tuple[str, int, float, float, str]]:
    """(family, rows, median error, worst error, worst row) per family."""
    summary = []
    for family in FAMILIES:
        rows = [r for r in results if r.family == family]
        worst = max(rows, key=lambda r: r.error)
        summary.append((family, len(rows), statistics.median(r.error for r in rows), worst.error, worst.row_id))
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every row")
    args = parser.parse_args()
    results = evaluate()
    if args.rows:
        print(f"{'row':5} {'family':10} {'measured':>10} {'predicted':>10} {'error':>7}  metric")
        for r in results:
            print(f"{r.row_id:5} {r.family:10} {r.measured:10.4g} {r.predicted:10.4g} {r.error:7.1%}  {r.metric}")
        print()
    print("| family | rows | median abs. rel. error | worst | worst row | target (median) |")
    print("|---|---:|---:|---:|---|---:|")
    ok = True
    for family, count, median, worst, worst_row in summarise(results):
        target = MEDIAN_TARGET[family]
        ok &= median <= target
        print(f"| {family} | {count} | {median:.1%} | {worst:.1%} | {worst_row} | ≤ {target:.0%} |")
    held_out = [r for r in results if r.metric.endswith("(held-out)")]
    if held_out:
        ids = ", ".join(r.row_id for r in held_out)
        print(f"\nencoder rows held out of every fit ({ids}): median abs. rel. error "
              f"{statistics.median(r.error for r in held_out):.1%}, worst {max(r.error for r in held_out):.1%}")
    off_by_2x = [r.row_id for r in results if not 0.5 <= r.ratio <= 2.0]
    print(f"\nrows off by more than 2x: {', '.join(off_by_2x) or 'none'}")
    ok &= not off_by_2x
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

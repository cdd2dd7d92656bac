"""Fit the engine efficiency constants of `inferstack/sizing/efficiency.py` on calibration.csv.

    python benchmarks/fit.py

For each engine that has measured rows (trtllm: g01–g18; vllm: the gpt-fast decode rows g38–g43), it
minimises the squared log error of `estimate` against the measured values over that engine's free
constants, and prints the fitted values next to the ones in efficiency.py. The AMX efficiency of item models
on CPU is solved on encoder row e02 alone (one row, one constant) and checked on the held-out encoder rows.
Paste them by hand: the fit is a maintainer's tool, the package only carries its result.
Needs scipy (`pip install scipy`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_cases import CASES, ENCODER_ROWS, calibration_rows
from fidelity import predict, run_case
from scipy.optimize import minimize

from inferstack.sizing import efficiency
from inferstack.spec import Engine

# engine → (profile attribute names to fit, rows to fit on, bounds). Bounds keep the constants physical: MBU
# at most 0.85 (measured MBU spans 0.4–0.8, sizing.md), launch overhead at most 0.1 ms per layer.
FITS = {
    Engine.TRTLLM: (
        [
            "decode_bandwidth_utilization",
            "matmul_utilization",
            "fp8_matmul_utilization",
            "step_overhead_ms_per_layer",
            "allreduce_latency_us",
            "overlap_exponent",
        ],
        [f"g{i:02d}" for i in range(1, 19)],
        [(0.4, 0.85), (0.3, 0.9), (0.2, 0.9), (0.0, 0.1), (1.0, 100.0), (1.0, 8.0)],
    ),
    Engine.VLLM: (
        [
            "decode_bandwidth_utilization",
            "int8_weight_only_bandwidth_factor",
            "int4_weight_only_bandwidth_factor",
            "step_overhead_ms_per_layer",
            "allreduce_latency_us",
        ],
        ["g38", "g39", "g40", "g41", "g42", "g43"],
        [(0.4, 0.85), (0.4, 1.0), (0.3, 1.0), (0.0, 0.1), (1.0, 100.0)],
    ),
}


def loss(values: list[float], engine: Engine, names: list[str], rows: list[str], measured: dict[str, float]) -> float:
    profile = replace(efficiency.GPU_PROFILES[engine], **dict(zip(names, values, strict=True)))
    efficiency.GPU_PROFILES[engine] = profile
    return sum(math.log(run_case(r) / measured[r]) ** 2 for r in rows)


def fit(
    engine: Engine, names: list[str], rows: list[str], bounds: list[tuple[float, float]], measured: dict[str, float]
) -> tuple[list[float], float]:
    """Fitted values and their summed squared log error; the profile is left as it was."""
    original = efficiency.GPU_PROFILES[engine]
    start = [getattr(original, n) for n in names]
    try:
        result = minimize(loss, start, args=(engine, names, rows, measured), method="Powell", bounds=bounds)
    finally:
        efficiency.GPU_PROFILES[engine] = original
    return list(result.x), float(result.fun)


def leave_one_out(
    engine: Engine, names: list[str], rows: list[str], bounds: list[tuple[float, float]], measured: dict[str, float]
) -> list[float]:
    """Absolute relative error on each row when the constants are fitted without it."""
    errors = []
    original = efficiency.GPU_PROFILES[engine]
    for held_out in rows:
        values, _ = fit(engine, names, [r for r in rows if r != held_out], bounds, measured)
        efficiency.GPU_PROFILES[engine] = replace(original, **dict(zip(names, values, strict=True)))
        errors.append(abs(run_case(held_out) / measured[held_out] - 1))
        efficiency.GPU_PROFILES[engine] = original
    return errors


# Item models on CPU: (unit of CPU_ITEM_MATMUL_UTILIZATION, the encoder rows it is solved on).
ENCODER_FITS = {"amx": ["e02"]}


def fit_encoder_unit(unit: str, rows: list[str]) -> float:
    """The efficiency that makes the rows' geometric-mean prediction match (bisection; items/s rises with it)."""
    original = efficiency.CPU_ITEM_MATMUL_UTILIZATION[unit]

    def log_ratio(value: float) -> float:
        efficiency.CPU_ITEM_MATMUL_UTILIZATION[unit] = value
        return sum(math.log(predict(ENCODER_ROWS[r].case) / ENCODER_ROWS[r].measured) for r in rows)

    low, high = 0.01, 1.0
    try:
        for _ in range(60):
            middle = (low + high) / 2
            low, high = (middle, high) if log_ratio(middle) < 0 else (low, middle)
    finally:
        efficiency.CPU_ITEM_MATMUL_UTILIZATION[unit] = original
    return (low + high) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leave-one-out", action="store_true", help="also refit without each row and predict it")
    args = parser.parse_args()
    measured = {row["id"]: float(row["value"]) for row in calibration_rows() if row["id"] in CASES}
    for engine, (names, rows, bounds) in FITS.items():
        start = [getattr(efficiency.GPU_PROFILES[engine], n) for n in names]
        values, error = fit(engine, names, rows, bounds, measured)
        print(f"{engine.value}: rms log error {math.sqrt(error / len(rows)):.3f} on {', '.join(rows)}")
        for name, before, after in zip(names, start, values, strict=True):
            print(f"  {name:38} {before:9.4g} -> {after:9.4g}")
        if args.leave_one_out:
            errors = leave_one_out(engine, names, rows, bounds, measured)
            print(f"  leave-one-out abs. rel. error: median {statistics.median(errors):.1%}, worst {max(errors):.1%}")
    for unit, rows in ENCODER_FITS.items():
        value = fit_encoder_unit(unit, rows)
        before = efficiency.CPU_ITEM_MATMUL_UTILIZATION[unit]
        print(f"CPU items, {unit}: fitted on {', '.join(rows)}: {before:.4g} -> {value:.4g}")


if __name__ == "__main__":
    main()

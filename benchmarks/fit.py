"""Fit the calibrated constants of the sizing model on the calibration rows.

    python benchmarks/fit.py

Each fit owns a few constants (an engine's efficiency profile in `inferstack/sizing/efficiency.py`, or the
activation-memory constants of `inferstack/sizing/llm.py`) and the rows that constrain them: every speed row of
that engine on that kind of device, or every vLLM memory row. It minimises the squared log error of `estimate`
against the measured values, starting from the prior stated in `PRIORS` (not from the fitted values, so that
a refit without some rows cannot inherit them), and prints the fitted values next to the package's. Paste them
by hand: the fit is a maintainer's tool, the package only carries its result. `benchmarks/fidelity.py` uses the
same fits to score every model × hardware group with constants fitted without it. The AMX efficiency of item
models on CPU is solved on encoder row e02 alone (one row, one constant) and checked on the held-out encoder rows
(`calibration_cases.ENCODER_ROWS`). Needs scipy.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_cases import CASES, ENCODER_ROWS, Case, calibration_rows, predict, run_case
from scipy.optimize import least_squares

from inferstack.sizing import efficiency, llm
from inferstack.sizing.models import lookup
from inferstack.spec import Engine

SPEED_FAMILIES = ("prefill", "decode", "throughput")


@dataclass(frozen=True)
class Constant:
    """One fitted number: how to read and write it, its bounds, and the prior a fit starts from."""

    name: str
    get: Callable[[], float]
    set: Callable[[float], None]
    bounds: tuple[float, float]
    prior: float


def _profile_constant(engine: Engine, name: str, bounds: tuple[float, float], prior: float) -> Constant:
    def set_value(value: float) -> None:
        efficiency.GPU_PROFILES[engine] = efficiency.GPU_PROFILES[engine]._replace(**{name: value})

    return Constant(name, lambda: float(getattr(efficiency.GPU_PROFILES[engine], name)), set_value, bounds, prior)


def _cpu_constant(engine: Engine, name: str, bounds: tuple[float, float], prior: float) -> Constant:
    def set_value(value: float) -> None:
        efficiency.CPU_PROFILES[engine] = efficiency.CPU_PROFILES[engine]._replace(**{name: value})

    return Constant(name, lambda: float(getattr(efficiency.CPU_PROFILES[engine], name)), set_value, bounds, prior)


def _cpu_flops_constant(engine: Engine, bounds: tuple[float, float], prior: float) -> Constant:
    """AMX/AVX-512 FLOPs per core and cycle; AVX2 and NEON keep their stated ratio (half)."""

    def set_value(value: float) -> None:
        per_isa = {"amx": value, "avx512": value, "avx2": value / 2, "neon": value / 2}
        efficiency.CPU_PROFILES[engine] = efficiency.CPU_PROFILES[engine]._replace(matmul_flops_per_cycle=per_isa)

    return Constant(
        "matmul_flops_per_cycle[amx]",
        lambda: efficiency.CPU_PROFILES[engine].matmul_flops_per_cycle["amx"],
        set_value,
        bounds,
        prior,
    )


def _module_constant(name: str, bounds: tuple[float, float], prior: float) -> Constant:
    return Constant(name, lambda: float(getattr(llm, name)), lambda value: setattr(llm, name, value), bounds, prior)


@dataclass(frozen=True)
class Fit:
    name: str
    constants: tuple[Constant, ...]
    covers: Callable[[Case], bool]  # the rows this fit constrains

    def rows(self, row_ids: list[str]) -> list[str]:
        return [r for r in row_ids if self.covers(CASES[r])]


def _is_moe(case: Case) -> bool:
    arch = lookup(case.model).arch
    return arch is not None and arch.is_moe


def _speed_rows(engine: str, on_cpu: bool) -> Callable[[Case], bool]:
    return lambda c: c.engine == engine and (c.cpu is not None) == on_cpu and c.family in SPEED_FAMILIES


# Priors: the ranges of ../shared/notes/sizing.md (MBU 0.4-0.8, MFU 0.4-0.67, CPU DRAM efficiency 0.5-0.6) or,
# where it gives none, the middle of the bounds. Bounds keep the constants physical.
FITS: tuple[Fit, ...] = (
    Fit(
        "trtllm gpu",
        (
            _profile_constant(Engine.TRTLLM, "decode_bandwidth_utilization", (0.4, 0.85), 0.7),
            _profile_constant(Engine.TRTLLM, "matmul_utilization", (0.3, 0.9), 0.55),
            _profile_constant(Engine.TRTLLM, "fp8_matmul_utilization", (0.2, 0.9), 0.55),
            _profile_constant(Engine.TRTLLM, "step_overhead_ms_per_layer", (0.0, 0.1), 0.05),
            _profile_constant(Engine.TRTLLM, "allreduce_latency_us", (1.0, 100.0), 20.0),
            _profile_constant(Engine.TRTLLM, "overlap_exponent", (1.0, 8.0), 2.0),
        ),
        _speed_rows("trtllm", on_cpu=False),
    ),
    Fit(
        "vllm gpu",
        (
            _profile_constant(Engine.VLLM, "decode_bandwidth_utilization", (0.4, 0.85), 0.7),
            _profile_constant(Engine.VLLM, "int8_weight_only_bandwidth_factor", (0.4, 1.0), 0.7),
            _profile_constant(Engine.VLLM, "int4_weight_only_bandwidth_factor", (0.3, 1.0), 0.65),
            _profile_constant(Engine.VLLM, "step_overhead_ms_per_layer", (0.0, 0.1), 0.05),
            _profile_constant(Engine.VLLM, "allreduce_latency_us", (1.0, 100.0), 20.0),
        ),
        # gpt-fast's Mixtral copies the selected experts' weights every step (an index gather) before using them,
        # a cost vLLM's fused MoE kernel does not have: those rows are scored, not fitted.
        lambda c: _speed_rows("vllm", on_cpu=False)(c) and not _is_moe(c),
    ),
    Fit(
        "llamacpp gpu",
        (
            _profile_constant(Engine.LLAMACPP, "decode_bandwidth_utilization", (0.4, 0.85), 0.7),
            _profile_constant(Engine.LLAMACPP, "int4_weight_only_bandwidth_factor", (0.3, 1.0), 0.65),
            _profile_constant(Engine.LLAMACPP, "matmul_utilization", (0.05, 0.9), 0.45),
            _profile_constant(Engine.LLAMACPP, "step_overhead_ms_per_layer", (0.0, 0.2), 0.05),
            _profile_constant(Engine.LLAMACPP, "weight_only_matmul_factor", (0.3, 1.0), 1.0),
            _profile_constant(Engine.LLAMACPP, "hopper_matmul_fraction", (0.3, 1.0), 1.0),
        ),
        _speed_rows("llamacpp", on_cpu=False),
    ),
    Fit(
        "llamacpp cpu",
        (
            _cpu_constant(Engine.LLAMACPP, "bandwidth_per_core_gbps", (1.0, 20.0), 8.0),
            _cpu_flops_constant(Engine.LLAMACPP, (4.0, 128.0), 32.0),
        ),
        _speed_rows("llamacpp", on_cpu=True),
    ),
    Fit(
        "vllm memory",
        (
            # prior: fp32 logits of an 8192-token profiling batch, 32 KiB per vocabulary entry
            _module_constant("ACTIVATION_GIB_PER_VOCAB", (0.0, 0.0001), 8192 * 4 / 2**30),
        ),
        lambda c: c.family == "memory" and c.engine == "vllm",
    ),
)


@contextmanager
def constants_kept(fits: tuple[Fit, ...] = FITS) -> Iterator[None]:
    """Restore every constant the fits touch, whatever the block changed."""
    saved = [(c, c.get()) for f in fits for c in f.constants]
    try:
        yield
    finally:
        for constant, value in saved:
            constant.set(value)


def fit(spec: Fit, rows: list[str], measured: dict[str, float], run: Callable[[str], float]) -> list[float]:
    """Values of `spec`'s constants that best predict `rows` (squared log error), from the priors. Leaves them set."""
    constants = spec.constants

    def residuals(values: list[float]) -> list[float]:
        for constant, value in zip(constants, values, strict=True):
            constant.set(float(value))
        return [math.log(max(run(r), 1e-12) / measured[r]) for r in rows]

    lower = [c.bounds[0] for c in constants]
    upper = [c.bounds[1] for c in constants]
    # soft_l1: a robust loss, so that one odd row (p51) bends the fit less than squared logs would let it
    start = [c.prior for c in constants]
    result = least_squares(residuals, start, bounds=(lower, upper), loss="soft_l1", f_scale=0.1, xtol=1e-6, ftol=1e-6)
    values = [float(v) for v in result.x]
    residuals(values)
    return values


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
    measured = {row["id"]: float(row["value"]) for row in calibration_rows()}
    for spec in FITS:
        rows = spec.rows(list(measured))
        before = [c.get() for c in spec.constants]
        with constants_kept():
            values = fit(spec, rows, measured, run_case)
            rms = math.sqrt(sum(math.log(run_case(r) / measured[r]) ** 2 for r in rows) / len(rows))
        print(f"{spec.name}: rms log error {rms:.3f} on {len(rows)} rows ({', '.join(rows)})")
        for constant, old, new in zip(spec.constants, before, values, strict=True):
            print(f"  {constant.name:38} {old:10.4g} -> {new:10.4g}")
    for unit, rows in ENCODER_FITS.items():
        value = fit_encoder_unit(unit, rows)
        before_unit = efficiency.CPU_ITEM_MATMUL_UTILIZATION[unit]
        print(f"CPU items, {unit}: fitted on {', '.join(rows)}: {before_unit:.4g} -> {value:.4g}")


if __name__ == "__main__":
    main()

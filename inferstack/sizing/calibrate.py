"""`inferstack calibrate RESULT…`: load-test results into a calibration file (sizing/calibration.py reads it).

Each result (`inferstack loadtest URL --workload W --json`, run at the plan's own rate and token lengths against one
server) measured a p95 TTFT and TPOT at a load. The calibration is the pair of factors on the speed model's prefill and
decode step times with which the planner's own prediction for that server at that load — its service times and its
queueing alike (`evaluate.predict_llm_replica`) — gives the measured p95s: solved, not taken as the raw ratios of
measured to planned, which queueing would amplify (a TTFT ratio of 1.53 once moved a re-planned p95 from 202 to 455 ms
against 309 ms measured). Several results of one deployment are fitted together: the factors at which the mean log
error of each figure over them is 0.

A result is refused when the server answered as another model than the plan's (`loadtest` records the id it served,
and the engine where the server names it) unless `--force`: a stub or the wrong deployment would otherwise calibrate
a real one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from inferstack.documents import parse_document, read_input_file
from inferstack.errors import InputError, Problem, input_error
from inferstack.runtimes import RUNTIME_FACTS
from inferstack.sizing.calibration import (
    MAX_FACTOR,
    MIN_FACTOR,
    Calibration,
    CalibrationRow,
    hardware_key,
)
from inferstack.sizing.catalog import offers
from inferstack.sizing.demand import demand_of
from inferstack.sizing.evaluate import predict_llm_replica
from inferstack.sizing.models import resolve
from inferstack.sizing.planner import candidate_for
from inferstack.spec import Precision, WorkloadSpec

RESULT_EXAMPLE = "inferstack loadtest URL --workload WORKLOAD --json > result.json"
FIT_TOLERANCE = 0.005  # the fitted prediction within 0.5 % of each measured p95
FIT_ROUNDS = 60
# What a server's /v1/models says of its engine (`owned_by`, a load test's `served_by`), where it names one.
ENGINES_BY_OWNER = {facts.models_owner: facts.engines for facts in RUNTIME_FACTS.values() if facts.models_owner}


@dataclass(frozen=True)
class MeasuredRun:
    """One load test: the deployment it measured, the load it offered one model process, and its p95s."""

    path: Path
    key: tuple[str, str, str, str]  # model, precision, engine, hardware: what a calibration row matches
    predict: Callable[[float, float], tuple[float, float]]  # (prefill, decode factors) → planned p95 TTFT, TPOT
    rate_per_process: float
    ttft_p95_ms: float
    tpot_p95_ms: float


def calibrate(results: Sequence[Path], *, force: bool = False) -> Calibration:
    """One row per deployment measured, its factors fitted to all of its results at once."""
    grouped: dict[tuple[str, str, str, str], list[MeasuredRun]] = defaultdict(list)
    for path in results:
        run = measured_run(path, force=force)
        grouped[run.key].append(run)
    rows, problems = [], []
    for (model, precision, engine, hardware), runs in grouped.items():
        fitted = fit_factors(runs)
        if isinstance(fitted, Problem):
            problems.append(fitted)
            continue
        rows.append(CalibrationRow(
            model=model, precision=precision, engine=engine, hardware=hardware, ttft_factor=round(fitted[0], 4),
            tpot_factor=round(fitted[1], 4), load_tests=len(runs), sources=[str(run.path) for run in runs],
            measured_at_requests_per_s=round(_geomean([run.rate_per_process for run in runs]), 4)))
    if problems:
        raise InputError(problems)
    return Calibration(rows=rows)


def fit_factors(runs: Sequence[MeasuredRun]) -> tuple[float, float] | Problem:
    """The prefill and decode factors with which the planner predicts the runs' measured p95 TTFT and TPOT at their
    loads: each factor moved by its figure's measured/predicted ratio (the geometric mean over the runs) in turn,
    decode first (TTFT depends on both). One run is matched exactly; several, at the factors where their log errors
    balance (the mean log ratio of each figure is 0)."""
    prefill, decode = 1.0, 1.0
    for _ in range(FIT_ROUNDS):
        decode = _bounded(decode * _geomean([run.tpot_p95_ms / run.predict(prefill, decode)[1] for run in runs]))
        prefill = _bounded(prefill * _geomean([run.ttft_p95_ms / run.predict(prefill, decode)[0] for run in runs]))
        ttft_off = _geomean([run.ttft_p95_ms / run.predict(prefill, decode)[0] for run in runs])
        tpot_off = _geomean([run.tpot_p95_ms / run.predict(prefill, decode)[1] for run in runs])
        if abs(ttft_off - 1) <= FIT_TOLERANCE and abs(tpot_off - 1) <= FIT_TOLERANCE:
            return prefill, decode
    first = runs[0]
    ttft, tpot = first.predict(prefill, decode)
    model, _, _, hardware = first.key
    return Problem("RESULT", f"no prefill and decode factors within {MIN_FACTOR}-{MAX_FACTOR}x make the plan predict "
                   f"the measured p95 TTFT {first.ttft_p95_ms:g} ms and TPOT {first.tpot_p95_ms:g} ms for {model} on "
                   f"{hardware} (closest: {ttft:.0f} ms and {tpot:.1f} ms)", value=str(first.path),
                   fix="check that the URL served the planned deployment and that the test machine was not the "
                   "bottleneck")


def _geomean(values: Sequence[float]) -> float:
    """The geometric mean; a ratio against a saturated prediction (infinite time) counts as a very small one."""
    return math.exp(sum(math.log(min(max(value, 1e-9), 1e9)) for value in values) / len(values))


def _bounded(factor: float) -> float:
    return min(MAX_FACTOR, max(MIN_FACTOR, factor))


def measured_run(path: Path, *, force: bool = False) -> MeasuredRun:
    """A result file as a measured run, or an InputError that says why it cannot calibrate anything."""
    text = read_input_file(path, field="RESULT", what="a load-test result", example=RESULT_EXAMPLE)
    data: Any = parse_document(text, suffix=".json", source=str(path), field="RESULT")
    plan = data.get("plan") if isinstance(data, dict) else None

    def refuse(message: str, fix: str = f"give results of `{RESULT_EXAMPLE}`") -> InputError:
        return input_error("RESULT", message, value=str(path), fix=fix)

    if not isinstance(plan, dict) or not isinstance(plan.get("basis"), dict):
        raise refuse("is not a load-test result made with --workload by this inferstack (no plan to fit to)")
    if plan.get("as_planned") is not True:
        raise refuse("was run at another rate or token lengths than the plan's (--rate, --concurrency, "
                     "--input-tokens or --output-tokens): its figures are not the plan's to compare")
    if plan["basis"].get("fleet"):
        raise refuse("was run against a load balancer (--fleet), whose share per server is not known",
                     fix="load-test one server, as `loadtest --workload` does without --fleet")
    if not data.get("requests_ok") or not data.get("requests_per_s"):
        raise refuse("has no successful request: it measured nothing")
    if not force:
        _check_served(data, plan, refuse)
    ttft, tpot = (data.get(figure, {}).get("p95") for figure in ("ttft_ms", "tpot_ms"))
    if not isinstance(ttft, int | float) or not isinstance(tpot, int | float) or min(ttft, tpot) <= 0:
        raise refuse("has no measured p95 TTFT and TPOT above 0 ms (an LLM deployment's result is needed)")
    return _run(path, plan, float(data["requests_per_s"]), float(ttft), float(tpot), refuse)


def _check_served(data: dict[str, Any], plan: dict[str, Any], refuse: Callable[..., InputError]) -> None:
    """The server answered as the plan's model (its name or Hugging Face id) and, where it names one, engine."""
    served, planned = str(data.get("model", "")), str(plan.get("model"))
    known = {planned.lower(), str(plan["basis"].get("source_uri") or "").lower()} - {""}
    if served.lower() not in known:
        raise refuse(f"measured a server that answered as model {served!r}, not the plan's {planned}",
                     fix="load-test the planned deployment, or pass --force if the name is only served differently")
    engines = ENGINES_BY_OWNER.get(str(data.get("served_by", "")))
    if engines is not None and plan.get("engine") not in engines:
        raise refuse(f"measured a server of engine {' or '.join(engines)}, not the plan's {plan.get('engine')}",
                     fix="load-test the planned deployment, or pass --force")


def _run(path: Path, plan: dict[str, Any], requests_per_s: float, ttft: float, tpot: float,
         refuse: Callable[..., InputError]) -> MeasuredRun:
    basis = plan["basis"]
    try:
        spec = WorkloadSpec.model_validate(basis.get("workload"))
    except ValidationError:
        raise refuse("holds a workload this inferstack cannot read") from None
    offer = next((o for o in offers() if (o.cloud, o.name) == (basis.get("cloud"), basis.get("offer"))), None)
    if offer is None:
        raise refuse(f"measured {basis.get('offer')} on {basis.get('cloud')}, which the catalog does not have")
    demand = demand_of(spec, resolve(spec.model))
    processes = int(basis.get("processes") or 1)
    chosen = None
    if spec.planner_chooses_precision:  # the plan's precision is the one the planner chose
        try:
            chosen = Precision(str(plan.get("precision")))
        except ValueError:
            raise refuse(f"names precision {plan.get('precision')!r}, which inferstack does not know") from None
    candidate = candidate_for(demand, offer, processes, chosen)
    if isinstance(candidate, str):
        raise refuse(f"measured a deployment the planner would not make: {candidate}")
    hardware = hardware_key(offer.gpu.id if offer.gpu else None, offer.gpu_count, offer.name)
    key = (resolve(spec.model).name, candidate.precision.value, candidate.engine.value, hardware)
    rate = requests_per_s / processes
    slots = basis.get("slots")

    def predict(prefill: float, decode: float) -> tuple[float, float]:
        row = CalibrationRow(model=key[0], precision=key[1], engine=key[2], hardware=key[3], ttft_factor=prefill,
                             tpot_factor=decode, load_tests=1, sources=[str(path)])
        calibrated = replace(demand, calibration=Calibration(rows=[row]))
        prediction = predict_llm_replica(calibrated, candidate, rate, int(slots) if slots else None)
        return prediction.ttft_p95_ms, prediction.tpot_p95_ms

    return MeasuredRun(path, key, predict, rate, ttft, tpot)

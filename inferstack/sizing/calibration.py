"""Calibration from your own load tests: measured speed of one model × precision × engine × hardware.

`inferstack calibrate RESULT…` reads `inferstack loadtest URL --workload W --json` results and writes one row
per deployment measured: the measured p95 over the plan's p95, for TTFT and TPOT (the geometric mean when
several results measured it). `plan --calibration FILE` and `estimate --calibration FILE` then multiply the speed
model's prefill time by the TTFT factor and its decode-step time by the TPOT factor wherever a row matches,
and say so (the plan's rationale, the estimate's notes); elsewhere the fitted engine profiles stand.

The factors are taken against uncalibrated predictions (`loadtest` plans without a calibration), so they do not
compound; only results run at the plan's own rate and token lengths are taken. TPOT is the decode step, so its
factor carries over directly. TTFT at load includes queueing, which grows faster than linearly with step times:
scaling the prefill by the TTFT ratio is a first-order correction that can overshoot (on the stub server a TTFT
factor of 1.53 moved a plan's p95 TTFT from 202 to 455 ms, against 309 ms measured, and the planner added a
replica). A row applies to the hardware it was measured on only: a GPU by id and count (the same on every
cloud), a CPU server by its instance type.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from inferstack.documents import parse_document, read_input_file
from inferstack.errors import InputError, Problem, input_error
from inferstack.spec import CALIBRATION_FILE_RULE, CalibrationFile, problems_from_validation

FORMAT_VERSION = 1
# A measurement ten times off the model says more about the test (wrong deployment, an overloaded client) than
# about the engine: factors outside these bounds are refused.
MIN_FACTOR, MAX_FACTOR = 0.1, 10.0
RESULT_EXAMPLE = "inferstack loadtest URL --workload WORKLOAD --json > result.json"


class CalibrationRow(BaseModel):
    """One measured deployment and how far its speed was from the model's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="Model name, as in the plan (llama-3.1-8b).")
    precision: str = Field(description="Checkpoint precision (bf16, fp8, q4_k_m …).")
    engine: str = Field(description="Serving engine (vllm, llamacpp …).")
    hardware: str = Field(description="'1x L40S' (GPU id and count) or 'cpu:<instance type>'.")
    ttft_factor: float = Field(ge=MIN_FACTOR, le=MAX_FACTOR, description="Measured / planned p95 TTFT: scales prefill.")
    tpot_factor: float = Field(ge=MIN_FACTOR, le=MAX_FACTOR, description="Measured / planned p95 TPOT: scales decode.")
    load_tests: int = Field(ge=1, description="Load-test results behind the factors.")
    sources: list[str] = Field(description="The result files, as given to `inferstack calibrate`.")

    def sentence(self, source: str) -> str:
        return (f"speed calibrated by {self.load_tests} load test(s) of {self.model} {self.precision} on "
                f"{self.engine}, {self.hardware} ({source}): prefill x{self.ttft_factor:.2f}, "
                f"decode x{self.tpot_factor:.2f}")


class Calibration(BaseModel):
    """A calibration file: rows keyed by model, precision, engine and hardware."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inferstack_calibration: int = Field(FORMAT_VERSION, ge=FORMAT_VERSION, le=FORMAT_VERSION)
    rows: list[CalibrationRow]
    source: str = Field("", exclude=True, description="The file it was read from, for the sentences.")

    def match(self, model: str, precision: str, engine: str, hardware: str) -> CalibrationRow | None:
        return next((r for r in self.rows if (r.model, r.precision, r.engine, r.hardware) ==
                     (model, precision, engine, hardware)), None)


def hardware_key(gpu_id: str | None, gpu_count: int, instance_type: str) -> str:
    """How a row names hardware: a GPU by id and count (the same on every cloud), a CPU server by its type."""
    return f"{gpu_count}x {gpu_id}" if gpu_id else f"cpu:{instance_type}"


def load_calibration(path: Path) -> Calibration:
    """Read a calibration file written by `inferstack calibrate` (JSON)."""
    text = read_input_file(path, field="--calibration", what="a calibration file",
                           example="calibration.json (from `inferstack calibrate RESULT…`)")
    return parse_calibration(text, source=str(path), field="--calibration", suffix=path.suffix)


def parse_calibration(text: str, *, source: str, field: str, suffix: str = ".json") -> Calibration:
    """A calibration from the text of its file; `source` names it in errors and in the plan's rationale."""
    data = parse_document(text, suffix=suffix, source=source, field=field)
    try:
        calibration = Calibration.model_validate(data)
    except ValidationError as error:
        raise InputError(problems_from_validation(error, model=Calibration), source=source) from None
    return calibration.model_copy(update={"source": source})


#### A stack's calibration (inferstack:calibrationFile) ####

STACK_CALIBRATION_KEY = "inferstack:calibrationFile"


@dataclass(frozen=True)
class StackCalibration:
    """The calibration a stack sizes with, and the sha256 of its file (what a pin records)."""

    calibration: Calibration
    sha256: str


def check_stack_calibration_file(value: object) -> str:
    """The `inferstack:calibrationFile` value, refused unless it is `calibrations/<name>.json` (CalibrationFile)."""
    try:
        return TypeAdapter(CalibrationFile).validate_python(value)
    except ValidationError:
        raise input_error(STACK_CALIBRATION_KEY, CALIBRATION_FILE_RULE, value=value,
                          fix="pulumi config set inferstack:calibrationFile calibrations/<name>.json, the file "
                          "written by `inferstack calibrate RESULT… --output calibrations/<name>.json`") from None


def stack_calibration(relative: str, content: bytes) -> StackCalibration:
    """A stack's calibration from its file's bytes (read from the project, or from git at a ref by `diff`)."""
    text = content.decode("utf-8", errors="replace")
    calibration = parse_calibration(text, source=relative, field=STACK_CALIBRATION_KEY)
    return StackCalibration(calibration, hashlib.sha256(content).hexdigest())


def read_stack_calibration(project_dir: Path, value: object) -> StackCalibration:
    """The calibration `inferstack:calibrationFile` names, read from the project folder (never outside it: the
    name is checked, and a link that leads out is refused)."""
    relative = check_stack_calibration_file(value)
    path = project_dir / relative
    if not path.resolve().is_relative_to(project_dir.resolve()):
        raise input_error(STACK_CALIBRATION_KEY, "leads outside the Pulumi project (a symbolic link)", value=relative,
                          fix="commit the calibration file itself under calibrations/")
    if not path.is_file():
        raise input_error(STACK_CALIBRATION_KEY, "file not found in the Pulumi project", value=relative,
                          fix=f"write it with `inferstack calibrate RESULT… --output {relative}` and commit it")
    return stack_calibration(relative, path.read_bytes())


#### From load-test results ####


def _measured_ratios(path: Path) -> tuple[tuple[str, str, str, str], float, float]:
    """The deployment a result measured, and its measured/planned p95 TTFT and TPOT."""
    text = read_input_file(path, field="RESULT", what="a load-test result", example=RESULT_EXAMPLE)
    data: Any = parse_document(text, suffix=".json", source=str(path), field="RESULT")
    plan = data.get("plan") if isinstance(data, dict) else None

    def refuse(message: str) -> InputError:
        return input_error("RESULT", message, value=str(path), fix=f"give results of `{RESULT_EXAMPLE}`")

    if not isinstance(plan, dict) or not isinstance(plan.get("comparison"), list):
        raise refuse("is not a load-test result made with --workload (no plan to compare with)")
    if plan.get("as_planned") is not True:
        raise refuse("was run at another rate or token lengths than the plan's (--rate, --concurrency, "
                     "--input-tokens or --output-tokens): its figures are not the plan's to compare")
    if not data.get("requests_ok"):
        raise refuse("has no successful request: it measured nothing")
    rows = {row.get("figure"): row for row in plan["comparison"] if isinstance(row, dict)}
    ratios = []
    for figure in ("p95 TTFT", "p95 TPOT"):
        row = rows.get(figure) or {}
        planned, measured = row.get("plan"), row.get("measured")
        if not isinstance(planned, int | float) or not isinstance(measured, int | float) or min(planned, measured) < 0:
            raise refuse(f"has no planned and measured {figure} (an LLM deployment's result is needed)")
        if planned == 0 or measured == 0:
            # A model so small that the speed model times it at 0 ms (an engine whose server floor is not measured,
            # efficiency.ServingOverhead): no factor scales zero into what was measured.
            raise refuse(f"has a {figure} of 0 ms ({'planned' if planned == 0 else 'measured'}): no factor "
                         "relates the two, so there is nothing to calibrate")
        ratios.append(measured / planned)
    accelerator = plan.get("accelerator")
    hardware = hardware_key(accelerator, int(plan.get("accelerators_per_server") or 0), str(plan.get("instance_type")))
    key = (str(plan.get("model")), str(plan.get("precision")), str(plan.get("engine")), hardware)
    return key, ratios[0], ratios[1]


def calibrate(results: Sequence[Path]) -> Calibration:
    """One row per deployment measured: the geometric mean of its results' measured/planned p95 ratios."""
    grouped: dict[tuple[str, str, str, str], list[tuple[Path, float, float]]] = defaultdict(list)
    for path in results:
        key, ttft, tpot = _measured_ratios(path)
        grouped[key].append((path, ttft, tpot))
    rows, problems = [], []
    for (model, precision, engine, hardware), measured in grouped.items():
        ttft = math.exp(sum(math.log(m[1]) for m in measured) / len(measured))
        tpot = math.exp(sum(math.log(m[2]) for m in measured) / len(measured))
        for name, factor in (("TTFT", ttft), ("TPOT", tpot)):
            if not MIN_FACTOR <= factor <= MAX_FACTOR:
                problems.append(Problem("RESULT", f"measured {name} is {factor:.2f}x the plan's for {model} on "
                                        f"{hardware}, outside {MIN_FACTOR}-{MAX_FACTOR}x", value=str(measured[0][0]),
                                        fix="check that the URL served the planned deployment and that the test "
                                        "machine was not the bottleneck"))
        if problems:
            continue
        rows.append(CalibrationRow(model=model, precision=precision, engine=engine, hardware=hardware,
                                   ttft_factor=round(ttft, 4), tpot_factor=round(tpot, 4), load_tests=len(measured),
                                   sources=[str(m[0]) for m in measured]))
    if problems:
        raise InputError(problems)
    return Calibration(rows=rows)

"""Calibration from your own load tests: measured speed of one model × precision × engine × hardware.

A calibration file (written by `inferstack calibrate RESULT…`, sizing/calibrate.py) has one row per deployment
measured: a factor on the speed model's prefill time and one on its decode-step time, fitted so that the planner's
prediction at the measured load gives the measured p95 TTFT and TPOT. `plan --calibration FILE` and `estimate
--calibration FILE` multiply the step times by them wherever a row matches, and say so (the plan's rationale, the
estimate's notes); elsewhere the fitted engine profiles stand. A row applies to the hardware it was measured on
only: a GPU by id and count (the same on every cloud), a CPU server by its instance type.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from inferstack.documents import parse_document, read_input_file
from inferstack.errors import InputError, input_error
from inferstack.spec import CALIBRATION_FILE_RULE, CalibrationFile, problems_from_validation

FORMAT_VERSION = 1
# A measurement ten times off the model says more about the test (wrong deployment, an overloaded client) than
# about the engine: factors outside these bounds are refused.
MIN_FACTOR, MAX_FACTOR = 0.1, 10.0


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
    measured_at_requests_per_s: float | None = Field(
        default=None, description="The load per model process the results were measured at (their mean); None in "
                                  "files written before it was recorded.")

    def sentence(self, source: str) -> str:
        fitted = (f", fitted so that the prediction at the measured {self.measured_at_requests_per_s:g} requests/s "
                  "per model process is the measured p95 TTFT and TPOT"
                  if self.measured_at_requests_per_s is not None else "")
        return (f"speed calibrated by {self.load_tests} load test(s) of {self.model} {self.precision} on "
                f"{self.engine}, {self.hardware} ({source}): prefill x{self.ttft_factor:.2f}, "
                f"decode x{self.tpot_factor:.2f}{fitted}")


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

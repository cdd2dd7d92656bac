"""Plans pinned per stack: `inferstack pin stacks/Pulumi.<stack>.yaml` writes the plan the stack deploys next to its
config (`Pulumi.<stack>.plan.json`), to be committed with it.

A stack that gives a workload is sized when `pulumi up` runs; without a pin, a catalog or price update could
change its servers with nothing in the pull request showing why. With a pin the program deploys the pinned plan,
and refuses a workload (or stack cloud, stage or region) that changed since the pin was written, naming the
command that re-plans. The pin records what the plan was made from: the workload's hash, the sha256 of the stack's
calibration file (inferstack:calibrationFile; a changed one is refused the same way), the inferstack version,
the date, and the prices' sources and dates (in the plan report it holds).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferstack import __version__
from inferstack.errors import InputError, input_error
from inferstack.plan import DeploymentPlan, PlanReport
from inferstack.spec import ModelSpec, WorkloadSpec, problems_from_validation

PINNED_SUFFIX = ".plan.json"


class PinnedPlan(BaseModel):
    """What `inferstack pin` writes for a stack."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inferstack_version: str = Field(description="The inferstack that made the plan.")
    written_on: str = Field(description="The run date the plan was made on (prices are aged against it).")
    workload_sha256: str = Field(description="Hash of the workload as the stack sizes it (workload_sha256).")
    calibration_sha256: str | None = Field(default=None, description="sha256 of the stack's calibration file "
                                           "(inferstack:calibrationFile) the plan was sized with; None: none.")
    report: PlanReport = Field(description="The plan report for the stack's cloud; its chosen plan is deployed.")

    def written_for(self, workload: WorkloadSpec, calibration_sha256: str | None = None) -> bool:
        """Whether this pin was written for `workload` as the stack sizes it now, with that calibration file."""
        return self.workload_sha256 == workload_sha256(workload) and self.calibration_sha256 == calibration_sha256

    def chosen(self) -> DeploymentPlan:
        (outcome,) = self.report.clouds
        assert outcome.chosen is not None  # pin_stack writes feasible plans only
        return outcome.chosen


def pinned_path(stack_file: Path) -> Path:
    """`stacks/Pulumi.aws-prod.yaml` → `stacks/Pulumi.aws-prod.plan.json`."""
    return stack_file.with_name(stack_file.stem + PINNED_SUFFIX)


def workload_sha256(workload: WorkloadSpec) -> str:
    """The workload's identity for a pin: its canonical JSON, a model config file by its content (not its path,
    which differs between checkouts)."""
    data: dict[str, Any] = workload.model_dump(mode="json")
    if isinstance(workload.model, ModelSpec) and workload.model.config is not None:
        config = Path(workload.model.config)
        data["model"]["config"] = hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else None
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def pin_stack(stack_file: Path) -> tuple[Path, PinnedPlan]:
    """Plan the stack's workload for its cloud, stage and region, and write the pin next to the stack file."""
    from inferstack.diff import read_stack_calibration_of, read_stack_workload
    from inferstack.sizing.catalog import run_date
    from inferstack.sizing.planner import plan_workload

    workload, prices_file = read_stack_workload(stack_file)
    measured = read_stack_calibration_of(stack_file)
    (cloud,) = workload.placement.clouds
    report = plan_workload(workload, clouds=[cloud], prices_file=prices_file,
                           calibration=measured.calibration if measured else None)
    report.outcome(cloud).require_chosen(str(stack_file), after="; nothing was written")
    pinned = PinnedPlan(inferstack_version=__version__, written_on=run_date().isoformat(),
                        workload_sha256=workload_sha256(workload),
                        calibration_sha256=measured.sha256 if measured else None, report=report)
    path = pinned_path(stack_file)
    path.write_text(pinned.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path, pinned


def read_pinned(path: Path, workload: WorkloadSpec, *, stack_file: str,
                calibration_sha256: str | None = None) -> DeploymentPlan:
    """The plan pinned at `path`, for the workload (and calibration file) the stack gives now; refused when either
    changed since."""
    try:
        pinned = PinnedPlan.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise InputError(problems_from_validation(error, prefix=path.name),
                         source=f"{path} (rewrite it: inferstack pin {stack_file})") from None
    if pinned.calibration_sha256 != calibration_sha256:
        raise input_error("inferstack:calibrationFile", f"changed since its plan was pinned in {path.name} on "
                          f"{pinned.written_on} (the calibration file's content, or whether the stack names one)",
                          fix=f"re-plan with `inferstack pin {stack_file}`, review the new plan (inferstack diff) "
                          f"and commit {path.name} with the change")
    if not pinned.written_for(workload, calibration_sha256):
        raise input_error("inferstack:workload", f"changed since its plan was pinned in {path.name} on "
                          f"{pinned.written_on} (the workload, or the stack's cloud, stage or region)",
                          fix=f"re-plan with `inferstack pin {stack_file}`, review the new plan (inferstack diff) "
                          f"and commit {path.name} with the change")
    return pinned.chosen()

"""The plan an InferenceServer deploys: the one it is given, or the cheapest one sized from the workload it is given.

Other languages send a plan or a workload through the Pulumi package as text or a mapping (their SDKs cannot build a
pydantic model); both are read into models here, and must be plain values when the component is created: the plan
decides what is created.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi

from inferstack.clouds import Cloud
from inferstack.components.backend import backend_for
from inferstack.documents import parse_document
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan
from inferstack.plan_file import read_plan
from inferstack.spec import WorkloadSpec, for_stack, parse_workload

if TYPE_CHECKING:
    from inferstack.sizing.calibration import Calibration


def resolve_plan(checked: Mapping[str, Any], name: str) -> DeploymentPlan:
    """The plan of an InferenceServer's type-checked arguments: exactly one of `plan` and `workload` (sized for
    `cloud`, or for the workload's only allowed cloud)."""
    plan = _plan_model(checked["plan"], checked.get("cloud"), name) if "plan" in checked else None
    workload = _workload_model(checked["workload"], f"{name}.workload") if "workload" in checked else None
    if (plan is None) == (workload is None):
        raise input_error(f"{name}.plan", "give exactly one of plan or workload", value=sorted(checked),
                          fix="pass plan=<DeploymentPlan from `inferstack plan --json`> or workload=<WorkloadSpec>")
    cloud: Cloud | None = checked.get("cloud")
    if plan is not None:
        if cloud is not None and cloud != plan.cloud:
            raise input_error(f"{name}.cloud", f"differs from the plan's cloud ({plan.cloud})", value=cloud,
                              fix="drop cloud, or plan the workload for this cloud")
        return plan
    assert workload is not None
    if cloud is None and len(workload.placement.clouds) == 1:
        cloud = workload.placement.clouds[0]
    if cloud is None:
        raise input_error(f"{name}.cloud", "is required with a workload that allows several clouds",
                          value=workload.placement.clouds, fix="pass cloud='aws' (or another allowed cloud)")
    return size_workload(workload, cloud, field=f"{name}.workload")


def size_workload(workload: WorkloadSpec, cloud: Cloud, *, field: str = "workload",
                  prices_file: Path | None = None, calibration: Calibration | None = None) -> DeploymentPlan:
    """The cheapest feasible plan for `workload` on `cloud`, in the region the cloud's provider deploys to;
    `calibration`: measured speeds (the stack's inferstack:calibrationFile).

    Raises InfeasibleError with the planner's reasons when nothing fits.
    """
    try:
        from inferstack.sizing import plan_workload  # imported here: only the workload path needs sizing
    except ImportError:
        raise input_error(field, "cannot be sized: inferstack.sizing.plan_workload is not available",
                          fix="pass a plan instead (inferstack plan WORKLOAD --json)") from None
    workload = for_stack(workload, cloud, region=backend_for(cloud).configured_region(), cloud_field=field)
    report = plan_workload(workload, clouds=[cloud], prices_file=prices_file, calibration=calibration)
    return report.outcome(cloud).require_chosen(field)


def _plan_model(value: Any, cloud: str | None, name: str) -> DeploymentPlan:
    """`plan` as a model, however it came: a model (Python), or the JSON text or mapping of a plan report or one plan
    (another language, through the Pulumi package)."""
    if isinstance(value, DeploymentPlan):
        return value
    field = f"{name}.plan"
    _require_known(value, field)
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError as error:
            raise input_error(field, f"is not JSON: {error}", fix="pass the text `inferstack plan WORKLOAD --json` "
                              "wrote, e.g. the contents of plan.json") from None
    reported = data.get("clouds") if isinstance(data, Mapping) else None
    if cloud is None and isinstance(reported, list):
        clouds = [outcome.get("cloud") for outcome in reported if isinstance(outcome, Mapping)]
        if len(clouds) != 1:
            raise input_error(f"{name}.cloud", "is required with a plan report that covers several clouds",
                              value=clouds, fix="pass the cloud whose deployment to create, e.g. cloud='aws'")
        cloud = clouds[0]
    return read_plan(data, cloud, source=field)  # type: ignore[arg-type]  # an unknown cloud finds no deployment


def _workload_model(value: Any, field: str) -> WorkloadSpec:
    """`workload` as a model: a model (Python), or a workload file's fields as a mapping or its YAML or JSON text."""
    if isinstance(value, WorkloadSpec):
        return value
    _require_known(value, field)
    data = parse_document(value, suffix=".yaml", source="YAML text", field=field) if isinstance(value, str) else value
    return parse_workload(data, source=field)


def _require_known(value: Any, field: str) -> None:
    """The plan decides what to create, so it must be a plain value when the component is created."""
    if isinstance(value, pulumi.Output):
        raise input_error(field, "is an Output: it must be known when the component is created",
                          fix="read the file in your program (readFileSync, fn::readFile), not from a resource output")

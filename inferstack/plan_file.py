"""A plan as `inferstack plan --json` writes it (a plan report, or one deployment plan), read from data or a file and
checked: what a stack's `inferstack:plan`/`planFile` and the InferenceServer's `plan` argument take."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from inferstack.clouds import Cloud
from inferstack.errors import InputError, Problem, input_error
from inferstack.plan import DeploymentPlan, PlanReport


def load_plan(path: Path, cloud: Cloud) -> DeploymentPlan:
    """The plan for `cloud` in a file written by `inferstack plan --json` (a report, or a single plan)."""
    if not path.is_file():
        raise input_error("planFile", "file not found", value=str(path),
                          fix=f"write one with `inferstack plan WORKLOAD --cloud {cloud} --json > {path.name}`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise input_error("planFile", f"is not JSON: {error}", value=str(path)) from None
    return read_plan(data, cloud, source=str(path))


def read_plan(data: Any, cloud: Cloud, *, source: str) -> DeploymentPlan:
    """A DeploymentPlan from JSON data: a plan, or a plan report (its chosen deployment on `cloud`)."""
    if isinstance(data, dict) and "clouds" in data and "workload" in data and isinstance(data["workload"], dict):
        try:
            report = PlanReport.model_validate(data)
        except ValidationError as error:
            raise InputError(_plan_problems(error), source=source) from None
        outcome = next((o for o in report.clouds if o.cloud == cloud), None)
        if outcome is None or outcome.chosen is None:
            reasons = "; ".join(outcome.blocked_by) if outcome else f"the report has no result for {cloud}"
            raise input_error("plan", f"has no deployment on {cloud}: {reasons}", value=source,
                              fix=f"plan again with --cloud {cloud}")
        return outcome.chosen
    try:
        return DeploymentPlan.model_validate(data)
    except ValidationError as error:
        raise InputError(_plan_problems(error), source=source) from None


def _plan_problems(error: ValidationError) -> list[Problem]:
    """A plan is machine-written: say which fields are missing in one line, then anything else that is wrong."""
    fix = "use the JSON that `inferstack plan WORKLOAD --json` writes, unedited"
    missing = [".".join(map(str, e["loc"])) for e in error.errors() if e["type"] == "missing"]
    problems = [Problem("plan", f"is not a complete plan: missing {', '.join(missing)}", fix=fix)] if missing else []
    problems += [Problem("plan." + ".".join(map(str, e["loc"])), str(e["msg"]), value=e.get("input"), fix=fix)
                 for e in error.errors() if e["type"] != "missing"]
    return problems

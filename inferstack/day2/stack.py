"""A deployed stack's coordinates, from its stack file alone: its cloud and region, the tags its resources carry, and
the plan it deploys.

Without the Pulumi CLI, `status` and `logs` cannot read a stack's outputs from its backend (Pulumi Cloud, a bucket);
and those outputs would not be enough anyway (no canary group, no log group). Every resource the components create
carries the tags `project`, `stack` and `managed-by` (components/naming.py `resource_tags`) and is named after the
InferenceServer, `server` in the project's program (`server-group`, `server-canary-group`, ...): the cloud's API
finds them by those, the same way whatever backend holds the stack's state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferstack.clouds import Cloud
from inferstack.documents import parse_document, read_input_file
from inferstack.errors import InferstackError, input_error
from inferstack.pin import pinned_path, read_pin
from inferstack.plan import DeploymentPlan
from inferstack.spec import CLOUDS, PROVIDER_REGION_KEYS
from inferstack.stack_file import is_stack_file, project_dir_of, project_file, stack_config

DEPLOYMENT_NAME = "server"
"""The InferenceServer of the project's program (components/program.py SERVER_NAME, which imports Pulumi; a test checks
that the two agree): the prefix of every resource name."""
MANAGED_BY = "inferstack"
"""The `managed-by` tag (components/naming.py MANAGED_BY; a test checks that the two agree)."""
IDENTIFYING_TAGS = ("project", "stack", "managed-by")
"""The tags that tell one deployment's resources from every other's in the same account and region."""


class CloudQueryError(InferstackError):
    """The cloud's API failed, or found nothing of the stack; or the cloud cannot be asked yet. One line with the
    fix; exit status 2, as for every error a user can act on."""


@dataclass(frozen=True)
class DeployedStack:
    stack: str
    project: str
    cloud: Cloud
    region: str
    tags: Mapping[str, str]
    """The identifying tags its resources carry (IDENTIFYING_TAGS, as the stack's inferstack:tags may set them)."""
    plan: DeploymentPlan
    plan_source: str


    def nothing_found(self, what: str, fix: str) -> CloudQueryError:
        """The error for a stack of which the cloud's API found no `what`."""
        tags = ", ".join(f"{key}={value}" for key, value in self.tags.items())
        return CloudQueryError(f"found no {what} of stack {self.stack} in {self.cloud} {self.region}: nothing tagged "
                               f"{tags}. Fix: {fix}")


def read_deployed_stack(stack_file: Path) -> DeployedStack:
    """The coordinates of the stack `stack_file` configures (stacks/Pulumi.<stack>.yaml)."""
    if not is_stack_file(stack_file):
        raise input_error("STACK", "is not a Pulumi stack file (Pulumi.<stack>.yaml)", value=str(stack_file),
                          fix="give the stack's config file, e.g. stacks/Pulumi.aws-prod.yaml")
    config = stack_config(stack_file)
    cloud = config.get("inferstack:cloud")
    if cloud not in CLOUDS:
        raise input_error("inferstack:cloud", f"is not one of {', '.join(CLOUDS)}" if cloud else "is not set",
                          value=cloud, fix=f"set it in {stack_file}: inferstack:cloud: aws")
    stack = stack_file.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
    project = _project_name(stack_file)
    plan, plan_source = _deployed_plan(stack_file, config, cloud)
    region = config.get(PROVIDER_REGION_KEYS[cloud])
    given = config.get("inferstack:tags")
    tags = {"project": project, "stack": stack, "managed-by": MANAGED_BY,
            **(given if isinstance(given, dict) else {})}
    return DeployedStack(stack=stack, project=project, cloud=cloud,
                         region=region if isinstance(region, str) else plan.region,
                         tags={key: str(tags[key]) for key in IDENTIFYING_TAGS}, plan=plan, plan_source=plan_source)


def _project_name(stack_file: Path) -> str:
    """The Pulumi project's name (Pulumi.yaml `name`), which the resources' `project` tag carries."""
    project_file_path = project_dir_of(stack_file) / "Pulumi.yaml"
    text = read_input_file(project_file_path, field="Pulumi.yaml", what="the Pulumi project file",
                           example="Pulumi.yaml beside the stacks/ folder")
    data = parse_document(text, suffix=".yaml", source=str(project_file_path), field="Pulumi.yaml")
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise input_error("Pulumi.yaml", "has no project name", value=str(project_file_path),
                          fix="name the project: `name: inferstack`")
    return name


def _deployed_plan(stack_file: Path, config: Mapping[str, Any], cloud: Cloud) -> tuple[DeploymentPlan, str]:
    """The plan `pulumi up` deploys for the stack: its pin, the plan it gives, or (neither) its workload sized now."""
    pin = pinned_path(stack_file)
    if pin.is_file():
        return read_pin(pin, stack_file=str(stack_file)).chosen(), f"pinned in {pin.name}"
    if "inferstack:planFile" in config:
        from inferstack.plan_file import load_plan

        path = project_file(project_dir_of(stack_file), config["inferstack:planFile"], "inferstack:planFile")
        return load_plan(path, cloud), f"inferstack:planFile {path.name}"
    if "inferstack:plan" in config:
        from inferstack.plan_file import read_plan

        return read_plan(config["inferstack:plan"], cloud, source=f"{stack_file} (inferstack:plan)"), "inferstack:plan"
    return _sized_now(stack_file, cloud), ("sized now from the stack's workload (it has no pin): what `pulumi up` "
                                           "would deploy today, which may not be what was deployed")


def _sized_now(stack_file: Path, cloud: Cloud) -> DeploymentPlan:
    """The stack's workload planned today, as `pulumi up` plans a stack without a pin."""
    from inferstack.sizing.catalog import load_catalog
    from inferstack.sizing.planner import plan_workload
    from inferstack.stack_file import read_stack_calibration_of, read_stack_workload

    workload, prices_file = read_stack_workload(stack_file)
    measured = read_stack_calibration_of(stack_file)
    report = plan_workload(workload, clouds=[cloud], catalog=load_catalog(prices_file),
                           calibration=measured.calibration if measured else None)
    return report.outcome(cloud).require_chosen(str(stack_file))

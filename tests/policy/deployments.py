"""The deployments the policy pack is checked against: every example project, every stack file, and a public
deployment on every cloud (production: a fleet where the cloud's is built; and one server), each run through the
real program under Pulumi mocks with property dependencies kept. Each runs once per test session (cached): tests
that change a resource work on copies (`Registered.with_inputs`).
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from guardrails.core import PlainResource

from inferstack.plan import DeploymentPlan
from inferstack.preview import Recording, preview_deployment, preview_stack
from tests.policy.harness import REPO, Registered, dependencies_recorded, record_with_dependencies
from tests.sample_plans import sample_plan

EXAMPLES = sorted(path.parent.name for path in (REPO / "examples").glob("*/Pulumi.yaml"))
STACKS = sorted(path.name.removeprefix("Pulumi.").removesuffix(".yaml")
                for path in (REPO / "stacks").glob("Pulumi.*.yaml"))
API_KEY = "sk-policy-3c2b1a0f9e8d7c6b"
HUB_TOKEN = "hf_policyToken5a4b3c2d1e"

# What each cloud needs besides the plan to deploy everything, static assets and secrets included.
CLOUD_SETTINGS: Mapping[str, Mapping[str, Any]] = {
    "aws": {"inferstack:apiDomain": "api.example.com"},
    "gcp": {"inferstack:assetsDomain": "assets.example.com", "inferstack:apiDomain": "api.example.com"},
    "alibaba": {"inferstack:assetsDomain": "static.example.com", "inferstack:apiDomain": "api.example.com",
                "inferstack:apiCertificate": "12345678-ap-southeast-1",
                "inferstack-alibaba:kmsInstanceId": "kst-sgp00000000000000000",
                "inferstack-alibaba:kmsKeyId": "key-sgp00000000000000000",
                # The CDN domain's second phase (its CNAME points at it): online, certificate, https_force.
                "inferstack-alibaba:assetsDnsReady": "true"},
    "huawei": {"inferstack:assetsDomain": "assets.example.com", "inferstack:assetsCertificate": "scs1700000000001",
               "inferstack:apiDomain": "api.example.com",
               "inferstack:apiCertificate": "233a325e5e3e4ce8beeb320aa714cc12"},
}
PUBLIC = {"inferstack:allowedCidrs": ["0.0.0.0/0"], "inferstack:apiKey": API_KEY, "inferstack:hubToken": HUB_TOKEN}


@contextmanager
def _inside(folder: Path) -> Iterator[None]:
    """Examples read files next to their program (workload.yaml, plan.json) by relative path, as `pulumi up` runs."""
    previous = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


@cache
def example(name: str) -> Registered:
    folder = REPO / "examples" / name
    config = yaml.safe_load((folder / "Pulumi.dev.yaml").read_text())["config"]
    project = yaml.safe_load((folder / "Pulumi.yaml").read_text())["name"]
    with _inside(folder):
        return record_with_dependencies(lambda: runpy.run_path(str(folder / "__main__.py")), config=config,
                                        project=project, stack="dev")


@cache
def stack(name: str) -> Registered:
    config = yaml.safe_load((REPO / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]
    if config.get("inferstack:allowedCidrs"):  # the stack files tell you to set the key, as a secret, yourself
        config["inferstack:apiKey"] = API_KEY
    with dependencies_recorded() as dependencies:
        result = preview_stack(config, stack=name)
    return Registered(Recording(result.resources, [], result.outputs), dependencies)


@cache
def public_deployment(cloud: str, variant: str, stage: str = "production") -> Registered:
    """A plan whose API is open to the whole internet, with an API key, a hub token and static assets: production
    (a fleet, where the cloud's is built), or another stage (one server)."""
    return public_plan_deployment(sample_plan(cloud, variant, stage))


def public_plan_deployment(plan: DeploymentPlan) -> Registered:
    """`public_deployment` of a plan of your own (a sample plan with a field changed)."""
    with dependencies_recorded() as dependencies:
        result = preview_deployment(plan, {**PUBLIC, **CLOUD_SETTINGS[plan.cloud]})
    return Registered(Recording(result.resources, [], result.outputs), dependencies)


def plain_resources(registered: Registered) -> list[PlainResource]:
    """The deployment's resources as the pack's rules see them (outputs and inputs), to edit before a check."""
    return [PlainResource(r.type, r.name, r.urn, {**r.outputs, **r.inputs}) for r in registered.recording.resources]


def named(resources: list[PlainResource], resource_type: str, suffix: str) -> PlainResource:
    """The one resource of that type whose name ends with `suffix`."""
    (found,) = [r for r in resources if r.resource_type == resource_type and r.name.endswith(suffix)]
    return found


def public_server(cloud: str, variant: str) -> Registered:
    """One public server (an internal-stage plan), the deployment of the loose servers' mutations."""
    return public_deployment(cloud, variant, "internal")


def policy_config(stage: str) -> dict[str, dict[str, Any]]:
    """The policy config a stack of this stage runs the pack with (docs/policy.md, "Zones and the stage"): none in
    production; otherwise the stage itself, and a fleet may run in one zone."""
    if stage == "production":
        return {}
    return {"fleet-spans-zones": {"minZones": 1}, "production-runs-a-protected-fleet": {"stage": stage}}


def stage_config(label: str) -> dict[str, dict[str, Any]]:
    """The policy config a deployment's stack runs the pack with. `label` as test_pack_agrees_with_components names
    deployments: a stack file's or an example's stage (production when it names none, the planner's default), a
    public deployment's production, a public server's internal stage."""
    kind, name = label.split(" ", 1)
    if kind == "stack":
        stage = yaml.safe_load((REPO / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"].get("inferstack:stage")
    elif kind == "example":
        folder = REPO / "examples" / name
        source = folder / "workload.yaml"
        stage = yaml.safe_load(source.read_text()).get("stage") if source.is_file() else None
    else:
        stage = "internal" if kind == "server" else "production"
    return policy_config(stage or "production")

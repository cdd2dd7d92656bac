"""A public production deployment with a canary passes every policy of the pack on every cloud: the canary's
target group, backend service, server group or pool, its group and template, and the weighted forward are covered by
the invariants the main group's are (HTTPS only, health checks on the serving port, private servers, least
privilege), and the pack read them."""

from __future__ import annotations

import pytest

from inferstack.plan import CanaryPlan
from inferstack.preview import Recording, preview_deployment
from inferstack.sizing.canary import share_of
from tests.policy import deployments
from tests.policy.harness import Registered, check_recording
from tests.sample_plans import sample_plan


def _public_canary(cloud: str) -> Registered:
    full = sample_plan(cloud, "gpu-llm", "production")  # type: ignore[arg-type]
    plan = share_of(full, 90, role="main").model_copy(update={
        "canary": CanaryPlan(weight=10, plan=share_of(full, 10, role="canary"))})
    with deployments.dependencies_recorded() as dependencies:
        result = preview_deployment(plan, {**deployments.PUBLIC, **deployments.CLOUD_SETTINGS[cloud]})
    return Registered(Recording(result.resources, [], result.outputs), dependencies)


@pytest.mark.parametrize("cloud", sorted(deployments.CLOUD_SETTINGS))
def test_a_public_canary_deployment_passes_every_policy_and_the_pack_reads_the_canary_group(cloud: str) -> None:
    registered = _public_canary(cloud)
    canary = [r for r in registered.resources() if r.custom and "canary" in r.name]
    assert len(canary) >= 5
    report = check_recording(registered)
    assert report.violations == [], report.messages()
    read = {resource_type for types in report.checked.values() for resource_type in types}
    assert {r.type for r in canary} <= read


def test_a_canary_backend_outside_the_cloud_armor_policy_of_its_url_map_is_refused() -> None:
    """With callers limited, the canary's backend service carries the main one's Cloud Armor policy; one without it
    would serve the callers the main one refuses (a share of every caller's requests)."""
    full = sample_plan("gcp", "gpu-llm", "production")
    plan = share_of(full, 90, role="main").model_copy(update={
        "canary": CanaryPlan(weight=10, plan=share_of(full, 10, role="canary"))})
    limited = {**deployments.CLOUD_SETTINGS["gcp"], "inferstack:allowedCidrs": ["203.0.113.0/24"],
               "inferstack:apiKey": deployments.API_KEY}
    with deployments.dependencies_recorded() as dependencies:
        result = preview_deployment(plan, limited)
    registered = Registered(Recording(result.resources, [], result.outputs), dependencies)
    assert check_recording(registered).violations == []
    canary = registered.named("server-canary-backend")
    assert canary.inputs.get("securityPolicy") == registered.named("server-backend").inputs.get("securityPolicy")
    kept = {prop: names for prop, names in registered.dependency_names(canary.name).items() if prop != "securityPolicy"}
    stripped = registered.with_inputs(canary.name, {k: v for k, v in canary.inputs.items() if k != "securityPolicy"},
                                      dependencies=kept)
    messages = check_recording(stripped).messages()
    assert any("routes to backend services under different Cloud Armor policies" in m for m in messages), messages

"""fleet-watched-by-alarms (advisory): every managed group's load balancer is watched by alarms of the cloud's
monitoring. The production deployment the components register on each cloud passes it; the same deployment without
its alarms gets one finding on its managed group; a single server is not a fleet and the rule does not apply."""

from __future__ import annotations

import pytest
from guardrails.fleet import FLEET_ALARMS

from inferstack.preview import RegisteredResource
from tests.policy import deployments
from tests.policy.harness import EnforcementLevel, Registered, check_recording, pack

POLICY = "fleet-watched-by-alarms"
CLOUDS = ["aws", "gcp", "alibaba", "huawei"]


def _policy() -> list[object]:
    return [p for p in pack.POLICIES if p.name == POLICY]


def _watching_alarms(registered: Registered, cloud: str) -> list[RegisteredResource]:
    alarm_type, watches = FLEET_ALARMS[cloud]
    return [r for r in registered.resources() if r.type == alarm_type and watches(r.inputs)]


@pytest.fixture(scope="module", params=CLOUDS)
def production(request: pytest.FixtureRequest) -> tuple[str, Registered]:
    return request.param, deployments.public_deployment(request.param, "gpu-llm")


def test_the_production_deployment_is_watched(production: tuple[str, Registered]) -> None:
    cloud, registered = production
    assert _watching_alarms(registered, cloud)  # the rule had something to read
    report = check_recording(registered, policies=_policy())
    assert report.messages(POLICY) == [] and ("fleet-watched-by-alarms", "") not in report.not_applicable


def test_without_its_alarms_the_fleet_gets_one_advisory_finding_on_its_group(
        production: tuple[str, Registered]) -> None:
    cloud, registered = production
    for alarm in _watching_alarms(registered, cloud):
        registered = registered.without(alarm.name)
    report = check_recording(registered, policies=_policy())
    (violation,) = report.violations
    assert violation.level == EnforcementLevel.ADVISORY
    assert "has no alarm on its load balancer" in violation.message and violation.urn.endswith("server-group")


def test_a_single_server_is_not_a_fleet() -> None:
    report = check_recording(deployments.public_server("aws", "gpu-llm"), policies=_policy())
    assert report.violations == [] and report.not_applicable[(POLICY, "")] == "the stack has no managed group"

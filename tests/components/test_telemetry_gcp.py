"""Google Cloud telemetry under mocks: the servers' log bucket (retention, abandoned on a protected destroy), the sink
that routes exactly the Ops Agent's log names there and the _Default bucket's exclusion of them, the agent's two
write-only project roles, the GPU-memory and disk alert policies scoped to one group's servers by their template's
label (missing data breaching), and the canary backend's own server-error policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inferstack.bootstrap.agents.gcp import log_names
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components.gcp.fleet import GROUP_LABEL
from inferstack.components.observability import LOG_RETENTION_DAYS, agent_alarm_rules
from inferstack.preview import PreviewResult, RegisteredResource, preview_workload
from tests.components.test_canary import BASE, CANARY, _preview

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = REPO / "examples" / "workloads" / "chat-8b-public.yaml"
CHANNEL = "projects/my-project/notificationChannels/1234567890"


@pytest.fixture(scope="module")
def fleet() -> PreviewResult:
    return preview_workload(WORKLOAD, cloud="gcp", config={"inferstack:alarmNotification": CHANNEL})


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> PreviewResult:
    return _preview(tmp_path_factory.mktemp("canary"), "gcp", {**BASE, "canary": {**CANARY, "weight": 10}},
                    {"inferstack:alarmNotification": CHANNEL})


def _one(result: PreviewResult, kind: str) -> RegisteredResource:
    (found,) = [r for r in result.resources if r.type == kind]
    return found


def _named(result: PreviewResult, name: str) -> RegisteredResource:
    (found,) = [r for r in result.resources if r.name == name]
    return found


def _threshold(policy: RegisteredResource) -> dict[str, Any]:
    (condition,) = policy.inputs["conditions"]
    return dict(condition["conditionThreshold"])


def test_the_log_bucket_keeps_logs_for_the_retention_and_is_abandoned_not_deleted_in_production(
        fleet: PreviewResult) -> None:
    bucket = _one(fleet, "gcp:logging/projectBucketConfig:ProjectBucketConfig").inputs
    assert bucket["retentionDays"] == LOG_RETENTION_DAYS and bucket["location"] == "global"
    assert bucket["deletionPolicy"] == "ABANDON"


def test_the_sink_routes_exactly_the_agents_log_names_to_the_bucket_and_default_keeps_no_copy(
        fleet: PreviewResult) -> None:
    bucket = _one(fleet, "gcp:logging/projectBucketConfig:ProjectBucketConfig")
    sink = _one(fleet, "gcp:logging/projectSink:ProjectSink").inputs
    exclusion = _one(fleet, "gcp:logging/projectExclusion:ProjectExclusion").inputs
    prefix = bucket.inputs["bucketId"]
    names = log_names(TelemetryTarget(logs=prefix, metrics=prefix))
    project = sink["project"]
    assert sink["filter"] == " OR ".join(f'logName = "projects/{project}/logs/{n}"' for n in names)
    assert sink["destination"] == f"logging.googleapis.com/{bucket.outputs['name']}"
    assert sink["uniqueWriterIdentity"] is False and exclusion["filter"] == sink["filter"]


def test_the_servers_account_gets_the_agents_two_write_only_project_roles(fleet: PreviewResult) -> None:
    account = _named(fleet, "server-identity-account")
    roles = sorted(r.inputs["role"] for r in fleet.resources if r.type == "gcp:projects/iAMMember:IAMMember"
                   and r.inputs["member"] == account.outputs["member"])
    assert roles == ["roles/logging.logWriter", "roles/monitoring.metricWriter"]


def test_gpu_memory_and_disk_policies_watch_the_groups_servers_and_not_their_loop_mounts(
        fleet: PreviewResult) -> None:
    label = _named(fleet, "server-template").inputs["labels"][GROUP_LABEL]
    servers = f'resource.type = "gce_instance" AND metadata.user_labels."{GROUP_LABEL}" = "{label}"'
    rules = {r.kind.value: r for r in agent_alarm_rules(fleet.plan)}
    disk = _threshold(_named(fleet, "server-alert-disk"))
    assert disk["filter"] == (f'{servers} AND metric.type = "agent.googleapis.com/disk/percent_used" AND '
                              'metric.label.state = "used" AND NOT metric.label.device = starts_with("/dev/loop")')
    assert disk["thresholdValue"] == rules["disk"].threshold
    gpu = _threshold(_named(fleet, "server-alert-gpu-memory"))
    assert gpu["filter"] == (f'{servers} AND metric.type = "agent.googleapis.com/gpu/memory/bytes_used" AND '
                             'metric.label.memory_state = "used"')
    assert gpu["denominatorFilter"] == f'{servers} AND metric.type = "agent.googleapis.com/gpu/memory/bytes_used"'
    assert gpu["thresholdValue"] == pytest.approx(rules["gpu-memory"].threshold / 100)
    # Per-server conditions: ACTIVE would open an incident for every server the autoscaler deletes.
    assert {disk["evaluationMissingData"], gpu["evaluationMissingData"]} == {"EVALUATION_MISSING_DATA_NO_OP"}
    assert _named(fleet, "server-alert-disk").inputs["notificationChannels"] == [CHANNEL]


def test_the_canary_has_its_own_server_error_and_agent_policies(canary: PreviewResult) -> None:
    canary_backend = _named(canary, "server-canary-backend").inputs["name"]
    errors = _threshold(_named(canary, "server-canary-alert-error-rate"))
    assert f'backend_target_name = "{canary_backend}"' in errors["filter"]
    assert f'backend_target_name = "{canary_backend}"' not in _threshold(_named(canary, "server-alert-error-rate"))[
        "filter"]
    label = _named(canary, "server-canary-template").inputs["labels"][GROUP_LABEL]
    assert f'"{label}"' in _threshold(_named(canary, "server-canary-alert-disk"))["filter"]
    assert label != _named(canary, "server-template").inputs["labels"][GROUP_LABEL]

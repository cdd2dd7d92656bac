"""AWS telemetry under mocks: the servers' log group (retention, kept when protected), the identity's grant to write
exactly there and to the metric namespace, the GPU-memory and disk alarms on the agent's group-aggregated series
(missing data breaching), and a canary group's own unhealthy-server, server-error and agent alarms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inferstack.components.observability import LOG_RETENTION_DAYS, agent_alarm_rules
from inferstack.preview import PreviewResult, RegisteredResource, preview_workload
from tests.components.test_canary import BASE, CANARY, _preview

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = REPO / "examples" / "workloads" / "chat-8b-public.yaml"
TOPIC = "arn:aws:sns:us-east-1:123456789012:inference-alarms"


@pytest.fixture(scope="module")
def fleet() -> PreviewResult:
    return preview_workload(WORKLOAD, cloud="aws", config={"inferstack:alarmNotification": TOPIC})


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> PreviewResult:
    return _preview(tmp_path_factory.mktemp("canary"), "aws", {**BASE, "canary": {**CANARY, "weight": 10}},
                    {"inferstack:alarmNotification": TOPIC})


def _of_type(result: PreviewResult, kind: str) -> list[RegisteredResource]:
    return [r for r in result.resources if r.type == kind]


def _named(result: PreviewResult, name: str) -> RegisteredResource:
    (found,) = [r for r in result.resources if r.name == name]
    return found


def _telemetry_policy(result: PreviewResult, role_policy: str) -> list[dict[str, Any]]:
    return list(json.loads(_named(result, role_policy).inputs["policy"])["Statement"])


def test_the_servers_log_group_keeps_logs_for_the_retention_and_survives_a_production_destroy(
        fleet: PreviewResult) -> None:
    (group,) = _of_type(fleet, "aws:cloudwatch/logGroup:LogGroup")
    assert group.inputs["retentionInDays"] == LOG_RETENTION_DAYS
    assert group.inputs["skipDestroy"] is True and group.inputs["deletionProtectionEnabled"] is True
    assert group.inputs["name"].startswith("inferstack/")


def test_the_identity_writes_its_own_log_group_and_namespace_only(fleet: PreviewResult) -> None:
    (group,) = _of_type(fleet, "aws:cloudwatch/logGroup:LogGroup")
    arn = group.outputs["arn"]
    by_sid = {s["Sid"]: s for s in _telemetry_policy(fleet, "server-identity-telemetry-write")}
    assert by_sid["WriteServerLogs"]["Resource"] == [arn, f"{arn}:*"]
    assert by_sid["PutServerLogEvents"]["Resource"] == f"{arn}:log-stream:*"
    assert by_sid["PutServerMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": group.inputs["name"]}}
    assert by_sid["ReadOwnGroupTag"]["Action"] == ["ec2:DescribeTags"]
    assert "logs:CreateLogGroup" not in json.dumps(by_sid)


def test_gpu_memory_and_disk_alarms_read_the_groups_aggregate_and_treat_silence_as_breaching(
        fleet: PreviewResult) -> None:
    (group,) = _of_type(fleet, "aws:autoscaling/group:Group")
    (logs,) = _of_type(fleet, "aws:cloudwatch/logGroup:LogGroup")
    rules = {r.kind.value: r for r in agent_alarm_rules(fleet.plan)}
    disk = _named(fleet, "server-alarm-disk").inputs
    assert (disk["metricName"], disk["namespace"]) == ("disk_used_percent", logs.inputs["name"])
    assert disk["dimensions"] == {"AutoScalingGroupName": group.outputs["name"]}
    assert disk["threshold"] == rules["disk"].threshold and disk["treatMissingData"] == "breaching"
    gpu = _named(fleet, "server-alarm-gpu-memory").inputs
    queries = {q["id"]: q for q in gpu["metricQueries"]}
    assert queries["used"]["metric"]["metricName"] == "nvidia_smi_memory_used"
    assert queries["total"]["metric"]["metricName"] == "nvidia_smi_memory_total"
    assert queries["gpu_memory"]["expression"] == "100 * used / total"
    assert all(q["metric"]["dimensions"] == {"AutoScalingGroupName": group.outputs["name"]}
               for q in (queries["used"], queries["total"]))
    assert gpu["threshold"] == rules["gpu-memory"].threshold and gpu["treatMissingData"] == "breaching"
    assert gpu["alarmActions"] == [TOPIC] == disk["okActions"]


def test_the_canary_group_has_its_own_unhealthy_error_and_agent_alarms(canary: PreviewResult) -> None:
    canary_targets = _named(canary, "server-canary-targets").outputs["arnSuffix"]
    canary_group = _named(canary, "server-canary-group").outputs["name"]
    unhealthy = _named(canary, "server-canary-alarm-unhealthy-servers").inputs
    assert unhealthy["dimensions"]["TargetGroup"] == canary_targets
    errors = _named(canary, "server-canary-alarm-error-rate").inputs
    queries = {q["id"]: q for q in errors["metricQueries"]}
    assert queries["errors"]["metric"]["dimensions"]["TargetGroup"] == canary_targets
    assert queries["requests"]["metric"]["dimensions"]["TargetGroup"] == canary_targets
    main = {q["id"]: q for q in _named(canary, "server-alarm-error-rate").inputs["metricQueries"]}
    assert "TargetGroup" not in main["errors"]["metric"]["dimensions"]
    assert _named(canary, "server-canary-alarm-disk").inputs["dimensions"] == {"AutoScalingGroupName": canary_group}
    assert _named(canary, "server-alarm-disk").inputs["dimensions"] != {"AutoScalingGroupName": canary_group}

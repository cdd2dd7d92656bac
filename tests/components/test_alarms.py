"""A fleet's alarms on each cloud: the kinds the plan calls for, thresholds from the plan's SLO and ceiling, and the
notification target from stack config (`inferstack:alarmNotification`).

Each test previews the production plan of examples/workloads/chat-8b-public.yaml (a fleet) under mocks and reads
the alarms registered, in each cloud's own terms.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inferstack.bootstrap import gateway
from inferstack.bootstrap.gateway import CacheEndpoint
from inferstack.clouds import Cloud
from inferstack.components.aws.observability import ANSWER_TIME_METRIC, ANSWER_TIME_PATTERN
from inferstack.components.backend import backend_for
from inferstack.components.observability import AlarmKind, alarm_rules, errors_per_s
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.preview import PreviewResult, RegisteredResource, preview_workload
from inferstack.spec import Cache
from tests.sample_plans import sample_plan

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = REPO / "examples" / "workloads" / "chat-8b-public.yaml"
CLOUDS: list[Cloud] = ["aws", "gcp", "alibaba", "huawei"]

TARGETS = {
    "aws": "arn:aws:sns:us-east-1:123456789012:inference-alarms",
    "gcp": "projects/my-project/notificationChannels/1234567890",
    "alibaba": "inference-oncall",
    "huawei": "urn:smn:ap-southeast-3:0123456789abcdef0123456789abcdef:inference-alarms",
}
MALFORMED = {
    "aws": "arn:aws:s3:::not-a-topic",
    "gcp": "my-channel",
    "alibaba": "oncall; rm -rf /",
    "huawei": "arn:aws:sns:us-east-1:123456789012:alarms",
}
ALARM_TYPES = {
    "aws": "aws:cloudwatch/metricAlarm:MetricAlarm",
    "gcp": "gcp:monitoring/alertPolicy:AlertPolicy",
    "alibaba": "alicloud:cms/alarm:Alarm",
    "huawei": "huaweicloud:Cse/alarmrule:Alarmrule",
}


def _kind(cloud: str, alarm: RegisteredResource) -> str:
    """The alarm kind a backend named the resource after (`<name>-alarm-<kind>`, GCP `<name>-alert-<kind>`)."""
    return alarm.name.split("-alarm-" if cloud != "gcp" else "-alert-", 1)[1]


def _alarms(cloud: str, result: PreviewResult) -> dict[str, dict[str, Any]]:
    alarms = [r for r in result.resources if r.type == ALARM_TYPES[cloud]]
    found = {_kind(cloud, a): a.inputs for a in alarms if "-alarm-" in a.name or "-alert-" in a.name}
    return {**found, **_alibaba_agent_alarms(result)} if cloud == "alibaba" else found


def _alibaba_agent_alarms(result: PreviewResult) -> dict[str, dict[str, Any]]:
    """Alibaba's GPU-memory and disk alarms: the rules of an alert template (`inferstack NAME: KIND`), applied by the
    tag-based application group of the same name, whose contact groups they notify."""
    templates = {r.name.removesuffix("-agent-alarms"): r.inputs for r in result.resources
                 if r.type == "alicloud:cms/metricRuleTemplate:MetricRuleTemplate"}
    groups = {r.name.removesuffix("-servers-monitored"): r.inputs for r in result.resources
              if r.type == "alicloud:cms/dynamicTagGroup:DynamicTagGroup"}
    return {rule["ruleName"].rsplit(": ", 1)[1]: {**rule, "contactGroups": groups[name]["contactGroupLists"]}
            for name, template in templates.items() for rule in template["alertTemplates"]}


def _threshold(cloud: str, inputs: dict[str, Any]) -> float:
    """An alarm's threshold as the cloud compares it."""
    if cloud == "aws":
        return float(inputs["threshold"])
    if cloud == "gcp":
        return float(inputs["conditions"][0]["conditionThreshold"]["thresholdValue"])
    if cloud == "alibaba":
        return float(inputs["escalationsCritical"]["threshold"])
    return float(inputs["conditions"][0]["value"])


def _notified(cloud: str, inputs: dict[str, Any]) -> list[str]:
    """Where an alarm notifies when it fires."""
    if cloud == "aws":
        return list(inputs.get("alarmActions") or [])
    if cloud == "gcp":
        return list(inputs.get("notificationChannels") or [])
    if cloud == "alibaba":
        return list(inputs["contactGroups"])
    return [target for action in inputs.get("alarmActions") or [] for target in action["notificationLists"]]


# What a latency objective of `ms` milliseconds reads as in each cloud's metric (AWS TargetResponseTime: seconds).
LATENCY_UNITS: dict[str, Callable[[float], float]] = {
    "aws": lambda ms: ms / 1000, "gcp": lambda ms: ms, "alibaba": lambda ms: ms, "huawei": lambda ms: ms}


def _error_budget(cloud: str, plan: DeploymentPlan) -> float:
    """The error-rate rule as each cloud compares it: a percentage (AWS metric math), a fraction (GCP ratio), or
    errors per second at the plan's peak (Alibaba, Huawei: one metric against a number)."""
    (rule,) = [r for r in alarm_rules(plan) if r.kind is AlarmKind.ERROR_RATE]
    return {"aws": rule.threshold, "gcp": rule.threshold / 100}.get(cloud, errors_per_s(plan, rule))


@pytest.fixture(scope="module", params=CLOUDS)
def notified_preview(request: pytest.FixtureRequest) -> tuple[str, PreviewResult]:
    cloud = request.param
    return cloud, preview_workload(WORKLOAD, cloud=cloud, config={"inferstack:alarmNotification": TARGETS[cloud]})


def test_the_production_preview_registers_each_alarm_kind_the_cloud_can_watch(
        notified_preview: tuple[str, PreviewResult]) -> None:
    cloud, result = notified_preview
    unwatched = backend_for(cloud).unwatched_alarms
    assert set(_alarms(cloud, result)) == {kind.value for kind in AlarmKind if kind not in unwatched}
    assert all(reason for reason in unwatched.values())  # a kind left out says why


def test_thresholds_come_from_the_plans_slo_and_ceiling(notified_preview: tuple[str, PreviewResult]) -> None:
    cloud, result = notified_preview
    plan = result.plan
    assert plan.fleet is not None and plan.slo is not None and plan.slo.latency_p95_ms is not None
    alarms = _alarms(cloud, result)
    assert _threshold(cloud, alarms["latency"]) == pytest.approx(LATENCY_UNITS[cloud](plan.slo.latency_p95_ms))
    assert _threshold(cloud, alarms["fleet-at-ceiling"]) == plan.fleet.max_replicas
    assert _threshold(cloud, alarms["error-rate"]) == pytest.approx(_error_budget(cloud, plan))
    if "unhealthy-servers" in alarms:
        assert _threshold(cloud, alarms["unhealthy-servers"]) == 0


def test_every_alarm_notifies_the_configured_target(notified_preview: tuple[str, PreviewResult]) -> None:
    cloud, result = notified_preview
    alarms = _alarms(cloud, result)
    assert alarms and all(_notified(cloud, inputs) == [TARGETS[cloud]] for inputs in alarms.values())
    if cloud in ("aws", "huawei"):  # and again when the condition clears
        assert all(inputs["okActions"] == inputs["alarmActions"] for inputs in alarms.values())


@pytest.mark.parametrize("cloud", CLOUDS)
def test_without_a_target_the_alarms_exist_and_notify_nobody_but_alibabas_own_contact_group(cloud: Cloud) -> None:
    result = preview_workload(WORKLOAD, cloud=cloud)
    alarms = _alarms(cloud, result)
    assert alarms
    if cloud == "alibaba":  # CloudMonitor alarms need a contact group: an empty one is created
        (group,) = [r for r in result.resources if r.type == "alicloud:cms/alarmContactGroup:AlarmContactGroup"]
        assert all(_notified(cloud, inputs) == [group.inputs["alarmContactGroupName"]] for inputs in alarms.values())
    else:
        assert all(_notified(cloud, inputs) == [] for inputs in alarms.values())


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_target_not_of_the_clouds_form_is_refused_before_anything_is_created(cloud: Cloud) -> None:
    with pytest.raises(InputError) as error:
        preview_workload(WORKLOAD, cloud=cloud, config={"inferstack:alarmNotification": MALFORMED[cloud]})
    assert "alarm_notification" in str(error.value) and MALFORMED[cloud] in str(error.value)


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_clouds_example_target_is_of_its_form(cloud: str) -> None:
    rule = backend_for(cloud).notification_target
    assert rule is not None
    assert rule.problem("f", rule.example) is None and rule.problem("f", TARGETS[cloud]) is None
    assert rule.problem("f", MALFORMED[cloud]) is not None


def test_a_single_server_has_no_alarms_and_a_plan_without_an_slo_no_latency_alarm() -> None:
    assert alarm_rules(sample_plan("aws", "gpu-llm", "validation")) == []
    fleet = sample_plan("aws", "gpu-llm", "production")
    kinds = {rule.kind for rule in alarm_rules(fleet.model_copy(update={"slo": None}))}
    assert AlarmKind.LATENCY not in kinds and AlarmKind.FLEET_AT_CEILING in kinds


def test_google_clouds_load_balancer_logs_every_request() -> None:
    result = preview_workload(WORKLOAD, cloud="gcp")
    backends = [r for r in result.resources
                if r.type in ("gcp:compute/backendService:BackendService",
                              "gcp:compute/regionBackendService:RegionBackendService") and r.name.endswith("-backend")]
    assert backends and all(b.inputs["logConfig"] == {"enable": True, "sampleRate": 1.0} for b in backends)


#### AWS: the latency alarm sees streamed answers ####


def _space_delimited(line: str) -> list[str]:
    """A log line split as CloudWatch Logs splits a space-delimited event: a [bracketed] or "quoted" run is one
    field (the User Guide's "Filter pattern syntax for metric filters")."""
    return [group[1] or group[2] or group[3] for group in re.findall(r'(\[([^\]]*)\]|"([^"]*)"|(\S+))', line)]


def _logged(log_format: str, **values: str) -> str:
    """The line nginx writes for `log_format` (its quoted format string) with `values` for its variables."""
    template = re.search(r"'(.*)'", log_format)
    assert template is not None
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], template.group(1))


@pytest.mark.parametrize("log_format", [gateway.ACCESS_LOG_FORMAT, "cache"])
def test_awss_answer_time_pattern_reads_the_request_time_nginx_writes(log_format: str) -> None:
    if log_format == "cache":  # the gateway's format when the plan has a cache, with one more field at its end
        plan = sample_plan("aws", "gpu-llm")
        endpoint = CacheEndpoint(host="redis.example", port=6379, auth_secret="cache-token")
        config = gateway.gateway_config(plan.model_copy(update={"cache": Cache(ttl_seconds=60)}), api_key=True,
                                        mode="container", group="main", cache=endpoint)
        log_format = next(line for line in config.splitlines() if "log_format inferstack_cache" in line)
    line = _logged(log_format, remote_addr="10.64.128.7", time_local="07/Dec/2026:10:00:00 +0000",
                   request="POST /v1/chat/completions HTTP/1.1", status="200", body_bytes_sent="5120",
                   request_time="187.402", inferstack_cache="miss", upstream_status="200")
    names = re.findall(r"(\w+)(?: = [^,\]]+)?(?:,|\])", ANSWER_TIME_PATTERN)
    fields = dict(zip(names, _space_delimited(line), strict=False))
    assert fields["request"].startswith("POST ") and fields["status"].startswith("2")
    assert fields["request_time"] == "187.402"


def test_awss_latency_alarm_is_the_p95_of_the_gateways_answer_times_against_the_slo() -> None:
    result = preview_workload(WORKLOAD, cloud="aws", config={"inferstack:alarmNotification": TARGETS["aws"]})
    plan = result.plan
    assert plan.slo is not None and plan.slo.latency_p95_ms is not None
    (metric_filter,) = [r for r in result.resources if r.type == "aws:cloudwatch/logMetricFilter:LogMetricFilter"]
    (log_group,) = [r for r in result.resources if r.type == "aws:cloudwatch/logGroup:LogGroup"
                    and r.name.endswith("-logs")]
    transform = metric_filter.inputs["metricTransformation"]
    assert metric_filter.inputs["pattern"] == ANSWER_TIME_PATTERN
    assert metric_filter.inputs["logGroupName"] == log_group.outputs["name"]
    assert (transform["name"], transform["value"], transform["unit"]) == (
        ANSWER_TIME_METRIC, "$request_time", "Seconds")
    latency = _alarms("aws", result)["latency"]
    assert (latency["metricName"], latency["namespace"], latency["extendedStatistic"]) == (
        transform["name"], transform["namespace"], "p95")
    assert latency["threshold"] == pytest.approx(plan.slo.latency_p95_ms / 1000)
    assert "TargetResponseTime" not in str(latency)

"""The servers' own telemetry on Alibaba Cloud and Huawei Cloud, previewed under mocks: where Alibaba's servers'
logs go (an SLS logstore with its retention, a machine group and what Logtail collects), the GPU-memory and disk
alarms of each scaling group (an alert template applied by a tag-based application group), and Huawei's canary
pool alarms. Each cloud's resource arguments are checked against its provider SDK's docstrings in the backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inferstack.bootstrap.agents.alibaba import machine_group_identity
from inferstack.bootstrap.telemetry import sources
from inferstack.components.alibaba.fleet import FLEET_TAG
from inferstack.components.alibaba.observability import AGENT_ALARM_METRICS, AGENT_NAMESPACE, SERVER_LOGSTORE
from inferstack.components.backend import backend_for
from inferstack.components.huawei.observability import ELB_ALARM_METRICS, ELB_DIMENSION, POOL_DIMENSION
from inferstack.components.observability import (
    LOG_RETENTION_DAYS,
    AlarmKind,
    agent_alarm_rules,
    alarm_rules,
    errors_per_s,
)
from inferstack.preview import PreviewResult, RegisteredResource, preview_workload
from tests.components.test_alarms import TARGETS, WORKLOAD
from tests.components.test_canary import BASE, CANARY, _preview

STORE = "alicloud:log/store:Store"
MACHINE_GROUP = "alicloud:log/machineGroup:MachineGroup"
LOGTAIL_CONFIG = "alicloud:log/logTailConfig:LogTailConfig"
LOGTAIL_ATTACHMENT = "alicloud:log/logTailAttachment:LogTailAttachment"
TEMPLATE = "alicloud:cms/metricRuleTemplate:MetricRuleTemplate"
TAG_GROUP = "alicloud:cms/dynamicTagGroup:DynamicTagGroup"
LAUNCH_TEMPLATE = "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate"
HUAWEI_ALARM = "huaweicloud:Cse/alarmrule:Alarmrule"


def _of_type(result: PreviewResult, type_: str) -> list[RegisteredResource]:
    return [r for r in result.resources if r.type == type_]


def _named(result: PreviewResult, name: str) -> RegisteredResource:
    (found,) = [r for r in result.resources if r.name == name]
    return found


@pytest.fixture(scope="module")
def alibaba() -> PreviewResult:
    return preview_workload(WORKLOAD, cloud="alibaba", config={"inferstack:alarmNotification": TARGETS["alibaba"]})


@pytest.fixture(scope="module")
def canaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PreviewResult]:
    tmp_path = tmp_path_factory.mktemp("telemetry")
    workload = {**BASE, "canary": {**CANARY, "weight": 10}}
    return {cloud: _preview(tmp_path, cloud, workload) for cloud in ("alibaba", "huawei")}


def test_alibaba_keeps_the_servers_logs_in_an_encrypted_logstore_of_their_own_for_the_retention(
        alibaba: PreviewResult) -> None:
    (store,) = [s for s in _of_type(alibaba, STORE) if s.inputs["logstoreName"] == SERVER_LOGSTORE]
    assert store.inputs["retentionPeriod"] == LOG_RETENTION_DAYS
    assert store.inputs["encryptConf"] == {"enable": True, "encryptType": "default"}
    others = [s for s in _of_type(alibaba, STORE) if s is not store]
    assert others and all(s.inputs["projectName"] != store.inputs["projectName"] for s in others)


def test_alibabas_machine_group_is_the_servers_by_the_identity_their_bundle_writes(alibaba: PreviewResult) -> None:
    (store,) = [s for s in _of_type(alibaba, STORE) if s.inputs["logstoreName"] == SERVER_LOGSTORE]
    (group,) = _of_type(alibaba, MACHINE_GROUP)
    project = store.inputs["projectName"]
    assert group.inputs["project"] == project and group.inputs["identifyType"] == "userdefined"
    assert group.inputs["identifyLists"] == [machine_group_identity(f"{project}/{SERVER_LOGSTORE}")]


def test_logtail_collects_every_log_file_and_unit_the_sources_name_into_that_logstore(alibaba: PreviewResult) -> None:
    collected = sources(alibaba.plan)
    configs = _of_type(alibaba, LOGTAIL_CONFIG)
    assert configs and all(c.inputs["logstore"] == SERVER_LOGSTORE for c in configs)
    details = [json.loads(c.inputs["inputDetail"]) for c in configs]
    files = {f"{d['logPath']}/{d['filePattern']}" for d in details if "logPath" in d}
    assert files == set(collected.files)
    (journal,) = [d["plugin"]["inputs"][0]["detail"] for d in details if "plugin" in d]
    assert journal["Units"] == [f"{unit}.service" for unit in collected.units]
    (group,) = _of_type(alibaba, MACHINE_GROUP)
    attached = {(a.inputs["logtailConfigName"], a.inputs["machineGroupName"])
                for a in _of_type(alibaba, LOGTAIL_ATTACHMENT)}
    assert attached == {(c.inputs["name"], group.inputs["name"]) for c in configs}


def test_alibabas_agents_get_no_ram_grant(alibaba: PreviewResult) -> None:
    # Logtail and the CloudMonitor agent write as the account's instance: the role grants no SLS or CMS action.
    documents = [str(p.inputs["policyDocument"]) for p in _of_type(alibaba, "alicloud:ram/policy:Policy")]
    assert documents and not any(action in d for d in documents for action in ('"log:', '"cms:'))


def _agent_rules(result: PreviewResult, name: str) -> dict[str, dict[str, Any]]:
    template = _named(result, f"{name}-agent-alarms")
    return {rule["metricName"]: rule for rule in template.inputs["alertTemplates"]}


def test_alibabas_gpu_memory_and_disk_alarms_follow_the_plans_rules_on_the_agents_metrics(
        alibaba: PreviewResult) -> None:
    rules = _agent_rules(alibaba, "server")
    expected = {AGENT_ALARM_METRICS[rule.kind]: rule for rule in agent_alarm_rules(alibaba.plan)}
    assert set(rules) == set(expected) == {AGENT_ALARM_METRICS[AlarmKind.DISK],
                                           AGENT_ALARM_METRICS[AlarmKind.GPU_MEMORY]}
    for metric, rule in expected.items():
        critical = rules[metric]["escalations"]["critical"]
        assert rules[metric]["namespace"] == AGENT_NAMESPACE and rules[metric]["category"] == "ecs"
        assert float(critical["threshold"]) == rule.threshold and critical["times"] == str(rule.minutes)
        assert critical["comparisonOperator"] == "GreaterThanThreshold"
    group = _named(alibaba, "server-servers-monitored")
    assert group.inputs["contactGroupLists"] == [TARGETS["alibaba"]]
    assert group.inputs["templateIdLists"] == [_named(alibaba, "server-agent-alarms").id]


def test_each_alibaba_scaling_group_is_watched_by_the_tag_its_servers_carry(canaries: dict[str, PreviewResult]) -> None:
    result = canaries["alibaba"]
    watched = {}
    for group_name in ("server", "server-canary"):
        tag = _named(result, f"{group_name}-template").inputs["tags"][FLEET_TAG]
        group = _named(result, f"{group_name}-servers-monitored")
        assert group.inputs["tagKey"] == FLEET_TAG
        assert group.inputs["matchExpresses"] == [{"tagValue": tag, "tagValueMatchFunction": "equals"}]
        assert set(_agent_rules(result, group_name))  # the canary's servers get the same alarms, from its plan
        watched[group_name] = tag
    assert watched["server"] != watched["server-canary"]


def test_huaweis_canary_pool_has_its_own_unhealthy_server_and_5xx_alarms(canaries: dict[str, PreviewResult]) -> None:
    result = canaries["huawei"]
    assert result.plan.canary is not None
    canary_plan = result.plan.canary.plan
    balancer, pool = _named(result, "server-lb").id, _named(result, "server-canary-pool").id
    alarms = {a.name: a.inputs for a in _of_type(result, HUAWEI_ALARM) if a.name.startswith("server-canary-alarm-")}
    assert set(alarms) == {"server-canary-alarm-unhealthy-servers", "server-canary-alarm-error-rate"}
    for kind in (AlarmKind.UNHEALTHY_SERVERS, AlarmKind.ERROR_RATE):
        metric = alarms[f"server-canary-alarm-{kind.value}"]["metric"]
        assert metric["metricName"] == ELB_ALARM_METRICS[kind][0]
        assert metric["dimensions"] == [{"name": ELB_DIMENSION, "value": balancer},
                                        {"name": POOL_DIMENSION, "value": pool}]
    (error,) = [r for r in alarm_rules(canary_plan) if r.kind is AlarmKind.ERROR_RATE]
    condition = alarms["server-canary-alarm-error-rate"]["conditions"][0]
    assert condition["value"] == pytest.approx(errors_per_s(canary_plan, error))
    main = {a.name for a in _of_type(result, HUAWEI_ALARM) if a.name.startswith("server-alarm-")}
    assert "server-alarm-error-rate" in main  # the load balancer's own alarms stay


def test_huawei_states_why_gpu_memory_and_disk_are_unwatched() -> None:
    reasons = backend_for("huawei").unwatched_alarms
    assert {AlarmKind.GPU_MEMORY, AlarmKind.DISK} <= set(reasons)
    assert all("checksum or signature" in reasons[kind] for kind in (AlarmKind.GPU_MEMORY, AlarmKind.DISK))

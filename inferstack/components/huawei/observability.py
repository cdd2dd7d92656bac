"""Huawei Cloud observability: Cloud Eye alarm rules on the dedicated ELB's metrics, one per rule of
`observability.alarm_rules`, and a canary pool's own (pulumi_huaweicloud 0.0.12 files Cloud Eye's alarm rule under
`cse`). A GPU fleet's servers report their requests per second to a Cloud Eye custom namespace, which its scaling
alarms read (`create_telemetry`; Cloud Eye's own agent is not installed: `HuaweiBackend.unwatched_alarms` says why);
no dashboard (the provider has no resource for one: `HuaweiBackend.dashboard_gap`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_huaweicloud as hw

from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components.contract import AlarmsRequest, AlarmsResult, TelemetryRequest, TelemetryResult
from inferstack.components.huawei.fleet import SERVING_NAMESPACE, group_name
from inferstack.components.naming import child_options
from inferstack.components.observability import AlarmKind, AlarmRule, alarm_rules, errors_per_s
from inferstack.plan import DeploymentPlan

# Alarms read the dedicated ELB's Cloud Eye metrics (ELB User Guide, "ELB Monitoring Metrics": namespace SYS.ELB,
# dimension lbaas_instance_id, one-minute raw data): m9_abnormal_servers and ma_normal_servers (servers failing and
# passing the health check), m14_l7_rt (layer-7 response time in ms from the client's request to the last byte of the
# answer; an average: Cloud Eye publishes no percentile of it) and m16_l7_upstream_5xx (the backends' 5xx answers per
# second; a Cloud Eye condition compares one metric with a number, so the error budget is a rate at the plan's peak
# load: observability.errors_per_s). (metric, rollup, comparison, unit) per alarm kind.
ELB_NAMESPACE = "SYS.ELB"
ELB_DIMENSION = "lbaas_instance_id"
# A canary's own pool (backend server group) is watched on the same metrics by the dimension pair lbaas_instance_id,
# lbaas_pool_id, which carries the pool's health and upstream answers (ELB User Guide, "ELB Monitoring Metrics":
# dedicated load balancers' metrics by backend server group; the pair and its metrics, m9_abnormal_servers and
# m16_l7_upstream_5xx among them, as Huawei's own cloudeye-exporter queries them, metric_filter_config.yml).
POOL_DIMENSION = "lbaas_pool_id"
CANARY_ALARM_KINDS = (AlarmKind.UNHEALTHY_SERVERS, AlarmKind.ERROR_RATE)
ELB_ALARM_METRICS: Mapping[AlarmKind, tuple[str, str, str, str]] = {
    AlarmKind.UNHEALTHY_SERVERS: ("m9_abnormal_servers", "max", ">", "count"),
    AlarmKind.LATENCY: ("m14_l7_rt", "average", ">", "ms"),
    AlarmKind.ERROR_RATE: ("m16_l7_upstream_5xx", "average", ">", "count/s"),
    AlarmKind.FLEET_AT_CEILING: ("ma_normal_servers", "min", ">=", "count"),
}
ALARM_DESCRIPTION_LENGTH = 256


#### Telemetry ####


def create_telemetry(parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult | None:
    """A GPU fleet's servers report their requests per second (`bootstrap/agents/huawei.py`) into the custom namespace
    its scaling alarms read, under its AS group's name; the agency may write that metric data and no other. Nothing
    for a single server or a CPU fleet (which scales on the AS group's CPU metric): Huawei ships no logs yet."""
    plan = request.plan
    if plan.fleet is None or plan.device != "gpu":
        return None
    target = TelemetryTarget(logs=None, metrics=SERVING_NAMESPACE, metrics_dimension=group_name(name))
    return TelemetryResult(target=pulumi.Output.from_input(target),
                           grants=[pulumi.Output.from_input(SERVING_NAMESPACE)])


#### Monitoring ####


def create_alarms(parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
    """One Cloud Eye alarm rule per rule on the dedicated ELB's metrics, notifying the SMN topic when it fires and
    when it clears; a canary's pool gets its own unhealthy-server and 5xx alarms, from its plan."""
    watched = request.fleet.watched
    balancer = {"name": ELB_DIMENSION, "value": watched["load_balancer"]}
    rules = [_alarm_rule(parent, name, request.plan, rule, [balancer], request.notification_target)
             for rule in alarm_rules(request.plan)]
    canary = request.plan.canary
    if canary is not None:
        pool = {"name": POOL_DIMENSION, "value": watched["canary_pool"]}
        rules += [_alarm_rule(parent, f"{name}-canary", canary.plan, rule, [balancer, pool],
                              request.notification_target)
                  for rule in alarm_rules(canary.plan) if rule.kind in CANARY_ALARM_KINDS]
    return AlarmsResult(alarm_ids=[rule.id for rule in rules])


def _alarm_rule(parent: pulumi.Resource, name: str, plan: DeploymentPlan, rule: AlarmRule,
                dimensions: Sequence[Mapping[str, pulumi.Input[str]]], target: str | None) -> hw.cse.Alarmrule:
    """A Cloud Eye alarm rule on the dedicated ELB's metric of `rule` over `dimensions` (the load balancer, or its
    pair with a pool), notifying `target` when it fires and when it clears."""
    actions = [{"type": "notification", "notification_lists": [target]}] if target else []
    return hw.cse.Alarmrule(
        f"{name}-alarm-{rule.kind.value}", alarm_name=_alarm_name(name, rule),
        alarm_description=f"inferstack {name}: {rule.summary}"[:ALARM_DESCRIPTION_LENGTH],
        metric={"namespace": ELB_NAMESPACE, "metric_name": ELB_ALARM_METRICS[rule.kind][0],
                "dimensions": list(dimensions)},
        conditions=[_alarm_condition(plan, rule)], alarm_actions=actions, ok_actions=actions,
        alarm_action_enabled=bool(target), alarm_enabled=True, opts=child_options(parent))


def _alarm_name(name: str, rule: AlarmRule) -> str:
    """Cloud Eye alarm names: 1-128 letters, digits, underscores and hyphens."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"inferstack-{name}-{rule.kind.value}")[:128]


def _alarm_condition(plan: DeploymentPlan, rule: AlarmRule) -> dict[str, Any]:
    """A rule's condition: one-minute raw data for up to five minutes (Cloud Eye counts at most 5 periods), else
    five-minute averages."""
    metric, rollup, comparison, unit = ELB_ALARM_METRICS[rule.kind]
    period, count = (1, rule.minutes) if rule.minutes <= 5 else (300, math.ceil(rule.minutes / 5))
    value = errors_per_s(plan, rule) if rule.kind is AlarmKind.ERROR_RATE else rule.threshold
    return {"metric_name": metric, "period": period, "count": count, "filter": rollup,
            "comparison_operator": comparison, "value": value, "unit": unit, "alarm_level": 2}

"""Observability: the CloudWatch Logs group the servers' agent ships to, the fleet's CloudWatch alarms on the load
balancer's metrics and the agent's, and its dashboard."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

from inferstack.bootstrap.agents.aws import GPU_MEASUREMENTS, GROUP_DIMENSION
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components.aws.lookups import provider_region
from inferstack.components.contract import AlarmsRequest, AlarmsResult, StrOutput, TelemetryRequest, TelemetryResult
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options
from inferstack.components.observability import (
    LOG_RETENTION_DAYS,
    AlarmKind,
    AlarmRule,
    Panel,
    PanelKind,
    agent_alarm_rules,
    alarm_rules,
    dashboard_panels,
)
from inferstack.names import slug, unique_name
from inferstack.plan import DeploymentPlan

# CloudWatch's one-minute periods: alarms, the dashboard, and the scaling on requests per server per minute.
SECONDS_PER_MINUTE = 60
# Alarms read the Application Load Balancer's own metrics (ELB User Guide, "CloudWatch metrics for your Application
# Load Balancer"), published every minute with no agent: UnHealthyHostCount and HealthyHostCount per target group
# (dimensions TargetGroup, LoadBalancer), TargetResponseTime in seconds (percentile statistics such as p95 allowed),
# HTTPCode_Target_5XX_Count and RequestCount per load balancer. TargetResponseTime ends where the target's response
# headers start: a whole answer's full time, but for a streamed one only until the runtime opens its stream, which vLLM
# does before the first token (its StreamingResponse sends the headers before its generator yields), so it never sees
# a slow stream.
ELB_NAMESPACE = "AWS/ApplicationELB"
# With the CloudWatch agent (a deployment's telemetry), the latency alarm reads every answer's end-to-end time from the
# gateways' access logs instead: nginx's $request_time, to the answer's last byte, streams included (gateway.py's
# log format, whose seventh field it is). A metric filter on the log group publishes each successful POST's time as
# one raw value, so that the alarm takes its p95 (CloudWatch Logs User Guide, "Filter pattern syntax for metric
# filters": space-delimited fields, a [bracketed] or "quoted" field is one, "..." any number more, read 2026-12-07).
# The runtime's own time-to-first-token histogram (vllm:time_to_first_token_seconds) cannot be used: the agent drops
# Prometheus histograms ("Only Gauge, Counter and Summary are supported", plugins/inputs/prometheus/metrics_filter.go).
ANSWER_TIME_METRIC = "GatewayAnswerTime"
ANSWER_TIME_PATTERN = '[address, user, time, request = "POST *", status = 2*, bytes, request_time, ...]'
# An SNS topic's ARN (SNS API reference, CreateTopic: names of 1-256 letters, digits, hyphens and underscores).
ARN_SNS_TOPIC = r"arn:aws(-cn|-us-gov)?:sns:[a-z]{2}(-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,256}"
# The dashboard (CloudWatch API Reference, "Dashboard Body Structure and Syntax": metric widgets, each metric an array
# [namespace, name, dimension name, value, ..., {rendering options}], `annotations.horizontal` lines); its name takes
# up to 255 letters, digits, "-" and "_" (PutDashboard). It graphs the alarms' metrics and the group's
# GroupInServiceInstances (namespace AWS/AutoScaling, dimension AutoScalingGroupName), published once listed in the
# group's enabled_metrics (GROUP_METRICS, which the fleet's group lists).
DASHBOARD_ROLES = ("load_balancer", "target_group", "group")
DASHBOARD_NAME_MAX = 255
GROUP_METRICS = (aws.autoscaling.Metric.GROUP_IN_SERVICE_INSTANCES, aws.autoscaling.Metric.GROUP_DESIRED_CAPACITY,
                 aws.autoscaling.Metric.GROUP_MAX_SIZE)
DASHBOARD_WIDTH, DASHBOARD_HEIGHT = 12, 6  # half of the dashboard's 24-column grid per graph

#### Telemetry ####


def create_telemetry(parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
    """A CloudWatch Logs group for the servers' logs (and the runtime's Prometheus metrics, as embedded metric
    format events), kept LOG_RETENTION_DAYS, kept on destroy when protected; the agent's metrics go to a namespace
    of the same name. Grants: (the log group's ARN, the namespace), in that order (identity.py's
    `telemetry_statements`).

    Encryption: CloudWatch Logs always encrypts log data at rest; a customer key (kms_key_id) would need a key
    policy for the logs service principal, which the stack does not create (CloudWatch Logs User Guide, "Encrypt
    log data in CloudWatch Logs using AWS KMS")."""
    destination = "/".join(["inferstack", slug(pulumi.get_project()), slug(pulumi.get_stack()), slug(name)])
    group = aws.cloudwatch.LogGroup(
        f"{name}-logs", name=destination, retention_in_days=LOG_RETENTION_DAYS, skip_destroy=request.protected,
        deletion_protection_enabled=request.protected, tags=request.tags, opts=child_options(parent))
    target = group.name.apply(lambda logs: TelemetryTarget(logs=logs, metrics=destination))
    return TelemetryResult(target=target, grants=[answered(group.arn, "aws:cloudwatch/logGroup:LogGroup arn"),
                                                  pulumi.Output.from_input(destination)])


#### Alarms ####


def create_alarms(parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
    """One CloudWatch alarm per rule on the load balancer's metrics, and with the agent (request.telemetry) per
    agent rule on the group's GPU memory and disk; a canary's group gets its own unhealthy-server, server-error
    and agent alarms. Each notifies the SNS topic when it fires and when it clears."""
    watched, plan = request.fleet.watched, request.plan
    dimensions = {"LoadBalancer": watched["load_balancer"], "TargetGroup": watched["target_group"]}
    alarms = [_alarm(parent, name, request, rule,
                     _answer_time_condition(parent, name, rule, request.telemetry)
                     if rule.kind is AlarmKind.LATENCY and request.telemetry is not None
                     else _alarm_condition(rule, dimensions))
              for rule in alarm_rules(plan)]
    alarms += _agent_alarms(parent, name, request, plan, watched["group"])
    canary = plan.canary
    if canary is not None and "canary_target_group" in watched:
        dimensions = {"LoadBalancer": watched["load_balancer"], "TargetGroup": watched["canary_target_group"]}
        alarms += [_alarm(parent, f"{name}-canary", request, rule,
                          _alarm_condition(rule, dimensions, one_target_group=True))
                   for rule in alarm_rules(canary.plan)
                   if rule.kind in (AlarmKind.UNHEALTHY_SERVERS, AlarmKind.ERROR_RATE)]
        alarms += _agent_alarms(parent, f"{name}-canary", request, canary.plan, watched["canary_group"])
    return AlarmsResult(alarm_ids=[alarm.arn for alarm in alarms])


def _agent_alarms(parent: pulumi.Resource, name: str, request: AlarmsRequest, plan: DeploymentPlan,
                  group: pulumi.Input[str]) -> list[aws.cloudwatch.MetricAlarm]:
    """The GPU-memory and disk alarms of one group, on the agent's series aggregated by AutoScalingGroupName.
    No data is breaching: a group whose agents send nothing is not watched, and says so."""
    if request.telemetry is None:
        return []
    namespace = request.telemetry.target.apply(lambda target: target.metrics)
    return [_alarm(parent, name, request, rule, _agent_alarm_condition(rule, namespace, group),
                   missing="breaching") for rule in agent_alarm_rules(plan)]


def _alarm(parent: pulumi.Resource, name: str, request: AlarmsRequest, rule: AlarmRule,
           condition: dict[str, Any], missing: str = "notBreaching") -> aws.cloudwatch.MetricAlarm:
    actions = [request.notification_target] if request.notification_target else []
    return aws.cloudwatch.MetricAlarm(
        f"{name}-alarm-{rule.kind.value}", alarm_description=f"inferstack {name}: {rule.summary}",
        evaluation_periods=rule.minutes, datapoints_to_alarm=rule.minutes, alarm_actions=actions,
        ok_actions=actions, treat_missing_data=missing, tags=request.tags, **condition,
        opts=child_options(parent))


def _alarm_condition(rule: AlarmRule, dimensions: Mapping[str, pulumi.Input[str]],
                     one_target_group: bool = False) -> dict[str, Any]:
    """The metric and comparison of one rule's alarm, in one-minute periods (MetricAlarm arguments); the error rate
    is the load balancer's, or with `one_target_group` that target group's (a canary's): ELB publishes
    HTTPCode_Target_5XX_Count and RequestCount per TargetGroup, LoadBalancer too (ELB User Guide, "CloudWatch metrics
    for your Application Load Balancer")."""
    per_minute = {"namespace": ELB_NAMESPACE, "period": SECONDS_PER_MINUTE}
    if rule.kind is AlarmKind.UNHEALTHY_SERVERS:
        return {**per_minute, "metric_name": "UnHealthyHostCount", "dimensions": dimensions, "statistic": "Maximum",
                "comparison_operator": "GreaterThanThreshold", "threshold": rule.threshold}
    if rule.kind is AlarmKind.FLEET_AT_CEILING:
        return {**per_minute, "metric_name": "HealthyHostCount", "dimensions": dimensions, "statistic": "Minimum",
                "comparison_operator": "GreaterThanOrEqualToThreshold", "threshold": rule.threshold}
    if rule.kind is AlarmKind.LATENCY:
        return {**per_minute, "metric_name": "TargetResponseTime", "dimensions": dimensions,
                "extended_statistic": "p95", "comparison_operator": "GreaterThanThreshold",
                "threshold": rule.threshold / 1000}
    # Error rate: server errors as a percentage of requests, by metric math (no request: no data, not breaching).
    balancer = dict(dimensions) if one_target_group else {"LoadBalancer": dimensions["LoadBalancer"]}
    return {"comparison_operator": "GreaterThanThreshold", "threshold": rule.threshold, "metric_queries": [
        {"id": "errors", "metric": {"namespace": ELB_NAMESPACE, "metric_name": "HTTPCode_Target_5XX_Count",
                                    "dimensions": balancer, "stat": "Sum", "period": SECONDS_PER_MINUTE}},
        {"id": "requests", "metric": {"namespace": ELB_NAMESPACE, "metric_name": "RequestCount",
                                      "dimensions": balancer, "stat": "Sum", "period": SECONDS_PER_MINUTE}},
        {"id": "error_rate", "expression": "100 * FILL(errors, 0) / requests", "label": "server errors, % of requests",
         "return_data": True}]}


def _answer_time_condition(parent: pulumi.Resource, name: str, rule: AlarmRule,
                           telemetry: TelemetryResult) -> dict[str, Any]:
    """The latency rule on the gateways' answer times (ANSWER_TIME_PATTERN), p95 over one-minute periods, in seconds:
    the metric filter that publishes them from the servers' log group, and the alarm's condition on it."""
    target = telemetry.target
    aws.cloudwatch.LogMetricFilter(
        f"{name}-answer-time", name=f"{name}-answer-time", log_group_name=target.apply(lambda t: t.logs),
        pattern=ANSWER_TIME_PATTERN, metric_transformation={
            "name": ANSWER_TIME_METRIC, "namespace": target.apply(lambda t: t.metrics), "value": "$request_time",
            "unit": "Seconds"}, opts=child_options(parent))
    return {"namespace": target.apply(lambda t: t.metrics), "period": SECONDS_PER_MINUTE,
            "metric_name": ANSWER_TIME_METRIC, "extended_statistic": "p95", "unit": "Seconds",
            "comparison_operator": "GreaterThanThreshold", "threshold": rule.threshold / 1000}


def _agent_alarm_condition(rule: AlarmRule, namespace: pulumi.Input[str],
                           group: pulumi.Input[str]) -> dict[str, Any]:
    """An agent rule's metric, in one-minute periods, on the group's aggregated series (the agent's
    aggregation_dimensions [[AutoScalingGroupName]]: the worst server is the Maximum)."""
    dimensions = {GROUP_DIMENSION: group}
    if rule.kind is AlarmKind.DISK:
        return {"namespace": namespace, "period": SECONDS_PER_MINUTE, "metric_name": "disk_used_percent",
                "dimensions": dimensions, "statistic": "Maximum", "comparison_operator": "GreaterThanThreshold",
                "threshold": rule.threshold}
    # GPU memory: used over total (MiB both); the fullest GPU's use over the largest GPU's size, which for the group's
    # one GPU model is the fullest GPU's share.
    used, total = (f"nvidia_smi_{measurement}" for measurement in GPU_MEASUREMENTS[:2])
    return {"comparison_operator": "GreaterThanThreshold", "threshold": rule.threshold, "metric_queries": [
        {"id": "used", "metric": {"namespace": namespace, "metric_name": used, "dimensions": dimensions,
                                  "stat": "Maximum", "period": SECONDS_PER_MINUTE}},
        {"id": "total", "metric": {"namespace": namespace, "metric_name": total, "dimensions": dimensions,
                                   "stat": "Maximum", "period": SECONDS_PER_MINUTE}},
        {"id": "gpu_memory", "expression": "100 * used / total", "label": "GPU memory used, % of the GPU's",
         "return_data": True}]}


#### Dashboard ####


def create_dashboard(parent: pulumi.Resource, name: str, request: AlarmsRequest) -> StrOutput:
    """A CloudWatch dashboard of the load balancer's and the group's metrics (the alarms' own), one graph per
    panel, the plan's lines drawn as horizontal annotations."""
    region = provider_region(parent)
    body = pulumi.Output.all(region, *(request.fleet.watched[role] for role in DASHBOARD_ROLES)).apply(
        lambda values: json.dumps(_dashboard_body(request.plan, values[0], dict(zip(DASHBOARD_ROLES, values[1:],
                                                                                     strict=True)))))
    dashboard = aws.cloudwatch.Dashboard(
        f"{name}-dashboard", dashboard_name=unique_name([pulumi.get_project(), pulumi.get_stack(), name],
                                                        max_length=DASHBOARD_NAME_MAX),
        dashboard_body=body, opts=child_options(parent))
    return dashboard.dashboard_arn


def _dashboard_body(plan: DeploymentPlan, region: str, watched: Mapping[str, str]) -> dict[str, Any]:
    """The dashboard's body: one metric widget per panel, two to a row."""
    return {"widgets": [{
        "type": "metric", "x": (index % 2) * DASHBOARD_WIDTH, "y": (index // 2) * DASHBOARD_HEIGHT,
        "width": DASHBOARD_WIDTH, "height": DASHBOARD_HEIGHT, "properties": _dashboard_widget(panel, region, watched)}
        for index, panel in enumerate(dashboard_panels(plan))]}


def _dashboard_widget(panel: Panel, region: str, watched: Mapping[str, str]) -> dict[str, Any]:
    """A panel's metric widget properties: its metrics in one-minute periods, the plan's lines as annotations
    (latency in seconds, as TargetResponseTime is published)."""
    balancer = ["LoadBalancer", watched["load_balancer"]]
    targets = ["TargetGroup", watched["target_group"], *balancer]
    metrics: list[list[Any]]
    lines = [{"label": label, "value": value} for label, value in panel.lines]
    if panel.kind is PanelKind.REQUESTS:
        metrics = [[ELB_NAMESPACE, "RequestCount", *balancer, {"stat": "Sum", "label": "requests"}]]
    elif panel.kind is PanelKind.LATENCY:
        metrics = [[ELB_NAMESPACE, "TargetResponseTime", *targets, {"stat": stat, "label": stat}]
                   for stat in ("p50", "p95")]
        lines = [{"label": label, "value": value / 1000} for label, value in panel.lines]
    elif panel.kind is PanelKind.SERVER_ERRORS:
        metrics = [[ELB_NAMESPACE, "HTTPCode_Target_5XX_Count", *balancer, {"stat": "Sum", "label": "server 5xx"}]]
    else:
        assert panel.kind is PanelKind.SERVERS, panel.kind
        metrics = [[ELB_NAMESPACE, "HealthyHostCount", *targets, {"stat": "Minimum", "label": "healthy"}],
                   [ELB_NAMESPACE, "UnHealthyHostCount", *targets, {"stat": "Maximum", "label": "unhealthy"}],
                   ["AWS/AutoScaling", GROUP_METRICS[0].value, "AutoScalingGroupName", watched["group"],
                    {"stat": "Average", "label": "in service"}]]
    title = f"{panel.title} (s)" if panel.kind is PanelKind.LATENCY else panel.title
    return {"title": title, "view": "timeSeries", "region": region, "period": SECONDS_PER_MINUTE,
            "metrics": metrics, "annotations": {"horizontal": lines}}

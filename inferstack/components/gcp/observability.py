"""Google Cloud's observability: the servers' logs in a Cloud Logging bucket of their own, one Cloud Monitoring alert
policy per alarm rule (the load balancer's and the group's metrics, and the Ops Agent's GPU memory and disk), and a
dashboard of the same metrics.

Sections follow `CloudBackend` (inferstack/components/backend.py).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import pulumi
import pulumi_gcp as gcp

from inferstack.bootstrap.agents.gcp import log_names
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components.contract import (
    AlarmsRequest,
    AlarmsResult,
    StrOutput,
    TelemetryRequest,
    TelemetryResult,
)
from inferstack.components.gcp.fleet import GROUP_LABEL
from inferstack.components.gcp.naming import gcp_labels, gcp_name
from inferstack.components.gcp.provider import client_project
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
from inferstack.plan import DeploymentPlan

# The Ops Agent's metrics (confgenerator apps/hostmetrics.go; integration_test .../nvml/metadata.yaml): disk use per
# device and state (used, free, reserved) in percent; each GPU's memory in bytes, by gpu_number and memory_state
# (used, free).
DISK_PERCENT_METRIC = "agent.googleapis.com/disk/percent_used"
GPU_MEMORY_METRIC = "agent.googleapis.com/gpu/memory/bytes_used"

# Alarms read Cloud Monitoring's load-balancing metrics (Google Cloud metrics list, "loadbalancing"; Cloud Load
# Balancing docs, "Monitoring metrics"), one per load-balancer kind: the global external Application Load Balancer
# publishes https/... on the https_lb_rule resource, the regional internal one https/internal/... on
# internal_http_lb_rule; both label a series with its backend service (backend_target_name). backend_latencies is a
# distribution in ms from the request's dispatch to the backend until the backend's last byte (end to end at the
# backend); request_count carries response_code_class (500 for 5xx). The group's size is
# compute.googleapis.com/instance_group/size on the instance_group resource.
LB_METRICS: Mapping[str, tuple[str, str]] = {
    "external": ("https_lb_rule", "loadbalancing.googleapis.com/https"),
    "internal": ("internal_http_lb_rule", "loadbalancing.googleapis.com/https/internal"),
}

# The dashboard (Cloud Monitoring API, projects.dashboards: a mosaicLayout of up to 48 columns whose tiles hold
# xyChart widgets; each dataSet a timeSeriesQuery.timeSeriesFilter with its aggregation; the chart's `thresholds` are
# horizontal lines {label, value}). It graphs the alert policies' metrics and the group's size; the backends' health
# states have no metric (`unwatched_alarms`), so the servers graph shows the group's size.
DASHBOARD_COLUMNS, DASHBOARD_TILE_HEIGHT = 48, 16


#### Monitoring ####


def create_telemetry(parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
    """A Cloud Logging bucket that keeps the servers' logs LOG_RETENTION_DAYS (abandoned, not deleted, on destroy
    when protected), a sink that routes the Ops Agent's log names there, and an exclusion that keeps them out of
    the project's _Default bucket (its 30 days would hold a second copy). Grants: the project (the agent's
    roles are project roles: TELEMETRY_ROLES, identity.py).

    Encryption: Cloud Logging encrypts log buckets at rest with Google-managed keys; a customer key
    (cmek_settings) needs a Cloud KMS key the stack does not create (Cloud Logging, "Configure CMEK for log
    storage")."""
    project = client_project(parent)
    prefix = gcp_name(name, "logs")
    target = TelemetryTarget(logs=prefix, metrics=prefix)  # metrics: the runtime's Prometheus job name
    opts = child_options(parent)
    bucket = gcp.logging.ProjectBucketConfig(
        f"{name}-log-bucket", project=project, location="global", bucket_id=prefix,
        retention_days=LOG_RETENTION_DAYS, description=f"inferstack {name}: the servers' runtime, gateway and "
                                                      "boot logs",
        deletion_policy="ABANDON" if request.protected else "DELETE", opts=opts)
    logs = project.apply(lambda p: " OR ".join(f'logName = "projects/{p}/logs/{log}"' for log in log_names(target)))
    # A sink to a log bucket of its own project writes as cloud-logs@system.gserviceaccount.com, which needs no
    # grant (unique_writer_identity false: the provider's docs; Cloud Logging, "Route logs to supported
    # destinations").
    gcp.logging.ProjectSink(
        f"{name}-log-sink", name=gcp_name(name, "log-sink"), project=project, filter=logs,
        destination=pulumi.Output.concat("logging.googleapis.com/", answered(
            bucket.name, "gcp:logging/projectBucketConfig:ProjectBucketConfig name")),
        unique_writer_identity=False, description=f"inferstack {name}: the servers' logs to their bucket",
        opts=opts)
    # An exclusion made with the projects.exclusions API applies to the _Default sink only (Logging API,
    # exclusions.create: "Creates a new exclusion in the _Default sink"), so our own sink still routes these
    # logs to their bucket. A deleted log bucket stays DELETE_REQUESTED 7 days and its id cannot be reused
    # meanwhile: a development stack destroyed and deployed again within a week under the same name fails here.
    gcp.logging.ProjectExclusion(
        f"{name}-log-exclusion", name=gcp_name(name, "log-exclusion"), project=project, filter=logs,
        description=f"inferstack {name}: the servers' logs are kept in their own bucket", opts=opts)
    return TelemetryResult(target=pulumi.Output.from_input(target), grants=[project])


def create_alarms(parent: pulumi.Resource, name: str, request: AlarmsRequest, *,
                  unwatched: Collection[AlarmKind]) -> AlarmsResult:
    """One Cloud Monitoring alert policy per rule on the load balancer's and the group's metrics, and with the
    agent (request.telemetry) per agent rule on the group's servers' GPU memory and disk; a canary's group gets
    its own server-error and agent policies. Each notifies the notification channel. Rules of the kinds `unwatched`
    (the backend's `unwatched_alarms`) get none."""
    watched, plan = request.fleet.watched, request.plan
    policies = [_policy(parent, name, request, rule, _watched_condition(rule, watched))
                for rule in alarm_rules(plan) if rule.kind not in unwatched]
    policies += _agent_policies(parent, name, request, plan, str(watched["group_label"]))
    if plan.canary is not None and "canary_backend_service" in watched:
        canary = {**watched, "backend_service": watched["canary_backend_service"],
                  "group": watched["canary_group"]}
        policies += [_policy(parent, f"{name}-canary", request, rule, _watched_condition(rule, canary))
                     for rule in alarm_rules(plan.canary.plan) if rule.kind is AlarmKind.ERROR_RATE]
        policies += _agent_policies(parent, f"{name}-canary", request, plan.canary.plan,
                                    str(watched["canary_group_label"]))
    return AlarmsResult(alarm_ids=[policy.name for policy in policies])


def _agent_policies(parent: pulumi.Resource, name: str, request: AlarmsRequest, plan: DeploymentPlan,
                    group_label: str) -> list[gcp.monitoring.AlertPolicy]:
    """The GPU-memory and disk policies of one group's servers (by their GROUP_LABEL), per server
    (`_agent_condition`)."""
    if request.telemetry is None:
        return []
    return [_policy(parent, name, request, rule, {
        "display_name": rule.kind.value, "condition_threshold": _agent_condition(rule, group_label)})
        for rule in agent_alarm_rules(plan)]


def _policy(parent: pulumi.Resource, name: str, request: AlarmsRequest, rule: AlarmRule,
            condition: Any) -> gcp.monitoring.AlertPolicy:
    return gcp.monitoring.AlertPolicy(
        f"{name}-alert-{rule.kind.value}", display_name=f"inferstack {name}: {rule.kind.value}", combiner="OR",
        conditions=[condition],
        documentation={"content": f"inferstack {name}: {rule.summary}", "mime_type": "text/markdown"},
        notification_channels=[request.notification_target] if request.notification_target else [],
        severity="ERROR", user_labels=gcp_labels(request.tags), opts=child_options(parent))


def create_dashboard(parent: pulumi.Resource, name: str, request: AlarmsRequest) -> StrOutput:
    """A Cloud Monitoring dashboard of the load balancer's and the group's metrics (the alert policies' own), one
    chart per panel, the plan's lines drawn as thresholds."""
    watched = request.fleet.watched
    scheme = str(watched["scheme"])
    body = pulumi.Output.all(watched["backend_service"], watched["group"]).apply(
        lambda names: json.dumps(_dashboard_json(request.plan, f"inferstack {name}", scheme, names[0], names[1])))
    dashboard = gcp.monitoring.Dashboard(f"{name}-dashboard", dashboard_json=body, opts=child_options(parent))
    return dashboard.id


#### Alert conditions and dashboard charts ####


def _watched_condition(rule: AlarmRule, watched: Mapping[str, pulumi.Input[str]]) -> Any:
    """A rule's AlertPolicyCondition, once the backend service's and the group's names are known."""
    scheme = str(watched["scheme"])
    threshold = pulumi.Output.all(watched["backend_service"], watched["group"]).apply(
        lambda names: _alert_condition(rule, scheme, names[0], names[1]))
    return {"display_name": rule.kind.value, "condition_threshold": threshold}


def _alert_condition(rule: AlarmRule, scheme: str, backend_service: str, group: str) -> dict[str, Any]:
    """A rule's threshold condition (AlertPolicyConditionConditionThreshold), on one-minute alignments."""
    duration = f"{rule.minutes * 60}s"
    if rule.kind is AlarmKind.FLEET_AT_CEILING:
        return {"filter": f'resource.type = "instance_group" AND resource.label.instance_group_name = "{group}" AND '
                          'metric.type = "compute.googleapis.com/instance_group/size"',
                "comparison": "COMPARISON_GE", "threshold_value": rule.threshold, "duration": duration,
                "aggregations": [{"alignment_period": "60s", "per_series_aligner": "ALIGN_MIN"}]}
    resource, prefix = LB_METRICS[scheme]
    backend = f'resource.type = "{resource}" AND resource.label.backend_target_name = "{backend_service}"'
    if rule.kind is AlarmKind.LATENCY:
        # A distribution: its one-minute deltas merged across series, then their 95th percentile.
        return {"filter": f'{backend} AND metric.type = "{prefix}/backend_latencies"',
                "comparison": "COMPARISON_GT", "threshold_value": rule.threshold, "duration": duration,
                "aggregations": [{"alignment_period": "60s", "per_series_aligner": "ALIGN_DELTA",
                                  "cross_series_reducer": "REDUCE_PERCENTILE_95"}]}
    assert rule.kind is AlarmKind.ERROR_RATE, rule.kind
    # A ratio condition: 5xx answers over all answers, compared with a fraction.
    rate = [{"alignment_period": "60s", "per_series_aligner": "ALIGN_RATE", "cross_series_reducer": "REDUCE_SUM"}]
    requests = f'{backend} AND metric.type = "{prefix}/request_count"'
    return {"filter": f"{requests} AND metric.label.response_code_class = 500", "aggregations": rate,
            "denominator_filter": requests, "denominator_aggregations": rate,
            "comparison": "COMPARISON_GT", "threshold_value": rule.threshold / 100, "duration": duration}


def _agent_condition(rule: AlarmRule, group_label: str) -> dict[str, Any]:
    """An agent rule's threshold condition on the Ops Agent's metrics of one group's servers, per server (and GPU),
    on one-minute alignments. Missing data changes nothing (EVALUATION_MISSING_DATA_NO_OP): the conditions are per
    server, so ACTIVE would open an incident for every server the autoscaler deletes, and a server whose agent never
    ran has no series to miss."""
    # Verify: metadata.user_labels."KEY" selects gce_instance series by the instance's labels (Monitoring filters).
    servers = f'resource.type = "gce_instance" AND metadata.user_labels."{GROUP_LABEL}" = "{group_label}"'
    common = {"comparison": "COMPARISON_GT", "duration": f"{rule.minutes * 60}s",
              "evaluation_missing_data": "EVALUATION_MISSING_DATA_NO_OP"}
    if rule.kind is AlarmKind.DISK:
        return {**common, "threshold_value": rule.threshold,
                # Snap packages' squashfs loop mounts are always 100 % used (Ubuntu images): not the server's disks.
                # Verify: NOT ... = starts_with(...) in Monitoring filters.
                "filter": f'{servers} AND metric.type = "{DISK_PERCENT_METRIC}" AND metric.label.state = "used" '
                          'AND NOT metric.label.device = starts_with("/dev/loop")',
                "aggregations": [{"alignment_period": "60s", "per_series_aligner": "ALIGN_MEAN",
                                  "cross_series_reducer": "REDUCE_MAX",
                                  "group_by_fields": ["resource.label.instance_id"]}]}
    assert rule.kind is AlarmKind.GPU_MEMORY, rule.kind
    # A ratio condition: each GPU's used bytes over its used and free bytes, compared with a fraction.
    per_gpu = [{"alignment_period": "60s", "per_series_aligner": "ALIGN_MEAN", "cross_series_reducer": "REDUCE_SUM",
                "group_by_fields": ["resource.label.instance_id", "metric.label.gpu_number"]}]
    memory = f'{servers} AND metric.type = "{GPU_MEMORY_METRIC}"'
    return {**common, "threshold_value": rule.threshold / 100,
            "filter": f'{memory} AND metric.label.memory_state = "used"', "aggregations": per_gpu,
            "denominator_filter": memory, "denominator_aggregations": per_gpu}


def _dashboard_json(plan: DeploymentPlan, title: str, scheme: str, backend_service: str,
                    group: str) -> dict[str, Any]:
    """The dashboard's body: one xyChart tile per panel, two to a row."""
    width = DASHBOARD_COLUMNS // 2
    return {"displayName": title, "mosaicLayout": {"columns": DASHBOARD_COLUMNS, "tiles": [
        {"xPos": (index % 2) * width, "yPos": (index // 2) * DASHBOARD_TILE_HEIGHT, "width": width,
         "height": DASHBOARD_TILE_HEIGHT, "widget": _dashboard_chart(panel, scheme, backend_service, group)}
        for index, panel in enumerate(dashboard_panels(plan))]}}


def _dashboard_chart(panel: Panel, scheme: str, backend_service: str, group: str) -> dict[str, Any]:
    """A panel's xyChart in one-minute alignments: the same filters as the alert conditions (`_alert_condition`)."""
    resource, prefix = LB_METRICS[scheme]
    backend = f'resource.type = "{resource}" AND resource.label.backend_target_name = "{backend_service}"'
    requests = f'{backend} AND metric.type = "{prefix}/request_count"'

    def series(filter_: str, aligner: str, reducer: str, legend: str) -> dict[str, Any]:
        return {"plotType": "LINE", "legendTemplate": legend, "timeSeriesQuery": {"timeSeriesFilter": {
            "filter": filter_, "aggregation": {"alignmentPeriod": "60s", "perSeriesAligner": aligner,
                                               "crossSeriesReducer": reducer}}}}

    if panel.kind is PanelKind.REQUESTS:
        data = [series(requests, "ALIGN_DELTA", "REDUCE_SUM", "requests")]
    elif panel.kind is PanelKind.LATENCY:
        latencies = f'{backend} AND metric.type = "{prefix}/backend_latencies"'
        data = [series(latencies, "ALIGN_DELTA", f"REDUCE_PERCENTILE_{p}", f"p{p}") for p in ("50", "95")]
    elif panel.kind is PanelKind.SERVER_ERRORS:
        data = [series(f"{requests} AND metric.label.response_code_class = 500", "ALIGN_DELTA", "REDUCE_SUM",
                       "server 5xx")]
    else:
        assert panel.kind is PanelKind.SERVERS, panel.kind
        size = (f'resource.type = "instance_group" AND resource.label.instance_group_name = "{group}" AND '
                'metric.type = "compute.googleapis.com/instance_group/size"')
        data = [series(size, "ALIGN_MEAN", "REDUCE_SUM", "servers in the group")]
    title = f"{panel.title} (ms)" if panel.kind is PanelKind.LATENCY else panel.title
    return {"title": title, "xyChart": {"dataSets": data, "thresholds": [
        {"label": label, "value": value} for label, value in panel.lines]}}


"""What watches Alibaba servers: their logs in an SLS project (collected by Logtail), and a fleet's CloudMonitor
alarms on the ALB's metrics and on the CloudMonitor agent's GPU-memory and disk metrics. No dashboard: the provider
has no resource for one (`AlibabaBackend.dashboard_gap`, __init__.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from inferstack.bootstrap.agents.alibaba import machine_group_identity
from inferstack.bootstrap.telemetry import TelemetryTarget, sources
from inferstack.components.alibaba.fleet import FLEET_TAG, METRIC_PERIOD_S
from inferstack.components.alibaba.names import account_name, bucket_name
from inferstack.components.contract import AlarmsRequest, AlarmsResult, StrOutput, TelemetryRequest, TelemetryResult
from inferstack.components.naming import child_options
from inferstack.components.observability import (
    LOG_RETENTION_DAYS,
    AlarmKind,
    AlarmRule,
    agent_alarm_rules,
    alarm_rules,
    errors_per_s,
)
from inferstack.plan import DeploymentPlan

# The servers' logs (runtime, gateway, boot) go to a logstore of their own, in an SLS project of the deployment's
# (`create_telemetry`), collected by Logtail from the servers of a machine group with a user-defined identity (the
# project's name: bootstrap.agents.alibaba.machine_group_identity). Logtail on the account's own ECS instances
# authenticates as the instance, with no AccessKey and no RAM grant (SLS, "Install Logtail on ECS instances": a user
# identifier file is needed only for another account's or a non-Alibaba server); verify.
SERVER_LOGSTORE = "server-logs"
# Logtail file collection (LogTailConfig input_type "file", input_detail keys of SLS's Logtail configuration API,
# doc-detail/29058): every line of the files under the log directory as one log; verify the keys against the
# CreateConfig reference before relying on them.
LOGTAIL_FILE_LOG_TYPE = "common_reg_log"
# Journal collection: Logtail's service_journal input plugin (input_type "plugin"), limited to the sources' units;
# verify the plugin's detail keys (Units, JournalPaths, SeekPosition) against SLS's "Collect systemd journal logs".
LOGTAIL_JOURNAL_PLUGIN = "service_journal"

# Alarms read the ALB's CloudMonitor metrics (namespace acs_alb, dimension loadBalancerId, statistic Value; SLB docs,
# "ALB monitoring metrics"): LoadBalancerUnHealthyHostCount and LoadBalancerHealthyHostCount (servers),
# LoadBalancerUpstreamResponseTime (the backends' response time, ms; an average: CloudMonitor publishes no percentile
# of it) and LoadBalancerHTTPCodeUpstream5XX (the backends' 5xx answers per second; CloudMonitor alarms compare one
# metric with a number, so the error budget is a rate at the plan's peak load: observability.errors_per_s).
ALB_NAMESPACE = "acs_alb"
ALB_ALARM_METRICS: Mapping[AlarmKind, tuple[str, str]] = {
    AlarmKind.UNHEALTHY_SERVERS: ("LoadBalancerUnHealthyHostCount", ">"),
    AlarmKind.LATENCY: ("LoadBalancerUpstreamResponseTime", ">"),
    AlarmKind.ERROR_RATE: ("LoadBalancerHTTPCodeUpstream5XX", ">"),
    AlarmKind.FLEET_AT_CEILING: ("LoadBalancerHealthyHostCount", ">="),
}
# The CloudMonitor agent's metrics (acs_ecs_dashboard, category ecs): the disk's used percent per mount point and each
# GPU's memory used percent. The names match the agent's own metric keys (diskusage_utilization_avg/max/min and
# gpu_memory_usedutilization_avg/max/min, tag gpuId, in Alibaba's open-source iLogtail/LoongCollector host monitor)
# and CloudMonitor's host metrics list; verify in the console. One data point a minute from the agent (verify), so
# `times` counts minutes. Alarms on them are an alert template applied by a tag-based application group
# (cms.DynamicTagGroup template_id_lists; ROS ALIYUN::CMS::DynamicTagGroup: "a tag rule based on which cloud resources
# can be automatically added to an application group"), so the servers ESS adds and removes are watched without a
# rule per instance. (The API's EnableInstallAgent is not an argument of the provider's DynamicTagGroup.)
AGENT_NAMESPACE = "acs_ecs_dashboard"
AGENT_CATEGORY = "ecs"
AGENT_ALARM_METRICS: Mapping[AlarmKind, str] = {
    AlarmKind.DISK: "diskusage_utilization",
    AlarmKind.GPU_MEMORY: "gpu_memory_usedutilization",
}

#### Monitoring ####


def create_telemetry(parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
    """The servers' logs: a logstore kept LOG_RETENTION_DAYS and encrypted (SLS's default key), in a private SLS
    project of the deployment's (no project policy: only the account's RAM identities read it), kept on destroy
    when protected; a machine group of the servers (user-defined identity, `machine_group_identity`) and what
    Logtail collects from them (the sources' log files and units). Metrics go to CloudMonitor's own namespace.

    No grant: Logtail and the CloudMonitor agent write as the account's ECS instance, not through the server's
    RAM role (an AccessKey is never put on the server)."""
    plan, opts = request.plan, child_options(parent)
    kept = child_options(parent, retain_on_delete=True) if request.protected else opts
    project = alicloud.log.Project(
        f"{name}-server-logs", project_name=bucket_name(parent, name, "logs"),
        description=f"inferstack {name}: the servers' runtime, gateway and boot logs", tags=request.tags,
        opts=kept)
    store = alicloud.log.Store(
        f"{name}-server-logs-store", project_name=project.project_name, logstore_name=SERVER_LOGSTORE,
        retention_period=LOG_RETENTION_DAYS, encrypt_conf={"enable": True, "encrypt_type": "default"}, opts=kept)
    target = pulumi.Output.all(project.project_name, store.logstore_name).apply(
        lambda names: TelemetryTarget(logs=f"{names[0]}/{names[1]}", metrics=AGENT_NAMESPACE))
    machines = alicloud.log.MachineGroup(
        f"{name}-logtail-servers", project=project.project_name, name=f"{name}-servers",
        identify_type="userdefined",
        identify_lists=[target.apply(lambda t: machine_group_identity(t.log_destination()))], opts=opts)
    collected = sources(plan)
    # (label, input type, input detail): each log file, then the journal of the units.
    collections = [*((_log_label(path), "file", _file_collection(path)) for path in collected.files),
                   ("journal", "plugin", _journal_collection(collected.units))]
    for label, input_type, detail in collections:
        config = alicloud.log.LogTailConfig(
            f"{name}-logtail-{label}", project=project.project_name, logstore=store.logstore_name,
            name=f"{name}-{label}", input_type=input_type, output_type="LogService",
            input_detail=json.dumps(detail), opts=opts)
        alicloud.log.LogTailAttachment(
            f"{name}-logtail-{label}-attachment", project=project.project_name, logtail_config_name=config.name,
            machine_group_name=machines.name, opts=opts)
    return TelemetryResult(target=target, grants=[])


def create_alarms(parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
    """One CloudMonitor alarm rule per rule on the ALB's metrics, notifying the contact group. CloudMonitor
    alarms need a contact group: without one, an empty group is created, to which contacts can be added."""
    opts = child_options(parent)
    contacts: pulumi.Input[str] = request.notification_target or alicloud.cms.AlarmContactGroup(
        f"{name}-alarm-contacts", alarm_contact_group_name=account_name(parent, name, "alarms"),
        describe=f"inferstack {name}: alarms of the fleet", opts=opts).alarm_contact_group_name
    dimensions = pulumi.Output.from_input(request.fleet.watched["load_balancer"]).apply(
        lambda balancer: json.dumps([{"loadBalancerId": balancer}]))
    alarms = [alicloud.cms.Alarm(
        f"{name}-alarm-{rule.kind.value}", name=f"inferstack {name}: {rule.kind.value}", project=ALB_NAMESPACE,
        metric=ALB_ALARM_METRICS[rule.kind][0], metric_dimensions=dimensions, period=METRIC_PERIOD_S,
        contact_groups=[contacts], escalations_critical={
            "statistics": "Value", "comparison_operator": ALB_ALARM_METRICS[rule.kind][1],
            "threshold": _alarm_threshold(request.plan, rule), "times": rule.minutes},
        tags=request.tags, opts=opts)
        for rule in alarm_rules(request.plan)]
    alarm_ids = [alarm.id for alarm in alarms]
    if request.telemetry is not None:
        alarm_ids += _agent_alarms(parent, name, request.plan, request.fleet.watched["fleet_tag"], contacts,
                                   request.tags)
        canary = request.plan.canary
        if canary is not None:
            alarm_ids += _agent_alarms(parent, f"{name}-canary", canary.plan,
                                       request.fleet.watched["canary_fleet_tag"], contacts, request.tags)
    return AlarmsResult(alarm_ids=alarm_ids)


#### Log collection ####


def _log_label(path: str) -> str:
    """A Logtail configuration's label for a log file: its name without the extension (`boot`, `gateway-access`)."""
    return path.rsplit("/", 1)[-1].removesuffix(".log")


def _file_collection(path: str) -> dict[str, Any]:
    """Logtail's input_detail for one log file, each line a log (the whole line in field `content`)."""
    directory, _, file_name = path.rpartition("/")
    return {"logType": LOGTAIL_FILE_LOG_TYPE, "logPath": directory, "filePattern": file_name, "maxDepth": 0,
            "topicFormat": "none", "fileEncoding": "utf8", "logBeginRegex": ".*", "regex": "(.*)",
            "key": ["content"], "discardUnmatch": False, "localStorage": True}


def _journal_collection(units: Sequence[str]) -> dict[str, Any]:
    """Logtail's input_detail for the journal of `units` (the runtime's processes, the gateway, the boot)."""
    return {"plugin": {"inputs": [{"type": LOGTAIL_JOURNAL_PLUGIN, "detail": {
        "JournalPaths": [""], "Units": [f"{unit}.service" for unit in units], "SeekPosition": "tail",
        "ParsePriority": True}}]}}


#### Alarms ####


def _agent_alarms(parent: pulumi.Resource, name: str, plan: DeploymentPlan, fleet_tag: pulumi.Input[str],
                  contacts: pulumi.Input[str], tags: Mapping[str, str]) -> list[StrOutput]:
    """The GPU-memory and disk alarms of one scaling group: an alert template of `agent_alarm_rules`, applied by
    an application group of the servers carrying the group's tag, which notifies the contact group. CloudMonitor's
    alert templates take no rule for missing data: a server whose agent sends nothing does not alarm (docs)."""
    opts = child_options(parent)
    rules = agent_alarm_rules(plan)
    template = alicloud.cms.MetricRuleTemplate(
        f"{name}-agent-alarms", metric_rule_template_name=account_name(parent, name, "agent-alarms"),
        description=f"inferstack {name}: the servers' GPU memory and disk",
        alert_templates=[{
            "category": AGENT_CATEGORY, "namespace": AGENT_NAMESPACE, "metric_name": AGENT_ALARM_METRICS[rule.kind],
            "rule_name": f"inferstack {name}: {rule.kind.value}",
            "escalations": {"critical": {"comparison_operator": "GreaterThanThreshold", "statistics": "Average",
                                         "threshold": _alarm_threshold(plan, rule), "times": str(rule.minutes)}}}
            for rule in rules], opts=opts)
    group = alicloud.cms.DynamicTagGroup(
        f"{name}-servers-monitored", tag_key=FLEET_TAG, contact_group_lists=[contacts],
        match_expresses=[{"tag_value": fleet_tag, "tag_value_match_function": "equals"}],
        template_id_lists=[template.id], opts=opts)
    return [template.id, group.id]


def _alarm_threshold(plan: DeploymentPlan, rule: AlarmRule) -> str:
    """A rule's threshold as CloudMonitor takes it: text, in its metric's unit."""
    value = errors_per_s(plan, rule) if rule.kind is AlarmKind.ERROR_RATE else rule.threshold
    return f"{value:g}"

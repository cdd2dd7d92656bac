"""Log stores keep logs for a set number of days, not forever nor for a default nobody chose."""

from __future__ import annotations

from guardrails.core import ReportViolation, ResourceInput, ResourceRule, integer, show
from guardrails.resource_types import ALI_LOG_STORE, AWS_LOG_GROUP, GCP_LOG_BUCKET

#### Log stores: an explicit retention ####

# Each log store's retention setting (days): a CloudWatch Logs group without one keeps its logs forever; a Cloud
# Logging bucket without one keeps the service's default (30 days), which nobody chose.
HW_LTS_GROUP = "huaweicloud:Lts/group:Group"
LOG_RETENTION_SETTINGS = {AWS_LOG_GROUP: "retentionInDays", GCP_LOG_BUCKET: "retentionDays",
                          ALI_LOG_STORE: "retentionPeriod", HW_LTS_GROUP: "ttlInDays"}
ALI_LOG_STORE_FOREVER = 3650
"""An SLS logstore's retentionPeriod that keeps logs permanently (pulumi_alicloud log.Store: "[1-3650] ... stored
permanently when the value is 3650")."""


def check_log_retention(resource: ResourceInput, report_violation: ReportViolation) -> None:
    setting = LOG_RETENTION_SETTINGS.get(resource.resource_type)
    if setting is None:
        return
    value = resource.props.get(setting)
    days = integer(value)
    if days is None or days <= 0 or (resource.resource_type == ALI_LOG_STORE and days >= ALI_LOG_STORE_FOREVER):
        shown = "unset" if value is None else show(value)
        report_violation(f"the log store has no retention ({setting} is {shown}), so it keeps logs forever or for "
                         f"a default nobody chose: set {setting} (inferstack keeps the servers' logs 90 days)")


LOG_STORES_HAVE_RETENTION = ResourceRule(
    "log-stores-have-retention",
    "Log stores (CloudWatch Logs groups, Cloud Logging buckets, SLS logstores, LTS groups) keep logs for "
    "a set number of days.", check_log_retention, lambda t: t in LOG_RETENTION_SETTINGS)

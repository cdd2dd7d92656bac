"""A fleet's dashboard and its load balancer's access logs on each cloud.

Each test previews the production plan of examples/workloads/chat-8b-public.yaml (a fleet) under mocks and reads the
resources registered, in each cloud's own terms: the dashboard graphs the alarms' metrics with the plan's SLO as a
line (AWS, Google Cloud; Alibaba and Huawei state why they have none), and the load balancer's access logs are on, in
a private, encrypted place of their own that only the load balancer's log delivery may write to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inferstack.clouds import Cloud
from inferstack.components.backend import backend_for
from inferstack.components.observability import PanelKind, dashboard_panels
from inferstack.components.shared import ACCESS_LOG_DAYS
from inferstack.preview import PreviewResult, RegisteredResource, preview_deployment, preview_workload
from tests.sample_plans import sample_plan

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = REPO / "examples" / "workloads" / "chat-8b-public.yaml"
CLOUDS: list[Cloud] = ["aws", "gcp", "alibaba", "huawei"]
DASHBOARD_TYPES = {"aws": "aws:cloudwatch/dashboard:Dashboard", "gcp": "gcp:monitoring/dashboard:Dashboard"}


@pytest.fixture(scope="module", params=CLOUDS)
def preview(request: pytest.FixtureRequest) -> tuple[Cloud, PreviewResult]:
    cloud = request.param
    return cloud, preview_workload(WORKLOAD, cloud=cloud)


def _one(result: PreviewResult, type_: str) -> RegisteredResource:
    (found,) = [r for r in result.resources if r.type == type_]
    return found


def _slo_ms(result: PreviewResult) -> float:
    assert result.plan.slo is not None and result.plan.slo.latency_p95_ms is not None
    return result.plan.slo.latency_p95_ms


#### Dashboard ####


def test_a_fleets_plan_calls_for_four_panels_with_the_slo_and_the_fleets_bounds_as_lines() -> None:
    plan = preview_workload(WORKLOAD, cloud="aws").plan
    assert plan.fleet is not None and plan.slo is not None
    panels = {panel.kind: panel for panel in dashboard_panels(plan)}
    assert set(panels) == set(PanelKind)
    assert panels[PanelKind.LATENCY].lines == (("SLO p95", plan.slo.latency_p95_ms),)
    assert dict(panels[PanelKind.SERVERS].lines) == {"floor": plan.fleet.min_replicas,
                                                     "ceiling": plan.fleet.max_replicas}
    assert dashboard_panels(sample_plan("aws", "gpu-llm", "validation")) == []  # a single server: nothing to graph


def test_each_cloud_has_a_dashboard_or_says_why_not(preview: tuple[Cloud, PreviewResult]) -> None:
    cloud, result = preview
    backend = backend_for(cloud)
    dashboards = [r for r in result.resources if "dashboard" in r.type.lower()]
    if backend.dashboard_gap is None:
        assert [d.type for d in dashboards] == [DASHBOARD_TYPES[cloud]]
    else:
        assert dashboards == [] and "no" in backend.dashboard_gap and len(backend.dashboard_gap) > 80


def test_the_aws_dashboard_graphs_the_alarms_metrics_with_the_slo_line_in_seconds() -> None:
    result = preview_workload(WORKLOAD, cloud="aws")
    body = json.loads(_one(result, DASHBOARD_TYPES["aws"]).inputs["dashboardBody"])
    widgets = {w["properties"]["title"]: w["properties"] for w in body["widgets"]}
    assert len(widgets) == 4 and all(w["period"] == 60 and w["region"] == "us-east-1" for w in widgets.values())
    (latency,) = [w for title, w in widgets.items() if title.startswith("Response time")]
    assert [m[1] for m in latency["metrics"]] == ["TargetResponseTime", "TargetResponseTime"]
    assert [m[-1]["stat"] for m in latency["metrics"]] == ["p50", "p95"]
    assert latency["annotations"]["horizontal"] == [{"label": "SLO p95", "value": _slo_ms(result) / 1000}]
    names = {m[1] for w in widgets.values() for m in w["metrics"]}
    assert names == {"RequestCount", "TargetResponseTime", "HTTPCode_Target_5XX_Count", "HealthyHostCount",
                     "UnHealthyHostCount", "GroupInServiceInstances"}
    # The dimensions are the alarms' own: the load balancer and target group the fleet created.
    (alarm,) = [r for r in result.resources if r.name.endswith("-alarm-unhealthy-servers")]
    assert latency["metrics"][0][2:6] == ["TargetGroup", alarm.inputs["dimensions"]["TargetGroup"],
                                          "LoadBalancer", alarm.inputs["dimensions"]["LoadBalancer"]]


def test_the_aws_group_publishes_the_in_service_count_the_dashboard_graphs() -> None:
    result = preview_workload(WORKLOAD, cloud="aws")
    groups = [r for r in result.resources if r.type == "aws:autoscaling/group:Group"]
    assert groups and all("GroupInServiceInstances" in g.inputs["enabledMetrics"]
                          and g.inputs["metricsGranularity"] == "1Minute" for g in groups)
    body = json.loads(_one(result, DASHBOARD_TYPES["aws"]).inputs["dashboardBody"])
    in_service = [m for w in body["widgets"] for m in w["properties"]["metrics"] if m[1] == "GroupInServiceInstances"]
    assert in_service and in_service[0][3] == groups[0].outputs["name"]


def test_the_google_dashboard_charts_the_alert_policies_filters_with_the_slo_as_a_threshold() -> None:
    result = preview_workload(WORKLOAD, cloud="gcp")
    body = json.loads(_one(result, DASHBOARD_TYPES["gcp"]).inputs["dashboardJson"])
    tiles = body["mosaicLayout"]["tiles"]
    assert len(tiles) == 4 and all(t["xPos"] + t["width"] <= body["mosaicLayout"]["columns"] for t in tiles)
    charts = {t["widget"]["title"]: t["widget"]["xyChart"] for t in tiles}
    (latency,) = [c for title, c in charts.items() if title.startswith("Response time")]
    assert latency["thresholds"] == [{"label": "SLO p95", "value": _slo_ms(result)}]
    reducers = [d["timeSeriesQuery"]["timeSeriesFilter"]["aggregation"]["crossSeriesReducer"]
                for d in latency["dataSets"]]
    assert reducers == ["REDUCE_PERCENTILE_50", "REDUCE_PERCENTILE_95"]
    (alert,) = [r for r in result.resources if r.name.endswith("-alert-latency")]
    alert_filter = alert.inputs["conditions"][0]["conditionThreshold"]["filter"]
    assert latency["dataSets"][1]["timeSeriesQuery"]["timeSeriesFilter"]["filter"] == alert_filter
    filters = [d["timeSeriesQuery"]["timeSeriesFilter"]["filter"] for c in charts.values() for d in c["dataSets"]]
    assert any("instance_group/size" in f for f in filters)


#### Load balancer access logs ####


def _aws_policy(result: PreviewResult, bucket: str) -> dict[str, Any]:
    (policy,) = [r for r in result.resources
                 if r.type == "aws:s3/bucketPolicy:BucketPolicy" and r.inputs["bucket"] == bucket]
    return dict(json.loads(policy.inputs["policy"]))


def test_the_aws_load_balancer_logs_to_a_private_sse_s3_bucket_of_its_own() -> None:
    result = preview_workload(WORKLOAD, cloud="aws")
    (balancer,) = [r for r in result.resources if r.type == "aws:lb/loadBalancer:LoadBalancer"]
    logs = balancer.inputs["accessLogs"]
    assert logs["enabled"] is True
    bucket = logs["bucket"]
    buckets = {r.name: r.inputs["bucket"] for r in result.resources if r.type == "aws:s3/bucket:Bucket"}
    assert bucket in buckets.values()
    assert bucket not in {buckets[n] for n in buckets if n.endswith(("-models", "-data", "-store-logs"))}
    for kind, check in [
        ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
         lambda i: all(i[k] for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                      "restrictPublicBuckets"))),
        # SSE-S3: the only encryption ALB access logs support (ELB User Guide, "Enable access logs").
        ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
         lambda i: i["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"),
        ("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
         lambda i: {"days": ACCESS_LOG_DAYS} in [rule.get("expiration") for rule in i["rules"]]),
    ]:
        (found,) = [r for r in result.resources if r.type == kind and r.inputs["bucket"] == bucket]
        assert check(found.inputs), kind


def test_the_aws_log_bucket_policy_lets_only_the_regions_log_delivery_write_this_accounts_prefix() -> None:
    result = preview_workload(WORKLOAD, cloud="aws")
    (balancer,) = [r for r in result.resources if r.type == "aws:lb/loadBalancer:LoadBalancer"]
    bucket, prefix = balancer.inputs["accessLogs"]["bucket"], balancer.inputs["accessLogs"]["prefix"]
    statements = _aws_policy(result, bucket)["Statement"]
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert allows == [{"Sid": "LoadBalancerAccessLogDelivery", "Effect": "Allow",
                       # us-east-1 predates August 2022: its Elastic Load Balancing account writes the logs
                       "Principal": {"AWS": "arn:aws:iam::127311923021:root"}, "Action": "s3:PutObject",
                       "Resource": f"arn:aws:s3:::{bucket}/{prefix}/AWSLogs/123456789012/*"}]
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
               for s in statements)


def test_a_region_opened_since_jakarta_grants_the_log_delivery_service_instead() -> None:
    sized = preview_workload(WORKLOAD, cloud="aws").plan
    result = preview_deployment(sized.model_copy(update={"region": "ap-southeast-3"}))
    (balancer,) = [r for r in result.resources if r.type == "aws:lb/loadBalancer:LoadBalancer"]
    (allow,) = [s for s in _aws_policy(result, balancer.inputs["accessLogs"]["bucket"])["Statement"]
                if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "logdelivery.elasticloadbalancing.amazonaws.com"}


def test_the_alibaba_load_balancer_logs_to_an_encrypted_logstore_of_its_own() -> None:
    result = preview_workload(WORKLOAD, cloud="alibaba")
    config = _one(result, "alicloud:alb/loadBalancer:LoadBalancer").inputs["accessLogConfig"]
    # The load balancer's own project and logstore (the servers' logs have another: create_telemetry).
    (project,) = [r.inputs for r in result.resources
                  if r.type == "alicloud:log/project:Project" and r.name.endswith("-lb-logs")]
    (store,) = [r.inputs for r in result.resources
                if r.type == "alicloud:log/store:Store" and r.name.endswith("-lb-logs-store")]
    assert config == {"logProject": project["projectName"], "logStore": store["logstoreName"]}
    assert store["projectName"] == project["projectName"] and store["retentionPeriod"] == ACCESS_LOG_DAYS
    assert store["encryptConf"]["enable"] is True
    assert "policy" not in project  # no project policy: only the account's RAM identities read it
    buckets = [r.inputs["bucket"] for r in result.resources if r.type == "alicloud:oss/bucket:Bucket"]
    assert project["projectName"] not in buckets


def test_the_huawei_load_balancer_ships_its_access_log_to_an_lts_stream_of_its_own() -> None:
    result = preview_workload(WORKLOAD, cloud="huawei")
    tank = _one(result, "huaweicloud:DedicatedElb/logtank:Logtank")
    group = _one(result, "huaweicloud:Lts/group:Group")
    stream = _one(result, "huaweicloud:Lts/stream:Stream")
    balancer = _one(result, "huaweicloud:DedicatedElb/loadbalancer:Loadbalancer")
    assert tank.inputs == {"loadbalancerId": balancer.id, "logGroupId": group.id, "logTopicId": stream.id}
    assert stream.inputs["groupId"] == group.id and group.inputs["ttlInDays"] == ACCESS_LOG_DAYS



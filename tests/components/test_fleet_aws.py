"""A fleet on AWS: an Auto Scaling group of private servers behind an HTTPS Application Load Balancer.

Each test builds an InferenceServer under mocks from a production plan (a fleet) and checks what was registered: the
load balancer and its listeners, the group and its template, the scaling policies, the network and the firewall.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import re
from pathlib import Path
from typing import Any

import pulumi
import pytest

from inferstack import bootstrap
from inferstack.bootstrap.render import AWS_LAUNCH_HOOK
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components import InferenceServer, backend_for
from inferstack.components.aws.load_balancer import LOAD_BALANCER_TLS_POLICY
from inferstack.components.aws.preview import PREVIEW_OUTPUTS
from inferstack.components.aws.servers import USER_DATA_LIMIT_BYTES
from inferstack.errors import InputError
from inferstack.plan import CanaryPlan, DeploymentPlan, SpotAboveFloor, WarmPool
from inferstack.preview import Recording, RegisteredResource, preview_workload
from tests.sample_plans import sample_plan

REPO = Path(__file__).resolve().parents[2]
API_DOMAIN = "api.example.com"
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"

LOAD_BALANCER = "aws:lb/loadBalancer:LoadBalancer"
LISTENER = "aws:lb/listener:Listener"
TARGET_GROUP = "aws:lb/targetGroup:TargetGroup"
GROUP = "aws:autoscaling/group:Group"
HOOK = "aws:autoscaling/lifecycleHook:LifecycleHook"
POLICY = "aws:autoscaling/policy:Policy"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
ROUTES = "aws:ec2/routeTable:RouteTable"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
CERTIFICATE_TYPE = "aws:acm/certificate:Certificate"
VALIDATION = "aws:acm/certificateValidation:CertificateValidation"
FLEET_TYPES = {LOAD_BALANCER, LISTENER, TARGET_GROUP, GROUP, POLICY, ALARM, TEMPLATE}
SHAPES = ["gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"]
PUBLIC = {"allowed_cidrs": ["0.0.0.0/0"], "api_key": "sk-fleet-3a1b"}


def _fleet(run: Any, plan: DeploymentPlan | None = None, **args: Any) -> Recording:
    plan = plan or sample_plan("aws", "gpu-llm", "production")
    return run(lambda: _outputs(InferenceServer("chat", {"plan": plan, "api_domain": API_DOMAIN, **args})))


def _outputs(server: InferenceServer) -> pulumi.Output[dict[str, Any]]:
    return pulumi.Output.all(endpoint_url=server.endpoint_url, load_balancer_address=server.load_balancer_address,
                             group_id=server.group_id, instance_ids=server.instance_ids,
                             firewall_ids=server.firewall_ids)


def _one(recording: Recording, resource_type: str) -> RegisteredResource:
    (resource,) = recording.of_type(resource_type)
    return resource


def _listener(recording: Recording, port: int) -> dict[str, Any]:
    (listener,) = [r.inputs for r in recording.of_type(LISTENER) if r.inputs["port"] == port]
    return listener


def _policy(recording: Recording, policy_type: str) -> dict[str, Any]:
    (policy,) = [r.inputs for r in recording.of_type(POLICY) if r.inputs["policyType"] == policy_type]
    return policy


def _minimum_tls(policy: str) -> tuple[int, int]:
    """The oldest TLS version an ELB security policy accepts, read from its name (ELB User Guide, "Security
    policies": ELBSecurityPolicy-TLS13-1-2-... and ELBSecurityPolicy-TLS-1-2-... start at TLS 1.2; the others, such
    as ELBSecurityPolicy-2016-08, at TLS 1.0)."""
    found = re.fullmatch(r"ELBSecurityPolicy-TLS(?:13)?-1-(\d)-.*", policy)
    return (1, int(found.group(1))) if found else (1, 0)


def _subnets_by_id(recording: Recording) -> dict[str, RegisteredResource]:
    return {s.id: s for s in recording.of_type(SUBNET)}


#### The load balancer: HTTPS with TLS 1.2 or newer, HTTP only redirects ####


@pytest.mark.parametrize("shape", SHAPES)
def test_one_load_balancer_serves_https_with_tls_1_2_or_newer_and_http_only_redirects(run: Any, shape: str) -> None:
    recording = _fleet(run, sample_plan("aws", shape, "production"))  # type: ignore[arg-type]
    balancer = _one(recording, LOAD_BALANCER)
    assert balancer.inputs["loadBalancerType"] == "application"
    assert len(recording.of_type(LISTENER)) == 2
    https = _listener(recording, 443)
    assert https["protocol"] == "HTTPS" and https["loadBalancerArn"] == balancer.outputs["arn"]
    assert _minimum_tls(https["sslPolicy"]) >= (1, 2)
    assert https["defaultActions"] == [{"type": "forward",
                                        "targetGroupArn": _one(recording, TARGET_GROUP).outputs["arn"]}]
    http = _listener(recording, 80)
    assert http["protocol"] == "HTTP" and http["loadBalancerArn"] == balancer.outputs["arn"]
    assert http["defaultActions"] == [{"type": "redirect",
                                       "redirect": {"protocol": "HTTPS", "port": "443", "statusCode": "HTTP_301"}}]


def test_the_tls_policy_reader_tells_old_policies_from_new() -> None:
    # The control for the test above: the API's default policy accepts TLS 1.0.
    assert _minimum_tls("ELBSecurityPolicy-2016-08") == (1, 0)
    assert _minimum_tls("ELBSecurityPolicy-TLS-1-1-2017-01") == (1, 1)
    assert _minimum_tls(LOAD_BALANCER_TLS_POLICY) == (1, 2)


def test_the_certificate_is_issued_for_the_api_domain_by_dns_and_the_listener_waits_for_it(
        run: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO)  # the mock engine hands logs to Python's logging
    # The validation answers with the certificate's ARN once ACM has issued it; marked here, to tell the two apart.
    monkeypatch.setitem(PREVIEW_OUTPUTS, VALIDATION, lambda c: (
        "validated", {"certificateArn": f"{c.inputs['certificateArn']}#issued"}))
    recording = _fleet(run)
    certificate = _one(recording, CERTIFICATE_TYPE)
    assert certificate.inputs["domainName"] == API_DOMAIN and certificate.inputs["validationMethod"] == "DNS"
    validation = _one(recording, VALIDATION)
    assert validation.inputs["certificateArn"] == certificate.outputs["arn"]
    # The listener takes the validation's ARN, which resolves only once ACM has issued the certificate.
    assert _listener(recording, 443)["certificateArn"] == f"{certificate.outputs['arn']}#issued"
    record = certificate.outputs["domainValidationOptions"][0]
    assert f"once DNS answers CNAME {record['resourceRecordName']} -> {record['resourceRecordValue']}" in caplog.text
    address = recording.value["load_balancer_address"]
    assert f"chat: point {API_DOMAIN} at {address}" in caplog.text


def test_a_brought_certificate_is_used_and_none_is_issued(run: Any) -> None:
    recording = _fleet(run, api_certificate=CERTIFICATE)
    assert not recording.of_type(CERTIFICATE_TYPE) and not recording.of_type(VALIDATION)
    assert _listener(recording, 443)["certificateArn"] == CERTIFICATE


@pytest.mark.parametrize(("certificate", "expected"), [
    (CERTIFICATE.replace("us-east-1", "eu-west-1"),
     "api_certificate: is in eu-west-1, but the load balancer is in us-east-1"),
    ("arn:aws:acm:us-east-1:123456789012:certificate/not-a-uuid!",
     "chat.api_certificate: is not the ARN of an ACM certificate in the stack's region"),
])
def test_a_certificate_the_load_balancer_cannot_take_is_refused(run: Any, certificate: str, expected: str) -> None:
    with pytest.raises(InputError, match=re.escape(expected)):
        _fleet(run, api_certificate=certificate)


#### The group: the plan's floor and ceiling over private subnets in two zones or more ####


def test_one_group_runs_the_plans_floor_to_ceiling_over_private_subnets_in_distinct_zones(run: Any) -> None:
    base = sample_plan("aws", "gpu-llm", "production")
    assert base.fleet is not None
    plan = base.model_copy(update={"fleet": base.fleet.model_copy(update={"min_replicas": 3, "max_replicas": 7})})
    recording = _fleet(run, plan)
    group = _one(recording, GROUP).inputs
    assert (group["minSize"], group["maxSize"]) == (3, 7)
    assert "desiredCapacity" not in group  # the autoscaler owns it; `pulumi up` never resets it
    subnets = _subnets_by_id(recording)
    zones = [subnets[subnet_id].inputs["availabilityZone"] for subnet_id in group["vpcZoneIdentifiers"]]
    assert len(zones) == len(set(zones)) == plan.zones == 2
    assert all(subnets[s].name.startswith("chat-network-private-subnet-") for s in group["vpcZoneIdentifiers"])
    assert recording.value["group_id"] == _one(recording, GROUP).id and recording.value["instance_ids"] == []


def test_a_fleet_planned_in_one_zone_still_gets_the_two_zones_a_load_balancer_needs(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "production").model_copy(update={"zones": 1})
    recording = _fleet(run, plan)
    subnets = _subnets_by_id(recording)
    balancer_zones = {subnets[s].inputs["availabilityZone"] for s in _one(recording, LOAD_BALANCER).inputs["subnets"]}
    assert len(balancer_zones) == 2
    assert len(_one(recording, GROUP).inputs["vpcZoneIdentifiers"]) == 2


def test_a_fleet_planned_in_more_zones_than_a_created_network_holds_is_refused_up_front(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "production").model_copy(update={"zones": 9})
    with pytest.raises(InputError, match=re.escape("chat.plan.zones: a fleet's network holds 8 zones (a public and a "
                                                   "private /20 in each)")):
        _fleet(run, plan)
    # Checked with the plan, before anything is created; brought subnets are the user's to choose.
    backend = backend_for("aws")
    (problem,) = backend.fleet_problems(plan, api_certificate=None, load_balancer_subnets=None, prefix="chat")
    assert (problem.field, problem.fix) == ("chat.plan.zones", "plan for 8 zones or fewer, or bring your own subnets")
    assert backend.fleet_problems(plan, api_certificate=None, load_balancer_subnets=2, prefix="chat") == []


def test_servers_have_no_public_address_and_reach_the_internet_through_nat(run: Any) -> None:
    recording = _fleet(run, **PUBLIC)
    assert not recording.of_type("aws:ec2/instance:Instance")
    (interface,) = _one(recording, TEMPLATE).inputs["networkInterfaces"]
    assert interface["associatePublicIpAddress"] == "false" and interface["deviceIndex"] == 0
    subnets = _subnets_by_id(recording)
    routes = {r.id: r.inputs["routes"] for r in recording.of_type(ROUTES)}
    associations = {a.inputs["subnetId"]: a.inputs["routeTableId"]
                    for a in recording.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")}
    nat_ids = {n.id for n in recording.of_type("aws:ec2/natGateway:NatGateway")}
    for subnet_id in _one(recording, GROUP).inputs["vpcZoneIdentifiers"]:
        assert subnets[subnet_id].inputs["mapPublicIpOnLaunch"] is False
        (default_route,) = routes[associations[subnet_id]]
        assert default_route["cidrBlock"] == "0.0.0.0/0" and default_route["natGatewayId"] in nat_ids
    # The NAT gateways live in the public subnets, one per zone.
    nat_subnets = {n.inputs["subnetId"] for n in recording.of_type("aws:ec2/natGateway:NatGateway")}
    assert nat_subnets == set(_one(recording, LOAD_BALANCER).inputs["subnets"])


def test_a_failed_health_check_replaces_a_server_after_the_plans_grace(run: Any) -> None:
    plan = sample_plan("aws", "cpu-encoder", "production")
    assert plan.fleet is not None
    recording = _fleet(run, plan)
    group = _one(recording, GROUP).inputs
    assert group["healthCheckType"] == "ELB"
    assert group["healthCheckGracePeriod"] == plan.fleet.health_check_grace_s
    assert group["targetGroupArns"] == [_one(recording, TARGET_GROUP).outputs["arn"]]
    targets = _one(recording, TARGET_GROUP).inputs
    assert (targets["port"], targets["protocol"]) == (plan.serving.port, "HTTP")
    check = targets["healthCheck"]
    assert check["path"] == plan.serving.health_path == "/v2/health/ready"
    assert (check["port"], check["protocol"], check["matcher"]) == ("traffic-port", "HTTP", "200")


def _with_context(plan: DeploymentPlan, max_model_len: int) -> DeploymentPlan:
    """The plan with another context length: its longest answer, and so its request timeout, follow it."""
    return plan.model_copy(update={"serving": plan.serving.model_copy(update={"max_model_len": max_model_len})})


def test_timeouts_let_a_streamed_answer_run_for_the_plans_request_timeout(run: Any) -> None:
    plan = _with_context(sample_plan("aws", "gpu-llm", "production"), 32768)
    # The longest answer: 400 ms to the first token, then 32,767 more at 40 ms; 1,311 s, and a quarter more.
    assert plan.request_timeout_s == 1639
    recording = _fleet(run, plan)
    assert _one(recording, LOAD_BALANCER).inputs["idleTimeout"] >= plan.request_timeout_s
    assert _one(recording, TARGET_GROUP).inputs["deregistrationDelay"] == plan.request_timeout_s  # drains streams


def test_a_request_timeout_beyond_the_load_balancers_limit_is_refused_before_anything_exists(run: Any) -> None:
    plan = _with_context(sample_plan("aws", "gpu-llm", "production"), 131072)  # 5,243 s at 40 ms a token

    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": plan, "api_domain": API_DOMAIN})
        return str(caught.value)

    recording = run(program)
    assert "chat.plan: needs a request timeout of 6555 s" in recording.value and "(4000 s)" in recording.value
    assert recording.resources == []


#### The template: the servers' hardening ####


def test_the_template_hardens_servers_as_single_servers_are(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "production")
    recording = _fleet(run, plan)
    template = _one(recording, TEMPLATE)
    inputs = template.inputs
    assert inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required",
                                         "httpPutResponseHopLimit": 1, "instanceMetadataTags": "disabled"}
    (root,) = inputs["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/sda1"  # the image's root device (the preview's image)
    assert root["ebs"] == {"volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true",
                           "volumeSize": plan.disk_gib}
    assert inputs["iamInstanceProfile"] == {"name": recording.named("chat-identity-profile").outputs["name"]}
    assert inputs["imageId"].startswith("ami-") and inputs["instanceType"] == plan.instance_type
    assert "keyName" not in inputs and "instanceMarketOptions" not in inputs
    assert "imageId" in template.ignore_changes  # a newer image never replaces the servers by surprise
    firewall = recording.named("chat-firewall-sg").id
    assert inputs["networkInterfaces"][0]["securityGroups"] == [firewall]
    kinds = {spec["resourceType"]: spec["tags"]["Name"] for spec in inputs["tagSpecifications"]}
    assert kinds == dict.fromkeys(("instance", "volume", "network-interface"), "chat-server")


def test_the_templates_user_data_is_encoded_as_the_single_servers_is(run: Any) -> None:
    plan = sample_plan("aws", "cpu-llm", "production")
    recording = _fleet(run, plan)
    packed = base64.b64decode(_one(recording, TEMPLATE).inputs["userData"])
    assert len(packed) <= USER_DATA_LIMIT_BYTES
    logs = recording.named("chat-logs").inputs["name"]  # the CloudWatch agent's log group and namespace
    expected = bootstrap.render_bootstrap(plan, "aws", bootstrap.BootstrapOptions(
        model_bucket=recording.named("chat-store-models").id, region="us-east-1",
        telemetry=TelemetryTarget(logs=logs, metrics=logs)))
    assert gzip.decompress(packed).decode() == expected.user_data


def test_a_new_template_version_rolls_out_without_dropping_below_the_groups_size(run: Any) -> None:
    recording = _fleet(run)
    template = _one(recording, TEMPLATE)
    group = _one(recording, GROUP).inputs
    assert group["launchTemplate"] == {"id": template.id, "version": str(template.outputs["latestVersion"])}
    assert group["instanceRefresh"]["strategy"] == "Rolling"
    preferences = group["instanceRefresh"]["preferences"]
    # the plan's rollout: surge 2 (one a zone) over its floor of 2 servers (test_rollout_fleet.py has five)
    assert preferences["minHealthyPercentage"] == 100 and preferences["maxHealthyPercentage"] == 200


def _mixed_policy(recording: Recording) -> dict[str, Any]:
    """The group's mixed instances policy, which launches from the fleet's template (never the group's own template
    setting beside it), with capacity rebalancing."""
    group, template = _one(recording, GROUP).inputs, _one(recording, TEMPLATE)
    assert "launchTemplate" not in group and group["capacityRebalance"] is True
    policy: dict[str, Any] = group["mixedInstancesPolicy"]
    assert policy["launchTemplate"]["launchTemplateSpecification"] == {
        "launchTemplateId": template.id, "version": str(template.outputs["latestVersion"])}
    return policy


def test_spot_fleets_launch_spot_capacity_only(run: Any) -> None:
    plan = sample_plan("aws", "cpu-encoder", "production").model_copy(update={"spot": True})
    policy = _mixed_policy(_fleet(run, plan))
    assert policy["instancesDistribution"]["onDemandPercentageAboveBaseCapacity"] == 0
    assert policy["instancesDistribution"]["onDemandBaseCapacity"] == 0


def test_spot_above_the_floor_keeps_the_floor_on_demand_and_falls_back_on_the_plans_types(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "production")
    assert plan.fleet is not None
    floor = SpotAboveFloor(on_demand_base=plan.fleet.min_replicas, spot_above=2,
                           instance_types=[plan.instance_type, "g6.2xlarge", "g6.4xlarge"],
                           spot_hourly_per_instance=None, spot_price_source=None, spot_price_date=None)
    recording = _fleet(run, plan.model_copy(update={"spot_above_floor": floor}))
    policy, group = _mixed_policy(recording), _one(recording, GROUP).inputs
    assert [o["instanceType"] for o in policy["launchTemplate"]["overrides"]] == floor.instance_types
    assert policy["instancesDistribution"] == {
        "onDemandBaseCapacity": plan.fleet.min_replicas, "onDemandPercentageAboveBaseCapacity": 0,
        "onDemandAllocationStrategy": "prioritized", "spotAllocationStrategy": "capacity-optimized-prioritized"}
    assert (group["minSize"], group["maxSize"]) == (plan.fleet.min_replicas, plan.fleet.max_replicas)


def test_an_on_demand_fleet_launches_from_its_template_alone(run: Any) -> None:
    group = _one(_fleet(run), GROUP).inputs
    assert "mixedInstancesPolicy" not in group and "capacityRebalance" not in group
    assert group["launchTemplate"]["id"]


#### Warm pool: stopped servers prepared ahead, held by a launch hook until their boot says so ####

ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def _with_warm_pool(plan: DeploymentPlan) -> DeploymentPlan:
    pool = WarmPool(servers=2, disk_gib=120, monthly_storage=None, storage_price_basis="x")
    return plan.model_copy(update={"startup": plan.startup.model_copy(update={"warm_pool": pool})})


def test_a_warm_pool_keeps_stopped_servers_reused_on_scale_in_up_to_the_groups_max(run: Any) -> None:
    plan = _with_warm_pool(sample_plan("aws", "gpu-llm", "production"))
    group = _one(_fleet(run, plan), GROUP).inputs
    # No maxGroupPreparedCapacity: its default is the group's max, so the pool holds max minus the desired capacity.
    assert group["warmPool"] == {"poolState": "Stopped", "instanceReusePolicy": {"reuseOnScaleIn": True}}
    assert group["waitForCapacityTimeout"] == "0"  # servers wait in the hook for minutes


def test_every_new_server_of_a_warm_pool_group_waits_in_the_launch_hook_for_the_plans_grace(run: Any) -> None:
    plan = _with_warm_pool(sample_plan("aws", "gpu-llm", "production"))
    assert plan.fleet is not None
    recording = _fleet(run, plan)
    group = _one(recording, GROUP)
    # A hook of its own, which follows the pool on and off (the group's initial hooks are applied at creation only)
    assert "initialLifecycleHooks" not in group.inputs
    assert _one(recording, HOOK).inputs == {
        "name": AWS_LAUNCH_HOOK, "autoscalingGroupName": group.outputs["name"],
        "lifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING", "defaultResult": "ABANDON",
        "heartbeatTimeout": plan.fleet.health_check_grace_s}


def test_the_launch_hooks_heartbeat_stays_within_what_aws_accepts(run: Any) -> None:
    plan = _with_warm_pool(sample_plan("aws", "gpu-llm", "production"))
    assert plan.fleet is not None
    slow = plan.model_copy(update={"fleet": plan.fleet.model_copy(update={"health_check_grace_s": 9000})})
    assert _one(_fleet(run, slow), HOOK).inputs["heartbeatTimeout"] == 7200


def test_a_group_without_a_warm_pool_has_no_pool_no_hook_and_no_lifecycle_grant(run: Any) -> None:
    recording = _fleet(run)
    group = _one(recording, GROUP).inputs
    assert not {"warmPool", "initialLifecycleHooks", "waitForCapacityTimeout"} & set(group)
    assert not recording.of_type(HOOK)  # turning the pool off removes the hook the boot no longer completes
    assert not [p for p in recording.of_type(ROLE_POLICY) if p.name.endswith("-lifecycle")]


def test_servers_of_a_warm_pool_group_may_complete_the_lifecycle_action_of_their_own_group_only(run: Any) -> None:
    recording = _fleet(run, _with_warm_pool(sample_plan("aws", "gpu-llm", "production")))
    group = _one(recording, GROUP)
    (grant,) = [p for p in recording.of_type(ROLE_POLICY) if p.name == "chat-lifecycle"]
    (role,) = recording.of_type("aws:iam/role:Role")
    assert grant.inputs["role"] == role.outputs["name"]  # the role behind the servers' instance profile
    assert json.loads(grant.inputs["policy"])["Statement"] == [
        {"Sid": "FindOwnGroup", "Effect": "Allow", "Action": ["autoscaling:DescribeAutoScalingInstances"],
         "Resource": "*"},
        {"Sid": "CompleteOwnLaunch", "Effect": "Allow", "Action": ["autoscaling:CompleteLifecycleAction"],
         "Resource": group.outputs["arn"]}]
    assert group.outputs["arn"].endswith(f":autoScalingGroupName/{group.outputs['name']}")


def test_a_canary_group_gets_its_own_warm_pool_hook_and_grant(run: Any) -> None:
    plan = _with_warm_pool(sample_plan("aws", "gpu-llm", "production"))
    recording = _fleet(run, plan.model_copy(update={"canary": CanaryPlan(weight=10, plan=plan)}))
    groups = {g.name: g for g in recording.of_type(GROUP)}
    assert set(groups) == {"chat-group", "chat-canary-group"}
    assert all(g.inputs["warmPool"]["poolState"] == "Stopped" for g in groups.values())
    assert {h.inputs["autoscalingGroupName"] for h in recording.of_type(HOOK)} == {
        g.outputs["name"] for g in groups.values()}
    grants = {p.name: json.loads(p.inputs["policy"])["Statement"][1]["Resource"]
              for p in recording.of_type(ROLE_POLICY) if p.name.endswith("-lifecycle")}
    assert grants == {"chat-lifecycle": groups["chat-group"].outputs["arn"],
                      "chat-canary-lifecycle": groups["chat-canary-group"].outputs["arn"]}


#### Scaling: the plan's rate per server, in requests per minute ####


def test_target_tracking_holds_the_plans_requests_per_server_per_minute_after_its_warm_up(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "production")
    assert plan.fleet is not None
    recording = _fleet(run, plan)
    tracking = _policy(recording, "TargetTrackingScaling")
    assert tracking["autoscalingGroupName"] == _one(recording, GROUP).outputs["name"]
    configuration = tracking["targetTrackingConfiguration"]
    assert configuration["targetValue"] == pytest.approx(plan.fleet.target_requests_per_s * 60) == 96
    metric = configuration["predefinedMetricSpecification"]
    assert metric["predefinedMetricType"] == "ALBRequestCountPerTarget"
    balancer, targets = _one(recording, LOAD_BALANCER).outputs, _one(recording, TARGET_GROUP).outputs
    assert metric["resourceLabel"] == f"{balancer['arnSuffix']}/{targets['arnSuffix']}"
    assert tracking["estimatedInstanceWarmup"] == plan.fleet.scale_out_cooldown_s
    assert _one(recording, GROUP).inputs["defaultInstanceWarmup"] == plan.fleet.cold_start_s
    assert configuration["disableScaleIn"] is True  # scale-in is the slow policy's (below)


def test_scale_in_removes_one_server_per_cooldown_while_load_stays_below_half_the_target(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "production")
    assert plan.fleet is not None
    recording = _fleet(run, plan)
    scale_in = _policy(recording, "SimpleScaling")
    assert (scale_in["adjustmentType"], scale_in["scalingAdjustment"]) == ("ChangeInCapacity", -1)
    assert scale_in["cooldown"] == plan.fleet.scale_in_cooldown_s
    (alarm,) = [r.inputs for r in recording.of_type(ALARM) if r.inputs.get("metricName") == "RequestCountPerTarget"]
    (scale_in_policy,) = [r for r in recording.of_type(POLICY) if r.inputs["policyType"] == "SimpleScaling"]
    assert alarm["alarmActions"] == [scale_in_policy.outputs["arn"]]
    assert (alarm["namespace"], alarm["metricName"], alarm["statistic"]) == (
        "AWS/ApplicationELB", "RequestCountPerTarget", "Sum")
    assert alarm["dimensions"] == {"TargetGroup": _one(recording, TARGET_GROUP).outputs["arnSuffix"]}
    assert alarm["comparisonOperator"] == "LessThanThreshold"
    assert alarm["threshold"] == pytest.approx(plan.fleet.target_requests_per_s * 60 / 2)
    assert alarm["period"] * alarm["evaluationPeriods"] == 15 * 60 and alarm["treatMissingData"] == "breaching"


#### The firewall: the API port admits the load balancer only ####


@pytest.mark.parametrize("exposure", [{}, {"allowed_cidrs": ["10.20.0.0/16"]}, PUBLIC],
                         ids=["vpc", "private", "public"])
def test_the_api_port_admits_the_load_balancer_only_and_callers_reach_the_load_balancer(
        run: Any, exposure: dict[str, Any]) -> None:
    plan = sample_plan("aws", "cpu-encoder", "production")
    recording = _fleet(run, plan, **exposure)
    servers, balancer = recording.named("chat-firewall-sg").id, recording.named("chat-firewall-lb-sg").id
    rules = [r.inputs for r in recording.of_type(INGRESS)]
    api = [r for r in rules if r["fromPort"] <= plan.serving.port <= r["toPort"]]
    assert api == [{**api[0], "securityGroupId": servers, "referencedSecurityGroupId": balancer}]
    assert "cidrIpv4" not in api[0] and "cidrIpv6" not in api[0]
    vpc = recording.named("chat-network-vpc").outputs["cidrBlock"]
    callers = {(r["fromPort"], r["cidrIpv4"]) for r in rules if r["securityGroupId"] == balancer}
    sources = exposure.get("allowed_cidrs") or [vpc]
    assert callers == {(port, cidr) for port in (443, 80) for cidr in sources}
    assert _one(recording, LOAD_BALANCER).inputs["securityGroups"] == [balancer]
    # Metrics stay VPC-only, on the servers' group.
    metrics = [r for r in rules if r["fromPort"] == plan.serving.metrics_port]
    assert [(m["securityGroupId"], m["cidrIpv4"]) for m in metrics] == [(servers, vpc)]


def test_the_load_balancer_reaches_the_servers_api_port_and_nothing_else(run: Any) -> None:
    recording = _fleet(run)
    servers, balancer = recording.named("chat-firewall-sg").id, recording.named("chat-firewall-lb-sg").id
    egress = [r.inputs for r in recording.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
              if r.inputs["securityGroupId"] == balancer]
    assert [(e["fromPort"], e["toPort"], e["referencedSecurityGroupId"]) for e in egress] == [(8000, 8000, servers)]


@pytest.mark.parametrize(("exposure", "internal", "subnets"), [
    ({}, True, "chat-network-private-subnet-"),
    ({"allowed_cidrs": ["10.20.0.0/16"]}, True, "chat-network-private-subnet-"),
    (PUBLIC, False, "chat-network-subnet-"),
], ids=["vpc", "private", "public"])
def test_the_load_balancer_faces_the_internet_only_when_an_allowed_network_is_public(
        run: Any, exposure: dict[str, Any], internal: bool, subnets: str) -> None:
    recording = _fleet(run, **exposure)
    balancer = _one(recording, LOAD_BALANCER).inputs
    assert balancer["internal"] is internal
    by_id = _subnets_by_id(recording)
    names = sorted(by_id[s].name for s in balancer["subnets"])
    assert names == [f"{subnets}0", f"{subnets}1"]


#### Outputs, validation plans, and the offline preview ####


def test_the_endpoint_is_the_api_domain_over_https_and_the_load_balancer_is_where_it_points(run: Any) -> None:
    recording = _fleet(run)
    assert recording.value["endpoint_url"] == f"https://{API_DOMAIN}"
    address = _one(recording, LOAD_BALANCER).outputs["dnsName"]
    assert recording.value["load_balancer_address"] == address and address.endswith(".elb.amazonaws.com")


@pytest.mark.parametrize("shape", SHAPES)
def test_validation_plans_stay_single_servers_without_fleet_resources(run: Any, shape: str) -> None:
    recording = run(lambda: InferenceServer("chat", {"plan": sample_plan("aws", shape, "validation")}).instance_ids)  # type: ignore[arg-type]
    assert len(recording.of_type("aws:ec2/instance:Instance")) == 1
    assert not {r.type for r in recording.resources} & {*FLEET_TYPES, "aws:ec2/natGateway:NatGateway"}
    assert [s.name for s in recording.of_type(SUBNET)] == ["chat-network-subnet-0"]
    assert recording.of_type(SUBNET)[0].inputs["mapPublicIpOnLaunch"] is True


def test_the_offline_preview_of_the_demo_workload_shows_the_fleet() -> None:
    result = preview_workload(REPO / "examples" / "workloads" / "chat-8b-public.yaml", cloud="aws",
                              config={"inferstack:allowedCidrs": ["0.0.0.0/0"], "inferstack:apiKey": "sk-demo"})
    assert result.plan.fleet is not None
    registered = {r.type: r for r in result.resources}
    assert set(registered) >= FLEET_TYPES
    assert registered[LOAD_BALANCER].inputs["internal"] is False
    assert registered[TARGET_GROUP].inputs["healthCheck"]["path"] == result.plan.serving.health_path
    assert result.outputs["endpointUrl"] == "https://api.example.com"
    assert result.outputs["loadBalancerAddress"] == registered[LOAD_BALANCER].outputs["dnsName"]
    assert result.outputs["groupId"] == registered[GROUP].id
    tree = result.render_tree()
    assert f"sslPolicy={LOAD_BALANCER_TLS_POLICY}" in tree
    assert "targetTrackingConfiguration.targetValue=" in tree and "healthCheck.path=" in tree

"""Huawei Cloud fleets: an AS group from an AS configuration behind a dedicated ELB (HTTPS, HTTP redirected), the
servers in private subnets with NAT egress, health checks with the plan's grace, step scaling where a metric follows
the load, protection; what Huawei cannot do is refused or stated (test_huawei.py checks the capability table).
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from inferstack import pulumi_mocks
from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.components import InferenceServer, Network
from inferstack.components.huawei import preview as huawei_preview
from inferstack.components.huawei.fleet import SERVING_NAMESPACE, cpu_target_percent, scale_in_percent
from inferstack.components.huawei.load_balancer import ELB_MAX_RESPONSE_TIMEOUT_S, choose_l7_flavor
from inferstack.components.huawei.lookups import IMAGES_LOOKUP
from inferstack.components.huawei.servers import USER_DATA_LIMIT_BYTES
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.preview import Recording, RegisteredResource, preview_stack, preview_workload, record
from inferstack.sizing.planner import plan_workload
from inferstack.spec import parse_workload
from tests.components.neutral_view import FACT_MAPPERS
from tests.sample_plans import sample_plan

# Brought ids: Huawei's VPC, subnet and security group ids are UUIDs
VPC = "0b1e55ed-0000-4000-8000-000000000001"
SUBNET_A = "0b1e55ed-0000-4000-8000-000000000002"
SUBNET_B = "0b1e55ed-0000-4000-8000-000000000003"
PUBLIC_A = "0b1e55ed-0000-4000-8000-000000000005"
PUBLIC_B = "0b1e55ed-0000-4000-8000-000000000006"

REPO = Path(__file__).resolve().parents[2]
REGION = "ap-southeast-3"
CONFIG = {"huaweicloud:region": REGION}
API_DOMAIN, API_CERTIFICATE = "api.example.com", "0123456789abcdef0123456789abcdef"
API = {"api_domain": API_DOMAIN, "api_certificate": API_CERTIFICATE}
API_KEY = "sk-huawei-fleet-0a1b2c3d4e5f"
PUBLIC = {"allowed_cidrs": ["0.0.0.0/0"], "api_key": API_KEY}
VPC_CIDR = "10.64.0.0/16"
# The listener's tls_ciphers_policy values that allow nothing older than TLS 1.2 (dedicatedelb/listener.py).
TLS_1_2_OR_NEWER = {"tls-1-2", "tls-1-2-strict", "tls-1-2-fs", "tls-1-2-fs-with-1-3", "tls-1-2-strict-no-cbc"}
PLAN_SHAPES = ["gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"]


def _plan(variant: str = "gpu-llm", **updates: Any) -> DeploymentPlan:
    return sample_plan("huawei", variant, "production").model_copy(update=updates)  # type: ignore[arg-type]


def _with_context(plan: DeploymentPlan, max_model_len: int) -> DeploymentPlan:
    """The plan with another context length: its request timeout is its longest answer (400 ms to the first token,
    40 ms each further one) and a quarter more, at least 120 s."""
    return plan.model_copy(update={"serving": plan.serving.model_copy(update={"max_model_len": max_model_len})})


def _fleet(run: Any, plan: DeploymentPlan | None = None, *, config: dict[str, Any] | None = None,
           **args: Any) -> Recording:
    plan = plan or _plan()

    def program() -> pulumi.Output[dict[str, Any]]:
        server = InferenceServer("chat", {"plan": plan, "static_assets": False, **API, **args})
        return pulumi.Output.all(url=server.endpoint_url, address=server.load_balancer_address,
                                 group=server.group_id, instances=server.instance_ids, public=server.public_ips)

    return run(program, config=CONFIG if config is None else config)


def _bundle(recording: Recording) -> str:
    """The boot bundle the deployment stores in its model bucket (everything the user data does not carry)."""
    (bundle,) = recording.of_type("huaweicloud:Obs/bucketObject:BucketObject")
    content: str = bundle.inputs["content"]
    return content


def _of(recording: Recording, short_type: str) -> list[RegisteredResource]:
    """By short type ("Loadbalancer"), or by module and type where two modules share one ("As/group:Group", not
    the load balancer's log group "Lts/group:Group")."""
    return [r for r in recording.resources
            if r.custom and (r.type.split(":", 1)[1] if "/" in short_type else r.type.split(":")[-1]) == short_type]


def _one(recording: Recording, short_type: str) -> RegisteredResource:
    (resource,) = _of(recording, short_type)
    return resource


def _listeners(recording: Recording) -> dict[int, RegisteredResource]:
    return {int(listener.inputs["protocolPort"]): listener for listener in _of(recording, "Listener")}


def _api_rules(recording: Recording, port: int) -> list[dict[str, Any]]:
    return [r.inputs for r in _of(recording, "SecgroupRule")
            if r.inputs["direction"] == "ingress" and r.inputs["portRangeMin"] <= port <= r.inputs["portRangeMax"]]


def _user_data(encoded: str) -> str:
    return gzip.decompress(base64.b64decode(encoded)).decode()


#### The production preview ####


def test_the_public_chat_workload_previews_an_https_load_balancer_with_http_redirected() -> None:
    result = preview_workload(REPO / "examples" / "workloads" / "chat-8b-public.yaml", cloud="huawei",
                              api_certificate=API_CERTIFICATE,
                              config={"inferstack:allowedCidrs": ["0.0.0.0/0"], "inferstack:apiKey": API_KEY})
    recording = Recording(resources=result.resources, invokes=[], value=result.outputs)
    balancer = _one(recording, "Loadbalancer")
    listeners = _listeners(recording)
    assert sorted(listeners) == [80, 443]
    https, http = listeners[443].inputs, listeners[80].inputs
    assert (https["protocol"], https["loadbalancerId"], https["serverCertificate"]) == (
        "HTTPS", balancer.id, API_CERTIFICATE)
    assert https["tlsCiphersPolicy"] in TLS_1_2_OR_NEWER
    assert (http["protocol"], http["loadbalancerId"]) == ("HTTP", balancer.id)
    redirect = _one(recording, "L7policy").inputs
    assert (redirect["listenerId"], redirect["action"], redirect["redirectListenerId"]) == (
        listeners[80].id, "REDIRECT_TO_LISTENER", listeners[443].id)
    # Plain HTTP reaches no server: no pool behind port 80; the HTTPS listener's default pool and the pool a
    # canary's weighted policy may name (on the load balancer, no listener's default).
    pools = {p.name: p.inputs for p in _of(recording, "Pool")}
    assert "defaultPoolId" not in http and {name: (p.get("listenerId"), p.get("loadbalancerId"))
                                            for name, p in pools.items()} == {
        "server-pool": (listeners[443].id, None), "server-weighted-pool": (None, balancer.id)}
    assert result.outputs["endpointUrl"] == f"https://{API_DOMAIN}"
    assert result.outputs["loadBalancerAddress"] == recording.named("server-lb-eip").outputs["address"]
    assert result.outputs["groupId"] == _one(recording, "As/group:Group").id and result.outputs["instanceIds"] == []


#### The group ####


@pytest.mark.parametrize("variant", PLAN_SHAPES)
def test_a_production_plan_runs_as_one_group_over_its_zones_sized_by_the_fleet(run: Any, variant: str) -> None:
    plan = _plan(variant)
    assert plan.fleet is not None
    recording = _fleet(run, plan)
    group = _one(recording, "As/group:Group").inputs
    assert (group["minInstanceNumber"], group["desireInstanceNumber"], group["maxInstanceNumber"]) == (
        plan.fleet.min_replicas, plan.fleet.min_replicas, plan.fleet.max_replicas)
    zones = group["availabilityZones"]
    assert len(set(zones)) == len(zones) == plan.zones >= 2
    assert _one(recording, "Loadbalancer").inputs["availabilityZones"] == zones
    assert group["scalingConfigurationId"] == _one(recording, "Configuration").id
    assert group["lbaasListeners"] == [{"poolId": recording.named(pool).id, "protocolPort": plan.serving.port}
                                       for pool in ("chat-pool", "chat-weighted-pool")]
    assert not _of(recording, "Instance")  # the group creates the servers
    assert recording.value["group"] == _one(recording, "As/group:Group").id and recording.value["instances"] == []


@pytest.mark.parametrize("variant", ["gpu-llm", "cpu-encoder"])  # /health and /v2/health/ready
def test_the_health_check_probes_the_readiness_path_and_replaces_servers_after_the_grace(run: Any,
                                                                                          variant: str) -> None:
    plan = _plan(variant)
    assert plan.fleet is not None
    recording = _fleet(run, plan)
    monitors = {monitor.inputs["poolId"]: monitor.inputs for monitor in _of(recording, "Monitor")}
    assert set(monitors) == {pool.id for pool in _of(recording, "Pool")}  # each pool the group is in
    for monitor in monitors.values():
        assert (monitor["protocol"], monitor["urlPath"], monitor["port"], monitor["statusCode"]) == (
            "HTTP", plan.serving.health_path, plan.serving.port, "200")
    group = _one(recording, "As/group:Group").inputs
    assert group["healthPeriodicAuditMethod"] == "ELB_AUDIT"
    assert group["healthPeriodicAuditGracePeriod"] == plan.fleet.health_check_grace_s


@pytest.mark.parametrize("max_model_len", [2048, 4096])  # request timeouts of 120 s and 206 s
def test_the_listener_holds_a_streamed_answer_for_the_plans_request_timeout(run: Any, max_model_len: int) -> None:
    plan = _with_context(_plan(), max_model_len)
    https = _listeners(_fleet(run, plan))[443].inputs
    for timeout in ("idleTimeout", "requestTimeout", "responseTimeout"):
        assert https[timeout] >= plan.request_timeout_s, timeout
    assert https["enableMemberRetry"] is False  # a timed-out generation is not replayed on another server


def test_a_long_context_fleet_caps_its_answers_to_what_the_elb_waits_for_and_the_runtime_enforces_it(
        run: Any) -> None:
    spec = parse_workload({"name": "chat", "model": "llama-3.1-8b", "precision": "bf16", "stage": "production",
                           "traffic": {"requests_per_s": 2, "context_tokens": 16384},
                           "placement": {"clouds": ["huawei"]}})
    plan = plan_workload(spec, clouds=["huawei"]).outcome("huawei").require_chosen("test")
    cap = plan.serving.max_answer_tokens
    assert plan.fleet is not None and cap is not None and cap < plan.serving.max_model_len == 16384
    # The capped answer fits the 300 s a dedicated ELB listener waits; one token more would not.
    assert plan.request_timeout_s <= ELB_MAX_RESPONSE_TIMEOUT_S
    longer = plan.serving.model_copy(update={"max_answer_tokens": cap + 1})
    assert plan.model_copy(update={"serving": longer}).request_timeout_s > ELB_MAX_RESPONSE_TIMEOUT_S
    assert any(f"Answers are capped at {cap} tokens" in line and "300 s" in line for line in plan.rationale)
    https = _listeners(_fleet(run, plan))[443].inputs
    assert {https[t] for t in ("idleTimeout", "requestTimeout", "responseTimeout")} == {plan.request_timeout_s}
    bundle = render_bootstrap(plan, "huawei", BootstrapOptions(model_bucket="models-bucket", region=REGION)).bundle
    assert f"--override-generation-config.max_new_tokens {cap}" in bundle


def test_an_answer_longer_than_the_elb_waits_is_refused_before_anything_is_created() -> None:
    plan = _with_context(_plan(), 8192)  # 411 s; a dedicated ELB listener waits at most 300 s

    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": plan, "static_assets": False, **API})
        return str(caught.value)

    recording = record(program, config=CONFIG)
    assert "chat.plan.request_timeout_s: exceeds the 300 s that a dedicated ELB listener waits" in recording.value
    assert recording.resources == []


#### The servers: the template, no public address, the API port ####


def test_the_template_is_the_server_create_servers_makes(run: Any) -> None:
    fleet = _fleet(run)
    loose = _fleet(run, _plan().model_copy(update={"fleet": None}))
    config = _one(fleet, "Configuration").inputs["instanceConfig"]
    server = _of(loose, "Instance")[0].inputs
    (disk,) = config["disks"]
    assert (config["flavor"], config["image"], config["securityGroupIds"], config["chargingMode"]) == (
        server["flavorId"], server["imageId"], server["securityGroupIds"], server["chargingMode"])
    assert (disk["diskType"], disk["volumeType"], disk["size"], disk["kmsId"]) == (
        "SYS", server["systemDiskType"], server["systemDiskSize"], server["systemDiskKmsKeyId"])
    assert disk["kmsId"]  # the EVS default key, looked up
    # User data encoded as for a single server: Base64 of gzip, within the 32 KB ECS and AS take. (The two differ in
    # the gateway: a single server limits each client's requests, a fleet's gateways see only the load balancer.)
    assert _user_data(config["userData"]).startswith("#cloud-config")
    assert _user_data(server["userData"]).startswith("#cloud-config")
    assert len(base64.b64decode(config["userData"])) <= USER_DATA_LIMIT_BYTES
    assert _one(fleet, "As/group:Group").inputs["agencyName"] == server["agencyName"]  # AS binds it to every server


def test_spot_plans_run_their_fleet_on_spot_capacity(run: Any) -> None:
    config = _one(_fleet(run, _plan(spot=True)), "Configuration").inputs["instanceConfig"]
    assert config["chargingMode"] == "spot"


def test_a_newer_image_does_not_replace_the_template_but_a_new_boot_script_does(
        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    template = _one(_fleet(run), "Configuration")
    assert template.ignore_changes == ("instanceConfig.image",)
    answer = huawei_preview._preview_images

    def newer_images(args: dict[str, Any], context: Any) -> dict[str, Any]:
        found = answer(args, context)
        return {**found, "images": [{**image, "id": f"new-{image['id']}"} for image in found["images"]]}

    monkeypatch.setitem(huawei_preview.PREVIEW_LOOKUPS, IMAGES_LOOKUP, newer_images)
    newer = _one(_fleet(run), "Configuration").inputs
    # Every argument of a configuration replaces it, its name included: a newer image must not change the name.
    assert newer["instanceConfig"]["image"] != template.inputs["instanceConfig"]["image"]
    assert newer["scalingConfigurationName"] == template.inputs["scalingConfigurationName"]
    plan = _plan()
    other_port = plan.model_copy(update={"serving": plan.serving.model_copy(update={"port": 8080})})
    renamed = _one(_fleet(run, other_port), "Configuration").inputs["scalingConfigurationName"]
    assert renamed != template.inputs["scalingConfigurationName"] and len(renamed) <= 64


@pytest.mark.parametrize("exposure", [{}, PUBLIC])
def test_no_server_gets_a_public_address(run: Any, exposure: dict[str, Any]) -> None:
    recording = _fleet(run, **exposure)
    assert "publicIp" not in _one(recording, "Configuration").inputs["instanceConfig"]
    assert not _of(recording, "Instance") and not _of(recording, "EipAssociate")
    assert {e.name for e in _of(recording, "Eip")} <= {"chat-network-nat-eip", "chat-lb-eip"}
    private = [s.id for s in sorted(_of(recording, "Subnet"), key=lambda s: s.name) if "private" in s.name]
    assert _one(recording, "As/group:Group").inputs["networks"] == [{"id": private[0]}]


@pytest.mark.parametrize("exposure", [{}, {"allowed_cidrs": ["10.20.0.0/16"]}, PUBLIC])
def test_the_api_port_admits_the_load_balancers_network_and_never_the_allowed_cidrs(run: Any,
                                                                                     exposure: dict[str, Any]) -> None:
    plan = _plan("cpu-encoder")  # metrics on a port of their own
    recording = _fleet(run, plan, **exposure)
    assert [rule["remoteIpPrefix"] for rule in _api_rules(recording, plan.serving.port)] == [VPC_CIDR]
    assert plan.serving.metrics_port is not None
    assert [rule["remoteIpPrefix"] for rule in _api_rules(recording, plan.serving.metrics_port)] == [VPC_CIDR]


#### The load balancer: exposure, callers, brought networks, protection ####


def test_an_internet_facing_load_balancer_takes_an_elastic_ip_in_the_public_subnet(run: Any) -> None:
    recording = _fleet(run, **PUBLIC)
    balancer = _one(recording, "Loadbalancer").inputs
    eip = recording.named("chat-lb-eip")
    public_subnet = recording.named("chat-network-subnet-0")
    assert balancer["ipv4EipId"] == eip.id
    assert balancer["ipv4SubnetId"] == public_subnet.outputs["ipv4SubnetId"]
    assert ("huaweicloud:Vpc/getSubnet:getSubnet", {"id": public_subnet.id}) in recording.invokes
    assert recording.value["address"] == eip.outputs["address"]
    assert not _of(recording, "Ipgroup")  # the whole internet may call: no ACL
    assert recording.value["url"] == f"https://{API_DOMAIN}"


def test_an_internal_load_balancer_lives_in_the_servers_subnet_and_admits_the_vpc_only(run: Any) -> None:
    recording = _fleet(run)
    balancer = _one(recording, "Loadbalancer")
    private_subnet = recording.named("chat-network-private-subnet-0")
    assert "ipv4EipId" not in balancer.inputs and not [e for e in _of(recording, "Eip") if e.name == "chat-lb-eip"]
    assert balancer.inputs["ipv4SubnetId"] == private_subnet.outputs["ipv4SubnetId"]
    assert recording.value["address"] == balancer.outputs["ipv4Address"]
    acl = _one(recording, "Ipgroup")
    assert [entry["ip"] for entry in acl.inputs["ipLists"]] == [VPC_CIDR]


@pytest.mark.parametrize(("cidrs", "internet_facing"), [(["10.20.0.0/16", "192.168.8.0/24"], False),
                                                        (["203.0.113.0/24"], True)])
def test_callers_are_limited_to_the_allowed_cidrs_at_both_listeners(run: Any, cidrs: list[str],
                                                                    internet_facing: bool) -> None:
    recording = _fleet(run, allowed_cidrs=cidrs, api_key=API_KEY)
    acl = _one(recording, "Ipgroup")
    assert [entry["ip"] for entry in acl.inputs["ipLists"]] == cidrs
    for listener in _listeners(recording).values():
        assert (listener.inputs["ipGroup"], listener.inputs["accessPolicy"]) == (acl.id, "white")
    assert ("ipv4EipId" in _one(recording, "Loadbalancer").inputs) == internet_facing


def test_a_brought_network_puts_the_load_balancer_in_the_subnets_given_for_it(run: Any) -> None:
    recording = _fleet(run, network_id=VPC, subnet_ids=[SUBNET_A, SUBNET_B],
                       load_balancer_subnet_ids=[PUBLIC_A, PUBLIC_B], **PUBLIC)
    assert not _of(recording, "Vpc") and not _of(recording, "Subnet") and not _of(recording, "Gateway")
    balancer = _one(recording, "Loadbalancer").inputs
    assert ("huaweicloud:Vpc/getSubnet:getSubnet", {"id": PUBLIC_A}) in recording.invokes
    assert balancer["ipv4SubnetId"] == huawei_preview._ipv4_subnet_id(PUBLIC_A) and balancer["vpcId"] == VPC
    group = _one(recording, "As/group:Group").inputs
    assert (group["vpcId"], group["networks"]) == (VPC, [{"id": SUBNET_A}])


def test_a_brought_network_with_a_public_endpoint_needs_subnets_for_the_load_balancer(run: Any) -> None:
    with pytest.raises(InputError, match=r"chat\.load_balancer_subnet_ids: is required with a brought network"):
        _fleet(run, network_id=VPC, subnet_ids=[SUBNET_A, SUBNET_B], **PUBLIC)


@pytest.mark.parametrize("protected", [True, False])
def test_protection_covers_the_group_the_load_balancer_and_its_address(run: Any, protected: bool) -> None:
    recording = _fleet(run, protect_servers=protected, **PUBLIC)
    guarded = [_one(recording, "As/group:Group"), _one(recording, "Loadbalancer"), recording.named("chat-lb-eip")]
    assert [resource.protect for resource in guarded] == [protected] * 3
    assert _one(recording, "Loadbalancer").inputs["deletionProtectionEnable"] is protected
    # A new template (a new boot script) is created next to the old one; the group moves to it in place.
    assert _one(recording, "Configuration").protect is False


def test_the_group_and_the_load_balancer_are_replaced_delete_first(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A successor group cannot take the same name (nor the GPU quota), a successor load balancer the same elastic
    IP, while the old one exists; the template, bound to the group, must be created before the old one goes."""
    delete_first: dict[str, bool] = {}
    register = pulumi_mocks.RecordingMonitor.RegisterResource

    def recording_options(monitor: Any, request: Any) -> Any:
        delete_first[request.name] = request.deleteBeforeReplace
        return register(monitor, request)

    monkeypatch.setattr(pulumi_mocks.RecordingMonitor, "RegisterResource", recording_options)
    _fleet(run, **PUBLIC)
    assert (delete_first["chat-group"], delete_first["chat-lb"], delete_first["chat-template"]) == (True, True, False)


#### Scaling ####


def test_cpu_fleets_scale_on_cpu_usage_at_the_level_of_the_plans_target(run: Any) -> None:
    plan = _plan("cpu-llm")  # 2 servers saturate at 2.0 requests/s; the fleet holds 1.6 a server
    plan = plan.model_copy(update={"performance": plan.performance.model_copy(update={"capacity_requests_per_s": 4.0})})
    assert plan.fleet is not None
    recording = _fleet(run, plan)
    group = _one(recording, "As/group:Group")
    alarms = {alarm.name: alarm for alarm in _of(recording, "Alarmrule")}
    policies = {policy.name: policy.inputs for policy in _of(recording, "Policy")}
    expected = {"out": (">", 80, 1, "ADD", plan.fleet.scale_out_cooldown_s),
                "in": ("<", 53, 3, "REMOVE", plan.fleet.scale_in_cooldown_s)}  # 80 % x 2/3: one fewer stays <= 80 %
    for direction, (operator, threshold, periods, operation, cooldown_s) in expected.items():
        alarm = alarms[f"chat-scale-{direction}-alarm"]
        (condition,) = alarm.inputs["conditions"]
        assert alarm.inputs["metric"] == {"namespace": "SYS.AS"}
        assert alarm.inputs["resources"] == [{"dimensions": [{"name": "AutoScalingGroup", "value": group.id}]}]
        assert (condition["metricName"], condition["comparisonOperator"], condition["value"], condition["count"]) == (
            "cpu_util", operator, threshold, periods)
        assert alarm.inputs["alarmActions"] == [{"type": "autoscaling", "notificationLists": []}]
        policy = policies[f"chat-scale-{direction}"]
        assert (policy["scalingGroupId"], policy["scalingPolicyType"], policy["alarmId"]) == (
            group.id, "ALARM", alarm.id)
        assert policy["scalingPolicyAction"] == {"operation": operation, "instanceNumber": 1}
        assert policy["coolDownTime"] == cooldown_s
    assert group.inputs["coolDownTime"] == plan.fleet.scale_out_cooldown_s
    assert group.ignore_changes == ("desireInstanceNumber",)  # the policies move it; `pulumi up` must not reset it


@pytest.mark.parametrize("variant", ["gpu-llm", "gpu-encoder"])
def test_gpu_fleets_scale_on_the_requests_per_second_their_servers_report(run: Any, variant: str) -> None:
    plan = _plan(variant)
    assert plan.fleet is not None
    recording = _fleet(run, plan)
    (group,) = _of(recording, "As/group:Group")
    alarms = {a.name: a for a in _of(recording, "Alarmrule") if a.inputs["metric"]["namespace"] == SERVING_NAMESPACE}
    policies = {p.name: p.inputs for p in _of(recording, "Policy")}
    assert len(alarms) == 2 and len(policies) == 2
    target = round(plan.fleet.target_requests_per_s, 3)
    expected = {"out": (">", target, "ADD", plan.fleet.scale_out_cooldown_s),
                "in": ("<", round(target * plan.fleet.min_replicas / (plan.fleet.min_replicas + 1), 3), "REMOVE",
                       plan.fleet.scale_in_cooldown_s)}
    for direction, (operator, threshold, operation, cooldown) in expected.items():
        alarm = alarms[f"chat-scale-{direction}-alarm"]
        assert alarm.inputs["resources"] == [{"dimensions": [{"name": "group",
                                                              "value": group.inputs["scalingGroupName"]}]}]
        (condition,) = alarm.inputs["conditions"]
        assert (condition["metricName"], condition["comparisonOperator"], condition["value"], condition["period"],
                condition["filter"]) == ("requests_per_s", operator, threshold, 60, "average")
        assert "alarmActions" not in alarm.inputs  # AS adds its own action to the rule a policy names
        policy = policies[f"chat-scale-{direction}"]
        assert (policy["scalingPolicyType"], policy["alarmId"], policy["scalingPolicyAction"]["operation"],
                policy["coolDownTime"]) == ("ALARM", alarm.id, operation, cooldown)


def test_a_gpu_fleets_servers_report_under_their_groups_name_with_an_agency_that_may_write_metric_data(
        run: Any) -> None:
    recording = _fleet(run, _plan("gpu-llm"))
    (group,) = _of(recording, "As/group:Group")
    bundle = _bundle(recording)
    assert SERVING_NAMESPACE in bundle and group.inputs["scalingGroupName"] in bundle
    (role,) = [r for r in _of(recording, "Role") if r.name.endswith("-metrics-write")]
    assert json.loads(role.inputs["policy"])["Statement"] == [{"Effect": "Allow",
                                                                "Action": ["ces:metricData:create"]}]
    (agency,) = [a for a in _of(recording, "Agency") if a.name.endswith("-agency")]  # the servers' (not OBS's)
    assert any(role.inputs["name"] in entry["roles"] for entry in agency.inputs["projectRoles"])


def test_a_cpu_fleet_reports_nothing_and_scales_on_cpu(run: Any) -> None:
    recording = _fleet(run, _plan("cpu-llm"))
    assert SERVING_NAMESPACE not in _bundle(recording)
    assert not [r for r in _of(recording, "Role") if r.name.endswith("-metrics-write")]
    assert {a.inputs["metric"]["namespace"] for a in _of(recording, "Alarmrule") if "-scale-" in a.name} == {"SYS.AS"}


def test_the_cpu_target_is_the_plans_target_as_a_share_of_a_servers_saturation() -> None:
    plan = _plan("cpu-llm")
    assert plan.fleet is not None
    for capacity, expected in ((4.0, 80), (8.0, 40), (2.0, 95), (100.0, 10)):  # bounded to 10..95 %
        performance = plan.performance.model_copy(update={"capacity_requests_per_s": capacity})
        assert cpu_target_percent(plan.model_copy(update={"performance": performance}), plan.fleet) == expected
    assert scale_in_percent(80, plan.fleet.model_copy(update={"min_replicas": 3})) == 60


#### The endpoint's certificate ####


def test_a_fleet_without_an_elb_certificate_is_refused(run: Any) -> None:
    with pytest.raises(InputError, match="api_certificate: is required on Huawei Cloud: the id of the domain's "
                                         "server certificate in Dedicated ELB"):
        run(lambda: InferenceServer("chat", {"plan": _plan(), "static_assets": False, "api_domain": API_DOMAIN}),
            config=CONFIG)


def test_a_malformed_certificate_id_is_refused_before_anything_is_created() -> None:
    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": _plan(), "static_assets": False, **API,
                                     "api_certificate": "scs1554192131150"})  # an SCM id, not an ELB one
        return str(caught.value)

    recording = record(program, config=CONFIG)
    assert "chat.api_certificate: is not the id of the domain's server certificate in Dedicated ELB" in recording.value
    assert recording.resources == []


def test_the_smallest_l7_flavor_on_sale_that_carries_the_fleets_peak_is_chosen() -> None:
    flavors = [{"id": "large", "name": "L7 large", "qps": 10_000, "flavorSoldOut": False},
               {"id": "small", "name": "L7 small", "qps": 2_000, "flavorSoldOut": True},
               {"id": "medium", "name": "L7 medium", "qps": 4_000, "flavorSoldOut": False}]
    assert choose_l7_flavor(flavors, 100) == "medium"
    assert choose_l7_flavor(flavors, 5_000) == "large"
    with pytest.raises(InputError, match="no dedicated ELB Layer-7 flavor on sale carries 2e\\+04 requests/s"):
        choose_l7_flavor(flavors, 20_000)


#### The network ####


def test_a_fleet_over_more_zones_than_its_network_holds_is_refused_before_anything_is_created() -> None:
    plan = _plan(zones=9)  # a private /20 per zone in the upper half of the network's /16 holds 8

    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": plan, "static_assets": False, **API})
        return str(caught.value)

    recording = record(program, config=CONFIG)
    assert "chat.plan.zones: a fleet's network has room for 8 zones (got 9)" in recording.value
    assert recording.resources == []


def test_private_servers_get_a_private_subnet_per_zone_with_nat_egress(run: Any) -> None:
    def program() -> pulumi.Output[Any]:
        network = Network("net", {"cloud": "huawei", "instance_type": "s7.2xlarge.4", "zones": 2,
                                  "private_servers": True})
        return pulumi.Output.all(public=network.subnet_ids, private=network.private_subnet_ids)

    recording = run(program, config=CONFIG)
    subnets = {subnet.name: subnet for subnet in _of(recording, "Subnet")}
    public = [subnets[f"net-subnet-{index}"] for index in range(2)]
    private = [subnets[f"net-private-subnet-{index}"] for index in range(2)]
    assert recording.value == {"public": [s.id for s in public], "private": [s.id for s in private]}
    assert [s.inputs["availabilityZone"] for s in private] == [s.inputs["availabilityZone"] for s in public] == [
        f"{REGION}a", f"{REGION}b"]
    assert [s.inputs["cidr"] for s in public + private] == ["10.64.0.0/20", "10.64.16.0/20", "10.64.128.0/20",
                                                           "10.64.144.0/20"]
    nat_address = _one(recording, "Eip")
    assert {r.inputs["subnetId"] for r in _of(recording, "SnatRule")} == {s.id for s in private}
    assert {r.inputs["floatingIpId"] for r in _of(recording, "SnatRule")} == {nat_address.id}


def test_a_validation_plan_stays_one_server_without_a_load_balancer(run: Any) -> None:
    recording = run(lambda: InferenceServer("chat", {"plan": sample_plan("huawei", "gpu-llm", "validation"),
                                                     "static_assets": False}).endpoint_url, config=CONFIG)
    assert len(_of(recording, "Instance")) == 1
    assert not {"Group", "Configuration", "Loadbalancer", "Listener", "Policy"} & {
        r.type.split(":")[-1] for r in recording.resources}
    assert not [s for s in _of(recording, "Subnet") if "private" in s.name]
    assert recording.value.startswith("http://10.64.")


#### The production stack and the security facts ####


def test_the_production_stack_deploys_a_public_fleet_on_its_api_domain() -> None:
    config = yaml.safe_load((REPO / "stacks" / "Pulumi.huawei-prod.yaml").read_text())["config"]
    result = preview_stack({**config, "inferstack:apiKey": API_KEY})
    assert result.plan.stage == "production" and result.plan.fleet is not None
    types = [r.type for r in result.resources]
    assert types.count("huaweicloud:As/group:Group") == 1 and "huaweicloud:Ecs/instance:Instance" not in types
    assert result.outputs["endpointUrl"] == f"https://{config['inferstack:apiDomain']}"
    (listener,) = [r for r in result.resources if r.type == "huaweicloud:DedicatedElb/listener:Listener"
                   and r.inputs["protocol"] == "HTTPS"]
    assert listener.inputs["serverCertificate"] == config["inferstack:apiCertificate"]


def test_the_facts_mapper_sees_a_fleets_servers_in_its_template(run: Any) -> None:
    recording = _fleet(run, **PUBLIC)
    (server,) = FACT_MAPPERS["huawei"](recording).servers
    assert server.name == "chat-template" and server.root_disk_encrypted
    assert server.user_data.startswith("#cloud-config") and API_KEY not in server.user_data


def test_a_canarys_group_scales_on_the_series_its_servers_report_to(tmp_path: Path) -> None:
    """The canary's servers take the deployment's bundle, so they report under the main group's name: the canary
    group's alarms read that series too (each group to its own plan's target), never a series nobody writes."""
    from tests.components.conftest import CLOUD_ARGS

    workload = tmp_path / "chat.yaml"
    workload.write_text(yaml.safe_dump({
        "name": "chat", "model": "llama-3.1-8b", "precision": "bf16", "stage": "production",
        "traffic": {"requests_per_s": 20}, "canary": {"model": "llama-3.1-8b", "precision": "fp8", "weight": 10},
        "placement": {"clouds": ["huawei"]}}))
    result = preview_workload(workload, cloud="huawei", **CLOUD_ARGS["huawei"])
    groups = {r.name: r.inputs["scalingGroupName"] for r in result.resources if r.type.endswith("As/group:Group")}
    series = {r.name: r.inputs["resources"][0]["dimensions"][0]["value"] for r in result.resources
              if r.type.endswith(":Alarmrule") and r.inputs["metric"]["namespace"] == SERVING_NAMESPACE}
    main = next(value for name, value in groups.items() if "canary" not in name)
    assert len(groups) == 2 and len(series) == 4 and set(series.values()) == {main}

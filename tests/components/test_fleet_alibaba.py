"""Alibaba Cloud fleets: an ESS scaling group from a launch template, behind an ALB with HTTPS, autoscaled on ALB
requests per server, in private vSwitches with NAT egress.

Every program runs under Pulumi mocks (`run`, conftest.py): these tests check what would be registered, not what
Alibaba Cloud answers. A plan with a fleet is every production sample plan (two to four servers).
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import math
import re
import runpy
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from inferstack import pulumi_mocks
from inferstack.components import InferenceServer, InferenceServerArgs
from inferstack.components.alibaba.load_balancer import ALB_MAX_TIMEOUT_S, ALB_MIN_ZONES
from inferstack.components.alibaba.network import PUBLIC_BANDWIDTH_MBPS
from inferstack.components.alibaba.preview import PREVIEW_IMAGE_ID, PREVIEW_LOOKUPS
from inferstack.components.alibaba.servers import USER_DATA_LIMIT_BYTES
from inferstack.components.shared import NETWORK_CIDR, compressed_user_data
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan, SpotAboveFloor
from inferstack.preview import Recording, RegisteredResource, preview_workload, record
from tests.components.neutral_view import FACT_MAPPERS
from tests.sample_plans import Variant, sample_plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORKLOADS = EXAMPLES / "workloads"
CERTIFICATE = "12345678-ap-southeast-1"
DOMAIN = "api.example.com"
ENDPOINT = {"api_domain": DOMAIN, "api_certificate": CERTIFICATE}
API_KEY = "sk-fleet-0a1b2c3d4e5f"
VPN_RANGE, OFFICE_RANGE = "10.20.0.0/16", "198.51.100.0/24"
VPN = {"allowed_cidrs": [VPN_RANGE]}  # a private network beyond the VPC
OFFICE = {"allowed_cidrs": [OFFICE_RANGE], "api_key": API_KEY}  # a public network, not the whole internet
PUBLIC = {"allowed_cidrs": ["0.0.0.0/0"], "api_key": API_KEY}
VARIANTS: list[Variant] = ["gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"]
TLS_1_2_OR_NEWER = {"tls_cipher_policy_1_2", "tls_cipher_policy_1_2_strict", "tls_cipher_policy_1_2_strict_with_1_3"}

LOAD_BALANCER = "alicloud:alb/loadBalancer:LoadBalancer"
LISTENER = "alicloud:alb/listener:Listener"
SERVER_GROUP = "alicloud:alb/serverGroup:ServerGroup"
RULE = "alicloud:alb/rule:Rule"
ACL_ATTACHMENT = "alicloud:alb/listenerAclAttachment:ListenerAclAttachment"
SCALING_GROUP = "alicloud:ess/scalingGroup:ScalingGroup"
SCALING_RULE = "alicloud:ess/scalingRule:ScalingRule"
TEMPLATE = "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate"
SWITCH = "alicloud:vpc/switch:Switch"
SG_RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"
INSTANCE = "alicloud:ecs/instance:Instance"


def _fleet_plan(variant: Variant = "gpu-llm", **update: Any) -> DeploymentPlan:
    plan = sample_plan("alibaba", variant, "production")
    return plan.model_copy(update=update) if update else plan


def _deploy(run: Any, plan: DeploymentPlan, config: dict[str, Any] | None = None, **args: Any) -> Recording:
    def program() -> Any:
        server = InferenceServer("chat", cast(InferenceServerArgs, {
            "plan": plan, "static_assets": False, **ENDPOINT, **args}))
        return server.endpoint_url.apply(lambda url: {"url": url})

    recording: Recording = run(program, config=config)
    return recording


def _rejected(run: Any, plan: DeploymentPlan, **args: Any) -> tuple[str, Recording]:
    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", cast(InferenceServerArgs, {"plan": plan, "static_assets": False, **args}))
        return str(caught.value)

    recording: Recording = run(program)
    return recording.value, recording


def _one(recording: Recording, resource_type: str) -> RegisteredResource:
    (resource,) = recording.of_type(resource_type)
    return resource


def _listener(recording: Recording, port: int) -> RegisteredResource:
    (listener,) = [r for r in recording.of_type(LISTENER) if r.inputs["listenerPort"] == port]
    return listener


def _forwarded_to(listener: RegisteredResource) -> list[str]:
    (action,) = listener.inputs["defaultActions"]
    assert action["type"] == "ForwardGroup"
    return [t["serverGroupId"] for t in action["forwardGroupConfig"]["serverGroupTuples"]]


def _zone_of(recording: Recording) -> dict[str, str]:
    return {s.id: s.inputs["zoneId"] for s in recording.of_type(SWITCH)}


def _vswitches(recording: Recording, prefix: str) -> list[str]:
    """Ids of the created vSwitches whose name starts with `prefix`, in zone order (by their index)."""
    return [s.id for s in sorted(recording.of_type(SWITCH), key=lambda s: s.name) if s.name.startswith(prefix)]


def _private_vswitches(recording: Recording) -> list[str]:
    return _vswitches(recording, "chat-network-private-vswitch-")


def _public_vswitches(recording: Recording) -> list[str]:
    return _vswitches(recording, "chat-network-vswitch-")


@pytest.fixture
def dependencies(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, tuple[str, ...]]]:
    """The URNs each registration depends on, by resource name (the recording keeps no dependencies)."""
    seen: dict[str, tuple[str, ...]] = {}
    register = pulumi_mocks.RecordingMonitor.RegisterResource

    def recording_dependencies(monitor: Any, request: Any) -> Any:
        seen[request.name] = tuple(request.dependencies)
        return register(monitor, request)

    monkeypatch.setattr(pulumi_mocks.RecordingMonitor, "RegisterResource", recording_dependencies)
    yield seen


#### The preview ####


def test_the_public_chat_workloads_preview_shows_the_load_balancer_its_listeners_the_group_and_its_scaling() -> None:
    result = preview_workload(WORKLOADS / "chat-8b-public.yaml", cloud="alibaba", api_certificate=CERTIFICATE)
    types = {r.type for r in result.resources}
    assert {LOAD_BALANCER, LISTENER, SERVER_GROUP, RULE, SCALING_GROUP, SCALING_RULE, TEMPLATE,
            "alicloud:ess/lifecycleHook:LifecycleHook", "alicloud:vpc/natGateway:NatGateway"} <= types
    assert INSTANCE not in types
    assert result.outputs["endpointUrl"] == "https://api.example.com"
    assert result.outputs["loadBalancerAddress"].endswith(".ap-southeast-1.alb.aliyuncs.com")
    assert result.outputs["groupId"].startswith("asg-")
    tree = result.render_tree()
    assert "securityPolicyId=tls_cipher_policy_1_2_strict_with_1_3" in tree
    assert f"healthCheckConfig.healthCheckPath={result.plan.serving.health_path}" in tree
    assert "metricName=LoadBalancerRealServerAverageQps" in tree


def test_the_example_in_production_is_a_fleet_on_the_configured_domain(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "alibaba-gpu-chat"
    shutil.copytree(EXAMPLES / "alibaba-gpu-chat", folder)
    workload = yaml.safe_load((folder / "workload.yaml").read_text())
    (folder / "workload.yaml").write_text(yaml.safe_dump({**workload, "stage": "production"}))
    config = yaml.safe_load((folder / "Pulumi.dev.yaml").read_text())["config"]
    monkeypatch.chdir(folder)

    def main() -> None:
        runpy.run_path(str(folder / "__main__.py"))

    recording = record(main, project="alibaba-gpu-chat", stack="dev", config={
        **config, "alibaba-gpu-chat:apiDomain": DOMAIN, "alibaba-gpu-chat:apiCertificate": CERTIFICATE})
    assert _listener(recording, 443).inputs["certificates"] == {"certificateId": CERTIFICATE}
    assert recording.of_type(SCALING_GROUP) and not recording.of_type(INSTANCE)


#### The load balancer ####


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_https_listener_serves_the_certificate_with_tls_1_2_or_newer_and_forwards_to_the_servers(
        run: Any, variant: Variant) -> None:
    recording = _deploy(run, _fleet_plan(variant))
    load_balancer = _one(recording, LOAD_BALANCER)
    https = _listener(recording, 443)
    assert https.inputs["listenerProtocol"] == "HTTPS" and https.inputs["loadBalancerId"] == load_balancer.id
    assert https.inputs["certificates"] == {"certificateId": CERTIFICATE}
    assert https.inputs["securityPolicyId"] in TLS_1_2_OR_NEWER
    assert _forwarded_to(https) == [recording.named("chat-servers").id]
    assert load_balancer.inputs["loadBalancerEdition"] == "Standard"
    assert len(recording.of_type(LISTENER)) == 2  # and HTTP, below


def test_http_on_80_only_redirects_to_https(run: Any) -> None:
    recording = _deploy(run, _fleet_plan())
    http = _listener(recording, 80)
    assert http.inputs["listenerProtocol"] == "HTTP"
    (nowhere,) = [g for g in recording.of_type(SERVER_GROUP) if g.id in _forwarded_to(http)]
    assert nowhere.id != recording.named("chat-servers").id  # no server behind plain HTTP
    assert nowhere.inputs["healthCheckConfig"]["healthCheckEnabled"]  # every server group keeps its check
    assert not [a for a in recording.of_type("alicloud:ess/albServerGroupAttachment:AlbServerGroupAttachment")
                if a.inputs["albServerGroupId"] == nowhere.id]
    (rule,) = recording.of_type(RULE)
    assert rule.inputs["listenerId"] == http.id
    assert rule.inputs["ruleConditions"] == [{"type": "Path", "pathConfig": {"values": ["/*"]}}]
    assert rule.inputs["ruleActions"] == [{"order": 1, "type": "Redirect", "redirectConfig": {
        "protocol": "HTTPS", "port": "443", "httpCode": "301"}}]


@pytest.mark.parametrize("variant", VARIANTS)
def test_timeouts_let_a_streamed_answer_run_for_the_plans_request_timeout(run: Any, variant: Variant) -> None:
    plan = _fleet_plan(variant)
    recording = _deploy(run, plan)
    https = _listener(recording, 443)
    assert https.inputs["idleTimeout"] >= plan.request_timeout_s
    assert https.inputs["requestTimeout"] >= plan.request_timeout_s
    assert https.inputs["gzipEnabled"] is False  # compression would hold streamed tokens back
    drain = recording.named("chat-servers").inputs["connectionDrainConfig"]
    assert drain == {"connectionDrainEnabled": True, "connectionDrainTimeout": plan.request_timeout_s}


def test_a_plan_whose_timeout_alb_cannot_hold_is_refused_before_anything_is_created(run: Any) -> None:
    slow = _fleet_plan()  # a 16,384-token context: its longest answer takes 656 s at 40 ms a token
    slow = slow.model_copy(update={"serving": slow.serving.model_copy(update={"max_model_len": 16384})})
    assert slow.request_timeout_s > ALB_MAX_TIMEOUT_S
    message, recording = _rejected(run, slow, **ENDPOINT)
    assert "chat.plan.request_timeout_s: is longer than ALB's longest timeout (600 s)" in message
    assert recording.resources == []


def test_a_grace_longer_than_a_lifecycle_hook_waits_is_refused_before_anything_is_created(run: Any) -> None:
    plan = _fleet_plan()
    assert plan.fleet is not None
    slow = plan.model_copy(update={"fleet": plan.fleet.model_copy(update={"health_check_grace_s": 21_601})})
    message, recording = _rejected(run, slow, **ENDPOINT)
    assert "chat.plan.fleet.health_check_grace_s: is longer than an ESS lifecycle hook waits (21600 s)" in message
    assert recording.resources == []


#### Exposure: who reaches the load balancer, and what reaches the servers ####


@pytest.mark.parametrize(("exposure", "address_type", "subnets"), [
    ({}, "Intranet", _private_vswitches), (VPN, "Intranet", _private_vswitches),
    (OFFICE, "Internet", _public_vswitches), (PUBLIC, "Internet", _public_vswitches)])
def test_the_load_balancer_is_internet_facing_in_the_public_vswitches_only_for_a_public_caller(
        run: Any, exposure: dict[str, Any], address_type: str, subnets: Any) -> None:
    recording = _deploy(run, _fleet_plan(), **exposure)
    load_balancer = _one(recording, LOAD_BALANCER)
    assert load_balancer.inputs["addressType"] == address_type
    zone_of = _zone_of(recording)
    assert load_balancer.inputs["zoneMappings"] == [{"vswitchId": v, "zoneId": zone_of[v]} for v in subnets(recording)]
    assert len({m["zoneId"] for m in load_balancer.inputs["zoneMappings"]}) == 2


@pytest.mark.parametrize("exposure", [{}, VPN, OFFICE, PUBLIC])
def test_the_api_port_admits_the_load_balancer_from_the_vpc_and_never_the_allowed_networks(
        run: Any, exposure: dict[str, Any]) -> None:
    plan = _fleet_plan("cpu-encoder")  # Triton: a metrics port of its own too
    recording = _deploy(run, plan, **exposure)
    servers_group = recording.named("chat-firewall-sg").id
    ingress = {(r.inputs["portRange"], r.inputs["cidrIp"]) for r in recording.of_type(SG_RULE)
               if r.inputs["securityGroupId"] == servers_group and r.inputs["type"] == "ingress"}
    port = plan.serving.port
    assert ingress == {(f"{port}/{port}", NETWORK_CIDR), ("8002/8002", NETWORK_CIDR)}
    assert _one(recording, TEMPLATE).inputs["securityGroupIds"] == [servers_group]


@pytest.mark.parametrize(("exposure", "sources"), [
    ({}, [NETWORK_CIDR]), (VPN, [VPN_RANGE]), (OFFICE, [OFFICE_RANGE]), (PUBLIC, ["0.0.0.0/0"])])
def test_the_load_balancers_own_security_group_admits_443_and_80_from_the_callers_only(
        run: Any, exposure: dict[str, Any], sources: list[str]) -> None:
    recording = _deploy(run, _fleet_plan(), **exposure)
    group = recording.named("chat-firewall-lb-sg")
    attachment = _one(recording, "alicloud:alb/loadBalancerSecurityGroupAttachment:LoadBalancerSecurityGroupAttachment")
    assert attachment.inputs == {"loadBalancerId": _one(recording, LOAD_BALANCER).id, "securityGroupId": group.id}
    rules = [r.inputs for r in recording.of_type(SG_RULE) if r.inputs["securityGroupId"] == group.id]
    accepted = {(r["portRange"], r["cidrIp"]) for r in rules if r["policy"] == "accept"}
    assert accepted == {(f"{port}/{port}", cidr) for port in (443, 80) for cidr in sources}
    dropped = {(r["portRange"], r["cidrIp"], r["priority"]) for r in rules if r["policy"] == "drop"}
    assert dropped == {("443/443", "0.0.0.0/0", 100), ("80/80", "0.0.0.0/0", 100)}
    assert {r["type"] for r in rules} == {"ingress"}
    assert max(r["priority"] for r in rules if r["policy"] == "accept") < 100


@pytest.mark.parametrize(("exposure", "entries"), [({}, [NETWORK_CIDR]), (VPN, [VPN_RANGE]),
                                                  (OFFICE, [OFFICE_RANGE])])
def test_both_listeners_whitelist_the_callers_once_the_list_has_its_entries(
        run: Any, dependencies: dict[str, tuple[str, ...]], exposure: dict[str, Any], entries: list[str]) -> None:
    recording = _deploy(run, _fleet_plan(), **exposure)
    acl = recording.named("chat-callers")
    filled = recording.named("chat-callers-entries")
    assert [e["entry"] for e in filled.inputs["entries"]] == entries and filled.inputs["aclId"] == acl.id
    attachments = recording.of_type(ACL_ATTACHMENT)
    assert {(a.inputs["listenerId"], a.inputs["aclId"], a.inputs["aclType"]) for a in attachments} == {
        (_listener(recording, 443).id, acl.id, "White"), (_listener(recording, 80).id, acl.id, "White")}
    # An empty whitelist forwards everything: no listener takes the list before its entries exist.
    assert all(filled.urn in dependencies[a.name] for a in attachments)


def test_a_load_balancer_open_to_the_whole_internet_has_no_whitelist(run: Any) -> None:
    recording = _deploy(run, _fleet_plan(), **PUBLIC)
    assert not recording.of_type(ACL_ATTACHMENT) and not recording.of_type("alicloud:alb/acl:Acl")


#### The group and its servers ####


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_group_spreads_the_plans_floor_to_ceiling_over_the_private_vswitches_of_two_zones(
        run: Any, variant: Variant) -> None:
    plan = _fleet_plan(variant)
    assert plan.fleet is not None
    recording = _deploy(run, plan)
    group = _one(recording, SCALING_GROUP)
    assert (group.inputs["minSize"], group.inputs["maxSize"]) == (plan.fleet.min_replicas, plan.fleet.max_replicas)
    assert sorted(group.inputs["vswitchIds"]) == sorted(_private_vswitches(recording))
    assert len({_zone_of(recording)[v] for v in group.inputs["vswitchIds"]}) == 2
    assert group.inputs["multiAzPolicy"] == "BALANCE"
    template = _one(recording, TEMPLATE)
    assert (group.inputs["launchTemplateId"], group.inputs["launchTemplateVersion"]) == (template.id, "Latest")
    assert not recording.of_type(INSTANCE)


def test_a_one_zone_fleet_still_gets_two_zones_for_its_load_balancer(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "internal")
    fleet = _fleet_plan("cpu-llm").fleet
    one_zone = plan.model_copy(update={"fleet": fleet, "zones": 1})
    recording = _deploy(run, one_zone)
    assert len(_private_vswitches(recording)) == len(_public_vswitches(recording)) == ALB_MIN_ZONES
    assert len(_one(recording, LOAD_BALANCER).inputs["zoneMappings"]) == 2


def test_the_network_uses_only_zones_where_alb_runs(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PREVIEW_LOOKUPS, "alicloud:alb/getZones:getZones", lambda a, c: {
        "zones": [{"id": z, "zoneId": z} for z in ("ap-southeast-1a", "ap-southeast-1c")]})
    recording = _deploy(run, _fleet_plan())
    assert sorted(set(_zone_of(recording).values())) == ["ap-southeast-1a", "ap-southeast-1c"]


def test_too_few_zones_with_alb_fail_naming_the_zones(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PREVIEW_LOOKUPS, "alicloud:alb/getZones:getZones", lambda a, c: {
        "zones": [{"id": "ap-southeast-1b", "zoneId": "ap-southeast-1b"}]})
    with pytest.raises(InputError, match=r"\(in a zone with ALB\) is offered in 1 zone\(s\) of this region "
                                         r"\(ap-southeast-1b\)"):
        _deploy(run, _fleet_plan())


@pytest.mark.parametrize("variant", ["gpu-llm", "cpu-encoder"])
def test_servers_are_hardened_as_a_single_server_and_have_no_public_address(run: Any, variant: Variant) -> None:
    plan = _fleet_plan(variant)
    recording = _deploy(run, plan)
    template = _one(recording, TEMPLATE).inputs
    assert (template["httpEndpoint"], template["httpTokens"], template["httpPutResponseHopLimit"]) == (
        "enabled", "required", 1)
    assert template["systemDisk"] == {"category": "cloud_essd", "size": plan.disk_gib, "encrypted": True,
                                      "deleteWithInstance": True}
    assert template["ramRoleName"] == recording.named("chat-identity-role").inputs["roleName"]
    assert template["instanceType"] == plan.instance_type and template["imageId"] == PREVIEW_IMAGE_ID
    assert "internetMaxBandwidthOut" not in template and "keyPairName" not in template
    assert "spotStrategy" not in template
    assert _one(recording, TEMPLATE).ignore_changes == ("imageId",)


def test_user_data_is_the_cloud_config_as_a_single_server_gets_it(run: Any) -> None:
    recording = _deploy(run, _fleet_plan())
    encoded = _one(recording, TEMPLATE).inputs["userData"]
    text = gzip.decompress(base64.b64decode(encoded)).decode()
    assert text.startswith("#cloud-config") and "INFERSTACK_CLOUD=alibaba" in text
    assert encoded == compressed_user_data(text, limit_bytes=USER_DATA_LIMIT_BYTES, service="ECS")


def test_spot_fleets_take_spot_servers_and_replace_them_before_they_are_reclaimed(run: Any) -> None:
    recording = _deploy(run, _fleet_plan("cpu-llm", spot=True))
    assert _one(recording, TEMPLATE).inputs["spotStrategy"] == "SpotAsPriceGo"
    assert _one(recording, SCALING_GROUP).inputs["spotInstanceRemedy"] is True


def test_spot_above_the_floor_keeps_the_floor_pay_as_you_go_and_falls_back_on_the_plans_types(run: Any) -> None:
    plan = _fleet_plan()
    assert plan.fleet is not None
    floor = SpotAboveFloor(on_demand_base=plan.fleet.min_replicas, spot_above=2,
                           instance_types=[plan.instance_type, "ecs.gn7i-c16g1.4xlarge"],
                           spot_hourly_per_instance=None, spot_price_source=None, spot_price_date=None)
    recording = _deploy(run, plan.model_copy(update={"spot_above_floor": floor}))
    group = _one(recording, SCALING_GROUP).inputs
    assert _one(recording, TEMPLATE).inputs["spotStrategy"] == "SpotAsPriceGo"
    assert {key: group[key] for key in ("multiAzPolicy", "azBalance", "onDemandBaseCapacity",
                                        "onDemandPercentageAboveBaseCapacity", "allocationStrategy",
                                        "spotAllocationStrategy", "spotInstanceRemedy")} == {
        "multiAzPolicy": "COMPOSABLE", "azBalance": True, "onDemandBaseCapacity": plan.fleet.min_replicas,
        "onDemandPercentageAboveBaseCapacity": 0, "allocationStrategy": "priority",
        "spotAllocationStrategy": "priority", "spotInstanceRemedy": True}
    assert [o["instanceType"] for o in group["launchTemplateOverrides"]] == floor.instance_types


def test_an_on_demand_fleet_is_balanced_over_zones_and_takes_no_spot(run: Any) -> None:
    recording = _deploy(run, _fleet_plan())
    group = _one(recording, SCALING_GROUP).inputs
    assert group["multiAzPolicy"] == "BALANCE" and "onDemandBaseCapacity" not in group
    assert "launchTemplateOverrides" not in group and "spotStrategy" not in _one(recording, TEMPLATE).inputs


def test_private_vswitches_reach_out_through_the_nat_gateway_and_the_public_ones_do_not(run: Any) -> None:
    recording = _deploy(run, _fleet_plan())
    nat = _one(recording, "alicloud:vpc/natGateway:NatGateway")
    assert (nat.inputs["natType"], nat.inputs["networkType"]) == ("Enhanced", "internet")
    assert nat.inputs["vswitchId"] in _public_vswitches(recording)
    address = _one(recording, "alicloud:ecs/eipAddress:EipAddress")
    bound = _one(recording, "alicloud:ecs/eipAssociation:EipAssociation")
    assert bound.inputs == {"allocationId": address.id, "instanceId": nat.id, "instanceType": "Nat"}
    entries = recording.of_type("alicloud:vpc/snatEntry:SnatEntry")
    assert sorted(e.inputs["sourceVswitchId"] for e in entries) == sorted(_private_vswitches(recording))
    assert {(e.inputs["snatTableId"], e.inputs["snatIp"]) for e in entries} == {
        (nat.outputs["snatTableIds"], address.outputs["ipAddress"])}
    cidrs = {s.id: s.inputs["cidrBlock"] for s in recording.of_type(SWITCH)}
    assert [cidrs[v] for v in _private_vswitches(recording)] == ["10.64.128.0/20", "10.64.144.0/20"]


#### Health and scaling ####


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_health_check_asks_the_readiness_path_on_the_serving_port_after_the_plans_grace(
        run: Any, variant: Variant) -> None:
    plan = _fleet_plan(variant)
    assert plan.fleet is not None
    recording = _deploy(run, plan)
    check = recording.named("chat-servers").inputs["healthCheckConfig"]
    assert (check["healthCheckEnabled"], check["healthCheckProtocol"], check["healthCheckPath"],
            check["healthCheckConnectPort"], check["healthCheckCodes"]) == (
        True, "HTTP", plan.serving.health_path, plan.serving.port, ["http_2xx"])
    attachment = _one(recording, "alicloud:ess/albServerGroupAttachment:AlbServerGroupAttachment")
    assert (attachment.inputs["albServerGroupId"], attachment.inputs["port"]) == (
        recording.named("chat-servers").id, plan.serving.port)
    group = _one(recording, SCALING_GROUP)
    assert group.inputs["healthCheckTypes"] == ["ECS", "LOAD_BALANCER"]
    hook = _one(recording, "alicloud:ess/lifecycleHook:LifecycleHook")
    assert (hook.inputs["scalingGroupId"], hook.inputs["lifecycleTransition"], hook.inputs["heartbeatTimeout"],
            hook.inputs["defaultResult"]) == (group.id, "SCALE_OUT", plan.fleet.health_check_grace_s, "ABANDON")


def test_a_new_group_starts_empty_and_takes_the_floor_once_its_hook_exists(
        run: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A group made from a launch template starts its minimum as it is created, before its hook can exist: the first
    deploy creates it empty; the next, which finds the group with its hook, sizes it (the preview's answer)."""
    plan = _fleet_plan()
    assert plan.fleet is not None
    later = _one(_deploy(run, plan), SCALING_GROUP).inputs
    assert (later["minSize"], later["maxSize"]) == (plan.fleet.min_replicas, plan.fleet.max_replicas)
    monkeypatch.setitem(PREVIEW_LOOKUPS, "alicloud:ess/getScalingGroups:getScalingGroups",
                        lambda a, c: {"groups": [], "ids": [], "id": c.region})
    with caplog.at_level(logging.WARNING):
        first = _deploy(run, plan)
    assert (_one(first, SCALING_GROUP).inputs["minSize"], _one(first, SCALING_GROUP).inputs["maxSize"]) == (
        0, plan.fleet.max_replicas)
    assert f"run `pulumi up` again to start its {plan.fleet.min_replicas} servers" in caplog.text
    asked = [args["nameRegex"] for token, args in first.invokes if token.endswith("getScalingGroups")]
    assert asked == [f"^{re.escape(_one(first, SCALING_GROUP).inputs['scalingGroupName'])}$"]


def test_a_server_may_complete_lifecycle_actions_which_ess_grants_on_all_resources_only(run: Any) -> None:
    recording = _deploy(run, _fleet_plan())
    statements = json.loads(recording.named("chat-lifecycle").inputs["policyDocument"])["Statement"]
    assert statements == [{"Effect": "Allow", "Resource": "*", "Action": [
        "ess:DescribeScalingInstances", "ess:DescribeLifecycleActions", "ess:CompleteLifecycleAction"]}]
    attachment = recording.named("chat-lifecycle-attachment").inputs
    template = _one(recording, "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate").inputs
    assert (attachment["roleName"], attachment["policyName"]) == (
        template["ramRoleName"], recording.named("chat-lifecycle").inputs["policyName"])


def test_servers_join_the_load_balancer_only_through_the_grace_hook(
        run: Any, dependencies: dict[str, tuple[str, ...]]) -> None:
    recording = _deploy(run, _fleet_plan())
    hook = _one(recording, "alicloud:ess/lifecycleHook:LifecycleHook")
    assert hook.urn in dependencies["chat-group-alb"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_scaling_holds_the_plans_requests_per_second_per_server_on_the_alb_metric(
        run: Any, dependencies: dict[str, tuple[str, ...]], variant: Variant) -> None:
    plan = _fleet_plan(variant)
    assert plan.fleet is not None
    recording = _deploy(run, plan)
    rule = _one(recording, SCALING_RULE).inputs
    assert (rule["scalingRuleType"], rule["metricName"]) == ("TargetTrackingScalingRule",
                                                             "LoadBalancerRealServerAverageQps")
    assert rule["alarmDimension"] == {"dimensionKey": "rulePool", "dimensionValue": recording.named("chat-servers").id}
    # ALB's metric counts per second, as the plan does: no conversion.
    assert rule["targetValue"] == round(plan.fleet.target_requests_per_s, 3)
    assert rule["estimatedInstanceWarmup"] == plan.fleet.health_check_grace_s  # when the hook lets a server in
    assert rule["scaleInEvaluationCount"] == math.ceil(plan.fleet.scale_in_cooldown_s / 60)
    assert rule["disableScaleIn"] is False
    assert _one(recording, SCALING_GROUP).inputs["defaultCooldown"] == plan.fleet.scale_out_cooldown_s
    assert recording.named("chat-group-alb").urn in dependencies["chat-requests-per-server"]


def test_a_tiny_target_is_kept_at_esss_smallest_step_not_rounded_to_nothing(run: Any) -> None:
    plan = _fleet_plan()
    assert plan.fleet is not None
    tiny = plan.model_copy(update={"fleet": plan.fleet.model_copy(update={"target_requests_per_s": 0.0004})})
    assert _one(_deploy(run, tiny), SCALING_RULE).inputs["targetValue"] == 0.001


#### The endpoint ####


def test_the_endpoint_is_the_api_domain_and_the_deploy_says_where_it_must_point(
        run: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    recording = _deploy(run, _fleet_plan())
    assert recording.value == {"url": "https://api.example.com"}
    dns_name = _one(recording, LOAD_BALANCER).outputs["dnsName"]
    assert (f"chat: point api.example.com at the load balancer with a CNAME record to {dns_name}; the endpoint "
            f"serves CAS certificate {CERTIFICATE}") in caplog.text


def test_a_fleet_without_a_certificate_is_refused_naming_what_alibaba_needs(run: Any) -> None:
    message, recording = _rejected(run, _fleet_plan(), api_domain=DOMAIN)
    assert "chat.api_certificate: is required on Alibaba Cloud: a Certificate Management Service (CAS)" in message
    assert "give one such as 12345678-ap-southeast-1 (stack config inferstack:apiCertificate)" in message
    assert recording.resources == []  # refused with the arguments, before anything is registered


def test_a_malformed_certificate_is_refused_before_anything_is_created(run: Any) -> None:
    message, recording = _rejected(run, _fleet_plan(), api_domain=DOMAIN, api_certificate="cas-123")
    assert "chat.api_certificate: is not a Certificate Management Service (CAS) certificate" in message
    assert recording.resources == []


#### Protection ####


@pytest.mark.parametrize("protected", [True, False])
def test_protection_reaches_the_group_the_template_and_the_load_balancer(run: Any, protected: bool) -> None:
    recording = _deploy(run, _fleet_plan(), protect_servers=protected)
    group, load_balancer = _one(recording, SCALING_GROUP), _one(recording, LOAD_BALANCER)
    assert group.inputs["groupDeletionProtection"] is protected
    assert load_balancer.inputs["deletionProtectionEnabled"] is protected
    assert [r.protect for r in (group, load_balancer, _one(recording, TEMPLATE))] == [protected] * 3


def test_lifting_protection_changes_only_the_two_flags_so_it_is_an_update_in_place(run: Any) -> None:
    protected = {r.name: r.inputs for r in _deploy(run, _fleet_plan()).resources}
    lifted = {r.name: r.inputs for r in _deploy(run, _fleet_plan(), protect_servers=False).resources}
    assert protected.keys() == lifted.keys()
    changed = {(name, key) for name, before in protected.items()
               for key in before.keys() | lifted[name].keys() if before.get(key) != lifted[name].get(key)}
    assert changed == {("chat-group", "groupDeletionProtection"), ("chat-alb", "deletionProtectionEnabled")}


#### The security facts (facts_alibaba.py) ####


def test_the_security_facts_see_a_fleets_servers_in_its_launch_template_and_its_ingress_on_the_servers(
        run: Any) -> None:
    plan = _fleet_plan()
    facts = FACT_MAPPERS["alibaba"](_deploy(run, plan, **PUBLIC))
    (server,) = facts.servers
    assert (server.name, server.metadata_tokens_required, server.root_disk_encrypted, server.termination_protected) == (
        "chat-template", True, True, True)
    assert server.user_data.startswith("#cloud-config")
    # The load balancer's 443 and 80 are its own group's: what reaches a server is the API port from the VPC.
    assert {(i.port_from, i.port_to, i.source) for i in facts.ingress} == {
        (plan.serving.port, plan.serving.port, "network")}


#### Bring your own network ####


def test_a_brought_network_puts_the_load_balancer_in_the_vswitches_given_for_it(run: Any) -> None:
    recording = _deploy(run, _fleet_plan(), network_id="vpc-byo", subnet_ids=["vsw-privatea", "vsw-privateb"],
                        load_balancer_subnet_ids=["vsw-publica", "vsw-publicb"], **PUBLIC)
    assert not recording.of_type(SWITCH) and not recording.of_type("alicloud:vpc/natGateway:NatGateway")
    assert _one(recording, SCALING_GROUP).inputs["vswitchIds"] == ["vsw-privatea", "vsw-privateb"]
    mappings = _one(recording, LOAD_BALANCER).inputs["zoneMappings"]
    assert [m["vswitchId"] for m in mappings] == ["vsw-publica", "vsw-publicb"]
    assert [m["zoneId"] for m in mappings] == ["ap-southeast-1a", "ap-southeast-1b"]  # looked up
    lookups = [args for token, args in recording.invokes if token == "alicloud:vpc/getSwitches:getSwitches"]
    assert lookups == [{"ids": ["vsw-publica", "vsw-publicb"]}]


def test_an_internal_load_balancer_in_a_brought_network_uses_the_servers_vswitches(run: Any) -> None:
    recording = _deploy(run, _fleet_plan(), network_id="vpc-byo", subnet_ids=["vsw-privatea", "vsw-privateb"])
    assert [m["vswitchId"] for m in _one(recording, LOAD_BALANCER).inputs["zoneMappings"]] == [
        "vsw-privatea", "vsw-privateb"]


def test_a_load_balancer_with_one_zone_is_refused_naming_the_vswitches(run: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PREVIEW_LOOKUPS, "alicloud:vpc/getSwitches:getSwitches", lambda a, c: {
        "vswitches": [{"id": v, "zoneId": "ap-southeast-1a"} for v in a["ids"]]})
    with pytest.raises(InputError, match=r"chat.load_balancer_subnet_ids: ALB takes one vSwitch in each of 2 zones"):
        _deploy(run, _fleet_plan(), network_id="vpc-byo", subnet_ids=["vsw-privatea", "vsw-privateb"],
                load_balancer_subnet_ids=["vsw-publica", "vsw-publicb"], **PUBLIC)


def test_a_single_vswitch_for_the_load_balancer_is_refused_before_anything_is_created(run: Any) -> None:
    brought = {"network_id": "vpc-byo", "subnet_ids": ["vsw-privatea", "vsw-privateb"],
               "load_balancer_subnet_ids": ["vsw-publica"]}
    message, recording = _rejected(run, _fleet_plan(), **ENDPOINT, **PUBLIC, **brought)
    assert "chat.load_balancer_subnet_ids: ALB takes one vSwitch in each of 2 zones or more (got 1)" in message
    assert recording.resources == []


#### Single servers stay as they were ####


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_validation_plan_is_one_server_with_its_own_address_and_no_fleet_machinery(
        run: Any, variant: Variant) -> None:
    recording = _deploy(run, sample_plan("alibaba", variant, "validation"))
    (instance,) = recording.of_type(INSTANCE)
    assert instance.inputs["internetMaxBandwidthOut"] == PUBLIC_BANDWIDTH_MBPS
    fleet_types = {LOAD_BALANCER, LISTENER, SCALING_GROUP, SCALING_RULE, TEMPLATE, "alicloud:vpc/natGateway:NatGateway"}
    assert not [r for r in recording.resources if r.type in fleet_types]
    assert [s.name for s in recording.of_type(SWITCH)] == ["chat-network-vswitch-0"]
    assert recording.named("chat-firewall-sg") and not [r for r in recording.resources if r.name.endswith("-lb-sg")]

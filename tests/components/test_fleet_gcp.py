"""A fleet on Google Cloud: a regional managed instance group behind an HTTPS Application Load Balancer.

Production plans are fleets (plan.fleet). Each test builds one InferenceServer under mocks and checks what was
registered against the plan's numbers: the group's size and zones, the autoscaler's target in its own units, the
health checks and their grace, the timeouts, TLS, who may reach the servers and the endpoint, protection.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from inferstack import bootstrap
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components import Capability, InferenceServer, backend_for
from inferstack.components.gcp.load_balancer import LB_UTILIZATION_TARGET, armor_rules
from inferstack.components.gcp.network import (
    FLEET_NETWORK_CIDR,
    GOOGLE_LB_RANGES,
    PRIVATE_SUBNET_CIDR,
    PROXY_ONLY_CIDR,
    SUBNET_CIDR,
    covering_cidr,
    proxy_only_filter,
)
from inferstack.components.gcp.servers import HARDENED_METADATA, IMAGE_FAMILIES
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.preview import Recording, RegisteredResource, preview_workload, record
from tests.sample_plans import sample_plan

REPO = Path(__file__).resolve().parents[2]
GCP_CONFIG = {"gcp:region": "us-central1", "gcp:project": "inferstack-test"}
API_DOMAIN = "api.example.com"
PUBLIC = {"allowed_cidrs": ["0.0.0.0/0"], "api_key": "sk-fleet-public"}
OFFICE = {"allowed_cidrs": ["203.0.113.0/24", "198.51.100.7/32"], "api_key": "sk-fleet-office"}
PRIVATE = {"allowed_cidrs": ["10.20.0.0/16"]}

GROUP = "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
AUTOSCALER = "gcp:compute/regionAutoscaler:RegionAutoscaler"
INSTANCE = "gcp:compute/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"
HEALTH_CHECK = "gcp:compute/healthCheck:HealthCheck"
REGION_HEALTH_CHECK = "gcp:compute/regionHealthCheck:RegionHealthCheck"
BACKEND = "gcp:compute/backendService:BackendService"
REGION_BACKEND = "gcp:compute/regionBackendService:RegionBackendService"
URL_MAP = "gcp:compute/uRLMap:URLMap"
REGION_URL_MAP = "gcp:compute/regionUrlMap:RegionUrlMap"
HTTPS_PROXY = "gcp:compute/targetHttpsProxy:TargetHttpsProxy"
HTTP_PROXY = "gcp:compute/targetHttpProxy:TargetHttpProxy"
REGION_HTTPS_PROXY = "gcp:compute/regionTargetHttpsProxy:RegionTargetHttpsProxy"
REGION_HTTP_PROXY = "gcp:compute/regionTargetHttpProxy:RegionTargetHttpProxy"
GLOBAL_RULE = "gcp:compute/globalForwardingRule:GlobalForwardingRule"
REGION_RULE = "gcp:compute/forwardingRule:ForwardingRule"
SSL_POLICY = "gcp:compute/sSLPolicy:SSLPolicy"
REGION_SSL_POLICY = "gcp:compute/regionSslPolicy:RegionSslPolicy"
MANAGED_CERTIFICATE = "gcp:compute/managedSslCertificate:ManagedSslCertificate"
CM_CERTIFICATE = "gcp:certificatemanager/certificate:Certificate"
DNS_AUTHORIZATION = "gcp:certificatemanager/dnsAuthorization:DnsAuthorization"
ARMOR = "gcp:compute/securityPolicy:SecurityPolicy"
REGION_ARMOR = "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
NAT = "gcp:compute/routerNat:RouterNat"
NETWORK = "gcp:compute/network:Network"


def _fleet(plan: DeploymentPlan | None = None, *, config: dict[str, Any] | None = None, name: str = "chat",
           **args: Any) -> Recording:
    plan = plan or sample_plan("gcp", "gpu-llm", "production")

    def program() -> pulumi.Output[dict[str, Any]]:
        server = InferenceServer(name, {"plan": plan, "api_domain": API_DOMAIN, "static_assets": False, **args})
        return pulumi.Output.all(endpoint=server.endpoint_url, address=server.load_balancer_address,
                                 group=server.group_id, ids=server.instance_ids, tags=server.firewall_ids)

    return record(program, config={**GCP_CONFIG, **(config or {})}, stack="prod")


def _one(recording: Recording, resource_type: str) -> RegisteredResource:
    (found,) = recording.of_type(resource_type)
    return found


def _referring(recording: Recording, resource_type: str, key: str, target: RegisteredResource) -> RegisteredResource:
    (found,) = [r for r in recording.of_type(resource_type) if r.inputs.get(key) == target.id]
    return found


#### The plan behind it ####


def test_google_cloud_states_a_managed_fleet_tls_and_request_autoscaling_and_takes_no_api_certificate() -> None:
    backend = backend_for("gcp")
    for capability in (Capability.MANAGED_FLEET, Capability.LOAD_BALANCER_TLS, Capability.REQUEST_AUTOSCALING):
        assert backend.support(capability).available, capability
    assert "load-balancing utilization" in backend.support(Capability.REQUEST_AUTOSCALING).note
    assert backend.api_certificate is None  # Google issues the endpoint's certificate


def test_the_production_preview_of_the_public_chat_workload_is_a_group_behind_an_https_load_balancer() -> None:
    result = preview_workload(REPO / "examples" / "workloads" / "chat-8b-public.yaml", cloud="gcp",
                              api_domain=API_DOMAIN, config={
                                  "inferstack:allowedCidrs": ["0.0.0.0/0"], "inferstack:apiKey": "sk-preview",
                                  "inferstack:staticAssets": False})
    fleet = result.plan.fleet
    assert result.plan.stage == "production" and fleet is not None
    types = [r.type for r in result.resources]
    for resource_type in (GROUP, TEMPLATE, AUTOSCALER, BACKEND, HTTPS_PROXY, HTTP_PROXY, SSL_POLICY,
                          MANAGED_CERTIFICATE, HEALTH_CHECK):
        assert resource_type in types, resource_type
    assert types.count(GROUP) == 1 and INSTANCE not in types
    assert result.outputs["endpointUrl"] == f"https://{API_DOMAIN}"
    assert ipaddress.ip_address(result.outputs["loadBalancerAddress"])  # where the domain's A record points
    assert result.outputs["groupId"].endswith(next(r for r in result.resources if r.type == GROUP).inputs["name"])
    (group,) = [r for r in result.resources if r.type == GROUP]
    (scaler,) = [r for r in result.resources if r.type == AUTOSCALER]
    assert len(group.inputs["distributionPolicyZones"]) == result.plan.zones >= 2
    policy = scaler.inputs["autoscalingPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"]) == (fleet.min_replicas, fleet.max_replicas)


#### The group ####


def test_the_group_spreads_evenly_over_the_plans_zones_and_the_autoscaler_holds_its_size() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    assert plan.fleet is not None
    recording = _fleet(plan, **PUBLIC)
    group = _one(recording, GROUP)
    assert group.inputs["distributionPolicyZones"] == ["us-central1-a", "us-central1-b"]
    assert group.inputs["distributionPolicyTargetShape"] == "EVEN"
    assert "targetSize" not in group.inputs  # the autoscaler sets it; a target size would fight it
    scaler = _one(recording, AUTOSCALER)
    assert scaler.inputs["target"] == group.outputs["selfLink"]
    policy = scaler.inputs["autoscalingPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"]) == (plan.fleet.min_replicas, plan.fleet.max_replicas)
    assert recording.value["group"] == group.id and recording.value["ids"] == []
    assert not recording.of_type(INSTANCE)


def test_the_autoscaler_holds_the_plans_requests_per_server_on_load_balancing_utilization() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    fleet = plan.fleet
    assert fleet is not None
    recording = _fleet(plan, **PUBLIC)
    policy = _one(recording, AUTOSCALER).inputs["autoscalingPolicy"]
    (backend,) = _one(recording, BACKEND).inputs["backends"]
    assert backend["group"] == _one(recording, GROUP).outputs["instanceGroup"]
    assert backend["balancingMode"] == "RATE"
    # Utilization = requests per server / max_rate_per_instance; the target utilization times the capacity is the
    # plan's rate.
    held = policy["loadBalancingUtilization"]["target"] * backend["maxRatePerInstance"]
    assert held == pytest.approx(fleet.target_requests_per_s, rel=1e-3)
    assert policy["loadBalancingUtilization"]["target"] == LB_UTILIZATION_TARGET
    assert "cpuUtilization" not in policy and policy["mode"] == "ON"


def test_new_servers_warm_up_for_the_cold_start_and_scale_in_removes_one_server_per_period() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    fleet = plan.fleet
    assert fleet is not None
    policy = _one(_fleet(plan, **PUBLIC), AUTOSCALER).inputs["autoscalingPolicy"]
    assert policy["cooldownPeriod"] >= fleet.scale_out_cooldown_s
    assert policy["scaleInControl"] == {"maxScaledInReplicas": {"fixed": 1},
                                        "timeWindowSec": fleet.scale_in_cooldown_s}


def test_a_server_failing_its_health_check_after_the_plans_grace_is_recreated() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    assert plan.fleet is not None
    recording = _fleet(plan, **PUBLIC)
    healing = _one(recording, GROUP).inputs["autoHealingPolicies"]
    assert healing["initialDelaySec"] == plan.fleet.health_check_grace_s
    check = next(r for r in recording.of_type(HEALTH_CHECK) if r.id == healing["healthCheck"])
    assert check.inputs["httpHealthCheck"] == {"port": plan.serving.port, "requestPath": plan.serving.health_path}
    assert _one(recording, GROUP).inputs["namedPorts"] == [{"name": "http", "port": plan.serving.port}]


def test_a_new_template_rolls_out_by_surge_without_taking_a_server_down() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    assert plan.fleet is not None
    recording = _fleet(plan, **PUBLIC)
    group, template = _one(recording, GROUP), _one(recording, TEMPLATE)
    assert group.inputs["versions"] == [{"name": "primary", "instanceTemplate": template.outputs["selfLinkUnique"]}]
    update = group.inputs["updatePolicy"]
    assert update["type"] == "PROACTIVE" and update["maxUnavailableFixed"] == 0
    assert update["maxSurgeFixed"] == plan.zones  # a regional group takes 0 or at least its zone count
    assert update["minReadySec"] == plan.fleet.health_check_grace_s


def test_the_servers_are_todays_servers_without_an_external_address() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    recording = _fleet(plan, **PUBLIC)
    template = _one(recording, TEMPLATE).inputs
    (nic,) = template["networkInterfaces"]
    assert "accessConfigs" not in nic and nic["subnetwork"] == _one_named(recording, "chat-network-private").id
    assert template["machineType"] == plan.instance_type and template["guestAccelerators"] == []
    assert template["shieldedInstanceConfig"] == {
        "enableSecureBoot": True, "enableVtpm": True, "enableIntegrityMonitoring": True}
    assert {key: template["metadata"][key] for key in HARDENED_METADATA} == dict(HARDENED_METADATA)
    (disk,) = template["disks"]
    assert disk["boot"] is True and disk["diskType"] == "pd-balanced" and disk["diskSizeGb"] == plan.disk_gib
    assert disk["sourceImage"].endswith(f"/images/{IMAGE_FAMILIES[('gpu', 'X86_64')][1]}-v20260101")
    assert "disks[0].sourceImage" in _one(recording, TEMPLATE).ignore_changes  # a newer image rolls nothing
    assert template["scheduling"]["onHostMaintenance"] == "TERMINATE"
    account = _one(recording, "gcp:serviceaccount/account:Account")
    assert template["serviceAccount"]["email"] == account.outputs["email"]
    assert template["tags"] == recording.value["tags"]


def test_the_template_carries_the_user_data_exactly_as_a_loose_server_would() -> None:
    plan = sample_plan("gcp", "cpu-llm", "production")
    recording = _fleet(plan, **PUBLIC)
    bucket = _one_named(recording, "chat-store-models").id
    api_key_ref = _one_named(recording, "chat-secrets-api-key").id
    logs = _one_named(recording, "chat-log-bucket").inputs["bucketId"]  # the Ops Agent's log names and job name
    expected = bootstrap.render_bootstrap(plan, "gcp", bootstrap.BootstrapOptions(
        model_bucket=bucket, region="us-central1", api_key_secret=api_key_ref,
        telemetry=TelemetryTarget(logs=logs, metrics=logs)))
    assert _one(recording, TEMPLATE).inputs["metadata"]["user-data"] == expected.user_data
    assert _one(recording, TEMPLATE).inputs["scheduling"]["onHostMaintenance"] == "MIGRATE"  # a CPU server


def test_spot_fleet_servers_are_deleted_when_preempted_and_the_group_recreates_them() -> None:
    plan = sample_plan("gcp", "cpu-llm", "production").model_copy(update={"spot": True})
    scheduling = _one(_fleet(plan, **PUBLIC), TEMPLATE).inputs["scheduling"]
    assert scheduling == {"provisioningModel": "SPOT", "preemptible": True, "automaticRestart": False,
                          "instanceTerminationAction": "DELETE", "onHostMaintenance": "TERMINATE"}


def _one_named(recording: Recording, name: str) -> RegisteredResource:
    return recording.named(name)


#### The network ####


def test_a_fleets_network_adds_a_private_subnetwork_with_nat_and_a_proxy_only_subnetwork() -> None:
    recording = _fleet(**PUBLIC)
    subnets = {r.name: r.inputs for r in recording.of_type(SUBNETWORK)}
    assert subnets["chat-network-subnet"]["ipCidrRange"] == SUBNET_CIDR
    assert subnets["chat-network-private"]["ipCidrRange"] == PRIVATE_SUBNET_CIDR
    assert subnets["chat-network-private"]["privateIpGoogleAccess"] is True
    proxy = subnets["chat-network-proxy-only"]
    assert (proxy["purpose"], proxy["role"], proxy["ipCidrRange"]) == ("REGIONAL_MANAGED_PROXY", "ACTIVE",
                                                                        PROXY_ONLY_CIDR)
    nat = _one(recording, NAT).inputs
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert nat["subnetworks"] == [{"name": recording.named("chat-network-private").id,
                                   "sourceIpRangesToNats": ["ALL_IP_RANGES"]}]
    assert covering_cidr([SUBNET_CIDR, PRIVATE_SUBNET_CIDR, PROXY_ONLY_CIDR]) == FLEET_NETWORK_CIDR


def test_a_validation_plan_stays_one_loose_server_without_load_balancer_or_nat() -> None:
    recording = _fleet(sample_plan("gcp", "gpu-llm", "validation"))
    assert len(recording.of_type(INSTANCE)) == 1
    assert not {GROUP, TEMPLATE, AUTOSCALER, BACKEND, REGION_BACKEND, NAT} & {r.type for r in recording.resources}
    assert [r.inputs["ipCidrRange"] for r in recording.of_type(SUBNETWORK)] == [SUBNET_CIDR]
    (nic,) = recording.of_type(INSTANCE)[0].inputs["networkInterfaces"]
    assert nic["accessConfigs"] == [{}]  # its own address, for egress
    assert recording.value["address"] is None and recording.value["group"] is None


#### Who reaches what ####


def _serving_sources(recording: Recording, port: int) -> set[str]:
    return {source for rule in recording.of_type(FIREWALL) if rule.inputs["direction"] == "INGRESS"
            for allow in rule.inputs["allows"] if str(port) in allow.get("ports", [])
            for source in rule.inputs["sourceRanges"]}


@pytest.mark.parametrize("exposure", [PUBLIC, OFFICE, PRIVATE, {}], ids=["public", "office", "private", "network"])
def test_the_api_port_admits_googles_load_balancers_only_never_the_allowed_cidrs(exposure: dict[str, Any]) -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    recording = _fleet(plan, **exposure)
    assert _serving_sources(recording, plan.serving.port) == {*GOOGLE_LB_RANGES, PROXY_ONLY_CIDR}
    (rule,) = [r for r in recording.of_type(FIREWALL) if r.name == "chat-firewall-api-lb"]
    assert rule.inputs["targetTags"] == recording.value["tags"] == _one(recording, TEMPLATE).inputs["tags"]


def test_callers_beyond_the_allowed_cidrs_are_refused_by_cloud_armor() -> None:
    recording = _fleet(**OFFICE)
    armor = _one(recording, ARMOR)
    assert _one(recording, BACKEND).inputs["securityPolicy"] == armor.id
    rules = {rule["priority"]: rule for rule in armor.inputs["rules"]}
    allowed = rules[1000]
    assert allowed["action"] == "allow"
    assert allowed["match"] == {"versionedExpr": "SRC_IPS_V1",
                                "config": {"srcIpRanges": ["203.0.113.0/24", "198.51.100.7/32"]}}
    default = rules[2147483647]
    assert default["action"] == "deny(403)" and default["match"]["config"]["srcIpRanges"] == ["*"]
    assert set(rules) == {1000, 2147483647}


def test_the_whole_internet_gets_no_security_policy() -> None:
    recording = _fleet(**PUBLIC)
    assert not recording.of_type(ARMOR) and "securityPolicy" not in _one(recording, BACKEND).inputs


def test_cloud_armor_takes_ten_ranges_per_rule() -> None:
    sources = [f"203.0.113.{i}/32" for i in range(23)]
    rules = armor_rules(sources)
    assert [len(rule.sources) for rule in rules] == [10, 10, 3, 1]
    assert [rule.priority for rule in rules] == [1000, 1001, 1002, 2147483647]
    assert [s for rule in rules[:-1] for s in rule.sources] == sources


#### The load balancer ####


def test_an_internet_facing_fleet_gets_a_global_https_load_balancer_with_tls_1_2_and_an_http_redirect() -> None:
    recording = _fleet(**PUBLIC)
    backend = _one(recording, BACKEND)
    assert backend.inputs["loadBalancingScheme"] == "EXTERNAL_MANAGED" and backend.inputs["protocol"] == "HTTP"
    assert backend.inputs["portName"] == "http"
    urls = _referring(recording, URL_MAP, "defaultService", backend)
    https = _referring(recording, HTTPS_PROXY, "urlMap", urls)
    certificate = _one(recording, MANAGED_CERTIFICATE)
    assert https.inputs["sslCertificates"] == [certificate.id]
    assert certificate.inputs["managed"] == {"domains": [API_DOMAIN]}
    tls = _one(recording, SSL_POLICY)
    assert https.inputs["sslPolicy"] == tls.id and tls.inputs["minTlsVersion"] == "TLS_1_2"
    rules = {r.inputs["portRange"]: r.inputs for r in recording.of_type(GLOBAL_RULE)}
    assert set(rules) == {"443", "80"} and rules["443"]["target"] == https.id
    assert {rule["loadBalancingScheme"] for rule in rules.values()} == {"EXTERNAL_MANAGED"}
    assert rules["443"]["ipAddress"] == rules["80"]["ipAddress"]
    # Port 80 only redirects: its URL map has no backend at all.
    http = next(r for r in recording.of_type(HTTP_PROXY) if r.id == rules["80"]["target"])
    redirect = next(m for m in recording.of_type(URL_MAP) if m.id == http.inputs["urlMap"])
    assert "defaultService" not in redirect.inputs
    assert redirect.inputs["defaultUrlRedirect"]["httpsRedirect"] is True
    assert not recording.of_type(REGION_BACKEND) and not recording.of_type(REGION_RULE)
    assert recording.value["endpoint"] == f"https://{API_DOMAIN}"


def test_the_load_balancers_health_check_probes_the_readiness_path_on_the_serving_port() -> None:
    plan = sample_plan("gcp", "cpu-encoder", "production")
    recording = _fleet(plan, **PUBLIC)
    check = next(r for r in recording.of_type(HEALTH_CHECK) if r.id == _one(recording, BACKEND).inputs["healthChecks"])
    assert check.inputs["httpHealthCheck"] == {"port": plan.serving.port, "requestPath": plan.serving.health_path}
    healing = _one(recording, GROUP).inputs["autoHealingPolicies"]["healthCheck"]
    assert healing != check.id  # a more patient check of its own recreates servers


@pytest.mark.parametrize("exposure", [PUBLIC, PRIVATE], ids=["public", "private"])
def test_timeouts_let_a_whole_streamed_answer_through(exposure: dict[str, Any]) -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    recording = _fleet(plan, **exposure)
    (backend,) = [*recording.of_type(BACKEND), *recording.of_type(REGION_BACKEND)]
    assert backend.inputs["timeoutSec"] >= plan.request_timeout_s > 30  # Google's default is 30 s
    assert backend.inputs["connectionDrainingTimeoutSec"] >= plan.request_timeout_s


def test_a_private_fleet_gets_a_regional_internal_load_balancer_limited_to_its_callers() -> None:
    recording = _fleet(**PRIVATE)
    assert not recording.of_type(BACKEND) and not recording.of_type(GLOBAL_RULE)
    assert not recording.of_type(MANAGED_CERTIFICATE)
    backend = _one(recording, REGION_BACKEND)
    assert backend.inputs["loadBalancingScheme"] == "INTERNAL_MANAGED"
    armor = _one(recording, REGION_ARMOR)
    assert backend.inputs["securityPolicy"] == armor.id
    assert [rule["match"]["config"]["srcIpRanges"] for rule in armor.inputs["rules"]] == [["10.20.0.0/16"], ["*"]]
    urls = _referring(recording, REGION_URL_MAP, "defaultService", backend)
    https = _referring(recording, REGION_HTTPS_PROXY, "urlMap", urls)
    certificate = _one(recording, CM_CERTIFICATE)
    authorization = _one(recording, DNS_AUTHORIZATION)
    assert https.inputs["certificateManagerCertificates"] == [certificate.id]
    assert certificate.inputs["managed"] == {"domains": [API_DOMAIN], "dnsAuthorizations": [authorization.id]}
    assert certificate.inputs["location"] == authorization.inputs["location"] == "us-central1"
    tls = _one(recording, REGION_SSL_POLICY)
    assert https.inputs["sslPolicy"] == tls.id and tls.inputs["minTlsVersion"] == "TLS_1_2"
    rules = {r.inputs["portRange"]: r.inputs for r in recording.of_type(REGION_RULE)}
    assert set(rules) == {"443", "80"} and rules["443"]["target"] == https.id
    assert {rule["loadBalancingScheme"] for rule in rules.values()} == {"INTERNAL_MANAGED"}
    private = recording.named("chat-network-private").id
    assert {rule["subnetwork"] for rule in rules.values()} == {private}
    http = next(r for r in recording.of_type(REGION_HTTP_PROXY) if r.id == rules["80"]["target"])
    redirect = next(m for m in recording.of_type(REGION_URL_MAP) if m.id == http.inputs["urlMap"])
    assert "defaultService" not in redirect.inputs and redirect.inputs["defaultUrlRedirect"]["httpsRedirect"]
    assert ipaddress.ip_address(recording.value["address"]).is_private


def test_a_fleet_open_to_its_network_only_admits_the_networks_range_at_cloud_armor() -> None:
    armor = _one(_fleet(), REGION_ARMOR)
    assert armor.inputs["rules"][0]["match"]["config"]["srcIpRanges"] == [FLEET_NETWORK_CIDR]


#### Bring your own ####


def test_a_brought_network_takes_the_servers_subnetwork_and_the_load_balancers_and_creates_none() -> None:
    servers = "projects/my-prj/regions/us-central1/subnetworks/servers"
    front = "projects/my-prj/regions/us-central1/subnetworks/front"
    recording = _fleet(network_id="projects/my-prj/global/networks/shared", subnet_ids=[servers, servers],
                       load_balancer_subnet_ids=[front], **PRIVATE)
    assert not recording.of_type(SUBNETWORK) and not recording.of_type(NAT)
    assert _one(recording, TEMPLATE).inputs["networkInterfaces"][0]["subnetwork"] == servers
    rules = recording.of_type(REGION_RULE)
    assert rules and {r.inputs["subnetwork"] for r in rules} == {front}
    assert {r.inputs["network"] for r in rules} == {"projects/my-prj/global/networks/shared"}
    proxy_lookup = [a["filter"] for token, a in recording.invokes
                    if token == "gcp:compute/getSubnetworks:getSubnetworks" and "REGIONAL_MANAGED_PROXY" in a["filter"]]
    assert proxy_lookup and set(proxy_lookup) == {proxy_only_filter("projects/my-prj/global/networks/shared", "x")}


def test_a_brought_network_with_a_public_endpoint_needs_subnets_for_the_load_balancer() -> None:
    def build() -> None:
        with pytest.raises(InputError, match="load_balancer_subnet_ids: is required with a brought network"):
            InferenceServer("chat", {"plan": sample_plan("gcp", "gpu-llm", "production"), "api_domain": API_DOMAIN,
                                     "static_assets": False, "network_id": "shared", "subnet_ids": ["a", "b"],
                                     **PUBLIC})

    assert record(build, config=GCP_CONFIG).resources == []


@pytest.mark.parametrize(("network_id", "expected"), [
    ("shared", "projects/proj/global/networks/shared"),
    ("projects/host/global/networks/shared", "projects/host/global/networks/shared"),
    ("https://www.googleapis.com/compute/v1/projects/host/global/networks/shared/",
     "projects/host/global/networks/shared"),
])
def test_the_proxy_only_lookup_names_the_network_in_full(network_id: str, expected: str) -> None:
    assert proxy_only_filter(network_id, "proj") == (
        f'(purpose = "REGIONAL_MANAGED_PROXY") (network = "https://www.googleapis.com/compute/v1/{expected}")')


def test_an_internal_fleet_in_a_network_without_a_proxy_only_subnetwork_says_how_to_add_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from inferstack.components.gcp import preview

    def no_proxy_subnetworks(a: dict[str, Any], c: Any) -> dict[str, Any]:
        return {"subnetworks": [], "id": "subnetworks", "project": c.account, "region": c.region,
                "filter": a.get("filter")}

    monkeypatch.setitem(preview._PREVIEW_INVOKES, "gcp:compute/getSubnetworks:getSubnetworks", no_proxy_subnetworks)
    with pytest.raises(InputError, match=r"network_id: has no proxy-only subnetwork in us-central1.*"
                                         r"--purpose=REGIONAL_MANAGED_PROXY --role=ACTIVE"):
        _fleet(network_id="shared", subnet_ids=["a", "a"], **PRIVATE)


#### Protection, names, plan checks ####


@pytest.mark.parametrize(("args", "protected"), [({}, True), ({"protect_servers": False}, False)])
def test_a_production_group_is_protected_unless_lifted_and_its_template_can_always_be_replaced(
        args: dict[str, Any], protected: bool) -> None:
    recording = _fleet(**PUBLIC, **args)
    assert _one(recording, GROUP).protect is protected
    assert _one(recording, TEMPLATE).protect is False  # a new template is how a change rolls out


def test_fleet_resource_names_are_unique_per_component_and_valid() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")

    def program() -> None:
        for name in ("chat", "embeddings-for-the-knowledge-base-search"):  # long: names are cut to fit
            InferenceServer(name, {"plan": plan, "api_domain": f"{name}.example.com", "static_assets": False,
                                   **PUBLIC})

    recording = record(program, config=GCP_CONFIG, stack="prod")
    # Subnetworks and the network take Pulumi's autonames (a random suffix); every other name is set here.
    names = [r.inputs.get("name") or r.inputs.get("namePrefix") for r in recording.resources
             if r.custom and r.type.startswith("gcp:compute/") and r.type not in (SUBNETWORK, NETWORK)]
    assert len(names) == len(set(names)) and all(n and n[0].isalpha() and len(n) <= 63 for n in names)
    assert all(len(t.inputs["namePrefix"]) <= 37 for t in recording.of_type(TEMPLATE))
    assert all(len(g.inputs["baseInstanceName"]) <= 58 for g in recording.of_type(GROUP))


def test_a_grace_longer_than_autohealing_can_wait_is_refused_before_anything_exists() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    assert plan.fleet is not None
    plan = plan.model_copy(update={"fleet": plan.fleet.model_copy(update={"health_check_grace_s": 3601})})

    def build() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": plan, "api_domain": API_DOMAIN, "static_assets": False})
        return str(caught.value)

    recording = record(build, config=GCP_CONFIG)
    assert "chat.plan.fleet.health_check_grace_s: exceeds the 3600 s" in recording.value
    assert recording.resources == []


def test_every_fleet_resource_has_a_realistic_preview_answer() -> None:
    listed = set(backend_for("gcp").preview_answers().resources)
    for exposure in (PUBLIC, OFFICE, PRIVATE):
        recording = _fleet(**exposure)
        unlisted = {r.type for r in recording.resources if r.custom} - listed
        assert unlisted <= {"gcp:storage/bucketObject:BucketObject"}, unlisted  # the bundle: its key is its id


def test_the_internal_load_balancers_certificate_needs_a_dns_record_which_the_preview_shows() -> None:
    authorization = _one(_fleet(**PRIVATE), DNS_AUTHORIZATION)
    (record_,) = authorization.outputs["dnsResourceRecords"]
    assert record_["type"] == "CNAME" and record_["name"].endswith(f".{API_DOMAIN}.")
    assert json.dumps(record_).count("authorize.certificatemanager.goog") == 1

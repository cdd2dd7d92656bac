"""Security invariants, over sample workloads × stages × exposure, on every cloud with a backend and a mapper.

Two kinds of sample: the four plan shapes of tests/sample_plans.py (GPU/CPU LLM, CPU/GPU encoder), and every
workload file in examples/workloads/, which the InferenceServer sizes itself with the real planner. Each case
builds one InferenceServer under mocks and checks what was actually registered: nothing here reads the code's
intentions.

Two views of it. The guardrails (policy/guardrails/) are the policy pack's own rules, run here exactly as
the pack runs them (property dependencies included), so the components cannot build what the pack refuses and the
two cannot drift apart: admin ports, public ingress, public buckets, encryption, metadata tokens, storage wildcards,
the servers' identity allow-list, HTTPS-only CDNs, and for fleets no server with a public address, HTTPS-only load
balancers, health checks on the serving port, the serving port open to the load balancer only, zones. The
cloud-neutral facts (neutral_view.py) check what a policy cannot know because it depends on what was asked for: the
plan's port, model prefix, fleet size, zones and health path, the exposure, the secrets' values.

A plan with a fleet deploys as one where the cloud states Capability.MANAGED_FLEET, and as loose servers elsewhere
(the interim): the fleet invariants run exactly where it does, so each cloud's fleet is checked the day it lands.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from guardrails import networks  # policy/, on the path from conftest.py
from guardrails.cache import ALI_KVSTORE, AWS_REPLICATION_GROUP, GCP_REDIS, HW_DCS
from guardrails.core import PlainResource, Stack, StackResource
from guardrails.exposure import fleet_api_openings, from_load_balancer
from guardrails.fleet import LoadBalancer, ManagedGroup, load_balancers, managed_groups
from guardrails.networks import HTTPS_PORT, LISTENER_PORTS, REDIRECT_PORT, Opening
from guardrails.resource_types import (
    ALI_BUCKET,
    ALI_INSTANCE,
    ALI_LAUNCH_TEMPLATES,
    ALI_SCALING_CONFIGURATION,
    ALI_SECURITY_GROUP_RULE,
    AWS_BUCKET,
    AWS_INGRESS_RULE,
    AWS_INSTANCE,
    AWS_LAUNCH_TEMPLATE,
    AWS_LOG_GROUP,
    AWS_SECURITY_GROUP,
    GCP_BUCKET,
    GCP_FIREWALL,
    GCP_INSTANCE,
    GCP_INSTANCE_TEMPLATES,
    GCP_LOG_BUCKET,
    HW_AS_CONFIGURATION,
    HW_BUCKET,
    HW_INSTANCE,
    HW_SECURITY_GROUP_RULE,
)
from guardrails.ruleset import Evaluation, evaluate
from guardrails.server_identity import SECRET_TYPES, ServerIdentity, server_identities

from inferstack.bootstrap.render import BUNDLE_PREFIX
from inferstack.components import Capability, InferenceServer, backend_for
from inferstack.components.shared import NETWORK_CIDR
from inferstack.plan import DeploymentPlan
from inferstack.preview import Recording, RegisteredResource, record
from inferstack.spec import CLOUDS, load_workload
from tests.components.conftest import CLOUD_ARGS, STACK_CONFIG
from tests.components.neutral_view import (
    FACT_MAPPERS,
    WORLD,
    SecurityFacts,
    dependencies_recorded,
    guarded_resources,
    gzip_user_data,
)
from tests.sample_plans import sample_plan

API_KEY = "sk-invariant-7f3c9a0b1d2e4f56"
HUB_TOKEN = "hf_invariantToken8d7c6b5a4f3e"
ADMIN_PORTS = (22, 3389)
EXPOSURES: dict[str, dict[str, Any]] = {
    "private": {},
    "public": {"allowed_cidrs": ["0.0.0.0/0"], "api_key": API_KEY, "hub_token": HUB_TOKEN},
}
SECRET_ARGS = {"api_key": "api-key", "hub_token": "hub-token"}
NETWORK = ipaddress.IPv4Network(NETWORK_CIDR)
# What each cloud's firewall, buckets and servers are registered as: the guardrails must have looked at them.
FIREWALL_TYPES = {"aws": AWS_INGRESS_RULE, "gcp": GCP_FIREWALL,
                  "alibaba": ALI_SECURITY_GROUP_RULE, "huawei": HW_SECURITY_GROUP_RULE}
BUCKET_TYPES = {"aws": AWS_BUCKET, "gcp": GCP_BUCKET, "alibaba": ALI_BUCKET,
                "huawei": HW_BUCKET}
LOG_STORE_TYPES = {"aws": AWS_LOG_GROUP, "gcp": GCP_LOG_BUCKET}
SERVER_TYPES = {"aws": AWS_INSTANCE, "gcp": GCP_INSTANCE, "alibaba": ALI_INSTANCE,
                "huawei": HW_INSTANCE}
# A fleet's servers are made from templates; any of these may be a cloud's (GCP: regional or global template;
# Alibaba: an ECS launch template, or an ESS scaling configuration, which the pack refuses for its metadata).
TEMPLATE_TYPES = {"aws": {AWS_LAUNCH_TEMPLATE}, "gcp": set(GCP_INSTANCE_TEMPLATES),
                  "alibaba": {*ALI_LAUNCH_TEMPLATES, ALI_SCALING_CONFIGURATION},
                  "huawei": {HW_AS_CONFIGURATION}}

# Who besides the account's own identities may read a bucket, per cloud: the CDN and log delivery where a bucket
# policy or IAM binding must name them. Every cloud with a mapper has a row (a missing one fails loudly).
BUCKET_READERS: dict[str, set[str]] = {
    # CloudFront through Origin Access Control (for this distribution's ARN only), S3 server access logging, and a
    # fleet's load balancer access logs (us-east-1's Elastic Load Balancing account, ELB User Guide, "Enable access
    # logs"; it may put objects under this account's log prefix only).
    "aws": {"cloudfront.amazonaws.com", "logging.s3.amazonaws.com", "arn:aws:iam::127311923021:root"},
    # The project's load-balancing service agent (Cloud CDN private bucket access). Usage logs are written by a
    # Google group granted objectCreator, which reads nothing.
    "gcp": {"https-lb.iam.gserviceaccount.com"},
    # None by bucket policy: CDN reads through the account's RAM role AliyunCDNAccessingPrivateOSSRole, and OSS
    # delivers access logs itself.
    "alibaba": set(),
    # None by bucket policy: CDN reads through the account's CDNAccessPrivateOBS agency, and OBS writes access logs
    # through the stack's log-delivery agency (PutObject on the logs bucket only).
    "huawei": set(),
}
WORKLOADS = {path.stem: path for path in sorted((Path(__file__).resolve().parents[2] / "examples" / "workloads")
                                                 .glob("*.yaml"))}
PLAN_SHAPES = ["gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"]
CASES = list(itertools.product(
    CLOUDS,  # a fixed expectation: a missing backend fails here, it never shrinks the matrix
    [*PLAN_SHAPES, *WORKLOADS],
    ["validation", "internal", "production"],
    EXPOSURES))


@dataclass(frozen=True)
class Case:
    cloud: str
    plan: DeploymentPlan
    exposure: str
    recording: Recording
    facts: SecurityFacts
    stack: Stack
    evaluation: Evaluation

    def supports(self, capability: Capability) -> None:
        support = backend_for(self.cloud).support(capability)
        if not support.available:
            pytest.skip(f"{self.cloud} lacks {capability.value}: {support.note}")

    @property
    def fleet(self) -> bool:
        """The plan runs as the cloud's managed group behind its load balancer."""
        return self.plan.fleet is not None and backend_for(self.cloud).support(Capability.MANAGED_FLEET).available

    def needs_fleet(self) -> None:
        if self.plan.fleet is None:
            pytest.skip("the plan is one server, not a fleet")
        self.supports(Capability.MANAGED_FLEET)

    def servers(self) -> list[RegisteredResource]:
        """What makes the servers: each loose server, or a fleet's template."""
        types = TEMPLATE_TYPES[self.cloud] if self.fleet else {SERVER_TYPES[self.cloud]}
        return [r for r in self.recording.resources if r.type in types]


def guardrail_config(plan: DeploymentPlan) -> dict[str, dict[str, Any]]:
    """The policy config a stack of this plan's stage runs the pack with: production needs none (managed groups span
    two zones, protected, behind HTTPS); a stack of another stage says its stage, and its fleet may run in one zone
    (docs/policy.md, "Zones and the stage")."""
    if plan.stage == "production":
        return {}
    return {"fleet-spans-zones": {"minZones": 1}, "production-runs-a-protected-fleet": {"stage": plan.stage}}


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "-".join(c))
def case(request: pytest.FixtureRequest) -> Case:
    cloud, sample, stage, exposure = request.param
    if sample in PLAN_SHAPES:
        source: dict[str, Any] = {"plan": sample_plan(cloud, sample, stage)}
    else:
        workload = load_workload(WORKLOADS[sample])
        source = {"workload": workload.model_copy(update={"stage": stage}), "cloud": cloud}
    args = {**source, **CLOUD_ARGS[cloud], **EXPOSURES[exposure]}
    servers: list[InferenceServer] = []

    def program() -> None:
        servers.append(InferenceServer("inv", args))

    with dependencies_recorded() as dependencies:
        recording = record(program, config=STACK_CONFIG, stack="invariants")  # every sample deploys on every cloud
    resources = guarded_resources(recording, dependencies)
    plan = servers[0].plan
    return Case(cloud, plan, exposure, recording, FACT_MAPPERS[cloud](recording), Stack(resources),
                evaluate(resources, guardrail_config(plan)))


def _server_identity(case: Case) -> ServerIdentity:
    def unexpected(message: str, urn: str | None = None) -> None:
        raise AssertionError(f"{message} ({urn})")

    identities = server_identities(case.stack, unexpected)
    assert len(identities) == 1, [i.resource.name for i in identities]
    return identities[0]


#### The guardrails: the policy pack's rules ####


def test_the_deployment_passes_every_guardrail(case: Case) -> None:
    assert [(finding.rule, finding.message) for finding in case.evaluation.findings] == []


def test_the_guardrails_looked_at_the_firewall_buckets_servers_and_identity(case: Case) -> None:
    examined = case.evaluation.examined
    assert FIREWALL_TYPES[case.cloud] in examined["admin-ports-not-public"]
    assert FIREWALL_TYPES[case.cloud] in examined["world-ingress-serving-port-only"]
    assert BUCKET_TYPES[case.cloud] in examined["buckets-not-public"]
    server_types = {r.type for r in case.servers()}
    assert server_types and server_types <= examined["encryption-at-rest"]
    assert server_types <= examined["metadata-tokens-required"]
    if case.fleet:
        assert server_types <= examined["servers-no-public-address"]
        assert examined["load-balancer-https-only"] and examined["load-balancer-backends-on-serving-port"]
    assert ("server-identity-least-privilege", "") not in case.evaluation.not_applicable
    if case.cloud in LOG_STORE_TYPES:  # the servers' logs: a store with a retention
        assert LOG_STORE_TYPES[case.cloud] in examined["log-stores-have-retention"]


def test_metadata_tokens_are_not_applicable_exactly_where_the_backend_lacks_metadata_hardening(case: Case) -> None:
    servers = {r.urn for r in case.servers()}
    assert len(servers) == (1 if case.fleet else case.plan.instance_count)  # a fleet: its one template
    not_applicable = {urn for (rule, urn) in case.evaluation.not_applicable if rule == "metadata-tokens-required"}
    hardened = backend_for(case.cloud).support(Capability.METADATA_HARDENING).available
    assert not_applicable == (set() if hardened else servers)


def test_admin_ports_are_never_open_even_to_private_networks(case: Case) -> None:
    """Stricter than the pack, which admits private sources: inferstack itself opens no admin port at all."""
    openings = [o for r in case.recording.resources for o in networks.openings(r.type, r.inputs)]
    assert openings, "the firewall registered no ingress rule at all"
    assert [(o.low, o.high, o.source.text) for o in openings if any(o.covers(p) for p in ADMIN_PORTS)] == []


#### What only the request can tell: ports, exposure, prefix, secrets ####


def test_only_the_inference_port_is_reachable_from_outside_the_network(case: Case) -> None:
    if case.fleet:
        pytest.skip("a fleet's servers admit the load balancer only: test_a_fleets_api_port_admits_only_its_load_"
                    "balancer")
    outside = [rule for rule in case.facts.ingress if rule.source != "network"]
    port = case.plan.serving.port
    assert all((rule.port_from, rule.port_to) == (port, port) for rule in outside)
    expected = set(EXPOSURES[case.exposure].get("allowed_cidrs", []))
    assert {rule.source for rule in outside} == expected


def test_world_is_admitted_only_when_asked_for_and_only_to_the_api(case: Case) -> None:
    """The API, or for a fleet the load balancer's HTTPS and redirect ports, and only with a public exposure."""
    world = [opening for resource in case.stack.resources for opening in _openings(resource)
             if opening.source.text in WORLD]
    ports = LISTENER_PORTS if case.fleet else (case.plan.serving.port,)
    assert all(opening.low == opening.high and opening.low in ports for opening in world), world
    if not case.fleet:
        assert bool(world) == (case.exposure == "public")
    else:  # Google Cloud and Huawei limit callers on the load balancer itself (Cloud Armor, IP groups)
        assert not world or case.exposure == "public"


def _openings(resource: PlainResource) -> list[Opening]:
    return networks.openings(resource.resource_type, resource.inputs or {})


def test_metrics_port_is_reachable_only_from_inside_the_network(case: Case) -> None:
    metrics_port = case.plan.serving.metrics_port
    if metrics_port is None:
        pytest.skip("this runtime serves metrics on the API port")
    metrics = [rule for rule in case.facts.ingress if rule.port_from <= metrics_port <= rule.port_to]
    assert metrics and all(rule.source == "network" for rule in metrics)


def test_every_bucket_is_encrypted_and_versioned(case: Case) -> None:
    # models, data, logs, assets; on AWS a fleet's load balancer access logs too (a bucket of their own)
    assert len(case.facts.buckets) == 4 + (case.cloud == "aws" and case.fleet)
    assert all(bucket.encrypted and bucket.versioned for bucket in case.facts.buckets), case.facts.buckets


def test_every_bucket_blocks_public_access_so_no_acl_or_policy_can_open_it(case: Case) -> None:
    case.supports(Capability.BUCKET_PUBLIC_ACCESS_BLOCK)
    assert case.facts.buckets
    assert all(bucket.public_access_blocked and bucket.acls_disabled for bucket in case.facts.buckets)


def test_every_bucket_refuses_plain_http(case: Case) -> None:
    case.supports(Capability.TLS_ONLY_STORAGE)
    assert case.facts.buckets and all(bucket.tls_only for bucket in case.facts.buckets)


def test_only_the_clouds_cdn_and_log_delivery_may_read_a_bucket(case: Case) -> None:
    readers = {reader for bucket in case.facts.buckets for reader in bucket.readers}
    assert readers <= BUCKET_READERS[case.cloud]


def test_identity_reads_only_the_model_prefix_and_the_boot_bundles_of_one_bucket(case: Case) -> None:
    model_bucket = case.recording.named("inv-store-models").id
    assert _server_identity(case).storage == {f"{model_bucket}/{case.plan.model.bucket_prefix}*",
                                              f"{model_bucket}/{BUNDLE_PREFIX}*"}


def test_identity_reads_exactly_its_own_secrets(case: Case) -> None:
    secrets = {r.urn for r in case.recording.resources if r.type in SECRET_TYPES[case.cloud]}
    assert bool(secrets) == bool(case.facts.secret_refs)
    readable = _server_identity(case).secrets
    if backend_for(case.cloud).support(Capability.SECRET_SCOPED_GRANTS).available:
        assert readable == secrets
    else:  # Huawei: every secret of the region's project (the capability says why)
        assert readable == ({"*"} if secrets else set())


def test_cdn_serves_https_only_from_a_private_origin(case: Case) -> None:
    case.supports(Capability.PRIVATE_CDN_ORIGIN)
    assert len(case.facts.cdns) == 1
    assert case.facts.cdns[0].https_only and case.facts.cdns[0].private_origin


def server_user_data(case: Case) -> list[str]:
    """The user data each server boots with, decoded: a loose server's, or a fleet template's."""
    if not case.fleet:
        return [server.user_data for server in case.facts.servers]
    return [_template_user_data(template.inputs) for template in case.servers()]


def _template_user_data(inputs: dict[str, Any]) -> str:
    """AWS, Alibaba: userData; Huawei: instanceConfig.userData (Base64 of gzip, as their servers take it); Google
    Cloud: metadata user-data (text)."""
    text = inputs.get("userData") or (inputs.get("instanceConfig") or {}).get("userData")
    if text:
        return gzip_user_data(text)
    return str((inputs.get("metadata") or {}).get("user-data", ""))


def test_no_secret_value_reaches_user_data_or_any_plain_input(case: Case) -> None:
    given = {key: value for key, value in EXPOSURES[case.exposure].items() if key in SECRET_ARGS}
    assert sorted(case.facts.secret_values_stored) == sorted(given.values())
    assert set(case.facts.secret_refs) == {SECRET_ARGS[key] for key in given}
    visible = json.dumps([r.masked_inputs for r in case.recording.resources])
    user_data = server_user_data(case)
    assert user_data
    for text in user_data:
        assert text.startswith("#cloud-config")
        for secret in given.values():
            assert secret not in text
    for secret in given.values():
        assert secret not in visible


BUNDLE_TYPES = {"aws": "aws:s3/bucketObjectv2:BucketObjectv2", "gcp": "gcp:storage/bucketObject:BucketObject",
                "alibaba": "alicloud:oss/bucketObject:BucketObject",
                "huawei": "huaweicloud:Obs/bucketObject:BucketObject"}


def test_the_servers_boot_bundle_names_the_api_key_reference_the_gateway_reads_at_start(case: Case) -> None:
    if "api_key" not in EXPOSURES[case.exposure]:
        pytest.skip("no API key in this exposure")
    reference = case.facts.secret_refs["api-key"]
    (bundle,) = case.recording.of_type(BUNDLE_TYPES[case.cloud])
    key = bundle.inputs["key"] if "key" in bundle.inputs else bundle.inputs["name"]
    assert reference in bundle.inputs["content"] and key.startswith(BUNDLE_PREFIX)
    user_data = server_user_data(case)
    assert user_data and all(f"BUNDLE_KEY={key}\n" in text for text in user_data)


#### Fleets: what only the plan can tell ####

# The load balancer's own ports, and what the servers' serving port may admit on each cloud: AWS the load
# balancer's security group; Google Cloud its front ends (and, for an internal load balancer, the proxy-only subnet
# of the network); Alibaba and Huawei the network the load balancer's nodes live in.


def _fleet(case: Case) -> ManagedGroup:
    case.needs_fleet()
    groups = managed_groups(case.stack)
    assert len(groups) == 1, [g.resource.name for g in groups]
    return groups[0]


def _load_balancer(case: Case, group: ManagedGroup) -> LoadBalancer:
    """The one load balancer in front of the group (Google Cloud's assets CDN is another, in front of a bucket)."""
    def unexpected(message: str, urn: str | None = None) -> None:
        raise AssertionError(f"{message} ({urn})")

    fronting = [lb for lb in load_balancers(case.stack, unexpected)
                if any(group.resource.urn in {g.urn for g in b.groups} for b in lb.backends)]
    assert len(fronting) == 1, [lb.resource.name for lb in fronting]
    return fronting[0]


def test_a_fleet_is_one_managed_group_over_the_plans_zones_sized_by_the_plan(case: Case) -> None:
    group = _fleet(case)
    fleet = case.plan.fleet
    assert fleet is not None
    assert (group.min_size, group.max_size) == (fleet.min_replicas, fleet.max_replicas)
    # At least the plan's zones (two in production); more is no harm: an AWS load balancer needs two zones anyway.
    assert group.unread_zones == [] and len(group.zones) >= case.plan.zones
    assert len(group.zones) >= (2 if case.plan.stage == "production" else 1)
    assert [t.urn for t in group.templates] == [r.urn for r in case.servers()]
    assert case.recording.of_type(SERVER_TYPES[case.cloud]) == []  # no loose server beside the fleet


def test_a_fleet_has_one_load_balancer_with_https_and_a_redirect_facing_as_asked(case: Case) -> None:
    balancer = _load_balancer(case, _fleet(case))
    assert balancer.internet_facing == (case.exposure == "public")
    https = [listener for listener in balancer.listeners if listener.protocol == "HTTPS"]
    http = [listener for listener in balancer.listeners if listener.protocol == "HTTP"]
    assert [listener.port for listener in https] == [HTTPS_PORT]
    assert [(listener.port, listener.redirects_to_https) for listener in http] == [(REDIRECT_PORT, True)]
    assert https[0].backends and not http[0].backends


def test_the_load_balancer_checks_the_readiness_path_on_the_serving_port(case: Case) -> None:
    group = _fleet(case)
    backends = [b for b in _load_balancer(case, group).backends if group.resource.urn in {g.urn for g in b.groups}]
    checks = [check for backend in backends for check in backend.health_checks]
    assert backends and len(checks) >= len(backends)
    assert {check.path for check in checks} == {case.plan.serving.health_path}
    assert {check.port for check in checks} <= {None, "traffic-port", "serving-port", case.plan.serving.port}


def test_a_fleets_api_port_admits_only_its_load_balancer(case: Case) -> None:
    group = _fleet(case)
    port = case.plan.serving.port
    openings = fleet_api_openings(case.stack, group, (port,))
    assert openings, "nothing admits the load balancer to the serving port"
    for rule, opening in openings:
        assert (opening.low, opening.high) == (port, port), (rule.name, opening)
        assert _from_load_balancer(case, rule, opening), (rule.name, opening.source.text)


def _from_load_balancer(case: Case, rule: StackResource, opening: Opening) -> bool:
    if case.cloud == "aws":  # the load balancer's own security group, and nothing else
        balancer = _load_balancer(case, _fleet(case))
        groups = {d.urn for d in balancer.resource.property_dependencies.get("securityGroups", [])}
        sources = {d.urn for d in rule.property_dependencies.get("referencedSecurityGroupId", [])}
        return opening.source.internal and bool(sources) and sources <= groups
    if from_load_balancer(opening, rule.resource_type):  # Google's front ends and health checkers
        return True
    network = opening.source.network  # the network the load balancer's nodes (or Google's proxies) live in
    return network is not None and network.version == 4 and network.subnet_of(NETWORK)  # type: ignore[arg-type]


#### The inference cache: a managed Redis that only the servers reach, over TLS, with AUTH ####

CACHE_TOKEN = "Cache-invariant_0123456789"
CACHE_CASES = list(itertools.product(CLOUDS, ["internal", "production"], EXPOSURES))
REDIS_TYPES = {"aws": AWS_REPLICATION_GROUP, "gcp": GCP_REDIS, "alibaba": ALI_KVSTORE,
               "huawei": HW_DCS}


@dataclass(frozen=True)
class CacheCase:
    cloud: str
    recording: Recording
    evaluation: Evaluation

    def redis(self) -> RegisteredResource:
        (found,) = self.recording.of_type(REDIS_TYPES[self.cloud])
        return found


@pytest.fixture(scope="module", params=CACHE_CASES, ids=lambda c: "-".join(c))
def cache_case(request: pytest.FixtureRequest) -> CacheCase:
    from inferstack.spec import Cache

    cloud, stage, exposure = request.param
    plan = sample_plan(cloud, "gpu-llm", stage).model_copy(update={"cache": Cache(ttl_seconds=3600)})
    args = {"plan": plan, **CLOUD_ARGS[cloud], **EXPOSURES[exposure]}
    if not backend_for(cloud).cache_generates_auth:
        args["cache_auth_token"] = CACHE_TOKEN
    with dependencies_recorded() as dependencies:
        recording = record(lambda: InferenceServer("inv", args), config=STACK_CONFIG, stack="invariants")
    resources = guarded_resources(recording, dependencies)
    return CacheCase(cloud, recording, evaluate(resources, guardrail_config(plan)))


def test_a_deployment_with_a_cache_passes_every_guardrail_and_the_redis_rule_read_it(cache_case: CacheCase) -> None:
    assert [(finding.rule, finding.message) for finding in cache_case.evaluation.findings] == []
    assert REDIS_TYPES[cache_case.cloud] in cache_case.evaluation.examined["managed-redis-private-tls-auth"]


def test_the_redis_admits_the_servers_and_no_address_outside_the_network(cache_case: CacheCase) -> None:
    inputs = cache_case.redis().inputs
    recording = cache_case.recording
    if cache_case.cloud == "aws":
        (group_id,) = inputs["securityGroupIds"]
        rules = [r.inputs for r in recording.of_type(AWS_INGRESS_RULE)
                 if r.inputs["securityGroupId"] == group_id]
        servers = {r.id for r in recording.of_type(AWS_SECURITY_GROUP) if r.name == "inv-firewall-sg"}
        assert rules and {r.get("referencedSecurityGroupId") for r in rules} == servers
        assert not any("cidrIpv4" in r or "cidrIpv6" in r for r in rules)
    elif cache_case.cloud == "gcp":  # Memorystore has no public address; the network's egress picks who reaches it
        assert inputs["authorizedNetwork"] == recording.of_type("gcp:compute/network:Network")[0].id
    elif cache_case.cloud == "alibaba":
        assert inputs["securityIps"] == ["127.0.0.1"]
        assert inputs["securityGroupId"] == recording.named("inv-firewall-sg").id
    else:
        addresses = [a for w in inputs["whitelists"] for a in w["ipAddresses"]]
        assert addresses and all(ipaddress.ip_network(a).subnet_of(NETWORK) for a in addresses)
        assert inputs["whitelistEnable"] is True


def test_the_cache_token_never_reaches_user_data_or_any_plain_input(cache_case: CacheCase) -> None:
    visible = json.dumps([r.masked_inputs for r in cache_case.recording.resources])
    assert CACHE_TOKEN not in visible
    for resource in cache_case.recording.resources:
        for key in ("userData", "metadata", "instanceConfig", "content"):
            assert CACHE_TOKEN not in json.dumps(resource.inputs.get(key, ""))
    assert any("cache-auth" in r.name and r.custom for r in cache_case.recording.resources)

"""The fleet guardrails on a hand-built fleet per cloud (tests/policy/fleets.py): the compliant fleet passes every
policy and the pack reads it whole; each mutation (one property of one resource changed, the way a careless edit
would) gets one exact violation on the resource at fault.

The same rules run on what the components register: test_mutations.py flips the recorded production deployment of
every cloud whose fleet is built, and the components' invariant matrix runs them on every case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from guardrails.core import Stack
from guardrails.fleet import load_balancers, managed_groups
from guardrails.resource_types import AWS_LISTENER_RULES
from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy

from tests.policy import fleets
from tests.policy.harness import Resource, check_built, check_stack, pack

LISTENER_FIX = ("a load balancer listens with HTTPS on 443 (TLS 1.2 or newer) and with HTTP on 80 only to redirect to "
                "HTTPS")
HEALTH_FIX = "check the serving health path (the plan's serving.health_path) over HTTP on the serving port"
NO_PUBLIC = "a fleet's servers have no public address: the load balancer is their only public endpoint"
ONLY_LB = ("a fleet's serving port admits its load balancer only (the load balancer's security group, the network, or "
           "Google's front ends 130.211.0.0/22, 35.191.0.0/16); callers reach the load balancer")
LB_FIREWALL = ("only a load balancer's own firewall opens 443 and 80 to callers; servers admit the load balancer "
               "only")
ADVISORY = {"fleet-watched-by-alarms"}  # the hand-built fleets carry no alarms; the advisory says so
CLOUDS = sorted(fleets.FLEETS)

Props = dict[str, Any]


def _mandatory(resources: list[Resource], config: dict[str, Any] | None = None) -> list[tuple[str, str, str]]:
    report = check_built(resources, config=config)
    return [(v.policy, v.message, v.urn.rsplit("::", 1)[-1]) for v in report.violations if v.policy not in ADVISORY]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_compliant_fleet_passes_every_policy(cloud: str) -> None:
    assert _mandatory(fleets.fleet(cloud)) == []


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_pack_reads_the_fleet_whole(cloud: str) -> None:
    """One group over two zones from its template, one internet-facing load balancer whose HTTPS listener forwards to
    a backend holding the group, checked on the health path, and whose HTTP listener only redirects."""
    stack = Stack(_policy_resources(fleets.fleet(cloud)))
    (group,) = managed_groups(stack)
    assert (group.cloud, len(group.zones), group.unread_zones, group.min_size, group.max_size) == (cloud, 2, [], 2, 4)
    assert [t.name for t in group.templates] == ["template"]
    found: list[str] = []
    (balancer,) = [lb for lb in load_balancers(stack, lambda message, urn=None: found.append(message))
                   if lb.backends]
    assert found == [] and balancer.internet_facing
    listeners = {(listener.port, listener.protocol, listener.redirects_to_https) for listener in balancer.listeners}
    assert listeners == {(443, "HTTPS", False), (80, "HTTP", True)}
    (backend,) = balancer.backends
    assert [g.urn for g in backend.groups] == [group.resource.urn]
    assert [check.path for check in backend.health_checks] == [fleets.HEALTH_PATH]


def _policy_resources(resources: list[Resource]) -> list[PolicyResource]:
    """The hand-built stack as the engine's PolicyResources (what check_stack builds), for the readers."""
    captured: list[PolicyResource] = []

    def capture(args: StackValidationArgs, report_violation: Any) -> None:
        captured.extend(args.resources)

    check_stack(StackValidationPolicy("probe", "captures the stack", capture), resources)
    return captured


#### Mutations ####


@dataclass(frozen=True)
class Mutation:
    label: str
    cloud: str
    target: str
    change: Callable[[Props], Props] | None
    """New properties from the compliant ones; None removes the resource."""
    policy: str
    message: str
    reported_on: str | None = None
    depends: dict[str, list[str]] | None = None
    """New property dependencies (None keeps them)."""
    added: list[Resource] = field(default_factory=list)
    config: dict[str, Any] | None = None


def _set(**changes: Any) -> Callable[[Props], Props]:
    return lambda props: {**props, **changes}


def _nested(key: str, **changes: Any) -> Callable[[Props], Props]:
    return lambda props: {**props, key: {**props[key], **changes}}


def _without(*keys: str) -> Callable[[Props], Props]:
    return lambda props: {k: v for k, v in props.items() if k not in keys}


MUTATIONS = [
    # AWS
    Mutation("servers get a public address", "aws", "template",
             _set(networkInterfaces=[{"associatePublicIpAddress": "true", "securityGroups": ["sg-srv"]}]),
             "servers-no-public-address",
             "network interface 0 of the launch template gets a public address (associatePublicIpAddress is true): "
             f"set it to false; {NO_PUBLIC}"),
    Mutation("launch template volume unencrypted", "aws", "template",
             _set(blockDeviceMappings=[{"deviceName": "/dev/sda1", "ebs": {"encrypted": "false"}}]),
             "encryption-at-rest", "EBS volume /dev/sda1 of the launch template is not encrypted: set ebs.encrypted "
             "to true"),
    Mutation("launch template metadata hop limit 2", "aws", "template",
             _nested("metadataOptions", httpPutResponseHopLimit=2.0), "metadata-tokens-required",
             "the metadata hop limit is 2 (metadataOptions.httpPutResponseHopLimit), so containers on the server reach "
             "its credentials: set it to 1"),
    Mutation("HTTPS listener on the API's default TLS policy", "aws", "https", _without("sslPolicy"),
             "load-balancer-https-only",
             "the HTTPS listener's TLS policy is unset (the API's default, ELBSecurityPolicy-2016-08), which the pack "
             "does not know to refuse TLS before 1.2: set sslPolicy to ELBSecurityPolicy-TLS13-1-2-2021-06 (or another "
             "ELBSecurityPolicy-TLS13-1-2-*, -TLS13-1-3-*, -TLS-1-2-* or -FS-1-2-* policy)"),
    Mutation("a forwarding rule on the HTTP listener", "aws", "http", _set(), "load-balancer-https-front-ends",
             "listener rule api of the HTTP listener http does not only redirect to HTTPS, so plain HTTP reaches the "
             "servers: redirect, or move the rule to the HTTPS listener", reported_on="api",
             added=[Resource(AWS_LISTENER_RULES[0], "api", {
                 "listenerArn": "http", "priority": 10.0,
                 "actions": [{"type": "forward", "targetGroupArn": fleets.AWS_TARGET_GROUP["arn"]}],
                 "conditions": [{"pathPattern": {"values": ["/v1/*"]}}]}, {"listenerArn": ["http"]})]),
    Mutation("target group health check on /", "aws", "target-group",
             _nested("healthCheck", path="/"), "load-balancer-backends-on-serving-port",
             f"the health check asks for / (healthCheck.path), which answers before the model is loaded: {HEALTH_FIX}"),
    Mutation("the serving port opened to the world", "aws", "servers-api",
             lambda p: {**_without("referencedSecurityGroupId")(p), "cidrIpv4": fleets.WORLD},
             "load-balancer-only-public-listener",
             f"port 8000 is open to the whole internet (0.0.0.0/0) on the servers of managed group group: {ONLY_LB}",
             depends={"securityGroupId": ["servers"]}),
    Mutation("443 opened on the servers' firewall", "aws", "lb-https", _set(securityGroupId="sg-srv"),
             "load-balancer-only-public-listener",
             f"port 443 is open to the whole internet (0.0.0.0/0), and servers use this firewall: {LB_FIREWALL}",
             depends={"securityGroupId": ["servers"]}),
    Mutation("the group in one zone", "aws", "group", _set(vpcZoneIdentifiers=["subnet-a"]), "fleet-spans-zones",
             "managed group group spans 1 zone(s) (us-east-1a): spread it over at least 2 (production plans span two; "
             "set minZones 1 in the policy config of a stack of another stage)",
             depends={"launchTemplate": ["template"], "vpcZoneIdentifiers": ["private-0"],
                      "targetGroupArns": ["target-group"]}),
    Mutation("the group in a subnet the stack does not create", "aws", "group",
             _set(vpcZoneIdentifiers=["subnet-a", "subnet-b", "subnet-0ffee"]), "fleet-spans-zones",
             "managed group group: the pack cannot read 1 subnet(s) that this stack does not create "
             "(vpcZoneIdentifiers), so it cannot tell how many zones the group spans: place it in subnets (or zones) "
             "of this stack"),
    # Google Cloud
    Mutation("servers get an external address", "gcp", "template",
             _set(networkInterfaces=[{"subnetwork": "s", "accessConfigs": [{"networkTier": "PREMIUM"}]}]),
             "servers-no-public-address",
             "network interface 0 of the template has an access config, which gives each server an external IPv4 "
             f"address: remove accessConfigs; {NO_PUBLIC}"),
    Mutation("HTTPS proxy without an SSL policy", "gcp", "https-proxy", _without("sslPolicy"),
             "load-balancer-https-front-ends",
             "target HTTPS proxy https-proxy has no SSL policy, so Google's default applies, which admits TLS 1.0: "
             "give it an SSL policy with minTlsVersion TLS_1_2", depends={"urlMap": ["urls"]}),
    Mutation("SSL policy down to TLS 1.0", "gcp", "tls", _set(minTlsVersion="TLS_1_0"), "load-balancer-https-only",
             "the SSL policy's minTlsVersion is TLS_1_0: set it to TLS_1_2"),
    Mutation("port 80 serves the API", "gcp", "http-proxy", _set(urlMap="urls"), "load-balancer-https-front-ends",
             "target HTTP proxy http-proxy serves a URL map that does not only redirect to HTTPS, so plain HTTP "
             "reaches the backends: give it a URL map whose defaultUrlRedirect has httpsRedirect true (and nothing "
             "else)",
             depends={"urlMap": ["urls"]}),
    Mutation("a forwarding rule on 8443", "gcp", "https", _set(portRange="8443"), "load-balancer-https-only",
             f"the forwarding rule listens on port 8443: {LISTENER_FIX}"),
    Mutation("health check on the default port", "gcp", "health",
             _set(httpHealthCheck={"requestPath": fleets.HEALTH_PATH}), "load-balancer-backends-on-serving-port",
             "the health check probes port 80 (the default) (httpHealthCheck.port): use the serving port, or "
             "portSpecification USE_SERVING_PORT"),
    Mutation("the serving port opened to the world", "gcp", "servers-api",
             _set(sourceRanges=[*fleets.GCP_LB_RANGES, fleets.WORLD]), "load-balancer-only-public-listener",
             f"port 8000 is open to the whole internet (0.0.0.0/0) on the servers of managed group group: {ONLY_LB}"),
    Mutation("443 opened on the servers", "gcp", "servers-api",
             _set(allows=[{"protocol": "tcp", "ports": ["443"]}], sourceRanges=[fleets.WORLD]),
             "load-balancer-only-public-listener",
             "port 443 is open to the whole internet (0.0.0.0/0), and Google Cloud's load balancers take no firewall "
             "rule (Google's front ends terminate HTTPS; Cloud Armor limits callers), so this rule opens the port on "
             f"servers: {LB_FIREWALL}"),
    Mutation("the group in one zone", "gcp", "group", _set(distributionPolicyZones=["us-central1-a"]),
             "fleet-spans-zones",
             "managed group group spans 1 zone(s) (us-central1-a): spread it over at least 2 (production plans span "
             "two; set minZones 1 in the policy config of a stack of another stage)"),
    # Alibaba Cloud
    Mutation("servers get bandwidth out", "alibaba", "template", _set(internetMaxBandwidthOut=5.0),
             "servers-no-public-address",
             "internetMaxBandwidthOut is 5, which gives each server a public address: set it to 0 (servers reach the "
             f"internet through the NAT gateway); {NO_PUBLIC}"),
    Mutation("metadata tokens optional", "alibaba", "template", _set(httpTokens="optional"),
             "metadata-tokens-required",
             "the metadata service answers without a session token (httpTokens is optional): set it to required"),
    Mutation("system disk unencrypted", "alibaba", "template", _nested("systemDisk", encrypted=False),
             "encryption-at-rest", "the system disk is not encrypted: set systemDisk.encrypted to true"),
    Mutation("HTTPS listener on TLS 1.0", "alibaba", "https", _set(securityPolicyId="tls_cipher_policy_1_0"),
             "load-balancer-https-only",
             "the HTTPS listener's TLS policy is tls_cipher_policy_1_0, which admits TLS before 1.2: set "
             "securityPolicyId to tls_cipher_policy_1_2 (or _1_2_strict, _1_2_strict_with_1_3, or a custom "
             "alb.SecurityPolicy of TLSv1.2 and TLSv1.3)"),
    Mutation("a custom TLS policy the stack does not create", "alibaba", "https", _set(securityPolicyId="spy-1"),
             "load-balancer-https-front-ends",
             "HTTPS listener https uses TLS policy spy-1, which this stack does not create, so the pack cannot read "
             "its TLS versions: use tls_cipher_policy_1_2 or an alb.SecurityPolicy of this stack"),
    Mutation("the HTTP redirect rule removed", "alibaba", "http-redirect", None, "load-balancer-https-front-ends",
             "HTTP listener http has no rule that redirects every request (path /*) to HTTPS, so its default action "
             "forwards plain HTTP to the servers: add an alb.Rule with a Redirect action (protocol HTTPS) for path /*",
             reported_on="http"),
    Mutation("the redirect narrowed to one host", "alibaba", "http-redirect",
             _set(ruleConditions=[{"type": "Host", "hostConfig": {"values": ["api.example.com"]}}]),
             "load-balancer-https-front-ends",
             "HTTP listener http has no rule that redirects every request (path /*) to HTTPS, so its default action "
             "forwards plain HTTP to the servers: add an alb.Rule with a Redirect action (protocol HTTPS) for path /*",
             reported_on="http"),
    Mutation("server group health check off", "alibaba", "server-group",
             _nested("healthCheckConfig", healthCheckEnabled=False), "load-balancer-backends-on-serving-port",
             f"the server group's health check is off (healthCheckConfig): {HEALTH_FIX}"),
    Mutation("the serving port opened to the world", "alibaba", "servers-api", _set(cidrIp=fleets.WORLD),
             "load-balancer-only-public-listener",
             f"port 8000 is open to the whole internet (0.0.0.0/0) on the servers of managed group group: {ONLY_LB}"),
    Mutation("the group in one zone", "alibaba", "group", _set(vswitchIds=["vsw-a"]), "fleet-spans-zones",
             "managed group group spans 1 zone(s) (ap-southeast-1a): spread it over at least 2 (production plans span "
             "two; set minZones 1 in the policy config of a stack of another stage)",
             depends={"launchTemplateId": ["template"], "vswitchIds": ["private-0"],
                      "albServerGroups": ["server-group"]}),
    # Huawei Cloud
    Mutation("servers get an elastic IP", "huawei", "template",
             _nested("instanceConfig", publicIp={"eip": {"ipType": "5_bgp", "bandwidth": {"size": 5.0}}}),
             "servers-no-public-address",
             "instanceConfig.publicIp gives each server an elastic IP: remove it (servers reach the internet through "
             f"the NAT gateway); {NO_PUBLIC}"),
    Mutation("system disk without a key", "huawei", "template",
             _nested("instanceConfig", disks=[{"diskType": "SYS", "size": 200.0, "volumeType": "GPSSD"}]),
             "encryption-at-rest", "disk 0 (SYS) of the AS configuration is not encrypted: set kmsId (inferstack uses "
             "the region's evs/default key)"),
    Mutation("HTTPS listener on TLS 1.0", "huawei", "https", _set(tlsCiphersPolicy="tls-1-0"),
             "load-balancer-https-only",
             "the HTTPS listener's TLS policy is tls-1-0, which admits TLS before 1.2: set tlsCiphersPolicy to tls-1-2 "
             "(or tls-1-2-strict, tls-1-2-fs, tls-1-2-fs-with-1-3, tls-1-2-strict-no-cbc, or a custom "
             "DedicatedElb.SecurityPolicy of TLSv1.2 and TLSv1.3)"),
    Mutation("the HTTP redirect removed", "huawei", "http-redirect", None, "load-balancer-https-front-ends",
             "HTTP listener http redirects nothing to HTTPS: add an l7policy REDIRECT_TO_LISTENER to the HTTPS "
             "listener", reported_on="http"),
    Mutation("the HTTP listener forwards to the pool", "huawei", "http-redirect",
             _set(action="REDIRECT_TO_POOL", redirectPoolId="pool-1"), "load-balancer-https-front-ends",
             "forwarding policy http-redirect of the HTTP listener http does not redirect to HTTPS, so plain HTTP "
             "reaches the servers: use REDIRECT_TO_LISTENER to the HTTPS listener",
             depends={"listenerId": ["http"], "redirectPoolId": ["pool"]}),
    Mutation("the pool's health check removed", "huawei", "health", None, "load-balancer-https-front-ends",
             "backend server group pool has no health check (a DedicatedElb.Monitor for it): check the serving health "
             "path (the plan's serving.health_path) over HTTP on the serving port", reported_on="pool"),
    Mutation("health check on another port", "huawei", "health", _set(port=9000.0),
             "load-balancer-backends-on-serving-port",
             "the health check probes port 9000: leave port unset (the backend's port)"),
    Mutation("the serving port opened to the world", "huawei", "servers-api", _set(remoteIpPrefix=fleets.WORLD),
             "load-balancer-only-public-listener",
             f"port 8000 is open to the whole internet (0.0.0.0/0) on the servers of managed group group: {ONLY_LB}"),
    Mutation("443 opened on the servers", "huawei", "servers-api",
             _set(portRangeMin=443.0, portRangeMax=443.0, remoteIpPrefix=fleets.WORLD),
             "load-balancer-only-public-listener",
             "port 443 is open to the whole internet (0.0.0.0/0), and a Huawei dedicated load balancer takes no "
             "security group (its listeners' IP groups limit callers), so this rule opens the port on servers: "
             f"{LB_FIREWALL}"),
    Mutation("zones left to Auto Scaling", "huawei", "group", _without("availabilityZones"), "fleet-spans-zones",
             "managed group group: the pack cannot read availabilityZones is unset, so Auto Scaling puts every server "
             "in one zone it picks: list the zones, so it cannot tell how many zones the group spans: place it in "
             "subnets (or zones) of this stack"),
]


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: f"{m.cloud}: {m.label}")
def test_the_pack_reports_a_flipped_fleet_property(mutation: Mutation) -> None:
    mutated = fleets.changed(fleets.fleet(mutation.cloud), mutation.target, mutation.change, mutation.depends)
    found = _mandatory(mutated + mutation.added, mutation.config)
    assert (mutation.policy, mutation.message, mutation.reported_on or mutation.target) in found, found


FLEET_RULES = {"servers-no-public-address", "load-balancer-https-only", "load-balancer-https-front-ends",
               "load-balancer-backends-on-serving-port", "load-balancer-only-public-listener", "fleet-spans-zones"}


def test_every_fleet_rule_has_a_mutation_on_every_cloud() -> None:
    assert {p.name for p in pack.POLICIES} - {
        "admin-ports-not-public", "world-ingress-serving-port-only", "buckets-not-public", "encryption-at-rest",
        "metadata-tokens-required", "storage-grants-no-wildcards", "cdn-https-only", "buckets-have-public-access-block",
        "buckets-have-default-encryption", "server-identity-least-privilege", "cdn-https-front-ends",
        "public-api-has-api-key", "managed-redis-private-tls-auth", "managed-redis-users-and-network",
        "log-stores-have-retention",
        # its cases on every cloud (a part unprotected, no HTTPS, no load balancer): test_edge_bypasses.py
        "production-runs-a-protected-fleet",
        # its mutation on every cloud (the alarms removed) runs on the components' deployment: test_alarm_policies.py
        "fleet-watched-by-alarms"} == FLEET_RULES, "a new policy: add it here and give it a mutation on every cloud"
    for cloud in CLOUDS:
        missing = FLEET_RULES - {m.policy for m in MUTATIONS if m.cloud == cloud}
        assert not missing, (cloud, missing)


def test_a_stack_of_another_stage_may_run_its_fleet_in_one_zone() -> None:
    one_zone = fleets.changed(fleets.fleet("gcp"), "group", _set(distributionPolicyZones=["us-central1-a"]))
    assert _mandatory(one_zone, {"fleet-spans-zones": {"minZones": 1}}) == []


def test_subnets_the_stack_does_not_create_need_a_stack_that_vouches_for_their_zones() -> None:
    brought = fleets.changed(fleets.fleet("aws"), "group", _set(vpcZoneIdentifiers=["subnet-0ffee", "subnet-0fade"]),
                             depends={"launchTemplate": ["template"], "targetGroupArns": ["target-group"]})
    assert [policy for policy, _, _ in _mandatory(brought)] == ["fleet-spans-zones"]
    assert _mandatory(brought, {"fleet-spans-zones": {"minZones": 1}}) == []


def test_google_front_ends_count_as_the_load_balancer_not_as_the_world() -> None:
    """The servers' rule admits 130.211.0.0/22 and 35.191.0.0/16 to the serving port: neither the public-ingress
    rule nor the fleet rule flags it, and the same ranges to another port are flagged."""
    assert _mandatory(fleets.fleet("gcp")) == []
    other_port = fleets.changed(fleets.fleet("gcp"), "servers-api", _set(allows=[{"protocol": "tcp", "ports": ["22"]}]))
    assert ("admin-ports-not-public", "admin port 22 (SSH) is open to 130.211.0.0/22: inferstack opens no admin port; "
            "reach servers through the cloud's managed shell, or admit a private network only",
            "servers-api") in _mandatory(other_port)

"""Google Cloud's load balancing for a fleet: a global external Application Load Balancer (or a regional internal
one for private callers) with HTTPS on 443 and HTTP on 80 only redirecting, the backend service of each group with
its health check, Cloud Armor for the allowed callers, and a canary's weighted routing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pulumi
import pulumi_gcp as gcp

from inferstack.components.contract import FleetRequest, StrOutput
from inferstack.components.gcp.naming import gcp_labels, gcp_name
from inferstack.components.gcp.network import PROXY_ONLY_PURPOSE, proxy_only_ranges
from inferstack.components.gcp.provider import result_field
from inferstack.components.gcp.servers import Placement
from inferstack.components.naming import child_options, fleet_options
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan

# The instance group's named port, which the backend service names (`port_name`).
SERVING_PORT_NAME = "http"

# Autoscaling on load-balancing utilization: each server's backend capacity is max_rate_per_instance requests per
# second (balancing mode RATE), and the autoscaler holds the group's utilization of that capacity at this target.
# The plan's target_requests_per_s is what one server carries within the SLOs at no more than 80 % of its saturation:
# capacity = target / 0.8 (about the saturation) with a utilization target of 0.8 holds exactly the plan's target,
# and the load balancer only counts a server full at its saturation. 0.8 is also the autoscaler's own default.
LB_UTILIZATION_TARGET = 0.8

# The load balancer's access log: every request, written by the load balancer to Cloud Logging (Cloud Load Balancing
# docs, "Logging and monitoring": backend service logConfig, sampleRate 0.0-1.0), kept by the project's _Default log
# bucket (30 days unless changed; Cloud Logging, "Routing and storage overview"). It holds request metadata (client
# address, URL, status, latency), never request bodies.
LB_REQUEST_LOG: Any = {"enable": True, "sample_rate": 1.0}  # both backend services' LogConfigArgsDict

# Compute Engine limit: connection draining at most 3600 s (backend service connection_draining_timeout_sec).
MAX_DRAINING_S = 3600


@dataclass(frozen=True)
class Probe:
    """How often a health check probes, how long it waits, and how many answers in a row change a server's state."""

    interval_s: int
    timeout_s: int
    healthy_after: int
    unhealthy_after: int


# The load balancer's health check decides where requests go: quick, a server leaves after 3 failed probes (30 s).
LB_PROBE = Probe(interval_s=10, timeout_s=5, healthy_after=2, unhealthy_after=3)
# Autohealing recreates a server, and its model load takes minutes: a check of its own, more patient, as Google
# recommends ("use separate health checks for load balancing and for autohealing"): 4 failures 30 s apart.
AUTOHEALING_PROBE = Probe(interval_s=30, timeout_s=10, healthy_after=1, unhealthy_after=4)

# Cloud Armor: a SRC_IPS_V1 match takes at most 10 ranges (pulumi_gcp SecurityPolicyRuleMatchConfig
# src_ip_ranges); the default rule has the lowest priority and matches "*".
ARMOR_RANGES_PER_RULE = 10
ARMOR_ALLOW_PRIORITY = 1000
ARMOR_DEFAULT_PRIORITY = 2147483647

HTTPS_REDIRECT: gcp.compute.URLMapDefaultUrlRedirectArgsDict = {
    "https_redirect": True, "strip_query": False, "redirect_response_code": "MOVED_PERMANENTLY_DEFAULT"}
ARMOR_DESCRIPTION = "inferstack: the allowed callers only"


#### The load balancer ####


@dataclass(frozen=True)
class FrontEnd:
    """What a load balancer gives its fleet: the address the API domain points at, and the backend services the
    autoscalers count requests of."""

    address: StrOutput
    """Where the API domain points: the load balancer's IP address."""
    backend: pulumi.Resource
    """The backend service (the autoscaler's utilization is its requests)."""
    canary_backend: pulumi.Resource | None = None
    """The canary group's backend service, when the plan has a canary."""


@dataclass(frozen=True)
class CanaryGroup:
    """A canary group (`FleetRequest.canary`): its request (its plan) and its managed instance group."""

    request: FleetRequest
    group: gcp.compute.RegionInstanceGroupManager


def _routing(backend: pulumi.Resource, canary_backend: pulumi.Resource | None,
             request: FleetRequest) -> dict[str, Any]:
    """The URL map's default: the backend service; with a canary, weighted backend services (both Application Load
    Balancers take them in their URL map's defaultRouteAction; "If defaultRouteAction specifies any
    weightedBackendServices, defaultService must not be set", pulumi_gcp URLMap and RegionUrlMap docstrings)."""
    if request.canary is None or canary_backend is None:
        return {"default_service": backend.id}  # type: ignore[attr-defined]
    return {"default_route_action": {"weighted_backend_services": [
        {"backend_service": backend.id, "weight": request.canary.main_weight},  # type: ignore[attr-defined]
        {"backend_service": canary_backend.id, "weight": request.canary.weight}]}}  # type: ignore[attr-defined]


def external_load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                           group: gcp.compute.RegionInstanceGroupManager, placement: Placement,
                           canary: CanaryGroup | None = None) -> FrontEnd:
    """A global external Application Load Balancer (EXTERNAL_MANAGED): HTTPS on 443 with a Google-managed
    certificate, HTTP on 80 only redirecting; the same pattern as the static assets' CDN, separate resources."""
    opts, plan, labels = child_options(parent), request.plan, gcp_labels(request.tags)
    health = health_check(gcp.compute.HealthCheck, f"{name}-lb-health", plan, LB_PROBE, opts)
    sources = armor_sources(request)
    armor = gcp.compute.SecurityPolicy(
        f"{name}-armor", name=gcp_name(name, "armor"), type="CLOUD_ARMOR", description=ARMOR_DESCRIPTION,
        rules=[gcp.compute.SecurityPolicyRuleArgs(
            action=rule.action, priority=rule.priority, description=rule.description,
            match=gcp.compute.SecurityPolicyRuleMatchArgs(versioned_expr="SRC_IPS_V1", config=(
                gcp.compute.SecurityPolicyRuleMatchConfigArgs(src_ip_ranges=rule.sources))))
            for rule in armor_rules(sources)], opts=opts) if sources is not None else None
    backend = _backend_service(gcp.compute.BackendService, name, request, group, "EXTERNAL_MANAGED", health, armor,
                               opts)
    canary_backend = _backend_service(gcp.compute.BackendService, f"{name}-canary", canary.request,
                                      canary.group, "EXTERNAL_MANAGED", health, armor, opts) if canary else None
    # The endpoint's address (its domain's DNS points at it) and its forwarding rules are protected with the group.
    kept = fleet_options(parent, request.protected)
    address = gcp.compute.GlobalAddress(f"{name}-lb-address", name=gcp_name(name, "lb-address"), ip_version="IPV4",
                                        labels=labels, opts=kept)
    certificate = gcp.compute.ManagedSslCertificate(
        f"{name}-api-certificate", name=gcp_name(name, "api-certificate"),
        managed={"domains": [request.api_domain]}, opts=opts)
    tls = gcp.compute.SSLPolicy(f"{name}-api-tls", name=gcp_name(name, "api-tls"), profile="MODERN",
                                min_tls_version="TLS_1_2", opts=opts)
    urls = gcp.compute.URLMap(f"{name}-api-urls", name=gcp_name(name, "api-urls"),
                              **_routing(backend, canary_backend, request), opts=opts)
    https = gcp.compute.TargetHttpsProxy(
        f"{name}-api-https", name=gcp_name(name, "api-https"), url_map=urls.id, ssl_certificates=[certificate.id],
        ssl_policy=tls.id, opts=opts)
    redirect = gcp.compute.URLMap(f"{name}-api-redirect", name=gcp_name(name, "api-redirect"),
                                  default_url_redirect=HTTPS_REDIRECT, opts=opts)
    http = gcp.compute.TargetHttpProxy(f"{name}-api-http", name=gcp_name(name, "api-http"), url_map=redirect.id,
                                       opts=opts)
    for port, proxy in (("443", https), ("80", http)):
        gcp.compute.GlobalForwardingRule(
            f"{name}-api-{port}", name=gcp_name(name, f"api-{port}"), target=proxy.id, ip_address=address.id,
            port_range=port, ip_protocol="TCP", load_balancing_scheme="EXTERNAL_MANAGED", labels=labels, opts=kept)
    # The certificate is issued once the domain's A record points at the address: say which one.
    address.address.apply(lambda ip: pulumi.log.info(
        f"{name}: point the DNS A record of {request.api_domain} at {ip}; the Google-managed certificate is issued "
        f"after that (up to an hour); https://{request.api_domain} serves once it is active", resource=parent))
    return FrontEnd(address=address.address, backend=backend, canary_backend=canary_backend)


def internal_load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                           group: gcp.compute.RegionInstanceGroupManager, placement: Placement,
                           canary: CanaryGroup | None = None) -> FrontEnd:
    """A regional internal Application Load Balancer (INTERNAL_MANAGED) on an address of the load balancer's
    subnetwork: HTTPS on 443 with a Certificate Manager certificate that Google issues once a DNS authorization
    record exists (a private address gives Google nothing to reach), HTTP on 80 only redirecting."""
    opts, plan, labels, region = child_options(parent), request.plan, gcp_labels(request.tags), placement.region
    health = health_check(gcp.compute.RegionHealthCheck, f"{name}-lb-health", plan, LB_PROBE, opts)
    # Private callers only (an internal load balancer has no public CIDR to admit): never the whole internet.
    armor = gcp.compute.RegionSecurityPolicy(
        f"{name}-armor", name=gcp_name(name, "armor"), type="CLOUD_ARMOR", description=ARMOR_DESCRIPTION,
        rules=[gcp.compute.RegionSecurityPolicyRuleArgs(
            action=rule.action, priority=rule.priority, description=rule.description,
            match=gcp.compute.RegionSecurityPolicyRuleMatchArgs(versioned_expr="SRC_IPS_V1", config=(
                gcp.compute.RegionSecurityPolicyRuleMatchConfigArgs(src_ip_ranges=rule.sources))))
            for rule in armor_rules(armor_sources(request) or [request.network_cidr])], opts=opts)
    backend = _backend_service(gcp.compute.RegionBackendService, name, request, group, "INTERNAL_MANAGED", health,
                               armor, opts)
    canary_backend = _backend_service(gcp.compute.RegionBackendService, f"{name}-canary", canary.request,
                                      canary.group, "INTERNAL_MANAGED", health, armor, opts) if canary else None
    # The forwarding rules need the network's proxy-only subnetwork (one per network and region): say so clearly.
    subnetwork = pulumi.Output.all(request.load_balancer_subnet_ids[0], proxy_only_ranges(parent, request.network_id),
                                   region).apply(lambda values: _with_proxy_only(*values))
    # One address for both rules, as Google's HTTP-to-HTTPS redirect guide for regional internal Application Load
    # Balancers reserves it: purpose SHARED_LOADBALANCER_VIP, in the load balancer's subnetwork. (verify) pulumi_gcp's
    # Address docstring lists `subnetwork` for the GCE_ENDPOINT and DNS_RESOLVER purposes only.
    kept = fleet_options(parent, request.protected)  # the address and forwarding rules, as the external one's
    address = gcp.compute.Address(
        f"{name}-lb-address", name=gcp_name(name, "lb-address"), address_type="INTERNAL",
        purpose="SHARED_LOADBALANCER_VIP", subnetwork=subnetwork, labels=labels, opts=kept)
    authorization = gcp.certificatemanager.DnsAuthorization(
        f"{name}-api-dns-auth", name=gcp_name(name, "api-dns-auth"), domain=request.api_domain, location=region,
        type="PER_PROJECT_RECORD", labels=labels, opts=opts)
    certificate = gcp.certificatemanager.Certificate(
        f"{name}-api-certificate", name=gcp_name(name, "api-certificate"), location=region, labels=labels,
        managed={"domains": [request.api_domain], "dns_authorizations": [authorization.id]}, opts=opts)
    tls = gcp.compute.RegionSslPolicy(f"{name}-api-tls", name=gcp_name(name, "api-tls"), profile="MODERN",
                                      min_tls_version="TLS_1_2", opts=opts)
    urls = gcp.compute.RegionUrlMap(f"{name}-api-urls", name=gcp_name(name, "api-urls"),
                                    **_routing(backend, canary_backend, request), opts=opts)
    https = gcp.compute.RegionTargetHttpsProxy(
        f"{name}-api-https", name=gcp_name(name, "api-https"), url_map=urls.id,
        certificate_manager_certificates=[certificate.id], ssl_policy=tls.id, opts=opts)
    redirect = gcp.compute.RegionUrlMap(f"{name}-api-redirect", name=gcp_name(name, "api-redirect"),
                                        default_url_redirect=HTTPS_REDIRECT, opts=opts)
    http = gcp.compute.RegionTargetHttpProxy(f"{name}-api-http", name=gcp_name(name, "api-http"),
                                             url_map=redirect.id, opts=opts)
    for port, proxy in (("443", https), ("80", http)):
        gcp.compute.ForwardingRule(
            f"{name}-api-{port}", name=gcp_name(name, f"api-{port}"), target=proxy.id, ip_address=address.id,
            port_range=port, ip_protocol="TCP", load_balancing_scheme="INTERNAL_MANAGED", network=request.network_id,
            subnetwork=subnetwork, labels=labels, opts=kept)
    pulumi.Output.all(address.address, authorization.dns_resource_records).apply(lambda values: pulumi.log.info(
        f"{name}: point the DNS A record of {request.api_domain} (a private zone your callers resolve) at "
        f"{values[0]}, and add {_dns_records(values[1])} for the certificate: Google issues it once that record "
        "resolves", resource=parent))
    return FrontEnd(address=address.address, backend=backend, canary_backend=canary_backend)


def _with_proxy_only(subnetwork: str, proxy_ranges: Sequence[str], region: str) -> str:
    if not proxy_ranges:
        raise input_error("network_id", f"has no proxy-only subnetwork in {region}, which an internal Application "
                          "Load Balancer needs", fix=f"create one: gcloud compute networks subnets create proxy-only "
                          f"--purpose={PROXY_ONLY_PURPOSE} --role=ACTIVE --region={region} --network=<network> "
                          "--range=<a free /23>, or let inferstack create the network")
    return subnetwork


def _dns_records(records: Sequence[Any]) -> str:
    shown = [f"{result_field(r, 'type')} {result_field(r, 'name')} -> {result_field(r, 'data')}"
             for r in records or []]
    return ", ".join(shown) or "the DNS authorization record (gcloud certificate-manager dns-authorizations describe)"


#### Health checks and backend services ####

HealthCheckType = TypeVar("HealthCheckType", gcp.compute.HealthCheck, gcp.compute.RegionHealthCheck)


def health_check(kind: type[HealthCheckType], resource_name: str, plan: DeploymentPlan, probe: Probe,
                 opts: pulumi.ResourceOptions) -> HealthCheckType:
    """An HTTP check of the readiness path on the serving port (the gateway answers it without an API key)."""
    return kind(resource_name, name=gcp_name(resource_name), description=f"inferstack {resource_name}",
                http_health_check={"port": plan.serving.port, "request_path": plan.serving.health_path},
                check_interval_sec=probe.interval_s, timeout_sec=probe.timeout_s,
                healthy_threshold=probe.healthy_after, unhealthy_threshold=probe.unhealthy_after, opts=opts)


BackendServiceType = TypeVar("BackendServiceType", gcp.compute.BackendService, gcp.compute.RegionBackendService)


def _backend_service(kind: type[BackendServiceType], role: str, request: FleetRequest,
                     group: gcp.compute.RegionInstanceGroupManager, scheme: str, health: pulumi.CustomResource,
                     armor: pulumi.CustomResource | None, opts: pulumi.ResourceOptions) -> BackendServiceType:
    """The load balancer's backend service (global or regional) for one group, `role` the main one or the canary:
    its own plan's rate and timeout, the load balancer's health check and Cloud Armor policy, every request logged."""
    plan = request.plan
    return kind(
        f"{role}-backend", name=gcp_name(role, "backend"), load_balancing_scheme=scheme,
        health_checks=health.id, security_policy=armor.id if armor else None,
        backends=[{"group": group.instance_group, "balancing_mode": "RATE", "capacity_scaler": 1.0,
                   "max_rate_per_instance": _max_rate(request)}],
        protocol="HTTP", port_name=SERVING_PORT_NAME, timeout_sec=plan.request_timeout_s,
        connection_draining_timeout_sec=_draining_s(plan), description=_backend_description(role, plan),
        log_config=LB_REQUEST_LOG, opts=opts)


def _max_rate(request: FleetRequest) -> float:
    """A server's backend capacity (balancing mode RATE): the plan's target / LB_UTILIZATION_TARGET requests per
    second, which the autoscaler's utilization target turns back into the plan's target."""
    assert request.plan.fleet is not None
    return max_rate_per_instance(request.plan.fleet.target_requests_per_s)


def max_rate_per_instance(target_requests_per_s: float) -> float:
    return round(target_requests_per_s / LB_UTILIZATION_TARGET, 4)


def _draining_s(plan: DeploymentPlan) -> int:
    """A server that leaves the group (scale-in, rolling update) finishes what it streams: the request timeout."""
    return min(plan.request_timeout_s, MAX_DRAINING_S)


def _backend_description(name: str, plan: DeploymentPlan) -> str:
    # The backend service's timeout_sec is the whole response's, a streamed answer included (default 30 s).
    return f"inferstack {name}: {plan.model.name} on port {plan.serving.port}, {plan.request_timeout_s} s per request"


#### Cloud Armor ####


@dataclass(frozen=True)
class ArmorRule:
    action: str
    priority: int
    sources: Sequence[pulumi.Input[str]]
    description: str


def armor_sources(request: FleetRequest) -> list[pulumi.Input[str]] | None:
    """Who may call the endpoint, for Cloud Armor: the allowed CIDRs, or the network only; None for the whole
    internet (no policy)."""
    if any(ipaddress.ip_network(cidr).prefixlen == 0 for cidr in request.allowed_cidrs):
        return None
    return list(request.allowed_cidrs) or [request.network_cidr]


def armor_rules(sources: Sequence[pulumi.Input[str]]) -> list[ArmorRule]:
    """Allow each group of ten sources, deny (403) everything else: the default rule Cloud Armor requires."""
    chunks = [sources[i:i + ARMOR_RANGES_PER_RULE] for i in range(0, len(sources), ARMOR_RANGES_PER_RULE)]
    allow = [ArmorRule("allow", ARMOR_ALLOW_PRIORITY + index, list(chunk), "allowed callers")
             for index, chunk in enumerate(chunks)]
    return [*allow, ArmorRule("deny(403)", ARMOR_DEFAULT_PRIORITY, ["*"], "everyone else")]


"""Huawei Cloud load balancing and canary: a fleet's dedicated ELB (HTTPS, HTTP redirected, callers limited by an IP
address group, health-checked pools, access logs in LTS), and a canary's pool with its weighted forwarding policy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_huaweicloud as hw

from inferstack.clouds import CLOUD_FACTS
from inferstack.components.contract import CanaryRequest, FleetRequest, StrOutput
from inferstack.components.huawei.lookups import ELB_FLAVORS_LOOKUP, SUBNET_LOOKUP, lookup_field
from inferstack.components.huawei.network import eip
from inferstack.components.naming import child_options, server_options
from inferstack.components.shared import ACCESS_LOG_DAYS
from inferstack.errors import input_error
from inferstack.names import unique_name
from inferstack.plan import DeploymentPlan

# Dedicated ELB listeners (dedicatedelb/listener.py): request_timeout and response_timeout take 1..300 s,
# idle_timeout 0..4000 s (clouds.py load_balancer_timeout_s, which the planner caps answers to).
ELB_MAX_RESPONSE_TIMEOUT_S = CLOUD_FACTS["huawei"].load_balancer_timeout_s
# TLS 1.2 and 1.3 with forward-secret cipher suites only: a tls_ciphers_policy value of the listener
# (dedicatedelb/listener.py; ELB user guide, "Configuring TLS Security Policies").
TLS_POLICY = "tls-1-2-fs-with-1-3"
HTTPS_PORT, HTTP_PORT = 443, 80
ANYWHERE = ("0.0.0.0/0", "::/0")
# Health check every 10 s with 5 s to answer; 2 passes take a server in, 3 failures out (dedicatedelb/monitor.py:
# interval and timeout 1..50, max_retries and max_retries_down 1..10).
HEALTH_INTERVAL_S, HEALTH_TIMEOUT_S, HEALTH_RISE, HEALTH_FALL = 10, 5, 2, 3
LTS_NAME_MAX_LENGTH = 64


#### The load balancer ####


@dataclass(frozen=True)
class LoadBalancer:
    address: StrOutput
    """Where the API domain points: the elastic IP, or the private address of an internal load balancer."""
    pool_id: StrOutput
    """The HTTPS listener's default pool: the fleet's servers, for every request no forwarding policy takes."""
    weighted_pool_id: StrOutput
    """The fleet's servers again, in a pool of the load balancer that no listener has as its default: the one a
    canary's weighted policy may name (`weighted_policy`)."""
    health_checks: tuple[hw.dedicatedelb.Monitor, ...]
    """Each pool's health check."""
    load_balancer_id: StrOutput
    """The load balancer's id (its Cloud Eye metrics' dimension)."""
    https_listener_id: StrOutput


def load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                  zones: pulumi.Output[list[str]]) -> LoadBalancer:
    """A dedicated ELB: HTTPS on 443 to the servers' port, HTTP on 80 redirected to HTTPS, a health check."""
    plan, opts = request.plan, child_options(parent)
    assert plan.fleet is not None
    protect = {"protect": True} if request.protected else {}
    # The load balancer takes the IPv4 (Neutron) subnet id, not the VPC subnet id that ECS and AS take.
    ipv4_subnet_id = lookup_field(parent, SUBNET_LOOKUP, {"id": request.load_balancer_subnet_ids[0]}, "ipv4SubnetId")
    # Both groups' ceilings at saturation when a canary shares the load balancer.
    peak_rps = sum(p.fleet.max_replicas * p.performance.capacity_requests_per_s / p.replicas
                   for p in (plan, *([request.canary.plan] if request.canary else [])) if p.fleet is not None)
    flavors = lookup_field(parent, ELB_FLAVORS_LOOKUP, {"type": "L7"}, "flavors", empty=[])
    address_eip = eip(parent, f"{name}-lb-eip", request.tags, **protect) if request.internet_facing else None
    balancer = hw.dedicatedelb.Loadbalancer(
        f"{name}-lb", availability_zones=zones, vpc_id=request.network_id,
        ipv4_subnet_id=ipv4_subnet_id.apply(str),
        l7_flavor_id=flavors.apply(lambda found: choose_l7_flavor(found, peak_rps)),
        ipv4_eip_id=address_eip.id if address_eip is not None else None, deletion_protection_enable=request.protected,
        description=f"inferstack {name}: HTTPS endpoint of the fleet", tags=request.tags,
        opts=server_options(parent, request.protected))
    acl = _caller_acl(parent, name, request)
    acl_id, acl_policy = (acl.id, "white") if acl is not None else (None, None)  # white: only the group's members
    timeout_s = plan.request_timeout_s  # a streamed answer holds its request open this long
    https = hw.dedicatedelb.Listener(
        f"{name}-https", loadbalancer_id=balancer.id, protocol="HTTPS", protocol_port=HTTPS_PORT,
        server_certificate=request.api_certificate, tls_ciphers_policy=TLS_POLICY,
        idle_timeout=timeout_s, request_timeout=timeout_s, response_timeout=timeout_s,
        # No retry on another server after a timeout or error: a generation is not replayed (the SDK's docstring
        # says "health check retries"; the ELB API's enable_member_retry is the retry of a request).
        enable_member_retry=False, ip_group=acl_id, access_policy=acl_policy,
        # A canary's weighted forwarding policy (weighted_policy) is advanced forwarding.
        advanced_forwarding_enabled=True if request.canary is not None else None,
        description=f"inferstack {name}: the API over HTTPS", tags=request.tags, opts=opts)
    http = hw.dedicatedelb.Listener(
        f"{name}-http", loadbalancer_id=balancer.id, protocol="HTTP", protocol_port=HTTP_PORT, ip_group=acl_id,
        access_policy=acl_policy, description=f"inferstack {name}: redirects to HTTPS", tags=request.tags, opts=opts)
    hw.dedicatedelb.L7policy(f"{name}-http-redirect", listener_id=http.id, action="REDIRECT_TO_LISTENER",
                             redirect_listener_id=https.id, description="HTTP to HTTPS", opts=opts)
    # Least connections: a streamed answer holds its connection for its whole generation.
    pool = hw.dedicatedelb.Pool(f"{name}-pool", listener_id=https.id, protocol="HTTP", lb_method="LEAST_CONNECTIONS",
                                description=f"inferstack {name}: the fleet's servers", opts=opts)
    # The group is always a member of this second pool too, so that a canary added later finds the fleet's running
    # servers in it (whether AS adds a group's running servers to a pool added to it later is not documented).
    weighted = hw.dedicatedelb.Pool(
        f"{name}-weighted-pool", loadbalancer_id=balancer.id, protocol="HTTP", lb_method="LEAST_CONNECTIONS",
        description=f"inferstack {name}: the fleet's servers, for a canary's weighted forwarding", opts=opts)
    health_checks = (_monitor(f"{name}-health", pool.id, plan, opts),
                     _monitor(f"{name}-weighted-health", weighted.id, plan, opts))
    address = address_eip.address if address_eip is not None else balancer.ipv4_address
    return LoadBalancer(address=address, pool_id=pool.id, weighted_pool_id=weighted.id, health_checks=health_checks,
                        load_balancer_id=balancer.id,
                        https_listener_id=https.id)


def load_balancer_logs(parent: pulumi.Resource, name: str, request: FleetRequest,
                       load_balancer_id: pulumi.Input[str]) -> hw.dedicatedelb.Logtank:
    """The load balancer's access logs in an LTS log group and stream of their own (model files, uploads and the
    buckets' access logs live in OBS), kept ACCESS_LOG_DAYS (lts.Group ttl_in_days: 1 to 365); a log tank ships them
    (dedicatedelb.Logtank; ELB User Guide, "Access Logs"). LTS data is read through IAM only: nothing makes it
    public. lts.Group and lts.Stream in 0.0.12 take no encryption setting, so none is set here."""
    opts = child_options(parent)
    group = hw.lts.Group(f"{name}-lb-logs", group_name=_lts_name(name, "lb-logs"), ttl_in_days=ACCESS_LOG_DAYS,
                         tags=request.tags, opts=opts)
    stream = hw.lts.Stream(f"{name}-lb-logs-stream", group_id=group.id, stream_name=_lts_name(name, "lb-access"),
                           tags=request.tags, opts=opts)
    return hw.dedicatedelb.Logtank(f"{name}-lb-logtank", loadbalancer_id=load_balancer_id, log_group_id=group.id,
                                   log_topic_id=stream.id, opts=opts)


def choose_l7_flavor(flavors: Sequence[Mapping[str, Any]], peak_rps: float) -> str:
    """The smallest Layer-7 flavor on sale that carries the fleet's peak (its ceiling at saturation)."""
    fitting = [flavor for flavor in flavors
               if not flavor.get("flavorSoldOut") and float(flavor.get("qps") or 0) >= peak_rps]
    if not fitting:
        raise input_error("plan.fleet", f"no dedicated ELB Layer-7 flavor on sale carries {peak_rps:.3g} requests/s",
                          value=sorted(str(flavor.get("name")) for flavor in flavors),
                          fix="lower scaling.max_replicas, or plan for another region")
    return str(min(fitting, key=lambda flavor: (float(flavor["qps"]), str(flavor["id"])))["id"])


def _lts_name(name: str, role: str) -> str:
    """An LTS log group's or stream's name, unique to this project, stack and component (LTS API reference,
    CreateLogGroup and CreateLogStream: 1 to 64 letters, digits, underscores, hyphens and periods)."""
    return unique_name([pulumi.get_project(), pulumi.get_stack(), name, role], max_length=LTS_NAME_MAX_LENGTH)


def _monitor(resource_name: str, pool_id: StrOutput, plan: DeploymentPlan,
             opts: pulumi.ResourceOptions) -> hw.dedicatedelb.Monitor:
    """The pool's health check on the plan's readiness path and port."""
    return hw.dedicatedelb.Monitor(
        resource_name, pool_id=pool_id, protocol="HTTP", port=plan.serving.port, url_path=plan.serving.health_path,
        http_method="GET", status_code="200", interval=HEALTH_INTERVAL_S, timeout=HEALTH_TIMEOUT_S,
        max_retries=HEALTH_RISE, max_retries_down=HEALTH_FALL, opts=opts)


def _caller_acl(parent: pulumi.Resource, name: str, request: FleetRequest) -> hw.dedicatedelb.Ipgroup | None:
    """The networks that may call the endpoint, as an ELB IP address group both listeners admit alone; None when
    the whole internet may (an ACL would admit everyone)."""
    if any(cidr in ANYWHERE for cidr in request.allowed_cidrs):
        return None
    sources: list[tuple[str, pulumi.Input[str]]] = [(cidr, cidr) for cidr in request.allowed_cidrs] or [
        ("the VPC", request.network_cidr)]
    return hw.dedicatedelb.Ipgroup(
        f"{name}-callers", ip_lists=[{"ip": cidr, "description": f"allowed: {label}"} for label, cidr in sources],
        description=f"inferstack {name}: networks that may call the API", opts=child_options(parent))


#### The canary ####


@dataclass(frozen=True)
class CanaryPool:
    pool_id: StrOutput
    health_check: hw.dedicatedelb.Monitor


def canary_pool(parent: pulumi.Resource, name: str, canary: FleetRequest, balancer: LoadBalancer) -> CanaryPool:
    """The canary group's pool on the same load balancer, health-checked as the main pool is."""
    plan, opts = canary.plan, child_options(parent)
    pool = hw.dedicatedelb.Pool(f"{name}-canary-pool", loadbalancer_id=balancer.load_balancer_id, protocol="HTTP",
                                lb_method="LEAST_CONNECTIONS", description=f"inferstack {name}: the canary's servers",
                                opts=opts)
    health_check = _monitor(f"{name}-canary-health", pool.id, plan, opts)
    return CanaryPool(pool_id=pool.id, health_check=health_check)


def weighted_policy(parent: pulumi.Resource, name: str, balancer: LoadBalancer, canary: CanaryPool,
                    weights: CanaryRequest) -> None:
    """Every path of the HTTPS listener to the fleet's and the canary's pool by weight: REDIRECT_TO_POOL with
    redirect_pools_configs (pool_id, weight), an advanced-forwarding policy (pulumi_huaweicloud 0.0.12
    dedicatedelb.L7policy and L7policyRedirectPoolsConfigArgs; ELB API v3 CreateL7Policy, redirect_pools_config: "up to
    5 pools", weight "0-100", huaweicloud-sdk-go-v3 elb/v3 model CreateL7PolicyOption and CreateRedirectPoolsConfig,
    read 2026-12-07).

    Neither pool is a listener's default pool: the API refuses a listener's default pool as a policy's redirect pool
    ("Cannot be the default backend server group of the listener", dedicatedelb.L7policy redirect_pool_id; "the pool
    may not be any listener's default_pool", UpdateL7PolicyOption redirect_pool_id) and documents no exception for the
    weighted form, so the policy names the fleet's second pool (`LoadBalancer.weighted_pool_id`)."""
    opts = child_options(parent)
    policy = hw.dedicatedelb.L7policy(
        f"{name}-canary-split", listener_id=balancer.https_listener_id, action="REDIRECT_TO_POOL", priority=1,
        redirect_pools_configs=[{"pool_id": balancer.weighted_pool_id, "weight": weights.main_weight},
                                {"pool_id": canary.pool_id, "weight": weights.weight}],
        description=f"inferstack {name}: {weights.weight} % of the requests to the canary", opts=opts)
    hw.dedicatedelb.L7rule(f"{name}-canary-every-path", l7policy_id=policy.id, type="PATH", compare_type="STARTS_WITH",
                           value="/", opts=opts)

"""A fleet's HTTPS endpoint on ALB: the server groups and their health checks, the load balancer and its access logs,
the HTTPS and HTTP listeners with the callers' whitelist, and a canary's weighted rule.

What ALB refuses that is known before anything is created (its longest timeout, its two zones) is checked then
(`AlibabaBackend.plan_problems`, `fleet_problems`, __init__.py); the zones of brought vSwitches are looked up here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_alicloud as alicloud

from inferstack.clouds import CLOUD_FACTS
from inferstack.components.alibaba.names import bucket_name
from inferstack.components.capabilities import CertificateRule
from inferstack.components.contract import CanaryRequest, FleetRequest
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options, server_options
from inferstack.components.shared import ACCESS_LOG_DAYS
from inferstack.errors import InputError, Problem, input_error

# "You must specify at least two zones" (pulumi_alicloud alb.LoadBalancer zone_mappings): a fleet's network has two
# zones even when the plan asks one, and its load balancer needs vSwitches in two zones.
ALB_MIN_ZONES = 2
# ALB listener idle_timeout and request_timeout: "0~600 Seconds" (alb.Listener docstrings; plan.py
# clouds.py load_balancer_timeout_s, which the planner caps answers to).
ALB_MAX_TIMEOUT_S = CLOUD_FACTS["alibaba"].load_balancer_timeout_s
# tls_cipher_policy_1_2_strict_with_1_3: TLS 1.2 and 1.3 only, ECDHE suites only (ALB's system TLS policies:
# tls_cipher_policy_1_0, _1_1, _1_2, _1_2_strict, _1_2_strict_with_1_3; Alibaba's "TLS security policies" page).
ALB_TLS_POLICY = "tls_cipher_policy_1_2_strict_with_1_3"
LISTENER_PORTS: Mapping[str, int] = {"https": 443, "http": 80}
ALB_HTTPS_REDIRECT_CODE = "301"  # alb.Rule redirect_config http_code: 301, 302, 303, 307 or 308
# ALB health checks (alb.ServerGroup health_check_config ranges: interval 1-50 s, timeout 1-300 s, thresholds
# 2-10): a server that stops answering leaves the load balancer after 3 failed checks, about 30 s.
HEALTH_CHECK_INTERVAL_S = 10
HEALTH_CHECK_TIMEOUT_S = 5
HEALTHY_THRESHOLD = 2
UNHEALTHY_THRESHOLD = 3
# A removed server finishes its streamed answers: connection draining for the request timeout, at most 900 s
# (alb.ServerGroup connection_drain_timeout: 0-900).
MAX_CONNECTION_DRAIN_S = 900
# A CAS certificate as ALB's listener takes it: the certificate id, a dash and the CAS region, as the provider's
# acceptance tests build it (join("", [alicloud_ssl_certificates_service_certificate.default.id, "-<region>"])).
CAS_CERTIFICATE = CertificateRule(
    kind="a Certificate Management Service (CAS) certificate as ALB takes it: the certificate id, a dash and the "
         "CAS region (ap-southeast-1 on the international site, cn-hangzhou in mainland China)",
    pattern=r"[0-9]{1,20}-[a-z]{2,}(-[a-z0-9]+){1,3}", example="12345678-ap-southeast-1")
# The logstore of the load balancer's access logs, in a project of its own (`load_balancer_logs`).
LOAD_BALANCER_LOGSTORE = "alb-access-log"


def too_few_zones(field: str, value: object) -> Problem:
    """ALB's refusal of vSwitches that are not in ALB_MIN_ZONES distinct zones: found from their number before
    anything is created (`AlibabaBackend.fleet_problems`), from their zones once looked up (`load_balancer`)."""
    return Problem(field, f"ALB takes one vSwitch in each of {ALB_MIN_ZONES} zones or more", value=value,
                   fix="give one vSwitch per zone, in two zones at least (load_balancer_subnet_ids, or "
                   "subnet_ids for an internal load balancer)")


def server_group(parent: pulumi.Resource, name: str, request: FleetRequest) -> alicloud.alb.ServerGroup:
    """The fleet's backends (ESS adds and removes them), health-checked on the plan's readiness path and port."""
    plan = request.plan
    return alicloud.alb.ServerGroup(
        f"{name}-servers", server_group_name=f"{name}-servers", vpc_id=request.network_id,
        server_group_type="Instance", protocol="HTTP",
        # Least connections: a streamed answer holds its connection for the whole generation.
        scheduler="Wlc",
        health_check_config={
            "health_check_enabled": True, "health_check_protocol": "HTTP", "health_check_method": "GET",
            "health_check_path": plan.serving.health_path, "health_check_connect_port": plan.serving.port,
            "health_check_codes": ["http_2xx"], "health_check_http_version": "HTTP1.1",
            "health_check_interval": HEALTH_CHECK_INTERVAL_S, "health_check_timeout": HEALTH_CHECK_TIMEOUT_S,
            "healthy_threshold": HEALTHY_THRESHOLD, "unhealthy_threshold": UNHEALTHY_THRESHOLD},
        connection_drain_config={"connection_drain_enabled": True,
                                 "connection_drain_timeout": min(plan.request_timeout_s, MAX_CONNECTION_DRAIN_S)},
        tags=request.tags, opts=child_options(parent))


def load_balancer_logs(parent: pulumi.Resource, name: str,
                       request: FleetRequest) -> alicloud.alb.LoadBalancerAccessLogConfigArgsDict:
    """An SLS project and logstore of their own for the load balancer's access logs (model files, uploads and the
    buckets' access logs live in OSS), kept ACCESS_LOG_DAYS and encrypted at rest (encrypt_conf, SLS's default AES
    key). A project without a `policy` is private: only RAM identities of the account read it (SLS, "Project
    policy"). ALB ships its access log to the logstore (alb.LoadBalancer access_log_config; ALB, "Access logs": the
    service-linked role AliyunServiceRoleForAlbLogDelivery is created on first use)."""
    opts = child_options(parent)
    project = alicloud.log.Project(
        f"{name}-lb-logs", project_name=bucket_name(parent, name, "lb-logs"),
        description=f"inferstack {name}: the load balancer's access logs", tags=request.tags, opts=opts)
    store = alicloud.log.Store(
        f"{name}-lb-logs-store", project_name=project.project_name, logstore_name=LOAD_BALANCER_LOGSTORE,
        retention_period=ACCESS_LOG_DAYS, encrypt_conf={"enable": True, "encrypt_type": "default"}, opts=opts)
    return {"log_project": project.project_name, "log_store": store.logstore_name}


def load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                  logs: alicloud.alb.LoadBalancerAccessLogConfigArgsDict) -> alicloud.alb.LoadBalancer:
    """Internet-facing when an allowed network is public, else internal; one vSwitch per zone, two zones at least;
    its access log to `logs` (`load_balancer_logs`)."""
    ids = pulumi.Output.all(*request.load_balancer_subnet_ids)
    found = alicloud.vpc.get_switches_output(ids=ids, opts=invoke_options(parent))
    zones = answered(found.vswitches, "alicloud:vpc/getSwitches:getSwitches vswitches").apply(
        lambda vswitches: {str(v.id): str(v.zone_id) for v in vswitches})
    zone_mappings = pulumi.Output.all(ids, zones).apply(lambda facts: _zone_mappings(name, *facts))
    balancer = alicloud.alb.LoadBalancer(
        f"{name}-alb", load_balancer_name=f"{name}-alb", vpc_id=request.network_id,
        address_type="Internet" if request.internet_facing else "Intranet", address_ip_version="IPv4",
        address_allocated_mode="Dynamic", load_balancer_edition="Standard",
        load_balancer_billing_config={"pay_type": "PayAsYouGo"}, zone_mappings=zone_mappings,
        deletion_protection_enabled=request.protected, tags=request.tags, access_log_config=logs,
        opts=server_options(parent, request.protected))
    if request.load_balancer_firewall_id is not None:
        alicloud.alb.LoadBalancerSecurityGroupAttachment(
            f"{name}-alb-sg", load_balancer_id=balancer.id, security_group_id=request.load_balancer_firewall_id,
            opts=child_options(parent))
    return balancer


def _zone_mappings(name: str, ids: Sequence[str],
                   zones: Mapping[str, str]) -> list[alicloud.alb.LoadBalancerZoneMappingArgsDict]:
    """ALB's zone mappings, in the given order: each vSwitch with its zone (`zones`, by vSwitch id), one vSwitch per
    zone (how many there are was checked before anything was created)."""
    field = f"{name}.load_balancer_subnet_ids"
    unknown = [vswitch_id for vswitch_id in ids if vswitch_id not in zones]
    if unknown:
        raise input_error(field, "names vSwitches this region does not have", value=unknown,
                          fix="give vSwitch ids (vsw-...) of the network, in the provider's region")
    if len({zones[vswitch_id] for vswitch_id in ids}) != len(ids):
        raise InputError([too_few_zones(field, {vswitch_id: zones[vswitch_id] for vswitch_id in ids})])
    return [{"vswitch_id": vswitch_id, "zone_id": zones[vswitch_id]} for vswitch_id in ids]


def listeners(parent: pulumi.Resource, name: str, request: FleetRequest, balancer: alicloud.alb.LoadBalancer,
              servers: alicloud.alb.ServerGroup, certificate: str) -> alicloud.alb.Listener:
    """HTTPS on 443 to the servers; HTTP on 80 only redirects; both limited to the allowed networks by an ACL."""
    opts = child_options(parent)
    timeout_s = request.plan.request_timeout_s
    https = alicloud.alb.Listener(
        f"{name}-https", load_balancer_id=balancer.id, listener_protocol="HTTPS",
        listener_port=LISTENER_PORTS["https"], listener_description=f"{name}: the inference API",
        certificates={"certificate_id": certificate}, security_policy_id=ALB_TLS_POLICY,
        # Streamed answers last a whole generation: the plan's request timeout for both.
        idle_timeout=timeout_s, request_timeout=timeout_s,
        # Compression buffers a response, and each streamed token must reach the caller as it comes.
        gzip_enabled=False,
        default_actions=[{"type": "ForwardGroup",
                          "forward_group_config": {"server_group_tuples": [{"server_group_id": servers.id}]}}],
        tags=request.tags, opts=opts)
    # A listener forwards to a server group by default (its only default action in the provider); the HTTP
    # listener's has no servers, so a request its redirect rule did not catch gets no answer from the servers. Its
    # health check is on like every server group's (the guardrails require it; with no servers it checks nothing).
    nowhere = alicloud.alb.ServerGroup(
        f"{name}-http-nowhere", server_group_name=f"{name}-http-nowhere", vpc_id=request.network_id,
        server_group_type="Instance", protocol="HTTP",
        health_check_config={"health_check_enabled": True, "health_check_protocol": "HTTP",
                             "health_check_path": request.plan.serving.health_path},
        tags=request.tags, opts=opts)
    http = alicloud.alb.Listener(
        f"{name}-http", load_balancer_id=balancer.id, listener_protocol="HTTP",
        listener_port=LISTENER_PORTS["http"], listener_description=f"{name}: redirects to HTTPS",
        default_actions=[{"type": "ForwardGroup",
                          "forward_group_config": {"server_group_tuples": [{"server_group_id": nowhere.id}]}}],
        tags=request.tags, opts=opts)
    alicloud.alb.Rule(
        f"{name}-http-to-https", listener_id=http.id, rule_name=f"{name}-http-to-https", priority=1,
        rule_conditions=[{"type": "Path", "path_config": {"values": ["/*"]}}],
        rule_actions=[{"order": 1, "type": "Redirect", "redirect_config": {
            "protocol": "HTTPS", "port": str(LISTENER_PORTS["https"]), "http_code": ALB_HTTPS_REDIRECT_CODE}}],
        opts=opts)
    _callers_acl(parent, name, request, {"https": https, "http": http})
    return https


def _callers_acl(parent: pulumi.Resource, name: str, request: FleetRequest,
                 by_label: Mapping[str, alicloud.alb.Listener]) -> None:
    """A whitelist of the allowed networks (or the VPC's range) on each listener, unless the whole internet may call.

    "If whitelist access is enabled but no IP addresses are added to the access policy group, the listener forwards
    all requests" (alb.ListenerAclAttachment): the entries exist before a listener takes the list.
    """
    if any(ipaddress.ip_network(cidr).prefixlen == 0 for cidr in request.allowed_cidrs):
        return
    opts = child_options(parent)
    sources: list[pulumi.Input[str]] = list(request.allowed_cidrs) or [request.network_cidr]
    acl = alicloud.alb.Acl(f"{name}-callers", acl_name=f"{name}-callers", tags=request.tags, opts=opts)
    entries = alicloud.alb.AclEntryAttachment(
        f"{name}-callers-entries", acl_id=acl.id,
        entries=[{"entry": cidr, "description": "allowed callers"} for cidr in sources], opts=opts)
    for label, listener in by_label.items():
        alicloud.alb.ListenerAclAttachment(f"{name}-{label}-callers", listener_id=listener.id, acl_id=acl.id,
                                           acl_type="White", opts=child_options(parent, depends_on=[entries]))


#### Canary ####


def weighted_rule(parent: pulumi.Resource, name: str, https: alicloud.alb.Listener, servers: alicloud.alb.ServerGroup,
                  canary_servers: alicloud.alb.ServerGroup, canary: CanaryRequest) -> None:
    """Every path of the HTTPS listener to both server groups by weight. A listener's default action takes no weights
    (alb ListenerDefaultActionForwardGroupConfigServerGroupTupleArgs has a server group id only); a forwarding rule's
    does (RuleRuleActionForwardGroupConfigServerGroupTupleArgs.weight: 0 to 100; 0 "from version 1.264.0" of the
    Terraform provider, which pulumi-alicloud 4.0.0 is past: its docs name resources "Available since v1.295.0")."""
    alicloud.alb.Rule(
        f"{name}-canary-split", listener_id=https.id, rule_name=f"{name}-canary-split", priority=1,
        rule_conditions=[{"type": "Path", "path_config": {"values": ["/*"]}}],
        rule_actions=[{"order": 1, "type": "ForwardGroup", "forward_group_config": {"server_group_tuples": [
            {"server_group_id": servers.id, "weight": canary.main_weight},
            {"server_group_id": canary_servers.id, "weight": canary.weight}]}}],
        opts=child_options(parent))

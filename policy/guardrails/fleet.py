"""Fleets as a stack: the managed groups and the load balancers in front of them, read whole (`managed_groups`,
`load_balancers`), and what must hold of them together: HTTPS front ends with health checks, groups over several
zones, alarms on every group, and a production stack's servers in a protected fleet.

The listeners, target groups and health checks resource by resource are `load_balancers`' rules; who may reach
a fleet is `exposure`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardrails.core import (
    NotApplicable,
    ReportViolation,
    ResourceInput,
    Stack,
    StackResource,
    StackRule,
    boolean,
    discard,
    integer,
    items,
    known_items,
    last_segment,
    linked,
    linked_of,
    referring,
    show,
)
from guardrails.load_balancers import ALI_SYSTEM_POLICY_PREFIX, HEALTH_FIX, aws_redirects_to_https, check_listeners
from guardrails.networks import HTTPS_PORT, REDIRECT_PORT, port_texts
from guardrails.resource_types import (
    ALI_GROUP_ATTACHMENT,
    ALI_INSTANCE,
    ALI_LAUNCH_TEMPLATES,
    ALI_LISTENER,
    ALI_LISTENER_RULE,
    ALI_LOAD_BALANCER,
    ALI_SCALING_CONFIGURATION,
    ALI_SCALING_GROUP,
    ALI_SERVER_GROUP,
    ALI_TLS_POLICY,
    ALI_VSWITCH,
    AWS_AUTOSCALING_GROUP,
    AWS_GROUP_ATTACHMENTS,
    AWS_INSTANCE,
    AWS_LAUNCH_CONFIGURATION,
    AWS_LAUNCH_TEMPLATE,
    AWS_LISTENER_RULES,
    AWS_LISTENERS,
    AWS_LOAD_BALANCERS,
    AWS_SPOT_INSTANCE_REQUEST,
    AWS_SUBNET,
    AWS_TARGET_GROUPS,
    GCP_AUTOSCALERS,
    GCP_BACKEND_SERVICES,
    GCP_FORWARDING_RULES,
    GCP_HEALTH_CHECKS,
    GCP_HTTP_PROXIES,
    GCP_HTTPS_PROXIES,
    GCP_INSTANCE,
    GCP_INSTANCE_TEMPLATES,
    GCP_LEGACY_HEALTH_CHECKS,
    GCP_REGION_GROUP_MANAGER,
    GCP_SSL_POLICIES,
    GCP_URL_MAPS,
    GCP_ZONE_GROUP_MANAGER,
    HW_AS_CONFIGURATION,
    HW_AS_GROUP,
    HW_EIP_ASSOCIATE,
    HW_INSTANCE,
    HW_L7_POLICY,
    HW_LISTENER,
    HW_LOAD_BALANCER,
    HW_MONITOR,
    HW_POOL,
    HW_TLS_POLICY,
)

#### Fleets, as a stack: managed groups and the load balancers in front of them ####


@dataclass
class ManagedGroup:
    """A managed group of servers: its templates, the zones it spreads over, its size."""

    cloud: str
    resource: StackResource
    templates: list[StackResource]
    zones: set[str]
    unread_zones: list[str]
    """What about its placement the pack cannot read (a subnet the stack does not create ...)."""
    min_size: int | None
    max_size: int | None


def _subnet_zones(stack: Stack, group: StackResource, keys: Sequence[str], subnet_type: str,
                  zone_key: str) -> tuple[set[str], list[str]]:
    """Zones of the subnets a group names; a subnet the stack does not create has a zone the pack cannot read."""
    subnets = linked_of(stack, group, keys, subnet_type)
    zones, unread = set(), []
    for subnet in subnets:
        zone = stack.known(subnet.props, zone_key)
        if zone:
            zones.add(str(zone))
        else:
            unread.append(f"the zone of subnet {subnet.name} ({zone_key} unset)")
    listed = known_items(stack, group.props, *keys)
    if len(listed) > len(subnets):
        unread.append(f"{len(listed) - len(subnets)} subnet(s) that this stack does not create ({keys[0]})")
    return zones, unread


def _aws_groups(stack: Stack) -> Iterator[ManagedGroup]:
    for group in stack.of_type(AWS_AUTOSCALING_GROUP):
        templates = linked_of(stack, group, ("launchTemplate", "mixedInstancesPolicy"), AWS_LAUNCH_TEMPLATE)
        templates += linked_of(stack, group, ("launchConfiguration",), AWS_LAUNCH_CONFIGURATION)
        if known_items(stack, group.props, "vpcZoneIdentifiers"):
            zones, unread = _subnet_zones(stack, group, ("vpcZoneIdentifiers",), AWS_SUBNET, "availabilityZone")
        else:
            zones, unread = {str(z) for z in known_items(stack, group.props, "availabilityZones")}, []
        yield ManagedGroup("aws", group, templates, zones, unread, integer(stack.known(group.props, "minSize")),
                           integer(stack.known(group.props, "maxSize")))


def _gcp_groups(stack: Stack) -> Iterator[ManagedGroup]:
    for group in stack.of_type(GCP_REGION_GROUP_MANAGER, GCP_ZONE_GROUP_MANAGER):
        templates = linked_of(stack, group, ("versions", "instanceTemplate"), *GCP_INSTANCE_TEMPLATES)
        unread = []
        if group.resource_type == GCP_ZONE_GROUP_MANAGER:
            zones = {last_segment(stack.known(group.props, "zone"))}
        else:
            zones = {last_segment(z) for z in known_items(stack, group.props, "distributionPolicyZones")}
            if not zones:
                unread.append("distributionPolicyZones is unset, so Google picks the zones: list them")
        size = integer(stack.known(group.props, "targetSize"))
        low, high = size, size
        for autoscaler in referring(stack, group, ("target",), *GCP_AUTOSCALERS):
            policy = stack.known(autoscaler.props, "autoscalingPolicy") or {}
            low, high = integer(policy.get("minReplicas")), integer(policy.get("maxReplicas"))
        yield ManagedGroup("gcp", group, templates, zones, unread, low, high)


def _alibaba_groups(stack: Stack) -> Iterator[ManagedGroup]:
    for group in stack.of_type(ALI_SCALING_GROUP):
        templates = referring(stack, group, ("scalingGroupId",), ALI_SCALING_CONFIGURATION)
        templates += linked_of(stack, group, ("launchTemplateId",), *ALI_LAUNCH_TEMPLATES)
        zones, unread = _subnet_zones(stack, group, ("vswitchIds", "vswitchId"), ALI_VSWITCH, "zoneId")
        yield ManagedGroup("alibaba", group, templates, zones, unread, integer(stack.known(group.props, "minSize")),
                           integer(stack.known(group.props, "maxSize")))


def _huawei_groups(stack: Stack) -> Iterator[ManagedGroup]:
    for group in stack.of_type(HW_AS_GROUP):
        templates = linked_of(stack, group, ("scalingConfigurationId",), HW_AS_CONFIGURATION)
        zones = {str(z) for z in known_items(stack, group.props, "availabilityZones", "availableZones")}
        unread = [] if zones else ["availabilityZones is unset, so Auto Scaling puts every server in one zone it "
                                   "picks: list the zones"]
        yield ManagedGroup("huawei", group, templates, zones, unread,
                           integer(stack.known(group.props, "minInstanceNumber")),
                           integer(stack.known(group.props, "maxInstanceNumber")))


def managed_groups(stack: Stack) -> list[ManagedGroup]:
    """Every managed group in the stack, on every cloud."""
    return [*_aws_groups(stack), *_gcp_groups(stack), *_alibaba_groups(stack), *_huawei_groups(stack)]


@dataclass
class HealthCheck:
    resource: StackResource
    path: str | None
    port: int | str | None
    """A port number; "traffic-port" or "serving-port" for the port requests go to; None: the backend's port."""


@dataclass
class Backend:
    """Where a load balancer sends requests: a target group, backend service, server group or pool."""

    resource: StackResource
    health_checks: list[HealthCheck]
    groups: list[StackResource]
    """The managed groups whose servers it holds."""


@dataclass
class Listener:
    resource: StackResource
    port: int | None
    protocol: str
    redirects_to_https: bool
    """Plain HTTP that only redirects to HTTPS."""
    backends: list[Backend]
    tls_1_2: bool = False
    """HTTPS on 443 under a TLS 1.2+ policy that the pack reads: load-balancer-https-only finds nothing wrong with
    the listener or its TLS policies (Google Cloud: its proxies' SSL policies; Alibaba, Huawei: a custom policy)."""


def _passes_listener_checks(*resources: StackResource) -> bool:
    """Whether load-balancer-https-only finds nothing wrong with each of these listeners or TLS policies."""
    found: list[str] = []

    def collect(message: str, urn: str | None = None) -> None:
        found.append(message)

    for resource in resources:
        check_listeners(ResourceInput(resource.resource_type, resource.props), collect)
    return bool(resources) and not found


@dataclass
class LoadBalancer:
    cloud: str
    resource: StackResource
    """The load balancer (on Google Cloud, which has none as a resource, its first forwarding rule)."""
    internet_facing: bool
    listeners: list[Listener]

    @property
    def backends(self) -> list[Backend]:
        seen: dict[str, Backend] = {}
        for listener in self.listeners:
            for backend in listener.backends:
                seen.setdefault(backend.resource.urn, backend)
        return list(seen.values())


def _aws_backends(stack: Stack) -> list[Backend]:
    backends = []
    for group in stack.of_type(*AWS_TARGET_GROUPS):
        check = stack.known(group.props, "healthCheck") or {}
        health = [] if check.get("enabled") is False else [
            HealthCheck(group, check.get("path"), integer(check.get("port")) or check.get("port") or "traffic-port")]
        members = referring(stack, group, ("targetGroupArns", "trafficSources"), AWS_AUTOSCALING_GROUP)
        for attachment in referring(stack, group, ("lbTargetGroupArn", "trafficSource"), *AWS_GROUP_ATTACHMENTS):
            members += linked_of(stack, attachment, ("autoscalingGroupName",), AWS_AUTOSCALING_GROUP)
        backends.append(Backend(group, health, members))
    return backends


def _aws_load_balancers(stack: Stack, report_violation: ReportViolation) -> Iterator[LoadBalancer]:
    backends = _aws_backends(stack)
    for balancer in stack.of_type(*AWS_LOAD_BALANCERS):
        listeners = []
        for listener in referring(stack, balancer, ("loadBalancerArn",), *AWS_LISTENERS):
            protocol = str(stack.known(listener.props, "protocol") or "HTTP").upper()
            rules = referring(stack, listener, ("listenerArn",), *AWS_LISTENER_RULES)
            actions = stack.items(stack.known(listener.props, "defaultActions"))
            for rule in rules:
                rule_actions = stack.items(stack.known(rule.props, "actions"))
                actions += rule_actions
                if protocol == "HTTP" and not all(aws_redirects_to_https(a) for a in rule_actions):
                    report_violation(f"listener rule {rule.name} of the HTTP listener {listener.name} does not only "
                                     "redirect to HTTPS, so plain HTTP reaches the servers: redirect, or move the rule "
                                     "to the HTTPS listener", rule.urn)
            forwards = [b for b in backends if any(linked(stack, holder, ("defaultActions", "actions"), b.resource)
                                                   for holder in (listener, *rules))]
            listeners.append(Listener(listener, integer(stack.known(listener.props, "port")), protocol,
                                      protocol == "HTTP" and bool(actions) and all(map(aws_redirects_to_https,
                                                                                       actions)), forwards,
                                      protocol == "HTTPS" and _passes_listener_checks(listener)))
        yield LoadBalancer("aws", balancer, stack.known(balancer.props, "internal") is not True, listeners)


def _gcp_health(stack: Stack, check: StackResource) -> HealthCheck:
    if check.resource_type in GCP_LEGACY_HEALTH_CHECKS:
        return HealthCheck(check, stack.known(check.props, "requestPath"), integer(stack.known(check.props, "port")))
    for key in ("httpHealthCheck", "httpsHealthCheck", "http2HealthCheck"):
        block = stack.known(check.props, key)
        if block:
            served = block.get("portSpecification") in ("USE_SERVING_PORT", "USE_NAMED_PORT")
            return HealthCheck(check, block.get("requestPath"),
                               "serving-port" if served else integer(block.get("port", 80)))
    return HealthCheck(check, None, None)


def _gcp_backends(stack: Stack, report_violation: ReportViolation) -> list[Backend]:
    backends = []
    for service in stack.of_type(*GCP_BACKEND_SERVICES):
        checks = linked_of(stack, service, ("healthChecks",), *GCP_HEALTH_CHECKS, *GCP_LEGACY_HEALTH_CHECKS)
        if known_items(stack, service.props, "healthChecks") and not checks:
            report_violation(f"backend service {service.name} names a health check that this stack does not create, "
                             f"so the pack cannot read it: {HEALTH_FIX}, with a health check of this stack",
                             service.urn)
        groups = linked_of(stack, service, ("backends",), GCP_REGION_GROUP_MANAGER, GCP_ZONE_GROUP_MANAGER)
        backends.append(Backend(service, [_gcp_health(stack, c) for c in checks], groups))
    return backends


def _gcp_redirect_only(stack: Stack, url_map: StackResource) -> bool:
    redirect = stack.known(url_map.props, "defaultUrlRedirect") or {}
    routes = [key for key in ("defaultService", "pathMatchers", "hostRules", "defaultRouteAction")
              if stack.known(url_map.props, key)]
    return redirect.get("httpsRedirect") is True and not routes


GCP_ARMOR_POLICIES = ("gcp:compute/securityPolicy:SecurityPolicy",
                      "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy")


def _gcp_one_armor(stack: Stack, url_map: StackResource, mapped: list[Backend],
                   report_violation: ReportViolation) -> None:
    """The backend services one URL map routes to (a canary's weighted backend services) share one Cloud Armor policy:
    callers one of them refuses must not reach the other."""
    armors = {b.resource.name: sorted(a.urn for a in linked_of(stack, b.resource, ("securityPolicy",),
                                                               *GCP_ARMOR_POLICIES))
              or ([str(stack.known(b.resource.props, "securityPolicy"))]
                  if stack.known(b.resource.props, "securityPolicy") else []) for b in mapped}
    if len({tuple(urns) for urns in armors.values()}) > 1:
        shown = ", ".join(f"{name}: {'a Cloud Armor policy' if urns else 'none'}" for name, urns in armors.items())
        report_violation(f"URL map {url_map.name} routes to backend services under different Cloud Armor policies "
                         f"({shown}), so callers one refuses reach the other: give every backend service of the URL "
                         "map the same securityPolicy", url_map.urn)


def _gcp_listener(stack: Stack, rule: StackResource, backends: list[Backend],
                  report_violation: ReportViolation) -> Listener:
    text = stack.known(rule.props, "portRange") or next(iter(stack.items(stack.known(rule.props, "ports"))), None)
    span = port_texts([text])[0] if text is not None else None
    port = span.low if span is not None and span.low == span.high and not span.unread else None
    https = linked_of(stack, rule, ("target",), *GCP_HTTPS_PROXIES)
    http = linked_of(stack, rule, ("target",), *GCP_HTTP_PROXIES)
    forwards: list[Backend] = []
    redirects = False
    tls_1_2 = bool(https) and _passes_listener_checks(rule)
    for proxy in https:
        policies = linked_of(stack, proxy, ("sslPolicy",), *GCP_SSL_POLICIES)
        tls_1_2 = tls_1_2 and _passes_listener_checks(*policies)
        if not stack.known(proxy.props, "sslPolicy"):
            report_violation(f"target HTTPS proxy {proxy.name} has no SSL policy, so Google's default applies, which "
                             "admits TLS 1.0: give it an SSL policy with minTlsVersion TLS_1_2", proxy.urn)
        elif not policies:
            report_violation(f"target HTTPS proxy {proxy.name} names an SSL policy that this stack does not create, "
                             "so the pack cannot read its TLS versions: use an SSL policy of this stack with "
                             "minTlsVersion TLS_1_2", proxy.urn)
        for url_map in linked_of(stack, proxy, ("urlMap",), *GCP_URL_MAPS):
            mapped = [b for b in backends if linked(
                stack, url_map, ("defaultService", "pathMatchers", "hostRules", "defaultRouteAction"), b.resource)]
            _gcp_one_armor(stack, url_map, mapped, report_violation)
            forwards += mapped
    for proxy in http:
        maps = linked_of(stack, proxy, ("urlMap",), *GCP_URL_MAPS)
        redirects = bool(maps) and all(_gcp_redirect_only(stack, m) for m in maps)
        if not redirects:
            report_violation(f"target HTTP proxy {proxy.name} serves a URL map that does not only redirect to HTTPS, "
                             "so plain HTTP reaches the backends: give it a URL map whose defaultUrlRedirect has "
                             "httpsRedirect true (and nothing else)", proxy.urn)
    if port == HTTPS_PORT and not https:
        report_violation(f"forwarding rule {rule.name} listens on {HTTPS_PORT} without a target HTTPS proxy of this "
                         "stack, so the pack cannot see HTTPS there: forward to a target HTTPS proxy", rule.urn)
    if port == REDIRECT_PORT and not http:
        report_violation(f"forwarding rule {rule.name} listens on {REDIRECT_PORT} without a target HTTP proxy of "
                         "this stack that only redirects: forward to one whose URL map redirects to HTTPS", rule.urn)
    return Listener(rule, port, "HTTPS" if https else "HTTP" if http else "?", redirects and not https, forwards,
                    tls_1_2)


_GCP_EXTERNAL = {"EXTERNAL", "EXTERNAL_MANAGED"}


def _gcp_load_balancers(stack: Stack, report_violation: ReportViolation) -> Iterator[LoadBalancer]:
    """Google Cloud's load balancer is no resource: its forwarding rules, grouped by the address they share."""
    backends = _gcp_backends(stack, report_violation)
    by_address: dict[str, list[StackResource]] = {}
    for rule in stack.of_type(*GCP_FORWARDING_RULES):
        addresses = [d.urn for d in rule.property_dependencies.get("ipAddress", [])]
        key = addresses[0] if addresses else str(stack.known(rule.props, "ipAddress") or rule.urn)
        by_address.setdefault(key, []).append(rule)
    for rules in by_address.values():
        listeners = [_gcp_listener(stack, rule, backends, report_violation) for rule in rules]
        scheme = str(stack.known(rules[0].props, "loadBalancingScheme") or "EXTERNAL")
        yield LoadBalancer("gcp", rules[0], scheme in _GCP_EXTERNAL, listeners)


def _alibaba_backends(stack: Stack) -> list[Backend]:
    backends = []
    for server_group in stack.of_type(ALI_SERVER_GROUP):
        check = stack.known(server_group.props, "healthCheckConfig") or {}
        health = [HealthCheck(server_group, check.get("healthCheckPath"),
                              integer(check.get("healthCheckConnectPort")) or None)
                  ] if check.get("healthCheckEnabled") is True else []
        groups = referring(stack, server_group, ("albServerGroups",), ALI_SCALING_GROUP)
        for attachment in referring(stack, server_group, ("albServerGroupId",), ALI_GROUP_ATTACHMENT):
            groups += linked_of(stack, attachment, ("scalingGroupId",), ALI_SCALING_GROUP)
        backends.append(Backend(server_group, health, groups))
    return backends


def _alibaba_redirects_everything(stack: Stack, rule: StackResource) -> bool:
    """A rule that sends every request (path /*) to HTTPS."""
    actions = stack.items(stack.known(rule.props, "ruleActions"))
    conditions = stack.items(stack.known(rule.props, "ruleConditions"))
    redirects = any(str(a.get("type")).lower() == "redirect"
                    and str((a.get("redirectConfig") or {}).get("protocol")).upper() == "HTTPS" for a in actions)
    every_path = [c for c in conditions if str(c.get("type")).lower() == "path"
                  and "/*" in items((c.get("pathConfig") or {}).get("values"))]
    return redirects and len(conditions) == len(every_path) == 1 and str(
        stack.known(rule.props, "direction") or "Request") == "Request"


def _alibaba_load_balancers(stack: Stack, report_violation: ReportViolation) -> Iterator[LoadBalancer]:
    backends = _alibaba_backends(stack)
    for balancer in stack.of_type(ALI_LOAD_BALANCER):
        listeners = []
        for listener in referring(stack, balancer, ("loadBalancerId",), ALI_LISTENER):
            protocol = str(stack.known(listener.props, "listenerProtocol") or "").upper()
            rules = referring(stack, listener, ("listenerId",), ALI_LISTENER_RULE)
            policy = str(stack.known(listener.props, "securityPolicyId") or "")
            custom = linked_of(stack, listener, ("securityPolicyId",), ALI_TLS_POLICY)
            if protocol == "HTTPS" and policy and not policy.startswith(ALI_SYSTEM_POLICY_PREFIX) and not custom:
                report_violation(f"HTTPS listener {listener.name} uses TLS policy {policy}, which this stack does not "
                                 "create, so the pack cannot read its TLS versions: use tls_cipher_policy_1_2 or an "
                                 "alb.SecurityPolicy of this stack", listener.urn)
            redirects = protocol == "HTTP" and any(_alibaba_redirects_everything(stack, r) for r in rules)
            if protocol == "HTTP":
                for rule in rules:
                    if any(str(a.get("type")).lower() == "forwardgroup"
                           for a in stack.items(stack.known(rule.props, "ruleActions"))):
                        report_violation(f"forwarding rule {rule.name} of the HTTP listener {listener.name} forwards "
                                         "plain HTTP to servers: forward on the HTTPS listener only", rule.urn)
                if not redirects:
                    report_violation(f"HTTP listener {listener.name} has no rule that redirects every request (path "
                                     "/*) to HTTPS, so its default action forwards plain HTTP to the servers: add an "
                                     "alb.Rule with a Redirect action (protocol HTTPS) for path /*", listener.urn)
            forwards = [b for b in backends if any(linked(stack, holder, ("defaultActions", "ruleActions"),
                                                           b.resource) for holder in (listener, *rules))]
            tls_1_2 = protocol == "HTTPS" and _passes_listener_checks(listener) and (
                not policy or policy.startswith(ALI_SYSTEM_POLICY_PREFIX) or _passes_listener_checks(*custom))
            listeners.append(Listener(listener, integer(stack.known(listener.props, "listenerPort")), protocol,
                                      redirects, [] if redirects else forwards, tls_1_2))
        # "Internet" or "Intranet" (pulumi_alicloud alb.LoadBalancer address_type): anything but Intranet counts as
        # internet-facing (fail closed).
        internet = str(stack.known(balancer.props, "addressType") or "").lower() != "intranet"
        yield LoadBalancer("alibaba", balancer, internet, listeners)


def _huawei_backends(stack: Stack, report_violation: ReportViolation) -> list[Backend]:
    backends = []
    for pool in stack.of_type(HW_POOL):
        monitors = referring(stack, pool, ("poolId",), HW_MONITOR)
        if not monitors:
            report_violation(f"backend server group {pool.name} has no health check (a DedicatedElb.Monitor for it): "
                             f"{HEALTH_FIX}", pool.urn)
        health = [HealthCheck(m, stack.known(m.props, "urlPath"), integer(stack.known(m.props, "port")))
                  for m in monitors if stack.known(m.props, "enabled") is not False]
        backends.append(Backend(pool, health, referring(stack, pool, ("lbaasListeners",), HW_AS_GROUP)))
    return backends


def _huawei_redirects(stack: Stack, policy: StackResource, https: list[StackResource]) -> bool:
    action = str(stack.known(policy.props, "action") or "REDIRECT_TO_POOL").upper()
    if action == "REDIRECT_TO_LISTENER":
        return any(linked(stack, policy, ("redirectListenerId",), target) for target in https)
    config = stack.known(policy.props, "redirectUrlConfig") or {}
    return action == "REDIRECT_TO_URL" and str(config.get("protocol")).upper() == "HTTPS"


def _huawei_load_balancers(stack: Stack, report_violation: ReportViolation) -> Iterator[LoadBalancer]:
    backends = _huawei_backends(stack, report_violation)
    for balancer in stack.of_type(HW_LOAD_BALANCER):
        listeners = referring(stack, balancer, ("loadbalancerId",), HW_LISTENER)
        https = [item for item in listeners if str(stack.known(item.props, "protocol")).upper() == "HTTPS"]
        views = []
        for listener in listeners:
            protocol = str(stack.known(listener.props, "protocol") or "").upper()
            policies = referring(stack, listener, ("listenerId",), HW_L7_POLICY)
            custom = linked_of(stack, listener, ("securityPolicyId",), HW_TLS_POLICY)
            if protocol == "HTTPS" and stack.known(listener.props, "securityPolicyId") and not custom:
                report_violation(f"HTTPS listener {listener.name} uses a TLS policy that this stack does not create, "
                                 "so the pack cannot read its TLS versions: use tlsCiphersPolicy tls-1-2 or a "
                                 "DedicatedElb.SecurityPolicy of this stack", listener.urn)
            redirects = protocol == "HTTP" and any(_huawei_redirects(stack, p, https) for p in policies)
            if protocol == "HTTP":
                for policy in policies:
                    if not _huawei_redirects(stack, policy, https):
                        report_violation(f"forwarding policy {policy.name} of the HTTP listener {listener.name} does "
                                         "not redirect to HTTPS, so plain HTTP reaches the servers: use "
                                         "REDIRECT_TO_LISTENER to the HTTPS listener", policy.urn)
                if not redirects:
                    report_violation(f"HTTP listener {listener.name} redirects nothing to HTTPS: add an l7policy "
                                     "REDIRECT_TO_LISTENER to the HTTPS listener", listener.urn)
            forwards = [b for b in backends if linked(stack, listener, ("defaultPoolId",), b.resource)
                        or linked(stack, b.resource, ("listenerId",), listener)
                        or any(linked(stack, p, ("redirectPoolId", "redirectPoolsConfigs"), b.resource)
                               for p in policies)]
            tls_1_2 = protocol == "HTTPS" and _passes_listener_checks(listener) and (
                not stack.known(listener.props, "securityPolicyId") or _passes_listener_checks(*custom))
            views.append(Listener(listener, integer(stack.known(listener.props, "protocolPort")), protocol,
                                  redirects, forwards, tls_1_2))
        internet = any(stack.known(balancer.props, key) for key in ("ipv4EipId", "iptype", "ipv6BandwidthId")) or bool(
            referring(stack, balancer, ("portId",), HW_EIP_ASSOCIATE))
        yield LoadBalancer("huawei", balancer, internet, views)


def load_balancers(stack: Stack, report_violation: ReportViolation) -> list[LoadBalancer]:
    """Every load balancer in the stack with its listeners and backends; what does not hold up across resources
    (a proxy without an SSL policy, HTTP that does not only redirect, a pool without a health check) is reported."""
    return [*_aws_load_balancers(stack, report_violation), *_gcp_load_balancers(stack, report_violation),
            *_alibaba_load_balancers(stack, report_violation), *_huawei_load_balancers(stack, report_violation)]


def check_https_front_ends(stack: Stack, report_violation: ReportViolation) -> None:
    if not load_balancers(stack, report_violation) and not stack.of_type(HW_POOL, *GCP_BACKEND_SERVICES):
        raise NotApplicable("the stack has no load balancer")


LOAD_BALANCER_HTTPS_FRONT_ENDS = StackRule(
    "load-balancer-https-front-ends",
    "Load balancers made of several resources hold up together: HTTPS proxies and listeners have a TLS 1.2+ "
    "policy of the stack, plain HTTP only redirects, every backend has a health check of the stack, the "
    "backends of one Google Cloud URL map share one Cloud Armor policy.",
    check_https_front_ends)


#### Fleets, as a stack: managed groups span zones ####

DEFAULT_MIN_ZONES = 2
MIN_ZONES_SCHEMA: Mapping[str, Any] = {"minZones": {
    "type": "integer", "minimum": 1, "default": DEFAULT_MIN_ZONES,
    "description": "Zones every managed group spans (production's; set 1 for a stack of a non-production stage)."}}


def check_fleet_zones(stack: Stack, report_violation: ReportViolation) -> None:
    groups = managed_groups(stack)
    if not groups:
        raise NotApplicable("the stack has no managed group")
    wanted = integer(stack.config.get("minZones", DEFAULT_MIN_ZONES)) or DEFAULT_MIN_ZONES
    for group in groups:
        name = group.resource.name
        for unread in group.unread_zones if wanted > 1 else []:  # any placement spans one zone
            report_violation(f"managed group {name}: the pack cannot read {unread}, so it cannot tell how many zones "
                             "the group spans: place it in subnets (or zones) of this stack", group.resource.urn)
        if not group.unread_zones and len(group.zones) < wanted:
            report_violation(f"managed group {name} spans {len(group.zones)} zone(s) "
                             f"({', '.join(sorted(group.zones)) or 'none'}): spread it over at least {wanted} "
                             "(production plans span two; set minZones 1 in the policy config of a stack of another "
                             "stage)", group.resource.urn)


FLEET_SPANS_ZONES = StackRule(
    "fleet-spans-zones", "Every managed group spans at least minZones zones (default 2, production's).",
    check_fleet_zones, config_schema=MIN_ZONES_SCHEMA)


#### Fleets, as a stack: alarms watch every managed group ####

# A managed group is watched when the stack holds an alarm on its load balancer's metrics (what inferstack's
# components/<cloud>.py create_alarms registers): by cloud, the alarm type and whether an alarm's inputs read them.
FLEET_ALARMS: Mapping[str, tuple[str, Callable[[Mapping[str, Any]], bool]]] = {
    "aws": ("aws:cloudwatch/metricAlarm:MetricAlarm",
            lambda p: p.get("namespace") == "AWS/ApplicationELB"
            and p.get("metricName") in ("UnHealthyHostCount", "HealthyHostCount", "TargetResponseTime")),
    "gcp": ("gcp:monitoring/alertPolicy:AlertPolicy",
            lambda p: any("loadbalancing.googleapis.com/" in str((c.get("conditionThreshold") or {}).get("filter"))
                          for c in items(p.get("conditions")) if isinstance(c, Mapping))),
    "alibaba": ("alicloud:cms/alarm:Alarm", lambda p: p.get("project") == "acs_alb"),
    "huawei": ("huaweicloud:Cse/alarmrule:Alarmrule",
               lambda p: isinstance(p.get("metric"), Mapping) and p["metric"].get("namespace") == "SYS.ELB"),
}


def check_fleet_alarms(stack: Stack, report_violation: ReportViolation) -> None:
    groups = managed_groups(stack)
    if not groups:
        raise NotApplicable("the stack has no managed group")
    for group in groups:
        alarm_type, watches = FLEET_ALARMS[group.cloud]
        if not any(watches(alarm.props) for alarm in stack.of_type(alarm_type)):
            report_violation(f"managed group {group.resource.name} has no alarm on its load balancer ({alarm_type} "
                             "on unhealthy servers, latency or healthy servers): nobody learns that it fails or is "
                             "full; inferstack creates them with every fleet (docs/deploy-<cloud>.md, Alarms)",
                             group.resource.urn)


FLEET_WATCHED_BY_ALARMS = StackRule(
    "fleet-watched-by-alarms", "Every managed group's load balancer is watched by alarms of the cloud's "
    "monitoring (unhealthy servers, latency, healthy servers at the ceiling).", check_fleet_alarms,
    severity="medium", level="advisory")


#### Production: the servers run as a protected fleet behind HTTPS ####

STAGES = ("validation", "internal", "production")
"""inferstack's stages (inferstack.spec.Stage), restated because the pack imports nothing from inferstack."""
PRODUCTION_STAGE = "production"
STAGE_SCHEMA: Mapping[str, Any] = {"stage": {
    "type": "string", "enum": list(STAGES), "default": PRODUCTION_STAGE,
    "description": "The stack's stage (its stack file's inferstack:stage): production unless this says otherwise."}}
LOOSE_SERVER_TYPES = (AWS_INSTANCE, AWS_SPOT_INSTANCE_REQUEST, GCP_INSTANCE, ALI_INSTANCE, HW_INSTANCE)
HW_EIP = "huaweicloud:Vpc/eip:Eip"
STAGE_FIX = ('if this stack is not production, say so in its policy config: {"production-runs-a-protected-fleet": '
             '{"stage": "internal"}} (docs/policy.md, "Zones and the stage")')


@dataclass(frozen=True)
class FleetProtection:
    """What inferstack protects in a production fleet on one cloud (components/<cloud>.py: `fleet_options` and
    `server_options` with `protected`, and the cloud's deletion flags; docs/deploy-<cloud>.md, "Production
    fleet"). Parts: "group", "template", "load balancer", "address" (the load balancer's public address)."""

    protected: frozenset[str]
    """The parts that carry Pulumi's `protect`."""
    deletion_flags: Mapping[str, str]
    """Part → the property of the cloud's own deletion protection, which must be true."""


FLEET_PROTECTIONS: Mapping[str, FleetProtection] = {
    # The servers are the group's to replace (EC2 termination protection does not stop Auto Scaling); a launch
    # template changes by new versions, an update, so it can carry protect.
    "aws": FleetProtection(frozenset({"group", "template", "load balancer"}),
                           {"load balancer": "enableDeletionProtection"}),
    # An instance template cannot change (a change is a new template, which protect would block); the load balancer
    # is its forwarding rules, which carry protect with their address (the endpoint's domain points at it); Google
    # has no deletion flag on either.
    "gcp": FleetProtection(frozenset({"group", "load balancer", "address"}), {}),
    "alibaba": FleetProtection(frozenset({"group", "template", "load balancer"}),
                               {"group": "groupDeletionProtection", "load balancer": "deletionProtectionEnabled"}),
    # An AS configuration cannot change (a change is a new one, which touches no server); the AS group has no
    # deletion flag in pulumi_huaweicloud 0.0.12. The load balancer's elastic IP carries protect.
    "huawei": FleetProtection(frozenset({"group", "load balancer", "address"}),
                              {"load balancer": "deletionProtectionEnable"}),
}
"""By cloud. tests/policy/test_edge_bypasses.py requires each part and flag of each row on a hand-built fleet, and
passes inferstack's own production deployment of each cloud (a row asks no more than the components give)."""
PROTECT_FIX = "production fleets are protected (inferstack:protectServers)"
FLEET_FIX = "(inferstack does, in production)"


def _stage(stack: Stack) -> str:
    """The stack's stage from the rule's config, never from the stack: production unless the config names another of
    inferstack's stages (an unknown name counts as production; the config schema refuses it)."""
    stage = str(stack.config.get("stage") or PRODUCTION_STAGE)
    return stage if stage in STAGES else PRODUCTION_STAGE


def _serves_group(backends: Iterable[Backend], group: ManagedGroup) -> bool:
    return any(group.resource.urn in {member.urn for member in backend.groups} for backend in backends)


GCP_ADDRESSES = ("gcp:compute/globalAddress:GlobalAddress", "gcp:compute/address:Address")


def _fleet_parts(stack: Stack, group: ManagedGroup, fronting: list[LoadBalancer]) -> dict[str, list[StackResource]]:
    addresses = [address for lb in fronting
                 for address in linked_of(stack, lb.resource, ("ipv4EipId",), HW_EIP)
                 + linked_of(stack, lb.resource, ("ipAddress",), *GCP_ADDRESSES)]
    return {"group": [group.resource], "template": group.templates,
            "load balancer": [lb.resource for lb in fronting], "address": addresses}


SPOT_FLOOR_FIX = ("keep the floor on-demand: spot servers only above it (inferstack's spot above the floor: "
                  "docs/pricing.md, \"Spot above the floor\")")
ALI_SPOT_STRATEGIES = {"SpotAsPriceGo", "SpotWithPriceLimit"}
ALI_BASE_POLICIES = {"COMPOSABLE", "COST_OPTIMIZED"}  # where OnDemandBaseCapacity takes effect (CreateScalingGroup)


class _Unread(Exception):
    """A purchase setting a preview does not know yet: the pack cannot tell whether the floor is on-demand."""


def _read(stack: Stack, props: Any, key: str, default: Any = None) -> Any:
    """`props[key]` (a mapping of the engine's, read with get), or _Unread when the preview does not know it."""
    try:
        value = props.get(key, default)
    except stack.unknown_errors:
        raise _Unread(key) from None
    return default if value is None else value


def _spot_floor_problem(stack: Stack, group: ManagedGroup) -> str | None:
    """Why the group may run its floor (`minSize`) on spot capacity, which its cloud can reclaim at two minutes' notice
    or less; None: its floor is on-demand. Fail-closed: a group whose template the stack does not hold, or a purchase
    setting the preview does not know, counts as spot."""
    if not group.templates:
        return ("its template is not one of this stack's resources, so the pack cannot read how its servers are "
                "bought: create the template in this stack")
    try:
        return _spot_floor_reason(stack, group)
    except _Unread as unread:
        return f"its {unread} is unknown in this preview, so the pack cannot tell how its servers are bought"


def _spot_floor_reason(stack: Stack, group: ManagedGroup) -> str | None:
    props, floor = group.resource.props, group.min_size
    if group.cloud == "aws":
        for template in group.templates:  # a launch template may request spot itself, whatever the group says
            market = _read(stack, _read(stack, template.props, "instanceMarketOptions", {}), "marketType")
            if market == "spot":
                return f"its launch template {template.name} requests spot (instanceMarketOptions.marketType)"
        mixed = _read(stack, props, "mixedInstancesPolicy")
        if not mixed:
            return None  # a launch template alone launches on-demand servers
        split = _read(stack, mixed, "instancesDistribution", {})
        base = integer(_read(stack, split, "onDemandBaseCapacity", 0))
        above = integer(_read(stack, split, "onDemandPercentageAboveBaseCapacity", 100))
        if above == 100 or (base is not None and floor is not None and base >= floor):
            return None
        return f"its on-demand base capacity is {show(base)}, below its floor ({show(floor)})"
    if group.cloud == "alibaba":
        if not any(_read(stack, t.props, "spotStrategy") in ALI_SPOT_STRATEGIES for t in group.templates):
            return None
        policy = _read(stack, props, "multiAzPolicy")
        base = integer(_read(stack, props, "onDemandBaseCapacity"))
        if policy in ALI_BASE_POLICIES and base is not None and floor is not None and base >= floor:
            return None
        base_text, policy_text = ("unset" if v is None else show(v) for v in (base, policy))
        return (f"its template launches spot servers and its on-demand base ({base_text}, under multiAzPolicy "
                f"{policy_text}) does not cover its floor ({show(floor)})")
    if group.cloud == "gcp":
        for template in group.templates:
            scheduling = _read(stack, template.props, "scheduling", {})
            if _read(stack, scheduling, "provisioningModel") == "SPOT" or boolean(
                    _read(stack, scheduling, "preemptible")):
                return f"its template {template.name} is spot (provisioningModel SPOT or preemptible)"
        return None
    for template in group.templates:  # huawei: the AS configuration's market
        config = _read(stack, template.props, "instanceConfig", {})
        if _read(stack, config, "chargingMode") == "spot":
            return f"its AS configuration {template.name} is spot (instanceConfig.chargingMode)"
    return None


def _production_group(stack: Stack, group: ManagedGroup, balancers: list[LoadBalancer],
                      report_violation: ReportViolation) -> None:
    name = group.resource.name
    spot = _spot_floor_problem(stack, group)
    if spot is not None:
        report_violation(f"managed group {name} may run its floor on spot capacity: {spot}, so one reclamation takes "
                         f"servers the SLO needs: {SPOT_FLOOR_FIX}", group.resource.urn)
    fronting = [lb for lb in balancers if _serves_group(lb.backends, group)]
    if not fronting:
        report_violation(f"managed group {name} is behind no load balancer of this stack: production servers are "
                         f"reached through a load balancer that serves HTTPS {FLEET_FIX}", group.resource.urn)
    elif not any(listener.protocol == "HTTPS" and listener.port == HTTPS_PORT and listener.tls_1_2
                 and _serves_group(listener.backends, group) for lb in fronting for listener in lb.listeners):
        report_violation(f"managed group {name} is served by no HTTPS listener on {HTTPS_PORT} under a TLS 1.2+ "
                         "policy that the pack reads: serve it through a load balancer's HTTPS listener "
                         f"{FLEET_FIX}", group.resource.urn)
    protection = FLEET_PROTECTIONS[group.cloud]
    parts = _fleet_parts(stack, group, fronting)
    for part in sorted(protection.protected):
        for resource in parts[part]:
            if not resource.opts.protect:
                report_violation(f"the {part} {resource.name} of managed group {name} does not carry Pulumi's "
                                 f"protect, so a change that replaces it, or `pulumi destroy`, deletes it: "
                                 f"{PROTECT_FIX}", resource.urn)
    for part, flag in sorted(protection.deletion_flags.items()):
        for resource in parts[part]:
            value = stack.known(resource.props, flag)
            if boolean(value) is not True:
                report_violation(f"{resource.name} has no deletion protection ({flag} is "
                                 f"{'unset' if value is None else show(value)}), so any API call may delete it: "
                                 f"set {flag} true {FLEET_FIX}", resource.urn)


def check_production_fleet(stack: Stack, report_violation: ReportViolation) -> None:
    stage = _stage(stack)
    if stage != PRODUCTION_STAGE:
        raise NotApplicable(f"the stack's stage is {stage} (policy config), not production")
    loose = stack.of_type(*LOOSE_SERVER_TYPES)
    groups = managed_groups(stack)
    if not loose and not groups:
        raise NotApplicable("the stack runs no servers")
    for server in loose:
        report_violation(f"server {server.name} runs on its own in a production stack: production servers run as a "
                         "managed group behind a load balancer that serves HTTPS (TLS 1.2 or newer), with "
                         f"inferstack's protections; {STAGE_FIX}", server.urn)
    balancers = load_balancers(stack, discard) if groups else []
    for group in groups:
        _production_group(stack, group, balancers, report_violation)


PRODUCTION_RUNS_A_PROTECTED_FLEET = StackRule(
    "production-runs-a-protected-fleet",
    "A stack of the production stage (config stage, default production) runs its servers as managed groups "
    "behind a load balancer that serves HTTPS (TLS 1.2+), protected as inferstack protects them, their floor "
    "on-demand (spot only above it); no loose server.", check_production_fleet, severity="critical",
    config_schema=STAGE_SCHEMA)

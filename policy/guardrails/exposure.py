"""Exposure: what public callers can reach. Firewall rules open no admin port and nothing but a serving port (or a
load balancer's listener) to the public; in a fleet only the load balancer listens publicly and the serving port
admits it only; wherever a public source may call the API, the servers hold an API key.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from guardrails.core import (
    NotApplicable,
    ReportViolation,
    ResourceInput,
    ResourceRule,
    Stack,
    StackResource,
    StackRule,
    boolean,
    discard,
    integer,
    items,
    known_items,
    linked_of,
    referring,
    show,
)
from guardrails.fleet import GCP_ARMOR_POLICIES, Listener, LoadBalancer, ManagedGroup, load_balancers, managed_groups
from guardrails.networks import (
    ADMIN_PORTS,
    HTTPS_PORT,
    INGRESS_READERS,
    LISTENER_PORTS,
    REDIRECT_PORT,
    SERVING_PORTS_SCHEMA,
    Opening,
    Source,
    exposure,
    openings,
    public_sources,
    serving_ports,
    unknown_ingress_type,
)
from guardrails.resource_types import (
    ALI_INSTANCE,
    ALI_LAUNCH_TEMPLATES,
    ALI_LB_SECURITY_GROUP,
    ALI_SCALING_CONFIGURATION,
    ALI_SECRET,
    ALI_SECURITY_GROUP,
    AWS_DEFAULT_SECURITY_GROUP,
    AWS_INSTANCE,
    AWS_LAUNCH_CONFIGURATION,
    AWS_LAUNCH_TEMPLATE,
    AWS_LOAD_BALANCERS,
    AWS_PARAMETER,
    AWS_SECURITY_GROUP,
    AWS_SPOT_INSTANCE_REQUEST,
    GCP_FIREWALL,
    GCP_SECRET,
    HW_AS_CONFIGURATION,
    HW_AS_GROUP,
    HW_INSTANCE,
    HW_SECRET,
    HW_SECURITY_GROUP,
    cloud_of,
)
from guardrails.server_identity import SECRET_TYPES, ServerIdentity, server_identities

#### Firewall rules: no admin port open to a public network; only serving and listener ports ####


def _reads_ingress(resource_type: str) -> bool:
    return resource_type in INGRESS_READERS or unknown_ingress_type(resource_type)


UNKNOWN_TYPE_FIX = "use a rule type the pack reads (docs/policy.md lists them)"


def _where(source: Source) -> str:
    return source.text if source.network is not None else f"{source.text}, which the pack cannot read"


ADMIN_FIX = ("inferstack opens no admin port; reach servers through the cloud's managed shell, or admit a private "
             "network only")
UNREAD_FIX = "name the protocol (tcp, udp, icmp, all, or its number) and give numeric ports"


def check_admin_ports(resource: ResourceInput, report_violation: ReportViolation) -> None:
    if unknown_ingress_type(resource.resource_type):
        report_violation(f"{resource.resource_type} is a firewall type the pack cannot read, so it counts as opening "
                         f"every port (admin ports included) to the internet: {UNKNOWN_TYPE_FIX}")
    for opening in openings(resource.resource_type, resource.props):
        if exposure(opening, resource.resource_type) in ("private", "iap"):
            continue
        where = _where(opening.source)
        if opening.unread:
            report_violation(f"the rule's {opening.unread} cannot be read, so it counts as opening every port (admin "
                             f"ports included) to {where}: {UNREAD_FIX}")
            continue
        for port, service in ADMIN_PORTS.items():
            if not opening.covers(port):
                continue
            if opening.low == opening.high:
                what = f"admin port {port} ({service}) is open to {where}"
            else:
                what = f"{opening.ports_are()} open to {where}, including admin port {port} ({service})"
            report_violation(f"{what}: {ADMIN_FIX}")


ADMIN_PORTS_NOT_PUBLIC = ResourceRule(
    "admin-ports-not-public", "No firewall rule opens SSH (22) or RDP (3389) to a public network.",
    check_admin_ports, _reads_ingress, severity="critical")


def _public_where(source: Source) -> str:
    if source.network is None:
        return f"{source.text}, which the pack cannot read (so it counts as public)"
    if source.network.prefixlen == 0:
        return f"the whole internet ({source.text})"
    return f"public network {source.text}"


def check_public_ingress(resource: ResourceInput, report_violation: ReportViolation) -> None:
    serving = serving_ports(resource.config)
    allowed = (*serving, *LISTENER_PORTS)
    only = (f"only a serving port ({', '.join(map(str, serving))}), or a load balancer's HTTPS or redirect port "
            f"({HTTPS_PORT}, {REDIRECT_PORT}), may be open beyond private networks")
    if unknown_ingress_type(resource.resource_type):
        report_violation(f"{resource.resource_type} is a firewall type the pack cannot read, so it counts as opening "
                         f"every port to the internet: {UNKNOWN_TYPE_FIX}")
    for opening in openings(resource.resource_type, resource.props):
        if exposure(opening, resource.resource_type) in ("private", "iap"):
            continue
        where = _public_where(opening.source)
        if opening.unread:
            report_violation(f"the rule's {opening.unread} cannot be read, so it counts as opening every port to "
                             f"{where}: {UNREAD_FIX}")
        elif not (opening.low == opening.high and opening.low in allowed):
            report_violation(f"{opening.ports_are()} open to {where}: {only}; admit private networks only, or "
                             "reach other ports through the cloud's managed shell")


WORLD_INGRESS_SERVING_PORT_ONLY = ResourceRule(
    "world-ingress-serving-port-only",
    "Only a serving port (the inference API), or a load balancer's HTTPS or redirect port, may be open to "
    "a public network.", check_public_ingress, _reads_ingress, config_schema=SERVING_PORTS_SCHEMA)


#### Stack: only the load balancer listens publicly; the serving port admits it only ####

GCP_LOAD_BALANCER_RANGES = tuple(ipaddress.IPv4Network(n) for n in ("130.211.0.0/22", "35.191.0.0/16"))
"""Google's front ends and health checkers: an Application Load Balancer's requests to its backends, and its health
checks, come from these ranges (cloud.google.com/load-balancing/docs/health-checks, "Firewall rules")."""
SECURITY_GROUP_TYPES = (AWS_SECURITY_GROUP, AWS_DEFAULT_SECURITY_GROUP, ALI_SECURITY_GROUP, HW_SECURITY_GROUP)
# Where servers and templates name their security groups (the property holding them, as the engine relates them).
SERVER_FIREWALL_PROPS: Mapping[str, tuple[str, ...]] = {
    AWS_INSTANCE: ("vpcSecurityGroupIds", "securityGroups"),
    AWS_SPOT_INSTANCE_REQUEST: ("vpcSecurityGroupIds", "securityGroups"),
    AWS_LAUNCH_TEMPLATE: ("vpcSecurityGroupIds", "securityGroupNames", "networkInterfaces"),
    AWS_LAUNCH_CONFIGURATION: ("securityGroups",),
    ALI_INSTANCE: ("securityGroups",),
    ALI_SCALING_CONFIGURATION: ("securityGroupId", "securityGroupIds"),
    **dict.fromkeys(ALI_LAUNCH_TEMPLATES, ("securityGroupId", "securityGroupIds", "networkInterfaces")),
    HW_INSTANCE: ("securityGroupIds", "securityGroups"),
    HW_AS_CONFIGURATION: ("instanceConfig",),
    HW_AS_GROUP: ("securityGroups",),
}
NO_LOAD_BALANCER_FIREWALL = {
    "gcp": "Google Cloud's load balancers take no firewall rule (Google's front ends terminate HTTPS; Cloud Armor "
           "limits callers), so this rule opens the port on servers",
    "huawei": "a Huawei dedicated load balancer takes no security group (its listeners' IP groups limit callers), "
              "so this rule opens the port on servers",
}


def _firewalls_of(stack: Stack, users: Iterable[StackResource]) -> set[str]:
    """URNs of the security groups that servers, templates or groups name."""
    return {group.urn for user in users for group in linked_of(
        stack, user, SERVER_FIREWALL_PROPS.get(user.resource_type, ()), *SECURITY_GROUP_TYPES)}


def _owners(stack: Stack, rule: StackResource) -> list[StackResource]:
    """The security groups an ingress rule belongs to (an AWS group's inline rules: the group itself)."""
    if rule.resource_type in SECURITY_GROUP_TYPES:
        return [rule]
    return linked_of(stack, rule, ("securityGroupId",), *SECURITY_GROUP_TYPES)


def _opened(stack: Stack, resource: StackResource) -> list[Opening]:
    try:
        return openings(resource.resource_type, resource.props)
    except stack.unknown_errors:  # a source computed from another resource (a network's range): checked at `up`
        return []


def _listener_ports_on_load_balancers(stack: Stack, serving: tuple[int, ...],
                                      report_violation: ReportViolation) -> bool:
    """A rule that opens 443 or 80 to a public source is on a load balancer's own firewall, which no server uses."""
    balancers = {g.urn for lb in stack.of_type(*AWS_LOAD_BALANCERS)
                 for g in linked_of(stack, lb, ("securityGroups",), *SECURITY_GROUP_TYPES)}
    balancers |= {g.urn for a in stack.of_type(ALI_LB_SECURITY_GROUP)
                  for g in linked_of(stack, a, ("securityGroupId",), *SECURITY_GROUP_TYPES)}
    servers = _firewalls_of(stack, (r for r in stack.resources if r.resource_type in SERVER_FIREWALL_PROPS))
    found = False
    for resource in (r for r in stack.resources if r.resource_type in INGRESS_READERS):
        for opening in _opened(stack, resource):
            if (opening.low != opening.high or opening.low not in LISTENER_PORTS or opening.low in serving
                    or exposure(opening, resource.resource_type) not in ("public", "unreadable")):
                continue
            found = True
            owners = _owners(stack, resource)
            cloud = cloud_of(resource.resource_type)
            if cloud in NO_LOAD_BALANCER_FIREWALL:
                why = NO_LOAD_BALANCER_FIREWALL[cloud]
            elif not owners:
                why = "the pack cannot tell whose firewall it belongs to (its security group is not in this stack)"
            elif any(o.urn in servers for o in owners):
                why = "servers use this firewall"
            elif not all(o.urn in balancers for o in owners):
                why = "no load balancer of this stack uses this firewall"
            else:
                continue
            report_violation(f"{opening.ports_are()} open to {_public_where(opening.source)}, and {why}: only a load "
                             f"balancer's own firewall opens {HTTPS_PORT} and {REDIRECT_PORT} to callers; servers "
                             "admit the load balancer only", resource.urn)
    return found


def _gcp_rules_for(stack: Stack, template: StackResource) -> list[StackResource]:
    """Google Cloud firewall rules that apply to a template's servers: by network tag or service account, or to
    every instance of the network when a rule names neither (firewall policy rules always count: fail closed)."""
    tags = {str(t) for t in stack.items(stack.known(template.props, "tags"))}
    email = (stack.known(template.props, "serviceAccount") or {}).get("email")
    found = []
    for rule in (r for r in stack.resources if r.resource_type in INGRESS_READERS):
        if not rule.resource_type.startswith("gcp:"):
            continue
        if rule.resource_type != GCP_FIREWALL:
            found.append(rule)
            continue
        targets = {str(t) for t in stack.items(stack.known(rule.props, "targetTags"))}
        accounts = {str(a) for a in stack.items(stack.known(rule.props, "targetServiceAccounts"))}
        if (not targets and not accounts) or targets & tags or (email and email in accounts):
            found.append(rule)
    return found


def _server_rules(stack: Stack, group: ManagedGroup) -> list[StackResource]:
    """Every ingress rule that applies to a managed group's servers."""
    if group.cloud == "gcp":
        return list({r.urn: r for t in group.templates for r in _gcp_rules_for(stack, t)}.values())
    firewalls = _firewalls_of(stack, [*group.templates, group.resource])
    return [r for r in stack.resources if r.resource_type in INGRESS_READERS
            and any(o.urn in firewalls for o in _owners(stack, r))]


def from_load_balancer(opening: Opening, resource_type: str) -> bool:
    """A source the load balancer's requests come from that is not private: Google's front ends."""
    network = opening.source.network
    return (resource_type.startswith("gcp:") and isinstance(network, ipaddress.IPv4Network)
            and any(network.subnet_of(r) for r in GCP_LOAD_BALANCER_RANGES))


def fleet_api_openings(stack: Stack, group: ManagedGroup,
                       serving: tuple[int, ...]) -> list[tuple[StackResource, Opening]]:
    """Each opening of a serving port on a managed group's servers (what the matrix compares with the plan)."""
    return [(rule, opening) for rule in _server_rules(stack, group) for opening in _opened(stack, rule)
            if any(opening.covers(port) for port in serving)]


def _fleet_api_from_load_balancer(stack: Stack, serving: tuple[int, ...], report_violation: ReportViolation) -> bool:
    groups = managed_groups(stack)
    for group in groups:
        for rule, opening in fleet_api_openings(stack, group, serving):
            if exposure(opening, rule.resource_type) in ("private", "iap") or from_load_balancer(
                    opening, rule.resource_type):
                continue
            report_violation(f"{opening.ports_are()} open to {_public_where(opening.source)} on the servers of managed "
                             f"group {group.resource.name}: a fleet's serving port admits its load balancer only (the "
                             "load balancer's security group, the network, or Google's front ends "
                             f"{', '.join(map(str, GCP_LOAD_BALANCER_RANGES))}); callers reach the load balancer",
                             rule.urn)
    return bool(groups)


def check_only_public_listener(stack: Stack, report_violation: ReportViolation) -> None:
    serving = serving_ports(stack.config)
    listened = _listener_ports_on_load_balancers(stack, serving, report_violation)
    fleets = _fleet_api_from_load_balancer(stack, serving, report_violation)
    if not listened and not fleets:
        raise NotApplicable("the stack has no managed group and opens no load balancer port to a public network")


LOAD_BALANCER_ONLY_PUBLIC_LISTENER = StackRule(
    "load-balancer-only-public-listener",
    "Only a load balancer's own firewall opens 443 and 80 to callers; a managed group's serving port "
    "admits its load balancer only.", check_only_public_listener, severity="critical",
    config_schema=SERVING_PORTS_SCHEMA)


#### Stack: a port or load balancer open to a public source comes with the servers' API key ####

API_KEY_SECRETS = (AWS_PARAMETER, GCP_SECRET, ALI_SECRET, HW_SECRET)
API_KEY_NAME_SUFFIX = "-api-key"
"""How inferstack names the API key's secret resource: `<component>-secrets-api-key` (components/identity.py
ServerSecrets, each cloud's create_secrets)."""
API_KEY_FIX = ("store it as a secret the servers' identity may read (`pulumi config set --secret inferstack:apiKey "
               "\"$(openssl rand -hex 32)\"`), or admit private networks only")


@dataclass(frozen=True)
class PublicEntry:
    """Something that admits public callers: a firewall rule's ports, or an internet-facing load balancer's
    listener (or the load balancer itself, where it holds the filter)."""

    urn: str
    what: str


def _public_openings(stack: Stack) -> Iterator[PublicEntry]:
    """Every firewall opening to a source that is not private, however the ranges are split; Google's front ends
    count as the load balancer, whose callers `_public_listeners` reads."""
    for resource in (r for r in stack.resources if r.resource_type in INGRESS_READERS):
        by_ports: dict[tuple[int, int], list[Opening]] = {}
        for opening in _opened(stack, resource):
            if not (exposure(opening, resource.resource_type) in ("private", "iap")
                    or from_load_balancer(opening, resource.resource_type)):
                by_ports.setdefault((opening.low, opening.high), []).append(opening)
        for same_ports in by_ports.values():
            wheres = dict.fromkeys(_public_where(opening.source) for opening in same_ports)
            yield PublicEntry(resource.urn, f"{same_ports[0].ports_are()} open to {', '.join(wheres)}")


def _public_listeners(stack: Stack) -> Iterator[PublicEntry]:
    """Each internet-facing load balancer whose callers the pack cannot limit to private networks: the filter each
    cloud puts in front of its listeners is read (AWS and Alibaba security groups, as firewall rules above; Google
    Cloud Armor; Alibaba ALB ACLs; Huawei ELB IP groups), and one it cannot read counts as admitting everyone."""
    for balancer in load_balancers(stack, discard):
        api = [listener for listener in balancer.listeners if _serves_api(balancer, listener)]
        if not balancer.internet_facing or not api:
            continue
        for resource, why in BALANCER_CALLERS[balancer.cloud](stack, balancer, api):
            kind = ("forwarding rule" if balancer.cloud == "gcp"
                    else "load balancer" if resource.urn == balancer.resource.urn else "listener")
            yield PublicEntry(resource.urn, f"the internet-facing {kind} {resource.name} admits public callers ({why})")


def _serves_api(balancer: LoadBalancer, listener: Listener) -> bool:
    """A listener that forwards requests: not plain HTTP that only redirects; on Google Cloud, one that routes to a
    backend service (a front end of backend buckets only is the static assets' CDN, which serves files)."""
    return not listener.redirects_to_https and (balancer.cloud != "gcp" or bool(listener.backends))


def _aws_callers(stack: Stack, balancer: LoadBalancer,
                 listeners: list[Listener]) -> Iterator[tuple[StackResource, str]]:
    """An ALB's security groups hold its callers: their rules are firewall openings (above), read when the stack
    creates them. Without one of the stack, the VPC's default security group (ALB's default) or a brought one
    decides."""
    named = known_items(stack, balancer.resource.props, "securityGroups")
    groups = linked_of(stack, balancer.resource, ("securityGroups",), *SECURITY_GROUP_TYPES)
    if not groups or len(named) > len(groups):
        yield balancer.resource, ("it names no security group of this stack, so the VPC's default security group or "
                                  "one the pack cannot read decides who may call it")


GCP_ARMOR_RULES = ("gcp:compute/securityPolicyRule:SecurityPolicyRule",
                   "gcp:compute/regionSecurityPolicyRule:RegionSecurityPolicyRule")
GCP_ARMOR_DEFAULT_PRIORITY = 2147483647
"""Cloud Armor's default rule: "There must always be a default rule (rule with priority 2147483647 and match "*"). If
no rules are provided when creating a security policy, a default rule with action "allow" will be added"
(pulumi_gcp compute.SecurityPolicy `rules`, read 2026-12-07)."""


def _gcp_callers(stack: Stack, balancer: LoadBalancer,
                 listeners: list[Listener]) -> Iterator[tuple[StackResource, str]]:
    """Google's load balancers take no firewall rule: a backend service's Cloud Armor policy holds its callers."""
    for listener in listeners:
        reasons = [why for backend in listener.backends if (why := _armor_admits(stack, backend.resource))]
        if reasons:
            yield listener.resource, "; ".join(dict.fromkeys(reasons))


def _armor_admits(stack: Stack, service: StackResource) -> str | None:
    """Why a backend service's Cloud Armor policy admits public callers; None when it admits private ones only."""
    named = stack.known(service.props, "securityPolicy")
    armors = linked_of(stack, service, ("securityPolicy",), *GCP_ARMOR_POLICIES)
    if not named and not armors:
        return f"backend service {service.name} has no Cloud Armor policy"
    if not armors:
        return (f"backend service {service.name} has Cloud Armor policy {named}, which this stack does not create, so "
                "the pack cannot read it")
    for armor in armors:
        found = [*stack.items(stack.known(armor.props, "rules")),
                 *(rule.props for rule in referring(stack, armor, ("securityPolicy",), *GCP_ARMOR_RULES))]
        if not any(integer(rule.get("priority")) == GCP_ARMOR_DEFAULT_PRIORITY for rule in found):
            return (f"Cloud Armor policy {armor.name} has no default rule (priority {GCP_ARMOR_DEFAULT_PRIORITY}), so "
                    "Google adds one that allows every address")
        for rule in sorted(found, key=lambda r: integer(r.get("priority")) or 0):
            admitted = _armor_rule_admits(rule)
            if admitted:
                return f"Cloud Armor policy {armor.name} allows {admitted} (rule {show(rule.get('priority'))})"
    return None


def _armor_rule_admits(rule: Mapping[str, Any]) -> str | None:
    """The public sources one Cloud Armor rule lets through; a rule that denies, or only previews ("the action is not
    enforced", pulumi_gcp), lets nothing through. Any other action (allow, throttle, rate_based_ban, redirect) admits
    what it matches; a match other than SRC_IPS_V1 ranges (an expression) cannot be read and counts as public."""
    if rule.get("preview") is True or str(rule.get("action") or "").lower().startswith("deny"):
        return None
    match = rule.get("match") or {}
    read = match.get("versionedExpr") == "SRC_IPS_V1"
    ranges = items((match.get("config") or {}).get("srcIpRanges")) if read else []
    if not ranges:
        return "an expression the pack cannot read"
    public = [str(r) for r in ranges if str(r).strip() == "*" or public_sources([r])]
    return ", ".join(public) or None


ALI_ACL = "alicloud:alb/acl:Acl"
ALI_ACL_ENTRY = "alicloud:alb/aclEntryAttachment:AclEntryAttachment"
ALI_LISTENER_ACL = "alicloud:alb/listenerAclAttachment:ListenerAclAttachment"


def _alibaba_callers(stack: Stack, balancer: LoadBalancer,
                     listeners: list[Listener]) -> Iterator[tuple[StackResource, str]]:
    """An ALB's callers: its security groups (their rules are firewall openings, above) when any is attached, else
    each listener's ACL."""
    if referring(stack, balancer.resource, ("loadBalancerId",), ALI_LB_SECURITY_GROUP):
        return
    for listener in listeners:
        why = _alibaba_acl_admits(stack, listener.resource)
        if why:
            yield listener.resource, why


def _alibaba_acl_admits(stack: Stack, listener: StackResource) -> str | None:
    """Why a listener's ACLs admit public callers (alb.ListenerAclAttachment, or the listener's deprecated
    `aclConfig`): "White: only requests from IP addresses ... in the selected access control list are forwarded";
    "Black: all requests from IP addresses ... in the selected access control list are not forwarded"; "If whitelist
    access is enabled but no IP addresses are added ... the listener forwards all requests" (pulumi_alicloud
    alb.ListenerAclAttachment `acl_type`, read 2026-12-07)."""
    bindings = [(str(stack.known(a.props, "aclType") or ""), linked_of(stack, a, ("aclId",), ALI_ACL),
                 stack.known(a.props, "aclId")) for a in referring(stack, listener, ("listenerId",), ALI_LISTENER_ACL)]
    config = stack.known(listener.props, "aclConfig") or {}
    bindings += [(str(config.get("aclType") or ""), linked_of(stack, listener, ("aclConfig",), ALI_ACL),
                  relation.get("aclId")) for relation in items(config.get("aclRelations"))]
    if not bindings:
        return "no security group is attached to the load balancer and the listener has no whitelist ACL"
    for acl_type, acls, acl_id in bindings:
        shown = acls[0].name if acls else acl_id
        if acl_type.lower() != "white":
            return (f"its ACL {shown} is a blacklist, which admits every address it does not list"
                    if acl_type.lower() == "black" else f"its ACL {shown} has type {acl_type or 'unset'}, which the "
                    "pack cannot read")
        if not acls:
            return f"its ACL {acl_id} is not one this stack creates, so the pack cannot read it"
        for acl in acls:
            entries = [e.get("entry") for e in stack.items(stack.known(acl.props, "aclEntries"))]
            for attached in referring(stack, acl, ("aclId",), ALI_ACL_ENTRY):
                entries += [stack.known(attached.props, "entry"),
                            *(e.get("entry") for e in stack.items(stack.known(attached.props, "entries")))]
            entries = [entry for entry in entries if entry]
            if not entries:
                return f"its whitelist ACL {acl.name} has no entry, which admits every address"
            public = public_sources(entries)
            if public:
                return f"its whitelist ACL {acl.name} admits {', '.join(public)}"
    return None


HW_IP_GROUP = "huaweicloud:DedicatedElb/ipgroup:Ipgroup"


def _huawei_callers(stack: Stack, balancer: LoadBalancer,
                    listeners: list[Listener]) -> Iterator[tuple[StackResource, str]]:
    """A dedicated ELB takes no security group: each listener's IP address group holds its callers."""
    for listener in listeners:
        why = _huawei_ip_group_admits(stack, listener.resource)
        if why:
            yield listener.resource, why


def _huawei_ip_group_admits(stack: Stack, listener: StackResource) -> str | None:
    """Why a listener's IP address group admits public callers (pulumi_huaweicloud DedicatedElb.Listener `ip_group`,
    `access_policy` white or black, `ip_group_enable`): "Whitelist: Only IP addresses in the IP address group can
    access the listener" and "Blacklist: IP addresses in the IP address group are denied" (support.huaweicloud.com
    usermanual-elb elb_ug_ip_0000, "Creating an IP Address Group", read 2026-12-07); an IP group's ip_list "[]
    indicates any IP address" (api-elb CreateIpGroup, read 2026-12-07)."""
    if not stack.known(listener.props, "ipGroup"):
        return "it has no IP address group (ipGroup)"
    enable = stack.known(listener.props, "ipGroupEnable")
    if boolean(enable) is False:
        return f"its access control is off (ipGroupEnable {show(enable)})"
    policy = str(stack.known(listener.props, "accessPolicy") or "").lower()
    if policy != "white":
        return ("its access policy is black, which admits every address the group does not list" if policy == "black"
                else "its access policy is unset (accessPolicy), so the pack cannot tell the group is a whitelist")
    groups = linked_of(stack, listener, ("ipGroup",), HW_IP_GROUP)
    if not groups:
        return (f"its IP address group {stack.known(listener.props, 'ipGroup')} is not one this stack creates, so the "
                "pack cannot read it")
    for group in groups:
        addresses = [entry.get("ip") for entry in stack.items(stack.known(group.props, "ipLists"))]
        if not addresses:
            return f"its IP address group {group.name} is empty, which admits every address"
        public = public_sources(addresses)
        if public:
            return f"its IP address group {group.name} admits {', '.join(public)}"
    return None


BALANCER_CALLERS: Mapping[str, Callable[[Stack, LoadBalancer, list[Listener]],
                                        Iterator[tuple[StackResource, str]]]] = {
    "aws": _aws_callers, "gcp": _gcp_callers, "alibaba": _alibaba_callers, "huawei": _huawei_callers}
"""What holds an internet-facing load balancer's callers, by cloud: (the resource at fault, why it admits the
public) for each listener, or the load balancer, that admits public callers."""


def _reads_secret(identity: ServerIdentity, secret: StackResource) -> bool:
    return secret.urn in identity.secrets or (
        "*" in identity.secrets and secret.resource_type in SECRET_TYPES[identity.cloud])


def _api_key_missing(stack: Stack) -> str | None:
    """Why the stack holds no API key its servers check: none stored, or none that the servers' identity may read
    (an unrelated secret named '*-api-key' is not theirs); None when every server identity reads one."""
    keys = [secret for secret in stack.of_type(*API_KEY_SECRETS) if secret.name.endswith(API_KEY_NAME_SUFFIX)]
    if not keys:
        return f"the stack stores no API key (no secret resource named '*{API_KEY_NAME_SUFFIX}')"
    names = ", ".join(sorted(key.name for key in keys))
    identities = server_identities(stack, discard)
    if not identities:
        return f"the stack has no server identity that may read its API key ({names})"
    for identity in identities:
        if not any(_reads_secret(identity, key) for key in keys):
            return (f"the servers' identity {identity.resource.name} may read none of the stack's API keys "
                    f"({names})")
    return None


def check_public_api_key(stack: Stack, report_violation: ReportViolation) -> None:
    public = [*_public_openings(stack), *_public_listeners(stack)]
    if not public:
        raise NotApplicable("nothing in the stack admits a public source (no firewall rule, and no internet-facing "
                            "load balancer whose callers are not limited to private networks)")
    missing = _api_key_missing(stack)
    if missing is not None:
        for entry in public:
            report_violation(f"{entry.what}, and {missing}: {API_KEY_FIX}", entry.urn)


PUBLIC_API_HAS_API_KEY = StackRule(
    "public-api-has-api-key",
    "A port or an internet-facing load balancer open to any public source comes with the servers' API key: "
    "a secret of the stack that the servers' identity may read.", check_public_api_key)

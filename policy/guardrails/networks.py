"""Networks, sources and openings: what a firewall rule of any of the four clouds lets in, on which ports, from
where (`openings`), and how exposed that is (`exposure`); the ports that may be public; the allow-list entries
that are not private. The rules that judge them live in `exposure`, `load_balancers` and `cache`.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardrails.core import integer, items, show
from guardrails.resource_types import (
    ALI_SECURITY_GROUP_RULE,
    AWS_DEFAULT_SECURITY_GROUP,
    AWS_INGRESS_RULE,
    AWS_SECURITY_GROUP,
    AWS_SECURITY_GROUP_RULE,
    GCP_FIREWALL,
    GCP_FIREWALL_POLICY_RULE,
    GCP_FIREWALL_POLICY_WITH_RULES,
    GCP_NETWORK_FIREWALL_POLICY_RULE,
    GCP_NETWORK_FIREWALL_POLICY_WITH_RULES,
    GCP_REGION_FIREWALL_POLICY_RULE,
    GCP_REGION_FIREWALL_POLICY_WITH_RULES,
    HW_SECURITY_GROUP_RULE,
)

#### Networks ####

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Networks that are not public exposure: RFC 1918, RFC 6598 (carrier-grade NAT, used by overlay VPNs) and RFC 4193
# (IPv6 unique local), as in inferstack.components.argument_checks; loopback and link-local never leave a host or a
# link.
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7",
    "127.0.0.0/8", "169.254.0.0/16", "::1/128", "fe80::/10"))
# Google's documented source range for IAP TCP forwarding: an SSH rule from it admits only IAM-authorised users
# (the GCP backend's managed-shell note tells users to add exactly this rule).
GCP_IAP_RANGE = ipaddress.ip_network("35.235.240.0/20")
ADMIN_PORTS = {22: "SSH", 3389: "RDP"}
ALL_PORTS = (0, 65535)
_PORT_PROTOCOLS = {"tcp", "udp", "sctp", "6", "17", "132"}
_PORTLESS_PROTOCOLS = {"icmp", "icmpv6", "gre", "esp", "ah", "ipip", "1", "58", "47", "50", "51", "4"}
_ANY_PROTOCOL = {"-1", "all"}


@dataclass(frozen=True)
class Source:
    """Where a rule admits traffic from."""

    text: str
    network: IPNetwork | None = None
    """The address range; None for a group of the cloud's own instances or a source that cannot be read."""
    internal: bool = False
    """A group of the cloud's own instances (security group, network tag, service account, VPC network)."""


def _cidr(value: Any) -> Source:
    if not isinstance(value, str):
        return Source(f"source {value!r}")
    try:
        return Source(value, ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        return Source(f"source {value!r}")


def _internal(text: str) -> Source:
    return Source(text, internal=True)


def _opaque(text: str) -> Source:
    """A source that holds addresses the pack cannot see (a prefix list, an address group): counts as public."""
    return Source(text)


def is_private(network: IPNetwork) -> bool:
    return any(network.version == p.version and network.subnet_of(p) for p in PRIVATE_NETWORKS)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Opening:
    """Ports that an allow rule opens to one source."""

    low: int
    high: int
    source: Source
    unread: str = ""
    """What about the ports could not be read (then low..high is every port)."""

    def covers(self, port: int) -> bool:
        return self.low <= port <= self.high

    def ports_are(self) -> str:
        return f"port {self.low} is" if self.low == self.high else f"ports {self.low}-{self.high} are"


def exposure(opening: Opening, resource_type: str) -> str:
    """"private", "iap" (Google's IAP forwarders, on Google Cloud), "public", or "unreadable" (counts as public)."""
    source = opening.source
    if source.internal:
        return "private"
    if source.network is None:
        return "unreadable"
    if is_private(source.network):
        return "private"
    if (resource_type.startswith("gcp:") and source.network.version == 4
            and source.network.subnet_of(GCP_IAP_RANGE)):  # type: ignore[arg-type]
        return "iap"
    return "public"


def _protocol(value: Any) -> str:
    """A protocol as one text: "tcp", "6", "-1", "all" ("-1.0" and -1.0 → "-1", "ALL" → "all")."""
    number = integer(value)
    return str(number) if number is not None else str(value if value is not None else "").strip().lower()


def _protocol_ports(protocol: str) -> str:
    """"ports" (ports apply), "all" (every port), "none" (no ports: ICMP, GRE ...) or "unreadable"."""
    if protocol in _ANY_PROTOCOL:
        return "all"
    if protocol in _PORT_PROTOCOLS:
        return "ports"
    if protocol in _PORTLESS_PROTOCOLS:
        return "none"
    number = integer(protocol)
    if number is not None and 0 <= number <= 255:
        return "all"  # AWS: any other protocol number opens every port, whatever range is given
    return "unreadable"


@dataclass(frozen=True)
class Span:
    low: int
    high: int
    unread: str = ""


def _span(low: Any, high: Any) -> Span:
    """A from/to port pair; missing or negative means every port."""
    if low is None and high is None:
        return Span(*ALL_PORTS)
    first, last = integer(low if low is not None else high), integer(high if high is not None else low)
    if first is None or last is None:
        return Span(*ALL_PORTS, unread=f"port range {show(low)}-{show(high)}")
    if first < 0 or last < 0:
        return Span(*ALL_PORTS)
    return Span(min(first, last), max(first, last))


def port_texts(ports: list[Any]) -> list[Span]:
    """"22", "8000-8010" (Google Cloud, Huawei `ports`), or numbers."""
    spans = []
    for text in ports:
        low, _, high = str(text).strip().partition("-")
        span = _span(low, high or low)
        spans.append(Span(*ALL_PORTS, unread=f"port {text!r}") if span.unread else span)
    return spans


def _spans(protocol: Any, port_spans: Callable[[], list[Span]]) -> list[Span]:
    """The port spans a rule opens for `protocol` (`port_spans` reads its ports when they apply)."""
    kind = _protocol_ports(_protocol(protocol))
    if kind == "none":
        return []
    if kind == "all":
        return [Span(*ALL_PORTS)]
    if kind == "unreadable":
        return [Span(*ALL_PORTS, unread=f"protocol {protocol!r}")]
    return port_spans()


def _openings(spans: list[Span], sources: list[Source]) -> Iterator[Opening]:
    for span in spans:
        for source in sources or [_opaque("no source")]:
            yield Opening(span.low, span.high, source, span.unread)


def _aws_sources(rule: Mapping[str, Any], cidrs: str, ipv6_cidrs: str, prefix_lists: str,
                 groups: Sequence[str]) -> list[Source]:
    sources = [_cidr(c) for c in items(rule.get(cidrs))] + [_cidr(c) for c in items(rule.get(ipv6_cidrs))]
    sources += [_opaque(f"prefix list {p}") for p in items(rule.get(prefix_lists))]
    sources += [_internal(f"security group {g}") for key in groups for g in items(rule.get(key))]
    if rule.get("self") is True:
        sources.append(_internal("the security group itself"))
    return sources


def _aws_ingress_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    sources = _aws_sources(props, "cidrIpv4", "cidrIpv6", "prefixListId", ["referencedSecurityGroupId"])
    yield from _openings(_spans(props.get("ipProtocol"), lambda: [_span(props.get("fromPort"), props.get("toPort"))]),
                         sources)


def _aws_inline_rule(rule: Mapping[str, Any], group_key: str) -> Iterator[Opening]:
    sources = _aws_sources(rule, "cidrBlocks", "ipv6CidrBlocks", "prefixListIds", [group_key])
    yield from _openings(_spans(rule.get("protocol"), lambda: [_span(rule.get("fromPort"), rule.get("toPort"))]),
                         sources)


def _aws_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("type") != "egress":
        yield from _aws_inline_rule(props, "sourceSecurityGroupId")


def _aws_security_group(props: Mapping[str, Any]) -> Iterator[Opening]:
    for rule in items(props.get("ingress")):
        yield from _aws_inline_rule(rule, "securityGroups")


def _gcp_firewall(props: Mapping[str, Any]) -> Iterator[Opening]:
    if str(props.get("direction") or "INGRESS").upper() != "INGRESS" or props.get("disabled") is True:
        return
    sources = [_cidr(s) for s in items(props.get("sourceRanges"))]
    sources += [_internal(f"network tag {t}") for t in items(props.get("sourceTags"))]
    sources += [_internal(f"service account {a}") for a in items(props.get("sourceServiceAccounts"))]
    if not sources:
        sources = [_cidr("0.0.0.0/0")]  # Google's default for an ingress rule that names no source
    for allow in items(props.get("allows")):
        ports = functools.partial(_gcp_ports, allow.get("ports"))
        yield from _openings(_spans(allow.get("protocol"), ports), sources)


def _gcp_ports(ports: Any) -> list[Span]:
    return port_texts(items(ports)) if items(ports) else [Span(*ALL_PORTS)]  # no ports: every port


_GCP_SCOPES_INSIDE = {"INTRA_VPC", "NON_INTERNET", "VPC_NETWORKS"}


def _gcp_policy_rule(rule: Mapping[str, Any]) -> Iterator[Opening]:
    """A rule of a (hierarchical, network or regional) firewall policy."""
    if str(rule.get("direction") or "INGRESS").upper() != "INGRESS" or rule.get("disabled") is True:
        return
    if str(rule.get("action") or "").lower() in ("deny", "goto_next"):
        return  # allow and apply_security_profile_group admit traffic; an unknown action counts as allow
    match = rule.get("match") or {}
    sources = [_cidr(s) for s in items(match.get("srcIpRanges"))]
    sources += [_opaque(f"address group {g}") for g in items(match.get("srcAddressGroups"))]
    sources += [_opaque(f"FQDN {f}") for f in items(match.get("srcFqdns"))]
    sources += [_opaque(f"region {r}") for r in items(match.get("srcRegionCodes"))]
    sources += [_opaque(f"threat list {t}") for t in items(match.get("srcThreatIntelligences"))]
    sources += [_internal(f"secure tag {(t or {}).get('name')}") for t in items(match.get("srcSecureTags"))]
    sources += [_internal(f"network {n}") for n in items(match.get("srcNetworks"))]
    scope = match.get("srcNetworkScope") or match.get("srcNetworkContext")
    if scope:
        sources.append(_internal(f"network scope {scope}") if str(scope).upper() in _GCP_SCOPES_INSIDE
                       else Source(f"srcNetworkScope {scope}", ipaddress.ip_network("0.0.0.0/0")))
    if not sources:
        sources = [_cidr("0.0.0.0/0")]
    layers = items(match.get("layer4Configs")) or [{"ipProtocol": "all"}]
    for layer in layers:
        ports = functools.partial(_gcp_ports, layer.get("ports"))
        yield from _openings(_spans(layer.get("ipProtocol"), ports), sources)


def _gcp_policy_rules(props: Mapping[str, Any]) -> Iterator[Opening]:
    for rule in items(props.get("rules")):
        yield from _gcp_policy_rule(rule)


def _alibaba_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("type") != "ingress" or str(props.get("policy") or "accept").lower() != "accept":
        return
    sources = [_cidr(s) for s in (props.get("cidrIp"), props.get("ipv6CidrIp")) if s]
    sources += [_opaque(f"prefix list {p}") for p in items(props.get("prefixListId"))]
    sources += [_internal(f"security group {g}") for g in items(props.get("sourceSecurityGroupId"))]
    yield from _openings(_spans(props.get("ipProtocol"), lambda: _alibaba_ports(props.get("portRange"))), sources)


def _alibaba_ports(port_range: Any) -> list[Span]:
    low, _, high = str(port_range if port_range is not None else "-1/-1").partition("/")
    span = _span(low, high or low)
    return [Span(*ALL_PORTS, unread=f"port range {port_range!r}") if span.unread else span]


def _huawei_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("direction") != "ingress" or str(props.get("action") or "allow").lower() == "deny":
        return
    sources = [_cidr(s) for s in items(props.get("remoteIpPrefix"))]
    sources += [_internal(f"security group {g}") for g in items(props.get("remoteGroupId"))]
    sources += [_opaque(f"address group {g}") for g in items(props.get("remoteAddressGroupId"))]
    if not sources:  # no remote: every address
        sources = [_cidr("::/0" if props.get("ethertype") == "IPv6" else "0.0.0.0/0")]
    protocol = props.get("protocol")
    yield from _openings(_spans(protocol if protocol not in (None, "") else "all", lambda: _huawei_ports(props)),
                         sources)


def _huawei_ports(props: Mapping[str, Any]) -> list[Span]:
    if props.get("ports"):  # "22,8000-8010"
        return port_texts(str(props["ports"]).split(","))
    return [_span(props.get("portRangeMin"), props.get("portRangeMax"))]


INGRESS_READERS: Mapping[str, Callable[[Mapping[str, Any]], Iterator[Opening]]] = {
    AWS_INGRESS_RULE: _aws_ingress_rule,
    AWS_SECURITY_GROUP_RULE: _aws_security_group_rule,
    AWS_SECURITY_GROUP: _aws_security_group,
    AWS_DEFAULT_SECURITY_GROUP: _aws_security_group,
    GCP_FIREWALL: _gcp_firewall,
    GCP_FIREWALL_POLICY_RULE: _gcp_policy_rule,
    GCP_NETWORK_FIREWALL_POLICY_RULE: _gcp_policy_rule,
    GCP_REGION_FIREWALL_POLICY_RULE: _gcp_policy_rule,
    GCP_FIREWALL_POLICY_WITH_RULES: _gcp_policy_rules,
    GCP_NETWORK_FIREWALL_POLICY_WITH_RULES: _gcp_policy_rules,
    GCP_REGION_FIREWALL_POLICY_WITH_RULES: _gcp_policy_rules,
    ALI_SECURITY_GROUP_RULE: _alibaba_security_group_rule,
    HW_SECURITY_GROUP_RULE: _huawei_security_group_rule,
}
"""Every resource type that can open a port to a server, and how to read what it opens."""

# Firewall-like types of the server networks that open nothing by themselves: groups and policies that hold no
# rules, rules that only filter what a security group already admits, associations, traffic mirroring.
OPENS_NOTHING = {
    "aws:ec2/vpcSecurityGroupRulesExclusive:VpcSecurityGroupRulesExclusive",
    "gcp:compute/firewallPolicy:FirewallPolicy",
    "gcp:compute/networkFirewallPolicy:NetworkFirewallPolicy",
    "gcp:compute/regionNetworkFirewallPolicy:RegionNetworkFirewallPolicy",
    "gcp:compute/networkFirewallPolicyPacketMirroringRule:NetworkFirewallPolicyPacketMirroringRule",
    "alicloud:ecs/securityGroup:SecurityGroup",
    "huaweicloud:Vpc/secgroup:Secgroup",
}
# The provider modules that hold the servers' firewalls; a firewall-like type there that the pack does not know
# counts as opening every port to the internet.
SERVER_NETWORK_MODULES = ("aws:ec2/", "aws:vpc/", "gcp:compute/", "alicloud:ecs/", "alicloud:vpc/",
                          "huaweicloud:Vpc/", "huaweicloud:Networking/", "huaweicloud:Ecs/")
_FIREWALL_WORDS = ("securitygroup", "secgroup", "firewall", "ingress")
_NOT_OPENING_WORDS = ("egress", "association", "attachment", "iam")


def unknown_ingress_type(resource_type: str) -> bool:
    """A firewall-like type of a server network that the pack cannot read (fail closed)."""
    if resource_type in INGRESS_READERS or resource_type in OPENS_NOTHING:
        return False
    kind = resource_type.rsplit(":", 1)[-1].lower()
    return (resource_type.startswith(SERVER_NETWORK_MODULES) and any(w in kind for w in _FIREWALL_WORDS)
            and not any(w in kind for w in _NOT_OPENING_WORDS))


def openings(resource_type: str, props: Mapping[str, Any]) -> list[Opening]:
    """What an ingress rule (or a security group's inline rules, a firewall policy's rules) lets in."""
    reader = INGRESS_READERS.get(resource_type)
    return list(reader(props)) if reader else []


#### Ports that may be public: the serving ports, a load balancer's listeners ####

DEFAULT_SERVING_PORTS = (8000,)
"""The inference API's port in every inferstack plan (`ServingConfig.port`); set `servingPorts` for others."""

SERVING_PORTS_SCHEMA: Mapping[str, Any] = {"servingPorts": {
    "type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535},
    "default": list(DEFAULT_SERVING_PORTS),
    "description": "Ports that may be open to public networks (the inference API)."}}


HTTPS_PORT, REDIRECT_PORT = 443, 80
LISTENER_PORTS = (HTTPS_PORT, REDIRECT_PORT)
"""A load balancer's public ports: HTTPS, and plain HTTP that only redirects to it (load-balancer-https-only). A
public rule may open them on the load balancer's own firewall only (load-balancer-only-public-listener)."""


def serving_ports(config: Mapping[str, Any]) -> tuple[int, ...]:
    ports = [integer(port) for port in items(config.get("servingPorts", DEFAULT_SERVING_PORTS))]
    return tuple(port for port in ports if port is not None)


#### Allow-lists (a cache's whitelist, a load balancer's access list): the entries that are not private ####


def public_sources(values: Any) -> list[str]:
    """The whitelist entries (IPs, CIDRs, or first-last ranges, comma-separated or listed) outside the private
    networks; anything unreadable counts as public."""
    public = []
    for value in items(values):
        for text in (part.strip() for part in str(value).split(",")):
            networks = _entry_networks(text)
            if networks is None or not all(is_private(n) or n.is_loopback for n in networks):
                public.append(text)
    return public


def _entry_networks(text: str) -> list[IPNetwork] | None:
    """"10.0.0.0/8" → [10.0.0.0/8]; "10.0.0.1-10.0.0.9" (a Huawei IP group's range) → the networks it spans; None
    when it cannot be read."""
    try:
        if "-" not in text:
            return [ipaddress.ip_network(text, strict=False)]
        first, last = (ipaddress.ip_address(end.strip()) for end in text.split("-", 1))
        return list(ipaddress.summarize_address_range(first, last))
    except (ValueError, TypeError):
        return None

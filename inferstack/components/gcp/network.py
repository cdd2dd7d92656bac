"""Google Cloud's network and firewall: a VPC network with one regional subnetwork (and for a fleet a private one
with Cloud NAT, and a proxy-only one), the range of a brought network, and firewall rules on the servers' network
tag.

Sections follow `CloudBackend` (inferstack/components/backend.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from inferstack.components.contract import FirewallRequest, FirewallResult, NetworkRequest, NetworkResult, StrOutput
from inferstack.components.gcp.naming import gcp_name
from inferstack.components.gcp.provider import client_project, result_field
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options
from inferstack.components.shared import SUBNET_RANGES, WEB_EGRESS_PORTS
from inferstack.errors import input_error

SUBNETWORKS_LOOKUP = "gcp:compute/getSubnetworks:getSubnetworks"

# Subnetworks are regional on GCP: one serves every zone of the region, in the first range of NETWORK_CIDR.
SUBNET_CIDR = SUBNET_RANGES[0]
# A fleet's network adds the servers' private subnetwork (egress through Cloud NAT), and the proxy-only subnetwork
# that a regional internal Application Load Balancer's Envoy proxies take their addresses from (purpose
# REGIONAL_MANAGED_PROXY; Google documents /26 as the smallest and recommends /23). It costs nothing unused.
PRIVATE_SUBNET_CIDR = SUBNET_RANGES[1]
PROXY_ONLY_CIDR = str(next(ipaddress.IPv4Network(SUBNET_RANGES[2]).subnets(new_prefix=23)))
# A fleet's network range (metrics, and Cloud Armor's "network only"): the smallest block holding its subnetworks.
FLEET_NETWORK_CIDR = str(ipaddress.IPv4Network(SUBNET_CIDR).supernet(new_prefix=18))

# Egress: WEB_EGRESS_PORTS, and nothing else (a deny-all egress rule sits below the allow). The metadata server
# (DNS, NTP, tokens) is always reachable on GCP.
ALLOW_PRIORITY = 1000
DENY_EGRESS_PRIORITY = 65000

# Where Google's load balancers reach the servers from ("Firewall rules", cloud.google.com/load-balancing/docs/
# firewall-rules): the global external Application Load Balancer's front ends (GFEs) and every health check probe
# (autohealing's too) come from these two ranges; a regional internal Application Load Balancer's Envoy proxies come
# from the network's proxy-only subnetwork in the region.
GOOGLE_LB_RANGES = ("130.211.0.0/22", "35.191.0.0/16")
PROXY_ONLY_PURPOSE = "REGIONAL_MANAGED_PROXY"


#### Network ####


def create_network(parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult:
    opts = child_options(parent)
    network = gcp.compute.Network(
        f"{name}-vpc", auto_create_subnetworks=False, routing_mode="REGIONAL",
        description="inferstack inference servers", opts=opts)
    # Private Google Access: Cloud Storage and Secret Manager are reached over Google's network.
    subnet = gcp.compute.Subnetwork(
        f"{name}-subnet", network=network.id, ip_cidr_range=SUBNET_CIDR, private_ip_google_access=True,
        description="inferstack inference servers, every zone of the region", opts=opts)
    # One regional subnetwork serves every zone: the servers are spread over zones by create_servers.
    if not request.private_servers:
        return NetworkResult(network_id=network.id, subnet_ids=[subnet.id] * request.zones,
                             cidr_block=subnet.ip_cidr_range)
    private, proxy_only, nat = _fleet_subnetworks(name, network, opts)
    # Ready once every subnetwork and the NAT exist: a server booted in it has egress, and a lookup of the
    # network's proxy-only subnetwork (create_firewall) finds it.
    ready = pulumi.Output.all(network.id, proxy_only.id, nat.id).apply(lambda ids: ids[0])
    private_ready = pulumi.Output.all(private.id, nat.id).apply(lambda ids: ids[0])
    return NetworkResult(network_id=ready, subnet_ids=[subnet.id] * request.zones,
                         cidr_block=pulumi.Output.from_input(FLEET_NETWORK_CIDR),
                         private_subnet_ids=[private_ready] * request.zones)


def network_cidr(parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
    # A VPC network has no range of its own: the smallest block that covers its subnetworks in the region.
    subnets = gcp.compute.get_subnetworks_output(
        filter=pulumi.Output.from_input(network_id).apply(_network_filter), opts=invoke_options(parent))
    found = answered(subnets.subnetworks, f"{SUBNETWORKS_LOOKUP} subnetworks")
    return found.apply(lambda subnetworks: covering_cidr([result_field(s, "ip_cidr_range") for s in subnetworks]))


def _network_filter(network_id: str) -> str:
    """The subnetworks.list filter for a network given by name, id or self link (RE2, whole-field match)."""
    name = network_id.rstrip("/").rsplit("/", 1)[-1]
    return f"network eq .*/networks/{name}"


def _fleet_subnetworks(name: str, network: gcp.compute.Network, opts: pulumi.ResourceOptions
                       ) -> tuple[gcp.compute.Subnetwork, gcp.compute.Subnetwork, gcp.compute.RouterNat]:
    """The servers' private subnetwork with Cloud NAT egress, and the proxy-only subnetwork of an internal load
    balancer (Google's requirement for a regional internal Application Load Balancer: one ACTIVE per network and
    region)."""
    private = gcp.compute.Subnetwork(
        f"{name}-private", network=network.id, ip_cidr_range=PRIVATE_SUBNET_CIDR, private_ip_google_access=True,
        description="inferstack fleet servers: no external address, egress through Cloud NAT", opts=opts)
    proxy_only = gcp.compute.Subnetwork(
        f"{name}-proxy-only", network=network.id, ip_cidr_range=PROXY_ONLY_CIDR, purpose=PROXY_ONLY_PURPOSE,
        role="ACTIVE", description="Envoy proxies of a regional internal Application Load Balancer", opts=opts)
    router = gcp.compute.Router(f"{name}-router", name=gcp_name(name, "router"), network=network.id,
                                description="inferstack fleet: Cloud NAT", opts=opts)
    # NAT for the private subnetwork only (LIST_OF_SUBNETWORKS); the firewall's egress rules still allow 80 and 443
    # only. Google allocates the NAT addresses (AUTO_ONLY); errors are logged.
    nat = gcp.compute.RouterNat(
        f"{name}-nat", name=gcp_name(name, "nat"), router=router.name, region=router.region,
        nat_ip_allocate_option="AUTO_ONLY", source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
        subnetworks=[{"name": private.id, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
        log_config={"enable": True, "filter": "ERRORS_ONLY"}, opts=opts)
    return private, proxy_only, nat


def covering_cidr(ranges: Sequence[str]) -> str:
    """The smallest CIDR block that contains every range (its subnetworks' ranges for a brought network)."""
    if not ranges:
        raise input_error("network_id", "has no subnetwork in this region", fix="bring a network with a subnetwork "
                          "in the plan's region, or let inferstack create the network")
    networks = [ipaddress.ip_network(r) for r in ranges]
    block = networks[0]
    while not all(n.version == block.version and n.subnet_of(block) for n in networks):  # type: ignore[arg-type]
        if block.prefixlen == 0:
            raise input_error("network_id", "has IPv4 and IPv6 subnetworks", value=list(ranges),
                              fix="give securityGroupIds (network tags) of your own firewall rules")
        block = block.supernet()
    return str(block)


def proxy_only_filter(network_id: str, project: str) -> str:
    """The subnetworks.list filter for the network's proxy-only subnetworks (the network given by name, id or self
    link). Two fields: each comparison in parentheses, exact values (regular expressions take one field only)."""
    path = network_id.rstrip("/").split("/compute/v1/")[-1]
    if "/" not in path:
        path = f"projects/{project}/global/networks/{path}"
    return (f'(purpose = "{PROXY_ONLY_PURPOSE}") '
            f'(network = "https://www.googleapis.com/compute/v1/{path}")')


def proxy_only_ranges(parent: pulumi.Resource, network_id: pulumi.Input[str]) -> pulumi.Output[list[str]]:
    """The ranges of the network's proxy-only subnetworks in the provider's region, looked up (none: empty)."""
    invoke = invoke_options(parent)
    query = pulumi.Output.all(network_id, client_project(parent)).apply(
        lambda v: proxy_only_filter(str(v[0]), str(v[1])))
    found = answered(gcp.compute.get_subnetworks_output(filter=query, opts=invoke).subnetworks,
                     f"{SUBNETWORKS_LOOKUP} subnetworks")
    return found.apply(lambda subnets: sorted(str(result_field(s, "ip_cidr_range")) for s in subnets))


#### Firewall ####


def create_firewall(parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
    opts = child_options(parent)
    # Rules target servers by this network tag, which create_servers and create_fleet put on each instance.
    tag = gcp_name(name, "server")
    if request.load_balanced:
        rules = [_ingress(f"{name}-api-lb", request, tag, request.serving_port, _load_balancer_sources(
            parent, request.network_id), "inference API: Google's load balancers and health checks only", opts)]
    else:
        rules = [_ingress(f"{name}-api-{label}", request, tag, request.serving_port, [cidr], "inference API",
                          opts) for label, cidr in request.api_sources()]
    if request.metrics_port is not None:
        rules.append(_ingress(f"{name}-metrics", request, tag, request.metrics_port, [request.network_cidr],
                              "metrics, network only", opts))
    rules.append(gcp.compute.Firewall(
        f"{name}-egress-web", name=gcp_name(name, "egress-web"), network=request.network_id, direction="EGRESS",
        allows=[{"protocol": "tcp", "ports": [str(port) for port in WEB_EGRESS_PORTS.values()]}],
        destination_ranges=["0.0.0.0/0"], target_tags=[tag], priority=ALLOW_PRIORITY,
        description="http and https for drivers, packages, models", opts=opts))
    rules.append(gcp.compute.Firewall(
        f"{name}-egress-deny", name=gcp_name(name, "egress-deny"), network=request.network_id,
        direction="EGRESS", denies=[{"protocol": "all"}], destination_ranges=["0.0.0.0/0"], target_tags=[tag],
        priority=DENY_EGRESS_PRIORITY, description="no other egress", opts=opts))
    # The tag resolves once every rule exists: a server that takes it boots behind the whole firewall.
    ready = pulumi.Output.all(tag, *(rule.id for rule in rules)).apply(lambda ids: ids[0])
    return FirewallResult(firewall_id=ready)


def _ingress(resource_name: str, request: FirewallRequest, tag: str, port: int,
             sources: pulumi.Input[Sequence[pulumi.Input[str]]], purpose: str,
             opts: pulumi.ResourceOptions) -> gcp.compute.Firewall:
    return gcp.compute.Firewall(
        resource_name, name=gcp_name(resource_name), network=request.network_id, direction="INGRESS",
        allows=[{"protocol": "tcp", "ports": [str(port)]}], source_ranges=sources, target_tags=[tag],
        priority=ALLOW_PRIORITY, description=purpose, opts=opts)


def _load_balancer_sources(parent: pulumi.Resource, network_id: pulumi.Input[str]) -> pulumi.Output[list[str]]:
    """Who reaches a fleet's serving port: Google's front ends and health checks, and the network's proxy-only
    subnetworks (a regional internal load balancer's proxies). The firewall cannot tell which load balancer the
    fleet takes, so it admits both; neither is `allowed_cidrs` (Cloud Armor limits those at the load balancer)."""
    return proxy_only_ranges(parent, network_id).apply(lambda proxies: [*GOOGLE_LB_RANGES, *proxies])

"""The network of Alibaba servers: a VPC with one vSwitch per zone, and for a fleet a private vSwitch per zone with
NAT egress; the servers' security group, and a fleet's load balancer's own.

Sections follow `CloudBackend` (inferstack/components/backend.py): Network, then Firewall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_alicloud as alicloud

from inferstack.components.alibaba.load_balancer import ALB_MIN_ZONES, LISTENER_PORTS
from inferstack.components.contract import FirewallRequest, FirewallResult, NetworkRequest, NetworkResult, StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options
from inferstack.components.shared import NETWORK_CIDR, SUBNET_RANGES, WEB_EGRESS_PORTS, first_zones, nth
from inferstack.errors import input_error

# Public address for egress (drivers, packages, containers), billed per GB (PayByTraffic): the bandwidth is a
# ceiling, not a reservation. 100 Mbit/s is the provider's documented maximum for internet_max_bandwidth_out; a
# fleet's NAT gateway gets an EIP with the same ceiling (ecs.EipAddress: 1-200 Mbit/s for PayByTraffic).
PUBLIC_BANDWIDTH_MBPS = 100
# A fleet's private vSwitches start at the ninth /20 of NETWORK_CIDR (10.64.128.0/20): the public ones keep theirs
# whatever the zone count, so adding a zone never renumbers a vSwitch.
PRIVATE_SUBNET_OFFSET = 8

# Egress: WEB_EGRESS_PORTS, and DNS and NTP to Alibaba's in-VPC services (100.100.2.136/138 resolvers, NTP servers
# and the metadata server 100.100.100.200 all sit in 100.100.0.0/16). Everything else leaving the server is dropped.
CLOUD_SERVICES_CIDR = "100.100.0.0/16"
CLOUD_SERVICE_PORTS = (("dns-udp", "udp", 53), ("dns-tcp", "tcp", 53), ("ntp", "udp", 123))
ACCEPT_PRIORITY = 1  # security-group rule priorities run 1 (first) to 100 (last)
DROP_PRIORITY = 100

#### Network ####


def create_network(parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult:
    opts = child_options(parent)
    vpc = alicloud.vpc.Network(f"{name}-vpc", vpc_name=f"{name}-vpc", cidr_block=NETWORK_CIDR,
                               description="inferstack inference servers", tags=request.tags, opts=opts)
    # A fleet's load balancer needs two zones (ALB_MIN_ZONES), in zones where ALB runs.
    count = max(request.zones, ALB_MIN_ZONES) if request.private_servers else request.zones
    zones = _zones_offering(parent, request.instance_type, count, load_balancer=request.private_servers)

    def switch(label: str, index: int, cidr_block: str) -> alicloud.vpc.Switch:
        return alicloud.vpc.Switch(
            f"{name}-{label}-{index}", vswitch_name=f"{name}-{label}-{index}", vpc_id=vpc.id,
            cidr_block=cidr_block, zone_id=zones.apply(nth(index)), tags=request.tags, opts=opts)

    public = [switch("vswitch", index, SUBNET_RANGES[index]).id for index in range(count)]
    # No gateway or endpoint to add for these: a single server reaches the internet through its own public
    # address, and OSS through its internal endpoint (oss-<region>-internal), which every VPC reaches free.
    if not request.private_servers:
        return NetworkResult(network_id=vpc.id, subnet_ids=public, cidr_block=vpc.cidr_block)
    private = [switch("private-vswitch", index, SUBNET_RANGES[PRIVATE_SUBNET_OFFSET + index]).id
               for index in range(count)]
    _nat_egress(parent, name, vpc.id, public[0], private, request.tags)
    return NetworkResult(network_id=vpc.id, subnet_ids=public, cidr_block=vpc.cidr_block,
                         private_subnet_ids=private)


def network_cidr(parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
    ids = pulumi.Output.from_input(network_id).apply(lambda vpc_id: [vpc_id])
    found = alicloud.vpc.get_networks_output(ids=ids, opts=invoke_options(parent))
    cidrs = answered(found.vpcs, "alicloud:vpc/getNetworks:getNetworks vpcs").apply(
        lambda vpcs: [str(vpc.cidr_block) for vpc in vpcs])
    return pulumi.Output.all(network_id, cidrs).apply(lambda facts: _only_network_cidr(*facts))


def _zones_offering(parent: pulumi.Resource, instance_type: str, count: int, *,
                    load_balancer: bool = False) -> pulumi.Output[list[str]]:
    """The first `count` zones (by id) where the instance type is on sale and vSwitches can be created; with
    `load_balancer`, also where ALB runs."""
    found = alicloud.get_zones_output(available_instance_type=instance_type, available_resource_creation="VSwitch",
                                      opts=invoke_options(parent))
    offering = answered(found.zones, "alicloud:index/getZones:getZones zones").apply(
        lambda zones: sorted(zone.id for zone in zones))
    if not load_balancer:
        return offering.apply(lambda zones: first_zones(zones, count, instance_type))
    alb_zones = answered(alicloud.alb.get_zones_output(opts=invoke_options(parent)).zones,
                         "alicloud:alb/getZones:getZones zones").apply(lambda zones: {zone.zone_id for zone in zones})
    return pulumi.Output.all(offering, alb_zones).apply(lambda found: first_zones(
        [zone for zone in found[0] if zone in found[1]], count, f"{instance_type} (in a zone with ALB)"))


def _nat_egress(parent: pulumi.Resource, name: str, vpc_id: StrOutput, nat_vswitch_id: StrOutput,
                private_vswitch_ids: Sequence[StrOutput], tags: Mapping[str, str]) -> None:
    """Internet egress for the private vSwitches: an enhanced NAT gateway with one EIP, and a SNAT entry each.

    An enhanced NAT gateway adds the VPC's default route (0.0.0.0/0) to itself in the system route table; SNAT
    entries decide which vSwitches it translates, so the public vSwitches (the load balancer's) are not among them.
    """
    opts = child_options(parent)
    nat = alicloud.vpc.NatGateway(
        f"{name}-nat", nat_gateway_name=f"{name}-nat", vpc_id=vpc_id, vswitch_id=nat_vswitch_id,
        nat_type="Enhanced", network_type="internet", payment_type="PayAsYouGo", internet_charge_type="PayByLcu",
        description="inferstack: egress of the private vSwitches", tags=tags, opts=opts)
    address = alicloud.ecs.EipAddress(
        f"{name}-nat-eip", address_name=f"{name}-nat-eip", payment_type="PayAsYouGo",
        internet_charge_type="PayByTraffic", bandwidth=str(PUBLIC_BANDWIDTH_MBPS),
        description="inferstack: the NAT gateway's egress address", tags=tags, opts=opts)
    bound = alicloud.ecs.EipAssociation(f"{name}-nat-eip-association", allocation_id=address.id,
                                        instance_id=nat.id, instance_type="Nat", opts=opts)
    for index, vswitch_id in enumerate(private_vswitch_ids):
        # A SNAT entry needs the EIP bound to the gateway first.
        alicloud.vpc.SnatEntry(f"{name}-snat-{index}", snat_entry_name=f"{name}-snat-{index}",
                               snat_table_id=nat.snat_table_ids, snat_ip=address.ip_address,
                               source_vswitch_id=vswitch_id, opts=child_options(parent, depends_on=[bound]))


def _only_network_cidr(network_id: str, cidrs: Sequence[str]) -> str:
    if len(cidrs) != 1:
        raise input_error("network_id", "is not a VPC in this region", value=network_id,
                          fix="give the id of an existing VPC (vpc-...) in the provider's region")
    return cidrs[0]


#### Firewall ####


def create_firewall(parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
    opts = child_options(parent)
    group = alicloud.ecs.SecurityGroup(
        f"{name}-sg", security_group_name=f"{name}-sg", vpc_id=request.network_id, security_group_type="normal",
        # Replicas never talk to each other: no implicit traffic between members of the group.
        inner_access_policy="Drop",
        description="inferstack inference server: API to the "
        f"{'load balancer in the VPC' if request.load_balanced else 'allowed networks'}, metrics inside the VPC",
        tags=request.tags, opts=opts)
    if request.load_balanced:
        # ALB reaches its servers, and health-checks them, from local addresses in its own vSwitches ("An
        # upgraded ALB instance uses local IP addresses from its vSwitch CIDR block to communicate with backend
        # servers", ALB health checks): inside the VPC. The allowed networks reach the load balancer, not this.
        _rule(f"{name}-api-load-balancer", group, "ingress", "tcp", request.serving_port, request.network_cidr,
              "inference API, from the load balancer in the VPC", opts)
    else:
        for label, cidr in request.api_sources():
            _rule(f"{name}-api-{label}", group, "ingress", "tcp", request.serving_port, cidr, "inference API",
                  opts)
    if request.metrics_port is not None:
        _rule(f"{name}-metrics", group, "ingress", "tcp", request.metrics_port, request.network_cidr,
              "metrics, VPC only", opts)
    for label, port in WEB_EGRESS_PORTS.items():
        _rule(f"{name}-egress-{label}", group, "egress", "tcp", port, "0.0.0.0/0",
              f"{label} for drivers, packages, models", opts)
    for label, protocol, port in CLOUD_SERVICE_PORTS:
        _rule(f"{name}-egress-{label}", group, "egress", protocol, port, CLOUD_SERVICES_CIDR,
              f"{label} to Alibaba's in-VPC services", opts)
    alicloud.ecs.SecurityGroupRule(
        f"{name}-egress-drop-rest", security_group_id=group.id, type="egress", ip_protocol="all",
        port_range="-1/-1", cidr_ip="0.0.0.0/0", policy="drop", priority=DROP_PRIORITY, nic_type="intranet",
        description="everything else leaving the server", opts=opts)
    load_balancer = _load_balancer_firewall(parent, name, request) if request.load_balanced else None
    return FirewallResult(firewall_id=group.id, load_balancer_firewall_id=load_balancer)


def _load_balancer_firewall(parent: pulumi.Resource, name: str, request: FirewallRequest) -> StrOutput:
    """The load balancer's security group: 443 and 80 from the API's sources, dropped from everyone else.

    "By default, whether or not the ALB instance is associated with a security group, its listener ports accept all
    inbound requests. Adding a security group with only Allow rules does not change this behavior. To restrict
    access to specific IP addresses, add at least one Deny rule" (ALB: use security groups as whitelists).
    """
    opts = child_options(parent)
    group = alicloud.ecs.SecurityGroup(
        f"{name}-lb-sg", security_group_name=f"{name}-lb-sg", vpc_id=request.network_id,
        security_group_type="normal", inner_access_policy="Drop",
        description="inferstack load balancer: HTTPS and HTTP from the allowed networks", tags=request.tags,
        opts=opts)
    for listener, port in LISTENER_PORTS.items():
        for label, cidr in request.api_sources():
            _rule(f"{name}-lb-{listener}-{label}", group, "ingress", "tcp", port, cidr, f"{listener} callers", opts)
        alicloud.ecs.SecurityGroupRule(
            f"{name}-lb-{listener}-drop-rest", security_group_id=group.id, type="ingress", ip_protocol="tcp",
            port_range=f"{port}/{port}", cidr_ip="0.0.0.0/0", policy="drop", priority=DROP_PRIORITY,
            nic_type="intranet", description=f"{listener} from anyone else", opts=opts)
    return group.id


def _rule(resource_name: str, group: alicloud.ecs.SecurityGroup, direction: str, protocol: str, port: int,
          cidr: pulumi.Input[str], purpose: str, opts: pulumi.ResourceOptions) -> None:
    """One accepted port; intranet is the only NIC type a VPC security group has."""
    ipv6 = isinstance(cidr, str) and ":" in cidr
    alicloud.ecs.SecurityGroupRule(
        resource_name, security_group_id=group.id, type=direction, ip_protocol=protocol, port_range=f"{port}/{port}",
        cidr_ip=None if ipv6 else cidr, ipv6_cidr_ip=cidr if ipv6 else None, policy="accept",
        priority=ACCEPT_PRIORITY, nic_type="intranet", description=purpose, opts=opts)

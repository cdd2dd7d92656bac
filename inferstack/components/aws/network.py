"""The network and the firewall: a VPC with a public subnet per zone (and, for a fleet, a private one behind a NAT
gateway per zone), a gateway endpoint to S3; the servers' security group and, for a fleet, the load balancer's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from inferstack.components.aws.lookups import provider_region
from inferstack.components.aws.tags import named
from inferstack.components.contract import (
    FirewallRequest,
    FirewallResult,
    NetworkRequest,
    NetworkResult,
    StrOutput,
)
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options
from inferstack.components.shared import NETWORK_CIDR, SUBNET_RANGES, WEB_EGRESS_PORTS, first_zones, nth
from inferstack.errors import Problem

# A fleet's network: the private subnets take the upper half of the VPC's /20s, so that adding zones never moves a
# subnet. An Application Load Balancer needs subnets in two Availability Zones at least (ELB User Guide,
# "Application Load Balancers", subnets), so a fleet's network has two or more zones even when its plan asks for one.
PRIVATE_SUBNET_OFFSET = len(SUBNET_RANGES) // 2
LOAD_BALANCER_MIN_ZONES = 2

# The load balancer's listeners: HTTPS, and HTTP, which only redirects to it. Its security group opens both.
LISTENER_PORTS: Mapping[str, int] = {"https": 443, "http": 80}

#### Network ####


def create_network(parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult:
    opts = child_options(parent)
    vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=NETWORK_CIDR, enable_dns_support=True,
                      enable_dns_hostnames=True, tags=named(request.tags, f"{name}-vpc"), opts=opts)
    gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=named(request.tags, f"{name}-igw"),
                                      opts=opts)
    routes = aws.ec2.RouteTable(f"{name}-public", vpc_id=vpc.id,
                                routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": gateway.id}],
                                tags=named(request.tags, f"{name}-public"), opts=opts)
    zone_count = _network_zones(request)
    zones = _zones_offering(parent, request.instance_type, zone_count)
    subnet_ids, private_subnet_ids, route_table_ids = [], [], [routes.id]
    for index in range(zone_count):
        zone = zones.apply(nth(index))
        # A fleet's public subnets hold only the load balancer and the NAT gateways: nothing there needs an
        # address of its own.
        subnet = aws.ec2.Subnet(
            f"{name}-subnet-{index}", vpc_id=vpc.id, cidr_block=SUBNET_RANGES[index],
            availability_zone=zone, map_public_ip_on_launch=not request.private_servers,
            tags=named(request.tags, f"{name}-subnet-{index}"), opts=opts)
        aws.ec2.RouteTableAssociation(f"{name}-subnet-{index}-routes", subnet_id=subnet.id,
                                      route_table_id=routes.id, opts=opts)
        subnet_ids.append(subnet.id)
        if request.private_servers:
            private = _private_subnet(parent, name, index, vpc.id, zone, subnet.id, gateway, request.tags)
            private_subnet_ids.append(private.subnet_id)
            route_table_ids.append(private.route_table_id)
    # Model downloads stay on the AWS network and cost no data-transfer fee (gateway endpoints are free); from
    # private subnets they also bypass the NAT gateway's per-GB charge.
    region = provider_region(parent)
    aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, vpc_endpoint_type="Gateway",
                        service_name=region.apply(lambda r: f"com.amazonaws.{r}.s3"),
                        route_table_ids=route_table_ids, tags=named(request.tags, f"{name}-s3"), opts=opts)
    return NetworkResult(network_id=vpc.id, subnet_ids=subnet_ids, cidr_block=vpc.cidr_block,
                         private_subnet_ids=private_subnet_ids)


def network_cidr(parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
    return answered(aws.ec2.get_vpc_output(id=network_id, opts=invoke_options(parent)).cidr_block,
                    "aws:ec2/getVpc:getVpc cidrBlock")


def private_zones_problem(zones: int, field: str) -> Problem | None:
    """A fleet's created network holds PRIVATE_SUBNET_OFFSET zones: more than that is refused up front
    (`AwsBackend.fleet_problems`)."""
    if zones <= PRIVATE_SUBNET_OFFSET:
        return None
    return Problem(field, f"a fleet's network holds {PRIVATE_SUBNET_OFFSET} zones (a public and a private /20 in "
                   "each)", value=zones, fix=f"plan for {PRIVATE_SUBNET_OFFSET} zones or fewer, or bring your own "
                   "subnets")


def _network_zones(request: NetworkRequest) -> int:
    """Zones to create subnets in: the plan's; a fleet's at least the load balancer's two (and no more than the
    private half of the VPC's ranges holds, which `private_zones_problem` checked before anything was created)."""
    if not request.private_servers:
        return request.zones
    assert request.zones <= PRIVATE_SUBNET_OFFSET, "a fleet's zones are checked up front (private_zones_problem)"
    return max(request.zones, LOAD_BALANCER_MIN_ZONES)


@dataclass(frozen=True)
class _PrivateSubnet:
    subnet_id: StrOutput
    route_table_id: StrOutput


def _private_subnet(parent: pulumi.Resource, name: str, index: int, vpc_id: StrOutput, zone: StrOutput,
                    public_subnet_id: StrOutput, gateway: aws.ec2.InternetGateway,
                    tags: Mapping[str, str]) -> _PrivateSubnet:
    """A subnet whose servers have no public address and reach the internet through a NAT gateway in their own zone
    (one per zone: a zone's outage never cuts the others' egress; each costs an hourly fee and a per-GB charge)."""
    opts = child_options(parent)
    address = aws.ec2.Eip(f"{name}-nat-{index}-ip", domain="vpc", tags=named(tags, f"{name}-nat-{index}"),
                          opts=opts)
    # A public NAT gateway routes through the VPC's internet gateway, so it waits for it (as the "Public NAT" example
    # of pulumi_aws ec2/nat_gateway.py does); an Elastic IP's id is its allocation id.
    nat = aws.ec2.NatGateway(f"{name}-nat-{index}", allocation_id=address.id, subnet_id=public_subnet_id,
                             connectivity_type="public", tags=named(tags, f"{name}-nat-{index}"),
                             opts=child_options(parent, depends_on=[gateway]))
    routes = aws.ec2.RouteTable(f"{name}-private-{index}", vpc_id=vpc_id,
                                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                                tags=named(tags, f"{name}-private-{index}"), opts=opts)
    subnet = aws.ec2.Subnet(
        f"{name}-private-subnet-{index}", vpc_id=vpc_id, cidr_block=SUBNET_RANGES[PRIVATE_SUBNET_OFFSET + index],
        availability_zone=zone, map_public_ip_on_launch=False, tags=named(tags, f"{name}-private-subnet-{index}"),
        opts=opts)
    aws.ec2.RouteTableAssociation(f"{name}-private-subnet-{index}-routes", subnet_id=subnet.id,
                                  route_table_id=routes.id, opts=opts)
    return _PrivateSubnet(subnet_id=subnet.id, route_table_id=routes.id)


def _zones_offering(parent: pulumi.Resource, instance_type: str, count: int) -> pulumi.Output[list[str]]:
    """The first `count` Availability Zones (by name) that offer the machine type: not every zone has every GPU.

    The offerings also list Local Zones and Wavelength Zones the account opted into, whose names sort first
    (us-west-2-lax-1a); they lack services a server here needs and bill differently, so only zones whose opt-in
    status is `opt-in-not-required` count: Availability Zones proper (pulumi_aws get_availability_zones, "Only
    Availability Zones (no Local Zones)").
    """
    invoke = invoke_options(parent)
    offerings = aws.ec2.get_instance_type_offerings_output(
        location_type="availability-zone", filters=[{"name": "instance-type", "values": [instance_type]}],
        opts=invoke)
    regular = aws.get_availability_zones_output(
        state="available", filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}], opts=invoke)

    offered = answered(offerings.locations, "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings locations")
    available = answered(regular.names, "aws:index/getAvailabilityZones:getAvailabilityZones names")
    return pulumi.Output.all(offered, available).apply(
        lambda found: first_zones(sorted(set(found[0]) & set(found[1])), count, instance_type))


#### Firewall ####


def create_firewall(parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
    opts = child_options(parent)
    group = aws.ec2.SecurityGroup(
        f"{name}-sg", vpc_id=request.network_id,
        description="inferstack inference server: API to allowed networks, metrics inside the VPC",
        tags=named(request.tags, f"{name}-sg"), opts=opts)
    load_balancer_group = None
    if request.load_balanced:
        # The API port admits the load balancer's security group only: its nodes (requests and health checks
        # alike) carry that group; allowed_cidrs reach the load balancer, never the servers.
        load_balancer_group = load_balancer_security_group(
            parent, name, request.network_id, request.api_sources(), [group.id], request.serving_port,
            request.tags)
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-api-from-load-balancer", security_group_id=group.id, ip_protocol="tcp",
            from_port=request.serving_port, to_port=request.serving_port,
            referenced_security_group_id=load_balancer_group.id, description="inference API, load balancer only",
            tags=request.tags, opts=opts)
    else:
        for label, cidr in request.api_sources():
            _ingress(f"{name}-api-{label}", group, request.serving_port, cidr, "inference API", request.tags, opts)
    if request.metrics_port is not None:
        _ingress(f"{name}-metrics", group, request.metrics_port, request.network_cidr, "metrics, VPC only",
                 request.tags, opts)
    for label, port in WEB_EGRESS_PORTS.items():
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-egress-{label}", security_group_id=group.id, ip_protocol="tcp", from_port=port,
            to_port=port, cidr_ipv4="0.0.0.0/0", description=f"{label} for drivers, packages, models",
            tags=request.tags, opts=opts)
    return FirewallResult(firewall_id=group.id,
                          load_balancer_firewall_id=load_balancer_group.id if load_balancer_group else None)


def load_balancer_security_group(parent: pulumi.Resource, name: str, network_id: pulumi.Input[str],
                                 sources: Sequence[tuple[str, pulumi.Input[str]]],
                                 server_groups: Sequence[pulumi.Input[str]], serving_port: int,
                                 tags: Mapping[str, str]) -> aws.ec2.SecurityGroup:
    """The load balancer's security group: HTTPS, and HTTP (which only redirects), from `sources`; out to the
    servers' API port only (a Pulumi-created group has no egress rule of its own)."""
    opts = child_options(parent)
    group = aws.ec2.SecurityGroup(
        f"{name}-lb-sg", vpc_id=network_id,
        description="inferstack load balancer: HTTPS (and HTTP, redirected) from allowed networks",
        tags=named(tags, f"{name}-lb-sg"), opts=opts)
    for label, cidr in sources:
        for listener, port in LISTENER_PORTS.items():
            _ingress(f"{name}-lb-{listener}-{label}", group, port, cidr, f"{listener} to the load balancer", tags,
                     opts)
    for index, server_group in enumerate(server_groups):
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-lb-to-servers-{index}", security_group_id=group.id, ip_protocol="tcp", from_port=serving_port,
            to_port=serving_port, referenced_security_group_id=server_group,
            description="requests and health checks to the servers' API port", tags=tags, opts=opts)
    return group


def _ingress(resource_name: str, group: aws.ec2.SecurityGroup, port: int, cidr: pulumi.Input[str], purpose: str,
             tags: Mapping[str, str], opts: pulumi.ResourceOptions) -> None:
    ipv6 = isinstance(cidr, str) and ":" in cidr
    aws.vpc.SecurityGroupIngressRule(
        resource_name, security_group_id=group.id, ip_protocol="tcp", from_port=port, to_port=port,
        cidr_ipv4=None if ipv6 else cidr, cidr_ipv6=cidr if ipv6 else None, description=purpose, tags=tags,
        opts=opts)

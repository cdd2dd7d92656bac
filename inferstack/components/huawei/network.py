"""Huawei Cloud network and firewall: a VPC with a subnet per zone (a fleet's servers in private subnets of their
own), NAT egress for servers without a public address, elastic IPs, and the servers' security group."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_huaweicloud as hw

from inferstack.components.contract import (
    FirewallRequest,
    FirewallResult,
    NetworkRequest,
    NetworkResult,
    StrOutput,
)
from inferstack.components.huawei.lookups import VPC_LOOKUP, lookup_field, zones_offering
from inferstack.components.naming import child_options
from inferstack.components.shared import NETWORK_CIDR, SUBNET_RANGES, nth
from inferstack.errors import Problem

# A fleet's private subnets take the upper half of the network's range (10.64.128.0/20, ...): one more zone moves no
# subnet.
PRIVATE_SUBNET_OFFSET = len(SUBNET_RANGES) // 2
FLEET_NETWORK_ZONES = len(SUBNET_RANGES) - PRIVATE_SUBNET_OFFSET
"""The zones a fleet's created network holds: a private subnet in each."""

# Huawei Cloud's private DNS servers and NTP are on its intranet range 100.125.0.0/16 (such as 100.125.1.250).
HUAWEI_INTRANET_CIDR = "100.125.0.0/16"
ANYWHERE_IPV4 = "0.0.0.0/0"
# Egress the bootstrap needs: HTTPS (OBS, CSMS, model hub, container registries, NVIDIA), HTTP (Ubuntu mirrors
# serve apt over HTTP; packages are signed; also the metadata service), DNS and NTP on the intranet. A security
# group created with delete_default_rules=True has no egress rule at all.
EGRESS_RULES: Mapping[str, tuple[str, int, str, str]] = {
    "https": ("tcp", 443, ANYWHERE_IPV4, "https for drivers, packages, models, secrets"),
    "http": ("tcp", 80, ANYWHERE_IPV4, "http for Ubuntu mirrors and the metadata service"),
    "dns-udp": ("udp", 53, HUAWEI_INTRANET_CIDR, "Huawei private DNS"),
    "dns-tcp": ("tcp", 53, HUAWEI_INTRANET_CIDR, "Huawei private DNS"),
    "ntp": ("udp", 123, HUAWEI_INTRANET_CIDR, "Huawei NTP"),
}

# Elastic IPs: dynamic BGP ("5_bgp"; some regions sell static BGP only, "5_sbgp"), a dedicated bandwidth billed
# by traffic.
EIP_TYPE = "5_bgp"
EIP_BANDWIDTH_MBIT_S = 100
# NAT gateway spec "1" (small): up to 10,000 SNAT connections, plenty for a few servers' downloads.
NAT_GATEWAY_SPEC = "1"


#### Network ####


def create_network(parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult:
    vpc = hw.vpc.Vpc(f"{name}-vpc", cidr=NETWORK_CIDR, description=f"inferstack {name}", tags=request.tags,
                     opts=child_options(parent))
    zones = zones_offering(parent, request.instance_type, request.zones)
    subnets = [_subnet(parent, f"{name}-subnet-{index}", vpc, index, zones.apply(nth(index)),
                       f"inferstack {name}, zone {index}", request.tags) for index in range(request.zones)]
    if not request.private_servers:
        _nat_egress(parent, name, vpc, subnets[0], subnets, request.tags)
        return NetworkResult(network_id=vpc.id, subnet_ids=[subnet.id for subnet in subnets], cidr_block=vpc.cidr)
    # A fleet: the subnets above hold only the load balancer (with its elastic IP when internet-facing); the
    # servers take addresses in private subnets that reach the internet through the NAT gateway only.
    assert request.zones <= FLEET_NETWORK_ZONES, "InferenceServer refuses more zones up front (fleet_zones_problem)"
    private = [_subnet(parent, f"{name}-private-subnet-{index}", vpc, PRIVATE_SUBNET_OFFSET + index,
                       zones.apply(nth(index)), f"inferstack {name}, zone {index}, servers (NAT egress)",
                       request.tags) for index in range(request.zones)]
    _nat_egress(parent, name, vpc, subnets[0], private, request.tags)
    return NetworkResult(network_id=vpc.id, subnet_ids=[subnet.id for subnet in subnets], cidr_block=vpc.cidr,
                         private_subnet_ids=[subnet.id for subnet in private])


def network_cidr(parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
    return lookup_field(parent, VPC_LOOKUP, {"id": network_id}, "cidr").apply(str)


def fleet_zones_problem(zones: int, *, field: str) -> Problem | None:
    """A fleet planned over more zones than its created network holds (a private subnet in each)."""
    if zones <= FLEET_NETWORK_ZONES:
        return None
    return Problem(field, f"a fleet's network has room for {FLEET_NETWORK_ZONES} zones", value=zones,
                   fix="plan for fewer zones, or bring your own network")


def _subnet(parent: pulumi.Resource, resource: str, vpc: hw.vpc.Vpc, range_index: int, zone: pulumi.Input[str],
            description: str, tags: Mapping[str, str]) -> hw.vpc.Subnet:
    cidr = SUBNET_RANGES[range_index]
    # Huawei subnets route through their first address.
    return hw.vpc.Subnet(resource, vpc_id=vpc.id, cidr=cidr,
                         gateway_ip=str(ipaddress.IPv4Network(cidr).network_address + 1), availability_zone=zone,
                         description=description, tags=tags, opts=child_options(parent))


def _nat_egress(parent: pulumi.Resource, name: str, vpc: hw.vpc.Vpc, gateway_subnet: hw.vpc.Subnet,
                subnets: Sequence[hw.vpc.Subnet], tags: Mapping[str, str]) -> None:
    """Outbound internet for servers that have no public address: one NAT gateway, one SNAT rule per subnet."""
    opts = child_options(parent)
    gateway = hw.nat.Gateway(f"{name}-nat", vpc_id=vpc.id, subnet_id=gateway_subnet.id, spec=NAT_GATEWAY_SPEC,
                             description=f"inferstack {name}: egress for drivers, packages, models", tags=tags,
                             opts=opts)
    address = eip(parent, f"{name}-nat-eip", tags)
    for index, subnet in enumerate(subnets):
        hw.nat.SnatRule(f"{name}-snat-{index}", nat_gateway_id=gateway.id, floating_ip_id=address.id,
                        subnet_id=subnet.id, description=f"inferstack {name}, zone {index}", opts=opts)


def eip(parent: pulumi.Resource, resource: str, tags: Mapping[str, str], **options: Any) -> hw.vpc.Eip:
    """An elastic IP with a bandwidth of its own: the NAT gateway's, a public server's, an internet-facing load
    balancer's."""
    return hw.vpc.Eip(resource, publicip={"type": EIP_TYPE},
                      bandwidth={"share_type": "PER", "name": resource, "size": EIP_BANDWIDTH_MBIT_S,
                                 "charge_mode": "traffic"},
                      tags=tags, opts=child_options(parent, **options))


#### Firewall ####


def create_firewall(parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
    opts = child_options(parent)
    # Without delete_default_rules the group keeps Huawei's defaults: all egress, and all ingress from members.
    callers = "the load balancer" if request.load_balanced else "allowed networks"
    group = hw.vpc.Secgroup(
        f"{name}-sg", delete_default_rules=True,
        description=f"inferstack inference server: API to {callers}, metrics inside the VPC",
        tags=request.tags, opts=opts)
    if request.load_balanced:
        # A dedicated ELB takes no security group: it reaches its backends, health checks included, from
        # addresses of its backend subnet in the VPC (ELB user guide, "Configuring Security Group Rules for
        # Backend Servers"). The allowed CIDRs are checked at the load balancer (its IP address group).
        _rule(f"{name}-api-load-balancer", group, "ingress", "tcp", request.serving_port, request.network_cidr,
              "inference API, from the load balancer's subnets in the VPC", opts)
    else:
        for label, cidr in request.api_sources():
            _rule(f"{name}-api-{label}", group, "ingress", "tcp", request.serving_port, cidr, "inference API",
                  opts)
    if request.metrics_port is not None:
        _rule(f"{name}-metrics", group, "ingress", "tcp", request.metrics_port, request.network_cidr,
              "metrics, VPC only", opts)
    for label, (protocol, port, cidr, purpose) in EGRESS_RULES.items():
        _rule(f"{name}-egress-{label}", group, "egress", protocol, port, cidr, purpose, opts)
    return FirewallResult(firewall_id=group.id)


def _rule(resource: str, group: hw.vpc.Secgroup, direction: str, protocol: str, port: int,
          cidr: pulumi.Input[str], purpose: str, opts: pulumi.ResourceOptions) -> None:
    ipv6 = isinstance(cidr, str) and ":" in cidr
    hw.vpc.SecgroupRule(resource, security_group_id=group.id, direction=direction,
                        ethertype="IPv6" if ipv6 else "IPv4", protocol=protocol, port_range_min=port,
                        port_range_max=port, remote_ip_prefix=cidr, description=purpose, opts=opts)

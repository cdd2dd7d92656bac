"""The network components: a `Network` (subnets per zone, egress) and the `Firewall` that opens the serving port.

Both are public components (`inferstack.components`), and children of InferenceServer, which hands them requests it
has already checked (`BackendComponent.from_request`).

The components are also a Pulumi package for other languages (`provider/`): the schema is read from the `*Args`
TypedDicts and the output annotations as live types, so this module does not use `from __future__ import
annotations` (see inference_server.py).
"""

from collections.abc import Mapping, Sequence

import pulumi
from pydantic import with_config
from typing_extensions import NotRequired, TypedDict

from inferstack.components.argument_checks import ARGS_CONFIG, parse_cidrs, validate_args
from inferstack.components.backend import BackendComponent, CloudBackend, backend_for
from inferstack.components.contract import FirewallRequest, NetworkRequest
from inferstack.components.naming import resource_tags
from inferstack.errors import InputError

#### Network ####


@with_config(ARGS_CONFIG)
class NetworkArgs(TypedDict):
    cloud: str
    """Cloud to create the network on: aws, gcp, alibaba or huawei."""
    instance_type: str
    """Machine type the servers will use: only zones that offer it get a subnet."""
    zones: NotRequired[int]
    """Availability zones to spread over, one public subnet each (default 1)."""
    private_servers: NotRequired[bool]
    """Add one private subnet per zone, with NAT egress, for servers without a public address (a fleet)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class Network(BackendComponent[NetworkRequest]):
    """A minimal network: one public subnet per zone, internet egress, a private path to object storage.

    A single server gets a public address for egress (drivers, packages) without a NAT gateway's hourly cost; the
    Firewall decides who may reach it. A fleet's servers have no public address: with `private_servers` each zone
    also gets a private subnet with NAT egress, and the public subnets hold only the load balancer.
    """

    network_id: pulumi.Output[str]
    """Id of the created network (AWS VPC id)."""
    subnet_ids: pulumi.Output[list[str]]
    """The public subnets, one per zone, in zone order."""
    private_subnet_ids: pulumi.Output[list[str]]
    """With private_servers: the private subnets, one per zone, in zone order (else empty)."""
    cidr_block: pulumi.Output[str]
    """Address range of the network."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(NetworkArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        problems = backend.network_problems(checked.get("zones", 1), field=f"{name}.zones",
                                            private_servers=checked.get("private_servers", False))
        if problems:
            raise InputError(problems)
        self._create(name, backend, NetworkRequest(
            zones=checked.get("zones", 1), instance_type=checked["instance_type"],
            tags=resource_tags(checked.get("tags", {})), private_servers=checked.get("private_servers", False)), opts)

    def _create(self, name: str, backend: CloudBackend, request: NetworkRequest,
                opts: pulumi.ResourceOptions | None) -> None:
        super().__init__("inferstack:index:Network", name, None, opts)
        result = backend.create_network(self, name, request)
        self.subnets = result.subnet_ids
        self.private_subnets = result.private_subnet_ids
        self.network_id = result.network_id
        self.subnet_ids = pulumi.Output.all(*result.subnet_ids)
        self.private_subnet_ids = pulumi.Output.all(*result.private_subnet_ids)
        self.cidr_block = result.cidr_block
        self.register_outputs({"network_id": self.network_id, "subnet_ids": self.subnet_ids,
                               "private_subnet_ids": self.private_subnet_ids, "cidr_block": self.cidr_block})


#### Firewall ####


@with_config(ARGS_CONFIG)
class FirewallArgs(TypedDict):
    cloud: str
    """Cloud of the network: aws, gcp, alibaba or huawei."""
    network_id: pulumi.Input[str]
    """Network the firewall belongs to (AWS VPC id)."""
    network_cidr: pulumi.Input[str]
    """Address range of that network: metrics, and the API when no CIDR is allowed, are open to it only."""
    port: int
    """Port of the inference API."""
    metrics_port: NotRequired[int | None]
    """Separate metrics port, reachable from inside the network only."""
    allowed_cidrs: NotRequired[Sequence[str]]
    """Networks that may call the API; empty (default) keeps it reachable from the network only."""
    load_balanced: NotRequired[bool]
    """A fleet: the API port admits the load balancer only; the allowed networks reach the load balancer."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class Firewall(BackendComponent[FirewallRequest]):
    """Opens the inference port to the allowed networks and nothing else; SSH stays closed.

    Operators reach servers through the cloud's managed shell (AWS Session Manager). Egress is explicit,
    limited to HTTP and HTTPS, which the bootstrap needs for drivers, packages and model files.
    """

    firewall_id: pulumi.Output[str]
    """Id of the firewall the servers attach (AWS security group id)."""
    load_balancer_firewall_id: pulumi.Output[str | None]
    """With load_balanced, on clouds whose load balancer takes one: its firewall (AWS security group id)."""

    def __init__(self, name: str, args: FirewallArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(FirewallArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        networks, problems = parse_cidrs(checked.get("allowed_cidrs", ()), f"{name}.allowed_cidrs")
        if problems:
            raise InputError(problems)
        self._create(name, backend, firewall_request(
            network_id=checked["network_id"], network_cidr=checked["network_cidr"], port=checked["port"],
            metrics_port=checked.get("metrics_port"), allowed_cidrs=tuple(str(n) for n in networks),
            load_balanced=checked.get("load_balanced", False), tags=resource_tags(checked.get("tags", {}))), opts)

    def _create(self, name: str, backend: CloudBackend, request: FirewallRequest,
                opts: pulumi.ResourceOptions | None) -> None:
        super().__init__("inferstack:index:Firewall", name, None, opts)
        result = backend.create_firewall(self, name, request)
        self.firewall_id = result.firewall_id
        self.load_balancer_firewall_id = pulumi.Output.from_input(result.load_balancer_firewall_id)
        self.register_outputs({"firewall_id": self.firewall_id,
                               "load_balancer_firewall_id": self.load_balancer_firewall_id})


def firewall_request(*, network_id: pulumi.Input[str], network_cidr: pulumi.Input[str], port: int,
                     metrics_port: int | None, allowed_cidrs: tuple[str, ...], load_balanced: bool,
                     tags: Mapping[str, str]) -> FirewallRequest:
    """The request for a firewall with checked values (`allowed_cidrs` normalised); metrics on the serving port
    open no port of their own."""
    return FirewallRequest(network_id=network_id, network_cidr=network_cidr, serving_port=port,
                           metrics_port=None if metrics_port == port else metrics_port, allowed_cidrs=allowed_cidrs,
                           tags=tags, load_balanced=load_balanced)

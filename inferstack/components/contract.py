"""The contract between components and clouds: what a component asks of its backend, and what the backend returns.

A backend method (`CloudBackend`, backend.py) receives the component that parents the resources it creates, the
component's name (every child is named `f"{name}-<role>"`, so two servers in one stack never collide) and one frozen
request record below, checked before anything was created. It returns a result record of Outputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi

from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.names import slug
from inferstack.plan import DeploymentPlan

StrOutput = pulumi.Output[str]


@dataclass(frozen=True)
class NetworkRequest:
    zones: int
    """Subnets to create, one per availability zone."""
    instance_type: str
    """Only zones that offer this machine type are used."""
    tags: Mapping[str, str]
    private_servers: bool = False
    """The servers get no public address (a fleet): add one private subnet per zone with NAT egress (drivers,
    packages, images, the model hub); the public subnets stay for the load balancer."""


@dataclass(frozen=True)
class NetworkResult:
    network_id: StrOutput
    subnet_ids: list[StrOutput]
    """The public subnets, one per zone, in zone order (loose servers; an internet-facing load balancer)."""
    cidr_block: StrOutput
    private_subnet_ids: list[StrOutput] = field(default_factory=list)
    """With `private_servers`: one per zone, in zone order, egress through NAT."""


@dataclass(frozen=True)
class FirewallRequest:
    network_id: pulumi.Input[str]
    network_cidr: pulumi.Input[str]
    """Traffic from inside the network (metrics, and the API when no CIDR is allowed)."""
    serving_port: int
    metrics_port: int | None
    """A metrics port of its own, opened to the network only; None when metrics share the serving port."""
    allowed_cidrs: tuple[str, ...]
    """Normalised CIDRs that may reach the serving port; empty keeps it network-only."""
    tags: Mapping[str, str]
    load_balanced: bool = False
    """A fleet: the serving port admits the load balancer (and its health checks) only, never `allowed_cidrs`; where
    the cloud's load balancer takes a firewall of its own, it is created here too (443 and 80 from
    `api_sources()`)."""

    def api_sources(self) -> list[tuple[str, pulumi.Input[str]]]:
        """(label, CIDR) of each network the serving port opens to: the allowed CIDRs, or else the server's network."""
        return [(slug(cidr), cidr) for cidr in self.allowed_cidrs] or [("network", self.network_cidr)]


@dataclass(frozen=True)
class FirewallResult:
    firewall_id: StrOutput
    load_balancer_firewall_id: StrOutput | None = None
    """With `load_balanced`, on clouds whose load balancer takes one: its firewall."""


@dataclass(frozen=True)
class ModelStoreRequest:
    force_destroy: bool
    """Delete non-empty buckets on destroy (non-production stages only)."""
    tags: Mapping[str, str]


@dataclass(frozen=True)
class ModelStoreResult:
    model_bucket: StrOutput
    """Model files, read by the server under the plan's prefix."""
    data_bucket: StrOutput
    """User uploads (`uploads/`) and results (`results/`); the server gets no access by default."""
    logs_bucket: StrOutput
    """Access logs of the other buckets."""


@dataclass(frozen=True)
class StaticAssetsRequest:
    existing_bucket: pulumi.Input[str] | None
    """Serve this bucket instead of creating one (nothing is created for it)."""
    logs_bucket: pulumi.Input[str] | None
    domain: str | None
    """The domain the CDN serves (checked: a lowercase DNS name); None only where the CDN has a hostname of its own
    (Capability.CDN_DEFAULT_HOSTNAME)."""
    certificate: str | None
    """The domain's certificate in the cloud's certificate service (checked against `assets_certificate`); None
    where the cloud issues one itself, or without a domain."""
    force_destroy: bool
    tags: Mapping[str, str]


@dataclass(frozen=True)
class StaticAssetsResult:
    bucket: StrOutput
    url: StrOutput
    """HTTPS URL of the CDN."""
    required_bucket_policy: StrOutput | None
    """For a brought bucket: the policy its owner must add so that only this CDN can read it."""


@dataclass(frozen=True)
class BundleRequest:
    bucket: pulumi.Input[str]
    """The model bucket (created, or brought)."""
    key: StrOutput
    """Content-addressed key under `bootstrap.render.BUNDLE_PREFIX`: a new bundle is a new object."""
    content: StrOutput
    """The bundle's JSON text; the server checks it against the sha256 in its user data."""
    tags: Mapping[str, str]


@dataclass(frozen=True)
class SecretsRequest:
    values: Mapping[str, pulumi.Input[str]]
    """Secret values by short name (`api-key`, `hub-token`)."""
    tags: Mapping[str, str]


@dataclass(frozen=True)
class SecretsResult:
    refs: Mapping[str, StrOutput]
    """What the server passes to the secret store to read each secret (never the value)."""
    grant_ids: list[StrOutput]
    """Identifiers to grant read access on (ARNs, resource names)."""


@dataclass(frozen=True)
class IdentityRequest:
    model_bucket: pulumi.Input[str]
    model_prefix: str
    """Read-only access (list and get) is limited to this prefix (ends in '/')."""
    bundle_prefix: str
    """Objects the server may also get (not list): its boot bundles (`bootstrap.render.BUNDLE_PREFIX`)."""
    secret_ids: Sequence[StrOutput]
    tags: Mapping[str, str]
    telemetry_grants: Sequence[StrOutput] = ()
    """What the servers' monitoring agent writes to, in the cloud's terms (`TelemetryResult.grants`): the identity
    may write there and nowhere else."""
    model_reader: bool = False
    """The runtime streams the weights (`plan.startup.model_loading: stream`): it gets a role of its own that may only
    read `model_prefix`, and only this identity may assume it (`IdentityResult.model_reader_id`)."""


@dataclass(frozen=True)
class IdentityResult:
    identity_id: StrOutput
    """The identity's cloud id (AWS role ARN)."""
    attachment: StrOutput
    """What a server attaches to take the identity (AWS instance profile name)."""
    model_reader_id: StrOutput | None = None
    """The runtime's own role, for `IdentityRequest.model_reader` (AWS role ARN); None without one."""


@dataclass(frozen=True)
class ServersRequest:
    plan: DeploymentPlan
    subnet_ids: Sequence[pulumi.Input[str]]
    """Replica i goes to subnet i modulo len(subnet_ids)."""
    firewall_ids: Sequence[pulumi.Input[str]]
    attachment: pulumi.Input[str]
    user_data: StrOutput
    public_endpoint: bool
    """The API is open beyond private networks (an allowed CIDR is public). A cloud whose servers otherwise have
    no public address (Huawei: egress through NAT) gives each one."""
    protected: bool
    """The servers carry the cloud's deletion flag (Capability.TERMINATION_PROTECTION) and Pulumi's `protect`
    (`server_options`); False lifts both in place, so that the next change can replace them."""
    tags: Mapping[str, str]


@dataclass(frozen=True)
class ServersResult:
    instance_ids: list[StrOutput]
    public_ips: list[StrOutput]
    """Empty string for a server without a public address."""
    private_ips: list[StrOutput]


@dataclass(frozen=True)
class FleetRequest:
    """A plan with a fleet (`plan.fleet`): its numbers are the group's size, health grace, scaling target and
    cooldowns; `plan.request_timeout_s` the load balancer's timeouts; `plan.serving` its port and health path."""

    plan: DeploymentPlan
    network_id: pulumi.Input[str]
    server_subnet_ids: Sequence[pulumi.Input[str]]
    """Private subnets, one per zone: the group spreads over them; servers get no public address."""
    load_balancer_subnet_ids: Sequence[pulumi.Input[str]]
    """Where the load balancer lives: public subnets when internet-facing, else the server subnets."""
    firewall_ids: Sequence[pulumi.Input[str]]
    """The servers' firewalls (their serving port admits the load balancer only)."""
    load_balancer_firewall_id: pulumi.Input[str] | None
    attachment: pulumi.Input[str]
    user_data: StrOutput
    internet_facing: bool
    """An allowed CIDR is public: an internet-facing load balancer; otherwise an internal one."""
    allowed_cidrs: tuple[str, ...]
    """Who may call the endpoint; empty: the network only."""
    network_cidr: pulumi.Input[str]
    api_domain: str
    """The endpoint's DNS name (a lowercase DNS name, checked); you point it at `load_balancer_address`."""
    api_certificate: str | None
    """Its certificate in the cloud's certificate service (`CloudBackend.api_certificate`); None where the cloud
    issues one for the domain."""
    protected: bool
    tags: Mapping[str, str]
    canary: CanaryRequest | None = None
    """The plan's canary (`plan.canary`): a second group behind the same load balancer, with weighted routing."""

    def for_canary(self) -> FleetRequest:
        """The request for the canary's group: its plan, identity and boot script; the same network and endpoint."""
        assert self.canary is not None, "for_canary needs a canary"
        return dataclasses.replace(self, plan=self.canary.plan, attachment=self.canary.attachment,
                                   user_data=self.canary.user_data, canary=None)


@dataclass(frozen=True)
class CanaryRequest:
    """A canary group: built as the main group is (`FleetRequest.for_canary`), from its own plan and boot script."""

    plan: DeploymentPlan
    """The canary version's plan, its fleet sized for its share of the requests (sizing/canary.py)."""
    weight: int
    """Percent of the requests the load balancer sends to the canary group; the main group takes the rest."""
    attachment: pulumi.Input[str]
    """The canary servers' identity (it reads the canary model's prefix)."""
    user_data: StrOutput

    @property
    def main_weight(self) -> int:
        return 100 - self.weight


@dataclass(frozen=True)
class FleetResult:
    endpoint_url: StrOutput
    """https://<api_domain>"""
    load_balancer_address: StrOutput
    """The load balancer's DNS name or address, where the API domain must point."""
    group_id: StrOutput
    """The managed group's id."""
    watched: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """What the fleet's alarms watch, in the cloud's own terms (`create_alarms` of the same backend reads it): the
    load balancer's, server group's and managed group's ids or names, by role."""


@dataclass(frozen=True)
class AlarmsRequest:
    """The alarms of a fleet (`observability.alarm_rules` of its plan), on the metrics its backend publishes."""

    plan: DeploymentPlan
    fleet: FleetResult
    notification_target: str | None
    """Where alarms notify (`CloudBackend.notification_target`, checked); None: nowhere, their state shows in the
    cloud's console (Alibaba: a contact group is created, its alarms need one)."""
    tags: Mapping[str, str]
    telemetry: TelemetryResult | None = None
    """Where the servers' agent sends its metrics (the GPU-memory and disk alarms read them); None: no agent."""


@dataclass(frozen=True)
class AlarmsResult:
    alarm_ids: list[StrOutput]
    """The fleet's alarms: one per rule of `alarm_rules` (in their order), then the cloud's others (the agent's
    GPU-memory and disk alarms, the canary group's own)."""


@dataclass(frozen=True)
class TelemetryRequest:
    """Where a deployment's servers send their metrics and logs through the cloud's agent (`bootstrap.telemetry`)."""

    plan: DeploymentPlan
    protected: bool
    """A production deployment: its logs are kept when the stack is destroyed."""
    tags: Mapping[str, str]


@dataclass(frozen=True)
class TelemetryResult:
    target: pulumi.Output[TelemetryTarget]
    """What the servers' agent is told (the bundle carries it)."""
    grants: Sequence[StrOutput]
    """What the agent writes to, for the identity's least-privilege grant (`IdentityRequest.telemetry_grants`)."""


@dataclass(frozen=True)
class CacheRequest:
    """A plan with a cache (`plan.cache`): the managed Redis the servers' gateways keep deterministic answers in."""

    plan: DeploymentPlan
    network_id: pulumi.Input[str]
    subnet_ids: Sequence[pulumi.Input[str]]
    """The servers' subnets (private ones for a fleet): the Redis is placed in them, in zone order."""
    network_cidr: pulumi.Input[str]
    server_firewall_ids: Sequence[pulumi.Input[str]]
    """The servers' firewalls (security groups; the network tag on Google Cloud): the only sources the Redis admits."""
    firewall_created: bool
    """The servers' firewalls are this stack's: their egress to the Redis port is opened here too (a brought one is
    its owner's to open)."""
    auth_token: pulumi.Input[str] | None
    """The AUTH token (a Pulumi secret, CACHE_AUTH_TOKEN_PATTERN); None where the cloud generates it
    (`CloudBackend.cache_generates_auth`)."""
    highly_available: bool
    """A replica in a second zone with automatic failover (production)."""
    protected: bool
    tags: Mapping[str, str]


@dataclass(frozen=True)
class CacheResult:
    host: StrOutput
    """The Redis endpoint's private address or DNS name."""
    port: pulumi.Output[int]
    """Its TLS port."""
    auth_token: StrOutput
    """The AUTH token to store in the secret store (secret): the one given, or the cloud's generated one."""
    ca_certificate: pulumi.Output[str | None]
    """PEM CA certificate(s) to verify the server with; None: the system trust store."""
    verify: bool

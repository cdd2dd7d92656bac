"""What every cloud shares: the backend interface, capabilities with reasons, the registry, names and checks.

A cloud is one module, `inferstack/components/<cloud>.py`, named after the cloud id (`aws`, `gcp`, `alibaba`,
`huawei`). It defines one `CloudBackend` subclass decorated with `@register_backend`, with the methods below in
the same order under the same `#### Section ####` banners. The components in `server.py` are cloud-neutral:
they validate their arguments, then call the backend's methods; they never branch on the cloud.

A backend method receives the component that parents the resources it creates, the component's name (every
child is named `f"{name}-<role>"`, so two servers in one stack never collide) and a frozen request record. It
returns a result record of Outputs. Requests and results are the contract between components and clouds.

What is the same logic on every cloud lives here too, once: the network range and retention choices, gzip'd user
data checked against the plan's region, zone selection, and the offline preview's answers (`PreviewAnswers`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib
import importlib.util
import ipaddress
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any, ClassVar, TypeVar

import pulumi
from pydantic import ConfigDict, TypeAdapter, ValidationError

from inferstack.bootstrap.render import user_data_gzip
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.components.observability import AlarmKind
from inferstack.errors import InputError, Problem, input_error, with_article
from inferstack.extras import require_cloud
from inferstack.plan import DeploymentPlan
from inferstack.spec import CLOUDS, problems_from_validation

#### Capabilities ####


class Capability(str, Enum):
    """Security and operations features whose availability differs between clouds."""

    METADATA_HARDENING = "metadata-hardening"
    """The instance metadata service demands session tokens, so an SSRF cannot read the server's credentials."""
    BUCKET_PUBLIC_ACCESS_BLOCK = "bucket-public-access-block"
    """A bucket setting that rejects public ACLs and policies, whatever is written later; with it no ACL can open a
    bucket (ACLs are off, or public ones are ignored)."""
    TLS_ONLY_STORAGE = "tls-only-storage"
    """Each bucket refuses requests made over plain HTTP, by a setting or policy of its own."""
    PRIVATE_CDN_ORIGIN = "private-cdn-origin"
    """The CDN reads a private bucket with its own identity; the bucket never becomes public."""
    CDN_DEFAULT_HOSTNAME = "cdn-default-hostname"
    """The CDN serves HTTPS on a hostname of its own, so static assets need no domain (`assets_domain`)."""
    PREFIX_SCOPED_GRANTS = "prefix-scoped-grants"
    """The server's identity can be limited to one prefix of one bucket."""
    MANAGED_SHELL = "managed-shell"
    """Operators get a shell through the cloud's API, so no SSH port is opened."""
    SECRET_STORE = "secret-store"
    """Secrets live in a managed store and are read by the server at boot, never placed in user data."""
    SECRET_SCOPED_GRANTS = "secret-scoped-grants"
    """The server's identity can be limited to reading its own secrets, each named in the grant."""
    TERMINATION_PROTECTION = "termination-protection"
    """Protected servers (production, by default) carry a cloud flag that refuses their deletion by any API call
    until it is lifted; every cloud's protected servers also carry Pulumi's `protect` (`server_options`)."""
    DRIVER_READY_IMAGE = "driver-ready-image"
    """A GPU image with the NVIDIA driver preinstalled, looked up at deploy time."""
    LOCAL_NVME_CACHE = "local-nvme-cache"
    """Instance-local NVMe is used as the model cache where the machine type has it."""
    SPOT_CAPACITY = "spot-capacity"
    """Servers can run on spot/preemptible capacity when the plan allows it."""
    MANAGED_FLEET = "managed-fleet"
    """A plan with a fleet runs as the cloud's managed group, built from a template, spread over the plan's zones and
    replaced when its health check fails after the plan's grace period; its servers have no public address."""
    LOAD_BALANCER_TLS = "load-balancer-tls"
    """One HTTPS endpoint (TLS 1.2 or newer) on the cloud's load balancer in front of the fleet, for the API domain;
    plain HTTP only redirects; health checks on the serving health path; timeouts that fit streamed answers."""
    REQUEST_AUTOSCALING = "request-autoscaling"
    """The fleet scales on requests per server, on the cloud's native metric, holding the plan's target, with a
    scale-out warm-up of the plan's cold start and a slow scale-in."""
    MANAGED_CACHE = "managed-cache"
    """A workload's `cache:` gets the cloud's managed Redis in the deployment's network: TLS in transit, an AUTH token
    kept in the secret store, reachable from the servers only, never from a public address."""
    ROLLING_UPDATE = "rolling-update"
    """A new template (model revision, plan or bootstrap) replaces the fleet's running servers by the plan's rollout:
    `surge` new servers at a time above the group's size, an old one removed only once a new one passes the load
    balancer's health check, never fewer serving than the plan needs (`DeploymentPlan.rolling_update`)."""


@dataclass(frozen=True)
class Support:
    """Whether a cloud has a capability, and a sentence saying how it is done or why it is missing."""

    available: bool
    note: str


def supported(how: str) -> Support:
    return Support(True, how)


def unsupported(why: str) -> Support:
    return Support(False, why)


def driver_ready_image(cloud: Cloud, note: str) -> Support:
    """Whether the cloud's GPU servers boot with the NVIDIA driver is one fact, kept in the cloud's registry entry,
    which the cold-start estimate reads too (`CloudFacts.driver_ready_image`); the cloud's note says how, or why
    not."""
    return Support(CLOUD_FACTS[cloud].driver_ready_image, note)


def rolling_update(cloud: Cloud, note: str) -> Support:
    """Whether the cloud's group rolls its servers over to a new template is one fact, kept in the cloud's registry
    entry, which the plan and `inferstack diff` read too (`CloudFacts.rolling_update`); the note says how, or why
    not."""
    return Support(CLOUD_FACTS[cloud].rolling_update, note)


@dataclass(frozen=True)
class ValueRule:
    """The form of a value the user names in the cloud (a certificate, a brought network or identity): checked before
    anything is created, so that a malformed or hostile value never reaches a resource."""

    kind: str
    """What the value is, e.g. "the ARN of an ACM certificate in us-east-1 that covers the domain"."""
    pattern: str
    """A regular expression the whole value matches."""
    example: str

    def problem(self, field: str, value: str) -> Problem | None:
        if re.fullmatch(self.pattern, value):
            return None
        return Problem(field, f"is not {self.kind}", value=value, fix=f"give one such as {self.example}")


@dataclass(frozen=True)
class CertificateRule(ValueRule):
    """What `assets_certificate` names on a cloud whose CDN serves your domain with a certificate you hold."""

    issued_without: bool = False
    """The cloud issues a certificate for the domain when none is given (so this one is optional)."""


@dataclass(frozen=True)
class BroughtIds:
    """What each id brought instead of a created resource names on a cloud (component argument in brackets)."""

    network: ValueRule
    """The network (network_id)."""
    subnet: ValueRule
    """A subnet (subnet_ids, load_balancer_subnet_ids)."""
    firewall: ValueRule
    """What a server attaches instead of the created Firewall (security_group_ids)."""
    identity: ValueRule
    """What a server attaches instead of the created identity (instance_identity)."""

    def problems(self, checked: Mapping[str, Any], prefix: str) -> list[Problem]:
        """Each brought id given as text that is not of its cloud's form (Outputs of the user's own resources are the
        cloud's ids already)."""
        rules = {"network_id": self.network, "subnet_ids": self.subnet, "load_balancer_subnet_ids": self.subnet,
                 "security_group_ids": self.firewall, "instance_identity": self.identity}
        problems: list[Problem | None] = []
        for key, rule in rules.items():
            value = checked.get(key)
            values = value if isinstance(value, (list, tuple)) else [value]
            problems += [rule.problem(f"{prefix}.{key}", item) for item in values if isinstance(item, str)]
        return [problem for problem in problems if problem]


#### Requests and results: the contract between components and clouds ####

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


@dataclass(frozen=True)
class IdentityResult:
    identity_id: StrOutput
    """The identity's cloud id (AWS role ARN)."""
    attachment: StrOutput
    """What a server attaches to take the identity (AWS instance profile name)."""


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
    """Whether the gateway can verify the server's certificate (a CA known at deploy time)."""


# The AUTH token every cloud that takes one accepts: ElastiCache 16-128 printable characters without spaces, '"', '/'
# or '@' (pulumi_aws ReplicationGroup.auth_token -> AWS AUTH docs); Tair 8-32 characters of three classes among upper,
# lower, digits and `!@#$%^&*()_+-=` (pulumi_alicloud kvstore.Instance.password); DCS 8-32 characters of three classes,
# specials `~!@#$^&*()-_=+|{}:,<.>/?` (pulumi_huaweicloud dcs.Instance.password); and the server's secret fetch writes
# only [A-Za-z0-9._~+/=:@-] (fetch_secret.SAFE_VALUE). So: 16-32 of letters, digits and _+-=, with an upper, a lower
# and a digit.
CACHE_AUTH_TOKEN_PATTERN = r"^(?=.*[A-Z])(?=.*[a-z])(?=.*[0-9])[A-Za-z0-9_+=-]{16,32}$"


def checked_cache_token(token: pulumi.Input[str], field: str) -> pulumi.Output[str]:
    """The token, refused (when its value is known) unless every cloud accepts it; stays secret."""
    def check(value: str) -> str:
        if not re.fullmatch(CACHE_AUTH_TOKEN_PATTERN, value):
            raise input_error(field, "is not an AUTH token every managed Redis accepts", value="(secret, not shown)",
                              fix="give 16 to 32 characters of letters, digits and _ + - =, with an uppercase letter, "
                                  "a lowercase letter and a digit")
        return value

    return pulumi.Output.secret(token).apply(check)


#### Offline preview answers ####

PreviewResource = Callable[["PreviewContext"], tuple[str, dict[str, Any]]]
"""A registered resource's realistic (id, computed outputs)."""
PreviewLookup = Callable[[dict[str, Any], "PreviewContext"], dict[str, Any]]
"""A data-source lookup's realistic answer, from its arguments (camelCase, as the provider sends them)."""


@dataclass(frozen=True)
class PreviewContext:
    """What a preview answer may depend on: the resource or lookup, and where the preview deploys."""

    name: str
    inputs: dict[str, Any]
    """The resource's inputs or the lookup's arguments, as the engine received them (camelCase keys)."""
    digest: str
    """sha256 of type (or token) and name, in hex: stable ids and addresses for the same resource."""
    region: str
    account: str
    """The account id (the project id on Google Cloud) the answers name."""

    @classmethod
    def of(cls, answers: PreviewAnswers, kind: str, name: str, inputs: Mapping[str, Any]) -> PreviewContext:
        digest = hashlib.sha256(f"{kind}\0{name}".encode()).hexdigest()
        return cls(name, dict(inputs), digest, answers.region, answers.account)

    @property
    def public_ip(self) -> str:
        """A documentation address (RFC 5737 TEST-NET-3), stable per resource."""
        return f"203.0.113.{int(self.digest[:4], 16) % 254 + 1}"

    @property
    def private_ip(self) -> str:
        """An address in NETWORK_CIDR, the range every backend's network uses, stable per resource."""
        host = int(self.digest[:4], 16)
        return f"10.64.{host % 16}.{host % 250 + 4}"


def _name_and_digest(context: PreviewContext) -> str:
    return f"{context.name}-{context.digest[:8]}"


@dataclass(frozen=True)
class PreviewAnswers:
    """How a backend answers Pulumi's mocks in the offline preview: realistic ids, outputs and lookups."""

    resources: Mapping[str, PreviewResource]
    """Per resource type; a type missing here gets `unlisted_id` and no computed outputs."""
    lookups: Mapping[str, PreviewLookup]
    """Per data-source token; a token missing here fails the preview (the backend never calls it)."""
    region: str
    account: str
    unlisted_id: Callable[[PreviewContext], str] = _name_and_digest


#### The interface each cloud implements ####


class CloudBackend(ABC):
    """One cloud's resources. Subclasses keep the method order and banners of this class."""

    cloud: ClassVar[Cloud]
    capabilities: ClassVar[Mapping[Capability, Support]]
    """Every Capability, each with how it is done or why it is missing."""
    assets_certificate: ClassVar[CertificateRule | None]
    """What `assets_certificate` names here; None where the cloud issues the domain's certificate itself."""
    api_certificate: ClassVar[CertificateRule | None] = None
    """What `api_certificate` (the fleet's HTTPS endpoint) names here; None where the cloud issues one for the
    domain and takes none."""
    brought_ids: ClassVar[BroughtIds]
    """The form of each id a user brings instead of a created network, firewall or identity."""
    unwatched_alarms: ClassVar[Mapping[AlarmKind, str]] = {
        AlarmKind.GPU_MEMORY: "the servers run no monitoring agent on this cloud yet (create_telemetry): no GPU "
                              "memory metric",
        AlarmKind.DISK: "the servers run no monitoring agent on this cloud yet (create_telemetry): no disk metric"}
    """Alarm kinds the cloud publishes no metric for, each with the reason; every other rule gets an alarm."""
    notification_target: ClassVar[ValueRule | None] = None
    """What `alarm_notification` names here: where the fleet's alarms notify (an SNS topic, a notification channel, a
    contact group, an SMN topic)."""
    dashboard_gap: ClassVar[str | None] = None
    """Why the cloud gets no dashboard (its provider has no resource for one); None: `create_dashboard` makes one."""
    cache_generates_auth: ClassVar[bool] = False
    """The cloud generates the managed Redis's AUTH token itself (so the stack gives none)."""

    @property
    def display_name(self) -> str:
        """The cloud's name in messages (`CloudFacts.display_name`)."""
        return CLOUD_FACTS[self.cloud].display_name

    @property
    def region_config_key(self) -> str:
        """The provider's config key for its region, e.g. `aws:region` (`CloudFacts.region_config_key`)."""
        return CLOUD_FACTS[self.cloud].region_config_key

    #### Region ####

    @abstractmethod
    def configured_region(self) -> str | None:
        """The region the provider will use, from its config or environment; None when unset."""

    #### Network ####

    @abstractmethod
    def create_network(self, parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult: ...

    @abstractmethod
    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        """The address range of a brought network (looked up; nothing is created)."""

    #### Firewall ####

    @abstractmethod
    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult: ...

    #### Storage ####

    @abstractmethod
    def create_model_store(
        self, parent: pulumi.Resource, name: str, request: ModelStoreRequest
    ) -> ModelStoreResult: ...

    @abstractmethod
    def create_static_assets(
        self, parent: pulumi.Resource, name: str, request: StaticAssetsRequest
    ) -> StaticAssetsResult: ...

    @abstractmethod
    def create_bundle(self, parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
        """Store the boot bundle as a private object in the model bucket; returns its id (servers wait for it)."""

    #### Secrets and identity ####

    @abstractmethod
    def create_secrets(self, parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult: ...

    @abstractmethod
    def create_identity(self, parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult: ...

    #### Compute ####

    @abstractmethod
    def create_servers(self, parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult: ...

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        """The managed Redis of a plan with a cache (Capability.MANAGED_CACHE)."""
        raise NotImplementedError(f"{self.display_name} creates no managed Redis")

    def create_fleet(self, parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
        """The managed group behind an HTTPS load balancer; only called where Capability.MANAGED_FLEET is
        supported (elsewhere a fleet's servers are created one by one, with a warning)."""
        raise NotImplementedError(f"{self.display_name} states {Capability.MANAGED_FLEET.value} but has no "
                                  "create_fleet")

    #### Monitoring ####

    def create_telemetry(self, parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult | None:
        """Where the servers' monitoring agent ships metrics and logs (log groups with their retention); None: the
        cloud's agent is not installed yet (the servers run without one)."""
        return None

    def create_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
        """The fleet's alarms, one per rule of `observability.alarm_rules`, notifying the request's target."""
        raise NotImplementedError(f"{self.display_name} has no create_alarms")

    def create_dashboard(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> StrOutput:
        """The fleet's dashboard, one graph per panel of `observability.dashboard_panels`, on the metrics its alarms
        watch; only called where `dashboard_gap` is None. Returns the dashboard's id."""
        raise NotImplementedError(f"{self.display_name} has no create_dashboard: {self.dashboard_gap}")

    #### Offline preview ####

    @abstractmethod
    def preview_answers(self) -> PreviewAnswers:
        """How the offline preview answers for this cloud (built at each call: each run has its own stack config)."""

    def preview_outputs(self, resource_type: str, name: str, inputs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Realistic id and computed outputs for a resource registered under mocks (no cloud is called)."""
        answers = self.preview_answers()
        context = PreviewContext.of(answers, resource_type, name, inputs)
        make = answers.resources.get(resource_type)
        return make(context) if make else (answers.unlisted_id(context), {})

    def preview_invoke(self, token: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Realistic answer to a data-source lookup under mocks; raise for a token the backend never calls."""
        answers = self.preview_answers()
        answer = answers.lookups.get(token)
        if answer is None:
            raise NotImplementedError(f"the {self.display_name} preview has no answer for {token}; add one to the "
                                      f"lookups of {type(self).__name__}.preview_answers")
        return answer(dict(args), PreviewContext.of(answers, token, token, args))

    #### Shared behaviour ####

    def support(self, capability: Capability) -> Support:
        return self.capabilities[capability]

    def require(self, capability: Capability, *, field: str, fix: str) -> Problem | None:
        """A Problem when the cloud lacks `capability` (naming the field that asked for it), or lacks a setting of
        its own that the capability needs (`settings_problem`)."""
        support = self.support(capability)
        if not support.available:
            return Problem(field, f"needs {capability.value}, which {self.display_name} lacks: {support.note}",
                           fix=fix)
        return self.settings_problem(capability, field=field)

    def settings_problem(self, capability: Capability, *, field: str) -> Problem | None:
        """What the cloud's own stack settings (a config namespace of its own, for values with no cloud-neutral
        meaning) lack for `capability`, which `field` asked for; checked before anything is created. Most clouds
        need none."""
        return None

    def fleet_problems(self, plan: DeploymentPlan, *, api_certificate: str | None,
                       load_balancer_subnets: int | None, prefix: str) -> list[Problem]:
        """What this cloud's load balancer would refuse in a fleet's endpoint (its certificate; the number of subnets
        brought for it, None when the network is created), found before anything is created (`prefix` names the
        component's arguments). Most clouds find nothing."""
        return []

    def plan_problems(self, plan: DeploymentPlan, *, field: str) -> list[Problem]:
        """What in the plan (`field`) this cloud cannot deploy, found without a cloud call; checked before anything
        is created. Most clouds find nothing."""
        return []


#### Registry ####

# The Pulumi package of each cloud's provider: resource and lookup tokens start with it ("aws:ec2/...").
PROVIDER_PACKAGES: Mapping[str, Cloud] = {facts.pulumi_package: facts.id for facts in CLOUD_FACTS.values()}

BackendType = TypeVar("BackendType", bound=type[CloudBackend])
_BACKENDS: dict[str, type[CloudBackend]] = {}


def register_backend(backend: BackendType) -> BackendType:
    """Class decorator: make `backend` the provisioning for its cloud."""
    missing = [c.value for c in Capability if c not in backend.capabilities]
    if missing:
        raise TypeError(f"{backend.__name__}.capabilities does not state {missing}")
    if not hasattr(backend, "assets_certificate"):
        raise TypeError(f"{backend.__name__} does not state assets_certificate (None where the cloud issues one)")
    _BACKENDS[backend.cloud] = backend
    return backend


def backend_for(cloud: str, *, field: str = "cloud") -> CloudBackend:
    """The backend for `cloud`, importing its module on first use (provider SDKs are slow to import)."""
    if cloud not in CLOUDS:
        raise input_error(field, "is not a cloud inferstack knows", value=cloud, fix=f"use one of {', '.join(CLOUDS)}")
    module = CLOUD_FACTS[cloud].backend_module
    if cloud not in _BACKENDS and importlib.util.find_spec(module) is not None:
        require_cloud(cloud, f"deploying on {cloud} (inferstack.components)")
        importlib.import_module(module)
    if cloud not in _BACKENDS:
        ready = ", ".join(available_clouds()) or "none"
        raise input_error(field, "has no provisioning module yet", value=cloud, fix=f"deploy on one of: {ready}")
    return _BACKENDS[cloud]()


def available_clouds() -> list[str]:
    """Clouds whose provisioning module exists in this installation."""
    return [c for c in CLOUDS if c in _BACKENDS or importlib.util.find_spec(CLOUD_FACTS[c].backend_module) is not None]


#### Names and tags ####

MANAGED_BY = "inferstack"
_NAME_HASH_CHARS = 8


def slug(*parts: str) -> str:
    """Lowercase letters, digits and single dashes: valid in bucket names, labels and secret paths everywhere."""
    text = "-".join(parts).lower()
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", text)).strip("-")


def unique_name(parts: Sequence[str], *, unique_by: Sequence[str] = (), max_length: int = 63) -> str:
    """A deterministic, readable name for a globally unique resource (a bucket).

    The readable part comes from `parts` (project, stack, component, purpose); a short hash of the parts and
    of `unique_by` (account, region) keeps two accounts or regions with the same stack from colliding, and
    keeps the name unique after truncation.
    """
    digest = hashlib.sha256("\0".join([*parts, *unique_by]).encode()).hexdigest()[:_NAME_HASH_CHARS]
    readable = slug(*parts)[: max_length - _NAME_HASH_CHARS - 1].rstrip("-")
    return f"{readable}-{digest}" if readable else digest


def default_tags(workload: str | None = None) -> dict[str, str]:
    """Tags every resource carries; a component's `tags` argument is merged over them."""
    tags = {"project": pulumi.get_project(), "stack": pulumi.get_stack(), "managed-by": MANAGED_BY}
    if workload:
        tags["workload"] = workload
    return tags


def child_options(parent: pulumi.Resource, **options: Any) -> pulumi.ResourceOptions:
    """Options for a child: parented, so it inherits providers and protection from the component."""
    return pulumi.ResourceOptions(parent=parent, **options)


def server_options(parent: pulumi.Resource, protected: bool, **options: Any) -> pulumi.ResourceOptions:
    """Options for a server, the same on every cloud.

    A protected server carries Pulumi's `protect`: the engine refuses to replace or delete it while it plans the
    steps, before anything is created. The cloud's deletion flag alone fails only at the delete, which a replacement
    runs after creating the successor: both servers would keep running and billing. Unprotected, `protect` is left
    unset, so protection given to the component still reaches the server.

    Servers are replaced delete-first. A server whose cloud flag is still on (protection lifted in the same
    `pulumi up` as the change) then fails its delete before a successor exists, and a replaced server's GPU quota
    is free for the new one. Each server is down until its successor has booted, as it would be anyway: the
    successor has new addresses, and it serves only once its model is loaded.
    """
    return child_options(parent, protect=True if protected else None, delete_before_replace=True, **options)


def fleet_options(parent: pulumi.Resource, protected: bool, **options: Any) -> pulumi.ResourceOptions:
    """Options for a fleet's group and what it cannot serve without (template, load balancer, listeners): Pulumi's
    `protect` as `server_options` gives it, but replaced create-first, so the fleet keeps serving meanwhile."""
    return child_options(parent, protect=True if protected else None, **options)


def invoke_options(parent: pulumi.Resource) -> pulumi.InvokeOutputOptions:
    """Lookups run with the component's provider (a region or account chosen by the caller)."""
    return pulumi.InvokeOutputOptions(parent=parent)


#### Argument checks ####

# Networks that count as private when deciding whether an endpoint needs an API key:
# RFC 1918, RFC 6598 (carrier-grade NAT, used by overlay VPNs) and RFC 4193 (IPv6 unique local).
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_cidrs(values: Sequence[str], field_name: str) -> tuple[tuple[IpNetwork, ...], list[Problem]]:
    """Parse CIDR blocks strictly; each bad one becomes a Problem naming its index and the likely fix."""
    networks: list[IpNetwork] = []
    problems: list[Problem] = []
    for index, text in enumerate(values):
        where = f"{field_name}[{index}]"
        try:
            networks.append(ipaddress.ip_network(str(text).strip(), strict=True))
        except ValueError as error:
            if "host bits set" in str(error):
                network = ipaddress.ip_network(str(text).strip(), strict=False)
                problems.append(Problem(where, "has host bits set", value=text, fix=f"use {network}"))
            else:
                problems.append(Problem(where, "is not a CIDR block", value=text,
                                        fix="write an IPv4 or IPv6 network such as 203.0.113.0/24 or 2001:db8::/48"))
    return tuple(networks), problems


def is_private(network: IpNetwork) -> bool:
    return any(network.version == p.version and network.subnet_of(p) for p in PRIVATE_NETWORKS)  # type: ignore[arg-type]


# A lowercase DNS name: labels of letters, digits and inner dashes, a top-level label of letters (no scheme, port,
# path or wildcard). The form CDNs and certificate services accept for a domain they serve.
DOMAIN_NAME = re.compile(r"(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")


def domain_problem(field: str, domain: str) -> Problem | None:
    if DOMAIN_NAME.fullmatch(domain):
        return None
    return Problem(field, "is not a lowercase DNS name", value=domain,
                   fix="give a name such as assets.example.com, without scheme, port, path or wildcard")




# Component args (TypedDicts) carry this with `@with_config(ARGS_CONFIG)`: a misspelt argument is an error, not
# silently ignored, and Outputs are accepted where an argument is a pulumi.Input.
ARGS_CONFIG = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def validate_args(args_type: type, args: Mapping[str, Any], component: str) -> dict[str, Any]:
    """Check a component's args against its TypedDict (unknown keys, wrong types) before anything registers."""
    if not isinstance(args, Mapping):
        raise input_error(component, "args must be a mapping", value=args,
                          fix=f"pass {with_article(args_type.__name__)} dict")
    try:
        checked: dict[str, Any] = _adapter(args_type).validate_python(dict(args))
    except ValidationError as error:
        raise InputError(_distinct(problems_from_validation(error, prefix=component))) from None
    return checked


@cache
def _adapter(args_type: type) -> TypeAdapter[Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(args_type)
    # pulumi.Input refers to Output and T by forward reference; resolve them for pydantic.
    adapter.rebuild(_types_namespace={"Output": pulumi.Output, "T": TypeVar("T")})
    return adapter


def _distinct(problems: list[Problem]) -> list[Problem]:
    """One problem per field: a failed `Input[str]` otherwise reports each union member (str, Awaitable, Output)."""
    seen: dict[str, Problem] = {}
    for problem in problems:
        seen.setdefault(problem.field, problem)
    return list(seen.values())


#### Choices every cloud shares ####

# An uncommon private range, so that peering with a network built from the usual 10.0.0.0/16 or 192.168.0.0/16
# does not clash; one /20 per zone (4,091 usable addresses each).
NETWORK_CIDR = "10.64.0.0/16"
SUBNET_RANGES = tuple(str(subnet) for subnet in ipaddress.IPv4Network(NETWORK_CIDR).subnets(new_prefix=20))

# Egress the bootstrap needs: HTTPS (object storage, secret store, model hub, container registries, NVIDIA) and
# HTTP (Ubuntu mirrors serve apt over HTTP; packages are signed).
WEB_EGRESS_PORTS: Mapping[str, int] = {"https": 443, "http": 80}

# Retention choices (not any cloud's limits): roll a model back within a month; keep a year of access logs.
NONCURRENT_VERSION_DAYS = 30
NONCURRENT_VERSIONS_KEPT = 3
INCOMPLETE_UPLOAD_DAYS = 7
ACCESS_LOG_DAYS = 365


#### Helpers every backend uses ####

T = TypeVar("T")


def nth(index: int) -> Callable[[Sequence[T]], T]:
    """For `.apply`: the item at `index` of a list Output (a zone of the zones looked up)."""
    return lambda items: items[index]


def first_zones(offering: Sequence[str], count: int, machine_type: str) -> list[str]:
    """The first `count` zones, in the order given, of those offering the machine type; an error saying which do."""
    if len(offering) < count:
        raise input_error("plan.zones", f"{machine_type} is offered in {len(offering)} zone(s) of this region "
                          f"({', '.join(offering) or 'none'})", value=count,
                          fix="plan for another region or machine type, or bring your own subnets")
    return list(offering[:count])


def compressed_user_data(text: str, *, limit_bytes: int, service: str) -> str:
    """User data as Base64 of gzip: deterministic bytes (an unchanged bootstrap never replaces a server), which
    cloud-init recognises and unpacks. `limit_bytes` bounds the gzip bytes (the cloud's limit before Base64)."""
    packed = user_data_gzip(text)
    if len(packed) > limit_bytes:
        raise input_error("bootstrap", f"compresses to {len(packed)} bytes of user data; {service} accepts "
                          f"{limit_bytes}", value=f"{len(text.encode())} bytes uncompressed",
                          fix="move large files out of the cloud-config (fetch them from the model bucket)")
    return base64.b64encode(packed).decode()


def checked_user_data(plan: DeploymentPlan, user_data: pulumi.Input[str], provider_region: pulumi.Input[str], *,
                      provider: str, encode: Callable[[str], T]) -> pulumi.Output[T]:
    """The user data as the cloud takes it (`encode`), once the provider's region is known to be the plan's: the
    boot script reads the bucket and the secrets in the plan's region. The provider is resolved for the component
    (an explicit provider in opts included), which the component's region check cannot see."""
    def checked(values: list[Any]) -> T:
        text, region = values
        if region != plan.region:
            raise input_error("plan", f"was made for region {plan.region} but the {provider} provider deploys to "
                              f"{region}", fix=f"plan for {region}, or give the component a provider for {plan.region}")
        return encode(text)

    return pulumi.Output.all(user_data, provider_region).apply(checked)

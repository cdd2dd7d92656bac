"""What every cloud shares: the backend interface, capabilities with reasons, the registry, names and checks.

A cloud is one module, `inferstack/components/<cloud>.py`, named after the cloud id (`aws`, `gcp`, `alibaba`,
`huawei`). It defines one `CloudBackend` subclass decorated with `@register_backend`, with the methods below in
the same order under the same `#### Section ####` banners. The components in `server.py` are cloud-neutral:
they validate their arguments, then call the backend's methods; they never branch on the cloud.

A backend method receives the component that parents the resources it creates, the component's name (every
child is named `f"{name}-<role>"`, so two servers in one stack never collide) and a frozen request record. It
returns a result record of Outputs. Requests and results are the contract between components and clouds.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import ipaddress
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Any, ClassVar, TypeVar

import pulumi
from pydantic import ConfigDict, TypeAdapter, ValidationError

from inferstack.errors import InputError, Problem, input_error
from inferstack.plan import DeploymentPlan
from inferstack.spec import CLOUDS, Cloud, problems_from_validation

#### Capabilities ####


class Capability(str, Enum):
    """Security and operations features whose availability differs between clouds."""

    METADATA_HARDENING = "metadata-hardening"
    """The instance metadata service demands session tokens, so an SSRF cannot read the server's credentials."""
    BUCKET_PUBLIC_ACCESS_BLOCK = "bucket-public-access-block"
    """A bucket setting that rejects public ACLs and policies, whatever is written later."""
    PRIVATE_CDN_ORIGIN = "private-cdn-origin"
    """The CDN reads a private bucket with its own identity; the bucket never becomes public."""
    PREFIX_SCOPED_GRANTS = "prefix-scoped-grants"
    """The server's identity can be limited to one prefix of one bucket."""
    MANAGED_SHELL = "managed-shell"
    """Operators get a shell through the cloud's API, so no SSH port is opened."""
    SECRET_STORE = "secret-store"
    """Secrets live in a managed store and are read by the server at boot, never placed in user data."""
    TERMINATION_PROTECTION = "termination-protection"
    """Production servers cannot be deleted by an API call until the flag is lifted."""
    DRIVER_READY_IMAGE = "driver-ready-image"
    """A GPU image with the NVIDIA driver preinstalled, looked up at deploy time."""
    LOCAL_NVME_CACHE = "local-nvme-cache"
    """Instance-local NVMe is used as the model cache where the machine type has it."""
    SPOT_CAPACITY = "spot-capacity"
    """Servers can run on spot/preemptible capacity when the plan allows it."""


@dataclass(frozen=True)
class Support:
    """Whether a cloud has a capability, and a sentence saying how it is done or why it is missing."""

    available: bool
    note: str


def supported(how: str) -> Support:
    return Support(True, how)


def unsupported(why: str) -> Support:
    return Support(False, why)


#### Requests and results: the contract between components and clouds ####

StrOutput = pulumi.Output[str]


@dataclass(frozen=True)
class NetworkRequest:
    zones: int
    """Subnets to create, one per availability zone."""
    instance_type: str
    """Only zones that offer this machine type are used."""
    tags: Mapping[str, str]


@dataclass(frozen=True)
class NetworkResult:
    network_id: StrOutput
    subnet_ids: list[StrOutput]
    """One per zone, in zone order."""
    cidr_block: StrOutput


@dataclass(frozen=True)
class FirewallRequest:
    network_id: pulumi.Input[str]
    network_cidr: pulumi.Input[str]
    """Traffic from inside the network (metrics, and the API when no CIDR is allowed)."""
    serving_port: int
    metrics_port: int | None
    allowed_cidrs: tuple[str, ...]
    """Normalised CIDRs that may reach the serving port; empty keeps it network-only."""
    tags: Mapping[str, str]


@dataclass(frozen=True)
class FirewallResult:
    firewall_id: StrOutput


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
    """Read-only access is limited to this prefix (ends in '/')."""
    secret_ids: Sequence[StrOutput]
    tags: Mapping[str, str]


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
    tags: Mapping[str, str]


@dataclass(frozen=True)
class ServersResult:
    instance_ids: list[StrOutput]
    public_ips: list[StrOutput]
    """Empty string for a server without a public address."""
    private_ips: list[StrOutput]


#### The interface each cloud implements ####


class CloudBackend(ABC):
    """One cloud's resources. Subclasses keep the method order and banners of this class."""

    cloud: ClassVar[Cloud]
    display_name: ClassVar[str]
    region_config_key: ClassVar[str]
    """The provider's config key for its region, e.g. `aws:region`."""
    capabilities: ClassVar[Mapping[Capability, Support]]
    """Every Capability, each with how it is done or why it is missing."""

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

    #### Secrets and identity ####

    @abstractmethod
    def create_secrets(self, parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult: ...

    @abstractmethod
    def create_identity(self, parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult: ...

    #### Compute ####

    @abstractmethod
    def create_servers(self, parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult: ...

    #### Offline preview ####

    @abstractmethod
    def preview_outputs(self, resource_type: str, name: str, inputs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Realistic id and computed outputs for a resource registered under mocks (no cloud is called)."""

    @abstractmethod
    def preview_invoke(self, token: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Realistic answer to a data-source lookup under mocks; raise for a token the backend never calls."""

    #### Shared behaviour ####

    def support(self, capability: Capability) -> Support:
        return self.capabilities[capability]

    def require(self, capability: Capability, *, field: str, fix: str) -> Problem | None:
        """A Problem when the cloud lacks `capability`, naming the field that asked for it."""
        support = self.support(capability)
        if support.available:
            return None
        return Problem(field, f"needs {capability.value}, which {self.display_name} lacks: {support.note}", fix=fix)


#### Registry ####

# The Pulumi package of each cloud's provider: resource and lookup tokens start with it ("aws:ec2/...").
PROVIDER_PACKAGES: Mapping[str, Cloud] = {"aws": "aws", "gcp": "gcp", "alicloud": "alibaba", "huaweicloud": "huawei"}

BackendType = TypeVar("BackendType", bound=type[CloudBackend])
_BACKENDS: dict[str, type[CloudBackend]] = {}


def register_backend(backend: BackendType) -> BackendType:
    """Class decorator: make `backend` the provisioning for its cloud."""
    missing = [c.value for c in Capability if c not in backend.capabilities]
    if missing:
        raise TypeError(f"{backend.__name__}.capabilities does not state {missing}")
    _BACKENDS[backend.cloud] = backend
    return backend


def backend_for(cloud: str, *, field: str = "cloud") -> CloudBackend:
    """The backend for `cloud`, importing its module on first use (provider SDKs are slow to import)."""
    if cloud not in CLOUDS:
        raise input_error(field, "is not a cloud inferstack knows", value=cloud, fix=f"use one of {', '.join(CLOUDS)}")
    if cloud not in _BACKENDS and importlib.util.find_spec(f"{__package__}.{cloud}") is not None:
        importlib.import_module(f"{__package__}.{cloud}")
    if cloud not in _BACKENDS:
        ready = ", ".join(available_clouds()) or "none"
        raise input_error(field, "has no provisioning module yet", value=cloud, fix=f"deploy on one of: {ready}")
    return _BACKENDS[cloud]()


def available_clouds() -> list[str]:
    """Clouds whose provisioning module exists in this installation."""
    return [c for c in CLOUDS if c in _BACKENDS or importlib.util.find_spec(f"{__package__}.{c}") is not None]


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


def invoke_options(parent: pulumi.Resource) -> pulumi.InvokeOutputOptions:
    """Lookups run with the component's provider (a region or account chosen by the caller)."""
    return pulumi.InvokeOutputOptions(parent=parent)


#### Argument checks ####

# Networks that count as private when deciding whether an endpoint needs an API key:
# RFC 1918, RFC 6598 (carrier-grade NAT, used by overlay VPNs) and RFC 4193 (IPv6 unique local).
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_cidrs(values: Sequence[str], field_name: str) -> tuple[tuple[Network, ...], list[Problem]]:
    """Parse CIDR blocks strictly; each bad one becomes a Problem naming its index and the likely fix."""
    networks: list[Network] = []
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


def is_private(network: Network) -> bool:
    return any(network.version == p.version and network.subnet_of(p) for p in PRIVATE_NETWORKS)  # type: ignore[arg-type]


# Component args (TypedDicts) carry this with `@with_config(ARGS_CONFIG)`: a misspelt argument is an error, not
# silently ignored, and Outputs are accepted where an argument is a pulumi.Input.
ARGS_CONFIG = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def validate_args(args_type: type, args: Mapping[str, Any], component: str) -> dict[str, Any]:
    """Check a component's args against its TypedDict (unknown keys, wrong types) before anything registers."""
    if not isinstance(args, Mapping):
        raise input_error(component, "args must be a mapping", value=args, fix=f"pass a {args_type.__name__} dict")
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

"""The interface each cloud implements, the registry that finds a cloud's backend, and the offline preview's answers.

A cloud is one package, `inferstack/components/<cloud>/`, named after the cloud id (`aws`, `gcp`, `alibaba`,
`huawei`). Its `__init__.py` defines one `CloudBackend` subclass decorated with `@register_backend`, with the
methods below in the same order under the same `#### Section ####` banners, each handing its request to the
package's module for that concern (network.py, storage.py, identity.py, servers.py, fleet.py, load_balancer.py,
cache.py, observability.py, preview.py); the modules never import the package. The components (network.py,
storage.py, identity.py, inference_server.py) are cloud-neutral: they check their arguments, then call the backend's
methods with the request records of contract.py; they never branch on the cloud. `BackendComponent` is their common
shape: one component, one backend method, one request.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import pulumi
from typing_extensions import Self

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.components.capabilities import BroughtIds, Capability, CertificateRule, Support, ValueRule
from inferstack.components.contract import (
    AlarmsRequest,
    AlarmsResult,
    BundleRequest,
    CacheRequest,
    CacheResult,
    FirewallRequest,
    FirewallResult,
    FleetRequest,
    FleetResult,
    IdentityRequest,
    IdentityResult,
    ModelStoreRequest,
    ModelStoreResult,
    NetworkRequest,
    NetworkResult,
    SecretsRequest,
    SecretsResult,
    ServersRequest,
    ServersResult,
    StaticAssetsRequest,
    StaticAssetsResult,
    StrOutput,
    TelemetryRequest,
    TelemetryResult,
)
from inferstack.components.observability import AlarmKind
from inferstack.errors import Problem, input_error
from inferstack.extras import require_cloud
from inferstack.plan import DeploymentPlan
from inferstack.spec import CLOUDS

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
    created: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    """What the program registered so far, by type, then id: each resource's inputs and outputs (camelCase)."""
    placeholders: list[str] = field(default_factory=list)
    """Where `created_value` answered a placeholder: `<type> <id> <key>`."""

    @classmethod
    def of(cls, answers: PreviewAnswers, kind: str, name: str, inputs: Mapping[str, Any],
           created: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
           placeholders: list[str] | None = None) -> PreviewContext:
        digest = hashlib.sha256(f"{kind}\0{name}".encode()).hexdigest()
        return cls(name, dict(inputs), digest, answers.region, answers.account, created or {},
                   placeholders if placeholders is not None else [])

    def created_value(self, resource_type: str, resource_id: Any, key: str, placeholder: Any) -> Any:
        """`key` of the resource of that type and id which the program created itself (a user's own VPC, brought to
        a component by id), else `placeholder`: a resource brought from elsewhere, which the preview cannot see."""
        found = self.created.get(resource_type, {}).get(str(resource_id), {}).get(key)
        if found is None:
            self.placeholders.append(f"{resource_type} {resource_id} {key}")
            return placeholder
        return found

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

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        """The managed Redis of a plan with a cache (Capability.MANAGED_CACHE)."""
        raise NotImplementedError(f"{self.display_name} creates no managed Redis")

    #### Offline preview ####

    @abstractmethod
    def preview_answers(self) -> PreviewAnswers:
        """How the offline preview answers for this cloud (built at each call: each run has its own stack config)."""

    def preview_outputs(self, resource_type: str, name: str, inputs: Mapping[str, Any],
                        created: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
                        placeholders: list[str] | None = None) -> tuple[str, dict[str, Any]]:
        """Realistic id and computed outputs for a resource registered under mocks (no cloud is called; `created`,
        `placeholders`: see PreviewContext)."""
        answers = self.preview_answers()
        context = PreviewContext.of(answers, resource_type, name, inputs, created, placeholders)
        make = answers.resources.get(resource_type)
        return make(context) if make else (answers.unlisted_id(context), {})

    def preview_invoke(self, token: str, args: Mapping[str, Any],
                       created: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
                       placeholders: list[str] | None = None) -> dict[str, Any]:
        """Realistic answer to a data-source lookup under mocks (`created`, `placeholders`: see PreviewContext);
        raise for a token the backend never calls."""
        answers = self.preview_answers()
        answer = answers.lookups.get(token)
        if answer is None:
            raise NotImplementedError(f"the {self.display_name} preview has no answer for {token}; add one to the "
                                      f"lookups of {type(self).__name__}.preview_answers")
        return answer(dict(args), PreviewContext.of(answers, token, token, args, created, placeholders))

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

    def network_problems(self, zones: int, *, private_servers: bool, field: str) -> list[Problem]:
        """What the network this cloud creates cannot hold (`zones` of them, with a private subnet in each when
        `private_servers`), found before anything is created; `field` names the zones argument. Most clouds find
        nothing."""
        return []

    def fleet_problems(self, plan: DeploymentPlan, *, api_certificate: str | None,
                       load_balancer_subnets: int | None, prefix: str) -> list[Problem]:
        """What this cloud would refuse in a fleet's endpoint, found before anything is created: what its load
        balancer refuses (its certificate; the number of subnets brought for it, None when the network is created)
        and, when the network is created, what it cannot hold (`network_problems`). `prefix` names the component's
        arguments."""
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


#### Components built by one backend method ####

RequestType = TypeVar("RequestType")


class BackendComponent(pulumi.ComponentResource, Generic[RequestType]):
    """A component whose resources one backend method creates from one request record (contract.py).

    Its `__init__` takes the arguments a user gives (the package schema reads them from its `args` annotation) and
    checks them into the request. `from_request` takes a request already checked: InferenceServer checks all of its
    arguments at once, before anything is created, and hands each child its request, so nothing is checked twice.
    """

    @classmethod
    def from_request(cls, name: str, backend: CloudBackend, request: RequestType,
                     opts: pulumi.ResourceOptions | None = None) -> Self:
        # `__init__` keeps the signature the package schema is read from, so the checked path is a constructor of its
        # own, which skips `__init__` and its checks.
        component = cls.__new__(cls)
        component._create(name, backend, request, opts)
        return component

    def _create(self, name: str, backend: CloudBackend, request: RequestType,
                opts: pulumi.ResourceOptions | None) -> None:
        """Register the component, have the backend create its resources, and set the outputs."""
        raise NotImplementedError(f"{type(self).__name__} has no _create")

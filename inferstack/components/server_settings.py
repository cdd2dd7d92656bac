"""An InferenceServer's arguments (`InferenceServerArgs`), and their check into one `ServerSettings`.

Every check runs here, before anything is created: the arguments' types, then the plan (given, or sized from the
workload), then everything the arguments and the plan imply together, each problem found and all raised at once (one
InputError, no cloud call). What the cloud lacks but the deployment can do without is a warning. The build steps
(inference_server.py) read the ServerSettings and check nothing again.

`InferenceServerArgs` is the Pulumi package's schema for InferenceServer (`provider/`), read from live types: this
module does not use `from __future__ import annotations` (see inference_server.py).
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pydantic import with_config
from typing_extensions import NotRequired, TypedDict

from inferstack import bootstrap
from inferstack.components.argument_checks import (
    ARGS_CONFIG,
    CACHE_AUTH_TOKEN_PATTERN,
    checked_cache_token,
    domain_problem,
    is_private,
    parse_cidrs,
    validate_args,
)
from inferstack.components.backend import CloudBackend, backend_for
from inferstack.components.capabilities import Capability
from inferstack.components.naming import resource_tags
from inferstack.components.plan_source import resolve_plan
from inferstack.components.storage import static_assets_problems
from inferstack.errors import InputError, Problem
from inferstack.plan import DeploymentPlan

#### The arguments ####


@with_config(ARGS_CONFIG)
class InferenceServerArgs(TypedDict):
    plan: NotRequired[Any]
    """The deployment to create. Give this or `workload`. The JSON that `inferstack plan WORKLOAD --json` wrote (a
    plan report, or one plan) as text, e.g. read from plan.json; from Python also a DeploymentPlan or the parsed JSON.
    Pass the text from other languages: Pulumi drops the report's null values from an object on the way."""
    workload: NotRequired[Any]
    """A workload to size for `cloud` when the component is created. Give this or `plan`. A workload file's fields as
    an object (as in examples/workloads/), or the file's YAML or JSON text; from Python also a WorkloadSpec."""
    cloud: NotRequired[str]
    """Cloud to deploy on (aws, gcp, alibaba or huawei); defaults to the plan's cloud, or to the workload's only
    allowed cloud, and picks the deployment from a plan report that covers several clouds."""
    allowed_cidrs: NotRequired[Sequence[str]]
    """Networks that may call the inference API. Empty (default): only the server's own network."""
    api_key: NotRequired[pulumi.Input[str]]
    """Endpoint API key (pass a Pulumi secret). Required when allowed_cidrs reach beyond private networks."""
    hub_token: NotRequired[pulumi.Input[str]]
    """Hugging Face Hub token (pass a Pulumi secret); the server reads it at each start and gives it to the runtime
    as HF_TOKEN, for files it downloads from the hub."""
    cache_auth_token: NotRequired[pulumi.Input[str]]
    """AUTH token of the inference cache's managed Redis, for a plan with a cache (pass a Pulumi secret): 16 to 32
    letters, digits and _ + - =, with an uppercase letter, a lowercase letter and a digit (the form every cloud's Redis
    accepts). Stored in the cloud's secret store, read by the gateway at each start. Google Cloud's Memorystore
    generates its own: leave it out there."""
    static_assets: NotRequired[bool]
    """Create a private bucket behind an HTTPS CDN for static files (default true)."""
    assets_domain: NotRequired[str]
    """Domain the static-assets CDN serves, e.g. assets.example.com. Required on clouds whose CDN has no hostname of
    its own (Google Cloud, Alibaba Cloud, Huawei Cloud); optional on AWS (default: *.cloudfront.net)."""
    assets_certificate: NotRequired[str]
    """Certificate of assets_domain in the cloud's certificate service, where the cloud needs one: an ACM
    certificate ARN in us-east-1 on AWS, an SCM certificate id on Huawei Cloud (Google Cloud and Alibaba Cloud issue
    their own)."""
    api_domain: NotRequired[str]
    """Domain of the HTTPS endpoint of a fleet (a plan with plan.fleet: every production plan), e.g.
    api.example.com; you point its DNS at the output load_balancer_address. Required with a fleet."""
    api_certificate: NotRequired[str]
    """Certificate of api_domain in the cloud's certificate service where the cloud needs one (see each cloud's
    docs); where it issues one for the domain, leave this out."""
    load_balancer_subnet_ids: NotRequired[Sequence[pulumi.Input[str]]]
    """With a brought network and an internet-facing fleet: public subnets for the load balancer (subnet_ids are
    then the servers' private subnets, with NAT egress)."""
    network_id: NotRequired[pulumi.Input[str]]
    """Existing network (AWS VPC id) instead of creating one; give subnet_ids with it."""
    subnet_ids: NotRequired[Sequence[pulumi.Input[str]]]
    """Existing subnets for the servers, replica i in subnet i mod n; give network_id with them."""
    security_group_ids: NotRequired[Sequence[pulumi.Input[str]]]
    """Existing security groups to attach instead of creating the Firewall."""
    instance_identity: NotRequired[pulumi.Input[str]]
    """Existing identity for the servers instead of creating a ServerIdentity: an AWS instance profile name, a GCP
    service account email, an Alibaba RAM role name or a Huawei agency name. Ids given as text must have their
    cloud's form (`brought_ids` of each cloud's backend), or nothing is created."""
    model_bucket: NotRequired[pulumi.Input[str]]
    """Existing bucket with the model under plan.model.bucket_prefix, instead of creating the ModelStore."""
    assets_bucket: NotRequired[pulumi.Input[str]]
    """Existing bucket to serve through the CDN; its owner adds the policy in `static_assets_policy`."""
    protect_servers: NotRequired[bool]
    """Protect the servers from deletion and replacement (default: true in production): the cloud's deletion flag
    where it has one, and Pulumi's `protect`, so that `pulumi up` refuses a change that would replace them before
    creating anything. Set false for one `pulumi up` to lift both in place, roll the change out with the next one
    (each server is deleted, then recreated), then set it back."""
    alarm_notification: NotRequired[str]
    """Where a fleet's alarms notify: an SNS topic ARN on AWS, a Monitoring notification channel
    (projects/P/notificationChannels/N) on Google Cloud, a CloudMonitor alarm contact group name on Alibaba Cloud, an
    SMN topic URN on Huawei Cloud. Without it the alarms are created all the same and their state shows in the cloud's
    console (on Alibaba Cloud an empty contact group is created for them)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, workload, managed-by)."""


#### The checked value ####


@dataclass(frozen=True)
class BroughtNetwork:
    """A network the caller brings (`network_id` with `subnet_ids`): nothing is created for it."""

    network_id: pulumi.Input[str]
    server_subnet_ids: tuple[pulumi.Input[str], ...]
    """The servers' subnets (a fleet: private ones, with NAT egress)."""
    load_balancer_subnet_ids: tuple[pulumi.Input[str], ...]
    """A fleet's load balancer's subnets: `load_balancer_subnet_ids`, or else the servers'."""


@dataclass(frozen=True)
class BroughtResources:
    """What the caller brings instead of a piece InferenceServer would create; None: the piece is created."""

    network: BroughtNetwork | None
    security_group_ids: tuple[pulumi.Input[str], ...] | None
    """Attached instead of the created Firewall."""
    instance_identity: pulumi.Input[str] | None
    """Attached instead of the created ServerIdentity."""
    model_bucket: pulumi.Input[str] | None
    """Read instead of the created ModelStore's model bucket."""
    assets_bucket: pulumi.Input[str] | None
    """Served instead of a bucket StaticAssets creates."""


@dataclass(frozen=True)
class ApiEndpoint:
    """A fleet's HTTPS endpoint on the cloud's load balancer."""

    domain: str
    """A lowercase DNS name; its owner points it at the load balancer."""
    certificate: str | None
    """Of the cloud's form (`CloudBackend.api_certificate`); None where the cloud issues one for the domain."""


@dataclass(frozen=True)
class ServerSettings:
    """An InferenceServer's arguments and plan, checked together before anything is created: what its build steps
    read, in the form they use it."""

    plan: DeploymentPlan
    backend: CloudBackend
    """The plan's cloud."""
    tags: Mapping[str, str]
    """Every resource's tags: the defaults (project, stack, managed-by, the plan's workload) under the caller's."""
    allowed_cidrs: tuple[str, ...]
    """Networks that may call the API, normalised; empty: the server's network only."""
    internet_facing: bool
    """An allowed network is public: the endpoint is open beyond private networks (an API key is given)."""
    api_endpoint: ApiEndpoint | None
    """Where the plan's fleet runs as the cloud's managed group behind a load balancer, its endpoint; None for one
    server, or where the cloud has no managed fleet (a fleet's servers are then created one by one)."""
    protected: bool
    """`protect_servers`, by default true in production."""
    static_assets: bool
    brought: BroughtResources
    api_key: pulumi.Input[str] | None
    hub_token: pulumi.Input[str] | None
    cache_auth_token: pulumi.Output[str] | None
    """The cache's AUTH token where the cloud takes one (a plan with a cache), checked again once its value is known
    (a secret from the stack config is known only then)."""
    assets_domain: str | None
    assets_certificate: str | None
    alarm_notification: str | None

    @property
    def fleet(self) -> bool:
        """The plan runs as the cloud's managed fleet (behind `api_endpoint`)."""
        return self.api_endpoint is not None


def check_server_args(args: InferenceServerArgs, name: str) -> ServerSettings:
    """Check an InferenceServer's arguments and plan; raise an InputError naming every problem before anything is
    created, and warn of what the cloud lacks."""
    checked = validate_args(InferenceServerArgs, args, name)
    plan = resolve_plan(checked, name)
    backend = backend_for(plan.cloud, field=f"{name}.cloud")
    networks, problems = parse_cidrs(checked.get("allowed_cidrs", ()), f"{name}.allowed_cidrs")
    public = [str(n) for n in networks if not is_private(n)]
    fleet = plan.fleet is not None and backend.support(Capability.MANAGED_FLEET).available
    problems += _network_problems(checked, plan, name, public=public)
    problems += _cloud_problems(checked, plan, backend, name)
    problems += _endpoint_problems(checked, plan, backend, name, public=public, fleet=fleet)
    problems += _notification_problems(checked, backend, name)
    problems += _cache_problems(checked, plan, backend, name)
    problems += _capability_problems(checked, plan, backend, name)
    if checked.get("static_assets", True):
        problems += static_assets_problems(backend, checked.get("assets_domain"), checked.get("assets_certificate"),
                                           domain_field=f"{name}.assets_domain",
                                           certificate_field=f"{name}.assets_certificate")
    if problems:
        raise InputError(problems)
    _warn_of_gaps(checked, plan, backend, name)
    token = checked.get("cache_auth_token")
    return ServerSettings(
        plan=plan, backend=backend, tags=resource_tags(checked.get("tags", {}), plan.workload),
        allowed_cidrs=tuple(str(n) for n in networks), internet_facing=bool(public),
        api_endpoint=ApiEndpoint(checked["api_domain"], checked.get("api_certificate")) if fleet else None,
        protected=_protects_servers(checked, plan), static_assets=checked.get("static_assets", True),
        brought=_brought(checked), api_key=checked.get("api_key"), hub_token=checked.get("hub_token"),
        cache_auth_token=None if token is None else checked_cache_token(token, f"{name}.cache_auth_token"),
        assets_domain=checked.get("assets_domain"), assets_certificate=checked.get("assets_certificate"),
        alarm_notification=checked.get("alarm_notification"))


def _brought(checked: Mapping[str, Any]) -> BroughtResources:
    network = None
    if "network_id" in checked:
        servers = tuple(checked["subnet_ids"])
        network = BroughtNetwork(checked["network_id"], servers,
                                 tuple(checked.get("load_balancer_subnet_ids", servers)))
    security_groups = checked.get("security_group_ids")
    return BroughtResources(
        network=network, security_group_ids=None if security_groups is None else tuple(security_groups),
        instance_identity=checked.get("instance_identity"), model_bucket=checked.get("model_bucket"),
        assets_bucket=checked.get("assets_bucket"))


#### The checks ####


def _network_problems(checked: Mapping[str, Any], plan: DeploymentPlan, name: str, *,
                      public: Sequence[str]) -> list[Problem]:
    """A brought network given whole, its subnets enough for production's zones; an API key where the endpoint is
    open beyond private networks (`public`)."""
    problems = []
    if "load_balancer_subnet_ids" in checked and "network_id" not in checked:
        problems.append(Problem(f"{name}.load_balancer_subnet_ids", "are subnets of a brought network",
                                fix="give network_id and subnet_ids with them, or leave them out to have the "
                                "network created"))
    if ("network_id" in checked) != ("subnet_ids" in checked):
        problems.append(Problem(f"{name}.network_id", "network_id and subnet_ids come together",
                                value=sorted(k for k in ("network_id", "subnet_ids") if k in checked),
                                fix="give both to use an existing network, or neither to create one"))
    for key in ("subnet_ids", "security_group_ids"):
        if key in checked and not checked[key]:
            problems.append(Problem(f"{name}.{key}", "is empty", fix=f"list at least one id, or leave {key} out"))
    if plan.stage == "production" and 0 < len(checked.get("subnet_ids", ())) < plan.zones:
        problems.append(Problem(f"{name}.subnet_ids", f"production spreads replicas over {plan.zones} zones",
                                value=len(checked["subnet_ids"]), fix=f"give {plan.zones} subnets in distinct zones"))
    if public and "api_key" not in checked:
        problems.append(Problem(f"{name}.api_key", f"is required when the endpoint is open beyond private networks "
                                f"({', '.join(public)})", fix="pass a secret API key, e.g. "
                                "`pulumi config set --secret inferstack:apiKey $(openssl rand -hex 32)`"))
    return problems


def _cloud_problems(checked: Mapping[str, Any], plan: DeploymentPlan, backend: CloudBackend,
                    name: str) -> list[Problem]:
    """What the cloud refuses, found without a cloud call: in the plan (and its canary's), in the ids brought, in a
    brought bucket's name; a plan made for another region than the provider's."""
    problems = backend.plan_problems(plan, field=f"{name}.plan")
    if plan.canary is not None:
        problems += backend.plan_problems(plan.canary.plan, field=f"{name}.plan.canary.plan")
    problems += backend.brought_ids.problems(checked, name)
    brought_bucket = checked.get("model_bucket")
    if isinstance(brought_bucket, str):  # its name reaches the server: the cloud's own bucket grammar, nothing else
        bucket = bootstrap.bucket_problem(plan.cloud, brought_bucket, f"{name}.model_bucket")
        problems += [bucket] if bucket else []
    configured = backend.configured_region()
    if configured is not None and configured != plan.region:
        problems.append(Problem(f"{name}.plan", f"was made for region {plan.region} but the provider deploys to "
                                f"{configured}", fix=f"plan for {configured}, or set {backend.region_config_key} "
                                f"to {plan.region}"))
    return problems


def _endpoint_problems(checked: Mapping[str, Any], plan: DeploymentPlan, backend: CloudBackend, name: str, *,
                       public: Sequence[str], fleet: bool) -> list[Problem]:
    """The domains and certificates, used or not; a fleet's HTTPS endpoint as its cloud's load balancer takes it."""
    problems = _unused_endpoint_problems(checked, backend, name, api=fleet,
                                         assets=checked.get("static_assets", True))
    if not fleet:
        return problems
    problems += api_endpoint_problems(backend, checked.get("api_domain"), checked.get("api_certificate"),
                                      domain_field=f"{name}.api_domain", certificate_field=f"{name}.api_certificate")
    # The load balancer's subnets where the network is brought (None: it is created, with subnets of its own).
    brought = checked.get("load_balancer_subnet_ids", checked.get("subnet_ids")) if "network_id" in checked else None
    problems += backend.fleet_problems(plan, api_certificate=checked.get("api_certificate"), prefix=name,
                                       load_balancer_subnets=len(brought) if brought is not None else None)
    if public and "network_id" in checked and "load_balancer_subnet_ids" not in checked:
        problems.append(Problem(f"{name}.load_balancer_subnet_ids", "is required with a brought network and an "
                                f"endpoint open beyond private networks ({', '.join(public)})",
                                fix="give public subnets for the load balancer; subnet_ids are the servers' "
                                "private subnets (with NAT egress)"))
    return problems


def _unused_endpoint_problems(checked: Mapping[str, Any], backend: CloudBackend, name: str, *, api: bool,
                              assets: bool) -> list[Problem]:
    """A domain or certificate this plan does not use (one stack config serves several stages) is still checked as
    where it is used: a malformed value is refused, never carried along."""
    problems: list[Problem | None] = []
    for used, endpoint, rule in ((api, "api", backend.api_certificate), (assets, "assets", backend.assets_certificate)):
        domain, certificate = checked.get(f"{endpoint}_domain"), checked.get(f"{endpoint}_certificate")
        if not used and isinstance(domain, str):
            problems.append(domain_problem(f"{name}.{endpoint}_domain", domain))
        if not used and isinstance(certificate, str) and rule is not None:
            problems.append(rule.problem(f"{name}.{endpoint}_certificate", certificate))
    return [problem for problem in problems if problem]


def api_endpoint_problems(backend: CloudBackend, domain: str | None, certificate: str | None, *,
                          domain_field: str, certificate_field: str) -> list[Problem]:
    """What would keep a fleet's HTTPS endpoint from serving: no domain or a malformed one; a certificate that is
    malformed, missing where the cloud needs one, or given where it issues one itself."""
    rule, cloud = backend.api_certificate, backend.display_name
    problems: list[Problem | None] = []
    if domain is None:
        problems.append(Problem(domain_field, "is required: the plan runs as a fleet behind one HTTPS endpoint, "
                                "which serves a domain you own", fix="give one such as api.example.com (stack config "
                                "inferstack:apiDomain), and point its DNS at the output loadBalancerAddress"))
    else:
        problems.append(domain_problem(domain_field, domain))
    if certificate is None and rule is not None and not rule.issued_without:
        problems.append(Problem(certificate_field, f"is required on {cloud}: {rule.kind}",
                                fix=f"give one such as {rule.example} (stack config inferstack:apiCertificate)"))
    elif certificate is not None and rule is None:
        problems.append(Problem(certificate_field, f"is not used on {cloud}: it issues the endpoint's certificate "
                                "for the domain itself", value=certificate, fix="leave the certificate out"))
    elif certificate is not None and rule is not None:
        problems.append(rule.problem(certificate_field, certificate))
    return [problem for problem in problems if problem]


def _notification_problems(checked: Mapping[str, Any], backend: CloudBackend, name: str) -> list[Problem]:
    """`alarm_notification` must have its cloud's form: it reaches the alarms' actions as it is written."""
    target, rule = checked.get("alarm_notification"), backend.notification_target
    if target is None:
        return []
    if rule is None:
        return [Problem(f"{name}.alarm_notification", f"is not used on {backend.display_name}: it has no alarms",
                        value=target, fix="leave it out")]
    problem = rule.problem(f"{name}.alarm_notification", target)
    return [problem] if problem else []


def _cache_problems(checked: Mapping[str, Any], plan: DeploymentPlan, backend: CloudBackend,
                    name: str) -> list[Problem]:
    """The cache's AUTH token: given where the cloud takes one (a plan with a cache), of the form all accept when its
    value is known here; left out where the cloud generates its own or there is no cache."""
    token = checked.get("cache_auth_token")
    field = f"{name}.cache_auth_token"
    if plan.cache is None or backend.cache_generates_auth:
        if token is None:
            return []
        why = "the plan has no cache" if plan.cache is None else f"{backend.display_name} generates the AUTH token"
        return [Problem(field, f"is not used: {why}", value="(secret, not shown)", fix="leave it out")]
    if token is None:
        return [Problem(field, "is required for a plan with a cache (the managed Redis's AUTH token)",
                        fix="pass a secret, e.g. `pulumi config set --secret inferstack:cacheAuthToken "
                            "$(openssl rand -base64 18 | tr -dc A-Za-z0-9 | head -c 24)Aa1`")]
    if isinstance(token, str) and not re.fullmatch(CACHE_AUTH_TOKEN_PATTERN, token):
        return [Problem(field, "is not an AUTH token every managed Redis accepts", value="(secret, not shown)",
                        fix="give 16 to 32 letters, digits and _ + - =, with an uppercase letter, a lowercase letter "
                            "and a digit")]
    return []


def _capability_problems(checked: Mapping[str, Any], plan: DeploymentPlan, backend: CloudBackend,
                         name: str) -> list[Problem]:
    """Each capability the deployment needs that the cloud lacks (or lacks a setting for)."""
    problems = []
    for capability, wanted, fix in (
        (Capability.PRIVATE_CDN_ORIGIN, checked.get("static_assets", True), "set static_assets to false"),
        (Capability.SPOT_CAPACITY, plan.spot, "plan without spot capacity"),
        (Capability.SECRET_STORE, _has_secrets(checked, plan), "leave the secrets out"),
        (Capability.MANAGED_CACHE, plan.cache is not None, "remove `cache:` from the workload and re-plan"),
        (Capability.MULTI_NODE_REPLICAS, plan.replica_nodes is not None,
         "plan the model where one server holds it (a larger GPU in placement.gpus_allow, or a smaller precision)"),
    ):
        problem = backend.require(capability, field=f"{name}.{capability.value}", fix=fix) if wanted else None
        if problem:
            problems.append(problem)
    return problems


def _has_secrets(checked: Mapping[str, Any], plan: DeploymentPlan) -> bool:
    """The deployment keeps secrets in the cloud's store: an API key, a hub token, or the cache's AUTH token."""
    return "api_key" in checked or "hub_token" in checked or plan.cache is not None


def _protects_servers(checked: Mapping[str, Any], plan: DeploymentPlan) -> bool:
    """`protect_servers`, by default true in production."""
    return bool(checked.get("protect_servers", plan.stage == "production"))


#### Warnings: what the cloud lacks, and what is not used ####


def _warn_of_gaps(checked: Mapping[str, Any], plan: DeploymentPlan, backend: CloudBackend, name: str) -> None:
    if plan.fleet is None and "api_domain" in checked:  # one stack config can serve several stages
        pulumi.log.warn(f"{name}: api_domain is for a fleet's HTTPS endpoint; this plan is one server, which serves "
                        "its own address (no load balancer), so the domain is not used")
    if _protects_servers(checked, plan):
        _warn_missing(backend, Capability.TERMINATION_PROTECTION, name)
    elif plan.stage == "production":
        pulumi.log.warn(f"{name}: production servers are unprotected (protect_servers false, stack config "
                        "inferstack:protectServers): a change that replaces them now deletes each server, then "
                        "creates its successor. Set it back to true once the rollout is done")
    if _has_secrets(checked, plan):
        _warn_missing(backend, Capability.SECRET_SCOPED_GRANTS, name)
    _warn_missing(backend, Capability.METADATA_HARDENING, name)
    _warn_of_fleet_gaps(plan, backend, name)


def _warn_of_fleet_gaps(plan: DeploymentPlan, backend: CloudBackend, name: str) -> None:
    """A plan with a fleet runs as one where the cloud has the machinery; elsewhere its servers stand alone."""
    if plan.fleet is None:
        return
    support = backend.support(Capability.MANAGED_FLEET)
    if not support.available:
        pulumi.log.warn(f"{name}: the plan is a fleet of {plan.fleet.min_replicas}-{plan.fleet.max_replicas} servers, "
                        f"but {backend.display_name} has no {Capability.MANAGED_FLEET.value} ({support.note}): "
                        f"{plan.instance_count} servers are created one by one, without a load balancer")
    else:
        _warn_missing(backend, Capability.ROLLING_UPDATE, name)


def _warn_missing(backend: CloudBackend, capability: Capability, name: str) -> None:
    support = backend.support(capability)
    if not support.available:
        pulumi.log.warn(f"{name}: no {capability.value} on {backend.display_name}: {support.note}")

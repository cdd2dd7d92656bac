"""The components: cloud-neutral Pulumi ComponentResources that delegate resource creation to a cloud backend.

`InferenceServer` is the top: give it a plan (or a workload, which it sizes) and it composes a `Network`, a
`Firewall`, a `ModelStore`, `StaticAssets`, `ServerSecrets`, a `ServerIdentity` and the servers themselves.
Every piece the caller brings (network, subnets, security groups, identity, buckets) replaces the piece that
would have been created, and nothing is created for it.

Each component checks its arguments (a TypedDict, validated with pydantic) and raises an InputError naming the
field before it registers anything, so bad input never leaves a half-created stack.

The components are also a Pulumi package for other languages (`provider/`, docs/existing-repo.md): Pulumi's schema
analyzer reads the `*Args` TypedDicts and the output annotations as live types. So this module does not use
`from __future__ import annotations`, and args use only types the analyzer maps to a schema: str, int, bool, lists
and maps of them, pulumi.Input, and Any for the plan and the workload (which other languages send as text or a
mapping, checked with pydantic here). Attribute docstrings become the schema's descriptions.
"""

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
from pydantic import with_config
from typing_extensions import NotRequired, TypedDict

from inferstack import bootstrap
from inferstack.bootstrap.gateway import CacheEndpoint, ServerGroup
from inferstack.bootstrap.render import BUNDLE_PREFIX, RenderedBootstrap
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.clouds import Cloud
from inferstack.components.core import (
    ARGS_CONFIG,
    CACHE_AUTH_TOKEN_PATTERN,
    AlarmsRequest,
    BundleRequest,
    CacheRequest,
    CanaryRequest,
    Capability,
    CloudBackend,
    FirewallRequest,
    FleetRequest,
    IdentityRequest,
    IpNetwork,
    ModelStoreRequest,
    NetworkRequest,
    SecretsRequest,
    ServersRequest,
    StaticAssetsRequest,
    TelemetryRequest,
    TelemetryResult,
    backend_for,
    checked_cache_token,
    child_options,
    default_tags,
    domain_problem,
    is_private,
    parse_cidrs,
    validate_args,
)
from inferstack.errors import InputError, Problem, input_error
from inferstack.plan import DeploymentPlan
from inferstack.plan_file import read_plan
from inferstack.spec import WorkloadSpec, for_stack, parse_document, parse_workload

if TYPE_CHECKING:
    from inferstack.sizing.calibration import Calibration

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


class Network(pulumi.ComponentResource):
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
        super().__init__("inferstack:index:Network", name, None, opts)
        result = backend.create_network(self, name, NetworkRequest(
            zones=checked.get("zones", 1), instance_type=checked["instance_type"], tags=_tags(checked),
            private_servers=checked.get("private_servers", False)))
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


class Firewall(pulumi.ComponentResource):
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
        super().__init__("inferstack:index:Firewall", name, None, opts)
        metrics_port = checked.get("metrics_port")
        result = backend.create_firewall(self, name, FirewallRequest(
            network_id=checked["network_id"], network_cidr=checked["network_cidr"], serving_port=checked["port"],
            metrics_port=None if metrics_port == checked["port"] else metrics_port,
            allowed_cidrs=tuple(str(n) for n in networks), tags=_tags(checked),
            load_balanced=checked.get("load_balanced", False)))
        self.firewall_id = result.firewall_id
        self.load_balancer_firewall_id = pulumi.Output.from_input(result.load_balancer_firewall_id)
        self.register_outputs({"firewall_id": self.firewall_id,
                               "load_balancer_firewall_id": self.load_balancer_firewall_id})


#### Storage ####


@with_config(ARGS_CONFIG)
class ModelStoreArgs(TypedDict):
    cloud: str
    """Cloud to create the buckets on: aws, gcp, alibaba or huawei."""
    force_destroy: NotRequired[bool]
    """Let `pulumi destroy` delete buckets that still hold objects (default false; dev stacks only)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class ModelStore(pulumi.ComponentResource):
    """Private, encrypted, versioned buckets: models, user data (uploads/ and results/), and access logs.

    Versioning lets you roll a model back to a previous version; noncurrent versions expire after a while.
    The three buckets are separate so that each has its own policy and lifecycle.
    """

    model_bucket_name: pulumi.Output[str]
    """Bucket for the model files, which the server reads under the plan's prefix."""
    data_bucket_name: pulumi.Output[str]
    """Bucket for user uploads (uploads/) and results (results/); the server gets no access to it by default."""
    logs_bucket_name: pulumi.Output[str]
    """Bucket that receives the other buckets' access logs."""

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(ModelStoreArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        super().__init__("inferstack:index:ModelStore", name, None, opts)
        result = backend.create_model_store(self, name, ModelStoreRequest(
            force_destroy=checked.get("force_destroy", False), tags=_tags(checked)))
        self.model_bucket_name = result.model_bucket
        self.data_bucket_name = result.data_bucket
        self.logs_bucket_name = result.logs_bucket
        self.register_outputs({"model_bucket_name": self.model_bucket_name, "data_bucket_name": self.data_bucket_name,
                               "logs_bucket_name": self.logs_bucket_name})


@with_config(ARGS_CONFIG)
class StaticAssetsArgs(TypedDict):
    cloud: str
    """Cloud to create the bucket and CDN on: aws, gcp, alibaba or huawei."""
    bucket: NotRequired[pulumi.Input[str]]
    """Existing bucket to serve instead of creating one; nothing is created or changed on it."""
    access_logs_bucket: NotRequired[pulumi.Input[str]]
    """Bucket that receives the asset bucket's access logs (a created bucket only)."""
    domain: NotRequired[str]
    """Domain the CDN serves, e.g. assets.example.com (you point its DNS at the CDN). Required where the CDN has no
    hostname of its own (Capability.CDN_DEFAULT_HOSTNAME: every cloud but AWS)."""
    certificate: NotRequired[str]
    """The domain's certificate in the cloud's certificate service, where the cloud needs one with a domain
    (`CloudBackend.assets_certificate`: an ACM ARN on AWS, an SCM id on Huawei Cloud)."""
    force_destroy: NotRequired[bool]
    """Let `pulumi destroy` delete a created bucket that still holds objects (default false; dev stacks only)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class StaticAssets(pulumi.ComponentResource):
    """A private bucket behind an HTTPS-only CDN that alone can read it, on the CDN's hostname or your domain."""

    bucket_name: pulumi.Output[str]
    """The bucket the CDN serves (created, or the one brought)."""
    url: pulumi.Output[str]
    """HTTPS URL of the CDN."""
    required_bucket_policy: pulumi.Output[str | None]
    """For a brought bucket: the policy statement its owner must add so that the CDN can read it."""

    def __init__(self, name: str, args: StaticAssetsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(StaticAssetsArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        problem = backend.require(Capability.PRIVATE_CDN_ORIGIN, field=f"{name}.cloud",
                                  fix="serve static files from elsewhere")
        problems = [problem] if problem else []
        problems += static_assets_problems(backend, checked.get("domain"), checked.get("certificate"),
                                           domain_field=f"{name}.domain", certificate_field=f"{name}.certificate")
        if problems:
            raise InputError(problems)
        super().__init__("inferstack:index:StaticAssets", name, None, opts)
        result = backend.create_static_assets(self, name, StaticAssetsRequest(
            existing_bucket=checked.get("bucket"), logs_bucket=checked.get("access_logs_bucket"),
            domain=checked.get("domain"), certificate=checked.get("certificate"),
            force_destroy=checked.get("force_destroy", False), tags=_tags(checked)))
        self.bucket_name = result.bucket
        self.url = result.url
        self.required_bucket_policy = pulumi.Output.from_input(result.required_bucket_policy)
        self.register_outputs({"bucket_name": self.bucket_name, "url": self.url,
                               "required_bucket_policy": self.required_bucket_policy})


def static_assets_problems(backend: CloudBackend, domain: str | None, certificate: str | None, *,
                           domain_field: str, certificate_field: str) -> list[Problem]:
    """What would keep the CDN from serving: a domain that is malformed, or missing where the CDN has no hostname
    of its own; a certificate that is malformed, missing where the cloud needs one, or given where it does not."""
    rule, cloud = backend.assets_certificate, backend.display_name
    certificate_arg = certificate_field.rsplit(".", 1)[-1]
    problems: list[Problem | None] = []
    hostname = backend.support(Capability.CDN_DEFAULT_HOSTNAME)
    if domain is not None:
        problems.append(domain_problem(domain_field, domain))
    elif not hostname.available:
        with_certificate = f", with {certificate_arg} ({rule.kind})" if rule else ""
        problems.append(Problem(domain_field, f"is required on {cloud}: {hostname.note}",
                                fix=f"give a domain whose DNS you control{with_certificate}, e.g. assets.example.com "
                                "(stack config inferstack:assetsDomain), or leave static assets out (static_assets "
                                "false)"))
    if certificate is None:
        if domain is not None and rule is not None:
            problems.append(Problem(certificate_field, f"is required with a domain on {cloud}: {rule.kind}",
                                    fix=f"give one such as {rule.example} (stack config inferstack:assetsCertificate)"))
    elif domain is None:
        problems.append(Problem(certificate_field, "is given without a domain", value=certificate,
                                fix="give the domain it covers too, or leave the certificate out"))
    elif rule is None:
        problems.append(Problem(certificate_field, f"is not used on {cloud}: the cloud issues the domain's "
                                "certificate itself", value=certificate, fix="leave the certificate out"))
    else:
        problems.append(rule.problem(certificate_field, certificate))
    return [problem for problem in problems if problem]


#### Secrets and identity ####


@with_config(ARGS_CONFIG)
class ServerSecretsArgs(TypedDict):
    cloud: str
    """Cloud whose secret store keeps the secrets: aws, gcp, alibaba or huawei."""
    api_key: NotRequired[pulumi.Input[str]]
    """Endpoint API key; stored encrypted, read by the server at boot."""
    hub_token: NotRequired[pulumi.Input[str]]
    """Model-hub token; stored encrypted, read by the server at boot."""
    cache_auth: NotRequired[pulumi.Input[str]]
    """The inference cache's Redis AUTH token; stored encrypted, read by the gateway at each start."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class ServerSecrets(pulumi.ComponentResource):
    """Puts the server's secrets in the cloud's secret store; outputs only references, never values."""

    api_key_ref: pulumi.Output[str | None]
    """Where the API key is stored (AWS SSM parameter name), never the key; None without an API key."""
    hub_token_ref: pulumi.Output[str | None]
    """Where the model-hub token is stored, never the token; None without a token."""
    cache_auth_ref: pulumi.Output[str | None]
    """Where the inference cache's AUTH token is stored, never the token; None without a cache."""
    secret_ids: pulumi.Output[list[str]]
    """The stored secrets' ids, for ServerIdentity.secret_ids."""

    def __init__(self, name: str, args: ServerSecretsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(ServerSecretsArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        problem = backend.require(Capability.SECRET_STORE, field=f"{name}.cloud", fix="keep the secrets elsewhere")
        if problem:
            raise InputError([problem])
        super().__init__("inferstack:index:ServerSecrets", name, None, opts)
        values = {ref: pulumi.Output.secret(checked[key]) for key, ref in _SECRET_NAMES.items() if key in checked}
        result = backend.create_secrets(self, name, SecretsRequest(values=values, tags=_tags(checked)))
        self.grant_ids = result.grant_ids
        self.api_key_ref = pulumi.Output.from_input(result.refs.get("api-key"))
        self.hub_token_ref = pulumi.Output.from_input(result.refs.get("hub-token"))
        self.cache_auth_ref = pulumi.Output.from_input(result.refs.get("cache-auth"))
        self.secret_ids = pulumi.Output.all(*result.grant_ids)
        self.register_outputs({"api_key_ref": self.api_key_ref, "hub_token_ref": self.hub_token_ref,
                               "cache_auth_ref": self.cache_auth_ref, "secret_ids": self.secret_ids})


_SECRET_NAMES = {"api_key": "api-key", "hub_token": "hub-token", "cache_auth": "cache-auth"}


@with_config(ARGS_CONFIG)
class ServerIdentityArgs(TypedDict):
    cloud: str
    """Cloud to create the identity on: aws, gcp, alibaba or huawei."""
    model_bucket: pulumi.Input[str]
    """Bucket holding the model files."""
    model_prefix: str
    """The only prefix the server may read (ends in '/')."""
    secret_ids: NotRequired[Sequence[pulumi.Input[str]]]
    """Secrets the server may read (from ServerSecrets.secret_ids)."""
    telemetry_grants: NotRequired[Sequence[pulumi.Input[str]]]
    """Where the server's monitoring agent may write its metrics and logs, in the cloud's terms (AWS: the CloudWatch
    Logs group ARN and the metric namespace); empty: nowhere."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class ServerIdentity(pulumi.ComponentResource):
    """The server's cloud identity: read the model prefix of one bucket, read its own secrets, managed shell."""

    identity_id: pulumi.Output[str]
    """The identity's cloud id (AWS role ARN)."""
    attachment: pulumi.Output[str]
    """What a server attaches to take this identity (AWS instance profile name)."""

    def __init__(self, name: str, args: ServerIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(ServerIdentityArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        prefix = checked["model_prefix"]
        if not prefix.endswith("/") or prefix.startswith("/"):
            raise input_error(f"{name}.model_prefix", "must be a relative folder ending in '/'", value=prefix,
                              fix="use the plan's model.bucket_prefix, e.g. models/llama-3.1-8b/bf16/")
        super().__init__("inferstack:index:ServerIdentity", name, None, opts)
        result = backend.create_identity(self, name, IdentityRequest(
            model_bucket=checked["model_bucket"], model_prefix=prefix, bundle_prefix=BUNDLE_PREFIX,
            secret_ids=[pulumi.Output.from_input(s) for s in checked.get("secret_ids", ())], tags=_tags(checked),
            telemetry_grants=[pulumi.Output.from_input(g) for g in checked.get("telemetry_grants", ())]))
        self.identity_id = result.identity_id
        self.attachment = result.attachment
        self.register_outputs({"identity_id": self.identity_id, "attachment": self.attachment})


#### Inference server ####


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


class InferenceServer(pulumi.ComponentResource):
    """A right-sized inference server from a plan: network, firewall, buckets, CDN, identity, secrets, servers."""

    endpoint_url: pulumi.Output[str]
    """URL of the inference API: https://<api_domain> for a fleet; else the server's own (first replica's)."""
    endpoint_urls: pulumi.Output[list[str]]
    """URL of each replica's inference API (a fleet: its one endpoint)."""
    load_balancer_address: pulumi.Output[str | None]
    """A fleet's load balancer (DNS name or address), where api_domain must point; None without a fleet."""
    group_id: pulumi.Output[str | None]
    """A fleet's managed group; None without a fleet."""
    instance_ids: pulumi.Output[list[str]]
    """The servers' instance ids, one per replica (empty for a fleet: its group manages them)."""
    public_ips: pulumi.Output[list[str]]
    """The servers' public addresses ("" for a server without one)."""
    private_ips: pulumi.Output[list[str]]
    """The servers' addresses inside the network."""
    model_bucket_name: pulumi.Output[str]
    """Bucket the server reads the model from (upload the files under the plan's model prefix)."""
    static_assets_url: pulumi.Output[str | None]
    """HTTPS URL of the static-assets CDN; None without static assets."""
    static_assets_policy: pulumi.Output[str | None]
    """For a brought assets bucket: the policy statement its owner must add so that the CDN can read it."""
    firewall_ids: pulumi.Output[list[str]]
    """Firewalls the servers attach (created, or the security groups brought)."""
    identity_id: pulumi.Output[str | None]
    """The created identity (AWS role ARN); None when one was brought."""
    api_key_ref: pulumi.Output[str | None]
    """Where the API key is stored (AWS SSM parameter name), never the key."""
    plan_summary: pulumi.Output[dict[str, Any]]
    """What runs and what it costs: instance type and count, GPUs, region, stage, monthly cost, a one-line summary."""

    def __init__(self, name: str, args: InferenceServerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = _with_models(validate_args(InferenceServerArgs, args, name), name)
        self.plan = _resolve_plan(checked, name)
        self.backend = backend_for(self.plan.cloud, field=f"{name}.cloud")
        networks = _check_placement(checked, self.plan, self.backend, name)
        self.allowed_cidrs = [str(n) for n in networks]
        super().__init__("inferstack:index:InferenceServer", name, None, opts)
        self._name = name
        self._tags = {**default_tags(self.plan.workload), **checked.get("tags", {})}
        production = self.plan.stage == "production"
        self.fleet = _runs_as_fleet(self.plan, self.backend, name)
        internet_facing = any(not is_private(n) for n in networks)

        network_id, subnet_ids, lb_subnet_ids, network_cidr = self._network(checked, internet_facing)
        firewall_ids, lb_firewall_id = self._firewall(checked, network_id, network_cidr)
        model_bucket, logs_bucket = self._model_store(checked, force_destroy=not production)
        self._static_assets(checked, logs_bucket, force_destroy=not production)
        protected = _protects_servers(checked, self.plan)
        cache = self._cache(checked, network_id, subnet_ids, network_cidr, firewall_ids, protected)
        secrets = self._secrets(checked, cache.auth_token if cache else None)
        telemetry = self.backend.create_telemetry(self, name, TelemetryRequest(
            plan=self.plan, protected=production, tags=self._tags))
        attachment = self._identity(checked, model_bucket, secrets, telemetry)
        cache_endpoint = self._cache_endpoint(cache, secrets)
        telemetry_target = telemetry.target if telemetry else pulumi.Output.from_input(None)
        rendered = pulumi.Output.all(
            model_bucket, *([secrets.api_key_ref, secrets.hub_token_ref] if secrets else [None, None]), cache_endpoint,
            telemetry_target).apply(lambda refs: self._render_bootstrap(*refs))
        bundle = self.backend.create_bundle(self, name, BundleRequest(
            bucket=model_bucket, key=rendered.apply(lambda r: r.bundle_key),
            content=rendered.apply(lambda r: r.bundle), tags=self._tags))
        # The user data names the bundle: a server boots only once the bundle is stored.
        user_data = pulumi.Output.all(rendered, bundle).apply(lambda values: values[0].user_data)
        if self.fleet:
            canary = (self._canary(checked, model_bucket, secrets, cache_endpoint, telemetry, telemetry_target)
                      if self.plan.canary else None)
            fleet = self.backend.create_fleet(self, name, FleetRequest(
                plan=self.plan, network_id=network_id, server_subnet_ids=subnet_ids,
                load_balancer_subnet_ids=lb_subnet_ids, firewall_ids=firewall_ids,
                load_balancer_firewall_id=lb_firewall_id, attachment=attachment, user_data=user_data,
                internet_facing=internet_facing, allowed_cidrs=tuple(self.allowed_cidrs), network_cidr=network_cidr,
                api_domain=checked["api_domain"], api_certificate=checked.get("api_certificate"),
                protected=protected, tags=self._tags, canary=canary))
            watched = AlarmsRequest(plan=self.plan, fleet=fleet, notification_target=checked.get("alarm_notification"),
                                    tags=self._tags, telemetry=telemetry)
            self.backend.create_alarms(self, name, watched)
            if self.backend.dashboard_gap is None:
                self.backend.create_dashboard(self, name, watched)
            else:
                pulumi.log.info(f"{name}: no dashboard is created: {self.backend.dashboard_gap}", resource=self)
            self.endpoint_url = fleet.endpoint_url
            self.endpoint_urls = pulumi.Output.all(fleet.endpoint_url)
            self.load_balancer_address = pulumi.Output.from_input(fleet.load_balancer_address)
            self.group_id = pulumi.Output.from_input(fleet.group_id)
            self.instance_ids = self.public_ips = self.private_ips = pulumi.Output.from_input([])
        else:
            servers = self.backend.create_servers(self, name, ServersRequest(
                plan=self.plan, subnet_ids=subnet_ids, firewall_ids=firewall_ids, attachment=attachment,
                user_data=user_data, public_endpoint=internet_facing, protected=protected, tags=self._tags))
            port = self.plan.serving.port
            self.endpoint_urls = pulumi.Output.all(*(
                pulumi.Output.all(public, private).apply(lambda ips: f"http://{ips[0] or ips[1]}:{port}")
                for public, private in zip(servers.public_ips, servers.private_ips, strict=True)))
            self.endpoint_url = self.endpoint_urls.apply(lambda urls: urls[0])
            self.load_balancer_address = self.group_id = pulumi.Output.from_input(None)
            self.instance_ids = pulumi.Output.all(*servers.instance_ids)
            self.public_ips = pulumi.Output.all(*servers.public_ips)
            self.private_ips = pulumi.Output.all(*servers.private_ips)
        self.model_bucket_name = pulumi.Output.from_input(model_bucket)
        self.firewall_ids = pulumi.Output.all(*firewall_ids)
        self.api_key_ref = secrets.api_key_ref if secrets else pulumi.Output.from_input(None)
        self.plan_summary = pulumi.Output.from_input(plan_summary(self.plan))
        self.register_outputs({
            "endpoint_url": self.endpoint_url, "endpoint_urls": self.endpoint_urls,
            "load_balancer_address": self.load_balancer_address, "group_id": self.group_id,
            "instance_ids": self.instance_ids, "public_ips": self.public_ips, "private_ips": self.private_ips,
            "model_bucket_name": self.model_bucket_name, "static_assets_url": self.static_assets_url,
            "static_assets_policy": self.static_assets_policy, "firewall_ids": self.firewall_ids,
            "identity_id": self.identity_id, "api_key_ref": self.api_key_ref, "plan_summary": self.plan_summary})

    def _network(self, checked: Mapping[str, Any], internet_facing: bool) -> tuple[Any, list[Any], list[Any], Any]:
        """(network, the servers' subnets, the load balancer's subnets, the network's range)."""
        if "network_id" in checked:
            needs_cidr = self.fleet or "security_group_ids" not in checked
            cidr = self.backend.network_cidr(self, checked["network_id"]) if needs_cidr else None
            servers = list(checked["subnet_ids"])
            return checked["network_id"], servers, list(checked.get("load_balancer_subnet_ids", servers)), cidr
        self.network = Network(f"{self._name}-network", {
            "cloud": self.plan.cloud, "instance_type": self.plan.instance_type, "zones": self.plan.zones,
            "private_servers": self.fleet, "tags": self._tags}, opts=child_options(self))
        if not self.fleet:
            return self.network.network_id, self.network.subnets, [], self.network.cidr_block
        public, private = self.network.subnets, self.network.private_subnets
        return self.network.network_id, private, public if internet_facing else private, self.network.cidr_block

    def _firewall(self, checked: Mapping[str, Any], network_id: Any, network_cidr: Any) -> tuple[list[Any], Any]:
        """(the servers' firewalls, the load balancer's own firewall where the cloud gives it one)."""
        if "security_group_ids" in checked:
            return list(checked["security_group_ids"]), None
        self.firewall = Firewall(f"{self._name}-firewall", {
            "cloud": self.plan.cloud, "network_id": network_id, "network_cidr": network_cidr,
            "port": self.plan.serving.port, "metrics_port": self.plan.serving.metrics_port,
            "allowed_cidrs": self.allowed_cidrs, "load_balanced": self.fleet, "tags": self._tags},
            opts=child_options(self))
        return [self.firewall.firewall_id], self.firewall.load_balancer_firewall_id

    def _model_store(self, checked: Mapping[str, Any], *, force_destroy: bool) -> tuple[Any, Any]:
        if "model_bucket" in checked:
            return checked["model_bucket"], None
        self.model_store = ModelStore(f"{self._name}-store", {
            "cloud": self.plan.cloud, "force_destroy": force_destroy, "tags": self._tags}, opts=child_options(self))
        return self.model_store.model_bucket_name, self.model_store.logs_bucket_name

    def _static_assets(self, checked: Mapping[str, Any], logs_bucket: Any, *, force_destroy: bool) -> None:
        self.static_assets_url = pulumi.Output.from_input(None)
        self.static_assets_policy = pulumi.Output.from_input(None)
        if not checked.get("static_assets", True):
            return
        assets_args: StaticAssetsArgs = {"cloud": self.plan.cloud, "force_destroy": force_destroy, "tags": self._tags}
        if "assets_domain" in checked:
            assets_args["domain"] = checked["assets_domain"]
        if "assets_certificate" in checked:
            assets_args["certificate"] = checked["assets_certificate"]
        if "assets_bucket" in checked:
            assets_args["bucket"] = checked["assets_bucket"]
        elif logs_bucket is not None:
            assets_args["access_logs_bucket"] = logs_bucket
        self.static_assets = StaticAssets(f"{self._name}-assets", assets_args, opts=child_options(self))
        self.static_assets_url = self.static_assets.url
        self.static_assets_policy = self.static_assets.required_bucket_policy

    def _cache(self, checked: Mapping[str, Any], network_id: Any, subnet_ids: list[Any], network_cidr: Any,
               firewall_ids: list[Any], protected: bool) -> Any:
        """The managed Redis of a plan with a cache (the backend's CacheResult), or None."""
        if self.plan.cache is None:
            return None
        token = checked.get("cache_auth_token")
        return self.backend.create_cache(self, self._name, CacheRequest(
            plan=self.plan, network_id=network_id, subnet_ids=subnet_ids, network_cidr=network_cidr,
            server_firewall_ids=firewall_ids, firewall_created="security_group_ids" not in checked,
            auth_token=None if token is None else checked_cache_token(token, f"{self._name}.cache_auth_token"),
            highly_available=self.plan.stage == "production", protected=protected, tags=self._tags))

    def _cache_endpoint(self, cache: Any, secrets: "ServerSecrets | None") -> pulumi.Output[CacheEndpoint | None]:
        """Where the gateway finds the cache: address, port, CA and the token's reference (never the token)."""
        if cache is None or secrets is None:
            return pulumi.Output.from_input(None)
        return pulumi.Output.all(cache.host, cache.port, secrets.cache_auth_ref, cache.ca_certificate).apply(
            lambda values: CacheEndpoint(host=values[0], port=values[1], auth_secret=values[2],
                                         ca_certificate=values[3], verify=cache.verify))

    def _secrets(self, checked: Mapping[str, Any], cache_auth: Any = None) -> ServerSecrets | None:
        if "api_key" not in checked and "hub_token" not in checked and cache_auth is None:
            return None
        secrets_args: ServerSecretsArgs = {"cloud": self.plan.cloud, "tags": self._tags}
        if cache_auth is not None:
            secrets_args["cache_auth"] = cache_auth
        if "api_key" in checked:
            secrets_args["api_key"] = checked["api_key"]
        if "hub_token" in checked:
            secrets_args["hub_token"] = checked["hub_token"]
        return ServerSecrets(f"{self._name}-secrets", secrets_args, opts=child_options(self))

    def _identity(self, checked: Mapping[str, Any], model_bucket: Any, secrets: ServerSecrets | None,
                  telemetry: TelemetryResult | None) -> Any:
        if "instance_identity" in checked:
            self.identity_id = pulumi.Output.from_input(None)
            if telemetry is not None:
                pulumi.log.warn(f"{self._name}: the brought identity must also let the monitoring agent write its "
                                "metrics and logs, or the servers run blind (docs/deploy-<cloud>.md, \"Monitoring\")")
            return checked["instance_identity"]
        self.identity = ServerIdentity(f"{self._name}-identity", {
            "cloud": self.plan.cloud, "model_bucket": model_bucket, "model_prefix": self.plan.model.revisions_prefix,
            "secret_ids": secrets.grant_ids if secrets else [],
            "telemetry_grants": list(telemetry.grants) if telemetry else [], "tags": self._tags},
            opts=child_options(self))
        self.identity_id = self.identity.identity_id
        return self.identity.attachment

    def _canary(self, checked: Mapping[str, Any], model_bucket: Any, secrets: ServerSecrets | None,
                cache_endpoint: pulumi.Output[CacheEndpoint | None], telemetry: TelemetryResult | None,
                telemetry_target: pulumi.Output[TelemetryTarget | None]) -> CanaryRequest:
        """The canary group's own identity (reading the canary model's prefix only) and boot script, made as the main
        group's are; the backend builds its group behind the same load balancer (`FleetRequest.canary`)."""
        canary = self.plan.canary
        assert canary is not None
        name = f"{self._name}-canary"
        if "instance_identity" in checked:
            attachment = checked["instance_identity"]
            pulumi.log.warn(f"{self._name}: the canary servers take the brought identity too: it must also read "
                            f"{canary.plan.model.revisions_prefix} in the model bucket")
        else:
            attachment = ServerIdentity(f"{name}-identity", {
                "cloud": canary.plan.cloud, "model_bucket": model_bucket,
                "model_prefix": canary.plan.model.revisions_prefix, "secret_ids": secrets.grant_ids if secrets else [],
                "telemetry_grants": list(telemetry.grants) if telemetry else [], "tags": self._tags},
                opts=child_options(self)).attachment
        rendered = pulumi.Output.all(
            model_bucket, *([secrets.api_key_ref, secrets.hub_token_ref] if secrets else [None, None]), cache_endpoint,
            telemetry_target).apply(lambda refs: self._render_bootstrap(refs[0], refs[1], refs[2], refs[3], refs[4],
                                                                 plan=canary.plan, group="canary"))
        bundle = self.backend.create_bundle(self, name, BundleRequest(
            bucket=model_bucket, key=rendered.apply(lambda r: r.bundle_key),
            content=rendered.apply(lambda r: r.bundle), tags=self._tags))
        user_data = pulumi.Output.all(rendered, bundle).apply(lambda values: values[0].user_data)
        return CanaryRequest(plan=canary.plan, weight=canary.weight, attachment=attachment, user_data=user_data)

    def _render_bootstrap(self, model_bucket: str, api_key_ref: str | None, hub_token_ref: str | None,
                          cache: CacheEndpoint | None = None, telemetry: TelemetryTarget | None = None,
                          plan: DeploymentPlan | None = None, group: ServerGroup = "main") -> RenderedBootstrap:
        plan = plan or self.plan
        options = bootstrap.BootstrapOptions(model_bucket=model_bucket, region=plan.region,
                                             api_key_secret=api_key_ref, hub_token_secret=hub_token_ref, cache=cache,
                                             telemetry=telemetry, group=group)
        return bootstrap.render_bootstrap(plan, plan.cloud, options)


def plan_summary(plan: DeploymentPlan) -> dict[str, Any]:
    """The facts a reader of the stack outputs wants first: what runs, how many, and what it costs."""
    return {
        "instance_type": plan.instance_type,
        "instance_count": plan.instance_count,
        "gpus_per_instance": plan.gpus_per_instance,
        "accelerator": plan.accelerator.name if plan.accelerator else None,
        "region": plan.region,
        "stage": plan.stage,
        "monthly_cost": str(plan.price.monthly) if plan.price.monthly else None,
        "monthly_cost_ranking": str(plan.price.monthly_ranking) if plan.price.monthly_ranking else None,
        "summary": plan.summary(),
    }


def _tags(checked: Mapping[str, Any]) -> dict[str, str]:
    return {**default_tags(), **checked.get("tags", {})}


def _with_models(checked: dict[str, Any], name: str) -> dict[str, Any]:
    """`plan` and `workload` as pydantic models, however they came: as models (Python), or as the text or the mapping
    another language sends through the Pulumi package (its SDK cannot build a pydantic model)."""
    if "plan" in checked:
        checked["plan"] = _plan_model(checked["plan"], checked.get("cloud"), name)
    if "workload" in checked:
        checked["workload"] = _workload_model(checked["workload"], f"{name}.workload")
    return checked


def _plan_model(value: Any, cloud: str | None, name: str) -> DeploymentPlan:
    if isinstance(value, DeploymentPlan):
        return value
    field = f"{name}.plan"
    _require_known(value, field)
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError as error:
            raise input_error(field, f"is not JSON: {error}", fix="pass the text `inferstack plan WORKLOAD --json` "
                              "wrote, e.g. the contents of plan.json") from None
    reported = data.get("clouds") if isinstance(data, Mapping) else None
    if cloud is None and isinstance(reported, list):
        clouds = [outcome.get("cloud") for outcome in reported if isinstance(outcome, Mapping)]
        if len(clouds) != 1:
            raise input_error(f"{name}.cloud", "is required with a plan report that covers several clouds",
                              value=clouds, fix="pass the cloud whose deployment to create, e.g. cloud='aws'")
        cloud = clouds[0]
    return read_plan(data, cloud, source=field)  # type: ignore[arg-type]  # an unknown cloud finds no deployment


def _workload_model(value: Any, field: str) -> WorkloadSpec:
    if isinstance(value, WorkloadSpec):
        return value
    _require_known(value, field)
    data = parse_document(value, suffix=".yaml", source="YAML text", field=field) if isinstance(value, str) else value
    return parse_workload(data, source=field)


def _require_known(value: Any, field: str) -> None:
    """The plan decides what to create, so it must be a plain value when the component is created."""
    if isinstance(value, pulumi.Output):
        raise input_error(field, "is an Output: it must be known when the component is created",
                          fix="read the file in your program (readFileSync, fn::readFile), not from a resource output")


def _resolve_plan(checked: Mapping[str, Any], name: str) -> DeploymentPlan:
    plan: DeploymentPlan | None = checked.get("plan")
    workload: WorkloadSpec | None = checked.get("workload")
    if (plan is None) == (workload is None):
        raise input_error(f"{name}.plan", "give exactly one of plan or workload", value=sorted(checked),
                          fix="pass plan=<DeploymentPlan from `inferstack plan --json`> or workload=<WorkloadSpec>")
    cloud: Cloud | None = checked.get("cloud")
    if plan is not None:
        if cloud is not None and cloud != plan.cloud:
            raise input_error(f"{name}.cloud", f"differs from the plan's cloud ({plan.cloud})", value=cloud,
                              fix="drop cloud, or plan the workload for this cloud")
        return plan
    assert workload is not None
    if cloud is None and len(workload.placement.clouds) == 1:
        cloud = workload.placement.clouds[0]
    if cloud is None:
        raise input_error(f"{name}.cloud", "is required with a workload that allows several clouds",
                          value=workload.placement.clouds, fix="pass cloud='aws' (or another allowed cloud)")
    return size_workload(workload, cloud, field=f"{name}.workload")


def size_workload(workload: WorkloadSpec, cloud: Cloud, *, field: str = "workload",
                  prices_file: Path | None = None, calibration: "Calibration | None" = None) -> DeploymentPlan:
    """The cheapest feasible plan for `workload` on `cloud`, in the region the cloud's provider deploys to;
    `calibration`: measured speeds (the stack's inferstack:calibrationFile).

    Raises InfeasibleError with the planner's reasons when nothing fits.
    """
    try:
        from inferstack.sizing import plan_workload  # imported here: only the workload path needs sizing
    except ImportError:
        raise input_error(field, "cannot be sized: inferstack.sizing.plan_workload is not available",
                          fix="pass a plan instead (inferstack plan WORKLOAD --json)") from None
    workload = for_stack(workload, cloud, region=backend_for(cloud).configured_region(), cloud_field=field)
    report = plan_workload(workload, clouds=[cloud], prices_file=prices_file, calibration=calibration)
    return report.outcome(cloud).require_chosen(field)


def _check_placement(checked: Mapping[str, Any], plan: DeploymentPlan, backend: CloudBackend,
                     name: str) -> tuple[IpNetwork, ...]:
    """Every check that needs no cloud call, all at once; returns the allowed networks."""
    networks, problems = parse_cidrs(checked.get("allowed_cidrs", ()), f"{name}.allowed_cidrs")
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
    public = [str(n) for n in networks if not is_private(n)]
    if public and "api_key" not in checked:
        problems.append(Problem(f"{name}.api_key", f"is required when the endpoint is open beyond private networks "
                                f"({', '.join(public)})", fix="pass a secret API key, e.g. "
                                "`pulumi config set --secret inferstack:apiKey $(openssl rand -hex 32)`"))
    problems += backend.plan_problems(plan, field=f"{name}.plan")
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
    endpoint = plan.fleet is not None and backend.support(Capability.MANAGED_FLEET).available
    static_assets = checked.get("static_assets", True)
    problems += _unused_endpoint_problems(checked, backend, name, api=endpoint, assets=static_assets)
    if endpoint:
        problems += api_endpoint_problems(backend, checked.get("api_domain"), checked.get("api_certificate"),
                                          domain_field=f"{name}.api_domain",
                                          certificate_field=f"{name}.api_certificate")
        brought = checked.get("load_balancer_subnet_ids", checked.get("subnet_ids"))
        problems += backend.fleet_problems(plan, api_certificate=checked.get("api_certificate"), prefix=name,
                                           load_balancer_subnets=len(brought) if brought is not None else None)
        if public and "network_id" in checked and "load_balancer_subnet_ids" not in checked:
            problems.append(Problem(f"{name}.load_balancer_subnet_ids", "is required with a brought network and an "
                                    f"endpoint open beyond private networks ({', '.join(public)})",
                                    fix="give public subnets for the load balancer; subnet_ids are the servers' "
                                    "private subnets (with NAT egress)"))
    problems += _notification_problems(checked, backend, name)
    secrets = "api_key" in checked or "hub_token" in checked or plan.cache is not None
    problems += _cache_problems(checked, plan, backend, name)
    for capability, wanted, fix in (
        (Capability.PRIVATE_CDN_ORIGIN, static_assets, "set static_assets to false"),
        (Capability.SPOT_CAPACITY, plan.spot, "plan without spot capacity"),
        (Capability.SECRET_STORE, secrets, "leave the secrets out"),
        (Capability.MANAGED_CACHE, plan.cache is not None, "remove `cache:` from the workload and re-plan"),
    ):
        problem = backend.require(capability, field=f"{name}.{capability.value}", fix=fix) if wanted else None
        if problem:
            problems.append(problem)
    if static_assets:
        problems += static_assets_problems(backend, checked.get("assets_domain"), checked.get("assets_certificate"),
                                           domain_field=f"{name}.assets_domain",
                                           certificate_field=f"{name}.assets_certificate")
    if problems:
        raise InputError(problems)
    if plan.fleet is None and "api_domain" in checked:  # one stack config can serve several stages
        pulumi.log.warn(f"{name}: api_domain is for a fleet's HTTPS endpoint; this plan is one server, which serves "
                        "its own address (no load balancer), so the domain is not used")
    if _protects_servers(checked, plan):
        _warn_missing(backend, Capability.TERMINATION_PROTECTION, name)
    elif plan.stage == "production":
        pulumi.log.warn(f"{name}: production servers are unprotected (protect_servers false, stack config "
                        "inferstack:protectServers): a change that replaces them now deletes each server, then "
                        "creates its successor. Set it back to true once the rollout is done")
    if secrets:
        _warn_missing(backend, Capability.SECRET_SCOPED_GRANTS, name)
    _warn_missing(backend, Capability.METADATA_HARDENING, name)
    return networks


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


def _runs_as_fleet(plan: DeploymentPlan, backend: CloudBackend, name: str) -> bool:
    """A plan with a fleet runs as one where the cloud has the machinery; elsewhere its servers stand alone."""
    if plan.fleet is None:
        return False
    support = backend.support(Capability.MANAGED_FLEET)
    if not support.available:
        pulumi.log.warn(f"{name}: the plan is a fleet of {plan.fleet.min_replicas}-{plan.fleet.max_replicas} servers, "
                        f"but {backend.display_name} has no {Capability.MANAGED_FLEET.value} ({support.note}): "
                        f"{plan.instance_count} servers are created one by one, without a load balancer")
    else:
        _warn_missing(backend, Capability.ROLLING_UPDATE, name)
    return support.available


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


def _protects_servers(checked: Mapping[str, Any], plan: DeploymentPlan) -> bool:
    """`protect_servers`, by default true in production."""
    return bool(checked.get("protect_servers", plan.stage == "production"))


def _warn_missing(backend: CloudBackend, capability: Capability, name: str) -> None:
    support = backend.support(capability)
    if not support.available:
        pulumi.log.warn(f"{name}: no {capability.value} on {backend.display_name}: {support.note}")

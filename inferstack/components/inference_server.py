"""InferenceServer: a right-sized inference server from a plan, on any cloud, through the cloud's backend.

Give it a plan (or a workload, which it sizes) and it composes a `Network`, a `Firewall` (network.py), a `ModelStore`,
`StaticAssets` (storage.py), `ServerSecrets`, a `ServerIdentity` (identity.py) and the servers themselves. Every piece
the caller brings (network, subnets, security groups, identity, buckets) replaces the piece that would have been
created, and nothing is created for it.

It checks every argument and the plan first, all at once, into one `ServerSettings` (server_settings.py), and raises
an InputError naming each problem before it registers anything, so bad input never leaves a half-created stack. The
build steps below read the settings and check nothing again; the children get requests already checked.

The components are also a Pulumi package for other languages (`provider/`, docs/existing-repo.md): Pulumi's schema
analyzer reads the `*Args` TypedDicts and the output annotations as live types. So the component modules do not use
`from __future__ import annotations`, and args use only types the analyzer maps to a schema: str, int, bool, lists
and maps of them, pulumi.Input, and Any for the plan and the workload (which other languages send as text or a
mapping, checked with pydantic). Attribute docstrings become the schema's descriptions.
"""

from typing import Any

import pulumi

from inferstack import bootstrap
from inferstack.bootstrap.gateway import CacheEndpoint, ServerGroup
from inferstack.bootstrap.render import RenderedBootstrap
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components.contract import (
    AlarmsRequest,
    BundleRequest,
    CacheRequest,
    CacheResult,
    CanaryRequest,
    FleetRequest,
    ModelStoreRequest,
    NetworkRequest,
    SecretsRequest,
    ServersRequest,
    StaticAssetsRequest,
    StrOutput,
    TelemetryRequest,
    TelemetryResult,
)
from inferstack.components.identity import ServerIdentity, ServerSecrets, identity_request, secret_values
from inferstack.components.naming import child_options
from inferstack.components.network import Firewall, Network, firewall_request
from inferstack.components.server_settings import InferenceServerArgs, ServerSettings, check_server_args
from inferstack.components.storage import ModelStore, StaticAssets
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan


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
        settings = check_server_args(args, name)
        _check_streaming_identity(settings, name)
        super().__init__("inferstack:index:InferenceServer", name, None, opts)
        self._name = name
        self.plan = settings.plan
        backend, tags = settings.backend, settings.tags
        production = self.plan.stage == "production"

        network_id, subnet_ids, lb_subnet_ids, network_cidr = self._network(settings)
        firewall_ids, lb_firewall_id = self._firewall(settings, network_id, network_cidr)
        model_bucket, logs_bucket = self._model_store(settings, force_destroy=not production)
        self._static_assets(settings, logs_bucket, force_destroy=not production)
        cache = self._cache(settings, network_id, subnet_ids, network_cidr, firewall_ids)
        secrets = self._secrets(settings, cache.auth_token if cache else None)
        telemetry = backend.create_telemetry(self, name, TelemetryRequest(
            plan=self.plan, protected=production, tags=tags))
        attachment, model_reader = self._identity(settings, model_bucket, secrets, telemetry)
        cache_endpoint = self._cache_endpoint(cache, secrets)
        telemetry_target = telemetry.target if telemetry else pulumi.Output.from_input(None)
        rendered = pulumi.Output.all(
            model_bucket, *([secrets.api_key_ref, secrets.hub_token_ref] if secrets else [None, None]), cache_endpoint,
            telemetry_target, model_reader).apply(lambda refs: self._render_bootstrap(*refs))
        bundle = backend.create_bundle(self, name, BundleRequest(
            bucket=model_bucket, key=rendered.apply(lambda r: r.bundle_key),
            content=rendered.apply(lambda r: r.bundle), tags=tags))
        # The user data names the bundle: a server boots only once the bundle is stored.
        user_data = pulumi.Output.all(rendered, bundle).apply(lambda values: values[0].user_data)
        if settings.api_endpoint is not None:
            canary = (self._canary(settings, model_bucket, secrets, cache_endpoint, telemetry, telemetry_target)
                      if self.plan.canary else None)
            self._fleet(settings, FleetRequest(
                plan=self.plan, network_id=network_id, server_subnet_ids=subnet_ids,
                load_balancer_subnet_ids=lb_subnet_ids, firewall_ids=firewall_ids,
                load_balancer_firewall_id=lb_firewall_id, attachment=attachment, user_data=user_data,
                internet_facing=settings.internet_facing, allowed_cidrs=settings.allowed_cidrs,
                network_cidr=network_cidr, api_domain=settings.api_endpoint.domain,
                api_certificate=settings.api_endpoint.certificate, protected=settings.protected, tags=tags,
                canary=canary), telemetry)
        else:
            self._servers(settings, ServersRequest(
                plan=self.plan, subnet_ids=subnet_ids, firewall_ids=firewall_ids, attachment=attachment,
                user_data=user_data, public_endpoint=settings.internet_facing, protected=settings.protected,
                tags=tags))
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

    #### Network and firewall ####

    def _network(self, settings: ServerSettings) -> tuple[Any, list[Any], list[Any], Any]:
        """(network, the servers' subnets, the load balancer's subnets, the network's range)."""
        brought = settings.brought.network
        if brought is not None:
            needs_cidr = settings.fleet or settings.brought.security_group_ids is None
            cidr = settings.backend.network_cidr(self, brought.network_id) if needs_cidr else None
            return (brought.network_id, list(brought.server_subnet_ids), list(brought.load_balancer_subnet_ids),
                    cidr)
        self.network = Network.from_request(f"{self._name}-network", settings.backend, NetworkRequest(
            zones=self.plan.zones, instance_type=self.plan.instance_type, tags=settings.tags,
            private_servers=settings.fleet), opts=child_options(self))
        if not settings.fleet:
            return self.network.network_id, self.network.subnets, [], self.network.cidr_block
        public, private = self.network.subnets, self.network.private_subnets
        return (self.network.network_id, private, public if settings.internet_facing else private,
                self.network.cidr_block)

    def _firewall(self, settings: ServerSettings, network_id: Any, network_cidr: Any) -> tuple[list[Any], Any]:
        """(the servers' firewalls, the load balancer's own firewall where the cloud gives it one)."""
        if settings.brought.security_group_ids is not None:
            return list(settings.brought.security_group_ids), None
        self.firewall = Firewall.from_request(f"{self._name}-firewall", settings.backend, firewall_request(
            network_id=network_id, network_cidr=network_cidr, port=self.plan.serving.port,
            metrics_port=self.plan.serving.metrics_port, allowed_cidrs=settings.allowed_cidrs,
            load_balanced=settings.fleet, tags=settings.tags), opts=child_options(self))
        return [self.firewall.firewall_id], self.firewall.load_balancer_firewall_id

    #### Storage ####

    def _model_store(self, settings: ServerSettings, *, force_destroy: bool) -> tuple[Any, Any]:
        if settings.brought.model_bucket is not None:
            return settings.brought.model_bucket, None
        self.model_store = ModelStore.from_request(f"{self._name}-store", settings.backend, ModelStoreRequest(
            force_destroy=force_destroy, tags=settings.tags), opts=child_options(self))
        return self.model_store.model_bucket_name, self.model_store.logs_bucket_name

    def _static_assets(self, settings: ServerSettings, logs_bucket: Any, *, force_destroy: bool) -> None:
        self.static_assets_url = pulumi.Output.from_input(None)
        self.static_assets_policy = pulumi.Output.from_input(None)
        if not settings.static_assets:
            return
        bucket = settings.brought.assets_bucket
        self.static_assets = StaticAssets.from_request(f"{self._name}-assets", settings.backend, StaticAssetsRequest(
            existing_bucket=bucket, logs_bucket=logs_bucket if bucket is None else None,
            domain=settings.assets_domain, certificate=settings.assets_certificate, force_destroy=force_destroy,
            tags=settings.tags), opts=child_options(self))
        self.static_assets_url = self.static_assets.url
        self.static_assets_policy = self.static_assets.required_bucket_policy

    #### Cache, secrets and identity ####

    def _cache(self, settings: ServerSettings, network_id: Any, subnet_ids: list[Any], network_cidr: Any,
               firewall_ids: list[Any]) -> CacheResult | None:
        """The managed Redis of a plan with a cache, or None."""
        if self.plan.cache is None:
            return None
        return settings.backend.create_cache(self, self._name, CacheRequest(
            plan=self.plan, network_id=network_id, subnet_ids=subnet_ids, network_cidr=network_cidr,
            server_firewall_ids=firewall_ids, firewall_created=settings.brought.security_group_ids is None,
            auth_token=settings.cache_auth_token, highly_available=self.plan.stage == "production",
            protected=settings.protected, tags=settings.tags))

    def _cache_endpoint(self, cache: CacheResult | None,
                        secrets: ServerSecrets | None) -> pulumi.Output[CacheEndpoint | None]:
        """Where the gateway finds the cache: address, port, CA and the token's reference (never the token)."""
        if cache is None or secrets is None:
            return pulumi.Output.from_input(None)
        return pulumi.Output.all(cache.host, cache.port, secrets.cache_auth_ref, cache.ca_certificate).apply(
            lambda values: CacheEndpoint(host=values[0], port=values[1], auth_secret=values[2],
                                         ca_certificate=values[3], verify=cache.verify))

    def _secrets(self, settings: ServerSettings, cache_auth: StrOutput | None) -> ServerSecrets | None:
        given = {"api_key": settings.api_key, "hub_token": settings.hub_token, "cache_auth": cache_auth}
        values = secret_values({key: value for key, value in given.items() if value is not None})
        if not values:
            return None
        return ServerSecrets.from_request(f"{self._name}-secrets", settings.backend, SecretsRequest(
            values=values, tags=settings.tags), opts=child_options(self))

    def _identity(self, settings: ServerSettings, model_bucket: Any, secrets: ServerSecrets | None,
                  telemetry: TelemetryResult | None) -> tuple[Any, StrOutput | None]:
        """(what the servers attach, the streaming runtime's own role or None)."""
        brought = settings.brought.instance_identity
        if brought is not None:
            self.identity_id = pulumi.Output.from_input(None)
            if telemetry is not None:
                pulumi.log.warn(f"{self._name}: the brought identity must also let the monitoring agent write its "
                                "metrics and logs, or the servers run blind (docs/deploy-<cloud>.md, \"Monitoring\")")
            return brought, None
        self.identity = self._server_identity(settings, f"{self._name}-identity", self.plan, model_bucket, secrets,
                                              telemetry)
        self.identity_id = self.identity.identity_id
        return self.identity.attachment, self.identity.model_reader_id

    def _server_identity(self, settings: ServerSettings, name: str, plan: DeploymentPlan, model_bucket: Any,
                         secrets: ServerSecrets | None, telemetry: TelemetryResult | None) -> ServerIdentity:
        """An identity that reads every revision of the plan's model, reads the secrets and writes the agent's
        telemetry. The model's prefix needs no check here: the plan's schema admits only relative folders ending in
        '/' (`ModelArtifact.bucket_prefix`)."""
        return ServerIdentity.from_request(name, settings.backend, identity_request(
            model_bucket=model_bucket, model_prefix=plan.model.revisions_prefix,
            secret_ids=secrets.grant_ids if secrets else [],
            telemetry_grants=list(telemetry.grants) if telemetry else [], tags=settings.tags,
            model_reader=plan.startup.model_loading == "stream"), opts=child_options(self))

    #### Servers, or a fleet ####

    def _servers(self, settings: ServerSettings, request: ServersRequest) -> None:
        """The plan's servers, one by one, each serving its own address."""
        servers = settings.backend.create_servers(self, self._name, request)
        port = self.plan.serving.port
        self.endpoint_urls = pulumi.Output.all(*(
            pulumi.Output.all(public, private).apply(lambda ips: f"http://{ips[0] or ips[1]}:{port}")
            for public, private in zip(servers.public_ips, servers.private_ips, strict=True)))
        self.endpoint_url = self.endpoint_urls.apply(lambda urls: urls[0])
        self.load_balancer_address = self.group_id = pulumi.Output.from_input(None)
        self.instance_ids = pulumi.Output.all(*servers.instance_ids)
        self.public_ips = pulumi.Output.all(*servers.public_ips)
        self.private_ips = pulumi.Output.all(*servers.private_ips)

    def _fleet(self, settings: ServerSettings, request: FleetRequest, telemetry: TelemetryResult | None) -> None:
        """The managed group behind the load balancer's HTTPS endpoint, its alarms and its dashboard."""
        backend, name = settings.backend, self._name
        fleet = backend.create_fleet(self, name, request)
        watched = AlarmsRequest(plan=self.plan, fleet=fleet, notification_target=settings.alarm_notification,
                                tags=settings.tags, telemetry=telemetry)
        backend.create_alarms(self, name, watched)
        if backend.dashboard_gap is None:
            backend.create_dashboard(self, name, watched)
        else:
            pulumi.log.info(f"{name}: no dashboard is created: {backend.dashboard_gap}", resource=self)
        self.endpoint_url = fleet.endpoint_url
        self.endpoint_urls = pulumi.Output.all(fleet.endpoint_url)
        self.load_balancer_address = pulumi.Output.from_input(fleet.load_balancer_address)
        self.group_id = pulumi.Output.from_input(fleet.group_id)
        self.instance_ids = self.public_ips = self.private_ips = pulumi.Output.from_input([])

    def _canary(self, settings: ServerSettings, model_bucket: Any, secrets: ServerSecrets | None,
                cache_endpoint: pulumi.Output[CacheEndpoint | None], telemetry: TelemetryResult | None,
                telemetry_target: pulumi.Output[TelemetryTarget | None]) -> CanaryRequest:
        """The canary group's own identity (reading the canary model's prefix only) and boot script, made as the main
        group's are; the backend builds its group behind the same load balancer (`FleetRequest.canary`)."""
        canary = self.plan.canary
        assert canary is not None
        name = f"{self._name}-canary"
        model_reader: StrOutput | None = None
        if settings.brought.instance_identity is not None:
            attachment = settings.brought.instance_identity
            pulumi.log.warn(f"{self._name}: the canary servers take the brought identity too: it must also read "
                            f"{canary.plan.model.revisions_prefix} in the model bucket")
        else:
            identity = self._server_identity(settings, f"{name}-identity", canary.plan, model_bucket, secrets,
                                             telemetry)
            attachment, model_reader = identity.attachment, identity.model_reader_id
        rendered = pulumi.Output.all(
            model_bucket, *([secrets.api_key_ref, secrets.hub_token_ref] if secrets else [None, None]), cache_endpoint,
            telemetry_target, model_reader).apply(lambda refs: self._render_bootstrap(
                refs[0], refs[1], refs[2], refs[3], refs[4], refs[5], plan=canary.plan, group="canary"))
        bundle = settings.backend.create_bundle(self, name, BundleRequest(
            bucket=model_bucket, key=rendered.apply(lambda r: r.bundle_key),
            content=rendered.apply(lambda r: r.bundle), tags=settings.tags))
        user_data = pulumi.Output.all(rendered, bundle).apply(lambda values: values[0].user_data)
        return CanaryRequest(plan=canary.plan, weight=canary.weight, attachment=attachment, user_data=user_data)

    def _render_bootstrap(self, model_bucket: str, api_key_ref: str | None, hub_token_ref: str | None,
                          cache: CacheEndpoint | None = None, telemetry: TelemetryTarget | None = None,
                          model_reader_role: str | None = None, plan: DeploymentPlan | None = None,
                          group: ServerGroup = "main") -> RenderedBootstrap:
        plan = plan or self.plan
        options = bootstrap.BootstrapOptions(model_bucket=model_bucket, region=plan.region,
                                             api_key_secret=api_key_ref, hub_token_secret=hub_token_ref, cache=cache,
                                             telemetry=telemetry, model_reader_role=model_reader_role, group=group)
        return bootstrap.render_bootstrap(plan, plan.cloud, options)


def _check_streaming_identity(settings: ServerSettings, name: str) -> None:
    """A runtime that streams the weights gets a reader role that only the servers' own role may assume: the
    components create both, so a brought identity (whose role they cannot see at render time) is refused, before
    anything is registered."""
    plans = [settings.plan, *([settings.plan.canary.plan] if settings.plan.canary else [])]
    if settings.brought.instance_identity is not None and any(p.startup.model_loading == "stream" for p in plans):
        brought = settings.brought.instance_identity
        raise input_error(f"{name}.instance_identity", "is brought, and the plan's runtime streams the weights with "
                          "credentials of a reader role that only the servers' own role may assume",
                          value=brought if isinstance(brought, str) else None,
                          fix="leave the identity to the component, or plan with startup.model_loading: download")


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

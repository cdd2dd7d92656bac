"""Huawei Cloud provisioning (pulumi_huaweicloud 0.0.12): VPC + NAT, security group, OBS + CDN, CSMS, agency, ECS;
a fleet as an AS group behind a dedicated ELB.

This module is the backend: what the cloud can do (its capabilities, with reasons), the forms of the values a user
names in it, what it refuses before anything is created, and the `CloudBackend` methods (backend.py), in the order
and under the banners every cloud's backend keeps, each handing its request to the module of its concern:

    network.py        the VPC, its subnets and NAT egress, elastic IPs, the servers' security group
    storage.py        OBS buckets, the static assets' CDN domain, the boot bundle
    identity.py       CSMS secrets, the servers' agency and its custom policies, the access logs' agency
    servers.py        ECS servers one by one, and what a fleet's template shares with them (image, disk, user data)
    fleet.py          the AS group from its AS configuration, a canary's group, step scaling
    load_balancer.py  the dedicated ELB: listeners, pools, health checks, access logs, a canary's weighted forwarding
    cache.py          DCS for Redis
    observability.py  Cloud Eye alarm rules on the load balancer's metrics
    lookups.py        data-source lookups by token (the region, the zones that sell a flavor), used by the others
    preview.py        the offline preview's answers

pulumi_huaweicloud 0.0.12 bridges terraform-provider-huaweicloud 1.73.3 with an old code generator: type tokens
have capitalised modules (`huaweicloud:Ecs/instance:Instance`), there are no `*ArgsDict` types (nested arguments
are plain dicts), and some names are required and never autonamed (OBS buckets). What the provider cannot do is
stated in `capabilities`, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar

import pulumi

from inferstack.components.backend import CloudBackend, PreviewAnswers, register_backend
from inferstack.components.capabilities import (
    BroughtIds,
    Capability,
    CertificateRule,
    Support,
    ValueRule,
    baked_image,
    driver_ready_image,
    model_streaming,
    rolling_update,
    spot_above_floor,
    supported,
    unsupported,
    warm_pool,
)
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
from inferstack.components.huawei import cache, fleet, identity, network, observability, preview, servers, storage
from inferstack.components.huawei.cache import CACHE_CAPACITY_GB, CACHE_ENGINE_VERSION
from inferstack.components.huawei.fleet import AS_MAX_INSTANCES, AS_MAX_SECONDS
from inferstack.components.huawei.load_balancer import ELB_MAX_RESPONSE_TIMEOUT_S
from inferstack.components.observability import AlarmKind
from inferstack.errors import Problem
from inferstack.plan import DeploymentPlan

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # VPC, subnet, security group ids


@register_backend
class HuaweiBackend(CloudBackend):
    """Huawei Cloud."""

    cloud = "huawei"
    capabilities: ClassVar[Mapping[Capability, Support]] = {
        Capability.METADATA_HARDENING: unsupported(
            "the ECS metadata service's token mode (V2, PUT /meta-data/latest/api/token) is offered in LA-Sao Paulo1 "
            "only, by service ticket (Huawei ECS docs, \"Configuring Instance Metadata Options\", 2025-08-12), "
            "pulumi_huaweicloud 0.0.12 has no metadata option, and the server reads metadata the V1 way; the boot "
            "script's host firewall lets only root reach its HTTP port (DNS stays open), for host processes and "
            "containers alike, and a native runtime's unit is denied it outright (IPAddressDeny=)"),
        Capability.BUCKET_PUBLIC_ACCESS_BLOCK: unsupported(
            "OBS has no public-access-block resource in pulumi_huaweicloud 0.0.12 and ACLs cannot be turned off: "
            "buckets are created with acl=private and a TLS-only policy without public statements, but a public ACL "
            "or policy written later would take effect"),
        Capability.TLS_ONLY_STORAGE: supported("OBS bucket policy denies every request with SecureTransport=false"),
        Capability.PRIVATE_CDN_ORIGIN: supported(
            "CDN pulls from the private OBS bucket (obs_bucket_type=private) through the account's "
            "CDNAccessPrivateOBS agency, enabled once per account; the bucket has no public statement"),
        Capability.CDN_DEFAULT_HOSTNAME: unsupported(
            "Huawei CDN accelerates only a domain you own, served over HTTPS with that domain's certificate from "
            "SCM"),
        Capability.PREFIX_SCOPED_GRANTS: supported(
            "IAM custom policy (global services): obs:object:GetObject on obs:*:*:object:<bucket>/<prefix>*, "
            "granted to the ECS agency"),
        Capability.MANAGED_SHELL: unsupported(
            "Huawei Cloud has no API-driven shell like AWS Session Manager in pulumi_huaweicloud 0.0.12; port 22 "
            "stays closed and no key pair or password is set, so reach the API through an allowed network"),
        Capability.SECRET_STORE: supported("DEW CSMS secrets, read by name at boot with the ECS agency"),
        Capability.SECRET_SCOPED_GRANTS: unsupported(
            "the custom policies of pulumi_huaweicloud 0.0.12 (iam.Role, role-based) have no resource-level CSMS "
            "permissions, so the server's read grant covers every CSMS secret of the region's project: keep other "
            "secrets out of that project"),
        Capability.TERMINATION_PROTECTION: unsupported(
            "pulumi_huaweicloud 0.0.12 ecs.Instance has no deletion-protection argument, nor has the AS group: "
            "protected servers and fleets carry Pulumi's protect only, which stops `pulumi up` and `pulumi destroy` "
            "but not the console or the API (a fleet's load balancer also carries ELB deletion protection)"),
        Capability.DRIVER_READY_IMAGE: driver_ready_image("huawei",
            "the public 'Ubuntu 22.04 server 64bit with Tesla Driver' image where the region offers one for the "
            "flavor (IMS lookup); otherwise plain Ubuntu 22.04 and the bootstrap installs the driver"),
        Capability.LOCAL_NVME_CACHE: unsupported(
            "no Huawei flavor in inferstack's catalog has instance-local NVMe; the model cache lives on the "
            "encrypted system disk"),
        Capability.SPOT_CAPACITY: supported("ECS charging_mode=spot, at most the pay-per-use price"),
        Capability.SPOT_ABOVE_FLOOR: spot_above_floor(
            "huawei", "an AS configuration's charging_mode applies to every server the group launches (postPaid or "
                      "spot): an on-demand floor with spot above it needs a second group on the load balancer's "
                      "pool, not built; a production workload's servers stay on-demand"),
        Capability.MANAGED_FLEET: supported(
            "an AS group over the plan's zones, from an AS configuration with the servers' flavor, image, encrypted "
            "system disk, security group and user data and no public address; the agency is the group's "
            "(agency_name), which AS gives every server it adds; ELB health checks (ELB_AUDIT) replace a server that "
            "fails them once the plan's grace period is over"),
        Capability.LOAD_BALANCER_TLS: supported(
            "a dedicated ELB, internet-facing with an elastic IP or internal: HTTPS on 443 with TLS 1.2 and 1.3 only "
            "(tls-1-2-fs-with-1-3) and the ELB certificate you upload (api_certificate), HTTP on 80 redirected to it, "
            "health checks on the plan's health path, listener timeouts of the plan's request timeout (at most 300 s "
            "on Huawei), callers limited by an ELB IP address group"),
        Capability.MANAGED_CACHE: supported(
            f"DCS for Redis {CACHE_ENGINE_VERSION} basic edition ({CACHE_CAPACITY_GB} GB; master/standby in "
            "production) in the servers' subnet: SSL on, password, a whitelist of the servers' subnets (these "
            "instances take whitelists, not security groups). Its SSL certificate comes from Huawei's own CA, which "
            "the provider does not expose: the gateway encrypts but does not verify the server's certificate"),
        Capability.REQUEST_AUTOSCALING: supported(
            "Auto Scaling acts only on Cloud Eye alarms, and ELB's request rates are per load balancer, listener or "
            "pool, never per server: a GPU fleet's servers report their own requests per second to a Cloud Eye custom "
            "namespace (one series per AS group, averaged), and alarm policies add a server above the plan's target "
            "and remove one well below it, with the plan's cooldowns (the AS user guide lists custom monitoring for "
            "alarm policies; not tried on a real project). CPU fleets scale on the group's CPU usage (SYS.AS) at the "
            "level the plan's per-server target implies. pulumi_huaweicloud 0.0.12 has no target-tracking policy"),
        Capability.BAKED_IMAGE: baked_image(
            "huawei", "brought images only (startup.image: {huawei: <IMS id>}): IMS builds an image only from an "
                      "existing server (pulumi_huaweicloud ims.EcsWholeImage, instance_id), no build service"),
        Capability.MODEL_STREAMING: model_streaming(
            "huawei", "OBS through its S3-compatible endpoint with a credential limited to the model is not built: "
                      "the server downloads the weights"),
        Capability.WARM_POOL: warm_pool(
            "huawei", "Auto Scaling keeps no stopped or standby servers (pulumi_huaweicloud 0.0.12 as_ has no such "
                      "argument)"),
        Capability.MULTI_NODE_REPLICAS: unsupported(
            "ECS server groups place servers apart (anti-affinity only), not close, so the planner splits no Huawei "
            "type across servers (node_links.csv); head and worker templates, Ray units and healing a replica as one "
            "are not built either, and such a plan is refused before anything is created"),
        Capability.ROLLING_UPDATE: rolling_update("huawei",
            "Auto Scaling has no instance refresh (neither the AS API nor pulumi_huaweicloud 0.0.12: as_ has group, "
            "configuration, policy, lifecycle hook, bandwidth policy): a new AS configuration applies to servers "
            "added from then on (AS user guide, Replacing AS Configuration in an AS Group). `inferstack rollout "
            "STACK` after `pulumi up` replaces the running ones through the AS API in batches of the plan's surge: "
            "it raises the group's expected count, waits for the new servers to be ONLINE in the group's ELB pools, "
            "lowers it again (the group's OLD_CONFIG_OLD_INSTANCE policy removes old servers first), never below "
            "the count it found (docs/deploy-huawei.md)"),
    }
    assets_certificate = CertificateRule(
        kind="the id of the domain's certificate in SCM (Cloud Certificate Manager)",
        pattern=r"scs\d{13}",  # the SCM API's certificate ids: "scs" and 13 digits, 16 characters
        example="scs1554192131150")
    # Huawei issues no certificate for a domain: upload yours to ELB (or deploy an SCM certificate to ELB) and give
    # its id. A DedicatedElb/certificate resource would need the PEM private key in the stack's state, and its
    # scm_certificate_id still requires the PEM body (dedicatedelb/certificate.py: `certificate` is required).
    api_certificate = CertificateRule(
        kind="the id of the domain's server certificate in Dedicated ELB (32 hexadecimal characters)",
        pattern=r"[0-9a-f]{32}",  # ELB API v3 certificate ids, such as the API reference's example below
        example="233a325e5e3e4ce8beeb320aa714cc12")
    # An SMN topic's URN (SMN API reference, CreateTopic: urn:smn:region:project id:name; names of 1-255 letters,
    # digits, hyphens and underscores starting with a letter or digit).
    notification_target = ValueRule("the URN of an SMN topic (urn:smn:REGION:PROJECT_ID:NAME)",
                                    r"urn:smn:[a-z]{2}(-[a-z]+)+-\d+:[0-9a-f]{32}:[A-Za-z0-9][A-Za-z0-9_-]{0,254}",
                                    "urn:smn:ap-southeast-3:0123456789abcdef0123456789abcdef:inference-alarms")
    # The servers' own metrics need Cloud Eye's agent (namespace AGT.ECS), and their logs ICAgent (LTS). Neither is
    # installed: both come only as installer scripts from Huawei's OBS buckets with no published checksum or signature
    # to check them by, and ICAgent's documented installation takes an AccessKey pair on its command line (LTS user
    # guide, "Installing ICAgent"; its agency mode depends on a console-made agency, "How Do I Install ICAgent by
    # Creating an Agency?"). inferstack runs no unverified installer and puts no AccessKey on a server
    # (docs/deploy-huawei.md, "Monitoring").
    unwatched_alarms: ClassVar[Mapping[AlarmKind, str]] = {
        AlarmKind.GPU_MEMORY: "Cloud Eye's agent, which publishes the GPUs' memory (AGT.ECS), is not installed: Huawei "
                              "ships it only as an installer script with no checksum or signature to verify it by",
        AlarmKind.DISK: "Cloud Eye's agent, which publishes the disk's use (AGT.ECS disk_usedPercent), is not "
                        "installed: Huawei ships it only as an installer script with no checksum or signature to "
                        "verify it by"}
    dashboard_gap = (
        "pulumi_huaweicloud 0.0.12 has no dashboard resource (its Cloud Eye alarm rules are cse.Alarmrule, its aom "
        "module has alarm and service-discovery rules only, no Cloud Eye or AOM dashboard); Cloud Eye's console "
        "shows the dedicated ELB's metrics (requests, latency, 5xx, healthy and unhealthy servers) on the load "
        "balancer's monitoring page, and LTS shows the load balancer's access logs")
    # VPC, subnet and security group ids are UUIDs; agency names: at most 64 characters (IAM API reference,
    # CreateAgency), held here to letters, digits, periods, underscores and hyphens.
    brought_ids = BroughtIds(
        network=ValueRule("a VPC id (a UUID)", UUID, "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"),
        subnet=ValueRule("a subnet id (a UUID)", UUID, "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"),
        firewall=ValueRule("a security group id (a UUID)", UUID, "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"),
        identity=ValueRule("the name of an IAM agency", r"[A-Za-z0-9._-]{1,64}", "inference-server"))

    #### Region ####

    def configured_region(self) -> str | None:
        # The provider's own order: stack config, then the environment (terraform-provider-huaweicloud).
        return pulumi.Config("huaweicloud").get("region") or os.environ.get("HW_REGION_NAME")

    #### Network ####

    def create_network(self, parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult:
        return network.create_network(parent, name, request)

    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        return network.network_cidr(parent, network_id)

    #### Firewall ####

    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
        return network.create_firewall(parent, name, request)

    #### Storage ####

    def create_model_store(self, parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
        return storage.create_model_store(parent, name, request)

    def create_static_assets(
        self, parent: pulumi.Resource, name: str, request: StaticAssetsRequest
    ) -> StaticAssetsResult:
        return storage.create_static_assets(parent, name, request)

    def create_bundle(self, parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
        return storage.create_bundle(parent, name, request)

    #### Secrets and identity ####

    def create_secrets(self, parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
        return identity.create_secrets(parent, name, request)

    def create_identity(self, parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
        return identity.create_identity(parent, name, request)

    #### Compute ####

    def create_servers(self, parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
        return servers.create_servers(parent, name, request)

    def create_fleet(self, parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
        return fleet.create_fleet(parent, name, request)

    #### Monitoring ####

    def create_telemetry(self, parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult | None:
        return observability.create_telemetry(parent, name, request)

    def create_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
        return observability.create_alarms(parent, name, request)

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        return cache.create_cache(parent, name, request)

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return preview.preview_answers(self.configured_region())

    #### Shared behaviour ####

    def fleet_problems(self, plan: DeploymentPlan, *, api_certificate: str | None,
                       load_balancer_subnets: int | None, prefix: str) -> list[Problem]:
        """A fleet over more zones than the network created for it holds (a brought network is its owner's to
        size)."""
        if load_balancer_subnets is not None:
            return []
        return self.network_problems(plan.zones, private_servers=True, field=f"{prefix}.plan.zones")

    def network_problems(self, zones: int, *, private_servers: bool, field: str) -> list[Problem]:
        problem = network.fleet_zones_problem(zones, field=field) if private_servers else None
        return [problem] if problem else []

    def plan_problems(self, plan: DeploymentPlan, *, field: str) -> list[Problem]:
        """A fleet's numbers past what ELB and AS accept: refused before anything is created."""
        fleet_plan = plan.fleet
        if fleet_plan is None:
            return []
        problems = []
        if plan.request_timeout_s > ELB_MAX_RESPONSE_TIMEOUT_S:
            problems.append(Problem(f"{field}.request_timeout_s", f"exceeds the {ELB_MAX_RESPONSE_TIMEOUT_S} s that a "
                                    "dedicated ELB listener waits for a backend's response",
                                    value=plan.request_timeout_s,
                                    fix="plan it again: the planner caps answers to what the load balancer waits "
                                    "for (a longer answer would be cut off there)"))
        if fleet_plan.max_replicas > AS_MAX_INSTANCES:
            problems.append(Problem(f"{field}.fleet.max_replicas", f"exceeds the {AS_MAX_INSTANCES} instances of an AS "
                                    "group", value=fleet_plan.max_replicas, fix="lower scaling.max_replicas to at "
                                    f"most {AS_MAX_INSTANCES}"))
        for key in ("health_check_grace_s", "scale_out_cooldown_s", "scale_in_cooldown_s"):
            if getattr(fleet_plan, key) > AS_MAX_SECONDS:
                problems.append(Problem(f"{field}.fleet.{key}", f"exceeds the {AS_MAX_SECONDS} s Auto Scaling "
                                        "accepts", value=getattr(fleet_plan, key),
                                        fix="plan for a smaller model or a faster machine"))
        return problems

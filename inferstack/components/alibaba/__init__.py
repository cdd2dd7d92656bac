"""Alibaba Cloud provisioning (pulumi_alicloud 4.0.x): VPC + vSwitches (+ NAT gateway for a fleet), security groups,
OSS + CDN, KMS Secrets Manager, RAM, ECS; a fleet is an ESS scaling group behind an ALB.

`AlibabaBackend`, below, is the backend: its capabilities (with reasons), the forms of the ids a user brings, what it
refuses before anything is created, and the methods of `CloudBackend` (inferstack/components/backend.py) in their
order and under their banners, each handing its request to the module of its concern:

- network.py: the VPC, its vSwitches and NAT egress; the servers' and the load balancer's security groups;
- storage.py: the OSS buckets, the CDN domain of the static assets, the boot bundle;
- identity.py: the KMS secrets and the servers' RAM role;
- servers.py: single ECS servers, and the image, system disk and user data a fleet's template shares with them;
- fleet.py: the ESS scaling group, its launch template, lifecycle hook and target tracking;
- load_balancer.py: the ALB, its server groups, listeners and callers' whitelist, and a canary's weighted rule;
- cache.py: the inference cache (Tair);
- observability.py: the servers' logs in SLS, and a fleet's CloudMonitor alarms;
- preview.py: the offline preview's answers;
- settings.py and names.py, which the others read: the backend's own stack settings, and names unique in the account
  or region.

Three settings with no cloud-neutral meaning live in the backend's own stack-config namespace (`inferstack-alibaba:`,
settings.py); they are checked with the component arguments, before anything is created (`settings_problem`). See
docs/deploy-alibaba.md.

A fleet's HTTPS endpoint needs a certificate you hold in Certificate Management Service (`api_certificate`): ALB
takes no certificate it issues itself, and CAS issues one only after an order, contacts and DNS validation records
outside the stack.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar

import pulumi

from inferstack.components.alibaba import (
    cache,
    fleet,
    identity,
    network,
    observability,
    preview,
    servers,
    settings,
    storage,
)
from inferstack.components.alibaba.cache import CACHE_ENGINE_VERSION, CACHE_INSTANCE_CLASS
from inferstack.components.alibaba.fleet import MAX_LIFECYCLE_HOOK_S
from inferstack.components.alibaba.load_balancer import (
    ALB_MAX_TIMEOUT_S,
    ALB_MIN_ZONES,
    CAS_CERTIFICATE,
    too_few_zones,
)
from inferstack.components.alibaba.storage import CDN_ORIGIN_ROLE
from inferstack.components.backend import CloudBackend, PreviewAnswers, register_backend
from inferstack.components.capabilities import (
    BroughtIds,
    Capability,
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
from inferstack.components.observability import AlarmKind
from inferstack.errors import Problem
from inferstack.plan import DeploymentPlan

__all__ = ["AlibabaBackend"]


@register_backend
class AlibabaBackend(CloudBackend):
    """Alibaba Cloud (international and China sites)."""

    cloud = "alibaba"
    capabilities: ClassVar[Mapping[Capability, Support]] = {
        Capability.METADATA_HARDENING: supported(
            "ECS http_tokens=required: the metadata server answers only token (hardened-mode) requests. A single "
            "server's hop limit stays at the service default (1, per the provider docs; ecs.Instance's argument is "
            "'not available for use yet'); a fleet's launch template sets it to 1; tokens stop an SSRF, not code on "
            "the server, so the boot script's host firewall also lets only root reach 100.100.100.200:80 and a "
            "native runtime's unit is denied it (IPAddressDeny=)"),
        Capability.BUCKET_PUBLIC_ACCESS_BLOCK: supported(
            "OSS BucketPublicAccessBlock (block_public_access), which makes public ACLs and policies ineffective, "
            "and a private bucket ACL (OSS ACLs are canned: they grant no other account anything)"),
        Capability.TLS_ONLY_STORAGE: supported("bucket policy denies every request with acs:SecureTransport=false"),
        Capability.PRIVATE_CDN_ORIGIN: supported(
            "CDN back-to-origin authentication for private OSS (l2_oss_key private_oss_auth=on): the CDN signs "
            f"origin requests with the account's {CDN_ORIGIN_ROLE}; the bucket stays private with public access "
            "blocked. That role is account-wide and, as Alibaba authorises it, may read every bucket of the account"),
        Capability.CDN_DEFAULT_HOSTNAME: unsupported(
            "Alibaba Cloud CDN accelerates only a domain you own (its CNAME points at the CDN); the free DV "
            "certificate is issued for that domain"),
        Capability.PREFIX_SCOPED_GRANTS: supported("RAM: oss:GetObject on acs:oss:*:*:bucket/prefix*, "
                                                   "oss:ListObjects with an oss:Prefix condition"),
        Capability.MANAGED_SHELL: supported("Cloud Assistant session management (agent preinstalled on Alibaba "
                                            "public images); no key pair, no password, port 22 closed"),
        Capability.SECRET_STORE: supported(
            "KMS Secrets Manager generic secret in your KMS instance (inferstack-alibaba:kmsInstanceId, "
            "kmsKeyId), read by name at boot"),
        Capability.SECRET_SCOPED_GRANTS: supported("RAM: kms:GetSecretValue on the ARNs of the server's own "
                                                   "secrets"),
        Capability.TERMINATION_PROTECTION: supported(
            "ECS deletion_protection (Alibaba ignores it on spot instances); a fleet's ESS group_deletion_protection "
            "and ALB deletion_protection_enabled"),
        Capability.DRIVER_READY_IMAGE: driver_ready_image("alibaba",
            "no driver-ready GPU image has a stable name to look up (the console's 'auto-install GPU driver' "
            "only writes a user-data script); GPU servers boot the Ubuntu 22.04 system image and the bootstrap "
            "installs nvidia-headless-580-server, which adds 5-12 min and a reboot to the first boot"),
        Capability.LOCAL_NVME_CACHE: supported("instance families with local NVMe disks: the bootstrap formats "
                                               "and mounts the first unformatted local disk as the model cache"),
        Capability.SPOT_CAPACITY: supported("pay-as-you-go spot (SpotAsPriceGo), released on interruption"),
        Capability.SPOT_ABOVE_FLOOR: spot_above_floor(
            "alibaba", "ESS scaling group: on_demand_base_capacity = the floor, no on-demand above it, spot instance "
                       "remedy, the plan's fallback types in the scaling configuration"),
        Capability.MANAGED_FLEET: supported(
            "ESS scaling group from an ECS launch template (metadata tokens required, hop limit 1, encrypted ESSD, "
            "the RAM role, no public address), balanced over one private vSwitch per zone with NAT egress; ECS and "
            "ALB health checks replace failed servers; a SCALE_OUT lifecycle hook keeps each new server out of the "
            "load balancer, and unjudged, until its boot completes the hook's action, or releases it at the plan's "
            "grace; a new group starts empty and takes its floor at the next deploy, once the hook exists"),
        Capability.LOAD_BALANCER_TLS: supported(
            "ALB: HTTPS on 443 with your CAS certificate (api_certificate) and tls_cipher_policy_1_2_strict_with_1_3 "
            "(TLS 1.2 and 1.3), HTTP on 80 only redirects (301); idle and request timeouts of the plan (ALB allows "
            "600 s); callers limited by an ALB ACL and a security group of its own"),
        Capability.MANAGED_CACHE: supported(
            f"Tair (Redis OSS-compatible) {CACHE_ENGINE_VERSION}, master-replica ({CACHE_INSTANCE_CLASS}), in the "
            "servers' vSwitch: TLS on, password required in the VPC, whitelist of the servers' security groups only. "
            "Its TLS certificate comes from Alibaba's own CA, which the provider does not expose: the gateway encrypts "
            "but does not verify the server's certificate"),
        Capability.REQUEST_AUTOSCALING: supported(
            "ESS target tracking on the ALB server group's requests per second per backend server "
            "(LoadBalancerRealServerAverageQps), the plan's target as is (both count per second); scale-in only "
            "after the plan's scale-in cooldown of consecutive minutes below target"),
        Capability.BAKED_IMAGE: baked_image(
            "alibaba", "brought images only (startup.image: {alibaba: m-...}): ECS Image Builder exists "
                       "(pulumi_alicloud ecs.EcsImageComponent, ecs.EcsImagePipeline) but is not wired here"),
        Capability.MODEL_STREAMING: model_streaming(
            "alibaba", "OSS through its S3-compatible endpoint with a credential limited to the model is not built "
                       "(Run:ai documents S3-compatible stores, not OSS by name): the server downloads the weights"),
        Capability.WARM_POOL: warm_pool(
            "alibaba", "ESS economical mode (scaling_policy recycle) stops servers on scale-in and starts them first "
                       "on scale-out, but keeps no pool prepared ahead, and a stopped server keeps the launch "
                       "template version it was created with: after a rollout (a new model revision, bootstrap or "
                       "image) the stopped servers of the old version would be the first the group starts again, and "
                       "nothing releases them; the group's reclaim mode cannot be changed back to release either "
                       "(Auto Scaling, economical mode). Not built"),
        Capability.MULTI_NODE_REPLICAS: unsupported(
            "planned (sizing/nodes.py), not provisioned yet: a deployment set, eRDMA, Ray units and the replica "
            "healed as one are still to be built, so a plan whose replica spans servers is refused before "
            "anything is created"),
        Capability.ROLLING_UPDATE: rolling_update("alibaba",
            "ESS instance refresh (ess.InstanceRefresh, StartInstanceRefresh) serves only scaling groups whose "
            "scale-out policy is Priority (Auto Scaling API reference, StartInstanceRefresh, read 2026-12-01); the "
            "fleet balances its servers over zones (multi_az_policy BALANCE), which production's zone spread needs. "
            "A new launch template version reaches the servers the group creates from then on; running ones keep "
            "the old revision until replaced (raise the group's desired capacity by the plan's surge, wait for the "
            "new servers to pass the health check, lower it again: the removal policies take the oldest servers "
            "first)"),
    }
    # GPU memory and disk: the CloudMonitor agent's metrics, watched per scaling group (create_alarms).
    unwatched_alarms: ClassVar[Mapping[AlarmKind, str]] = {}
    assets_certificate = None  # Alibaba's free DV certificate is issued for the domain
    api_certificate = CAS_CERTIFICATE  # ALB serves a certificate you hold in CAS (module docstring)
    # A CloudMonitor alarm contact group, by name (cms.Alarm contact_groups); names may be Chinese.
    notification_target = ValueRule("the name of a CloudMonitor alarm contact group",
                                    r"[-A-Za-z0-9_.\u4e00-\u9fff]{2,64}", "inference-oncall")
    dashboard_gap = (
        "pulumi_alicloud has no CloudMonitor dashboard resource (its cms module has alarms, contact groups, monitor "
        "groups and dynamic tag groups, no dashboard); CloudMonitor's console shows the ALB instance's metrics (QPS, "
        "latency, 5xx, healthy and unhealthy servers) on its own ALB page, and the SLS project of the load balancer's "
        "access logs opens the ALB access-log dashboards SLS generates for an ALB logstore")
    # Resource ids: a prefix and lowercase letters and digits; RAM role names: 1 to 64 letters, digits, periods and
    # hyphens (RAM API reference, CreateRole).
    brought_ids = BroughtIds(
        network=ValueRule("a VPC id", r"vpc-[a-z0-9]{1,64}", "vpc-bp1a2b3c4d5e6f7g8h9i0"),
        subnet=ValueRule("a vSwitch id", r"vsw-[a-z0-9]{1,64}", "vsw-bp1a2b3c4d5e6f7g8h9i0"),
        firewall=ValueRule("a security group id", r"sg-[a-z0-9]{1,64}", "sg-bp1a2b3c4d5e6f7g8h9i0"),
        identity=ValueRule("the name of a RAM role", r"[A-Za-z0-9.-]{1,64}", "inference-server"))

    #### Region ####

    def configured_region(self) -> str | None:
        # The provider's own order: stack config, then the environment.
        return pulumi.Config("alicloud").get("region") or os.environ.get("ALICLOUD_REGION")

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

    def create_telemetry(self, parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
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

    def settings_problem(self, capability: Capability, *, field: str) -> Problem | None:
        """Secrets need the KMS instance and key, and the CDN reads `assetsDnsReady` (`inferstack-alibaba:`): settings
        with no cloud-neutral meaning (settings.py)."""
        if capability is Capability.SECRET_STORE:
            return settings.kms_problem(field)
        if capability is Capability.PRIVATE_CDN_ORIGIN:
            return settings.dns_ready_problem()
        return None

    def fleet_problems(self, plan: DeploymentPlan, *, api_certificate: str | None,
                       load_balancer_subnets: int | None, prefix: str) -> list[Problem]:
        """ALB takes vSwitches in two zones at least: a brought network gives the load balancer as many (a created
        one makes them). That they lie in distinct zones is looked up as the load balancer is created."""
        if load_balancer_subnets is None or load_balancer_subnets >= ALB_MIN_ZONES:
            return []
        return [too_few_zones(f"{prefix}.load_balancer_subnet_ids", load_balancer_subnets)]

    def plan_problems(self, plan: DeploymentPlan, *, field: str) -> list[Problem]:
        """A fleet's numbers beyond what ALB and ESS accept."""
        if plan.fleet is None:
            return []
        problems = []
        if plan.request_timeout_s > ALB_MAX_TIMEOUT_S:
            problems.append(Problem(
                f"{field}.request_timeout_s", f"is longer than ALB's longest timeout ({ALB_MAX_TIMEOUT_S} s): "
                "its longest answers would be cut", value=plan.request_timeout_s,
                fix="plan it again: the planner caps answers to what the load balancer waits for"))
        if plan.fleet.health_check_grace_s > MAX_LIFECYCLE_HOOK_S:
            problems.append(Problem(
                f"{field}.fleet.health_check_grace_s", f"is longer than an ESS lifecycle hook waits "
                f"({MAX_LIFECYCLE_HOOK_S} s)", value=plan.fleet.health_check_grace_s,
                fix="plan for a smaller model or a faster start (the grace is 1.5 times the cold start)"))
        return problems

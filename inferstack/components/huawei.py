"""Huawei Cloud provisioning (pulumi_huaweicloud 0.0.12): VPC + NAT, security group, OBS + CDN, CSMS, agency, ECS;
a fleet as an AS group behind a dedicated ELB.

Sections follow `CloudBackend` in `backend.py`; every cloud module keeps the same order and banners.

pulumi_huaweicloud 0.0.12 bridges terraform-provider-huaweicloud 1.73.3 with an old code generator: type tokens
have capitalised modules (`huaweicloud:Ecs/instance:Instance`), there are no `*ArgsDict` types (nested arguments
are plain dicts), and some names are required and never autonamed (OBS buckets). What the provider cannot do is
stated in `capabilities`, with the reason.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
import pulumi_huaweicloud as hw

from inferstack.clouds import CLOUD_FACTS
from inferstack.components.backend import (
    CloudBackend,
    PreviewAnswers,
    PreviewContext,
    PreviewLookup,
    PreviewResource,
    register_backend,
)
from inferstack.components.capabilities import (
    BroughtIds,
    Capability,
    CertificateRule,
    Support,
    ValueRule,
    driver_ready_image,
    rolling_update,
    supported,
    unsupported,
)
from inferstack.components.contract import (
    AlarmsRequest,
    AlarmsResult,
    BundleRequest,
    CacheRequest,
    CacheResult,
    CanaryRequest,
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
)
from inferstack.components.naming import child_options, invoke_options, server_options, unique_name
from inferstack.components.observability import AlarmKind, AlarmRule, alarm_rules, errors_per_s
from inferstack.components.shared import (
    ACCESS_LOG_DAYS,
    INCOMPLETE_UPLOAD_DAYS,
    NETWORK_CIDR,
    NONCURRENT_VERSION_DAYS,
    SUBNET_RANGES,
    checked_user_data,
    compressed_user_data,
    first_zones,
    nth,
)
from inferstack.errors import Problem, input_error
from inferstack.plan import DeploymentPlan, Fleet

#### Constants ####

# Data sources, called by token (see `_lookup`): the tokens of pulumi_huaweicloud 0.0.12.
ZONES_LOOKUP = "huaweicloud:index/getAvailabilityZones:getAvailabilityZones"
FLAVORS_LOOKUP = "huaweicloud:Ecs/getFlavors:getFlavors"
IMAGES_LOOKUP = "huaweicloud:Ims/getImages:getImages"
KEY_LOOKUP = "huaweicloud:Dew/getKey:getKey"
PROJECTS_LOOKUP = "huaweicloud:Iam/getProjects:getProjects"
VPC_LOOKUP = "huaweicloud:Vpc/getVpc:getVpc"
BUCKETS_LOOKUP = "huaweicloud:Obs/getBuckets:getBuckets"

# ECS API ("Creating an ECS"): user data is at most 32 KB before Base64 encoding. The cloud-config is sent
# gzip-compressed and Base64-encoded; the provider passes Base64 through unchanged (golangsdk cloudservers
# ToServerCreateMap), and cloud-init recognises gzip by its magic bytes and unpacks it.
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # VPC, subnet, security group ids
USER_DATA_LIMIT_BYTES = 32 * 1024

# Public IMS images, looked up at deploy time for the flavor (the lookup's flavor_id filter keeps only images
# the flavor can boot). Ubuntu 22.04 everywhere, so the bootstrap targets one OS; GPU flavors prefer the variant
# with the Tesla driver preinstalled, named "Ubuntu 22.04 server 64bit with Tesla Driver <ver> and CUDA <ver>".
UBUNTU_IMAGE_NAME = "Ubuntu 22.04 server 64bit"
TESLA_DRIVER_SUFFIX = " with Tesla Driver"

# General-purpose SSD, the provider's default, written out so that a plan reads the same in every region.
SYSTEM_DISK_TYPE = "GPSSD"
# EVS's default KMS key: it exists once EVS encryption has been authorized in the region (docs/deploy-huawei.md).
EVS_DEFAULT_KEY_ALIAS = "evs/default"

# IAM agencies delegate to a cloud service by its service account, op_svc_<service>.
ECS_SERVICE = "op_svc_ecs"
OBS_SERVICE = "op_svc_obs"
# Custom policies: "AX" applies to global services (OBS), "XA" to region-specific projects (CSMS, KMS).
GLOBAL_POLICY, REGIONAL_POLICY = "AX", "XA"
POLICY_VERSION = "1.1"
MODEL_READ_ACTIONS = ["obs:object:GetObject"]  # the bootstrap reads manifest.json and ranges; it never lists
# iam.Role creates role-based custom policies, in which CSMS actions have no resource-level permissions (DEW API
# reference, "Actions Supported by Policy-based Authorization"): the grant is limited to the region's project.
SECRET_READ_ACTIONS = ["csms:secretVersion:get", "kms:dek:decrypt"]
LOG_WRITE_ACTIONS = ["obs:object:PutObject"]
IAM_NAME_MAX_LENGTH = 64
CSMS_NAME_MAX_LENGTH = 64

# Huawei Cloud's private DNS servers and NTP are on its intranet range 100.125.0.0/16 (such as 100.125.1.250).
HUAWEI_INTRANET_CIDR = "100.125.0.0/16"
ANYWHERE_IPV4 = "0.0.0.0/0"
# Egress the bootstrap needs: HTTPS (OBS, CSMS, model hub, container registries, NVIDIA), HTTP (Ubuntu mirrors
# serve apt over HTTP; packages are signed; also the metadata service), DNS and NTP on the intranet. A security
# group created with delete_default_rules=True has no egress rule at all.
EGRESS_RULES: Mapping[str, tuple[str, int, str, str]] = {
    "https": ("tcp", 443, ANYWHERE_IPV4, "https for drivers, packages, models, secrets"),
    "http": ("tcp", 80, ANYWHERE_IPV4, "http for Ubuntu mirrors and the metadata service"),
    "dns-udp": ("udp", 53, HUAWEI_INTRANET_CIDR, "Huawei private DNS"),
    "dns-tcp": ("tcp", 53, HUAWEI_INTRANET_CIDR, "Huawei private DNS"),
    "ntp": ("udp", 123, HUAWEI_INTRANET_CIDR, "Huawei NTP"),
}

# Elastic IPs: dynamic BGP ("5_bgp"; some regions sell static BGP only, "5_sbgp"), a dedicated bandwidth billed
# by traffic.
EIP_TYPE = "5_bgp"
EIP_BANDWIDTH_MBIT_S = 100
# NAT gateway spec "1" (small): up to 10,000 SNAT connections, plenty for a few servers' downloads.
NAT_GATEWAY_SPEC = "1"

# Huawei CDN serves only a domain you own, over HTTPS with a certificate you hold in SCM (Cloud Certificate
# Manager): `assets_domain` and `assets_certificate`.
SCM_CERTIFICATE_SOURCE = 2
CDN_TLS_VERSIONS = "TLSv1.2,TLSv1.3"
CDN_CERTIFICATE_NAME_MAX_LENGTH = 32

# A fleet (`create_fleet`): an AS group behind a dedicated ELB.
SUBNET_LOOKUP = "huaweicloud:Vpc/getSubnet:getSubnet"
ELB_FLAVORS_LOOKUP = "huaweicloud:DedicatedElb/getFlavors:getFlavors"
# Its private subnets take the upper half of the network's range (10.64.128.0/20, ...): one more zone moves no subnet.
PRIVATE_SUBNET_OFFSET = len(SUBNET_RANGES) // 2
# Dedicated ELB listeners (dedicatedelb/listener.py): request_timeout and response_timeout take 1..300 s,
# idle_timeout 0..4000 s (clouds.py load_balancer_timeout_s, which the planner caps answers to).
ELB_MAX_RESPONSE_TIMEOUT_S = CLOUD_FACTS["huawei"].load_balancer_timeout_s
# TLS 1.2 and 1.3 with forward-secret cipher suites only: a tls_ciphers_policy value of the listener
# (dedicatedelb/listener.py; ELB user guide, "Configuring TLS Security Policies").
TLS_POLICY = "tls-1-2-fs-with-1-3"
HTTPS_PORT, HTTP_PORT = 443, 80
ANYWHERE = ("0.0.0.0/0", "::/0")
# Health check every 10 s with 5 s to answer; 2 passes take a server in, 3 failures out (dedicatedelb/monitor.py:
# interval and timeout 1..50, max_retries and max_retries_down 1..10).
HEALTH_INTERVAL_S, HEALTH_TIMEOUT_S, HEALTH_RISE, HEALTH_FALL = 10, 5, 2, 3
# Auto Scaling (as_/group.py, as_/policy.py): at most 300 instances; grace periods and cooldowns 0..86400 s; the
# group audits the ELB's health results every minute (health_periodic_audit_time: 0, 1, 5, 15, 60 or 180 minutes).
AS_MAX_INSTANCES = 300
AS_MAX_SECONDS = 86_400
AS_HEALTH_AUDIT_MINUTES = 1
AS_NAME_MAX_LENGTH = 64
# A Cloud Eye alarm that triggers scaling must watch the AS group's own metrics, namespace SYS.AS, which are averages
# per server reported every 5 minutes (terraform-provider-huaweicloud 1.73.3, docs/resources/ces_alarmrule.md,
# alarm_actions: "If type is set to autoscaling, ... the value of namespace must be SYS.AS"; AS API reference, "AS
# Metrics"). Of those, only CPU usage follows a server's request load, and only where the runtime runs on the CPU.
AS_METRICS_NAMESPACE = "SYS.AS"
AS_GROUP_DIMENSION = "AutoScalingGroup"
CPU_METRIC = "cpu_util"
AS_METRIC_PERIOD_S = 300
# Scale out after one period above the target, scale in after three below (15 minutes); an alarm that persists
# triggers again every period (suppress_duration), the policies' cooldowns pace the steps.
SCALE_OUT_PERIODS, SCALE_IN_PERIODS = 1, 3
CPU_TARGET_BOUNDS_PERCENT = (10, 95)


# Alarms read the dedicated ELB's Cloud Eye metrics (ELB User Guide, "ELB Monitoring Metrics": namespace SYS.ELB,
# dimension lbaas_instance_id, one-minute raw data): m9_abnormal_servers and ma_normal_servers (servers failing and
# passing the health check), m14_l7_rt (layer-7 response time in ms from the client's request to the last byte of the
# answer; an average: Cloud Eye publishes no percentile of it) and m16_l7_upstream_5xx (the backends' 5xx answers per
# second; a Cloud Eye condition compares one metric with a number, so the error budget is a rate at the plan's peak
# load: observability.errors_per_s). (metric, rollup, comparison, unit) per alarm kind.
ELB_NAMESPACE = "SYS.ELB"
LTS_NAME_MAX_LENGTH = 64
ELB_DIMENSION = "lbaas_instance_id"
# A canary's own pool (backend server group) is watched on the same metrics by the dimension pair lbaas_instance_id,
# lbaas_pool_id, which carries the pool's health and upstream answers (ELB User Guide, "ELB Monitoring Metrics":
# dedicated load balancers' metrics by backend server group; the pair and its metrics, m9_abnormal_servers and
# m16_l7_upstream_5xx among them, as Huawei's own cloudeye-exporter queries them, metric_filter_config.yml).
POOL_DIMENSION = "lbaas_pool_id"
CANARY_ALARM_KINDS = (AlarmKind.UNHEALTHY_SERVERS, AlarmKind.ERROR_RATE)
ELB_ALARM_METRICS: Mapping[AlarmKind, tuple[str, str, str, str]] = {
    AlarmKind.UNHEALTHY_SERVERS: ("m9_abnormal_servers", "max", ">", "count"),
    AlarmKind.LATENCY: ("m14_l7_rt", "average", ">", "ms"),
    AlarmKind.ERROR_RATE: ("m16_l7_upstream_5xx", "average", ">", "count/s"),
    AlarmKind.FLEET_AT_CEILING: ("ma_normal_servers", "min", ">=", "count"),
}
ALARM_DESCRIPTION_LENGTH = 256
# The inference cache: DCS for Redis 6.0 basic edition, which takes SSL (pulumi_huaweicloud dcs.Instance.ssl_enable;
# DCS docs: SSL for Redis 6.0 basic instances, verify per region) and whitelists; the flavors are the 1 GB single-node
# and master/standby specifications of the DCS specification table (verify with dcs.get_flavors in your region).
CACHE_ENGINE_VERSION = "6.0"
CACHE_CAPACITY_GB = 1
CACHE_FLAVORS = {False: "redis.single.xu1.large.1", True: "redis.ha.xu1.large.r2.1"}
CACHE_PORT = 6379

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
        Capability.REQUEST_AUTOSCALING: unsupported(
            "Auto Scaling acts only on Cloud Eye alarms over the group's own metrics (SYS.AS: CPU, memory, network, "
            "disk, averaged per server); ELB's request rates are per load balancer, listener or backend group, never "
            "per server, cannot trigger a scaling policy, and pulumi_huaweicloud 0.0.12 has no target-tracking "
            "policy. CPU fleets scale on CPU usage at the level the plan's per-server target implies; GPU fleets hold "
            "the plan's floor, sized for its peak: raise the AS group's expected instances by hand (console or API) "
            "up to the plan's ceiling"),
        Capability.ROLLING_UPDATE: rolling_update("huawei",
            "Auto Scaling has no instance refresh (neither the AS API nor pulumi_huaweicloud 0.0.12: as_ has group, "
            "configuration, policy, lifecycle hook, bandwidth policy), and a lifecycle hook only holds a server "
            "entering or leaving the group; a new AS configuration applies to servers added from then on (AS user "
            "guide, Replacing AS Configuration in an AS Group). Running servers keep the old revision until "
            "replaced: raise the group's expected instances by the plan's surge, wait for the new servers to pass "
            "the ELB health check, lower it again (scale-in removes the oldest configuration first)"),
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
    # VPC, subnet and security group ids are UUIDs; agency names: at most 64 characters (IAM API reference,
    # CreateAgency), held here to letters, digits, periods, underscores and hyphens.
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
        vpc = hw.vpc.Vpc(f"{name}-vpc", cidr=NETWORK_CIDR, description=f"inferstack {name}", tags=request.tags,
                         opts=child_options(parent))
        zones = _zones_offering(parent, request.instance_type, request.zones)
        subnets = [_subnet(parent, f"{name}-subnet-{index}", vpc, index, zones.apply(nth(index)),
                           f"inferstack {name}, zone {index}", request.tags) for index in range(request.zones)]
        if not request.private_servers:
            _nat_egress(parent, name, vpc, subnets[0], subnets, request.tags)
            return NetworkResult(network_id=vpc.id, subnet_ids=[subnet.id for subnet in subnets], cidr_block=vpc.cidr)
        # A fleet: the subnets above hold only the load balancer (with its elastic IP when internet-facing); the
        # servers take addresses in private subnets that reach the internet through the NAT gateway only.
        if request.zones > len(SUBNET_RANGES) - PRIVATE_SUBNET_OFFSET:
            raise input_error("plan.zones", f"a fleet's network has room for {PRIVATE_SUBNET_OFFSET} zones",
                              value=request.zones, fix="plan for fewer zones, or bring your own network")
        private = [_subnet(parent, f"{name}-private-subnet-{index}", vpc, PRIVATE_SUBNET_OFFSET + index,
                           zones.apply(nth(index)), f"inferstack {name}, zone {index}, servers (NAT egress)",
                           request.tags) for index in range(request.zones)]
        _nat_egress(parent, name, vpc, subnets[0], private, request.tags)
        return NetworkResult(network_id=vpc.id, subnet_ids=[subnet.id for subnet in subnets], cidr_block=vpc.cidr,
                             private_subnet_ids=[subnet.id for subnet in private])

    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        return _lookup(parent, VPC_LOOKUP, {"id": network_id}).apply(lambda vpc: str(vpc["cidr"]))

    #### Firewall ####

    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
        opts = child_options(parent)
        # Without delete_default_rules the group keeps Huawei's defaults: all egress, and all ingress from members.
        callers = "the load balancer" if request.load_balanced else "allowed networks"
        group = hw.vpc.Secgroup(
            f"{name}-sg", delete_default_rules=True,
            description=f"inferstack inference server: API to {callers}, metrics inside the VPC",
            tags=request.tags, opts=opts)
        if request.load_balanced:
            # A dedicated ELB takes no security group: it reaches its backends, health checks included, from
            # addresses of its backend subnet in the VPC (ELB user guide, "Configuring Security Group Rules for
            # Backend Servers"). The allowed CIDRs are checked at the load balancer (its IP address group).
            _rule(f"{name}-api-load-balancer", group, "ingress", "tcp", request.serving_port, request.network_cidr,
                  "inference API, from the load balancer's subnets in the VPC", opts)
        else:
            for label, cidr in request.api_sources():
                _rule(f"{name}-api-{label}", group, "ingress", "tcp", request.serving_port, cidr, "inference API",
                      opts)
        if request.metrics_port is not None:
            _rule(f"{name}-metrics", group, "ingress", "tcp", request.metrics_port, request.network_cidr,
                  "metrics, VPC only", opts)
        for label, (protocol, port, cidr, purpose) in EGRESS_RULES.items():
            _rule(f"{name}-egress-{label}", group, "egress", protocol, port, cidr, purpose, opts)
        return FirewallResult(firewall_id=group.id)

    #### Storage ####

    def create_model_store(self, parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
        logs = _private_bucket(parent, name, "logs", request.force_destroy, request.tags,
                               expire_after_days=ACCESS_LOG_DAYS)
        delivery = _log_delivery(parent, name, logs.bucket)
        buckets = {purpose: _private_bucket(parent, name, purpose, request.force_destroy, request.tags,
                                            logs=(logs.bucket, delivery)) for purpose in ("models", "data")}
        return ModelStoreResult(model_bucket=buckets["models"].bucket, data_bucket=buckets["data"].bucket,
                                logs_bucket=logs.bucket)

    def create_static_assets(
        self, parent: pulumi.Resource, name: str, request: StaticAssetsRequest
    ) -> StaticAssetsResult:
        assert request.domain and request.certificate, "StaticAssets requires both here (assets_certificate)"
        region = _provider_region(parent)
        if request.existing_bucket is not None:
            bucket_name: StrOutput = pulumi.Output.from_input(request.existing_bucket)
            origin = _existing_bucket_domain(parent, request.existing_bucket)
        else:
            logs = None
            if request.logs_bucket is not None:
                logs = (request.logs_bucket, _log_delivery(parent, name, request.logs_bucket))
            bucket = _private_bucket(parent, name, "bucket", request.force_destroy, request.tags, logs=logs)
            bucket_name, origin = bucket.bucket, bucket.bucket_domain_name
        domain = hw.cdn.Domain(
            f"{name}-cdn", name=request.domain, type="web", service_area=region.apply(_service_area),
            sources=[{"origin": origin, "origin_type": "obs_bucket", "obs_bucket_type": "private", "active": 1}],
            configs={
                "origin_protocol": "https",
                "https_settings": {
                    "https_enabled": True, "http2_enabled": True, "tls_version": CDN_TLS_VERSIONS,
                    "certificate_source": SCM_CERTIFICATE_SOURCE, "scm_certificate_id": request.certificate,
                    "certificate_name": unique_name([name], max_length=CDN_CERTIFICATE_NAME_MAX_LENGTH)},
                "force_redirect": {"enabled": True, "type": "https", "redirect_code": 301}},
            tags=request.tags, opts=child_options(parent))
        # The CDN reads with the account's agency, not through a bucket policy: a brought bucket needs none.
        return StaticAssetsResult(bucket=bucket_name, url=pulumi.Output.concat("https://", domain.name),
                                  required_bucket_policy=None)

    def create_bundle(self, parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
        # Private, encrypted by its bucket's default (SSE-OBS). Content-addressed:
        # a new bundle is a new object, and the old one goes once the servers have moved on.
        bundle = hw.obs.BucketObject(
            f"{name}-bundle", bucket=request.bucket, key=request.key, content=request.content,
            content_type="application/json", acl="private", opts=child_options(parent))
        return bundle.id

    #### Secrets and identity ####

    def create_secrets(self, parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
        refs, grant_ids = {}, []
        for key, value in request.values.items():
            # CSMS names: letters, digits, "_" and "-", at most 64 characters; the key stays readable at the end.
            prefix = unique_name([pulumi.get_project(), pulumi.get_stack(), name],
                                 max_length=CSMS_NAME_MAX_LENGTH - len(key) - 1)
            secret = hw.dew.Secret(
                f"{name}-{key}", name=f"{prefix}-{key}", secret_text=value,
                description=f"inferstack {key} for {name}; read by the server at boot", tags=request.tags,
                opts=child_options(parent))
            refs[key] = secret.name
            grant_ids.append(secret.name)
        return SecretsResult(refs=refs, grant_ids=grant_ids)

    def create_identity(self, parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
        opts = child_options(parent)
        model_read = hw.iam.Role(
            f"{name}-model-read", name=_iam_name(name, "model-read"), type=GLOBAL_POLICY,
            description="inferstack inference server: read its model prefix",
            policy=_iam_policy(MODEL_READ_ACTIONS, [
                pulumi.Output.concat("obs:*:*:object:", request.model_bucket, "/", prefix, "*")
                for prefix in (request.model_prefix, request.bundle_prefix)]),
            opts=opts)
        project_roles: list[dict[str, Any]] = []
        if request.secret_ids:
            secrets_read = hw.iam.Role(
                f"{name}-secrets-read", name=_iam_name(name, "secrets-read"), type=REGIONAL_POLICY,
                description="inferstack inference server: read CSMS secrets at boot",
                policy=_iam_policy(SECRET_READ_ACTIONS), opts=opts)
            project_roles.append({"project": _provider_region(parent), "roles": [secrets_read.name]})
        # The agency names its policies, so it exists only once they do: a server that takes it can read its model
        # from its first boot.
        agency = hw.iam.Agency(
            f"{name}-agency", name=_iam_name(name, "agency"), delegated_service_name=ECS_SERVICE,
            description="inferstack inference server: read its model prefix and its secrets",
            domain_roles=[model_read.name], project_roles=project_roles or None, opts=opts)
        return IdentityResult(identity_id=agency.id, attachment=agency.name)

    #### Compute ####

    def create_servers(self, parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
        plan = request.plan
        image = _server_image(parent, plan)
        zones = _zones_offering(parent, plan.instance_type, plan.zones)
        disk_key = _disk_key(parent)
        user_data = self._user_data(parent, plan, request.user_data)
        result = ServersResult(instance_ids=[], public_ips=[], private_ips=[])
        for index in range(plan.instance_count):
            resource = f"{name}-server-{index}"
            server = hw.ecs.Instance(
                resource, flavor_id=plan.instance_type, image_id=image.image_id,
                availability_zone=zones.apply(nth(index % plan.zones)),
                networks=[{"uuid": request.subnet_ids[index % len(request.subnet_ids)]}],
                security_group_ids=list(request.firewall_ids), agency_name=request.attachment,
                system_disk_type=SYSTEM_DISK_TYPE, system_disk_kms_key_id=disk_key,
                system_disk_size=image.min_disk_gib.apply(lambda gib: max(gib, plan.disk_gib)),
                delete_disks_on_termination=True, user_data=user_data,
                charging_mode="spot" if plan.spot else "postPaid", tags=request.tags,
                # A newer image must not replace a running server on the next `pulumi up`; roll it out with
                # `pulumi up --replace <urn>` when you choose to (with protection lifted). No cloud deletion flag
                # exists here: Pulumi's protect alone guards protected servers.
                opts=server_options(parent, request.protected, ignore_changes=["image_id"]))
            result.instance_ids.append(server.id)
            result.private_ips.append(server.access_ip_v4)
            # Only a public endpoint gets an elastic IP; egress goes through the network's NAT gateway.
            result.public_ips.append(_public_address(parent, resource, server, request.tags)
                                     if request.public_endpoint else pulumi.Output.from_input(""))
        return result

    def create_fleet(self, parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
        plan, fleet = request.plan, request.plan.fleet
        assert fleet is not None, "create_fleet is called for plans with a fleet only"
        # Required and checked with the component's arguments, before anything is created (api_endpoint_problems).
        assert request.api_certificate is not None, "Huawei issues no certificate: api_certificate is required"
        zones = _zones_offering(parent, plan.instance_type, plan.zones)
        balancer = _load_balancer(parent, name, request, zones)
        _load_balancer_logs(parent, name, request, balancer.load_balancer_id)
        group = self._scaling_group(parent, name, request, zones, [balancer.pool_id, balancer.weighted_pool_id],
                                    balancer.health_checks)
        if request.canary is not None:  # the same group, from the canary's plan, in a pool of its own
            canary = request.for_canary()
            canary_pool = _canary_pool(parent, name, canary, balancer)
            _weighted_policy(parent, name, balancer, canary_pool, request.canary)
            canary_zones = _zones_offering(parent, canary.plan.instance_type, canary.plan.zones)
            self._scaling_group(parent, f"{name}-canary", canary, canary_zones, [canary_pool.pool_id],
                                [canary_pool.health_check])
        balancer.address.apply(lambda address: pulumi.log.info(
            f"{name}: point {request.api_domain} at {address} (a DNS A record); the HTTPS listener serves ELB "
            f"certificate {request.api_certificate}, which must cover {request.api_domain}", resource=parent))
        watched: dict[str, pulumi.Input[str]] = {"load_balancer": balancer.load_balancer_id}
        if request.canary is not None:
            watched["canary_pool"] = canary_pool.pool_id
        return FleetResult(endpoint_url=pulumi.Output.from_input(f"https://{request.api_domain}"),
                           load_balancer_address=balancer.address, group_id=group.id, watched=watched)

    def _scaling_group(self, parent: pulumi.Resource, name: str, request: FleetRequest,
                       zones: pulumi.Output[list[str]], pool_ids: Sequence[StrOutput],
                       health_checks: Sequence[pulumi.Resource]) -> hw.as_.Group:
        """The plan's servers as an AS group from an AS configuration, members of the ELB pools `pool_ids`."""
        plan, fleet = request.plan, request.plan.fleet
        assert fleet is not None
        template = _server_template(parent, name, request, self._user_data(parent, plan, request.user_data))
        group = hw.as_.Group(
            f"{name}-group", scaling_group_name=_as_name(name, "fleet"), scaling_configuration_id=template.id,
            vpc_id=request.network_id,
            # The networks are each server's NICs, the first one primary (AS API, CreateScalingGroup: "networks: up
            # to 5 subnets; the first subnet is the primary NIC"): one subnet, which serves every zone of the region
            # (a Huawei subnet's zone is a label; servers in any zone of the VPC take addresses in it).
            networks=[{"id": request.server_subnet_ids[0]}],
            availability_zones=zones, multi_az_scaling_policy="EQUILIBRIUM_DISTRIBUTE",
            min_instance_number=fleet.min_replicas, desire_instance_number=fleet.min_replicas,
            max_instance_number=fleet.max_replicas,
            lbaas_listeners=[{"pool_id": pool_id, "protocol_port": plan.serving.port} for pool_id in pool_ids],
            # A server is judged by the ELB's health check (checked every minute), once its grace period is over;
            # an unhealthy one is removed and replaced.
            health_periodic_audit_method="ELB_AUDIT", health_periodic_audit_time=AS_HEALTH_AUDIT_MINUTES,
            health_periodic_audit_grace_period=fleet.health_check_grace_s,
            # After a scaling action the group ignores alarms this long: a new server's warm-up.
            cool_down_time=fleet.scale_out_cooldown_s,
            # Scale-in removes servers of an old AS configuration first (a new boot script reaches the fleet as
            # servers are replaced: there is no instance refresh in 0.0.12).
            instance_terminate_policy="OLD_CONFIG_OLD_INSTANCE",
            # The agency goes on the group: AS binds it to every server it adds (IamAgencyName in the provider's
            # as_group; the AS configuration has no agency argument).
            agency_name=request.attachment,
            delete_instances="yes", force_delete=True, tags=request.tags,
            # Scaling policies (and operators) move the expected count; `pulumi up` must not reset it to the floor.
            opts=server_options(parent, request.protected, ignore_changes=["desireInstanceNumber"],
                                depends_on=list(health_checks)))
        if plan.device == "cpu":
            _cpu_scaling(parent, name, group, plan, fleet)
        else:
            pulumi.log.warn(f"{name}: no {Capability.REQUEST_AUTOSCALING.value} on {self.display_name} for a GPU "
                            f"fleet: it holds the plan's floor of {fleet.min_replicas} servers; raise the AS group's "
                            f"expected instances by hand, up to {fleet.max_replicas} (docs/deploy-huawei.md)",
                            resource=parent)
        return group

    #### Monitoring ####

    def create_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
        """One Cloud Eye alarm rule per rule on the dedicated ELB's metrics, notifying the SMN topic when it fires
        and when it clears; a canary's pool gets its own unhealthy-server and 5xx alarms, from its plan.
        (pulumi_huaweicloud 0.0.12 files Cloud Eye's alarm rule under `cse`.)"""
        watched = request.fleet.watched
        balancer = {"name": ELB_DIMENSION, "value": watched["load_balancer"]}
        rules = [_alarm_rule(parent, name, request.plan, rule, [balancer], request.notification_target)
                 for rule in alarm_rules(request.plan)]
        canary = request.plan.canary
        if canary is not None:
            pool = {"name": POOL_DIMENSION, "value": watched["canary_pool"]}
            rules += [_alarm_rule(parent, f"{name}-canary", canary.plan, rule, [balancer, pool],
                                  request.notification_target)
                      for rule in alarm_rules(canary.plan) if rule.kind in CANARY_ALARM_KINDS]
        return AlarmsResult(alarm_ids=[rule.id for rule in rules])

    def _user_data(self, parent: pulumi.Resource, plan: DeploymentPlan, user_data: StrOutput) -> StrOutput:
        """The user data as ECS and AS take it: Base64 of gzip, at most 32 KB of gzip (the provider passes Base64
        through unchanged: golangsdk cloudservers and autoscaling configurations ToCreateMap)."""
        return checked_user_data(plan, user_data, _provider_region(parent), provider=self.display_name,
                                 encode=functools.partial(compressed_user_data, limit_bytes=USER_DATA_LIMIT_BYTES,
                                                          service="ECS"))

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        """DCS for Redis 6.0 (basic edition, master/standby in production) in the servers' first subnet: SSL, password,
        a whitelist of the servers' subnets only."""
        assert request.auth_token is not None, "DCS takes the stack's AUTH token as its password"
        opts = child_options(parent)
        subnets = [hw.vpc.get_subnet_output(id=subnet, opts=invoke_options(parent)) for subnet in request.subnet_ids]
        cache = hw.dcs.Instance(
            f"{name}-cache", name=f"{name}-cache", engine="Redis", engine_version=CACHE_ENGINE_VERSION,
            capacity=CACHE_CAPACITY_GB, flavor=CACHE_FLAVORS[request.highly_available], vpc_id=request.network_id,
            subnet_id=subnets[0].id, availability_zones=[subnets[0].availability_zone], password=request.auth_token,
            ssl_enable=True, whitelist_enable=True,
            # Redis 4.0/5.0/6.0 basic instances take whitelists, not security groups (DCS security white paper).
            whitelists=[{"group_name": "inferstack-servers", "ip_addresses": [subnet.cidr for subnet in subnets]}],
            description="inferstack inference cache", tags=request.tags,
            opts=child_options(parent, protect=True if request.protected else None))
        for index, group in enumerate(request.server_firewall_ids):
            if request.firewall_created:  # the servers' group has no egress but its listed rules
                hw.vpc.SecgroupRule(f"{name}-egress-cache-{index}", security_group_id=group, direction="egress",
                                    ethertype="IPv4", protocol="tcp", port_range_min=CACHE_PORT,
                                    port_range_max=CACHE_PORT, remote_ip_prefix=cache.private_ip.apply(
                                        lambda ip: f"{ip}/32"), description="Redis, the inference cache", opts=opts)
        # DCS's SSL certificate comes from Huawei's own CA, downloaded through the console or API (no provider
        # output): the connection is encrypted, the server's certificate is not verified (Capability.MANAGED_CACHE).
        return CacheResult(host=cache.private_ip, port=pulumi.Output.from_input(CACHE_PORT),
                           auth_token=pulumi.Output.secret(request.auth_token),
                           ca_certificate=pulumi.Output.from_input(None), verify=False)

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return PreviewAnswers(resources=_PREVIEW_OUTPUTS, lookups=_PREVIEW_INVOKES,
                              region=self.configured_region() or PREVIEW_REGION, account=PREVIEW_PROJECT_ID,
                              unlisted_id=lambda c: _uuid(c.digest))

    #### Shared behaviour ####

    def plan_problems(self, plan: DeploymentPlan, *, field: str) -> list[Problem]:
        """A fleet's numbers past what ELB and AS accept: refused before anything is created."""
        fleet = plan.fleet
        if fleet is None:
            return []
        problems = []
        if plan.request_timeout_s > ELB_MAX_RESPONSE_TIMEOUT_S:
            problems.append(Problem(f"{field}.request_timeout_s", f"exceeds the {ELB_MAX_RESPONSE_TIMEOUT_S} s that a "
                                    "dedicated ELB listener waits for a backend's response",
                                    value=plan.request_timeout_s,
                                    fix="plan it again: the planner caps answers to what the load balancer waits "
                                    "for (a longer answer would be cut off there)"))
        if fleet.max_replicas > AS_MAX_INSTANCES:
            problems.append(Problem(f"{field}.fleet.max_replicas", f"exceeds the {AS_MAX_INSTANCES} instances of an AS "
                                    "group", value=fleet.max_replicas, fix=f"lower scaling.max_replicas to at most "
                                    f"{AS_MAX_INSTANCES}"))
        for key in ("health_check_grace_s", "scale_out_cooldown_s", "scale_in_cooldown_s"):
            if getattr(fleet, key) > AS_MAX_SECONDS:
                problems.append(Problem(f"{field}.fleet.{key}", f"exceeds the {AS_MAX_SECONDS} s Auto Scaling "
                                        "accepts", value=getattr(fleet, key),
                                        fix="plan for a smaller model or a faster machine"))
        return problems


#### Helpers: network and firewall ####


def _lookup(parent: pulumi.Resource, token: str, args: Mapping[str, Any]) -> pulumi.Output[dict[str, Any]]:
    """A data-source lookup with the component's provider, answered as the provider sends it (camelCase keys).

    The SDK's own lookup functions are bypassed: in 0.0.12 their `*_output` forms run a blocking invoke inside an
    apply (a nested event loop), and some typed results cannot even be built (`ims.get_images`: its result class
    declares a parameter `__support_agent_list`, which Python name-mangles, so every call raises TypeError).
    """
    # The SDK's defaults carry the provider version and plugin URL its own lookups would ask for.
    opts = pulumi.InvokeOutputOptions.merge(hw._utilities.get_invoke_opts_defaults(), invoke_options(parent))
    return pulumi.runtime.invoke_output(token, dict(args), opts=opts)


def _provider_region(parent: pulumi.Resource) -> StrOutput:
    """The region the component's provider deploys to (its config, an explicit provider, or HW_REGION_NAME)."""
    return _lookup(parent, ZONES_LOOKUP, {}).apply(lambda zones: str(zones["region"]))


def _flavor_generation(flavor: str) -> str:
    """The flavor's generation, the part before the first dot: "pi2" in pi2.2xlarge.4 (Huawei's naming rule)."""
    return flavor.split(".")[0]


def _zones_offering(parent: pulumi.Resource, flavor: str, count: int) -> pulumi.Output[list[str]]:
    """The first `count` zones (by name) that sell the flavor: not every zone has every GPU."""
    def selling(zone: str) -> pulumi.Output[str]:
        """The zone's name if it sells the flavor, else ""."""
        found = _lookup(parent, FLAVORS_LOOKUP, {"availabilityZone": zone, "generation": _flavor_generation(flavor)})
        return found.apply(lambda answer: zone if flavor in (answer.get("ids") or []) else "")

    def offering(names: Sequence[str]) -> pulumi.Output[list[str]]:
        # One lookup per zone, possible only once the zone names are known.
        sold = pulumi.Output.all(*(selling(zone) for zone in sorted(names)))
        return sold.apply(lambda zones: first_zones([zone for zone in zones if zone], count, flavor))

    zones = _lookup(parent, ZONES_LOOKUP, {"state": "available"})
    return zones.apply(lambda answer: offering(answer.get("names") or []))


def _subnet(parent: pulumi.Resource, resource: str, vpc: hw.vpc.Vpc, range_index: int, zone: pulumi.Input[str],
            description: str, tags: Mapping[str, str]) -> hw.vpc.Subnet:
    cidr = SUBNET_RANGES[range_index]
    # Huawei subnets route through their first address.
    return hw.vpc.Subnet(resource, vpc_id=vpc.id, cidr=cidr,
                         gateway_ip=str(ipaddress.IPv4Network(cidr).network_address + 1), availability_zone=zone,
                         description=description, tags=tags, opts=child_options(parent))


def _nat_egress(parent: pulumi.Resource, name: str, vpc: hw.vpc.Vpc, gateway_subnet: hw.vpc.Subnet,
                subnets: Sequence[hw.vpc.Subnet], tags: Mapping[str, str]) -> None:
    """Outbound internet for servers that have no public address: one NAT gateway, one SNAT rule per subnet."""
    opts = child_options(parent)
    gateway = hw.nat.Gateway(f"{name}-nat", vpc_id=vpc.id, subnet_id=gateway_subnet.id, spec=NAT_GATEWAY_SPEC,
                             description=f"inferstack {name}: egress for drivers, packages, models", tags=tags,
                             opts=opts)
    address = _eip(parent, f"{name}-nat-eip", tags)
    for index, subnet in enumerate(subnets):
        hw.nat.SnatRule(f"{name}-snat-{index}", nat_gateway_id=gateway.id, floating_ip_id=address.id,
                        subnet_id=subnet.id, description=f"inferstack {name}, zone {index}", opts=opts)


def _eip(parent: pulumi.Resource, resource: str, tags: Mapping[str, str], **options: Any) -> hw.vpc.Eip:
    return hw.vpc.Eip(resource, publicip={"type": EIP_TYPE},
                      bandwidth={"share_type": "PER", "name": resource, "size": EIP_BANDWIDTH_MBIT_S,
                                 "charge_mode": "traffic"},
                      tags=tags, opts=child_options(parent, **options))


def _rule(resource: str, group: hw.vpc.Secgroup, direction: str, protocol: str, port: int,
          cidr: pulumi.Input[str], purpose: str, opts: pulumi.ResourceOptions) -> None:
    ipv6 = isinstance(cidr, str) and ":" in cidr
    hw.vpc.SecgroupRule(resource, security_group_id=group.id, direction=direction,
                        ethertype="IPv6" if ipv6 else "IPv4", protocol=protocol, port_range_min=port,
                        port_range_max=port, remote_ip_prefix=cidr, description=purpose, opts=opts)


#### Helpers: buckets ####


def _private_bucket(parent: pulumi.Resource, name: str, purpose: str, force_destroy: bool, tags: Mapping[str, str],
                    *, logs: tuple[pulumi.Input[str], StrOutput] | None = None,
                    expire_after_days: int | None = None) -> hw.obs.Bucket:
    """A bucket nobody outside the account can read: acl private, encrypted, versioned, TLS only.

    Encryption is SSE-OBS (AES256, keys managed by OBS): the CDN's agency and the server's agency read it without
    KMS permissions, which SSE-KMS would need. OBS has no public-access block (see the capabilities), so the
    bucket policy only denies plain HTTP and grants nothing; the server and the CDN read through IAM agencies.
    """
    bucket_name = _bucket_name(parent, name, purpose)
    lifecycle: dict[str, Any] = {
        "name": "expire-old-versions-and-uploads", "enabled": True,
        "noncurrent_version_expirations": [{"days": NONCURRENT_VERSION_DAYS}],
        "abort_incomplete_multipart_uploads": [{"days": INCOMPLETE_UPLOAD_DAYS}]}
    if expire_after_days is not None:
        lifecycle["expirations"] = [{"days": expire_after_days}]
    loggings = None
    if logs is not None:
        target, agency = logs
        loggings = [{"target_bucket": target, "target_prefix": f"{purpose}/", "agency": agency}]
    return hw.obs.Bucket(
        f"{name}-{purpose}", bucket=bucket_name, acl="private", encryption=True, sse_algorithm="AES256",
        versioning=True, force_destroy=force_destroy, policy_format="obs", policy=bucket_name.apply(tls_only_policy),
        lifecycle_rules=[lifecycle], loggings=loggings, tags=tags, opts=child_options(parent))


def tls_only_policy(bucket: str) -> str:
    """OBS-format bucket policy that refuses every request made over plain HTTP, whoever makes it."""
    return json.dumps({"Statement": [{
        "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": {"ID": ["*"]}, "Action": ["*"],
        "Resource": [bucket, f"{bucket}/*"], "Condition": {"Bool": {"SecureTransport": ["false"]}}}]})


def _bucket_name(parent: pulumi.Resource, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across accounts and regions (OBS names are global; there is no autoname).

    The account is told apart by its project id in the region (IAM project ids are unique per account).
    """
    region = _provider_region(parent)
    projects = _lookup(parent, PROJECTS_LOOKUP, {"name": region})
    return pulumi.Output.all(projects, region).apply(lambda found: unique_name(
        [pulumi.get_project(), pulumi.get_stack(), name, purpose],
        unique_by=[str(found[0]["projects"][0]["id"]), found[1]]))


def _log_delivery(parent: pulumi.Resource, name: str, logs_bucket: pulumi.Input[str]) -> StrOutput:
    """An agency that lets OBS write access logs into the logs bucket (and nowhere else); returns its name."""
    opts = child_options(parent)
    writer = hw.iam.Role(
        f"{name}-log-write", name=_iam_name(name, "log-write"), type=GLOBAL_POLICY,
        description="inferstack: OBS writes access logs",
        policy=_iam_policy(LOG_WRITE_ACTIONS, [pulumi.Output.concat("obs:*:*:object:", logs_bucket, "/*")]),
        opts=opts)
    agency = hw.iam.Agency(
        f"{name}-log-delivery", name=_iam_name(name, "log-delivery"), delegated_service_name=OBS_SERVICE,
        description="inferstack: OBS delivers access logs", domain_roles=[writer.name], opts=opts)
    return agency.name


def _existing_bucket_domain(parent: pulumi.Resource, bucket: pulumi.Input[str]) -> StrOutput:
    """The origin domain of a brought bucket, from its region (looked up; nothing is created or changed)."""
    def domain(found: Mapping[str, Any]) -> str:
        buckets = found.get("buckets") or []
        if not buckets:
            raise input_error("assets_bucket", "is not an OBS bucket of this account", value=bucket,
                              fix="give the name of a bucket the deploying account owns, or leave assets_bucket out")
        return f"{buckets[0]['bucket']}.obs.{buckets[0]['region']}.myhuaweicloud.com"

    return _lookup(parent, BUCKETS_LOOKUP, {"bucket": bucket}).apply(domain)


def _service_area(region: str) -> str:
    """Serve where the bucket is: mainland China regions are named cn-* (their domains need an ICP filing)."""
    return "mainland_china" if region.startswith("cn-") else "outside_mainland_china"


#### Helpers: identity ####


def _iam_name(name: str, role: str) -> str:
    """Agency and custom-policy names are unique per account: project, stack and component keep them apart."""
    return unique_name([pulumi.get_project(), pulumi.get_stack(), name, role], max_length=IAM_NAME_MAX_LENGTH)


def _iam_policy(actions: Sequence[str], resources: Sequence[pulumi.Input[str]] | None = None) -> StrOutput:
    """A role-based custom policy with one Allow statement; without resources it covers the whole scope."""
    statement: dict[str, Any] = {"Effect": "Allow", "Action": list(actions)}
    if resources is not None:
        statement["Resource"] = list(resources)
    return pulumi.Output.json_dumps({"Version": POLICY_VERSION, "Statement": [statement]})


#### Helpers: compute ####


@dataclass(frozen=True)
class _ServerImage:
    image_id: StrOutput
    min_disk_gib: pulumi.Output[int]
    """The image's minimum system disk: the disk may not be smaller."""


def _server_image(parent: pulumi.Resource, plan: DeploymentPlan) -> _ServerImage:
    """The newest public Ubuntu 22.04 image the flavor can boot, with the Tesla driver for GPU plans if offered."""
    found = _lookup(parent, IMAGES_LOOKUP, {"nameRegex": f"^{re.escape(UBUNTU_IMAGE_NAME)}", "visibility": "public",
                                            "flavorId": plan.instance_type})
    chosen = found.apply(lambda result: choose_image(result.get("images") or [], plan))
    return _ServerImage(image_id=chosen.apply(lambda image: str(image["id"])),
                        min_disk_gib=chosen.apply(lambda image: int(image.get("minDiskGb") or 0)))


def choose_image(images: Sequence[Mapping[str, Any]], plan: DeploymentPlan) -> Mapping[str, Any]:
    """GPU plans: the newest driver-ready image, else plain Ubuntu (the bootstrap installs the driver)."""
    def newest(candidates: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        return max(candidates, key=lambda image: str(image.get("createdAt", ""))) if candidates else None

    plain = newest([image for image in images if image.get("name") == UBUNTU_IMAGE_NAME])
    driver_ready = newest([image for image in images
                           if str(image.get("name", "")).startswith(UBUNTU_IMAGE_NAME + TESLA_DRIVER_SUFFIX)])
    chosen = (driver_ready or plain) if plan.device == "gpu" else plain
    if chosen is None:
        raise input_error("plan.instance_type", f"no public '{UBUNTU_IMAGE_NAME}' image boots {plan.instance_type} "
                          f"in {plan.region}", value=plan.instance_type,
                          fix="plan for another flavor or region (inferstack plans for Ubuntu 22.04)")
    return chosen


def _public_address(parent: pulumi.Resource, resource: str, server: hw.ecs.Instance,
                    tags: Mapping[str, str]) -> StrOutput:
    address = _eip(parent, f"{resource}-eip", tags)
    association = hw.ecs.EipAssociate(f"{resource}-eip-association", public_ip=address.address,
                                      instance_id=server.id, opts=child_options(parent))
    # The endpoint is announced once the address is bound to the server.
    return pulumi.Output.all(address.address, association.id).apply(lambda values: str(values[0]))


def _disk_key(parent: pulumi.Resource) -> StrOutput:
    """The EVS default KMS key, which encrypts the servers' system disks."""
    return _lookup(parent, KEY_LOOKUP, {"keyAlias": EVS_DEFAULT_KEY_ALIAS}).apply(lambda key: str(key["keyId"]))


#### Helpers: fleet ####


@dataclass(frozen=True)
class _LoadBalancer:
    address: StrOutput
    """Where the API domain points: the elastic IP, or the private address of an internal load balancer."""
    pool_id: StrOutput
    """The HTTPS listener's default pool: the fleet's servers, for every request no forwarding policy takes."""
    weighted_pool_id: StrOutput
    """The fleet's servers again, in a pool of the load balancer that no listener has as its default: the one a
    canary's weighted policy may name (`_weighted_policy`)."""
    health_checks: tuple[hw.dedicatedelb.Monitor, ...]
    """Each pool's health check."""
    load_balancer_id: StrOutput
    """The load balancer's id (its Cloud Eye metrics' dimension)."""
    https_listener_id: StrOutput


def _alarm_name(name: str, rule: AlarmRule) -> str:
    """Cloud Eye alarm names: 1-128 letters, digits, underscores and hyphens."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"inferstack-{name}-{rule.kind.value}")[:128]


def _alarm_rule(parent: pulumi.Resource, name: str, plan: DeploymentPlan, rule: AlarmRule,
                dimensions: Sequence[Mapping[str, pulumi.Input[str]]], target: str | None) -> hw.cse.Alarmrule:
    """A Cloud Eye alarm rule on the dedicated ELB's metric of `rule` over `dimensions` (the load balancer, or its
    pair with a pool), notifying `target` when it fires and when it clears."""
    actions = [{"type": "notification", "notification_lists": [target]}] if target else []
    return hw.cse.Alarmrule(
        f"{name}-alarm-{rule.kind.value}", alarm_name=_alarm_name(name, rule),
        alarm_description=f"inferstack {name}: {rule.summary}"[:ALARM_DESCRIPTION_LENGTH],
        metric={"namespace": ELB_NAMESPACE, "metric_name": ELB_ALARM_METRICS[rule.kind][0],
                "dimensions": list(dimensions)},
        conditions=[_alarm_condition(plan, rule)], alarm_actions=actions, ok_actions=actions,
        alarm_action_enabled=bool(target), alarm_enabled=True, opts=child_options(parent))


def _alarm_condition(plan: DeploymentPlan, rule: AlarmRule) -> dict[str, Any]:
    """A rule's condition: one-minute raw data for up to five minutes (Cloud Eye counts at most 5 periods), else
    five-minute averages."""
    metric, rollup, comparison, unit = ELB_ALARM_METRICS[rule.kind]
    period, count = (1, rule.minutes) if rule.minutes <= 5 else (300, math.ceil(rule.minutes / 5))
    value = errors_per_s(plan, rule) if rule.kind is AlarmKind.ERROR_RATE else rule.threshold
    return {"metric_name": metric, "period": period, "count": count, "filter": rollup,
            "comparison_operator": comparison, "value": value, "unit": unit, "alarm_level": 2}


def _load_balancer_logs(parent: pulumi.Resource, name: str, request: FleetRequest,
                        load_balancer_id: pulumi.Input[str]) -> hw.dedicatedelb.Logtank:
    """The load balancer's access logs in an LTS log group and stream of their own (model files, uploads and the
    buckets' access logs live in OBS), kept ACCESS_LOG_DAYS (lts.Group ttl_in_days: 1 to 365); a log tank ships them
    (dedicatedelb.Logtank; ELB User Guide, "Access Logs"). LTS data is read through IAM only: nothing makes it
    public. lts.Group and lts.Stream in 0.0.12 take no encryption setting, so none is set here."""
    opts = child_options(parent)
    group = hw.lts.Group(f"{name}-lb-logs", group_name=_lts_name(name, "lb-logs"), ttl_in_days=ACCESS_LOG_DAYS,
                         tags=request.tags, opts=opts)
    stream = hw.lts.Stream(f"{name}-lb-logs-stream", group_id=group.id, stream_name=_lts_name(name, "lb-access"),
                           tags=request.tags, opts=opts)
    return hw.dedicatedelb.Logtank(f"{name}-lb-logtank", loadbalancer_id=load_balancer_id, log_group_id=group.id,
                                   log_topic_id=stream.id, opts=opts)


def _lts_name(name: str, role: str) -> str:
    """An LTS log group's or stream's name, unique to this project, stack and component (LTS API reference,
    CreateLogGroup and CreateLogStream: 1 to 64 letters, digits, underscores, hyphens and periods)."""
    return unique_name([pulumi.get_project(), pulumi.get_stack(), name, role], max_length=LTS_NAME_MAX_LENGTH)


def _load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                   zones: pulumi.Output[list[str]]) -> _LoadBalancer:
    """A dedicated ELB: HTTPS on 443 to the servers' port, HTTP on 80 redirected to HTTPS, a health check."""
    plan, opts = request.plan, child_options(parent)
    assert plan.fleet is not None
    protect = {"protect": True} if request.protected else {}
    # The load balancer takes the IPv4 (Neutron) subnet id, not the VPC subnet id that ECS and AS take.
    subnet = _lookup(parent, SUBNET_LOOKUP, {"id": request.load_balancer_subnet_ids[0]})
    # Both groups' ceilings at saturation when a canary shares the load balancer.
    peak_rps = sum(p.fleet.max_replicas * p.performance.capacity_requests_per_s / p.replicas
                   for p in (plan, *([request.canary.plan] if request.canary else [])) if p.fleet is not None)
    flavors = _lookup(parent, ELB_FLAVORS_LOOKUP, {"type": "L7"})
    eip = _eip(parent, f"{name}-lb-eip", request.tags, **protect) if request.internet_facing else None
    balancer = hw.dedicatedelb.Loadbalancer(
        f"{name}-lb", availability_zones=zones, vpc_id=request.network_id,
        ipv4_subnet_id=subnet.apply(lambda found: str(found["ipv4SubnetId"])),
        l7_flavor_id=flavors.apply(lambda found: choose_l7_flavor(found.get("flavors") or [], peak_rps)),
        ipv4_eip_id=eip.id if eip is not None else None, deletion_protection_enable=request.protected,
        description=f"inferstack {name}: HTTPS endpoint of the fleet", tags=request.tags,
        opts=server_options(parent, request.protected))
    acl = _caller_acl(parent, name, request)
    acl_id, acl_policy = (acl.id, "white") if acl is not None else (None, None)  # white: only the group's members
    timeout_s = plan.request_timeout_s  # a streamed answer holds its request open this long
    https = hw.dedicatedelb.Listener(
        f"{name}-https", loadbalancer_id=balancer.id, protocol="HTTPS", protocol_port=HTTPS_PORT,
        server_certificate=request.api_certificate, tls_ciphers_policy=TLS_POLICY,
        idle_timeout=timeout_s, request_timeout=timeout_s, response_timeout=timeout_s,
        # No retry on another server after a timeout or error: a generation is not replayed (the SDK's docstring
        # says "health check retries"; the ELB API's enable_member_retry is the retry of a request).
        enable_member_retry=False, ip_group=acl_id, access_policy=acl_policy,
        # A canary's weighted forwarding policy (_canary_pool) is advanced forwarding.
        advanced_forwarding_enabled=True if request.canary is not None else None,
        description=f"inferstack {name}: the API over HTTPS", tags=request.tags, opts=opts)
    http = hw.dedicatedelb.Listener(
        f"{name}-http", loadbalancer_id=balancer.id, protocol="HTTP", protocol_port=HTTP_PORT, ip_group=acl_id,
        access_policy=acl_policy, description=f"inferstack {name}: redirects to HTTPS", tags=request.tags, opts=opts)
    hw.dedicatedelb.L7policy(f"{name}-http-redirect", listener_id=http.id, action="REDIRECT_TO_LISTENER",
                             redirect_listener_id=https.id, description="HTTP to HTTPS", opts=opts)
    # Least connections: a streamed answer holds its connection for its whole generation.
    pool = hw.dedicatedelb.Pool(f"{name}-pool", listener_id=https.id, protocol="HTTP", lb_method="LEAST_CONNECTIONS",
                                description=f"inferstack {name}: the fleet's servers", opts=opts)
    # The group is always a member of this second pool too, so that a canary added later finds the fleet's running
    # servers in it (whether AS adds a group's running servers to a pool added to it later is not documented).
    weighted = hw.dedicatedelb.Pool(
        f"{name}-weighted-pool", loadbalancer_id=balancer.id, protocol="HTTP", lb_method="LEAST_CONNECTIONS",
        description=f"inferstack {name}: the fleet's servers, for a canary's weighted forwarding", opts=opts)
    health_checks = (_monitor(f"{name}-health", pool.id, plan, opts),
                     _monitor(f"{name}-weighted-health", weighted.id, plan, opts))
    address = eip.address if eip is not None else balancer.ipv4_address
    return _LoadBalancer(address=address, pool_id=pool.id, weighted_pool_id=weighted.id, health_checks=health_checks,
                         load_balancer_id=balancer.id,
                         https_listener_id=https.id)


def _monitor(resource_name: str, pool_id: StrOutput, plan: DeploymentPlan,
             opts: pulumi.ResourceOptions) -> hw.dedicatedelb.Monitor:
    """The pool's health check on the plan's readiness path and port."""
    return hw.dedicatedelb.Monitor(
        resource_name, pool_id=pool_id, protocol="HTTP", port=plan.serving.port, url_path=plan.serving.health_path,
        http_method="GET", status_code="200", interval=HEALTH_INTERVAL_S, timeout=HEALTH_TIMEOUT_S,
        max_retries=HEALTH_RISE, max_retries_down=HEALTH_FALL, opts=opts)


@dataclass(frozen=True)
class _CanaryPool:
    pool_id: StrOutput
    health_check: hw.dedicatedelb.Monitor


def _canary_pool(parent: pulumi.Resource, name: str, canary: FleetRequest, balancer: _LoadBalancer) -> _CanaryPool:
    """The canary group's pool on the same load balancer, health-checked as the main pool is."""
    plan, opts = canary.plan, child_options(parent)
    pool = hw.dedicatedelb.Pool(f"{name}-canary-pool", loadbalancer_id=balancer.load_balancer_id, protocol="HTTP",
                                lb_method="LEAST_CONNECTIONS", description=f"inferstack {name}: the canary's servers",
                                opts=opts)
    health_check = _monitor(f"{name}-canary-health", pool.id, plan, opts)
    return _CanaryPool(pool_id=pool.id, health_check=health_check)


def _weighted_policy(parent: pulumi.Resource, name: str, balancer: _LoadBalancer, canary_pool: _CanaryPool,
                     weights: CanaryRequest) -> None:
    """Every path of the HTTPS listener to the fleet's and the canary's pool by weight: REDIRECT_TO_POOL with
    redirect_pools_configs (pool_id, weight), an advanced-forwarding policy (pulumi_huaweicloud 0.0.12
    dedicatedelb.L7policy and L7policyRedirectPoolsConfigArgs; ELB API v3 CreateL7Policy, redirect_pools_config: "up to
    5 pools", weight "0-100", huaweicloud-sdk-go-v3 elb/v3 model CreateL7PolicyOption and CreateRedirectPoolsConfig,
    read 2026-12-07).

    Neither pool is a listener's default pool: the API refuses a listener's default pool as a policy's redirect pool
    ("Cannot be the default backend server group of the listener", dedicatedelb.L7policy redirect_pool_id; "the pool
    may not be any listener's default_pool", UpdateL7PolicyOption redirect_pool_id) and documents no exception for the
    weighted form, so the policy names the fleet's second pool (`_LoadBalancer.weighted_pool_id`)."""
    opts = child_options(parent)
    policy = hw.dedicatedelb.L7policy(
        f"{name}-canary-split", listener_id=balancer.https_listener_id, action="REDIRECT_TO_POOL", priority=1,
        redirect_pools_configs=[{"pool_id": balancer.weighted_pool_id, "weight": weights.main_weight},
                                {"pool_id": canary_pool.pool_id, "weight": weights.weight}],
        description=f"inferstack {name}: {weights.weight} % of the requests to the canary", opts=opts)
    hw.dedicatedelb.L7rule(f"{name}-canary-every-path", l7policy_id=policy.id, type="PATH", compare_type="STARTS_WITH",
                           value="/", opts=opts)


def _caller_acl(parent: pulumi.Resource, name: str, request: FleetRequest) -> hw.dedicatedelb.Ipgroup | None:
    """The networks that may call the endpoint, as an ELB IP address group both listeners admit alone; None when
    the whole internet may (an ACL would admit everyone)."""
    if any(cidr in ANYWHERE for cidr in request.allowed_cidrs):
        return None
    sources: list[tuple[str, pulumi.Input[str]]] = [(cidr, cidr) for cidr in request.allowed_cidrs] or [
        ("the VPC", request.network_cidr)]
    return hw.dedicatedelb.Ipgroup(
        f"{name}-callers", ip_lists=[{"ip": cidr, "description": f"allowed: {label}"} for label, cidr in sources],
        description=f"inferstack {name}: networks that may call the API", opts=child_options(parent))


def choose_l7_flavor(flavors: Sequence[Mapping[str, Any]], peak_rps: float) -> str:
    """The smallest Layer-7 flavor on sale that carries the fleet's peak (its ceiling at saturation)."""
    fitting = [flavor for flavor in flavors
               if not flavor.get("flavorSoldOut") and float(flavor.get("qps") or 0) >= peak_rps]
    if not fitting:
        raise input_error("plan.fleet", f"no dedicated ELB Layer-7 flavor on sale carries {peak_rps:.3g} requests/s",
                          value=sorted(str(flavor.get("name")) for flavor in flavors),
                          fix="lower scaling.max_replicas, or plan for another region")
    return str(min(fitting, key=lambda flavor: (float(flavor["qps"]), str(flavor["id"])))["id"])


def _server_template(parent: pulumi.Resource, name: str, request: FleetRequest,
                     user_data: StrOutput) -> hw.as_.Configuration:
    """The AS configuration: the servers `create_servers` makes, as a template (no public address)."""
    plan = request.plan
    image = _server_image(parent, plan)
    instance_config = {
        "flavor": plan.instance_type, "image": image.image_id,
        # kms_id on the system disk: the provider sends it as the disk's __system__encrypted/__system__cmkid
        # metadata, whatever the disk type (as_configuration buildDiskOpts); the SDK's docstring names DATA disks.
        "disks": [{"disk_type": "SYS", "volume_type": SYSTEM_DISK_TYPE, "kms_id": _disk_key(parent),
                   "size": image.min_disk_gib.apply(lambda gib: max(gib, plan.disk_gib))}],
        "security_group_ids": list(request.firewall_ids), "user_data": user_data,
        # The SDK's docstring calls charging_mode a bandwidth setting; the provider reads "spot" as the market type
        # (as_configuration buildInstanceConfig) and documents postPaid and spot.
        "charging_mode": "spot" if plan.spot else "postPaid",
    }
    # Every argument, the name included, replaces the configuration (ForceNew): a new one per boot script, named
    # after it, is created before the old one (still bound to the group until the group moves) goes. Not after the
    # image, whose changes are ignored below.
    config_name = user_data.apply(lambda text: unique_name(
        [pulumi.get_project(), pulumi.get_stack(), name, "template"], unique_by=[text], max_length=AS_NAME_MAX_LENGTH))
    # A newer image must not replace the template on the next `pulumi up` (as `create_servers` ignores image_id).
    return hw.as_.Configuration(f"{name}-template", scaling_configuration_name=config_name,
                                instance_config=instance_config,
                                opts=child_options(parent, ignore_changes=["instanceConfig.image"]))


def _cpu_scaling(parent: pulumi.Resource, name: str, group: hw.as_.Group, plan: DeploymentPlan, fleet: Fleet) -> None:
    """Step scaling on the group's average CPU usage, which follows the request rate of a server that computes on
    its CPU: one server more above the plan's target, one fewer (slowly) well below it."""
    opts = child_options(parent)
    target = cpu_target_percent(plan, fleet)
    steps = (("out", ">", target, SCALE_OUT_PERIODS, "ADD", fleet.scale_out_cooldown_s),
             ("in", "<", scale_in_percent(target, fleet), SCALE_IN_PERIODS, "REMOVE", fleet.scale_in_cooldown_s))
    for direction, operator, threshold, periods, operation, cooldown_s in steps:
        alarm = hw.cse.Alarmrule(  # Cloud Eye, filed under Cse in 0.0.12
            f"{name}-scale-{direction}-alarm", alarm_name=_as_name(name, f"scale-{direction}"),
            alarm_description=f"inferstack {name}: average CPU {operator} {threshold} % (scale {direction})",
            metric={"namespace": AS_METRICS_NAMESPACE},
            resources=[{"dimensions": [{"name": AS_GROUP_DIMENSION, "value": group.id}]}],
            conditions=[{"metric_name": CPU_METRIC, "period": AS_METRIC_PERIOD_S, "filter": "average",
                         "comparison_operator": operator, "value": threshold, "unit": "%", "count": periods,
                         "suppress_duration": AS_METRIC_PERIOD_S}],
            alarm_actions=[{"type": "autoscaling", "notification_lists": []}], alarm_action_enabled=True, opts=opts)
        hw.as_.Policy(
            f"{name}-scale-{direction}", scaling_group_id=group.id, scaling_policy_name=_as_name(name, direction),
            scaling_policy_type="ALARM", alarm_id=alarm.id, cool_down_time=cooldown_s,
            scaling_policy_action={"operation": operation, "instance_number": 1}, opts=opts)


def cpu_target_percent(plan: DeploymentPlan, fleet: Fleet) -> int:
    """The CPU usage of a server carrying the plan's target rate: the target's share of a server's saturation."""
    saturation_rps = plan.performance.capacity_requests_per_s / plan.replicas
    low, high = CPU_TARGET_BOUNDS_PERCENT
    return min(high, max(low, round(100 * fleet.target_requests_per_s / saturation_rps)))


def scale_in_percent(target: int, fleet: Fleet) -> int:
    """Below this average, one server fewer still leaves the rest under the target, even in the smallest group
    that can shrink (floor + 1 servers)."""
    return target * fleet.min_replicas // (fleet.min_replicas + 1)


def _as_name(name: str, role: str) -> str:
    """AS group, policy and Cloud Eye alarm names: letters, digits, "-"; at most 64 characters; per stack."""
    return unique_name([pulumi.get_project(), pulumi.get_stack(), name, role], max_length=AS_NAME_MAX_LENGTH)


#### Helpers: offline preview ####

PREVIEW_REGION = "ap-southeast-3"
PREVIEW_PROJECT_ID = "0123456789abcdef0123456789abcdef"  # IAM project ids are 32 hex characters


def _uuid(digest: str) -> str:
    """Huawei resource ids are UUIDs; the preview derives a stable one from the resource's type and name."""
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _bucket_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    bucket = c.inputs["bucket"]
    return bucket, {"bucketDomainName": f"{bucket}.obs.{c.region}.myhuaweicloud.com", "region": c.region}


def _instance_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    # Public addresses are elastic IPs (their own resources).
    return _uuid(c.digest), {"accessIpV4": c.private_ip, "publicIp": ""}


def _ipv4_subnet_id(subnet_id: str) -> str:
    """A subnet's IPv4 (Neutron) subnet id, the one load balancers take, stable per VPC subnet id."""
    return _uuid(hashlib.sha256(f"{subnet_id}/ipv4".encode()).hexdigest())


def _named(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    """Resources whose name the program sets (agencies, custom policies, secrets): the name is part of the state."""
    return _uuid(c.digest), {"name": c.inputs.get("name") or f"{c.name}-{c.digest[:7]}"}


_PREVIEW_OUTPUTS: dict[str, PreviewResource] = {
    "huaweicloud:Dcs/instance:Instance": lambda c: (f"{c.digest[:8]}-{c.digest[8:12]}-{c.digest[12:16]}", {
        "privateIp": c.private_ip, "port": 6379, "domainName": f"redis-{c.digest[:8]}.dcs.huaweicloud.com"}),
    "huaweicloud:Vpc/vpc:Vpc": lambda c: (_uuid(c.digest), {"cidr": c.inputs["cidr"]}),
    "huaweicloud:Vpc/eip:Eip": lambda c: (_uuid(c.digest), {"address": c.public_ip}),
    "huaweicloud:Obs/bucket:Bucket": _bucket_outputs,
    "huaweicloud:Iam/role:Role": _named,
    "huaweicloud:Iam/agency:Agency": _named,
    "huaweicloud:Dew/secret:Secret": _named,
    "huaweicloud:Cdn/domain:Domain": lambda c: (_uuid(c.digest), {
        "cname": f"{c.inputs['name']}.c.cdnhwc1.com", "domainStatus": "online"}),
    "huaweicloud:Ecs/instance:Instance": _instance_outputs,
    "huaweicloud:Vpc/subnet:Subnet": lambda c: (_uuid(c.digest), {
        "ipv4SubnetId": _ipv4_subnet_id(_uuid(c.digest)), "status": "ACTIVE"}),
    # Internal load balancers answer on their private address; an internet-facing one on its elastic IP (a resource
    # of its own).
    "huaweicloud:DedicatedElb/loadbalancer:Loadbalancer": lambda c: (_uuid(c.digest), {
        "ipv4Address": c.private_ip, "ipv4PortId": _uuid(hashlib.sha256(f"{c.digest}/port".encode()).hexdigest()),
        "operatingStatus": "ONLINE"}),
    "huaweicloud:As/group:Group": lambda c: (_uuid(c.digest), {
        "status": "INSERVICE", "currentInstanceNumber": c.inputs.get("desireInstanceNumber", 0)}),
    "huaweicloud:As/configuration:Configuration": lambda c: (_uuid(c.digest), {"status": "Bound"}),
    "huaweicloud:As/policy:Policy": lambda c: (_uuid(c.digest), {"status": "INSERVICE"}),
    # Cloud Eye alarm ids: "al", 13 digits (a creation time in ms) and 9 letters or digits.
    "huaweicloud:Cse/alarmrule:Alarmrule": lambda c: (f"al{int(c.digest[:12], 16) % 10**13:013d}{c.digest[12:21]}",
                                                      {"alarmState": "ok"}),
}


def _preview_flavors(generation: str) -> list[str]:
    """Every size of a generation, as Huawei names them (<generation>.<size>.<GiB per vCPU>). Preview only: a
    deployment asks ECS which flavors each zone sells."""
    sizes = ["large", "xlarge", *(f"{n}xlarge" for n in (2, 4, 6, 8, 12, 16, 22))]
    return [f"{generation}.{size}.{ratio}" for size in sizes for ratio in (1, 2, 4, 8)]


def _preview_images(a: dict[str, Any], c: PreviewContext) -> dict[str, Any]:
    """A plain Ubuntu image for every flavor, and a driver-ready one for GPU generations (p*, g*)."""
    flavor = a.get("flavorId", "")
    images = [{"id": _uuid(hashlib.sha256(f"{c.region}/{UBUNTU_IMAGE_NAME}".encode()).hexdigest()),
               "name": UBUNTU_IMAGE_NAME, "minDiskGb": 40, "createdAt": "2025-01-01T00:00:00Z"}]
    if flavor[:1] in ("p", "g"):
        name = f"{UBUNTU_IMAGE_NAME}{TESLA_DRIVER_SUFFIX} 535.54.03 and CUDA 12.2"
        images.append({"id": _uuid(hashlib.sha256(f"{c.region}/{name}".encode()).hexdigest()), "name": name,
                       "minDiskGb": 40, "createdAt": "2025-01-01T00:00:00Z"})
    return {"id": c.region, "images": images, "flavorId": flavor, "nameRegex": a.get("nameRegex")}


# Dedicated ELB Layer-7 flavors (ELB user guide, "Specifications of Dedicated Load Balancers"): name, HTTP queries/s.
_PREVIEW_L7_FLAVORS = (("small", 2_000), ("medium", 4_000), ("large", 10_000), ("extra-large", 20_000))


def _preview_elb_flavors(kind: str, c: PreviewContext) -> dict[str, Any]:
    flavors = [{"id": _uuid(hashlib.sha256(f"{c.region}/{kind}/{size}".encode()).hexdigest()),
                "name": f"{kind}_flavor.elb.s1.{size}", "type": kind, "qps": qps, "httpsCps": qps // 10,
                "maxConnections": qps * 100, "flavorSoldOut": False, "shared": True}
               for size, qps in _PREVIEW_L7_FLAVORS]
    return {"id": c.region, "type": kind, "ids": [flavor["id"] for flavor in flavors], "flavors": flavors}


_PREVIEW_INVOKES: dict[str, PreviewLookup] = {
    "huaweicloud:index/getAvailabilityZones:getAvailabilityZones": lambda a, c: {
        "id": c.region, "region": c.region, "names": [f"{c.region}{zone}" for zone in "abc"], "state": "available"},
    "huaweicloud:Ecs/getFlavors:getFlavors": lambda a, c: {
        "id": a["availabilityZone"], "availabilityZone": a["availabilityZone"],
        "ids": _preview_flavors(a.get("generation", "s7"))},
    "huaweicloud:Iam/getProjects:getProjects": lambda a, c: {
        "id": a.get("name", c.region),
        "projects": [{"id": c.account, "name": a.get("name", c.region), "enabled": True}]},
    "huaweicloud:Ims/getImages:getImages": _preview_images,
    "huaweicloud:Dew/getKey:getKey": lambda a, c: {
        "id": "evs-default-key", "keyId": _uuid(hashlib.sha256(f"{c.region}/evs/default".encode()).hexdigest()),
        "keyAlias": a["keyAlias"], "defaultKeyFlag": "1", "domainId": c.account, "region": c.region},
    "huaweicloud:DedicatedElb/getFlavors:getFlavors": lambda a, c: _preview_elb_flavors(a.get("type", "L7"), c),
    # Lookups of brought resources: the preview cannot see them, so it answers with placeholders.
    "huaweicloud:Vpc/getSubnet:getSubnet": lambda a, c: {
        "id": a["id"], "ipv4SubnetId": _ipv4_subnet_id(a["id"]), "status": "ACTIVE", "region": c.region,
        "availabilityZone": f"{c.region}a", "cidr": "10.64.0.0/20"},
    "huaweicloud:Vpc/getVpc:getVpc": lambda a, c: {"id": a["id"], "cidr": "192.168.0.0/16", "region": c.region},
    "huaweicloud:Obs/getBuckets:getBuckets": lambda a, c: {
        "id": c.region, "buckets": [{"bucket": a["bucket"], "region": c.region, "storageClass": "STANDARD",
                                     "createdAt": "2025-01-01T00:00:00Z", "enterpriseProjectId": "0"}]},
}

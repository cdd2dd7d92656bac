"""Alibaba Cloud provisioning (pulumi_alicloud 4.0.x): VPC + vSwitches (+ NAT gateway for a fleet), security groups,
OSS + CDN, KMS Secrets Manager, RAM, ECS; a fleet is an ESS scaling group behind an ALB.

Sections follow `CloudBackend` in `backend.py`; every cloud module keeps the same order and banners.

Three settings have no cloud-neutral meaning, so this backend reads them from its own stack-config namespace
(`inferstack-alibaba:`): `kmsInstanceId` + `kmsKeyId`, because KMS 3.0 keeps secrets in a KMS instance you buy, and
`assetsDnsReady`, because Alibaba issues the CDN's free certificate only once the domain's CNAME points at the CDN.
They are checked with the component arguments, before anything is created (`settings_problem`). See
docs/deploy-alibaba.md.

A fleet's HTTPS endpoint needs a certificate you hold in Certificate Management Service (`api_certificate`): ALB
takes no certificate it issues itself, and CAS issues one only after an order, contacts and DNS validation records
outside the stack.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import pulumi
import pulumi_alicloud as alicloud

from inferstack.bootstrap.agents.alibaba import machine_group_identity
from inferstack.bootstrap.telemetry import TelemetryTarget, sources
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
    TelemetryRequest,
    TelemetryResult,
)
from inferstack.components.naming import child_options, invoke_options, server_options, slug, unique_name
from inferstack.components.observability import (
    LOG_RETENTION_DAYS,
    AlarmKind,
    AlarmRule,
    agent_alarm_rules,
    alarm_rules,
    errors_per_s,
)
from inferstack.components.shared import (
    ACCESS_LOG_DAYS,
    INCOMPLETE_UPLOAD_DAYS,
    NETWORK_CIDR,
    SUBNET_RANGES,
    WEB_EGRESS_PORTS,
    checked_user_data,
    compressed_user_data,
    first_zones,
    nth,
)
from inferstack.errors import InputError, Problem, input_error
from inferstack.plan import DeploymentPlan

#### Constants ####

# ECS accepts at most 32 KB of user data. The cloud-config is sent gzip-compressed and Base64-encoded (cloud-init
# on Alibaba's Ubuntu images unpacks gzip by itself). Read strictly, the 32 KB bound the Base64 text: that is 24 KB
# of gzip (Base64 writes 4 characters per 3 bytes).
USER_DATA_LIMIT_BYTES = 32 * 1024 * 3 // 4

# Public address for egress (drivers, packages, containers), billed per GB (PayByTraffic): the bandwidth is a
# ceiling, not a reservation. 100 Mbit/s is the provider's documented maximum for internet_max_bandwidth_out; a
# fleet's NAT gateway gets an EIP with the same ceiling (ecs.EipAddress: 1-200 Mbit/s for PayByTraffic).
PUBLIC_BANDWIDTH_MBPS = 100
SYSTEM_DISK_CATEGORY = "cloud_essd"

# Alibaba's Ubuntu 22.04 system images (`ubuntu_22_04_x64_20G_alibase_<date>.vhd`, arm64 alike); filtering by
# instance type leaves the architecture that runs on it. No driver-ready GPU image has a stable name to look up,
# so GPU servers use the same image and the bootstrap installs the driver (docs/bootstrap.md, phase `driver`).
IMAGE_OWNER = "system"
IMAGE_NAME_REGEX = r"^ubuntu_22_04_(x64|arm64)_"

# Retention (core's choices): no lifecycle rule expires noncurrent versions, because some regions reject
# NoncurrentVersionExpiration (OSS error 0014-00000069), which would fail `pulumi up`.

# Egress: WEB_EGRESS_PORTS, and DNS and NTP to Alibaba's in-VPC services (100.100.2.136/138 resolvers, NTP servers
# and the metadata server 100.100.100.200 all sit in 100.100.0.0/16). Everything else leaving the server is dropped.
CLOUD_SERVICES_CIDR = "100.100.0.0/16"
CLOUD_SERVICE_PORTS = (("dns-udp", "udp", 53), ("dns-tcp", "tcp", 53), ("ntp", "udp", 123))
ACCEPT_PRIORITY = 1  # security-group rule priorities run 1 (first) to 100 (last)
DROP_PRIORITY = 100

# One-time, account-wide authorisation that lets CDN sign origin requests to private buckets (CDN console, origin
# settings, "authorize"; or the RAM role of that name trusting cdn.aliyuncs.com). It is shared by every CDN
# domain of the account, so a stack checks that it exists and never creates or changes it.
CDN_ORIGIN_ROLE = "AliyunCDNAccessingPrivateOSSRole"
CDN_TLS_REDIRECT = "301"
# Alibaba's free DV certificate (cdn.DomainNew certificate_config cert_type "free") is issued for a domain whose
# CNAME already points at the CDN, and the CNAME target (the domain's `cname` output) exists only once the domain
# does. So the first `pulumi up` creates the domain without HTTPS; once DNS points at it, `assetsDnsReady` adds the
# certificate (certificate_config is updated in place: not ForceNew in alicloud_cdn_domain_new) and forces HTTPS.
FREE_CERTIFICATE: alicloud.cdn.DomainNewCertificateConfigArgsDict = {"cert_type": "free",
                                                                     "server_certificate_status": "on"}

CONFIG_NAMESPACE = "inferstack-alibaba"
KMS_INSTANCE_KEY = "kmsInstanceId"
KMS_KEY_KEY = "kmsKeyId"
DNS_READY_KEY = "assetsDnsReady"
# KMS ids, as the KMS API writes them: kst-bjj62f5ba3dnpb6v8****, key-bjj62f5ba3dnpb6v8****.
KMS_ID_PATTERNS = {KMS_INSTANCE_KEY: r"kst-[a-z0-9]+", KMS_KEY_KEY: r"key-[a-z0-9]+"}

# Mainland China regions need an ICP filing for a `domestic` CDN domain; elsewhere the CDN serves `overseas`.
_MAINLAND_REGION = re.compile(r"^cn-(?!hongkong)")

#### Constants: fleet ####

# A fleet's private vSwitches start at the ninth /20 of NETWORK_CIDR (10.64.128.0/20): the public ones keep theirs
# whatever the zone count, so adding a zone never renumbers a vSwitch.
PRIVATE_SUBNET_OFFSET = 8
# "You must specify at least two zones" (pulumi_alicloud alb.LoadBalancer zone_mappings): a fleet's network has two
# zones even when the plan asks one, and its load balancer needs vSwitches in two zones.
ALB_MIN_ZONES = 2
# ALB listener idle_timeout and request_timeout: "0~600 Seconds" (alb.Listener docstrings; plan.py
# clouds.py load_balancer_timeout_s, which the planner caps answers to).
ALB_MAX_TIMEOUT_S = CLOUD_FACTS["alibaba"].load_balancer_timeout_s
# tls_cipher_policy_1_2_strict_with_1_3: TLS 1.2 and 1.3 only, ECDHE suites only (ALB's system TLS policies:
# tls_cipher_policy_1_0, _1_1, _1_2, _1_2_strict, _1_2_strict_with_1_3; Alibaba's "TLS security policies" page).
ALB_TLS_POLICY = "tls_cipher_policy_1_2_strict_with_1_3"
LISTENER_PORTS: Mapping[str, int] = {"https": 443, "http": 80}
ALB_HTTPS_REDIRECT_CODE = "301"  # alb.Rule redirect_config http_code: 301, 302, 303, 307 or 308
# ALB health checks (alb.ServerGroup health_check_config ranges: interval 1-50 s, timeout 1-300 s, thresholds
# 2-10): a server that stops answering leaves the load balancer after 3 failed checks, about 30 s.
HEALTH_CHECK_INTERVAL_S = 10
HEALTH_CHECK_TIMEOUT_S = 5
HEALTHY_THRESHOLD = 2
UNHEALTHY_THRESHOLD = 3
# A removed server finishes its streamed answers: connection draining for the request timeout, at most 900 s
# (alb.ServerGroup connection_drain_timeout: 0-900).
MAX_CONNECTION_DRAIN_S = 900
# The instance metadata hop limit: 1, so that containers on the server cannot reach its credentials
# (ecs.EcsLaunchTemplate http_put_response_hop_limit: 1-64).
METADATA_HOP_LIMIT = 1
# ESS target tracking on an ALB server group: the metric is the server group's requests per second divided by its
# backend servers, "(ALB) QPS per Backend Server" (Auto Scaling docs); the dimension rulePool names the server
# group (the provider's acceptance test TestAccAliCloudEssScalingRule_target_tracking_rule_alarm_dimension).
ALB_QPS_PER_SERVER_METRIC = "LoadBalancerRealServerAverageQps"
ALB_SERVER_GROUP_DIMENSION = "rulePool"
QPS_DECIMALS = 3  # CreateScalingRule TargetValue is kept to three decimal places (Auto Scaling API; verify)
# The event-triggered task behind a target tracking rule checks the metric once a minute (verify): scale-in waits
# for scale_in_cooldown_s of consecutive checks below target (ess.ScalingRule scale_in_evaluation_count).
METRIC_PERIOD_S = 60

# Alarms read the ALB's CloudMonitor metrics (namespace acs_alb, dimension loadBalancerId, statistic Value; SLB docs,
# "ALB monitoring metrics"): LoadBalancerUnHealthyHostCount and LoadBalancerHealthyHostCount (servers),
# LoadBalancerUpstreamResponseTime (the backends' response time, ms; an average: CloudMonitor publishes no percentile
# of it) and LoadBalancerHTTPCodeUpstream5XX (the backends' 5xx answers per second; CloudMonitor alarms compare one
# metric with a number, so the error budget is a rate at the plan's peak load: observability.errors_per_s).
ALB_NAMESPACE = "acs_alb"
ALB_ALARM_METRICS: Mapping[AlarmKind, tuple[str, str]] = {
    AlarmKind.UNHEALTHY_SERVERS: ("LoadBalancerUnHealthyHostCount", ">"),
    AlarmKind.LATENCY: ("LoadBalancerUpstreamResponseTime", ">"),
    AlarmKind.ERROR_RATE: ("LoadBalancerHTTPCodeUpstream5XX", ">"),
    AlarmKind.FLEET_AT_CEILING: ("LoadBalancerHealthyHostCount", ">="),
}
# ess.LifecycleHook heartbeat_timeout: 30-21600 s (Auto Scaling CreateLifecycleHook; verify).
LIFECYCLE_ACTIONS = ("ess:DescribeScalingInstances", "ess:DescribeLifecycleActions", "ess:CompleteLifecycleAction")
"""What a fleet's server may do to finish its own scale-out (_lifecycle_grant); the policy pack's allow-list
(SERVER_GRANTS in policy/guardrails/server_identity.py) holds the same three."""
MAX_LIFECYCLE_HOOK_S = 21600
# A CAS certificate as ALB's listener takes it: the certificate id, a dash and the CAS region, as the provider's
# acceptance tests build it (join("", [alicloud_ssl_certificates_service_certificate.default.id, "-<region>"])).
CAS_CERTIFICATE = CertificateRule(
    kind="a Certificate Management Service (CAS) certificate as ALB takes it: the certificate id, a dash and the "
         "CAS region (ap-southeast-1 on the international site, cn-hangzhou in mainland China)",
    pattern=r"[0-9]{1,20}-[a-z]{2,}(-[a-z0-9]+){1,3}", example="12345678-ap-southeast-1")


# The inference cache. TLS needs "Redis Open-Source Edition 5.0, 6.0, or 7.0" with "the master-replica architecture"
# (alibabacloud.com/help/en/redis/user-guide/enable-tls-encryption, read 2026-12-01); the 1 GB master-replica class of
# that edition is redis.shard.small.2.ce (Alibaba's instance type table; verify in your region with
# kvstore.get_instance_classes).
CACHE_ENGINE_VERSION = "7.0"
CACHE_INSTANCE_CLASS = "redis.shard.small.2.ce"
CACHE_PORT = 6379

# The logstore of the load balancer's access logs, in a project of its own (`_load_balancer_logs`).
LOAD_BALANCER_LOGSTORE = "alb-access-log"

#### Constants: telemetry ####

# The servers' logs (runtime, gateway, boot) go to a logstore of their own, in an SLS project of the deployment's
# (`create_telemetry`), collected by Logtail from the servers of a machine group with a user-defined identity (the
# project's name: bootstrap.agents.alibaba.machine_group_identity). Logtail on the account's own ECS instances
# authenticates as the instance, with no AccessKey and no RAM grant (SLS, "Install Logtail on ECS instances": a user
# identifier file is needed only for another account's or a non-Alibaba server); verify.
SERVER_LOGSTORE = "server-logs"
# Logtail file collection (LogTailConfig input_type "file", input_detail keys of SLS's Logtail configuration API,
# doc-detail/29058): every line of the files under the log directory as one log; verify the keys against the
# CreateConfig reference before relying on them.
LOGTAIL_FILE_LOG_TYPE = "common_reg_log"
# Journal collection: Logtail's service_journal input plugin (input_type "plugin"), limited to the sources' units;
# verify the plugin's detail keys (Units, JournalPaths, SeekPosition) against SLS's "Collect systemd journal logs".
LOGTAIL_JOURNAL_PLUGIN = "service_journal"
# The CloudMonitor agent's metrics (acs_ecs_dashboard, category ecs): the disk's used percent per mount point and each
# GPU's memory used percent. The names match the agent's own metric keys (diskusage_utilization_avg/max/min and
# gpu_memory_usedutilization_avg/max/min, tag gpuId, in Alibaba's open-source iLogtail/LoongCollector host monitor)
# and CloudMonitor's host metrics list; verify in the console. One data point a minute from the agent (verify), so
# `times` counts minutes. Alarms on them are an alert template applied by a tag-based application group
# (cms.DynamicTagGroup template_id_lists; ROS ALIYUN::CMS::DynamicTagGroup: "a tag rule based on which cloud resources
# can be automatically added to an application group"), so the servers ESS adds and removes are watched without a
# rule per instance. (The API's EnableInstallAgent is not an argument of the provider's DynamicTagGroup.)
AGENT_NAMESPACE = "acs_ecs_dashboard"
AGENT_CATEGORY = "ecs"
AGENT_ALARM_METRICS: Mapping[AlarmKind, str] = {
    AlarmKind.DISK: "diskusage_utilization",
    AlarmKind.GPU_MEMORY: "gpu_memory_usedutilization",
}
# The tag that names a scaling group's servers (the launch template's instance tags) for its application group.
FLEET_TAG = "inferstack-fleet"


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
    # Resource ids: a prefix and lowercase letters and digits; RAM role names: 1 to 64 letters, digits, periods and
    # hyphens (RAM API reference, CreateRole).
    # A CloudMonitor alarm contact group, by name (cms.Alarm contact_groups); names may be Chinese.
    notification_target = ValueRule("the name of a CloudMonitor alarm contact group",
                                    r"[-A-Za-z0-9_.\u4e00-\u9fff]{2,64}", "inference-oncall")
    dashboard_gap = (
        "pulumi_alicloud has no CloudMonitor dashboard resource (its cms module has alarms, contact groups, monitor "
        "groups and dynamic tag groups, no dashboard); CloudMonitor's console shows the ALB instance's metrics (QPS, "
        "latency, 5xx, healthy and unhealthy servers) on its own ALB page, and the SLS project of the load balancer's "
        "access logs opens the ALB access-log dashboards SLS generates for an ALB logstore")
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
        opts = child_options(parent)
        vpc = alicloud.vpc.Network(f"{name}-vpc", vpc_name=f"{name}-vpc", cidr_block=NETWORK_CIDR,
                                   description="inferstack inference servers", tags=request.tags, opts=opts)
        # A fleet's load balancer needs two zones (ALB_MIN_ZONES), in zones where ALB runs.
        count = max(request.zones, ALB_MIN_ZONES) if request.private_servers else request.zones
        zones = _zones_offering(parent, request.instance_type, count, load_balancer=request.private_servers)

        def switch(label: str, index: int, cidr_block: str) -> alicloud.vpc.Switch:
            return alicloud.vpc.Switch(
                f"{name}-{label}-{index}", vswitch_name=f"{name}-{label}-{index}", vpc_id=vpc.id,
                cidr_block=cidr_block, zone_id=zones.apply(nth(index)), tags=request.tags, opts=opts)

        public = [switch("vswitch", index, SUBNET_RANGES[index]).id for index in range(count)]
        # No gateway or endpoint to add for these: a single server reaches the internet through its own public
        # address, and OSS through its internal endpoint (oss-<region>-internal), which every VPC reaches free.
        if not request.private_servers:
            return NetworkResult(network_id=vpc.id, subnet_ids=public, cidr_block=vpc.cidr_block)
        private = [switch("private-vswitch", index, SUBNET_RANGES[PRIVATE_SUBNET_OFFSET + index]).id
                   for index in range(count)]
        _nat_egress(parent, name, vpc.id, public[0], private, request.tags)
        return NetworkResult(network_id=vpc.id, subnet_ids=public, cidr_block=vpc.cidr_block,
                             private_subnet_ids=private)

    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        ids = pulumi.Output.from_input(network_id).apply(lambda vpc_id: [vpc_id])
        found = alicloud.vpc.get_networks_output(ids=ids, opts=invoke_options(parent))
        cidrs = found.vpcs.apply(lambda vpcs: [str(vpc.cidr_block) for vpc in vpcs])
        return pulumi.Output.all(network_id, cidrs).apply(lambda facts: _only_network_cidr(*facts))

    #### Firewall ####

    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
        opts = child_options(parent)
        group = alicloud.ecs.SecurityGroup(
            f"{name}-sg", security_group_name=f"{name}-sg", vpc_id=request.network_id, security_group_type="normal",
            # Replicas never talk to each other: no implicit traffic between members of the group.
            inner_access_policy="Drop",
            description="inferstack inference server: API to the "
            f"{'load balancer in the VPC' if request.load_balanced else 'allowed networks'}, metrics inside the VPC",
            tags=request.tags, opts=opts)
        if request.load_balanced:
            # ALB reaches its servers, and health-checks them, from local addresses in its own vSwitches ("An
            # upgraded ALB instance uses local IP addresses from its vSwitch CIDR block to communicate with backend
            # servers", ALB health checks): inside the VPC. The allowed networks reach the load balancer, not this.
            _rule(f"{name}-api-load-balancer", group, "ingress", "tcp", request.serving_port, request.network_cidr,
                  "inference API, from the load balancer in the VPC", opts)
        else:
            for label, cidr in request.api_sources():
                _rule(f"{name}-api-{label}", group, "ingress", "tcp", request.serving_port, cidr, "inference API",
                      opts)
        if request.metrics_port is not None:
            _rule(f"{name}-metrics", group, "ingress", "tcp", request.metrics_port, request.network_cidr,
                  "metrics, VPC only", opts)
        for label, port in WEB_EGRESS_PORTS.items():
            _rule(f"{name}-egress-{label}", group, "egress", "tcp", port, "0.0.0.0/0",
                  f"{label} for drivers, packages, models", opts)
        for label, protocol, port in CLOUD_SERVICE_PORTS:
            _rule(f"{name}-egress-{label}", group, "egress", protocol, port, CLOUD_SERVICES_CIDR,
                  f"{label} to Alibaba's in-VPC services", opts)
        alicloud.ecs.SecurityGroupRule(
            f"{name}-egress-drop-rest", security_group_id=group.id, type="egress", ip_protocol="all",
            port_range="-1/-1", cidr_ip="0.0.0.0/0", policy="drop", priority=DROP_PRIORITY, nic_type="intranet",
            description="everything else leaving the server", opts=opts)
        load_balancer = _load_balancer_firewall(parent, name, request) if request.load_balanced else None
        return FirewallResult(firewall_id=group.id, load_balancer_firewall_id=load_balancer)

    #### Storage ####

    def create_model_store(self, parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
        logs = _private_bucket(parent, name, "logs", request.force_destroy, request.tags,
                               expire_after_days=ACCESS_LOG_DAYS)
        buckets = {purpose: _private_bucket(parent, name, purpose, request.force_destroy, request.tags,
                                            logs_bucket=logs.id).id for purpose in ("models", "data")}
        return ModelStoreResult(model_bucket=buckets["models"], data_bucket=buckets["data"], logs_bucket=logs.id)

    def create_static_assets(
        self, parent: pulumi.Resource, name: str, request: StaticAssetsRequest
    ) -> StaticAssetsResult:
        if request.existing_bucket is not None:
            bucket_name = pulumi.Output.from_input(request.existing_bucket)
        else:
            bucket_name = _private_bucket(parent, name, "bucket", request.force_destroy, request.tags,
                                          logs_bucket=request.logs_bucket).id
        domain = request.domain
        assert domain is not None, "StaticAssets requires a domain here (no Capability.CDN_DEFAULT_HOSTNAME)"
        url = _cdn_domain(parent, name, domain, bucket_name, request.tags)
        # Nothing to add to a brought bucket: the account's CDN role reads it (same account and region required).
        return StaticAssetsResult(bucket=bucket_name, url=url, required_bucket_policy=None)

    def create_bundle(self, parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
        # Private, encrypted like its bucket. Content-addressed:
        # a new bundle is a new object, and the old one goes once the servers have moved on.
        bundle = alicloud.oss.BucketObject(
            f"{name}-bundle", bucket=request.bucket, key=request.key, content=request.content,
            content_type="application/json", acl="private", server_side_encryption="AES256",
            opts=child_options(parent))
        return bundle.id

    #### Secrets and identity ####

    def create_secrets(self, parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
        instance_id, key_id = _kms_instance(field=f"{name}.cloud")
        path = "/".join(["inferstack", slug(pulumi.get_project()), slug(pulumi.get_stack()), slug(name)])
        refs, grant_ids = {}, []
        for key, value in request.values.items():
            secret = alicloud.kms.Secret(
                f"{name}-{key}", secret_name=f"{path}/{key}", secret_data=value, secret_type="Generic",
                version_id="v1", dkms_instance_id=instance_id, encryption_key_id=key_id,
                # The value lives in the stack's encrypted config; `pulumi up` recreates a deleted secret, so
                # there is nothing a recovery window would save, and it would block the name for 7-30 days.
                force_delete_without_recovery=True,
                description=f"inferstack {key} for {name}; read by the server at boot", tags=request.tags,
                # A new value replaces the secret (its version id stays v1); the server reads it at its next start.
                opts=child_options(parent, replace_on_changes=["secretData"], delete_before_replace=True))
            refs[key] = secret.secret_name
            grant_ids.append(secret.arn)
        return SecretsResult(refs=refs, grant_ids=grant_ids)

    def create_identity(self, parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
        opts = child_options(parent)
        role = alicloud.ram.Role(
            f"{name}-role", role_name=_account_name(parent, name, "role"),
            description="inferstack inference server: read its model prefix and its secrets",
            assume_role_policy_document=json.dumps({"Version": "1", "Statement": [{
                "Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": ["ecs.aliyuncs.com"]}}]}),
            tags=request.tags, opts=opts)
        bucket = pulumi.Output.concat("acs:oss:*:*:", request.model_bucket)
        policies: dict[str, list[dict[str, Any]]] = {"model-read": [
            {"Effect": "Allow", "Action": "oss:ListObjects", "Resource": bucket,
             "Condition": {"StringLike": {"oss:Prefix": [f"{request.model_prefix}*"]}}},
            {"Effect": "Allow", "Action": "oss:GetObject",
             "Resource": [pulumi.Output.concat(bucket, "/", request.model_prefix, "*"),
                          pulumi.Output.concat(bucket, "/", request.bundle_prefix, "*")]}]}
        if request.secret_ids:
            policies["secrets-read"] = [{"Effect": "Allow", "Action": "kms:GetSecretValue",
                                         "Resource": list(request.secret_ids)}]
        # Cloud Assistant (the managed shell) needs no grant on the server's role: its agent has its own channel.
        attachments = []
        for label, statements in policies.items():
            policy = alicloud.ram.Policy(
                f"{name}-{label}", policy_name=_account_name(parent, name, label),
                policy_document=pulumi.Output.json_dumps({"Version": "1", "Statement": statements}),
                description=f"inferstack {label} for {name}", tags=request.tags, opts=opts)
            attachments.append(alicloud.ram.RolePolicyAttachment(
                f"{name}-{label}-attachment", role_name=role.role_name, policy_name=policy.policy_name,
                policy_type="Custom", opts=opts))
        # The role name resolves only once every policy is attached: a server that takes it can read its model
        # from its first boot.
        ready = pulumi.Output.all(role.role_name, *(a.id for a in attachments)).apply(lambda ids: ids[0])
        return IdentityResult(identity_id=role.arn, attachment=ready)

    #### Compute ####

    def create_servers(self, parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
        plan = request.plan
        image = _server_image(parent, plan)
        user_data = _user_data(parent, plan, request.user_data, provider=self.display_name)
        result = ServersResult(instance_ids=[], public_ips=[], private_ips=[])
        for index in range(plan.instance_count):
            server = alicloud.ecs.Instance(
                f"{name}-server-{index}", instance_name=f"{name}-server-{index}", image_id=image.image_id,
                instance_type=plan.instance_type, vswitch_id=request.subnet_ids[index % len(request.subnet_ids)],
                security_groups=list(request.firewall_ids),
                # role_name (deprecated since provider 1.275.0 in favour of ecs.RamRoleAttachment) is passed to
                # RunInstances, so the role's credentials exist at first boot; an attachment made after the
                # instance starts would race the bootstrap's first read of the model bucket.
                role_name=request.attachment,
                http_endpoint="enabled", http_tokens="required",
                system_disk_category=SYSTEM_DISK_CATEGORY, system_disk_encrypted=True,
                system_disk_size=_system_disk_gib(image, plan),
                instance_charge_type="PostPaid", internet_charge_type="PayByTraffic",
                internet_max_bandwidth_out=PUBLIC_BANDWIDTH_MBPS, user_data=user_data,
                # "It does not work when the instance is spot" (pulumi_alicloud ecs.Instance deletion_protection).
                deletion_protection=request.protected and not plan.spot,
                spot_strategy="SpotAsPriceGo" if plan.spot else None,
                spot_interruption_behavior="Terminate" if plan.spot else None,
                tags=request.tags, volume_tags=request.tags,
                # cloud-init runs once per instance: new user data means a new server, as on AWS. A newer image
                # must not touch a running server on the next `pulumi up`; roll it out with
                # `pulumi up --replace <urn>` when you choose to (with protection lifted).
                opts=server_options(parent, request.protected, replace_on_changes=["userData"],
                                    ignore_changes=["imageId"]))
            result.instance_ids.append(server.id)
            result.public_ips.append(server.public_ip.apply(lambda ip: ip or ""))
            result.private_ips.append(server.private_ip)
        return result

    def create_fleet(self, parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
        assert request.plan.fleet is not None, "create_fleet is called for a plan with a fleet"
        certificate = _api_certificate(request.api_certificate)
        servers = _server_group(parent, name, request)
        load_balancer = _load_balancer(parent, name, request, _load_balancer_logs(parent, name, request))
        https = _listeners(parent, name, request, load_balancer, servers, certificate)
        group = _scaling_group(parent, name, request, servers, provider=self.display_name)
        if request.canary is not None:  # the same group, from the canary's plan, and a weighted rule to both
            canary = request.for_canary()
            canary_servers = _server_group(parent, f"{name}-canary", canary)
            _scaling_group(parent, f"{name}-canary", canary, canary_servers, provider=self.display_name)
            _weighted_rule(parent, name, https, servers, canary_servers, request.canary)
        domain = request.api_domain
        load_balancer.dns_name.apply(lambda dns_name: pulumi.log.info(
            f"{name}: point {domain} at the load balancer with a CNAME record to {dns_name}; the endpoint serves "
            f"CAS certificate {certificate}, which must cover {domain}", resource=parent))
        watched: dict[str, pulumi.Input[str]] = {"load_balancer": load_balancer.id,
                                                 "fleet_tag": _fleet_tag(parent, name)}
        if request.canary is not None:
            watched["canary_fleet_tag"] = _fleet_tag(parent, f"{name}-canary")
        return FleetResult(endpoint_url=pulumi.Output.from_input(f"https://{domain}"),
                           load_balancer_address=load_balancer.dns_name, group_id=group.id, watched=watched)

    #### Monitoring ####

    def create_telemetry(self, parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
        """The servers' logs: a logstore kept LOG_RETENTION_DAYS and encrypted (SLS's default key), in a private SLS
        project of the deployment's (no project policy: only the account's RAM identities read it), kept on destroy
        when protected; a machine group of the servers (user-defined identity, `machine_group_identity`) and what
        Logtail collects from them (the sources' log files and units). Metrics go to CloudMonitor's own namespace.

        No grant: Logtail and the CloudMonitor agent write as the account's ECS instance, not through the server's
        RAM role (an AccessKey is never put on the server)."""
        plan, opts = request.plan, child_options(parent)
        kept = child_options(parent, retain_on_delete=True) if request.protected else opts
        project = alicloud.log.Project(
            f"{name}-server-logs", project_name=_bucket_name(parent, name, "logs"),
            description=f"inferstack {name}: the servers' runtime, gateway and boot logs", tags=request.tags,
            opts=kept)
        store = alicloud.log.Store(
            f"{name}-server-logs-store", project_name=project.project_name, logstore_name=SERVER_LOGSTORE,
            retention_period=LOG_RETENTION_DAYS, encrypt_conf={"enable": True, "encrypt_type": "default"}, opts=kept)
        target = pulumi.Output.all(project.project_name, store.logstore_name).apply(
            lambda names: TelemetryTarget(logs=f"{names[0]}/{names[1]}", metrics=AGENT_NAMESPACE))
        machines = alicloud.log.MachineGroup(
            f"{name}-logtail-servers", project=project.project_name, name=f"{name}-servers",
            identify_type="userdefined",
            identify_lists=[target.apply(lambda t: machine_group_identity(t.logs))], opts=opts)
        collected = sources(plan)
        # (label, input type, input detail): each log file, then the journal of the units.
        collections = [*((_log_label(path), "file", _file_collection(path)) for path in collected.files),
                       ("journal", "plugin", _journal_collection(collected.units))]
        for label, input_type, detail in collections:
            config = alicloud.log.LogTailConfig(
                f"{name}-logtail-{label}", project=project.project_name, logstore=store.logstore_name,
                name=f"{name}-{label}", input_type=input_type, output_type="LogService",
                input_detail=json.dumps(detail), opts=opts)
            alicloud.log.LogTailAttachment(
                f"{name}-logtail-{label}-attachment", project=project.project_name, logtail_config_name=config.name,
                machine_group_name=machines.name, opts=opts)
        return TelemetryResult(target=target, grants=[])

    def create_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
        """One CloudMonitor alarm rule per rule on the ALB's metrics, notifying the contact group. CloudMonitor
        alarms need a contact group: without one, an empty group is created, to which contacts can be added."""
        opts = child_options(parent)
        contacts: pulumi.Input[str] = request.notification_target or alicloud.cms.AlarmContactGroup(
            f"{name}-alarm-contacts", alarm_contact_group_name=_account_name(parent, name, "alarms"),
            describe=f"inferstack {name}: alarms of the fleet", opts=opts).alarm_contact_group_name
        dimensions = pulumi.Output.from_input(request.fleet.watched["load_balancer"]).apply(
            lambda balancer: json.dumps([{"loadBalancerId": balancer}]))
        alarms = [alicloud.cms.Alarm(
            f"{name}-alarm-{rule.kind.value}", name=f"inferstack {name}: {rule.kind.value}", project=ALB_NAMESPACE,
            metric=ALB_ALARM_METRICS[rule.kind][0], metric_dimensions=dimensions, period=METRIC_PERIOD_S,
            contact_groups=[contacts], escalations_critical={
                "statistics": "Value", "comparison_operator": ALB_ALARM_METRICS[rule.kind][1],
                "threshold": _alarm_threshold(request.plan, rule), "times": rule.minutes},
            tags=request.tags, opts=opts)
            for rule in alarm_rules(request.plan)]
        alarm_ids = [alarm.id for alarm in alarms]
        if request.telemetry is not None:
            alarm_ids += _agent_alarms(parent, name, request.plan, request.fleet.watched["fleet_tag"], contacts,
                                       request.tags)
            canary = request.plan.canary
            if canary is not None:
                alarm_ids += _agent_alarms(parent, f"{name}-canary", canary.plan,
                                           request.fleet.watched["canary_fleet_tag"], contacts, request.tags)
        return AlarmsResult(alarm_ids=alarm_ids)

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        """Tair (Redis OSS-compatible) in the servers' first vSwitch: TLS, password (AUTH) required in the VPC, its
        whitelist admits the servers' security groups and no address."""
        assert request.auth_token is not None, "Tair takes the stack's AUTH token as its password"
        opts = child_options(parent)
        vswitch = request.subnet_ids[0]
        found = alicloud.vpc.get_switches_output(ids=pulumi.Output.all(vswitch), opts=invoke_options(parent))
        zone = found.vswitches.apply(lambda vswitches: str(vswitches[0].zone_id))
        cache = alicloud.kvstore.Instance(
            f"{name}-cache", db_instance_name=f"{name}-cache", instance_type="Redis",
            engine_version=CACHE_ENGINE_VERSION, instance_class=CACHE_INSTANCE_CLASS, payment_type="PostPaid",
            vswitch_id=vswitch, zone_id=zone, password=request.auth_token, vpc_auth_mode="Open",
            ssl_enable="Enable",
            # Only the servers' security groups; the address whitelist keeps Tair's default 127.0.0.1, which admits
            # no client ("By default, Tair (Redis OSS-compatible) does not allow access from any IP addresses").
            security_group_id=pulumi.Output.all(*request.server_firewall_ids).apply(",".join),
            security_ips=["127.0.0.1"], tags=request.tags,
            opts=child_options(parent, protect=True if request.protected else None))
        for index, group in enumerate(request.server_firewall_ids):
            if request.firewall_created:  # the servers' group drops all egress but the web's and the cloud's
                alicloud.ecs.SecurityGroupRule(
                    f"{name}-egress-cache-{index}", security_group_id=group, type="egress", ip_protocol="tcp",
                    port_range=f"{CACHE_PORT}/{CACHE_PORT}", cidr_ip=cache.private_ip.apply(lambda ip: f"{ip}/32"),
                    policy="accept", priority=ACCEPT_PRIORITY, nic_type="intranet",
                    description="Redis, the inference cache", opts=opts)
        # Tair's TLS certificate is signed by Alibaba's own CA, downloaded from the console (no provider output):
        # the connection is encrypted, the server's certificate is not verified (Capability.MANAGED_CACHE).
        return CacheResult(host=cache.connection_domain, port=pulumi.Output.from_input(CACHE_PORT),
                           auth_token=pulumi.Output.secret(request.auth_token),
                           ca_certificate=pulumi.Output.from_input(None), verify=False)

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return PreviewAnswers(resources=_PREVIEW_OUTPUTS, lookups=_PREVIEW_INVOKES,
                              region=self.configured_region() or PREVIEW_REGION, account=PREVIEW_ACCOUNT)

    #### Shared behaviour ####

    def settings_problem(self, capability: Capability, *, field: str) -> Problem | None:
        """Secrets need the KMS instance and key, and the CDN reads `assetsDnsReady` (`inferstack-alibaba:`): settings
        with no cloud-neutral meaning."""
        if capability is Capability.SECRET_STORE:
            return _kms_problem(field)
        if capability is Capability.PRIVATE_CDN_ORIGIN:
            return _dns_ready_problem()
        return None

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


#### Helpers: settings ####


def kms_settings() -> dict[str, str | None]:
    """The `inferstack-alibaba:` KMS settings by key (read at each call: each program run has its own config)."""
    config = pulumi.Config(CONFIG_NAMESPACE)
    return {key: (config.get(key) or "").strip() or None for key in KMS_ID_PATTERNS}


def _kms_problem(field: str) -> Problem | None:
    settings = kms_settings()
    missing = [f"{CONFIG_NAMESPACE}:{key}" for key, value in settings.items() if not value]
    if missing:
        return Problem(field, f"needs {' and '.join(missing)}: KMS 3.0 keeps secrets in a KMS instance you buy, "
                       "encrypted with a symmetric key of that instance",
                       fix=f"pulumi config set {CONFIG_NAMESPACE}:{KMS_INSTANCE_KEY} kst-... and "
                       f"pulumi config set {CONFIG_NAMESPACE}:{KMS_KEY_KEY} key-... (KMS console), or leave the "
                       "secrets out")
    for key, pattern in KMS_ID_PATTERNS.items():
        value = settings[key]
        if value is not None and not re.fullmatch(pattern, value):
            return Problem(f"{CONFIG_NAMESPACE}:{key}", "is not a KMS id", value=value,
                           fix=f"copy the id from the KMS console ({pattern.split('-')[0]}-...)")
    return None


def assets_dns_ready() -> bool:
    """`inferstack-alibaba:assetsDnsReady`: the assets domain's CNAME points at the CDN (default false)."""
    value = (pulumi.Config(CONFIG_NAMESPACE).get(DNS_READY_KEY) or "false").strip().lower()
    return value == "true"


def _dns_ready_problem() -> Problem | None:
    value = pulumi.Config(CONFIG_NAMESPACE).get(DNS_READY_KEY)
    if value is None or value.strip().lower() in ("true", "false"):
        return None
    return Problem(f"{CONFIG_NAMESPACE}:{DNS_READY_KEY}", "is not true or false", value=value,
                   fix=f"pulumi config set {CONFIG_NAMESPACE}:{DNS_READY_KEY} true, once the assets domain's CNAME "
                   "points at the CDN")


def _kms_instance(field: str) -> tuple[str, str]:
    """The KMS instance and key (checked before anything was created: see `settings_problem`)."""
    problem = _kms_problem(field)
    if problem is not None:
        raise InputError([problem])
    settings = kms_settings()
    return cast(str, settings[KMS_INSTANCE_KEY]), cast(str, settings[KMS_KEY_KEY])


#### Helpers: network and firewall ####


def _zones_offering(parent: pulumi.Resource, instance_type: str, count: int, *,
                    load_balancer: bool = False) -> pulumi.Output[list[str]]:
    """The first `count` zones (by id) where the instance type is on sale and vSwitches can be created; with
    `load_balancer`, also where ALB runs."""
    found = alicloud.get_zones_output(available_instance_type=instance_type, available_resource_creation="VSwitch",
                                      opts=invoke_options(parent))
    offering = found.zones.apply(lambda zones: sorted(zone.id for zone in zones))
    if not load_balancer:
        return offering.apply(lambda zones: first_zones(zones, count, instance_type))
    alb_zones = alicloud.alb.get_zones_output(opts=invoke_options(parent)).zones.apply(
        lambda zones: {zone.zone_id for zone in zones})
    return pulumi.Output.all(offering, alb_zones).apply(lambda found: first_zones(
        [zone for zone in found[0] if zone in found[1]], count, f"{instance_type} (in a zone with ALB)"))


def _nat_egress(parent: pulumi.Resource, name: str, vpc_id: StrOutput, nat_vswitch_id: StrOutput,
                private_vswitch_ids: Sequence[StrOutput], tags: Mapping[str, str]) -> None:
    """Internet egress for the private vSwitches: an enhanced NAT gateway with one EIP, and a SNAT entry each.

    An enhanced NAT gateway adds the VPC's default route (0.0.0.0/0) to itself in the system route table; SNAT
    entries decide which vSwitches it translates, so the public vSwitches (the load balancer's) are not among them.
    """
    opts = child_options(parent)
    nat = alicloud.vpc.NatGateway(
        f"{name}-nat", nat_gateway_name=f"{name}-nat", vpc_id=vpc_id, vswitch_id=nat_vswitch_id,
        nat_type="Enhanced", network_type="internet", payment_type="PayAsYouGo", internet_charge_type="PayByLcu",
        description="inferstack: egress of the private vSwitches", tags=tags, opts=opts)
    address = alicloud.ecs.EipAddress(
        f"{name}-nat-eip", address_name=f"{name}-nat-eip", payment_type="PayAsYouGo",
        internet_charge_type="PayByTraffic", bandwidth=str(PUBLIC_BANDWIDTH_MBPS),
        description="inferstack: the NAT gateway's egress address", tags=tags, opts=opts)
    bound = alicloud.ecs.EipAssociation(f"{name}-nat-eip-association", allocation_id=address.id,
                                        instance_id=nat.id, instance_type="Nat", opts=opts)
    for index, vswitch_id in enumerate(private_vswitch_ids):
        # A SNAT entry needs the EIP bound to the gateway first.
        alicloud.vpc.SnatEntry(f"{name}-snat-{index}", snat_entry_name=f"{name}-snat-{index}",
                               snat_table_id=nat.snat_table_ids, snat_ip=address.ip_address,
                               source_vswitch_id=vswitch_id, opts=child_options(parent, depends_on=[bound]))


def _only_network_cidr(network_id: str, cidrs: Sequence[str]) -> str:
    if len(cidrs) != 1:
        raise input_error("network_id", "is not a VPC in this region", value=network_id,
                          fix="give the id of an existing VPC (vpc-...) in the provider's region")
    return cidrs[0]


def _load_balancer_firewall(parent: pulumi.Resource, name: str, request: FirewallRequest) -> StrOutput:
    """The load balancer's security group: 443 and 80 from the API's sources, dropped from everyone else.

    "By default, whether or not the ALB instance is associated with a security group, its listener ports accept all
    inbound requests. Adding a security group with only Allow rules does not change this behavior. To restrict
    access to specific IP addresses, add at least one Deny rule" (ALB: use security groups as whitelists).
    """
    opts = child_options(parent)
    group = alicloud.ecs.SecurityGroup(
        f"{name}-lb-sg", security_group_name=f"{name}-lb-sg", vpc_id=request.network_id,
        security_group_type="normal", inner_access_policy="Drop",
        description="inferstack load balancer: HTTPS and HTTP from the allowed networks", tags=request.tags,
        opts=opts)
    for listener, port in LISTENER_PORTS.items():
        for label, cidr in request.api_sources():
            _rule(f"{name}-lb-{listener}-{label}", group, "ingress", "tcp", port, cidr, f"{listener} callers", opts)
        alicloud.ecs.SecurityGroupRule(
            f"{name}-lb-{listener}-drop-rest", security_group_id=group.id, type="ingress", ip_protocol="tcp",
            port_range=f"{port}/{port}", cidr_ip="0.0.0.0/0", policy="drop", priority=DROP_PRIORITY,
            nic_type="intranet", description=f"{listener} from anyone else", opts=opts)
    return group.id


def _rule(resource_name: str, group: alicloud.ecs.SecurityGroup, direction: str, protocol: str, port: int,
          cidr: pulumi.Input[str], purpose: str, opts: pulumi.ResourceOptions) -> None:
    """One accepted port; intranet is the only NIC type a VPC security group has."""
    ipv6 = isinstance(cidr, str) and ":" in cidr
    alicloud.ecs.SecurityGroupRule(
        resource_name, security_group_id=group.id, type=direction, ip_protocol=protocol, port_range=f"{port}/{port}",
        cidr_ip=None if ipv6 else cidr, ipv6_cidr_ip=cidr if ipv6 else None, policy="accept",
        priority=ACCEPT_PRIORITY, nic_type="intranet", description=purpose, opts=opts)


#### Helpers: buckets and CDN ####


def _private_bucket(parent: pulumi.Resource, name: str, purpose: str, force_destroy: bool, tags: Mapping[str, str],
                    *, logs_bucket: pulumi.Input[str] | None = None,
                    expire_after_days: int | None = None) -> alicloud.oss.Bucket:
    """A bucket nobody outside the account can read: ACL private, public access blocked, encrypted, versioned,
    TLS only.

    Encryption is OSS-managed (AES256): CDN origin fetch and log delivery cannot decrypt KMS-encrypted objects
    without extra grants to the account-wide CDN role.
    """
    resource = f"{name}-{purpose}"
    opts = child_options(parent)
    rules: list[alicloud.oss.BucketLifecycleRuleArgsDict] = [
        {"id": "abort-incomplete-uploads", "enabled": True, "prefix": "",
         "abort_multipart_uploads": [{"days": INCOMPLETE_UPLOAD_DAYS}]}]
    if expire_after_days is not None:
        rules.append({"id": "expire-objects", "enabled": True, "prefix": "",
                      "expirations": [{"days": expire_after_days}]})
    bucket = alicloud.oss.Bucket(resource, bucket=_bucket_name(parent, name, purpose), storage_class="Standard",
                                 force_destroy=force_destroy, lifecycle_rules=rules, tags=tags, opts=opts)
    alicloud.oss.BucketAcl(f"{resource}-acl", bucket=bucket.id, acl="private", opts=opts)
    alicloud.oss.BucketPublicAccessBlock(f"{resource}-public-access", bucket=bucket.id, block_public_access=True,
                                         opts=opts)
    alicloud.oss.BucketServerSideEncryption(f"{resource}-encryption", bucket=bucket.id, sse_algorithm="AES256",
                                            opts=opts)
    alicloud.oss.BucketVersioning(f"{resource}-versioning", bucket=bucket.id, status="Enabled", opts=opts)
    deny_plain_http = {"Effect": "Deny", "Principal": ["*"], "Action": ["oss:*"],
                       "Resource": [pulumi.Output.concat("acs:oss:*:*:", bucket.id),
                                    pulumi.Output.concat("acs:oss:*:*:", bucket.id, "/*")],
                       "Condition": {"Bool": {"acs:SecureTransport": ["false"]}}}
    alicloud.oss.BucketPolicy(f"{resource}-policy", bucket=bucket.id, opts=opts, policy=pulumi.Output.json_dumps(
        {"Version": "1", "Statement": [deny_plain_http]}))
    if logs_bucket is not None:
        alicloud.oss.BucketLogging(f"{resource}-logging", bucket=bucket.id, target_bucket=logs_bucket,
                                   target_prefix=f"{purpose}/", opts=opts)
    return bucket


def _bucket_name(parent: pulumi.Resource, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across accounts and regions (OSS names are global)."""
    account = alicloud.get_caller_identity_output(opts=invoke_options(parent)).account_id
    return pulumi.Output.all(account, _current_region(parent)).apply(
        lambda where: unique_name([pulumi.get_project(), pulumi.get_stack(), name, purpose], unique_by=where))


def _cdn_domain(parent: pulumi.Resource, name: str, domain: str, bucket: pulumi.Input[str],
                tags: Mapping[str, str]) -> StrOutput:
    """A CDN domain whose origin is the private bucket, fetched over HTTPS with signed requests; HTTPS-only with
    Alibaba's free certificate once the domain's CNAME points at the CDN (FREE_CERTIFICATE, `assetsDnsReady`)."""
    opts = child_options(parent)
    region = _current_region(parent)
    dns_ready = assets_dns_ready()
    cdn = alicloud.cdn.DomainNew(
        f"{name}-cdn", domain_name=domain, cdn_type="web",
        scope=region.apply(lambda r: "domestic" if _MAINLAND_REGION.match(r) else "overseas"),
        sources=[{"type": "oss", "content": pulumi.Output.concat(bucket, ".oss-", region, ".aliyuncs.com"),
                  "port": 443, "priority": 20, "weight": 10}],
        certificate_config=FREE_CERTIFICATE if dns_ready else None,
        # Offline until then: it serves nothing, so never plain HTTP (DomainNew `status`: online | offline).
        status="online" if dns_ready else "offline", tags=tags, opts=opts)
    # The origin authorisation is a prerequisite: without the role the CDN's origin requests would be refused.
    authorised_domain = pulumi.Output.all(cdn.domain_name, _cdn_origin_role(parent, name)).apply(lambda v: v[0])
    functions = {"private-origin": ("l2_oss_key", {"private_oss_auth": "on"})}
    if dns_ready:  # a redirect to HTTPS before the certificate exists would send every viewer to a failing TLS
        functions["https-only"] = ("https_force", {"enable": "on", "https_rewrite": CDN_TLS_REDIRECT})
    for label, (function, arguments) in functions.items():
        alicloud.cdn.DomainConfig(
            f"{name}-cdn-{label}", domain_name=authorised_domain, function_name=function,
            function_args=[{"arg_name": key, "arg_value": value} for key, value in arguments.items()], opts=opts)
    if not dns_ready:
        # DNS stays yours: say where the domain must point, and what the next `pulumi up` adds.
        cdn.cname.apply(lambda target: pulumi.log.warn(
            f"{name}: {domain} is offline (it serves nothing until it has HTTPS). Point its CNAME at {target}; once "
            f"that resolves, run `pulumi config set {CONFIG_NAMESPACE}:{DNS_READY_KEY} true` and `pulumi up` to add "
            "Alibaba's free certificate, bring it online and redirect HTTP to HTTPS (docs/deploy-alibaba.md)",
            resource=parent))
    return pulumi.Output.concat("https://", cdn.domain_name)


def _cdn_origin_role(parent: pulumi.Resource, name: str) -> StrOutput:
    found = alicloud.ram.get_roles_output(name_regex=f"^{CDN_ORIGIN_ROLE}$", opts=invoke_options(parent))

    def present(names: Sequence[str]) -> str:
        if CDN_ORIGIN_ROLE not in names:
            raise input_error(f"{name}.domain", f"needs the account's {CDN_ORIGIN_ROLE}, "
                              "which CDN uses to read private buckets",
                              fix="authorise it once: CDN console, domain, origin settings, private OSS bucket "
                              "origin, 'authorize' (docs/deploy-alibaba.md)")
        return CDN_ORIGIN_ROLE

    return found.names.apply(present)


#### Helpers: monitoring ####


def _fleet_tag(parent: pulumi.Resource, name: str) -> StrOutput:
    """The FLEET_TAG value of one scaling group's servers: unique to the project, stack, region and group."""
    return _account_name(parent, name, "fleet", max_length=128)


def _log_label(path: str) -> str:
    """A Logtail configuration's label for a log file: its name without the extension (`boot`, `gateway-access`)."""
    return path.rsplit("/", 1)[-1].removesuffix(".log")


def _file_collection(path: str) -> dict[str, Any]:
    """Logtail's input_detail for one log file, each line a log (the whole line in field `content`)."""
    directory, _, file_name = path.rpartition("/")
    return {"logType": LOGTAIL_FILE_LOG_TYPE, "logPath": directory, "filePattern": file_name, "maxDepth": 0,
            "topicFormat": "none", "fileEncoding": "utf8", "logBeginRegex": ".*", "regex": "(.*)",
            "key": ["content"], "discardUnmatch": False, "localStorage": True}


def _journal_collection(units: Sequence[str]) -> dict[str, Any]:
    """Logtail's input_detail for the journal of `units` (the runtime's processes, the gateway, the boot)."""
    return {"plugin": {"inputs": [{"type": LOGTAIL_JOURNAL_PLUGIN, "detail": {
        "JournalPaths": [""], "Units": [f"{unit}.service" for unit in units], "SeekPosition": "tail",
        "ParsePriority": True}}]}}


def _agent_alarms(parent: pulumi.Resource, name: str, plan: DeploymentPlan, fleet_tag: pulumi.Input[str],
                  contacts: pulumi.Input[str], tags: Mapping[str, str]) -> list[StrOutput]:
    """The GPU-memory and disk alarms of one scaling group: an alert template of `agent_alarm_rules`, applied by
    an application group of the servers carrying the group's tag, which notifies the contact group. CloudMonitor's
    alert templates take no rule for missing data: a server whose agent sends nothing does not alarm (docs)."""
    opts = child_options(parent)
    rules = agent_alarm_rules(plan)
    template = alicloud.cms.MetricRuleTemplate(
        f"{name}-agent-alarms", metric_rule_template_name=_account_name(parent, name, "agent-alarms"),
        description=f"inferstack {name}: the servers' GPU memory and disk",
        alert_templates=[{
            "category": AGENT_CATEGORY, "namespace": AGENT_NAMESPACE, "metric_name": AGENT_ALARM_METRICS[rule.kind],
            "rule_name": f"inferstack {name}: {rule.kind.value}",
            "escalations": {"critical": {"comparison_operator": "GreaterThanThreshold", "statistics": "Average",
                                         "threshold": _alarm_threshold(plan, rule), "times": str(rule.minutes)}}}
            for rule in rules], opts=opts)
    group = alicloud.cms.DynamicTagGroup(
        f"{name}-servers-monitored", tag_key=FLEET_TAG, contact_group_lists=[contacts],
        match_expresses=[{"tag_value": fleet_tag, "tag_value_match_function": "equals"}],
        template_id_lists=[template.id], opts=opts)
    return [template.id, group.id]


#### Helpers: identity ####


def _alarm_threshold(plan: DeploymentPlan, rule: AlarmRule) -> str:
    """A rule's threshold as CloudMonitor takes it: text, in its metric's unit."""
    value = errors_per_s(plan, rule) if rule.kind is AlarmKind.ERROR_RATE else rule.threshold
    return f"{value:g}"


def _account_name(parent: pulumi.Resource, name: str, purpose: str, *, max_length: int = 64) -> StrOutput:
    """A name unique in the account (RAM roles and policies) or the region (ESS scaling groups, launch templates):
    readable, with a hash of project, stack and region."""
    return _current_region(parent).apply(lambda region: unique_name(
        [pulumi.get_project(), pulumi.get_stack(), name, purpose], unique_by=[region], max_length=max_length))


#### Helpers: compute ####


@dataclass(frozen=True)
class _ServerImage:
    image_id: StrOutput
    size_gib: pulumi.Output[int]
    """Size of the image: the system disk may not be smaller."""


def _server_image(parent: pulumi.Resource, plan: DeploymentPlan) -> _ServerImage:
    """The newest Ubuntu 22.04 system image that runs on the plan's instance type, looked up at deploy time."""
    found = alicloud.ecs.get_images_output(owners=IMAGE_OWNER, name_regex=IMAGE_NAME_REGEX, most_recent=True,
                                           instance_type=plan.instance_type, os_type="linux",
                                           opts=invoke_options(parent))

    def newest(images: Sequence[Any]) -> Any:
        if not images:
            raise input_error("plan.instance_type", "has no Ubuntu 22.04 system image in this region",
                              value=plan.instance_type, fix="plan for another region or instance type")
        return images[0]

    image = found.images.apply(newest)
    return _ServerImage(image_id=image.apply(lambda i: str(i.id)), size_gib=image.apply(lambda i: int(i.size or 0)))


def _system_disk_gib(image: _ServerImage, plan: DeploymentPlan) -> pulumi.Output[int]:
    """The plan's disk, or the image's size where that is larger (a system disk may not be smaller)."""
    return image.size_gib.apply(lambda gib: max(gib, plan.disk_gib))


def _user_data(parent: pulumi.Resource, plan: DeploymentPlan, user_data: StrOutput, *, provider: str) -> StrOutput:
    """The cloud-config as ECS takes it, a single server's or a launch template's: Base64 of gzip, checked against
    the limit, once the provider's region is known to be the plan's."""
    return checked_user_data(plan, user_data, _current_region(parent), provider=provider,
                             encode=functools.partial(compressed_user_data, limit_bytes=USER_DATA_LIMIT_BYTES,
                                                      service="ECS"))


def _current_region(parent: pulumi.Resource) -> StrOutput:
    found = alicloud.get_regions_output(current=True, opts=invoke_options(parent))
    return found.regions.apply(lambda regions: str(regions[0].id))


#### Helpers: fleet ####


def _api_certificate(certificate: str | None) -> str:
    """The endpoint's CAS certificate: required and checked with the component's arguments, before anything is
    created (api_endpoint_problems)."""
    assert certificate is not None, "Alibaba issues no ALB certificate: api_certificate is required"
    return certificate


def _server_group(parent: pulumi.Resource, name: str, request: FleetRequest) -> alicloud.alb.ServerGroup:
    """The fleet's backends (ESS adds and removes them), health-checked on the plan's readiness path and port."""
    plan = request.plan
    return alicloud.alb.ServerGroup(
        f"{name}-servers", server_group_name=f"{name}-servers", vpc_id=request.network_id,
        server_group_type="Instance", protocol="HTTP",
        # Least connections: a streamed answer holds its connection for the whole generation.
        scheduler="Wlc",
        health_check_config={
            "health_check_enabled": True, "health_check_protocol": "HTTP", "health_check_method": "GET",
            "health_check_path": plan.serving.health_path, "health_check_connect_port": plan.serving.port,
            "health_check_codes": ["http_2xx"], "health_check_http_version": "HTTP1.1",
            "health_check_interval": HEALTH_CHECK_INTERVAL_S, "health_check_timeout": HEALTH_CHECK_TIMEOUT_S,
            "healthy_threshold": HEALTHY_THRESHOLD, "unhealthy_threshold": UNHEALTHY_THRESHOLD},
        connection_drain_config={"connection_drain_enabled": True,
                                 "connection_drain_timeout": min(plan.request_timeout_s, MAX_CONNECTION_DRAIN_S)},
        tags=request.tags, opts=child_options(parent))


def _load_balancer_logs(parent: pulumi.Resource, name: str,
                        request: FleetRequest) -> alicloud.alb.LoadBalancerAccessLogConfigArgsDict:
    """An SLS project and logstore of their own for the load balancer's access logs (model files, uploads and the
    buckets' access logs live in OSS), kept ACCESS_LOG_DAYS and encrypted at rest (encrypt_conf, SLS's default AES
    key). A project without a `policy` is private: only RAM identities of the account read it (SLS, "Project
    policy"). ALB ships its access log to the logstore (alb.LoadBalancer access_log_config; ALB, "Access logs": the
    service-linked role AliyunServiceRoleForAlbLogDelivery is created on first use)."""
    opts = child_options(parent)
    project = alicloud.log.Project(
        f"{name}-lb-logs", project_name=_bucket_name(parent, name, "lb-logs"),
        description=f"inferstack {name}: the load balancer's access logs", tags=request.tags, opts=opts)
    store = alicloud.log.Store(
        f"{name}-lb-logs-store", project_name=project.project_name, logstore_name=LOAD_BALANCER_LOGSTORE,
        retention_period=ACCESS_LOG_DAYS, encrypt_conf={"enable": True, "encrypt_type": "default"}, opts=opts)
    return {"log_project": project.project_name, "log_store": store.logstore_name}


def _load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                   logs: alicloud.alb.LoadBalancerAccessLogConfigArgsDict) -> alicloud.alb.LoadBalancer:
    """Internet-facing when an allowed network is public, else internal; one vSwitch per zone, two zones at least;
    its access log to `logs` (`_load_balancer_logs`)."""
    ids = pulumi.Output.all(*request.load_balancer_subnet_ids)
    found = alicloud.vpc.get_switches_output(ids=ids, opts=invoke_options(parent))
    zones = found.vswitches.apply(lambda vswitches: {str(v.id): str(v.zone_id) for v in vswitches})
    zone_mappings = pulumi.Output.all(ids, zones).apply(lambda facts: _zone_mappings(name, *facts))
    load_balancer = alicloud.alb.LoadBalancer(
        f"{name}-alb", load_balancer_name=f"{name}-alb", vpc_id=request.network_id,
        address_type="Internet" if request.internet_facing else "Intranet", address_ip_version="IPv4",
        address_allocated_mode="Dynamic", load_balancer_edition="Standard",
        load_balancer_billing_config={"pay_type": "PayAsYouGo"}, zone_mappings=zone_mappings,
        deletion_protection_enabled=request.protected, tags=request.tags, access_log_config=logs,
        opts=server_options(parent, request.protected))
    if request.load_balancer_firewall_id is not None:
        alicloud.alb.LoadBalancerSecurityGroupAttachment(
            f"{name}-alb-sg", load_balancer_id=load_balancer.id, security_group_id=request.load_balancer_firewall_id,
            opts=child_options(parent))
    return load_balancer


def _zone_mappings(name: str, ids: Sequence[str],
                   zones: Mapping[str, str]) -> list[alicloud.alb.LoadBalancerZoneMappingArgsDict]:
    """ALB's zone mappings, in the given order: each vSwitch with its zone (`zones`, by vSwitch id), one vSwitch per
    zone."""
    unknown = [vswitch_id for vswitch_id in ids if vswitch_id not in zones]
    if unknown:
        raise input_error(f"{name}.load_balancer_subnet_ids", "names vSwitches this region does not have",
                          value=unknown, fix="give vSwitch ids (vsw-...) of the network, in the provider's region")
    if len({zones[vswitch_id] for vswitch_id in ids}) != len(ids) or len(ids) < ALB_MIN_ZONES:
        raise input_error(f"{name}.load_balancer_subnet_ids", f"ALB takes one vSwitch in each of "
                          f"{ALB_MIN_ZONES} zones or more", value={vswitch_id: zones[vswitch_id] for vswitch_id in ids},
                          fix="give one vSwitch per zone, in two zones at least (load_balancer_subnet_ids, or "
                          "subnet_ids for an internal load balancer)")
    return [{"vswitch_id": vswitch_id, "zone_id": zones[vswitch_id]} for vswitch_id in ids]


def _listeners(parent: pulumi.Resource, name: str, request: FleetRequest, load_balancer: alicloud.alb.LoadBalancer,
               servers: alicloud.alb.ServerGroup, certificate: str) -> alicloud.alb.Listener:
    """HTTPS on 443 to the servers; HTTP on 80 only redirects; both limited to the allowed networks by an ACL."""
    opts = child_options(parent)
    timeout_s = request.plan.request_timeout_s
    https = alicloud.alb.Listener(
        f"{name}-https", load_balancer_id=load_balancer.id, listener_protocol="HTTPS",
        listener_port=LISTENER_PORTS["https"], listener_description=f"{name}: the inference API",
        certificates={"certificate_id": certificate}, security_policy_id=ALB_TLS_POLICY,
        # Streamed answers last a whole generation: the plan's request timeout for both.
        idle_timeout=timeout_s, request_timeout=timeout_s,
        # Compression buffers a response, and each streamed token must reach the caller as it comes.
        gzip_enabled=False,
        default_actions=[{"type": "ForwardGroup",
                          "forward_group_config": {"server_group_tuples": [{"server_group_id": servers.id}]}}],
        tags=request.tags, opts=opts)
    # A listener forwards to a server group by default (its only default action in the provider); the HTTP
    # listener's has no servers, so a request its redirect rule did not catch gets no answer from the servers. Its
    # health check is on like every server group's (the guardrails require it; with no servers it checks nothing).
    nowhere = alicloud.alb.ServerGroup(
        f"{name}-http-nowhere", server_group_name=f"{name}-http-nowhere", vpc_id=request.network_id,
        server_group_type="Instance", protocol="HTTP",
        health_check_config={"health_check_enabled": True, "health_check_protocol": "HTTP",
                             "health_check_path": request.plan.serving.health_path},
        tags=request.tags, opts=opts)
    http = alicloud.alb.Listener(
        f"{name}-http", load_balancer_id=load_balancer.id, listener_protocol="HTTP",
        listener_port=LISTENER_PORTS["http"], listener_description=f"{name}: redirects to HTTPS",
        default_actions=[{"type": "ForwardGroup",
                          "forward_group_config": {"server_group_tuples": [{"server_group_id": nowhere.id}]}}],
        tags=request.tags, opts=opts)
    alicloud.alb.Rule(
        f"{name}-http-to-https", listener_id=http.id, rule_name=f"{name}-http-to-https", priority=1,
        rule_conditions=[{"type": "Path", "path_config": {"values": ["/*"]}}],
        rule_actions=[{"order": 1, "type": "Redirect", "redirect_config": {
            "protocol": "HTTPS", "port": str(LISTENER_PORTS["https"]), "http_code": ALB_HTTPS_REDIRECT_CODE}}],
        opts=opts)
    _callers_acl(parent, name, request, {"https": https, "http": http})
    return https


def _callers_acl(parent: pulumi.Resource, name: str, request: FleetRequest,
                 listeners: Mapping[str, alicloud.alb.Listener]) -> None:
    """A whitelist of the allowed networks (or the VPC's range) on each listener, unless the whole internet may call.

    "If whitelist access is enabled but no IP addresses are added to the access policy group, the listener forwards
    all requests" (alb.ListenerAclAttachment): the entries exist before a listener takes the list.
    """
    if any(ipaddress.ip_network(cidr).prefixlen == 0 for cidr in request.allowed_cidrs):
        return
    opts = child_options(parent)
    sources: list[pulumi.Input[str]] = list(request.allowed_cidrs) or [request.network_cidr]
    acl = alicloud.alb.Acl(f"{name}-callers", acl_name=f"{name}-callers", tags=request.tags, opts=opts)
    entries = alicloud.alb.AclEntryAttachment(
        f"{name}-callers-entries", acl_id=acl.id,
        entries=[{"entry": cidr, "description": "allowed callers"} for cidr in sources], opts=opts)
    for label, listener in listeners.items():
        alicloud.alb.ListenerAclAttachment(f"{name}-{label}-callers", listener_id=listener.id, acl_id=acl.id,
                                           acl_type="White", opts=child_options(parent, depends_on=[entries]))


def _scaling_group(parent: pulumi.Resource, name: str, request: FleetRequest, servers: alicloud.alb.ServerGroup, *,
                   provider: str) -> alicloud.ess.ScalingGroup:
    """The plan's servers as an ESS group from a launch template, each added to the ALB server group once it says it
    is ready (the lifecycle hook), scaled on requests per server.

    A group made from a launch template is enabled as it is created ("Creating scaling group from launch template
    enable group automatically", ess.ScalingGroup launch_template_id) and starts its minimum at once, before its
    lifecycle hook can exist (the hook takes the group's id; ess.ScalingGroup has no hook argument in pulumi_alicloud
    4.0.0): such a server would go straight into the load balancer, be judged by its health check while the driver
    installs, and be released. So a group is created empty; once its hook exists (looked up by name at the next
    `pulumi up`), it takes the plan's floor, and every server it starts waits in the hook."""
    plan, fleet = request.plan, request.plan.fleet
    assert fleet is not None
    template = _launch_template(parent, name, request, provider=provider)
    group_name, hook_name = _account_name(parent, name, "servers"), f"{name}-grace"
    hooked = _group_has_hook(parent, group_name, hook_name)

    def first_deploy(found: bool) -> None:
        if not found:
            pulumi.log.warn(f"{name}: a new scaling group starts empty, so that no server starts before its lifecycle "
                            f"hook exists: run `pulumi up` again to start its {fleet.min_replicas} servers "
                            "(docs/deploy-alibaba.md)", resource=parent)

    hooked.apply(first_deploy)
    group = alicloud.ess.ScalingGroup(
        f"{name}-group", scaling_group_name=group_name,
        min_size=hooked.apply(lambda found: fleet.min_replicas if found else 0), max_size=fleet.max_replicas,
        vswitch_ids=list(request.server_subnet_ids),
        multi_az_policy="BALANCE", launch_template_id=template.id, launch_template_version="Latest",
        # ECS: a stopped or released server; LOAD_BALANCER: one that fails ALB's health check. Either is
        # removed and released (scaling_policy), and a new one created to keep min_size.
        health_check_types=["ECS", "LOAD_BALANCER"], scaling_policy="release",
        default_cooldown=fleet.scale_out_cooldown_s,
        removal_policies=["OldestScalingConfiguration", "OldestInstance"],
        spot_instance_remedy=True if plan.spot else None,
        group_deletion_protection=request.protected, tags=request.tags,
        opts=server_options(parent, request.protected))
    # A new server stays in Pending:Wait, out of the load balancer and so never judged by its health check, until it
    # says it is ready (the boot's last step calls CompleteLifecycleAction with CONTINUE: boot.sh); then
    # ESS adds it to the ALB server group. One not ready within the plan's grace is released (ABANDON) and replaced.
    grace = alicloud.ess.LifecycleHook(
        f"{name}-grace", scaling_group_id=group.id, name=hook_name, lifecycle_transition="SCALE_OUT",
        heartbeat_timeout=fleet.health_check_grace_s, default_result="ABANDON", opts=child_options(parent))
    _lifecycle_grant(parent, name, request)
    attachment = alicloud.ess.AlbServerGroupAttachment(
        f"{name}-group-alb", scaling_group_id=group.id, alb_server_group_id=servers.id,
        port=plan.serving.port, weight=100, force_attach=True,
        opts=child_options(parent, depends_on=[grace]))
    alicloud.ess.ScalingRule(
        f"{name}-requests-per-server", scaling_group_id=group.id, scaling_rule_name=f"{name}-requests-per-server",
        scaling_rule_type="TargetTrackingScalingRule", metric_name=ALB_QPS_PER_SERVER_METRIC,
        alarm_dimension={"dimension_key": ALB_SERVER_GROUP_DIMENSION, "dimension_value": servers.id},
        # Both count requests per second: the plan's target as is, to ESS's precision.
        target_value=_qps_target(fleet.target_requests_per_s),
        # A new server adds capacity once the lifecycle hook lets it into the load balancer: at the grace.
        estimated_instance_warmup=fleet.health_check_grace_s,
        scale_in_evaluation_count=math.ceil(fleet.scale_in_cooldown_s / METRIC_PERIOD_S),
        disable_scale_in=False, opts=child_options(parent, depends_on=[attachment]))
    return group


def _group_has_hook(parent: pulumi.Resource, group_name: StrOutput, hook_name: str) -> pulumi.Output[bool]:
    """Whether the scaling group of that name exists already with its lifecycle hook (a later `pulumi up`)."""
    groups = alicloud.ess.get_scaling_groups_output(
        name_regex=group_name.apply(lambda found: f"^{re.escape(found)}$"), opts=invoke_options(parent))

    def hook_of(ids: Sequence[str] | None) -> pulumi.Output[bool]:
        if not ids:
            return pulumi.Output.from_input(False)
        hooks = alicloud.ess.get_lifecycle_hooks_output(scaling_group_id=ids[0], name_regex=f"^{re.escape(hook_name)}$",
                                                        opts=invoke_options(parent))
        return hooks.ids.apply(bool)

    return groups.ids.apply(hook_of)


def _lifecycle_grant(parent: pulumi.Resource, name: str, request: FleetRequest) -> None:
    """What a server's boot needs to say it is ready (files/cloud_access.py `complete_lifecycle_action`): find its own
    pending lifecycle action (DescribeScalingInstances, DescribeLifecycleActions) and complete it. ESS grants these
    three on "All Resources" only: no scaling-group resource type, no condition key (Auto Scaling API 2022-02-22,
    CompleteLifecycleAction, "Authorization information", read 2026-12-07); a statement naming the group's ARN would
    not take effect, and every new server would be released at the hook's timeout. A server can complete an action
    only with its token, which DescribeLifecycleActions gives for pending actions; the runtime never holds the role
    (the metadata firewall, boot phase metadata_firewall)."""
    opts = child_options(parent)
    policy = alicloud.ram.Policy(
        f"{name}-lifecycle", policy_name=_account_name(parent, name, "lifecycle"),
        policy_document=json.dumps({"Version": "1", "Statement": [
            {"Effect": "Allow", "Action": list(LIFECYCLE_ACTIONS), "Resource": "*"}]}),
        description=f"inferstack lifecycle for {name}: a server completes its own scale-out", tags=request.tags,
        opts=opts)
    alicloud.ram.RolePolicyAttachment(f"{name}-lifecycle-attachment", role_name=request.attachment,
                                      policy_name=policy.policy_name, policy_type="Custom", opts=opts)


def _weighted_rule(parent: pulumi.Resource, name: str, https: alicloud.alb.Listener, servers: alicloud.alb.ServerGroup,
                   canary_servers: alicloud.alb.ServerGroup, canary: CanaryRequest) -> None:
    """Every path of the HTTPS listener to both server groups by weight. A listener's default action takes no weights
    (alb ListenerDefaultActionForwardGroupConfigServerGroupTupleArgs has a server group id only); a forwarding rule's
    does (RuleRuleActionForwardGroupConfigServerGroupTupleArgs.weight: 0 to 100; 0 "from version 1.264.0" of the
    Terraform provider, which pulumi-alicloud 4.0.0 is past: its docs name resources "Available since v1.295.0")."""
    alicloud.alb.Rule(
        f"{name}-canary-split", listener_id=https.id, rule_name=f"{name}-canary-split", priority=1,
        rule_conditions=[{"type": "Path", "path_config": {"values": ["/*"]}}],
        rule_actions=[{"order": 1, "type": "ForwardGroup", "forward_group_config": {"server_group_tuples": [
            {"server_group_id": servers.id, "weight": canary.main_weight},
            {"server_group_id": canary_servers.id, "weight": canary.weight}]}}],
        opts=child_options(parent))


def _launch_template(parent: pulumi.Resource, name: str, request: FleetRequest, *,
                     provider: str) -> alicloud.ecs.EcsLaunchTemplate:
    """The fleet's servers, hardened as a single server is: metadata tokens (and hop limit 1), an encrypted ESSD,
    the RAM role at creation, no key pair, no public address, the same user data; spot where the plan says.

    A launch template, not an ess.ScalingConfiguration: the provider's ScalingConfiguration has http_endpoint but
    no http_tokens (pulumi_alicloud 4.0.0 ess/scaling_configuration.py), so it cannot demand metadata tokens.
    """
    plan = request.plan
    image = _server_image(parent, plan)
    return alicloud.ecs.EcsLaunchTemplate(
        f"{name}-template", launch_template_name=_account_name(parent, name, "servers", max_length=128),
        description="inferstack inference server of an ESS scaling group", image_id=image.image_id,
        instance_type=plan.instance_type, instance_name=f"{name}-server", instance_charge_type="PostPaid",
        security_group_ids=list(request.firewall_ids), ram_role_name=request.attachment,
        http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=METADATA_HOP_LIMIT,
        system_disk={"category": SYSTEM_DISK_CATEGORY, "size": _system_disk_gib(image, plan), "encrypted": True,
                     "delete_with_instance": True},
        # No internet_max_bandwidth_out: the servers get no public address; they reach out through the NAT gateway.
        spot_strategy="SpotAsPriceGo" if plan.spot else None,
        user_data=_user_data(parent, plan, request.user_data, provider=provider),
        # The servers carry their group's tag: its application group (create_alarms) watches whichever run.
        tags={**request.tags, FLEET_TAG: _fleet_tag(parent, name)}, template_tags=request.tags,
        # A new image or user data is a new template version, used by the servers the group creates from then on;
        # running servers stay as they are (rolling them is ESS instance refresh). A newer image alone changes
        # nothing, as on a single server.
        opts=server_options(parent, request.protected, ignore_changes=["imageId"]))


def _qps_target(requests_per_s: float) -> float:
    """The plan's requests per second per server as ESS keeps it (three decimals), never rounded to nothing."""
    smallest: float = 10.0**-QPS_DECIMALS
    return max(round(requests_per_s, QPS_DECIMALS), smallest)


#### Helpers: offline preview ####

PREVIEW_ACCOUNT = "1234567890123456"  # a placeholder in the shape of an Alibaba account id (16 digits)
PREVIEW_REGION = "ap-southeast-1"  # the region the catalog prices Alibaba in
PREVIEW_IMAGE_ID = "ubuntu_22_04_x64_20G_alibase_preview.vhd"  # the system images' naming, with no real date
PREVIEW_IMAGE_GIB = 20


def _resource_id(c: PreviewContext, prefix: str) -> str:
    return f"{prefix}-{c.digest[:20]}"


_PREVIEW_OUTPUTS: dict[str, PreviewResource] = {
    "alicloud:kvstore/instance:Instance": lambda c: (f"r-{c.digest[:18]}", {
        "connectionDomain": f"r-{c.digest[:18]}.redis.rds.aliyuncs.com", "privateIp": c.private_ip}),
    "alicloud:vpc/network:Network": lambda c: (_resource_id(c, "vpc"), {}),
    "alicloud:vpc/switch:Switch": lambda c: (_resource_id(c, "vsw"), {}),
    "alicloud:ecs/securityGroup:SecurityGroup": lambda c: (_resource_id(c, "sg"), {}),
    "alicloud:oss/bucket:Bucket": lambda c: (c.inputs["bucket"], {
        "extranetEndpoint": f"oss-{c.region}.aliyuncs.com", "intranetEndpoint": f"oss-{c.region}-internal.aliyuncs.com",
        "location": f"oss-{c.region}"}),
    "alicloud:kms/secret:Secret": lambda c: (c.inputs["secretName"], {
        "arn": f"acs:kms:{c.region}:{c.account}:secret/{c.inputs['secretName']}"}),
    "alicloud:ram/role:Role": lambda c: (c.inputs["roleName"], {
        "arn": f"acs:ram::{c.account}:role/{c.inputs['roleName']}", "roleId": c.digest[:19]}),
    "alicloud:ram/policy:Policy": lambda c: (c.inputs["policyName"], {}),
    # The CNAME target Alibaba assigns: the domain under one of its CDN zones (the zone here is illustrative).
    "alicloud:cdn/domainNew:DomainNew": lambda c: (c.inputs["domainName"], {
        "cname": f"{c.inputs['domainName']}.w.kunlunsl.com", "status": "online"}),
    "alicloud:ecs/instance:Instance": lambda c: (_resource_id(c, "i"), {"publicIp": c.public_ip,
                                                                       "privateIp": c.private_ip}),
    # A fleet: NAT egress, the load balancer, the scaling group and its launch template (ids in each API's form).
    "alicloud:vpc/natGateway:NatGateway": lambda c: (_resource_id(c, "ngw"), {
        "snatTableIds": _resource_id(c, "stb"), "forwardTableIds": _resource_id(c, "ftb")}),
    "alicloud:ecs/eipAddress:EipAddress": lambda c: (_resource_id(c, "eip"), {"ipAddress": c.public_ip}),
    "alicloud:ecs/eipAssociation:EipAssociation": lambda c: (
        f"{c.inputs['allocationId']}:{c.inputs['instanceId']}", {}),
    "alicloud:vpc/snatEntry:SnatEntry": lambda c: (f"{c.inputs['snatTableId']}:{_resource_id(c, 'snat')}", {}),
    "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate": lambda c: (_resource_id(c, "lt"), {
        "latestVersionNumber": 1, "defaultVersionNumber": 1}),
    "alicloud:ess/scalingGroup:ScalingGroup": lambda c: (_resource_id(c, "asg"), {}),
    "alicloud:ess/lifecycleHook:LifecycleHook": lambda c: (_resource_id(c, "ash"), {}),
    "alicloud:ess/albServerGroupAttachment:AlbServerGroupAttachment": lambda c: (
        f"{c.inputs['scalingGroupId']}:{c.inputs['albServerGroupId']}:{c.inputs['port']}", {}),
    "alicloud:ess/scalingRule:ScalingRule": lambda c: (_resource_id(c, "asr"), {
        "ari": f"ari:acs:ess:{c.region}:{c.account}:scalingrule/{_resource_id(c, 'asr')}"}),
    # The DNS name ALB gives an instance: <id>.<region>.alb.aliyuncs.com.
    "alicloud:alb/loadBalancer:LoadBalancer": lambda c: (_resource_id(c, "alb"), {
        "dnsName": f"{_resource_id(c, 'alb')}.{c.region}.alb.aliyuncs.com", "status": "Active"}),
    "alicloud:alb/serverGroup:ServerGroup": lambda c: (_resource_id(c, "sgp"), {}),
    "alicloud:alb/listener:Listener": lambda c: (_resource_id(c, "lsn"), {}),
    "alicloud:alb/rule:Rule": lambda c: (_resource_id(c, "rule"), {}),
    "alicloud:alb/acl:Acl": lambda c: (_resource_id(c, "acl"), {}),
    "alicloud:alb/aclEntryAttachment:AclEntryAttachment": lambda c: (f"{c.inputs['aclId']}:entries", {}),
    "alicloud:alb/listenerAclAttachment:ListenerAclAttachment": lambda c: (
        f"{c.inputs['listenerId']}:{c.inputs['aclId']}", {}),
    "alicloud:alb/loadBalancerSecurityGroupAttachment:LoadBalancerSecurityGroupAttachment": lambda c: (
        f"{c.inputs['loadBalancerId']}:{c.inputs['securityGroupId']}", {}),
}


def _preview_zones(region: str) -> list[str]:
    # International zone ids append a letter (ap-southeast-1a); mainland ones a dash and a letter (cn-hangzhou-h).
    separator = "" if region[-1].isdigit() else "-"
    return [f"{region}{separator}{letter}" for letter in "abc"]


_PREVIEW_INVOKES: dict[str, PreviewLookup] = {
    "alicloud:index/getCallerIdentity:getCallerIdentity": lambda a, c: {
        "accountId": c.account, "arn": f"acs:ram::{c.account}:root", "id": c.account,
        "identityType": "Account"},
    "alicloud:index/getRegions:getRegions": lambda a, c: {
        "regions": [{"id": c.region, "regionId": c.region, "localName": c.region}], "ids": [c.region], "id": c.region},
    "alicloud:index/getZones:getZones": lambda a, c: {
        "zones": [{"id": zone, "localName": zone} for zone in _preview_zones(c.region)],
        "ids": _preview_zones(c.region), "id": c.region},
    "alicloud:ecs/getImages:getImages": lambda a, c: {
        "images": [{"id": PREVIEW_IMAGE_ID, "imageId": PREVIEW_IMAGE_ID, "size": PREVIEW_IMAGE_GIB,
                    "architecture": "x86_64", "osType": "linux"}], "ids": [PREVIEW_IMAGE_ID], "id": c.region},
    "alicloud:ram/getRoles:getRoles": lambda a, c: {
        "roles": [{"id": "300000000000000001", "name": CDN_ORIGIN_ROLE,
                   "arn": f"acs:ram::{c.account}:role/{CDN_ORIGIN_ROLE.lower()}"}],
        "names": [CDN_ORIGIN_ROLE], "ids": ["300000000000000001"], "id": CDN_ORIGIN_ROLE},
    "alicloud:alb/getZones:getZones": lambda a, c: {
        "zones": [{"id": zone, "zoneId": zone, "localName": zone} for zone in _preview_zones(c.region)],
        "ids": _preview_zones(c.region), "id": c.region},
    # A fleet's group, asked for by name: it exists with its hook (a stack past its first deploy), so the preview
    # shows the group at the plan's floor.
    "alicloud:ess/getScalingGroups:getScalingGroups": lambda a, c: {
        "groups": [{"id": "asg-preview", "name": a.get("nameRegex", "")}], "ids": ["asg-preview"], "id": c.region},
    "alicloud:ess/getLifecycleHooks:getLifecycleHooks": lambda a, c: {
        "hooks": [{"id": "ash-preview", "name": a.get("nameRegex", "")}], "ids": ["ash-preview"], "id": c.region},
    # Lookups of brought resources: the preview cannot see them, so it answers with placeholders.
    "alicloud:vpc/getNetworks:getNetworks": lambda a, c: {
        "vpcs": [{"id": vpc_id, "cidrBlock": "10.0.0.0/16", "vpcId": vpc_id} for vpc_id in a.get("ids", [])],
        "ids": a.get("ids", []), "id": c.region},
    # vSwitches in the order asked, in the region's zones in turn (a created network's zone order).
    "alicloud:vpc/getSwitches:getSwitches": lambda a, c: {
        "vswitches": [{"id": vswitch_id, "vswitchId": vswitch_id, "zoneId": zone}
                      for vswitch_id, zone in zip(a.get("ids", []), itertools.cycle(_preview_zones(c.region)))],
        "ids": a.get("ids", []), "id": c.region},
}

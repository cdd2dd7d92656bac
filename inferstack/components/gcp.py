"""Google Cloud provisioning (pulumi_gcp 10.x): VPC network, firewall rules, GCS + Cloud CDN, Secret Manager, a
service account, Compute Engine: loose servers, or a fleet (a regional managed instance group behind an HTTPS
Application Load Balancer, scaled by a regional autoscaler).

Sections follow `CloudBackend` in `backend.py`; every cloud module keeps the same order and banners.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import pulumi
import pulumi_gcp as gcp

from inferstack.bootstrap.agents.gcp import log_names
from inferstack.bootstrap.telemetry import TelemetryTarget
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
from inferstack.components.naming import child_options, fleet_options, invoke_options, server_options, slug, unique_name
from inferstack.components.observability import (
    LOG_RETENTION_DAYS,
    AlarmKind,
    AlarmRule,
    Panel,
    PanelKind,
    agent_alarm_rules,
    alarm_rules,
    dashboard_panels,
)
from inferstack.components.shared import (
    ACCESS_LOG_DAYS,
    INCOMPLETE_UPLOAD_DAYS,
    NONCURRENT_VERSION_DAYS,
    NONCURRENT_VERSIONS_KEPT,
    SUBNET_RANGES,
    WEB_EGRESS_PORTS,
    checked_user_data,
    first_zones,
    nth,
)
from inferstack.errors import Problem, input_error
from inferstack.plan import DeploymentPlan

#### Constants ####

# Subnetworks are regional on GCP: one serves every zone of the region, in the first range of NETWORK_CIDR.
SUBNET_CIDR = SUBNET_RANGES[0]
# A fleet's network adds the servers' private subnetwork (egress through Cloud NAT), and the proxy-only subnetwork
# that a regional internal Application Load Balancer's Envoy proxies take their addresses from (purpose
# REGIONAL_MANAGED_PROXY; Google documents /26 as the smallest and recommends /23). It costs nothing unused.
PRIVATE_SUBNET_CIDR = SUBNET_RANGES[1]
PROXY_ONLY_CIDR = str(next(ipaddress.IPv4Network(SUBNET_RANGES[2]).subnets(new_prefix=23)))
# A fleet's network range (metrics, and Cloud Armor's "network only"): the smallest block holding its subnetworks.
FLEET_NETWORK_CIDR = str(ipaddress.IPv4Network(SUBNET_CIDR).supernet(new_prefix=18))

# Compute Engine limit: one metadata value holds at most 256 KB. The cloud-config goes in `user-data` as plain
# text (about 50 KB), so no compression is needed; cloud-init reads it from the GCE datasource.
METADATA_VALUE_LIMIT_BYTES = 256 * 1024

# Images, looked up by family at deploy time. GPU: Canonical's Ubuntu 22.04 accelerator images carry the NVIDIA
# 580 driver built and signed by Canonical, so they boot with Shielded VM secure boot on (an unsigned driver,
# such as NVIDIA's .run installer builds, would not load). CPU: plain Ubuntu 22.04. One OS for the bootstrap.
IMAGE_FAMILIES: Mapping[tuple[str, str], tuple[str, str]] = {
    ("gpu", "X86_64"): ("ubuntu-os-accelerator-images", "ubuntu-accelerator-2204-amd64-with-nvidia-580"),
    ("gpu", "ARM64"): ("ubuntu-os-accelerator-images", "ubuntu-accelerator-2204-arm64-with-nvidia-580"),
    ("cpu", "X86_64"): ("ubuntu-os-cloud", "ubuntu-2204-lts"),
    ("cpu", "ARM64"): ("ubuntu-os-cloud", "ubuntu-2204-lts-arm64"),
}



@dataclass(frozen=True)
class BootDisk:
    """The boot disk type of a machine series, and where Google states that the series supports it."""

    type: str
    source: str


# The boot disk type by machine series (`machine_series`), from the "Supported disk types for <series>" section of
# each series on the Compute Engine machine-family pages. Balanced Persistent Disk wherever the series takes it
# (what every server has booted from so far: another type would replace running servers); Hyperdisk Balanced,
# the Hyperdisk type that boots, where the series takes no Persistent Disk. A series missing here is refused
# before anything is created (`GcpBackend.plan_problems`): guessing is how A3 Ultra got pd-balanced.
_GENERAL = "cloud.google.com/compute/docs/general-purpose-machines"
_COMPUTE = "cloud.google.com/compute/docs/compute-optimized-machines"
_MEMORY = "cloud.google.com/compute/docs/memory-optimized-machines"
_STORAGE = "cloud.google.com/compute/docs/storage-optimized-machines"
_ACCELERATOR = "cloud.google.com/compute/docs/accelerator-optimized-machines"
_PD, _HYPERDISK = "pd-balanced", "hyperdisk-balanced"
BOOT_DISKS: Mapping[str, BootDisk] = {
    # General-purpose: Persistent Disk up to the third generation; the fourth takes Hyperdisk only.
    "e2": BootDisk(_PD, f"{_GENERAL}: E2"),
    "n1": BootDisk(_PD, f"{_GENERAL}: N1 (also N1 with attached GPUs, cloud.google.com/compute/docs/gpus)"),
    "n2": BootDisk(_PD, f"{_GENERAL}: N2"),
    "n2d": BootDisk(_PD, f"{_GENERAL}: N2D"),
    "t2d": BootDisk(_PD, f"{_GENERAL}: Tau T2D"),
    "t2a": BootDisk(_PD, f"{_GENERAL}: Tau T2A"),
    "c3": BootDisk(_PD, f"{_GENERAL}: C3 (virtual machine types)"),
    "c3-metal": BootDisk(_HYPERDISK, f"{_GENERAL}: C3 bare metal (*-metal) takes Hyperdisk only"),
    "c3d": BootDisk(_PD, f"{_GENERAL}: C3D"),
    "c4": BootDisk(_HYPERDISK, f"{_GENERAL}: C4, Hyperdisk only"),
    "c4a": BootDisk(_HYPERDISK, f"{_GENERAL}: C4A, Hyperdisk only"),
    "c4d": BootDisk(_HYPERDISK, f"{_GENERAL}: C4D, Hyperdisk only"),
    "n4": BootDisk(_HYPERDISK, f"{_GENERAL}: N4, Hyperdisk only"),
    "n4a": BootDisk(_HYPERDISK, f"{_GENERAL}: N4A, Hyperdisk only"),
    "n4d": BootDisk(_HYPERDISK, f"{_GENERAL}: N4D, Hyperdisk only"),
    # Compute-optimized.
    "c2": BootDisk(_PD, f"{_COMPUTE}: C2"),
    "c2d": BootDisk(_PD, f"{_COMPUTE}: C2D"),
    "h3": BootDisk(_PD, f"{_COMPUTE}: H3 (Balanced Persistent Disk, its only disk type at launch)"),
    "h4d": BootDisk(_HYPERDISK, f"{_COMPUTE}: H4D, Hyperdisk only"),
    # Memory- and storage-optimized.
    "m1": BootDisk(_PD, f"{_MEMORY}: M1"),
    "m2": BootDisk(_PD, f"{_MEMORY}: M2"),
    "m3": BootDisk(_PD, f"{_MEMORY}: M3"),
    "m4": BootDisk(_HYPERDISK, f"{_MEMORY}: M4, Hyperdisk only"),
    "x4": BootDisk(_HYPERDISK, f"{_MEMORY}: X4, Hyperdisk only"),
    "z3": BootDisk(_PD, f"{_STORAGE}: Z3"),
    # Accelerator-optimized: A3 High, Mega and Edge (H100) take Persistent Disk; A3 Ultra (H200) and later take
    # Hyperdisk only.
    "a2": BootDisk(_PD, f"{_ACCELERATOR}: A2 (Standard and Ultra)"),
    "a3": BootDisk(_PD, f"{_ACCELERATOR}: A3 High, A3 Mega, A3 Edge"),
    "a3-ultragpu": BootDisk(_HYPERDISK, f"{_ACCELERATOR}: A3 Ultra, Hyperdisk only"),
    "a4": BootDisk(_HYPERDISK, f"{_ACCELERATOR}: A4, Hyperdisk only"),
    "a4x": BootDisk(_HYPERDISK, f"{_ACCELERATOR}: A4X, Hyperdisk only"),
    "g2": BootDisk(_PD, f"{_ACCELERATOR}: G2"),
    "g4": BootDisk(_HYPERDISK, f"{_ACCELERATOR}: G4, Hyperdisk only"),
}

# Metadata keys: OS Login instead of SSH keys (access is an IAM grant, revoked with it); project-wide keys are
# refused; the legacy metadata endpoints that answer without the Metadata-Flavor header stay off; no serial console.
HARDENED_METADATA: Mapping[str, str] = {
    "enable-oslogin": "TRUE",
    "block-project-ssh-keys": "TRUE",
    "disable-legacy-endpoints": "TRUE",
    "serial-port-enable": "FALSE",
}

# Shielded VM: secure boot (the accelerator image's driver is signed), vTPM, integrity monitoring.
SHIELDED_VM: gcp.compute.InstanceShieldedInstanceConfigArgsDict = {
    "enable_secure_boot": True, "enable_vtpm": True, "enable_integrity_monitoring": True}

# The instance takes its service account with the cloud-platform scope; IAM grants (below) decide what it may do.
SERVICE_ACCOUNT_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# Names the user brings (BroughtIds): Compute Engine resource names and network tags are RFC 1035 labels; project
# ids are 6 to 30 lowercase letters, digits and hyphens; a resource may be given by its self link.
RESOURCE_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
PROJECT_ID = r"[a-z][-a-z0-9]{4,28}[a-z0-9]"
SELF_LINK = r"(https://www\.googleapis\.com/compute/v1/)?"

# Egress: WEB_EGRESS_PORTS, and nothing else (a deny-all egress rule sits below the allow). The metadata server
# (DNS, NTP, tokens) is always reachable on GCP.
ALLOW_PRIORITY = 1000
# The inference cache: Memorystore for Redis with AUTH (Google generates the AUTH string, an output) and TLS with
# server authentication, whose CA is the instance's own (server_ca_certs); a TLS instance listens on 6378
# (pulumi_gcp redis.Instance docstrings: auth_enabled, transit_encryption_mode, server_ca_certs, port). Direct peering
# (the default connect mode) puts it on the deployment's network without a service-networking connection. 1 GB is
# the smallest capacity (M1).
CACHE_REDIS_VERSION = "REDIS_7_0"
CACHE_MEMORY_GB = 1
DENY_EGRESS_PRIORITY = 65000

MODEL_READER_ROLE = "roles/storage.objectViewer"
SECRET_READER_ROLE = "roles/secretmanager.secretAccessor"
# The Ops Agent's writes. Google offers them as project roles only: "roles/logging.logWriter: Provides the permissions
# to write log entries" and "roles/monitoring.metricWriter: Provides write-only access to metrics" (IAM roles
# reference), which the Ops Agent's installation guide grants to the VM's service account ("Authorize the Ops
# Agent"); neither reads anything, and no log-bucket or metric-level grant exists for writing.
TELEMETRY_ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter")
# The label every server of a managed group carries (its instance template's), so that alert policies on the Ops
# Agent's gce_instance metrics can address one group (Cloud Monitoring filters: metadata.user_labels."KEY").
GROUP_LABEL = "inferstack-group"
# The Ops Agent's metrics (confgenerator apps/hostmetrics.go; integration_test .../nvml/metadata.yaml): disk use per
# device and state (used, free, reserved) in percent; each GPU's memory in bytes, by gpu_number and memory_state
# (used, free).
DISK_PERCENT_METRIC = "agent.googleapis.com/disk/percent_used"
GPU_MEMORY_METRIC = "agent.googleapis.com/gpu/memory/bytes_used"

# Cloud Storage usage logs are written by this Google group; it needs to create objects in the logs bucket.
USAGE_LOG_WRITER = "group:cloud-storage-analytics@google.com"

# Cloud CDN private bucket access: the project's load-balancing service agent reads the assets bucket, which stays
# private. The agent exists once the project has a backend bucket, so the grant waits for ours.
LOAD_BALANCER_AGENT = "service-{number}@https-lb.iam.gserviceaccount.com"

# Private buckets answer with `Cache-Control: private`; FORCE_CACHE_ALL lets the CDN cache them anyway, which
# suits public static files. An hour at the edge and in browsers.
CDN_CACHE_TTL_S = 3600

#### Fleet: load balancer, group, autoscaler ####

# Where Google's load balancers reach the servers from ("Firewall rules", cloud.google.com/load-balancing/docs/
# firewall-rules): the global external Application Load Balancer's front ends (GFEs) and every health check probe
# (autohealing's too) come from these two ranges; a regional internal Application Load Balancer's Envoy proxies come
# from the network's proxy-only subnetwork in the region.
GOOGLE_LB_RANGES = ("130.211.0.0/22", "35.191.0.0/16")
PROXY_ONLY_PURPOSE = "REGIONAL_MANAGED_PROXY"

# The instance group's named port, which the backend service names (`port_name`).
SERVING_PORT_NAME = "http"

# Autoscaling on load-balancing utilization: each server's backend capacity is max_rate_per_instance requests per
# second (balancing mode RATE), and the autoscaler holds the group's utilization of that capacity at this target.
# The plan's target_requests_per_s is what one server carries within the SLOs at no more than 80 % of its saturation:
# capacity = target / 0.8 (about the saturation) with a utilization target of 0.8 holds exactly the plan's target,
# and the load balancer only counts a server full at its saturation. 0.8 is also the autoscaler's own default.
LB_UTILIZATION_TARGET = 0.8

# Alarms read Cloud Monitoring's load-balancing metrics (Google Cloud metrics list, "loadbalancing"; Cloud Load
# Balancing docs, "Monitoring metrics"), one per load-balancer kind: the global external Application Load Balancer
# publishes https/... on the https_lb_rule resource, the regional internal one https/internal/... on
# internal_http_lb_rule; both label a series with its backend service (backend_target_name). backend_latencies is a
# distribution in ms from the request's dispatch to the backend until the backend's last byte (end to end at the
# backend); request_count carries response_code_class (500 for 5xx). The group's size is
# compute.googleapis.com/instance_group/size on the instance_group resource.
# The load balancer's access log: every request, written by the load balancer to Cloud Logging (Cloud Load Balancing
# docs, "Logging and monitoring": backend service logConfig, sampleRate 0.0-1.0), kept by the project's _Default log
# bucket (30 days unless changed; Cloud Logging, "Routing and storage overview"). It holds request metadata (client
# address, URL, status, latency), never request bodies.
LB_REQUEST_LOG: Any = {"enable": True, "sample_rate": 1.0}  # both backend services' LogConfigArgsDict
# The dashboard (Cloud Monitoring API, projects.dashboards: a mosaicLayout of up to 48 columns whose tiles hold
# xyChart widgets; each dataSet a timeSeriesQuery.timeSeriesFilter with its aggregation; the chart's `thresholds` are
# horizontal lines {label, value}). It graphs the alert policies' metrics and the group's size; the backends' health
# states have no metric (`unwatched_alarms`), so the servers graph shows the group's size.
DASHBOARD_COLUMNS, DASHBOARD_TILE_HEIGHT = 48, 16
LB_METRICS: Mapping[str, tuple[str, str]] = {
    "external": ("https_lb_rule", "loadbalancing.googleapis.com/https"),
    "internal": ("internal_http_lb_rule", "loadbalancing.googleapis.com/https/internal"),
}

# Compute Engine limits: autohealing's initial delay and a rolling update's min_ready_sec are 0..3600 s (pulumi_gcp
# RegionInstanceGroupManager auto_healing_policies.initial_delay_sec, update_policy.min_ready_sec); connection
# draining at most 3600 s (backend service connection_draining_timeout_sec).
MAX_INITIAL_DELAY_S = 3600
MAX_DRAINING_S = 3600


@dataclass(frozen=True)
class Probe:
    """How often a health check probes, how long it waits, and how many answers in a row change a server's state."""

    interval_s: int
    timeout_s: int
    healthy_after: int
    unhealthy_after: int


# The load balancer's health check decides where requests go: quick, a server leaves after 3 failed probes (30 s).
LB_PROBE = Probe(interval_s=10, timeout_s=5, healthy_after=2, unhealthy_after=3)
# Autohealing recreates a server, and its model load takes minutes: a check of its own, more patient, as Google
# recommends ("use separate health checks for load balancing and for autohealing"): 4 failures 30 s apart.
AUTOHEALING_PROBE = Probe(interval_s=30, timeout_s=10, healthy_after=1, unhealthy_after=4)

# Name lengths: an instance template's name_prefix of at most 37 characters gets a timestamp suffix (longer ones a
# shorter random one, more prone to collisions: pulumi_gcp InstanceTemplate name_prefix); the group appends
# "-" and four characters to the base instance name, and an instance name has at most 63.
TEMPLATE_PREFIX_LENGTH = 37
BASE_INSTANCE_NAME_LENGTH = 58

# Cloud Armor: a SRC_IPS_V1 match takes at most 10 ranges (pulumi_gcp SecurityPolicyRuleMatchConfig
# src_ip_ranges); the default rule has the lowest priority and matches "*".
ARMOR_RANGES_PER_RULE = 10
ARMOR_ALLOW_PRIORITY = 1000
ARMOR_DEFAULT_PRIORITY = 2147483647

# The provider's environment variables, in its own order (pulumi_gcp/config/vars.py).
REGION_ENV = ("GOOGLE_REGION", "GCLOUD_REGION", "CLOUDSDK_COMPUTE_REGION")
ZONE_ENV = ("GOOGLE_ZONE", "GCLOUD_ZONE", "CLOUDSDK_COMPUTE_ZONE")


@register_backend
class GcpBackend(CloudBackend):
    """Google Cloud."""

    cloud = "gcp"
    capabilities: ClassVar[Mapping[Capability, Support]] = {
        Capability.METADATA_HARDENING: unsupported(
            "the GCE metadata server has no session tokens and no hop limit: it demands only the header "
            "`Metadata-Flavor: Google` and refuses requests that carry X-Forwarded-For, which stops an SSRF that "
            "controls a URL but not one that can set headers (legacy header-free endpoints are disabled with "
            "disable-legacy-endpoints); the boot script's host firewall lets only root reach its HTTP port (DNS "
            "stays open), for host processes and containers alike, and a native runtime's unit is denied it outright "
            "(IPAddressDeny=)"),
        Capability.BUCKET_PUBLIC_ACCESS_BLOCK: supported("public_access_prevention=enforced, uniform bucket-level "
                                                         "access (no ACLs)"),
        Capability.TLS_ONLY_STORAGE: unsupported(
            "Cloud Storage's XML API also answers plain HTTP and no bucket setting refuses it; the organisation "
            "policy storage.secureHttpTransport does, for a whole project or folder (inferstack's clients always "
            "use HTTPS)"),
        Capability.PRIVATE_CDN_ORIGIN: supported(
            "Cloud CDN private bucket access: only the project's load-balancing service agent "
            "(service-<number>@https-lb) may read the assets bucket"),
        Capability.CDN_DEFAULT_HOSTNAME: unsupported(
            "the HTTPS load balancer in front of Cloud CDN has an IP address but no hostname, and its "
            "Google-managed certificate is issued for a domain you control"),
        Capability.PREFIX_SCOPED_GRANTS: supported("objectViewer on the bucket with an IAM condition on "
                                                   "resource.name (objects) and objectListPrefix (listing)"),
        Capability.MANAGED_SHELL: unsupported(
            "a shell through Google's API (IAP TCP forwarding) needs port 22 open to IAP's range 35.235.240.0/20, "
            "and inferstack opens no admin port; OS Login is on and SSH keys are refused, so adding that one "
            "firewall rule gives IAM-controlled `gcloud compute ssh --tunnel-through-iap`"),
        Capability.SECRET_STORE: supported("Secret Manager, one secret per value, read by id at boot"),
        Capability.SECRET_SCOPED_GRANTS: supported("secretAccessor granted on each of the server's secrets, no "
                                                   "project-level role"),
        Capability.TERMINATION_PROTECTION: supported(
            "Compute Engine deletion_protection on loose servers; a fleet's group carries Pulumi's protect (its "
            "servers are the group's to replace and have no flag)"),
        Capability.DRIVER_READY_IMAGE: driver_ready_image("gcp", "Canonical's Ubuntu 22.04 accelerator image (NVIDIA "
                                                                 "580, signed for secure boot), looked up by image "
                                                                 "family"),
        Capability.LOCAL_NVME_CACHE: supported("machine types with bundled Local SSD (A2 Ultra, A3, -lssd) attach "
                                               "it as NVMe; the boot script uses it as the model cache"),
        Capability.SPOT_CAPACITY: supported("provisioning_model=SPOT; a preempted server stops and its boot "
                                            "service resumes when it starts again"),
        Capability.MANAGED_FLEET: supported(
            "a regional managed instance group from an instance template, spread evenly over the plan's zones, "
            "servers without an external address (Cloud NAT egress); autohealing recreates a server whose health "
            "check fails after the plan's grace (initial_delay_sec, at most 3600 s); new templates roll out with "
            "surge, no server down"),
        Capability.LOAD_BALANCER_TLS: supported(
            "a global external Application Load Balancer (a regional internal one for private callers) with a "
            "Google-managed certificate for the API domain, SSL policy MODERN with TLS 1.2 or newer, port 80 "
            "redirecting to HTTPS, backend timeout of the plan's request timeout; callers other than the whole "
            "internet are limited by a Cloud Armor policy"),
        Capability.MANAGED_CACHE: supported(
            f"Memorystore for Redis ({CACHE_REDIS_VERSION}, {CACHE_MEMORY_GB} GB; STANDARD_HA in production) on the "
            "deployment's network by direct peering: AUTH (Google generates the string, kept in Secret Manager), TLS "
            "with server authentication against the instance's CA; egress rules let only the servers' tag reach it "
            "(Memorystore has no firewall of its own)"),
        Capability.REQUEST_AUTOSCALING: supported(
            "a regional autoscaler on load-balancing utilization: each server's capacity is the plan's requests per "
            "second / 0.8 (balancing mode RATE) and the utilization target 0.8, so the plan's rate per server is "
            "held; initialization period of the plan's cold start; scale-in controls remove at most one server per "
            "scale-in period"),
        Capability.ROLLING_UPDATE: rolling_update("gcp",
            "the group's PROACTIVE update policy (minimal action REPLACE, substitute): max surge the plan's surge, max "
            "unavailable 0, a new server ready after its health check and the plan's grace (min_ready_sec)"),
    }
    assets_certificate = None  # a Google-managed certificate is issued for the domain
    # A name alone, a path (the provider's ids) or a self link; a user-managed service account or the default one.
    notification_target = ValueRule(
        "a Cloud Monitoring notification channel's name, projects/PROJECT/notificationChannels/ID (gcloud beta "
        "monitoring channels list)",
        r"projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/notificationChannels/[0-9]{1,20}",
        "projects/my-project/notificationChannels/1234567890123456789")
    unwatched_alarms: ClassVar[Mapping[AlarmKind, str]] = {  # the Ops Agent sends GPU memory and disk
        AlarmKind.UNHEALTHY_SERVERS: "Cloud Monitoring has no metric of backend health-check states (they are read "
                                     "by the backendServices.getHealth API only); the group's autohealing replaces a "
                                     "server that fails its health check"}
    cache_generates_auth = True  # Memorystore's AUTH string is Google's (the auth_string output)
    brought_ids = BroughtIds(
        network=ValueRule("a VPC network's name, id or self link",
                          rf"({SELF_LINK}projects/{PROJECT_ID}/global/networks/)?{RESOURCE_NAME}",
                          "projects/my-project/global/networks/inference"),
        subnet=ValueRule("a subnetwork's name, id or self link",
                         rf"({SELF_LINK}projects/{PROJECT_ID}/regions/[a-z]+-[a-z]+[0-9]+/subnetworks/)?{RESOURCE_NAME}",
                         "projects/my-project/regions/europe-west4/subnetworks/inference"),
        firewall=ValueRule("a network tag of your firewall rules", RESOURCE_NAME, "inference-api"),
        identity=ValueRule("a service account email",
                           rf"({RESOURCE_NAME}@{PROJECT_ID}\.iam|[0-9]{{1,20}}-compute@developer)\.gserviceaccount\.com",
                           "inference@my-project.iam.gserviceaccount.com"))

    #### Region ####

    def configured_region(self) -> str | None:
        # The provider's own order: stack config, then the environment; a region may be implied by the zone.
        config = pulumi.Config("gcp")
        region = config.get("region") or _env(REGION_ENV)
        if region:
            return region
        zone = config.get("zone") or _env(ZONE_ENV)
        return zone.rsplit("-", 1)[0] if zone else None

    #### Network ####

    def create_network(self, parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult:
        opts = child_options(parent)
        network = gcp.compute.Network(
            f"{name}-vpc", auto_create_subnetworks=False, routing_mode="REGIONAL",
            description="inferstack inference servers", opts=opts)
        # Private Google Access: Cloud Storage and Secret Manager are reached over Google's network.
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet", network=network.id, ip_cidr_range=SUBNET_CIDR, private_ip_google_access=True,
            description="inferstack inference servers, every zone of the region", opts=opts)
        # One regional subnetwork serves every zone: the servers are spread over zones by create_servers.
        if not request.private_servers:
            return NetworkResult(network_id=network.id, subnet_ids=[subnet.id] * request.zones,
                                 cidr_block=subnet.ip_cidr_range)
        private, proxy_only, nat = _fleet_subnetworks(name, network, opts)
        # Ready once every subnetwork and the NAT exist: a server booted in it has egress, and a lookup of the
        # network's proxy-only subnetwork (create_firewall) finds it.
        ready = pulumi.Output.all(network.id, proxy_only.id, nat.id).apply(lambda ids: ids[0])
        private_ready = pulumi.Output.all(private.id, nat.id).apply(lambda ids: ids[0])
        return NetworkResult(network_id=ready, subnet_ids=[subnet.id] * request.zones,
                             cidr_block=pulumi.Output.from_input(FLEET_NETWORK_CIDR),
                             private_subnet_ids=[private_ready] * request.zones)

    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        # A VPC network has no range of its own: the smallest block that covers its subnetworks in the region.
        subnets = gcp.compute.get_subnetworks_output(
            filter=pulumi.Output.from_input(network_id).apply(_network_filter), opts=invoke_options(parent))
        return subnets.subnetworks.apply(lambda found: covering_cidr([_field(s, "ip_cidr_range") for s in found]))

    #### Firewall ####

    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
        opts = child_options(parent)
        # Rules target servers by this network tag, which create_servers and create_fleet put on each instance.
        tag = _gcp_name(name, "server")
        if request.load_balanced:
            rules = [_ingress(f"{name}-api-lb", request, tag, request.serving_port, _load_balancer_sources(
                parent, request.network_id), "inference API: Google's load balancers and health checks only", opts)]
        else:
            rules = [_ingress(f"{name}-api-{label}", request, tag, request.serving_port, [cidr], "inference API",
                              opts) for label, cidr in request.api_sources()]
        if request.metrics_port is not None:
            rules.append(_ingress(f"{name}-metrics", request, tag, request.metrics_port, [request.network_cidr],
                                  "metrics, network only", opts))
        rules.append(gcp.compute.Firewall(
            f"{name}-egress-web", name=_gcp_name(name, "egress-web"), network=request.network_id, direction="EGRESS",
            allows=[{"protocol": "tcp", "ports": [str(port) for port in WEB_EGRESS_PORTS.values()]}],
            destination_ranges=["0.0.0.0/0"], target_tags=[tag], priority=ALLOW_PRIORITY,
            description="http and https for drivers, packages, models", opts=opts))
        rules.append(gcp.compute.Firewall(
            f"{name}-egress-deny", name=_gcp_name(name, "egress-deny"), network=request.network_id,
            direction="EGRESS", denies=[{"protocol": "all"}], destination_ranges=["0.0.0.0/0"], target_tags=[tag],
            priority=DENY_EGRESS_PRIORITY, description="no other egress", opts=opts))
        # The tag resolves once every rule exists: a server that takes it boots behind the whole firewall.
        ready = pulumi.Output.all(tag, *(rule.id for rule in rules)).apply(lambda ids: ids[0])
        return FirewallResult(firewall_id=ready)

    #### Storage ####

    def create_model_store(self, parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
        logs = _private_bucket(parent, name, "logs", request.force_destroy, request.tags,
                               expire_after_days=ACCESS_LOG_DAYS)
        gcp.storage.BucketIAMMember(f"{name}-logs-delivery", bucket=logs.name, role="roles/storage.objectCreator",
                                    member=USAGE_LOG_WRITER, opts=child_options(parent))
        buckets = {purpose: _private_bucket(parent, name, purpose, request.force_destroy, request.tags,
                                            logs_bucket=logs.name)
                   for purpose in ("models", "data")}
        return ModelStoreResult(model_bucket=buckets["models"].name, data_bucket=buckets["data"].name,
                                logs_bucket=logs.name)

    def create_static_assets(
        self, parent: pulumi.Resource, name: str, request: StaticAssetsRequest
    ) -> StaticAssetsResult:
        domain = request.domain
        assert domain is not None, "StaticAssets requires a domain here (no Capability.CDN_DEFAULT_HOSTNAME)"
        opts = child_options(parent)
        if request.existing_bucket is not None:
            bucket_name: StrOutput = pulumi.Output.from_input(request.existing_bucket)
        else:
            bucket = _private_bucket(parent, name, "bucket", request.force_destroy, request.tags,
                                     logs_bucket=request.logs_bucket, main_page="index.html")
            bucket_name = bucket.name
        backend = gcp.compute.BackendBucket(
            f"{name}-backend", name=_gcp_name(name, "backend"), bucket_name=bucket_name, enable_cdn=True,
            compression_mode="AUTOMATIC", description=f"inferstack {name}: private static assets",
            cdn_policy={"cache_mode": "FORCE_CACHE_ALL", "default_ttl": CDN_CACHE_TTL_S,
                        "client_ttl": CDN_CACHE_TTL_S, "negative_caching": True}, opts=opts)
        project = gcp.organizations.get_project_output(opts=invoke_options(parent))
        agent = project.number.apply(lambda number: "serviceAccount:" + LOAD_BALANCER_AGENT.format(number=number))
        required_policy = None
        if request.existing_bucket is not None:
            # A brought bucket is never modified: its owner adds this binding to the bucket's IAM policy.
            required_policy = pulumi.Output.json_dumps({"bindings": [{"role": MODEL_READER_ROLE, "members": [agent]}]})
        else:
            gcp.storage.BucketIAMMember(f"{name}-cdn-read", bucket=bucket_name, role=MODEL_READER_ROLE, member=agent,
                                        opts=child_options(parent, depends_on=[backend]))
        address = gcp.compute.GlobalAddress(f"{name}-address", name=_gcp_name(name, "address"), ip_version="IPV4",
                                            labels=gcp_labels(request.tags), opts=opts)
        certificate = gcp.compute.ManagedSslCertificate(
            f"{name}-certificate", name=_gcp_name(name, "certificate"), managed={"domains": [domain]}, opts=opts)
        tls = gcp.compute.SSLPolicy(f"{name}-tls", name=_gcp_name(name, "tls"), profile="MODERN",
                                    min_tls_version="TLS_1_2", opts=opts)
        url_map = gcp.compute.URLMap(f"{name}-urls", name=_gcp_name(name, "urls"), default_service=backend.id,
                                     opts=opts)
        proxy = gcp.compute.TargetHttpsProxy(
            f"{name}-https", name=_gcp_name(name, "https"), url_map=url_map.id, ssl_certificates=[certificate.id],
            ssl_policy=tls.id, opts=opts)
        # HTTPS only: no port-80 listener exists, so plain HTTP is refused at Google's edge.
        gcp.compute.GlobalForwardingRule(
            f"{name}-https-rule", name=_gcp_name(name, "https-rule"), target=proxy.id, ip_address=address.id,
            port_range="443", ip_protocol="TCP", load_balancing_scheme="EXTERNAL_MANAGED",
            labels=gcp_labels(request.tags), opts=opts)
        # The certificate is issued once the domain's A record points at the address: say which one.
        address.address.apply(lambda ip: pulumi.log.info(
            f"{name}: point the DNS A record of {domain} at {ip}; the Google-managed certificate is issued after "
            "that (up to an hour)", resource=parent))
        return StaticAssetsResult(bucket=bucket_name, url=pulumi.Output.from_input(f"https://{domain}"),
                                  required_bucket_policy=required_policy)

    def create_bundle(self, parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
        # Private like its bucket (uniform access, no ACLs), Google-managed encryption. Content-addressed:
        # a new bundle is a new object, and the old one goes once the servers have moved on.
        bundle = gcp.storage.BucketObject(
            f"{name}-bundle", bucket=request.bucket, name=request.key, content=request.content,
            content_type="application/json", opts=child_options(parent))
        return bundle.id

    #### Secrets and identity ####

    def create_secrets(self, parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
        refs, grant_ids = {}, []
        for key, value in request.values.items():
            secret = gcp.secretmanager.Secret(
                f"{name}-{key}", secret_id=_gcp_name(name, key, max_length=255), replication={"auto": {}},
                labels=gcp_labels(request.tags), opts=child_options(parent))
            version = gcp.secretmanager.SecretVersion(f"{name}-{key}-version", secret=secret.id, secret_data=value,
                                                      opts=child_options(parent))
            # The reference resolves once a version exists: the server reads `latest` at its first boot.
            refs[key] = pulumi.Output.all(secret.id, version.id).apply(lambda ids: ids[0])
            grant_ids.append(secret.id)
        return SecretsResult(refs=refs, grant_ids=grant_ids)

    def create_identity(self, parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
        opts = child_options(parent)
        account = gcp.serviceaccount.Account(
            f"{name}-account", account_id=_gcp_name(name, max_length=30), display_name=f"inferstack {name}"[:100],
            description="inferstack inference server: reads its model prefix and its secrets", opts=opts)
        model_read = gcp.storage.BucketIAMMember(
            f"{name}-model-read", bucket=request.model_bucket, role=MODEL_READER_ROLE, member=account.member,
            condition={"title": "model-prefix-only",
                       "description": f"objects under {request.model_prefix} and boot bundles only",
                       "expression": pulumi.Output.from_input(request.model_bucket).apply(
                           lambda bucket: prefix_condition(bucket, request.model_prefix, request.bundle_prefix))},
            opts=opts)
        secret_reads = [gcp.secretmanager.SecretIamMember(
            f"{name}-secret-read-{index}", secret_id=secret_id, role=SECRET_READER_ROLE, member=account.member,
            opts=opts) for index, secret_id in enumerate(request.secret_ids)]
        telemetry_writes = [gcp.projects.IAMMember(  # grants: the project the agent writes to (create_telemetry)
            f"{name}-{role.rsplit('.', 1)[-1].lower()}-{index}", project=project, role=role, member=account.member,
            opts=opts) for index, project in enumerate(request.telemetry_grants) for role in TELEMETRY_ROLES]
        # The email resolves only once every grant exists: a server that takes it can read its model from its
        # first boot.
        ready = pulumi.Output.all(account.email, model_read.id, *(grant.id for grant in
                                                                  [*secret_reads, *telemetry_writes])).apply(
            lambda ids: ids[0])
        return IdentityResult(identity_id=account.email, attachment=ready)

    #### Compute ####

    def create_servers(self, parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
        plan = request.plan
        placement = _placement(parent, plan)
        image = _image(parent, plan, placement)
        metadata = checked_user_data(plan, request.user_data, placement.region, provider=self.display_name,
                                     encode=instance_metadata)
        labels = gcp_labels(request.tags)
        result = ServersResult(instance_ids=[], public_ips=[], private_ips=[])
        for index in range(plan.instance_count):
            server = gcp.compute.Instance(
                f"{name}-server-{index}", machine_type=plan.instance_type,
                zone=placement.zones.apply(nth(index % plan.zones)),
                boot_disk={"auto_delete": True, "initialize_params": {
                    "image": image.self_link, "type": boot_disk_type(plan.instance_type), "labels": labels,
                    "size": _disk_size_gib(image, plan)}},
                network_interfaces=[{"subnetwork": request.subnet_ids[index % len(request.subnet_ids)],
                                     "access_configs": [{}]}],  # an ephemeral public address, for egress
                tags=list(request.firewall_ids),
                service_account={"email": request.attachment, "scopes": SERVICE_ACCOUNT_SCOPES},
                metadata=metadata, scheduling=scheduling(plan), guest_accelerators=guest_accelerators(plan),
                shielded_instance_config=SHIELDED_VM,
                # "Enable deletion protection on this instance" (pulumi_gcp compute.Instance); an update in place.
                deletion_protection=request.protected, allow_stopping_for_update=True, labels=labels,
                # A newer image must not replace a running server on the next `pulumi up`; a new bootstrap does,
                # because cloud-init runs once per instance.
                opts=server_options(parent, request.protected, ignore_changes=["bootDisk.initializeParams.image"],
                                    replace_on_changes=["metadata"]))
            result.instance_ids.append(server.id)
            result.public_ips.append(server.network_interfaces.apply(_public_ip))
            result.private_ips.append(server.network_interfaces.apply(lambda nics: str(_field(nics[0], "network_ip"))))
        return result

    def create_fleet(self, parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
        plan, fleet = request.plan, request.plan.fleet
        assert fleet is not None, "create_fleet takes a plan with a fleet"
        placement = _placement(parent, plan)
        template = _instance_template(parent, name, request, placement, provider=self.display_name)
        group = _instance_group(parent, name, request, template, placement)
        canary = None
        if request.canary is not None:  # the same group, from the canary's plan
            canary_request, canary_placement = request.for_canary(), _placement(parent, request.canary.plan)
            canary_template = _instance_template(parent, f"{name}-canary", canary_request, canary_placement,
                                                 provider=self.display_name)
            canary = _Canary(canary_request, _instance_group(parent, f"{name}-canary", canary_request,
                                                             canary_template, canary_placement))
        front_end = (_external_load_balancer if request.internet_facing else _internal_load_balancer)(
            parent, name, request, group, placement, canary)
        # Load-balancing utilization counts the backend service's requests: the autoscaler needs the group to be its
        # backend first. Initialization period (cooldown_period): a new server is not counted during its cold start.
        gcp.compute.RegionAutoscaler(
            f"{name}-autoscaler", name=_gcp_name(name, "autoscaler"), target=group.self_link,
            description=f"inferstack {name}: {fleet.target_requests_per_s} requests/s per server",
            autoscaling_policy={
                "min_replicas": fleet.min_replicas, "max_replicas": fleet.max_replicas, "mode": "ON",
                "cooldown_period": fleet.scale_out_cooldown_s,
                "load_balancing_utilization": {"target": LB_UTILIZATION_TARGET},
                # Slow scale-in: at most one server fewer than the peak of the last scale-in period.
                "scale_in_control": {"max_scaled_in_replicas": {"fixed": 1},
                                     "time_window_sec": fleet.scale_in_cooldown_s}},
            opts=child_options(parent, depends_on=[front_end.backend]))
        if canary is not None and front_end.canary_backend is not None:
            _canary_autoscaler(parent, name, canary, front_end.canary_backend)
        watched: dict[str, pulumi.Input[str]] = {
            "backend_service": front_end.backend.name, "group": group.name,  # type: ignore[attr-defined]
            "group_label": _gcp_name(name, "group"),
            "scheme": "external" if request.internet_facing else "internal"}
        if canary is not None and front_end.canary_backend is not None:
            watched.update(canary_backend_service=front_end.canary_backend.name,  # type: ignore[attr-defined]
                           canary_group=canary.group.name, canary_group_label=_gcp_name(f"{name}-canary", "group"))
        return FleetResult(endpoint_url=pulumi.Output.from_input(f"https://{request.api_domain}"),
                           load_balancer_address=front_end.address, group_id=group.id, watched=watched)

    #### Monitoring ####

    def create_telemetry(self, parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
        """A Cloud Logging bucket that keeps the servers' logs LOG_RETENTION_DAYS (abandoned, not deleted, on destroy
        when protected), a sink that routes the Ops Agent's log names there, and an exclusion that keeps them out of
        the project's _Default bucket (its 30 days would hold a second copy). Grants: the project (the agent's
        roles are project roles: TELEMETRY_ROLES).

        Encryption: Cloud Logging encrypts log buckets at rest with Google-managed keys; a customer key
        (cmek_settings) needs a Cloud KMS key the stack does not create (Cloud Logging, "Configure CMEK for log
        storage")."""
        project = gcp.organizations.get_client_config_output(opts=invoke_options(parent)).project
        prefix = _gcp_name(name, "logs")
        target = TelemetryTarget(logs=prefix, metrics=prefix)  # metrics: the runtime's Prometheus job name
        opts = child_options(parent)
        bucket = gcp.logging.ProjectBucketConfig(
            f"{name}-log-bucket", project=project, location="global", bucket_id=prefix,
            retention_days=LOG_RETENTION_DAYS, description=f"inferstack {name}: the servers' runtime, gateway and "
                                                          "boot logs",
            deletion_policy="ABANDON" if request.protected else "DELETE", opts=opts)
        logs = project.apply(lambda p: " OR ".join(f'logName = "projects/{p}/logs/{log}"' for log in log_names(target)))
        # A sink to a log bucket of its own project writes as cloud-logs@system.gserviceaccount.com, which needs no
        # grant (unique_writer_identity false: the provider's docs; Cloud Logging, "Route logs to supported
        # destinations").
        gcp.logging.ProjectSink(
            f"{name}-log-sink", name=_gcp_name(name, "log-sink"), project=project, filter=logs,
            destination=pulumi.Output.concat("logging.googleapis.com/", bucket.name),
            unique_writer_identity=False, description=f"inferstack {name}: the servers' logs to their bucket",
            opts=opts)
        # An exclusion made with the projects.exclusions API applies to the _Default sink only (Logging API,
        # exclusions.create: "Creates a new exclusion in the _Default sink"), so our own sink still routes these
        # logs to their bucket. A deleted log bucket stays DELETE_REQUESTED 7 days and its id cannot be reused
        # meanwhile: a development stack destroyed and deployed again within a week under the same name fails here.
        gcp.logging.ProjectExclusion(
            f"{name}-log-exclusion", name=_gcp_name(name, "log-exclusion"), project=project, filter=logs,
            description=f"inferstack {name}: the servers' logs are kept in their own bucket", opts=opts)
        return TelemetryResult(target=pulumi.Output.from_input(target), grants=[project])

    def create_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
        """One Cloud Monitoring alert policy per rule on the load balancer's and the group's metrics, and with the
        agent (request.telemetry) per agent rule on the group's servers' GPU memory and disk; a canary's group gets
        its own server-error and agent policies. Each notifies the notification channel."""
        watched, plan = request.fleet.watched, request.plan
        policies = [self._policy(parent, name, request, rule, _watched_condition(rule, watched))
                    for rule in alarm_rules(plan) if rule.kind not in self.unwatched_alarms]
        policies += self._agent_policies(parent, name, request, plan, str(watched["group_label"]))
        if plan.canary is not None and "canary_backend_service" in watched:
            canary = {**watched, "backend_service": watched["canary_backend_service"],
                      "group": watched["canary_group"]}
            policies += [self._policy(parent, f"{name}-canary", request, rule, _watched_condition(rule, canary))
                         for rule in alarm_rules(plan.canary.plan) if rule.kind is AlarmKind.ERROR_RATE]
            policies += self._agent_policies(parent, f"{name}-canary", request, plan.canary.plan,
                                             str(watched["canary_group_label"]))
        return AlarmsResult(alarm_ids=[policy.name for policy in policies])

    def _agent_policies(self, parent: pulumi.Resource, name: str, request: AlarmsRequest, plan: DeploymentPlan,
                        group_label: str) -> list[gcp.monitoring.AlertPolicy]:
        """The GPU-memory and disk policies of one group's servers (by their GROUP_LABEL), per server
        (`_agent_condition`)."""
        if request.telemetry is None:
            return []
        return [self._policy(parent, name, request, rule, {
            "display_name": rule.kind.value, "condition_threshold": _agent_condition(rule, group_label)})
            for rule in agent_alarm_rules(plan)]

    @staticmethod
    def _policy(parent: pulumi.Resource, name: str, request: AlarmsRequest, rule: AlarmRule,
                condition: Any) -> gcp.monitoring.AlertPolicy:
        return gcp.monitoring.AlertPolicy(
            f"{name}-alert-{rule.kind.value}", display_name=f"inferstack {name}: {rule.kind.value}", combiner="OR",
            conditions=[condition],
            documentation={"content": f"inferstack {name}: {rule.summary}", "mime_type": "text/markdown"},
            notification_channels=[request.notification_target] if request.notification_target else [],
            severity="ERROR", user_labels=gcp_labels(request.tags), opts=child_options(parent))

    def create_dashboard(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> StrOutput:
        """A Cloud Monitoring dashboard of the load balancer's and the group's metrics (the alert policies' own), one
        chart per panel, the plan's lines drawn as thresholds."""
        watched = request.fleet.watched
        scheme = str(watched["scheme"])
        body = pulumi.Output.all(watched["backend_service"], watched["group"]).apply(
            lambda names: json.dumps(_dashboard_json(request.plan, f"inferstack {name}", scheme, names[0], names[1])))
        dashboard = gcp.monitoring.Dashboard(f"{name}-dashboard", dashboard_json=body, opts=child_options(parent))
        return dashboard.id

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        """Memorystore for Redis on the deployment's network (direct peering): AUTH, TLS with the instance's CA; the
        VPC's egress lets only the servers' tag reach it."""
        opts = child_options(parent)
        cache = gcp.redis.Instance(
            f"{name}-cache", name=_gcp_name(name, "cache", max_length=40), region=request.plan.region,
            tier="STANDARD_HA" if request.highly_available else "BASIC", memory_size_gb=CACHE_MEMORY_GB,
            redis_version=CACHE_REDIS_VERSION, authorized_network=request.network_id, connect_mode="DIRECT_PEERING",
            auth_enabled=True, transit_encryption_mode="SERVER_AUTHENTICATION",
            display_name="inferstack inference cache", labels=gcp_labels(request.tags),
            opts=child_options(parent, protect=True if request.protected else None,
                               additional_secret_outputs=["authString"]))
        cache_range = cache.reserved_ip_range.apply(lambda r: r or "")
        # Memorystore takes no firewall of its own: the network's egress decides who reaches its range. The servers'
        # tag may (their firewall otherwise allows only the web); every other instance of the network may not.
        gcp.compute.Firewall(
            f"{name}-cache-egress", name=_gcp_name(name, "cache-egress"), network=request.network_id,
            direction="EGRESS", allows=[{"protocol": "tcp", "ports": [cache.port.apply(str)]}],
            destination_ranges=[cache_range], target_tags=list(request.server_firewall_ids), priority=ALLOW_PRIORITY,
            description="Redis, the inference cache: the servers only", opts=opts)
        gcp.compute.Firewall(
            f"{name}-cache-deny", name=_gcp_name(name, "cache-deny"), network=request.network_id, direction="EGRESS",
            denies=[{"protocol": "all"}], destination_ranges=[cache_range], priority=ALLOW_PRIORITY + 1,
            description="Redis, the inference cache: no other instance of the network", opts=opts)
        ca = cache.server_ca_certs.apply(lambda certs: "".join(c.cert for c in certs or [] if c.cert) or None)
        return CacheResult(host=cache.host, port=cache.port, auth_token=pulumi.Output.secret(cache.auth_string),
                           ca_certificate=ca, verify=True)

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return PreviewAnswers(resources=_PREVIEW_OUTPUTS, lookups=_PREVIEW_INVOKES,
                              region=self.configured_region() or PREVIEW_REGION, account=_preview_project())

    #### Shared behaviour ####

    def plan_problems(self, plan: DeploymentPlan, *, field: str) -> list[Problem]:
        """A machine series whose boot disk type is not known (BOOT_DISKS) is refused: a wrong guess fails the
        server's creation after the rest of the stack exists. So is a fleet whose health-check grace exceeds what
        autohealing can wait: the group would recreate servers still loading their model."""
        problems = []
        series = machine_series(plan.instance_type)
        if series not in BOOT_DISKS:
            problems.append(Problem(
                field, f"uses machine series {series}, whose boot disk type inferstack does not know",
                value=plan.instance_type, fix="plan another machine type, or add the series to BOOT_DISKS in "
                "inferstack/components/gcp.py from Google's machine-series page (\"Supported disk types\")"))
        if plan.fleet is not None and plan.fleet.health_check_grace_s > MAX_INITIAL_DELAY_S:
            problems.append(Problem(
                f"{field}.fleet.health_check_grace_s", f"exceeds the {MAX_INITIAL_DELAY_S} s a managed instance "
                "group's autohealing waits before judging a new server", value=plan.fleet.health_check_grace_s,
                fix="shorten the cold start (a machine type with local SSD, a smaller or quantised model, or a model "
                "bucket in the plan's region)"))
        return problems


#### Helpers: region, names and labels ####


def _env(names: Sequence[str]) -> str | None:
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def _gcp_name(*parts: str, max_length: int = 63) -> str:
    """A name unique to this project, stack and component, valid where GCP wants `[a-z]([-a-z0-9]*[a-z0-9])?`.

    Firewall rules, service accounts, secrets and load-balancer parts are named in the GCP project's global
    namespace, so the name carries the Pulumi project and stack (and a hash that keeps truncation unique).
    """
    every_part = [pulumi.get_project(), pulumi.get_stack(), *parts]
    name = unique_name(every_part, max_length=max_length)
    return name if name[0].isalpha() else "n-" + unique_name(every_part, max_length=max_length - 2)


def gcp_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """Tags as GCP labels: lowercase letters, digits, '_' and '-', at most 63 characters, keys start with a letter."""
    def clean(text: str) -> str:
        return re.sub(r"[^a-z0-9_-]", "_", text.lower())[:63]

    labels = {}
    for key, value in tags.items():
        label = clean(key)
        labels[label if label[:1].isalpha() else clean(f"t_{label}")] = clean(value)
    return labels


def provider_region(client: pulumi.Output[gcp.organizations.GetClientConfigResult]) -> StrOutput:
    """The provider's region as it resolved it: its region setting, else the region of its zone setting."""
    return client.apply(lambda c: c.region or (c.zone or "").rsplit("-", 1)[0])


def _field(value: Any, name: str) -> Any:
    """A field of an SDK result: typed objects in a deployment, plain dicts from some mocks."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name)


#### Helpers: network and firewall ####


def _network_filter(network_id: str) -> str:
    """The subnetworks.list filter for a network given by name, id or self link (RE2, whole-field match)."""
    name = network_id.rstrip("/").rsplit("/", 1)[-1]
    return f"network eq .*/networks/{name}"


def _fleet_subnetworks(name: str, network: gcp.compute.Network, opts: pulumi.ResourceOptions
                       ) -> tuple[gcp.compute.Subnetwork, gcp.compute.Subnetwork, gcp.compute.RouterNat]:
    """The servers' private subnetwork with Cloud NAT egress, and the proxy-only subnetwork of an internal load
    balancer (Google's requirement for a regional internal Application Load Balancer: one ACTIVE per network and
    region)."""
    private = gcp.compute.Subnetwork(
        f"{name}-private", network=network.id, ip_cidr_range=PRIVATE_SUBNET_CIDR, private_ip_google_access=True,
        description="inferstack fleet servers: no external address, egress through Cloud NAT", opts=opts)
    proxy_only = gcp.compute.Subnetwork(
        f"{name}-proxy-only", network=network.id, ip_cidr_range=PROXY_ONLY_CIDR, purpose=PROXY_ONLY_PURPOSE,
        role="ACTIVE", description="Envoy proxies of a regional internal Application Load Balancer", opts=opts)
    router = gcp.compute.Router(f"{name}-router", name=_gcp_name(name, "router"), network=network.id,
                                description="inferstack fleet: Cloud NAT", opts=opts)
    # NAT for the private subnetwork only (LIST_OF_SUBNETWORKS); the firewall's egress rules still allow 80 and 443
    # only. Google allocates the NAT addresses (AUTO_ONLY); errors are logged.
    nat = gcp.compute.RouterNat(
        f"{name}-nat", name=_gcp_name(name, "nat"), router=router.name, region=router.region,
        nat_ip_allocate_option="AUTO_ONLY", source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
        subnetworks=[{"name": private.id, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
        log_config={"enable": True, "filter": "ERRORS_ONLY"}, opts=opts)
    return private, proxy_only, nat


def proxy_only_filter(network_id: str, project: str) -> str:
    """The subnetworks.list filter for the network's proxy-only subnetworks (the network given by name, id or self
    link). Two fields: each comparison in parentheses, exact values (regular expressions take one field only)."""
    path = network_id.rstrip("/").split("/compute/v1/")[-1]
    if "/" not in path:
        path = f"projects/{project}/global/networks/{path}"
    return (f'(purpose = "{PROXY_ONLY_PURPOSE}") '
            f'(network = "https://www.googleapis.com/compute/v1/{path}")')


def _proxy_only_ranges(parent: pulumi.Resource, network_id: pulumi.Input[str]) -> pulumi.Output[list[str]]:
    """The ranges of the network's proxy-only subnetworks in the provider's region, looked up (none: empty)."""
    invoke = invoke_options(parent)
    client = gcp.organizations.get_client_config_output(opts=invoke)
    query = pulumi.Output.all(network_id, client.project).apply(lambda v: proxy_only_filter(str(v[0]), str(v[1])))
    found = gcp.compute.get_subnetworks_output(filter=query, opts=invoke)
    return found.subnetworks.apply(lambda subnets: sorted(str(_field(s, "ip_cidr_range")) for s in subnets))


def covering_cidr(ranges: Sequence[str]) -> str:
    """The smallest CIDR block that contains every range (its subnetworks' ranges for a brought network)."""
    if not ranges:
        raise input_error("network_id", "has no subnetwork in this region", fix="bring a network with a subnetwork "
                          "in the plan's region, or let inferstack create the network")
    networks = [ipaddress.ip_network(r) for r in ranges]
    block = networks[0]
    while not all(n.version == block.version and n.subnet_of(block) for n in networks):  # type: ignore[arg-type]
        if block.prefixlen == 0:
            raise input_error("network_id", "has IPv4 and IPv6 subnetworks", value=list(ranges),
                              fix="give securityGroupIds (network tags) of your own firewall rules")
        block = block.supernet()
    return str(block)


def _ingress(resource_name: str, request: FirewallRequest, tag: str, port: int,
             sources: pulumi.Input[Sequence[pulumi.Input[str]]], purpose: str,
             opts: pulumi.ResourceOptions) -> gcp.compute.Firewall:
    return gcp.compute.Firewall(
        resource_name, name=_gcp_name(resource_name), network=request.network_id, direction="INGRESS",
        allows=[{"protocol": "tcp", "ports": [str(port)]}], source_ranges=sources, target_tags=[tag],
        priority=ALLOW_PRIORITY, description=purpose, opts=opts)


def _load_balancer_sources(parent: pulumi.Resource, network_id: pulumi.Input[str]) -> pulumi.Output[list[str]]:
    """Who reaches a fleet's serving port: Google's front ends and health checks, and the network's proxy-only
    subnetworks (a regional internal load balancer's proxies). The firewall cannot tell which load balancer the
    fleet takes, so it admits both; neither is `allowed_cidrs` (Cloud Armor limits those at the load balancer)."""
    return _proxy_only_ranges(parent, network_id).apply(lambda proxies: [*GOOGLE_LB_RANGES, *proxies])


#### Helpers: buckets ####


def _private_bucket(parent: pulumi.Resource, name: str, purpose: str, force_destroy: bool, tags: Mapping[str, str],
                    *, logs_bucket: pulumi.Input[str] | None = None, expire_after_days: int | None = None,
                    main_page: str | None = None) -> gcp.storage.Bucket:
    """A bucket nobody outside the project can read: public access prevented, uniform access (no ACLs), versioned.

    Cloud Storage encrypts every object at rest (Google-managed keys); a customer-managed key is a choice this
    library leaves to you. Its XML API also answers plain HTTP and no bucket setting refuses that: the organisation
    policy storage.secureHttpTransport does, project-wide (docs/deploy-gcp.md). Regional, in the provider's region.
    """
    client = gcp.organizations.get_client_config_output(opts=invoke_options(parent))
    rules: list[gcp.storage.BucketLifecycleRuleArgsDict] = [
        # Noncurrent versions older than 30 days go, except the 3 newest (4 newer versions counts the live one).
        {"action": {"type": "Delete"}, "condition": {
            "with_state": "ARCHIVED", "days_since_noncurrent_time": NONCURRENT_VERSION_DAYS,
            "num_newer_versions": NONCURRENT_VERSIONS_KEPT + 1}},
        {"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": INCOMPLETE_UPLOAD_DAYS}},
    ]
    if expire_after_days is not None:
        rules += [{"action": {"type": "Delete"}, "condition": {"age": expire_after_days}},
                  {"action": {"type": "Delete"}, "condition": {
                      "with_state": "ARCHIVED", "days_since_noncurrent_time": NONCURRENT_VERSION_DAYS}}]
    return gcp.storage.Bucket(
        f"{name}-{purpose}", name=_bucket_name(client.project, name, purpose), location=provider_region(client),
        storage_class="STANDARD", uniform_bucket_level_access=True, public_access_prevention="enforced",
        versioning={"enabled": True}, lifecycle_rules=rules, force_destroy=force_destroy, labels=gcp_labels(tags),
        logging={"log_bucket": logs_bucket, "log_object_prefix": f"{purpose}/"} if logs_bucket is not None else None,
        website={"main_page_suffix": main_page} if main_page else None,
        opts=child_options(parent))


def _bucket_name(gcp_project: StrOutput, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across GCP projects (bucket names are global)."""
    parts = [pulumi.get_project(), pulumi.get_stack(), name, purpose]
    readable = slug(*parts)
    if "google" in readable or readable.startswith("goog"):  # Cloud Storage refuses such names
        raise input_error("pulumi project/stack", "bucket names may not contain 'google' or begin with 'goog'",
                          value=readable, fix="rename the Pulumi project or stack")
    return gcp_project.apply(lambda project: unique_name(parts, unique_by=[project]))


def prefix_condition(bucket: str, prefix: str, objects_prefix: str) -> str:
    """The IAM condition that limits a bucket-level grant to one prefix (its objects, and listings under it) and to
    the objects under a second prefix (no listing)."""
    for field, value in (("model_prefix", prefix), ("bundle_prefix", objects_prefix)):
        if not re.fullmatch(r"[A-Za-z0-9._/-]+", value):
            raise input_error(field, "may hold letters, digits, '.', '_', '-' and '/' only", value=value,
                              fix="use the plan's model.bucket_prefix")
    objects = f"projects/_/buckets/{bucket}/objects/"
    return (f'resource.name.startsWith("{objects}{prefix}") || '
            f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{prefix}") || '
            f'resource.name.startsWith("{objects}{objects_prefix}")')


#### Helpers: compute ####


@dataclass(frozen=True)
class _Placement:
    zones: pulumi.Output[list[str]]
    """Zones of the provider's region that offer the machine type, the configured zone (gcp:zone) first."""
    architecture: StrOutput
    """X86_64 or ARM64, as the machine type reports it."""
    region: StrOutput
    """The provider's region, to check the plan against."""


def _placement(parent: pulumi.Resource, plan: DeploymentPlan) -> _Placement:
    """Where the servers can run: not every zone has every GPU (looked up at deploy time)."""
    invoke = invoke_options(parent)
    client = gcp.organizations.get_client_config_output(opts=invoke)
    query = f"name = {plan.instance_type}"

    def offers_in(zones: Sequence[str]) -> pulumi.Output[dict[str, list[Any]]]:
        found = [gcp.compute.get_machine_types_output(zone=zone, filter=query, opts=invoke).machine_types
                 for zone in zones]
        return pulumi.Output.all(*found).apply(
            lambda types: {zone: list(t) for zone, t in zip(zones, types, strict=True) if t})

    offers: pulumi.Output[dict[str, list[Any]]] = gcp.compute.get_zones_output(
        status="UP", opts=invoke).names.apply(offers_in)
    zones = pulumi.Output.all(offers, client.zone).apply(lambda args: choose_zones(plan, args[0], args[1]))
    architecture = offers.apply(lambda by_zone: _architecture(by_zone))
    return _Placement(zones=zones, architecture=architecture, region=provider_region(client))


def choose_zones(plan: DeploymentPlan, offers: Mapping[str, Any], preferred: str | None) -> list[str]:
    """The plan's zone count of zones offering the machine type, by name, the provider's zone first."""
    return first_zones(sorted(offers, key=lambda zone: (zone != preferred, zone)), plan.zones, plan.instance_type)


def _architecture(offers: Mapping[str, Sequence[Any]]) -> str:
    reported = {_field(machine, "architecture") for types in offers.values() for machine in types}
    return "ARM64" if "ARM64" in reported else "X86_64"  # legacy types report none: they are x86


def machine_series(machine_type: str) -> str:
    """The series of a machine type as BOOT_DISKS names it: the name's first part (`a3` of a3-highgpu-8g), or a
    variant that takes other disks than its series (`a3-ultragpu`, `c3-metal`)."""
    parts = machine_type.split("-")
    variants = [f"{parts[0]}-metal"] if parts[-1] == "metal" else []
    variants += [f"{parts[0]}-{parts[1]}"] if len(parts) > 1 else []
    return next((variant for variant in variants if variant in BOOT_DISKS), parts[0])


def boot_disk_type(machine_type: str) -> str:
    """The boot disk type the machine type's series supports (BOOT_DISKS); KeyError for a series not listed."""
    return BOOT_DISKS[machine_series(machine_type)].type


def guest_accelerators(plan: DeploymentPlan) -> list[gcp.compute.InstanceGuestAcceleratorArgsDict]:
    """GPUs attached to a general-purpose machine (N1 + T4); A2/A3/G2 types bundle theirs and attach nothing."""
    if plan.accelerator is None or plan.accelerator.attach_type is None:
        return []
    return [{"type": plan.accelerator.attach_type, "count": plan.accelerator.count}]


def scheduling(plan: DeploymentPlan) -> gcp.compute.InstanceSchedulingArgsDict:
    """GPU servers cannot live-migrate, so host maintenance stops them; spot servers stop when preempted."""
    maintenance = "TERMINATE" if plan.device == "gpu" or plan.spot else "MIGRATE"
    if plan.spot:
        return {"on_host_maintenance": maintenance, "provisioning_model": "SPOT", "preemptible": True,
                "automatic_restart": False, "instance_termination_action": "STOP"}
    return {"on_host_maintenance": maintenance, "provisioning_model": "STANDARD", "automatic_restart": True}


def instance_metadata(user_data: str) -> dict[str, str]:
    """The instance's metadata: the cloud-config for cloud-init, and the hardening keys."""
    size = len(user_data.encode())
    if size > METADATA_VALUE_LIMIT_BYTES:
        raise input_error("bootstrap", f"is {size} bytes; a Compute Engine metadata value holds "
                          f"{METADATA_VALUE_LIMIT_BYTES}", fix="move large files out of the cloud-config "
                          "(fetch them from the model bucket)")
    return {**HARDENED_METADATA, "user-data": user_data}


def _public_ip(interfaces: Sequence[Any]) -> str:
    configs = _field(interfaces[0], "access_configs") or []
    return str(_field(configs[0], "nat_ip") or "") if configs else ""


def _image(parent: pulumi.Resource, plan: DeploymentPlan,
           placement: _Placement) -> pulumi.Output[gcp.compute.GetImageResult]:
    """The newest image of the family for the plan's device and the machine type's architecture (IMAGE_FAMILIES)."""
    return gcp.compute.get_image_output(
        project=placement.architecture.apply(lambda arch: IMAGE_FAMILIES[(plan.device, arch)][0]),
        family=placement.architecture.apply(lambda arch: IMAGE_FAMILIES[(plan.device, arch)][1]),
        opts=invoke_options(parent))


def _disk_size_gib(image: pulumi.Output[gcp.compute.GetImageResult], plan: DeploymentPlan) -> pulumi.Output[int]:
    """The plan's disk, or the image's own size where that is larger (a disk is never smaller than its image)."""
    return image.disk_size_gb.apply(lambda gib: max(gib or 0, plan.disk_gib))


#### Helpers: fleet ####


def fleet_scheduling(plan: DeploymentPlan) -> gcp.compute.InstanceTemplateSchedulingArgsDict:
    """A fleet server's scheduling: as a loose server's, but a preempted spot server is deleted, not stopped. The
    group recreates a server it did not stop or delete itself either way (Compute Engine, "About repairing VMs in a
    MIG"); deleting frees its disk at once, and its successor boots from the group's current template."""
    if plan.spot:  # the template's own TypedDict: the instance's (scheduling()) has other optional keys
        return {"on_host_maintenance": "TERMINATE", "provisioning_model": "SPOT", "preemptible": True,
                "automatic_restart": False, "instance_termination_action": "DELETE"}
    maintenance = "TERMINATE" if plan.device == "gpu" else "MIGRATE"
    return {"on_host_maintenance": maintenance, "provisioning_model": "STANDARD", "automatic_restart": True}


def _instance_template(parent: pulumi.Resource, name: str, request: FleetRequest, placement: _Placement, *,
                       provider: str) -> gcp.compute.InstanceTemplate:
    """What every server of the group is built from: the loose server's machine, image, disk, identity, hardening
    and user data, without an external address. A template cannot change: a new one replaces it (created first,
    under a new name from `name_prefix`), and the group rolls its servers over to it."""
    plan = request.plan
    image = _image(parent, plan, placement)
    labels = gcp_labels(request.tags)
    # A regional subnetwork serves every zone of the region: the template takes the servers' first one. Its servers
    # carry their group's label (the agent alert policies address them by it).
    return gcp.compute.InstanceTemplate(
        f"{name}-template", name_prefix=_gcp_name(name, "tmpl", max_length=TEMPLATE_PREFIX_LENGTH),
        description=f"inferstack {name}: {plan.instance_type} serving {plan.model.name}",
        machine_type=plan.instance_type,
        disks=[{"boot": True, "auto_delete": True, "source_image": image.self_link,
                "disk_type": boot_disk_type(plan.instance_type), "disk_size_gb": _disk_size_gib(image, plan),
                "labels": labels}],
        network_interfaces=[{"subnetwork": request.server_subnet_ids[0]}],  # no access_configs: no external address
        tags=list(request.firewall_ids),
        service_account={"email": request.attachment, "scopes": SERVICE_ACCOUNT_SCOPES},
        metadata=checked_user_data(plan, request.user_data, placement.region, provider=provider,
                                   encode=instance_metadata),
        scheduling=fleet_scheduling(plan), guest_accelerators=guest_accelerators(plan),
        shielded_instance_config=SHIELDED_VM, labels={**labels, GROUP_LABEL: _gcp_name(name, "group")},
        # A newer image must not roll the whole fleet over on the next `pulumi up`; a new bootstrap does.
        opts=child_options(parent, ignore_changes=["disks[0].sourceImage"]))


def _instance_group(parent: pulumi.Resource, name: str, request: FleetRequest, template: gcp.compute.InstanceTemplate,
                    placement: _Placement) -> gcp.compute.RegionInstanceGroupManager:
    plan, fleet = request.plan, request.plan.fleet
    assert fleet is not None
    autohealing = _health_check(gcp.compute.HealthCheck, f"{name}-autoheal", plan, AUTOHEALING_PROBE,
                                child_options(parent))
    grace_s = min(fleet.health_check_grace_s, MAX_INITIAL_DELAY_S)  # plan_problems refuses a longer grace
    return gcp.compute.RegionInstanceGroupManager(
        f"{name}-group", name=_gcp_name(name, "group"), description=f"inferstack {name}: inference servers",
        base_instance_name=_gcp_name(name, "server", max_length=BASE_INSTANCE_NAME_LENGTH),
        versions=[{"name": "primary", "instance_template": template.self_link_unique}],
        # No target_size: the autoscaler sets it (a target size here would fight it).
        distribution_policy_zones=placement.zones, distribution_policy_target_shape="EVEN",
        named_ports=[{"name": SERVING_PORT_NAME, "port": plan.serving.port}],
        auto_healing_policies={"health_check": autohealing.id, "initial_delay_sec": grace_s},
        # A repaired server takes the current template.
        instance_lifecycle_policy={"force_update_on_repair": "YES"},
        # A new template rolls out by the plan's surge (at least one new server per zone: a regional group takes 0
        # or at least its zone count), none of the old ones down until the new ones count; a new server counts once
        # its autohealing health check passes and the grace is over (min_ready_sec: "(Optional, Beta)" in the
        # provider's docs, so it goes through Compute Engine's beta API).
        update_policy={"type": "PROACTIVE", "minimal_action": "REPLACE", "replacement_method": "SUBSTITUTE",
                       "instance_redistribution_type": "PROACTIVE",
                       "max_surge_fixed": plan.rolling_update.surge,
                       "max_unavailable_fixed": 0, "min_ready_sec": grace_s},
        # Protected (production): Pulumi refuses to delete or replace the group, and with it every server.
        opts=fleet_options(parent, request.protected))


@dataclass(frozen=True)
class _FrontEnd:
    address: StrOutput
    """Where the API domain points: the load balancer's IP address."""
    backend: pulumi.Resource
    """The backend service (the autoscaler's utilization is its requests)."""
    canary_backend: pulumi.Resource | None = None
    """The canary group's backend service, when the plan has a canary."""


@dataclass(frozen=True)
class _Canary:
    """A canary group (`FleetRequest.canary`): its request (its plan) and its managed instance group."""

    request: FleetRequest
    group: gcp.compute.RegionInstanceGroupManager


def _routing(backend: pulumi.Resource, canary_backend: pulumi.Resource | None,
             request: FleetRequest) -> dict[str, Any]:
    """The URL map's default: the backend service; with a canary, weighted backend services (both Application Load
    Balancers take them in their URL map's defaultRouteAction; "If defaultRouteAction specifies any
    weightedBackendServices, defaultService must not be set", pulumi_gcp URLMap and RegionUrlMap docstrings)."""
    if request.canary is None or canary_backend is None:
        return {"default_service": backend.id}  # type: ignore[attr-defined]
    return {"default_route_action": {"weighted_backend_services": [
        {"backend_service": backend.id, "weight": request.canary.main_weight},  # type: ignore[attr-defined]
        {"backend_service": canary_backend.id, "weight": request.canary.weight}]}}  # type: ignore[attr-defined]


def _canary_autoscaler(parent: pulumi.Resource, name: str, canary: _Canary, backend: pulumi.Resource) -> None:
    """The canary group's autoscaler: the main group's settings, from the canary's plan."""
    fleet = canary.request.plan.fleet
    assert fleet is not None
    gcp.compute.RegionAutoscaler(
        f"{name}-canary-autoscaler", name=_gcp_name(name, "canary-autoscaler"), target=canary.group.self_link,
        description=f"inferstack {name} canary: {fleet.target_requests_per_s} requests/s per server",
        autoscaling_policy={
            "min_replicas": fleet.min_replicas, "max_replicas": fleet.max_replicas, "mode": "ON",
            "cooldown_period": fleet.scale_out_cooldown_s,
            "load_balancing_utilization": {"target": LB_UTILIZATION_TARGET},
            "scale_in_control": {"max_scaled_in_replicas": {"fixed": 1}, "time_window_sec": fleet.scale_in_cooldown_s}},
        opts=child_options(parent, depends_on=[backend]))


def _dashboard_json(plan: DeploymentPlan, title: str, scheme: str, backend_service: str,
                    group: str) -> dict[str, Any]:
    """The dashboard's body: one xyChart tile per panel, two to a row."""
    width = DASHBOARD_COLUMNS // 2
    return {"displayName": title, "mosaicLayout": {"columns": DASHBOARD_COLUMNS, "tiles": [
        {"xPos": (index % 2) * width, "yPos": (index // 2) * DASHBOARD_TILE_HEIGHT, "width": width,
         "height": DASHBOARD_TILE_HEIGHT, "widget": _dashboard_chart(panel, scheme, backend_service, group)}
        for index, panel in enumerate(dashboard_panels(plan))]}}


def _dashboard_chart(panel: Panel, scheme: str, backend_service: str, group: str) -> dict[str, Any]:
    """A panel's xyChart in one-minute alignments: the same filters as the alert conditions (`_alert_condition`)."""
    resource, prefix = LB_METRICS[scheme]
    backend = f'resource.type = "{resource}" AND resource.label.backend_target_name = "{backend_service}"'
    requests = f'{backend} AND metric.type = "{prefix}/request_count"'

    def series(filter_: str, aligner: str, reducer: str, legend: str) -> dict[str, Any]:
        return {"plotType": "LINE", "legendTemplate": legend, "timeSeriesQuery": {"timeSeriesFilter": {
            "filter": filter_, "aggregation": {"alignmentPeriod": "60s", "perSeriesAligner": aligner,
                                               "crossSeriesReducer": reducer}}}}

    if panel.kind is PanelKind.REQUESTS:
        data = [series(requests, "ALIGN_DELTA", "REDUCE_SUM", "requests")]
    elif panel.kind is PanelKind.LATENCY:
        latencies = f'{backend} AND metric.type = "{prefix}/backend_latencies"'
        data = [series(latencies, "ALIGN_DELTA", f"REDUCE_PERCENTILE_{p}", f"p{p}") for p in ("50", "95")]
    elif panel.kind is PanelKind.SERVER_ERRORS:
        data = [series(f"{requests} AND metric.label.response_code_class = 500", "ALIGN_DELTA", "REDUCE_SUM",
                       "server 5xx")]
    else:
        assert panel.kind is PanelKind.SERVERS, panel.kind
        size = (f'resource.type = "instance_group" AND resource.label.instance_group_name = "{group}" AND '
                'metric.type = "compute.googleapis.com/instance_group/size"')
        data = [series(size, "ALIGN_MEAN", "REDUCE_SUM", "servers in the group")]
    title = f"{panel.title} (ms)" if panel.kind is PanelKind.LATENCY else panel.title
    return {"title": title, "xyChart": {"dataSets": data, "thresholds": [
        {"label": label, "value": value} for label, value in panel.lines]}}


def _watched_condition(rule: AlarmRule, watched: Mapping[str, pulumi.Input[str]]) -> Any:
    """A rule's AlertPolicyCondition, once the backend service's and the group's names are known."""
    scheme = str(watched["scheme"])
    threshold = pulumi.Output.all(watched["backend_service"], watched["group"]).apply(
        lambda names: _alert_condition(rule, scheme, names[0], names[1]))
    return {"display_name": rule.kind.value, "condition_threshold": threshold}


def _alert_condition(rule: AlarmRule, scheme: str, backend_service: str, group: str) -> dict[str, Any]:
    """A rule's threshold condition (AlertPolicyConditionConditionThreshold), on one-minute alignments."""
    duration = f"{rule.minutes * 60}s"
    if rule.kind is AlarmKind.FLEET_AT_CEILING:
        return {"filter": f'resource.type = "instance_group" AND resource.label.instance_group_name = "{group}" AND '
                          'metric.type = "compute.googleapis.com/instance_group/size"',
                "comparison": "COMPARISON_GE", "threshold_value": rule.threshold, "duration": duration,
                "aggregations": [{"alignment_period": "60s", "per_series_aligner": "ALIGN_MIN"}]}
    resource, prefix = LB_METRICS[scheme]
    backend = f'resource.type = "{resource}" AND resource.label.backend_target_name = "{backend_service}"'
    if rule.kind is AlarmKind.LATENCY:
        # A distribution: its one-minute deltas merged across series, then their 95th percentile.
        return {"filter": f'{backend} AND metric.type = "{prefix}/backend_latencies"',
                "comparison": "COMPARISON_GT", "threshold_value": rule.threshold, "duration": duration,
                "aggregations": [{"alignment_period": "60s", "per_series_aligner": "ALIGN_DELTA",
                                  "cross_series_reducer": "REDUCE_PERCENTILE_95"}]}
    assert rule.kind is AlarmKind.ERROR_RATE, rule.kind
    # A ratio condition: 5xx answers over all answers, compared with a fraction.
    rate = [{"alignment_period": "60s", "per_series_aligner": "ALIGN_RATE", "cross_series_reducer": "REDUCE_SUM"}]
    requests = f'{backend} AND metric.type = "{prefix}/request_count"'
    return {"filter": f"{requests} AND metric.label.response_code_class = 500", "aggregations": rate,
            "denominator_filter": requests, "denominator_aggregations": rate,
            "comparison": "COMPARISON_GT", "threshold_value": rule.threshold / 100, "duration": duration}


def _agent_condition(rule: AlarmRule, group_label: str) -> dict[str, Any]:
    """An agent rule's threshold condition on the Ops Agent's metrics of one group's servers, per server (and GPU),
    on one-minute alignments. Missing data changes nothing (EVALUATION_MISSING_DATA_NO_OP): the conditions are per
    server, so ACTIVE would open an incident for every server the autoscaler deletes, and a server whose agent never
    ran has no series to miss."""
    # Verify: metadata.user_labels."KEY" selects gce_instance series by the instance's labels (Monitoring filters).
    servers = f'resource.type = "gce_instance" AND metadata.user_labels."{GROUP_LABEL}" = "{group_label}"'
    common = {"comparison": "COMPARISON_GT", "duration": f"{rule.minutes * 60}s",
              "evaluation_missing_data": "EVALUATION_MISSING_DATA_NO_OP"}
    if rule.kind is AlarmKind.DISK:
        return {**common, "threshold_value": rule.threshold,
                # Snap packages' squashfs loop mounts are always 100 % used (Ubuntu images): not the server's disks.
                # Verify: NOT ... = starts_with(...) in Monitoring filters.
                "filter": f'{servers} AND metric.type = "{DISK_PERCENT_METRIC}" AND metric.label.state = "used" '
                          'AND NOT metric.label.device = starts_with("/dev/loop")',
                "aggregations": [{"alignment_period": "60s", "per_series_aligner": "ALIGN_MEAN",
                                  "cross_series_reducer": "REDUCE_MAX",
                                  "group_by_fields": ["resource.label.instance_id"]}]}
    assert rule.kind is AlarmKind.GPU_MEMORY, rule.kind
    # A ratio condition: each GPU's used bytes over its used and free bytes, compared with a fraction.
    per_gpu = [{"alignment_period": "60s", "per_series_aligner": "ALIGN_MEAN", "cross_series_reducer": "REDUCE_SUM",
                "group_by_fields": ["resource.label.instance_id", "metric.label.gpu_number"]}]
    memory = f'{servers} AND metric.type = "{GPU_MEMORY_METRIC}"'
    return {**common, "threshold_value": rule.threshold / 100,
            "filter": f'{memory} AND metric.label.memory_state = "used"', "aggregations": per_gpu,
            "denominator_filter": memory, "denominator_aggregations": per_gpu}


def _external_load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                            group: gcp.compute.RegionInstanceGroupManager, placement: _Placement,
                            canary: _Canary | None = None) -> _FrontEnd:
    """A global external Application Load Balancer (EXTERNAL_MANAGED): HTTPS on 443 with a Google-managed
    certificate, HTTP on 80 only redirecting; the same pattern as the static assets' CDN, separate resources."""
    opts, plan, labels = child_options(parent), request.plan, gcp_labels(request.tags)
    health = _health_check(gcp.compute.HealthCheck, f"{name}-lb-health", plan, LB_PROBE, opts)
    sources = armor_sources(request)
    armor = gcp.compute.SecurityPolicy(
        f"{name}-armor", name=_gcp_name(name, "armor"), type="CLOUD_ARMOR", description=ARMOR_DESCRIPTION,
        rules=[gcp.compute.SecurityPolicyRuleArgs(
            action=rule.action, priority=rule.priority, description=rule.description,
            match=gcp.compute.SecurityPolicyRuleMatchArgs(versioned_expr="SRC_IPS_V1", config=(
                gcp.compute.SecurityPolicyRuleMatchConfigArgs(src_ip_ranges=rule.sources))))
            for rule in armor_rules(sources)], opts=opts) if sources is not None else None
    backend = _backend_service(gcp.compute.BackendService, name, request, group, "EXTERNAL_MANAGED", health, armor,
                               opts)
    canary_backend = _backend_service(gcp.compute.BackendService, f"{name}-canary", canary.request,
                                      canary.group, "EXTERNAL_MANAGED", health, armor, opts) if canary else None
    # The endpoint's address (its domain's DNS points at it) and its forwarding rules are protected with the group.
    kept = fleet_options(parent, request.protected)
    address = gcp.compute.GlobalAddress(f"{name}-lb-address", name=_gcp_name(name, "lb-address"), ip_version="IPV4",
                                        labels=labels, opts=kept)
    certificate = gcp.compute.ManagedSslCertificate(
        f"{name}-api-certificate", name=_gcp_name(name, "api-certificate"),
        managed={"domains": [request.api_domain]}, opts=opts)
    tls = gcp.compute.SSLPolicy(f"{name}-api-tls", name=_gcp_name(name, "api-tls"), profile="MODERN",
                                min_tls_version="TLS_1_2", opts=opts)
    urls = gcp.compute.URLMap(f"{name}-api-urls", name=_gcp_name(name, "api-urls"),
                              **_routing(backend, canary_backend, request), opts=opts)
    https = gcp.compute.TargetHttpsProxy(
        f"{name}-api-https", name=_gcp_name(name, "api-https"), url_map=urls.id, ssl_certificates=[certificate.id],
        ssl_policy=tls.id, opts=opts)
    redirect = gcp.compute.URLMap(f"{name}-api-redirect", name=_gcp_name(name, "api-redirect"),
                                  default_url_redirect=HTTPS_REDIRECT, opts=opts)
    http = gcp.compute.TargetHttpProxy(f"{name}-api-http", name=_gcp_name(name, "api-http"), url_map=redirect.id,
                                       opts=opts)
    for port, proxy in (("443", https), ("80", http)):
        gcp.compute.GlobalForwardingRule(
            f"{name}-api-{port}", name=_gcp_name(name, f"api-{port}"), target=proxy.id, ip_address=address.id,
            port_range=port, ip_protocol="TCP", load_balancing_scheme="EXTERNAL_MANAGED", labels=labels, opts=kept)
    # The certificate is issued once the domain's A record points at the address: say which one.
    address.address.apply(lambda ip: pulumi.log.info(
        f"{name}: point the DNS A record of {request.api_domain} at {ip}; the Google-managed certificate is issued "
        f"after that (up to an hour); https://{request.api_domain} serves once it is active", resource=parent))
    return _FrontEnd(address=address.address, backend=backend, canary_backend=canary_backend)


def _internal_load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                            group: gcp.compute.RegionInstanceGroupManager, placement: _Placement,
                            canary: _Canary | None = None) -> _FrontEnd:
    """A regional internal Application Load Balancer (INTERNAL_MANAGED) on an address of the load balancer's
    subnetwork: HTTPS on 443 with a Certificate Manager certificate that Google issues once a DNS authorization
    record exists (a private address gives Google nothing to reach), HTTP on 80 only redirecting."""
    opts, plan, labels, region = child_options(parent), request.plan, gcp_labels(request.tags), placement.region
    health = _health_check(gcp.compute.RegionHealthCheck, f"{name}-lb-health", plan, LB_PROBE, opts)
    # Private callers only (an internal load balancer has no public CIDR to admit): never the whole internet.
    armor = gcp.compute.RegionSecurityPolicy(
        f"{name}-armor", name=_gcp_name(name, "armor"), type="CLOUD_ARMOR", description=ARMOR_DESCRIPTION,
        rules=[gcp.compute.RegionSecurityPolicyRuleArgs(
            action=rule.action, priority=rule.priority, description=rule.description,
            match=gcp.compute.RegionSecurityPolicyRuleMatchArgs(versioned_expr="SRC_IPS_V1", config=(
                gcp.compute.RegionSecurityPolicyRuleMatchConfigArgs(src_ip_ranges=rule.sources))))
            for rule in armor_rules(armor_sources(request) or [request.network_cidr])], opts=opts)
    backend = _backend_service(gcp.compute.RegionBackendService, name, request, group, "INTERNAL_MANAGED", health,
                               armor, opts)
    canary_backend = _backend_service(gcp.compute.RegionBackendService, f"{name}-canary", canary.request,
                                      canary.group, "INTERNAL_MANAGED", health, armor, opts) if canary else None
    # The forwarding rules need the network's proxy-only subnetwork (one per network and region): say so clearly.
    subnetwork = pulumi.Output.all(request.load_balancer_subnet_ids[0], _proxy_only_ranges(parent, request.network_id),
                                   region).apply(lambda values: _with_proxy_only(*values))
    # One address for both rules, as Google's HTTP-to-HTTPS redirect guide for regional internal Application Load
    # Balancers reserves it: purpose SHARED_LOADBALANCER_VIP, in the load balancer's subnetwork. (verify) pulumi_gcp's
    # Address docstring lists `subnetwork` for the GCE_ENDPOINT and DNS_RESOLVER purposes only.
    kept = fleet_options(parent, request.protected)  # the address and forwarding rules, as the external one's
    address = gcp.compute.Address(
        f"{name}-lb-address", name=_gcp_name(name, "lb-address"), address_type="INTERNAL",
        purpose="SHARED_LOADBALANCER_VIP", subnetwork=subnetwork, labels=labels, opts=kept)
    authorization = gcp.certificatemanager.DnsAuthorization(
        f"{name}-api-dns-auth", name=_gcp_name(name, "api-dns-auth"), domain=request.api_domain, location=region,
        type="PER_PROJECT_RECORD", labels=labels, opts=opts)
    certificate = gcp.certificatemanager.Certificate(
        f"{name}-api-certificate", name=_gcp_name(name, "api-certificate"), location=region, labels=labels,
        managed={"domains": [request.api_domain], "dns_authorizations": [authorization.id]}, opts=opts)
    tls = gcp.compute.RegionSslPolicy(f"{name}-api-tls", name=_gcp_name(name, "api-tls"), profile="MODERN",
                                      min_tls_version="TLS_1_2", opts=opts)
    urls = gcp.compute.RegionUrlMap(f"{name}-api-urls", name=_gcp_name(name, "api-urls"),
                                    **_routing(backend, canary_backend, request), opts=opts)
    https = gcp.compute.RegionTargetHttpsProxy(
        f"{name}-api-https", name=_gcp_name(name, "api-https"), url_map=urls.id,
        certificate_manager_certificates=[certificate.id], ssl_policy=tls.id, opts=opts)
    redirect = gcp.compute.RegionUrlMap(f"{name}-api-redirect", name=_gcp_name(name, "api-redirect"),
                                        default_url_redirect=HTTPS_REDIRECT, opts=opts)
    http = gcp.compute.RegionTargetHttpProxy(f"{name}-api-http", name=_gcp_name(name, "api-http"),
                                             url_map=redirect.id, opts=opts)
    for port, proxy in (("443", https), ("80", http)):
        gcp.compute.ForwardingRule(
            f"{name}-api-{port}", name=_gcp_name(name, f"api-{port}"), target=proxy.id, ip_address=address.id,
            port_range=port, ip_protocol="TCP", load_balancing_scheme="INTERNAL_MANAGED", network=request.network_id,
            subnetwork=subnetwork, labels=labels, opts=kept)
    pulumi.Output.all(address.address, authorization.dns_resource_records).apply(lambda values: pulumi.log.info(
        f"{name}: point the DNS A record of {request.api_domain} (a private zone your callers resolve) at "
        f"{values[0]}, and add {_dns_records(values[1])} for the certificate: Google issues it once that record "
        "resolves", resource=parent))
    return _FrontEnd(address=address.address, backend=backend, canary_backend=canary_backend)


def _with_proxy_only(subnetwork: str, proxy_ranges: Sequence[str], region: str) -> str:
    if not proxy_ranges:
        raise input_error("network_id", f"has no proxy-only subnetwork in {region}, which an internal Application "
                          "Load Balancer needs", fix=f"create one: gcloud compute networks subnets create proxy-only "
                          f"--purpose={PROXY_ONLY_PURPOSE} --role=ACTIVE --region={region} --network=<network> "
                          "--range=<a free /23>, or let inferstack create the network")
    return subnetwork


def _dns_records(records: Sequence[Any]) -> str:
    shown = [f"{_field(r, 'type')} {_field(r, 'name')} -> {_field(r, 'data')}" for r in records or []]
    return ", ".join(shown) or "the DNS authorization record (gcloud certificate-manager dns-authorizations describe)"


HealthCheckType = TypeVar("HealthCheckType", gcp.compute.HealthCheck, gcp.compute.RegionHealthCheck)


def _health_check(kind: type[HealthCheckType], resource_name: str, plan: DeploymentPlan, probe: Probe,
                  opts: pulumi.ResourceOptions) -> HealthCheckType:
    """An HTTP check of the readiness path on the serving port (the gateway answers it without an API key)."""
    return kind(resource_name, name=_gcp_name(resource_name), description=f"inferstack {resource_name}",
                http_health_check={"port": plan.serving.port, "request_path": plan.serving.health_path},
                check_interval_sec=probe.interval_s, timeout_sec=probe.timeout_s,
                healthy_threshold=probe.healthy_after, unhealthy_threshold=probe.unhealthy_after, opts=opts)


BackendServiceType = TypeVar("BackendServiceType", gcp.compute.BackendService, gcp.compute.RegionBackendService)


def _backend_service(kind: type[BackendServiceType], role: str, request: FleetRequest,
                     group: gcp.compute.RegionInstanceGroupManager, scheme: str, health: pulumi.CustomResource,
                     armor: pulumi.CustomResource | None, opts: pulumi.ResourceOptions) -> BackendServiceType:
    """The load balancer's backend service (global or regional) for one group, `role` the main one or the canary:
    its own plan's rate and timeout, the load balancer's health check and Cloud Armor policy, every request logged."""
    plan = request.plan
    return kind(
        f"{role}-backend", name=_gcp_name(role, "backend"), load_balancing_scheme=scheme,
        health_checks=health.id, security_policy=armor.id if armor else None,
        backends=[{"group": group.instance_group, "balancing_mode": "RATE", "capacity_scaler": 1.0,
                   "max_rate_per_instance": _max_rate(request)}],
        protocol="HTTP", port_name=SERVING_PORT_NAME, timeout_sec=plan.request_timeout_s,
        connection_draining_timeout_sec=_draining_s(plan), description=_backend_description(role, plan),
        log_config=LB_REQUEST_LOG, opts=opts)


def _max_rate(request: FleetRequest) -> float:
    """A server's backend capacity (balancing mode RATE): the plan's target / LB_UTILIZATION_TARGET requests per
    second, which the autoscaler's utilization target turns back into the plan's target."""
    assert request.plan.fleet is not None
    return max_rate_per_instance(request.plan.fleet.target_requests_per_s)


def max_rate_per_instance(target_requests_per_s: float) -> float:
    return round(target_requests_per_s / LB_UTILIZATION_TARGET, 4)


def _draining_s(plan: DeploymentPlan) -> int:
    """A server that leaves the group (scale-in, rolling update) finishes what it streams: the request timeout."""
    return min(plan.request_timeout_s, MAX_DRAINING_S)


def _backend_description(name: str, plan: DeploymentPlan) -> str:
    # The backend service's timeout_sec is the whole response's, a streamed answer included (default 30 s).
    return f"inferstack {name}: {plan.model.name} on port {plan.serving.port}, {plan.request_timeout_s} s per request"


HTTPS_REDIRECT: gcp.compute.URLMapDefaultUrlRedirectArgsDict = {
    "https_redirect": True, "strip_query": False, "redirect_response_code": "MOVED_PERMANENTLY_DEFAULT"}
ARMOR_DESCRIPTION = "inferstack: the allowed callers only"


@dataclass(frozen=True)
class ArmorRule:
    action: str
    priority: int
    sources: Sequence[pulumi.Input[str]]
    description: str


def armor_sources(request: FleetRequest) -> list[pulumi.Input[str]] | None:
    """Who may call the endpoint, for Cloud Armor: the allowed CIDRs, or the network only; None for the whole
    internet (no policy)."""
    if any(ipaddress.ip_network(cidr).prefixlen == 0 for cidr in request.allowed_cidrs):
        return None
    return list(request.allowed_cidrs) or [request.network_cidr]


def armor_rules(sources: Sequence[pulumi.Input[str]]) -> list[ArmorRule]:
    """Allow each group of ten sources, deny (403) everything else: the default rule Cloud Armor requires."""
    chunks = [sources[i:i + ARMOR_RANGES_PER_RULE] for i in range(0, len(sources), ARMOR_RANGES_PER_RULE)]
    allow = [ArmorRule("allow", ARMOR_ALLOW_PRIORITY + index, list(chunk), "allowed callers")
             for index, chunk in enumerate(chunks)]
    return [*allow, ArmorRule("deny(403)", ARMOR_DEFAULT_PRIORITY, ["*"], "everyone else")]


#### Helpers: offline preview ####

PREVIEW_PROJECT = "inferstack-preview"
PREVIEW_PROJECT_NUMBER = "123456789012"
PREVIEW_REGION = "us-central1"


def _resource_name(c: PreviewContext) -> str:
    """The explicit name, or the provider's autoname (name + random suffix), imitated."""
    return str(c.inputs.get("name") or f"{c.name}-{c.digest[:7]}")


def _path(c: PreviewContext, collection: str, *, regional: bool = False) -> str:
    scope = f"regions/{c.region}" if regional else "global"
    return f"projects/{c.account}/{scope}/{collection}/{_resource_name(c)}"


def _preview_project() -> str:
    return pulumi.Config("gcp").get("project") or _env(("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT")) or PREVIEW_PROJECT


def _global(collection: str) -> PreviewResource:
    def make(c: PreviewContext) -> tuple[str, dict[str, Any]]:
        path = _path(c, collection)
        return path, {"name": _resource_name(c), "selfLink": f"https://www.googleapis.com/compute/v1/{path}"}
    return make


def _regional(collection: str) -> PreviewResource:
    def make(c: PreviewContext) -> tuple[str, dict[str, Any]]:
        path = _path(c, collection, regional=True)
        return path, {"name": _resource_name(c), "region": c.region,
                      "selfLink": f"https://www.googleapis.com/compute/v1/{path}"}
    return make


def _template_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    # name_prefix + a timestamp and a counter, as the provider names it; selfLinkUnique pins this very template.
    name = f"{c.inputs.get('namePrefix', c.name)}20260101000000{int(c.digest[:6], 16) % 10**8:08d}"
    path = f"projects/{c.account}/global/instanceTemplates/{name}"
    return path, {"name": name, "selfLink": f"https://www.googleapis.com/compute/v1/{path}",
                  "selfLinkUnique": f"{path}?uniqueId={int(c.digest[:15], 16)}"}


def _group_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    path, outputs = _regional("instanceGroupManagers")(c)
    group = f"https://www.googleapis.com/compute/v1/projects/{c.account}/regions/{c.region}/instanceGroups/" \
            f"{_resource_name(c)}"
    return path, {**outputs, "instanceGroup": group}


def _dns_authorization_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    domain = c.inputs["domain"]
    return f"projects/{c.account}/locations/{c.inputs.get('location', 'global')}/dnsAuthorizations/" \
           f"{_resource_name(c)}", {"dnsResourceRecords": [{
               "name": f"_acme-challenge_{c.digest[:16]}.{domain}.", "type": "CNAME",
               "data": f"{c.digest[16:24]}-{c.digest[24:28]}-{c.digest[28:32]}-{c.digest[32:36]}-{c.digest[36:48]}"
                       f".4.authorize.certificatemanager.goog."}]}


def _subnetwork_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    path = _path(c, "subnetworks", regional=True)
    return path, {"name": _resource_name(c), "region": c.region, "gatewayAddress": "10.64.0.1",
                  "selfLink": f"https://www.googleapis.com/compute/v1/{path}"}


def _bucket_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    name = _resource_name(c)
    return name, {"name": name, "url": f"gs://{name}", "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}"}


def _account_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    email = f"{c.inputs['accountId']}@{c.account}.iam.gserviceaccount.com"
    return f"projects/{c.account}/serviceAccounts/{email}", {
        "email": email, "member": f"serviceAccount:{email}", "uniqueId": str(int(c.digest[:15], 16))}


def _secret_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    return f"projects/{c.account}/secrets/{c.inputs['secretId']}", {
        "name": f"projects/{PREVIEW_PROJECT_NUMBER}/secrets/{c.inputs['secretId']}"}


def _instance_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    zone = c.inputs.get("zone", f"{c.region}-a")
    interfaces = [{**nic, "networkIp": c.private_ip,
                   "accessConfigs": [{**access, "natIp": c.public_ip}
                                     for access in nic.get("accessConfigs", [])]}
                  for nic in c.inputs.get("networkInterfaces", [])]
    return f"projects/{c.account}/zones/{zone}/instances/{_resource_name(c)}", {
        "name": _resource_name(c), "networkInterfaces": interfaces, "instanceId": str(int(c.digest[:15], 16)),
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{c.account}/zones/{zone}/instances/"
                    f"{_resource_name(c)}"}


def _iam_member_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    target = c.inputs.get("bucket") or c.inputs.get("secretId") or c.inputs.get("project")
    return f"{target}/{c.inputs['role']}/{c.inputs['member']}", {"etag": f"BwY{c.digest[:9]}"}


_PREVIEW_OUTPUTS: dict[str, PreviewResource] = {
    "gcp:compute/network:Network": _global("networks"),
    "gcp:compute/subnetwork:Subnetwork": _subnetwork_outputs,
    "gcp:compute/firewall:Firewall": _global("firewalls"),
    "gcp:storage/bucket:Bucket": _bucket_outputs,
    "gcp:storage/bucketIAMMember:BucketIAMMember": _iam_member_outputs,
    "gcp:serviceaccount/account:Account": _account_outputs,
    "gcp:secretmanager/secret:Secret": _secret_outputs,
    "gcp:secretmanager/secretVersion:SecretVersion": lambda c: (f"{c.inputs['secret']}/versions/1", {
        "name": f"{c.inputs['secret']}/versions/1", "version": "1"}),
    "gcp:secretmanager/secretIamMember:SecretIamMember": _iam_member_outputs,
    "gcp:projects/iAMMember:IAMMember": _iam_member_outputs,
    # The servers' logs: their bucket, the sink to it, the _Default bucket's exclusion (Cloud Logging API paths).
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": lambda c: (
        f"projects/{c.inputs['project']}/locations/{c.inputs['location']}/buckets/{c.inputs['bucketId']}", {
            "name": f"projects/{c.inputs['project']}/locations/{c.inputs['location']}/buckets/{c.inputs['bucketId']}",
            "lifecycleState": "ACTIVE"}),
    "gcp:logging/projectSink:ProjectSink": lambda c: (f"projects/{c.inputs['project']}/sinks/{c.inputs['name']}", {
        "writerIdentity": "serviceAccount:cloud-logs@system.gserviceaccount.com"}),
    "gcp:logging/projectExclusion:ProjectExclusion": lambda c: (
        f"projects/{c.inputs['project']}/exclusions/{c.inputs['name']}", {}),
    "gcp:compute/backendBucket:BackendBucket": _global("backendBuckets"),
    "gcp:compute/globalAddress:GlobalAddress": lambda c: (_path(c, "addresses"), {
        "name": _resource_name(c), "address": f"198.51.100.{int(c.digest[:4], 16) % 254 + 1}"}),  # RFC 5737
    "gcp:compute/managedSslCertificate:ManagedSslCertificate": _global("sslCertificates"),
    "gcp:compute/sSLPolicy:SSLPolicy": _global("sslPolicies"),
    "gcp:compute/uRLMap:URLMap": _global("urlMaps"),
    "gcp:compute/targetHttpsProxy:TargetHttpsProxy": _global("targetHttpsProxies"),
    "gcp:compute/globalForwardingRule:GlobalForwardingRule": _global("forwardingRules"),
    "gcp:compute/instance:Instance": _instance_outputs,
    "gcp:redis/instance:Instance": lambda c: (f"projects/{c.account}/locations/{c.region}/instances/{c.name}", {
        "host": c.private_ip, "port": 6378, "reservedIpRange": f"10.200.{int(c.digest[:2], 16)}.0/29",
        "authString": f"preview-{c.digest[:32]}",
        "serverCaCerts": [{"cert": "-----BEGIN CERTIFICATE-----\nUFJFVklFVw==\n-----END CERTIFICATE-----\n"}]}),
    # A fleet: Cloud NAT, the group, its autoscaler and its load balancer.
    "gcp:compute/router:Router": _regional("routers"),
    "gcp:compute/routerNat:RouterNat": lambda c: (
        f"{c.account}/{c.region}/{c.inputs.get('router')}/{_resource_name(c)}", {"name": _resource_name(c)}),
    "gcp:compute/instanceTemplate:InstanceTemplate": _template_outputs,
    "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager": _group_outputs,
    "gcp:compute/regionAutoscaler:RegionAutoscaler": _regional("autoscalers"),
    "gcp:compute/healthCheck:HealthCheck": _global("healthChecks"),
    # An alert policy's name is its path, with an id Cloud Monitoring assigns (a number).
    "gcp:monitoring/dashboard:Dashboard": lambda c: (f"projects/{c.account}/dashboards/{c.digest[:32]}", {}),
    "gcp:monitoring/alertPolicy:AlertPolicy": lambda c: (
        f"projects/{c.account}/alertPolicies/{int(c.digest[:15], 16)}",
        {"name": f"projects/{c.account}/alertPolicies/{int(c.digest[:15], 16)}"}),
    "gcp:compute/regionHealthCheck:RegionHealthCheck": _regional("healthChecks"),
    "gcp:compute/securityPolicy:SecurityPolicy": _global("securityPolicies"),
    "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy": _regional("securityPolicies"),
    "gcp:compute/backendService:BackendService": _global("backendServices"),
    "gcp:compute/regionBackendService:RegionBackendService": _regional("backendServices"),
    "gcp:compute/targetHttpProxy:TargetHttpProxy": _global("targetHttpProxies"),
    "gcp:compute/regionUrlMap:RegionUrlMap": _regional("urlMaps"),
    "gcp:compute/regionSslPolicy:RegionSslPolicy": _regional("sslPolicies"),
    "gcp:compute/regionTargetHttpsProxy:RegionTargetHttpsProxy": _regional("targetHttpsProxies"),
    "gcp:compute/regionTargetHttpProxy:RegionTargetHttpProxy": _regional("targetHttpProxies"),
    "gcp:compute/forwardingRule:ForwardingRule": _regional("forwardingRules"),
    "gcp:compute/address:Address": lambda c: (_path(c, "addresses", regional=True), {
        "name": _resource_name(c), "address": c.private_ip}),
    "gcp:certificatemanager/dnsAuthorization:DnsAuthorization": _dns_authorization_outputs,
    "gcp:certificatemanager/certificate:Certificate": lambda c: (
        f"projects/{c.account}/locations/{c.inputs.get('location', 'global')}/certificates/{_resource_name(c)}", {}),
}


def _preview_machine_types(a: dict[str, Any], c: PreviewContext) -> dict[str, Any]:
    # Every zone offers every type in the preview; Arm types are the t2a/c4a/n4a series. A deployment asks GCE.
    name = str(a.get("filter", "")).removeprefix("name = ").strip()
    arm = name.split("-")[0] in {"t2a", "c4a", "n4a", "a4x"}
    return {"zone": a.get("zone"), "filter": a.get("filter"), "project": c.account, "id": f"{a.get('zone')}/{name}",
            "machineTypes": [{"name": name, "architecture": "ARM64" if arm else "X86_64", "description": name,
                              "guestCpus": 0, "memoryMb": 0, "isSharedCpus": False, "maximumPersistentDisks": 128,
                              "maximumPersistentDisksSizeGb": 263168, "selfLink": "", "accelerators": [],
                              "bundledLocalSsds": [], "deprecateds": []}]}


def _preview_subnetworks(a: dict[str, Any], c: PreviewContext) -> dict[str, Any]:
    """A network's proxy-only subnetwork (the range create_network gives it), or, for a brought network, which the
    preview cannot see, a placeholder subnetwork."""
    query = str(a.get("filter", ""))
    if PROXY_ONLY_PURPOSE in query:
        found = {"ipCidrRange": PROXY_ONLY_CIDR, "name": "proxy-only", "privateIpGoogleAccess": False}
    else:
        found = {"ipCidrRange": "10.0.0.0/20", "name": "brought", "privateIpGoogleAccess": True}
    network = re.search(r'networks/([^"\s]+)', query)
    name = network[1] if network else "brought"
    return {"subnetworks": [{**found, "network": f"https://www.googleapis.com/compute/v1/projects/{c.account}/global/"
                             f"networks/{name}", "networkName": name, "networkSelfLink": "", "selfLink": "",
                             "description": ""}],
            "id": "subnetworks", "project": c.account, "region": c.region, "filter": a.get("filter")}


_PREVIEW_INVOKES: dict[str, PreviewLookup] = {
    "gcp:organizations/getClientConfig:getClientConfig": lambda a, c: {
        "project": c.account, "region": c.region,
        "zone": pulumi.Config("gcp").get("zone") or _env(ZONE_ENV) or f"{c.region}-a",
        "id": f"projects/{c.account}/regions/{c.region}", "accessToken": "", "defaultLabels": {}},
    "gcp:organizations/getProject:getProject": lambda a, c: {
        "projectId": c.account, "number": PREVIEW_PROJECT_NUMBER, "name": c.account, "id": f"projects/{c.account}"},
    "gcp:compute/getZones:getZones": lambda a, c: {
        "names": [f"{c.region}-{zone}" for zone in "abcf"], "region": c.region, "project": c.account,
        "status": a.get("status"), "id": f"projects/{c.account}/regions/{c.region}"},
    "gcp:compute/getMachineTypes:getMachineTypes": _preview_machine_types,
    # The image size is a placeholder smaller than any plan's disk, so the plan decides the preview.
    "gcp:compute/getImage:getImage": lambda a, c: {
        "family": a["family"], "project": a["project"], "name": f"{a['family']}-v20260101", "diskSizeGb": 10,
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{a['project']}/global/images/"
                    f"{a['family']}-v20260101", "id": f"projects/{a['project']}/global/images/{a['family']}-v20260101",
        "status": "READY"},
    "gcp:compute/getSubnetworks:getSubnetworks": _preview_subnetworks,
}

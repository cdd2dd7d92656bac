"""Google Cloud provisioning (pulumi_gcp 10.x): VPC network, firewall rules, GCS + Cloud CDN, Secret Manager, a
service account, Compute Engine: loose servers, or a fleet (a regional managed instance group behind an HTTPS
Application Load Balancer, scaled by a regional autoscaler).

This module is the backend: what the cloud can do (its capabilities, with reasons), the forms of the ids a user
brings, what it refuses before anything is created, and the `CloudBackend` methods, in the order and under the
banners of `CloudBackend` (inferstack/components/backend.py), each handing its request to the module of its concern:

    network.py        the VPC network, its subnetworks and Cloud NAT, the firewall rules on the servers' network tag
    storage.py        private buckets, the static assets' Cloud CDN, the boot bundle
    identity.py       Secret Manager, the servers' service account and its grants
    servers.py        what every server is built from (machine series and boot disk, image, zones, GPUs, scheduling,
                      hardened metadata), and loose servers one by one
    fleet.py          the regional managed instance group from its template, a canary's group, the autoscalers
    load_balancer.py  the fleet's Application Load Balancer (external or internal): health checks, backend services,
                      Cloud Armor, a canary's weighted routing
    cache.py          Memorystore for Redis
    observability.py  the servers' log bucket, the alert policies, the dashboard
    preview.py        the offline preview's answers
    naming.py         names unique to the project, stack and component; tags as labels
    provider.py       the provider's region (config, environment, client config) and its results' fields
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import pulumi

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
from inferstack.components.gcp import (
    cache,
    fleet,
    identity,
    network,
    observability,
    preview,
    provider,
    servers,
    storage,
)
from inferstack.components.gcp.cache import CACHE_MEMORY_GB, CACHE_REDIS_VERSION
from inferstack.components.gcp.fleet import MAX_INITIAL_DELAY_S
from inferstack.components.gcp.servers import BOOT_DISKS, machine_series
from inferstack.components.observability import AlarmKind
from inferstack.errors import Problem
from inferstack.plan import DeploymentPlan

# Names the user brings (BroughtIds): Compute Engine resource names and network tags are RFC 1035 labels; project
# ids are 6 to 30 lowercase letters, digits and hyphens; a resource may be given by its self link.
RESOURCE_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
PROJECT_ID = r"[a-z][-a-z0-9]{4,28}[a-z0-9]"
SELF_LINK = r"(https://www\.googleapis\.com/compute/v1/)?"


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
        Capability.SPOT_ABOVE_FLOOR: spot_above_floor(
            "gcp", "a managed instance group's template has one provisioning model (STANDARD or SPOT): an on-demand "
                   "floor with spot above it needs a second, SPOT group behind the backend service whose autoscaler "
                   "starts from zero servers, and a group scaled on the load balancer's utilization gets no "
                   "utilization data while it has no server (the autoscaler's own status message, quoted in "
                   "spinnaker/spinnaker#2207): not built; a production workload's servers stay on-demand"),
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
        Capability.BAKED_IMAGE: baked_image(
            "gcp", "brought images only (startup.image: {gcp: projects/P/global/images/NAME}): Compute Engine "
                   "has no managed image build service comparable to EC2 Image Builder wired here"),
        Capability.MODEL_STREAMING: model_streaming(
            "gcp", "vLLM's streamer reads gs:// with Application Default Credentials, which on a VM come from the "
                   "metadata server the runtime is kept away from; a credential of its own limited to the model is "
                   "not built: the server downloads the weights"),
        Capability.WARM_POOL: warm_pool(
            "gcp", "a managed instance group's standby pool (standby_policy mode SCALE_OUT_POOL with "
                   "target_stopped_size, pulumi_gcp 10.2.0) is the equivalent, but a VM the group prepares for it "
                   "runs for initial_delay_sec as a member of the group behind the load balancer, and its boot could "
                   "tell it from a serving VM only by reading the group's managed instances (ManagedInstance."
                   "targetStatus STOPPED, Compute API), which the servers' account may not "
                   "(compute.instanceGroupManagers.get); not built until that read is granted and the window's "
                   "behaviour confirmed"),
        Capability.MULTI_NODE_REPLICAS: unsupported(
            "planned (sizing/nodes.py), not provisioned yet: a compact placement policy, GPUDirect networks, Ray "
            "units and the replica healed as one are still to be built, so a plan whose replica spans servers is "
            "refused before anything is created"),
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
        return provider.configured_region()

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
        return servers.create_servers(parent, name, request, provider=self.display_name)

    def create_fleet(self, parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
        return fleet.create_fleet(parent, name, request, provider=self.display_name)

    #### Monitoring ####

    def create_telemetry(self, parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
        return observability.create_telemetry(parent, name, request)

    def create_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
        return observability.create_alarms(parent, name, request, unwatched=self.unwatched_alarms)

    def create_dashboard(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> StrOutput:
        return observability.create_dashboard(parent, name, request)

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        return cache.create_cache(parent, name, request)

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return preview.preview_answers()

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
                "inferstack/components/gcp/servers.py from Google's machine-series page (\"Supported disk types\")"))
        if plan.fleet is not None and plan.fleet.health_check_grace_s > MAX_INITIAL_DELAY_S:
            problems.append(Problem(
                f"{field}.fleet.health_check_grace_s", f"exceeds the {MAX_INITIAL_DELAY_S} s a managed instance "
                "group's autohealing waits before judging a new server", value=plan.fleet.health_check_grace_s,
                fix="shorten the cold start (a machine type with local SSD, a smaller or quantised model, or a model "
                "bucket in the plan's region)"))
        return problems


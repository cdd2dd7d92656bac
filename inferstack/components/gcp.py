"""Google Cloud provisioning (pulumi_gcp 10.x): VPC network, firewall rules, GCS + Cloud CDN, Secret Manager, a
service account, Compute Engine.

Sections follow `CloudBackend` in `core.py`; every cloud module keeps the same order and banners.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
import pulumi_gcp as gcp

from inferstack.components.core import (
    ACCESS_LOG_DAYS,
    INCOMPLETE_UPLOAD_DAYS,
    INTERIM_FLEET,
    NONCURRENT_VERSION_DAYS,
    NONCURRENT_VERSIONS_KEPT,
    SUBNET_RANGES,
    WEB_EGRESS_PORTS,
    BundleRequest,
    Capability,
    CloudBackend,
    FirewallRequest,
    FirewallResult,
    IdentityRequest,
    IdentityResult,
    ModelStoreRequest,
    ModelStoreResult,
    NetworkRequest,
    NetworkResult,
    PreviewAnswers,
    PreviewContext,
    PreviewLookup,
    PreviewResource,
    SecretsRequest,
    SecretsResult,
    ServersRequest,
    ServersResult,
    StaticAssetsRequest,
    StaticAssetsResult,
    StrOutput,
    Support,
    checked_user_data,
    child_options,
    first_zones,
    invoke_options,
    nth,
    register_backend,
    server_options,
    slug,
    supported,
    unique_name,
    unsupported,
)
from inferstack.errors import Problem, input_error
from inferstack.plan import DeploymentPlan

#### Constants ####

# Subnetworks are regional on GCP: one serves every zone of the region, in the first range of NETWORK_CIDR.
SUBNET_CIDR = SUBNET_RANGES[0]

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

# The instance takes its service account with the cloud-platform scope; IAM grants (below) decide what it may do.
SERVICE_ACCOUNT_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]

# Egress: WEB_EGRESS_PORTS, and nothing else (a deny-all egress rule sits below the allow). The metadata server
# (DNS, NTP, tokens) is always reachable on GCP.
ALLOW_PRIORITY = 1000
DENY_EGRESS_PRIORITY = 65000

MODEL_READER_ROLE = "roles/storage.objectViewer"
SECRET_READER_ROLE = "roles/secretmanager.secretAccessor"

# Cloud Storage usage logs are written by this Google group; it needs to create objects in the logs bucket.
USAGE_LOG_WRITER = "group:cloud-storage-analytics@google.com"

# Cloud CDN private bucket access: the project's load-balancing service agent reads the assets bucket, which stays
# private. The agent exists once the project has a backend bucket, so the grant waits for ours.
LOAD_BALANCER_AGENT = "service-{number}@https-lb.iam.gserviceaccount.com"

# Private buckets answer with `Cache-Control: private`; FORCE_CACHE_ALL lets the CDN cache them anyway, which
# suits public static files. An hour at the edge and in browsers.
CDN_CACHE_TTL_S = 3600

# The provider's environment variables, in its own order (pulumi_gcp/config/vars.py).
REGION_ENV = ("GOOGLE_REGION", "GCLOUD_REGION", "CLOUDSDK_COMPUTE_REGION")
ZONE_ENV = ("GOOGLE_ZONE", "GCLOUD_ZONE", "CLOUDSDK_COMPUTE_ZONE")


@register_backend
class GcpBackend(CloudBackend):
    """Google Cloud."""

    cloud = "gcp"
    display_name = "Google Cloud"
    region_config_key = "gcp:region"
    capabilities: ClassVar[Mapping[Capability, Support]] = {
        Capability.METADATA_HARDENING: unsupported(
            "the GCE metadata server has no session tokens and no hop limit: it demands only the header "
            "`Metadata-Flavor: Google` and refuses requests that carry X-Forwarded-For, which stops an SSRF that "
            "controls a URL but not one that can set headers (legacy header-free endpoints are disabled with "
            "disable-legacy-endpoints); the boot script's host firewall lets only root reach its HTTP port (DNS "
            "stays open), for host processes and containers alike"),
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
        Capability.TERMINATION_PROTECTION: supported("Compute Engine deletion_protection"),
        Capability.DRIVER_READY_IMAGE: supported("Canonical's Ubuntu 22.04 accelerator image (NVIDIA 580, signed for "
                                                 "secure boot), looked up by image family"),
        Capability.LOCAL_NVME_CACHE: supported("machine types with bundled Local SSD (A2 Ultra, A3, -lssd) attach "
                                               "it as NVMe; the boot script uses it as the model cache"),
        Capability.SPOT_CAPACITY: supported("provisioning_model=SPOT; a preempted server stops and its boot "
                                            "service resumes when it starts again"),
        # Interim, until this cloud's fleet lands: a fleet's servers are created one by one (with a warning).
        Capability.MANAGED_FLEET: unsupported(INTERIM_FLEET),
        Capability.LOAD_BALANCER_TLS: unsupported(INTERIM_FLEET),
        Capability.REQUEST_AUTOSCALING: unsupported(INTERIM_FLEET),
    }
    assets_certificate = None  # a Google-managed certificate is issued for the domain

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
        return NetworkResult(network_id=network.id, subnet_ids=[subnet.id] * request.zones,
                             cidr_block=subnet.ip_cidr_range)

    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        # A VPC network has no range of its own: the smallest block that covers its subnetworks in the region.
        subnets = gcp.compute.get_subnetworks_output(
            filter=pulumi.Output.from_input(network_id).apply(_network_filter), opts=invoke_options(parent))
        return subnets.subnetworks.apply(lambda found: covering_cidr([_field(s, "ip_cidr_range") for s in found]))

    #### Firewall ####

    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
        opts = child_options(parent)
        # Rules target servers by this network tag, which create_servers puts on each instance.
        tag = _gcp_name(name, "server")
        rules = [_ingress(f"{name}-api-{label}", request, tag, request.serving_port, cidr, "inference API", opts)
                 for label, cidr in request.api_sources()]
        if request.metrics_port is not None:
            rules.append(_ingress(f"{name}-metrics", request, tag, request.metrics_port, request.network_cidr,
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
        # The email resolves only once every grant exists: a server that takes it can read its model from its
        # first boot.
        ready = pulumi.Output.all(account.email, model_read.id, *(grant.id for grant in secret_reads)).apply(
            lambda ids: ids[0])
        return IdentityResult(identity_id=account.email, attachment=ready)

    #### Compute ####

    def create_servers(self, parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
        plan = request.plan
        placement = _placement(parent, plan)
        image = gcp.compute.get_image_output(
            project=placement.architecture.apply(lambda arch: IMAGE_FAMILIES[(plan.device, arch)][0]),
            family=placement.architecture.apply(lambda arch: IMAGE_FAMILIES[(plan.device, arch)][1]),
            opts=invoke_options(parent))
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
                    "size": image.disk_size_gb.apply(lambda gib: max(gib or 0, plan.disk_gib))}},
                network_interfaces=[{"subnetwork": request.subnet_ids[index % len(request.subnet_ids)],
                                     "access_configs": [{}]}],  # an ephemeral public address, for egress
                tags=list(request.firewall_ids),
                service_account={"email": request.attachment, "scopes": SERVICE_ACCOUNT_SCOPES},
                metadata=metadata, scheduling=scheduling(plan), guest_accelerators=guest_accelerators(plan),
                shielded_instance_config={"enable_secure_boot": True, "enable_vtpm": True,
                                          "enable_integrity_monitoring": True},
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

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return PreviewAnswers(resources=_PREVIEW_OUTPUTS, lookups=_PREVIEW_INVOKES,
                              region=self.configured_region() or PREVIEW_REGION, account=_preview_project())

    #### Shared behaviour ####

    def plan_problems(self, plan: DeploymentPlan, *, field: str) -> list[Problem]:
        """A machine series whose boot disk type is not known (BOOT_DISKS) is refused: a wrong guess fails the
        server's creation after the rest of the stack exists."""
        series = machine_series(plan.instance_type)
        if series in BOOT_DISKS:
            return []
        return [Problem(field, f"uses machine series {series}, whose boot disk type inferstack does not know",
                        value=plan.instance_type, fix="plan another machine type, or add the series to BOOT_DISKS in "
                        "inferstack/components/gcp.py from Google's machine-series page (\"Supported disk types\")")]


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


def _ingress(resource_name: str, request: FirewallRequest, tag: str, port: int, cidr: pulumi.Input[str],
             purpose: str, opts: pulumi.ResourceOptions) -> gcp.compute.Firewall:
    return gcp.compute.Firewall(
        resource_name, name=_gcp_name(resource_name), network=request.network_id, direction="INGRESS",
        allows=[{"protocol": "tcp", "ports": [str(port)]}], source_ranges=[cidr], target_tags=[tag],
        priority=ALLOW_PRIORITY, description=purpose, opts=opts)


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
    target = c.inputs.get("bucket") or c.inputs.get("secretId")
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
    "gcp:compute/backendBucket:BackendBucket": _global("backendBuckets"),
    "gcp:compute/globalAddress:GlobalAddress": lambda c: (_path(c, "addresses"), {
        "name": _resource_name(c), "address": f"198.51.100.{int(c.digest[:4], 16) % 254 + 1}"}),  # RFC 5737
    "gcp:compute/managedSslCertificate:ManagedSslCertificate": _global("sslCertificates"),
    "gcp:compute/sSLPolicy:SSLPolicy": _global("sslPolicies"),
    "gcp:compute/uRLMap:URLMap": _global("urlMaps"),
    "gcp:compute/targetHttpsProxy:TargetHttpsProxy": _global("targetHttpsProxies"),
    "gcp:compute/globalForwardingRule:GlobalForwardingRule": _global("forwardingRules"),
    "gcp:compute/instance:Instance": _instance_outputs,
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
    # Lookups of brought resources: the preview cannot see them, so it answers with placeholders.
    "gcp:compute/getSubnetworks:getSubnetworks": lambda a, c: {
        "subnetworks": [{"ipCidrRange": "10.0.0.0/20", "name": "brought", "network": a.get("filter", ""),
                         "networkName": "brought", "networkSelfLink": "", "privateIpGoogleAccess": True,
                         "selfLink": "", "description": ""}], "id": "subnetworks", "project": c.account,
        "region": c.region, "filter": a.get("filter")},
}

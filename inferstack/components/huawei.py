"""Huawei Cloud provisioning (pulumi_huaweicloud 0.0.12): VPC + NAT, security group, OBS + CDN, CSMS, agency, ECS.

Sections follow `CloudBackend` in `core.py`; every cloud module keeps the same order and banners.

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
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
import pulumi_huaweicloud as hw

from inferstack.components.core import (
    ACCESS_LOG_DAYS,
    INCOMPLETE_UPLOAD_DAYS,
    INTERIM_FLEET,
    NETWORK_CIDR,
    NONCURRENT_VERSION_DAYS,
    SUBNET_RANGES,
    BundleRequest,
    Capability,
    CertificateRule,
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
    compressed_user_data,
    first_zones,
    invoke_options,
    nth,
    register_backend,
    server_options,
    supported,
    unique_name,
    unsupported,
)
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan

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


@register_backend
class HuaweiBackend(CloudBackend):
    """Huawei Cloud."""

    cloud = "huawei"
    display_name = "Huawei Cloud"
    region_config_key = "huaweicloud:region"
    capabilities: ClassVar[Mapping[Capability, Support]] = {
        Capability.METADATA_HARDENING: unsupported(
            "the ECS metadata service (169.254.169.254) has no session-token mode and pulumi_huaweicloud 0.0.12 "
            "has no metadata option; the boot script's host firewall lets only root reach its HTTP port (DNS stays "
            "open), for host processes and containers alike"),
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
            "pulumi_huaweicloud 0.0.12 ecs.Instance has no deletion-protection argument: protected servers carry "
            "Pulumi's protect only, which stops `pulumi up` and `pulumi destroy` but not the console or the API"),
        Capability.DRIVER_READY_IMAGE: supported(
            "the public 'Ubuntu 22.04 server 64bit with Tesla Driver' image where the region offers one for the "
            "flavor (IMS lookup); otherwise plain Ubuntu 22.04 and the bootstrap installs the driver"),
        Capability.LOCAL_NVME_CACHE: unsupported(
            "no Huawei flavor in inferstack's catalog has instance-local NVMe; the model cache lives on the "
            "encrypted system disk"),
        Capability.SPOT_CAPACITY: supported("ECS charging_mode=spot, at most the pay-per-use price"),
        # Interim, until this cloud's fleet lands: a fleet's servers are created one by one (with a warning).
        Capability.MANAGED_FLEET: unsupported(INTERIM_FLEET),
        Capability.LOAD_BALANCER_TLS: unsupported(INTERIM_FLEET),
        Capability.REQUEST_AUTOSCALING: unsupported(INTERIM_FLEET),
    }
    assets_certificate = CertificateRule(
        kind="the id of the domain's certificate in SCM (Cloud Certificate Manager)",
        pattern=r"scs\d{13}",  # the SCM API's certificate ids: "scs" and 13 digits, 16 characters
        example="scs1554192131150")

    #### Region ####

    def configured_region(self) -> str | None:
        # The provider's own order: stack config, then the environment (terraform-provider-huaweicloud).
        return pulumi.Config("huaweicloud").get("region") or os.environ.get("HW_REGION_NAME")

    #### Network ####

    def create_network(self, parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult:
        opts = child_options(parent)
        vpc = hw.vpc.Vpc(f"{name}-vpc", cidr=NETWORK_CIDR, description=f"inferstack {name}", tags=request.tags,
                         opts=opts)
        zones = _zones_offering(parent, request.instance_type, request.zones)
        subnets = [hw.vpc.Subnet(
            f"{name}-subnet-{index}", vpc_id=vpc.id, cidr=SUBNET_RANGES[index],
            # Huawei subnets route through their first address.
            gateway_ip=str(ipaddress.IPv4Network(SUBNET_RANGES[index]).network_address + 1),
            availability_zone=zones.apply(nth(index)),
            description=f"inferstack {name}, zone {index}", tags=request.tags, opts=opts)
            for index in range(request.zones)]
        _nat_egress(parent, name, vpc, subnets, request.tags)
        return NetworkResult(network_id=vpc.id, subnet_ids=[subnet.id for subnet in subnets], cidr_block=vpc.cidr)

    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        return _lookup(parent, VPC_LOOKUP, {"id": network_id}).apply(lambda vpc: str(vpc["cidr"]))

    #### Firewall ####

    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
        opts = child_options(parent)
        # Without delete_default_rules the group keeps Huawei's defaults: all egress, and all ingress from members.
        group = hw.vpc.Secgroup(
            f"{name}-sg", delete_default_rules=True,
            description="inferstack inference server: API to allowed networks, metrics inside the VPC",
            tags=request.tags, opts=opts)
        for label, cidr in request.api_sources():
            _rule(f"{name}-api-{label}", group, "ingress", "tcp", request.serving_port, cidr, "inference API", opts)
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
        disk_key = _lookup(parent, KEY_LOOKUP, {"keyAlias": EVS_DEFAULT_KEY_ALIAS}).apply(lambda key: str(key["keyId"]))
        user_data = checked_user_data(plan, request.user_data, _provider_region(parent), provider=self.display_name,
                                      encode=functools.partial(compressed_user_data,
                                                               limit_bytes=USER_DATA_LIMIT_BYTES, service="ECS"))
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

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return PreviewAnswers(resources=_PREVIEW_OUTPUTS, lookups=_PREVIEW_INVOKES,
                              region=self.configured_region() or PREVIEW_REGION, account=PREVIEW_PROJECT_ID,
                              unlisted_id=lambda c: _uuid(c.digest))


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


def _nat_egress(parent: pulumi.Resource, name: str, vpc: hw.vpc.Vpc, subnets: Sequence[hw.vpc.Subnet],
                tags: Mapping[str, str]) -> None:
    """Outbound internet for servers that have no public address: one NAT gateway, one SNAT rule per subnet."""
    opts = child_options(parent)
    gateway = hw.nat.Gateway(f"{name}-nat", vpc_id=vpc.id, subnet_id=subnets[0].id, spec=NAT_GATEWAY_SPEC,
                             description=f"inferstack {name}: egress for drivers, packages, models", tags=tags,
                             opts=opts)
    address = _eip(parent, f"{name}-nat-eip", tags)
    for index, subnet in enumerate(subnets):
        hw.nat.SnatRule(f"{name}-snat-{index}", nat_gateway_id=gateway.id, floating_ip_id=address.id,
                        subnet_id=subnet.id, description=f"inferstack {name}, zone {index}", opts=opts)


def _eip(parent: pulumi.Resource, resource: str, tags: Mapping[str, str]) -> hw.vpc.Eip:
    return hw.vpc.Eip(resource, publicip={"type": EIP_TYPE},
                      bandwidth={"share_type": "PER", "name": resource, "size": EIP_BANDWIDTH_MBIT_S,
                                 "charge_mode": "traffic"},
                      tags=tags, opts=child_options(parent))


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


def _named(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    """Resources whose name the program sets (agencies, custom policies, secrets): the name is part of the state."""
    return _uuid(c.digest), {"name": c.inputs.get("name") or f"{c.name}-{c.digest[:7]}"}


_PREVIEW_OUTPUTS: dict[str, PreviewResource] = {
    "huaweicloud:Vpc/vpc:Vpc": lambda c: (_uuid(c.digest), {"cidr": c.inputs["cidr"]}),
    "huaweicloud:Vpc/eip:Eip": lambda c: (_uuid(c.digest), {"address": c.public_ip}),
    "huaweicloud:Obs/bucket:Bucket": _bucket_outputs,
    "huaweicloud:Iam/role:Role": _named,
    "huaweicloud:Iam/agency:Agency": _named,
    "huaweicloud:Dew/secret:Secret": _named,
    "huaweicloud:Cdn/domain:Domain": lambda c: (_uuid(c.digest), {
        "cname": f"{c.inputs['name']}.c.cdnhwc1.com", "domainStatus": "online"}),
    "huaweicloud:Ecs/instance:Instance": _instance_outputs,
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
    # Lookups of brought resources: the preview cannot see them, so it answers with placeholders.
    "huaweicloud:Vpc/getVpc:getVpc": lambda a, c: {"id": a["id"], "cidr": "192.168.0.0/16", "region": c.region},
    "huaweicloud:Obs/getBuckets:getBuckets": lambda a, c: {
        "id": c.region, "buckets": [{"bucket": a["bucket"], "region": c.region, "storageClass": "STANDARD",
                                     "createdAt": "2025-01-01T00:00:00Z", "enterpriseProjectId": "0"}]},
}

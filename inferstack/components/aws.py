"""AWS provisioning (pulumi_aws 7.x): VPC, security group, S3 + CloudFront, SSM Parameter Store, IAM, EC2.

Sections follow `CloudBackend` in `core.py`; every cloud module keeps the same order and banners.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
import pulumi_aws as aws

from inferstack.components.core import (
    ACCESS_LOG_DAYS,
    INCOMPLETE_UPLOAD_DAYS,
    INTERIM_FLEET,
    NETWORK_CIDR,
    NONCURRENT_VERSION_DAYS,
    NONCURRENT_VERSIONS_KEPT,
    SUBNET_RANGES,
    WEB_EGRESS_PORTS,
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
    slug,
    supported,
    unique_name,
    unsupported,
)
from inferstack.plan import DeploymentPlan

#### Constants ####

# EC2 API limit: user data is at most 16 KB before base64 encoding. The cloud-config is sent gzip-compressed
# (cloud-init decompresses it), which is what keeps a full bootstrap under the limit.
USER_DATA_LIMIT_BYTES = 16 * 1024

# Hop limit 1: only the host reaches the metadata service; a container on a bridge network cannot borrow the
# server's credentials. The bootstrap therefore fetches the model and secrets on the host.
METADATA_HOP_LIMIT = 1

# Images, resolved at deploy time from public SSM parameters (AWS DLAMI guide "Finding the ID of a DLAMI";
# Canonical's Ubuntu parameters). Both are Ubuntu 22.04, so the bootstrap targets one OS.
IMAGE_PARAMETERS: Mapping[tuple[str, str], str] = {
    ("gpu", "x86_64"): "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    ("gpu", "arm64"): "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    ("cpu", "x86_64"): "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
    ("cpu", "arm64"): "/aws/service/canonical/ubuntu/server/22.04/stable/current/arm64/hvm/ebs-gp2/ami-id",
}

# Session Manager's minimum (the same actions as the AWS managed policy AWSCloud9SSMInstanceProfile). The usual
# AmazonSSMManagedInstanceCore also grants ssm:GetParameter(s) on "*", which would let the server read every
# parameter in the account; with the default aws/ssm key, SecureStrings included.
SESSION_MANAGER_ACTIONS = [
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
]

CACHE_POLICY_NAME = "Managed-CachingOptimized"
# With your own domain: SNI (no dedicated-IP fee) and the oldest TLS version CloudFront's current policies allow.
CUSTOM_DOMAIN_TLS_POLICY = "TLSv1.2_2021"


@register_backend
class AwsBackend(CloudBackend):
    """Amazon Web Services."""

    cloud = "aws"
    display_name = "AWS"
    region_config_key = "aws:region"
    capabilities: ClassVar[Mapping[Capability, Support]] = {
        Capability.METADATA_HARDENING: supported("IMDSv2 required (http_tokens=required), hop limit 1"),
        Capability.BUCKET_PUBLIC_ACCESS_BLOCK: supported("S3 Block Public Access, all four settings on; ACLs off "
                                                         "(BucketOwnerEnforced)"),
        Capability.TLS_ONLY_STORAGE: supported("bucket policy denies every request with aws:SecureTransport=false"),
        Capability.PRIVATE_CDN_ORIGIN: supported("CloudFront Origin Access Control; bucket policy names the "
                                                 "distribution"),
        Capability.CDN_DEFAULT_HOSTNAME: supported("CloudFront's *.cloudfront.net name with its certificate; your "
                                                   "own domain takes an ACM certificate in us-east-1"),
        Capability.PREFIX_SCOPED_GRANTS: supported("IAM: s3:GetObject on bucket/prefix*, s3:ListBucket with an "
                                                   "s3:prefix condition"),
        Capability.MANAGED_SHELL: supported("SSM Session Manager; no key pair, port 22 closed"),
        Capability.SECRET_STORE: supported("SSM Parameter Store SecureString, read by name at boot"),
        Capability.SECRET_SCOPED_GRANTS: supported("IAM: ssm:GetParameter on the ARNs of the server's own "
                                                   "parameters"),
        Capability.TERMINATION_PROTECTION: supported("EC2 disable_api_termination (not on spot instances, which "
                                                     "EC2 refuses it)"),
        Capability.DRIVER_READY_IMAGE: supported("Deep Learning Base OSS Nvidia Driver GPU AMI via SSM parameter"),
        Capability.LOCAL_NVME_CACHE: supported("instance-store NVMe is exposed by Nitro types; the DLAMI mounts "
                                               "it at /opt/dlami/nvme"),
        Capability.SPOT_CAPACITY: supported("one-time spot request, terminated on interruption"),
        # Interim, until this cloud's fleet lands: a fleet's servers are created one by one (with a warning).
        Capability.MANAGED_FLEET: unsupported(INTERIM_FLEET),
        Capability.LOAD_BALANCER_TLS: unsupported(INTERIM_FLEET),
        Capability.REQUEST_AUTOSCALING: unsupported(INTERIM_FLEET),
    }
    assets_certificate = CertificateRule(
        kind="the ARN of an ACM certificate in us-east-1 that covers the domain (CloudFront takes certificates from "
             "that region only)",
        pattern=r"arn:aws:acm:us-east-1:\d{12}:certificate/[0-9a-f-]{36}",
        example="arn:aws:acm:us-east-1:123456789012:certificate/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0")

    #### Region ####

    def configured_region(self) -> str | None:
        # The provider's own order: stack config, then the environment.
        return (pulumi.Config("aws").get("region") or os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION"))

    #### Network ####

    def create_network(self, parent: pulumi.Resource, name: str, request: NetworkRequest) -> NetworkResult:
        opts = child_options(parent)
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=NETWORK_CIDR, enable_dns_support=True,
                          enable_dns_hostnames=True, tags=_named(request.tags, f"{name}-vpc"), opts=opts)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=_named(request.tags, f"{name}-igw"),
                                          opts=opts)
        routes = aws.ec2.RouteTable(f"{name}-public", vpc_id=vpc.id,
                                    routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": gateway.id}],
                                    tags=_named(request.tags, f"{name}-public"), opts=opts)
        zones = _zones_offering(parent, request.instance_type, request.zones)
        subnet_ids = []
        for index in range(request.zones):
            subnet = aws.ec2.Subnet(
                f"{name}-subnet-{index}", vpc_id=vpc.id, cidr_block=SUBNET_RANGES[index],
                availability_zone=zones.apply(nth(index)), map_public_ip_on_launch=True,
                tags=_named(request.tags, f"{name}-subnet-{index}"), opts=opts)
            aws.ec2.RouteTableAssociation(f"{name}-subnet-{index}-routes", subnet_id=subnet.id,
                                          route_table_id=routes.id, opts=opts)
            subnet_ids.append(subnet.id)
        # Model downloads stay on the AWS network and cost no data-transfer fee (gateway endpoints are free).
        region = aws.get_region_output(opts=invoke_options(parent)).region
        aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, vpc_endpoint_type="Gateway",
                            service_name=region.apply(lambda r: f"com.amazonaws.{r}.s3"), route_table_ids=[routes.id],
                            tags=_named(request.tags, f"{name}-s3"), opts=opts)
        return NetworkResult(network_id=vpc.id, subnet_ids=subnet_ids, cidr_block=vpc.cidr_block)

    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        return aws.ec2.get_vpc_output(id=network_id, opts=invoke_options(parent)).cidr_block

    #### Firewall ####

    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
        opts = child_options(parent)
        group = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=request.network_id,
            description="inferstack inference server: API to allowed networks, metrics inside the VPC",
            tags=_named(request.tags, f"{name}-sg"), opts=opts)
        for label, cidr in request.api_sources():
            _ingress(f"{name}-api-{label}", group, request.serving_port, cidr, "inference API", request.tags, opts)
        if request.metrics_port is not None:
            _ingress(f"{name}-metrics", group, request.metrics_port, request.network_cidr, "metrics, VPC only",
                     request.tags, opts)
        for label, port in WEB_EGRESS_PORTS.items():
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-egress-{label}", security_group_id=group.id, ip_protocol="tcp", from_port=port,
                to_port=port, cidr_ipv4="0.0.0.0/0", description=f"{label} for drivers, packages, models",
                tags=request.tags, opts=opts)
        return FirewallResult(firewall_id=group.id)

    #### Storage ####

    def create_model_store(self, parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
        logs = _private_bucket(parent, name, "logs", request.force_destroy, request.tags,
                               expire_after_days=ACCESS_LOG_DAYS)
        account = aws.get_caller_identity_output(opts=invoke_options(parent)).account_id
        _bucket_policy(parent, f"{name}-logs", logs, lambda arn: [{
            "Sid": "S3ServerAccessLogDelivery", "Effect": "Allow",
            "Principal": {"Service": "logging.s3.amazonaws.com"}, "Action": "s3:PutObject",
            "Resource": pulumi.Output.concat(arn, "/*"),
            "Condition": {"StringEquals": {"aws:SourceAccount": account}}}])
        buckets = {}
        for purpose in ("models", "data"):
            bucket = _private_bucket(parent, name, purpose, request.force_destroy, request.tags, logs_bucket=logs.id)
            _bucket_policy(parent, f"{name}-{purpose}", bucket, lambda arn: [])
            buckets[purpose] = bucket.id
        return ModelStoreResult(model_bucket=buckets["models"], data_bucket=buckets["data"], logs_bucket=logs.id)

    def create_static_assets(
        self, parent: pulumi.Resource, name: str, request: StaticAssetsRequest
    ) -> StaticAssetsResult:
        opts = child_options(parent)
        if request.existing_bucket is not None:
            found = aws.s3.get_bucket_output(bucket=request.existing_bucket, opts=invoke_options(parent))
            bucket_id, bucket_arn, origin_domain = found.bucket, found.arn, found.bucket_regional_domain_name
        else:
            bucket = _private_bucket(parent, name, "bucket", request.force_destroy, request.tags,
                                     logs_bucket=request.logs_bucket)
            bucket_id, bucket_arn, origin_domain = bucket.id, bucket.arn, bucket.bucket_regional_domain_name
        access = aws.cloudfront.OriginAccessControl(
            f"{name}-oac", name=unique_name([pulumi.get_project(), pulumi.get_stack(), name], max_length=64),
            description="inferstack static assets: CloudFront signs requests to the private bucket",
            origin_access_control_origin_type="s3", signing_behavior="always", signing_protocol="sigv4", opts=opts)
        cache_policy = aws.cloudfront.get_cache_policy_output(name=CACHE_POLICY_NAME, opts=invoke_options(parent))
        certificate: aws.cloudfront.DistributionViewerCertificateArgsDict = {"cloudfront_default_certificate": True}
        if request.domain is not None:
            certificate = {"acm_certificate_arn": request.certificate, "ssl_support_method": "sni-only",
                           "minimum_protocol_version": CUSTOM_DOMAIN_TLS_POLICY}
        distribution = aws.cloudfront.Distribution(
            f"{name}-cdn", enabled=True, is_ipv6_enabled=True, http_version="http2and3",
            price_class="PriceClass_100", default_root_object="index.html", comment=f"inferstack {name}"[:128],
            aliases=[request.domain] if request.domain else None,
            origins=[{"origin_id": "assets", "domain_name": origin_domain, "origin_access_control_id": access.id}],
            default_cache_behavior={
                "target_origin_id": "assets", "viewer_protocol_policy": "https-only", "compress": True,
                "allowed_methods": ["GET", "HEAD"], "cached_methods": ["GET", "HEAD"],
                "cache_policy_id": cache_policy.id},
            restrictions={"geo_restriction": {"restriction_type": "none"}},
            viewer_certificate=certificate, tags=request.tags, opts=opts)
        if request.domain is not None:
            # DNS stays yours: say where the domain must point.
            distribution.domain_name.apply(lambda target: pulumi.log.info(
                f"{name}: point {request.domain} at {target} (a CNAME, or a Route 53 alias record)", resource=parent))

        def cdn_read(arn: pulumi.Input[str]) -> list[dict[str, Any]]:
            return [{"Sid": "CloudFrontReadsThisBucket", "Effect": "Allow",
                     "Principal": {"Service": "cloudfront.amazonaws.com"}, "Action": "s3:GetObject",
                     "Resource": pulumi.Output.concat(arn, "/*"),
                     "Condition": {"StringEquals": {"AWS:SourceArn": distribution.arn}}}]

        required_policy = None
        if request.existing_bucket is not None:
            # A brought bucket is never modified: its owner merges this statement into the bucket's policy.
            required_policy = pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": cdn_read(bucket_arn)})
        else:
            _bucket_policy(parent, f"{name}-bucket", bucket, cdn_read)
        url = pulumi.Output.concat("https://", request.domain or distribution.domain_name)
        return StaticAssetsResult(bucket=bucket_id, url=url, required_bucket_policy=required_policy)

    def create_bundle(self, parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
        # Private like its bucket (ACLs are off there), encrypted. Content-addressed:
        # a new bundle is a new object, and the old one goes once the servers have moved on.
        bundle = aws.s3.BucketObjectv2(
            f"{name}-bundle", bucket=request.bucket, key=request.key, content=request.content,
            content_type="application/json", server_side_encryption="AES256", tags=request.tags,
            opts=child_options(parent))
        return bundle.id

    #### Secrets and identity ####

    def create_secrets(self, parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
        # "/inferstack/..." because parameter names may not begin with "aws" or "ssm".
        path = "/" + "/".join(["inferstack", slug(pulumi.get_project()), slug(pulumi.get_stack()), slug(name)])
        refs, grant_ids = {}, []
        for key, value in request.values.items():
            parameter = aws.ssm.Parameter(
                f"{name}-{key}", name=f"{path}/{key}", type="SecureString", value=value,
                description=f"inferstack {key} for {name}; read by the server at boot", tags=request.tags,
                opts=child_options(parent))
            refs[key] = parameter.name
            grant_ids.append(parameter.arn)
        return SecretsResult(refs=refs, grant_ids=grant_ids)

    def create_identity(self, parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
        opts = child_options(parent)
        partition = aws.get_partition_output(opts=invoke_options(parent))
        role = aws.iam.Role(
            f"{name}-role", description="inferstack inference server: read its model prefix and its secrets",
            assume_role_policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": "sts:AssumeRole",
                "Principal": {"Service": partition.dns_suffix.apply(lambda suffix: f"ec2.{suffix}")}}]}),
            tags=request.tags, opts=opts)
        bucket_arn = pulumi.Output.concat("arn:", partition.partition, ":s3:::", request.model_bucket)
        policies: dict[str, list[dict[str, Any]]] = {
            "session-manager": [{"Effect": "Allow", "Action": SESSION_MANAGER_ACTIONS, "Resource": "*"}],
            "model-read": [
                {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
                 "Condition": {"StringLike": {"s3:prefix": [f"{request.model_prefix}*"]}}},
                {"Sid": "ReadModelFiles", "Effect": "Allow", "Action": "s3:GetObject",
                 "Resource": pulumi.Output.concat(bucket_arn, "/", request.model_prefix, "*")},
                {"Sid": "ReadBootBundles", "Effect": "Allow", "Action": "s3:GetObject",
                 "Resource": pulumi.Output.concat(bucket_arn, "/", request.bundle_prefix, "*")}],
        }
        if request.secret_ids:
            policies["secrets-read"] = [{"Effect": "Allow", "Action": ["ssm:GetParameter", "ssm:GetParameters"],
                                         "Resource": list(request.secret_ids)}]
        attached = [aws.iam.RolePolicy(f"{name}-{label}", role=role.id, opts=opts, policy=pulumi.Output.json_dumps(
            {"Version": "2012-10-17", "Statement": statements})) for label, statements in policies.items()]
        profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, tags=request.tags, opts=opts)
        # The profile name resolves only once every policy is attached: a server that takes it can read its model
        # from its first boot.
        ready = pulumi.Output.all(profile.name, *(policy.id for policy in attached)).apply(lambda ids: ids[0])
        return IdentityResult(identity_id=role.arn, attachment=ready)

    #### Compute ####

    def create_servers(self, parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
        plan = request.plan
        image = _server_image(parent, plan)
        user_data = checked_user_data(
            plan, request.user_data, aws.get_region_output(opts=invoke_options(parent)).region,
            provider=self.display_name, encode=functools.partial(
                compressed_user_data, limit_bytes=USER_DATA_LIMIT_BYTES, service="EC2"))
        spot: aws.ec2.InstanceInstanceMarketOptionsArgsDict = {"market_type": "spot", "spot_options": {
            "spot_instance_type": "one-time", "instance_interruption_behavior": "terminate"}}
        result = ServersResult(instance_ids=[], public_ips=[], private_ips=[])
        for index in range(plan.instance_count):
            server = aws.ec2.Instance(
                f"{name}-server-{index}", ami=image.image_id, instance_type=plan.instance_type,
                subnet_id=request.subnet_ids[index % len(request.subnet_ids)],
                vpc_security_group_ids=list(request.firewall_ids), iam_instance_profile=request.attachment,
                metadata_options={"http_endpoint": "enabled", "http_tokens": "required",
                                  "http_put_response_hop_limit": METADATA_HOP_LIMIT,
                                  "instance_metadata_tags": "disabled"},
                root_block_device={"volume_type": "gp3", "encrypted": True, "delete_on_termination": True,
                                   "volume_size": image.root_volume_gib.apply(lambda gib: max(gib, plan.disk_gib)),
                                   "tags": _named(request.tags, f"{name}-server-{index}")},
                user_data_base64=user_data, user_data_replace_on_change=True,  # cloud-init runs once per instance
                # Changed in place (ModifyInstanceAttribute): "You can set the value of this attribute when you
                # launch an instance, or while the instance is running or stopped", and "you can't enable
                # termination protection for Spot Instances" (EC2 User Guide, "Change instance termination
                # protection").
                disable_api_termination=request.protected and not plan.spot,
                instance_market_options=spot if plan.spot else None,
                tags=_named(request.tags, f"{name}-server-{index}"),
                # A newer image must not replace a running server on the next `pulumi up`; roll it out with
                # `pulumi up --replace <urn>` when you choose to (with protection lifted).
                opts=server_options(parent, request.protected, ignore_changes=["ami"]))
            result.instance_ids.append(server.id)
            result.public_ips.append(server.public_ip.apply(lambda ip: ip or ""))
            result.private_ips.append(server.private_ip)
        return result

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return PreviewAnswers(resources=_PREVIEW_OUTPUTS, lookups=_PREVIEW_INVOKES,
                              region=self.configured_region() or PREVIEW_REGION, account=PREVIEW_ACCOUNT)


#### Helpers: network and firewall ####


def _named(tags: Mapping[str, str], name: str) -> dict[str, str]:
    """Tags plus the Name tag the EC2 console lists resources by."""
    return {**tags, "Name": name}


def _zones_offering(parent: pulumi.Resource, instance_type: str, count: int) -> pulumi.Output[list[str]]:
    """The first `count` Availability Zones (by name) that offer the machine type: not every zone has every GPU.

    The offerings also list Local Zones and Wavelength Zones the account opted into, whose names sort first
    (us-west-2-lax-1a); they lack services a server here needs and bill differently, so only zones whose opt-in
    status is `opt-in-not-required` count: Availability Zones proper (pulumi_aws get_availability_zones, "Only
    Availability Zones (no Local Zones)").
    """
    invoke = invoke_options(parent)
    offerings = aws.ec2.get_instance_type_offerings_output(
        location_type="availability-zone", filters=[{"name": "instance-type", "values": [instance_type]}],
        opts=invoke)
    regular = aws.get_availability_zones_output(
        state="available", filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}], opts=invoke)

    return pulumi.Output.all(offerings.locations, regular.names).apply(
        lambda found: first_zones(sorted(set(found[0]) & set(found[1])), count, instance_type))


def _ingress(resource_name: str, group: aws.ec2.SecurityGroup, port: int, cidr: pulumi.Input[str], purpose: str,
             tags: Mapping[str, str], opts: pulumi.ResourceOptions) -> None:
    ipv6 = isinstance(cidr, str) and ":" in cidr
    aws.vpc.SecurityGroupIngressRule(
        resource_name, security_group_id=group.id, ip_protocol="tcp", from_port=port, to_port=port,
        cidr_ipv4=None if ipv6 else cidr, cidr_ipv6=cidr if ipv6 else None, description=purpose, tags=tags,
        opts=opts)


#### Helpers: buckets ####


def _private_bucket(parent: pulumi.Resource, name: str, purpose: str, force_destroy: bool, tags: Mapping[str, str],
                    *, logs_bucket: pulumi.Input[str] | None = None,
                    expire_after_days: int | None = None) -> aws.s3.Bucket:
    """A bucket nobody outside the account can read: public access blocked, ACLs off, encrypted, versioned.

    Encryption is SSE-S3: S3 access-log delivery and CloudFront OAC cannot use the AWS-managed aws/s3 KMS key
    (its key policy cannot grant them), and a customer-managed key is a choice this library leaves to you.
    Its bucket policy is added by the caller (`_bucket_policy`), because it may name resources created later.
    """
    resource = f"{name}-{purpose}"
    opts = child_options(parent)
    bucket = aws.s3.Bucket(resource, bucket=_bucket_name(parent, name, purpose), force_destroy=force_destroy,
                           tags=tags, opts=opts)
    aws.s3.BucketOwnershipControls(f"{resource}-ownership", bucket=bucket.id,
                                   rule={"object_ownership": "BucketOwnerEnforced"}, opts=opts)
    aws.s3.BucketPublicAccessBlock(f"{resource}-public-access", bucket=bucket.id, block_public_acls=True,
                                   block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
                                   opts=opts)
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{resource}-encryption", bucket=bucket.id,
        rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}], opts=opts)
    versioning = aws.s3.BucketVersioning(f"{resource}-versioning", bucket=bucket.id,
                                         versioning_configuration={"status": "Enabled"}, opts=opts)
    rules: list[aws.s3.BucketLifecycleConfigurationRuleArgsDict] = [
        {"id": "expire-old-versions", "status": "Enabled", "filter": {"prefix": ""},
         "noncurrent_version_expiration": {"noncurrent_days": NONCURRENT_VERSION_DAYS,
                                           "newer_noncurrent_versions": NONCURRENT_VERSIONS_KEPT}},
        {"id": "abort-incomplete-uploads", "status": "Enabled", "filter": {"prefix": ""},
         "abort_incomplete_multipart_upload": {"days_after_initiation": INCOMPLETE_UPLOAD_DAYS}},
    ]
    if expire_after_days is not None:
        rules.append({"id": "expire-objects", "status": "Enabled", "filter": {"prefix": ""},
                      "expiration": {"days": expire_after_days}})
    aws.s3.BucketLifecycleConfiguration(f"{resource}-lifecycle", bucket=bucket.id, rules=rules,
                                        opts=child_options(parent, depends_on=[versioning]))
    if logs_bucket is not None:
        aws.s3.BucketLogging(f"{resource}-logging", bucket=bucket.id, target_bucket=logs_bucket,
                             target_prefix=f"{purpose}/", opts=opts)
    return bucket


def _bucket_policy(parent: pulumi.Resource, resource: str, bucket: aws.s3.Bucket,
                   statements: Callable[[StrOutput], list[dict[str, Any]]]) -> None:
    """The bucket's policy: TLS only, plus the caller's statements."""
    deny_plain_http = {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
                       "Resource": [bucket.arn, pulumi.Output.concat(bucket.arn, "/*")],
                       "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    policy = pulumi.Output.json_dumps({"Version": "2012-10-17",
                                       "Statement": [deny_plain_http, *statements(bucket.arn)]})
    aws.s3.BucketPolicy(f"{resource}-policy", bucket=bucket.id, policy=policy, opts=child_options(parent))


def _bucket_name(parent: pulumi.Resource, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across accounts and regions (S3 names are global)."""
    account = aws.get_caller_identity_output(opts=invoke_options(parent)).account_id
    region = aws.get_region_output(opts=invoke_options(parent)).region
    return pulumi.Output.all(account, region).apply(
        lambda where: unique_name([pulumi.get_project(), pulumi.get_stack(), name, purpose], unique_by=where))


#### Helpers: compute ####


@dataclass(frozen=True)
class _ServerImage:
    image_id: StrOutput
    root_volume_gib: pulumi.Output[int]
    """Size of the image's root snapshot: the root volume may not be smaller."""


def _server_image(parent: pulumi.Resource, plan: DeploymentPlan) -> _ServerImage:
    """The current DLAMI (GPU) or Ubuntu (CPU) image for the machine type's architecture, looked up at deploy time."""
    invoke = invoke_options(parent)
    machine = aws.ec2.get_instance_type_output(instance_type=plan.instance_type, opts=invoke)
    parameter_name = machine.supported_architectures.apply(
        lambda archs: IMAGE_PARAMETERS[(plan.device, "x86_64" if "x86_64" in archs else "arm64")])
    image_id = aws.ssm.get_parameter_output(name=parameter_name, opts=invoke).value
    # The id comes from AWS's own public parameter, so filtering by it alone is safe without an owner.
    image = aws.ec2.get_ami_output(filters=image_id.apply(_image_id_filter), opts=invoke)
    root_gib = pulumi.Output.all(image.root_device_name, image.block_device_mappings).apply(
        lambda facts: _root_snapshot_gib(*facts))
    return _ServerImage(image_id=image_id, root_volume_gib=root_gib)


def _image_id_filter(image_id: str) -> list[aws.ec2.GetAmiFilterArgsDict]:
    return [{"name": "image-id", "values": [image_id]}]


def _root_snapshot_gib(root_device: str, mappings: Sequence[Any]) -> int:
    for mapping in mappings:
        device = mapping.get("device_name") if isinstance(mapping, Mapping) else mapping.device_name
        ebs = mapping.get("ebs") if isinstance(mapping, Mapping) else mapping.ebs
        if device == root_device and ebs and ebs.get("volume_size"):
            return int(ebs["volume_size"])
    return 0


#### Helpers: offline preview ####

PREVIEW_ACCOUNT = "123456789012"  # the account id AWS documentation uses in examples
PREVIEW_REGION = "us-east-1"


def _arn(c: PreviewContext, service: str, resource: str) -> str:
    return f"arn:aws:{service}:{c.region}:{c.account}:{resource}"


def _bucket_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    bucket = c.inputs.get("bucket") or f"{c.name}-{c.digest[:8]}"
    return bucket, {"bucket": bucket, "arn": f"arn:aws:s3:::{bucket}",
                    "bucketRegionalDomainName": f"{bucket}.s3.{c.region}.amazonaws.com"}


def _auto_named(prefix: str) -> Callable[[PreviewContext], tuple[str, dict[str, Any]]]:
    """IAM names are generated by the provider (name + random suffix); the preview imitates that."""
    def make(c: PreviewContext) -> tuple[str, dict[str, Any]]:
        generated = f"{c.name}-{c.digest[:7]}"
        return generated, {"name": generated, "arn": f"arn:aws:iam::{c.account}:{prefix}/{generated}"}
    return make


def _instance_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    return f"i-0{c.digest[:16]}", {"publicIp": c.public_ip, "privateIp": c.private_ip,
                                    "arn": _arn(c, "ec2", f"instance/i-0{c.digest[:16]}")}


_PREVIEW_OUTPUTS: dict[str, PreviewResource] = {
    "aws:ec2/vpc:Vpc": lambda c: (f"vpc-0{c.digest[:16]}", {"arn": _arn(c, "ec2", f"vpc/vpc-0{c.digest[:16]}")}),
    "aws:ec2/subnet:Subnet": lambda c: (f"subnet-0{c.digest[:16]}", {}),
    "aws:ec2/internetGateway:InternetGateway": lambda c: (f"igw-0{c.digest[:16]}", {}),
    "aws:ec2/routeTable:RouteTable": lambda c: (f"rtb-0{c.digest[:16]}", {}),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": lambda c: (f"rtbassoc-0{c.digest[:16]}", {}),
    "aws:ec2/vpcEndpoint:VpcEndpoint": lambda c: (f"vpce-0{c.digest[:16]}", {}),
    "aws:ec2/securityGroup:SecurityGroup": lambda c: (f"sg-0{c.digest[:16]}", {
        "arn": _arn(c, "ec2", f"security-group/sg-0{c.digest[:16]}")}),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": lambda c: (f"sgr-0{c.digest[:16]}", {}),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": lambda c: (f"sgr-0{c.digest[:16]}", {}),
    "aws:s3/bucket:Bucket": _bucket_outputs,
    "aws:ssm/parameter:Parameter": lambda c: (c.inputs["name"], {
        "arn": _arn(c, "ssm", "parameter" + c.inputs["name"])}),
    "aws:iam/role:Role": _auto_named("role"),
    "aws:iam/instanceProfile:InstanceProfile": _auto_named("instance-profile"),
    "aws:cloudfront/originAccessControl:OriginAccessControl": lambda c: (f"E{c.digest[:13].upper()}", {}),
    "aws:cloudfront/distribution:Distribution": lambda c: (f"E{c.digest[:13].upper()}", {
        "arn": f"arn:aws:cloudfront::{c.account}:distribution/E{c.digest[:13].upper()}",
        "domainName": f"d{c.digest[:13]}.cloudfront.net"}),
    "aws:ec2/instance:Instance": _instance_outputs,
}


def _preview_architectures(instance_type: str) -> list[str]:
    # Graviton families carry a "g" after the generation digit (m7g, c7gn, r6gd, g5g). Preview only: a real
    # deployment asks EC2 (get_instance_type).
    family = instance_type.split(".")[0]
    return ["arm64"] if re.fullmatch(r"[a-z]+\d+[a-z]*g[a-z]*", family) else ["x86_64", "i386"]


_COMPASS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c", "northeast": "ne",
            "northwest": "nw", "southeast": "se", "southwest": "sw"}


def _preview_availability_zones(a: dict[str, Any], c: PreviewContext) -> dict[str, Any]:
    """Four Availability Zones proper, as the lookup with the opt-in filter answers; zone ids in AWS's form
    (us-east-1 -> use1-az1), whose numbering differs per account in a real answer."""
    area, *middle, number = c.region.split("-")
    prefix = area + "".join(_COMPASS.get(part, part[:1]) for part in middle) + number
    letters = "abcd"
    return {"names": [f"{c.region}{letter}" for letter in letters],
            "zoneIds": [f"{prefix}-az{index}" for index in range(1, len(letters) + 1)],
            "groupNames": [c.region] * len(letters), "state": a.get("state"), "filters": a.get("filters"),
            "id": c.region}


_PREVIEW_INVOKES: dict[str, PreviewLookup] = {
    "aws:index/getCallerIdentity:getCallerIdentity": lambda a, c: {
        "accountId": c.account, "arn": f"arn:aws:iam::{c.account}:user/preview", "id": c.account,
        "userId": "AIDAPREVIEW"},
    "aws:index/getRegion:getRegion": lambda a, c: {
        "region": c.region, "name": c.region, "id": c.region, "endpoint": f"ec2.{c.region}.amazonaws.com",
        "description": c.region},
    "aws:index/getPartition:getPartition": lambda a, c: {
        "partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws", "reverseDnsPrefix": "com.amazonaws"},
    "aws:ec2/getInstanceType:getInstanceType": lambda a, c: {
        "instanceType": a["instanceType"], "supportedArchitectures": _preview_architectures(a["instanceType"])},
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": lambda a, c: {
        "locations": [f"{c.region}{zone}" for zone in "abc"], "locationTypes": ["availability-zone"] * 3,
        "instanceTypes": a["filters"][0]["values"] * 3, "id": c.region},
    "aws:index/getAvailabilityZones:getAvailabilityZones": _preview_availability_zones,
    "aws:ssm/getParameter:getParameter": lambda a, c: {
        "name": a["name"], "type": "String", "version": 1, "id": a["name"],
        "value": "ami-0" + hashlib.sha256(a["name"].encode()).hexdigest()[:16],
        "insecureValue": "", "arn": f"arn:aws:ssm:{c.region}::parameter{a['name']}"},
    # The root snapshot size is a placeholder smaller than any plan's disk, so the plan decides the preview.
    "aws:ec2/getAmi:getAmi": lambda a, c: {
        "id": a["filters"][0]["values"][0], "rootDeviceName": "/dev/sda1",
        "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"volume_size": "8"}}]},
    "aws:cloudfront/getCachePolicy:getCachePolicy": lambda a, c: {
        "id": "658327ea-f89d-4fab-a63d-7e88639e58f6", "name": a["name"]},
    # Lookups of brought resources: the preview cannot see them, so it answers with placeholders.
    "aws:ec2/getVpc:getVpc": lambda a, c: {"id": a["id"], "cidrBlock": "10.0.0.0/16"},
    "aws:s3/getBucket:getBucket": lambda a, c: {
        "id": a["bucket"], "bucket": a["bucket"], "arn": f"arn:aws:s3:::{a['bucket']}",
        "bucketRegionalDomainName": f"{a['bucket']}.s3.{c.region}.amazonaws.com"},
}

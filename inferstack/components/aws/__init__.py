"""AWS provisioning (pulumi_aws 7.x): VPC, security group, S3 + CloudFront, SSM Parameter Store, IAM, EC2; a fleet as
an EC2 Auto Scaling group behind an Application Load Balancer (HTTPS with an ACM certificate).

`AwsBackend` (below) is the cloud's face: its capability table, the ids a user may bring, what it refuses before
anything is created (`plan_problems`, `fleet_problems`), and one method per `CloudBackend` method, in the same order
under the same banners, each handing its request to the module of its concern:

    network.py          VPC, public and private subnets, NAT gateways, the S3 endpoint; security groups
    storage.py          private S3 buckets (models, data, access logs), static assets behind CloudFront, boot bundles
    identity.py         SSM Parameter Store secrets; the servers' IAM role, its grants, the instance profile
    servers.py          single EC2 instances, the image they boot, their user data
    image.py            a baked image: EC2 Image Builder runs the boot's install phases into an AMI
    fleet.py            a fleet's launch template, Auto Scaling group, instance refresh and scaling policies
    load_balancer.py    the Application Load Balancer, target groups and health checks, listeners, the canary's weights
    cache.py            ElastiCache for Redis OSS
    observability.py    the CloudWatch Logs group the agent ships to, the alarms, the dashboard
    preview.py          the offline preview's answers
    tags.py             the Name tag every EC2 resource carries

Imports point one way: fleet reads load_balancer, servers and observability; image reads servers; load_balancer reads
network and storage; the others read only tags; nothing reads this package's `__init__`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import ClassVar

import pulumi

from inferstack.components.aws import cache, fleet, identity, image, network, observability, servers, storage
from inferstack.components.aws.cache import CACHE_ENGINE_VERSION, CACHE_NODE_TYPE
from inferstack.components.aws.load_balancer import (
    ARN_CERTIFICATE,
    LOAD_BALANCER_MAX_IDLE_TIMEOUT_S,
    LOAD_BALANCER_TLS_POLICY,
)
from inferstack.components.aws.network import LOAD_BALANCER_MIN_ZONES, private_zones_problem
from inferstack.components.aws.observability import ARN_SNS_TOPIC
from inferstack.components.aws.preview import PREVIEW_ACCOUNT, PREVIEW_INVOKES, PREVIEW_OUTPUTS, PREVIEW_REGION
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
from inferstack.components.observability import AlarmKind
from inferstack.errors import Problem
from inferstack.plan import DeploymentPlan

__all__ = ["AwsBackend"]


@register_backend
class AwsBackend(CloudBackend):
    """Amazon Web Services."""

    cloud = "aws"
    capabilities: ClassVar[Mapping[Capability, Support]] = {
        Capability.METADATA_HARDENING: supported(
            "IMDSv2 required (http_tokens=required), hop limit 1; tokens stop an SSRF, not code on the server, so the "
            "boot script's host firewall also lets only root reach the metadata service and a native runtime's unit "
            "is denied it (IPAddressDeny=)"),
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
                                                     "EC2 refuses it); a fleet: the load balancer's deletion "
                                                     "protection, with Pulumi's protect on the group, its template and "
                                                     "the load balancer"),
        Capability.DRIVER_READY_IMAGE: driver_ready_image("aws", "Deep Learning Base OSS Nvidia Driver GPU AMI via SSM "
                                                                 "parameter"),
        Capability.LOCAL_NVME_CACHE: supported("instance-store NVMe is exposed by Nitro types; the DLAMI mounts "
                                               "it at /opt/dlami/nvme"),
        Capability.SPOT_CAPACITY: supported("one-time spot request, terminated on interruption; a fleet's group "
                                            "launches spot only (price-capacity-optimized)"),
        Capability.SPOT_ABOVE_FLOOR: spot_above_floor("aws", "Auto Scaling mixed instances policy: on-demand base "
                                                     "capacity = the floor, spot above it (capacity-optimized), the "
                                                     "plan's fallback types as overrides, capacity rebalancing"),
        Capability.MANAGED_FLEET: supported("EC2 Auto Scaling group from a launch template (IMDSv2, hop limit 1, "
                                            "encrypted gp3, no public address) over private subnets with NAT egress; "
                                            "ELB health checks replace a server after the plan's grace; a changed "
                                            "template rolls out by instance refresh, never below the group's size"),
        Capability.LOAD_BALANCER_TLS: supported("Application Load Balancer: HTTPS on 443 with "
                                                f"{LOAD_BALANCER_TLS_POLICY} and an ACM certificate (DNS-validated for "
                                                "apiDomain, or apiCertificate), HTTP 80 redirects; idle timeout of the "
                                                "plan's request timeout (ALB limit 4000 s)"),
        Capability.MANAGED_CACHE: supported(f"ElastiCache for Redis OSS {CACHE_ENGINE_VERSION} ({CACHE_NODE_TYPE}; a "
                                            "replica in a second zone with failover in production) in the servers' "
                                            "subnets: TLS required, AUTH token, encrypted at rest, its security group "
                                            "admits the servers' security groups only"),
        Capability.REQUEST_AUTOSCALING: supported("target tracking on ALBRequestCountPerTarget (requests per server "
                                                  "per minute: the plan's rate x 60) with the plan's warm-up; scale-in "
                                                  "one server per scale-in cooldown, by a CloudWatch alarm at half the "
                                                  "target"),
        Capability.BAKED_IMAGE: baked_image(
            "aws", "EC2 Image Builder (image.py): a component runs boot.sh on the plan's instance type from the "
                   "default image and the image keeps what it installed (driver, Docker with the runtime image, "
                   "nginx); an encrypted gp3 AMI, a new recipe version, and image, when what goes in changes"),
        Capability.MODEL_STREAMING: model_streaming(
            "aws", "vLLM's Run:ai Model Streamer (--load-format runai_streamer) reads s3://bucket/prefix with "
                   "credentials the server's boot gets by STS AssumeRole of a role that may only read the model's "
                   "prefix, handed to the container in a root-only file; the sync verifies the weights beside it"),
        Capability.WARM_POOL: warm_pool(
            "aws", "an Auto Scaling warm pool (Stopped, reused on scale-in) of max - desired servers, each prepared by "
                   "a whole boot held in a launch lifecycle hook that the server completes; not beside a mixed "
                   "instances policy (spot above the floor), which AWS refuses"),
        Capability.MULTI_NODE_REPLICAS: unsupported(
            "planned (sizing/nodes.py), not provisioned yet: a cluster placement group and EFA interfaces in the "
            "head's and workers' launch templates, Ray units and the replica healed as one are still to be built, "
            "so a plan whose replica spans servers is refused before anything is created"),
        Capability.ROLLING_UPDATE: rolling_update("aws",
            "an instance refresh, started by each new launch template version: min healthy 100 %, max healthy 100 % + "
            "the plan's surge, health-gated (ELB health check type, the plan's warm-up), skip matching"),
    }
    assets_certificate = CertificateRule(
        kind="the ARN of an ACM certificate in us-east-1 that covers the domain (CloudFront takes certificates from "
             "that region only)",
        pattern=r"arn:aws:acm:us-east-1:\d{12}:certificate/[0-9a-f-]{36}",
        example="arn:aws:acm:us-east-1:123456789012:certificate/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0")
    api_certificate = CertificateRule(
        kind="the ARN of an ACM certificate in the stack's region that covers the domain (a load balancer takes "
             "certificates from its own region only); leave it out to have one issued for apiDomain",
        pattern=ARN_CERTIFICATE, issued_without=True,
        example="arn:aws:acm:us-east-1:123456789012:certificate/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0")
    unwatched_alarms: ClassVar[Mapping[AlarmKind, str]] = {}  # the CloudWatch agent sends GPU memory and disk
    notification_target = ValueRule("the ARN of an SNS topic (alarms notify it when they fire and when they clear)",
                                    ARN_SNS_TOPIC, "arn:aws:sns:us-east-1:123456789012:inference-alarms")
    # EC2 resource ids: a prefix and 8 or 17 hexadecimal digits; IAM names: the API's pattern [\w+=,.@-]{1,128}
    # (IAM API reference, CreateInstanceProfile).
    brought_ids = BroughtIds(
        network=ValueRule("a VPC id", r"vpc-[0-9a-f]{8}([0-9a-f]{9})?", "vpc-0a1b2c3d4e5f67890"),
        subnet=ValueRule("a subnet id", r"subnet-[0-9a-f]{8}([0-9a-f]{9})?", "subnet-0a1b2c3d4e5f67890"),
        firewall=ValueRule("a security group id", r"sg-[0-9a-f]{8}([0-9a-f]{9})?", "sg-0a1b2c3d4e5f67890"),
        identity=ValueRule("the name of an IAM instance profile", r"[A-Za-z0-9_+=,.@-]{1,128}", "inference-server"))

    #### Region ####

    def configured_region(self) -> str | None:
        # The provider's own order: stack config, then the environment.
        return (pulumi.Config("aws").get("region") or os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION"))

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
        if request.plan.startup.image == "baked":
            image.bake(parent, name, image.ImageBuild(
                plan=request.plan, subnet_id=request.subnet_ids[0], firewall_ids=request.firewall_ids,
                user_data=request.user_data, tags=request.tags))
        return servers.create_servers(parent, name, request)

    def create_fleet(self, parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
        for group in (request, *([request.for_canary()] if request.canary else [])):
            if group.plan.startup.image == "baked":
                image.bake(parent, name if group is request else f"{name}-canary", image.ImageBuild(
                    plan=group.plan, subnet_id=group.server_subnet_ids[0], firewall_ids=group.firewall_ids,
                    user_data=group.user_data, tags=group.tags))
        return fleet.create_fleet(parent, name, request)

    #### Monitoring ####

    def create_telemetry(self, parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
        return observability.create_telemetry(parent, name, request)

    def create_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
        return observability.create_alarms(parent, name, request)

    def create_dashboard(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> StrOutput:
        return observability.create_dashboard(parent, name, request)

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        return cache.create_cache(parent, name, request)

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return PreviewAnswers(resources=PREVIEW_OUTPUTS, lookups=PREVIEW_INVOKES,
                              region=self.configured_region() or PREVIEW_REGION, account=PREVIEW_ACCOUNT)

    #### Shared behaviour ####

    def network_problems(self, zones: int, *, private_servers: bool, field: str) -> list[Problem]:
        problem = private_zones_problem(zones, field) if private_servers else None
        return [problem] if problem else []

    def fleet_problems(self, plan: DeploymentPlan, *, api_certificate: str | None,
                       load_balancer_subnets: int | None, prefix: str) -> list[Problem]:
        """What the Application Load Balancer or its listener would refuse, and the zones a created network cannot
        hold, before anything is created."""
        problems = []
        if load_balancer_subnets is None:  # the network is created: a public and a private subnet per zone
            problems += self.network_problems(plan.zones, private_servers=True, field=f"{prefix}.plan.zones")
        elif load_balancer_subnets < LOAD_BALANCER_MIN_ZONES:
            problems.append(Problem(f"{prefix}.load_balancer_subnet_ids", "an Application Load Balancer needs subnets "
                                    f"in at least {LOAD_BALANCER_MIN_ZONES} Availability Zones",
                                    value=load_balancer_subnets, fix="give subnets in two or more zones "
                                    "(load_balancer_subnet_ids, or subnet_ids)"))
        well_formed = api_certificate is not None and re.fullmatch(ARN_CERTIFICATE, api_certificate)
        region = api_certificate.split(":")[3] if api_certificate and well_formed else plan.region
        if region != plan.region:
            problems.append(Problem(f"{prefix}.api_certificate", f"is in {region}, but the load balancer is in "
                                    f"{plan.region}: it takes certificates from its own region only",
                                    value=api_certificate, fix=f"request or import the certificate in {plan.region} "
                                    f"(aws acm request-certificate --region {plan.region}), or leave it out to have "
                                    "one issued"))
        return problems

    def plan_problems(self, plan: DeploymentPlan, *, field: str) -> list[Problem]:
        """A fleet whose streamed answers outlast the longest idle timeout an Application Load Balancer takes."""
        if plan.fleet is None or plan.request_timeout_s <= LOAD_BALANCER_MAX_IDLE_TIMEOUT_S:
            return []
        return [Problem(field, f"needs a request timeout of {plan.request_timeout_s} s (its longest answer), longer "
                        f"than an Application Load Balancer's idle timeout allows ({LOAD_BALANCER_MAX_IDLE_TIMEOUT_S} "
                        "s)", value=plan.request_timeout_s,
                        fix="plan it again: the planner caps answers to what the load balancer waits for")]

"""AWS provisioning (pulumi_aws 7.x): VPC, security group, S3 + CloudFront, SSM Parameter Store, IAM, EC2; a fleet as
an EC2 Auto Scaling group behind an Application Load Balancer (HTTPS with an ACM certificate).

Sections follow `CloudBackend` in `backend.py`; every cloud module keeps the same order and banners.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
import pulumi_aws as aws

from inferstack.bootstrap.agents.aws import GPU_MEASUREMENTS, GROUP_DIMENSION
from inferstack.bootstrap.telemetry import TelemetryTarget
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
    NETWORK_CIDR,
    NONCURRENT_VERSION_DAYS,
    NONCURRENT_VERSIONS_KEPT,
    SUBNET_RANGES,
    WEB_EGRESS_PORTS,
    checked_user_data,
    compressed_user_data,
    first_zones,
    nth,
)
from inferstack.errors import Problem, input_error
from inferstack.plan import DeploymentPlan, Fleet, Rollout

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
# The CloudWatch agent's writes (_telemetry_statements): to the deployment's log group, its metric namespace, and the
# instance's own tags (for AutoScalingGroupName).
TELEMETRY_LOG_ACTIONS = ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
TELEMETRY_METRIC_ACTIONS = ["cloudwatch:PutMetricData"]
TELEMETRY_ANYWHERE_ACTIONS = ["ec2:DescribeTags"]
SESSION_MANAGER_ACTIONS = [
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
]

ARN_CERTIFICATE = r"arn:aws:acm:[a-z]{2}(-[a-z]+)+-\d:\d{12}:certificate/[0-9a-f-]{36}"
"""An ACM certificate's ARN (any region: the load balancer's must be the stack's; fleet_problems checks that)."""
CACHE_POLICY_NAME = "Managed-CachingOptimized"
# With your own domain: SNI (no dedicated-IP fee) and the oldest TLS version CloudFront's current policies allow.
CUSTOM_DOMAIN_TLS_POLICY = "TLSv1.2_2021"

# A fleet's network: the private subnets take the upper half of the VPC's /20s, so that adding zones never moves a
# subnet. An Application Load Balancer needs subnets in two Availability Zones at least (ELB User Guide,
# "Application Load Balancers", subnets), so a fleet's network has two or more zones even when its plan asks for one.
PRIVATE_SUBNET_OFFSET = len(SUBNET_RANGES) // 2
LOAD_BALANCER_MIN_ZONES = 2

# The HTTPS listener's policy: TLS 1.3 and TLS 1.2 with forward-secret AEAD ciphers only, the policy the ELB console
# gives new HTTPS listeners (ELB User Guide, "Security policies for your Application Load Balancer"); the API's own
# default (ELBSecurityPolicy-2016-08) still accepts TLS 1.0.
LOAD_BALANCER_TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
LISTENER_PORTS: Mapping[str, int] = {"https": 443, "http": 80}
# ELB limits: the idle timeout's (a non-streamed answer sends no byte until it is whole: plan.py
# clouds.py load_balancer_timeout_s), target group "deregistration_delay": 0-3600 s (pulumi_aws lb/target_group.py).
LOAD_BALANCER_MAX_IDLE_TIMEOUT_S = CLOUD_FACTS["aws"].load_balancer_timeout_s
MAX_DEREGISTRATION_DELAY_S = 3600
# Health checks on the serving health path (ranges in pulumi_aws lb TargetGroupHealthCheckArgs): a server leaves
# the load balancer after a minute of failed checks (4 x 15 s) and joins after 30 s of good ones. The 10 s timeout
# leaves room for a busy GPU server's health endpoint.
HEALTH_CHECK_INTERVAL_S = 15
HEALTH_CHECK_TIMEOUT_S = 10
HEALTHY_THRESHOLD = 2
UNHEALTHY_THRESHOLD = 4

# Scaling. ALBRequestCountPerTarget is the load balancer's requests per target per minute (EC2 Auto Scaling User
# Guide, predefined metrics for target tracking; CloudWatch's RequestCountPerTarget comes in 60 s periods, statistic
# Sum, which "represents the average not the sum": ELB User Guide, CloudWatch metrics), so the plan's per-second rate
# is multiplied by 60. Target tracking on an Auto Scaling group has no scale-in cooldown (Application Auto Scaling's
# scaleInCooldown "is not used if the scalable resource is an Auto Scaling group"), so its scale-in is disabled and
# servers are removed by a simple-scaling policy instead: one server per `scale_in_cooldown_s` (a simple policy's
# cooldown), while the load per server has stayed below half the target for SCALE_IN_EVALUATION_MINUTES. Removing one
# of n >= 2 servers at most doubles each remaining server's share, so they stay within the target and the two
# policies never undo each other.
SECONDS_PER_MINUTE = 60
# The inference cache: ElastiCache for Redis OSS, a node-based replication group with in-transit encryption (TLS) and
# an AUTH token, which requires transit encryption (docs.aws.amazon.com/AmazonElastiCache/latest/dg/
# in-transit-encryption.html; pulumi_aws ReplicationGroup.auth_token). T4g nodes take Redis OSS 5.0.6 onward
# (docs.amazonaws.cn/AmazonElastiCache/latest/APIReference/API_CacheNode.html, read 2026-12-01); a small one holds
# ~1.4 GiB of answers, far more than an hour of a server's deterministic answers.
CACHE_ENGINE_VERSION = "7.1"
CACHE_NODE_TYPE = "cache.t4g.small"
CACHE_PORT = 6379
SCALE_IN_LOAD_FRACTION = 0.5
SCALE_IN_EVALUATION_MINUTES = 15

# Alarms read the Application Load Balancer's own metrics (ELB User Guide, "CloudWatch metrics for your Application
# Load Balancer"), published every minute with no agent: UnHealthyHostCount and HealthyHostCount per target group
# (dimensions TargetGroup, LoadBalancer), TargetResponseTime in seconds (percentile statistics such as p95 allowed),
# HTTPCode_Target_5XX_Count and RequestCount per load balancer. TargetResponseTime ends where the target's response
# headers start: a whole answer's full time, but for a streamed one only until the runtime opens its stream, which vLLM
# does before the first token (its StreamingResponse sends the headers before its generator yields), so it never sees
# a slow stream.
ELB_NAMESPACE = "AWS/ApplicationELB"
# With the CloudWatch agent (a deployment's telemetry), the latency alarm reads every answer's end-to-end time from the
# gateways' access logs instead: nginx's $request_time, to the answer's last byte, streams included (gateway.py's
# log format, whose seventh field it is). A metric filter on the log group publishes each successful POST's time as
# one raw value, so that the alarm takes its p95 (CloudWatch Logs User Guide, "Filter pattern syntax for metric
# filters": space-delimited fields, a [bracketed] or "quoted" field is one, "..." any number more, read 2026-12-07).
# The runtime's own time-to-first-token histogram (vllm:time_to_first_token_seconds) cannot be used: the agent drops
# Prometheus histograms ("Only Gauge, Counter and Summary are supported", plugins/inputs/prometheus/metrics_filter.go).
ANSWER_TIME_METRIC = "GatewayAnswerTime"
ANSWER_TIME_PATTERN = '[address, user, time, request = "POST *", status = 2*, bytes, request_time, ...]'
# The dashboard (CloudWatch API Reference, "Dashboard Body Structure and Syntax": metric widgets, each metric an array
# [namespace, name, dimension name, value, ..., {rendering options}], `annotations.horizontal` lines); its name takes
# up to 255 letters, digits, "-" and "_" (PutDashboard). It graphs the alarms' metrics and the group's
# GroupInServiceInstances (namespace AWS/AutoScaling, dimension AutoScalingGroupName), published once listed in the
# group's enabled_metrics.
DASHBOARD_ROLES = ("load_balancer", "target_group", "group")
DASHBOARD_NAME_MAX = 255
GROUP_METRICS = (aws.autoscaling.Metric.GROUP_IN_SERVICE_INSTANCES, aws.autoscaling.Metric.GROUP_DESIRED_CAPACITY,
                 aws.autoscaling.Metric.GROUP_MAX_SIZE)
DASHBOARD_WIDTH, DASHBOARD_HEIGHT = 12, 6  # half of the dashboard's 24-column grid per graph
# Load balancer access logs (ELB User Guide, "Enable access logs for your Application Load Balancer"): a bucket in the
# load balancer's region whose only server-side encryption is SSE-S3 (the one `_private_bucket` sets); its policy lets
# Elastic Load Balancing put objects under <prefix>/AWSLogs/<account>/. Regions opened since Jakarta (December 2021)
# grant the log delivery service principal; older ones grant the region's Elastic Load Balancing account, which the
# provider's aws.elb.get_service_account knows (its note: "For AWS Regions opened since Jakarta (ap-southeast-3) in
# December 2021, AWS documents that a service principal name should be used instead of an AWS account ID").
LOAD_BALANCER_LOG_PREFIX = "load-balancer"
LOG_DELIVERY_PRINCIPAL = "logdelivery.elasticloadbalancing.amazonaws.com"
LOG_DELIVERY_PRINCIPAL_REGIONS = frozenset({
    "ap-southeast-3", "me-central-1", "eu-central-2", "eu-south-2", "ap-south-2", "ap-southeast-4", "il-central-1",
    "ca-west-1", "ap-southeast-5", "ap-southeast-7", "mx-central-1", "ap-east-2"})
# An SNS topic's ARN (SNS API reference, CreateTopic: names of 1-256 letters, digits, hyphens and underscores).
ARN_SNS_TOPIC = r"arn:aws(-cn|-us-gov)?:sns:[a-z]{2}(-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,256}"


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
    # EC2 resource ids: a prefix and 8 or 17 hexadecimal digits; IAM names: the API's pattern [\w+=,.@-]{1,128}
    # (IAM API reference, CreateInstanceProfile).
    unwatched_alarms: ClassVar[Mapping[AlarmKind, str]] = {}  # the CloudWatch agent sends GPU memory and disk
    notification_target = ValueRule("the ARN of an SNS topic (alarms notify it when they fire and when they clear)",
                                    ARN_SNS_TOPIC, "arn:aws:sns:us-east-1:123456789012:inference-alarms")
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
        opts = child_options(parent)
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=NETWORK_CIDR, enable_dns_support=True,
                          enable_dns_hostnames=True, tags=_named(request.tags, f"{name}-vpc"), opts=opts)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=_named(request.tags, f"{name}-igw"),
                                          opts=opts)
        routes = aws.ec2.RouteTable(f"{name}-public", vpc_id=vpc.id,
                                    routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": gateway.id}],
                                    tags=_named(request.tags, f"{name}-public"), opts=opts)
        zone_count = _network_zones(request)
        zones = _zones_offering(parent, request.instance_type, zone_count)
        subnet_ids, private_subnet_ids, route_table_ids = [], [], [routes.id]
        for index in range(zone_count):
            zone = zones.apply(nth(index))
            # A fleet's public subnets hold only the load balancer and the NAT gateways: nothing there needs an
            # address of its own.
            subnet = aws.ec2.Subnet(
                f"{name}-subnet-{index}", vpc_id=vpc.id, cidr_block=SUBNET_RANGES[index],
                availability_zone=zone, map_public_ip_on_launch=not request.private_servers,
                tags=_named(request.tags, f"{name}-subnet-{index}"), opts=opts)
            aws.ec2.RouteTableAssociation(f"{name}-subnet-{index}-routes", subnet_id=subnet.id,
                                          route_table_id=routes.id, opts=opts)
            subnet_ids.append(subnet.id)
            if request.private_servers:
                private = _private_subnet(parent, name, index, vpc.id, zone, subnet.id, gateway, request.tags)
                private_subnet_ids.append(private.subnet_id)
                route_table_ids.append(private.route_table_id)
        # Model downloads stay on the AWS network and cost no data-transfer fee (gateway endpoints are free); from
        # private subnets they also bypass the NAT gateway's per-GB charge.
        region = aws.get_region_output(opts=invoke_options(parent)).region
        aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, vpc_endpoint_type="Gateway",
                            service_name=region.apply(lambda r: f"com.amazonaws.{r}.s3"),
                            route_table_ids=route_table_ids, tags=_named(request.tags, f"{name}-s3"), opts=opts)
        return NetworkResult(network_id=vpc.id, subnet_ids=subnet_ids, cidr_block=vpc.cidr_block,
                             private_subnet_ids=private_subnet_ids)

    def network_cidr(self, parent: pulumi.Resource, network_id: pulumi.Input[str]) -> StrOutput:
        return aws.ec2.get_vpc_output(id=network_id, opts=invoke_options(parent)).cidr_block

    #### Firewall ####

    def create_firewall(self, parent: pulumi.Resource, name: str, request: FirewallRequest) -> FirewallResult:
        opts = child_options(parent)
        group = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=request.network_id,
            description="inferstack inference server: API to allowed networks, metrics inside the VPC",
            tags=_named(request.tags, f"{name}-sg"), opts=opts)
        load_balancer_group = None
        if request.load_balanced:
            # The API port admits the load balancer's security group only: its nodes (requests and health checks
            # alike) carry that group; allowed_cidrs reach the load balancer, never the servers.
            load_balancer_group = _load_balancer_group(
                parent, name, request.network_id, request.api_sources(), [group.id], request.serving_port,
                request.tags)
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-load-balancer", security_group_id=group.id, ip_protocol="tcp",
                from_port=request.serving_port, to_port=request.serving_port,
                referenced_security_group_id=load_balancer_group.id, description="inference API, load balancer only",
                tags=request.tags, opts=opts)
        else:
            for label, cidr in request.api_sources():
                _ingress(f"{name}-api-{label}", group, request.serving_port, cidr, "inference API", request.tags,
                         opts)
        if request.metrics_port is not None:
            _ingress(f"{name}-metrics", group, request.metrics_port, request.network_cidr, "metrics, VPC only",
                     request.tags, opts)
        for label, port in WEB_EGRESS_PORTS.items():
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-egress-{label}", security_group_id=group.id, ip_protocol="tcp", from_port=port,
                to_port=port, cidr_ipv4="0.0.0.0/0", description=f"{label} for drivers, packages, models",
                tags=request.tags, opts=opts)
        return FirewallResult(firewall_id=group.id,
                              load_balancer_firewall_id=load_balancer_group.id if load_balancer_group else None)

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
        if request.telemetry_grants:
            policies["telemetry-write"] = _telemetry_statements(*request.telemetry_grants)
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
        user_data = _user_data(parent, plan, request.user_data)
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
                                   "volume_size": image.root_volume_size(plan),
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

    def create_fleet(self, parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
        plan, fleet = request.plan, _fleet(request.plan)
        protected = fleet_options(parent, request.protected)
        template = _launch_template(parent, name, request, _server_image(parent, plan),
                                    _user_data(parent, plan, request.user_data))
        targets = _target_group(parent, name, request)
        canary = request.for_canary() if request.canary else None
        canary_targets = _target_group(parent, f"{name}-canary", canary) if canary else None
        balancer = _load_balancer(parent, name, request, _load_balancer_logs(parent, name, request))
        certificate = request.api_certificate or _issued_certificate(parent, name, request.api_domain, request.tags)
        aws.lb.Listener(
            f"{name}-https", load_balancer_arn=balancer.arn, port=LISTENER_PORTS["https"], protocol="HTTPS",
            ssl_policy=LOAD_BALANCER_TLS_POLICY, certificate_arn=certificate,
            default_actions=[_forward(request, targets, canary_targets)], tags=request.tags, opts=protected)
        aws.lb.Listener(
            f"{name}-http", load_balancer_arn=balancer.arn, port=LISTENER_PORTS["http"], protocol="HTTP",
            default_actions=[{"type": "redirect", "redirect": {
                "protocol": "HTTPS", "port": str(LISTENER_PORTS["https"]), "status_code": "HTTP_301"}}],
            tags=request.tags, opts=protected)
        group = _group(parent, name, request, template, targets)
        _scaling_policies(parent, name, fleet, group, balancer, targets, request.tags)
        watched: dict[str, pulumi.Input[str]] = {"load_balancer": balancer.arn_suffix,
                                                 "target_group": targets.arn_suffix, "group": group.name}
        if canary is not None and canary_targets is not None:  # the same group, from the canary's plan
            canary_template = _launch_template(parent, f"{name}-canary", canary, _server_image(parent, canary.plan),
                                               _user_data(parent, canary.plan, canary.user_data))
            canary_group = _group(parent, f"{name}-canary", canary, canary_template, canary_targets)
            _scaling_policies(parent, f"{name}-canary", _fleet(canary.plan), canary_group, balancer, canary_targets,
                              request.tags)
            watched.update(canary_target_group=canary_targets.arn_suffix, canary_group=canary_group.name)
        # DNS stays yours: say where the domain must point.
        balancer.dns_name.apply(lambda address: pulumi.log.info(
            f"{name}: point {request.api_domain} at {address} (a CNAME, or a Route 53 alias record)",
            resource=parent))
        return FleetResult(endpoint_url=pulumi.Output.from_input(f"https://{request.api_domain}"),
                           load_balancer_address=balancer.dns_name, group_id=group.id, watched=watched)

    #### Monitoring ####

    def create_telemetry(self, parent: pulumi.Resource, name: str, request: TelemetryRequest) -> TelemetryResult:
        """A CloudWatch Logs group for the servers' logs (and the runtime's Prometheus metrics, as embedded metric
        format events), kept LOG_RETENTION_DAYS, kept on destroy when protected; the agent's metrics go to a namespace
        of the same name. Grants: (the log group's ARN, the namespace), in that order (`_telemetry_statements`).

        Encryption: CloudWatch Logs always encrypts log data at rest; a customer key (kms_key_id) would need a key
        policy for the logs service principal, which the stack does not create (CloudWatch Logs User Guide, "Encrypt
        log data in CloudWatch Logs using AWS KMS")."""
        destination = "/".join(["inferstack", slug(pulumi.get_project()), slug(pulumi.get_stack()), slug(name)])
        group = aws.cloudwatch.LogGroup(
            f"{name}-logs", name=destination, retention_in_days=LOG_RETENTION_DAYS, skip_destroy=request.protected,
            deletion_protection_enabled=request.protected, tags=request.tags, opts=child_options(parent))
        target = group.name.apply(lambda logs: TelemetryTarget(logs=logs, metrics=destination))
        return TelemetryResult(target=target, grants=[group.arn, pulumi.Output.from_input(destination)])

    def create_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> AlarmsResult:
        """One CloudWatch alarm per rule on the load balancer's metrics, and with the agent (request.telemetry) per
        agent rule on the group's GPU memory and disk; a canary's group gets its own unhealthy-server, server-error
        and agent alarms. Each notifies the SNS topic when it fires and when it clears."""
        watched, plan = request.fleet.watched, request.plan
        dimensions = {"LoadBalancer": watched["load_balancer"], "TargetGroup": watched["target_group"]}
        alarms = [self._alarm(parent, name, request, rule,
                              _answer_time_condition(parent, name, rule, request.telemetry)
                              if rule.kind is AlarmKind.LATENCY and request.telemetry is not None
                              else _alarm_condition(rule, dimensions))
                  for rule in alarm_rules(plan)]
        alarms += self._agent_alarms(parent, name, request, plan, watched["group"])
        canary = plan.canary
        if canary is not None and "canary_target_group" in watched:
            dimensions = {"LoadBalancer": watched["load_balancer"], "TargetGroup": watched["canary_target_group"]}
            alarms += [self._alarm(parent, f"{name}-canary", request, rule,
                                   _alarm_condition(rule, dimensions, one_target_group=True))
                       for rule in alarm_rules(canary.plan)
                       if rule.kind in (AlarmKind.UNHEALTHY_SERVERS, AlarmKind.ERROR_RATE)]
            alarms += self._agent_alarms(parent, f"{name}-canary", request, canary.plan, watched["canary_group"])
        return AlarmsResult(alarm_ids=[alarm.arn for alarm in alarms])

    def _agent_alarms(self, parent: pulumi.Resource, name: str, request: AlarmsRequest, plan: DeploymentPlan,
                      group: pulumi.Input[str]) -> list[aws.cloudwatch.MetricAlarm]:
        """The GPU-memory and disk alarms of one group, on the agent's series aggregated by AutoScalingGroupName.
        No data is breaching: a group whose agents send nothing is not watched, and says so."""
        if request.telemetry is None:
            return []
        namespace = request.telemetry.target.apply(lambda target: target.metrics)
        return [self._alarm(parent, name, request, rule, _agent_alarm_condition(rule, namespace, group),
                            missing="breaching") for rule in agent_alarm_rules(plan)]

    @staticmethod
    def _alarm(parent: pulumi.Resource, name: str, request: AlarmsRequest, rule: AlarmRule,
               condition: dict[str, Any], missing: str = "notBreaching") -> aws.cloudwatch.MetricAlarm:
        actions = [request.notification_target] if request.notification_target else []
        return aws.cloudwatch.MetricAlarm(
            f"{name}-alarm-{rule.kind.value}", alarm_description=f"inferstack {name}: {rule.summary}",
            evaluation_periods=rule.minutes, datapoints_to_alarm=rule.minutes, alarm_actions=actions,
            ok_actions=actions, treat_missing_data=missing, tags=request.tags, **condition,
            opts=child_options(parent))

    def create_dashboard(self, parent: pulumi.Resource, name: str, request: AlarmsRequest) -> StrOutput:
        """A CloudWatch dashboard of the load balancer's and the group's metrics (the alarms' own), one graph per
        panel, the plan's lines drawn as horizontal annotations."""
        region = aws.get_region_output(opts=invoke_options(parent)).region
        body = pulumi.Output.all(region, *(request.fleet.watched[role] for role in DASHBOARD_ROLES)).apply(
            lambda values: json.dumps(_dashboard_body(request.plan, values[0], dict(zip(DASHBOARD_ROLES, values[1:],
                                                                                         strict=True)))))
        dashboard = aws.cloudwatch.Dashboard(
            f"{name}-dashboard", dashboard_name=unique_name([pulumi.get_project(), pulumi.get_stack(), name],
                                                            max_length=DASHBOARD_NAME_MAX),
            dashboard_body=body, opts=child_options(parent))
        return dashboard.dashboard_arn

    #### Cache ####

    def create_cache(self, parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
        """ElastiCache for Redis OSS in the servers' subnets: TLS required, AUTH token, encrypted at rest, its own
        security group admitting the servers' security groups only."""
        assert request.auth_token is not None, "ElastiCache takes the stack's AUTH token"
        opts = child_options(parent)
        group = aws.ec2.SecurityGroup(f"{name}-cache-sg", vpc_id=request.network_id,
                                      description="inferstack inference cache: Redis from the servers only",
                                      tags=_named(request.tags, f"{name}-cache-sg"), opts=opts)
        for index, server_group in enumerate(request.server_firewall_ids):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-cache-from-servers-{index}", security_group_id=group.id, ip_protocol="tcp",
                from_port=CACHE_PORT, to_port=CACHE_PORT, referenced_security_group_id=server_group,
                description="Redis from the inference servers", tags=request.tags, opts=opts)
            if request.firewall_created:  # a created group has no egress but the web's (the default one is removed)
                aws.vpc.SecurityGroupEgressRule(
                    f"{name}-egress-cache-{index}", security_group_id=server_group, ip_protocol="tcp",
                    from_port=CACHE_PORT, to_port=CACHE_PORT, referenced_security_group_id=group.id,
                    description="Redis, the inference cache", tags=request.tags, opts=opts)
        subnets = aws.elasticache.SubnetGroup(f"{name}-cache-subnets", subnet_ids=list(request.subnet_ids),
                                              description="inferstack inference cache", tags=request.tags, opts=opts)
        available = request.highly_available
        cache = aws.elasticache.ReplicationGroup(
            f"{name}-cache", description="inferstack inference cache", engine="redis",
            engine_version=CACHE_ENGINE_VERSION, node_type=CACHE_NODE_TYPE, port=CACHE_PORT,
            num_cache_clusters=2 if available else 1, automatic_failover_enabled=available,
            multi_az_enabled=available, subnet_group_name=subnets.name, security_group_ids=[group.id],
            transit_encryption_enabled=True, transit_encryption_mode="required", at_rest_encryption_enabled=True,
            auth_token=request.auth_token, apply_immediately=True, tags=request.tags,
            opts=child_options(parent, protect=True if request.protected else None))
        # ElastiCache's certificates chain to Amazon's public roots: the system trust store verifies them.
        return CacheResult(host=cache.primary_endpoint_address, port=pulumi.Output.from_input(CACHE_PORT),
                           auth_token=pulumi.Output.secret(request.auth_token),
                           ca_certificate=pulumi.Output.from_input(None), verify=True)

    #### Offline preview ####

    def preview_answers(self) -> PreviewAnswers:
        return PreviewAnswers(resources=_PREVIEW_OUTPUTS, lookups=_PREVIEW_INVOKES,
                              region=self.configured_region() or PREVIEW_REGION, account=PREVIEW_ACCOUNT)

    #### Shared behaviour ####

    def fleet_problems(self, plan: DeploymentPlan, *, api_certificate: str | None,
                       load_balancer_subnets: int | None, prefix: str) -> list[Problem]:
        """What the Application Load Balancer or its listener would refuse, before anything is created."""
        problems = []
        if load_balancer_subnets is not None and load_balancer_subnets < LOAD_BALANCER_MIN_ZONES:
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


#### Helpers: network and firewall ####


def _named(tags: Mapping[str, str], name: str) -> dict[str, str]:
    """Tags plus the Name tag the EC2 console lists resources by."""
    return {**tags, "Name": name}


def _network_zones(request: NetworkRequest) -> int:
    """Zones to create subnets in: the plan's; a fleet's at least the load balancer's two, and no more than the
    private half of the VPC's ranges holds."""
    if not request.private_servers:
        return request.zones
    if request.zones > PRIVATE_SUBNET_OFFSET:
        raise input_error("plan.zones", f"a fleet's network holds {PRIVATE_SUBNET_OFFSET} zones (a public and a "
                          "private /20 in each)", value=request.zones,
                          fix=f"plan for {PRIVATE_SUBNET_OFFSET} zones or fewer, or bring your own subnets")
    return max(request.zones, LOAD_BALANCER_MIN_ZONES)


@dataclass(frozen=True)
class _PrivateSubnet:
    subnet_id: StrOutput
    route_table_id: StrOutput


def _private_subnet(parent: pulumi.Resource, name: str, index: int, vpc_id: StrOutput, zone: StrOutput,
                    public_subnet_id: StrOutput, gateway: aws.ec2.InternetGateway,
                    tags: Mapping[str, str]) -> _PrivateSubnet:
    """A subnet whose servers have no public address and reach the internet through a NAT gateway in their own zone
    (one per zone: a zone's outage never cuts the others' egress; each costs an hourly fee and a per-GB charge)."""
    opts = child_options(parent)
    address = aws.ec2.Eip(f"{name}-nat-{index}-ip", domain="vpc", tags=_named(tags, f"{name}-nat-{index}"),
                          opts=opts)
    # A public NAT gateway routes through the VPC's internet gateway, so it waits for it (as the "Public NAT" example
    # of pulumi_aws ec2/nat_gateway.py does); an Elastic IP's id is its allocation id.
    nat = aws.ec2.NatGateway(f"{name}-nat-{index}", allocation_id=address.id, subnet_id=public_subnet_id,
                             connectivity_type="public", tags=_named(tags, f"{name}-nat-{index}"),
                             opts=child_options(parent, depends_on=[gateway]))
    routes = aws.ec2.RouteTable(f"{name}-private-{index}", vpc_id=vpc_id,
                                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                                tags=_named(tags, f"{name}-private-{index}"), opts=opts)
    subnet = aws.ec2.Subnet(
        f"{name}-private-subnet-{index}", vpc_id=vpc_id, cidr_block=SUBNET_RANGES[PRIVATE_SUBNET_OFFSET + index],
        availability_zone=zone, map_public_ip_on_launch=False, tags=_named(tags, f"{name}-private-subnet-{index}"),
        opts=opts)
    aws.ec2.RouteTableAssociation(f"{name}-private-subnet-{index}-routes", subnet_id=subnet.id,
                                  route_table_id=routes.id, opts=opts)
    return _PrivateSubnet(subnet_id=subnet.id, route_table_id=routes.id)


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


def _load_balancer_group(parent: pulumi.Resource, name: str, network_id: pulumi.Input[str],
                         sources: Sequence[tuple[str, pulumi.Input[str]]], server_groups: Sequence[pulumi.Input[str]],
                         serving_port: int, tags: Mapping[str, str]) -> aws.ec2.SecurityGroup:
    """The load balancer's security group: HTTPS, and HTTP (which only redirects), from `sources`; out to the
    servers' API port only (a Pulumi-created group has no egress rule of its own)."""
    opts = child_options(parent)
    group = aws.ec2.SecurityGroup(
        f"{name}-lb-sg", vpc_id=network_id,
        description="inferstack load balancer: HTTPS (and HTTP, redirected) from allowed networks",
        tags=_named(tags, f"{name}-lb-sg"), opts=opts)
    for label, cidr in sources:
        for listener, port in LISTENER_PORTS.items():
            _ingress(f"{name}-lb-{listener}-{label}", group, port, cidr, f"{listener} to the load balancer", tags,
                     opts)
    for index, server_group in enumerate(server_groups):
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-lb-to-servers-{index}", security_group_id=group.id, ip_protocol="tcp", from_port=serving_port,
            to_port=serving_port, referenced_security_group_id=server_group,
            description="requests and health checks to the servers' API port", tags=tags, opts=opts)
    return group


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
                   statements: Callable[[StrOutput], list[dict[str, Any]]]) -> aws.s3.BucketPolicy:
    """The bucket's policy: TLS only, plus the caller's statements."""
    deny_plain_http = {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
                       "Resource": [bucket.arn, pulumi.Output.concat(bucket.arn, "/*")],
                       "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    policy = pulumi.Output.json_dumps({"Version": "2012-10-17",
                                       "Statement": [deny_plain_http, *statements(bucket.arn)]})
    return aws.s3.BucketPolicy(f"{resource}-policy", bucket=bucket.id, policy=policy, opts=child_options(parent))


def _load_balancer_logs(parent: pulumi.Resource, name: str, request: FleetRequest) -> tuple[StrOutput, pulumi.Resource]:
    """A private, SSE-S3 bucket of its own for the load balancer's access logs (model files, uploads and the
    buckets' own access logs live elsewhere), kept ACCESS_LOG_DAYS; its policy lets Elastic Load Balancing put
    objects under this account's log prefix and nothing else. (bucket name, its policy: the load balancer waits for
    it, as enabling access logs checks that it may write.)"""
    region = request.plan.region
    account = aws.get_caller_identity_output(opts=invoke_options(parent)).account_id
    delivery: dict[str, Any]
    if region in LOG_DELIVERY_PRINCIPAL_REGIONS:
        delivery = {"Service": LOG_DELIVERY_PRINCIPAL}
    else:
        delivery = {"AWS": aws.elb.get_service_account_output(region=region, opts=invoke_options(parent)).arn}
    bucket = _private_bucket(parent, name, "lb-logs", request.plan.stage != "production", request.tags,
                             expire_after_days=ACCESS_LOG_DAYS)
    policy = _bucket_policy(parent, f"{name}-lb-logs", bucket, lambda arn: [{
        "Sid": "LoadBalancerAccessLogDelivery", "Effect": "Allow", "Principal": delivery, "Action": "s3:PutObject",
        "Resource": pulumi.Output.concat(arn, f"/{LOAD_BALANCER_LOG_PREFIX}/AWSLogs/", account, "/*")}])
    return bucket.id, policy


def _bucket_name(parent: pulumi.Resource, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across accounts and regions (S3 names are global)."""
    account = aws.get_caller_identity_output(opts=invoke_options(parent)).account_id
    region = aws.get_region_output(opts=invoke_options(parent)).region
    return pulumi.Output.all(account, region).apply(
        lambda where: unique_name([pulumi.get_project(), pulumi.get_stack(), name, purpose], unique_by=where))


#### Helpers: compute ####


def _user_data(parent: pulumi.Resource, plan: DeploymentPlan, user_data: StrOutput) -> StrOutput:
    """Base64 of the gzip'd cloud-config, as EC2 takes it (an instance's user_data_base64, a launch template's
    user_data), once the provider's region is known to be the plan's."""
    return checked_user_data(plan, user_data, aws.get_region_output(opts=invoke_options(parent)).region,
                             provider="AWS", encode=functools.partial(
                                 compressed_user_data, limit_bytes=USER_DATA_LIMIT_BYTES, service="EC2"))


@dataclass(frozen=True)
class _ServerImage:
    image_id: StrOutput
    root_device_name: StrOutput
    root_volume_gib: pulumi.Output[int]
    """Size of the image's root snapshot: the root volume may not be smaller."""

    def root_volume_size(self, plan: DeploymentPlan) -> pulumi.Output[int]:
        return self.root_volume_gib.apply(lambda gib: max(gib, plan.disk_gib))


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
    return _ServerImage(image_id=image_id, root_device_name=image.root_device_name, root_volume_gib=root_gib)


def _image_id_filter(image_id: str) -> list[aws.ec2.GetAmiFilterArgsDict]:
    return [{"name": "image-id", "values": [image_id]}]


def _root_snapshot_gib(root_device: str, mappings: Sequence[Any]) -> int:
    for mapping in mappings:
        device = mapping.get("device_name") if isinstance(mapping, Mapping) else mapping.device_name
        ebs = mapping.get("ebs") if isinstance(mapping, Mapping) else mapping.ebs
        if device == root_device and ebs and ebs.get("volume_size"):
            return int(ebs["volume_size"])
    return 0


#### Helpers: fleet ####


def _fleet(plan: DeploymentPlan) -> Fleet:
    if plan.fleet is None:
        raise input_error("plan.fleet", "is missing: only a plan with a fleet runs as an Auto Scaling group",
                          fix="deploy the plan's servers with create_servers")
    return plan.fleet


def _launch_template(parent: pulumi.Resource, name: str, request: FleetRequest, image: _ServerImage,
                     user_data: StrOutput) -> aws.ec2.LaunchTemplate:
    """The servers' template: the hardening of create_servers' instances. It carries no termination protection
    (EC2 User Guide: it "does not prevent Amazon EC2 Auto Scaling from terminating an instance", and lifting it would
    change the template, which replaces every server); spot capacity is the group's (mixed instances policy)."""
    plan = request.plan
    server_tags = _named(request.tags, f"{name}-server")
    return aws.ec2.LaunchTemplate(
        f"{name}-template", image_id=image.image_id, instance_type=plan.instance_type,
        iam_instance_profile={"name": request.attachment},
        metadata_options={"http_endpoint": "enabled", "http_tokens": "required",
                          "http_put_response_hop_limit": METADATA_HOP_LIMIT, "instance_metadata_tags": "disabled"},
        # LaunchTemplateBlockDeviceMappingEbsArgs types `encrypted` and `delete_on_termination` as strings.
        block_device_mappings=[{"device_name": image.root_device_name, "ebs": {
            "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true",
            "volume_size": image.root_volume_size(plan)}}],
        # No public address even in a subnet that would give one (LaunchTemplateNetworkInterfaceArgs: a string).
        network_interfaces=[{"device_index": 0, "associate_public_ip_address": "false",
                             "delete_on_termination": "true", "security_groups": list(request.firewall_ids)}],
        user_data=user_data, update_default_version=True,
        tag_specifications=[{"resource_type": kind, "tags": server_tags}
                            for kind in ("instance", "volume", "network-interface")],
        tags=_named(request.tags, f"{name}-template"),
        # A newer image must not replace the servers on the next `pulumi up` (as for single servers); roll it out
        # with `pulumi up --replace <template URN>` when you choose to.
        opts=fleet_options(parent, request.protected, ignore_changes=["image_id"]))


def _target_group(parent: pulumi.Resource, name: str, request: FleetRequest) -> aws.lb.TargetGroup:
    plan = request.plan
    return aws.lb.TargetGroup(
        f"{name}-targets", name_prefix=_elb_name_prefix(name), vpc_id=request.network_id, target_type="instance",
        protocol="HTTP", port=plan.serving.port,
        # Generations differ in length by orders of magnitude: a new request goes to the least busy server.
        load_balancing_algorithm_type="least_outstanding_requests",
        # A server leaving the group finishes its streamed answers first.
        deregistration_delay=min(plan.request_timeout_s, MAX_DEREGISTRATION_DELAY_S),
        health_check={"enabled": True, "protocol": "HTTP", "port": "traffic-port", "path": plan.serving.health_path,
                      "matcher": "200", "interval": HEALTH_CHECK_INTERVAL_S, "timeout": HEALTH_CHECK_TIMEOUT_S,
                      "healthy_threshold": HEALTHY_THRESHOLD, "unhealthy_threshold": UNHEALTHY_THRESHOLD},
        tags=_named(request.tags, f"{name}-targets"),
        opts=fleet_options(parent, request.protected))


def _forward(request: FleetRequest, targets: aws.lb.TargetGroup,
             canary_targets: aws.lb.TargetGroup | None) -> aws.lb.ListenerDefaultActionArgsDict:
    """To the servers' target group; with a canary, weighted between the two groups (ListenerDefaultActionForward-
    TargetGroupArgs: weights 0-999, relative; ELB User Guide, "Listener rules", weighted target groups)."""
    if request.canary is None or canary_targets is None:
        return {"type": "forward", "target_group_arn": targets.arn}
    return {"type": "forward", "forward": {"target_groups": [
        {"arn": targets.arn, "weight": request.canary.main_weight},
        {"arn": canary_targets.arn, "weight": request.canary.weight}]}}


def _load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                   logs: tuple[StrOutput, pulumi.Resource]) -> aws.lb.LoadBalancer:
    """Internet-facing only when an allowed CIDR is public; callers are limited by its security group. Its access
    logs go to `logs` (`_load_balancer_logs`)."""
    group = request.load_balancer_firewall_id
    if group is None:  # the servers' security groups were brought: the load balancer gets one of its own here
        sources: list[tuple[str, pulumi.Input[str]]] = [(slug(cidr), cidr) for cidr in request.allowed_cidrs]
        sources = sources or [("network", request.network_cidr)]
        group = _load_balancer_group(parent, name, request.network_id, sources, request.firewall_ids,
                                     request.plan.serving.port, request.tags).id
        pulumi.Output.from_input(group).apply(lambda group_id: pulumi.log.warn(
            f"{name}: the brought security groups must admit port {request.plan.serving.port} from the load "
            f"balancer's security group {group_id}, or no request reaches the servers", resource=parent))
    return aws.lb.LoadBalancer(
        f"{name}-lb", name_prefix=_elb_name_prefix(name), load_balancer_type="application",
        internal=not request.internet_facing, subnets=list(request.load_balancer_subnet_ids), security_groups=[group],
        ip_address_type="ipv4", idle_timeout=request.plan.request_timeout_s, drop_invalid_header_fields=True,
        enable_deletion_protection=request.protected, tags=_named(request.tags, f"{name}-lb"),
        access_logs={"bucket": logs[0], "enabled": True, "prefix": LOAD_BALANCER_LOG_PREFIX},
        opts=fleet_options(parent, request.protected, depends_on=[logs[1]]))


def _issued_certificate(parent: pulumi.Resource, name: str, domain: str, tags: Mapping[str, str]) -> StrOutput:
    """An ACM certificate for the domain, validated by a DNS record you create; its ARN resolves once it is issued
    (the listener cannot take a pending certificate). CertificateValidation waits up to 75 minutes (the provider's
    create timeout)."""
    opts = child_options(parent)
    certificate = aws.acm.Certificate(f"{name}-certificate", domain_name=domain, validation_method="DNS",
                                      tags=_named(tags, f"{name}-certificate"), opts=opts)
    def say_where(options: Sequence[Any]) -> None:
        for option in options:
            kind, record, value = (_field(option, f"resource_record_{part}") for part in ("type", "name", "value"))
            pulumi.log.info(f"{name}: ACM issues the certificate for {domain} once DNS answers {kind} {record} -> "
                            f"{value}; `pulumi up` waits for it", resource=parent)

    certificate.domain_validation_options.apply(say_where)
    validation = aws.acm.CertificateValidation(f"{name}-certificate-validation", certificate_arn=certificate.arn,
                                               opts=opts)
    return validation.certificate_arn


def _group(parent: pulumi.Resource, name: str, request: FleetRequest, template: aws.ec2.LaunchTemplate,
           targets: aws.lb.TargetGroup) -> aws.autoscaling.Group:
    """min..max servers over the private subnets, replaced when the load balancer's health check fails after the
    grace; a new template version replaces them by instance refresh, launching before terminating."""
    plan, fleet = request.plan, _fleet(request.plan)
    # A refresh (started by a new template version; the version must be the template's number, not $Latest,
    # pulumi_aws GroupInstanceRefreshArgs) replaces a server only once its successor is healthy.
    launch: aws.autoscaling.GroupLaunchTemplateArgsDict = {
        "id": template.id, "version": template.latest_version.apply(str)}
    spot: aws.autoscaling.GroupMixedInstancesPolicyArgsDict = {
        "launch_template": {"launch_template_specification": {
            "launch_template_id": launch["id"], "version": launch["version"]}},
        "instances_distribution": {"on_demand_base_capacity": 0, "on_demand_percentage_above_base_capacity": 0,
                                   "spot_allocation_strategy": "price-capacity-optimized"}}
    return aws.autoscaling.Group(
        f"{name}-group", min_size=fleet.min_replicas, max_size=fleet.max_replicas,
        vpc_zone_identifiers=list(request.server_subnet_ids),
        launch_template=None if plan.spot else launch, mixed_instances_policy=spot if plan.spot else None,
        capacity_rebalance=True if plan.spot else None,
        target_group_arns=[targets.arn], health_check_type="ELB", health_check_grace_period=fleet.health_check_grace_s,
        default_instance_warmup=fleet.cold_start_s,
        instance_refresh=_instance_refresh(plan.rolling_update, fleet),
        # The dashboard's group size: group metrics are off unless listed; at one-minute granularity they are free
        # ("Auto Scaling group metrics", Amazon EC2 Auto Scaling User Guide).
        enabled_metrics=list(GROUP_METRICS), metrics_granularity="1Minute",
        tags=[{"key": key, "value": value, "propagate_at_launch": False}
              for key, value in _named(request.tags, f"{name}-group").items()],
        opts=fleet_options(parent, request.protected))


def _instance_refresh(rollout: Rollout, fleet: Fleet) -> aws.autoscaling.GroupInstanceRefreshArgsDict:
    """The plan's rollout as an instance refresh, which a new template version starts: the plan's surge above the
    group's size (max healthy), none of its servers down (min healthy 100 %: the floor is the capacity the plan
    needs), a new server counted once the load balancer's health check passes (health_check_type ELB) and its warm-up
    is over, servers already on the new version skipped. Percentages are of the desired capacity; at the floor the
    surge is `rollout.surge` servers, above it proportionally more (MaxHealthyPercentage 100-200, at most 100 above
    MinHealthyPercentage: EC2 Auto Scaling API Reference, RefreshPreferences, read 2026-12-01). No checkpoints: a
    paused refresh leaves two revisions answering for its pause; watching a new revision on part of the traffic is
    the canary's job."""
    surge_percent = math.ceil(100 * rollout.surge / fleet.min_replicas)
    return {"strategy": "Rolling", "preferences": {
        "min_healthy_percentage": rollout.min_healthy_percent,
        "max_healthy_percentage": min(200, rollout.min_healthy_percent + surge_percent),
        "instance_warmup": str(fleet.cold_start_s), "skip_matching": True}}


def _scaling_policies(parent: pulumi.Resource, name: str, fleet: Fleet, group: aws.autoscaling.Group,
                      balancer: aws.lb.LoadBalancer, targets: aws.lb.TargetGroup, tags: Mapping[str, str]) -> None:
    """Scale out on requests per server (target tracking), scale in one server per cooldown (see the constants)."""
    opts = child_options(parent)
    target_per_minute = fleet.target_requests_per_s * SECONDS_PER_MINUTE
    aws.autoscaling.Policy(
        f"{name}-requests", autoscaling_group_name=group.name, policy_type="TargetTrackingScaling",
        estimated_instance_warmup=fleet.scale_out_cooldown_s,
        target_tracking_configuration={
            "target_value": target_per_minute, "disable_scale_in": True,
            "predefined_metric_specification": {
                "predefined_metric_type": "ALBRequestCountPerTarget",
                # "app/<lb>/<id>/targetgroup/<tg>/<id>" (PolicyTargetTrackingConfigurationPredefinedMetric-
                # SpecificationArgs.resource_label); the target group is attached to the group.
                "resource_label": pulumi.Output.concat(balancer.arn_suffix, "/", targets.arn_suffix)}},
        opts=opts)
    scale_in = aws.autoscaling.Policy(
        f"{name}-scale-in", autoscaling_group_name=group.name, policy_type="SimpleScaling",
        adjustment_type="ChangeInCapacity", scaling_adjustment=-1, cooldown=fleet.scale_in_cooldown_s, opts=opts)
    # The alarm invokes the policy every minute it stays in ALARM; the policy's cooldown spaces the steps. No
    # request at all publishes no data point, which counts as low load.
    aws.cloudwatch.MetricAlarm(
        f"{name}-low-load", alarm_description=f"inferstack {name}: fewer than half the target requests per server "
        f"for {SCALE_IN_EVALUATION_MINUTES} minutes; remove one server", namespace="AWS/ApplicationELB",
        metric_name="RequestCountPerTarget", dimensions={"TargetGroup": targets.arn_suffix}, statistic="Sum",
        period=SECONDS_PER_MINUTE, evaluation_periods=SCALE_IN_EVALUATION_MINUTES,
        datapoints_to_alarm=SCALE_IN_EVALUATION_MINUTES, comparison_operator="LessThanThreshold",
        threshold=target_per_minute * SCALE_IN_LOAD_FRACTION, treat_missing_data="breaching",
        alarm_actions=[scale_in.arn], tags=tags, opts=opts)


def _dashboard_body(plan: DeploymentPlan, region: str, watched: Mapping[str, str]) -> dict[str, Any]:
    """The dashboard's body: one metric widget per panel, two to a row."""
    return {"widgets": [{
        "type": "metric", "x": (index % 2) * DASHBOARD_WIDTH, "y": (index // 2) * DASHBOARD_HEIGHT,
        "width": DASHBOARD_WIDTH, "height": DASHBOARD_HEIGHT, "properties": _dashboard_widget(panel, region, watched)}
        for index, panel in enumerate(dashboard_panels(plan))]}


def _dashboard_widget(panel: Panel, region: str, watched: Mapping[str, str]) -> dict[str, Any]:
    """A panel's metric widget properties: its metrics in one-minute periods, the plan's lines as annotations
    (latency in seconds, as TargetResponseTime is published)."""
    balancer = ["LoadBalancer", watched["load_balancer"]]
    targets = ["TargetGroup", watched["target_group"], *balancer]
    metrics: list[list[Any]]
    lines = [{"label": label, "value": value} for label, value in panel.lines]
    if panel.kind is PanelKind.REQUESTS:
        metrics = [[ELB_NAMESPACE, "RequestCount", *balancer, {"stat": "Sum", "label": "requests"}]]
    elif panel.kind is PanelKind.LATENCY:
        metrics = [[ELB_NAMESPACE, "TargetResponseTime", *targets, {"stat": stat, "label": stat}]
                   for stat in ("p50", "p95")]
        lines = [{"label": label, "value": value / 1000} for label, value in panel.lines]
    elif panel.kind is PanelKind.SERVER_ERRORS:
        metrics = [[ELB_NAMESPACE, "HTTPCode_Target_5XX_Count", *balancer, {"stat": "Sum", "label": "server 5xx"}]]
    else:
        assert panel.kind is PanelKind.SERVERS, panel.kind
        metrics = [[ELB_NAMESPACE, "HealthyHostCount", *targets, {"stat": "Minimum", "label": "healthy"}],
                   [ELB_NAMESPACE, "UnHealthyHostCount", *targets, {"stat": "Maximum", "label": "unhealthy"}],
                   ["AWS/AutoScaling", GROUP_METRICS[0].value, "AutoScalingGroupName", watched["group"],
                    {"stat": "Average", "label": "in service"}]]
    title = f"{panel.title} (s)" if panel.kind is PanelKind.LATENCY else panel.title
    return {"title": title, "view": "timeSeries", "region": region, "period": SECONDS_PER_MINUTE,
            "metrics": metrics, "annotations": {"horizontal": lines}}


def _alarm_condition(rule: AlarmRule, dimensions: Mapping[str, pulumi.Input[str]],
                     one_target_group: bool = False) -> dict[str, Any]:
    """The metric and comparison of one rule's alarm, in one-minute periods (MetricAlarm arguments); the error rate
    is the load balancer's, or with `one_target_group` that target group's (a canary's): ELB publishes
    HTTPCode_Target_5XX_Count and RequestCount per TargetGroup, LoadBalancer too (ELB User Guide, "CloudWatch metrics
    for your Application Load Balancer")."""
    per_minute = {"namespace": ELB_NAMESPACE, "period": SECONDS_PER_MINUTE}
    if rule.kind is AlarmKind.UNHEALTHY_SERVERS:
        return {**per_minute, "metric_name": "UnHealthyHostCount", "dimensions": dimensions, "statistic": "Maximum",
                "comparison_operator": "GreaterThanThreshold", "threshold": rule.threshold}
    if rule.kind is AlarmKind.FLEET_AT_CEILING:
        return {**per_minute, "metric_name": "HealthyHostCount", "dimensions": dimensions, "statistic": "Minimum",
                "comparison_operator": "GreaterThanOrEqualToThreshold", "threshold": rule.threshold}
    if rule.kind is AlarmKind.LATENCY:
        return {**per_minute, "metric_name": "TargetResponseTime", "dimensions": dimensions,
                "extended_statistic": "p95", "comparison_operator": "GreaterThanThreshold",
                "threshold": rule.threshold / 1000}
    # Error rate: server errors as a percentage of requests, by metric math (no request: no data, not breaching).
    balancer = dict(dimensions) if one_target_group else {"LoadBalancer": dimensions["LoadBalancer"]}
    return {"comparison_operator": "GreaterThanThreshold", "threshold": rule.threshold, "metric_queries": [
        {"id": "errors", "metric": {"namespace": ELB_NAMESPACE, "metric_name": "HTTPCode_Target_5XX_Count",
                                    "dimensions": balancer, "stat": "Sum", "period": SECONDS_PER_MINUTE}},
        {"id": "requests", "metric": {"namespace": ELB_NAMESPACE, "metric_name": "RequestCount",
                                      "dimensions": balancer, "stat": "Sum", "period": SECONDS_PER_MINUTE}},
        {"id": "error_rate", "expression": "100 * FILL(errors, 0) / requests", "label": "server errors, % of requests",
         "return_data": True}]}


def _answer_time_condition(parent: pulumi.Resource, name: str, rule: AlarmRule,
                           telemetry: TelemetryResult) -> dict[str, Any]:
    """The latency rule on the gateways' answer times (ANSWER_TIME_PATTERN), p95 over one-minute periods, in seconds:
    the metric filter that publishes them from the servers' log group, and the alarm's condition on it."""
    target = telemetry.target
    aws.cloudwatch.LogMetricFilter(
        f"{name}-answer-time", name=f"{name}-answer-time", log_group_name=target.apply(lambda t: t.logs),
        pattern=ANSWER_TIME_PATTERN, metric_transformation={
            "name": ANSWER_TIME_METRIC, "namespace": target.apply(lambda t: t.metrics), "value": "$request_time",
            "unit": "Seconds"}, opts=child_options(parent))
    return {"namespace": target.apply(lambda t: t.metrics), "period": SECONDS_PER_MINUTE,
            "metric_name": ANSWER_TIME_METRIC, "extended_statistic": "p95", "unit": "Seconds",
            "comparison_operator": "GreaterThanThreshold", "threshold": rule.threshold / 1000}


def _agent_alarm_condition(rule: AlarmRule, namespace: pulumi.Input[str],
                           group: pulumi.Input[str]) -> dict[str, Any]:
    """An agent rule's metric, in one-minute periods, on the group's aggregated series (the agent's
    aggregation_dimensions [[AutoScalingGroupName]]: the worst server is the Maximum)."""
    dimensions = {GROUP_DIMENSION: group}
    if rule.kind is AlarmKind.DISK:
        return {"namespace": namespace, "period": SECONDS_PER_MINUTE, "metric_name": "disk_used_percent",
                "dimensions": dimensions, "statistic": "Maximum", "comparison_operator": "GreaterThanThreshold",
                "threshold": rule.threshold}
    # GPU memory: used over total (MiB both); the fullest GPU's use over the largest GPU's size, which for the group's
    # one GPU model is the fullest GPU's share.
    used, total = (f"nvidia_smi_{measurement}" for measurement in GPU_MEASUREMENTS[:2])
    return {"comparison_operator": "GreaterThanThreshold", "threshold": rule.threshold, "metric_queries": [
        {"id": "used", "metric": {"namespace": namespace, "metric_name": used, "dimensions": dimensions,
                                  "stat": "Maximum", "period": SECONDS_PER_MINUTE}},
        {"id": "total", "metric": {"namespace": namespace, "metric_name": total, "dimensions": dimensions,
                                   "stat": "Maximum", "period": SECONDS_PER_MINUTE}},
        {"id": "gpu_memory", "expression": "100 * used / total", "label": "GPU memory used, % of the GPU's",
         "return_data": True}]}


def _telemetry_statements(log_group_arn: StrOutput, namespace: StrOutput, *rest: StrOutput) -> list[dict[str, Any]]:
    """The CloudWatch agent's writes, to the deployment's log group and metric namespace only (create_telemetry's
    grants). Service Authorization Reference (CloudWatch Logs): CreateLogStream and DescribeLogStreams act on the
    log-group resource, PutLogEvents on log-stream (`<group ARN>:log-stream:<name>`); PutMetricData has no resource
    type and is narrowed by the cloudwatch:namespace condition key; ec2:DescribeTags (no resource type) is how the
    agent reads the instance's aws:autoscaling:groupName tag for AutoScalingGroupName (ec2tagger). The agent needs no
    logs:CreateLogGroup (the group exists) nor PutRetentionPolicy (its configuration sets no retention)."""
    assert not rest, "AWS telemetry grants are (log group ARN, namespace)"
    return [
        {"Sid": "WriteServerLogs", "Effect": "Allow", "Action": TELEMETRY_LOG_ACTIONS[:2],
         "Resource": [log_group_arn, pulumi.Output.concat(log_group_arn, ":*")]},
        {"Sid": "PutServerLogEvents", "Effect": "Allow", "Action": TELEMETRY_LOG_ACTIONS[2],
         "Resource": pulumi.Output.concat(log_group_arn, ":log-stream:*")},
        {"Sid": "PutServerMetrics", "Effect": "Allow", "Action": TELEMETRY_METRIC_ACTIONS, "Resource": "*",
         "Condition": {"StringEquals": {"cloudwatch:namespace": namespace}}},
        {"Sid": "ReadOwnGroupTag", "Effect": "Allow", "Action": TELEMETRY_ANYWHERE_ACTIONS, "Resource": "*"},
    ]


def _elb_name_prefix(name: str) -> str:
    """Load balancer and target group names hold 32 characters, a prefix 6 (the provider adds a unique suffix):
    a replacement never collides with its predecessor's name."""
    return (slug(name)[:5].strip("-") or "inf") + "-"


def _field(item: Any, key: str) -> Any:
    """A field of a provider output object, which an apply sees as an object or, under mocks, as a mapping."""
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key)


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


def _uuid(c: PreviewContext) -> str:
    d = c.digest
    return f"{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}"


def _prefixed_name(c: PreviewContext) -> str:
    """A name from `name_prefix`, as the provider makes it: the prefix and a 26-digit unique id."""
    return str(c.inputs.get("name") or c.inputs.get("namePrefix", "tf-") + f"{int(c.digest[:24], 16) % 10**26:026d}")


def _load_balancer_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    name, suffix = _prefixed_name(c), c.digest[:16]
    internal = "internal-" if c.inputs.get("internal") else ""
    arn = _arn(c, "elasticloadbalancing", f"loadbalancer/app/{name}/{suffix}")
    return arn, {"arn": arn, "arnSuffix": f"app/{name}/{suffix}", "name": name,
                 "dnsName": f"{internal}{name}-{int(c.digest[16:24], 16) % 10**10}.{c.region}.elb.amazonaws.com"}


def _target_group_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    name, suffix = _prefixed_name(c), c.digest[:16]
    arn = _arn(c, "elasticloadbalancing", f"targetgroup/{name}/{suffix}")
    return arn, {"arn": arn, "arnSuffix": f"targetgroup/{name}/{suffix}", "name": name}


def _listener_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    arn = f"{c.inputs['loadBalancerArn'].replace(':loadbalancer/', ':listener/')}/{c.digest[:16]}"
    return arn, {"arn": arn}


def _certificate_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    arn, domain = _arn(c, "acm", f"certificate/{_uuid(c)}"), c.inputs["domainName"]
    return arn, {"arn": arn, "status": "PENDING_VALIDATION", "domainValidationOptions": [{
        "domainName": domain, "resourceRecordType": "CNAME", "resourceRecordName": f"_{c.digest[:32]}.{domain}.",
        "resourceRecordValue": f"_{c.digest[32:64]}.{c.digest[:10]}.acm-validations.aws."}]}


def _group_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    name = f"{c.name}-{c.digest[:7]}"
    return name, {"name": name,
                  "arn": _arn(c, "autoscaling", f"autoScalingGroup:{_uuid(c)}:autoScalingGroupName/{name}")}


def _scaling_policy_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    name, group = f"{c.name}-{c.digest[:7]}", c.inputs["autoscalingGroupName"]
    return name, {"name": name, "arn": _arn(
        c, "autoscaling", f"scalingPolicy:{_uuid(c)}:autoScalingGroupName/{group}:policyName/{name}")}


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
    "aws:elasticache/subnetGroup:SubnetGroup": lambda c: (c.inputs.get("name") or f"{c.name}-{c.digest[:7]}", {
        "name": c.inputs.get("name") or f"{c.name}-{c.digest[:7]}"}),
    "aws:elasticache/replicationGroup:ReplicationGroup": lambda c: (f"{c.name}-{c.digest[:7]}", {
        "primaryEndpointAddress": f"master.{c.name}-{c.digest[:7]}.abc123.use1.cache.amazonaws.com",
        "arn": _arn(c, "elasticache", f"replicationgroup:{c.name}-{c.digest[:7]}")}),
    # A fleet: NAT egress, the servers' template and group, the load balancer and its certificate, the scaling.
    "aws:ec2/eip:Eip": lambda c: (f"eipalloc-0{c.digest[:16]}", {
        "allocationId": f"eipalloc-0{c.digest[:16]}", "publicIp": c.public_ip}),
    "aws:ec2/natGateway:NatGateway": lambda c: (f"nat-0{c.digest[:16]}", {"publicIp": c.public_ip}),
    "aws:ec2/launchTemplate:LaunchTemplate": lambda c: (f"lt-0{c.digest[:16]}", {
        "arn": _arn(c, "ec2", f"launch-template/lt-0{c.digest[:16]}"), "latestVersion": 1, "defaultVersion": 1}),
    "aws:autoscaling/group:Group": _group_outputs,
    "aws:autoscaling/policy:Policy": _scaling_policy_outputs,
    "aws:cloudwatch/dashboard:Dashboard": lambda c: (c.inputs["dashboardName"], {
        "dashboardArn": f"arn:aws:cloudwatch::{c.account}:dashboard/{c.inputs['dashboardName']}"}),
    "aws:cloudwatch/logGroup:LogGroup": lambda c: (c.inputs["name"], {
        "name": c.inputs["name"], "arn": _arn(c, "logs", f"log-group:{c.inputs['name']}")}),
    "aws:cloudwatch/metricAlarm:MetricAlarm": lambda c: (f"{c.name}-{c.digest[:7]}", {
        "arn": _arn(c, "cloudwatch", f"alarm:{c.name}-{c.digest[:7]}")}),
    "aws:lb/loadBalancer:LoadBalancer": _load_balancer_outputs,
    "aws:lb/targetGroup:TargetGroup": _target_group_outputs,
    "aws:lb/listener:Listener": _listener_outputs,
    "aws:acm/certificate:Certificate": _certificate_outputs,
    "aws:acm/certificateValidation:CertificateValidation": lambda c: (
        "2026-01-21 12:00:00 +0000 UTC", {"certificateArn": c.inputs["certificateArn"]}),
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
    # The region's Elastic Load Balancing account (us-east-1's, ELB User Guide, "Enable access logs").
    "aws:elb/getServiceAccount:getServiceAccount": lambda a, c: {
        "arn": "arn:aws:iam::127311923021:root", "id": "127311923021", "region": a.get("region") or c.region},
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

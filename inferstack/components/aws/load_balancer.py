"""Load balancing and canary: a fleet's Application Load Balancer (its access logs bucket, its security group where the
servers' were brought), the target groups and their health checks, the HTTPS listener with its ACM certificate
(weighted between the main and the canary target group), and the HTTP listener that redirects to it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from inferstack.clouds import CLOUD_FACTS
from inferstack.components.aws.lookups import account_id
from inferstack.components.aws.network import LISTENER_PORTS, load_balancer_security_group
from inferstack.components.aws.storage import bucket_policy, private_bucket
from inferstack.components.aws.tags import named
from inferstack.components.contract import FleetRequest, StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, fleet_options, invoke_options
from inferstack.components.shared import ACCESS_LOG_DAYS
from inferstack.names import slug

ARN_CERTIFICATE = r"arn:aws:acm:[a-z]{2}(-[a-z]+)+-\d:\d{12}:certificate/[0-9a-f-]{36}"
"""An ACM certificate's ARN (any region: the load balancer's must be the stack's; fleet_problems checks that)."""

# The HTTPS listener's policy: TLS 1.3 and TLS 1.2 with forward-secret AEAD ciphers only, the policy the ELB console
# gives new HTTPS listeners (ELB User Guide, "Security policies for your Application Load Balancer"); the API's own
# default (ELBSecurityPolicy-2016-08) still accepts TLS 1.0.
LOAD_BALANCER_TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
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

# Load balancer access logs (ELB User Guide, "Enable access logs for your Application Load Balancer"): a bucket in the
# load balancer's region whose only server-side encryption is SSE-S3 (the one `private_bucket` sets); its policy lets
# Elastic Load Balancing put objects under <prefix>/AWSLogs/<account>/. Regions opened since Jakarta (December 2021)
# grant the log delivery service principal; older ones grant the region's Elastic Load Balancing account, which the
# provider's aws.elb.get_service_account knows (its note: "For AWS Regions opened since Jakarta (ap-southeast-3) in
# December 2021, AWS documents that a service principal name should be used instead of an AWS account ID").
LOAD_BALANCER_LOG_PREFIX = "load-balancer"
LOG_DELIVERY_PRINCIPAL = "logdelivery.elasticloadbalancing.amazonaws.com"
LOG_DELIVERY_PRINCIPAL_REGIONS = frozenset({
    "ap-southeast-3", "me-central-1", "eu-central-2", "eu-south-2", "ap-south-2", "ap-southeast-4", "il-central-1",
    "ca-west-1", "ap-southeast-5", "ap-southeast-7", "mx-central-1", "ap-east-2"})

#### Target groups and routing ####


def target_group(parent: pulumi.Resource, name: str, request: FleetRequest) -> aws.lb.TargetGroup:
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
        tags=named(request.tags, f"{name}-targets"),
        opts=fleet_options(parent, request.protected))


def forward(request: FleetRequest, targets: aws.lb.TargetGroup,
            canary_targets: aws.lb.TargetGroup | None) -> aws.lb.ListenerDefaultActionArgsDict:
    """To the servers' target group; with a canary, weighted between the two groups (ListenerDefaultActionForward-
    TargetGroupArgs: weights 0-999, relative; ELB User Guide, "Listener rules", weighted target groups)."""
    if request.canary is None or canary_targets is None:
        return {"type": "forward", "target_group_arn": targets.arn}
    return {"type": "forward", "forward": {"target_groups": [
        {"arn": targets.arn, "weight": request.canary.main_weight},
        {"arn": canary_targets.arn, "weight": request.canary.weight}]}}


#### The load balancer ####


def load_balancer_logs(parent: pulumi.Resource, name: str, request: FleetRequest) -> tuple[StrOutput, pulumi.Resource]:
    """A private, SSE-S3 bucket of its own for the load balancer's access logs (model files, uploads and the
    buckets' own access logs live elsewhere), kept ACCESS_LOG_DAYS; its policy lets Elastic Load Balancing put
    objects under this account's log prefix and nothing else. (bucket name, its policy: the load balancer waits for
    it, as enabling access logs checks that it may write.)"""
    region = request.plan.region
    account = account_id(parent)
    delivery: dict[str, Any]
    if region in LOG_DELIVERY_PRINCIPAL_REGIONS:
        delivery = {"Service": LOG_DELIVERY_PRINCIPAL}
    else:
        delivery = {"AWS": answered(aws.elb.get_service_account_output(region=region, opts=invoke_options(parent)).arn,
                                    "aws:elb/getServiceAccount:getServiceAccount arn")}
    bucket = private_bucket(parent, name, "lb-logs", request.plan.stage != "production", request.tags,
                            expire_after_days=ACCESS_LOG_DAYS)
    policy = bucket_policy(parent, f"{name}-lb-logs", bucket, lambda arn: [{
        "Sid": "LoadBalancerAccessLogDelivery", "Effect": "Allow", "Principal": delivery, "Action": "s3:PutObject",
        "Resource": pulumi.Output.concat(arn, f"/{LOAD_BALANCER_LOG_PREFIX}/AWSLogs/", account, "/*")}])
    return bucket.id, policy


def load_balancer(parent: pulumi.Resource, name: str, request: FleetRequest,
                  logs: tuple[StrOutput, pulumi.Resource]) -> aws.lb.LoadBalancer:
    """Internet-facing only when an allowed CIDR is public; callers are limited by its security group. Its access
    logs go to `logs` (`load_balancer_logs`)."""
    group = request.load_balancer_firewall_id
    if group is None:  # the servers' security groups were brought: the load balancer gets one of its own here
        sources: list[tuple[str, pulumi.Input[str]]] = [(slug(cidr), cidr) for cidr in request.allowed_cidrs]
        sources = sources or [("network", request.network_cidr)]
        group = load_balancer_security_group(parent, name, request.network_id, sources, request.firewall_ids,
                                             request.plan.serving.port, request.tags).id
        pulumi.Output.from_input(group).apply(lambda group_id: pulumi.log.warn(
            f"{name}: the brought security groups must admit port {request.plan.serving.port} from the load "
            f"balancer's security group {group_id}, or no request reaches the servers", resource=parent))
    return aws.lb.LoadBalancer(
        f"{name}-lb", name_prefix=_elb_name_prefix(name), load_balancer_type="application",
        internal=not request.internet_facing, subnets=list(request.load_balancer_subnet_ids), security_groups=[group],
        ip_address_type="ipv4", idle_timeout=request.plan.request_timeout_s, drop_invalid_header_fields=True,
        enable_deletion_protection=request.protected, tags=named(request.tags, f"{name}-lb"),
        access_logs={"bucket": logs[0], "enabled": True, "prefix": LOAD_BALANCER_LOG_PREFIX},
        opts=fleet_options(parent, request.protected, depends_on=[logs[1]]))


#### Listeners and their certificate ####


def issued_certificate(parent: pulumi.Resource, name: str, domain: str, tags: Mapping[str, str]) -> StrOutput:
    """An ACM certificate for the domain, validated by a DNS record you create; its ARN resolves once it is issued
    (the listener cannot take a pending certificate). CertificateValidation waits up to 75 minutes (the provider's
    create timeout)."""
    opts = child_options(parent)
    certificate = aws.acm.Certificate(f"{name}-certificate", domain_name=domain, validation_method="DNS",
                                      tags=named(tags, f"{name}-certificate"), opts=opts)
    def say_where(options: Sequence[Any]) -> None:
        for option in options:
            kind, record, value = (_field(option, f"resource_record_{part}") for part in ("type", "name", "value"))
            pulumi.log.info(f"{name}: ACM issues the certificate for {domain} once DNS answers {kind} {record} -> "
                            f"{value}; `pulumi up` waits for it", resource=parent)

    answered(certificate.domain_validation_options, "aws:acm/certificate:Certificate domainValidationOptions").apply(
        say_where)
    validation = aws.acm.CertificateValidation(f"{name}-certificate-validation", certificate_arn=certificate.arn,
                                               opts=opts)
    return validation.certificate_arn


def listeners(parent: pulumi.Resource, name: str, request: FleetRequest, balancer: aws.lb.LoadBalancer,
              certificate: pulumi.Input[str], default_action: aws.lb.ListenerDefaultActionArgsDict) -> None:
    """HTTPS with LOAD_BALANCER_TLS_POLICY and the certificate, to `default_action`; HTTP redirects to HTTPS."""
    protected = fleet_options(parent, request.protected)
    aws.lb.Listener(
        f"{name}-https", load_balancer_arn=balancer.arn, port=LISTENER_PORTS["https"], protocol="HTTPS",
        ssl_policy=LOAD_BALANCER_TLS_POLICY, certificate_arn=certificate,
        default_actions=[default_action], tags=request.tags, opts=protected)
    aws.lb.Listener(
        f"{name}-http", load_balancer_arn=balancer.arn, port=LISTENER_PORTS["http"], protocol="HTTP",
        default_actions=[{"type": "redirect", "redirect": {
            "protocol": "HTTPS", "port": str(LISTENER_PORTS["https"]), "status_code": "HTTP_301"}}],
        tags=request.tags, opts=protected)


#### Names ####


def _elb_name_prefix(name: str) -> str:
    """Load balancer and target group names hold 32 characters, a prefix 6 (the provider adds a unique suffix):
    a replacement never collides with its predecessor's name."""
    return (slug(name)[:5].strip("-") or "inf") + "-"


def _field(item: Any, key: str) -> Any:
    """A field of a provider output object, which an apply sees as an object or, under mocks, as a mapping."""
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key)

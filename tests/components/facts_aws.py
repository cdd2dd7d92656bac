"""AWS: what a recorded program registered, as the cloud-neutral security facts of neutral_view.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from inferstack.preview import Recording, RegisteredResource
from tests.components.neutral_view import (
    Bucket,
    Cdn,
    Ingress,
    PolicyLanguage,
    SecurityFacts,
    Server,
    gzip_user_data,
    ingress_source,
    policy_grants,
    secret_refs,
    settings_by_bucket,
)

BUCKET = "aws:s3/bucket:Bucket"
PARAMETER = "aws:ssm/parameter:Parameter"


def facts(recording: Recording) -> SecurityFacts:
    network_cidrs = {r.outputs.get("cidrBlock") for r in recording.of_type("aws:ec2/vpc:Vpc")}
    by_bucket = settings_by_bucket(recording, BUCKET)
    return SecurityFacts(
        ingress=[_ingress(r, network_cidrs) for r in
                 recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")],
        buckets=[_bucket(r.id, by_bucket.get(r.id, {})) for r in recording.of_type(BUCKET)],
        servers=[_server(r) for r in recording.of_type("aws:ec2/instance:Instance")]
        + [_fleet_server(r) for r in recording.of_type("aws:ec2/launchTemplate:LaunchTemplate")],
        grants=[grant for r in recording.of_type("aws:iam/rolePolicy:RolePolicy")
                for grant in policy_grants(r.inputs["policy"], IAM)],
        cdns=[_cdn(r, recording) for r in recording.of_type("aws:cloudfront/distribution:Distribution")],
        secret_values_stored=[r.inputs["value"] for r in recording.of_type(PARAMETER)],
        secret_refs=secret_refs(recording.of_type(PARAMETER), lambda parameter: parameter.inputs["name"]),
    )


def _ingress(rule: RegisteredResource, network_cidrs: set[Any]) -> Ingress:
    inputs = rule.inputs
    if inputs.get("referencedSecurityGroupId"):
        # A security group admits only network interfaces that carry it, which live in the network (a fleet's API
        # port admits its load balancer's nodes this way).
        return Ingress(int(inputs["fromPort"]), int(inputs["toPort"]), "network")
    source = inputs.get("cidrIpv4") or inputs.get("cidrIpv6") or "unreadable"
    return Ingress(int(inputs["fromPort"]), int(inputs["toPort"]), ingress_source(source, network_cidrs))


def _bucket(name: str, settings: Mapping[str, Any]) -> Bucket:
    block = settings.get("BucketPublicAccessBlock", {})
    encryption = settings.get("BucketServerSideEncryptionConfiguration", {}).get("rules", [])
    statements = json.loads(settings.get("BucketPolicy", {}).get("policy", "{}")).get("Statement", [])
    tls_only = any(s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")
                   == "false" for s in statements)
    # Who a bucket policy lets in: a service, or another account (the region's Elastic Load Balancing account).
    readers = tuple(principal for s in statements if s["Effect"] == "Allow" and isinstance(s.get("Principal"), dict)
                    for key in ("Service", "AWS") if (principal := s["Principal"].get(key)))
    return Bucket(
        name=name,
        public_access_blocked=all(block.get(k) is True for k in (
            "blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")),
        encrypted=any(r.get("applyServerSideEncryptionByDefault", {}).get("sseAlgorithm") for r in encryption),
        versioned=settings.get("BucketVersioning", {}).get("versioningConfiguration", {}).get("status") == "Enabled",
        acls_disabled=settings.get("BucketOwnershipControls", {}).get("rule", {}).get("objectOwnership")
        == "BucketOwnerEnforced",
        tls_only=tls_only,
        readers=readers,
    )


def _server(instance: RegisteredResource) -> Server:
    inputs = instance.inputs
    return Server(
        name=instance.name,
        metadata_tokens_required=inputs.get("metadataOptions", {}).get("httpTokens") == "required",
        termination_protected=inputs.get("disableApiTermination") is True,
        root_disk_encrypted=inputs.get("rootBlockDevice", {}).get("encrypted") is True,
        user_data=gzip_user_data(inputs.get("userDataBase64")) or inputs.get("userData", ""),
    )


def _fleet_server(template: RegisteredResource) -> Server:
    """A fleet's servers, as their launch template makes each of them (its block-device and network-interface
    settings are strings in pulumi_aws)."""
    inputs = template.inputs
    devices = inputs.get("blockDeviceMappings", [])
    return Server(
        name=template.name,
        metadata_tokens_required=inputs.get("metadataOptions", {}).get("httpTokens") == "required",
        termination_protected=inputs.get("disableApiTermination") is True,
        root_disk_encrypted=bool(devices) and all(d.get("ebs", {}).get("encrypted") == "true" for d in devices),
        user_data=gzip_user_data(inputs.get("userData")),
    )


IAM = PolicyLanguage(
    storage_service="s3:", storage_reads=frozenset({"s3:getobject", "s3:listbucket"}),
    list_prefix_condition="s3:prefix", object_path=lambda arn: arn.split(":::", 1)[-1],
    secret_reads=frozenset({"ssm:getparameter", "ssm:getparameters"}),
    # A parameter's ARN ends in "parameter" + its name, which is the reference the server reads it by.
    secret_ref=lambda arn: arn.split(":parameter", 1)[-1],
    management=frozenset(action.lower() for action in (
        "ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
        "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel")))


def _cdn(distribution: RegisteredResource, recording: Recording) -> Cdn:
    inputs = distribution.inputs
    behaviors = [inputs["defaultCacheBehavior"], *inputs.get("orderedCacheBehaviors", [])]
    origins_signed = all(o.get("originAccessControlId") for o in inputs["origins"])
    admitted_only_by_arn = False
    for policy in recording.of_type("aws:s3/bucketPolicy:BucketPolicy"):
        for statement in json.loads(policy.inputs["policy"])["Statement"]:
            if statement.get("Principal") == {"Service": "cloudfront.amazonaws.com"}:
                source = statement.get("Condition", {}).get("StringEquals", {}).get("AWS:SourceArn")
                admitted_only_by_arn = source == distribution.outputs.get("arn")
    return Cdn(https_only=all(b["viewerProtocolPolicy"] == "https-only" for b in behaviors),
               private_origin=origins_signed and admitted_only_by_arn)

"""AWS: what a recorded program registered, as the cloud-neutral security facts of neutral_view.py."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping
from typing import Any

from inferstack.preview import Recording, RegisteredResource
from tests.components.neutral_view import Bucket, Cdn, Grant, Ingress, SecurityFacts, Server


def facts(recording: Recording) -> SecurityFacts:
    network_cidrs = {r.outputs.get("cidrBlock") for r in recording.of_type("aws:ec2/vpc:Vpc")}
    by_bucket = _aws_bucket_settings(recording)
    buckets = [_aws_bucket(r.id, by_bucket.get(r.id, {})) for r in recording.of_type("aws:s3/bucket:Bucket")]
    return SecurityFacts(
        ingress=[_aws_ingress(r, network_cidrs) for r in
                 recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")],
        buckets=buckets,
        servers=[_aws_server(r) for r in recording.of_type("aws:ec2/instance:Instance")],
        grants=[grant for r in recording.of_type("aws:iam/rolePolicy:RolePolicy")
                for grant in _aws_grants(r.inputs["policy"])],
        cdns=[_aws_cdn(r, recording) for r in recording.of_type("aws:cloudfront/distribution:Distribution")],
        secret_values_stored=[r.inputs["value"] for r in recording.of_type("aws:ssm/parameter:Parameter")],
    )


def _aws_ingress(rule: RegisteredResource, network_cidrs: set[Any]) -> Ingress:
    inputs = rule.inputs
    source = inputs.get("cidrIpv4") or inputs.get("cidrIpv6") or f"group:{inputs.get('referencedSecurityGroupId')}"
    return Ingress(int(inputs["fromPort"]), int(inputs["toPort"]), "network" if source in network_cidrs else source)


def _aws_bucket_settings(recording: Recording) -> dict[str, dict[str, Any]]:
    """The standalone S3 settings resources, grouped by the bucket they configure."""
    settings: dict[str, dict[str, Any]] = {}
    for resource in recording.resources:
        if resource.type.startswith("aws:s3/bucket") and resource.type != "aws:s3/bucket:Bucket":
            settings.setdefault(resource.inputs.get("bucket", ""), {})[resource.type.split(":")[-1]] = resource.inputs
    return settings


def _aws_bucket(name: str, settings: Mapping[str, Any]) -> Bucket:
    block = settings.get("BucketPublicAccessBlock", {})
    encryption = settings.get("BucketServerSideEncryptionConfiguration", {}).get("rules", [])
    policy = json.loads(settings.get("BucketPolicy", {}).get("policy", "{}"))
    statements = policy.get("Statement", [])
    tls_only = any(s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")
                   == "false" for s in statements)
    readers = tuple(s["Principal"]["Service"] for s in statements
                    if s["Effect"] == "Allow" and isinstance(s.get("Principal"), dict) and "Service" in s["Principal"])
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


def _aws_server(instance: RegisteredResource) -> Server:
    inputs = instance.inputs
    encoded = inputs.get("userDataBase64")
    user_data = gzip.decompress(base64.b64decode(encoded)).decode() if encoded else inputs.get("userData", "")
    return Server(
        name=instance.name,
        metadata_tokens_required=inputs.get("metadataOptions", {}).get("httpTokens") == "required",
        termination_protected=inputs.get("disableApiTermination") is True,
        root_disk_encrypted=inputs.get("rootBlockDevice", {}).get("encrypted") is True,
        user_data=user_data,
    )


_AWS_STORAGE_READS = {"s3:GetObject", "s3:ListBucket"}
_AWS_SECRET_READS = {"ssm:GetParameter", "ssm:GetParameters"}
_AWS_MANAGEMENT = {"ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel",
                   "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"}


def _aws_grants(policy_json: str) -> list[Grant]:
    grants = []
    for statement in json.loads(policy_json)["Statement"]:
        if statement["Effect"] != "Allow":
            continue
        actions = set(_as_list(statement["Action"]))
        resources = _as_list(statement["Resource"])
        if all(a.startswith("s3:") for a in actions):
            grants.append(Grant("storage", actions <= _AWS_STORAGE_READS, tuple(
                _aws_storage_scope(r, statement.get("Condition", {})) for r in resources)))
        elif actions <= _AWS_SECRET_READS:
            grants.append(Grant("secrets", True, tuple(r.split(":parameter", 1)[-1] for r in resources)))
        elif actions <= _AWS_MANAGEMENT:
            grants.append(Grant("management", False, tuple(resources)))
        else:
            grants.append(Grant("other", False, tuple(resources)))
    return grants


def _aws_storage_scope(resource: str, condition: Mapping[str, Any]) -> str:
    """"bucket/prefix*": object ARNs as they are; a bucket ARN (listing) narrowed by its s3:prefix condition."""
    path = resource.split(":::", 1)[-1]
    if "/" in path:
        return path
    prefixes = _as_list(condition.get("StringLike", {}).get("s3:prefix", "*"))
    return f"{path}/{prefixes[0]}" if len(prefixes) == 1 else f"{path}/*"


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value)


def _aws_cdn(distribution: RegisteredResource, recording: Recording) -> Cdn:
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

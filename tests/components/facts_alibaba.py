"""Alibaba Cloud: what a recorded program registered, as the cloud-neutral security facts of neutral_view.py.

A fleet's servers are its launch template (`ecs.EcsLaunchTemplate`): every server the scaling group creates is
made from it. Its ingress is that of the servers' security groups: the load balancer's own group (attached with
`alb.LoadBalancerSecurityGroupAttachment`) admits callers to the load balancer's 443 and 80, not to a server.
"""

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
    as_list,
    gzip_user_data,
    ingress_source,
    policy_grants,
    secret_refs,
    settings_by_bucket,
)

BUCKET = "alicloud:oss/bucket:Bucket"
SECRET = "alicloud:kms/secret:Secret"
LAUNCH_TEMPLATE = "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate"
LOAD_BALANCER_GROUPS = "alicloud:alb/loadBalancerSecurityGroupAttachment:LoadBalancerSecurityGroupAttachment"


def facts(recording: Recording) -> SecurityFacts:
    network_cidrs = {r.inputs.get("cidrBlock") for r in recording.of_type("alicloud:vpc/network:Network")}
    by_bucket = settings_by_bucket(recording, BUCKET)
    buckets = [_bucket(r.id, by_bucket.get(r.id, {})) for r in recording.of_type(BUCKET)]
    attached = {r.inputs["policyName"] for r in
                recording.of_type("alicloud:ram/rolePolicyAttachment:RolePolicyAttachment")}
    load_balancer_groups = {r.inputs["securityGroupId"] for r in recording.of_type(LOAD_BALANCER_GROUPS)}
    return SecurityFacts(
        ingress=[_ingress(r, network_cidrs) for r in
                 recording.of_type("alicloud:ecs/securityGroupRule:SecurityGroupRule")
                 if r.inputs["type"] == "ingress" and r.inputs.get("policy", "accept") == "accept"
                 and r.inputs["securityGroupId"] not in load_balancer_groups],
        buckets=buckets,
        servers=[_server(r) for r in recording.of_type("alicloud:ecs/instance:Instance")] +
                [_template(r, recording) for r in recording.of_type(LAUNCH_TEMPLATE)],
        grants=[grant for r in recording.of_type("alicloud:ram/policy:Policy") if r.inputs["policyName"] in attached
                for grant in policy_grants(r.inputs["policyDocument"], RAM)],
        cdns=[_cdn(r, recording, {b.name: b for b in buckets})
              for r in recording.of_type("alicloud:cdn/domainNew:DomainNew")],
        secret_values_stored=[r.inputs["secretData"] for r in recording.of_type(SECRET)],
        secret_refs=secret_refs(recording.of_type(SECRET), lambda secret: secret.inputs["secretName"]),
    )


def _ingress(rule: RegisteredResource, network_cidrs: set[Any]) -> Ingress:
    inputs = rule.inputs
    low, high = (int(port) for port in inputs["portRange"].split("/"))
    if inputs["ipProtocol"] == "all":
        low, high = 1, 65535
    source = inputs.get("cidrIp") or inputs.get("ipv6CidrIp") or f"group:{inputs.get('sourceSecurityGroupId')}"
    return Ingress(low, high, ingress_source(source, network_cidrs))


def _bucket(name: str, settings: Mapping[str, Any]) -> Bucket:
    private_acl = settings.get("BucketAcl", {}).get("acl") == "private"
    blocked = settings.get("BucketPublicAccessBlock", {}).get("blockPublicAccess") is True
    statements = json.loads(settings.get("BucketPolicy", {}).get("policy", "{}")).get("Statement", [])
    tls_only = any(s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("acs:SecureTransport")
                   in (["false"], "false") and "*" in as_list(s.get("Principal", [])) for s in statements)
    readers = tuple(p for s in statements if s["Effect"] == "Allow" for p in as_list(s.get("Principal", [])))
    return Bucket(
        name=name,
        public_access_blocked=blocked,
        encrypted=bool(settings.get("BucketServerSideEncryption", {}).get("sseAlgorithm")),
        versioned=settings.get("BucketVersioning", {}).get("status") == "Enabled",
        # OSS ACLs are canned (private, public-read, public-read-write) and grant no other account anything: a
        # private ACL under a public-access block can open nothing, which is what "ACLs disabled" protects.
        acls_disabled=private_acl and blocked,
        tls_only=tls_only,
        readers=readers,
    )


def _server(instance: RegisteredResource) -> Server:
    inputs = instance.inputs
    return Server(
        name=instance.name,
        metadata_tokens_required=inputs.get("httpTokens") == "required",
        termination_protected=inputs.get("deletionProtection") is True,
        root_disk_encrypted=inputs.get("systemDiskEncrypted") is True,
        user_data=gzip_user_data(inputs["userData"]),
    )


def _template(template: RegisteredResource, recording: Recording) -> Server:
    """A fleet's servers: what its launch template gives each; protected when their group refuses deletion."""
    inputs = template.inputs
    groups = [g for g in recording.of_type("alicloud:ess/scalingGroup:ScalingGroup")
              if g.inputs.get("launchTemplateId") == template.id]
    return Server(
        name=template.name,
        metadata_tokens_required=inputs.get("httpTokens") == "required",
        termination_protected=bool(groups) and all(g.inputs.get("groupDeletionProtection") is True for g in groups),
        root_disk_encrypted=inputs.get("systemDisk", {}).get("encrypted") is True,
        user_data=gzip_user_data(inputs["userData"]),
    )


RAM = PolicyLanguage(
    storage_service="oss:", storage_reads=frozenset({"oss:getobject", "oss:listobjects"}),
    list_prefix_condition="oss:Prefix", object_path=lambda resource: resource.split(":", 4)[-1],  # acs:oss:*:*:<path>
    secret_reads=frozenset({"kms:getsecretvalue"}),
    # A secret's ARN ends in "secret/" + its name, which is the reference the server reads it by.
    secret_ref=lambda arn: arn.split(":secret/", 1)[-1])


def _cdn(domain: RegisteredResource, recording: Recording, buckets: Mapping[str, Bucket]) -> Cdn:
    inputs = domain.inputs
    functions = {r.inputs["functionName"]: {a["argName"]: a["argValue"] for a in r.inputs["functionArgs"]}
                 for r in recording.of_type("alicloud:cdn/domainConfig:DomainConfig")
                 if r.inputs["domainName"] == inputs["domainName"]}
    certificate = inputs.get("certificateConfig", {})
    https_only = (certificate.get("serverCertificateStatus") == "on"
                  and functions.get("https_force", {}).get("enable") == "on")
    origins = inputs["sources"]
    signed = functions.get("l2_oss_key", {}).get("private_oss_auth") == "on"
    origin_buckets = [buckets.get(source["content"].split(".oss-", 1)[0]) for source in origins]
    private = all(b is not None and b.public_access_blocked and b.acls_disabled for b in origin_buckets)
    over_tls = all(source["type"] == "oss" and int(source["port"]) == 443 for source in origins)
    return Cdn(https_only=https_only, private_origin=signed and private and over_tls)

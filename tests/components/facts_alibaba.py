"""Alibaba Cloud: what a recorded program registered, as the cloud-neutral security facts of neutral_view.py."""

from __future__ import annotations

import base64
import gzip
import json
import os
from collections.abc import Mapping
from typing import Any

from pulumi.runtime.config import get_config_env_key

from inferstack.components import alibaba
from inferstack.preview import Recording, RegisteredResource
from tests.components.neutral_view import Bucket, Cdn, Grant, Ingress, SecurityFacts, Server

# Workaround, until the invariant fixture passes per-cloud stack config: an Alibaba CDN needs a domain you own and
# KMS 3.0 secrets need a KMS instance and key, all set in the `inferstack-alibaba:` namespace. Pulumi reads a key
# missing from the stack config from PULUMI_CONFIG_<KEY>, so these defaults let the matrix (which sets only
# `aws:region`) exercise the CDN and the secret store. This module is imported once per session, with
# neutral_view.py; tests of the unset case remove the variables with monkeypatch.
MATRIX_SETTINGS = {
    alibaba.CDN_DOMAIN_KEY: "static.example.com",
    alibaba.KMS_INSTANCE_KEY: "kst-sgp00000000000000000",
    alibaba.KMS_KEY_KEY: "key-sgp00000000000000000",
}
for _key, _value in MATRIX_SETTINGS.items():
    os.environ.setdefault(get_config_env_key(f"{alibaba.CONFIG_NAMESPACE}:{_key}"), _value)


def facts(recording: Recording) -> SecurityFacts:
    network_cidrs = {r.inputs.get("cidrBlock") for r in recording.of_type("alicloud:vpc/network:Network")}
    by_bucket = _bucket_settings(recording)
    buckets = [_bucket(r.id, by_bucket.get(r.id, {})) for r in recording.of_type("alicloud:oss/bucket:Bucket")]
    attached = {r.inputs["policyName"] for r in
                recording.of_type("alicloud:ram/rolePolicyAttachment:RolePolicyAttachment")}
    return SecurityFacts(
        ingress=[_ingress(r, network_cidrs) for r in
                 recording.of_type("alicloud:ecs/securityGroupRule:SecurityGroupRule")
                 if r.inputs["type"] == "ingress" and r.inputs.get("policy", "accept") == "accept"],
        buckets=buckets,
        servers=[_server(r) for r in recording.of_type("alicloud:ecs/instance:Instance")],
        grants=[grant for r in recording.of_type("alicloud:ram/policy:Policy") if r.inputs["policyName"] in attached
                for grant in _grants(r.inputs["policyDocument"])],
        cdns=[_cdn(r, recording, {b.name: b for b in buckets})
              for r in recording.of_type("alicloud:cdn/domainNew:DomainNew")],
        secret_values_stored=[r.inputs["secretData"] for r in recording.of_type("alicloud:kms/secret:Secret")],
    )


def _ingress(rule: RegisteredResource, network_cidrs: set[Any]) -> Ingress:
    inputs = rule.inputs
    low, high = (int(port) for port in inputs["portRange"].split("/"))
    if inputs["ipProtocol"] == "all":
        low, high = 1, 65535
    source = inputs.get("cidrIp") or inputs.get("ipv6CidrIp") or f"group:{inputs.get('sourceSecurityGroupId')}"
    return Ingress(low, high, "network" if source in network_cidrs else source)


def _bucket_settings(recording: Recording) -> dict[str, dict[str, Any]]:
    """The standalone OSS settings resources, grouped by the bucket they configure."""
    settings: dict[str, dict[str, Any]] = {}
    for resource in recording.resources:
        if resource.type.startswith("alicloud:oss/bucket") and resource.type != "alicloud:oss/bucket:Bucket":
            settings.setdefault(resource.inputs.get("bucket", ""), {})[resource.type.split(":")[-1]] = resource.inputs
    return settings


def _bucket(name: str, settings: Mapping[str, Any]) -> Bucket:
    private_acl = settings.get("BucketAcl", {}).get("acl") == "private"
    blocked = settings.get("BucketPublicAccessBlock", {}).get("blockPublicAccess") is True
    statements = json.loads(settings.get("BucketPolicy", {}).get("policy", "{}")).get("Statement", [])
    tls_only = any(s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("acs:SecureTransport")
                   in (["false"], "false") and "*" in _as_list(s.get("Principal", [])) for s in statements)
    readers = tuple(p for s in statements if s["Effect"] == "Allow" for p in _as_list(s.get("Principal", [])))
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
        user_data=gzip.decompress(base64.b64decode(inputs["userData"])).decode(),
    )


_STORAGE_READS = {"oss:GetObject", "oss:ListObjects"}
_SECRET_READS = {"kms:GetSecretValue"}


def _grants(policy_json: str) -> list[Grant]:
    grants = []
    for statement in json.loads(policy_json)["Statement"]:
        if statement["Effect"] != "Allow":
            continue
        actions = set(_as_list(statement["Action"]))
        resources = _as_list(statement["Resource"])
        if all(a.startswith("oss:") for a in actions):
            grants.append(Grant("storage", actions <= _STORAGE_READS, tuple(
                _storage_scope(r, statement.get("Condition", {})) for r in resources)))
        elif actions <= _SECRET_READS:
            grants.append(Grant("secrets", True, tuple(r.split(":secret/", 1)[-1] for r in resources)))
        else:
            grants.append(Grant("other", False, tuple(resources)))
    return grants


def _storage_scope(resource: str, condition: Mapping[str, Any]) -> str:
    """"bucket/prefix*": object resources as they are; a bucket resource (listing) narrowed by oss:Prefix."""
    path = resource.split(":", 4)[-1]
    if "/" in path:
        return path
    prefixes = _as_list(condition.get("StringLike", {}).get("oss:Prefix", "*"))
    return f"{path}/{prefixes[0]}" if len(prefixes) == 1 else f"{path}/*"


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value)


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

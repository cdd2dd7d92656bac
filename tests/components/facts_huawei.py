"""Huawei Cloud: what a recorded program registered, as the cloud-neutral security facts of neutral_view.py.

Facts the provider cannot express stay False (metadata tokens, public-access block, disabled ACLs, termination
protection) and a secrets grant that names no secret is scoped "*": the invariants that need them are skipped
through the backend's capabilities, never faked here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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
)

ECS_SERVICE = "op_svc_ecs"
_OBJECT_PREFIX = "obs:*:*:object:"
# Custom policies name objects obs:*:*:object:<bucket>/<key>; a bucket or wildcard resource stays as written (and
# fails the scope check). CSMS reads name no secret: the grant covers the region's project ("*").
HUAWEI_IAM = PolicyLanguage(
    storage_service="obs:", storage_reads=frozenset({"obs:object:getobject", "obs:bucket:listbucket"}),
    list_prefix_condition="obs:prefix",
    object_path=lambda resource: resource[len(_OBJECT_PREFIX):] if resource.lower().startswith(_OBJECT_PREFIX)
    else resource,
    secret_reads=frozenset({"csms:secretversion:get", "kms:dek:decrypt"}), secret_ref=lambda resource: resource)
SECRET = "huaweicloud:Dew/secret:Secret"
AS_CONFIGURATION = "huaweicloud:As/configuration:Configuration"


def facts(recording: Recording) -> SecurityFacts:
    network_cidrs = {r.outputs.get("cidr") for r in recording.of_type("huaweicloud:Vpc/vpc:Vpc")}
    buckets = recording.of_type("huaweicloud:Obs/bucket:Bucket")
    return SecurityFacts(
        ingress=[_ingress(r, network_cidrs) for r in recording.of_type("huaweicloud:Vpc/secgroupRule:SecgroupRule")
                 if r.inputs["direction"] == "ingress"],
        buckets=[_bucket(r) for r in buckets],
        servers=[_server(r) for r in recording.of_type("huaweicloud:Ecs/instance:Instance")]
        + [_fleet_template(r) for r in recording.of_type(AS_CONFIGURATION)],
        grants=[grant for role in _server_roles(recording)
                for grant in policy_grants(role.inputs["policy"], HUAWEI_IAM)],
        cdns=[_cdn(r, buckets) for r in recording.of_type("huaweicloud:Cdn/domain:Domain")],
        secret_values_stored=[r.inputs["secretText"] for r in recording.of_type(SECRET)],
        secret_refs=secret_refs(recording.of_type(SECRET), lambda secret: secret.inputs["name"]),
    )


def _ingress(rule: RegisteredResource, network_cidrs: set[Any]) -> Ingress:
    inputs = rule.inputs
    source = inputs.get("remoteIpPrefix") or f"group:{inputs.get('remoteGroupId')}"
    return Ingress(int(inputs["portRangeMin"]), int(inputs["portRangeMax"]), ingress_source(source, network_cidrs))


def _statements(policy_json: str | None) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = json.loads(policy_json or "{}").get("Statement", [])
    return statements


def _bucket(bucket: RegisteredResource) -> Bucket:
    inputs = bucket.inputs
    statements = _statements(inputs.get("policy"))
    name = inputs["bucket"]
    tls_only = any(
        s["Effect"] == "Deny" and s.get("Principal") == {"ID": ["*"]} and s.get("Action") == ["*"]
        and set(s.get("Resource", [])) >= {name, f"{name}/*"}
        and s.get("Condition", {}).get("Bool", {}).get("SecureTransport") == ["false"] for s in statements)
    return Bucket(
        name=bucket.id,
        # OBS has neither a public-access block nor a switch that turns ACLs off (see the backend's capabilities).
        public_access_blocked=False,
        encrypted=inputs.get("encryption") is True and inputs.get("sseAlgorithm") in ("AES256", "kms"),
        versioned=inputs.get("versioning") is True,
        acls_disabled=False,
        tls_only=tls_only,
        # Whoever an Allow statement names, and anyone a non-private ACL lets in (OBS keeps ACLs).
        readers=tuple(_principal_ids(s) for s in statements if s["Effect"] == "Allow")
        + ((f"acl:{inputs.get('acl')}",) if inputs.get("acl", "private") != "private" else ()),
    )


def _principal_ids(statement: Mapping[str, Any]) -> str:
    principal = statement.get("Principal", "*")
    return ",".join(principal.get("ID", ["*"])) if isinstance(principal, Mapping) else str(principal)


def _server(instance: RegisteredResource) -> Server:
    inputs = instance.inputs
    return Server(
        name=instance.name,
        metadata_tokens_required=False,  # the ECS metadata service has no token mode
        termination_protected=False,  # ecs.Instance has no deletion-protection argument in 0.0.12
        root_disk_encrypted=bool(inputs.get("systemDiskKmsKeyId")),
        user_data=gzip_user_data(inputs.get("userData")),
    )


def _fleet_template(configuration: RegisteredResource) -> Server:
    """A fleet's servers, as the AS configuration every one of them is created from."""
    config = configuration.inputs["instanceConfig"]
    system_disks = [disk for disk in config.get("disks", []) if disk.get("diskType") == "SYS"]
    return Server(
        name=configuration.name,
        metadata_tokens_required=False,
        termination_protected=False,  # neither the AS group nor its servers have a deletion flag in 0.0.12
        root_disk_encrypted=len(system_disks) == 1 and bool(system_disks[0].get("kmsId")),
        user_data=gzip_user_data(config.get("userData")),
    )


def _server_roles(recording: Recording) -> list[RegisteredResource]:
    """The custom policies attached to agencies that ECS takes (not, say, the agency that delivers OBS logs)."""
    attached: set[str] = set()
    for agency in recording.of_type("huaweicloud:Iam/agency:Agency"):
        inputs = agency.inputs
        if inputs.get("delegatedServiceName") != ECS_SERVICE:
            continue
        attached |= set(inputs.get("domainRoles", [])) | set(inputs.get("allResourcesRoles", []))
        attached |= {role for project in inputs.get("projectRoles", []) for role in project.get("roles", [])}
    return [r for r in recording.of_type("huaweicloud:Iam/role:Role") if r.inputs["name"] in attached]


def _cdn(domain: RegisteredResource, buckets: Sequence[RegisteredResource]) -> Cdn:
    """HTTPS only: HTTPS on with a certificate, HTTP redirected. Private origin: every source is a private OBS
    bucket of this stack that grants nothing to anyone, read by the CDN through the account's OBS agency."""
    configs = domain.inputs.get("configs", {})
    https = configs.get("httpsSettings", {})
    redirect = configs.get("forceRedirect", {})
    certificate = https.get("scmCertificateId") or https.get("certificateBody")
    https_only = (https.get("httpsEnabled") is True and bool(certificate)
                  and redirect.get("enabled") is True and redirect.get("type") == "https")
    private_buckets = {b.outputs.get("bucketDomainName") for b in buckets
                       if b.inputs.get("acl") == "private"
                       and not [s for s in _statements(b.inputs.get("policy")) if s["Effect"] == "Allow"]}
    sources = domain.inputs.get("sources", [])
    private_origin = bool(sources) and all(
        s.get("originType") == "obs_bucket" and s.get("obsBucketType") == "private"
        and s.get("origin") in private_buckets for s in sources)
    return Cdn(https_only=https_only, private_origin=private_origin)

"""Google Cloud: what a recorded program registered, as the cloud-neutral security facts of neutral_view.py."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from inferstack.components.gcp.network import covering_cidr
from inferstack.preview import Recording, RegisteredResource
from tests.components.neutral_view import (
    Bucket,
    Cdn,
    Grant,
    Ingress,
    SecurityFacts,
    Server,
    ingress_source,
    secret_refs,
)

FIREWALL = "gcp:compute/firewall:Firewall"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
SECRET_MEMBER = "gcp:secretmanager/secretIamMember:SecretIamMember"
INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
"""A fleet's servers: the group builds every one of them from its template."""
SECRET = "gcp:secretmanager/secret:Secret"

_STORAGE_READ_ROLES = {"roles/storage.objectViewer", "roles/storage.legacyObjectReader"}
_SECRET_READ_ROLES = {"roles/secretmanager.secretAccessor"}
# A Google-managed service agent of the project: service-<project number>@<service>.iam.gserviceaccount.com.
_SERVICE_AGENT = re.compile(r"^serviceAccount:service-\d+@(?P<service>[a-z0-9-]+\.iam\.gserviceaccount\.com)$")
_OBJECT_PREFIX = re.compile(r'resource\.name\.startsWith\("projects/_/buckets/(?P<bucket>[^/"]+)/objects/'
                            r'(?P<prefix>[^"]*)"\)')
_LIST_PREFIX = re.compile(r'api\.getAttribute\("storage\.googleapis\.com/objectListPrefix", ""\)\.startsWith\("'
                          r'(?P<prefix>[^"]*)"\)')


def facts(recording: Recording) -> SecurityFacts:
    subnet_ranges = [r.inputs["ipCidrRange"] for r in recording.of_type("gcp:compute/subnetwork:Subnetwork")]
    # The network's own range: each subnetwork's, and (a fleet's network) the block that covers them all.
    network_cidrs = {*subnet_ranges, *([covering_cidr(subnet_ranges)] if subnet_ranges else [])}
    identities = {r.outputs.get("member") for r in recording.of_type("gcp:serviceaccount/account:Account")}
    members = recording.of_type(BUCKET_MEMBER)
    return SecurityFacts(
        ingress=[rule for r in recording.of_type(FIREWALL) for rule in _ingress(r, network_cidrs)],
        buckets=[_bucket(r, members) for r in recording.of_type(BUCKET)],
        servers=[_server(r) for r in [*recording.of_type(INSTANCE), *recording.of_type(TEMPLATE)]],
        grants=[_grant(r) for r in [*members, *recording.of_type(SECRET_MEMBER)]
                if r.inputs.get("member") in identities],
        cdns=[_cdn(r, recording) for r in recording.of_type("gcp:compute/backendBucket:BackendBucket")
              if r.inputs.get("enableCdn")],
        secret_values_stored=[r.inputs["secretData"]
                              for r in recording.of_type("gcp:secretmanager/secretVersion:SecretVersion")],
        # The server reads a secret by its resource id (projects/<project>/secrets/<id>).
        secret_refs=secret_refs(recording.of_type(SECRET), lambda secret: secret.id),
    )


def _ingress(rule: RegisteredResource, network_cidrs: set[Any]) -> Iterator[Ingress]:
    """Each allowed port range × source range of an ingress rule (deny rules open nothing)."""
    inputs = rule.inputs
    if inputs.get("direction", "INGRESS") != "INGRESS":
        return
    for allow in inputs.get("allows", []):
        for low, high in _port_ranges(allow):
            for source in inputs.get("sourceRanges", []):
                yield Ingress(low, high, ingress_source(source, network_cidrs))


def _port_ranges(allow: Mapping[str, Any]) -> list[tuple[int, int]]:
    """GCP firewall ports: "8000" or "8000-8010"; none listed (or protocol "all") means every port."""
    if allow.get("protocol") not in ("tcp", "udp", "sctp", "all") or not allow.get("ports"):
        return [(0, 65535)]
    ranges = []
    for port in allow["ports"]:
        low, _, high = str(port).partition("-")
        ranges.append((int(low), int(high or low)))
    return ranges


def _bucket(bucket: RegisteredResource, members: list[RegisteredResource]) -> Bucket:
    inputs = bucket.inputs
    readers = tuple(_reader(m.inputs["member"]) for m in members
                    if m.inputs.get("bucket") == bucket.id and m.inputs.get("role") in _STORAGE_READ_ROLES
                    and _reader(m.inputs["member"]))
    return Bucket(
        name=bucket.id,
        public_access_blocked=inputs.get("publicAccessPrevention") == "enforced",
        # Cloud Storage encrypts every object at rest, with Google-managed keys unless a CMEK is set: no setting
        # turns it off, so there is nothing to read here.
        encrypted=True,
        versioned=inputs.get("versioning", {}).get("enabled") is True,
        acls_disabled=inputs.get("uniformBucketLevelAccess") is True,
        # The XML API answers plain HTTP and no bucket setting refuses it (only the project-wide organisation
        # policy storage.secureHttpTransport does), so no GCS bucket is TLS-only by its own configuration.
        tls_only=False,
        readers=readers,
    )


def _reader(member: str) -> str:
    """Who a read grant admits beyond the project's own service accounts: a service agent by its service."""
    agent = _SERVICE_AGENT.match(member)
    if agent:
        return agent["service"]
    own_account = member.startswith("serviceAccount:") and member.endswith(".iam.gserviceaccount.com")
    return "" if own_account else member


def _server(instance: RegisteredResource) -> Server:
    """A loose server, or a fleet's template (whose servers the group deletes and recreates: no deletion flag)."""
    inputs = instance.inputs
    return Server(
        name=instance.name,
        # GCE's metadata server has no session-token mode to require (its Metadata-Flavor header is no token).
        metadata_tokens_required=False,
        termination_protected=inputs.get("deletionProtection") is True,
        # Compute Engine encrypts every persistent disk at rest; a CSEK or CMEK only changes whose key it is.
        root_disk_encrypted=True,
        user_data=inputs.get("metadata", {}).get("user-data", ""),
    )


def _grant(member: RegisteredResource) -> Grant:
    inputs = member.inputs
    if member.type == SECRET_MEMBER:
        return Grant("secrets", inputs["role"] in _SECRET_READ_ROLES, (inputs["secretId"],))
    return Grant("storage", inputs["role"] in _STORAGE_READ_ROLES,
                 _storage_scope(inputs["bucket"], inputs.get("condition", {}).get("expression", "")))


def _storage_scope(bucket: str, expression: str) -> tuple[str, ...]:
    """"bucket/prefix*" per clause of the condition; a grant without a condition covers "bucket/*"."""
    if not expression:
        return (f"{bucket}/*",)
    clauses = [part.strip() for part in expression.split("||")]
    scopes = []
    for clause in clauses:
        objects, listing = _OBJECT_PREFIX.fullmatch(clause), _LIST_PREFIX.fullmatch(clause)
        if objects:
            scopes.append(f"{objects['bucket']}/{objects['prefix']}*")
        elif listing:
            scopes.append(f"{bucket}/{listing['prefix']}*")
        else:
            return (f"{bucket}/*",)  # a clause this mapper does not understand: assume the whole bucket
    return tuple(scopes)


def _cdn(backend: RegisteredResource, recording: Recording) -> Cdn:
    url_maps = [m for m in recording.of_type("gcp:compute/uRLMap:URLMap")
                if m.inputs.get("defaultService") == backend.id]
    map_ids = {m.id for m in url_maps}
    https_proxies = {p.id for p in recording.of_type("gcp:compute/targetHttpsProxy:TargetHttpsProxy")
                     if p.inputs.get("urlMap") in map_ids}
    http_proxies = [p for p in recording.of_type("gcp:compute/targetHttpProxy:TargetHttpProxy")
                    if p.inputs.get("urlMap") in map_ids]
    rules = [r for r in recording.of_type("gcp:compute/globalForwardingRule:GlobalForwardingRule")
             if r.inputs.get("target") in https_proxies]
    https_only = bool(rules) and not http_proxies and all(r.inputs.get("portRange") == "443" for r in rules)
    origin = next((b for b in recording.of_type(BUCKET) if b.id == backend.inputs.get("bucketName")), None)
    readers = set(_bucket(origin, recording.of_type(BUCKET_MEMBER)).readers) if origin else set()
    private_origin = (origin is not None and origin.inputs.get("publicAccessPrevention") == "enforced"
                      and readers == {"https-lb.iam.gserviceaccount.com"})
    return Cdn(https_only=https_only, private_origin=private_origin)

"""Google Cloud's storage and CDN: private Cloud Storage buckets (models, data, access logs), static assets served by
Cloud CDN from a private bucket behind an HTTPS load balancer, and the boot bundle object.

Sections follow `CloudBackend` (inferstack/components/backend.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_gcp as gcp

from inferstack.components.contract import (
    BundleRequest,
    ModelStoreRequest,
    ModelStoreResult,
    StaticAssetsRequest,
    StaticAssetsResult,
    StrOutput,
)
from inferstack.components.gcp.identity import MODEL_READER_ROLE
from inferstack.components.gcp.naming import gcp_labels, gcp_name
from inferstack.components.gcp.provider import client_project, provider_region
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options
from inferstack.components.shared import (
    ACCESS_LOG_DAYS,
    INCOMPLETE_UPLOAD_DAYS,
    NONCURRENT_VERSION_DAYS,
    NONCURRENT_VERSIONS_KEPT,
)
from inferstack.errors import input_error
from inferstack.names import slug, unique_name

# Cloud Storage usage logs are written by this Google group; it needs to create objects in the logs bucket.
USAGE_LOG_WRITER = "group:cloud-storage-analytics@google.com"

# Cloud CDN private bucket access: the project's load-balancing service agent reads the assets bucket, which stays
# private. The agent exists once the project has a backend bucket, so the grant waits for ours.
LOAD_BALANCER_AGENT = "service-{number}@https-lb.iam.gserviceaccount.com"

# Private buckets answer with `Cache-Control: private`; FORCE_CACHE_ALL lets the CDN cache them anyway, which
# suits public static files. An hour at the edge and in browsers.
CDN_CACHE_TTL_S = 3600


#### Storage ####


def create_model_store(parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
    logs = _private_bucket(parent, name, "logs", request.force_destroy, request.tags,
                           expire_after_days=ACCESS_LOG_DAYS)
    gcp.storage.BucketIAMMember(f"{name}-logs-delivery", bucket=logs.name, role="roles/storage.objectCreator",
                                member=USAGE_LOG_WRITER, opts=child_options(parent))
    buckets = {purpose: _private_bucket(parent, name, purpose, request.force_destroy, request.tags,
                                        logs_bucket=logs.name)
               for purpose in ("models", "data")}
    return ModelStoreResult(model_bucket=answered(buckets["models"].name, "gcp:storage/bucket:Bucket name"),
                            data_bucket=buckets["data"].name, logs_bucket=logs.name)


def create_static_assets(parent: pulumi.Resource, name: str, request: StaticAssetsRequest) -> StaticAssetsResult:
    domain = request.domain
    assert domain is not None, "StaticAssets requires a domain here (no Capability.CDN_DEFAULT_HOSTNAME)"
    opts = child_options(parent)
    if request.existing_bucket is not None:
        bucket_name: StrOutput = pulumi.Output.from_input(request.existing_bucket)
    else:
        bucket = _private_bucket(parent, name, "bucket", request.force_destroy, request.tags,
                                 logs_bucket=request.logs_bucket, main_page="index.html")
        bucket_name = bucket.name
    backend = gcp.compute.BackendBucket(
        f"{name}-backend", name=gcp_name(name, "backend"), bucket_name=bucket_name, enable_cdn=True,
        compression_mode="AUTOMATIC", description=f"inferstack {name}: private static assets",
        cdn_policy={"cache_mode": "FORCE_CACHE_ALL", "default_ttl": CDN_CACHE_TTL_S,
                    "client_ttl": CDN_CACHE_TTL_S, "negative_caching": True}, opts=opts)
    project = gcp.organizations.get_project_output(opts=invoke_options(parent))
    number = answered(project.number, "gcp:organizations/getProject:getProject number")
    agent = number.apply(lambda number: "serviceAccount:" + LOAD_BALANCER_AGENT.format(number=number))
    required_policy = None
    if request.existing_bucket is not None:
        # A brought bucket is never modified: its owner adds this binding to the bucket's IAM policy.
        required_policy = pulumi.Output.json_dumps({"bindings": [{"role": MODEL_READER_ROLE, "members": [agent]}]})
    else:
        gcp.storage.BucketIAMMember(f"{name}-cdn-read", bucket=bucket_name, role=MODEL_READER_ROLE, member=agent,
                                    opts=child_options(parent, depends_on=[backend]))
    address = gcp.compute.GlobalAddress(f"{name}-address", name=gcp_name(name, "address"), ip_version="IPV4",
                                        labels=gcp_labels(request.tags), opts=opts)
    certificate = gcp.compute.ManagedSslCertificate(
        f"{name}-certificate", name=gcp_name(name, "certificate"), managed={"domains": [domain]}, opts=opts)
    tls = gcp.compute.SSLPolicy(f"{name}-tls", name=gcp_name(name, "tls"), profile="MODERN",
                                min_tls_version="TLS_1_2", opts=opts)
    url_map = gcp.compute.URLMap(f"{name}-urls", name=gcp_name(name, "urls"), default_service=backend.id,
                                 opts=opts)
    proxy = gcp.compute.TargetHttpsProxy(
        f"{name}-https", name=gcp_name(name, "https"), url_map=url_map.id, ssl_certificates=[certificate.id],
        ssl_policy=tls.id, opts=opts)
    # HTTPS only: no port-80 listener exists, so plain HTTP is refused at Google's edge.
    gcp.compute.GlobalForwardingRule(
        f"{name}-https-rule", name=gcp_name(name, "https-rule"), target=proxy.id, ip_address=address.id,
        port_range="443", ip_protocol="TCP", load_balancing_scheme="EXTERNAL_MANAGED",
        labels=gcp_labels(request.tags), opts=opts)
    # The certificate is issued once the domain's A record points at the address: say which one.
    address.address.apply(lambda ip: pulumi.log.info(
        f"{name}: point the DNS A record of {domain} at {ip}; the Google-managed certificate is issued after "
        "that (up to an hour)", resource=parent))
    return StaticAssetsResult(bucket=bucket_name, url=pulumi.Output.from_input(f"https://{domain}"),
                              required_bucket_policy=required_policy)


def create_bundle(parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
    # Private like its bucket (uniform access, no ACLs), Google-managed encryption. Content-addressed:
    # a new bundle is a new object, and the old one goes once the servers have moved on.
    bundle = gcp.storage.BucketObject(
        f"{name}-bundle", bucket=request.bucket, name=request.key, content=request.content,
        content_type="application/json", opts=child_options(parent))
    return bundle.id


def _private_bucket(parent: pulumi.Resource, name: str, purpose: str, force_destroy: bool, tags: Mapping[str, str],
                    *, logs_bucket: pulumi.Input[str] | None = None, expire_after_days: int | None = None,
                    main_page: str | None = None) -> gcp.storage.Bucket:
    """A bucket nobody outside the project can read: public access prevented, uniform access (no ACLs), versioned.

    Cloud Storage encrypts every object at rest (Google-managed keys); a customer-managed key is a choice this
    library leaves to you. Its XML API also answers plain HTTP and no bucket setting refuses that: the organisation
    policy storage.secureHttpTransport does, project-wide (docs/deploy-gcp.md). Regional, in the provider's region.
    """
    client = gcp.organizations.get_client_config_output(opts=invoke_options(parent))
    rules: list[gcp.storage.BucketLifecycleRuleArgsDict] = [
        # Noncurrent versions older than 30 days go, except the 3 newest (4 newer versions counts the live one).
        {"action": {"type": "Delete"}, "condition": {
            "with_state": "ARCHIVED", "days_since_noncurrent_time": NONCURRENT_VERSION_DAYS,
            "num_newer_versions": NONCURRENT_VERSIONS_KEPT + 1}},
        {"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": INCOMPLETE_UPLOAD_DAYS}},
    ]
    if expire_after_days is not None:
        rules += [{"action": {"type": "Delete"}, "condition": {"age": expire_after_days}},
                  {"action": {"type": "Delete"}, "condition": {
                      "with_state": "ARCHIVED", "days_since_noncurrent_time": NONCURRENT_VERSION_DAYS}}]
    return gcp.storage.Bucket(
        f"{name}-{purpose}", name=_bucket_name(client_project(parent), name, purpose), location=provider_region(client),
        storage_class="STANDARD", uniform_bucket_level_access=True, public_access_prevention="enforced",
        versioning={"enabled": True}, lifecycle_rules=rules, force_destroy=force_destroy, labels=gcp_labels(tags),
        logging={"log_bucket": logs_bucket, "log_object_prefix": f"{purpose}/"} if logs_bucket is not None else None,
        website={"main_page_suffix": main_page} if main_page else None,
        opts=child_options(parent))


def _bucket_name(gcp_project: StrOutput, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across GCP projects (bucket names are global)."""
    parts = [pulumi.get_project(), pulumi.get_stack(), name, purpose]
    readable = slug(*parts)
    # Checked here, where a bucket is made: the name holds the component's, and a ModelStore or StaticAssets created
    # on its own has no check before its buckets (CloudBackend's checks see neither the name nor the buckets).
    if "google" in readable or readable.startswith("goog"):  # Cloud Storage refuses such names
        raise input_error("pulumi project/stack", "bucket names may not contain 'google' or begin with 'goog'",
                          value=readable, fix="rename the Pulumi project or stack")
    return gcp_project.apply(lambda project: unique_name(parts, unique_by=[project]))

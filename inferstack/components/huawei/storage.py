"""Huawei Cloud storage and CDN: private OBS buckets (models, data, their access logs), the static assets' bucket
behind a CDN domain, and the boot bundle as a private object in the model bucket."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_huaweicloud as hw

from inferstack.components.contract import (
    BundleRequest,
    ModelStoreRequest,
    ModelStoreResult,
    StaticAssetsRequest,
    StaticAssetsResult,
    StrOutput,
)
from inferstack.components.huawei.identity import log_delivery
from inferstack.components.huawei.lookups import BUCKETS_LOOKUP, PROJECTS_LOOKUP, lookup_field, provider_region
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options
from inferstack.components.shared import ACCESS_LOG_DAYS, INCOMPLETE_UPLOAD_DAYS, NONCURRENT_VERSION_DAYS
from inferstack.errors import input_error
from inferstack.names import unique_name

# Huawei CDN serves only a domain you own, over HTTPS with a certificate you hold in SCM (Cloud Certificate
# Manager): `assets_domain` and `assets_certificate`.
SCM_CERTIFICATE_SOURCE = 2
CDN_TLS_VERSIONS = "TLSv1.2,TLSv1.3"
CDN_CERTIFICATE_NAME_MAX_LENGTH = 32


#### Storage ####


def create_model_store(parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
    logs = _bucket_of(_private_bucket(parent, name, "logs", request.force_destroy, request.tags,
                                      expire_after_days=ACCESS_LOG_DAYS))
    delivery = log_delivery(parent, name, logs)
    buckets = {purpose: _bucket_of(_private_bucket(parent, name, purpose, request.force_destroy, request.tags,
                                                   logs=(logs, delivery))) for purpose in ("models", "data")}
    return ModelStoreResult(model_bucket=buckets["models"], data_bucket=buckets["data"], logs_bucket=logs)


def _bucket_of(bucket: hw.obs.Bucket) -> StrOutput:
    """The bucket's name, once it exists."""
    return answered(bucket.bucket, "huaweicloud:Obs/bucket:Bucket bucket")


def create_static_assets(parent: pulumi.Resource, name: str, request: StaticAssetsRequest) -> StaticAssetsResult:
    assert request.domain and request.certificate, "StaticAssets requires both here (assets_certificate)"
    region = provider_region(parent)
    if request.existing_bucket is not None:
        bucket_name: StrOutput = pulumi.Output.from_input(request.existing_bucket)
        origin = _existing_bucket_domain(parent, request.existing_bucket)
    else:
        logs = None
        if request.logs_bucket is not None:
            logs = (request.logs_bucket, log_delivery(parent, name, request.logs_bucket))
        bucket = _private_bucket(parent, name, "bucket", request.force_destroy, request.tags, logs=logs)
        bucket_name, origin = bucket.bucket, bucket.bucket_domain_name
    domain = hw.cdn.Domain(
        f"{name}-cdn", name=request.domain, type="web", service_area=region.apply(_service_area),
        sources=[{"origin": origin, "origin_type": "obs_bucket", "obs_bucket_type": "private", "active": 1}],
        configs={
            "origin_protocol": "https",
            "https_settings": {
                "https_enabled": True, "http2_enabled": True, "tls_version": CDN_TLS_VERSIONS,
                "certificate_source": SCM_CERTIFICATE_SOURCE, "scm_certificate_id": request.certificate,
                "certificate_name": unique_name([name], max_length=CDN_CERTIFICATE_NAME_MAX_LENGTH)},
            "force_redirect": {"enabled": True, "type": "https", "redirect_code": 301}},
        tags=request.tags, opts=child_options(parent))
    # The CDN reads with the account's agency, not through a bucket policy: a brought bucket needs none.
    return StaticAssetsResult(bucket=bucket_name, url=pulumi.Output.concat("https://", domain.name),
                              required_bucket_policy=None)


def create_bundle(parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
    # Private, encrypted by its bucket's default (SSE-OBS). Content-addressed:
    # a new bundle is a new object, and the old one goes once the servers have moved on.
    bundle = hw.obs.BucketObject(
        f"{name}-bundle", bucket=request.bucket, key=request.key, content=request.content,
        content_type="application/json", acl="private", opts=child_options(parent))
    return bundle.id


#### Helpers ####


def _private_bucket(parent: pulumi.Resource, name: str, purpose: str, force_destroy: bool, tags: Mapping[str, str],
                    *, logs: tuple[pulumi.Input[str], StrOutput] | None = None,
                    expire_after_days: int | None = None) -> hw.obs.Bucket:
    """A bucket nobody outside the account can read: acl private, encrypted, versioned, TLS only.

    Encryption is SSE-OBS (AES256, keys managed by OBS): the CDN's agency and the server's agency read it without
    KMS permissions, which SSE-KMS would need. OBS has no public-access block (see the capabilities), so the
    bucket policy only denies plain HTTP and grants nothing; the server and the CDN read through IAM agencies.
    """
    bucket_name = _bucket_name(parent, name, purpose)
    lifecycle: dict[str, Any] = {
        "name": "expire-old-versions-and-uploads", "enabled": True,
        "noncurrent_version_expirations": [{"days": NONCURRENT_VERSION_DAYS}],
        "abort_incomplete_multipart_uploads": [{"days": INCOMPLETE_UPLOAD_DAYS}]}
    if expire_after_days is not None:
        lifecycle["expirations"] = [{"days": expire_after_days}]
    loggings = None
    if logs is not None:
        target, agency = logs
        loggings = [{"target_bucket": target, "target_prefix": f"{purpose}/", "agency": agency}]
    return hw.obs.Bucket(
        f"{name}-{purpose}", bucket=bucket_name, acl="private", encryption=True, sse_algorithm="AES256",
        versioning=True, force_destroy=force_destroy, policy_format="obs", policy=bucket_name.apply(tls_only_policy),
        lifecycle_rules=[lifecycle], loggings=loggings, tags=tags, opts=child_options(parent))


def tls_only_policy(bucket: str) -> str:
    """OBS-format bucket policy that refuses every request made over plain HTTP, whoever makes it."""
    return json.dumps({"Statement": [{
        "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": {"ID": ["*"]}, "Action": ["*"],
        "Resource": [bucket, f"{bucket}/*"], "Condition": {"Bool": {"SecureTransport": ["false"]}}}]})


def _bucket_name(parent: pulumi.Resource, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across accounts and regions (OBS names are global; there is no autoname).

    The account is told apart by its project id in the region (IAM project ids are unique per account).
    """
    region = provider_region(parent)
    projects = lookup_field(parent, PROJECTS_LOOKUP, {"name": region}, "projects")
    return pulumi.Output.all(projects, region).apply(lambda found: unique_name(
        [pulumi.get_project(), pulumi.get_stack(), name, purpose], unique_by=[str(found[0][0]["id"]), found[1]]))


def _existing_bucket_domain(parent: pulumi.Resource, bucket: pulumi.Input[str]) -> StrOutput:
    """The origin domain of a brought bucket, from its region (looked up; nothing is created or changed)."""
    def domain(buckets: Sequence[Mapping[str, Any]]) -> str:
        if not buckets:
            raise input_error("assets_bucket", "is not an OBS bucket of this account", value=bucket,
                              fix="give the name of a bucket the deploying account owns, or leave assets_bucket out")
        return f"{buckets[0]['bucket']}.obs.{buckets[0]['region']}.myhuaweicloud.com"

    return lookup_field(parent, BUCKETS_LOOKUP, {"bucket": bucket}, "buckets", empty=[]).apply(domain)


def _service_area(region: str) -> str:
    """Serve where the bucket is: mainland China regions are named cn-* (their domains need an ICP filing)."""
    return "mainland_china" if region.startswith("cn-") else "outside_mainland_china"

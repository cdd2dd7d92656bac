"""Storage and CDN: the private S3 buckets (models, data, their access logs), the static assets behind CloudFront, and
the boot bundle object; every bucket private, encrypted, versioned, TLS only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

from inferstack.components.aws.lookups import account_id, provider_region
from inferstack.components.contract import (
    BundleRequest,
    ModelStoreRequest,
    ModelStoreResult,
    StaticAssetsRequest,
    StaticAssetsResult,
    StrOutput,
)
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options
from inferstack.components.shared import (
    ACCESS_LOG_DAYS,
    INCOMPLETE_UPLOAD_DAYS,
    NONCURRENT_VERSION_DAYS,
    NONCURRENT_VERSIONS_KEPT,
)
from inferstack.names import unique_name

CACHE_POLICY_NAME = "Managed-CachingOptimized"
# With your own domain: SNI (no dedicated-IP fee) and the oldest TLS version CloudFront's current policies allow.
CUSTOM_DOMAIN_TLS_POLICY = "TLSv1.2_2021"

#### Storage ####


def create_model_store(parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
    logs = private_bucket(parent, name, "logs", request.force_destroy, request.tags,
                          expire_after_days=ACCESS_LOG_DAYS)
    account = account_id(parent)
    bucket_policy(parent, f"{name}-logs", logs, lambda arn: [{
        "Sid": "S3ServerAccessLogDelivery", "Effect": "Allow",
        "Principal": {"Service": "logging.s3.amazonaws.com"}, "Action": "s3:PutObject",
        "Resource": pulumi.Output.concat(arn, "/*"),
        "Condition": {"StringEquals": {"aws:SourceAccount": account}}}])
    buckets = {}
    for purpose in ("models", "data"):
        bucket = private_bucket(parent, name, purpose, request.force_destroy, request.tags, logs_bucket=logs.id)
        bucket_policy(parent, f"{name}-{purpose}", bucket, lambda arn: [])
        # The bucket's name, which the server is given: unit-test mocks may answer another id.
        buckets[purpose] = answered(bucket.bucket, "aws:s3/bucket:Bucket bucket")
    return ModelStoreResult(model_bucket=buckets["models"], data_bucket=buckets["data"], logs_bucket=logs.id)


def create_static_assets(parent: pulumi.Resource, name: str, request: StaticAssetsRequest) -> StaticAssetsResult:
    opts = child_options(parent)
    if request.existing_bucket is not None:
        found = aws.s3.get_bucket_output(bucket=request.existing_bucket, opts=invoke_options(parent))
        bucket_id, bucket_arn, origin_domain = (
            answered(found.bucket, "aws:s3/getBucket:getBucket bucket"),
            answered(found.arn, "aws:s3/getBucket:getBucket arn"),
            answered(found.bucket_regional_domain_name, "aws:s3/getBucket:getBucket bucketRegionalDomainName"))
    else:
        bucket = private_bucket(parent, name, "bucket", request.force_destroy, request.tags,
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
            "cache_policy_id": answered(cache_policy.id, "aws:cloudfront/getCachePolicy:getCachePolicy id")},
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
        bucket_policy(parent, f"{name}-bucket", bucket, cdn_read)
    url = pulumi.Output.concat("https://", request.domain or answered(
        distribution.domain_name, "aws:cloudfront/distribution:Distribution domainName"))
    return StaticAssetsResult(bucket=bucket_id, url=url, required_bucket_policy=required_policy)


def create_bundle(parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
    # Private like its bucket (ACLs are off there), encrypted. Content-addressed:
    # a new bundle is a new object, and the old one goes once the servers have moved on.
    bundle = aws.s3.BucketObjectv2(
        f"{name}-bundle", bucket=request.bucket, key=request.key, content=request.content,
        content_type="application/json", server_side_encryption="AES256", tags=request.tags,
        opts=child_options(parent))
    return bundle.id


#### Buckets ####


def private_bucket(parent: pulumi.Resource, name: str, purpose: str, force_destroy: bool, tags: Mapping[str, str],
                   *, logs_bucket: pulumi.Input[str] | None = None,
                   expire_after_days: int | None = None) -> aws.s3.Bucket:
    """A bucket nobody outside the account can read: public access blocked, ACLs off, encrypted, versioned.

    Encryption is SSE-S3: S3 access-log delivery and CloudFront OAC cannot use the AWS-managed aws/s3 KMS key
    (its key policy cannot grant them), and a customer-managed key is a choice this library leaves to you.
    Its bucket policy is added by the caller (`bucket_policy`), because it may name resources created later.
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


def bucket_policy(parent: pulumi.Resource, resource: str, bucket: aws.s3.Bucket,
                  statements: Callable[[StrOutput], list[dict[str, Any]]]) -> aws.s3.BucketPolicy:
    """The bucket's policy: TLS only, plus the caller's statements."""
    arn = answered(bucket.arn, "aws:s3/bucket:Bucket arn")
    deny_plain_http = {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
                       "Resource": [arn, pulumi.Output.concat(arn, "/*")],
                       "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    policy = pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [deny_plain_http, *statements(arn)]})
    return aws.s3.BucketPolicy(f"{resource}-policy", bucket=bucket.id, policy=policy, opts=child_options(parent))


def _bucket_name(parent: pulumi.Resource, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across accounts and regions (S3 names are global)."""
    return pulumi.Output.all(account_id(parent), provider_region(parent)).apply(
        lambda where: unique_name([pulumi.get_project(), pulumi.get_stack(), name, purpose], unique_by=where))

"""Alibaba storage: private OSS buckets (models, data, access logs, static assets), the CDN domain that serves the
assets from a private bucket, and the boot bundle as a private object.

Retention (shared.py's choices): no lifecycle rule expires noncurrent versions, because some regions reject
NoncurrentVersionExpiration (OSS error 0014-00000069), which would fail `pulumi up`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_alicloud as alicloud

from inferstack.components.alibaba.names import bucket_name, current_region
from inferstack.components.alibaba.settings import CONFIG_NAMESPACE, DNS_READY_KEY, assets_dns_ready
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
from inferstack.components.shared import ACCESS_LOG_DAYS, INCOMPLETE_UPLOAD_DAYS
from inferstack.errors import input_error

# One-time, account-wide authorisation that lets CDN sign origin requests to private buckets (CDN console, origin
# settings, "authorize"; or the RAM role of that name trusting cdn.aliyuncs.com). It is shared by every CDN
# domain of the account, so a stack checks that it exists and never creates or changes it.
CDN_ORIGIN_ROLE = "AliyunCDNAccessingPrivateOSSRole"
CDN_TLS_REDIRECT = "301"
# Alibaba's free DV certificate (cdn.DomainNew certificate_config cert_type "free") is issued for a domain whose
# CNAME already points at the CDN, and the CNAME target (the domain's `cname` output) exists only once the domain
# does. So the first `pulumi up` creates the domain without HTTPS; once DNS points at it, `assetsDnsReady` adds the
# certificate (certificate_config is updated in place: not ForceNew in alicloud_cdn_domain_new) and forces HTTPS.
FREE_CERTIFICATE: alicloud.cdn.DomainNewCertificateConfigArgsDict = {"cert_type": "free",
                                                                     "server_certificate_status": "on"}
# Mainland China regions need an ICP filing for a `domestic` CDN domain; elsewhere the CDN serves `overseas`.
_MAINLAND_REGION = re.compile(r"^cn-(?!hongkong)")

#### Storage ####


def create_model_store(parent: pulumi.Resource, name: str, request: ModelStoreRequest) -> ModelStoreResult:
    logs = _private_bucket(parent, name, "logs", request.force_destroy, request.tags,
                           expire_after_days=ACCESS_LOG_DAYS)
    buckets = {purpose: _private_bucket(parent, name, purpose, request.force_destroy, request.tags,
                                        logs_bucket=logs.id) for purpose in ("models", "data")}
    # The bucket's name, which the server is given: unit-test mocks may answer another id.
    model_bucket = answered(buckets["models"].bucket, "alicloud:oss/bucket:Bucket bucket")
    return ModelStoreResult(model_bucket=model_bucket, data_bucket=buckets["data"].id, logs_bucket=logs.id)


def create_static_assets(parent: pulumi.Resource, name: str, request: StaticAssetsRequest) -> StaticAssetsResult:
    if request.existing_bucket is not None:
        bucket = pulumi.Output.from_input(request.existing_bucket)
    else:
        bucket = _private_bucket(parent, name, "bucket", request.force_destroy, request.tags,
                                 logs_bucket=request.logs_bucket).id
    domain = request.domain
    assert domain is not None, "StaticAssets requires a domain here (no Capability.CDN_DEFAULT_HOSTNAME)"
    url = _cdn_domain(parent, name, domain, bucket, request.tags)
    # Nothing to add to a brought bucket: the account's CDN role reads it (same account and region required).
    return StaticAssetsResult(bucket=bucket, url=url, required_bucket_policy=None)


def create_bundle(parent: pulumi.Resource, name: str, request: BundleRequest) -> StrOutput:
    # Private, encrypted like its bucket. Content-addressed:
    # a new bundle is a new object, and the old one goes once the servers have moved on.
    bundle = alicloud.oss.BucketObject(
        f"{name}-bundle", bucket=request.bucket, key=request.key, content=request.content,
        content_type="application/json", acl="private", server_side_encryption="AES256",
        opts=child_options(parent))
    return bundle.id


#### Buckets ####


def _private_bucket(parent: pulumi.Resource, name: str, purpose: str, force_destroy: bool, tags: Mapping[str, str],
                    *, logs_bucket: pulumi.Input[str] | None = None,
                    expire_after_days: int | None = None) -> alicloud.oss.Bucket:
    """A bucket nobody outside the account can read: ACL private, public access blocked, encrypted, versioned,
    TLS only.

    Encryption is OSS-managed (AES256): CDN origin fetch and log delivery cannot decrypt KMS-encrypted objects
    without extra grants to the account-wide CDN role.
    """
    resource = f"{name}-{purpose}"
    opts = child_options(parent)
    rules: list[alicloud.oss.BucketLifecycleRuleArgsDict] = [
        {"id": "abort-incomplete-uploads", "enabled": True, "prefix": "",
         "abort_multipart_uploads": [{"days": INCOMPLETE_UPLOAD_DAYS}]}]
    if expire_after_days is not None:
        rules.append({"id": "expire-objects", "enabled": True, "prefix": "",
                      "expirations": [{"days": expire_after_days}]})
    bucket = alicloud.oss.Bucket(resource, bucket=bucket_name(parent, name, purpose), storage_class="Standard",
                                 force_destroy=force_destroy, lifecycle_rules=rules, tags=tags, opts=opts)
    alicloud.oss.BucketAcl(f"{resource}-acl", bucket=bucket.id, acl="private", opts=opts)
    alicloud.oss.BucketPublicAccessBlock(f"{resource}-public-access", bucket=bucket.id, block_public_access=True,
                                         opts=opts)
    alicloud.oss.BucketServerSideEncryption(f"{resource}-encryption", bucket=bucket.id, sse_algorithm="AES256",
                                            opts=opts)
    alicloud.oss.BucketVersioning(f"{resource}-versioning", bucket=bucket.id, status="Enabled", opts=opts)
    deny_plain_http = {"Effect": "Deny", "Principal": ["*"], "Action": ["oss:*"],
                       "Resource": [pulumi.Output.concat("acs:oss:*:*:", bucket.id),
                                    pulumi.Output.concat("acs:oss:*:*:", bucket.id, "/*")],
                       "Condition": {"Bool": {"acs:SecureTransport": ["false"]}}}
    alicloud.oss.BucketPolicy(f"{resource}-policy", bucket=bucket.id, opts=opts, policy=pulumi.Output.json_dumps(
        {"Version": "1", "Statement": [deny_plain_http]}))
    if logs_bucket is not None:
        alicloud.oss.BucketLogging(f"{resource}-logging", bucket=bucket.id, target_bucket=logs_bucket,
                                   target_prefix=f"{purpose}/", opts=opts)
    return bucket


#### CDN ####


def _cdn_domain(parent: pulumi.Resource, name: str, domain: str, bucket: pulumi.Input[str],
                tags: Mapping[str, str]) -> StrOutput:
    """A CDN domain whose origin is the private bucket, fetched over HTTPS with signed requests; HTTPS-only with
    Alibaba's free certificate once the domain's CNAME points at the CDN (FREE_CERTIFICATE, `assetsDnsReady`)."""
    opts = child_options(parent)
    region = current_region(parent)
    dns_ready = assets_dns_ready()
    cdn = alicloud.cdn.DomainNew(
        f"{name}-cdn", domain_name=domain, cdn_type="web",
        scope=region.apply(lambda r: "domestic" if _MAINLAND_REGION.match(r) else "overseas"),
        sources=[{"type": "oss", "content": pulumi.Output.concat(bucket, ".oss-", region, ".aliyuncs.com"),
                  "port": 443, "priority": 20, "weight": 10}],
        certificate_config=FREE_CERTIFICATE if dns_ready else None,
        # Offline until then: it serves nothing, so never plain HTTP (DomainNew `status`: online | offline).
        status="online" if dns_ready else "offline", tags=tags, opts=opts)
    # The origin authorisation is a prerequisite: without the role the CDN's origin requests would be refused.
    authorised_domain = pulumi.Output.all(cdn.domain_name, _cdn_origin_role(parent, name)).apply(lambda v: v[0])
    functions = {"private-origin": ("l2_oss_key", {"private_oss_auth": "on"})}
    if dns_ready:  # a redirect to HTTPS before the certificate exists would send every viewer to a failing TLS
        functions["https-only"] = ("https_force", {"enable": "on", "https_rewrite": CDN_TLS_REDIRECT})
    for label, (function, arguments) in functions.items():
        alicloud.cdn.DomainConfig(
            f"{name}-cdn-{label}", domain_name=authorised_domain, function_name=function,
            function_args=[{"arg_name": key, "arg_value": value} for key, value in arguments.items()], opts=opts)
    if not dns_ready:
        # DNS stays yours: say where the domain must point, and what the next `pulumi up` adds.
        cdn.cname.apply(lambda target: pulumi.log.warn(
            f"{name}: {domain} is offline (it serves nothing until it has HTTPS). Point its CNAME at {target}; once "
            f"that resolves, run `pulumi config set {CONFIG_NAMESPACE}:{DNS_READY_KEY} true` and `pulumi up` to add "
            "Alibaba's free certificate, bring it online and redirect HTTP to HTTPS (docs/deploy-alibaba.md)",
            resource=parent))
    return pulumi.Output.concat("https://", cdn.domain_name)


def _cdn_origin_role(parent: pulumi.Resource, name: str) -> StrOutput:
    found = alicloud.ram.get_roles_output(name_regex=f"^{CDN_ORIGIN_ROLE}$", opts=invoke_options(parent))

    def present(names: Sequence[str]) -> str:
        if CDN_ORIGIN_ROLE not in names:
            raise input_error(f"{name}.domain", f"needs the account's {CDN_ORIGIN_ROLE}, "
                              "which CDN uses to read private buckets",
                              fix="authorise it once: CDN console, domain, origin settings, private OSS bucket "
                              "origin, 'authorize' (docs/deploy-alibaba.md)")
        return CDN_ORIGIN_ROLE

    return answered(found.names, "alicloud:ram/getRoles:getRoles names").apply(present)

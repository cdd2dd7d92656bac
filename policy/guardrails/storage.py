"""Storage: no bucket ACL, policy or grant admits the public and public access blocks are on; buckets, server disks
and log stores are encrypted at rest; CDNs serve HTTPS only from a private origin. On AWS and Alibaba the block and
the encryption are resources of their own, checked as a stack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from guardrails.core import (
    NotApplicable,
    ReportViolation,
    ResourceInput,
    ResourceRule,
    Stack,
    StackResource,
    StackRule,
    boolean,
    integer,
    items,
    last_segment,
    policy_document,
    statements,
)
from guardrails.resource_types import (
    ALI_BUCKET,
    ALI_BUCKET_ACL,
    ALI_BUCKET_ENCRYPTION,
    ALI_BUCKET_POLICY,
    ALI_CDN_CONFIG,
    ALI_CDN_DOMAIN,
    ALI_DISK,
    ALI_INSTANCE,
    ALI_LAUNCH_TEMPLATES,
    ALI_LOG_PROJECT,
    ALI_LOG_STORE,
    ALI_PUBLIC_ACCESS_BLOCK,
    ALI_SCALING_CONFIGURATION,
    AWS_BUCKET,
    AWS_BUCKET_ACL,
    AWS_BUCKET_ENCRYPTION,
    AWS_BUCKET_POLICY,
    AWS_DISTRIBUTION,
    AWS_INSTANCE,
    AWS_LAUNCH_CONFIGURATION,
    AWS_LAUNCH_TEMPLATE,
    AWS_PUBLIC_ACCESS_BLOCK,
    AWS_VOLUME,
    GCP_ALWAYS_ENCRYPTED,
    GCP_BACKEND_BUCKET,
    GCP_BUCKET,
    GCP_BUCKET_IAM_BINDING,
    GCP_BUCKET_IAM_MEMBER,
    GCP_BUCKET_IAM_POLICY,
    GCP_DISK,
    GCP_HTTP_PROXY,
    GCP_INSTANCE,
    GCP_INSTANCE_TEMPLATES,
    GCP_PUBLIC_ACCESS_ON_BUCKET,
    GCP_URL_MAP,
    HUAWEI_NO_PUBLIC_ACCESS_BLOCK,
    HW_AS_CONFIGURATION,
    HW_BUCKET,
    HW_BUCKET_POLICY,
    HW_CDN_DOMAIN,
    HW_INSTANCE,
    HW_VOLUME,
)

#### Buckets: nothing grants the public anything ####

PUBLIC_CANNED_ACLS = {"public-read", "public-read-write", "authenticated-read"}
AWS_PUBLIC_GROUPS = ("http://acs.amazonaws.com/groups/global/AllUsers",
                     "http://acs.amazonaws.com/groups/global/AuthenticatedUsers")
GCP_PUBLIC_MEMBERS = {"allUsers", "allAuthenticatedUsers"}
AWS_BLOCK_SETTINGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def _check_canned_acl(acl: Any, report_violation: ReportViolation) -> None:
    if acl in PUBLIC_CANNED_ACLS:
        report_violation(f"bucket ACL is {acl}, which lets anyone read it: use private")


def _everyone(principal: Any) -> bool:
    """"*", {"AWS": "*"}, ["*"], {"ID": ["*"]}: a principal that admits every caller."""
    if isinstance(principal, Mapping):
        return any("*" in items(value) for value in principal.values())
    return "*" in items(principal)


def _check_bucket_policy(value: Any, report_violation: ReportViolation) -> None:
    for statement in statements(value, report_violation, "the bucket policy"):
        if not statement.allows:
            continue
        if "NotPrincipal" in statement.body:
            report_violation(f"bucket policy statement {statement.label} allows everyone but the principals it "
                             "names (NotPrincipal): name the principals that may read instead")
        elif "Principal" not in statement.body:
            report_violation(f"bucket policy statement {statement.label} names no Principal, so the pack cannot tell "
                             "whom it admits: name the principals that may read")
        elif _everyone(statement.body.get("Principal")):
            report_violation(f"bucket policy statement {statement.label} allows everyone (Principal \"*\"): name "
                             "the principals that may read instead")


def _check_aws_grants(grants: list[Any], report_violation: ReportViolation) -> None:
    """Grants of an S3 ACL: BucketAcl's {grantee: {uri}, permission}, or Bucket's {uri, permissions}."""
    for grant in grants:
        grantee = grant.get("grantee") or grant
        uri = str(grantee.get("uri") or "")
        if uri in AWS_PUBLIC_GROUPS:
            permission = grant.get("permission") or ", ".join(items(grant.get("permissions"))) or "access"
            report_violation(f"an ACL grant admits {uri.rsplit('/', 1)[-1]} ({permission}): remove it")


def _aws_bucket_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _check_canned_acl(props.get("acl"), report_violation)
    _check_aws_grants(items(props.get("grants")), report_violation)
    if props.get("policy"):
        _check_bucket_policy(props["policy"], report_violation)


def _aws_bucket_acl_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _check_canned_acl(props.get("acl"), report_violation)
    policy = props.get("accessControlPolicy") or {}
    _check_aws_grants(items(policy.get("grants")), report_violation)


def _aws_block_all_on(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    off = [setting for setting in AWS_BLOCK_SETTINGS if props.get(setting) is not True]
    if off:
        report_violation(f"the public access block leaves {', '.join(off)} off: turn all four on")


def _gcp_bucket_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("uniformBucketLevelAccess") is not True:
        report_violation("uniform bucket-level access is off, so object ACLs could make objects public: set "
                         "uniformBucketLevelAccess to true")
    if props.get("publicAccessPrevention") != "enforced":
        report_violation(f"public access prevention is {props.get('publicAccessPrevention') or 'inherited'}: set "
                         "publicAccessPrevention to enforced")


def _gcp_members_not_public(members: list[Any], role: Any, report_violation: ReportViolation) -> None:
    for member in members:
        if member in GCP_PUBLIC_MEMBERS:
            report_violation(f"grants {role} to {member}, which is everyone: grant to named members only")


def _gcp_member_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _gcp_members_not_public([props.get("member")], props.get("role"), report_violation)


def _gcp_binding_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _gcp_members_not_public(items(props.get("members")), props.get("role"), report_violation)


def gcp_bindings(value: Any, report_violation: ReportViolation) -> list[Any]:
    document = policy_document(value)
    if document is None:
        report_violation("the IAM policy (policyData) is not a JSON policy, so it cannot be checked")
        return []
    return items(document.get("bindings"))


def _gcp_iam_policy_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for binding in gcp_bindings(props.get("policyData"), report_violation):
        _gcp_members_not_public(items(binding.get("members")), binding.get("role"), report_violation)


def _alibaba_bucket_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _check_canned_acl(props.get("acl"), report_violation)
    if props.get("policy"):
        _check_bucket_policy(props["policy"], report_violation)


def _alibaba_block_on(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("blockPublicAccess") is not True:
        report_violation("the public access block is off (blockPublicAccess is not true): turn it on")


_NOT_PUBLIC: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_BUCKET: _aws_bucket_not_public,
    AWS_BUCKET_ACL: _aws_bucket_acl_not_public,
    AWS_BUCKET_POLICY: lambda props, report: _check_bucket_policy(props.get("policy"), report),
    AWS_PUBLIC_ACCESS_BLOCK: _aws_block_all_on,
    GCP_BUCKET: _gcp_bucket_not_public,
    GCP_BUCKET_IAM_MEMBER: _gcp_member_not_public,
    GCP_BUCKET_IAM_BINDING: _gcp_binding_not_public,
    GCP_BUCKET_IAM_POLICY: _gcp_iam_policy_not_public,
    ALI_BUCKET: _alibaba_bucket_not_public,
    ALI_BUCKET_ACL: lambda props, report: _check_canned_acl(props.get("acl"), report),
    ALI_BUCKET_POLICY: lambda props, report: _check_bucket_policy(props.get("policy"), report),
    ALI_PUBLIC_ACCESS_BLOCK: _alibaba_block_on,
    HW_BUCKET: _alibaba_bucket_not_public,  # OBS: a canned ACL and an inline policy, as on OSS
    HW_BUCKET_POLICY: lambda props, report: _check_bucket_policy(props.get("policy"), report),
    ALI_LOG_PROJECT: lambda props, report: None if props.get("policy") is None else _check_bucket_policy(
        props["policy"], report),  # no project policy: only the account's RAM identities read it
}


def check_buckets_not_public(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _NOT_PUBLIC.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


BUCKETS_NOT_PUBLIC = ResourceRule(
    "buckets-not-public",
    "No bucket ACL, bucket policy or IAM grant admits the public; public access blocks are fully on.",
    check_buckets_not_public, lambda t: t in _NOT_PUBLIC, severity="critical")


#### Encryption at rest ####

AWS_SSE_ALGORITHMS = {"AES256", "aws:kms", "aws:kms:dsse"}
ALIBABA_SSE_ALGORITHMS = {"AES256", "KMS", "SM4"}


def _aws_encryption_rules(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    rules = items(props.get("rules"))
    algorithms = [(rule.get("applyServerSideEncryptionByDefault") or {}).get("sseAlgorithm") for rule in rules]
    if not rules or any(algorithm not in AWS_SSE_ALGORITHMS for algorithm in algorithms):
        report_violation("a default encryption rule names no algorithm: set "
                         "applyServerSideEncryptionByDefault.sseAlgorithm to AES256 or aws:kms")


def _aws_instance_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if (props.get("rootBlockDevice") or {}).get("encrypted") is not True:
        report_violation("the root volume is not encrypted: set rootBlockDevice.encrypted to true")
    for device in items(props.get("ebsBlockDevices")):
        if device.get("encrypted") is not True:
            report_violation(f"EBS volume {device.get('deviceName')} is not encrypted: set encrypted to true")


def _aws_volume(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("encrypted") is not True:
        report_violation("the volume is not encrypted: set encrypted to true")


def _alibaba_algorithm(algorithm: Any, report_violation: ReportViolation) -> None:
    if algorithm not in ALIBABA_SSE_ALGORITHMS:
        report_violation(f"the server-side encryption algorithm is {algorithm or 'unset'}: use AES256, KMS or SM4")


def _alibaba_bucket(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    rule = props.get("serverSideEncryptionRule")
    if rule is not None:  # inline; a bucket without it needs a BucketServerSideEncryption (buckets-have-encryption)
        _alibaba_algorithm(rule.get("sseAlgorithm"), report_violation)


def _alibaba_instance_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("systemDiskEncrypted") is not True:
        report_violation("the system disk is not encrypted: set systemDiskEncrypted to true")
    _alibaba_data_disks(props, report_violation)


def _alibaba_log_store(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    conf = props.get("encryptConf") or {}
    if conf.get("enable") is not True:
        report_violation("the logstore is not encrypted: set encryptConf.enable to true (encryptType default or m4)")


def _huawei_bucket(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("encryption") is not True:
        report_violation("the bucket is not encrypted: set encryption to true (sseAlgorithm AES256 or kms)")


def _huawei_instance_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if not props.get("systemDiskKmsKeyId"):
        report_violation("the system disk is not encrypted: set systemDiskKmsKeyId (inferstack uses the region's "
                         "evs/default key)")
    for index, disk in enumerate(items(props.get("dataDisks"))):
        if not disk.get("kmsKeyId"):
            report_violation(f"data disk {index} is not encrypted: set kmsKeyId")


def _aws_template_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """A launch template's volumes: `ebs.encrypted` is a string ("true") in pulumi_aws's LaunchTemplate."""
    volumes = [m for m in items(props.get("blockDeviceMappings")) if isinstance(m, Mapping) and m.get("ebs")]
    if not volumes:
        report_violation("the launch template maps no EBS volume, so its servers' root volume is the image's, "
                         "encrypted only if the account encrypts EBS by default: map the root device with "
                         "ebs.encrypted true")
    for mapping in volumes:
        if boolean(mapping["ebs"].get("encrypted")) is not True:
            report_violation(f"EBS volume {mapping.get('deviceName')} of the launch template is not encrypted: set "
                             "ebs.encrypted to true")


def _alibaba_template_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """An ECS launch template: `systemDisk.encrypted` and `dataDisks[].encrypted`."""
    if (props.get("systemDisk") or {}).get("encrypted") is not True:
        report_violation("the system disk is not encrypted: set systemDisk.encrypted to true")
    _alibaba_data_disks(props, report_violation)


def _alibaba_data_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for index, disk in enumerate(items(props.get("dataDisks"))):
        if disk.get("encrypted") is not True:
            report_violation(f"data disk {index} is not encrypted: set encrypted to true")


def _huawei_configuration_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """An AS configuration's `instanceConfig.disks`, the system disk (SYS) included: each names a KMS key."""
    disks = items((props.get("instanceConfig") or {}).get("disks"))
    if not any(str(disk.get("diskType")).upper() == "SYS" for disk in disks):
        report_violation("the AS configuration lists no system disk (diskType SYS), so the pack cannot tell "
                         "whether it is encrypted: list it with kmsId")
    for index, disk in enumerate(disks):
        if not disk.get("kmsId"):
            report_violation(f"disk {index} ({disk.get('diskType')}) of the AS configuration is not encrypted: "
                             "set kmsId (inferstack uses the region's evs/default key)")


_ENCRYPTION: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_BUCKET_ENCRYPTION: _aws_encryption_rules,
    AWS_INSTANCE: _aws_instance_disks,
    AWS_LAUNCH_TEMPLATE: _aws_template_disks,
    AWS_LAUNCH_CONFIGURATION: _aws_instance_disks,  # rootBlockDevice and ebsBlockDevices, as on an instance
    AWS_VOLUME: _aws_volume,
    ALI_BUCKET: _alibaba_bucket,
    ALI_BUCKET_ENCRYPTION: lambda props, report: _alibaba_algorithm(props.get("sseAlgorithm"), report),
    ALI_INSTANCE: _alibaba_instance_disks,
    ALI_SCALING_CONFIGURATION: _alibaba_instance_disks,  # systemDiskEncrypted and dataDisks, as on an instance
    **dict.fromkeys(ALI_LAUNCH_TEMPLATES, _alibaba_template_disks),
    ALI_DISK: _aws_volume,  # `encrypted`, as on EBS
    ALI_LOG_STORE: _alibaba_log_store,
    HW_BUCKET: _huawei_bucket,
    HW_INSTANCE: _huawei_instance_disks,
    HW_AS_CONFIGURATION: _huawei_configuration_disks,
    HW_VOLUME: lambda props, report: None if props.get("kmsId") else report(
        "the volume is not encrypted: set kmsId"),
}
_ALWAYS_ENCRYPTED = (GCP_BUCKET, GCP_INSTANCE, *GCP_INSTANCE_TEMPLATES, GCP_DISK)


def check_encryption(resource: ResourceInput, report_violation: ReportViolation) -> None:
    if resource.resource_type in _ALWAYS_ENCRYPTED:
        raise NotApplicable(GCP_ALWAYS_ENCRYPTED)
    check = _ENCRYPTION.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


ENCRYPTION_AT_REST = ResourceRule(
    "encryption-at-rest", "Buckets, server disks and log stores are encrypted at rest.",
    check_encryption, lambda t: t in _ENCRYPTION or t in _ALWAYS_ENCRYPTED)


#### CDN: HTTPS only, private origin ####

AWS_HTTPS_VIEWER_POLICIES = {"https-only", "redirect-to-https"}


def _cloudfront(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    behaviors = [("default", props.get("defaultCacheBehavior") or {})] + [
        (str(b.get("pathPattern")), b) for b in items(props.get("orderedCacheBehaviors"))]
    for path, behavior in behaviors:
        policy = behavior.get("viewerProtocolPolicy")
        if policy not in AWS_HTTPS_VIEWER_POLICIES:
            report_violation(f"cache behavior {path} serves plain HTTP (viewerProtocolPolicy is {policy}): use "
                             "https-only")
    for origin in items(props.get("origins")):
        name = origin.get("originId")
        if ".s3." in str(origin.get("domainName")) or origin.get("s3OriginConfig"):
            if not origin.get("originAccessControlId"):
                report_violation(f"origin {name} reads its S3 bucket without Origin Access Control: give it an "
                                 "originAccessControlId, so that the bucket stays private")
        elif (origin.get("customOriginConfig") or {}).get("originProtocolPolicy") != "https-only":
            report_violation(f"origin {name} is fetched over plain HTTP: set "
                             "customOriginConfig.originProtocolPolicy to https-only")


def _alibaba_cdn_domain(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    # An offline domain serves nothing (inferstack's first phase, until DNS lets Alibaba issue the certificate).
    serving = str(props.get("status") or "online").lower() != "offline"
    if serving and (props.get("certificateConfig") or {}).get("serverCertificateStatus") != "on":
        report_violation("the CDN domain serves without an HTTPS certificate: set "
                         "certificateConfig.serverCertificateStatus to on, or keep the domain offline until it has one")
    for source in items(props.get("sources")):
        if source.get("type") == "oss" and integer(source.get("port", 80)) != 443:
            report_violation(f"origin {source.get('content')} is fetched over plain HTTP: use port 443")


def _alibaba_cdn_function(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    arguments = {a.get("argName"): a.get("argValue") for a in items(props.get("functionArgs"))}
    if props.get("functionName") == "https_force" and arguments.get("enable") != "on":
        report_violation("https_force is not enabled: set its enable argument to on")
    if props.get("functionName") == "http_force" and arguments.get("enable") == "on":
        report_violation("http_force sends viewers to plain HTTP: remove it")


def _huawei_cdn_domain(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    configs = props.get("configs") or {}
    https = configs.get("httpsSettings") or {}
    redirect = configs.get("forceRedirect") or {}
    if https.get("httpsEnabled") is not True:
        report_violation("HTTPS is off: set configs.httpsSettings.httpsEnabled to true with a certificate")
    if redirect.get("enabled") is not True or redirect.get("type") != "https":
        report_violation("plain HTTP is not redirected: set configs.forceRedirect to enabled, type https")
    if configs.get("originProtocol") != "https":
        report_violation(f"the origin is fetched over {configs.get('originProtocol') or 'http'}: set "
                         "configs.originProtocol to https")
    for source in items(props.get("sources")):
        if source.get("originType") == "obs_bucket" and source.get("obsBucketType") != "private":
            report_violation(f"origin {source.get('origin')} is read as a public bucket: set obsBucketType to "
                             "private (the CDN reads it with the account's agency)")


_CDN: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_DISTRIBUTION: _cloudfront,
    ALI_CDN_DOMAIN: _alibaba_cdn_domain,
    ALI_CDN_CONFIG: _alibaba_cdn_function,
    HW_CDN_DOMAIN: _huawei_cdn_domain,
}


def check_cdn(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _CDN.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


CDN_HTTPS_ONLY = ResourceRule(
    "cdn-https-only", "CDNs serve viewers over HTTPS only and read private origins with their own "
    "identity.", check_cdn, lambda t: t in _CDN)


#### Stack: settings that are resources of their own ####


def _settings_of(stack: Stack, bucket: StackResource, setting_type: str) -> list[StackResource]:
    name = stack.known(bucket.props, "bucket")
    return [s for s in stack.of_type(setting_type) if stack.refers(s, "bucket", bucket, name)]


def check_public_access_blocks(stack: Stack, report_violation: ReportViolation) -> None:
    checked = {AWS_BUCKET: AWS_PUBLIC_ACCESS_BLOCK, ALI_BUCKET: ALI_PUBLIC_ACCESS_BLOCK}
    buckets = stack.of_type(*checked)
    if not buckets:
        if stack.of_type(HW_BUCKET):
            raise NotApplicable(HUAWEI_NO_PUBLIC_ACCESS_BLOCK)
        if stack.of_type(GCP_BUCKET):
            raise NotApplicable(GCP_PUBLIC_ACCESS_ON_BUCKET)
        raise NotApplicable("the stack creates no S3 or OSS bucket")
    for bucket in buckets:
        if not _settings_of(stack, bucket, checked[bucket.resource_type]):
            block = checked[bucket.resource_type].rsplit(":", 1)[-1]
            report_violation(f"bucket {bucket.name} has no {block}: add one that blocks public ACLs and policies",
                             bucket.urn)


BUCKETS_HAVE_PUBLIC_ACCESS_BLOCK = StackRule(
    "buckets-have-public-access-block",
    "Every S3 and OSS bucket has a public access block (a separate resource on those clouds).",
    check_public_access_blocks, severity="critical")


def check_default_encryption(stack: Stack, report_violation: ReportViolation) -> None:
    buckets = stack.of_type(AWS_BUCKET, ALI_BUCKET)
    if not buckets:
        if stack.of_type(GCP_BUCKET):
            raise NotApplicable(GCP_ALWAYS_ENCRYPTED)
        if stack.of_type(HW_BUCKET):
            raise NotApplicable("OBS encryption is a property of the bucket, which encryption-at-rest checks")
        raise NotApplicable("the stack creates no S3 or OSS bucket")
    for bucket in buckets:
        if bucket.resource_type == AWS_BUCKET:
            inline = stack.known(bucket.props, "serverSideEncryptionConfiguration")
            resource_type, setting = AWS_BUCKET_ENCRYPTION, "BucketServerSideEncryptionConfiguration"
        else:
            inline = stack.known(bucket.props, "serverSideEncryptionRule")
            resource_type, setting = ALI_BUCKET_ENCRYPTION, "BucketServerSideEncryption"
        if not inline and not _settings_of(stack, bucket, resource_type):
            report_violation(f"bucket {bucket.name} has no default encryption: add a {setting}", bucket.urn)


BUCKETS_HAVE_DEFAULT_ENCRYPTION = StackRule(
    "buckets-have-default-encryption",
    "Every S3 and OSS bucket has default server-side encryption (a separate resource on those clouds).",
    check_default_encryption)


#### Stack: CDN front ends ####


def _gcp_cdn_front_ends(stack: Stack, report_violation: ReportViolation) -> bool:
    backends = [b for b in stack.of_type(GCP_BACKEND_BUCKET) if stack.known(b.props, "enableCdn") is True]
    for backend in backends:
        name = stack.known(backend.props, "name")
        maps = [m for m in stack.of_type(GCP_URL_MAP)
                if stack.refers(m, "defaultService", backend) or stack.refers(m, "pathMatchers", backend)
                or (name and last_segment(stack.known(m.props, "defaultService")) == name)]
        for url_map in maps:
            map_name = stack.known(url_map.props, "name")
            for proxy in stack.of_type(GCP_HTTP_PROXY):
                if stack.refers(proxy, "urlMap", url_map) or (
                        map_name and last_segment(stack.known(proxy.props, "urlMap")) == map_name):
                    report_violation(f"{proxy.name} serves the CDN backend {backend.name} over plain HTTP: serve it "
                                     "through a TargetHttpsProxy only, and redirect port 80 with a URL map whose "
                                     "defaultUrlRedirect has httpsRedirect", proxy.urn)
    return bool(backends)


def _alibaba_cdn_functions(stack: Stack, report_violation: ReportViolation) -> bool:
    domains = stack.of_type(ALI_CDN_DOMAIN)
    for domain in domains:
        name = stack.known(domain.props, "domainName")
        functions = {}
        for config in stack.of_type(ALI_CDN_CONFIG):
            if stack.refers(config, "domainName", domain, name):
                functions[config.props.get("functionName")] = {
                    a.get("argName"): a.get("argValue") for a in items(config.props.get("functionArgs"))}
        offline = str(stack.known(domain.props, "status") or "online").lower() == "offline"  # serves nothing
        if not offline and (functions.get("https_force") or {}).get("enable") != "on":
            report_violation(f"CDN domain {name} does not force HTTPS: add a DomainConfig https_force with "
                             "enable=on", domain.urn)
        oss_origin = any(s.get("type") == "oss" for s in items(domain.props.get("sources")))
        if oss_origin and (functions.get("l2_oss_key") or {}).get("private_oss_auth") != "on":
            report_violation(f"CDN domain {name} reads its OSS origin without back-to-origin authentication, so the "
                             "bucket would have to be public: add a DomainConfig l2_oss_key with private_oss_auth=on",
                             domain.urn)
    return bool(domains)


def check_cdn_front_ends(stack: Stack, report_violation: ReportViolation) -> None:
    gcp = _gcp_cdn_front_ends(stack, report_violation)
    alibaba = _alibaba_cdn_functions(stack, report_violation)
    if not gcp and not alibaba:
        raise NotApplicable("no Cloud CDN backend or Alibaba CDN domain in the stack; CloudFront and Huawei CDN are "
                            "checked resource by resource by cdn-https-only")


CDN_HTTPS_FRONT_ENDS = StackRule(
    "cdn-https-front-ends",
    "CDN front ends made of several resources (Google Cloud load balancer, Alibaba CDN functions) force "
    "HTTPS and read a private origin.", check_cdn_front_ends)

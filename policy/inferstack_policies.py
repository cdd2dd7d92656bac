"""inferstack guardrails: the security invariants of an inferstack deployment, as Pulumi policies for AWS, Google
Cloud, Alibaba Cloud and Huawei Cloud.

Each rule is a plain validator function `(args, report_violation) -> None`, wrapped in a ResourceValidationPolicy
where one resource holds the setting (it runs on the resource's inputs before the resource is created, so a
mandatory violation stops `pulumi up` there), or in a StackValidationPolicy where the rule needs several resources
(a bucket and its separate public-access-block resource; it runs on the whole stack at the end of a preview or an
update). docs/policy.md says what each policy checks on each cloud and what no policy can check.

This module only defines the policies: `__main__.py` builds the PolicyPack, because constructing one starts the
analyzer's gRPC server and blocks forever. Everything here imports and tests like ordinary functions.

Properties arrive as the engine sends them: camelCase keys, numbers as floats, nested values as read-only mappings
and sequences. Reading a value that a preview cannot know yet raises, and the engine reports that as "can't run
policy during preview" (advisory); the check then runs for real at `pulumi up`, before the resource is created.
A setting a cloud cannot express is reported as "not applicable" with the reason, never passed silently.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

#### Resource types (the providers' type tokens, exactly) ####

# AWS, pulumi-aws 7.
AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_VOLUME = "aws:ebs/volume:Volume"
AWS_SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
AWS_SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
AWS_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
AWS_BUCKET = "aws:s3/bucket:Bucket"
AWS_BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
AWS_BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
AWS_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
AWS_BUCKET_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
AWS_ROLE = "aws:iam/role:Role"
AWS_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
AWS_MANAGED_POLICY = "aws:iam/policy:Policy"
AWS_IDENTITY_POLICIES = (AWS_ROLE_POLICY, "aws:iam/userPolicy:UserPolicy", "aws:iam/groupPolicy:GroupPolicy",
                         AWS_MANAGED_POLICY)
AWS_ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
AWS_DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
AWS_PARAMETER = "aws:ssm/parameter:Parameter"

# Google Cloud, pulumi-gcp 10.
GCP_INSTANCE = "gcp:compute/instance:Instance"
GCP_INSTANCE_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GCP_DISK = "gcp:compute/disk:Disk"
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
GCP_BUCKET = "gcp:storage/bucket:Bucket"
GCP_BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
GCP_BUCKET_IAM_BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
GCP_BUCKET_IAM_POLICY = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
GCP_PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
GCP_PROJECT_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
GCP_PROJECT_IAM_POLICY = "gcp:projects/iAMPolicy:IAMPolicy"
GCP_SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"
GCP_BACKEND_BUCKET = "gcp:compute/backendBucket:BackendBucket"
GCP_URL_MAP = "gcp:compute/uRLMap:URLMap"
GCP_HTTP_PROXY = "gcp:compute/targetHttpProxy:TargetHttpProxy"
GCP_SECRET = "gcp:secretmanager/secret:Secret"

# Alibaba Cloud, pulumi-alicloud 4.
ALI_INSTANCE = "alicloud:ecs/instance:Instance"
ALI_DISK = "alicloud:ecs/ecsDisk:EcsDisk"
ALI_SECURITY_GROUP_RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"
ALI_BUCKET = "alicloud:oss/bucket:Bucket"
ALI_BUCKET_ACL = "alicloud:oss/bucketAcl:BucketAcl"
ALI_BUCKET_POLICY = "alicloud:oss/bucketPolicy:BucketPolicy"
ALI_PUBLIC_ACCESS_BLOCK = "alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock"
ALI_BUCKET_ENCRYPTION = "alicloud:oss/bucketServerSideEncryption:BucketServerSideEncryption"
ALI_ROLE = "alicloud:ram/role:Role"
ALI_POLICY = "alicloud:ram/policy:Policy"
ALI_ROLE_POLICY_ATTACHMENT = "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment"
ALI_CDN_DOMAIN = "alicloud:cdn/domainNew:DomainNew"
ALI_CDN_CONFIG = "alicloud:cdn/domainConfig:DomainConfig"
ALI_SECRET = "alicloud:kms/secret:Secret"

# Huawei Cloud, pulumi-huaweicloud 0.0.12 (its modules are capitalised).
HW_INSTANCE = "huaweicloud:Ecs/instance:Instance"
HW_VOLUME = "huaweicloud:Evs/volume:Volume"
HW_SECURITY_GROUP_RULE = "huaweicloud:Vpc/secgroupRule:SecgroupRule"
HW_BUCKET = "huaweicloud:Obs/bucket:Bucket"
HW_BUCKET_POLICY = "huaweicloud:Obs/bucketPolicy:BucketPolicy"
HW_ROLE = "huaweicloud:Iam/role:Role"
HW_AGENCY = "huaweicloud:Iam/agency:Agency"
HW_CDN_DOMAIN = "huaweicloud:Cdn/domain:Domain"
HW_SECRET = "huaweicloud:Dew/secret:Secret"

#### What a cloud cannot express (the reasons match the capabilities in inferstack/components/<cloud>.py) ####

GCP_NO_METADATA_TOKENS = (
    "Google Cloud's metadata server has no session-token mode to require: it demands only the Metadata-Flavor "
    "header (inferstack turns the header-free legacy endpoints off with disable-legacy-endpoints)")
HUAWEI_NO_METADATA_TOKENS = (
    "Huawei Cloud's ECS metadata service has no session-token mode and pulumi_huaweicloud has no metadata option "
    "(inferstack's boot script lets only root reach it, with a host firewall rule)")
GCP_ALWAYS_ENCRYPTED = (
    "Google Cloud encrypts every Cloud Storage object and persistent disk at rest and no setting turns it off (a "
    "customer-managed key only changes whose key it is)")
HUAWEI_NO_PUBLIC_ACCESS_BLOCK = (
    "Huawei OBS has no public-access-block setting in pulumi_huaweicloud and its ACLs cannot be turned off; "
    "buckets-not-public checks the bucket's ACL and policy instead")
GCP_PUBLIC_ACCESS_ON_BUCKET = (
    "Cloud Storage keeps public access prevention on the bucket itself, which buckets-not-public checks")

#### Values as the engine sends them ####


def _items(value: Any) -> list[Any]:
    """A property that may hold one value or a list of them (IAM's "Action": "s3:GetObject" or [...])."""
    if value is None:
        return []
    if isinstance(value, str | Mapping):
        return [value]
    return list(value)


def _number(value: Any) -> int:
    return int(float(value))


def _known(props: Mapping[str, Any], key: str) -> Any:
    """A property used only to relate two resources: None when a preview cannot know it yet."""
    try:
        return props.get(key)
    except UnknownValueError:
        return None


def _document(value: Any) -> Mapping[str, Any]:
    """A JSON policy document (a string, or a mapping where the provider takes an object)."""
    if isinstance(value, Mapping):
        return value
    try:
        parsed = json.loads(value or "{}")
    except (TypeError, ValueError):
        return {"unreadable": True}
    return parsed if isinstance(parsed, Mapping) else {"unreadable": True}


@dataclass(frozen=True)
class Statement:
    label: str
    """The statement's Sid, else its position ("#0")."""
    body: Mapping[str, Any]

    @property
    def allows(self) -> bool:
        return str(self.body.get("Effect", "")).lower() == "allow"

    @property
    def actions(self) -> list[str]:
        return [str(action) for action in _items(self.body.get("Action"))]


def _statements(value: Any, report_violation: ReportViolation, what: str) -> list[Statement]:
    document = _document(value)
    if document.get("unreadable"):
        report_violation(f"{what} is not a JSON policy document, so it cannot be checked")
        return []
    return [Statement(str(body.get("Sid") or f"#{index}"), body)
            for index, body in enumerate(_items(document.get("Statement")))]


#### Networks ####

WORLD = ("0.0.0.0/0", "::/0")
# Networks that count as private, as in inferstack.components.core: RFC 1918, RFC 6598 (carrier-grade NAT, used
# by overlay VPNs) and RFC 4193 (IPv6 unique local).
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"))
# Google's documented source range for IAP TCP forwarding: an SSH rule from it admits only IAM-authorised users
# (the GCP backend's managed-shell note tells users to add exactly this rule).
GCP_IAP_RANGE = ipaddress.ip_network("35.235.240.0/20")
ADMIN_PORTS = {22: "SSH", 3389: "RDP"}
ALL_PORTS = (0, 65535)
_PORT_PROTOCOLS = {"tcp", "udp", "sctp", "6", "17", "132"}
_ANY_PROTOCOL = {"-1", "all", ""}


def _network(source: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(source.strip(), strict=False)
    except ValueError:
        return None


def is_world(source: str) -> bool:
    network = _network(source)
    return network is not None and network.prefixlen == 0


def is_private(source: str) -> bool:
    """Unparsable sources count as public: a check that cannot read an address must not let it through."""
    network = _network(source)
    return network is not None and any(
        network.version == p.version and network.subnet_of(p) for p in PRIVATE_NETWORKS)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Opening:
    """Ports that an allow rule opens to one source network."""

    low: int
    high: int
    source: str

    def covers(self, port: int) -> bool:
        return self.low <= port <= self.high

    def ports_are(self) -> str:
        return f"port {self.low} is" if self.low == self.high else f"ports {self.low}-{self.high} are"


def _port_span(protocol: Any, low: Any, high: Any) -> tuple[int, int] | None:
    """The ports a rule opens for `protocol`; None for protocols without ports (ICMP, GRE)."""
    name = str(protocol if protocol is not None else "").lower()
    if name in _ANY_PROTOCOL:
        return ALL_PORTS
    if name not in _PORT_PROTOCOLS:
        return None
    if low is None or _number(low) < 0:
        return ALL_PORTS
    return _number(low), _number(high if high is not None else low)


def _port_list(ports: list[str]) -> list[tuple[int, int]]:
    """"22" and "8000-8010" port texts (Google Cloud firewalls, Huawei `ports`) as spans."""
    spans = []
    for text in ports:
        low, _, high = text.strip().partition("-")
        spans.append((int(low), int(high or low)))
    return spans


def _aws_openings(protocol: Any, low: Any, high: Any, sources: list[Any]) -> Iterator[Opening]:
    span = _port_span(protocol, low, high)
    if span is not None:
        yield from (Opening(*span, str(source)) for source in sources if source)


def _aws_ingress_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    yield from _aws_openings(props.get("ipProtocol"), props.get("fromPort"), props.get("toPort"),
                             [props.get("cidrIpv4"), props.get("cidrIpv6")])


def _aws_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("type") == "ingress":
        yield from _aws_openings(props.get("protocol"), props.get("fromPort"), props.get("toPort"),
                                 [*_items(props.get("cidrBlocks")), *_items(props.get("ipv6CidrBlocks"))])


def _aws_security_group(props: Mapping[str, Any]) -> Iterator[Opening]:
    for rule in _items(props.get("ingress")):
        yield from _aws_openings(rule.get("protocol"), rule.get("fromPort"), rule.get("toPort"),
                                 [*_items(rule.get("cidrBlocks")), *_items(rule.get("ipv6CidrBlocks"))])


def _gcp_firewall(props: Mapping[str, Any]) -> Iterator[Opening]:
    if str(props.get("direction") or "INGRESS").upper() != "INGRESS" or props.get("disabled") is True:
        return
    sources = [str(s) for s in _items(props.get("sourceRanges"))]
    if not sources and not props.get("sourceTags") and not props.get("sourceServiceAccounts"):
        sources = ["0.0.0.0/0"]  # Google's default for an ingress rule that names no source
    for allow in _items(props.get("allows")):
        protocol = str(allow.get("protocol", "")).lower()
        ports = [str(p) for p in _items(allow.get("ports"))]
        if protocol == "all" or (protocol in _PORT_PROTOCOLS and not ports):
            spans = [ALL_PORTS]
        elif protocol in _PORT_PROTOCOLS:
            spans = _port_list(ports)
        else:
            spans = []
        yield from (Opening(low, high, source) for low, high in spans for source in sources)


def _alibaba_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("type") != "ingress" or str(props.get("policy") or "accept").lower() != "accept":
        return
    low, _, high = str(props.get("portRange") or "-1/-1").partition("/")
    span = _port_span(props.get("ipProtocol"), low, high)
    if span is not None:
        yield from (Opening(*span, str(s)) for s in (props.get("cidrIp"), props.get("ipv6CidrIp")) if s)


def _huawei_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("direction") != "ingress" or str(props.get("action") or "allow").lower() == "deny":
        return
    protocol = str(props.get("protocol") or "").lower()
    if protocol in _ANY_PROTOCOL:
        spans = [ALL_PORTS]
    elif protocol not in _PORT_PROTOCOLS:
        spans = []
    elif props.get("ports"):  # "22,8000-8010"
        spans = _port_list(str(props["ports"]).split(","))
    elif props.get("portRangeMin") is not None:
        spans = [(_number(props["portRangeMin"]), _number(props.get("portRangeMax", props["portRangeMin"])))]
    else:
        spans = [ALL_PORTS]
    source = props.get("remoteIpPrefix")
    if not source and not props.get("remoteGroupId") and not props.get("remoteAddressGroupId"):
        source = "::/0" if props.get("ethertype") == "IPv6" else "0.0.0.0/0"  # no remote: every address
    if source:
        yield from (Opening(low, high, str(source)) for low, high in spans)


_INGRESS_READERS: Mapping[str, Callable[[Mapping[str, Any]], Iterator[Opening]]] = {
    AWS_INGRESS_RULE: _aws_ingress_rule,
    AWS_SECURITY_GROUP_RULE: _aws_security_group_rule,
    AWS_SECURITY_GROUP: _aws_security_group,
    GCP_FIREWALL: _gcp_firewall,
    ALI_SECURITY_GROUP_RULE: _alibaba_security_group_rule,
    HW_SECURITY_GROUP_RULE: _huawei_security_group_rule,
}


def openings(resource_type: str, props: Mapping[str, Any]) -> list[Opening]:
    """What an ingress rule (or a security group's inline rules) lets in; empty for any other resource."""
    reader = _INGRESS_READERS.get(resource_type)
    return list(reader(props)) if reader else []


def validate_admin_ports(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for opening in openings(args.resource_type, args.props):
        exempt = args.resource_type == GCP_FIREWALL and _iap_only(opening.source)
        if is_private(opening.source) or exempt:
            continue
        for port, service in ADMIN_PORTS.items():
            if not opening.covers(port):
                continue
            if opening.low == opening.high:
                what = f"admin port {port} ({service}) is open to {opening.source}"
            else:
                what = (f"ports {opening.low}-{opening.high} are open to {opening.source}, including admin port {port} "
                        f"({service})")
            report_violation(f"{what}: inferstack opens no admin port; reach servers through the cloud's managed "
                             "shell, or admit a private network only")


def _iap_only(source: str) -> bool:
    network = _network(source)
    return network is not None and network.version == 4 and network.subnet_of(GCP_IAP_RANGE)  # type: ignore[arg-type]


DEFAULT_SERVING_PORTS = (8000,)
"""The inference API's port in every inferstack plan (`ServingConfig.port`); set `servingPorts` for others."""

SERVING_PORTS_SCHEMA = PolicyConfigSchema(properties={"servingPorts": {
    "type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535},
    "default": list(DEFAULT_SERVING_PORTS),
    "description": "Ports that may be open to the whole internet (the inference API)."}})


def serving_ports(config: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(_number(port) for port in config.get("servingPorts", DEFAULT_SERVING_PORTS))


def validate_world_ingress(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    allowed = serving_ports(args.get_config())
    for opening in openings(args.resource_type, args.props):
        if is_world(opening.source) and not (opening.low == opening.high and opening.low in allowed):
            report_violation(f"{opening.ports_are()} open to the whole internet ({opening.source}): only a serving "
                             f"port ({', '.join(map(str, allowed))}) may be; admit your users' networks instead")


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
        return any("*" in _items(value) for value in principal.values())
    return "*" in _items(principal)


def _check_bucket_policy(value: Any, report_violation: ReportViolation) -> None:
    for statement in _statements(value, report_violation, "the bucket policy"):
        if not statement.allows:
            continue
        if "NotPrincipal" in statement.body:
            report_violation(f"bucket policy statement {statement.label} allows everyone but the principals it "
                             "names (NotPrincipal): name the principals that may read instead")
        elif _everyone(statement.body.get("Principal")):
            report_violation(f"bucket policy statement {statement.label} allows everyone (Principal \"*\"): name "
                             "the principals that may read instead")


def _check_aws_grants(grants: list[Any], report_violation: ReportViolation) -> None:
    """Grants of an S3 ACL: BucketAcl's {grantee: {uri}, permission}, or Bucket's {uri, permissions}."""
    for grant in grants:
        grantee = grant.get("grantee") or grant
        uri = str(grantee.get("uri") or "")
        if uri in AWS_PUBLIC_GROUPS:
            permission = grant.get("permission") or ", ".join(_items(grant.get("permissions"))) or "access"
            report_violation(f"an ACL grant admits {uri.rsplit('/', 1)[-1]} ({permission}): remove it")


def _aws_bucket_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _check_canned_acl(props.get("acl"), report_violation)
    _check_aws_grants(_items(props.get("grants")), report_violation)
    if props.get("policy"):
        _check_bucket_policy(props["policy"], report_violation)


def _aws_bucket_acl_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _check_canned_acl(props.get("acl"), report_violation)
    policy = props.get("accessControlPolicy") or {}
    _check_aws_grants(_items(policy.get("grants")), report_violation)


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
    _gcp_members_not_public(_items(props.get("members")), props.get("role"), report_violation)


def _gcp_iam_policy_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for binding in _items(_document(props.get("policyData")).get("bindings")):
        _gcp_members_not_public(_items(binding.get("members")), binding.get("role"), report_violation)


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
}


def validate_buckets_not_public(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    check = _NOT_PUBLIC.get(args.resource_type)
    if check is not None:
        check(args.props, report_violation)


#### Encryption at rest ####

AWS_SSE_ALGORITHMS = {"AES256", "aws:kms", "aws:kms:dsse"}
ALIBABA_SSE_ALGORITHMS = {"AES256", "KMS", "SM4"}


def _aws_encryption_rules(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    rules = _items(props.get("rules"))
    algorithms = [(rule.get("applyServerSideEncryptionByDefault") or {}).get("sseAlgorithm") for rule in rules]
    if not rules or any(algorithm not in AWS_SSE_ALGORITHMS for algorithm in algorithms):
        report_violation("a default encryption rule names no algorithm: set "
                         "applyServerSideEncryptionByDefault.sseAlgorithm to AES256 or aws:kms")


def _aws_instance_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if (props.get("rootBlockDevice") or {}).get("encrypted") is not True:
        report_violation("the root volume is not encrypted: set rootBlockDevice.encrypted to true")
    for device in _items(props.get("ebsBlockDevices")):
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
    for index, disk in enumerate(_items(props.get("dataDisks"))):
        if disk.get("encrypted") is not True:
            report_violation(f"data disk {index} is not encrypted: set encrypted to true")


def _huawei_bucket(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("encryption") is not True:
        report_violation("the bucket is not encrypted: set encryption to true (sseAlgorithm AES256 or kms)")


def _huawei_instance_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if not props.get("systemDiskKmsKeyId"):
        report_violation("the system disk is not encrypted: set systemDiskKmsKeyId (inferstack uses the region's "
                         "evs/default key)")
    for index, disk in enumerate(_items(props.get("dataDisks"))):
        if not disk.get("kmsKeyId"):
            report_violation(f"data disk {index} is not encrypted: set kmsKeyId")


_ENCRYPTION: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_BUCKET_ENCRYPTION: _aws_encryption_rules,
    AWS_INSTANCE: _aws_instance_disks,
    AWS_VOLUME: _aws_volume,
    ALI_BUCKET: _alibaba_bucket,
    ALI_BUCKET_ENCRYPTION: lambda props, report: _alibaba_algorithm(props.get("sseAlgorithm"), report),
    ALI_INSTANCE: _alibaba_instance_disks,
    ALI_DISK: _aws_volume,  # `encrypted`, as on EBS
    HW_BUCKET: _huawei_bucket,
    HW_INSTANCE: _huawei_instance_disks,
    HW_VOLUME: lambda props, report: None if props.get("kmsId") else report(
        "the volume is not encrypted: set kmsId"),
}


def validate_encryption(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type in (GCP_BUCKET, GCP_INSTANCE, GCP_INSTANCE_TEMPLATE, GCP_DISK):
        args.not_applicable(GCP_ALWAYS_ENCRYPTED)
    check = _ENCRYPTION.get(args.resource_type)
    if check is not None:
        check(args.props, report_violation)


#### Instance metadata: session tokens required ####


def _tokens_required(options: Mapping[str, Any], setting: str, report_violation: ReportViolation) -> None:
    if options.get("httpEndpoint") == "disabled":  # no metadata service at all
        return
    tokens = options.get("httpTokens")
    if tokens != "required":
        report_violation(f"the metadata service answers without a session token ({setting} is "
                         f"{tokens or 'unset'}): set it to required")


def validate_metadata_tokens(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type in (AWS_INSTANCE, AWS_LAUNCH_TEMPLATE):
        _tokens_required(args.props.get("metadataOptions") or {}, "metadataOptions.httpTokens", report_violation)
    elif args.resource_type == ALI_INSTANCE:
        _tokens_required(args.props, "httpTokens", report_violation)
    elif args.resource_type in (GCP_INSTANCE, GCP_INSTANCE_TEMPLATE):
        args.not_applicable(GCP_NO_METADATA_TOKENS)
    elif args.resource_type == HW_INSTANCE:
        args.not_applicable(HUAWEI_NO_METADATA_TOKENS)


#### Identity: storage grants ####

# AWS- and Alibaba-managed policies that grant object storage on every bucket of the account.
AWS_BROAD_MANAGED_POLICIES = {"AdministratorAccess", "PowerUserAccess", "ReadOnlyAccess", "AmazonS3FullAccess",
                              "AmazonS3ReadOnlyAccess"}
ALIBABA_BROAD_SYSTEM_POLICIES = {"AdministratorAccess", "ReadOnlyAccess", "AliyunOSSFullAccess",
                                 "AliyunOSSReadOnlyAccess"}
GCP_STORAGE_ROLE_PREFIX = "roles/storage."
GCP_BUCKET_ADMIN_ROLES = {"roles/storage.admin", "roles/storage.objectAdmin", "roles/storage.legacyBucketOwner"}


@dataclass(frozen=True)
class StorageDialect:
    """How one cloud's identity policies name object storage."""

    action_prefix: str
    """"s3:", "oss:", "obs:"."""
    read_actions: frozenset[str]
    """Lower-case actions that only read objects or list keys."""
    list_actions: frozenset[str]
    prefix_condition: str
    """The condition key that limits a listing to a prefix (lower case)."""
    bucket_path: Callable[[str], str | None]
    """"bucket/key-pattern" or "bucket" for a storage resource; None for a resource of another service."""

    def is_storage(self, action: str) -> bool:
        return action == "*" or action.lower().startswith(self.action_prefix)


def _aws_path(resource: str) -> str | None:
    if resource == "*":
        return "*"
    return resource.split(":::", 1)[1] if resource.startswith("arn:") and ":s3:::" in resource else None


def _alibaba_path(resource: str) -> str | None:
    if resource == "*":
        return "*"
    return resource.split(":", 4)[4] if resource.startswith("acs:oss:") and resource.count(":") >= 4 else None


def _huawei_path(resource: str) -> str | None:
    if resource == "*":
        return "*"
    return resource.split(":", 4)[4] if resource.lower().startswith("obs:") and resource.count(":") >= 4 else None


AWS_STORAGE = StorageDialect("s3:", frozenset({"s3:getobject", "s3:getobjectversion", "s3:listbucket"}),
                             frozenset({"s3:listbucket"}), "s3:prefix", _aws_path)
ALIBABA_STORAGE = StorageDialect("oss:", frozenset({"oss:getobject", "oss:getobjectmeta", "oss:listobjects"}),
                                 frozenset({"oss:listobjects"}), "oss:prefix", _alibaba_path)
HUAWEI_STORAGE = StorageDialect("obs:", frozenset({"obs:object:getobject", "obs:bucket:listbucket"}),
                                frozenset({"obs:bucket:listbucket"}), "obs:prefix", _huawei_path)


def _every_bucket(path: str | None) -> bool:
    bucket = (path or "").split("/", 1)[0]
    return path is not None and (not bucket or "*" in bucket)


def _check_storage_wildcards(statements: list[Statement], dialect: StorageDialect,
                             report_violation: ReportViolation) -> None:
    for statement in statements:
        if not statement.allows:
            continue
        if "NotAction" in statement.body:
            report_violation(f"statement {statement.label} allows every action but those it names (NotAction): "
                             "name the actions instead")
            continue
        storage = [action for action in statement.actions if dialect.is_storage(action)]
        for action in storage:
            if "*" in action:
                report_violation(f"statement {statement.label} allows {action}, which covers every storage action: "
                                 "name the read actions the server needs")
        if not storage:
            continue
        resources = [str(r) for r in _items(statement.body.get("Resource"))]
        if not resources:
            report_violation(f"statement {statement.label} grants storage with no Resource, which is every bucket: "
                             "name one bucket and prefix")
        for resource in resources:
            if _every_bucket(dialect.bucket_path(resource)):
                report_violation(f"statement {statement.label} grants storage on {resource}, which is every bucket: "
                                 "name one bucket and prefix")


def _broad_policy(name: str, broad: set[str], report_violation: ReportViolation) -> None:
    if name in broad:
        report_violation(f"attaches {name}, which grants storage on every bucket: grant one bucket and prefix in a "
                         "policy of your own")


def _aws_managed_name(arn: Any) -> str:
    """"AmazonS3FullAccess" for arn:aws:iam::aws:policy/AmazonS3FullAccess; "" for a customer's own policy."""
    text = str(arn or "")
    return text.rsplit("/", 1)[-1] if ":iam::aws:policy/" in text else ""


def _aws_identity(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    props = args.props
    if args.resource_type in AWS_IDENTITY_POLICIES:
        _check_storage_wildcards(_statements(props.get("policy"), report_violation, "the policy"), AWS_STORAGE,
                                 report_violation)
    elif args.resource_type == AWS_ROLE:
        for inline in _items(props.get("inlinePolicies")):
            _check_storage_wildcards(_statements(inline.get("policy"), report_violation, "an inline policy"),
                                     AWS_STORAGE, report_violation)
        for arn in _items(props.get("managedPolicyArns")):
            _broad_policy(_aws_managed_name(arn), AWS_BROAD_MANAGED_POLICIES, report_violation)
    elif args.resource_type == AWS_ROLE_POLICY_ATTACHMENT:
        _broad_policy(_aws_managed_name(props.get("policyArn")), AWS_BROAD_MANAGED_POLICIES, report_violation)


def _gcp_identity(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    props = args.props
    if args.resource_type in (GCP_PROJECT_IAM_MEMBER, GCP_PROJECT_IAM_BINDING):
        _project_storage_roles([props], report_violation)
    elif args.resource_type == GCP_PROJECT_IAM_POLICY:
        _project_storage_roles(_items(_document(props.get("policyData")).get("bindings")), report_violation)
    elif args.resource_type in (GCP_BUCKET_IAM_MEMBER, GCP_BUCKET_IAM_BINDING) and (
            props.get("role") in GCP_BUCKET_ADMIN_ROLES):
        members = [props["member"]] if props.get("member") else _items(props.get("members"))
        report_violation(f"grants {props['role']} to {', '.join(map(str, members))}, which administers the bucket: "
                         "grant objectViewer (read) or objectCreator (write) instead")


def _project_storage_roles(bindings: list[Any], report_violation: ReportViolation) -> None:
    for binding in bindings:
        role = str(binding.get("role") or "")
        if role.startswith(GCP_STORAGE_ROLE_PREFIX):
            report_violation(f"grants {role} on the whole project: grant it on one bucket (BucketIAMMember) instead")


def _alibaba_identity(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    props = args.props
    if args.resource_type == ALI_POLICY:
        _check_storage_wildcards(_statements(props.get("policyDocument"), report_violation, "the policy"),
                                 ALIBABA_STORAGE, report_violation)
    elif args.resource_type == ALI_ROLE_POLICY_ATTACHMENT and props.get("policyType") == "System":
        _broad_policy(str(props.get("policyName")), ALIBABA_BROAD_SYSTEM_POLICIES, report_violation)


def _huawei_identity(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type == HW_ROLE:
        _check_storage_wildcards(_statements(args.props.get("policy"), report_violation, "the policy"),
                                 HUAWEI_STORAGE, report_violation)


def validate_storage_grants(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    cloud = args.resource_type.split(":", 1)[0]
    check = {"aws": _aws_identity, "gcp": _gcp_identity, "alicloud": _alibaba_identity,
             "huaweicloud": _huawei_identity}.get(cloud)
    if check is not None:
        check(args, report_violation)


#### CDN: HTTPS only, private origin ####

AWS_HTTPS_VIEWER_POLICIES = {"https-only", "redirect-to-https"}


def _cloudfront(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    behaviors = [("default", props.get("defaultCacheBehavior") or {})] + [
        (str(b.get("pathPattern")), b) for b in _items(props.get("orderedCacheBehaviors"))]
    for path, behavior in behaviors:
        policy = behavior.get("viewerProtocolPolicy")
        if policy not in AWS_HTTPS_VIEWER_POLICIES:
            report_violation(f"cache behavior {path} serves plain HTTP (viewerProtocolPolicy is {policy}): use "
                             "https-only")
    for origin in _items(props.get("origins")):
        name = origin.get("originId")
        if ".s3." in str(origin.get("domainName")) or origin.get("s3OriginConfig"):
            if not origin.get("originAccessControlId"):
                report_violation(f"origin {name} reads its S3 bucket without Origin Access Control: give it an "
                                 "originAccessControlId, so that the bucket stays private")
        elif (origin.get("customOriginConfig") or {}).get("originProtocolPolicy") != "https-only":
            report_violation(f"origin {name} is fetched over plain HTTP: set "
                             "customOriginConfig.originProtocolPolicy to https-only")


def _alibaba_cdn_domain(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if (props.get("certificateConfig") or {}).get("serverCertificateStatus") != "on":
        report_violation("the CDN domain has no HTTPS certificate on: set certificateConfig.serverCertificateStatus "
                         "to on")
    for source in _items(props.get("sources")):
        if source.get("type") == "oss" and _number(source.get("port", 80)) != 443:
            report_violation(f"origin {source.get('content')} is fetched over plain HTTP: use port 443")


def _alibaba_cdn_function(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    arguments = {a.get("argName"): a.get("argValue") for a in _items(props.get("functionArgs"))}
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
    for source in _items(props.get("sources")):
        if source.get("originType") == "obs_bucket" and source.get("obsBucketType") != "private":
            report_violation(f"origin {source.get('origin')} is read as a public bucket: set obsBucketType to "
                             "private (the CDN reads it with the account's agency)")


_CDN: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_DISTRIBUTION: _cloudfront,
    ALI_CDN_DOMAIN: _alibaba_cdn_domain,
    ALI_CDN_CONFIG: _alibaba_cdn_function,
    HW_CDN_DOMAIN: _huawei_cdn_domain,
}


def validate_cdn(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    check = _CDN.get(args.resource_type)
    if check is not None:
        check(args.props, report_violation)


#### Stack: relating resources ####


def _of_type(args: StackValidationArgs, *resource_types: str) -> list[PolicyResource]:
    return [r for r in args.resources if r.resource_type in resource_types]


def refers(resource: PolicyResource, prop: str, target: PolicyResource, *values: Any) -> bool:
    """Whether `resource.props[prop]` comes from `target`: by the engine's property dependencies, else by value.

    A preview does not know the id of a resource it has not created yet, but it knows which resource an input came
    from; the value comparison serves resources that already exist.
    """
    if target.urn in {d.urn for d in resource.property_dependencies.get(prop, [])}:
        return True
    value = _known(resource.props, prop)
    wanted = {str(v) for v in values if v}
    return value is not None and any(str(item) in wanted for item in _items(value))


def _settings_of(args: StackValidationArgs, bucket: PolicyResource, setting_type: str) -> list[PolicyResource]:
    name = _known(bucket.props, "bucket")
    return [s for s in _of_type(args, setting_type) if refers(s, "bucket", bucket, name)]


def validate_public_access_blocks(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    checked = {AWS_BUCKET: AWS_PUBLIC_ACCESS_BLOCK, ALI_BUCKET: ALI_PUBLIC_ACCESS_BLOCK}
    buckets = _of_type(args, *checked)
    if not buckets:
        _not_applicable_to_buckets(args)
    for bucket in buckets:
        if not _settings_of(args, bucket, checked[bucket.resource_type]):
            block = checked[bucket.resource_type].rsplit(":", 1)[-1]
            report_violation(f"bucket {bucket.name} has no {block}: add one that blocks public ACLs and policies",
                             bucket.urn)


def _not_applicable_to_buckets(args: StackValidationArgs) -> None:
    """Say why there is nothing to check (`not_applicable` raises: the first reason that fits is given)."""
    if _of_type(args, HW_BUCKET):
        args.not_applicable(HUAWEI_NO_PUBLIC_ACCESS_BLOCK)
    if _of_type(args, GCP_BUCKET):
        args.not_applicable(GCP_PUBLIC_ACCESS_ON_BUCKET)
    args.not_applicable("the stack creates no S3 or OSS bucket")


def validate_default_encryption(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    buckets = _of_type(args, AWS_BUCKET, ALI_BUCKET)
    if not buckets:
        if _of_type(args, GCP_BUCKET):
            args.not_applicable(GCP_ALWAYS_ENCRYPTED)
        if _of_type(args, HW_BUCKET):
            args.not_applicable("OBS encryption is a property of the bucket, which encryption-at-rest checks")
        args.not_applicable("the stack creates no S3 or OSS bucket")
    for bucket in buckets:
        if bucket.resource_type == AWS_BUCKET:
            inline = _known(bucket.props, "serverSideEncryptionConfiguration")
            resource_type, setting = AWS_BUCKET_ENCRYPTION, "BucketServerSideEncryptionConfiguration"
        else:
            inline = _known(bucket.props, "serverSideEncryptionRule")
            resource_type, setting = ALI_BUCKET_ENCRYPTION, "BucketServerSideEncryption"
        if not inline and not _settings_of(args, bucket, resource_type):
            report_violation(f"bucket {bucket.name} has no default encryption: add a {setting}", bucket.urn)


#### Stack: the server's identity reads its model prefix only ####


@dataclass(frozen=True)
class Grant:
    """Statements of one policy document that the servers' identity holds."""

    resource: PolicyResource
    statements: list[Statement]
    dialect: StorageDialect


def _trusts(document: Any, service: str) -> bool:
    """Whether a trust policy lets `service` (ec2.amazonaws.com, ecs.aliyuncs.com) assume the role."""
    for body in _items(_document(document).get("Statement")):
        principal = body.get("Principal") or {}
        services = _items(principal.get("Service")) if isinstance(principal, Mapping) else []
        if str(body.get("Effect", "")).lower() == "allow" and any(str(s).startswith(service) for s in services):
            return True
    return False


def _silent(message: str, urn: str | None = None) -> None:
    """Unreadable documents are reported by storage-grants-no-wildcards; this policy does not repeat them."""


def _aws_server_grants(args: StackValidationArgs) -> Iterator[Grant]:
    for role in _of_type(args, AWS_ROLE):
        if not _trusts(_known(role.props, "assumeRolePolicy"), "ec2."):
            continue
        for inline in _items(_known(role.props, "inlinePolicies")):
            yield Grant(role, _statements(inline.get("policy"), _silent, ""), AWS_STORAGE)
        role_name = _known(role.props, "name")
        for policy in _of_type(args, AWS_ROLE_POLICY):
            if refers(policy, "role", role, role_name, _known(role.props, "arn")):
                yield Grant(policy, _statements(policy.props.get("policy"), _silent, ""), AWS_STORAGE)
        for attachment in _of_type(args, AWS_ROLE_POLICY_ATTACHMENT):
            if not refers(attachment, "role", role, role_name):
                continue
            for managed in _of_type(args, AWS_MANAGED_POLICY):
                if refers(attachment, "policyArn", managed, _known(managed.props, "arn")):
                    yield Grant(managed, _statements(managed.props.get("policy"), _silent, ""), AWS_STORAGE)


def _alibaba_server_grants(args: StackValidationArgs) -> Iterator[Grant]:
    for role in _of_type(args, ALI_ROLE):
        if not _trusts(_known(role.props, "assumeRolePolicyDocument"), "ecs."):
            continue
        role_name = _known(role.props, "roleName")
        for attachment in _of_type(args, ALI_ROLE_POLICY_ATTACHMENT):
            if not refers(attachment, "roleName", role, role_name):
                continue
            for policy in _of_type(args, ALI_POLICY):
                if refers(attachment, "policyName", policy, _known(policy.props, "policyName")):
                    yield Grant(policy, _statements(policy.props.get("policyDocument"), _silent, ""), ALIBABA_STORAGE)


def _huawei_server_grants(args: StackValidationArgs) -> Iterator[Grant]:
    for agency in _of_type(args, HW_AGENCY):
        if _known(agency.props, "delegatedServiceName") != "op_svc_ecs":
            continue
        for role in _of_type(args, HW_ROLE):
            name = _known(role.props, "name")
            project_roles = [n for p in _items(_known(agency.props, "projectRoles")) for n in _items(p.get("roles"))]
            if (any(refers(agency, prop, role, name) for prop in ("domainRoles", "allResourcesRoles", "projectRoles"))
                    or (name and name in project_roles)):
                yield Grant(role, _statements(role.props.get("policy"), _silent, ""), HUAWEI_STORAGE)


def _scoped_key(path: str) -> bool:
    """"bucket/models/llama/*" is limited to a prefix; "bucket/*" and "bucket" are the whole bucket."""
    bucket, _, key = path.partition("/")
    return bool(bucket) and "*" not in bucket and bool(key) and not key.startswith("*")


def _listing_prefixes(statement: Statement, dialect: StorageDialect) -> list[str]:
    prefixes = []
    for operator in ("StringLike", "StringEquals"):
        for key, values in (statement.body.get("Condition", {}).get(operator) or {}).items():
            if key.lower() == dialect.prefix_condition:
                prefixes += [str(v) for v in _items(values)]
    return prefixes


def _check_server_grant(grant: Grant, report_violation: ReportViolation) -> None:
    dialect = grant.dialect
    for statement in grant.statements:
        storage = [a for a in statement.actions if dialect.is_storage(a)]
        if not statement.allows or not storage:
            continue
        for action in storage:
            if action.lower() not in dialect.read_actions:
                report_violation(f"the servers' identity may {action} (statement {statement.label}): it only reads "
                                 "its model; grant read actions only", grant.resource.urn)
        listing = any(a.lower() in dialect.list_actions for a in storage)
        for resource in [str(r) for r in _items(statement.body.get("Resource"))] or ["every resource (no Resource)"]:
            path = dialect.bucket_path(resource)
            if path is None or _every_bucket(path) or ("/" in path and not _scoped_key(path)):
                report_violation(f"the servers' identity reads {resource} (statement {statement.label}), which is "
                                 "not limited to a model prefix: grant bucket/prefix* only", grant.resource.urn)
            elif "/" not in path and listing and not _prefixes_limited(_listing_prefixes(statement, dialect)):
                report_violation(f"the servers' identity may list {resource} (statement {statement.label}) without "
                                 "a prefix condition: limit the listing to the model prefix", grant.resource.urn)


def _prefixes_limited(prefixes: list[str]) -> bool:
    return bool(prefixes) and all(prefix and not prefix.startswith("*") for prefix in prefixes)


GCP_READ_ROLES = {"roles/storage.objectViewer", "roles/storage.legacyObjectReader"}
_GCP_OBJECT_PREFIX = re.compile(r'resource\.name\.startsWith\("projects/_/buckets/[^/"*]+/objects/(?P<prefix>[^"]*)"\)')
_GCP_LIST_PREFIX = re.compile(
    r'api\.getAttribute\("storage\.googleapis\.com/objectListPrefix", ""\)\.startsWith\("(?P<prefix>[^"]*)"\)')


def _gcp_server_accounts(args: StackValidationArgs) -> list[PolicyResource]:
    accounts = _of_type(args, GCP_SERVICE_ACCOUNT)
    used = []
    for account in accounts:
        email = _known(account.props, "email")
        for instance in _of_type(args, GCP_INSTANCE, GCP_INSTANCE_TEMPLATE):
            attached = _known(instance.props, "serviceAccount") or {}
            via_dependency = account.urn in {d.urn for d in instance.property_dependencies.get("serviceAccount", [])}
            if via_dependency or (email and _known(attached, "email") == email):
                used.append(account)
                break
    return used


def _gcp_prefix_limited(expression: str) -> bool:
    clauses = [clause.strip() for clause in expression.split("||")] if expression else []
    matches = [_GCP_OBJECT_PREFIX.fullmatch(c) or _GCP_LIST_PREFIX.fullmatch(c) for c in clauses]
    return bool(matches) and all(m is not None and m["prefix"] and not m["prefix"].startswith("*") for m in matches)


def _check_gcp_server_grants(args: StackValidationArgs, report_violation: ReportViolation) -> bool:
    accounts = _gcp_server_accounts(args)
    for account in accounts:
        email = _known(account.props, "email")
        member = f"serviceAccount:{email}" if email else None
        for grant in _of_type(args, GCP_BUCKET_IAM_MEMBER, GCP_BUCKET_IAM_BINDING):
            prop = "member" if grant.resource_type == GCP_BUCKET_IAM_MEMBER else "members"
            if not refers(grant, prop, account, member):
                continue
            role = grant.props.get("role")
            if role not in GCP_READ_ROLES:
                report_violation(f"the servers' identity holds {role} on bucket {grant.props.get('bucket')}: it only "
                                 "reads its model; grant roles/storage.objectViewer", grant.urn)
            elif not _gcp_prefix_limited(str((grant.props.get("condition") or {}).get("expression") or "")):
                report_violation(f"the servers' identity reads all of bucket {grant.props.get('bucket')} ({role} "
                                 "without a condition limiting it to the model prefix): add one", grant.urn)
    return bool(accounts)


def validate_server_identity(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    grants = [*_aws_server_grants(args), *_alibaba_server_grants(args), *_huawei_server_grants(args)]
    for grant in grants:
        _check_server_grant(grant, report_violation)
    gcp_found = _check_gcp_server_grants(args, report_violation)
    if not grants and not gcp_found:
        args.not_applicable("the stack holds no server identity (an AWS or Alibaba role that the compute service "
                            "assumes, a Huawei agency for ECS, a Google service account on an instance)")


#### Stack: CDN front ends ####


def _last_segment(value: Any) -> str:
    return str(value or "").rstrip("/").rsplit("/", 1)[-1]


def _gcp_cdn_front_ends(args: StackValidationArgs, report_violation: ReportViolation) -> bool:
    backends = [b for b in _of_type(args, GCP_BACKEND_BUCKET) if _known(b.props, "enableCdn") is True]
    for backend in backends:
        name = _known(backend.props, "name")
        maps = [m for m in _of_type(args, GCP_URL_MAP)
                if refers(m, "defaultService", backend) or refers(m, "pathMatchers", backend)
                or (name and _last_segment(_known(m.props, "defaultService")) == name)]
        for url_map in maps:
            map_name = _known(url_map.props, "name")
            for proxy in _of_type(args, GCP_HTTP_PROXY):
                if refers(proxy, "urlMap", url_map) or (map_name and _last_segment(_known(proxy.props, "urlMap"))
                                                          == map_name):
                    report_violation(f"{proxy.name} serves the CDN backend {backend.name} over plain HTTP: serve it "
                                     "through a TargetHttpsProxy only, and redirect port 80 with a URL map whose "
                                     "defaultUrlRedirect has httpsRedirect", proxy.urn)
    return bool(backends)


def _alibaba_cdn_functions(args: StackValidationArgs, report_violation: ReportViolation) -> bool:
    domains = _of_type(args, ALI_CDN_DOMAIN)
    for domain in domains:
        name = _known(domain.props, "domainName")
        functions = {}
        for config in _of_type(args, ALI_CDN_CONFIG):
            if refers(config, "domainName", domain, name):
                functions[config.props.get("functionName")] = {
                    a.get("argName"): a.get("argValue") for a in _items(config.props.get("functionArgs"))}
        if (functions.get("https_force") or {}).get("enable") != "on":
            report_violation(f"CDN domain {name} does not force HTTPS: add a DomainConfig https_force with "
                             "enable=on", domain.urn)
        oss_origin = any(s.get("type") == "oss" for s in _items(domain.props.get("sources")))
        if oss_origin and (functions.get("l2_oss_key") or {}).get("private_oss_auth") != "on":
            report_violation(f"CDN domain {name} reads its OSS origin without back-to-origin authentication, so the "
                             "bucket would have to be public: add a DomainConfig l2_oss_key with private_oss_auth=on",
                             domain.urn)
    return bool(domains)


def validate_cdn_front_ends(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    gcp = _gcp_cdn_front_ends(args, report_violation)
    alibaba = _alibaba_cdn_functions(args, report_violation)
    if not gcp and not alibaba:
        args.not_applicable("no Cloud CDN backend or Alibaba CDN domain in the stack; CloudFront and Huawei CDN "
                            "are checked resource by resource by cdn-https-only")


#### Stack: a world-open API has an API key ####

API_KEY_SECRETS = (AWS_PARAMETER, GCP_SECRET, ALI_SECRET, HW_SECRET)
API_KEY_NAME_SUFFIX = "-api-key"


def validate_public_api_key(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    if any(r.name.endswith(API_KEY_NAME_SUFFIX) for r in _of_type(args, *API_KEY_SECRETS)):
        return
    for resource in args.resources:
        try:
            opened = openings(resource.resource_type, resource.props)
        except UnknownValueError:  # a source computed from another resource (a network's range), not a literal /0
            continue
        for opening in opened:
            if is_world(opening.source):
                report_violation(
                    f"{opening.ports_are()} open to the whole internet ({opening.source}) and the stack stores no API "
                    f"key (no secret resource named '*{API_KEY_NAME_SUFFIX}'): set one with `pulumi config set "
                    "--secret inferstack:apiKey \"$(openssl rand -hex 32)\"`, or list your users' networks in "
                    "allowedCidrs", resource.urn)


#### The policies ####

MANDATORY = EnforcementLevel.MANDATORY

admin_ports_not_public = ResourceValidationPolicy(
    name="admin-ports-not-public",
    description="No firewall rule opens SSH (22) or RDP (3389) to a public network.",
    validate=validate_admin_ports, enforcement_level=MANDATORY, severity=Severity.CRITICAL)

world_ingress_serving_port_only = ResourceValidationPolicy(
    name="world-ingress-serving-port-only",
    description="Only a serving port (the inference API) may be open to the whole internet.",
    validate=validate_world_ingress, enforcement_level=MANDATORY, severity=Severity.HIGH,
    config_schema=SERVING_PORTS_SCHEMA)

buckets_not_public = ResourceValidationPolicy(
    name="buckets-not-public",
    description="No bucket ACL, bucket policy or IAM grant admits the public; public access blocks are fully on.",
    validate=validate_buckets_not_public, enforcement_level=MANDATORY, severity=Severity.CRITICAL)

encryption_at_rest = ResourceValidationPolicy(
    name="encryption-at-rest",
    description="Buckets and server disks are encrypted at rest.",
    validate=validate_encryption, enforcement_level=MANDATORY, severity=Severity.HIGH)

metadata_tokens_required = ResourceValidationPolicy(
    name="metadata-tokens-required",
    description="The instance metadata service answers only requests with a session token (IMDSv2).",
    validate=validate_metadata_tokens, enforcement_level=MANDATORY, severity=Severity.HIGH)

storage_grants_no_wildcards = ResourceValidationPolicy(
    name="storage-grants-no-wildcards",
    description="Identity policies grant no wildcard storage action, no storage on every bucket, no project-wide "
                "storage role and no broad managed storage policy.",
    validate=validate_storage_grants, enforcement_level=MANDATORY, severity=Severity.HIGH)

cdn_https_only = ResourceValidationPolicy(
    name="cdn-https-only",
    description="CDNs serve viewers over HTTPS only and read private origins with their own identity.",
    validate=validate_cdn, enforcement_level=MANDATORY, severity=Severity.HIGH)

buckets_have_public_access_block = StackValidationPolicy(
    name="buckets-have-public-access-block",
    description="Every S3 and OSS bucket has a public access block (a separate resource on those clouds).",
    validate=validate_public_access_blocks, enforcement_level=MANDATORY, severity=Severity.CRITICAL)

buckets_have_default_encryption = StackValidationPolicy(
    name="buckets-have-default-encryption",
    description="Every S3 and OSS bucket has default server-side encryption (a separate resource on those clouds).",
    validate=validate_default_encryption, enforcement_level=MANDATORY, severity=Severity.HIGH)

server_identity_least_privilege = StackValidationPolicy(
    name="server-identity-least-privilege",
    description="The servers' identity only reads objects, and only under a prefix of a named bucket.",
    validate=validate_server_identity, enforcement_level=MANDATORY, severity=Severity.HIGH)

cdn_https_front_ends = StackValidationPolicy(
    name="cdn-https-front-ends",
    description="CDN front ends made of several resources (Google Cloud load balancer, Alibaba CDN functions) force "
                "HTTPS and read a private origin.",
    validate=validate_cdn_front_ends, enforcement_level=MANDATORY, severity=Severity.HIGH)

public_api_has_api_key = StackValidationPolicy(
    name="public-api-has-api-key",
    description="A port open to the whole internet comes with an API key in the stack's secret store.",
    validate=validate_public_api_key, enforcement_level=EnforcementLevel.ADVISORY, severity=Severity.MEDIUM)

RESOURCE_POLICIES = [admin_ports_not_public, world_ingress_serving_port_only, buckets_not_public, encryption_at_rest,
                     metadata_tokens_required, storage_grants_no_wildcards, cdn_https_only]
STACK_POLICIES = [buckets_have_public_access_block, buckets_have_default_encryption, server_identity_least_privilege,
                  cdn_https_front_ends, public_api_has_api_key]
POLICIES = [*RESOURCE_POLICIES, *STACK_POLICIES]

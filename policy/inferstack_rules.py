"""inferstack guardrails: the security invariants of an inferstack deployment, as plain functions over resources.

One rule set, two users:

- the policy pack (`inferstack_policies.py`, next to this file) wraps each rule into a Pulumi policy, which the
  engine runs on what `pulumi preview` / `pulumi up` is about to deploy;
- the components' security-invariant matrix (`tests/components/test_security_invariants.py`) runs `evaluate` over
  what inferstack registers under Pulumi mocks, on every cloud, plan shape, stage and exposure.

So the components cannot build what the pack would refuse, and the two cannot drift apart.

This module imports neither `pulumi_policy` (it pins protobuf 5, which the main environment cannot install) nor
inferstack (the pack's own environment, `policy/.venv`, installs only `requirements.txt`): only the standard
library. It lives in `policy/` because that folder is all the pack ships; tests put the folder on `sys.path`.

**Inputs** are what the engine sends: camelCase keys, numbers as floats, nested values as mappings and sequences.
A resource rule sees one resource's inputs (`ResourceInput`); a stack rule sees every resource with its outputs and
property dependencies (`Stack`). Each rule reports `(message, urn=None)` through a callback and raises
`NotApplicable(reason)` where a cloud cannot express the setting.

**Fail closed.** A source, protocol, port, policy document, policy attachment or firewall resource type that a
rule cannot read is a violation whose message names what could not be read; it never passes.

**Unknown values.** During a preview, reading a value that comes from a resource not yet created raises the
engine's own error (the pack's property proxy raises it, not this module); it propagates, and the engine reports
"can't run policy during preview" (advisory) and runs the policy for real at `pulumi up`. Stack rules relate
resources by property dependency, which a preview knows; only where they read a value to relate two resources do
they treat an unknown as "not this one" (`Stack.known`, given the engine's error types).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

#### Resource types (the providers' type tokens, exactly) ####

PROVIDER_PACKAGES = {"aws": "aws", "gcp": "gcp", "alicloud": "alibaba", "huaweicloud": "huawei"}
"""The cloud of each provider package, the first part of its type tokens: inferstack.clouds' `pulumi_package`s,
restated because the pack imports nothing from inferstack (tests/policy checks that the two agree)."""

# AWS, pulumi-aws 7.
AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_LAUNCH_CONFIGURATION = "aws:ec2/launchConfiguration:LaunchConfiguration"
AWS_SPOT_INSTANCE_REQUEST = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
AWS_VOLUME = "aws:ebs/volume:Volume"
AWS_SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
AWS_DEFAULT_SECURITY_GROUP = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"
AWS_SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
AWS_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
AWS_BUCKET = "aws:s3/bucket:Bucket"
AWS_BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
AWS_BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
AWS_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
AWS_BUCKET_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
AWS_ROLE = "aws:iam/role:Role"
AWS_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
AWS_LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
GCP_LOG_BUCKET = "gcp:logging/projectBucketConfig:ProjectBucketConfig"
AWS_MANAGED_POLICY = "aws:iam/policy:Policy"
AWS_IDENTITY_POLICIES = (AWS_ROLE_POLICY, "aws:iam/userPolicy:UserPolicy", "aws:iam/groupPolicy:GroupPolicy",
                         AWS_MANAGED_POLICY)
AWS_ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
AWS_POLICY_ATTACHMENT = "aws:iam/policyAttachment:PolicyAttachment"
AWS_ROLE_ATTACHMENTS_EXCLUSIVE = "aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive"
AWS_INSTANCE_PROFILE = "aws:iam/instanceProfile:InstanceProfile"
AWS_DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
AWS_PARAMETER = "aws:ssm/parameter:Parameter"
AWS_SUBNET = "aws:ec2/subnet:Subnet"
AWS_AUTOSCALING_GROUP = "aws:autoscaling/group:Group"
AWS_GROUP_ATTACHMENTS = ("aws:autoscaling/attachment:Attachment",
                         "aws:autoscaling/trafficSourceAttachment:TrafficSourceAttachment")
# Elastic Load Balancing v2 is registered under two modules (`alb` is an alias of `lb`).
AWS_LOAD_BALANCERS = ("aws:lb/loadBalancer:LoadBalancer", "aws:alb/loadBalancer:LoadBalancer")
AWS_LISTENERS = ("aws:lb/listener:Listener", "aws:alb/listener:Listener")
AWS_LISTENER_RULES = ("aws:lb/listenerRule:ListenerRule", "aws:alb/listenerRule:ListenerRule")
AWS_TARGET_GROUPS = ("aws:lb/targetGroup:TargetGroup", "aws:alb/targetGroup:TargetGroup")
AWS_CLASSIC_LOAD_BALANCER = "aws:elb/loadBalancer:LoadBalancer"

# Google Cloud, pulumi-gcp 10.
GCP_INSTANCE = "gcp:compute/instance:Instance"
GCP_INSTANCE_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GCP_DISK = "gcp:compute/disk:Disk"
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
GCP_FIREWALL_POLICY_RULE = "gcp:compute/firewallPolicyRule:FirewallPolicyRule"
GCP_NETWORK_FIREWALL_POLICY_RULE = "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule"
GCP_REGION_FIREWALL_POLICY_RULE = "gcp:compute/regionNetworkFirewallPolicyRule:RegionNetworkFirewallPolicyRule"
GCP_FIREWALL_POLICY_WITH_RULES = "gcp:compute/firewallPolicyWithRules:FirewallPolicyWithRules"
GCP_NETWORK_FIREWALL_POLICY_WITH_RULES = "gcp:compute/networkFirewallPolicyWithRules:NetworkFirewallPolicyWithRules"
GCP_REGION_FIREWALL_POLICY_WITH_RULES = (
    "gcp:compute/regionNetworkFirewallPolicyWithRules:RegionNetworkFirewallPolicyWithRules")
GCP_BUCKET = "gcp:storage/bucket:Bucket"
GCP_BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
GCP_BUCKET_IAM_BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
GCP_BUCKET_IAM_POLICY = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
GCP_PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
GCP_PROJECT_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
GCP_PROJECT_IAM_POLICY = "gcp:projects/iAMPolicy:IAMPolicy"
GCP_SECRET_IAM_MEMBER = "gcp:secretmanager/secretIamMember:SecretIamMember"
GCP_SECRET_IAM_BINDING = "gcp:secretmanager/secretIamBinding:SecretIamBinding"
GCP_SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"
GCP_BACKEND_BUCKET = "gcp:compute/backendBucket:BackendBucket"
GCP_URL_MAP = "gcp:compute/uRLMap:URLMap"
GCP_HTTP_PROXY = "gcp:compute/targetHttpProxy:TargetHttpProxy"
GCP_SECRET = "gcp:secretmanager/secret:Secret"
GCP_REGION_INSTANCE_TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
GCP_INSTANCE_TEMPLATES = (GCP_INSTANCE_TEMPLATE, GCP_REGION_INSTANCE_TEMPLATE)
GCP_REGION_GROUP_MANAGER = "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager"
GCP_ZONE_GROUP_MANAGER = "gcp:compute/instanceGroupManager:InstanceGroupManager"
GCP_AUTOSCALERS = ("gcp:compute/regionAutoscaler:RegionAutoscaler", "gcp:compute/autoscaler:Autoscaler")
GCP_FORWARDING_RULES = ("gcp:compute/globalForwardingRule:GlobalForwardingRule",
                        "gcp:compute/forwardingRule:ForwardingRule")
GCP_HTTPS_PROXIES = ("gcp:compute/targetHttpsProxy:TargetHttpsProxy",
                     "gcp:compute/regionTargetHttpsProxy:RegionTargetHttpsProxy")
GCP_HTTP_PROXIES = (GCP_HTTP_PROXY, "gcp:compute/regionTargetHttpProxy:RegionTargetHttpProxy")
GCP_URL_MAPS = (GCP_URL_MAP, "gcp:compute/regionUrlMap:RegionUrlMap")
GCP_SSL_POLICIES = ("gcp:compute/sSLPolicy:SSLPolicy", "gcp:compute/regionSslPolicy:RegionSslPolicy")
GCP_BACKEND_SERVICES = ("gcp:compute/backendService:BackendService",
                        "gcp:compute/regionBackendService:RegionBackendService")
GCP_HEALTH_CHECKS = ("gcp:compute/healthCheck:HealthCheck", "gcp:compute/regionHealthCheck:RegionHealthCheck")
GCP_LEGACY_HEALTH_CHECKS = ("gcp:compute/httpHealthCheck:HttpHealthCheck",
                            "gcp:compute/httpsHealthCheck:HttpsHealthCheck")

# Alibaba Cloud, pulumi-alicloud 4.
ALI_INSTANCE = "alicloud:ecs/instance:Instance"
ALI_DISK = "alicloud:ecs/ecsDisk:EcsDisk"
ALI_SECURITY_GROUP_RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"
ALI_BUCKET = "alicloud:oss/bucket:Bucket"
ALI_LOG_PROJECT = "alicloud:log/project:Project"
"""An SLS project (a load balancer's access logs): private unless its `policy` admits others."""
ALI_LOG_STORE = "alicloud:log/store:Store"
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
ALI_SECURITY_GROUP = "alicloud:ecs/securityGroup:SecurityGroup"
ALI_VSWITCH = "alicloud:vpc/switch:Switch"
ALI_SCALING_CONFIGURATION = "alicloud:ess/scalingConfiguration:ScalingConfiguration"
ALI_LAUNCH_TEMPLATES = ("alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate",
                        "alicloud:ecs/launchTemplate:LaunchTemplate")
ALI_SCALING_GROUP = "alicloud:ess/scalingGroup:ScalingGroup"
ALI_GROUP_ATTACHMENT = "alicloud:ess/albServerGroupAttachment:AlbServerGroupAttachment"
ALI_LOAD_BALANCER = "alicloud:alb/loadBalancer:LoadBalancer"
ALI_LB_SECURITY_GROUP = "alicloud:alb/loadBalancerSecurityGroupAttachment:LoadBalancerSecurityGroupAttachment"
ALI_LISTENER = "alicloud:alb/listener:Listener"
ALI_LISTENER_RULE = "alicloud:alb/rule:Rule"
ALI_SERVER_GROUP = "alicloud:alb/serverGroup:ServerGroup"
ALI_TLS_POLICY = "alicloud:alb/securityPolicy:SecurityPolicy"

# Huawei Cloud, pulumi-huaweicloud 0.0.12 (its modules are capitalised; it has no Networking module).
HW_INSTANCE = "huaweicloud:Ecs/instance:Instance"
HW_VOLUME = "huaweicloud:Evs/volume:Volume"
HW_SECURITY_GROUP_RULE = "huaweicloud:Vpc/secgroupRule:SecgroupRule"
HW_BUCKET = "huaweicloud:Obs/bucket:Bucket"
HW_BUCKET_POLICY = "huaweicloud:Obs/bucketPolicy:BucketPolicy"
HW_ROLE = "huaweicloud:Iam/role:Role"
HW_AGENCY = "huaweicloud:Iam/agency:Agency"
HW_CDN_DOMAIN = "huaweicloud:Cdn/domain:Domain"
HW_SECRET = "huaweicloud:Dew/secret:Secret"
HW_SECURITY_GROUP = "huaweicloud:Vpc/secgroup:Secgroup"
HW_AS_CONFIGURATION = "huaweicloud:As/configuration:Configuration"
HW_AS_GROUP = "huaweicloud:As/group:Group"
HW_LOAD_BALANCER = "huaweicloud:DedicatedElb/loadbalancer:Loadbalancer"
HW_EIP_ASSOCIATE = "huaweicloud:Vpc/eipAssociate:EipAssociate"
HW_LISTENER = "huaweicloud:DedicatedElb/listener:Listener"
HW_L7_POLICY = "huaweicloud:DedicatedElb/l7policy:L7policy"
HW_POOL = "huaweicloud:DedicatedElb/pool:Pool"
HW_MONITOR = "huaweicloud:DedicatedElb/monitor:Monitor"
HW_TLS_POLICY = "huaweicloud:DedicatedElb/securityPolicy:SecurityPolicy"

# Listeners of load balancers that a fleet does not use and the pack does not read (classic and network load
# balancers, Huawei's shared ELB): each counts as a public listener the pack cannot check.
UNREAD_LISTENER_TYPES = (AWS_CLASSIC_LOAD_BALANCER, "alicloud:slb/listener:Listener",
                         "alicloud:nlb/listener:Listener", "huaweicloud:Elb/listener:Listener")

#### What a cloud cannot express (the reasons match the capabilities in inferstack/components/<cloud>.py) ####

GCP_NO_METADATA_TOKENS = (
    "Google Cloud's metadata server has no session-token mode to require: it demands only the Metadata-Flavor "
    "header (inferstack turns the header-free legacy endpoints off with disable-legacy-endpoints)")
HUAWEI_NO_METADATA_TOKENS = (
    "Huawei Cloud's ECS metadata token mode is offered in one region only, by ticket, and pulumi_huaweicloud has no "
    "metadata option "
    "(inferstack's boot script lets only root reach it, with a host firewall rule)")
GCP_ALWAYS_ENCRYPTED = (
    "Google Cloud encrypts every Cloud Storage object and persistent disk at rest and no setting turns it off (a "
    "customer-managed key only changes whose key it is)")
HUAWEI_NO_PUBLIC_ACCESS_BLOCK = (
    "Huawei OBS has no public-access-block setting in pulumi_huaweicloud and its ACLs cannot be turned off; "
    "buckets-not-public checks the bucket's ACL and policy instead")
GCP_PUBLIC_ACCESS_ON_BUCKET = (
    "Cloud Storage keeps public access prevention on the bucket itself, which buckets-not-public checks")
NO_SERVER_IDENTITY = (
    "the stack holds no server identity (an AWS or Alibaba role that the compute service assumes, a Huawei agency "
    "for ECS, a Google service account on an instance)")

#### How rules are called ####


class ReportViolation(Protocol):
    """`report(message)` on the resource being checked, or `report(message, urn)` on another (stack rules)."""

    def __call__(self, message: str, urn: str | None = None) -> None: ...


class NotApplicable(Exception):
    """The setting a rule checks does not exist on this cloud; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ResourceInput:
    """What a resource rule sees: one resource's inputs, before the engine creates or updates it."""

    resource_type: str
    props: Mapping[str, Any]
    config: Mapping[str, Any] = field(default_factory=dict)
    """The rule's configuration (`--policy-pack-config`)."""


class ResourceOptions(Protocol):
    """A resource's options, as a stack rule sees them (pulumi_policy.PolicyResourceOptions has this shape)."""

    @property
    def protect(self) -> bool: ...


class StackResource(Protocol):
    """One resource of the stack, as a stack rule sees it (pulumi_policy.PolicyResource has this shape)."""

    @property
    def resource_type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def urn(self) -> str: ...
    @property
    def props(self) -> Mapping[str, Any]: ...
    @property
    def property_dependencies(self) -> Mapping[str, Sequence[StackResource]]: ...
    @property
    def opts(self) -> ResourceOptions: ...


@dataclass(frozen=True)
class PlainOptions:
    """ResourceOptions from plain values (what Pulumi's mocks recorded)."""

    protect: bool = False


@dataclass(frozen=True)
class PlainResource:
    """A StackResource from plain values (what Pulumi's mocks recorded), for `evaluate`."""

    resource_type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    """Outputs and inputs: what a stack rule sees."""
    inputs: Mapping[str, Any] | None = None
    """What a resource rule sees; None: the same as props."""
    custom: bool = True
    """A cloud resource; resource rules do not run on components (the engine does not send them)."""
    property_dependencies: Mapping[str, Sequence[StackResource]] = field(default_factory=dict)
    opts: PlainOptions = field(default_factory=PlainOptions)
    """Its resource options (`protect`: Pulumi's mocks record it, inferstack.preview.RegisteredResource.protect)."""


@dataclass(frozen=True)
class Stack:
    """Every resource of the stack, with the engine's unknown-value error types (empty outside the engine)."""

    resources: Sequence[StackResource]
    unknown_errors: tuple[type[Exception], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    """The rule's configuration (`--policy-pack-config`)."""

    def of_type(self, *resource_types: str) -> list[StackResource]:
        return [r for r in self.resources if r.resource_type in resource_types]

    def known(self, props: Mapping[str, Any], key: str) -> Any:
        """A property used only to relate two resources: None when a preview cannot know it yet."""
        try:
            return props.get(key)
        except self.unknown_errors:
            return None

    def refers(self, resource: StackResource, prop: str, target: StackResource, *values: Any) -> bool:
        """Whether `resource.props[prop]` comes from `target`: by the engine's property dependencies, else by value.

        A preview does not know the id of a resource it has not created yet, but it knows which resource an input
        came from; the value comparison serves resources that already exist (and Pulumi's mocks).
        """
        if target.urn in {d.urn for d in resource.property_dependencies.get(prop, [])}:
            return True
        value = self.known(resource.props, prop)
        wanted = {str(v) for v in values if v}
        return value is not None and any(str(item) in wanted for item in self.items(value))

    def items(self, value: Any) -> list[Any]:
        """`_items`, leaving out the elements a preview cannot know yet."""
        if isinstance(value, str) or not isinstance(value, Sequence):
            return _items(value)
        found = []
        for index in range(len(value)):
            try:
                found.append(value[index])
            except self.unknown_errors:
                continue
        return found


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    check: Callable[[ResourceInput, ReportViolation], None]
    reads: Callable[[str], bool]
    """Whether the rule checks resources of a type (for tests that prove a rule looked at something)."""
    severity: str = "high"
    level: str = "mandatory"
    config_schema: Mapping[str, Any] | None = None
    """JSON schema of the rule's properties (`--policy-pack-config`)."""


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    check: Callable[[Stack, ReportViolation], None]
    severity: str = "high"
    level: str = "mandatory"
    config_schema: Mapping[str, Any] | None = None


#### Values as the engine sends them ####


def _items(value: Any) -> list[Any]:
    """A property that may hold one value or a list of them (IAM's "Action": "s3:GetObject" or [...])."""
    if value is None:
        return []
    if isinstance(value, str | Mapping) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def _integer(value: Any) -> int | None:
    """22, 22.0, "22", "22.0" → 22; None for anything that is not a whole number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() else None
    return None


def _flag(value: Any) -> bool | None:
    """True, "true" → True; False, "false" → False (pulumi_aws types some flags as strings); None otherwise."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, str) else ""
    return {"true": True, "false": False}.get(text)


def _shown(value: Any) -> str:
    """A value as a message quotes it: 64.0 → 64, text as it is."""
    number = _integer(value)
    return str(number) if number is not None else str(value)


def _document(value: Any) -> Mapping[str, Any] | None:
    """A JSON policy document (a string, or a mapping where the provider takes an object); None if unreadable."""
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, Mapping) else None


@dataclass(frozen=True)
class Statement:
    label: str
    """The statement's Sid, else its position ("#0")."""
    body: Mapping[str, Any]

    @property
    def effect(self) -> str:
        return str(self.body.get("Effect", "")).lower()

    @property
    def allows(self) -> bool:
        return self.effect == "allow"

    @property
    def actions(self) -> list[str]:
        return [str(action) for action in _items(self.body.get("Action"))]

    @property
    def resources(self) -> list[str]:
        return [str(resource) for resource in _items(self.body.get("Resource"))]


def statements(value: Any, report_violation: ReportViolation, what: str, urn: str | None = None) -> list[Statement]:
    """The statements of a policy document; what cannot be read is reported (fail closed) and left out."""
    document = _document(value)
    if document is None:
        report_violation(f"{what} is not a JSON policy document, so it cannot be checked", urn)
        return []
    found = []
    for index, body in enumerate(_items(document.get("Statement"))):
        label = f"#{index}"
        if not isinstance(body, Mapping):
            report_violation(f"statement {label} of {what} is not an object, so it cannot be checked", urn)
            continue
        statement = Statement(str(body.get("Sid") or label), body)
        if statement.effect not in ("allow", "deny"):
            report_violation(f"statement {statement.label} of {what} has Effect {body.get('Effect')!r}, neither Allow "
                             "nor Deny, so it cannot be checked", urn)
            continue
        found.append(statement)
    return found


#### Networks ####

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Networks that are not public exposure: RFC 1918, RFC 6598 (carrier-grade NAT, used by overlay VPNs) and RFC 4193
# (IPv6 unique local), as in inferstack.components.core; loopback and link-local never leave a host or a link.
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7",
    "127.0.0.0/8", "169.254.0.0/16", "::1/128", "fe80::/10"))
# Google's documented source range for IAP TCP forwarding: an SSH rule from it admits only IAM-authorised users
# (the GCP backend's managed-shell note tells users to add exactly this rule).
GCP_IAP_RANGE = ipaddress.ip_network("35.235.240.0/20")
ADMIN_PORTS = {22: "SSH", 3389: "RDP"}
ALL_PORTS = (0, 65535)
_PORT_PROTOCOLS = {"tcp", "udp", "sctp", "6", "17", "132"}
_PORTLESS_PROTOCOLS = {"icmp", "icmpv6", "gre", "esp", "ah", "ipip", "1", "58", "47", "50", "51", "4"}
_ANY_PROTOCOL = {"-1", "all"}


@dataclass(frozen=True)
class Source:
    """Where a rule admits traffic from."""

    text: str
    network: IPNetwork | None = None
    """The address range; None for a group of the cloud's own instances or a source that cannot be read."""
    internal: bool = False
    """A group of the cloud's own instances (security group, network tag, service account, VPC network)."""


def _cidr(value: Any) -> Source:
    if not isinstance(value, str):
        return Source(f"source {value!r}")
    try:
        return Source(value, ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        return Source(f"source {value!r}")


def _internal(text: str) -> Source:
    return Source(text, internal=True)


def _opaque(text: str) -> Source:
    """A source that holds addresses the pack cannot see (a prefix list, an address group): counts as public."""
    return Source(text)


def is_private(network: IPNetwork) -> bool:
    return any(network.version == p.version and network.subnet_of(p) for p in PRIVATE_NETWORKS)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Opening:
    """Ports that an allow rule opens to one source."""

    low: int
    high: int
    source: Source
    unread: str = ""
    """What about the ports could not be read (then low..high is every port)."""

    def covers(self, port: int) -> bool:
        return self.low <= port <= self.high

    def ports_are(self) -> str:
        return f"port {self.low} is" if self.low == self.high else f"ports {self.low}-{self.high} are"


def exposure(opening: Opening, resource_type: str) -> str:
    """"private", "iap" (Google's IAP forwarders, on Google Cloud), "public", or "unreadable" (counts as public)."""
    source = opening.source
    if source.internal:
        return "private"
    if source.network is None:
        return "unreadable"
    if is_private(source.network):
        return "private"
    if (resource_type.startswith("gcp:") and source.network.version == 4
            and source.network.subnet_of(GCP_IAP_RANGE)):  # type: ignore[arg-type]
        return "iap"
    return "public"


def _protocol(value: Any) -> str:
    """A protocol as one text: "tcp", "6", "-1", "all" ("-1.0" and -1.0 → "-1", "ALL" → "all")."""
    number = _integer(value)
    return str(number) if number is not None else str(value if value is not None else "").strip().lower()


def _protocol_ports(protocol: str) -> str:
    """"ports" (ports apply), "all" (every port), "none" (no ports: ICMP, GRE ...) or "unreadable"."""
    if protocol in _ANY_PROTOCOL:
        return "all"
    if protocol in _PORT_PROTOCOLS:
        return "ports"
    if protocol in _PORTLESS_PROTOCOLS:
        return "none"
    number = _integer(protocol)
    if number is not None and 0 <= number <= 255:
        return "all"  # AWS: any other protocol number opens every port, whatever range is given
    return "unreadable"


@dataclass(frozen=True)
class _Span:
    low: int
    high: int
    unread: str = ""


def _span(low: Any, high: Any) -> _Span:
    """A from/to port pair; missing or negative means every port."""
    if low is None and high is None:
        return _Span(*ALL_PORTS)
    first, last = _integer(low if low is not None else high), _integer(high if high is not None else low)
    if first is None or last is None:
        return _Span(*ALL_PORTS, unread=f"port range {_shown(low)}-{_shown(high)}")
    if first < 0 or last < 0:
        return _Span(*ALL_PORTS)
    return _Span(min(first, last), max(first, last))


def _port_texts(ports: list[Any]) -> list[_Span]:
    """"22", "8000-8010" (Google Cloud, Huawei `ports`), or numbers."""
    spans = []
    for text in ports:
        low, _, high = str(text).strip().partition("-")
        span = _span(low, high or low)
        spans.append(_Span(*ALL_PORTS, unread=f"port {text!r}") if span.unread else span)
    return spans


def _spans(protocol: Any, port_spans: Callable[[], list[_Span]]) -> list[_Span]:
    """The port spans a rule opens for `protocol` (`port_spans` reads its ports when they apply)."""
    kind = _protocol_ports(_protocol(protocol))
    if kind == "none":
        return []
    if kind == "all":
        return [_Span(*ALL_PORTS)]
    if kind == "unreadable":
        return [_Span(*ALL_PORTS, unread=f"protocol {protocol!r}")]
    return port_spans()


def _openings(spans: list[_Span], sources: list[Source]) -> Iterator[Opening]:
    for span in spans:
        for source in sources or [_opaque("no source")]:
            yield Opening(span.low, span.high, source, span.unread)


def _aws_sources(rule: Mapping[str, Any], cidrs: str, ipv6_cidrs: str, prefix_lists: str,
                 groups: Sequence[str]) -> list[Source]:
    sources = [_cidr(c) for c in _items(rule.get(cidrs))] + [_cidr(c) for c in _items(rule.get(ipv6_cidrs))]
    sources += [_opaque(f"prefix list {p}") for p in _items(rule.get(prefix_lists))]
    sources += [_internal(f"security group {g}") for key in groups for g in _items(rule.get(key))]
    if rule.get("self") is True:
        sources.append(_internal("the security group itself"))
    return sources


def _aws_ingress_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    sources = _aws_sources(props, "cidrIpv4", "cidrIpv6", "prefixListId", ["referencedSecurityGroupId"])
    yield from _openings(_spans(props.get("ipProtocol"), lambda: [_span(props.get("fromPort"), props.get("toPort"))]),
                         sources)


def _aws_inline_rule(rule: Mapping[str, Any], group_key: str) -> Iterator[Opening]:
    sources = _aws_sources(rule, "cidrBlocks", "ipv6CidrBlocks", "prefixListIds", [group_key])
    yield from _openings(_spans(rule.get("protocol"), lambda: [_span(rule.get("fromPort"), rule.get("toPort"))]),
                         sources)


def _aws_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("type") != "egress":
        yield from _aws_inline_rule(props, "sourceSecurityGroupId")


def _aws_security_group(props: Mapping[str, Any]) -> Iterator[Opening]:
    for rule in _items(props.get("ingress")):
        yield from _aws_inline_rule(rule, "securityGroups")


def _gcp_firewall(props: Mapping[str, Any]) -> Iterator[Opening]:
    if str(props.get("direction") or "INGRESS").upper() != "INGRESS" or props.get("disabled") is True:
        return
    sources = [_cidr(s) for s in _items(props.get("sourceRanges"))]
    sources += [_internal(f"network tag {t}") for t in _items(props.get("sourceTags"))]
    sources += [_internal(f"service account {a}") for a in _items(props.get("sourceServiceAccounts"))]
    if not sources:
        sources = [_cidr("0.0.0.0/0")]  # Google's default for an ingress rule that names no source
    for allow in _items(props.get("allows")):
        ports = functools.partial(_gcp_ports, allow.get("ports"))
        yield from _openings(_spans(allow.get("protocol"), ports), sources)


def _gcp_ports(ports: Any) -> list[_Span]:
    return _port_texts(_items(ports)) if _items(ports) else [_Span(*ALL_PORTS)]  # no ports: every port


_GCP_SCOPES_INSIDE = {"INTRA_VPC", "NON_INTERNET", "VPC_NETWORKS"}


def _gcp_policy_rule(rule: Mapping[str, Any]) -> Iterator[Opening]:
    """A rule of a (hierarchical, network or regional) firewall policy."""
    if str(rule.get("direction") or "INGRESS").upper() != "INGRESS" or rule.get("disabled") is True:
        return
    if str(rule.get("action") or "").lower() in ("deny", "goto_next"):
        return  # allow and apply_security_profile_group admit traffic; an unknown action counts as allow
    match = rule.get("match") or {}
    sources = [_cidr(s) for s in _items(match.get("srcIpRanges"))]
    sources += [_opaque(f"address group {g}") for g in _items(match.get("srcAddressGroups"))]
    sources += [_opaque(f"FQDN {f}") for f in _items(match.get("srcFqdns"))]
    sources += [_opaque(f"region {r}") for r in _items(match.get("srcRegionCodes"))]
    sources += [_opaque(f"threat list {t}") for t in _items(match.get("srcThreatIntelligences"))]
    sources += [_internal(f"secure tag {(t or {}).get('name')}") for t in _items(match.get("srcSecureTags"))]
    sources += [_internal(f"network {n}") for n in _items(match.get("srcNetworks"))]
    scope = match.get("srcNetworkScope") or match.get("srcNetworkContext")
    if scope:
        sources.append(_internal(f"network scope {scope}") if str(scope).upper() in _GCP_SCOPES_INSIDE
                       else Source(f"srcNetworkScope {scope}", ipaddress.ip_network("0.0.0.0/0")))
    if not sources:
        sources = [_cidr("0.0.0.0/0")]
    layers = _items(match.get("layer4Configs")) or [{"ipProtocol": "all"}]
    for layer in layers:
        ports = functools.partial(_gcp_ports, layer.get("ports"))
        yield from _openings(_spans(layer.get("ipProtocol"), ports), sources)


def _gcp_policy_rules(props: Mapping[str, Any]) -> Iterator[Opening]:
    for rule in _items(props.get("rules")):
        yield from _gcp_policy_rule(rule)


def _alibaba_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("type") != "ingress" or str(props.get("policy") or "accept").lower() != "accept":
        return
    sources = [_cidr(s) for s in (props.get("cidrIp"), props.get("ipv6CidrIp")) if s]
    sources += [_opaque(f"prefix list {p}") for p in _items(props.get("prefixListId"))]
    sources += [_internal(f"security group {g}") for g in _items(props.get("sourceSecurityGroupId"))]
    yield from _openings(_spans(props.get("ipProtocol"), lambda: _alibaba_ports(props.get("portRange"))), sources)


def _alibaba_ports(port_range: Any) -> list[_Span]:
    low, _, high = str(port_range if port_range is not None else "-1/-1").partition("/")
    span = _span(low, high or low)
    return [_Span(*ALL_PORTS, unread=f"port range {port_range!r}") if span.unread else span]


def _huawei_security_group_rule(props: Mapping[str, Any]) -> Iterator[Opening]:
    if props.get("direction") != "ingress" or str(props.get("action") or "allow").lower() == "deny":
        return
    sources = [_cidr(s) for s in _items(props.get("remoteIpPrefix"))]
    sources += [_internal(f"security group {g}") for g in _items(props.get("remoteGroupId"))]
    sources += [_opaque(f"address group {g}") for g in _items(props.get("remoteAddressGroupId"))]
    if not sources:  # no remote: every address
        sources = [_cidr("::/0" if props.get("ethertype") == "IPv6" else "0.0.0.0/0")]
    protocol = props.get("protocol")
    yield from _openings(_spans(protocol if protocol not in (None, "") else "all", lambda: _huawei_ports(props)),
                         sources)


def _huawei_ports(props: Mapping[str, Any]) -> list[_Span]:
    if props.get("ports"):  # "22,8000-8010"
        return _port_texts(str(props["ports"]).split(","))
    return [_span(props.get("portRangeMin"), props.get("portRangeMax"))]


INGRESS_READERS: Mapping[str, Callable[[Mapping[str, Any]], Iterator[Opening]]] = {
    AWS_INGRESS_RULE: _aws_ingress_rule,
    AWS_SECURITY_GROUP_RULE: _aws_security_group_rule,
    AWS_SECURITY_GROUP: _aws_security_group,
    AWS_DEFAULT_SECURITY_GROUP: _aws_security_group,
    GCP_FIREWALL: _gcp_firewall,
    GCP_FIREWALL_POLICY_RULE: _gcp_policy_rule,
    GCP_NETWORK_FIREWALL_POLICY_RULE: _gcp_policy_rule,
    GCP_REGION_FIREWALL_POLICY_RULE: _gcp_policy_rule,
    GCP_FIREWALL_POLICY_WITH_RULES: _gcp_policy_rules,
    GCP_NETWORK_FIREWALL_POLICY_WITH_RULES: _gcp_policy_rules,
    GCP_REGION_FIREWALL_POLICY_WITH_RULES: _gcp_policy_rules,
    ALI_SECURITY_GROUP_RULE: _alibaba_security_group_rule,
    HW_SECURITY_GROUP_RULE: _huawei_security_group_rule,
}
"""Every resource type that can open a port to a server, and how to read what it opens."""

# Firewall-like types of the server networks that open nothing by themselves: groups and policies that hold no
# rules, rules that only filter what a security group already admits, associations, traffic mirroring.
OPENS_NOTHING = {
    "aws:ec2/vpcSecurityGroupRulesExclusive:VpcSecurityGroupRulesExclusive",
    "gcp:compute/firewallPolicy:FirewallPolicy",
    "gcp:compute/networkFirewallPolicy:NetworkFirewallPolicy",
    "gcp:compute/regionNetworkFirewallPolicy:RegionNetworkFirewallPolicy",
    "gcp:compute/networkFirewallPolicyPacketMirroringRule:NetworkFirewallPolicyPacketMirroringRule",
    "alicloud:ecs/securityGroup:SecurityGroup",
    "huaweicloud:Vpc/secgroup:Secgroup",
}
# The provider modules that hold the servers' firewalls; a firewall-like type there that the pack does not know
# counts as opening every port to the internet.
SERVER_NETWORK_MODULES = ("aws:ec2/", "aws:vpc/", "gcp:compute/", "alicloud:ecs/", "alicloud:vpc/",
                          "huaweicloud:Vpc/", "huaweicloud:Networking/", "huaweicloud:Ecs/")
_FIREWALL_WORDS = ("securitygroup", "secgroup", "firewall", "ingress")
_NOT_OPENING_WORDS = ("egress", "association", "attachment", "iam")


def unknown_ingress_type(resource_type: str) -> bool:
    """A firewall-like type of a server network that the pack cannot read (fail closed)."""
    if resource_type in INGRESS_READERS or resource_type in OPENS_NOTHING:
        return False
    kind = resource_type.rsplit(":", 1)[-1].lower()
    return (resource_type.startswith(SERVER_NETWORK_MODULES) and any(w in kind for w in _FIREWALL_WORDS)
            and not any(w in kind for w in _NOT_OPENING_WORDS))


def openings(resource_type: str, props: Mapping[str, Any]) -> list[Opening]:
    """What an ingress rule (or a security group's inline rules, a firewall policy's rules) lets in."""
    reader = INGRESS_READERS.get(resource_type)
    return list(reader(props)) if reader else []


def _reads_ingress(resource_type: str) -> bool:
    return resource_type in INGRESS_READERS or unknown_ingress_type(resource_type)


UNKNOWN_TYPE_FIX = "use a rule type the pack reads (docs/policy.md lists them)"


def _where(source: Source) -> str:
    return source.text if source.network is not None else f"{source.text}, which the pack cannot read"


ADMIN_FIX = ("inferstack opens no admin port; reach servers through the cloud's managed shell, or admit a private "
             "network only")
UNREAD_FIX = "name the protocol (tcp, udp, icmp, all, or its number) and give numeric ports"


def check_admin_ports(resource: ResourceInput, report_violation: ReportViolation) -> None:
    if unknown_ingress_type(resource.resource_type):
        report_violation(f"{resource.resource_type} is a firewall type the pack cannot read, so it counts as opening "
                         f"every port (admin ports included) to the internet: {UNKNOWN_TYPE_FIX}")
    for opening in openings(resource.resource_type, resource.props):
        if exposure(opening, resource.resource_type) in ("private", "iap"):
            continue
        where = _where(opening.source)
        if opening.unread:
            report_violation(f"the rule's {opening.unread} cannot be read, so it counts as opening every port (admin "
                             f"ports included) to {where}: {UNREAD_FIX}")
            continue
        for port, service in ADMIN_PORTS.items():
            if not opening.covers(port):
                continue
            if opening.low == opening.high:
                what = f"admin port {port} ({service}) is open to {where}"
            else:
                what = f"{opening.ports_are()} open to {where}, including admin port {port} ({service})"
            report_violation(f"{what}: {ADMIN_FIX}")


DEFAULT_SERVING_PORTS = (8000,)
"""The inference API's port in every inferstack plan (`ServingConfig.port`); set `servingPorts` for others."""

SERVING_PORTS_SCHEMA: Mapping[str, Any] = {"servingPorts": {
    "type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535},
    "default": list(DEFAULT_SERVING_PORTS),
    "description": "Ports that may be open to public networks (the inference API)."}}


HTTPS_PORT, REDIRECT_PORT = 443, 80
LISTENER_PORTS = (HTTPS_PORT, REDIRECT_PORT)
"""A load balancer's public ports: HTTPS, and plain HTTP that only redirects to it (load-balancer-https-only). A
public rule may open them on the load balancer's own firewall only (load-balancer-only-public-listener)."""


def serving_ports(config: Mapping[str, Any]) -> tuple[int, ...]:
    ports = [_integer(port) for port in _items(config.get("servingPorts", DEFAULT_SERVING_PORTS))]
    return tuple(port for port in ports if port is not None)


def _public_where(source: Source) -> str:
    if source.network is None:
        return f"{source.text}, which the pack cannot read (so it counts as public)"
    if source.network.prefixlen == 0:
        return f"the whole internet ({source.text})"
    return f"public network {source.text}"


def check_public_ingress(resource: ResourceInput, report_violation: ReportViolation) -> None:
    serving = serving_ports(resource.config)
    allowed = (*serving, *LISTENER_PORTS)
    only = (f"only a serving port ({', '.join(map(str, serving))}), or a load balancer's HTTPS or redirect port "
            f"({HTTPS_PORT}, {REDIRECT_PORT}), may be open beyond private networks")
    if unknown_ingress_type(resource.resource_type):
        report_violation(f"{resource.resource_type} is a firewall type the pack cannot read, so it counts as opening "
                         f"every port to the internet: {UNKNOWN_TYPE_FIX}")
    for opening in openings(resource.resource_type, resource.props):
        if exposure(opening, resource.resource_type) in ("private", "iap"):
            continue
        where = _public_where(opening.source)
        if opening.unread:
            report_violation(f"the rule's {opening.unread} cannot be read, so it counts as opening every port to "
                             f"{where}: {UNREAD_FIX}")
        elif not (opening.low == opening.high and opening.low in allowed):
            report_violation(f"{opening.ports_are()} open to {where}: {only}; admit private networks only, or "
                             "reach other ports through the cloud's managed shell")


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


def _gcp_bindings(value: Any, report_violation: ReportViolation) -> list[Any]:
    document = _document(value)
    if document is None:
        report_violation("the IAM policy (policyData) is not a JSON policy, so it cannot be checked")
        return []
    return _items(document.get("bindings"))


def _gcp_iam_policy_not_public(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for binding in _gcp_bindings(props.get("policyData"), report_violation):
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
    ALI_LOG_PROJECT: lambda props, report: None if props.get("policy") is None else _check_bucket_policy(
        props["policy"], report),  # no project policy: only the account's RAM identities read it
}


def check_buckets_not_public(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _NOT_PUBLIC.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


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
    for index, disk in enumerate(_items(props.get("dataDisks"))):
        if not disk.get("kmsKeyId"):
            report_violation(f"data disk {index} is not encrypted: set kmsKeyId")


def _aws_template_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """A launch template's volumes: `ebs.encrypted` is a string ("true") in pulumi_aws's LaunchTemplate."""
    volumes = [m for m in _items(props.get("blockDeviceMappings")) if isinstance(m, Mapping) and m.get("ebs")]
    if not volumes:
        report_violation("the launch template maps no EBS volume, so its servers' root volume is the image's, "
                         "encrypted only if the account encrypts EBS by default: map the root device with "
                         "ebs.encrypted true")
    for mapping in volumes:
        if _flag(mapping["ebs"].get("encrypted")) is not True:
            report_violation(f"EBS volume {mapping.get('deviceName')} of the launch template is not encrypted: set "
                             "ebs.encrypted to true")


def _alibaba_template_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """An ECS launch template: `systemDisk.encrypted` and `dataDisks[].encrypted`."""
    if (props.get("systemDisk") or {}).get("encrypted") is not True:
        report_violation("the system disk is not encrypted: set systemDisk.encrypted to true")
    _alibaba_data_disks(props, report_violation)


def _alibaba_data_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for index, disk in enumerate(_items(props.get("dataDisks"))):
        if disk.get("encrypted") is not True:
            report_violation(f"data disk {index} is not encrypted: set encrypted to true")


def _huawei_configuration_disks(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """An AS configuration's `instanceConfig.disks`, the system disk (SYS) included: each names a KMS key."""
    disks = _items((props.get("instanceConfig") or {}).get("disks"))
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


#### Instance metadata: session tokens required, one hop ####

METADATA_HOP_LIMIT = 1
"""inferstack's hop limit (inferstack.components.aws.METADATA_HOP_LIMIT): a token requested from inside a container
(one hop further) never comes back, so only the server itself reads its credentials."""
AWS_METADATA_TYPES = (AWS_INSTANCE, AWS_LAUNCH_TEMPLATE, AWS_LAUNCH_CONFIGURATION, AWS_SPOT_INSTANCE_REQUEST)


def _metadata_hardened(options: Mapping[str, Any], prefix: str, report_violation: ReportViolation, *,
                       hop_default_is_one: bool) -> None:
    if options.get("httpEndpoint") == "disabled":  # no metadata service at all
        return
    tokens = options.get("httpTokens")
    if tokens != "required":
        report_violation(f"the metadata service answers without a session token ({prefix}httpTokens is "
                         f"{tokens or 'unset'}): set it to required")
    hops = options.get("httpPutResponseHopLimit")
    setting = f"{prefix}httpPutResponseHopLimit"
    if hops is None and not hop_default_is_one:
        report_violation(f"the metadata hop limit is unset ({setting}), so the image's default applies (2 on images "
                         f"that require tokens) and containers reach the server's credentials: set it to "
                         f"{METADATA_HOP_LIMIT}")
    elif hops is not None and _integer(hops) != METADATA_HOP_LIMIT:
        report_violation(f"the metadata hop limit is {_shown(hops)} ({setting}), so containers on the server reach "
                         f"its credentials: set it to {METADATA_HOP_LIMIT}")


ALI_SCALING_CONFIGURATION_TOKENS = (
    "an ESS scaling configuration cannot require metadata tokens (pulumi_alicloud 4.0.0 has no httpTokens on "
    "ess.ScalingConfiguration): build the scaling group from an ECS launch template (alicloud:ecs/ecsLaunchTemplate "
    "with httpTokens required and httpPutResponseHopLimit 1, the group's launchTemplateId) instead")
METADATA_TYPES = (*AWS_METADATA_TYPES, ALI_INSTANCE, *ALI_LAUNCH_TEMPLATES, ALI_SCALING_CONFIGURATION, GCP_INSTANCE,
                  *GCP_INSTANCE_TEMPLATES, HW_INSTANCE, HW_AS_CONFIGURATION)


def check_metadata(resource: ResourceInput, report_violation: ReportViolation) -> None:
    if resource.resource_type in AWS_METADATA_TYPES:
        _metadata_hardened(resource.props.get("metadataOptions") or {}, "metadataOptions.", report_violation,
                           hop_default_is_one=False)
    elif resource.resource_type in (ALI_INSTANCE, *ALI_LAUNCH_TEMPLATES):  # the hop limit defaults to 1 on ECS
        _metadata_hardened(resource.props, "", report_violation, hop_default_is_one=True)
    elif resource.resource_type == ALI_SCALING_CONFIGURATION:
        if resource.props.get("httpEndpoint") != "disabled":
            report_violation(ALI_SCALING_CONFIGURATION_TOKENS)
    elif resource.resource_type in (GCP_INSTANCE, *GCP_INSTANCE_TEMPLATES):
        raise NotApplicable(GCP_NO_METADATA_TOKENS)
    elif resource.resource_type in (HW_INSTANCE, HW_AS_CONFIGURATION):
        raise NotApplicable(HUAWEI_NO_METADATA_TOKENS)


#### Identity: storage grants ####

# AWS- and Alibaba-managed policies that grant object storage on every bucket of the account.
AWS_BROAD_MANAGED_POLICIES = {"AdministratorAccess", "PowerUserAccess", "ReadOnlyAccess", "AmazonS3FullAccess",
                              "AmazonS3ReadOnlyAccess"}
ALIBABA_BROAD_SYSTEM_POLICIES = {"AdministratorAccess", "ReadOnlyAccess", "AliyunOSSFullAccess",
                                 "AliyunOSSReadOnlyAccess"}
GCP_STORAGE_ROLE_PREFIX = "roles/storage."
# Basic roles hold storage permissions on every bucket of the project (owner and editor write, viewer lists).
GCP_BASIC_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
GCP_BUCKET_ADMIN_ROLES = {"roles/storage.admin", "roles/storage.objectAdmin", "roles/storage.legacyBucketOwner"}
_WILDCARDS = ("*", "?")


def _wild(text: str) -> bool:
    return any(w in text for w in _WILDCARDS)


@dataclass(frozen=True)
class StorageDialect:
    """How one cloud's identity policies name object storage."""

    action_prefix: str
    """"s3:", "oss:", "obs:"."""
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


AWS_STORAGE = StorageDialect("s3:", _aws_path)
ALIBABA_STORAGE = StorageDialect("oss:", _alibaba_path)
HUAWEI_STORAGE = StorageDialect("obs:", _huawei_path)


def _every_bucket(path: str | None) -> bool:
    bucket = (path or "").split("/", 1)[0]
    return path is not None and (not bucket or _wild(bucket))


def _check_storage_wildcards(found: list[Statement], dialect: StorageDialect,
                             report_violation: ReportViolation) -> None:
    for statement in found:
        if not statement.allows:
            continue
        if "NotAction" in statement.body:
            report_violation(f"statement {statement.label} allows every action but those it names (NotAction): "
                             "name the actions instead")
            continue
        storage = [action for action in statement.actions if dialect.is_storage(action)]
        for action in storage:
            if _wild(action):
                report_violation(f"statement {statement.label} allows {action}, which covers every storage action: "
                                 "name the read actions the server needs")
        if not storage:
            continue
        if "Resource" not in statement.body:
            report_violation(f"statement {statement.label} grants storage with no Resource, which is every bucket: "
                             "name one bucket and prefix")
        for resource in statement.resources:
            if _every_bucket(dialect.bucket_path(resource)):
                report_violation(f"statement {statement.label} grants storage on {resource}, which is every bucket: "
                                 "name one bucket and prefix")


def _broad_policy(name: str, broad: set[str], report_violation: ReportViolation) -> None:
    if name in broad:
        report_violation(f"attaches {name}, which grants storage on every bucket: grant one bucket and prefix in a "
                         "policy of your own")


def aws_managed_name(arn: Any) -> str:
    """"AmazonS3FullAccess" for arn:aws:iam::aws:policy/AmazonS3FullAccess; "" for a customer's own policy."""
    text = str(arn or "")
    return text.rsplit("/", 1)[-1] if ":iam::aws:policy/" in text else ""


def _aws_identity(resource: ResourceInput, report_violation: ReportViolation) -> None:
    props = resource.props
    if resource.resource_type in AWS_IDENTITY_POLICIES:
        _check_storage_wildcards(statements(props.get("policy"), report_violation, "the policy"), AWS_STORAGE,
                                 report_violation)
    elif resource.resource_type == AWS_ROLE:
        for inline in _items(props.get("inlinePolicies")):
            _check_storage_wildcards(statements(inline.get("policy"), report_violation, "an inline policy"),
                                     AWS_STORAGE, report_violation)
        for arn in _items(props.get("managedPolicyArns")):
            _broad_policy(aws_managed_name(arn), AWS_BROAD_MANAGED_POLICIES, report_violation)
    elif resource.resource_type in (AWS_ROLE_POLICY_ATTACHMENT, AWS_POLICY_ATTACHMENT):
        _broad_policy(aws_managed_name(props.get("policyArn")), AWS_BROAD_MANAGED_POLICIES, report_violation)
    elif resource.resource_type == AWS_ROLE_ATTACHMENTS_EXCLUSIVE:
        for arn in _items(props.get("policyArns")):
            _broad_policy(aws_managed_name(arn), AWS_BROAD_MANAGED_POLICIES, report_violation)


def _gcp_identity(resource: ResourceInput, report_violation: ReportViolation) -> None:
    props = resource.props
    if resource.resource_type in (GCP_PROJECT_IAM_MEMBER, GCP_PROJECT_IAM_BINDING):
        _project_storage_roles([props], report_violation)
    elif resource.resource_type == GCP_PROJECT_IAM_POLICY:
        _project_storage_roles(_gcp_bindings(props.get("policyData"), report_violation), report_violation)
    elif resource.resource_type in (GCP_BUCKET_IAM_MEMBER, GCP_BUCKET_IAM_BINDING) and (
            props.get("role") in GCP_BUCKET_ADMIN_ROLES):
        members = [props["member"]] if props.get("member") else _items(props.get("members"))
        report_violation(f"grants {props['role']} to {', '.join(map(str, members))}, which administers the bucket: "
                         "grant objectViewer (read) or objectCreator (write) instead")


def _project_storage_roles(bindings: list[Any], report_violation: ReportViolation) -> None:
    for binding in bindings:
        role = str(binding.get("role") or "")
        if role.startswith(GCP_STORAGE_ROLE_PREFIX) or role in GCP_BASIC_ROLES:
            report_violation(f"grants {role} on the whole project, which covers every bucket: grant a storage role "
                             "on one bucket (BucketIAMMember) instead")


def _alibaba_identity(resource: ResourceInput, report_violation: ReportViolation) -> None:
    props = resource.props
    if resource.resource_type == ALI_POLICY:
        _check_storage_wildcards(statements(props.get("policyDocument"), report_violation, "the policy"),
                                 ALIBABA_STORAGE, report_violation)
    elif resource.resource_type == ALI_ROLE_POLICY_ATTACHMENT and props.get("policyType") == "System":
        _broad_policy(str(props.get("policyName")), ALIBABA_BROAD_SYSTEM_POLICIES, report_violation)


def _huawei_identity(resource: ResourceInput, report_violation: ReportViolation) -> None:
    if resource.resource_type == HW_ROLE:
        _check_storage_wildcards(statements(resource.props.get("policy"), report_violation, "the policy"),
                                 HUAWEI_STORAGE, report_violation)


_STORAGE_GRANT_TYPES = {
    *AWS_IDENTITY_POLICIES, AWS_ROLE, AWS_ROLE_POLICY_ATTACHMENT, AWS_POLICY_ATTACHMENT, AWS_ROLE_ATTACHMENTS_EXCLUSIVE,
    GCP_PROJECT_IAM_MEMBER, GCP_PROJECT_IAM_BINDING, GCP_PROJECT_IAM_POLICY, GCP_BUCKET_IAM_MEMBER,
    GCP_BUCKET_IAM_BINDING, ALI_POLICY, ALI_ROLE_POLICY_ATTACHMENT, HW_ROLE}


def check_storage_grants(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = {"aws": _aws_identity, "gcp": _gcp_identity, "alibaba": _alibaba_identity,
             "huawei": _huawei_identity}.get(_cloud_of(resource.resource_type))
    if check is not None:
        check(resource, report_violation)


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
    # An offline domain serves nothing (inferstack's first phase, until DNS lets Alibaba issue the certificate).
    serving = str(props.get("status") or "online").lower() != "offline"
    if serving and (props.get("certificateConfig") or {}).get("serverCertificateStatus") != "on":
        report_violation("the CDN domain serves without an HTTPS certificate: set "
                         "certificateConfig.serverCertificateStatus to on, or keep the domain offline until it has one")
    for source in _items(props.get("sources")):
        if source.get("type") == "oss" and _integer(source.get("port", 80)) != 443:
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


def check_cdn(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _CDN.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


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


#### Stack: the servers' identity holds exactly what inferstack grants ####


@dataclass(frozen=True)
class ServerGrants:
    """What inferstack grants the identity its servers take, on one cloud (read from each cloud's
    `create_identity` in inferstack/components/<cloud>.py). The identity may hold these and nothing else."""

    object_reads: frozenset[str]
    """Read objects, on `bucket/prefix*` only (Google Cloud: roles on the bucket, under a prefix condition)."""
    listings: frozenset[str]
    """List keys, on the bucket, under a prefix condition."""
    secret_reads: frozenset[str]
    """Read secrets, on the stack's own secrets (Huawei: on its project, see `secrets_by_project`)."""
    anywhere: frozenset[str] = frozenset()
    """Allowed on every resource (the cloud grants them on no narrower one): what `anywhere_for` says."""
    anywhere_for: str = ""
    """What the `anywhere` actions are for, as the end of a sentence ("open the managed shell")."""
    prefix_condition: str = ""
    """The condition key that limits a listing to a prefix (matched case-insensitively)."""
    secrets_by_project: bool = False
    """Secret reads cannot name a secret (Huawei CSMS has no resource-level permission in role-based policies): they
    must name no Resource and be granted on one project, never account-wide."""
    log_writes: frozenset[str] = frozenset()
    """The monitoring agent's log writes, on the stack's own log groups (and their streams) only."""
    metric_writes: frozenset[str] = frozenset()
    """The monitoring agent's metric writes, limited by `metric_condition` to one namespace."""
    metric_condition: str = ""
    """The condition key that limits a metric write to a namespace (matched case-insensitively)."""

    def kind(self, action: str) -> str | None:
        """"object", "listing", "secret", "anywhere", or None for an action inferstack never grants (IAM actions
        are case-insensitive)."""
        kinds = {"object": self.object_reads, "listing": self.listings, "secret": self.secret_reads,
                 "anywhere": self.anywhere, "logs": self.log_writes, "metrics": self.metric_writes}
        return next((kind for kind, actions in kinds.items()
                     if action.lower() in {a.lower() for a in actions}), None)


BOOT_BUNDLE_PREFIX = "inferstack/bootstrap/"
"""Where inferstack stores the servers' boot bundles, in the model bucket (`bootstrap.render.BUNDLE_PREFIX`): the
identity may read it besides its model prefix, in the same bucket."""

SERVER_GRANTS: Mapping[str, ServerGrants] = {
    # RolePolicies model-read, secrets-read, session-manager (SESSION_MANAGER_ACTIONS, on "*").
    "aws": ServerGrants(
        object_reads=frozenset({"s3:GetObject"}), listings=frozenset({"s3:ListBucket"}),
        secret_reads=frozenset({"ssm:GetParameter", "ssm:GetParameters"}),
        anywhere_for="open the managed shell",
        anywhere=frozenset({"ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel",
                            "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
                            "ssmmessages:OpenDataChannel", "ec2:DescribeTags"}),
        prefix_condition="s3:prefix",
        # RolePolicy telemetry-write: the CloudWatch agent (components/aws.py _telemetry_statements).
        log_writes=frozenset({"logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"}),
        metric_writes=frozenset({"cloudwatch:PutMetricData"}), metric_condition="cloudwatch:namespace"),
    # BucketIAMMember with a prefix condition; SecretIamMember on each of the stack's secrets; no project role.
    "gcp": ServerGrants(object_reads=frozenset({"roles/storage.objectViewer"}), listings=frozenset(),
                        secret_reads=frozenset({"roles/secretmanager.secretAccessor"}),
                        # The Ops Agent's writes: project IAMMembers, the narrowest scope Google offers for them.
                        log_writes=frozenset({"roles/logging.logWriter"}),
                        metric_writes=frozenset({"roles/monitoring.metricWriter"})),
    # RAM policies model-read and secrets-read (Cloud Assistant, the managed shell, needs no grant); a fleet's servers
    # complete their own lifecycle action (components/alibaba.py LIFECYCLE_ACTIONS), which ESS grants on all resources
    # only (Auto Scaling API 2022-02-22, CompleteLifecycleAction, "Authorization information", read 2026-12-07).
    "alibaba": ServerGrants(object_reads=frozenset({"oss:GetObject"}), listings=frozenset({"oss:ListObjects"}),
                            secret_reads=frozenset({"kms:GetSecretValue"}), prefix_condition="oss:prefix",
                            anywhere=frozenset({"ess:DescribeScalingInstances", "ess:DescribeLifecycleActions",
                                                "ess:CompleteLifecycleAction"}),
                            anywhere_for="complete their own scale-out"),
    # Custom roles model-read (a domain role: OBS is global) and secrets-read (a project role); no listing.
    "huawei": ServerGrants(object_reads=frozenset({"obs:object:GetObject"}), listings=frozenset(),
                           secret_reads=frozenset({"csms:secretVersion:get", "kms:dek:decrypt"}),
                           secrets_by_project=True),
}
"""The allow-list: one row per cloud (tests/policy checks each row against the component code)."""

_DIALECTS = {"aws": AWS_STORAGE, "alibaba": ALIBABA_STORAGE, "huawei": HUAWEI_STORAGE}
SECRET_TYPES = {"aws": (AWS_PARAMETER,), "gcp": (GCP_SECRET,), "alibaba": (ALI_SECRET,), "huawei": (HW_SECRET,)}


@dataclass
class ServerIdentity:
    """One identity the servers take, what it may read, and what the pack found wrong with its grants."""

    cloud: str
    resource: StackResource
    storage: set[str] = field(default_factory=set)
    """"bucket/prefix*" scopes it may read."""
    secrets: set[str] = field(default_factory=set)
    """URNs of the stack's secrets it may read; "*" for every secret in its project (Huawei)."""
    violations: list[tuple[str, str]] = field(default_factory=list)
    """(message, urn of the resource at fault)."""
    granted_by: set[str] = field(default_factory=set)
    """URNs of the resources whose grants were read (the identity's own included)."""
    holds: set[str] = field(default_factory=set)
    """Every action (Google Cloud: role) allowed to it, as written."""

    def report(self, message: str, urn: str) -> None:
        self.violations.append((message, urn))


@dataclass(frozen=True)
class _Document:
    """Statements the identity holds through one resource (a role policy, a RAM policy, a Huawei custom role)."""

    source: StackResource
    found: list[Statement]
    attached_as: str = ""
    """Huawei: "domain", "project" or "all resources"."""


def _scoped_key(key: str) -> str | None:
    """"models/llama/*" → "models/llama/"; None for a key pattern that is not one literal prefix."""
    prefix = key[:-1] if key.endswith("*") else key
    return prefix if prefix and not _wild(prefix) else None


def _listing_prefixes(statement: Statement, condition_key: str) -> list[Any] | None:
    """The prefixes a listing is limited to; None when no condition limits it."""
    condition = statement.body.get("Condition")
    if not isinstance(condition, Mapping):
        return None
    prefixes: list[Any] = []
    for operator in ("StringLike", "StringEquals"):
        for key, values in (condition.get(operator) or {}).items():
            if str(key).lower() == condition_key.lower():
                prefixes += _items(values)
    return prefixes or None


class _Checker:
    """Checks one identity's documents against its cloud's row of SERVER_GRANTS."""

    def __init__(self, stack: Stack, identity: ServerIdentity) -> None:
        self.stack = stack
        self.identity = identity
        self.row = SERVER_GRANTS[identity.cloud]
        self.dialect = _DIALECTS.get(identity.cloud, AWS_STORAGE)
        self.secrets = _secret_names(stack, identity.cloud)

    def document(self, document: _Document) -> None:
        self.identity.granted_by.add(document.source.urn)
        for statement in document.found:
            if statement.allows:
                self.statement(statement, document)

    def statement(self, statement: Statement, document: _Document) -> None:
        urn, label = document.source.urn, statement.label
        for key in ("NotAction", "NotResource"):
            if key in statement.body:
                self.identity.report(f"statement {label} allows by exclusion ({key}), so the servers' identity may do "
                                     f"more than inferstack grants: name the actions and resources", urn)
                return
        if not statement.actions:
            self.identity.report(f"statement {label} names no Action, so it cannot be checked", urn)
        for action in statement.actions:
            self.action(action, statement, document)

    def action(self, action: str, statement: Statement, document: _Document) -> None:
        urn, label, kind = document.source.urn, statement.label, self.row.kind(action)
        self.identity.holds.add(action)
        resources = statement.resources if "Resource" in statement.body else []
        if kind == "object":
            for resource in resources or ["every resource (no Resource)"]:
                self.object_read(resource, action, label, urn)
        elif kind == "listing":
            for resource in resources or ["every resource (no Resource)"]:
                self.listing(resource, statement, action, urn)
        elif kind == "secret":
            self.secret_read(resources, action, label, document)
        elif kind == "logs":
            self.log_write(resources, action, label, urn)
        elif kind == "metrics":
            self.metric_write(statement, action, urn)
        elif kind is None:
            shell = f" and {self.row.anywhere_for}" if self.row.anywhere_for else ""
            self.identity.report(f"the servers' identity may {action} (statement {label}), which inferstack never "
                                 f"grants: the servers only read their model prefix and their own secrets{shell} "
                                 "(docs/policy.md lists the actions); remove it", urn)

    def object_read(self, resource: str, action: str, label: str, urn: str) -> None:
        path = self.dialect.bucket_path(resource)
        bucket, _, key = (path or "").partition("/")
        prefix = _scoped_key(key) if bucket and not _wild(bucket) else None
        if prefix is None:
            self.identity.report(f"the servers' identity may {action} on {resource} (statement {label}), which is not "
                                 "one model prefix of one bucket: grant bucket/prefix* only (no wildcard in the bucket "
                                 "or the prefix)", urn)
        else:
            self.identity.storage.add(f"{bucket}/{prefix}*")

    def listing(self, resource: str, statement: Statement, action: str, urn: str) -> None:
        path = self.dialect.bucket_path(resource)
        prefixes = _listing_prefixes(statement, self.row.prefix_condition)
        scoped = [_scoped_key(str(p)) for p in prefixes or []]
        if path is None or "/" in path or _wild(path):
            self.identity.report(f"the servers' identity may {action} on {resource} (statement {statement.label}), "
                                 "which is not one bucket: name the model bucket", urn)
        elif prefixes is None or None in scoped:
            self.identity.report(f"the servers' identity may list {resource} (statement {statement.label}) without a "
                                 f"condition limiting it to one prefix: add {self.row.prefix_condition} with the "
                                 "model prefix", urn)
        else:
            self.identity.storage.update(f"{path}/{prefix}*" for prefix in scoped)

    def log_write(self, resources: list[str], action: str, label: str, urn: str) -> None:
        groups = {str(arn) for g in self.stack.of_type(AWS_LOG_GROUP) if (arn := self.stack.known(g.props, "arn"))}
        for resource in resources or ["every resource (no Resource)"]:
            group = resource.split(":log-stream:", 1)[0].removesuffix(":*")
            if group not in groups:
                self.identity.report(f"the servers' identity may {action} on {resource} (statement {label}), which "
                                     "is not a log group of this stack: grant the stack's own log group (and its "
                                     "streams) only", urn)

    def metric_write(self, statement: Statement, action: str, urn: str) -> None:
        key = self.row.metric_condition.lower()
        condition = statement.body.get("Condition")
        names = [value for operator, pairs in (condition.items() if isinstance(condition, Mapping) else [])
                 if str(operator) == "StringEquals" and isinstance(pairs, Mapping)
                 for k, value in pairs.items() if str(k).lower() == key]
        if len(names) != 1 or not isinstance(names[0], str) or _wild(names[0]):
            self.identity.report(f"the servers' identity may {action} (statement {statement.label}) in any "
                                 f"namespace: add a StringEquals {self.row.metric_condition} condition naming the "
                                 "stack's own", urn)
            return
        # inferstack names each deployment's namespace as its log group (aws.py create_telemetry): another stack's
        # namespace would let a server feed another fleet's alarms.
        own = {str(n) for g in self.stack.of_type(AWS_LOG_GROUP) if (n := self.stack.known(g.props, "name"))}
        if names[0] not in own:
            self.identity.report(f"the servers' identity may {action} (statement {statement.label}) in namespace "
                                 f"{names[0]}, which is not this stack's (its log groups' names: "
                                 f"{', '.join(sorted(own)) or 'none'}): name the stack's own namespace", urn)

    def secret_read(self, resources: list[str], action: str, label: str, document: _Document) -> None:
        urn = document.source.urn
        if self.row.secrets_by_project:
            if resources and resources != ["*"]:
                self.identity.report(f"the servers' identity may {action} on {', '.join(resources)} (statement "
                                     f"{label}), which the pack cannot read: grant it on the project, without a "
                                     "Resource", urn)
            elif document.attached_as != "project":
                self.identity.report(f"the servers' identity may {action} (statement {label}) as a "
                                     f"{document.attached_as or 'global'} role, which reads every secret of the "
                                     "account: grant it as a project role of one region", urn)
            else:
                self.identity.secrets.add("*")
            return
        for resource in resources or ["every resource (no Resource)"]:
            secret = self.secrets.get(resource)
            if secret is None:
                self.identity.report(f"the servers' identity may {action} on {resource} (statement {label}), which "
                                     "is not a secret of this stack: grant its own secrets only, by name", urn)
            else:
                self.identity.secrets.add(secret)


def _secret_names(stack: Stack, cloud: str) -> dict[str, str]:
    """Every name a grant may give one of the stack's secrets (ARN, resource name, id) → the secret's URN."""
    names: dict[str, str] = {}
    for secret in stack.of_type(*SECRET_TYPES.get(cloud, ())):
        for key in ("arn", "name", "id", "secretId"):
            value = stack.known(secret.props, key)
            if isinstance(value, str) and value:
                names[value] = secret.urn
    return names


def _trusts(document: Any, service: str) -> bool | None:
    """Whether a trust policy lets `service` (ec2., ecs.) assume the role; None if it cannot be read."""
    parsed = _document(document)
    if parsed is None:
        return None
    for body in _items(parsed.get("Statement")):
        if not isinstance(body, Mapping):
            return None
        principal = body.get("Principal") or {}
        services = _items(principal.get("Service")) if isinstance(principal, Mapping) else []
        if str(body.get("Effect", "")).lower() == "allow" and any(str(s).startswith(service) for s in services):
            return True
    return False


def _identities_trusting(stack: Stack, role_type: str, trust_key: str, service: str, cloud: str,
                         report_violation: ReportViolation) -> list[ServerIdentity]:
    found = []
    for role in stack.of_type(role_type):
        trust = stack.known(role.props, trust_key)
        if trust is None:
            continue  # unknown during a preview: checked at `pulumi up`
        trusted = _trusts(trust, service)
        if trusted is None:
            report_violation(f"the trust policy of role {role.name} cannot be read, so the pack cannot tell whether "
                             "servers take it: write it as a JSON policy document", role.urn)
        elif trusted:
            found.append(ServerIdentity(cloud, role))
    return found


def _aws_identity_documents(stack: Stack, checker: _Checker) -> None:
    role, identity = checker.identity.resource, checker.identity
    report = identity.report
    for inline in stack.items(stack.known(role.props, "inlinePolicies")):
        checker.document(_Document(role, statements(inline.get("policy"), report_to(identity, role.urn),
                                                    "an inline policy of the servers' identity")))
    names = [stack.known(role.props, key) for key in ("name", "id", "arn")]
    for policy in stack.of_type(AWS_ROLE_POLICY):
        if stack.refers(policy, "role", role, *names):
            checker.document(_Document(policy, statements(policy.props.get("policy"), report_to(identity, policy.urn),
                                                          "a policy of the servers' identity")))
    attached = [(a, a.props.get("policyArn")) for a in stack.of_type(AWS_ROLE_POLICY_ATTACHMENT)
                if stack.refers(a, "role", role, *names)]
    attached += [(a, a.props.get("policyArn")) for a in stack.of_type(AWS_POLICY_ATTACHMENT)
                 if stack.refers(a, "roles", role, *names)]
    attached += [(a, arn) for a in stack.of_type(AWS_ROLE_ATTACHMENTS_EXCLUSIVE)
                 if stack.refers(a, "roleName", role, *names) for arn in _items(a.props.get("policyArns"))]
    attached += [(role, arn) for arn in _items(stack.known(role.props, "managedPolicyArns"))]
    for attachment, arn in attached:
        identity.granted_by.add(attachment.urn)
        managed = [p for p in stack.of_type(AWS_MANAGED_POLICY)
                   if stack.refers(attachment, "policyArn", p, stack.known(p.props, "arn")) or (
                       arn and arn == stack.known(p.props, "arn"))]
        if managed:
            for policy in managed:
                checker.document(_Document(policy, statements(policy.props.get("policy"),
                                                              report_to(identity, policy.urn),
                                                              "a policy of the servers' identity")))
        elif aws_managed_name(arn):
            report(f"the servers' identity has the AWS-managed policy {aws_managed_name(arn)} attached, which "
                   "inferstack never grants: attach nothing but inferstack's own policies", attachment.urn)
        else:
            report(f"the servers' identity has policy {arn} attached, which is not in this stack, so the pack "
                   "cannot read it: grant the server's permissions in a policy of this stack", attachment.urn)


def report_to(identity: ServerIdentity, default_urn: str) -> ReportViolation:
    """Violations found reading one of the identity's documents, reported on that document."""
    def report(message: str, urn: str | None = None) -> None:
        identity.report(message, urn or default_urn)
    return report


def _alibaba_identity_documents(stack: Stack, checker: _Checker) -> None:
    role, identity = checker.identity.resource, checker.identity
    role_name = stack.known(role.props, "roleName")
    for attachment in stack.of_type(ALI_ROLE_POLICY_ATTACHMENT):
        if not stack.refers(attachment, "roleName", role, role_name):
            continue
        identity.granted_by.add(attachment.urn)
        name = attachment.props.get("policyName")
        policies = [p for p in stack.of_type(ALI_POLICY)
                    if stack.refers(attachment, "policyName", p, stack.known(p.props, "policyName"))]
        if attachment.props.get("policyType") == "System":
            identity.report(f"the servers' identity has the system policy {name} attached, which inferstack never "
                            "grants: attach nothing but inferstack's own policies", attachment.urn)
        elif not policies:
            identity.report(f"the servers' identity has policy {name} attached, which is not in this stack, so the "
                            "pack cannot read it: grant the server's permissions in a policy of this stack",
                            attachment.urn)
        for policy in policies:
            checker.document(_Document(policy, statements(policy.props.get("policyDocument"),
                                                          report_to(identity, policy.urn),
                                                          "a policy of the servers' identity")))


_HUAWEI_ATTACHMENTS = (("domainRoles", "domain"), ("allResourcesRoles", "all resources"))


def _huawei_identity_documents(stack: Stack, checker: _Checker) -> None:
    agency, identity = checker.identity.resource, checker.identity
    named: list[tuple[str, Any]] = [
        (scope, name) for key, scope in _HUAWEI_ATTACHMENTS for name in stack.items(stack.known(agency.props, key))]
    named += [("project", name) for project in stack.items(stack.known(agency.props, "projectRoles"))
              for name in _items(project.get("roles"))]
    roles = stack.of_type(HW_ROLE)
    for scope, name in named:
        matches = [r for r in roles if name and name == stack.known(r.props, "name")]
        if not matches:
            identity.report(f"the servers' identity holds role {name!r} ({scope}), which is not a custom role of this "
                            "stack, so the pack cannot read it: grant the server's permissions in roles of this stack",
                            agency.urn)
        for role in matches:
            checker.document(_Document(role, statements(role.props.get("policy"), report_to(identity, role.urn),
                                                        "a role of the servers' identity"), scope))


#### The servers' identity on Google Cloud: IAM grants to its service account ####

_GCP_OBJECT_PREFIX = re.compile(r'resource\.name\.startsWith\("projects/_/buckets/(?P<bucket>[^/"*?]+)/objects/'
                                r'(?P<prefix>[^"]*)"\)')
_GCP_LIST_PREFIX = re.compile(
    r'api\.getAttribute\("storage\.googleapis\.com/objectListPrefix", ""\)\.startsWith\("(?P<prefix>[^"]*)"\)')


def _gcp_condition_prefixes(bucket: str, expression: str) -> list[str] | None:
    """The prefixes an IAM condition limits a bucket grant to; None if it does not (or cannot be read)."""
    clauses = [clause.strip() for clause in expression.split("||")] if expression else []
    prefixes = []
    for clause in clauses:
        objects, listing = _GCP_OBJECT_PREFIX.fullmatch(clause), _GCP_LIST_PREFIX.fullmatch(clause)
        match = objects or listing
        if match is None or (objects and objects["bucket"] != bucket):
            return None
        prefix = _scoped_key(match["prefix"] + "*")
        if prefix is None:
            return None
        prefixes.append(prefix)
    return prefixes or None


def _gcp_server_accounts(stack: Stack) -> list[ServerIdentity]:
    found = []
    for account in stack.of_type(GCP_SERVICE_ACCOUNT):
        email = stack.known(account.props, "email")
        for instance in stack.of_type(GCP_INSTANCE, *GCP_INSTANCE_TEMPLATES):
            attached = stack.known(instance.props, "serviceAccount") or {}
            via_dependency = account.urn in {d.urn for d in instance.property_dependencies.get("serviceAccount", [])}
            if via_dependency or (email and stack.known(attached, "email") == email):
                found.append(ServerIdentity("gcp", account))
                break
    return found


_GCP_GRANT_KINDS = ("iammember", "iambinding", "iampolicy")


def _gcp_grants_to(stack: Stack,
                   account: StackResource) -> Iterator[tuple[StackResource, str | None, Mapping[str, Any]]]:
    """(grant resource, role, the binding's props) for every IAM grant in the stack that names the account."""
    email = stack.known(account.props, "email")
    names = [stack.known(account.props, "member"), f"serviceAccount:{email}" if email else None]
    for grant in stack.resources:
        kind = grant.resource_type.rsplit(":", 1)[-1].lower()
        if not kind.endswith(_GCP_GRANT_KINDS) or not grant.resource_type.startswith("gcp:"):
            continue
        if kind.endswith("iampolicy"):
            yield from _gcp_policy_bindings(stack, grant, account, [n for n in names if n])
        elif stack.refers(grant, "member", account, *names) or stack.refers(grant, "members", account, *names):
            yield grant, str(grant.props.get("role")), grant.props


def _gcp_policy_bindings(stack: Stack, grant: StackResource, account: StackResource,
                         names: list[str]) -> Iterator[tuple[StackResource, str | None, Mapping[str, Any]]]:
    """The bindings of an IAM policy resource that name the account; role None when the policy cannot be read."""
    value = stack.known(grant.props, "policyData")
    depends = account.urn in {d.urn for d in grant.property_dependencies.get("policyData", [])}
    if value is None:
        return  # unknown during a preview: checked at `pulumi up`
    document = _document(value)
    if document is None:
        if depends or any(name in str(value) for name in names):
            yield grant, None, {}
        return
    for binding in _items(document.get("bindings")):
        if depends or any(name in _items(binding.get("members")) for name in names):
            yield grant, str(binding.get("role")), binding


def _check_gcp_account(stack: Stack, identity: ServerIdentity) -> None:
    row, secrets = SERVER_GRANTS["gcp"], _secret_names(stack, "gcp")
    for grant, role, binding in _gcp_grants_to(stack, identity.resource):
        identity.granted_by.add(grant.urn)
        if role is None:
            identity.report(f"the IAM policy of {_gcp_target(grant)} names the servers' identity and is not JSON, so "
                            "it cannot be checked", grant.urn)
            continue
        identity.holds.add(role)
        if grant.resource_type == GCP_PROJECT_IAM_MEMBER and role in row.log_writes | row.metric_writes:
            continue  # write-only roles (they read nothing), granted on the project: none narrower exists
        if grant.resource_type in (GCP_BUCKET_IAM_MEMBER, GCP_BUCKET_IAM_BINDING) and role in row.object_reads:
            bucket = str(grant.props.get("bucket"))
            expression = str((binding.get("condition") or {}).get("expression") or "")
            prefixes = _gcp_condition_prefixes(bucket, expression)
            if prefixes is None:
                identity.report(f"the servers' identity reads all of bucket {bucket} ({role} without a condition "
                                "limiting it to the model prefix): add one", grant.urn)
            else:
                identity.storage.update(f"{bucket}/{prefix}*" for prefix in prefixes)
        elif grant.resource_type in (GCP_SECRET_IAM_MEMBER, GCP_SECRET_IAM_BINDING) and role in row.secret_reads:
            secret_id = str(grant.props.get("secretId"))
            urn = secrets.get(secret_id) or next(
                (u for name, u in secrets.items() if secret_id.endswith(f"/secrets/{name}")), None)
            if urn is None:
                identity.report(f"the servers' identity reads secret {secret_id}, which is not a secret of this "
                                "stack: grant its own secrets only", grant.urn)
            else:
                identity.secrets.add(urn)
        else:
            identity.report(f"the servers' identity holds {role} on {_gcp_target(grant)}, which inferstack never "
                            "grants: the servers read their model prefix (roles/storage.objectViewer on the bucket, "
                            "under a prefix condition) and their own secrets (roles/secretmanager.secretAccessor), "
                            "nothing else; remove it", grant.urn)


def _gcp_target(grant: StackResource) -> str:
    """What an IAM grant is on: "bucket b", "secret s", "project p", or its type."""
    for key in ("bucket", "secretId", "project", "folder", "orgId", "serviceAccountId"):
        value = grant.props.get(key) if key in grant.props else None
        if value:
            return f"{key.removesuffix('Id').lower()} {value}"
    return grant.resource_type


#### The servers' identities, and the rule ####

# Resources that name the servers' identity without granting it anything: the identity itself, the servers and
# what attaches the identity to them. Any other resource that names it, and is not a grant the pack reads above,
# counts as an unknown grant (fail closed).
IDENTITY_USERS = {
    AWS_INSTANCE_PROFILE, AWS_INSTANCE, AWS_LAUNCH_TEMPLATE, AWS_LAUNCH_CONFIGURATION, AWS_SPOT_INSTANCE_REQUEST,
    GCP_INSTANCE, *GCP_INSTANCE_TEMPLATES, ALI_INSTANCE, "alicloud:ecs/ramRoleAttachment:RamRoleAttachment",
    "alicloud:ram/roleAttachment:RoleAttachment", ALI_SCALING_CONFIGURATION, *ALI_LAUNCH_TEMPLATES, HW_INSTANCE,
    HW_AS_GROUP, HW_AS_CONFIGURATION,
}


def server_identities(stack: Stack, report_violation: ReportViolation) -> list[ServerIdentity]:
    """Every identity the servers take, with its storage scopes, readable secrets and violations."""
    identities = [*_identities_trusting(stack, AWS_ROLE, "assumeRolePolicy", "ec2.", "aws", report_violation),
                  *_identities_trusting(stack, ALI_ROLE, "assumeRolePolicyDocument", "ecs.", "alibaba",
                                        report_violation),
                  *(ServerIdentity("huawei", agency) for agency in stack.of_type(HW_AGENCY)
                    if stack.known(agency.props, "delegatedServiceName") == "op_svc_ecs"),
                  *_gcp_server_accounts(stack)]
    read = {"aws": _aws_identity_documents, "alibaba": _alibaba_identity_documents,
            "huawei": _huawei_identity_documents}
    for identity in identities:
        identity.granted_by.add(identity.resource.urn)
        if identity.cloud == "gcp":
            _check_gcp_account(stack, identity)
        else:
            read[identity.cloud](stack, _Checker(stack, identity))
        models = {scope for scope in identity.storage if not scope.endswith(f"/{BOOT_BUNDLE_PREFIX}*")}
        buckets = {scope.split("/", 1)[0] for scope in identity.storage}
        if len(models) > 1 or len(buckets) > 1:
            identity.report(f"the servers' identity reads {len(identity.storage)} prefixes "
                            f"({', '.join(sorted(identity.storage))}): it reads one model prefix of one bucket "
                            f"(and that bucket's {BOOT_BUNDLE_PREFIX})", identity.resource.urn)
        _unknown_grants(stack, identity)
    return identities


def _identity_names(stack: Stack, identity: StackResource) -> set[str]:
    keys = ("name", "arn", "roleName", "email", "member", "id")
    names = {str(stack.known(identity.props, key)) for key in keys if stack.known(identity.props, key)}
    email = stack.known(identity.props, "email")
    return names | ({f"serviceAccount:{email}"} if email else set())


def _names_identity(stack: Stack, resource: StackResource, identity: StackResource, names: set[str]) -> bool:
    if any(identity.urn in {d.urn for d in deps} for deps in resource.property_dependencies.values()):
        return True
    return any(_mentions(stack, stack.known(resource.props, key), names) for key in resource.props)


def _mentions(stack: Stack, value: Any, names: set[str]) -> bool:
    if isinstance(value, str):
        return value in names
    if isinstance(value, Mapping):
        return any(_mentions(stack, stack.known(value, key), names) for key in value)
    return any(_mentions(stack, item, names) for item in stack.items(value)) if isinstance(value, Sequence) else False


CLOUD_PACKAGES = ("aws:", "gcp:", "alicloud:", "huaweicloud:")
"""Only the clouds' resources can grant anything: components and the stack itself merely pass values on (an
inferstack component's `identityId` output is the role's ARN)."""


def _unknown_grants(stack: Stack, identity: ServerIdentity) -> None:
    names = _identity_names(stack, identity.resource)
    for resource in stack.resources:
        if (resource.urn in identity.granted_by or resource.resource_type in IDENTITY_USERS
                or resource.resource_type in (AWS_ROLE, ALI_ROLE, HW_AGENCY, GCP_SERVICE_ACCOUNT)
                or not resource.resource_type.startswith(CLOUD_PACKAGES)):
            continue
        if _names_identity(stack, resource, identity.resource, names):
            identity.report(f"{resource.name} ({resource.resource_type}) names the servers' identity "
                            f"{identity.resource.name}, and the pack cannot tell what it grants: grant the server's "
                            "permissions the way inferstack does (docs/policy.md)", resource.urn)


def check_server_identity(stack: Stack, report_violation: ReportViolation) -> None:
    identities = server_identities(stack, report_violation)
    if not identities:
        raise NotApplicable(NO_SERVER_IDENTITY)
    for identity in identities:
        for message, urn in identity.violations:
            report_violation(message, urn)


#### Stack: CDN front ends ####


def _last_segment(value: Any) -> str:
    return str(value or "").rstrip("/").rsplit("/", 1)[-1]


def _gcp_cdn_front_ends(stack: Stack, report_violation: ReportViolation) -> bool:
    backends = [b for b in stack.of_type(GCP_BACKEND_BUCKET) if stack.known(b.props, "enableCdn") is True]
    for backend in backends:
        name = stack.known(backend.props, "name")
        maps = [m for m in stack.of_type(GCP_URL_MAP)
                if stack.refers(m, "defaultService", backend) or stack.refers(m, "pathMatchers", backend)
                or (name and _last_segment(stack.known(m.props, "defaultService")) == name)]
        for url_map in maps:
            map_name = stack.known(url_map.props, "name")
            for proxy in stack.of_type(GCP_HTTP_PROXY):
                if stack.refers(proxy, "urlMap", url_map) or (
                        map_name and _last_segment(stack.known(proxy.props, "urlMap")) == map_name):
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
                    a.get("argName"): a.get("argValue") for a in _items(config.props.get("functionArgs"))}
        offline = str(stack.known(domain.props, "status") or "online").lower() == "offline"  # serves nothing
        if not offline and (functions.get("https_force") or {}).get("enable") != "on":
            report_violation(f"CDN domain {name} does not force HTTPS: add a DomainConfig https_force with "
                             "enable=on", domain.urn)
        oss_origin = any(s.get("type") == "oss" for s in _items(domain.props.get("sources")))
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


#### Stack: a port or load balancer open to a public source comes with the servers' API key ####

API_KEY_SECRETS = (AWS_PARAMETER, GCP_SECRET, ALI_SECRET, HW_SECRET)
API_KEY_NAME_SUFFIX = "-api-key"
"""How inferstack names the API key's secret resource: `<component>-secrets-api-key` (components/server.py
ServerSecrets, each cloud's create_secrets)."""
API_KEY_FIX = ("store it as a secret the servers' identity may read (`pulumi config set --secret inferstack:apiKey "
               "\"$(openssl rand -hex 32)\"`), or admit private networks only")


@dataclass(frozen=True)
class PublicEntry:
    """Something that admits public callers: a firewall rule's ports, or an internet-facing load balancer's
    listener (or the load balancer itself, where it holds the filter)."""

    urn: str
    what: str


def _discard(message: str, urn: str | None = None) -> None:
    """For readers whose own rule reports what they find (the identity's grants, a load balancer's listeners)."""


def _public_openings(stack: Stack) -> Iterator[PublicEntry]:
    """Every firewall opening to a source that is not private, however the ranges are split; Google's front ends
    count as the load balancer, whose callers `_public_listeners` reads."""
    for resource in (r for r in stack.resources if r.resource_type in INGRESS_READERS):
        by_ports: dict[tuple[int, int], list[Opening]] = {}
        for opening in _opened(stack, resource):
            if not (exposure(opening, resource.resource_type) in ("private", "iap")
                    or from_load_balancer(opening, resource.resource_type)):
                by_ports.setdefault((opening.low, opening.high), []).append(opening)
        for same_ports in by_ports.values():
            wheres = dict.fromkeys(_public_where(opening.source) for opening in same_ports)
            yield PublicEntry(resource.urn, f"{same_ports[0].ports_are()} open to {', '.join(wheres)}")


def _public_listeners(stack: Stack) -> Iterator[PublicEntry]:
    """Each internet-facing load balancer whose callers the pack cannot limit to private networks: the filter each
    cloud puts in front of its listeners is read (AWS and Alibaba security groups, as firewall rules above; Google
    Cloud Armor; Alibaba ALB ACLs; Huawei ELB IP groups), and one it cannot read counts as admitting everyone."""
    for balancer in load_balancers(stack, _discard):
        api = [listener for listener in balancer.listeners if _serves_api(balancer, listener)]
        if not balancer.internet_facing or not api:
            continue
        for resource, why in BALANCER_CALLERS[balancer.cloud](stack, balancer, api):
            kind = ("forwarding rule" if balancer.cloud == "gcp"
                    else "load balancer" if resource.urn == balancer.resource.urn else "listener")
            yield PublicEntry(resource.urn, f"the internet-facing {kind} {resource.name} admits public callers ({why})")


def _serves_api(balancer: LoadBalancer, listener: Listener) -> bool:
    """A listener that forwards requests: not plain HTTP that only redirects; on Google Cloud, one that routes to a
    backend service (a front end of backend buckets only is the static assets' CDN, which serves files)."""
    return not listener.redirects_to_https and (balancer.cloud != "gcp" or bool(listener.backends))


def _aws_callers(stack: Stack, balancer: LoadBalancer,
                 listeners: list[Listener]) -> Iterator[tuple[StackResource, str]]:
    """An ALB's security groups hold its callers: their rules are firewall openings (above), read when the stack
    creates them. Without one of the stack, the VPC's default security group (ALB's default) or a brought one
    decides."""
    named = _listed(stack, balancer.resource.props, "securityGroups")
    groups = _linked_of(stack, balancer.resource, ("securityGroups",), *SECURITY_GROUP_TYPES)
    if not groups or len(named) > len(groups):
        yield balancer.resource, ("it names no security group of this stack, so the VPC's default security group or "
                                  "one the pack cannot read decides who may call it")


GCP_ARMOR_RULES = ("gcp:compute/securityPolicyRule:SecurityPolicyRule",
                   "gcp:compute/regionSecurityPolicyRule:RegionSecurityPolicyRule")
GCP_ARMOR_DEFAULT_PRIORITY = 2147483647
"""Cloud Armor's default rule: "There must always be a default rule (rule with priority 2147483647 and match "*"). If
no rules are provided when creating a security policy, a default rule with action "allow" will be added"
(pulumi_gcp compute.SecurityPolicy `rules`, read 2026-12-07)."""


def _gcp_callers(stack: Stack, balancer: LoadBalancer,
                 listeners: list[Listener]) -> Iterator[tuple[StackResource, str]]:
    """Google's load balancers take no firewall rule: a backend service's Cloud Armor policy holds its callers."""
    for listener in listeners:
        reasons = [why for backend in listener.backends if (why := _armor_admits(stack, backend.resource))]
        if reasons:
            yield listener.resource, "; ".join(dict.fromkeys(reasons))


def _armor_admits(stack: Stack, service: StackResource) -> str | None:
    """Why a backend service's Cloud Armor policy admits public callers; None when it admits private ones only."""
    named = stack.known(service.props, "securityPolicy")
    armors = _linked_of(stack, service, ("securityPolicy",), *GCP_ARMOR_POLICIES)
    if not named and not armors:
        return f"backend service {service.name} has no Cloud Armor policy"
    if not armors:
        return (f"backend service {service.name} has Cloud Armor policy {named}, which this stack does not create, so "
                "the pack cannot read it")
    for armor in armors:
        found = [*stack.items(stack.known(armor.props, "rules")),
                 *(rule.props for rule in _referring(stack, armor, ("securityPolicy",), *GCP_ARMOR_RULES))]
        if not any(_integer(rule.get("priority")) == GCP_ARMOR_DEFAULT_PRIORITY for rule in found):
            return (f"Cloud Armor policy {armor.name} has no default rule (priority {GCP_ARMOR_DEFAULT_PRIORITY}), so "
                    "Google adds one that allows every address")
        for rule in sorted(found, key=lambda r: _integer(r.get("priority")) or 0):
            admitted = _armor_rule_admits(rule)
            if admitted:
                return f"Cloud Armor policy {armor.name} allows {admitted} (rule {_shown(rule.get('priority'))})"
    return None


def _armor_rule_admits(rule: Mapping[str, Any]) -> str | None:
    """The public sources one Cloud Armor rule lets through; a rule that denies, or only previews ("the action is not
    enforced", pulumi_gcp), lets nothing through. Any other action (allow, throttle, rate_based_ban, redirect) admits
    what it matches; a match other than SRC_IPS_V1 ranges (an expression) cannot be read and counts as public."""
    if rule.get("preview") is True or str(rule.get("action") or "").lower().startswith("deny"):
        return None
    match = rule.get("match") or {}
    read = match.get("versionedExpr") == "SRC_IPS_V1"
    ranges = _items((match.get("config") or {}).get("srcIpRanges")) if read else []
    if not ranges:
        return "an expression the pack cannot read"
    public = [str(r) for r in ranges if str(r).strip() == "*" or _public_sources([r])]
    return ", ".join(public) or None


ALI_ACL = "alicloud:alb/acl:Acl"
ALI_ACL_ENTRY = "alicloud:alb/aclEntryAttachment:AclEntryAttachment"
ALI_LISTENER_ACL = "alicloud:alb/listenerAclAttachment:ListenerAclAttachment"


def _alibaba_callers(stack: Stack, balancer: LoadBalancer,
                     listeners: list[Listener]) -> Iterator[tuple[StackResource, str]]:
    """An ALB's callers: its security groups (their rules are firewall openings, above) when any is attached, else
    each listener's ACL."""
    if _referring(stack, balancer.resource, ("loadBalancerId",), ALI_LB_SECURITY_GROUP):
        return
    for listener in listeners:
        why = _alibaba_acl_admits(stack, listener.resource)
        if why:
            yield listener.resource, why


def _alibaba_acl_admits(stack: Stack, listener: StackResource) -> str | None:
    """Why a listener's ACLs admit public callers (alb.ListenerAclAttachment, or the listener's deprecated
    `aclConfig`): "White: only requests from IP addresses ... in the selected access control list are forwarded";
    "Black: all requests from IP addresses ... in the selected access control list are not forwarded"; "If whitelist
    access is enabled but no IP addresses are added ... the listener forwards all requests" (pulumi_alicloud
    alb.ListenerAclAttachment `acl_type`, read 2026-12-07)."""
    bindings = [(str(stack.known(a.props, "aclType") or ""), _linked_of(stack, a, ("aclId",), ALI_ACL),
                 stack.known(a.props, "aclId")) for a in _referring(stack, listener, ("listenerId",), ALI_LISTENER_ACL)]
    config = stack.known(listener.props, "aclConfig") or {}
    bindings += [(str(config.get("aclType") or ""), _linked_of(stack, listener, ("aclConfig",), ALI_ACL),
                  relation.get("aclId")) for relation in _items(config.get("aclRelations"))]
    if not bindings:
        return "no security group is attached to the load balancer and the listener has no whitelist ACL"
    for acl_type, acls, acl_id in bindings:
        shown = acls[0].name if acls else acl_id
        if acl_type.lower() != "white":
            return (f"its ACL {shown} is a blacklist, which admits every address it does not list"
                    if acl_type.lower() == "black" else f"its ACL {shown} has type {acl_type or 'unset'}, which the "
                    "pack cannot read")
        if not acls:
            return f"its ACL {acl_id} is not one this stack creates, so the pack cannot read it"
        for acl in acls:
            entries = [e.get("entry") for e in stack.items(stack.known(acl.props, "aclEntries"))]
            for attached in _referring(stack, acl, ("aclId",), ALI_ACL_ENTRY):
                entries += [stack.known(attached.props, "entry"),
                            *(e.get("entry") for e in stack.items(stack.known(attached.props, "entries")))]
            entries = [entry for entry in entries if entry]
            if not entries:
                return f"its whitelist ACL {acl.name} has no entry, which admits every address"
            public = _public_sources(entries)
            if public:
                return f"its whitelist ACL {acl.name} admits {', '.join(public)}"
    return None


HW_IP_GROUP = "huaweicloud:DedicatedElb/ipgroup:Ipgroup"


def _huawei_callers(stack: Stack, balancer: LoadBalancer,
                    listeners: list[Listener]) -> Iterator[tuple[StackResource, str]]:
    """A dedicated ELB takes no security group: each listener's IP address group holds its callers."""
    for listener in listeners:
        why = _huawei_ip_group_admits(stack, listener.resource)
        if why:
            yield listener.resource, why


def _huawei_ip_group_admits(stack: Stack, listener: StackResource) -> str | None:
    """Why a listener's IP address group admits public callers (pulumi_huaweicloud DedicatedElb.Listener `ip_group`,
    `access_policy` white or black, `ip_group_enable`): "Whitelist: Only IP addresses in the IP address group can
    access the listener" and "Blacklist: IP addresses in the IP address group are denied" (support.huaweicloud.com
    usermanual-elb elb_ug_ip_0000, "Creating an IP Address Group", read 2026-12-07); an IP group's ip_list "[]
    indicates any IP address" (api-elb CreateIpGroup, read 2026-12-07)."""
    if not stack.known(listener.props, "ipGroup"):
        return "it has no IP address group (ipGroup)"
    enable = stack.known(listener.props, "ipGroupEnable")
    if _flag(enable) is False:
        return f"its access control is off (ipGroupEnable {_shown(enable)})"
    policy = str(stack.known(listener.props, "accessPolicy") or "").lower()
    if policy != "white":
        return ("its access policy is black, which admits every address the group does not list" if policy == "black"
                else "its access policy is unset (accessPolicy), so the pack cannot tell the group is a whitelist")
    groups = _linked_of(stack, listener, ("ipGroup",), HW_IP_GROUP)
    if not groups:
        return (f"its IP address group {stack.known(listener.props, 'ipGroup')} is not one this stack creates, so the "
                "pack cannot read it")
    for group in groups:
        addresses = [entry.get("ip") for entry in stack.items(stack.known(group.props, "ipLists"))]
        if not addresses:
            return f"its IP address group {group.name} is empty, which admits every address"
        public = _public_sources(addresses)
        if public:
            return f"its IP address group {group.name} admits {', '.join(public)}"
    return None


BALANCER_CALLERS: Mapping[str, Callable[[Stack, LoadBalancer, list[Listener]],
                                        Iterator[tuple[StackResource, str]]]] = {
    "aws": _aws_callers, "gcp": _gcp_callers, "alibaba": _alibaba_callers, "huawei": _huawei_callers}
"""What holds an internet-facing load balancer's callers, by cloud: (the resource at fault, why it admits the
public) for each listener, or the load balancer, that admits public callers."""


def _reads_secret(identity: ServerIdentity, secret: StackResource) -> bool:
    return secret.urn in identity.secrets or (
        "*" in identity.secrets and secret.resource_type in SECRET_TYPES[identity.cloud])


def _api_key_missing(stack: Stack) -> str | None:
    """Why the stack holds no API key its servers check: none stored, or none that the servers' identity may read
    (an unrelated secret named '*-api-key' is not theirs); None when every server identity reads one."""
    keys = [secret for secret in stack.of_type(*API_KEY_SECRETS) if secret.name.endswith(API_KEY_NAME_SUFFIX)]
    if not keys:
        return f"the stack stores no API key (no secret resource named '*{API_KEY_NAME_SUFFIX}')"
    names = ", ".join(sorted(key.name for key in keys))
    identities = server_identities(stack, _discard)
    if not identities:
        return f"the stack has no server identity that may read its API key ({names})"
    for identity in identities:
        if not any(_reads_secret(identity, key) for key in keys):
            return (f"the servers' identity {identity.resource.name} may read none of the stack's API keys "
                    f"({names})")
    return None


def check_public_api_key(stack: Stack, report_violation: ReportViolation) -> None:
    public = [*_public_openings(stack), *_public_listeners(stack)]
    if not public:
        raise NotApplicable("nothing in the stack admits a public source (no firewall rule, and no internet-facing "
                            "load balancer whose callers are not limited to private networks)")
    missing = _api_key_missing(stack)
    if missing is not None:
        for entry in public:
            report_violation(f"{entry.what}, and {missing}: {API_KEY_FIX}", entry.urn)


#### Fleets: no server with a public address ####

# Templates of managed groups. Loose servers keep the rules above: they may have a public address (single-server
# plans serve on their own), which the firewall rules guard.
SERVER_TEMPLATE_TYPES = (AWS_LAUNCH_TEMPLATE, AWS_LAUNCH_CONFIGURATION, *GCP_INSTANCE_TEMPLATES,
                         ALI_SCALING_CONFIGURATION, *ALI_LAUNCH_TEMPLATES, HW_AS_CONFIGURATION)
NO_PUBLIC_ADDRESS_FIX = "a fleet's servers have no public address: the load balancer is their only public endpoint"


def _aws_template_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    interfaces = [nic for nic in _items(props.get("networkInterfaces")) if isinstance(nic, Mapping)]
    if not interfaces:
        report_violation("the launch template does not say whether its servers get a public address (no "
                         "networkInterfaces), so the subnet's default decides: add a network interface with "
                         f"associatePublicIpAddress false (and the security groups there); {NO_PUBLIC_ADDRESS_FIX}")
    for index, nic in enumerate(interfaces):
        public = _flag(nic.get("associatePublicIpAddress"))
        if public is not False:
            what = "gets a public address" if public else "leaves the public address to the subnet's default"
            report_violation(f"network interface {index} of the launch template {what} (associatePublicIpAddress "
                             f"is {nic.get('associatePublicIpAddress', 'unset')}): set it to false; "
                             f"{NO_PUBLIC_ADDRESS_FIX}")
        _no_ipv6(nic, f"network interface {index} of the launch template", report_violation)


def _no_ipv6(nic: Mapping[str, Any], what: str, report_violation: ReportViolation) -> None:
    """IPv6 addresses are globally routable: an interface that gets one has a public address."""
    count = nic.get("ipv6AddressCount")
    if (count is not None and _integer(count) != 0) or _items(nic.get("ipv6Addresses")) or (
            nic.get("ipv6PrefixCount") is not None and _integer(nic.get("ipv6PrefixCount")) != 0):
        report_violation(f"{what} gets IPv6 addresses, which are public: remove them; {NO_PUBLIC_ADDRESS_FIX}")


def _aws_launch_configuration_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("associatePublicIpAddress") is not False:
        report_violation("the launch configuration does not refuse a public address (associatePublicIpAddress is "
                         f"{props.get('associatePublicIpAddress', 'unset')}, so the subnet's default decides): set it "
                         f"to false; {NO_PUBLIC_ADDRESS_FIX}")


def _gcp_template_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for index, nic in enumerate(_items(props.get("networkInterfaces"))):
        if _items(nic.get("accessConfigs")):
            report_violation(f"network interface {index} of the template has an access config, which gives each "
                             f"server an external IPv4 address: remove accessConfigs; {NO_PUBLIC_ADDRESS_FIX}")
        if _items(nic.get("ipv6AccessConfigs")):
            report_violation(f"network interface {index} of the template has an IPv6 access config, which gives "
                             f"each server an external IPv6 address: remove ipv6AccessConfigs; {NO_PUBLIC_ADDRESS_FIX}")


def _alibaba_template_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """ECS gives a server in a VPC a public address when its outbound internet bandwidth is above 0."""
    bandwidth = props.get("internetMaxBandwidthOut")
    if bandwidth is not None and _integer(bandwidth) != 0:
        report_violation(f"internetMaxBandwidthOut is {_shown(bandwidth)}, which gives each server a public address: "
                         f"set it to 0 (servers reach the internet through the NAT gateway); {NO_PUBLIC_ADDRESS_FIX}")


def _huawei_configuration_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if (props.get("instanceConfig") or {}).get("publicIp"):
        report_violation("instanceConfig.publicIp gives each server an elastic IP: remove it (servers reach the "
                         f"internet through the NAT gateway); {NO_PUBLIC_ADDRESS_FIX}")


def _huawei_group_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for index, network in enumerate(_items(props.get("networks"))):
        if network.get("ipv6BandwidthId"):
            report_violation(f"network {index} of the AS group gives each server IPv6 bandwidth, a public IPv6 "
                             f"address: remove ipv6BandwidthId; {NO_PUBLIC_ADDRESS_FIX}")


_PUBLIC_ADDRESS: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_LAUNCH_TEMPLATE: _aws_template_address,
    AWS_LAUNCH_CONFIGURATION: _aws_launch_configuration_address,
    **dict.fromkeys(GCP_INSTANCE_TEMPLATES, _gcp_template_address),
    ALI_SCALING_CONFIGURATION: _alibaba_template_address,
    **dict.fromkeys(ALI_LAUNCH_TEMPLATES, _alibaba_template_address),
    HW_AS_CONFIGURATION: _huawei_configuration_address,
    HW_AS_GROUP: _huawei_group_address,
}


def check_no_public_address(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _PUBLIC_ADDRESS.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


#### Fleets: the load balancer listens with HTTPS (TLS 1.2 or newer) and redirects plain HTTP ####

# ELB security policies admitting TLS 1.2 or newer only, by AWS's naming (docs.aws.amazon.com, "Security policies
# for your Application Load Balancer"): ELBSecurityPolicy-TLS13-1-2-2021-06 (and its -Res, -Ext1, -Ext2, -FIPS,
# -PQ variants), -TLS13-1-3-*, -TLS-1-2-2017-01, -TLS-1-2-Ext-2018-06, -FS-1-2-*. ELBSecurityPolicy-2016-08 (the
# API's default), -TLS13-1-0-*, -TLS13-1-1-*, -TLS-1-1-*, -FS-2018-06 and -FS-1-1-* admit older TLS.
AWS_TLS12_POLICY = re.compile(r"ELBSecurityPolicy-(TLS13|TLS|FS)-1-[23](-[A-Za-z0-9]+)*")
AWS_DEFAULT_TLS_POLICY = "ELBSecurityPolicy-2016-08"
# Alibaba ALB's system TLS policies (alibabacloud.com, "TLS security policies"); the default is tls_cipher_policy_1_0.
ALI_TLS12_POLICIES = {"tls_cipher_policy_1_2", "tls_cipher_policy_1_2_strict", "tls_cipher_policy_1_2_strict_with_1_3"}
ALI_SYSTEM_POLICY_PREFIX = "tls_cipher_policy_"
# Huawei dedicated ELB's TLS policies (pulumi_huaweicloud DedicatedElb.Listener.tls_ciphers_policy, and
# support.huaweicloud.com "TLS Security Policy"); the default is tls-1-0.
HW_TLS12_POLICIES = {"tls-1-2", "tls-1-2-strict", "tls-1-2-fs", "tls-1-2-fs-with-1-3", "tls-1-2-strict-no-cbc"}
GCP_TLS12_VERSIONS = {"TLS_1_2", "TLS_1_3"}
TLS12_PROTOCOLS = {"TLSv1.2", "TLSv1.3"}
LISTENER_FIX = (f"a load balancer listens with HTTPS on {HTTPS_PORT} (TLS 1.2 or newer) and with HTTP on "
                f"{REDIRECT_PORT} only to redirect to HTTPS")


def _listener_port(protocol: str, port: Any, report_violation: ReportViolation) -> None:
    wanted = HTTPS_PORT if protocol == "HTTPS" else REDIRECT_PORT
    if _integer(port) != wanted:
        report_violation(f"the {protocol} listener is on port {_shown(port) if port is not None else 'unset'}: "
                         f"{LISTENER_FIX}")


def _other_protocol(protocol: str, report_violation: ReportViolation) -> None:
    report_violation(f"the listener's protocol is {protocol or 'unset'}: {LISTENER_FIX}")


def _aws_redirects_to_https(action: Any) -> bool:
    return (isinstance(action, Mapping) and str(action.get("type")).lower() == "redirect"
            and str((action.get("redirect") or {}).get("protocol")).upper() == "HTTPS")


def _aws_listener(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    protocol = str(props.get("protocol") or "HTTP").upper()  # an ALB listener's default protocol is HTTP
    if protocol not in ("HTTPS", "HTTP"):
        _other_protocol(protocol, report_violation)
        return
    _listener_port(protocol, props.get("port"), report_violation)
    if protocol == "HTTPS":
        policy = props.get("sslPolicy")
        if not AWS_TLS12_POLICY.fullmatch(str(policy or "")):
            shown = policy or f"unset (the API's default, {AWS_DEFAULT_TLS_POLICY})"
            report_violation(f"the HTTPS listener's TLS policy is {shown}, which the pack does not know to refuse "
                             "TLS before 1.2: set sslPolicy to ELBSecurityPolicy-TLS13-1-2-2021-06 (or another "
                             "ELBSecurityPolicy-TLS13-1-2-*, -TLS13-1-3-*, -TLS-1-2-* or -FS-1-2-* policy)")
        return
    actions = _items(props.get("defaultActions"))
    if not actions or not all(_aws_redirects_to_https(action) for action in actions):
        kinds = ", ".join(sorted({str((a or {}).get("type")) for a in actions})) or "none"
        report_violation(f"the HTTP listener's default actions ({kinds}) do not only redirect to HTTPS, so plain "
                         "HTTP reaches the servers: give it one redirect action with protocol HTTPS")


def _alibaba_listener(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    protocol = str(props.get("listenerProtocol") or "").upper()
    if protocol not in ("HTTPS", "HTTP"):
        _other_protocol(protocol, report_violation)
        return
    _listener_port(protocol, props.get("listenerPort"), report_violation)
    policy = str(props.get("securityPolicyId") or "")
    if protocol == "HTTPS" and (not policy or policy.startswith(ALI_SYSTEM_POLICY_PREFIX)) and (
            policy not in ALI_TLS12_POLICIES):
        shown = policy or "unset (ALB's default, tls_cipher_policy_1_0)"
        report_violation(f"the HTTPS listener's TLS policy is {shown}, which admits TLS before 1.2: set "
                         "securityPolicyId to tls_cipher_policy_1_2 (or _1_2_strict, _1_2_strict_with_1_3, or a "
                         "custom alb.SecurityPolicy of TLSv1.2 and TLSv1.3)")
    # A custom policy (an id) is read where it is defined: load-balancer-https-front-ends.


def _huawei_listener(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    protocol = str(props.get("protocol") or "").upper()
    if protocol not in ("HTTPS", "HTTP"):
        _other_protocol(protocol, report_violation)
        return
    _listener_port(protocol, props.get("protocolPort"), report_violation)
    if protocol == "HTTPS" and not props.get("securityPolicyId") and (
            props.get("tlsCiphersPolicy") not in HW_TLS12_POLICIES):
        shown = props.get("tlsCiphersPolicy") or "unset (ELB's default, tls-1-0)"
        report_violation(f"the HTTPS listener's TLS policy is {shown}, which admits TLS before 1.2: set "
                         "tlsCiphersPolicy to tls-1-2 (or tls-1-2-strict, tls-1-2-fs, tls-1-2-fs-with-1-3, "
                         "tls-1-2-strict-no-cbc, or a custom DedicatedElb.SecurityPolicy of TLSv1.2 and TLSv1.3)")
    if protocol == "HTTP" and props.get("defaultPoolId"):
        report_violation("the HTTP listener forwards plain HTTP to a backend server group (defaultPoolId): remove "
                         "it and redirect to the HTTPS listener (an l7policy REDIRECT_TO_LISTENER)")


def _gcp_forwarding_ports(props: Mapping[str, Any]) -> list[_Span]:
    if props.get("allPorts") is True:
        return [_Span(*ALL_PORTS)]
    texts = _items(props.get("ports")) or ([props["portRange"]] if props.get("portRange") is not None else [])
    return _port_texts(texts) if texts else [_Span(*ALL_PORTS, unread="no portRange")]


def _gcp_forwarding_rule(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if not props.get("target"):
        report_violation("the forwarding rule has no target proxy, so it passes traffic to its backends as it comes "
                         "(no HTTPS at the load balancer): forward to a target HTTPS proxy")
    for span in _gcp_forwarding_ports(props):
        if span.unread or span.low != span.high or span.low not in LISTENER_PORTS:
            shown = span.unread or (f"port {span.low}" if span.low == span.high else f"ports {span.low}-{span.high}")
            report_violation(f"the forwarding rule listens on {shown}: {LISTENER_FIX}")


def _gcp_ssl_policy(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    version = props.get("minTlsVersion")
    if version not in GCP_TLS12_VERSIONS:
        shown = version or "unset (Google's default, TLS_1_0)"
        report_violation(f"the SSL policy's minTlsVersion is {shown}: set it to TLS_1_2")


def _tls_versions(key: str) -> Callable[[Mapping[str, Any], ReportViolation], None]:
    def check(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
        versions = {str(v) for v in _items(props.get(key))}
        if not versions or not versions <= TLS12_PROTOCOLS:
            report_violation(f"the TLS policy admits {', '.join(sorted(versions)) or 'unset versions'} ({key}): "
                             "admit TLSv1.2 and TLSv1.3 only")
    return check


def _unread_listener(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    report_violation("this load balancer's listeners are not read by the pack (it reads AWS ALB listeners, Google "
                     "Cloud forwarding rules and target proxies, Alibaba ALB listeners and Huawei dedicated ELB "
                     f"listeners), so they count as public listeners it cannot check: {LISTENER_FIX}, on one of those")


_LISTENERS: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    **dict.fromkeys(AWS_LISTENERS, _aws_listener),
    **dict.fromkeys(GCP_FORWARDING_RULES, _gcp_forwarding_rule),
    **dict.fromkeys(GCP_SSL_POLICIES, _gcp_ssl_policy),
    ALI_LISTENER: _alibaba_listener,
    ALI_TLS_POLICY: _tls_versions("tlsVersions"),
    HW_LISTENER: _huawei_listener,
    HW_TLS_POLICY: _tls_versions("protocols"),
    **dict.fromkeys(UNREAD_LISTENER_TYPES, _unread_listener),
}


def check_listeners(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _LISTENERS.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


#### Fleets: the load balancer forwards to a serving port and checks its health there ####

HEALTH_FIX = "check the serving health path (the plan's serving.health_path) over HTTP on the serving port"


def _serving(port: Any, ports: tuple[int, ...]) -> bool:
    return _integer(port) in ports


def _http(protocol: Any, default: str = "HTTP") -> bool:
    return str(protocol or default).upper() in ("HTTP", "HTTPS", "HTTP2")


def _health_path(path: Any, setting: str, report_violation: ReportViolation) -> None:
    if not path or path == "/":
        report_violation(f"the health check asks for {path or 'the default path, /'} ({setting}), which answers "
                         f"before the model is loaded: {HEALTH_FIX}")


def _aws_target_group(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    if not _serving(props.get("port"), ports):
        report_violation(f"the target group forwards to port {_shown(props.get('port'))}, not a serving port "
                         f"({', '.join(map(str, ports))})")
    check = props.get("healthCheck") or {}
    if check.get("enabled") is False or not _http(check.get("protocol")):
        state = "off" if check.get("enabled") is False else "not HTTP"
        report_violation(f"the target group's health check is {state}: {HEALTH_FIX}")
        return
    _health_path(check.get("path"), "healthCheck.path", report_violation)
    port = check.get("port")
    if port not in (None, "traffic-port") and not _serving(port, ports):
        report_violation(f"the health check probes port {_shown(port)} (healthCheck.port): use traffic-port")


def _gcp_health_check(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    blocks = [(key, props[key]) for key in ("httpHealthCheck", "httpsHealthCheck", "http2HealthCheck")
              if props.get(key)]
    if not blocks:
        report_violation(f"the health check is not HTTP (no httpHealthCheck, httpsHealthCheck or http2HealthCheck): "
                         f"{HEALTH_FIX}")
        return
    for key, block in blocks:
        _health_path(block.get("requestPath"), f"{key}.requestPath", report_violation)
        specification = block.get("portSpecification")
        if specification in ("USE_SERVING_PORT", "USE_NAMED_PORT"):
            continue  # the backend's named port, which load-balancer-backends-on-serving-port reads on the group
        if not _serving(block.get("port", 80), ports):
            report_violation(f"the health check probes port {_shown(block.get('port', '80 (the default)'))} "
                             f"({key}.port): use the serving port, or portSpecification USE_SERVING_PORT")


def _gcp_legacy_health_check(props: Mapping[str, Any], ports: tuple[int, ...],
                             report_violation: ReportViolation) -> None:
    _health_path(props.get("requestPath"), "requestPath", report_violation)
    if not _serving(props.get("port", 80), ports):
        report_violation(f"the health check probes port {_shown(props.get('port', '80 (the default)'))}: use the "
                         "serving port")


def _gcp_backend_service(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    if not _items(props.get("healthChecks")):
        report_violation(f"the backend service has no health check (healthChecks): {HEALTH_FIX}")


def _gcp_group_ports(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    for named in _items(props.get("namedPorts")):
        if not _serving(named.get("port"), ports):
            report_violation(f"named port {named.get('name')} is {_shown(named.get('port'))}, not a serving port "
                             f"({', '.join(map(str, ports))}): the load balancer would send requests there")


def _alibaba_server_group(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    check = props.get("healthCheckConfig") or {}
    if check.get("healthCheckEnabled") is not True or not _http(check.get("healthCheckProtocol")):
        state = "not HTTP" if check.get("healthCheckEnabled") is True else "off"
        report_violation(f"the server group's health check is {state} (healthCheckConfig): {HEALTH_FIX}")
        return
    _health_path(check.get("healthCheckPath"), "healthCheckConfig.healthCheckPath", report_violation)
    port = check.get("healthCheckConnectPort")
    if port is not None and _integer(port) != 0 and not _serving(port, ports):
        report_violation(f"the health check probes port {_shown(port)} (healthCheckConfig.healthCheckConnectPort): "
                         "use 0 (the backend's port)")


def _backend_port(port: Any, setting: str, ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    if not _serving(port, ports):
        report_violation(f"the load balancer sends requests to port {_shown(port)} ({setting}), not a serving port "
                         f"({', '.join(map(str, ports))})")


def _backend_ports(key: str, port_key: str) -> Callable[[Mapping[str, Any], tuple[int, ...], ReportViolation], None]:
    """A group's registrations with a load balancer, each with the port its servers receive requests on."""
    def check(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
        for entry in _items(props.get(key)):
            _backend_port(entry.get(port_key), f"{key}.{port_key}", ports, report_violation)
    return check


def _huawei_monitor(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    if props.get("enabled") is False or not _http(props.get("protocol"), default=""):
        state = "off" if props.get("enabled") is False else "not HTTP"
        report_violation(f"the health check is {state}: {HEALTH_FIX}")
        return
    _health_path(props.get("urlPath"), "urlPath", report_violation)
    if props.get("port") is not None and not _serving(props.get("port"), ports):
        report_violation(f"the health check probes port {_shown(props.get('port'))}: leave port unset (the "
                         "backend's port)")


_BACKENDS: Mapping[str, Callable[[Mapping[str, Any], tuple[int, ...], ReportViolation], None]] = {
    **dict.fromkeys(AWS_TARGET_GROUPS, _aws_target_group),
    **dict.fromkeys(GCP_HEALTH_CHECKS, _gcp_health_check),
    **dict.fromkeys(GCP_LEGACY_HEALTH_CHECKS, _gcp_legacy_health_check),
    **dict.fromkeys(GCP_BACKEND_SERVICES, _gcp_backend_service),
    GCP_REGION_GROUP_MANAGER: _gcp_group_ports,
    GCP_ZONE_GROUP_MANAGER: _gcp_group_ports,
    ALI_SERVER_GROUP: _alibaba_server_group,
    ALI_SCALING_GROUP: _backend_ports("albServerGroups", "port"),
    ALI_GROUP_ATTACHMENT: lambda props, ports, report: _backend_port(props.get("port"), "port", ports, report),
    HW_MONITOR: _huawei_monitor,
    HW_AS_GROUP: _backend_ports("lbaasListeners", "protocolPort"),
}


def check_backends(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _BACKENDS.get(resource.resource_type)
    if check is not None:
        check(resource.props, serving_ports(resource.config), report_violation)


#### Fleets, as a stack: managed groups and the load balancers in front of them ####

_IDENTIFIERS = ("id", "arn", "selfLink", "selfLinkUnique", "instanceGroup", "name")


def _identifiers(stack: Stack, resource: StackResource) -> set[str]:
    """What other resources may call this one by: its ARN, self link, name (ids are no property of a resource;
    inputs taken from another resource are related by property dependency first, see `_linked`)."""
    found = set()
    for key in _IDENTIFIERS:
        value = stack.known(resource.props, key)
        if isinstance(value, str) and value:
            found.add(value)
    return found


def _names_in(stack: Stack, value: Any, identifiers: set[str]) -> bool:
    """Whether a (nested) value names one of the identifiers: equal, or one a path that ends in the other
    ("sg-1" and arn:...:security-group/sg-1; a Google self link and its id)."""
    if isinstance(value, str):
        return bool(value) and any(value == i or value.endswith(f"/{i}") or i.endswith(f"/{value}")
                                   for i in identifiers)
    if isinstance(value, Mapping):
        return any(_names_in(stack, stack.known(value, key), identifiers) for key in value)
    if isinstance(value, Sequence):
        return any(_names_in(stack, item, identifiers) for item in stack.items(value))
    return False


def _linked(stack: Stack, source: StackResource, props: Sequence[str], target: StackResource) -> bool:
    """Whether one of `source`'s properties comes from, or names, `target`."""
    for prop in props:
        if target.urn in {d.urn for d in source.property_dependencies.get(prop, [])}:
            return True
    identifiers = _identifiers(stack, target)
    return bool(identifiers) and any(_names_in(stack, stack.known(source.props, p), identifiers) for p in props)


def _linked_of(stack: Stack, source: StackResource, props: Sequence[str], *types: str) -> list[StackResource]:
    return [target for target in stack.of_type(*types) if _linked(stack, source, props, target)]


def _referring(stack: Stack, target: StackResource, props: Sequence[str], *types: str) -> list[StackResource]:
    return [source for source in stack.of_type(*types) if _linked(stack, source, props, target)]


def _listed(stack: Stack, props: Mapping[str, Any], *keys: str) -> list[Any]:
    """The known items of the first of `keys` that is set."""
    for key in keys:
        value = stack.known(props, key)
        if value:
            return stack.items(value)
    return []


@dataclass
class ManagedGroup:
    """A managed group of servers: its templates, the zones it spreads over, its size."""

    cloud: str
    resource: StackResource
    templates: list[StackResource]
    zones: set[str]
    unread_zones: list[str]
    """What about its placement the pack cannot read (a subnet the stack does not create ...)."""
    min_size: int | None
    max_size: int | None


def _subnet_zones(stack: Stack, group: StackResource, keys: Sequence[str], subnet_type: str,
                  zone_key: str) -> tuple[set[str], list[str]]:
    """Zones of the subnets a group names; a subnet the stack does not create has a zone the pack cannot read."""
    subnets = _linked_of(stack, group, keys, subnet_type)
    zones, unread = set(), []
    for subnet in subnets:
        zone = stack.known(subnet.props, zone_key)
        if zone:
            zones.add(str(zone))
        else:
            unread.append(f"the zone of subnet {subnet.name} ({zone_key} unset)")
    listed = _listed(stack, group.props, *keys)
    if len(listed) > len(subnets):
        unread.append(f"{len(listed) - len(subnets)} subnet(s) that this stack does not create ({keys[0]})")
    return zones, unread


def _aws_groups(stack: Stack) -> Iterator[ManagedGroup]:
    for group in stack.of_type(AWS_AUTOSCALING_GROUP):
        templates = _linked_of(stack, group, ("launchTemplate", "mixedInstancesPolicy"), AWS_LAUNCH_TEMPLATE)
        templates += _linked_of(stack, group, ("launchConfiguration",), AWS_LAUNCH_CONFIGURATION)
        if _listed(stack, group.props, "vpcZoneIdentifiers"):
            zones, unread = _subnet_zones(stack, group, ("vpcZoneIdentifiers",), AWS_SUBNET, "availabilityZone")
        else:
            zones, unread = {str(z) for z in _listed(stack, group.props, "availabilityZones")}, []
        yield ManagedGroup("aws", group, templates, zones, unread, _integer(stack.known(group.props, "minSize")),
                           _integer(stack.known(group.props, "maxSize")))


def _gcp_groups(stack: Stack) -> Iterator[ManagedGroup]:
    for group in stack.of_type(GCP_REGION_GROUP_MANAGER, GCP_ZONE_GROUP_MANAGER):
        templates = _linked_of(stack, group, ("versions", "instanceTemplate"), *GCP_INSTANCE_TEMPLATES)
        unread = []
        if group.resource_type == GCP_ZONE_GROUP_MANAGER:
            zones = {_last_segment(stack.known(group.props, "zone"))}
        else:
            zones = {_last_segment(z) for z in _listed(stack, group.props, "distributionPolicyZones")}
            if not zones:
                unread.append("distributionPolicyZones is unset, so Google picks the zones: list them")
        size = _integer(stack.known(group.props, "targetSize"))
        low, high = size, size
        for autoscaler in _referring(stack, group, ("target",), *GCP_AUTOSCALERS):
            policy = stack.known(autoscaler.props, "autoscalingPolicy") or {}
            low, high = _integer(policy.get("minReplicas")), _integer(policy.get("maxReplicas"))
        yield ManagedGroup("gcp", group, templates, zones, unread, low, high)


def _alibaba_groups(stack: Stack) -> Iterator[ManagedGroup]:
    for group in stack.of_type(ALI_SCALING_GROUP):
        templates = _referring(stack, group, ("scalingGroupId",), ALI_SCALING_CONFIGURATION)
        templates += _linked_of(stack, group, ("launchTemplateId",), *ALI_LAUNCH_TEMPLATES)
        zones, unread = _subnet_zones(stack, group, ("vswitchIds", "vswitchId"), ALI_VSWITCH, "zoneId")
        yield ManagedGroup("alibaba", group, templates, zones, unread, _integer(stack.known(group.props, "minSize")),
                           _integer(stack.known(group.props, "maxSize")))


def _huawei_groups(stack: Stack) -> Iterator[ManagedGroup]:
    for group in stack.of_type(HW_AS_GROUP):
        templates = _linked_of(stack, group, ("scalingConfigurationId",), HW_AS_CONFIGURATION)
        zones = {str(z) for z in _listed(stack, group.props, "availabilityZones", "availableZones")}
        unread = [] if zones else ["availabilityZones is unset, so Auto Scaling puts every server in one zone it "
                                   "picks: list the zones"]
        yield ManagedGroup("huawei", group, templates, zones, unread,
                           _integer(stack.known(group.props, "minInstanceNumber")),
                           _integer(stack.known(group.props, "maxInstanceNumber")))


def managed_groups(stack: Stack) -> list[ManagedGroup]:
    """Every managed group in the stack, on every cloud."""
    return [*_aws_groups(stack), *_gcp_groups(stack), *_alibaba_groups(stack), *_huawei_groups(stack)]


@dataclass
class HealthCheck:
    resource: StackResource
    path: str | None
    port: int | str | None
    """A port number; "traffic-port" or "serving-port" for the port requests go to; None: the backend's port."""


@dataclass
class Backend:
    """Where a load balancer sends requests: a target group, backend service, server group or pool."""

    resource: StackResource
    health_checks: list[HealthCheck]
    groups: list[StackResource]
    """The managed groups whose servers it holds."""


@dataclass
class Listener:
    resource: StackResource
    port: int | None
    protocol: str
    redirects_to_https: bool
    """Plain HTTP that only redirects to HTTPS."""
    backends: list[Backend]
    tls_1_2: bool = False
    """HTTPS on 443 under a TLS 1.2+ policy that the pack reads: load-balancer-https-only finds nothing wrong with
    the listener or its TLS policies (Google Cloud: its proxies' SSL policies; Alibaba, Huawei: a custom policy)."""


def _passes_listener_checks(*resources: StackResource) -> bool:
    """Whether load-balancer-https-only finds nothing wrong with each of these listeners or TLS policies."""
    found: list[str] = []

    def collect(message: str, urn: str | None = None) -> None:
        found.append(message)

    for resource in resources:
        check_listeners(ResourceInput(resource.resource_type, resource.props), collect)
    return bool(resources) and not found


@dataclass
class LoadBalancer:
    cloud: str
    resource: StackResource
    """The load balancer (on Google Cloud, which has none as a resource, its first forwarding rule)."""
    internet_facing: bool
    listeners: list[Listener]

    @property
    def backends(self) -> list[Backend]:
        seen: dict[str, Backend] = {}
        for listener in self.listeners:
            for backend in listener.backends:
                seen.setdefault(backend.resource.urn, backend)
        return list(seen.values())


def _aws_backends(stack: Stack) -> list[Backend]:
    backends = []
    for group in stack.of_type(*AWS_TARGET_GROUPS):
        check = stack.known(group.props, "healthCheck") or {}
        health = [] if check.get("enabled") is False else [
            HealthCheck(group, check.get("path"), _integer(check.get("port")) or check.get("port") or "traffic-port")]
        members = _referring(stack, group, ("targetGroupArns", "trafficSources"), AWS_AUTOSCALING_GROUP)
        for attachment in _referring(stack, group, ("lbTargetGroupArn", "trafficSource"), *AWS_GROUP_ATTACHMENTS):
            members += _linked_of(stack, attachment, ("autoscalingGroupName",), AWS_AUTOSCALING_GROUP)
        backends.append(Backend(group, health, members))
    return backends


def _aws_load_balancers(stack: Stack, report_violation: ReportViolation) -> Iterator[LoadBalancer]:
    backends = _aws_backends(stack)
    for balancer in stack.of_type(*AWS_LOAD_BALANCERS):
        listeners = []
        for listener in _referring(stack, balancer, ("loadBalancerArn",), *AWS_LISTENERS):
            protocol = str(stack.known(listener.props, "protocol") or "HTTP").upper()
            rules = _referring(stack, listener, ("listenerArn",), *AWS_LISTENER_RULES)
            actions = stack.items(stack.known(listener.props, "defaultActions"))
            for rule in rules:
                rule_actions = stack.items(stack.known(rule.props, "actions"))
                actions += rule_actions
                if protocol == "HTTP" and not all(_aws_redirects_to_https(a) for a in rule_actions):
                    report_violation(f"listener rule {rule.name} of the HTTP listener {listener.name} does not only "
                                     "redirect to HTTPS, so plain HTTP reaches the servers: redirect, or move the rule "
                                     "to the HTTPS listener", rule.urn)
            forwards = [b for b in backends if any(_linked(stack, holder, ("defaultActions", "actions"), b.resource)
                                                   for holder in (listener, *rules))]
            listeners.append(Listener(listener, _integer(stack.known(listener.props, "port")), protocol,
                                      protocol == "HTTP" and bool(actions) and all(map(_aws_redirects_to_https,
                                                                                       actions)), forwards,
                                      protocol == "HTTPS" and _passes_listener_checks(listener)))
        yield LoadBalancer("aws", balancer, stack.known(balancer.props, "internal") is not True, listeners)


def _gcp_health(stack: Stack, check: StackResource) -> HealthCheck:
    if check.resource_type in GCP_LEGACY_HEALTH_CHECKS:
        return HealthCheck(check, stack.known(check.props, "requestPath"), _integer(stack.known(check.props, "port")))
    for key in ("httpHealthCheck", "httpsHealthCheck", "http2HealthCheck"):
        block = stack.known(check.props, key)
        if block:
            served = block.get("portSpecification") in ("USE_SERVING_PORT", "USE_NAMED_PORT")
            return HealthCheck(check, block.get("requestPath"),
                               "serving-port" if served else _integer(block.get("port", 80)))
    return HealthCheck(check, None, None)


def _gcp_backends(stack: Stack, report_violation: ReportViolation) -> list[Backend]:
    backends = []
    for service in stack.of_type(*GCP_BACKEND_SERVICES):
        checks = _linked_of(stack, service, ("healthChecks",), *GCP_HEALTH_CHECKS, *GCP_LEGACY_HEALTH_CHECKS)
        if _listed(stack, service.props, "healthChecks") and not checks:
            report_violation(f"backend service {service.name} names a health check that this stack does not create, "
                             f"so the pack cannot read it: {HEALTH_FIX}, with a health check of this stack",
                             service.urn)
        groups = _linked_of(stack, service, ("backends",), GCP_REGION_GROUP_MANAGER, GCP_ZONE_GROUP_MANAGER)
        backends.append(Backend(service, [_gcp_health(stack, c) for c in checks], groups))
    return backends


def _gcp_redirect_only(stack: Stack, url_map: StackResource) -> bool:
    redirect = stack.known(url_map.props, "defaultUrlRedirect") or {}
    routes = [key for key in ("defaultService", "pathMatchers", "hostRules", "defaultRouteAction")
              if stack.known(url_map.props, key)]
    return redirect.get("httpsRedirect") is True and not routes


GCP_ARMOR_POLICIES = ("gcp:compute/securityPolicy:SecurityPolicy",
                      "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy")


def _gcp_one_armor(stack: Stack, url_map: StackResource, mapped: list[Backend],
                   report_violation: ReportViolation) -> None:
    """The backend services one URL map routes to (a canary's weighted backend services) share one Cloud Armor policy:
    callers one of them refuses must not reach the other."""
    armors = {b.resource.name: sorted(a.urn for a in _linked_of(stack, b.resource, ("securityPolicy",),
                                                               *GCP_ARMOR_POLICIES))
              or ([str(stack.known(b.resource.props, "securityPolicy"))]
                  if stack.known(b.resource.props, "securityPolicy") else []) for b in mapped}
    if len({tuple(urns) for urns in armors.values()}) > 1:
        shown = ", ".join(f"{name}: {'a Cloud Armor policy' if urns else 'none'}" for name, urns in armors.items())
        report_violation(f"URL map {url_map.name} routes to backend services under different Cloud Armor policies "
                         f"({shown}), so callers one refuses reach the other: give every backend service of the URL "
                         "map the same securityPolicy", url_map.urn)


def _gcp_listener(stack: Stack, rule: StackResource, backends: list[Backend],
                  report_violation: ReportViolation) -> Listener:
    text = stack.known(rule.props, "portRange") or next(iter(stack.items(stack.known(rule.props, "ports"))), None)
    span = _port_texts([text])[0] if text is not None else None
    port = span.low if span is not None and span.low == span.high and not span.unread else None
    https = _linked_of(stack, rule, ("target",), *GCP_HTTPS_PROXIES)
    http = _linked_of(stack, rule, ("target",), *GCP_HTTP_PROXIES)
    forwards: list[Backend] = []
    redirects = False
    tls_1_2 = bool(https) and _passes_listener_checks(rule)
    for proxy in https:
        policies = _linked_of(stack, proxy, ("sslPolicy",), *GCP_SSL_POLICIES)
        tls_1_2 = tls_1_2 and _passes_listener_checks(*policies)
        if not stack.known(proxy.props, "sslPolicy"):
            report_violation(f"target HTTPS proxy {proxy.name} has no SSL policy, so Google's default applies, which "
                             "admits TLS 1.0: give it an SSL policy with minTlsVersion TLS_1_2", proxy.urn)
        elif not policies:
            report_violation(f"target HTTPS proxy {proxy.name} names an SSL policy that this stack does not create, "
                             "so the pack cannot read its TLS versions: use an SSL policy of this stack with "
                             "minTlsVersion TLS_1_2", proxy.urn)
        for url_map in _linked_of(stack, proxy, ("urlMap",), *GCP_URL_MAPS):
            mapped = [b for b in backends if _linked(
                stack, url_map, ("defaultService", "pathMatchers", "hostRules", "defaultRouteAction"), b.resource)]
            _gcp_one_armor(stack, url_map, mapped, report_violation)
            forwards += mapped
    for proxy in http:
        maps = _linked_of(stack, proxy, ("urlMap",), *GCP_URL_MAPS)
        redirects = bool(maps) and all(_gcp_redirect_only(stack, m) for m in maps)
        if not redirects:
            report_violation(f"target HTTP proxy {proxy.name} serves a URL map that does not only redirect to HTTPS, "
                             "so plain HTTP reaches the backends: give it a URL map whose defaultUrlRedirect has "
                             "httpsRedirect true (and nothing else)", proxy.urn)
    if port == HTTPS_PORT and not https:
        report_violation(f"forwarding rule {rule.name} listens on {HTTPS_PORT} without a target HTTPS proxy of this "
                         "stack, so the pack cannot see HTTPS there: forward to a target HTTPS proxy", rule.urn)
    if port == REDIRECT_PORT and not http:
        report_violation(f"forwarding rule {rule.name} listens on {REDIRECT_PORT} without a target HTTP proxy of "
                         "this stack that only redirects: forward to one whose URL map redirects to HTTPS", rule.urn)
    return Listener(rule, port, "HTTPS" if https else "HTTP" if http else "?", redirects and not https, forwards,
                    tls_1_2)


_GCP_EXTERNAL = {"EXTERNAL", "EXTERNAL_MANAGED"}


def _gcp_load_balancers(stack: Stack, report_violation: ReportViolation) -> Iterator[LoadBalancer]:
    """Google Cloud's load balancer is no resource: its forwarding rules, grouped by the address they share."""
    backends = _gcp_backends(stack, report_violation)
    by_address: dict[str, list[StackResource]] = {}
    for rule in stack.of_type(*GCP_FORWARDING_RULES):
        addresses = [d.urn for d in rule.property_dependencies.get("ipAddress", [])]
        key = addresses[0] if addresses else str(stack.known(rule.props, "ipAddress") or rule.urn)
        by_address.setdefault(key, []).append(rule)
    for rules in by_address.values():
        listeners = [_gcp_listener(stack, rule, backends, report_violation) for rule in rules]
        scheme = str(stack.known(rules[0].props, "loadBalancingScheme") or "EXTERNAL")
        yield LoadBalancer("gcp", rules[0], scheme in _GCP_EXTERNAL, listeners)


def _alibaba_backends(stack: Stack) -> list[Backend]:
    backends = []
    for server_group in stack.of_type(ALI_SERVER_GROUP):
        check = stack.known(server_group.props, "healthCheckConfig") or {}
        health = [HealthCheck(server_group, check.get("healthCheckPath"),
                              _integer(check.get("healthCheckConnectPort")) or None)
                  ] if check.get("healthCheckEnabled") is True else []
        groups = _referring(stack, server_group, ("albServerGroups",), ALI_SCALING_GROUP)
        for attachment in _referring(stack, server_group, ("albServerGroupId",), ALI_GROUP_ATTACHMENT):
            groups += _linked_of(stack, attachment, ("scalingGroupId",), ALI_SCALING_GROUP)
        backends.append(Backend(server_group, health, groups))
    return backends


def _alibaba_redirects_everything(stack: Stack, rule: StackResource) -> bool:
    """A rule that sends every request (path /*) to HTTPS."""
    actions = stack.items(stack.known(rule.props, "ruleActions"))
    conditions = stack.items(stack.known(rule.props, "ruleConditions"))
    redirects = any(str(a.get("type")).lower() == "redirect"
                    and str((a.get("redirectConfig") or {}).get("protocol")).upper() == "HTTPS" for a in actions)
    every_path = [c for c in conditions if str(c.get("type")).lower() == "path"
                  and "/*" in _items((c.get("pathConfig") or {}).get("values"))]
    return redirects and len(conditions) == len(every_path) == 1 and str(
        stack.known(rule.props, "direction") or "Request") == "Request"


def _alibaba_load_balancers(stack: Stack, report_violation: ReportViolation) -> Iterator[LoadBalancer]:
    backends = _alibaba_backends(stack)
    for balancer in stack.of_type(ALI_LOAD_BALANCER):
        listeners = []
        for listener in _referring(stack, balancer, ("loadBalancerId",), ALI_LISTENER):
            protocol = str(stack.known(listener.props, "listenerProtocol") or "").upper()
            rules = _referring(stack, listener, ("listenerId",), ALI_LISTENER_RULE)
            policy = str(stack.known(listener.props, "securityPolicyId") or "")
            custom = _linked_of(stack, listener, ("securityPolicyId",), ALI_TLS_POLICY)
            if protocol == "HTTPS" and policy and not policy.startswith(ALI_SYSTEM_POLICY_PREFIX) and not custom:
                report_violation(f"HTTPS listener {listener.name} uses TLS policy {policy}, which this stack does not "
                                 "create, so the pack cannot read its TLS versions: use tls_cipher_policy_1_2 or an "
                                 "alb.SecurityPolicy of this stack", listener.urn)
            redirects = protocol == "HTTP" and any(_alibaba_redirects_everything(stack, r) for r in rules)
            if protocol == "HTTP":
                for rule in rules:
                    if any(str(a.get("type")).lower() == "forwardgroup"
                           for a in stack.items(stack.known(rule.props, "ruleActions"))):
                        report_violation(f"forwarding rule {rule.name} of the HTTP listener {listener.name} forwards "
                                         "plain HTTP to servers: forward on the HTTPS listener only", rule.urn)
                if not redirects:
                    report_violation(f"HTTP listener {listener.name} has no rule that redirects every request (path "
                                     "/*) to HTTPS, so its default action forwards plain HTTP to the servers: add an "
                                     "alb.Rule with a Redirect action (protocol HTTPS) for path /*", listener.urn)
            forwards = [b for b in backends if any(_linked(stack, holder, ("defaultActions", "ruleActions"),
                                                           b.resource) for holder in (listener, *rules))]
            tls_1_2 = protocol == "HTTPS" and _passes_listener_checks(listener) and (
                not policy or policy.startswith(ALI_SYSTEM_POLICY_PREFIX) or _passes_listener_checks(*custom))
            listeners.append(Listener(listener, _integer(stack.known(listener.props, "listenerPort")), protocol,
                                      redirects, [] if redirects else forwards, tls_1_2))
        # "Internet" or "Intranet" (pulumi_alicloud alb.LoadBalancer address_type): anything but Intranet counts as
        # internet-facing (fail closed).
        internet = str(stack.known(balancer.props, "addressType") or "").lower() != "intranet"
        yield LoadBalancer("alibaba", balancer, internet, listeners)


def _huawei_backends(stack: Stack, report_violation: ReportViolation) -> list[Backend]:
    backends = []
    for pool in stack.of_type(HW_POOL):
        monitors = _referring(stack, pool, ("poolId",), HW_MONITOR)
        if not monitors:
            report_violation(f"backend server group {pool.name} has no health check (a DedicatedElb.Monitor for it): "
                             f"{HEALTH_FIX}", pool.urn)
        health = [HealthCheck(m, stack.known(m.props, "urlPath"), _integer(stack.known(m.props, "port")))
                  for m in monitors if stack.known(m.props, "enabled") is not False]
        backends.append(Backend(pool, health, _referring(stack, pool, ("lbaasListeners",), HW_AS_GROUP)))
    return backends


def _huawei_redirects(stack: Stack, policy: StackResource, https: list[StackResource]) -> bool:
    action = str(stack.known(policy.props, "action") or "REDIRECT_TO_POOL").upper()
    if action == "REDIRECT_TO_LISTENER":
        return any(_linked(stack, policy, ("redirectListenerId",), target) for target in https)
    config = stack.known(policy.props, "redirectUrlConfig") or {}
    return action == "REDIRECT_TO_URL" and str(config.get("protocol")).upper() == "HTTPS"


def _huawei_load_balancers(stack: Stack, report_violation: ReportViolation) -> Iterator[LoadBalancer]:
    backends = _huawei_backends(stack, report_violation)
    for balancer in stack.of_type(HW_LOAD_BALANCER):
        listeners = _referring(stack, balancer, ("loadbalancerId",), HW_LISTENER)
        https = [item for item in listeners if str(stack.known(item.props, "protocol")).upper() == "HTTPS"]
        views = []
        for listener in listeners:
            protocol = str(stack.known(listener.props, "protocol") or "").upper()
            policies = _referring(stack, listener, ("listenerId",), HW_L7_POLICY)
            custom = _linked_of(stack, listener, ("securityPolicyId",), HW_TLS_POLICY)
            if protocol == "HTTPS" and stack.known(listener.props, "securityPolicyId") and not custom:
                report_violation(f"HTTPS listener {listener.name} uses a TLS policy that this stack does not create, "
                                 "so the pack cannot read its TLS versions: use tlsCiphersPolicy tls-1-2 or a "
                                 "DedicatedElb.SecurityPolicy of this stack", listener.urn)
            redirects = protocol == "HTTP" and any(_huawei_redirects(stack, p, https) for p in policies)
            if protocol == "HTTP":
                for policy in policies:
                    if not _huawei_redirects(stack, policy, https):
                        report_violation(f"forwarding policy {policy.name} of the HTTP listener {listener.name} does "
                                         "not redirect to HTTPS, so plain HTTP reaches the servers: use "
                                         "REDIRECT_TO_LISTENER to the HTTPS listener", policy.urn)
                if not redirects:
                    report_violation(f"HTTP listener {listener.name} redirects nothing to HTTPS: add an l7policy "
                                     "REDIRECT_TO_LISTENER to the HTTPS listener", listener.urn)
            forwards = [b for b in backends if _linked(stack, listener, ("defaultPoolId",), b.resource)
                        or _linked(stack, b.resource, ("listenerId",), listener)
                        or any(_linked(stack, p, ("redirectPoolId", "redirectPoolsConfigs"), b.resource)
                               for p in policies)]
            tls_1_2 = protocol == "HTTPS" and _passes_listener_checks(listener) and (
                not stack.known(listener.props, "securityPolicyId") or _passes_listener_checks(*custom))
            views.append(Listener(listener, _integer(stack.known(listener.props, "protocolPort")), protocol,
                                  redirects, forwards, tls_1_2))
        internet = any(stack.known(balancer.props, key) for key in ("ipv4EipId", "iptype", "ipv6BandwidthId")) or bool(
            _referring(stack, balancer, ("portId",), HW_EIP_ASSOCIATE))
        yield LoadBalancer("huawei", balancer, internet, views)


def load_balancers(stack: Stack, report_violation: ReportViolation) -> list[LoadBalancer]:
    """Every load balancer in the stack with its listeners and backends; what does not hold up across resources
    (a proxy without an SSL policy, HTTP that does not only redirect, a pool without a health check) is reported."""
    return [*_aws_load_balancers(stack, report_violation), *_gcp_load_balancers(stack, report_violation),
            *_alibaba_load_balancers(stack, report_violation), *_huawei_load_balancers(stack, report_violation)]


def check_https_front_ends(stack: Stack, report_violation: ReportViolation) -> None:
    if not load_balancers(stack, report_violation) and not stack.of_type(HW_POOL, *GCP_BACKEND_SERVICES):
        raise NotApplicable("the stack has no load balancer")


#### Fleets, as a stack: only the load balancer listens publicly; the serving port admits it only ####

GCP_LOAD_BALANCER_RANGES = tuple(ipaddress.IPv4Network(n) for n in ("130.211.0.0/22", "35.191.0.0/16"))
"""Google's front ends and health checkers: an Application Load Balancer's requests to its backends, and its health
checks, come from these ranges (cloud.google.com/load-balancing/docs/health-checks, "Firewall rules")."""
SECURITY_GROUP_TYPES = (AWS_SECURITY_GROUP, AWS_DEFAULT_SECURITY_GROUP, ALI_SECURITY_GROUP, HW_SECURITY_GROUP)
# Where servers and templates name their security groups (the property holding them, as the engine relates them).
SERVER_FIREWALL_PROPS: Mapping[str, tuple[str, ...]] = {
    AWS_INSTANCE: ("vpcSecurityGroupIds", "securityGroups"),
    AWS_SPOT_INSTANCE_REQUEST: ("vpcSecurityGroupIds", "securityGroups"),
    AWS_LAUNCH_TEMPLATE: ("vpcSecurityGroupIds", "securityGroupNames", "networkInterfaces"),
    AWS_LAUNCH_CONFIGURATION: ("securityGroups",),
    ALI_INSTANCE: ("securityGroups",),
    ALI_SCALING_CONFIGURATION: ("securityGroupId", "securityGroupIds"),
    **dict.fromkeys(ALI_LAUNCH_TEMPLATES, ("securityGroupId", "securityGroupIds", "networkInterfaces")),
    HW_INSTANCE: ("securityGroupIds", "securityGroups"),
    HW_AS_CONFIGURATION: ("instanceConfig",),
    HW_AS_GROUP: ("securityGroups",),
}
NO_LOAD_BALANCER_FIREWALL = {
    "gcp": "Google Cloud's load balancers take no firewall rule (Google's front ends terminate HTTPS; Cloud Armor "
           "limits callers), so this rule opens the port on servers",
    "huawei": "a Huawei dedicated load balancer takes no security group (its listeners' IP groups limit callers), "
              "so this rule opens the port on servers",
}


def _firewalls_of(stack: Stack, users: Iterable[StackResource]) -> set[str]:
    """URNs of the security groups that servers, templates or groups name."""
    return {group.urn for user in users for group in _linked_of(
        stack, user, SERVER_FIREWALL_PROPS.get(user.resource_type, ()), *SECURITY_GROUP_TYPES)}


def _owners(stack: Stack, rule: StackResource) -> list[StackResource]:
    """The security groups an ingress rule belongs to (an AWS group's inline rules: the group itself)."""
    if rule.resource_type in SECURITY_GROUP_TYPES:
        return [rule]
    return _linked_of(stack, rule, ("securityGroupId",), *SECURITY_GROUP_TYPES)


def _opened(stack: Stack, resource: StackResource) -> list[Opening]:
    try:
        return openings(resource.resource_type, resource.props)
    except stack.unknown_errors:  # a source computed from another resource (a network's range): checked at `up`
        return []


def _cloud_of(resource_type: str) -> str:
    return PROVIDER_PACKAGES.get(resource_type.split(":", 1)[0], "")


def _listener_ports_on_load_balancers(stack: Stack, serving: tuple[int, ...],
                                      report_violation: ReportViolation) -> bool:
    """A rule that opens 443 or 80 to a public source is on a load balancer's own firewall, which no server uses."""
    balancers = {g.urn for lb in stack.of_type(*AWS_LOAD_BALANCERS)
                 for g in _linked_of(stack, lb, ("securityGroups",), *SECURITY_GROUP_TYPES)}
    balancers |= {g.urn for a in stack.of_type(ALI_LB_SECURITY_GROUP)
                  for g in _linked_of(stack, a, ("securityGroupId",), *SECURITY_GROUP_TYPES)}
    servers = _firewalls_of(stack, (r for r in stack.resources if r.resource_type in SERVER_FIREWALL_PROPS))
    found = False
    for resource in (r for r in stack.resources if r.resource_type in INGRESS_READERS):
        for opening in _opened(stack, resource):
            if (opening.low != opening.high or opening.low not in LISTENER_PORTS or opening.low in serving
                    or exposure(opening, resource.resource_type) not in ("public", "unreadable")):
                continue
            found = True
            owners = _owners(stack, resource)
            cloud = _cloud_of(resource.resource_type)
            if cloud in NO_LOAD_BALANCER_FIREWALL:
                why = NO_LOAD_BALANCER_FIREWALL[cloud]
            elif not owners:
                why = "the pack cannot tell whose firewall it belongs to (its security group is not in this stack)"
            elif any(o.urn in servers for o in owners):
                why = "servers use this firewall"
            elif not all(o.urn in balancers for o in owners):
                why = "no load balancer of this stack uses this firewall"
            else:
                continue
            report_violation(f"{opening.ports_are()} open to {_public_where(opening.source)}, and {why}: only a load "
                             f"balancer's own firewall opens {HTTPS_PORT} and {REDIRECT_PORT} to callers; servers "
                             "admit the load balancer only", resource.urn)
    return found


def _gcp_rules_for(stack: Stack, template: StackResource) -> list[StackResource]:
    """Google Cloud firewall rules that apply to a template's servers: by network tag or service account, or to
    every instance of the network when a rule names neither (firewall policy rules always count: fail closed)."""
    tags = {str(t) for t in stack.items(stack.known(template.props, "tags"))}
    email = (stack.known(template.props, "serviceAccount") or {}).get("email")
    found = []
    for rule in (r for r in stack.resources if r.resource_type in INGRESS_READERS):
        if not rule.resource_type.startswith("gcp:"):
            continue
        if rule.resource_type != GCP_FIREWALL:
            found.append(rule)
            continue
        targets = {str(t) for t in stack.items(stack.known(rule.props, "targetTags"))}
        accounts = {str(a) for a in stack.items(stack.known(rule.props, "targetServiceAccounts"))}
        if (not targets and not accounts) or targets & tags or (email and email in accounts):
            found.append(rule)
    return found


def _server_rules(stack: Stack, group: ManagedGroup) -> list[StackResource]:
    """Every ingress rule that applies to a managed group's servers."""
    if group.cloud == "gcp":
        return list({r.urn: r for t in group.templates for r in _gcp_rules_for(stack, t)}.values())
    firewalls = _firewalls_of(stack, [*group.templates, group.resource])
    return [r for r in stack.resources if r.resource_type in INGRESS_READERS
            and any(o.urn in firewalls for o in _owners(stack, r))]


def from_load_balancer(opening: Opening, resource_type: str) -> bool:
    """A source the load balancer's requests come from that is not private: Google's front ends."""
    network = opening.source.network
    return (resource_type.startswith("gcp:") and isinstance(network, ipaddress.IPv4Network)
            and any(network.subnet_of(r) for r in GCP_LOAD_BALANCER_RANGES))


def fleet_api_openings(stack: Stack, group: ManagedGroup,
                       serving: tuple[int, ...]) -> list[tuple[StackResource, Opening]]:
    """Each opening of a serving port on a managed group's servers (what the matrix compares with the plan)."""
    return [(rule, opening) for rule in _server_rules(stack, group) for opening in _opened(stack, rule)
            if any(opening.covers(port) for port in serving)]


def _fleet_api_from_load_balancer(stack: Stack, serving: tuple[int, ...], report_violation: ReportViolation) -> bool:
    groups = managed_groups(stack)
    for group in groups:
        for rule, opening in fleet_api_openings(stack, group, serving):
            if exposure(opening, rule.resource_type) in ("private", "iap") or from_load_balancer(
                    opening, rule.resource_type):
                continue
            report_violation(f"{opening.ports_are()} open to {_public_where(opening.source)} on the servers of managed "
                             f"group {group.resource.name}: a fleet's serving port admits its load balancer only (the "
                             "load balancer's security group, the network, or Google's front ends "
                             f"{', '.join(map(str, GCP_LOAD_BALANCER_RANGES))}); callers reach the load balancer",
                             rule.urn)
    return bool(groups)


def check_only_public_listener(stack: Stack, report_violation: ReportViolation) -> None:
    serving = serving_ports(stack.config)
    listened = _listener_ports_on_load_balancers(stack, serving, report_violation)
    fleets = _fleet_api_from_load_balancer(stack, serving, report_violation)
    if not listened and not fleets:
        raise NotApplicable("the stack has no managed group and opens no load balancer port to a public network")


#### Fleets, as a stack: managed groups span zones ####

DEFAULT_MIN_ZONES = 2
MIN_ZONES_SCHEMA: Mapping[str, Any] = {"minZones": {
    "type": "integer", "minimum": 1, "default": DEFAULT_MIN_ZONES,
    "description": "Zones every managed group spans (production's; set 1 for a stack of a non-production stage)."}}


def check_fleet_zones(stack: Stack, report_violation: ReportViolation) -> None:
    groups = managed_groups(stack)
    if not groups:
        raise NotApplicable("the stack has no managed group")
    wanted = _integer(stack.config.get("minZones", DEFAULT_MIN_ZONES)) or DEFAULT_MIN_ZONES
    for group in groups:
        name = group.resource.name
        for unread in group.unread_zones if wanted > 1 else []:  # any placement spans one zone
            report_violation(f"managed group {name}: the pack cannot read {unread}, so it cannot tell how many zones "
                             "the group spans: place it in subnets (or zones) of this stack", group.resource.urn)
        if not group.unread_zones and len(group.zones) < wanted:
            report_violation(f"managed group {name} spans {len(group.zones)} zone(s) "
                             f"({', '.join(sorted(group.zones)) or 'none'}): spread it over at least {wanted} "
                             "(production plans span two; set minZones 1 in the policy config of a stack of another "
                             "stage)", group.resource.urn)


# A managed group is watched when the stack holds an alarm on its load balancer's metrics (what inferstack's
# components/<cloud>.py create_alarms registers): by cloud, the alarm type and whether an alarm's inputs read them.
FLEET_ALARMS: Mapping[str, tuple[str, Callable[[Mapping[str, Any]], bool]]] = {
    "aws": ("aws:cloudwatch/metricAlarm:MetricAlarm",
            lambda p: p.get("namespace") == "AWS/ApplicationELB"
            and p.get("metricName") in ("UnHealthyHostCount", "HealthyHostCount", "TargetResponseTime")),
    "gcp": ("gcp:monitoring/alertPolicy:AlertPolicy",
            lambda p: any("loadbalancing.googleapis.com/" in str((c.get("conditionThreshold") or {}).get("filter"))
                          for c in _items(p.get("conditions")) if isinstance(c, Mapping))),
    "alibaba": ("alicloud:cms/alarm:Alarm", lambda p: p.get("project") == "acs_alb"),
    "huawei": ("huaweicloud:Cse/alarmrule:Alarmrule",
               lambda p: isinstance(p.get("metric"), Mapping) and p["metric"].get("namespace") == "SYS.ELB"),
}


def check_fleet_alarms(stack: Stack, report_violation: ReportViolation) -> None:
    groups = managed_groups(stack)
    if not groups:
        raise NotApplicable("the stack has no managed group")
    for group in groups:
        alarm_type, watches = FLEET_ALARMS[group.cloud]
        if not any(watches(alarm.props) for alarm in stack.of_type(alarm_type)):
            report_violation(f"managed group {group.resource.name} has no alarm on its load balancer ({alarm_type} "
                             "on unhealthy servers, latency or healthy servers): nobody learns that it fails or is "
                             "full; inferstack creates them with every fleet (docs/deploy-<cloud>.md, Alarms)",
                             group.resource.urn)


#### Production: the servers run as a protected fleet behind HTTPS ####

STAGES = ("validation", "internal", "production")
"""inferstack's stages (inferstack.spec.Stage), restated because the pack imports nothing from inferstack."""
PRODUCTION_STAGE = "production"
STAGE_SCHEMA: Mapping[str, Any] = {"stage": {
    "type": "string", "enum": list(STAGES), "default": PRODUCTION_STAGE,
    "description": "The stack's stage (its stack file's inferstack:stage): production unless this says otherwise."}}
LOOSE_SERVER_TYPES = (AWS_INSTANCE, AWS_SPOT_INSTANCE_REQUEST, GCP_INSTANCE, ALI_INSTANCE, HW_INSTANCE)
HW_EIP = "huaweicloud:Vpc/eip:Eip"
STAGE_FIX = ('if this stack is not production, say so in its policy config: {"production-runs-a-protected-fleet": '
             '{"stage": "internal"}} (docs/policy.md, "Zones and the stage")')


@dataclass(frozen=True)
class FleetProtection:
    """What inferstack protects in a production fleet on one cloud (components/<cloud>.py: `fleet_options` and
    `server_options` with `protected`, and the cloud's deletion flags; docs/deploy-<cloud>.md, "Production
    fleet"). Parts: "group", "template", "load balancer", "address" (the load balancer's public address)."""

    protected: frozenset[str]
    """The parts that carry Pulumi's `protect`."""
    deletion_flags: Mapping[str, str]
    """Part → the property of the cloud's own deletion protection, which must be true."""


FLEET_PROTECTIONS: Mapping[str, FleetProtection] = {
    # The servers are the group's to replace (EC2 termination protection does not stop Auto Scaling); a launch
    # template changes by new versions, an update, so it can carry protect.
    "aws": FleetProtection(frozenset({"group", "template", "load balancer"}),
                           {"load balancer": "enableDeletionProtection"}),
    # An instance template cannot change (a change is a new template, which protect would block); the load balancer
    # is its forwarding rules, which carry protect with their address (the endpoint's domain points at it); Google
    # has no deletion flag on either.
    "gcp": FleetProtection(frozenset({"group", "load balancer", "address"}), {}),
    "alibaba": FleetProtection(frozenset({"group", "template", "load balancer"}),
                               {"group": "groupDeletionProtection", "load balancer": "deletionProtectionEnabled"}),
    # An AS configuration cannot change (a change is a new one, which touches no server); the AS group has no
    # deletion flag in pulumi_huaweicloud 0.0.12. The load balancer's elastic IP carries protect.
    "huawei": FleetProtection(frozenset({"group", "load balancer", "address"}),
                              {"load balancer": "deletionProtectionEnable"}),
}
"""By cloud. tests/policy/test_edge_bypasses.py requires each part and flag of each row on a hand-built fleet, and
passes inferstack's own production deployment of each cloud (a row asks no more than the components give)."""
PROTECT_FIX = "production fleets are protected (inferstack:protectServers)"
FLEET_FIX = "(inferstack does, in production)"


def _stage(stack: Stack) -> str:
    """The stack's stage from the rule's config, never from the stack: production unless the config names another of
    inferstack's stages (an unknown name counts as production; the config schema refuses it)."""
    stage = str(stack.config.get("stage") or PRODUCTION_STAGE)
    return stage if stage in STAGES else PRODUCTION_STAGE


def _serves_group(backends: Iterable[Backend], group: ManagedGroup) -> bool:
    return any(group.resource.urn in {member.urn for member in backend.groups} for backend in backends)


GCP_ADDRESSES = ("gcp:compute/globalAddress:GlobalAddress", "gcp:compute/address:Address")


def _fleet_parts(stack: Stack, group: ManagedGroup, fronting: list[LoadBalancer]) -> dict[str, list[StackResource]]:
    addresses = [address for lb in fronting
                 for address in _linked_of(stack, lb.resource, ("ipv4EipId",), HW_EIP)
                 + _linked_of(stack, lb.resource, ("ipAddress",), *GCP_ADDRESSES)]
    return {"group": [group.resource], "template": group.templates,
            "load balancer": [lb.resource for lb in fronting], "address": addresses}


def _production_group(stack: Stack, group: ManagedGroup, balancers: list[LoadBalancer],
                      report_violation: ReportViolation) -> None:
    name = group.resource.name
    fronting = [lb for lb in balancers if _serves_group(lb.backends, group)]
    if not fronting:
        report_violation(f"managed group {name} is behind no load balancer of this stack: production servers are "
                         f"reached through a load balancer that serves HTTPS {FLEET_FIX}", group.resource.urn)
    elif not any(listener.protocol == "HTTPS" and listener.port == HTTPS_PORT and listener.tls_1_2
                 and _serves_group(listener.backends, group) for lb in fronting for listener in lb.listeners):
        report_violation(f"managed group {name} is served by no HTTPS listener on {HTTPS_PORT} under a TLS 1.2+ "
                         "policy that the pack reads: serve it through a load balancer's HTTPS listener "
                         f"{FLEET_FIX}", group.resource.urn)
    protection = FLEET_PROTECTIONS[group.cloud]
    parts = _fleet_parts(stack, group, fronting)
    for part in sorted(protection.protected):
        for resource in parts[part]:
            if not resource.opts.protect:
                report_violation(f"the {part} {resource.name} of managed group {name} does not carry Pulumi's "
                                 f"protect, so a change that replaces it, or `pulumi destroy`, deletes it: "
                                 f"{PROTECT_FIX}", resource.urn)
    for part, flag in sorted(protection.deletion_flags.items()):
        for resource in parts[part]:
            value = stack.known(resource.props, flag)
            if _flag(value) is not True:
                report_violation(f"{resource.name} has no deletion protection ({flag} is "
                                 f"{'unset' if value is None else _shown(value)}), so any API call may delete it: "
                                 f"set {flag} true {FLEET_FIX}", resource.urn)


def check_production_fleet(stack: Stack, report_violation: ReportViolation) -> None:
    stage = _stage(stack)
    if stage != PRODUCTION_STAGE:
        raise NotApplicable(f"the stack's stage is {stage} (policy config), not production")
    loose = stack.of_type(*LOOSE_SERVER_TYPES)
    groups = managed_groups(stack)
    if not loose and not groups:
        raise NotApplicable("the stack runs no servers")
    for server in loose:
        report_violation(f"server {server.name} runs on its own in a production stack: production servers run as a "
                         "managed group behind a load balancer that serves HTTPS (TLS 1.2 or newer), with "
                         f"inferstack's protections; {STAGE_FIX}", server.urn)
    balancers = load_balancers(stack, _discard) if groups else []
    for group in groups:
        _production_group(stack, group, balancers, report_violation)


#### Managed Redis (the inference cache): private, TLS, AUTH ####

AWS_REPLICATION_GROUP = "aws:elasticache/replicationGroup:ReplicationGroup"
AWS_CACHE_CLUSTER = "aws:elasticache/cluster:Cluster"
AWS_SERVERLESS_CACHE = "aws:elasticache/serverlessCache:ServerlessCache"
AWS_CACHE_USER = "aws:elasticache/user:User"
AWS_CACHE_USER_GROUP = "aws:elasticache/userGroup:UserGroup"
AWS_CACHE_USER_GROUP_ASSOCIATION = "aws:elasticache/userGroupAssociation:UserGroupAssociation"
AWS_CACHE_SUBNET_GROUP = "aws:elasticache/subnetGroup:SubnetGroup"
AWS_MEMORYDB_CLUSTER = "aws:memorydb/cluster:Cluster"
AWS_MEMORYDB_MULTI_REGION_CLUSTER = "aws:memorydb/multiRegionCluster:MultiRegionCluster"
AWS_MEMORYDB_ACL = "aws:memorydb/acl:Acl"
AWS_MEMORYDB_USER = "aws:memorydb/user:User"
AWS_MEMORYDB_SUBNET_GROUP = "aws:memorydb/subnetGroup:SubnetGroup"
AWS_DEFAULT_SUBNET = "aws:ec2/defaultSubnet:DefaultSubnet"
AWS_DEFAULT_VPC = "aws:ec2/defaultVpc:DefaultVpc"
GCP_REDIS = "gcp:redis/instance:Instance"
GCP_REDIS_CLUSTER = "gcp:redis/cluster:Cluster"
GCP_VALKEY = "gcp:memorystore/instance:Instance"
GCP_CACHE_ACL_POLICIES = ("gcp:redis/clusterAclPolicy:ClusterAclPolicy", "gcp:memorystore/aclPolicy:AclPolicy")
GCP_CACHE_ENDPOINTS = ("gcp:redis/clusterUserCreatedConnections:ClusterUserCreatedConnections",
                       "gcp:memorystore/instanceDesiredUserCreatedEndpoints:InstanceDesiredUserCreatedEndpoints")
GCP_NETWORK = "gcp:compute/network:Network"
ALI_KVSTORE = "alicloud:kvstore/instance:Instance"
ALI_KVSTORE_CONNECTION = "alicloud:kvstore/connection:Connection"
ALI_KVSTORE_ACCOUNT = "alicloud:kvstore/account:Account"
ALI_TAIR = "alicloud:redis/tairInstance:TairInstance"
ALI_TAIR_IP_GROUP = "alicloud:redis/globalSecurityIpGroup:GlobalSecurityIpGroup"
HW_DCS = "huaweicloud:Dcs/instance:Instance"

CACHE_MODULES = ("aws:elasticache/", "aws:memorydb/", "gcp:redis/", "gcp:memorystore/", "alicloud:kvstore/",
                 "alicloud:redis/", "huaweicloud:Dcs/")
"""The provider modules of managed caches: every type in them is read below, or is a setting that holds no data
and admits nobody (CACHE_SETTINGS); any other counts as a cache the pack cannot read (fail closed)."""
CACHE_SETTINGS = frozenset({
    # Parameters, reservations, snapshots and backups (kept inside the service, encrypted at rest), audit logs.
    "aws:elasticache/parameterGroup:ParameterGroup", "aws:elasticache/reservedCacheNode:ReservedCacheNode",
    "aws:memorydb/parameterGroup:ParameterGroup", "aws:memorydb/snapshot:Snapshot",
    "alicloud:kvstore/auditLogConfig:AuditLogConfig", "alicloud:kvstore/backupPolicy:BackupPolicy",
    "alicloud:redis/backup:Backup",
    # Placement: read where a cache names it (managed-redis-users-and-network).
    AWS_CACHE_SUBNET_GROUP, AWS_MEMORYDB_SUBNET_GROUP,
    # A global datastore takes its primary replication group's settings, which are read on that group; its
    # secondary groups are replication groups, read in their own right.
    "aws:elasticache/globalReplicationGroup:GlobalReplicationGroup",
})
PLACEMENT_FIX = ("place it in the VPC's private subnets behind a security group that admits the servers only")
NO_AUTH_CACHE = "a Memcached cache takes no AUTH: use Redis or Valkey with a user group"
BUILT_IN_DEFAULT_USER = "default"
"""ElastiCache's and MemoryDB's built-in user: it needs no password ("on ~* +@all nopass"), and no user of a stack
can take its id, so a group or ACL that names it lets every client in."""


def _public_sources(values: Any) -> list[str]:
    """The whitelist entries (IPs, CIDRs, or first-last ranges, comma-separated or listed) outside the private
    networks; anything unreadable counts as public."""
    public = []
    for value in _items(values):
        for text in (part.strip() for part in str(value).split(",")):
            networks = _entry_networks(text)
            if networks is None or not all(is_private(n) or n.is_loopback for n in networks):
                public.append(text)
    return public


def _entry_networks(text: str) -> list[IPNetwork] | None:
    """"10.0.0.0/8" → [10.0.0.0/8]; "10.0.0.1-10.0.0.9" (a Huawei IP group's range) → the networks it spans; None
    when it cannot be read."""
    try:
        if "-" not in text:
            return [ipaddress.ip_network(text, strict=False)]
        first, last = (ipaddress.ip_address(end.strip()) for end in text.split("-", 1))
        return list(ipaddress.summarize_address_range(first, last))
    except (ValueError, TypeError):
        return None


def _default_network(value: Any) -> bool:
    """A Google network named `default` (the project's auto-mode network, open inside by its default rules)."""
    return str(value or "").rstrip("/").rsplit("/", 1)[-1] == "default"


def _check_aws_redis(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if _flag(props.get("transitEncryptionEnabled")) is not True:
        report_violation("the Redis replication group does not encrypt in transit: set transitEncryptionEnabled true")
    elif props.get("transitEncryptionMode") == "preferred":
        report_violation("the Redis replication group still accepts plain connections (transitEncryptionMode "
                         "preferred): set it to required")
    if not props.get("authToken") and not props.get("userGroupIds"):
        report_violation("the Redis replication group needs no AUTH: set authToken (a secret) or userGroupIds")
    if _flag(props.get("atRestEncryptionEnabled")) is not True:
        report_violation("the Redis replication group is not encrypted at rest: set atRestEncryptionEnabled true")
    if not props.get("subnetGroupName") or not _items(props.get("securityGroupIds")):
        report_violation(f"the Redis replication group has no subnet group and security group of the stack: "
                         f"{PLACEMENT_FIX}")


def _check_aws_cache_cluster(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("engine") == "memcached":
        report_violation(NO_AUTH_CACHE)
    elif props.get("replicationGroupId") is None:
        report_violation("a standalone ElastiCache cluster takes no AUTH token: use a replication group with "
                         "transitEncryptionEnabled, authToken and atRestEncryptionEnabled")


def _check_aws_serverless_cache(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """ElastiCache Serverless: "All serverless caches have in-transit encryption enabled" (ElastiCache User Guide,
    "ElastiCache in-transit encryption (TLS)", read 2026-12-07) and are encrypted at rest; RBAC user groups are "the
    only way to control access to serverless caches" (ElastiCache User Guide, "Role-Based Access Control", read
    2026-12-07): without `userGroupId`, no password is asked."""
    if props.get("engine") == "memcached":
        report_violation(NO_AUTH_CACHE)
        return
    if not props.get("userGroupId"):
        report_violation("the ElastiCache serverless cache names no user group, so every client that reaches it gets "
                         "in without a password: set userGroupId to a user group of users with passwords")
    if not _items(props.get("subnetIds")) or not _items(props.get("securityGroupIds")):
        # "If no other information is given this will be the VPC's Default Security Group" (pulumi_aws
        # elasticache.ServerlessCache security_group_ids).
        report_violation("the ElastiCache serverless cache names no subnets and security groups, so it sits in the "
                         "default VPC behind its default security group: place it in the stack's private subnets "
                         "behind a security group that admits the servers only")


def _check_aws_cache_user(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """An ElastiCache RBAC user: `authenticationMode.type` is password, no-password-required or iam, or the older
    `noPasswordRequired` / `passwords` (pulumi_aws elasticache.User)."""
    name = props.get("userName") or props.get("userId")
    kind = str((props.get("authenticationMode") or {}).get("type") or "")
    open_to = "so anyone who reaches a cache whose user group holds it gets in: give it passwords or IAM authentication"
    if _flag(props.get("noPasswordRequired")) is True:
        report_violation(f"the ElastiCache user {name} needs no password (noPasswordRequired), {open_to}")
    elif kind == "no-password-required":
        report_violation(f"the ElastiCache user {name} needs no password (authenticationMode no-password-required), "
                         f"{open_to}")
    elif kind and kind not in ("password", "iam"):
        report_violation(f"the ElastiCache user {name} has authenticationMode {kind}, which the pack cannot read: use "
                         "password or iam")
    elif not kind and not _items(props.get("passwords")) and not props.get("passwordsWo"):
        report_violation(f"the ElastiCache user {name} names no password (passwords, authenticationMode), {open_to}")


def _holds_default_user(user_ids: Any, report_violation: ReportViolation) -> None:
    if BUILT_IN_DEFAULT_USER in [str(u) for u in _items(user_ids)]:
        report_violation("the user group holds ElastiCache's built-in user default, which needs no password: hold a "
                         "user of the stack named default, with a password, instead")


def _check_aws_user_group(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _holds_default_user(props.get("userIds"), report_violation)


def _check_aws_user_group_association(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _holds_default_user(props.get("userId"), report_violation)


def _check_memorydb_cluster(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """MemoryDB: "When [tls_enabled is] set to false, the acl_name must be open-access. Defaults to true"; without
    subnet_group_name, "a subnet group consisting of default VPC subnets" (pulumi_aws memorydb.Cluster)."""
    if props.get("aclName") == "open-access":
        report_violation("the MemoryDB cluster uses the open-access ACL, so every client gets in without a password: "
                         "name an ACL of users with passwords or IAM")
    if _flag(props.get("tlsEnabled")) is False:
        report_violation("the MemoryDB cluster does not encrypt in transit (tlsEnabled false): leave it on")
    if not props.get("subnetGroupName") or not _items(props.get("securityGroupIds")):
        report_violation(f"the MemoryDB cluster has no subnet group and security group of the stack: {PLACEMENT_FIX}")


def _check_memorydb_multi_region_cluster(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if _flag(props.get("tlsEnabled")) is False:
        report_violation("the MemoryDB multi-Region cluster does not encrypt in transit (tlsEnabled false): leave it "
                         "on")


def _check_memorydb_acl(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if BUILT_IN_DEFAULT_USER in [str(u) for u in _items(props.get("userNames"))]:
        report_violation("the MemoryDB ACL holds the built-in user default, which needs no password: hold users of "
                         "the stack only")


def _check_memorydb_user(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """A MemoryDB user authenticates with a password or IAM ("Valid values are password or iam", pulumi_aws
    memorydb.User authentication_mode)."""
    kind = str((props.get("authenticationMode") or {}).get("type") or "")
    if kind not in ("password", "iam"):
        report_violation(f"the MemoryDB user {props.get('userName')} has authenticationMode {kind or 'unset'}, which "
                         "the pack cannot read: use password or iam")


def _check_gcp_redis(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if _flag(props.get("authEnabled")) is not True:
        report_violation("the Memorystore instance answers without AUTH: set authEnabled true")
    if props.get("transitEncryptionMode") != "SERVER_AUTHENTICATION":
        report_violation("the Memorystore instance does not use TLS: set transitEncryptionMode SERVER_AUTHENTICATION")
    network = props.get("authorizedNetwork")
    if not network or _default_network(network):
        # "If left unspecified, the default network will be used" (pulumi_gcp redis.Instance authorized_network).
        shown = f" (authorizedNetwork {network})" if network else ""
        report_violation(f"the Memorystore instance is on the project's default network{shown}: set authorizedNetwork "
                         "to the deployment's network")


def _networks(value: Any) -> list[str]:
    """Every `network` named anywhere in a (nested) value: PSC configs, endpoints and their connections."""
    if isinstance(value, Mapping):
        found = [str(value["network"])] if isinstance(value.get("network"), str) else []
        return found + [n for key, item in value.items() if key != "network" for n in _networks(item)]
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [n for item in value for n in _networks(item)]
    return []


def _on_default_network(what: str, props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for network in _networks(props):
        if _default_network(network):
            report_violation(f"{what} is on the project's default network ({network}): use the deployment's network")


def _check_gcp_redis_cluster(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """Memorystore for Redis Cluster: `authorizationMode` "Default value is AUTH_MODE_DISABLED", `transitEncryptionMode`
    "Default value is TRANSIT_ENCRYPTION_MODE_DISABLED" (pulumi_gcp redis.Cluster)."""
    mode = props.get("authorizationMode")
    if mode != "AUTH_MODE_IAM_AUTH":
        report_violation(f"the Memorystore cluster answers without AUTH (authorizationMode is {mode or 'unset'}): set "
                         "AUTH_MODE_IAM_AUTH")
    transit = props.get("transitEncryptionMode")
    if transit != "TRANSIT_ENCRYPTION_MODE_SERVER_AUTHENTICATION":
        report_violation(f"the Memorystore cluster does not use TLS (transitEncryptionMode is {transit or 'unset'}): "
                         "set TRANSIT_ENCRYPTION_MODE_SERVER_AUTHENTICATION")
    _on_default_network("the Memorystore cluster", props, report_violation)


GCP_VALKEY_AUTH_MODES = {"IAM_AUTH", "TOKEN_AUTH"}
"""Memorystore for Valkey: "Possible values: AUTH_DISABLED IAM_AUTH. TOKEN_AUTH is also supported, but only available
in the google-beta provider" (pulumi_gcp memorystore.Instance authorization_mode)."""


def _check_gcp_valkey(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    mode = props.get("authorizationMode")
    if mode not in GCP_VALKEY_AUTH_MODES:
        report_violation(f"the Memorystore for Valkey instance answers without AUTH (authorizationMode is "
                         f"{mode or 'unset'}): set IAM_AUTH")
    transit = props.get("transitEncryptionMode")
    if transit != "SERVER_AUTHENTICATION":
        report_violation(f"the Memorystore for Valkey instance does not use TLS (transitEncryptionMode is "
                         f"{transit or 'unset'}): set SERVER_AUTHENTICATION")
    _on_default_network("the Memorystore for Valkey instance", props, report_violation)


def _check_gcp_cache_acl_policy(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """An ACL policy's rules are Redis/Valkey ACL rules ("on >password123 ~* +@all", pulumi_gcp): `nopass` lets the
    user in without a password."""
    for rule in _items(props.get("rules")):
        if isinstance(rule, Mapping) and "nopass" in str(rule.get("rule") or "").split():
            report_violation(f"the ACL policy lets user {rule.get('username')} in without a password (nopass): give it "
                             "a password, or use IAM")


def _check_gcp_cache_endpoints(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _on_default_network("the cache's endpoint", props, report_violation)


ALI_TAIR_WITHOUT_TLS = {"tair_essd"}
"""Tair's TLS needs "Tair (Enterprise Edition) DRAM-based or persistent memory-optimized" instances
(alibabacloud.com/help/redis/user-guide/enable-tls-encryption, read 2026-12-07): ESSD-based ones have none."""


def _alibaba_redis_access(what: str, props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """A Tair or KVStore instance: a password in the VPC, in a vSwitch, no public whitelist entry."""
    if props.get("vpcAuthMode") == "Close":
        report_violation(f"the {what} answers without a password in the VPC (vpcAuthMode Close): set it to Open")
    if not props.get("password") and not props.get("kmsEncryptedPassword"):
        report_violation(f"the {what} has no password: set password (a secret)")
    if not props.get("vswitchId"):
        report_violation(f"the {what} is not in a vSwitch of the VPC: set vswitchId")
    public = _public_sources(props.get("securityIps"))
    if public:
        report_violation(f"the Tair whitelist admits public addresses ({', '.join(public)}): admit the servers' "
                         "security group (securityGroupId) or private ranges only")


def _check_ali_kvstore(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("sslEnable") not in ("Enable", "Update"):
        report_violation("the Tair instance does not use TLS: set sslEnable Enable")
    _alibaba_redis_access("Tair instance", props, report_violation)


def _check_ali_tair(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """redis.TairInstance: `ssl_enabled` Disable, Enable or Update; `vpc_auth_mode` Open or Close ("Close ...
    enables password-free access"); `security_ips` the whitelist (pulumi_alicloud redis.TairInstance)."""
    if props.get("instanceType") not in ALI_TAIR_WITHOUT_TLS and props.get("sslEnabled") not in ("Enable", "Update"):
        report_violation("the Tair instance does not use TLS: set sslEnabled Enable")
    _alibaba_redis_access("Tair instance", props, report_violation)


def _check_ali_kvstore_connection(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    report_violation("a kvstore connection gives the Tair instance a public endpoint: reach it from the VPC only")


def _check_ali_kvstore_account(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if not any(props.get(key) for key in ("accountPassword", "accountPasswordWo", "kmsEncryptedPassword")):
        report_violation(f"the Tair account {props.get('accountName')} has no password: set accountPassword (a "
                         "secret)")


def _check_ali_tair_ip_group(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    public = _public_sources(props.get("globalIpList"))
    if public:
        report_violation(f"the Tair whitelist template {props.get('globalIpGroupName')} admits public addresses "
                         f"({', '.join(public)}): admit private ranges only")


def _check_hw_dcs(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if _flag(props.get("sslEnable")) is not True:
        report_violation("the DCS instance does not use SSL: set sslEnable true (Redis 6.0 basic edition)")
    if not props.get("password"):
        report_violation("the DCS instance allows password-free access: set password (a secret)")
    if _flag(props.get("enablePublicip")) is True or props.get("publicipId"):
        report_violation("the DCS instance has a public address: reach it from the VPC only")
    if _flag(props.get("whitelistEnable")) is False:
        report_violation("the DCS whitelist is off, so every address in the VPC reaches the instance: enable it")
    for whitelist in _items(props.get("whitelists")):
        public = _public_sources((whitelist or {}).get("ipAddresses") if isinstance(whitelist, Mapping) else None)
        if public:
            report_violation(f"the DCS whitelist admits public addresses ({', '.join(public)}): admit the servers' "
                             "subnets only")


_MANAGED_REDIS: dict[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_REPLICATION_GROUP: _check_aws_redis, AWS_CACHE_CLUSTER: _check_aws_cache_cluster,
    AWS_SERVERLESS_CACHE: _check_aws_serverless_cache, AWS_CACHE_USER: _check_aws_cache_user,
    AWS_CACHE_USER_GROUP: _check_aws_user_group, AWS_CACHE_USER_GROUP_ASSOCIATION: _check_aws_user_group_association,
    AWS_MEMORYDB_CLUSTER: _check_memorydb_cluster,
    AWS_MEMORYDB_MULTI_REGION_CLUSTER: _check_memorydb_multi_region_cluster,
    AWS_MEMORYDB_ACL: _check_memorydb_acl, AWS_MEMORYDB_USER: _check_memorydb_user,
    GCP_REDIS: _check_gcp_redis, GCP_REDIS_CLUSTER: _check_gcp_redis_cluster, GCP_VALKEY: _check_gcp_valkey,
    **dict.fromkeys(GCP_CACHE_ACL_POLICIES, _check_gcp_cache_acl_policy),
    **dict.fromkeys(GCP_CACHE_ENDPOINTS, _check_gcp_cache_endpoints),
    ALI_KVSTORE: _check_ali_kvstore, ALI_KVSTORE_CONNECTION: _check_ali_kvstore_connection,
    ALI_KVSTORE_ACCOUNT: _check_ali_kvstore_account, ALI_TAIR: _check_ali_tair,
    ALI_TAIR_IP_GROUP: _check_ali_tair_ip_group,
    HW_DCS: _check_hw_dcs}


def _reads_cache(resource_type: str) -> bool:
    return resource_type in _MANAGED_REDIS or resource_type.startswith(CACHE_MODULES)


def check_managed_redis(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _MANAGED_REDIS.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)
    elif resource.resource_type.startswith(CACHE_MODULES) and resource.resource_type not in CACHE_SETTINGS:
        report_violation(f"{resource.resource_type} is a cache type the pack cannot read, so it cannot tell whether it "
                         "is private, encrypted in transit and needs AUTH: use a cache type the pack reads "
                         "(docs/policy.md lists them)")


#### Managed Redis, as a stack: the users and networks a cache names are the stack's, and private ####

CACHES_WITH_USER_GROUPS = {AWS_REPLICATION_GROUP: "userGroupIds", AWS_SERVERLESS_CACHE: "userGroupId"}
AWS_PLACED_CACHES = (AWS_REPLICATION_GROUP, AWS_SERVERLESS_CACHE, AWS_MEMORYDB_CLUSTER)
GCP_NETWORKED_CACHES = (GCP_REDIS, GCP_REDIS_CLUSTER, GCP_VALKEY, *GCP_CACHE_ENDPOINTS)


def _unread_ids(stack: Stack, holder: StackResource, prop: str, targets: list[StackResource],
                id_key: str) -> list[str]:
    """The ids `holder.props[prop]` names that are no resource of `targets` (by property dependency, else by the
    targets' `id_key`); the built-in default user is left to the resource rule."""
    named = [str(i) for i in stack.items(stack.known(holder.props, prop)) if str(i) != BUILT_IN_DEFAULT_USER]
    linked = {d.urn for d in holder.property_dependencies.get(prop, [])} & {t.urn for t in targets}
    if len(linked) >= len(named):
        return []
    known = {str(stack.known(t.props, id_key)) for t in targets} | {str(stack.known(t.props, "id")) for t in targets}
    return [i for i in named if i not in known]


def _aws_cache_users(stack: Stack, report_violation: ReportViolation) -> None:
    groups, users = stack.of_type(AWS_CACHE_USER_GROUP), stack.of_type(AWS_CACHE_USER)
    for cache in stack.of_type(*CACHES_WITH_USER_GROUPS):
        for group_id in _unread_ids(stack, cache, CACHES_WITH_USER_GROUPS[cache.resource_type], groups,
                                    "userGroupId"):
            report_violation(f"the cache names user group {group_id}, which this stack does not create, so the pack "
                             "cannot read its users: use a user group of this stack", cache.urn)
    for group in groups:
        for user_id in _unread_ids(stack, group, "userIds", users, "userId"):
            report_violation(f"the user group holds user {user_id}, which this stack does not create, so the pack "
                             "cannot tell whether it needs a password: hold users of this stack only", group.urn)
    for association in stack.of_type(AWS_CACHE_USER_GROUP_ASSOCIATION):
        for user_id in _unread_ids(stack, association, "userId", users, "userId"):
            report_violation(f"the association adds user {user_id}, which this stack does not create, to a user group, "
                             "so the pack cannot tell whether it needs a password: add users of this stack only",
                             association.urn)


def _aws_default_vpc(stack: Stack, cache: StackResource, report_violation: ReportViolation) -> None:
    """A cache in the default VPC's subnets (an `ec2.DefaultSubnet`, or a subnet of an `ec2.DefaultVpc`, that the
    stack holds), directly or through its subnet group, or behind the default VPC's default security group."""
    holders = [cache, *_linked_of(stack, cache, ("subnetGroupName",), AWS_CACHE_SUBNET_GROUP,
                                  AWS_MEMORYDB_SUBNET_GROUP)]
    subnets = [s for h in holders for s in _linked_of(stack, h, ("subnetIds",), AWS_DEFAULT_SUBNET, AWS_SUBNET)]
    for subnet in subnets:
        if subnet.resource_type == AWS_DEFAULT_SUBNET or _linked_of(stack, subnet, ("vpcId",), AWS_DEFAULT_VPC):
            report_violation(f"the cache is in the default VPC (subnet {subnet.name}): place it in the stack's own "
                             "private subnets", cache.urn)
    for group in _linked_of(stack, cache, ("securityGroupIds",), AWS_DEFAULT_SECURITY_GROUP):
        report_violation(f"the cache is behind the default security group {group.name}: give it a security group of "
                         "the stack that admits the servers only", cache.urn)


def _gcp_default_network(stack: Stack, cache: StackResource, report_violation: ReportViolation) -> None:
    props = ("authorizedNetwork", "pscConfigs", "desiredAutoCreatedEndpoints", "desiredPscAutoConnections",
             "clusterEndpoints", "desiredUserCreatedEndpoints")
    for network in _linked_of(stack, cache, props, GCP_NETWORK):
        if _default_network(stack.known(network.props, "name")):
            report_violation(f"the cache is on network {network.name}, the project's default network: use the "
                             "deployment's network", cache.urn)


def check_cache_links(stack: Stack, report_violation: ReportViolation) -> None:
    aws = stack.of_type(*AWS_PLACED_CACHES, AWS_CACHE_USER_GROUP, AWS_CACHE_USER_GROUP_ASSOCIATION)
    gcp = stack.of_type(*GCP_NETWORKED_CACHES)
    if not aws and not gcp:
        raise NotApplicable("the stack has no managed Redis that names users or a network the pack relates "
                            "(ElastiCache, MemoryDB, Memorystore)")
    _aws_cache_users(stack, report_violation)
    for cache in stack.of_type(*AWS_PLACED_CACHES):
        _aws_default_vpc(stack, cache, report_violation)
    for cache in gcp:
        _gcp_default_network(stack, cache, report_violation)


#### Log stores: an explicit retention ####

# Each log store's retention setting (days): a CloudWatch Logs group without one keeps its logs forever; a Cloud
# Logging bucket without one keeps the service's default (30 days), which nobody chose.
HW_LTS_GROUP = "huaweicloud:Lts/group:Group"
LOG_RETENTION_SETTINGS = {AWS_LOG_GROUP: "retentionInDays", GCP_LOG_BUCKET: "retentionDays",
                          ALI_LOG_STORE: "retentionPeriod", HW_LTS_GROUP: "ttlInDays"}
ALI_LOG_STORE_FOREVER = 3650
"""An SLS logstore's retentionPeriod that keeps logs permanently (pulumi_alicloud log.Store: "[1-3650] ... stored
permanently when the value is 3650")."""


def check_log_retention(resource: ResourceInput, report_violation: ReportViolation) -> None:
    setting = LOG_RETENTION_SETTINGS.get(resource.resource_type)
    if setting is None:
        return
    value = resource.props.get(setting)
    days = _integer(value)
    if days is None or days <= 0 or (resource.resource_type == ALI_LOG_STORE and days >= ALI_LOG_STORE_FOREVER):
        shown = "unset" if value is None else _shown(value)
        report_violation(f"the log store has no retention ({setting} is {shown}), so it keeps logs forever or for "
                         f"a default nobody chose: set {setting} (inferstack keeps the servers' logs 90 days)")


#### The rule set ####

RESOURCE_RULES = [
    ResourceRule("admin-ports-not-public", "No firewall rule opens SSH (22) or RDP (3389) to a public network.",
                 check_admin_ports, _reads_ingress, severity="critical"),
    ResourceRule("world-ingress-serving-port-only",
                 "Only a serving port (the inference API), or a load balancer's HTTPS or redirect port, may be open to "
                 "a public network.", check_public_ingress, _reads_ingress, config_schema=SERVING_PORTS_SCHEMA),
    ResourceRule("buckets-not-public",
                 "No bucket ACL, bucket policy or IAM grant admits the public; public access blocks are fully on.",
                 check_buckets_not_public, lambda t: t in _NOT_PUBLIC, severity="critical"),
    ResourceRule("encryption-at-rest", "Buckets, server disks and log stores are encrypted at rest.",
                 check_encryption, lambda t: t in _ENCRYPTION or t in _ALWAYS_ENCRYPTED),
    ResourceRule("metadata-tokens-required",
                 "The instance metadata service answers only requests with a session token (IMDSv2), one hop away.",
                 check_metadata, lambda t: t in METADATA_TYPES),
    ResourceRule("storage-grants-no-wildcards",
                 "Identity policies grant no wildcard storage action, no storage on every bucket, no project-wide "
                 "storage role and no broad managed storage policy.",
                 check_storage_grants, lambda t: t in _STORAGE_GRANT_TYPES),
    ResourceRule("cdn-https-only", "CDNs serve viewers over HTTPS only and read private origins with their own "
                 "identity.", check_cdn, lambda t: t in _CDN),
    ResourceRule("servers-no-public-address",
                 "A managed group's template gives its servers no public address (IPv4 or IPv6).",
                 check_no_public_address, lambda t: t in _PUBLIC_ADDRESS, severity="critical"),
    ResourceRule("load-balancer-https-only",
                 "Load balancers listen with HTTPS on 443 under a TLS 1.2+ policy, and with HTTP on 80 only to "
                 "redirect; no other listener.", check_listeners, lambda t: t in _LISTENERS),
    ResourceRule("load-balancer-backends-on-serving-port",
                 "Load balancers forward to a serving port and health-check the serving health path there (target "
                 "groups, backend services, server groups, pools).", check_backends, lambda t: t in _BACKENDS,
                 config_schema=SERVING_PORTS_SCHEMA),
    ResourceRule("managed-redis-private-tls-auth",
                 "A managed Redis (ElastiCache, Memorystore, Tair, DCS) lives in the private network with no public "
                 "endpoint or whitelist entry, encrypts in transit (TLS) and requires AUTH; ElastiCache also at rest.",
                 check_managed_redis, _reads_cache, severity="critical"),
    ResourceRule("log-stores-have-retention",
                 "Log stores (CloudWatch Logs groups, Cloud Logging buckets, SLS logstores, LTS groups) keep logs for "
                 "a set number of days.", check_log_retention, lambda t: t in LOG_RETENTION_SETTINGS),
]
STACK_RULES = [
    StackRule("buckets-have-public-access-block",
              "Every S3 and OSS bucket has a public access block (a separate resource on those clouds).",
              check_public_access_blocks, severity="critical"),
    StackRule("buckets-have-default-encryption",
              "Every S3 and OSS bucket has default server-side encryption (a separate resource on those clouds).",
              check_default_encryption),
    StackRule("server-identity-least-privilege",
              "The servers' identity holds only what inferstack grants: its model prefix, its own secrets, the "
              "managed shell.", check_server_identity),
    StackRule("cdn-https-front-ends",
              "CDN front ends made of several resources (Google Cloud load balancer, Alibaba CDN functions) force "
              "HTTPS and read a private origin.", check_cdn_front_ends),
    StackRule("public-api-has-api-key",
              "A port or an internet-facing load balancer open to any public source comes with the servers' API key: "
              "a secret of the stack that the servers' identity may read.", check_public_api_key),
    StackRule("load-balancer-https-front-ends",
              "Load balancers made of several resources hold up together: HTTPS proxies and listeners have a TLS 1.2+ "
              "policy of the stack, plain HTTP only redirects, every backend has a health check of the stack, the "
              "backends of one Google Cloud URL map share one Cloud Armor policy.",
              check_https_front_ends),
    StackRule("load-balancer-only-public-listener",
              "Only a load balancer's own firewall opens 443 and 80 to callers; a managed group's serving port "
              "admits its load balancer only.", check_only_public_listener, severity="critical",
              config_schema=SERVING_PORTS_SCHEMA),
    StackRule("fleet-spans-zones", "Every managed group spans at least minZones zones (default 2, production's).",
              check_fleet_zones, config_schema=MIN_ZONES_SCHEMA),
    StackRule("managed-redis-users-and-network",
              "What a managed Redis names is the stack's and private: ElastiCache user groups and their users are "
              "resources of the stack, and no cache sits in a default network (an AWS default VPC's subnets or "
              "security group, a Google network named default).", check_cache_links, severity="critical"),
    StackRule("production-runs-a-protected-fleet",
              "A stack of the production stage (config stage, default production) runs its servers as managed groups "
              "behind a load balancer that serves HTTPS (TLS 1.2+), protected as inferstack protects them; no loose "
              "server.", check_production_fleet, severity="critical", config_schema=STAGE_SCHEMA),
    StackRule("fleet-watched-by-alarms", "Every managed group's load balancer is watched by alarms of the cloud's "
              "monitoring (unhealthy servers, latency, healthy servers at the ceiling).", check_fleet_alarms,
              severity="medium", level="advisory"),
]


#### Running the whole set over plain resources (the component tests) ####


@dataclass(frozen=True)
class Finding:
    rule: str
    level: str
    message: str
    urn: str


@dataclass
class Evaluation:
    findings: list[Finding] = field(default_factory=list)
    not_applicable: dict[tuple[str, str], str] = field(default_factory=dict)
    """(rule, urn; "" for a stack rule) → the reason."""
    examined: dict[str, set[str]] = field(default_factory=dict)
    """Resource rule → the resource types it checked."""


def evaluate(resources: Sequence[PlainResource], config: Mapping[str, Mapping[str, Any]] | None = None) -> Evaluation:
    """Every rule over a stack's resources, as the engine runs the pack: resource rules on each resource's inputs,
    stack rules on all of them. `config` maps a rule's name to its configuration."""
    result = Evaluation()
    for resource in (r for r in resources if r.custom):
        inputs = resource.inputs if resource.inputs is not None else resource.props
        for rule in RESOURCE_RULES:
            if rule.reads(resource.resource_type):
                result.examined.setdefault(rule.name, set()).add(resource.resource_type)
            checked = ResourceInput(resource.resource_type, inputs, (config or {}).get(rule.name, {}))
            _collect(rule.name, rule.level, resource.urn, result, functools.partial(rule.check, checked))
    for stack_rule in STACK_RULES:
        stack = Stack(resources, config=(config or {}).get(stack_rule.name, {}))
        _collect(stack_rule.name, stack_rule.level, "", result, functools.partial(stack_rule.check, stack))
    return result


def _collect(rule: str, level: str, checked_urn: str, result: Evaluation,
             run: Callable[[ReportViolation], None]) -> None:
    def report(message: str, urn: str | None = None) -> None:
        result.findings.append(Finding(rule, level, message, urn or checked_urn))

    try:
        run(report)
    except NotApplicable as verdict:
        result.not_applicable[(rule, checked_urn)] = verdict.reason

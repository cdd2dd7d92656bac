"""The servers' identity holds exactly what inferstack grants (`SERVER_GRANTS`): its model prefix, its own
secrets, the managed shell; on AWS, Alibaba and Huawei as policy documents, on Google Cloud as IAM grants to its
service account. Any other grant that names the identity is reported. On AWS it may also assume its streaming
runtime's model reader, a role of the stack that trusts it alone and reads its model prefix only (`MODEL_READER`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from guardrails.core import (
    ReportViolation,
    Stack,
    StackResource,
    Statement,
    items,
    policy_document,
    statements,
)
from guardrails.resource_types import (
    ALI_INSTANCE,
    ALI_LAUNCH_TEMPLATES,
    ALI_POLICY,
    ALI_ROLE,
    ALI_ROLE_POLICY_ATTACHMENT,
    ALI_SCALING_CONFIGURATION,
    ALI_SECRET,
    AWS_AUTOSCALING_GROUP,
    AWS_IMAGE_BUILD_COMPONENT,
    AWS_IMAGE_BUILD_INFRASTRUCTURE,
    AWS_INSTANCE,
    AWS_INSTANCE_PROFILE,
    AWS_LAUNCH_CONFIGURATION,
    AWS_LAUNCH_TEMPLATE,
    AWS_LOG_GROUP,
    AWS_MANAGED_POLICY,
    AWS_PARAMETER,
    AWS_POLICY_ATTACHMENT,
    AWS_ROLE,
    AWS_ROLE_ATTACHMENTS_EXCLUSIVE,
    AWS_ROLE_POLICY,
    AWS_ROLE_POLICY_ATTACHMENT,
    AWS_SPOT_INSTANCE_REQUEST,
    GCP_BUCKET_IAM_BINDING,
    GCP_BUCKET_IAM_MEMBER,
    GCP_INSTANCE,
    GCP_INSTANCE_TEMPLATES,
    GCP_PROJECT_IAM_MEMBER,
    GCP_SECRET,
    GCP_SECRET_IAM_BINDING,
    GCP_SECRET_IAM_MEMBER,
    GCP_SERVICE_ACCOUNT,
    HW_AGENCY,
    HW_AS_CONFIGURATION,
    HW_AS_GROUP,
    HW_INSTANCE,
    HW_ROLE,
    HW_SECRET,
)
from guardrails.storage_grants import ALIBABA_STORAGE, AWS_STORAGE, HUAWEI_STORAGE, aws_managed_name, wild

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
    own_group_actions: frozenset[str] = frozenset()
    """Allowed on the stack's own Auto Scaling groups only, by ARN: a server completes its own launch hook."""
    reader_assumes: frozenset[str] = frozenset()
    """Allowed on the identity's own model reader roles only, by ARN (`MODEL_READER`): a streaming runtime's
    credentials."""
    managed: frozenset[str] = frozenset()
    """AWS-managed policies it may have attached (none for the servers: `IMAGE_BUILD`'s Image Builder policy)."""

    def kind(self, action: str) -> str | None:
        """"object", "listing", "secret", "anywhere", or None for an action inferstack never grants (IAM actions
        are case-insensitive)."""
        kinds = {"object": self.object_reads, "listing": self.listings, "secret": self.secret_reads,
                 "anywhere": self.anywhere, "logs": self.log_writes, "metrics": self.metric_writes,
                 "group": self.own_group_actions, "reader": self.reader_assumes}
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
                            "ssmmessages:OpenDataChannel", "ec2:DescribeTags",
                            "autoscaling:DescribeAutoScalingInstances"}),
        prefix_condition="s3:prefix",
        # RolePolicy telemetry-write: the CloudWatch agent (components/aws/identity.py telemetry_statements).
        log_writes=frozenset({"logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"}),
        metric_writes=frozenset({"cloudwatch:PutMetricData"}), metric_condition="cloudwatch:namespace",
        # RolePolicy <fleet>-lifecycle: a server of a group with a warm pool finds its group (DescribeAutoScaling-
        # Instances, no resource type) and completes its own launch hook on that group only (components/aws/fleet.py
        # _lifecycle_grant, identity.py lifecycle_statements).
        own_group_actions=frozenset({"autoscaling:CompleteLifecycleAction"}),
        # RolePolicy assume-model-reader: a streaming runtime's own credentials (components/aws/identity.py
        # _model_reader), on the identity's own reader role only.
        reader_assumes=frozenset({"sts:AssumeRole"})),
    # BucketIAMMember with a prefix condition; SecretIamMember on each of the stack's secrets; no project role.
    "gcp": ServerGrants(object_reads=frozenset({"roles/storage.objectViewer"}), listings=frozenset(),
                        secret_reads=frozenset({"roles/secretmanager.secretAccessor"}),
                        # The Ops Agent's writes: project IAMMembers, the narrowest scope Google offers for them.
                        log_writes=frozenset({"roles/logging.logWriter"}),
                        metric_writes=frozenset({"roles/monitoring.metricWriter"})),
    # RAM policies model-read and secrets-read (Cloud Assistant, the managed shell, needs no grant); a fleet's servers
    # complete their own lifecycle action (components/alibaba/fleet.py LIFECYCLE_ACTIONS), which ESS grants on all
    # resources only (Auto Scaling API 2022-02-22, CompleteLifecycleAction, "Authorization information", read
    # 2026-12-07).
    "alibaba": ServerGrants(object_reads=frozenset({"oss:GetObject"}), listings=frozenset({"oss:ListObjects"}),
                            secret_reads=frozenset({"kms:GetSecretValue"}), prefix_condition="oss:prefix",
                            anywhere=frozenset({"ess:DescribeScalingInstances", "ess:DescribeLifecycleActions",
                                                "ess:CompleteLifecycleAction"}),
                            anywhere_for="complete their own scale-out"),
    # Custom roles model-read (a domain role: OBS is global) and secrets-read (a project role); no listing. A GPU
    # fleet's servers also report their requests per second (a project role, metrics-write: components/huawei/
    # identity.py METRIC_WRITE_ACTIONS), which Cloud Eye grants with no resource-level permission and no namespace
    # condition.
    "huawei": ServerGrants(object_reads=frozenset({"obs:object:GetObject"}), listings=frozenset(),
                           secret_reads=frozenset({"csms:secretVersion:get", "kms:dek:decrypt"}),
                           secrets_by_project=True, anywhere=frozenset({"ces:metricData:create"}),
                           anywhere_for="report their requests per second to Cloud Eye"),
}
"""The allow-list: one row per cloud (tests/policy checks each row against the component code)."""

MODEL_READER = ServerGrants(object_reads=frozenset({"s3:GetObject"}), listings=frozenset({"s3:ListBucket"}),
                            secret_reads=frozenset(), prefix_condition="s3:prefix")
"""What an AWS identity's model reader may do (components/aws/identity.py model_reader_statements): read and list its
identity's model prefix, nothing else (no boot bundle, no secret)."""

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
    readers: list[tuple[StackResource, str]] = field(default_factory=list)
    """(role, urn of the grant): the model reader roles it may assume (AWS), checked by `check_model_readers`."""

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
    return prefix if prefix and not wild(prefix) else None


def _listing_prefixes(statement: Statement, condition_key: str) -> list[Any] | None:
    """The prefixes a listing is limited to; None when no condition limits it."""
    condition = statement.body.get("Condition")
    if not isinstance(condition, Mapping):
        return None
    prefixes: list[Any] = []
    for operator in ("StringLike", "StringEquals"):
        for key, values in (condition.get(operator) or {}).items():
            if str(key).lower() == condition_key.lower():
                prefixes += items(values)
    return prefixes or None


class Checker:
    """Checks one identity's documents against its cloud's row of SERVER_GRANTS."""

    def __init__(self, stack: Stack, identity: ServerIdentity, row: ServerGrants | None = None) -> None:
        self.stack = stack
        self.identity = identity
        self.row = row or SERVER_GRANTS[identity.cloud]
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
        elif kind == "group":
            self.group_action(resources, action, label, urn)
        elif kind == "reader":
            self.reader_assume(resources, action, label, urn)
        elif kind is None:
            shell = f" and {self.row.anywhere_for}" if self.row.anywhere_for else ""
            self.identity.report(f"the servers' identity may {action} (statement {label}), which inferstack never "
                                 f"grants: the servers only read their model prefix and their own secrets{shell} "
                                 "(docs/policy.md lists the actions); remove it", urn)

    def object_read(self, resource: str, action: str, label: str, urn: str) -> None:
        path = self.dialect.bucket_path(resource)
        bucket, _, key = (path or "").partition("/")
        prefix = _scoped_key(key) if bucket and not wild(bucket) else None
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
        if path is None or "/" in path or wild(path):
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

    def group_action(self, resources: list[str], action: str, label: str, urn: str) -> None:
        groups = {str(arn) for g in self.stack.of_type(AWS_AUTOSCALING_GROUP)
                  if (arn := self.stack.known(g.props, "arn"))}
        for resource in resources or ["every resource (no Resource)"]:
            if resource not in groups:
                self.identity.report(f"the servers' identity may {action} on {resource} (statement {label}), which "
                                     "is not an Auto Scaling group of this stack: grant it on the stack's own group's "
                                     "ARN only", urn)

    def reader_assume(self, resources: list[str], action: str, label: str, urn: str) -> None:
        readers = {str(arn): role for role in self.stack.of_type(AWS_ROLE)
                   if (arn := self.stack.known(role.props, "arn"))}
        for resource in resources or ["every resource (no Resource)"]:
            reader = readers.get(resource)
            if reader is None or reader.urn == self.identity.resource.urn:
                self.identity.report(f"the servers' identity may {action} on {resource} (statement {label}), which "
                                     "is not a role of this stack: grant it on the stack's own model reader's ARN "
                                     "only", urn)
            else:
                self.identity.readers.append((reader, urn))

    def metric_write(self, statement: Statement, action: str, urn: str) -> None:
        key = self.row.metric_condition.lower()
        condition = statement.body.get("Condition")
        names = [value for operator, pairs in (condition.items() if isinstance(condition, Mapping) else [])
                 if str(operator) == "StringEquals" and isinstance(pairs, Mapping)
                 for k, value in pairs.items() if str(k).lower() == key]
        if len(names) != 1 or not isinstance(names[0], str) or wild(names[0]):
            self.identity.report(f"the servers' identity may {action} (statement {statement.label}) in any "
                                 f"namespace: add a StringEquals {self.row.metric_condition} condition naming the "
                                 "stack's own", urn)
            return
        # inferstack names each deployment's namespace as its log group (components/aws/observability.py
        # create_telemetry): another stack's namespace would let a server feed another fleet's alarms.
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
    parsed = policy_document(document)
    if parsed is None:
        return None
    for body in items(parsed.get("Statement")):
        if not isinstance(body, Mapping):
            return None
        principal = body.get("Principal") or {}
        services = items(principal.get("Service")) if isinstance(principal, Mapping) else []
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


def aws_identity_documents(stack: Stack, checker: Checker) -> None:
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
                 if stack.refers(a, "roleName", role, *names) for arn in items(a.props.get("policyArns"))]
    attached += [(role, arn) for arn in items(stack.known(role.props, "managedPolicyArns"))]
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
        elif aws_managed_name(arn) in checker.row.managed:
            continue
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


def _alibaba_identity_documents(stack: Stack, checker: Checker) -> None:
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


def _huawei_identity_documents(stack: Stack, checker: Checker) -> None:
    agency, identity = checker.identity.resource, checker.identity
    named: list[tuple[str, Any]] = [
        (scope, name) for key, scope in _HUAWEI_ATTACHMENTS for name in stack.items(stack.known(agency.props, key))]
    named += [("project", name) for project in stack.items(stack.known(agency.props, "projectRoles"))
              for name in items(project.get("roles"))]
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
    document = policy_document(value)
    if document is None:
        if depends or any(name in str(value) for name in names):
            yield grant, None, {}
        return
    for binding in items(document.get("bindings")):
        if depends or any(name in items(binding.get("members")) for name in names):
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


def image_build_roles(stack: Stack) -> set[str]:
    """URNs of the roles whose instance profiles only image builds take (an Image Builder infrastructure
    configuration's `instanceProfileName`), never a server (an instance or a launch template naming the profile)."""
    builds, served = set(), set()
    for profile in stack.of_type(AWS_INSTANCE_PROFILE):
        names = stack.names_of(profile)
        if any(stack.refers(infra, "instanceProfileName", profile, *names)
               for infra in stack.of_type(AWS_IMAGE_BUILD_INFRASTRUCTURE)):
            builds.add(profile.urn)
        if any(stack.names(user, profile, names) for user in stack.of_type(
                AWS_INSTANCE, AWS_LAUNCH_TEMPLATE, AWS_LAUNCH_CONFIGURATION, AWS_SPOT_INSTANCE_REQUEST)):
            served.add(profile.urn)
    roles = set()
    for role in stack.of_type(AWS_ROLE):
        profiles = {p.urn for p in stack.of_type(AWS_INSTANCE_PROFILE)
                    if stack.refers(p, "role", role, *stack.names_of(role))}
        if profiles and profiles <= builds and not profiles & served:
            roles.add(role.urn)
    return roles


def server_identities(stack: Stack, report_violation: ReportViolation) -> list[ServerIdentity]:
    """Every identity the servers take, with its storage scopes, readable secrets and violations (not an image
    build's: `image_build_identities`)."""
    builds = image_build_roles(stack)
    identities = [*(identity for identity in _identities_trusting(stack, AWS_ROLE, "assumeRolePolicy", "ec2.", "aws",
                                                                  report_violation)
                    if identity.resource.urn not in builds),
                  *_identities_trusting(stack, ALI_ROLE, "assumeRolePolicyDocument", "ecs.", "alibaba",
                                        report_violation),
                  *(ServerIdentity("huawei", agency) for agency in stack.of_type(HW_AGENCY)
                    if stack.known(agency.props, "delegatedServiceName") == "op_svc_ecs"),
                  *_gcp_server_accounts(stack)]
    read = {"aws": aws_identity_documents, "alibaba": _alibaba_identity_documents,
            "huawei": _huawei_identity_documents}
    for identity in identities:
        identity.granted_by.add(identity.resource.urn)
        if identity.cloud == "gcp":
            _check_gcp_account(stack, identity)
        else:
            read[identity.cloud](stack, Checker(stack, identity))
        check_model_readers(stack, identity)
        models = {scope for scope in identity.storage if not scope.endswith(f"/{BOOT_BUNDLE_PREFIX}*")}
        buckets = {scope.split("/", 1)[0] for scope in identity.storage}
        if len(models) > 1 or len(buckets) > 1:
            identity.report(f"the servers' identity reads {len(identity.storage)} prefixes "
                            f"({', '.join(sorted(identity.storage))}): it reads one model prefix of one bucket "
                            f"(and that bucket's {BOOT_BUNDLE_PREFIX})", identity.resource.urn)
        unknown_grants(stack, identity)
    return identities


def check_model_readers(stack: Stack, identity: ServerIdentity) -> None:
    """Each role the identity may assume is a model reader of its own: trusted by this identity alone, reading this
    identity's model prefix and nothing else. Anything wider is reported on the identity."""
    own_arn = stack.known(identity.resource.props, "arn")
    for role, grant_urn in identity.readers:
        reader = ServerIdentity(identity.cloud, role)
        reader.granted_by.update({role.urn, grant_urn})
        _check_reader_trust(stack, role, own_arn, reader)
        aws_identity_documents(stack, Checker(stack, reader, MODEL_READER))
        own_models = {scope for scope in identity.storage if not scope.endswith(f"/{BOOT_BUNDLE_PREFIX}*")}
        for scope in sorted(reader.storage - own_models):
            reader.report(f"the model reader {role.name} reads {scope}, which is not the model prefix of the servers' "
                          f"identity ({', '.join(sorted(own_models)) or 'none'}): it reads that prefix only", role.urn)
        unknown_grants(stack, reader, READER_USERS)
        identity.violations += reader.violations
        identity.granted_by.add(role.urn)


def _check_reader_trust(stack: Stack, role: StackResource, own_arn: Any, reader: ServerIdentity) -> None:
    """The reader's trust policy lets the servers' identity, by its ARN, assume it, and no one else."""
    trust = stack.known(role.props, "assumeRolePolicy")
    if trust is None or own_arn is None:
        return  # unknown during a preview: checked at `pulumi up`
    document = policy_document(trust)
    bodies = items(document.get("Statement")) if document is not None else []
    wider = [body for body in bodies if not (
        isinstance(body, Mapping) and str(body.get("Effect", "")).lower() == "allow"
        and items(body.get("Action")) == ["sts:AssumeRole"] and set(body) <= {"Sid", "Effect", "Action", "Principal"}
        and isinstance(body.get("Principal"), Mapping) and set(body["Principal"]) == {"AWS"}
        and items(body["Principal"]["AWS"]) == [own_arn])]
    if document is None or not bodies or wider:
        reader.report(f"the model reader {role.name} may be assumed by more than the servers' identity ({own_arn}): "
                      "its trust policy names that role's ARN alone, with sts:AssumeRole and no condition", role.urn)


READER_USERS = frozenset({*IDENTITY_USERS, "aws:s3/bucketObjectv2:BucketObjectv2", "aws:s3/bucketObject:BucketObject",
                          AWS_IMAGE_BUILD_COMPONENT})
"""Resources that name a model reader without granting it anything: those of the servers' identity, the boot bundle
(an S3 object), whose runtime unit names the reader's ARN to assume, and an image build's component document, which
names its own reader's (and is built from the servers' settings, which name theirs)."""
CLOUD_PACKAGES = ("aws:", "gcp:", "alicloud:", "huaweicloud:")
"""Only the clouds' resources can grant anything: components and the stack itself merely pass values on (an
inferstack component's `identityId` output is the role's ARN)."""


def unknown_grants(stack: Stack, identity: ServerIdentity, users: frozenset[str] = frozenset(IDENTITY_USERS)) -> None:
    names = stack.names_of(identity.resource)
    for resource in stack.resources:
        if (resource.urn in identity.granted_by or resource.resource_type in users
                or resource.resource_type in (AWS_ROLE, ALI_ROLE, HW_AGENCY, GCP_SERVICE_ACCOUNT)
                or not resource.resource_type.startswith(CLOUD_PACKAGES)):
            continue
        if stack.names(resource, identity.resource, names):
            identity.report(f"{resource.name} ({resource.resource_type}) names the servers' identity "
                            f"{identity.resource.name}, and the pack cannot tell what it grants: grant the server's "
                            "permissions the way inferstack does (docs/policy.md)", resource.urn)

"""Identity policies grant no wildcard storage: no wildcard storage action, no storage on every bucket, no
project-wide storage role and no broad managed storage policy. The storage dialects here also serve the servers'
identity (`server_identity`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from guardrails.core import ReportViolation, ResourceInput, ResourceRule, Statement, items, statements
from guardrails.resource_types import (
    ALI_POLICY,
    ALI_ROLE_POLICY_ATTACHMENT,
    AWS_IDENTITY_POLICIES,
    AWS_POLICY_ATTACHMENT,
    AWS_ROLE,
    AWS_ROLE_ATTACHMENTS_EXCLUSIVE,
    AWS_ROLE_POLICY_ATTACHMENT,
    GCP_BUCKET_IAM_BINDING,
    GCP_BUCKET_IAM_MEMBER,
    GCP_PROJECT_IAM_BINDING,
    GCP_PROJECT_IAM_MEMBER,
    GCP_PROJECT_IAM_POLICY,
    HW_ROLE,
    cloud_of,
)
from guardrails.storage import gcp_bindings

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


def wild(text: str) -> bool:
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
    return path is not None and (not bucket or wild(bucket))


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
            if wild(action):
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
        for inline in items(props.get("inlinePolicies")):
            _check_storage_wildcards(statements(inline.get("policy"), report_violation, "an inline policy"),
                                     AWS_STORAGE, report_violation)
        for arn in items(props.get("managedPolicyArns")):
            _broad_policy(aws_managed_name(arn), AWS_BROAD_MANAGED_POLICIES, report_violation)
    elif resource.resource_type in (AWS_ROLE_POLICY_ATTACHMENT, AWS_POLICY_ATTACHMENT):
        _broad_policy(aws_managed_name(props.get("policyArn")), AWS_BROAD_MANAGED_POLICIES, report_violation)
    elif resource.resource_type == AWS_ROLE_ATTACHMENTS_EXCLUSIVE:
        for arn in items(props.get("policyArns")):
            _broad_policy(aws_managed_name(arn), AWS_BROAD_MANAGED_POLICIES, report_violation)


def _gcp_identity(resource: ResourceInput, report_violation: ReportViolation) -> None:
    props = resource.props
    if resource.resource_type in (GCP_PROJECT_IAM_MEMBER, GCP_PROJECT_IAM_BINDING):
        _project_storage_roles([props], report_violation)
    elif resource.resource_type == GCP_PROJECT_IAM_POLICY:
        _project_storage_roles(gcp_bindings(props.get("policyData"), report_violation), report_violation)
    elif resource.resource_type in (GCP_BUCKET_IAM_MEMBER, GCP_BUCKET_IAM_BINDING) and (
            props.get("role") in GCP_BUCKET_ADMIN_ROLES):
        members = [props["member"]] if props.get("member") else items(props.get("members"))
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
             "huawei": _huawei_identity}.get(cloud_of(resource.resource_type))
    if check is not None:
        check(resource, report_violation)


STORAGE_GRANTS_NO_WILDCARDS = ResourceRule(
    "storage-grants-no-wildcards",
    "Identity policies grant no wildcard storage action, no storage on every bucket, no project-wide "
    "storage role and no broad managed storage policy.",
    check_storage_grants, lambda t: t in _STORAGE_GRANT_TYPES)

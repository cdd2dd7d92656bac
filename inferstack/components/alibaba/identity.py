"""Alibaba secrets and identity: KMS Secrets Manager secrets in the KMS instance of the stack's settings
(settings.py), and the servers' RAM role, which reads its model prefix and its own secrets and nothing else.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from inferstack.components.alibaba.names import account_name
from inferstack.components.alibaba.settings import kms_instance
from inferstack.components.contract import IdentityRequest, IdentityResult, SecretsRequest, SecretsResult
from inferstack.components.naming import child_options
from inferstack.names import slug

#### Secrets and identity ####


def create_secrets(parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
    instance_id, key_id = kms_instance()
    path = "/".join(["inferstack", slug(pulumi.get_project()), slug(pulumi.get_stack()), slug(name)])
    refs, grant_ids = {}, []
    for key, value in request.values.items():
        secret = alicloud.kms.Secret(
            f"{name}-{key}", secret_name=f"{path}/{key}", secret_data=value, secret_type="Generic",
            version_id="v1", dkms_instance_id=instance_id, encryption_key_id=key_id,
            # The value lives in the stack's encrypted config; `pulumi up` recreates a deleted secret, so
            # there is nothing a recovery window would save, and it would block the name for 7-30 days.
            force_delete_without_recovery=True,
            description=f"inferstack {key} for {name}; read by the server at boot", tags=request.tags,
            # A new value replaces the secret (its version id stays v1); the server reads it at its next start.
            opts=child_options(parent, replace_on_changes=["secretData"], delete_before_replace=True))
        refs[key] = secret.secret_name
        grant_ids.append(secret.arn)
    return SecretsResult(refs=refs, grant_ids=grant_ids)


def create_identity(parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
    opts = child_options(parent)
    role = alicloud.ram.Role(
        f"{name}-role", role_name=account_name(parent, name, "role"),
        description="inferstack inference server: read its model prefix and its secrets",
        assume_role_policy_document=json.dumps({"Version": "1", "Statement": [{
            "Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": ["ecs.aliyuncs.com"]}}]}),
        tags=request.tags, opts=opts)
    bucket = pulumi.Output.concat("acs:oss:*:*:", request.model_bucket)
    policies: dict[str, list[dict[str, Any]]] = {"model-read": [
        {"Effect": "Allow", "Action": "oss:ListObjects", "Resource": bucket,
         "Condition": {"StringLike": {"oss:Prefix": [f"{request.model_prefix}*"]}}},
        {"Effect": "Allow", "Action": "oss:GetObject",
         "Resource": [pulumi.Output.concat(bucket, "/", request.model_prefix, "*"),
                      pulumi.Output.concat(bucket, "/", request.bundle_prefix, "*")]}]}
    if request.secret_ids:
        policies["secrets-read"] = [{"Effect": "Allow", "Action": "kms:GetSecretValue",
                                     "Resource": list(request.secret_ids)}]
    # Cloud Assistant (the managed shell) needs no grant on the server's role: its agent has its own channel.
    attachments = []
    for label, statements in policies.items():
        policy = alicloud.ram.Policy(
            f"{name}-{label}", policy_name=account_name(parent, name, label),
            policy_document=pulumi.Output.json_dumps({"Version": "1", "Statement": statements}),
            description=f"inferstack {label} for {name}", tags=request.tags, opts=opts)
        attachments.append(alicloud.ram.RolePolicyAttachment(
            f"{name}-{label}-attachment", role_name=role.role_name, policy_name=policy.policy_name,
            policy_type="Custom", opts=opts))
    # The role name resolves only once every policy is attached: a server that takes it can read its model
    # from its first boot.
    ready = pulumi.Output.all(role.role_name, *(a.id for a in attachments)).apply(lambda ids: ids[0])
    return IdentityResult(identity_id=role.arn, attachment=ready)

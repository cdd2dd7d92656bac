"""Huawei Cloud secrets and identity: CSMS secrets, the servers' ECS agency with its custom policies (read the model
prefix, the boot bundles and the secrets), and the agency through which OBS delivers access logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_huaweicloud as hw

from inferstack.components.contract import IdentityRequest, IdentityResult, SecretsRequest, SecretsResult, StrOutput
from inferstack.components.huawei.lookups import provider_region
from inferstack.components.naming import child_options
from inferstack.names import unique_name

# IAM agencies delegate to a cloud service by its service account, op_svc_<service>.
ECS_SERVICE = "op_svc_ecs"
OBS_SERVICE = "op_svc_obs"
# Custom policies: "AX" applies to global services (OBS), "XA" to region-specific projects (CSMS, KMS).
GLOBAL_POLICY, REGIONAL_POLICY = "AX", "XA"
POLICY_VERSION = "1.1"
MODEL_READ_ACTIONS = ["obs:object:GetObject"]  # the bootstrap reads manifest.json and ranges; it never lists
# iam.Role creates role-based custom policies, in which CSMS actions have no resource-level permissions (DEW API
# reference, "Actions Supported by Policy-based Authorization"): the grant is limited to the region's project.
SECRET_READ_ACTIONS = ["csms:secretVersion:get", "kms:dek:decrypt"]
LOG_WRITE_ACTIONS = ["obs:object:PutObject"]
# Cloud Eye's "Adding Monitoring Data" (POST /V1.0/{project_id}/metric-data) needs ces:metricData:create, which has no
# resource-level permission: the grant covers the region's project, and the action writes metric data only.
METRIC_WRITE_ACTIONS = ["ces:metricData:create"]
IAM_NAME_MAX_LENGTH = 64
CSMS_NAME_MAX_LENGTH = 64


#### Secrets and identity ####


def create_secrets(parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
    refs, grant_ids = {}, []
    for key, value in request.values.items():
        # CSMS names: letters, digits, "_" and "-", at most 64 characters; the key stays readable at the end.
        prefix = unique_name([pulumi.get_project(), pulumi.get_stack(), name],
                             max_length=CSMS_NAME_MAX_LENGTH - len(key) - 1)
        secret = hw.dew.Secret(
            f"{name}-{key}", name=f"{prefix}-{key}", secret_text=value,
            description=f"inferstack {key} for {name}; read by the server at boot", tags=request.tags,
            opts=child_options(parent))
        refs[key] = secret.name
        grant_ids.append(secret.name)
    return SecretsResult(refs=refs, grant_ids=grant_ids)


def create_identity(parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
    opts = child_options(parent)
    model_read = hw.iam.Role(
        f"{name}-model-read", name=_iam_name(name, "model-read"), type=GLOBAL_POLICY,
        description="inferstack inference server: read its model prefix",
        policy=_iam_policy(MODEL_READ_ACTIONS, [
            pulumi.Output.concat("obs:*:*:object:", request.model_bucket, "/", prefix, "*")
            for prefix in (request.model_prefix, request.bundle_prefix)]),
        opts=opts)
    project_roles: list[dict[str, Any]] = []
    if request.secret_ids:
        secrets_read = hw.iam.Role(
            f"{name}-secrets-read", name=_iam_name(name, "secrets-read"), type=REGIONAL_POLICY,
            description="inferstack inference server: read CSMS secrets at boot",
            policy=_iam_policy(SECRET_READ_ACTIONS), opts=opts)
        project_roles.append({"project": provider_region(parent), "roles": [secrets_read.name]})
    if request.telemetry_grants:  # a GPU fleet's servers report their request rate (observability.create_telemetry)
        metric_write = hw.iam.Role(
            f"{name}-metrics-write", name=_iam_name(name, "metrics-write"), type=REGIONAL_POLICY,
            description="inferstack inference server: report its requests per second to Cloud Eye",
            policy=_iam_policy(METRIC_WRITE_ACTIONS), opts=opts)
        project_roles.append({"project": provider_region(parent), "roles": [metric_write.name]})
    # The agency names its policies, so it exists only once they do: a server that takes it can read its model
    # from its first boot.
    agency = hw.iam.Agency(
        f"{name}-agency", name=_iam_name(name, "agency"), delegated_service_name=ECS_SERVICE,
        description="inferstack inference server: read its model prefix and its secrets",
        domain_roles=[model_read.name], project_roles=project_roles or None, opts=opts)
    return IdentityResult(identity_id=agency.id, attachment=agency.name)


#### The buckets' access logs ####


def log_delivery(parent: pulumi.Resource, name: str, logs_bucket: pulumi.Input[str]) -> StrOutput:
    """An agency that lets OBS write access logs into the logs bucket (and nowhere else); returns its name."""
    opts = child_options(parent)
    writer = hw.iam.Role(
        f"{name}-log-write", name=_iam_name(name, "log-write"), type=GLOBAL_POLICY,
        description="inferstack: OBS writes access logs",
        policy=_iam_policy(LOG_WRITE_ACTIONS, [pulumi.Output.concat("obs:*:*:object:", logs_bucket, "/*")]),
        opts=opts)
    agency = hw.iam.Agency(
        f"{name}-log-delivery", name=_iam_name(name, "log-delivery"), delegated_service_name=OBS_SERVICE,
        description="inferstack: OBS delivers access logs", domain_roles=[writer.name], opts=opts)
    return agency.name


#### Helpers ####


def _iam_name(name: str, role: str) -> str:
    """Agency and custom-policy names are unique per account: project, stack and component keep them apart."""
    return unique_name([pulumi.get_project(), pulumi.get_stack(), name, role], max_length=IAM_NAME_MAX_LENGTH)


def _iam_policy(actions: Sequence[str], resources: Sequence[pulumi.Input[str]] | None = None) -> StrOutput:
    """A role-based custom policy with one Allow statement; without resources it covers the whole scope."""
    statement: dict[str, Any] = {"Effect": "Allow", "Action": list(actions)}
    if resources is not None:
        statement["Resource"] = list(resources)
    return pulumi.Output.json_dumps({"Version": POLICY_VERSION, "Statement": [statement]})

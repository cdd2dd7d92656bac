"""Google Cloud's secrets and server identity: Secret Manager, one secret per value, and a service account that reads
its model prefix and its secrets and writes the Ops Agent's telemetry, nothing else.

Sections follow `CloudBackend` (inferstack/components/backend.py).
"""

from __future__ import annotations

import re

import pulumi
import pulumi_gcp as gcp

from inferstack.components.contract import IdentityRequest, IdentityResult, SecretsRequest, SecretsResult
from inferstack.components.gcp.naming import gcp_labels, gcp_name
from inferstack.components.naming import child_options
from inferstack.errors import input_error

MODEL_READER_ROLE = "roles/storage.objectViewer"
SECRET_READER_ROLE = "roles/secretmanager.secretAccessor"
# The Ops Agent's writes. Google offers them as project roles only: "roles/logging.logWriter: Provides the permissions
# to write log entries" and "roles/monitoring.metricWriter: Provides write-only access to metrics" (IAM roles
# reference), which the Ops Agent's installation guide grants to the VM's service account ("Authorize the Ops
# Agent"); neither reads anything, and no log-bucket or metric-level grant exists for writing.
TELEMETRY_ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter")


#### Secrets and identity ####


def create_secrets(parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
    refs, grant_ids = {}, []
    for key, value in request.values.items():
        secret = gcp.secretmanager.Secret(
            f"{name}-{key}", secret_id=gcp_name(name, key, max_length=255), replication={"auto": {}},
            labels=gcp_labels(request.tags), opts=child_options(parent))
        version = gcp.secretmanager.SecretVersion(f"{name}-{key}-version", secret=secret.id, secret_data=value,
                                                  opts=child_options(parent))
        # The reference resolves once a version exists: the server reads `latest` at its first boot.
        refs[key] = pulumi.Output.all(secret.id, version.id).apply(lambda ids: ids[0])
        grant_ids.append(secret.id)
    return SecretsResult(refs=refs, grant_ids=grant_ids)


def create_identity(parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
    opts = child_options(parent)
    account = gcp.serviceaccount.Account(
        f"{name}-account", account_id=gcp_name(name, max_length=30), display_name=f"inferstack {name}"[:100],
        description="inferstack inference server: reads its model prefix and its secrets", opts=opts)
    model_read = gcp.storage.BucketIAMMember(
        f"{name}-model-read", bucket=request.model_bucket, role=MODEL_READER_ROLE, member=account.member,
        condition={"title": "model-prefix-only",
                   "description": f"objects under {request.model_prefix} and boot bundles only",
                   "expression": pulumi.Output.from_input(request.model_bucket).apply(
                       lambda bucket: prefix_condition(bucket, request.model_prefix, request.bundle_prefix))},
        opts=opts)
    secret_reads = [gcp.secretmanager.SecretIamMember(
        f"{name}-secret-read-{index}", secret_id=secret_id, role=SECRET_READER_ROLE, member=account.member,
        opts=opts) for index, secret_id in enumerate(request.secret_ids)]
    telemetry_writes = [gcp.projects.IAMMember(  # grants: the project the agent writes to (create_telemetry)
        f"{name}-{role.rsplit('.', 1)[-1].lower()}-{index}", project=project, role=role, member=account.member,
        opts=opts) for index, project in enumerate(request.telemetry_grants) for role in TELEMETRY_ROLES]
    # The email resolves only once every grant exists: a server that takes it can read its model from its
    # first boot.
    ready = pulumi.Output.all(account.email, model_read.id, *(grant.id for grant in
                                                              [*secret_reads, *telemetry_writes])).apply(
        lambda ids: ids[0])
    return IdentityResult(identity_id=account.email, attachment=ready)


def prefix_condition(bucket: str, prefix: str, objects_prefix: str) -> str:
    """The IAM condition that limits a bucket-level grant to one prefix (its objects, and listings under it) and to
    the objects under a second prefix (no listing)."""
    # The prefixes are written into the condition's expression: checked here, because a ServerIdentity created on
    # its own checks only that its model_prefix is a relative folder (an InferenceServer's comes from the plan, whose
    # schema admits nothing else).
    for field, value in (("model_prefix", prefix), ("bundle_prefix", objects_prefix)):
        if not re.fullmatch(r"[A-Za-z0-9._/-]+", value):
            raise input_error(field, "may hold letters, digits, '.', '_', '-' and '/' only", value=value,
                              fix="use the plan's model.bucket_prefix")
    objects = f"projects/_/buckets/{bucket}/objects/"
    return (f'resource.name.startsWith("{objects}{prefix}") || '
            f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{prefix}") || '
            f'resource.name.startsWith("{objects}{objects_prefix}")')

"""Secrets and identity: SSM Parameter Store SecureStrings the server reads by name at boot, and the IAM role and
instance profile that let it read its model prefix, its boot bundles and its own parameters, use Session Manager, and
write its telemetry (the CloudWatch agent's grants), and nothing else."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from inferstack.components.aws.lookups import partition
from inferstack.components.contract import IdentityRequest, IdentityResult, SecretsRequest, SecretsResult, StrOutput
from inferstack.components.naming import child_options
from inferstack.names import slug

# Session Manager's minimum (the same actions as the AWS managed policy AWSCloud9SSMInstanceProfile). The usual
# AmazonSSMManagedInstanceCore also grants ssm:GetParameter(s) on "*", which would let the server read every
# parameter in the account; with the default aws/ssm key, SecureStrings included.
SESSION_MANAGER_ACTIONS = [
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
]

# The CloudWatch agent's writes (telemetry_statements): to the deployment's log group, its metric namespace, and the
# instance's own tags (for AutoScalingGroupName).
TELEMETRY_LOG_ACTIONS = ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
TELEMETRY_METRIC_ACTIONS = ["cloudwatch:PutMetricData"]
TELEMETRY_ANYWHERE_ACTIONS = ["ec2:DescribeTags"]

#### Secrets and identity ####


def create_secrets(parent: pulumi.Resource, name: str, request: SecretsRequest) -> SecretsResult:
    # "/inferstack/..." because parameter names may not begin with "aws" or "ssm".
    path = "/" + "/".join(["inferstack", slug(pulumi.get_project()), slug(pulumi.get_stack()), slug(name)])
    refs, grant_ids = {}, []
    for key, value in request.values.items():
        parameter = aws.ssm.Parameter(
            f"{name}-{key}", name=f"{path}/{key}", type="SecureString", value=value,
            description=f"inferstack {key} for {name}; read by the server at boot", tags=request.tags,
            opts=child_options(parent))
        refs[key] = parameter.name
        grant_ids.append(parameter.arn)
    return SecretsResult(refs=refs, grant_ids=grant_ids)


def create_identity(parent: pulumi.Resource, name: str, request: IdentityRequest) -> IdentityResult:
    opts = child_options(parent)
    partition_name, dns_suffix = partition(parent)
    role = aws.iam.Role(
        f"{name}-role", description="inferstack inference server: read its model prefix and its secrets",
        assume_role_policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "sts:AssumeRole",
            "Principal": {"Service": dns_suffix.apply(lambda suffix: f"ec2.{suffix}")}}]}),
        tags=request.tags, opts=opts)
    bucket_arn = pulumi.Output.concat("arn:", partition_name, ":s3:::", request.model_bucket)
    policies: dict[str, list[dict[str, Any]]] = {
        "session-manager": [{"Effect": "Allow", "Action": SESSION_MANAGER_ACTIONS, "Resource": "*"}],
        "model-read": [
            {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
             "Condition": {"StringLike": {"s3:prefix": [f"{request.model_prefix}*"]}}},
            {"Sid": "ReadModelFiles", "Effect": "Allow", "Action": "s3:GetObject",
             "Resource": pulumi.Output.concat(bucket_arn, "/", request.model_prefix, "*")},
            {"Sid": "ReadBootBundles", "Effect": "Allow", "Action": "s3:GetObject",
             "Resource": pulumi.Output.concat(bucket_arn, "/", request.bundle_prefix, "*")}],
    }
    if request.secret_ids:
        policies["secrets-read"] = [{"Effect": "Allow", "Action": ["ssm:GetParameter", "ssm:GetParameters"],
                                     "Resource": list(request.secret_ids)}]
    if request.telemetry_grants:
        policies["telemetry-write"] = telemetry_statements(*request.telemetry_grants)
    attached = [aws.iam.RolePolicy(f"{name}-{label}", role=role.id, opts=opts, policy=pulumi.Output.json_dumps(
        {"Version": "2012-10-17", "Statement": statements})) for label, statements in policies.items()]
    profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, tags=request.tags, opts=opts)
    # The profile name resolves only once every policy is attached: a server that takes it can read its model
    # from its first boot.
    ready = pulumi.Output.all(profile.name, *(policy.id for policy in attached)).apply(lambda ids: ids[0])
    return IdentityResult(identity_id=role.arn, attachment=ready)


def telemetry_statements(log_group_arn: StrOutput, namespace: StrOutput, *rest: StrOutput) -> list[dict[str, Any]]:
    """The CloudWatch agent's writes, to the deployment's log group and metric namespace only (create_telemetry's
    grants). Service Authorization Reference (CloudWatch Logs): CreateLogStream and DescribeLogStreams act on the
    log-group resource, PutLogEvents on log-stream (`<group ARN>:log-stream:<name>`); PutMetricData has no resource
    type and is narrowed by the cloudwatch:namespace condition key; ec2:DescribeTags (no resource type) is how the
    agent reads the instance's aws:autoscaling:groupName tag for AutoScalingGroupName (ec2tagger). The agent needs no
    logs:CreateLogGroup (the group exists) nor PutRetentionPolicy (its configuration sets no retention)."""
    assert not rest, "AWS telemetry grants are (log group ARN, namespace)"
    return [
        {"Sid": "WriteServerLogs", "Effect": "Allow", "Action": TELEMETRY_LOG_ACTIONS[:2],
         "Resource": [log_group_arn, pulumi.Output.concat(log_group_arn, ":*")]},
        {"Sid": "PutServerLogEvents", "Effect": "Allow", "Action": TELEMETRY_LOG_ACTIONS[2],
         "Resource": pulumi.Output.concat(log_group_arn, ":log-stream:*")},
        {"Sid": "PutServerMetrics", "Effect": "Allow", "Action": TELEMETRY_METRIC_ACTIONS, "Resource": "*",
         "Condition": {"StringEquals": {"cloudwatch:namespace": namespace}}},
        {"Sid": "ReadOwnGroupTag", "Effect": "Allow", "Action": TELEMETRY_ANYWHERE_ACTIONS, "Resource": "*"},
    ]

"""Secrets and identity: SSM Parameter Store SecureStrings the server reads by name at boot, and the IAM role and
instance profile that let it read its model prefix, its boot bundles and its own parameters, use Session Manager, and
write its telemetry (the CloudWatch agent's grants), and nothing else. A runtime that streams the weights gets a role
of its own that may only read the model's prefix, which only the servers' role may assume (`_model_reader`)."""

from __future__ import annotations

from collections.abc import Mapping
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

# A server of a group with a warm pool completes its own launch lifecycle action (components/aws/fleet.py,
# lifecycle_statements): it finds its group by its instance id, then completes the action on that group.
LIFECYCLE_FIND_ACTIONS = ["autoscaling:DescribeAutoScalingInstances"]
LIFECYCLE_COMPLETE_ACTIONS = ["autoscaling:CompleteLifecycleAction"]

# A streaming runtime's credentials: the server assumes the model's reader role at each start of the runtime (files/
# cloud_access.py runtime_credentials) and hands them to the runtime's container alone.
ASSUME_READER_ACTIONS = ["sts:AssumeRole"]
READER_SESSION_S = 3600
"""The reader role's longest session: the hour AWS allows a role assumed with a role's credentials (role chaining),
what the server asks for."""

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
    partition_name, _ = partition(parent)
    role = instance_role(parent, f"{name}-role", "inferstack inference server: read its model prefix and its secrets",
                         request.tags)
    bucket_arn = pulumi.Output.concat("arn:", partition_name, ":s3:::", request.model_bucket)
    policies: dict[str, list[dict[str, Any]]] = {
        "session-manager": [{"Effect": "Allow", "Action": SESSION_MANAGER_ACTIONS, "Resource": "*"}],
        "model-read": [
            *model_reader_statements(bucket_arn, request.model_prefix),
            {"Sid": "ReadBootBundles", "Effect": "Allow", "Action": "s3:GetObject",
             "Resource": pulumi.Output.concat(bucket_arn, "/", request.bundle_prefix, "*")}],
    }
    if request.secret_ids:
        policies["secrets-read"] = [{"Effect": "Allow", "Action": ["ssm:GetParameter", "ssm:GetParameters"],
                                     "Resource": list(request.secret_ids)}]
    if request.telemetry_grants:
        policies["telemetry-write"] = telemetry_statements(*request.telemetry_grants)
    reader = model_reader(parent, f"{name}-reader", role, bucket_arn, request.model_prefix, request.tags,
                          "inferstack runtime: stream its model prefix (assumed by the servers' role)") \
        if request.model_reader else None
    if reader is not None:
        policies["assume-model-reader"] = assume_reader_statements(reader)
    attached = [aws.iam.RolePolicy(f"{name}-{label}", role=role.id, opts=opts, policy=pulumi.Output.json_dumps(
        {"Version": "2012-10-17", "Statement": statements})) for label, statements in policies.items()]
    profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, tags=request.tags, opts=opts)
    # The profile name resolves only once every policy is attached: a server that takes it can read its model
    # from its first boot.
    ready = pulumi.Output.all(profile.name, *(policy.id for policy in attached)).apply(lambda ids: ids[0])
    return IdentityResult(identity_id=role.arn, attachment=ready, model_reader_id=reader.ready if reader else None)


def instance_role(parent: pulumi.Resource, name: str, description: str, tags: Mapping[str, str]) -> aws.iam.Role:
    """A role that EC2 instances take (through an instance profile), and nothing else."""
    _, dns_suffix = partition(parent)
    return aws.iam.Role(
        name, description=description,
        assume_role_policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "sts:AssumeRole",
            "Principal": {"Service": dns_suffix.apply(lambda suffix: f"ec2.{suffix}")}}]}),
        tags=tags, opts=child_options(parent))


class _Reader:
    """The model reader role, and its ARN once its read policy is attached (a server assumes it at its first start)."""

    def __init__(self, role: aws.iam.Role, policy: aws.iam.RolePolicy) -> None:
        self.arn = role.arn
        self.ready: StrOutput = pulumi.Output.all(role.arn, policy.id).apply(lambda ids: ids[0])


def model_reader(parent: pulumi.Resource, name: str, trusted: aws.iam.Role, bucket_arn: StrOutput, model_prefix: str,
                 tags: Mapping[str, str], description: str) -> _Reader:
    """A streaming runtime's own role: trusted by `trusted` alone (Principal: its ARN; neither the account nor a
    service), an hour's sessions, and it may only read the model's prefix (model_reader_statements). The servers'
    role has one; an image build that starts a streaming runtime has its own (components/aws/image.py)."""
    opts = child_options(parent)
    role = aws.iam.Role(
        name, description=description,
        assume_role_policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"AWS": trusted.arn}}]}),
        max_session_duration=READER_SESSION_S, tags=tags, opts=opts)
    policy = aws.iam.RolePolicy(f"{name}-model-read", role=role.id, opts=opts, policy=pulumi.Output.json_dumps(
        {"Version": "2012-10-17", "Statement": model_reader_statements(bucket_arn, model_prefix)}))
    return _Reader(role, policy)


def assume_reader_statements(reader: _Reader) -> list[dict[str, Any]]:
    """What lets the trusted role take the reader's credentials: sts:AssumeRole on that one role."""
    return [{"Sid": "AssumeModelReader", "Effect": "Allow", "Action": ASSUME_READER_ACTIONS, "Resource": reader.arn}]


def model_reader_statements(bucket_arn: StrOutput, model_prefix: str) -> list[dict[str, Any]]:
    """What the model's readers read (the servers' role, and a streaming runtime's own with nothing else: no boot
    bundle, no secret): the model's files, and their listing, under its prefix only. vLLM lists the prefix for its
    safetensors and pulls the configuration and tokenizer files beside them with the same credentials."""
    return [
        {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [f"{model_prefix}*"]}}},
        {"Sid": "ReadModelFiles", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": pulumi.Output.concat(bucket_arn, "/", model_prefix, "*")},
    ]


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


def lifecycle_statements(group_arn: StrOutput) -> list[dict[str, Any]]:
    """What a server of a group with a warm pool needs to complete its own launch lifecycle action (files/
    cloud_access.py `complete_aws_lifecycle_action`): CompleteLifecycleAction on its own group's ARN only (Service
    Authorization Reference, Amazon EC2 Auto Scaling: the action takes the autoScalingGroup resource,
    arn:${Partition}:autoscaling:${Region}:${Account}:autoScalingGroup:${GroupId}:autoScalingGroupName/${GroupName}),
    and DescribeAutoScalingInstances, which has no resource type ("*" only) and tells the server its group's name
    (generated by Pulumi once the group exists, so not in the user data rendered before it) and its lifecycle
    state."""
    return [
        {"Sid": "FindOwnGroup", "Effect": "Allow", "Action": LIFECYCLE_FIND_ACTIONS, "Resource": "*"},
        {"Sid": "CompleteOwnLaunch", "Effect": "Allow", "Action": LIFECYCLE_COMPLETE_ACTIONS, "Resource": group_arn},
    ]

"""The identity image builds take (`startup.image: baked`, components/aws/image.py), checked against its own
allow-list (`IMAGE_BUILD`), and the rule that checks it beside the servers' identities (server_identity.py).

An AWS role whose instance profiles only Image Builder infrastructure configurations take holds Image Builder's
managed policy and the Systems Manager agent's own calls, reads the objects it downloads under the boot bundles'
prefix and, for a build that starts the runtime once to keep its caches (an Image Builder component with the step
`RUNTIME_START_STEP`), the model the stack's servers read (a prefix within theirs); it may assume a model reader of its
own for a streaming runtime, checked as the servers' readers are.
"""

from __future__ import annotations

from guardrails.core import NotApplicable, ReportViolation, Stack, StackRule
from guardrails.resource_types import (
    AWS_IMAGE_BUILD_COMPONENT,
    AWS_IMAGE_BUILD_INFRASTRUCTURE,
    AWS_ROLE,
    NO_SERVER_IDENTITY,
)
from guardrails.server_identity import (
    BOOT_BUNDLE_PREFIX,
    IDENTITY_USERS,
    Checker,
    ServerGrants,
    ServerIdentity,
    aws_identity_documents,
    check_model_readers,
    image_build_roles,
    server_identities,
    unknown_grants,
)

IMAGE_BUILD = ServerGrants(
    object_reads=frozenset({"s3:GetObject"}), listings=frozenset({"s3:ListBucket"}), secret_reads=frozenset(),
    prefix_condition="s3:prefix",
    anywhere=frozenset({"ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel",
                        "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
                        "ssmmessages:OpenDataChannel", "ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage",
                        "ec2messages:FailMessage", "ec2messages:GetEndpoint", "ec2messages:GetMessages",
                        "ec2messages:SendReply"}),
    anywhere_for="take Image Builder's commands through the Systems Manager agent",
    reader_assumes=frozenset({"sts:AssumeRole"}),
    managed=frozenset({"EC2InstanceProfileForImageBuilder"}))
"""What an image build instance's identity may do (components/aws/image.py build_identity): the Image Builder agent's
managed policy, the Systems Manager agent's own calls, reading objects under the boot bundles' prefix and, for a
build that starts the runtime once, the model the stack's servers read and its own model reader: no secret."""
IMAGE_BUILD_USERS = frozenset({*IDENTITY_USERS, AWS_IMAGE_BUILD_INFRASTRUCTURE})
RUNTIME_START_STEP = "StartRuntimeOnce"
"""The component step that starts the runtime in the build (components/aws/image.py component_document)."""


def starts_runtime(stack: Stack) -> bool:
    """Whether an image build of the stack starts the runtime: a component whose document has RUNTIME_START_STEP, or
    one a preview cannot read yet (checked again at `pulumi up`)."""
    documents = [stack.known(component.props, "data") for component in stack.of_type(AWS_IMAGE_BUILD_COMPONENT)]
    return any(document is None or RUNTIME_START_STEP in str(document) for document in documents)


def image_build_identities(stack: Stack, models: set[str]) -> list[ServerIdentity]:
    """Every identity only image builds take, checked against IMAGE_BUILD: it reads objects under the boot bundles'
    prefix and, where a build starts the runtime, within `models` (the model prefixes the stack's servers read, as
    "bucket/prefix*"); nothing else."""
    found = []
    builds = image_build_roles(stack)
    model_roots = {model.removesuffix("*") for model in models} if starts_runtime(stack) else set()
    for role in stack.of_type(AWS_ROLE):
        if role.urn not in builds:
            continue
        identity = ServerIdentity("aws", role)
        identity.granted_by.add(role.urn)
        aws_identity_documents(stack, Checker(stack, identity, IMAGE_BUILD))
        for scope in sorted(identity.storage):
            if f"/{BOOT_BUNDLE_PREFIX}" not in scope and not any(scope.startswith(root) for root in model_roots):
                identity.report(f"the image build identity {role.name} reads {scope}: it reads its boot script under "
                                f"{BOOT_BUNDLE_PREFIX} and, for a build that starts the runtime, the servers' model "
                                "prefix only", role.urn)
        check_model_readers(stack, identity)
        unknown_grants(stack, identity, IMAGE_BUILD_USERS)
        found.append(identity)
    return found


def check_identities(stack: Stack, report_violation: ReportViolation) -> None:
    identities = server_identities(stack, report_violation)
    if not identities:
        raise NotApplicable(NO_SERVER_IDENTITY)
    models = {scope for identity in identities for scope in identity.storage
              if not scope.endswith(f"/{BOOT_BUNDLE_PREFIX}*")}
    for identity in [*identities, *image_build_identities(stack, models)]:
        for message, urn in identity.violations:
            report_violation(message, urn)


SERVER_IDENTITY_LEAST_PRIVILEGE = StackRule(
    "server-identity-least-privilege",
    "The servers' identity holds only what inferstack grants: its model prefix, its own secrets, the "
    "managed shell.", check_identities)

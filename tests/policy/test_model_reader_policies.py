"""An AWS deployment whose runtime streams the weights: the servers' identity may assume its own model reader, a role of
the stack that trusts that identity alone and reads its model prefix only. The pack passes it as inferstack builds
it, and reports every widening: the grant on another role or on every role, the reader trusted by anyone else, and
the reader reading more than the model prefix."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from guardrails.core import PlainResource, Stack
from guardrails.server_identity import ServerIdentity, server_identities

from inferstack.plan import DeploymentPlan
from tests.policy import deployments
from tests.policy.deployments import named
from tests.policy.harness import check_recording
from tests.sample_plans import sample_plan

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def _streaming_plan() -> DeploymentPlan:
    plan = sample_plan("aws", "gpu-llm", "production")
    return plan.model_copy(update={"startup": plan.startup.model_copy(update={"model_loading": "stream"})})


def _resources() -> list[PlainResource]:
    return deployments.plain_resources(deployments.public_plan_deployment(_streaming_plan()))


def _identity(change: Callable[[list[PlainResource]], None] | None = None) -> ServerIdentity:
    resources = _resources()
    if change is not None:
        change(resources)
    # (A reader that trusts EC2 too is a servers' identity itself, checked as one: the servers' own is the one here.)
    (identity,) = [i for i in server_identities(Stack(resources), lambda message, urn=None: None)
                   if i.resource.name.endswith("-identity-role")]
    return identity


def _edit(resource: PlainResource, key: str, edit: Callable[[dict[str, Any]], None]) -> None:
    document = json.loads(resource.props[key])
    edit(document)
    resource.props[key] = json.dumps(document)


def test_the_deployment_inferstack_builds_passes_every_policy() -> None:
    report = check_recording(deployments.public_plan_deployment(_streaming_plan()))
    assert report.mandatory() == [], report.messages()


def test_the_servers_may_assume_their_own_model_reader() -> None:
    identity = _identity()
    assert identity.violations == []
    assert "sts:AssumeRole" in identity.holds
    assert [role.name for role, _ in identity.readers] == ["server-identity-reader"]


def _assume_on(resource: Callable[[list[PlainResource]], str]) -> Callable[[list[PlainResource]], None]:
    def change(resources: list[PlainResource]) -> None:
        grant = named(resources, ROLE_POLICY, "-assume-model-reader")
        _edit(grant, "policy", lambda d: d["Statement"][0].update(Resource=resource(resources)))
    return change


@pytest.mark.parametrize(("resource", "expected"), [
    (lambda _: "*", "sts:AssumeRole on * (statement AssumeModelReader), which is not a role of this stack"),
    (lambda _: "arn:aws:iam::123456789012:role/OrganizationAccountAccessRole", "which is not a role of this stack"),
    (lambda rs: named(rs, ROLE, "-identity-role").props["arn"], "which is not a role of this stack"),  # itself
])
def test_assuming_anything_but_the_stacks_own_reader_is_reported(
        resource: Callable[[list[PlainResource]], str], expected: str) -> None:
    messages = [message for message, _ in _identity(_assume_on(resource)).violations]
    assert any(expected in message for message in messages), messages


def _trust(edit: Callable[[dict[str, Any]], None]) -> Callable[[list[PlainResource]], None]:
    return lambda resources: _edit(named(resources, ROLE, "-identity-reader"), "assumeRolePolicy", edit)


@pytest.mark.parametrize("edit", [
    lambda d: d["Statement"][0].update(Principal={"AWS": "arn:aws:iam::123456789012:root"}),  # the whole account
    lambda d: d["Statement"][0].update(Principal={"AWS": "*"}),
    lambda d: d["Statement"][0]["Principal"].update(Service="ec2.amazonaws.com"),
    lambda d: d["Statement"][0].update(Principal={"AWS": [d["Statement"][0]["Principal"]["AWS"],
                                                          "arn:aws:iam::210987654321:role/elsewhere"]}),
    lambda d: d["Statement"].append({"Effect": "Allow", "Action": "sts:AssumeRole",
                                     "Principal": {"AWS": "arn:aws:iam::210987654321:root"}}),
    lambda d: d["Statement"][0].update(Action="sts:*"),
], ids=["account", "everyone", "a-service-too", "another-role-too", "another-statement", "every-sts-action"])
def test_a_reader_that_more_than_the_servers_role_may_assume_is_reported(
        edit: Callable[[dict[str, Any]], None]) -> None:
    messages = [message for message, _ in _identity(_trust(edit)).violations]
    assert any("may be assumed by more than the servers' identity" in message for message in messages), messages


def _reader_policy(edit: Callable[[dict[str, Any]], None]) -> Callable[[list[PlainResource]], None]:
    return lambda resources: _edit(named(resources, ROLE_POLICY, "-identity-reader-model-read"), "policy", edit)


def _bucket_arn(d: dict[str, Any]) -> str:
    return str(d["Statement"][0]["Resource"])


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: d["Statement"][1].update(Resource=f"{_bucket_arn(d)}/*"), "which is not one model prefix"),
    (lambda d: d["Statement"][1].update(Resource=f"{_bucket_arn(d)}/inferstack/bootstrap/*"),
     "which is not the model prefix of the servers' identity"),
    (lambda d: d["Statement"][1].update(Resource=f"{_bucket_arn(d)}/models/another-model/*"),
     "which is not the model prefix of the servers' identity"),
    (lambda d: d["Statement"][0].pop("Condition"), "without a condition limiting it to one prefix"),
    (lambda d: d["Statement"].append({"Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "*"}),
     "may ssm:GetParameter"),
    (lambda d: d["Statement"].append({"Effect": "Allow", "Action": "s3:PutObject", "Resource": "*"}),
     "may s3:PutObject"),
    # What the servers' own identity may do and its reader may not: the managed shell, the agent's writes.
    (lambda d: d["Statement"].append({"Effect": "Allow", "Action": "ssm:UpdateInstanceInformation", "Resource": "*"}),
     "may ssm:UpdateInstanceInformation"),
    (lambda d: d["Statement"].append({"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"}),
     "may cloudwatch:PutMetricData"),
], ids=["whole-bucket", "boot-bundles", "another-prefix", "unlimited-listing", "a-secret", "a-write", "the-shell",
        "metrics"])
def test_a_reader_that_may_do_more_than_read_the_model_prefix_is_reported(
        edit: Callable[[dict[str, Any]], None], expected: str) -> None:
    messages = [message for message, _ in _identity(_reader_policy(edit)).violations]
    assert any(expected in message for message in messages), messages

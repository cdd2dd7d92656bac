"""An AWS deployment with a baked image: the image build instance's identity (an EC2 role whose instance profile only
an Image Builder infrastructure configuration takes) is not a servers' identity, and holds Image Builder's managed
policy, the Systems Manager agent's own calls and a read of its boot script (and, for a build that keeps the
runtime's caches, of the servers' model prefix) only. The pack passes it as inferstack builds it, and reports every
widening: AmazonSSMManagedInstanceCore (every parameter), a read of another prefix or a secret, an action inferstack
never grants."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from guardrails.core import PlainResource, Stack
from guardrails.image_build import image_build_identities
from guardrails.server_identity import server_identities

from inferstack.plan import DeploymentPlan
from tests.policy import deployments
from tests.policy.deployments import named
from tests.policy.harness import check_recording
from tests.sample_plans import sample_plan

ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


def _baked_plan(caches: bool = False, stream: bool = False, revision: str | None = None) -> DeploymentPlan:
    plan = sample_plan("aws", "gpu-llm", "production")
    if revision:
        plan = plan.model_copy(update={"model": plan.model.model_copy(update={
            "revision": revision, "bucket_prefix": f"{plan.model.bucket_prefix}{revision}/"})})
    return plan.model_copy(update={"startup": plan.startup.model_copy(update={
        "image": "baked", "runtime_caches": caches, "model_loading": "stream" if stream else "download"})})


def _resources(caches: bool = False, **plan: Any) -> list[PlainResource]:
    return deployments.plain_resources(deployments.public_plan_deployment(_baked_plan(caches, **plan)))


def _builds(stack: Stack) -> list[Any]:
    servers = server_identities(stack, lambda message, urn=None: None)
    return image_build_identities(stack, {scope for identity in servers for scope in identity.storage})


def _violations(change: Callable[[list[PlainResource]], None], caches: bool = False, **plan: Any) -> list[str]:
    resources = _resources(caches, **plan)
    change(resources)
    (build,) = _builds(Stack(resources))
    return [message for message, _ in build.violations]


def _edit_policy(resources: list[PlainResource], suffix: str, edit: Callable[[dict[str, Any]], None]) -> None:
    policy = named(resources, ROLE_POLICY, suffix)
    document = json.loads(policy.props["policy"])
    edit(document)
    policy.props["policy"] = json.dumps(document)


def test_the_baked_deployment_inferstack_builds_passes_every_policy() -> None:
    report = check_recording(deployments.public_plan_deployment(_baked_plan()))
    assert report.mandatory() == [], report.messages()


def test_the_build_identity_is_not_a_servers_identity_and_is_checked_as_a_build() -> None:
    stack = Stack(_resources())
    assert [i.resource.name for i in server_identities(stack, lambda message, urn=None: None)] == [
        "server-identity-role"]
    (build,) = _builds(stack)
    assert build.resource.name == "server-image-build-role" and build.violations == []
    assert all("/inferstack/bootstrap/" in scope for scope in build.storage) and build.storage


def test_the_build_identity_may_not_hold_systems_managers_core_policy() -> None:
    def attach_core(resources: list[PlainResource]) -> None:
        attachment = named(resources, ATTACHMENT, "EC2InstanceProfileForImageBuilder")
        resources.append(PlainResource(ATTACHMENT, "chat-image-build-core", attachment.urn + "-core", {
            **attachment.props, "policyArn": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"}))

    assert any("AmazonSSMManagedInstanceCore" in m for m in _violations(attach_core))


def test_the_build_identity_may_read_neither_the_model_nor_a_secret() -> None:
    def read_models(document: dict[str, Any]) -> None:
        document["Statement"][0]["Resource"] = document["Statement"][0]["Resource"].split("/", 1)[0] + "/models/*"

    assert any("reads" in m and "models/" in m for m in _violations(
        lambda resources: _edit_policy(resources, "image-build-boot-script", read_models)))

    def read_secrets(document: dict[str, Any]) -> None:
        document["Statement"].append({"Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "*"})

    assert any("ssm:GetParameter" in m for m in _violations(
        lambda resources: _edit_policy(resources, "image-build-systems-manager", read_secrets)))


def test_a_build_keeping_the_runtimes_caches_reads_the_servers_model_prefix_and_passes() -> None:
    report = check_recording(deployments.public_plan_deployment(_baked_plan(caches=True)))
    assert report.mandatory() == [], report.messages()
    stack = Stack(_resources(caches=True))
    (server,) = server_identities(stack, lambda message, urn=None: None)
    (build,) = _builds(stack)
    models = {scope for scope in server.storage if "/inferstack/bootstrap/" not in scope}
    assert models and models <= build.storage and build.violations == []


def test_a_cache_build_may_not_read_beyond_the_servers_model_prefix() -> None:
    def other_model(document: dict[str, Any]) -> None:
        files = document["Statement"][-1]
        files["Resource"] = files["Resource"].split("/", 1)[0] + "/models/another-model/*"

    assert any("reads" in m and "models/another-model/" in m and "model prefix only" in m for m in _violations(
        lambda resources: _edit_policy(resources, "image-build-boot-script", other_model), caches=True))

    def whole_bucket(document: dict[str, Any]) -> None:
        files = document["Statement"][-1]
        files["Resource"] = files["Resource"].split("/", 1)[0] + "/*"

    assert any("not one model prefix of one bucket" in m for m in _violations(
        lambda resources: _edit_policy(resources, "image-build-boot-script", whole_bucket), caches=True))


def test_a_cache_build_of_a_pinned_revision_reads_within_the_servers_model_prefix_and_passes() -> None:
    """The servers read every revision of the model (revisions_prefix); the build reads its own revision's folder."""
    plan = _baked_plan(caches=True, revision="r2")
    report = check_recording(deployments.public_plan_deployment(plan))
    assert report.mandatory() == [], report.messages()
    (build,) = _builds(Stack(_resources(caches=True, revision="r2")))
    assert any(scope.endswith(f"/{plan.model.bucket_prefix}*") for scope in build.storage)


def test_a_build_that_starts_no_runtime_may_not_read_the_model() -> None:
    def read_servers_model(resources: list[PlainResource]) -> None:
        stack = Stack(resources)
        (server,) = server_identities(stack, lambda message, urn=None: None)
        (model,) = [scope for scope in server.storage if "/inferstack/bootstrap/" not in scope]

        def add(document: dict[str, Any]) -> None:
            document["Statement"].append({"Effect": "Allow", "Action": "s3:GetObject",
                                          "Resource": f"arn:aws:s3:::{model}"})

        _edit_policy(resources, "image-build-boot-script", add)

    assert any("for a build that starts the runtime" in m for m in _violations(read_servers_model))


def test_a_streaming_cache_build_assumes_a_reader_of_its_own_that_only_it_may_assume() -> None:
    report = check_recording(deployments.public_plan_deployment(_baked_plan(caches=True, stream=True)))
    assert report.mandatory() == [], report.messages()
    resources = _resources(caches=True, stream=True)
    (build,) = _builds(Stack(resources))
    assert [role.name for role, _ in build.readers] == ["server-image-build-reader"]

    def trust_anyone(resources: list[PlainResource]) -> None:
        reader = named(resources, "aws:iam/role:Role", "image-build-reader")
        reader.props["assumeRolePolicy"] = json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"AWS": "*"}}]})

    assert any("may be assumed by more than" in m for m in _violations(trust_anyone, caches=True, stream=True))

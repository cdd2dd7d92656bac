"""A runtime that streams the weights on AWS (`plan.startup.model_loading: stream`): a role of its own that may only
read the model's prefix, assumable by the servers' role alone, which may assume that role and no other; its ARN reaches
the servers' bootstrap. A plan that downloads gets none of it."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pulumi
import pytest
import yaml
from guardrails.core import Stack  # policy/, on the path from conftest.py
from guardrails.ruleset import evaluate
from guardrails.server_identity import server_identities

from inferstack.bootstrap.render import BUNDLE_PREFIX
from inferstack.components import InferenceServer
from inferstack.errors import InputError
from inferstack.plan import CanaryPlan, DeploymentPlan
from inferstack.preview import Recording, RegisteredResource, record
from tests.components.conftest import CLOUD_ARGS, STACK_CONFIG
from tests.components.neutral_view import dependencies_recorded, guarded_resources
from tests.components.test_security_invariants import API_KEY, HUB_TOKEN, guardrail_config
from tests.sample_plans import sample_plan

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
API_DOMAIN = "api.example.com"


def streaming(plan: DeploymentPlan) -> DeploymentPlan:
    return plan.model_copy(update={"startup": plan.startup.model_copy(update={"model_loading": "stream"})})


def _deploy(run: Any, plan: DeploymentPlan, **args: Any) -> Recording:
    def program() -> pulumi.Output[Any]:
        server = InferenceServer("chat", {"plan": plan, **args})
        return pulumi.Output.all(server.endpoint_url, server.identity_id)
    return run(program)


def _roles(recording: Recording) -> dict[str, RegisteredResource]:
    return {role.name: role for role in recording.of_type(ROLE)}


def _policy(recording: Recording, name: str) -> list[dict[str, Any]]:
    (policy,) = [p for p in recording.of_type(ROLE_POLICY) if p.name == name]
    return json.loads(policy.inputs["policy"])["Statement"]  # type: ignore[no-any-return]


def _bootstrap_env(user_data: str) -> dict[str, str]:
    document = yaml.safe_load(user_data)
    (env,) = [f["content"] for f in document["write_files"] if f["path"] == "/etc/inferstack/bootstrap.env"]
    return dict(line.split("=", 1) for line in env.splitlines() if not line.startswith("#"))


def test_the_streaming_runtimes_role_is_trusted_by_the_servers_role_alone_and_reads_only_the_model(run: Any) -> None:
    plan = streaming(sample_plan("aws", "gpu-llm"))
    recording = _deploy(run, plan)
    roles = _roles(recording)
    assert set(roles) == {"chat-identity-role", "chat-identity-reader"}
    server, reader = roles["chat-identity-role"], roles["chat-identity-reader"]
    assert json.loads(reader.inputs["assumeRolePolicy"]) == {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"AWS": server.outputs["arn"]}}]}
    assert reader.inputs["maxSessionDuration"] == 3600
    bucket = _policy(recording, "chat-identity-model-read")[0]["Resource"]  # the model bucket the servers read
    assert bucket.startswith("arn:aws:s3:::") and "-models-" in bucket
    prefix = plan.model.revisions_prefix
    assert _policy(recording, "chat-identity-reader-model-read") == [
        {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket,
         "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}}},
        {"Sid": "ReadModelFiles", "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{bucket}/{prefix}*"}]
    (reader_policy,) = [p for p in recording.of_type(ROLE_POLICY) if p.name == "chat-identity-reader-model-read"]
    assert reader_policy.inputs["role"] == reader.id


def test_the_servers_role_may_assume_the_model_reader_and_no_other_role(run: Any) -> None:
    recording = _deploy(run, streaming(sample_plan("aws", "gpu-llm")))
    reader = _roles(recording)["chat-identity-reader"]
    assert _policy(recording, "chat-identity-assume-model-reader") == [
        {"Sid": "AssumeModelReader", "Effect": "Allow", "Action": ["sts:AssumeRole"],
         "Resource": reader.outputs["arn"]}]
    (grant,) = [p for p in recording.of_type(ROLE_POLICY) if p.name == "chat-identity-assume-model-reader"]
    assert grant.inputs["role"] == _roles(recording)["chat-identity-role"].id


def test_the_servers_bootstrap_names_the_reader_role_and_streams(run: Any) -> None:
    plan = streaming(sample_plan("aws", "gpu-llm", "production"))
    recording = _deploy(run, plan, api_domain=API_DOMAIN)
    (template,) = recording.of_type(TEMPLATE)
    user_data = gzip.decompress(base64.b64decode(template.inputs["userData"])).decode()
    settings = _bootstrap_env(user_data)
    assert settings["MODEL_LOADING"] == "stream"
    assert settings["MODEL_READER_ROLE"] == _roles(recording)["chat-identity-reader"].outputs["arn"]


def test_a_canary_that_streams_gets_a_reader_of_its_own(run: Any) -> None:
    plan = streaming(sample_plan("aws", "gpu-llm", "production"))
    recording = _deploy(run, plan.model_copy(update={"canary": CanaryPlan(weight=10, plan=plan)}),
                        api_domain=API_DOMAIN)
    roles = _roles(recording)
    assert {"chat-identity-reader", "chat-canary-identity-reader"} <= set(roles)
    principal = json.loads(roles["chat-canary-identity-reader"].inputs["assumeRolePolicy"])["Statement"][0]
    assert principal["Principal"] == {"AWS": roles["chat-canary-identity-role"].outputs["arn"]}


def test_a_plan_that_downloads_gets_no_reader_and_no_assume_grant(run: Any) -> None:
    recording = _deploy(run, sample_plan("aws", "gpu-llm"))
    assert set(_roles(recording)) == {"chat-identity-role"}
    assert not [p for p in recording.of_type(ROLE_POLICY) if "reader" in p.name]
    assert not any("sts:" in json.dumps(json.loads(p.inputs["policy"])) for p in recording.of_type(ROLE_POLICY))


def test_a_brought_identity_is_refused_for_a_streaming_plan_before_anything_is_registered(run: Any) -> None:
    with pytest.raises(InputError, match=r"instance_identity.*reader role"):
        _deploy(run, streaming(sample_plan("aws", "gpu-llm")), instance_identity="existing-profile")


@pytest.mark.parametrize("stage", ["internal", "production"])
def test_a_streaming_deployment_keeps_the_security_invariants(stage: str) -> None:
    """As tests/components/test_security_invariants.py checks every deployment: every guardrail passes, the servers'
    identity reads its model prefix and boot bundles only (its reader, checked by the pack, the prefix alone), and
    neither a secret nor a credential reaches any input."""
    plan = streaming(sample_plan("aws", "gpu-llm", stage))  # type: ignore[arg-type]
    args = {"plan": plan, **CLOUD_ARGS["aws"], "allowed_cidrs": ["0.0.0.0/0"], "api_key": API_KEY,
            "hub_token": HUB_TOKEN}
    with dependencies_recorded() as dependencies:
        recording = record(lambda: InferenceServer("inv", args), config=STACK_CONFIG, stack="invariants")
    resources = guarded_resources(recording, dependencies)
    evaluation = evaluate(resources, guardrail_config(plan))
    assert [(finding.rule, finding.message) for finding in evaluation.findings] == []

    def unexpected(message: str, urn: str | None = None) -> None:
        raise AssertionError(f"{message} ({urn})")

    (identity,) = server_identities(Stack(resources), unexpected)
    model_bucket = recording.named("inv-store-models").id
    assert identity.storage == {f"{model_bucket}/{plan.model.revisions_prefix}*", f"{model_bucket}/{BUNDLE_PREFIX}*"}
    assert [role.name for role, _ in identity.readers] == ["inv-identity-reader"] and identity.violations == []
    visible = json.dumps([r.masked_inputs for r in recording.resources])
    assert API_KEY not in visible and HUB_TOKEN not in visible and "AWS_SECRET_ACCESS_KEY" not in visible

"""The pack as the Pulumi CLI runs it: `python -m pulumi.policy <engine> policy/` (what the CLI's analyzer script
execs in the pack's environment) starts the analyzer's gRPC server, and the engine's calls get the answers below.

No Pulumi CLI is available here, so the engine's side of the protocol is played by this test, with the SDK's own
generated client (pulumi.runtime.proto.analyzer_pb2_grpc).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2, struct_pb2
from guardrails.resource_types import (
    AWS_BUCKET,
    AWS_INGRESS_RULE,
    AWS_INSTANCE,
    AWS_ROLE,
    AWS_ROLE_POLICY,
    HUAWEI_NO_METADATA_TOKENS,
    HW_INSTANCE,
)
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from tests.policy.harness import REPO, pack

PACK = REPO / "policy"
STARTUP_TIMEOUT_S = 60


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    process = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", str(PACK)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        port_line = process.stdout.readline().strip() if process.stdout else ""
        errors = process.stderr.read() if process.stderr and not port_line.isdigit() else ""
        assert port_line.isdigit(), f"the pack printed no port: {port_line!r} {errors}"
        channel = grpc.insecure_channel(f"127.0.0.1:{port_line}")
        grpc.channel_ready_future(channel).result(timeout=STARTUP_TIMEOUT_S)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        process.terminate()  # the pack serves until its engine stops it
        process.wait(timeout=30)


def _analyze(stub: analyzer_pb2_grpc.AnalyzerStub, resource_type: str, props: dict[str, Any],
             name: str = "r") -> analyzer_pb2.AnalyzeResponse:
    return stub.Analyze(analyzer_pb2.AnalyzeRequest(
        type=resource_type, properties=_struct(props), urn=f"urn:pulumi:dev::p::{resource_type}::{name}", name=name))


def test_the_pack_introduces_itself_with_every_policy_and_its_enforcement_level(
        analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "inferstack-guardrails"
    levels = {p.name: analyzer_pb2.EnforcementLevel.Name(p.enforcementLevel) for p in info.policies}
    advisory = {"fleet-watched-by-alarms"}
    assert levels == {p.name: ("ADVISORY" if p.name in advisory else "MANDATORY") for p in pack.POLICIES}
    kinds = {p.name: analyzer_pb2.PolicyType.Name(p.policy_type) for p in info.policies}
    stack_policies = {name for name, kind in kinds.items() if kind == "POLICY_TYPE_STACK"}
    assert stack_policies == {p.name for p in pack.STACK_POLICIES}


def test_a_mandatory_violation_comes_back_with_the_policy_description_and_message(
        analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    response = _analyze(analyzer, AWS_INSTANCE, {"metadataOptions": {"httpTokens": "optional",
                                                                     "httpPutResponseHopLimit": 1},
                                                 "rootBlockDevice": {"encrypted": True}})
    (diagnostic,) = response.diagnostics
    assert diagnostic.policyName == "metadata-tokens-required"
    assert analyzer_pb2.EnforcementLevel.Name(diagnostic.enforcementLevel) == "MANDATORY"
    assert diagnostic.message == (f"{pack.metadata_tokens_required.description}\nthe metadata service answers without "
                                  "a session token (metadataOptions.httpTokens is optional): set it to required")


def test_a_setting_the_cloud_lacks_comes_back_as_not_applicable_with_the_reason(
        analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    response = _analyze(analyzer, HW_INSTANCE, {"systemDiskKmsKeyId": "k", "flavorId": "pi2.2xlarge.4"})
    assert list(response.diagnostics) == []
    assert [(n.policy_name, n.reason) for n in response.not_applicable] == [
        ("metadata-tokens-required", HUAWEI_NO_METADATA_TOKENS)]


def test_a_value_unknown_during_preview_is_reported_as_an_advisory_that_the_policy_could_not_run(
        analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's marker for an unknown string
    response = _analyze(analyzer, AWS_INGRESS_RULE, {"ipProtocol": "tcp", "fromPort": 22, "toPort": 22,
                                                     "cidrIpv4": unknown})
    messages = {(d.policyName, analyzer_pb2.EnforcementLevel.Name(d.enforcementLevel)): d.message
                for d in response.diagnostics}
    assert set(messages) == {("admin-ports-not-public", "ADVISORY"), ("world-ingress-serving-port-only", "ADVISORY")}
    assert "during preview: string value at .cidrIpv4 can't be known during preview" in messages[
        ("admin-ports-not-public", "ADVISORY")]


def test_a_stack_policy_that_reads_a_value_unknown_during_preview_is_an_advisory_not_a_violation(
        analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's marker for an unknown string
    trust = ('{"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", '
             '"Principal": {"Service": "ec2.amazonaws.com"}}]}')
    role = analyzer_pb2.AnalyzerResource(type=AWS_ROLE, name="server-role", urn="urn:pulumi:dev::p::r::role",
                                         properties=_struct({"assumeRolePolicy": trust, "name": "server-role-1"}))
    policy = analyzer_pb2.AnalyzerResource(type=AWS_ROLE_POLICY, name="server-read",
                                           urn="urn:pulumi:dev::p::r::policy",
                                           properties=_struct({"role": "server-role-1", "policy": unknown}))
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[role, policy]))
    found = [(d.policyName, analyzer_pb2.EnforcementLevel.Name(d.enforcementLevel), d.message)
             for d in response.diagnostics if d.policyName == "server-identity-least-privilege"]
    assert [(name, level) for name, level, _ in found] == [("server-identity-least-privilege", "ADVISORY")]
    assert "during preview: string value at .policy can't be known during preview" in found[0][2]


def test_a_stack_policy_names_the_resource_at_fault(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    bucket = analyzer_pb2.AnalyzerResource(type=AWS_BUCKET, name="models", urn="urn:pulumi:dev::p::b::models",
                                           properties=_struct({"bucket": "models-1a2b"}))
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[bucket]))
    found = {(d.policyName, d.urn) for d in response.diagnostics}
    assert found == {("buckets-have-public-access-block", bucket.urn), ("buckets-have-default-encryption", bucket.urn)}


def test_policy_pack_config_opens_another_serving_port(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    rule = {"ipProtocol": "tcp", "fromPort": 9000, "toPort": 9000, "cidrIpv4": "0.0.0.0/0"}
    assert [d.policyName for d in _analyze(analyzer, AWS_INGRESS_RULE, rule).diagnostics] == [
        "world-ingress-serving-port-only"]
    config = analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.MANDATORY,
                                       properties=_struct({"servingPorts": [9000]}))
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={"world-ingress-serving-port-only": config}))
    try:
        assert list(_analyze(analyzer, AWS_INGRESS_RULE, rule).diagnostics) == []
    finally:
        analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))


#### The pack's files ####


def test_the_pack_declares_a_python_runtime_with_its_own_environment_and_pins_the_policy_sdk() -> None:
    manifest = yaml.safe_load((PACK / "PulumiPolicy.yaml").read_text())
    assert manifest["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}
    requirements = [line.strip() for line in (PACK / "requirements.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
    assert "pulumi-policy==1.21.0" in requirements


@pytest.mark.parametrize("workflow_file", ["preview.yml", "deploy.yml"])
def test_the_workflows_run_this_pack_from_the_project_folder(workflow_file: str) -> None:
    workflow = yaml.safe_load((REPO / "examples" / "github-actions" / workflow_file).read_text())
    steps = [s for job in workflow["jobs"].values() for s in job.get("steps", [])
             if str(s.get("uses", "")).startswith("pulumi/actions")]
    assert steps
    for step in steps:
        work_dir = REPO / step["with"].get("work-dir", ".")  # the action runs the CLI there
        assert (work_dir / "Pulumi.yaml").is_file()
        assert (work_dir / step["with"]["policyPacks"] / "PulumiPolicy.yaml").is_file()


STAGES = REPO / "policy" / "stages"


@pytest.mark.parametrize("workflow_file", ["preview.yml", "deploy.yml"])
def test_the_workflows_give_each_stack_the_policy_config_of_its_stage(workflow_file: str) -> None:
    """The stage comes from the workflow's matrix, checked here against the stack file, never from the plan."""
    workflow = yaml.safe_load((REPO / "examples" / "github-actions" / workflow_file).read_text())
    for job in workflow["jobs"].values():
        steps = [s for s in job.get("steps", []) if str(s.get("uses", "")).startswith("pulumi/actions")]
        if not steps:
            continue
        (step,) = steps
        assert step["with"]["policyPackConfigs"] == "policy/stages/${{ matrix.stage }}.json"
        for entry in job["strategy"]["matrix"]["include"]:
            stack_file = yaml.safe_load((REPO / "stacks" / f"Pulumi.{entry['stack']}.yaml").read_text())
            assert entry["stage"] == stack_file["config"]["inferstack:stage"], entry
            assert (STAGES / f"{entry['stage']}.json").is_file()


@pytest.mark.parametrize("stage", ["validation", "internal", "production"])
def test_each_stages_config_names_its_stage_and_the_pack_applies_it(analyzer: analyzer_pb2_grpc.AnalyzerStub,
                                                                     stage: str) -> None:
    config = json.loads((STAGES / f"{stage}.json").read_text())
    assert config["production-runs-a-protected-fleet"] == {"stage": stage}
    assert config.get("fleet-spans-zones") == (None if stage == "production" else {"minZones": 1})
    server = analyzer_pb2.AnalyzerResource(type=AWS_INSTANCE, name="server-0", urn="urn:pulumi:dev::p::s::0",
                                           properties=_struct({"instanceType": "g6.xlarge"}))
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={
        name: analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.MANDATORY, properties=_struct(properties))
        for name, properties in config.items()}))
    try:
        response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[server]))
    finally:
        analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))
    found = [d.policyName for d in response.diagnostics if d.policyName == "production-runs-a-protected-fleet"]
    assert found == (["production-runs-a-protected-fleet"] if stage == "production" else [])

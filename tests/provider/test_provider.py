"""The Pulumi package for other languages (provider/): the schema its host infers from the components, and
`construct` as the engine calls it for another language's program (see conftest.py for how each is driven)."""

from __future__ import annotations

import copy
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import grpc
import pulumi
import pytest
import yaml
from google.protobuf import empty_pb2
from pulumi.provider.server import ComponentInitError
from pulumi.runtime import proto, rpc
from pulumi.runtime.proto import provider_pb2_grpc

import inferstack.components
from inferstack.errors import InputError
from inferstack.preview import Recording
from tests.sample_plans import sample_plan

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "provider"
GOLDEN_SCHEMA = PLUGIN / "schema.json"
EXISTING_VPC = REPO / "examples" / "aws-existing-vpc"
INFERSTACK_VERSION = version("inferstack")

Construct = Callable[..., Recording]
"""The `construct` fixture (conftest.py)."""

PUBLIC_COMPONENTS = {
    name for name, value in vars(inferstack.components).items()
    if name in inferstack.components.__all__ and inspect.isclass(value)
    and issubclass(value, pulumi.ComponentResource)
}

REQUIRED_INPUTS = {
    "InferenceServer": set(),  # a plan or a workload, checked by the component
    "Network": {"cloud", "instanceType"},
    "Firewall": {"cloud", "networkId", "networkCidr", "port"},
    "ModelStore": {"cloud"},
    "StaticAssets": {"cloud"},
    "ServerSecrets": {"cloud"},
    "ServerIdentity": {"cloud", "modelBucket", "modelPrefix"},
}


def _component(schema: dict[str, Any], name: str) -> dict[str, Any]:
    resource: dict[str, Any] = schema["resources"][f"inferstack:index:{name}"]
    return resource


#### The schema ####


def test_every_public_component_is_in_the_schema_under_its_index_token(schema: dict[str, Any]) -> None:
    assert set(REQUIRED_INPUTS) == PUBLIC_COMPONENTS
    assert set(schema["resources"]) == {f"inferstack:index:{name}" for name in PUBLIC_COMPONENTS}
    assert all(resource["isComponent"] for resource in schema["resources"].values())
    assert schema["name"] == "inferstack"
    assert schema["version"] == INFERSTACK_VERSION


@pytest.mark.parametrize("name", sorted(REQUIRED_INPUTS))
def test_inputs_are_the_args_in_camel_case_with_required_ones_marked_and_all_described(
        schema: dict[str, Any], name: str) -> None:
    resource = _component(schema, name)
    args_type = getattr(inferstack.components, f"{name}Args")
    assert set(resource["inputProperties"]) == {_camel(key) for key in args_type.__annotations__}
    assert set(resource.get("requiredInputs", [])) == REQUIRED_INPUTS[name]
    undescribed = [key for key, spec in resource["inputProperties"].items() if not spec.get("description")]
    assert not undescribed, f"{name} inputs without a description: {undescribed}"


@pytest.mark.parametrize("name", sorted(REQUIRED_INPUTS))
def test_outputs_are_the_annotated_outputs_all_described(schema: dict[str, Any], name: str) -> None:
    resource = _component(schema, name)
    component = getattr(inferstack.components, name)
    annotated = {key for key in inspect.get_annotations(component) if not key.startswith("_")}
    assert annotated and set(resource["properties"]) == {_camel(key) for key in annotated}
    undescribed = [key for key, spec in resource["properties"].items() if not spec.get("description")]
    assert not undescribed, f"{name} outputs without a description: {undescribed}"
    assert resource["description"]


def test_inference_server_inputs_have_the_types_other_languages_need(schema: dict[str, Any]) -> None:
    inputs = _component(schema, "InferenceServer")["inputProperties"]
    # The plan and the workload are free-form: text (or an object) the component validates with pydantic.
    assert inputs["plan"]["$ref"] == "pulumi.json#/Any" and inputs["workload"]["$ref"] == "pulumi.json#/Any"
    # Values the component decides with at construction are plain; ids and secrets may be other resources' Outputs.
    assert (inputs["cloud"]["type"], inputs["cloud"].get("plain")) == ("string", True)
    assert inputs["allowedCidrs"]["type"] == "array" and inputs["allowedCidrs"]["items"]["type"] == "string"
    assert inputs["staticAssets"]["type"] == "boolean"
    assert inputs["tags"]["type"] == "object" and inputs["tags"]["additionalProperties"]["type"] == "string"
    for key in ("apiKey", "hubToken", "networkId", "instanceIdentity", "modelBucket", "assetsBucket"):
        assert inputs[key]["type"] == "string" and "plain" not in inputs[key], key
    for key in ("subnetIds", "securityGroupIds"):
        assert inputs[key]["items"]["type"] == "string" and "plain" not in inputs[key]["items"], key
    outputs = _component(schema, "InferenceServer")["properties"]
    assert outputs["endpointUrl"]["type"] == "string" and outputs["planSummary"]["type"] == "object"


def test_schema_matches_the_checked_in_golden(schema: dict[str, Any]) -> None:
    text = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN_SCHEMA.write_text(text)
    assert GOLDEN_SCHEMA.exists(), "no provider/schema.json; run UPDATE_GOLDEN=1 pytest tests/provider"
    assert GOLDEN_SCHEMA.read_text() == text, ("the components' public surface changed: review the diff of "
                                               "provider/schema.json after UPDATE_GOLDEN=1 pytest tests/provider")


def test_plugin_process_serves_the_schema_over_grpc() -> None:
    """What `pulumi package add` does: start the plugin as the Python language host does, read its port, GetSchema."""
    plugin = subprocess.Popen([sys.executable, str(PLUGIN), "127.0.0.1:1"], cwd=PLUGIN, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert plugin.stdout is not None
        port = plugin.stdout.readline().strip()
        assert port.isdigit(), plugin.stderr.read() if plugin.stderr else port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            served = json.loads(stub.GetSchema(proto.GetSchemaRequest(version=0), timeout=60).schema)
            info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=60)
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
    assert served == json.loads(GOLDEN_SCHEMA.read_text())
    assert info.version == INFERSTACK_VERSION


#### construct, as the engine calls it for another language's program ####


def _state(recording: Recording) -> dict[str, Any]:
    response = recording.value
    assert isinstance(response, proto.ConstructResponse), response
    state: dict[str, Any] = rpc.deserialize_properties(response.state)
    return state


def test_construct_creates_the_server_from_camel_case_wire_inputs_with_the_plan_as_text(
        construct: Construct, schema: dict[str, Any]) -> None:
    plan = sample_plan("aws", "gpu-llm", "validation")
    recording = construct("InferenceServer", {
        "plan": plan.model_dump_json(),  # what `inferstack plan --json` writes, read from a file by the program
        "networkId": "vpc-0b1e55ed",
        "subnetIds": ["subnet-0000000a", "subnet-0000000b"],
        "allowedCidrs": ["10.20.0.0/16"],
        "apiKey": rpc.wrap_rpc_secret("k-wire-123"),  # a secret from the program arrives wrapped
        "staticAssets": False,
        "tags": {"team": "search"},
    })
    (server,) = recording.of_type("inferstack:index:InferenceServer")
    assert server.name == "chat" and server.parent is None
    assert not recording.of_type("inferstack:index:Network") and not recording.of_type("inferstack:index:StaticAssets")
    registered = {r.type for r in recording.resources if r.type.startswith("inferstack:")}
    assert registered <= set(schema["resources"])  # children register under the tokens the schema names
    (instance,) = recording.of_type("aws:ec2/instance:Instance")
    assert instance.inputs["subnetId"] in {"subnet-0000000a", "subnet-0000000b"}
    assert instance.inputs["instanceType"] == plan.instance_type and instance.inputs["tags"]["team"] == "search"
    assert recording.named("chat-firewall-sg").inputs["vpcId"] == "vpc-0b1e55ed"
    rules = recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert "10.20.0.0/16" in {rule.inputs.get("cidrIpv4") for rule in rules}
    parameter = recording.named("chat-secrets-api-key")
    assert rpc.is_rpc_secret(parameter.raw_inputs["value"]) and parameter.inputs["value"] == "k-wire-123"

    response = recording.value
    assert response.urn == server.urn
    state = _state(recording)
    assert set(state) <= set(schema["resources"]["inferstack:index:InferenceServer"]["properties"])
    assert state["endpointUrl"] == f"http://{instance.outputs['publicIp']}:{plan.serving.port}"
    assert state["privateIps"] == [instance.outputs["privateIp"]]
    assert state["instanceIds"] == [instance.id]
    assert state["apiKeyRef"] == parameter.inputs["name"]
    assert state["planSummary"]["instance_type"] == plan.instance_type


def test_construct_takes_the_plan_report_that_inferstack_plan_writes(construct: Construct) -> None:
    report_text = (EXISTING_VPC / "plan.json").read_text()
    chosen = json.loads(report_text)["clouds"][0]["chosen"]
    recording = construct("InferenceServer", {"plan": report_text, "staticAssets": False})
    (instance,) = recording.of_type("aws:ec2/instance:Instance")
    assert instance.inputs["instanceType"] == chosen["instance_type"]
    assert _state(recording)["planSummary"]["region"] == chosen["region"]


def test_construct_sizes_a_workload_sent_as_an_object(construct: Construct) -> None:
    workload = yaml.safe_load((EXISTING_VPC / "workload.yaml").read_text())
    recording = construct("InferenceServer", {"workload": workload, "cloud": "aws", "staticAssets": False})
    (instance,) = recording.of_type("aws:ec2/instance:Instance")
    assert instance.inputs["tags"]["workload"] == workload["name"]
    assert _state(recording)["planSummary"]["region"] == "us-east-1"


def test_construct_sizes_a_workload_sent_as_yaml_text(construct: Construct) -> None:
    text = (EXISTING_VPC / "workload.yaml").read_text()
    recording = construct("InferenceServer", {"workload": text, "staticAssets": False})
    assert recording.of_type("aws:ec2/instance:Instance")


def test_construct_builds_a_child_component_on_its_own(construct: Construct, schema: dict[str, Any]) -> None:
    recording = construct("ModelStore", {"cloud": "aws", "forceDestroy": True}, name="models")
    buckets = recording.of_type("aws:s3/bucket:Bucket")
    assert len(buckets) == 3 and all(bucket.inputs["forceDestroy"] is True for bucket in buckets)
    state = _state(recording)
    assert set(state) == set(schema["resources"]["inferstack:index:ModelStore"]["properties"])
    assert state["modelBucketName"] in {bucket.id for bucket in buckets}


def test_construct_takes_wire_numbers_for_integer_inputs(construct: Construct) -> None:
    """The wire carries every number as a double; the component's validation makes the port an int again."""
    recording = construct("Firewall", {"cloud": "aws", "networkId": "vpc-0b1e55ed", "networkCidr": "10.0.0.0/16",
                                                "port": 8000, "metricsPort": 9090}, name="fw")
    rules = recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert {(rule.inputs["fromPort"], rule.inputs["cidrIpv4"]) for rule in rules} == {
        (8000, "10.0.0.0/16"), (9090, "10.0.0.0/16")}
    assert _state(recording)["firewallId"] == recording.named("fw-sg").id


#### construct: bad input names the field, and nothing is created ####


def _rejected(recording: Recording) -> str:
    error = recording.value
    assert isinstance(error, ComponentInitError) and isinstance(error.inner, InputError), error
    assert recording.resources == []
    return str(error.inner)


def test_plan_text_that_is_not_json_is_rejected_naming_the_field(construct: Construct) -> None:
    message = _rejected(construct("InferenceServer", {"plan": "workload: kb-qa"}))
    assert "chat.plan: is not JSON" in message and "inferstack plan WORKLOAD --json" in message


def test_plan_object_that_lost_its_nulls_on_the_wire_is_rejected_as_incomplete(construct: Construct) -> None:
    """Why the docs say to send the plan as text: the SDK drops an object's null values on the way."""
    plan = json.loads(sample_plan("aws", "cpu-llm", "validation").model_dump_json())
    assert plan["accelerator"] is None
    message = _rejected(construct("InferenceServer", {"plan": plan}))
    assert "is not a complete plan: missing" in message


def test_plan_from_another_resources_output_is_rejected(construct: Construct) -> None:
    producer = "urn:pulumi:test::inferstack::aws:s3/bucketObjectv2:BucketObjectv2::plan"
    recording = construct("InferenceServer", {"plan": sample_plan().model_dump_json()},
                           dependencies={"plan": [producer]})
    assert "chat.plan: is an Output: it must be known when the component is created" in _rejected(recording)


def test_plan_report_covering_several_clouds_needs_the_cloud(construct: Construct) -> None:
    report = json.loads((EXISTING_VPC / "plan.json").read_text())
    report["clouds"].append({**copy.deepcopy(report["clouds"][0]), "cloud": "gcp"})
    message = _rejected(construct("InferenceServer", {"plan": json.dumps(report)}))
    assert "chat.cloud: is required with a plan report that covers several clouds" in message


def test_unknown_cloud_is_rejected_listing_the_clouds(construct: Construct) -> None:
    message = _rejected(construct("ModelStore", {"cloud": "azure"}, name="models"))
    assert "models.cloud: is not a cloud inferstack knows (got 'azure')" in message and "aws, gcp" in message


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)

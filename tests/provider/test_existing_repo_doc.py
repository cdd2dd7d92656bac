"""docs/existing-repo.md's TypeScript and YAML snippets use the schema's resource token, input and output names, and
its inline workload creates a server when sent through `construct` as written."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from inferstack.preview import Recording

DOC = Path(__file__).resolve().parents[2] / "docs" / "existing-repo.md"
TOKEN = "inferstack:index:InferenceServer"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def _yaml_servers() -> list[dict[str, Any]]:
    servers = []
    for block in _blocks("yaml"):
        document = yaml.safe_load(block)
        resources = document.get("resources", document)
        servers += [resource for resource in resources.values() if resource.get("type") == TOKEN]
    return servers


def _inference_server(schema: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = schema["resources"][TOKEN]
    return resource


def test_yaml_snippets_name_the_token_and_only_schema_inputs_and_outputs(schema: dict[str, Any]) -> None:
    servers = _yaml_servers()
    assert len(servers) == 2
    for server in servers:
        assert set(server["properties"]) <= set(_inference_server(schema)["inputProperties"])
    referenced = {m for block in _blocks("yaml") for m in re.findall(r"\$\{inference\.(\w+)\}", block)}
    assert referenced and referenced <= set(_inference_server(schema)["properties"])


def test_typescript_snippet_uses_only_schema_inputs_and_outputs(schema: dict[str, Any]) -> None:
    (block,) = _blocks("typescript")
    arguments = re.search(r"new inferstack\.InferenceServer\(\"inference\", \{\n(.*?)\n\}\);", block, re.DOTALL)
    assert arguments is not None
    keys = set(re.findall(r"^    (\w+):", arguments.group(1), flags=re.MULTILINE))
    assert keys == {"plan", "networkId", "subnetIds", "staticAssets", "tags"}
    assert keys <= set(_inference_server(schema)["inputProperties"])
    outputs = set(re.findall(r"inference\.(\w+)", block))
    assert outputs and outputs <= set(_inference_server(schema)["properties"])


def test_the_inline_yaml_workload_creates_a_server_as_written(construct: Callable[..., Recording]) -> None:
    (inline,) = [server for server in _yaml_servers() if "workload" in server["properties"]]
    recording = construct("InferenceServer", inline["properties"], name="inference")
    (instance,) = recording.of_type("aws:ec2/instance:Instance")
    assert instance.inputs["tags"]["workload"] == inline["properties"]["workload"]["name"]
    rules = recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert set(inline["properties"]["allowedCidrs"]) <= {rule.inputs.get("cidrIpv4") for rule in rules}

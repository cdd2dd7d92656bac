"""Each example is a complete Pulumi project: its program runs under mocks with its own stack config."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferstack.preview import Recording, record

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run_example(name: str, monkeypatch: pytest.MonkeyPatch, **extra: Any) -> Recording:
    folder = EXAMPLES / name
    assert (folder / "Pulumi.yaml").is_file() and (folder / "requirements.txt").is_file()
    config = yaml.safe_load((folder / "Pulumi.dev.yaml").read_text())["config"]
    project = yaml.safe_load((folder / "Pulumi.yaml").read_text())["name"]
    monkeypatch.chdir(folder)

    def main() -> None:
        runpy.run_path(str(folder / "__main__.py"))

    return record(main, config={**config, **extra}, project=project, stack="dev")


def test_gpu_chat_example_deploys_a_gpu_server_with_its_cdn(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _run_example("aws-gpu-chat", monkeypatch)
    (instance,) = recording.of_type("aws:ec2/instance:Instance")
    assert instance.inputs["instanceType"].startswith(("g", "p"))
    assert recording.of_type("aws:cloudfront/distribution:Distribution")


def test_cpu_embeddings_example_deploys_a_cpu_server_without_cdn(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _run_example("aws-cpu-embeddings", monkeypatch,
                             **{"aws-cpu-embeddings:allowedCidrs": ["10.20.0.0/16"]})
    instances = recording.of_type("aws:ec2/instance:Instance")
    assert instances and not instances[0].inputs["instanceType"].startswith(("g", "p"))
    assert not recording.of_type("aws:cloudfront/distribution:Distribution")
    rules = recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert "10.20.0.0/16" in {r.inputs.get("cidrIpv4") for r in rules}


def test_existing_vpc_example_joins_the_vpc_and_creates_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _run_example("aws-existing-vpc", monkeypatch)
    assert not [r for r in recording.resources if r.type.startswith(("aws:ec2/vpc:", "aws:ec2/subnet:"))]
    subnets = {i.inputs["subnetId"] for i in recording.of_type("aws:ec2/instance:Instance")}
    assert subnets <= {"subnet-0123456789abcdef0", "subnet-0fedcba9876543210"}
    assert recording.named("inference-firewall-sg").inputs["vpcId"] == "vpc-0123456789abcdef0"
    egress = recording.named("app-to-inference").inputs
    assert egress["referencedSecurityGroupId"] == recording.named("inference-firewall-sg").id
    (server,) = [r for r in recording.resources if r.type == "inferstack:index:InferenceServer"]
    assert server.parent is None

"""Each example is a complete Pulumi project: its program runs under mocks with its own stack config."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferstack.cli import main
from inferstack.preview import Recording, record

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run_example(name: str, monkeypatch: pytest.MonkeyPatch, **extra: Any) -> Recording:
    folder = EXAMPLES / name
    assert all((folder / f).is_file() for f in ("Pulumi.yaml", "requirements.txt", "README.md", "workload.yaml"))
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


#### Google Cloud, Alibaba Cloud, Huawei Cloud ####


def test_gcp_gpu_chat_example_deploys_a_gpu_server_with_its_cdn_on_the_configured_domain(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _run_example("gcp-gpu-chat", monkeypatch)
    (instance,) = recording.of_type("gcp:compute/instance:Instance")
    assert instance.inputs["machineType"].startswith(("g2-", "a2-", "a3-", "n1-"))
    assert instance.inputs["scheduling"]["onHostMaintenance"] == "TERMINATE"
    (certificate,) = recording.of_type("gcp:compute/managedSslCertificate:ManagedSslCertificate")
    assert certificate.inputs["managed"] == {"domains": ["chat-assets.example.com"]}  # Pulumi.dev.yaml's domain


def test_alibaba_gpu_chat_example_deploys_a_gpu_server_with_its_cdn_on_the_configured_domain(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _run_example("alibaba-gpu-chat", monkeypatch)
    (instance,) = recording.of_type("alicloud:ecs/instance:Instance")
    assert instance.inputs["instanceType"].startswith("ecs.gn")
    assert [d.inputs["domainName"] for d in recording.of_type("alicloud:cdn/domainNew:DomainNew")] == [
        "chat-assets.example.com"]


def test_huawei_gpu_chat_example_deploys_a_gpu_server_and_adds_the_cdn_once_a_domain_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _run_example("huawei-gpu-chat", monkeypatch)
    (server,) = recording.of_type("huaweicloud:Ecs/instance:Instance")
    assert server.inputs["flavorId"].startswith("p")  # a GPU flavor (pi2, p2s, p2v, p3)
    assert not recording.of_type("huaweicloud:Cdn/domain:Domain")
    with_cdn = _run_example("huawei-gpu-chat", monkeypatch, **{"huawei-gpu-chat:assetsDomain": "assets.example.com",
                                                              "huawei-gpu-chat:assetsCertificate": "scs1554192131150"})
    assert [d.inputs["name"] for d in with_cdn.of_type("huaweicloud:Cdn/domain:Domain")] == ["assets.example.com"]


#### A repository of one's own, with its own unit tests ####


def test_existing_repo_example_passes_its_own_unit_tests_as_its_team_runs_them() -> None:
    # Its tests/ import its program under Pulumi's mocks: inferstack's (test_infra.py) and generic ones
    # (test_generic_mocks.py), each run once per pytest run, as `pytest` in the example's folder runs them.
    folder = EXAMPLES / "existing-repo"
    assert all((folder / f).is_file() for f in ("Pulumi.yaml", "requirements.txt", "README.md", "workload.yaml"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=folder,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "6 passed" in result.stdout


def test_existing_repo_example_previews_with_the_range_of_its_own_vpc(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "--program", str(EXAMPLES / "existing-repo"), "--stack", "dev", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    allowed = {r["inputs"]["cidrIpv4"] for r in document["resources"]
               if r["type"] == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
               and r["name"].startswith("inference-firewall-api")}
    assert allowed == {"10.20.0.0/16"}

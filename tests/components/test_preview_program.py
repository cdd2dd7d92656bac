"""`inferstack preview --program DIR --stack NAME`: a user's own Pulumi program, previewed offline with its stack
config, under the mocks of inferstack.testing."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from inferstack.cli import main
from inferstack.components.argument_checks import CACHE_AUTH_TOKEN_PATTERN
from inferstack.errors import InputError
from inferstack.preview import SECRET_PLACEHOLDER, preview_program
from inferstack.pulumi_mocks import UNKNOWN_MARK

EXISTING_REPO = Path(__file__).resolve().parents[2] / "examples" / "existing-repo"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"

PROGRAM = '''
import pulumi
import pulumi_aws as aws

config = pulumi.Config()
vpc = aws.ec2.Vpc("vpc", cidr_block=config.require("cidr"))
token = config.require_secret("token")
found = pulumi.runtime.invoke_output("acme:index:getThing", {})
pulumi.export("vpcId", vpc.id)
pulumi.export("token", token)
pulumi.export("thing", found)
pulumi.export("later", pulumi.Output.from_input(pulumi.output.UNKNOWN))  # known only once the cloud answers
'''


def _project(folder: Path, *, program: str = PROGRAM, stack: str | None = "dev",
             stack_config: dict[str, Any] | None = None, project: str = "name: shop\nruntime: python\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text(project)
    (folder / "__main__.py").write_text(program)
    if stack is not None:
        config = stack_config if stack_config is not None else {
            "aws:region": "us-east-1", "cidr": "10.30.0.0/16", "token": {"secure": "v1:AAAA"}}
        (folder / f"Pulumi.{stack}.yaml").write_text(json.dumps({"config": config}))
    return folder


def test_cli_previews_the_existing_repo_example_with_its_own_vpc_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "--program", str(EXISTING_REPO), "--stack", "dev", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rules = {r["name"]: r["inputs"] for r in document["resources"] if r["type"] == INGRESS}
    assert rules["inference-firewall-api-network"]["cidrIpv4"] == "10.20.0.0/16"
    assert {rule["cidrIpv4"] for name, rule in rules.items() if name.startswith("inference")} == {"10.20.0.0/16"}
    assert document["servers"]["inference"]["instance_type"] == "g6.xlarge"
    assert document["servers"]["inference"]["instance_count"] == 1
    assert document["outputs"]["inferenceUrl"].startswith("http://10.20.1")  # a private subnet's address
    assert document["notes"] == []


def test_the_text_report_summarises_each_server_then_the_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "--program", str(EXISTING_REPO), "--stack", "dev"]) == 0
    report = capsys.readouterr().out
    assert report.startswith(f"Program: {EXISTING_REPO} (stack dev)\nInferenceServer inference: 1x g6.xlarge")
    assert "aws:ec2/vpc:Vpc  vpc  cidrBlock=10.20.0.0/16" in report and "Stack outputs:" in report


def test_stack_config_secrets_exports_and_unanswered_lookups(tmp_path: Path) -> None:
    result = preview_program(_project(tmp_path / "shop"), "dev")
    (vpc,) = [r for r in result.resources if r.type == "aws:ec2/vpc:Vpc"]
    assert vpc.inputs["cidrBlock"] == "10.30.0.0/16"  # a key without a namespace is the project's
    assert result.outputs == {"vpcId": vpc.id, "token": SECRET_PLACEHOLDER, "thing": {},  # this program's exports
                              "later": UNKNOWN_MARK}
    assert any("shop:token" in note and "placeholder" in note for note in result.notes)
    assert any("acme:index:getThing" in note for note in result.notes)
    assert result.servers == {}


def test_config_given_on_the_command_line_wins_over_the_stack_file(tmp_path: Path) -> None:
    result = preview_program(_project(tmp_path / "shop"), "dev", config={"shop:cidr": "10.40.0.0/16"})
    assert [r.inputs["cidrBlock"] for r in result.resources if r.type == "aws:ec2/vpc:Vpc"] == ["10.40.0.0/16"]


def test_the_process_is_left_as_it_was(tmp_path: Path) -> None:
    before = (Path.cwd(), list(sys.path), os.environ.copy())
    preview_program(_project(tmp_path / "shop"), "dev")
    assert (Path.cwd(), list(sys.path), os.environ.copy()) == before


def test_the_secret_placeholder_passes_as_an_api_key_and_a_cache_token() -> None:
    assert re.fullmatch(CACHE_AUTH_TOKEN_PATTERN, SECRET_PLACEHOLDER)


def test_each_preview_runs_the_programs_own_modules_afresh_and_forgets_them(tmp_path: Path) -> None:
    folder = _project(tmp_path / "shop", program="import shop_network\n")
    (folder / "shop_network.py").write_text("import pulumi_aws as aws\naws.ec2.Vpc('vpc', cidr_block='10.30.0.0/16')\n")
    runs = [preview_program(folder, "dev") for _ in range(2)]
    assert [[r.name for r in run.resources] for run in runs] == [["vpc"], ["vpc"]]
    assert "shop_network" not in sys.modules


def test_a_missing_config_key_names_the_stack_file_and_the_command_to_set_it(tmp_path: Path) -> None:
    folder = _project(tmp_path / "shop", stack_config={"aws:region": "us-east-1"})
    with pytest.raises(InputError, match=r"Pulumi.dev.yaml: has no shop:cidr.*pulumi config set shop:cidr <value> "
                                         r"--stack dev"):
        preview_program(folder, "dev")


@pytest.mark.parametrize(("make", "stack", "message"), [
    (lambda d: d.mkdir(), "dev", r"--program: is not a Pulumi project folder \(it holds no Pulumi.yaml\)"),
    (lambda d: _project(d, stack=None), "dev", r"--stack: has no stack file Pulumi.dev.yaml .*none yet"),
    (lambda d: _project(d), "prod", r"--stack: has no stack file Pulumi.prod.yaml .*give one of its stacks \(dev\)"),
    (lambda d: _project(d), "../dev", r"--stack: is not a stack's own name \(got '../dev'\)"),
    (lambda d: _project(d, project="name: shop\nruntime: nodejs\n"), "dev", r"runtime: is not python"),
    (lambda d: _project(d, project="name: shop\nruntime: python\nmain: ../elsewhere/\n"), "dev",
     r"main: points outside the project folder"),
])
def test_a_folder_that_is_not_a_runnable_python_project_is_refused_naming_the_fix(
        tmp_path: Path, make: Any, stack: str, message: str) -> None:
    make(tmp_path / "shop")
    with pytest.raises(InputError, match=message):
        preview_program(tmp_path / "shop", stack)


def test_cli_refuses_workload_options_with_a_program_and_asks_for_the_stack(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "--program", str(EXISTING_REPO), "--stack", "dev", "--cloud", "aws"]) == 2
    assert "--program: previews your program as it is" in capsys.readouterr().err
    assert main(["preview", "--program", str(EXISTING_REPO)]) == 2
    assert "--stack: is required with --program" in capsys.readouterr().err
    assert main(["preview"]) == 2
    assert "needs a workload file and --cloud, or --program and --stack" in capsys.readouterr().err

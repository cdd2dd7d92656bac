"""InferenceServer given a workload instead of a plan: it sizes it for the cloud, or says why it cannot."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import inferstack.sizing
from inferstack.components import InferenceServer
from inferstack.errors import InfeasibleError, InputError
from inferstack.plan import CloudOutcome
from inferstack.spec import parse_workload
from tests.sample_plans import sample_plan

WORKLOAD = {"name": "chat-dev", "model": "llama-3.1-8b", "precision": "bf16",
            "traffic": {"concurrent_users": 4}, "stage": "validation", "placement": {"clouds": ["aws"]}}


def test_workload_is_sized_for_the_cloud_and_deployed(run: Any) -> None:
    spec = parse_workload(WORKLOAD)
    recording = run(lambda: InferenceServer("chat", {"workload": spec}).plan_summary,
                    config={"aws:region": "us-west-2"})
    assert recording.value["stage"] == "validation" and recording.value["region"] == "us-west-2"
    instances = recording.of_type("aws:ec2/instance:Instance")
    assert len(instances) == recording.value["instance_count"]
    assert instances[0].inputs["instanceType"] == recording.value["instance_type"]


def test_workload_with_no_feasible_deployment_fails_with_the_reasons(run: Any, monkeypatch: Any) -> None:
    blocked = CloudOutcome.model_construct(cloud="aws", chosen=None,
                                           blocked_by=["no GPU in us-east-1 fits 140 GiB", "budget 100 USD"])
    report = SimpleNamespace(outcome=lambda cloud: blocked)
    monkeypatch.setattr(inferstack.sizing, "plan_workload", lambda spec, **options: report, raising=False)

    def program() -> str:
        with pytest.raises(InfeasibleError) as caught:
            InferenceServer("chat", {"workload": parse_workload(WORKLOAD)})
        return str(caught.value)

    recording = run(program)
    assert recording.value.startswith(
        "chat.workload: no feasible deployment on aws: no GPU in us-east-1 fits 140 GiB; budget 100 USD.")
    assert recording.resources == []


def test_workload_allowing_several_clouds_needs_a_cloud(run: Any) -> None:
    spec = parse_workload({**WORKLOAD, "placement": {"clouds": ["aws", "gcp"]}})

    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"workload": spec})
        return str(caught.value)

    assert "chat.cloud: is required with a workload that allows several clouds" in run(program).value


def test_cloud_that_contradicts_the_plan_is_rejected(run: Any) -> None:
    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": sample_plan("aws"), "cloud": "gcp"})
        return str(caught.value)

    assert "differs from the plan's cloud (aws)" in run(program).value


def test_stack_sizes_its_workload_with_the_price_overrides_it_names(monkeypatch: Any, tmp_path: Any) -> None:
    from inferstack.preview import preview_stack

    calls: list[dict[str, Any]] = []
    chosen = sample_plan("aws", "cpu-llm", "validation")

    def plan_workload(spec: Any, **options: Any) -> Any:
        calls.append({"spec": spec, **options})
        return SimpleNamespace(outcome=lambda cloud: CloudOutcome.model_construct(cloud=cloud, chosen=chosen,
                                                                                   blocked_by=[]))

    monkeypatch.setattr(inferstack.sizing, "plan_workload", plan_workload, raising=False)
    monkeypatch.chdir(tmp_path)  # the project: the stack names its files relative to it
    result = preview_stack({"inferstack:cloud": "aws", "aws:region": "us-east-1", "inferstack:stage": "validation",
                            "inferstack:workload": {**WORKLOAD, "stage": "production"},
                            "inferstack:pricesFile": "prices.yaml"})
    assert result.plan == chosen
    (call,) = calls
    assert call["clouds"] == ["aws"] and call["prices_file"] == tmp_path / "prices.yaml"
    assert call["spec"].stage == "validation"  # the stack's stage overrides the workload's
    assert call["spec"].placement.regions == {"aws": ["us-east-1"]}  # sized where the provider deploys

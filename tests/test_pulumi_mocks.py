"""The adapter over Pulumi's runtime internals: what the offline preview relies on, each piece checked on its own.

Run under the lowest supported pulumi too when the range in pyproject.toml changes (README, "Install").
"""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from inferstack.pulumi_mocks import Registration, config_value, is_secret, run_under_mocks, unwrap_secret


class Answers:
    def __init__(self) -> None:
        self.invoked: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, type_: str, name: str, inputs: dict[str, Any], custom: bool) -> tuple[str, dict[str, Any]]:
        return (f"{name}-id", {**inputs, "arn": f"arn:{name}"}) if custom else ("", {})

    def invoke(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        self.invoked.append((token, args))
        return {"zone": "zone-a"}


def engine_urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    return f"urn:test:{stack}/{project}::{parent.rsplit('::', 1)[-1] if parent else ''}::{type_}::{name}"


def _program() -> dict[str, Any]:
    component = pulumi.ComponentResource("test:index:Box", "box")
    provider = pulumi.ProviderResource("test", "explicit", {}, opts=pulumi.ResourceOptions(parent=component))
    thing = pulumi.CustomResource(
        "test:index:Thing", "box-thing", {"size": 3, "password": pulumi.Output.secret("hunter2"),
                                          "label": pulumi.Config("app").require("label")},
        opts=pulumi.ResourceOptions(parent=component, protect=True, ignore_changes=["size"], provider=provider))
    zone = pulumi.runtime.invoke("test:index:getZone", {"region": "r1"}).value["zone"]
    return {"arn": thing.urn.apply(lambda _: "done"), "zone": zone, "label": pulumi.Config("app").get("label")}


def _run(answers: Answers | None = None, config: dict[str, str] | None = None) -> tuple[list[Registration], Any]:
    return run_under_mocks(_program, answers or Answers(), urn=engine_urn, config=config or {"app:label": "blue"},
                           secret_keys=[], project="proj", stack="dev")


def test_every_registration_but_the_stacks_is_recorded_with_the_urns_the_urn_function_gives():
    registrations, _ = _run()
    assert [(r.type, r.name) for r in registrations] == [
        ("test:index:Box", "box"), ("pulumi:providers:test", "explicit"), ("test:index:Thing", "box-thing")]
    box, _provider, thing = registrations
    # The run's stack and project; the parent is the process's root stack resource (Pulumi creates it once).
    assert box.urn.startswith("urn:test:dev/proj::") and box.urn.endswith("::test:index:Box::box")
    assert thing.parent_urn == box.urn and thing.urn.endswith("::box::test:index:Thing::box-thing")


def test_a_registration_keeps_the_options_the_engine_receives():
    registrations, _ = _run()
    _box, provider, thing = registrations
    assert (thing.custom, thing.protect, thing.ignore_changes) == (True, True, ("size",))
    assert thing.provider == f"{provider.urn}::{provider.id}"


def test_inputs_are_in_wire_form_with_secrets_marked_and_outputs_are_the_answers():
    registrations, _ = _run()
    thing = registrations[-1]
    assert thing.id == "box-thing-id" and thing.outputs["arn"] == "arn:box-thing"
    assert thing.wire_inputs["size"] == 3 and thing.wire_inputs["label"] == "blue"
    assert is_secret(thing.wire_inputs["password"]) and unwrap_secret(thing.wire_inputs["password"]) == "hunter2"
    assert not is_secret(thing.wire_inputs["size"])


def test_lookups_are_answered_and_the_programs_value_is_resolved():
    answers = Answers()
    _, value = _run(answers)
    assert answers.invoked == [("test:index:getZone", {"region": "r1"})]
    assert value == {"arn": "done", "zone": "zone-a", "label": "blue"}


def test_the_stack_config_is_the_runs_own_and_restored_after_it():
    _run(config={"app:label": "outer"})
    pulumi.runtime.set_all_config({"app:kept": "yes"}, ["app:kept"])
    _, value = _run(config={"app:label": "inner"})
    assert value["label"] == "inner"
    assert pulumi.runtime.get_config("app:kept") == "yes" and pulumi.runtime.is_config_secret("app:kept")
    assert pulumi.runtime.get_config("app:label") is None


def test_a_failing_program_raises_its_own_error():
    def failing() -> Any:
        raise ValueError("no such plan")

    with pytest.raises(ValueError, match="no such plan"):
        run_under_mocks(failing, Answers(), urn=engine_urn, config={}, secret_keys=[], project="p", stack="s")


def test_config_values_are_stored_as_pulumi_config_set_path_stores_them():
    assert [config_value("text"), config_value(["10.0.0.0/8"]), config_value(True)] == [
        "text", '["10.0.0.0/8"]', "true"]

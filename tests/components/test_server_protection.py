"""Server protection on every cloud: what `protect_servers` (stack config `inferstack:protectServers`) registers.

A cloud's deletion flag alone fails a replacement only at the delete, which Pulumi runs after creating the successor:
both GPU servers keep running and billing. Pulumi's `protect` fails it earlier: the engine refuses to replace or
delete a resource protected both in the state and in the program while it plans the steps, before anything is
created (pulumi/pulumi pkg/resource/deploy/step_generator.go, `new.Protect && old.Protect`). Mocks do not run the
engine, so these tests assert what reaches it: each server's `protect` and `deleteBeforeReplace` options, and the
cloud's flag.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pulumi
import pytest

from inferstack import preview, pulumi_mocks
from inferstack.components import InferenceServer
from inferstack.preview import Recording, preview_deployment
from inferstack.spec import Stage
from tests.components.conftest import CLOUD_ARGS, STACK_CONFIG
from tests.sample_plans import sample_plan

# Each cloud's server resource, and its deletion flag (None: the provider has none).
SERVERS: dict[str, tuple[str, str | None]] = {
    "aws": ("aws:ec2/instance:Instance", "disableApiTermination"),
    "gcp": ("gcp:compute/instance:Instance", "deletionProtection"),
    "alibaba": ("alicloud:ecs/instance:Instance", "deletionProtection"),
    "huawei": ("huaweicloud:Ecs/instance:Instance", None),
}
# Where a production plan runs as a managed fleet: the resources protection covers (Pulumi's `protect`), each with its
# cloud deletion flag (None: none). They are replaced create-first (the group keeps serving), not delete-first.
# AWS: the servers themselves belong to the group, which replaces a terminated one; EC2 termination protection "does
# not prevent Amazon EC2 Auto Scaling from terminating an instance" (EC2 User Guide), and lifting it would change the
# launch template, which replaces every server. The endpoint's load balancer carries AWS's deletion protection.
FLEETS: dict[str, dict[str, str | None]] = {
    "aws": {"aws:autoscaling/group:Group": None, "aws:ec2/launchTemplate:LaunchTemplate": None,
            "aws:lb/loadBalancer:LoadBalancer": "enableDeletionProtection", "aws:lb/targetGroup:TargetGroup": None,
            "aws:lb/listener:Listener": None},
    # GCP: the group carries no flag (an instance template has no deletion protection).
    "gcp": {"gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager": None},
    # Huawei: the load balancer has its own flag; group and load balancer are replaced delete-first (a successor
    # cannot take the group's name nor the load balancer's elastic IP while the old one exists).
    "huawei": {"huaweicloud:As/group:Group": None,
               "huaweicloud:DedicatedElb/loadbalancer:Loadbalancer": "deletionProtectionEnable"},
    # Alibaba: group and load balancer carry their own flags; all three have names of their own, so a successor
    # can only be created once the old one is gone (delete-first).
    "alibaba": {"alicloud:ess/scalingGroup:ScalingGroup": "groupDeletionProtection",
                "alicloud:alb/loadBalancer:LoadBalancer": "deletionProtectionEnabled",
                "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate": None},
}
FLEETS_REPLACED_DELETE_FIRST = {"huawei", "alibaba"}


@dataclass(frozen=True)
class Options:
    """The resource options of one registration, as the engine receives them."""

    protect: bool
    delete_before_replace: bool
    replace_on_changes: tuple[str, ...]


@pytest.fixture
def options(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Options]]:
    """The options of every registration of the runs in a test, by resource name (the recording keeps `protect`
    and `ignore_changes` only)."""
    seen: dict[str, Options] = {}
    register = pulumi_mocks.RecordingMonitor.RegisterResource

    def recording_options(monitor: Any, request: Any) -> Any:
        seen[request.name] = Options(request.protect, request.deleteBeforeReplace, tuple(request.replaceOnChanges))
        return register(monitor, request)

    monkeypatch.setattr(pulumi_mocks.RecordingMonitor, "RegisterResource", recording_options)
    yield seen


def _deploy(run: Any, cloud: str, stage: Stage, opts: pulumi.ResourceOptions | None = None,
            **args: Any) -> Recording:
    plan = sample_plan(cloud, "gpu-llm", stage)  # type: ignore[arg-type]
    return run(lambda: InferenceServer("chat", {"plan": plan, **CLOUD_ARGS[cloud], **args}, opts=opts).instance_ids)


def _servers(recording: Recording, cloud: str) -> list[preview.RegisteredResource]:
    servers = recording.of_type(SERVERS[cloud][0])
    assert servers, f"no {SERVERS[cloud][0]} registered"
    return servers


def _protected_kinds(cloud: str, stage: Stage) -> dict[str, str | None]:
    """What protection covers: the servers, or where production runs as a managed fleet, the fleet's resources."""
    if stage == "production" and cloud in FLEETS:
        return FLEETS[cloud]
    server_type, flag = SERVERS[cloud]
    return {server_type: flag}


def _guarded(recording: Recording, cloud: str, stage: Stage) -> list[tuple[preview.RegisteredResource, str | None]]:
    kinds = _protected_kinds(cloud, stage)
    guarded = [(r, kinds[r.type]) for r in recording.resources if r.type in kinds]
    assert {r.type for r, _ in guarded} == set(kinds), f"not all of {sorted(kinds)} registered"
    return guarded


@pytest.mark.parametrize("cloud", SERVERS)
@pytest.mark.parametrize(("stage", "args", "protected"), [
    ("production", {}, True),
    ("production", {"protect_servers": False}, False),
    ("validation", {}, False),
    ("validation", {"protect_servers": True}, True),
], ids=["production", "production-lifted", "validation", "validation-protected"])
def test_protected_servers_carry_protect_and_the_cloud_flag_and_every_server_is_replaced_delete_first(
        run: Any, options: dict[str, Options], cloud: str, stage: Stage, args: dict[str, Any],
        protected: bool) -> None:
    create_first = stage == "production" and cloud in FLEETS and cloud not in FLEETS_REPLACED_DELETE_FIRST
    for resource, flag in _guarded(_deploy(run, cloud, stage, **args), cloud, stage):
        assert options[resource.name].protect is protected, resource.name
        # A single server is replaced delete-first (server_options); a fleet's resources create-first.
        assert options[resource.name].delete_before_replace is not create_first, resource.name
        if flag is not None:
            assert resource.inputs[flag] is protected, resource.name


@pytest.mark.parametrize("cloud", SERVERS)
def test_lifting_protection_changes_only_the_flag_and_protect_so_it_is_an_update_in_place(
        run: Any, options: dict[str, Options], cloud: str) -> None:
    protected = {r.name: r for r in _deploy(run, cloud, "production").resources}
    protected_options = dict(options)
    lifted = {r.name: r for r in _deploy(run, cloud, "production", protect_servers=False).resources}
    assert protected.keys() == lifted.keys()
    kinds = _protected_kinds(cloud, "production")
    for name, before in protected.items():
        after = lifted[name]
        changed = {key for key in before.inputs.keys() | after.inputs.keys()
                   if before.inputs.get(key) != after.inputs.get(key)}
        if before.type in kinds:
            flag = kinds[before.type]
            assert changed == ({flag} if flag else set()), name
            assert protected_options[name].protect and not options[name].protect
            # The flag is an attribute the cloud changes on a running server: nothing makes it replace one.
            assert flag not in options[name].replace_on_changes
        else:
            assert changed == set(), name  # nothing but the servers changes


@pytest.mark.parametrize("cloud", SERVERS)
def test_protection_given_to_the_component_still_reaches_servers_whose_own_protection_is_lifted(
        run: Any, options: dict[str, Options], cloud: str) -> None:
    recording = _deploy(run, cloud, "production", opts=pulumi.ResourceOptions(protect=True), protect_servers=False)
    assert all(options[resource.name].protect for resource, _ in _guarded(recording, cloud, "production"))


@pytest.mark.parametrize(("cloud", "flag"), [("aws", "disableApiTermination"), ("alibaba", "deletionProtection")])
def test_spot_servers_go_without_the_cloud_flag_which_the_cloud_refuses_on_spot_but_keep_protect(
        run: Any, options: dict[str, Options], cloud: str, flag: str) -> None:
    plan = sample_plan(cloud, "gpu-llm", "validation").model_copy(update={"spot": True})  # type: ignore[arg-type]
    recording = run(lambda: InferenceServer("chat", {"plan": plan, "protect_servers": True, **CLOUD_ARGS[cloud]}))
    for server in _servers(recording, cloud):
        assert server.inputs[flag] is False and options[server.name].protect


def test_lifting_protection_in_production_warns_to_restore_it(run: Any, caplog: pytest.LogCaptureFixture) -> None:
    _deploy(run, "aws", "production", protect_servers=False)  # the mock engine hands logs to Python's logging
    assert "chat: production servers are unprotected (protect_servers false, stack config " \
           "inferstack:protectServers)" in caplog.text
    caplog.clear()
    _deploy(run, "aws", "production")
    assert "unprotected" not in caplog.text


@pytest.mark.parametrize(("config", "protected"), [({}, True), ({"inferstack:protectServers": "false"}, False),
                                                   ({"inferstack:protectServers": "true"}, True)])
def test_the_stack_option_protect_servers_reaches_the_servers(
        options: dict[str, Options], config: dict[str, Any], protected: bool) -> None:
    result = preview_deployment(sample_plan("aws", "gpu-llm", "production"), {**STACK_CONFIG, **config})
    guarded = [r for r in result.resources if r.type in FLEETS["aws"]]
    assert {r.type for r in guarded} == set(FLEETS["aws"])
    assert all(options[r.name].protect is protected for r in guarded)
    (balancer,) = [r for r in guarded if r.type == "aws:lb/loadBalancer:LoadBalancer"]
    assert balancer.inputs["enableDeletionProtection"] is protected


def test_a_fleets_scaling_and_network_stay_unprotected_so_that_they_can_change(
        run: Any, options: dict[str, Options]) -> None:
    recording = _deploy(run, "aws", "production")
    unguarded = [r for r in recording.resources if r.custom and r.type not in FLEETS["aws"]]
    assert {r.type for r in unguarded} >= {"aws:autoscaling/policy:Policy", "aws:ec2/natGateway:NatGateway",
                                            "aws:acm/certificate:Certificate"}
    assert not any(options[r.name].protect for r in unguarded)

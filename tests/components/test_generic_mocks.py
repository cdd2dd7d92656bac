"""The components under the generic mocks of Pulumi's guide to unit testing, as a user's own tests set them: every
resource gets `<name>_id` and its inputs back, every lookup answers nothing. They register every resource they
register under the preview's realistic answers; what only the cloud knows stays unknown (components/lookups.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from inferstack.components import InferenceServer
from inferstack.components import lookups as lookups_module
from inferstack.components.lookups import answered
from inferstack.errors import InferstackError
from inferstack.plan import Cache
from inferstack.preview import ProgramAnswers, Recording, record
from tests.components.conftest import CLOUD_ARGS, STACK_CONFIG
from tests.sample_plans import sample_plan

CACHE_TOKEN = "Cache-token_0123456789+ab="
BROUGHT_NETWORKS: dict[str, dict[str, Any]] = {
    "aws": {"network_id": "vpc-0a1b2c3d4e5f67890", "subnet_ids": ["subnet-0a1b2c3d4e5f67890"]},
    "gcp": {"network_id": "projects/my-project/global/networks/inference",
            "subnet_ids": ["projects/my-project/regions/us-central1/subnetworks/inference"]},
    "alibaba": {"network_id": "vpc-bp1a2b3c4d5e6f7g8h9i0", "subnet_ids": ["vsw-bp1a2b3c4d5e6f7g8h9i0"]},
    "huawei": {"network_id": "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
               "subnet_ids": ["0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5e"]},
}


class GenericMocks(pulumi.runtime.Mocks):
    """Pulumi's guide's mocks, keeping what was registered."""

    def __init__(self) -> None:
        self.registered: list[tuple[str, str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[Any, Any]]:
        self.registered.append((args.typ, args.name, dict(args.inputs)))
        return args.name + "_id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[Any, Any]:
        return {}


def _under_generic_mocks(program: Callable[[], Any]) -> GenericMocks:
    """Run `program` as a user's test would: `set_mocks` with generic mocks, then `pulumi.runtime.test`."""
    mocks = GenericMocks()
    pulumi.runtime.set_mocks(mocks, preview=False)
    pulumi.runtime.set_all_config({key: str(value) for key, value in STACK_CONFIG.items()})
    try:
        pulumi.runtime.test(program)()
    finally:
        pulumi.runtime.set_all_config({})
    return mocks


def _server_args(cloud: str, case: str) -> dict[str, Any]:
    """production: a fleet with a cache (every lookup a fleet makes); brought: one server in a brought network."""
    if case == "production":
        plan = sample_plan(cloud, "gpu-llm", "production").model_copy(update={"cache": Cache(ttl_seconds=600)})
        token = {"cache_auth_token": CACHE_TOKEN} if cloud != "gcp" else {}
        return {"plan": plan, **CLOUD_ARGS[cloud], **token}
    return {"plan": sample_plan(cloud, "gpu-llm", "internal"), **CLOUD_ARGS[cloud], **BROUGHT_NETWORKS[cloud]}


@pytest.mark.parametrize("case", ["production", "brought"])
@pytest.mark.parametrize("cloud", ["aws", "gcp", "alibaba", "huawei"])
def test_components_survive_generic_mocks_and_register_what_the_preview_does(cloud: str, case: str) -> None:
    args = _server_args(cloud, case)
    generic = _under_generic_mocks(lambda: InferenceServer("inf", args).firewall_ids)
    realistic = record(lambda: InferenceServer("inf", args).firewall_ids, config=STACK_CONFIG, project="project",
                       stack="stack")
    registered = {(type_, name) for type_, name, _ in generic.registered}
    assert registered == {(r.type, r.name) for r in realistic.resources}
    assert len(registered) > 20


def test_a_value_only_the_cloud_knows_stays_unknown_under_generic_mocks() -> None:
    # The brought VPC's range, which the API's firewall rule admits: looked up, and these mocks answer nothing.
    args = _server_args("aws", "brought")
    generic = _under_generic_mocks(lambda: InferenceServer("inf", args).firewall_ids)
    rules = {name: inputs for type_, name, inputs in generic.registered
             if type_ == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"}
    assert rules["inf-firewall-api-network"]["fromPort"] == args["plan"].serving.port
    assert rules["inf-firewall-api-network"].get("cidrIpv4") is None
    (server,) = [inputs for type_, _, inputs in generic.registered if type_ == "aws:ec2/instance:Instance"]
    assert server["subnetId"] == "subnet-0a1b2c3d4e5f67890" and server["instanceType"] == "g6.xlarge"


#### answered: the rule every component follows ####


def _answered(fact: Any, **options: Any) -> Recording:
    """A program that gives a resource `answered(fact)`, recorded."""
    def program() -> Any:
        value = answered(pulumi.Output.from_input(fact), "aws:ec2/getVpc:getVpc cidrBlock", **options)
        pulumi.CustomResource("test:index:Rule", "rule", {"cidr": value})
        return value
    return record(program, answers=ProgramAnswers(strict=False))


def test_answered_passes_a_given_fact_through() -> None:
    recording = _answered("10.20.0.0/16")
    assert recording.value == "10.20.0.0/16" and recording.named("rule").inputs["cidr"] == "10.20.0.0/16"


def test_answered_leaves_a_fact_the_mocks_left_out_unknown() -> None:
    recording = _answered(None)
    assert recording.value is None  # the program's value never resolved: it is unknown
    assert recording.named("rule").inputs.get("cidr") is None  # an unknown input reaches the mocks as absent


def test_answered_stops_a_real_run_naming_what_the_provider_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lookups_module, "running_under_mocks", lambda: False)
    with pytest.raises(InferstackError, match=r"aws:ec2/getVpc:getVpc cidrBlock: the cloud provider answered "
                                              r"nothing.*Fix: run `pulumi refresh`"):
        _answered(None)


def test_answered_takes_an_empty_list_a_real_provider_leaves_out_as_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lookups_module, "running_under_mocks", lambda: False)
    assert _answered(None, empty=[]).value == []

"""The program's unit tests: Pulumi's mocks (`pulumi.runtime.set_mocks`, as Pulumi's guide to unit testing shows), with
inferstack's `Mocks`, which answer as AWS would: the inference tier is checked against this program's own VPC."""

import ipaddress
import runpy
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pulumi
import pytest

from inferstack.testing import Mocks

PROGRAM = Path(__file__).resolve().parents[1] / "__main__.py"
CONFIG = {"aws:region": "us-east-1", "existing-repo:planFile": "plan.json"}
VPC_CIDR = "10.20.0.0/16"


class RecordedMocks(Mocks):
    """inferstack's mocks, keeping every resource the program registers: its arguments and the id it got."""

    def __init__(self) -> None:
        super().__init__()
        self.resources: dict[str, pulumi.runtime.MockResourceArgs] = {}
        self.ids: dict[str, str | None] = {}
        self.program: dict[str, Any] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        resource_id, outputs = super().new_resource(args)
        self.resources[args.name], self.ids[args.name] = args, resource_id
        return resource_id, outputs


@pytest.fixture(scope="module")
def mocks() -> RecordedMocks:
    """The program, run once under the mocks: `pulumi.runtime.test` returns once every resource is registered."""
    recorded = RecordedMocks()
    pulumi.runtime.set_mocks(recorded, project="existing-repo", stack="dev", preview=False)
    pulumi.runtime.set_all_config(CONFIG)

    @pulumi.runtime.test
    def deploy() -> None:
        recorded.program = runpy.run_path(str(PROGRAM))  # the program's variables: its resources

    deploy()
    return recorded


def _of_type(mocks: RecordedMocks, resource_type: str) -> dict[str, dict[str, Any]]:
    return {name: args.inputs for name, args in mocks.resources.items() if args.typ == resource_type}


def test_the_inference_api_answers_the_vpc_range_only(mocks: RecordedMocks) -> None:
    ingress = _of_type(mocks, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert {rule["cidrIpv4"] for name, rule in ingress.items() if name.startswith("inference")} == {VPC_CIDR}


def test_the_inference_server_runs_in_the_private_subnets_and_creates_no_network(mocks: RecordedMocks) -> None:
    (server,) = _of_type(mocks, "aws:ec2/instance:Instance").values()
    assert server["subnetId"] in {mocks.ids["private-a"], mocks.ids["private-b"]}
    assert _of_type(mocks, "aws:ec2/securityGroup:SecurityGroup")["inference-firewall-sg"]["vpcId"] == mocks.ids["vpc"]
    networks = {**_of_type(mocks, "aws:ec2/vpc:Vpc"), **_of_type(mocks, "aws:ec2/subnet:Subnet")}
    assert sorted(networks) == ["private-a", "private-b", "public-a", "vpc"]  # the program's own, nothing more


def test_the_application_reaches_the_inference_api_and_nothing_else(mocks: RecordedMocks) -> None:
    egress = _of_type(mocks, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")["app-to-inference"]
    assert egress["referencedSecurityGroupId"] == mocks.ids["inference-firewall-sg"]
    assert (egress["fromPort"], egress["toPort"]) == (8000, 8000)


@pulumi.runtime.test
def test_the_endpoint_is_a_private_address_in_the_vpc(mocks: RecordedMocks) -> pulumi.Output[None]:
    def check(url: str) -> None:
        assert ipaddress.ip_address(urlparse(url).hostname or "") in ipaddress.ip_network(VPC_CIDR)

    return mocks.program["inference"].endpoint_url.apply(check)

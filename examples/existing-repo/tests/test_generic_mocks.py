"""The same program under the generic mocks of Pulumi's guide to unit testing (each resource gets `<name>_id` and its
inputs back; every lookup answers nothing): the InferenceServer still registers every resource, with what the program
and the plan give it. What only AWS knows, such as the VPC's range behind the API's firewall rule, stays unknown:
`tests/test_infra.py` checks it with inferstack's mocks."""

import runpy
from pathlib import Path
from typing import Any

import pulumi
import pytest

PROGRAM = Path(__file__).resolve().parents[1] / "__main__.py"
CONFIG = {"aws:region": "us-east-1", "existing-repo:planFile": "plan.json"}


class GenericMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: dict[str, pulumi.runtime.MockResourceArgs] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[Any, Any]]:
        self.resources[args.name] = args
        return args.name + "_id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[Any, Any]:
        return {}


@pytest.fixture(scope="module")
def mocks() -> GenericMocks:
    generic = GenericMocks()
    pulumi.runtime.set_mocks(generic, project="existing-repo", stack="dev", preview=False)
    pulumi.runtime.set_all_config(CONFIG)

    @pulumi.runtime.test
    def deploy() -> None:
        runpy.run_path(str(PROGRAM))

    deploy()
    return generic


def test_the_inference_server_joins_the_programs_vpc_and_private_subnets(mocks: GenericMocks) -> None:
    (server,) = [args.inputs for args in mocks.resources.values() if args.typ == "aws:ec2/instance:Instance"]
    assert server["subnetId"] in {"private-a_id", "private-b_id"}
    assert server["instanceType"] == "g6.xlarge"  # plan.json's
    assert mocks.resources["inference-firewall-sg"].inputs["vpcId"] == "vpc_id"
    assert mocks.resources["app-to-inference"].inputs["referencedSecurityGroupId"] == "inference-firewall-sg_id"


def test_what_only_aws_knows_stays_unknown(mocks: GenericMocks) -> None:
    # The API's rule admits the VPC's range, which the component looks up: these mocks answer nothing.
    rule = mocks.resources["inference-firewall-api-network"].inputs
    assert rule["fromPort"] == 8000 and rule.get("cidrIpv4") is None

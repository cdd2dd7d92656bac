"""inferstack.testing.Mocks in a user's own unit tests (`pulumi.runtime.set_mocks`): realistic answers for what the
components create and look up, a lookup of the user's own resources answered from them, and the user's own mocks for
everything else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_alicloud as alicloud
import pulumi_aws as aws
import pulumi_gcp as gcp
import pulumi_huaweicloud as huaweicloud
import pytest

from inferstack.components import InferenceServer
from inferstack.testing import Mocks
from tests.sample_plans import sample_plan

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


class Recorded(Mocks):
    """inferstack's mocks, keeping each resource's type, inputs and answered outputs by name."""

    def __init__(self, fallback: pulumi.runtime.Mocks | None = None) -> None:
        super().__init__(fallback)
        self.resources: dict[str, tuple[str, dict[str, Any], str | None, dict[str, Any]]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        resource_id, outputs = super().new_resource(args)
        self.resources[args.name] = (args.typ, dict(args.inputs), resource_id, dict(outputs))
        return resource_id, outputs


class UserMocks(pulumi.runtime.Mocks):
    """A user's own mocks: what they answer, and what they were asked."""

    def __init__(self) -> None:
        self.resources: list[str] = []
        self.lookups: list[str] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[Any, Any]]:
        self.resources.append(args.typ)
        return f"user-{args.name}", {**args.inputs, "answeredBy": "user"}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]]]:
        self.lookups.append(args.token)
        return {"answeredBy": "user", "cidrBlock": "172.16.0.0/16"}, []


def _test(mocks: pulumi.runtime.Mocks, program: Callable[[], Any]) -> Any:
    """Run `program` as a user's test does; return what its Output resolved to."""
    pulumi.runtime.set_mocks(mocks, project="shop", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"aws:region": "us-east-1"})
    resolved: list[Any] = []
    try:
        pulumi.runtime.test(lambda: pulumi.Output.from_input(program()).apply(resolved.append))()
    finally:
        pulumi.runtime.set_all_config({})
    return resolved[0] if resolved else None


def _own_network() -> tuple[aws.ec2.Vpc, aws.ec2.Subnet]:
    vpc = aws.ec2.Vpc("shop", cidr_block="10.20.0.0/16")
    return vpc, aws.ec2.Subnet("shop-private", vpc_id=vpc.id, cidr_block="10.20.10.0/24",
                               availability_zone="us-east-1a")


def _server(network_id: pulumi.Input[str], subnet_id: pulumi.Input[str]) -> InferenceServer:
    return InferenceServer("inference", {"plan": sample_plan("aws", "gpu-llm", "internal"), "network_id": network_id,
                                         "subnet_ids": [subnet_id], "static_assets": False})


def test_a_vpc_the_program_creates_is_looked_up_with_its_own_range() -> None:
    mocks = Recorded()

    def program() -> Any:
        vpc, subnet = _own_network()
        return _server(vpc.id, subnet.id).private_ips

    private_ips = _test(mocks, program)
    rule_type, rule, _, _ = mocks.resources["inference-firewall-api-network"]
    assert rule_type == INGRESS and rule["cidrIpv4"] == "10.20.0.0/16"
    assert private_ips and all(ip.startswith("10.20.10.") for ip in private_ips)  # in the program's subnet


def test_a_vpc_brought_by_id_from_elsewhere_gets_the_placeholder_range() -> None:
    mocks = Recorded()
    _test(mocks, lambda: _server("vpc-0a1b2c3d4e5f67890", "subnet-0a1b2c3d4e5f67890").firewall_ids)
    assert mocks.resources["inference-firewall-api-network"][1]["cidrIpv4"] == "10.0.0.0/16"


def test_the_components_lookups_get_realistic_answers() -> None:
    mocks = Recorded()
    _test(mocks, lambda: _server("vpc-0a1b2c3d4e5f67890", "subnet-0a1b2c3d4e5f67890").firewall_ids)
    _, server, server_id, outputs = mocks.resources["inference-server-0"]
    assert server["ami"].startswith("ami-0") and server["userDataBase64"]  # the image and region were looked up
    assert server_id and server_id.startswith("i-0") and outputs["privateIp"]
    bucket_type, bucket, _, _ = mocks.resources["inference-store-models"]
    assert bucket_type == "aws:s3/bucket:Bucket" and bucket["bucket"].startswith("shop-dev-inference-store-models-")


def test_the_users_own_mocks_answer_what_inferstack_does_not_know() -> None:
    user = UserMocks()
    mocks = Recorded(fallback=user)

    def program() -> Any:
        vpc, subnet = _own_network()
        thing = pulumi.CustomResource("acme:index:Thing", "thing", {"size": 3})
        found = pulumi.runtime.invoke_output("acme:index:getThing", {})
        # A lookup the components make, asked differently than they ask it (no id): the user's to answer.
        default_vpc = aws.ec2.get_vpc_output(default=True)
        return pulumi.Output.all(_server(vpc.id, subnet.id).firewall_ids, thing.urn, found, default_vpc.cidr_block)

    *_, found, default_range = _test(mocks, program)
    assert "acme:index:Thing" in user.resources and mocks.resources["thing"][3]["answeredBy"] == "user"
    # Types inferstack computes outputs for are its own to answer (those it has none for are the user's: their
    # inputs back serve the components as well).
    answered_by_inferstack = {"aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/instance:Instance",
                              "aws:s3/bucket:Bucket", "aws:ec2/securityGroup:SecurityGroup", "aws:iam/role:Role"}
    assert not answered_by_inferstack & set(user.resources)
    assert user.lookups == ["acme:index:getThing", "aws:ec2/getVpc:getVpc"]
    assert found["answeredBy"] == "user" and default_range == "172.16.0.0/16"
    assert mocks.resources["inference-firewall-api-network"][1]["cidrIpv4"] == "10.20.0.0/16"  # still inferstack's


def test_without_own_mocks_the_rest_gets_pulumis_generic_answers() -> None:
    mocks = Recorded()
    found = _test(mocks, lambda: pulumi.Output.all(
        pulumi.CustomResource("acme:index:Thing", "thing", {"size": 3}).id,
        pulumi.runtime.invoke_output("acme:index:getThing", {})))
    assert found == ["thing_id", {}] and mocks.resources["thing"][3] == {"size": 3}


def _own_network_on(cloud: str) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
    """A network with the range 10.30.0.0/16 (Google Cloud: a subnetwork 10.30.0.0/20) and a subnet in it, as a
    user's program creates them: (the network's id, the subnet's id)."""
    if cloud == "gcp":
        network = gcp.compute.Network("shop", auto_create_subnetworks=False)
        subnetwork = gcp.compute.Subnetwork("shop-private", network=network.id, ip_cidr_range="10.30.0.0/20",
                                            region="us-central1")
        return subnetwork.network, subnetwork.id  # the network once its subnetwork exists, as a lookup needs it
    if cloud == "alibaba":
        vpc = alicloud.vpc.Network("shop", cidr_block="10.30.0.0/16")
        return vpc.id, alicloud.vpc.Switch("shop-private", vpc_id=vpc.id, cidr_block="10.30.1.0/24",
                                           zone_id="ap-southeast-1b").id
    vpc_hw = huaweicloud.vpc.Vpc("shop", name="shop", cidr="10.30.0.0/16")
    return vpc_hw.id, huaweicloud.vpc.Subnet("shop-private", name="shop-private", vpc_id=vpc_hw.id,
                                             cidr="10.30.1.0/24", gateway_ip="10.30.1.1").id


@pytest.mark.parametrize(("cloud", "allowed_range"), [
    ("gcp", ("sourceRanges", ["10.30.0.0/20"])), ("alibaba", ("cidrIp", "10.30.0.0/16")),
    ("huawei", ("remoteIpPrefix", "10.30.0.0/16"))])
def test_every_clouds_network_the_program_creates_is_looked_up_as_created(
        cloud: str, allowed_range: tuple[str, Any]) -> None:
    mocks = Recorded()
    pulumi.runtime.set_mocks(mocks, project="shop", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"gcp:region": "us-central1", "gcp:project": "shop-dev",
                                   "alicloud:region": "ap-southeast-1", "huaweicloud:region": "ap-southeast-3"})

    def program() -> Any:
        network_id, subnet_id = _own_network_on(cloud)
        return InferenceServer("inference", {"plan": sample_plan(cloud, "gpu-llm", "internal"),  # type: ignore[arg-type]
                                             "network_id": network_id, "subnet_ids": [subnet_id],
                                             "static_assets": False}).firewall_ids

    try:
        pulumi.runtime.test(program)()
    finally:
        pulumi.runtime.set_all_config({})
    key, expected = allowed_range
    assert mocks.resources["inference-firewall-api-network"][1][key] == expected

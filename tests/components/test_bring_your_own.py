"""Bring your own: every piece the caller gives is used as given, and nothing is created for (or on) it."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from inferstack.components import InferenceServer
from inferstack.errors import InputError
from inferstack.preview import Recording
from tests.sample_plans import sample_plan

NETWORK_TYPES = {"Vpc", "Subnet", "InternetGateway", "RouteTable", "RouteTableAssociation", "VpcEndpoint"}
FIREWALL_TYPES = {"SecurityGroup", "SecurityGroupIngressRule", "SecurityGroupEgressRule"}
IDENTITY_TYPES = {"Role", "RolePolicy", "InstanceProfile"}


def _deploy(run: Any, stage: str = "production", **brought: Any) -> Recording:
    """Production is a fleet (an Auto Scaling group behind a load balancer), validation one server."""
    plan = sample_plan("aws", "gpu-llm", stage)  # type: ignore[arg-type]
    endpoint = {"api_domain": "api.example.com"} if plan.fleet else {}
    return run(lambda: pulumi.Output.all(
        urls=(server := InferenceServer("chat", {"plan": plan, **endpoint, **brought})).endpoint_urls,
        bucket=server.model_bucket_name, policy=server.static_assets_policy, identity=server.identity_id))


GROUP = "aws:autoscaling/group:Group"
LOAD_BALANCER = "aws:lb/loadBalancer:LoadBalancer"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
FLEET_TYPES = {"LaunchTemplate", "Group", "TargetGroup", "LoadBalancer", "Listener", "Certificate",
               "CertificateValidation", "Policy", "MetricAlarm", "Dashboard"}
# The load balancer's access logs go to a bucket of the fleet's own, brought model bucket or not.
LOAD_BALANCER_LOG_TYPES = {"Bucket", "BucketOwnershipControls", "BucketPublicAccessBlock",
                           "BucketServerSideEncryptionConfiguration", "BucketVersioning",
                           "BucketLifecycleConfiguration", "BucketPolicy"}


def _types(recording: Recording) -> set[str]:
    return {r.type.split(":")[-1] for r in recording.resources if r.custom}


BUNDLE = "aws:s3/bucketObjectv2:BucketObjectv2"


def _nothing_targets(recording: Recording, brought_id: str) -> bool:
    """No registered resource is, or configures, the brought resource (the boot bundle is an object stored in a
    brought model bucket, under its own prefix: it changes no setting of the bucket)."""
    return all(r.id != brought_id and brought_id not in (r.inputs.get("bucket"), r.inputs.get("vpcId"),
                                                         r.inputs.get("role"))
               for r in recording.resources if r.custom and r.type not in ("aws:ec2/instance:Instance", BUNDLE))


def test_existing_network_and_subnets_are_used_and_no_network_is_created(run: Any) -> None:
    recording = _deploy(run, network_id="vpc-0b1e55ed", subnet_ids=["subnet-0000000a", "subnet-0000000b"])
    assert not _types(recording) & NETWORK_TYPES
    assert not [r for r in recording.resources if r.type == "inferstack:index:Network"]
    (group,) = recording.of_type(GROUP)
    assert group.inputs["vpcZoneIdentifiers"] == ["subnet-0000000a", "subnet-0000000b"]
    (balancer,) = recording.of_type(LOAD_BALANCER)  # the API stays in the VPC: an internal load balancer there
    assert balancer.inputs["subnets"] == ["subnet-0000000a", "subnet-0000000b"] and balancer.inputs["internal"] is True
    assert recording.named("chat-firewall-sg").inputs["vpcId"] == "vpc-0b1e55ed"
    assert recording.named("chat-targets").inputs["vpcId"] == "vpc-0b1e55ed"
    # The metrics/network-only rules use the brought VPC's range, looked up (not created).
    assert ("aws:ec2/getVpc:getVpc", {"id": "vpc-0b1e55ed"}) in recording.invokes


def test_single_servers_go_to_the_existing_subnets_in_turn(run: Any) -> None:
    recording = _deploy(run, stage="validation", network_id="vpc-0b1e55ed",
                        subnet_ids=["subnet-0000000a", "subnet-0000000b"])
    assert not _types(recording) & NETWORK_TYPES
    assert [i.inputs["subnetId"] for i in recording.of_type("aws:ec2/instance:Instance")] == ["subnet-0000000a"]


def test_an_internet_facing_fleet_in_an_existing_network_puts_its_load_balancer_in_the_given_subnets(
        run: Any) -> None:
    recording = _deploy(run, network_id="vpc-0b1e55ed", subnet_ids=["subnet-000000a1", "subnet-000000a2"],
                        load_balancer_subnet_ids=["subnet-000000b1", "subnet-000000b2"],
                        allowed_cidrs=["198.51.100.0/24"], api_key=pulumi.Output.secret("k"))
    (balancer,) = recording.of_type(LOAD_BALANCER)
    assert balancer.inputs["subnets"] == ["subnet-000000b1", "subnet-000000b2"]
    assert balancer.inputs["internal"] is False
    (group,) = recording.of_type(GROUP)
    assert group.inputs["vpcZoneIdentifiers"] == ["subnet-000000a1", "subnet-000000a2"]


def test_an_internet_facing_fleet_in_an_existing_network_needs_subnets_for_its_load_balancer(run: Any) -> None:
    with pytest.raises(InputError, match=r"chat.load_balancer_subnet_ids: is required with a brought network"):
        _deploy(run, network_id="vpc-0b1e55ed", subnet_ids=["subnet-0000000a", "subnet-0000000b"],
                allowed_cidrs=["0.0.0.0/0"], api_key=pulumi.Output.secret("k"))


def test_a_load_balancer_in_one_existing_subnet_is_refused(run: Any) -> None:
    with pytest.raises(InputError, match=r"load_balancer_subnet_ids: an Application Load Balancer needs subnets in "
                                         r"at least 2 Availability Zones \(got 1\)"):
        _deploy(run, network_id="vpc-0b1e55ed", subnet_ids=["subnet-0000000a", "subnet-0000000b"],
                load_balancer_subnet_ids=["subnet-000000b1"], allowed_cidrs=["198.51.100.0/24"],
                api_key=pulumi.Output.secret("k"))


def test_existing_security_groups_replace_the_firewall(run: Any) -> None:
    recording = _deploy(run, stage="validation", security_group_ids=["sg-0000e001", "sg-0000e002"])
    assert not _types(recording) & FIREWALL_TYPES
    for instance in recording.of_type("aws:ec2/instance:Instance"):
        assert instance.inputs["vpcSecurityGroupIds"] == ["sg-0000e001", "sg-0000e002"]
    assert recording.value["urls"]


def test_a_fleet_with_existing_security_groups_gives_only_its_load_balancer_a_group_of_its_own(
        run: Any, caplog: pytest.LogCaptureFixture) -> None:
    recording = _deploy(run, security_group_ids=["sg-0000e001", "sg-0000e002"])
    assert not [r for r in recording.resources if r.type == "inferstack:index:Firewall"]
    (template,) = recording.of_type(TEMPLATE)
    assert template.inputs["networkInterfaces"][0]["securityGroups"] == ["sg-0000e001", "sg-0000e002"]
    (group,) = recording.of_type("aws:ec2/securityGroup:SecurityGroup")
    assert group.name == "chat-lb-sg" and recording.of_type(LOAD_BALANCER)[0].inputs["securityGroups"] == [group.id]
    egress = [r.inputs for r in recording.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")]
    assert sorted(e["referencedSecurityGroupId"] for e in egress) == ["sg-0000e001", "sg-0000e002"]
    assert all(e["fromPort"] == e["toPort"] == 8000 for e in egress)
    ingress = [r.inputs for r in recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")]
    vpc = recording.named("chat-network-vpc").outputs["cidrBlock"]
    assert sorted((i["fromPort"], i["cidrIpv4"]) for i in ingress) == [(80, vpc), (443, vpc)]
    assert f"the brought security groups must admit port 8000 from the load balancer's security group {group.id}" \
        in caplog.text


def test_existing_instance_profile_replaces_the_identity(run: Any) -> None:
    recording = _deploy(run, stage="validation", instance_identity="existing-profile")
    assert not _types(recording) & IDENTITY_TYPES
    assert {i.inputs["iamInstanceProfile"] for i in recording.of_type("aws:ec2/instance:Instance")} == {
        "existing-profile"}
    assert recording.value["identity"] is None


def test_a_fleets_template_takes_the_existing_instance_profile(run: Any) -> None:
    recording = _deploy(run, instance_identity="existing-profile")
    assert not _types(recording) & IDENTITY_TYPES
    (template,) = recording.of_type(TEMPLATE)
    assert template.inputs["iamInstanceProfile"] == {"name": "existing-profile"}


def test_existing_model_bucket_is_read_and_never_modified(run: Any) -> None:
    recording = _deploy(run, model_bucket="team-models")
    assert not [r for r in recording.resources if r.type == "inferstack:index:ModelStore"]
    assert _nothing_targets(recording, "team-models")
    assert recording.value["bucket"] == "team-models"
    read = json.loads(recording.named("chat-identity-model-read").inputs["policy"])["Statement"]
    assert {s["Resource"] for s in read} == {
        "arn:aws:s3:::team-models", "arn:aws:s3:::team-models/models/llama-3.1-8b/bf16/*",
        "arn:aws:s3:::team-models/inferstack/bootstrap/*"}
    (bundle,) = recording.of_type(BUNDLE)
    assert bundle.inputs["bucket"] == "team-models" and bundle.inputs["key"].startswith("inferstack/bootstrap/")


def test_existing_assets_bucket_is_served_without_touching_it(run: Any) -> None:
    recording = _deploy(run, assets_bucket="team-assets")
    assert _nothing_targets(recording, "team-assets")
    origin = recording.named("chat-assets-cdn").inputs["origins"][0]
    assert origin["domainName"] == "team-assets.s3.us-east-1.amazonaws.com" and origin["originAccessControlId"]
    statement = json.loads(recording.value["policy"])["Statement"][0]
    assert statement["Resource"] == "arn:aws:s3:::team-assets/*"
    assert statement["Condition"]["StringEquals"]["AWS:SourceArn"] == recording.named("chat-assets-cdn").outputs["arn"]


@pytest.mark.parametrize(("stage", "servers"), [
    ("validation", {"Instance"}),
    # A fleet: the group, its load balancer and the load balancer's own security group.
    ("production", FLEET_TYPES | LOAD_BALANCER_LOG_TYPES | {"SecurityGroup", "SecurityGroupIngressRule",
                                                            "SecurityGroupEgressRule"}),
])
def test_everything_brought_leaves_only_servers_cdn_secrets_and_logs_to_create(run: Any, stage: str,
                                                                          servers: set[str]) -> None:
    recording = _deploy(run, stage=stage, network_id="vpc-0b1e55ed", subnet_ids=["subnet-0000000a", "subnet-0000000b"],
                        security_group_ids=["sg-0000e000"], instance_identity="existing-profile",
                        model_bucket="team-models", assets_bucket="team-assets",
                        api_key=pulumi.Output.secret("k"))
    # The servers' log group is the deployment's own (the agent's destination; a brought identity is told to grant it).
    assert _types(recording) == {*servers, "OriginAccessControl", "Distribution", "Parameter", "BucketObjectv2",
                                 "LogGroup"}


def test_without_static_assets_no_cdn_is_created(run: Any) -> None:
    recording = _deploy(run, stage="validation", static_assets=False)
    assert not _types(recording) & {"Distribution", "OriginAccessControl"}
    assert sorted(b.name for b in recording.of_type("aws:s3/bucket:Bucket")) == [
        "chat-store-data", "chat-store-logs", "chat-store-models"]

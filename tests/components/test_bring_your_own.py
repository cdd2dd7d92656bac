"""Bring your own: every piece the caller gives is used as given, and nothing is created for (or on) it."""

from __future__ import annotations

import json
from typing import Any

import pulumi

from inferstack.components import InferenceServer
from inferstack.preview import Recording
from tests.sample_plans import sample_plan

NETWORK_TYPES = {"Vpc", "Subnet", "InternetGateway", "RouteTable", "RouteTableAssociation", "VpcEndpoint"}
FIREWALL_TYPES = {"SecurityGroup", "SecurityGroupIngressRule", "SecurityGroupEgressRule"}
IDENTITY_TYPES = {"Role", "RolePolicy", "InstanceProfile"}


def _deploy(run: Any, stage: str = "production", **brought: Any) -> Recording:
    plan = sample_plan("aws", "gpu-llm", stage)
    return run(lambda: pulumi.Output.all(
        urls=(server := InferenceServer("chat", {"plan": plan, **brought})).endpoint_urls,
        bucket=server.model_bucket_name, policy=server.static_assets_policy, identity=server.identity_id))


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
    recording = _deploy(run, network_id="vpc-0byo", subnet_ids=["subnet-0a", "subnet-0b"])
    assert not _types(recording) & NETWORK_TYPES
    assert not [r for r in recording.resources if r.type == "inferstack:index:Network"]
    instances = recording.of_type("aws:ec2/instance:Instance")
    assert sorted(i.inputs["subnetId"] for i in instances) == ["subnet-0a", "subnet-0b"]
    assert recording.named("chat-firewall-sg").inputs["vpcId"] == "vpc-0byo"
    # The metrics/network-only rules use the brought VPC's range, looked up (not created).
    assert ("aws:ec2/getVpc:getVpc", {"id": "vpc-0byo"}) in recording.invokes


def test_existing_security_groups_replace_the_firewall(run: Any) -> None:
    recording = _deploy(run, security_group_ids=["sg-0byo1", "sg-0byo2"])
    assert not _types(recording) & FIREWALL_TYPES
    for instance in recording.of_type("aws:ec2/instance:Instance"):
        assert instance.inputs["vpcSecurityGroupIds"] == ["sg-0byo1", "sg-0byo2"]
    assert recording.value["urls"]


def test_existing_instance_profile_replaces_the_identity(run: Any) -> None:
    recording = _deploy(run, instance_identity="existing-profile")
    assert not _types(recording) & IDENTITY_TYPES
    assert {i.inputs["iamInstanceProfile"] for i in recording.of_type("aws:ec2/instance:Instance")} == {
        "existing-profile"}
    assert recording.value["identity"] is None


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


def test_everything_brought_leaves_only_servers_cdn_and_secrets_to_create(run: Any) -> None:
    recording = _deploy(run, network_id="vpc-0byo", subnet_ids=["subnet-0a", "subnet-0b"],
                        security_group_ids=["sg-0byo"], instance_identity="existing-profile",
                        model_bucket="team-models", assets_bucket="team-assets",
                        api_key=pulumi.Output.secret("k"))
    assert _types(recording) == {"Instance", "OriginAccessControl", "Distribution", "Parameter", "BucketObjectv2"}


def test_without_static_assets_no_cdn_is_created(run: Any) -> None:
    recording = _deploy(run, stage="validation", static_assets=False)
    assert not _types(recording) & {"Distribution", "OriginAccessControl"}
    assert sorted(b.name for b in recording.of_type("aws:s3/bucket:Bucket")) == [
        "chat-store-data", "chat-store-logs", "chat-store-models"]

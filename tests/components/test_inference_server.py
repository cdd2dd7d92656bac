"""InferenceServer on AWS: what it registers for a plan, what it outputs, and how stages differ."""

from __future__ import annotations

import base64
import gzip
import importlib
import inspect
from collections import Counter
from typing import Any

import pulumi
import pytest

from inferstack import bootstrap
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components import InferenceServer
from inferstack.components.aws.preview import PREVIEW_INVOKES
from inferstack.components.aws.servers import IMAGE_PARAMETERS, USER_DATA_LIMIT_BYTES
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.preview import Recording, resource_urn
from tests.sample_plans import sample_plan

INSTANCE = "aws:ec2/instance:Instance"
SSM_LOOKUP = "aws:ssm/getParameter:getParameter"
OFFERINGS_LOOKUP = "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"
ZONES_LOOKUP = "aws:index/getAvailabilityZones:getAvailabilityZones"


def _server(run: Any, plan: Any, name: str = "chat", opts: pulumi.ResourceOptions | None = None,
            **args: Any) -> Recording:
    endpoint = {"api_domain": "api.example.com"} if plan.fleet else {}  # a fleet serves one HTTPS domain
    return run(lambda: _outputs(InferenceServer(name, {"plan": plan, **endpoint, **args}, opts=opts)))


def _single_servers(plan: DeploymentPlan) -> DeploymentPlan:
    """The plan's replicas as servers of their own (as a plan without a fleet deploys them), for what the single
    servers do; tests/components/test_fleet_aws.py covers the fleet."""
    return plan.model_copy(update={"fleet": None})


def _outputs(server: InferenceServer) -> pulumi.Output[dict[str, Any]]:
    return pulumi.Output.all(
        endpoint_url=server.endpoint_url, endpoint_urls=server.endpoint_urls, instance_ids=server.instance_ids,
        public_ips=server.public_ips, private_ips=server.private_ips, model_bucket_name=server.model_bucket_name,
        static_assets_url=server.static_assets_url, firewall_ids=server.firewall_ids,
        identity_id=server.identity_id, api_key_ref=server.api_key_ref, plan_summary=server.plan_summary)


#### Outputs ####


def test_outputs_name_the_endpoint_instances_buckets_firewall_identity_and_plan(run: Any) -> None:
    plan = _single_servers(sample_plan("aws", "gpu-llm", "production"))
    recording = _server(run, plan, allowed_cidrs=["198.51.100.0/24"], api_key=pulumi.Output.secret("k-1"))
    out = recording.value
    instances = recording.of_type(INSTANCE)
    assert out["instance_ids"] == [i.id for i in sorted(instances, key=lambda i: i.name)]
    assert out["public_ips"] == [i.outputs["publicIp"] for i in sorted(instances, key=lambda i: i.name)]
    assert out["endpoint_urls"] == [f"http://{ip}:8000" for ip in out["public_ips"]]
    assert out["endpoint_url"] == out["endpoint_urls"][0]
    assert out["model_bucket_name"] == recording.named("chat-store-models").id
    assert out["static_assets_url"] == "https://" + recording.named("chat-assets-cdn").outputs["domainName"]
    assert out["firewall_ids"] == [recording.named("chat-firewall-sg").id]
    assert out["identity_id"] == recording.named("chat-identity-role").outputs["arn"]
    assert out["api_key_ref"] == recording.named("chat-secrets-api-key").inputs["name"]
    assert out["plan_summary"]["instance_type"] == "g6.xlarge"
    assert out["plan_summary"]["gpus_per_instance"] == 1
    assert out["plan_summary"]["monthly_cost"] == str(plan.price.monthly)


#### Compute ####


@pytest.mark.parametrize(("variant", "device"), [("gpu-llm", "gpu"), ("cpu-llm", "cpu")])
def test_image_is_looked_up_at_deploy_time_from_the_public_ssm_parameter(run: Any, variant: str, device: str) -> None:
    recording = _server(run, sample_plan("aws", variant, "validation"))
    lookups = [args["name"] for token, args in recording.invokes if token == SSM_LOOKUP]
    assert lookups == [IMAGE_PARAMETERS[(device, "x86_64")]]
    instance = recording.of_type(INSTANCE)[0]
    assert instance.inputs["ami"].startswith("ami-")
    assert "ami" in instance.ignore_changes  # a newer image never replaces a running server by surprise


def test_graviton_machine_types_boot_the_arm64_image(run: Any) -> None:
    plan = sample_plan("aws", "cpu-llm", "validation").model_copy(update={"instance_type": "m7g.2xlarge"})
    recording = _server(run, plan)
    assert [args["name"] for token, args in recording.invokes if token == SSM_LOOKUP] == [
        IMAGE_PARAMETERS[("cpu", "arm64")]]


def test_root_disk_is_encrypted_gp3_of_the_planned_size(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "validation")
    root = _server(run, plan).of_type(INSTANCE)[0].inputs["rootBlockDevice"]
    assert root["volumeType"] == "gp3" and root["encrypted"] is True
    assert root["volumeSize"] == plan.disk_gib  # the preview's image snapshot (8 GiB) is smaller


def test_user_data_is_the_rendered_bootstrap_gzip_compressed_under_the_ec2_limit(run: Any) -> None:
    plan = sample_plan("aws", "cpu-llm", "internal")
    recording = _server(run, plan)
    packed = base64.b64decode(recording.of_type(INSTANCE)[0].inputs["userDataBase64"])
    assert len(packed) <= USER_DATA_LIMIT_BYTES
    logs = recording.named("chat-logs").inputs["name"]  # the servers' log group; its name is the metric namespace
    expected = bootstrap.render_bootstrap(plan, "aws", bootstrap.BootstrapOptions(
        model_bucket=recording.named("chat-store-models").id, region="us-east-1",
        telemetry=TelemetryTarget(logs=logs, metrics=logs)))
    assert gzip.decompress(packed).decode() == expected.user_data
    bundle = recording.named("chat-bundle")
    assert bundle.inputs["bucket"] == recording.named("chat-store-models").id
    assert (bundle.inputs["key"], bundle.inputs["content"]) == (expected.bundle_key, expected.bundle)
    assert bundle.inputs["serverSideEncryption"] == "AES256"


def test_production_protects_servers_from_termination_and_keeps_bucket_contents(run: Any) -> None:
    recording = _server(run, _single_servers(sample_plan("aws", "gpu-llm", "production")))
    assert all(i.inputs["disableApiTermination"] is True for i in recording.of_type(INSTANCE))
    assert all(b.inputs["forceDestroy"] is False for b in recording.of_type("aws:s3/bucket:Bucket"))


def test_a_production_fleet_protects_its_load_balancer_and_keeps_bucket_contents(run: Any) -> None:
    recording = _server(run, sample_plan("aws", "gpu-llm", "production"))
    assert not recording.of_type(INSTANCE)
    (balancer,) = recording.of_type("aws:lb/loadBalancer:LoadBalancer")
    assert balancer.inputs["enableDeletionProtection"] is True
    assert all(b.inputs["forceDestroy"] is False for b in recording.of_type("aws:s3/bucket:Bucket"))


@pytest.mark.parametrize("stage", ["validation", "internal"])
def test_non_production_stages_are_easy_to_tear_down(run: Any, stage: str) -> None:
    recording = _server(run, sample_plan("aws", "cpu-llm", stage))
    assert all(i.inputs["disableApiTermination"] is False for i in recording.of_type(INSTANCE))
    assert all(b.inputs["forceDestroy"] is True for b in recording.of_type("aws:s3/bucket:Bucket"))


def test_production_replicas_run_in_distinct_zones(run: Any) -> None:
    plan = _single_servers(sample_plan("aws", "gpu-llm", "production"))
    recording = _server(run, plan)
    subnets = {s.id: s.inputs["availabilityZone"] for s in recording.of_type("aws:ec2/subnet:Subnet")}
    zones = [subnets[i.inputs["subnetId"]] for i in recording.of_type(INSTANCE)]
    assert len(zones) == plan.replicas == 2 and len(set(zones)) == plan.zones == 2


def test_local_and_wavelength_zones_are_never_picked_though_their_names_sort_first(
        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # An account opted into the Boston Local Zone and a Wavelength Zone: the offerings list them beside the
    # Availability Zones proper, and "us-east-1-bos-1a" sorts before "us-east-1a".
    offered = ["us-east-1c", "us-east-1-wl1-bos-wlz-1", "us-east-1-bos-1a", "us-east-1b", "us-east-1a"]
    monkeypatch.setitem(PREVIEW_INVOKES, OFFERINGS_LOOKUP, lambda a, c: {"locations": offered})
    recording = _server(run, _single_servers(sample_plan("aws", "gpu-llm", "production")))

    zones = sorted(s.inputs["availabilityZone"] for s in recording.of_type("aws:ec2/subnet:Subnet"))
    assert zones == ["us-east-1a", "us-east-1b"]
    (lookup,) = [args for token, args in recording.invokes if token == ZONES_LOOKUP]
    assert lookup == {"state": "available", "filters": [{"name": "opt-in-status", "values": ["opt-in-not-required"]}]}


def test_only_local_zones_offering_the_machine_type_is_too_few_zones(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PREVIEW_INVOKES, OFFERINGS_LOOKUP,
                        lambda a, c: {"locations": ["us-east-1-bos-1a", "us-east-1-mia-1a", "us-east-1a"]})
    with pytest.raises(InputError, match=r"g6.xlarge is offered in 1 zone\(s\) of this region \(us-east-1a\)"):
        _server(run, sample_plan("aws", "gpu-llm", "production"))


def test_spot_plans_request_one_time_spot_capacity(run: Any) -> None:
    plan = sample_plan("aws", "cpu-encoder", "validation").model_copy(update={"spot": True})
    market = _server(run, plan).of_type(INSTANCE)[0].inputs["instanceMarketOptions"]
    assert market["marketType"] == "spot" and market["spotOptions"]["spotInstanceType"] == "one-time"


def test_ssh_is_closed_and_no_key_pair_is_set(run: Any) -> None:
    recording = _server(run, sample_plan("aws", "gpu-llm", "validation"))
    assert all("keyName" not in i.inputs for i in recording.of_type(INSTANCE))


#### Static assets ####

ACM_CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"


def test_assets_are_served_on_the_cloudfront_hostname_with_its_certificate_by_default(run: Any) -> None:
    recording = _server(run, sample_plan("aws", "cpu-llm", "validation"))
    distribution = recording.named("chat-assets-cdn")
    assert distribution.inputs["viewerCertificate"] == {"cloudfrontDefaultCertificate": True}
    assert "aliases" not in distribution.inputs
    assert recording.value["static_assets_url"] == f"https://{distribution.outputs['domainName']}"


def test_assets_on_your_domain_use_its_acm_certificate_over_sni_and_tls_1_2(run: Any) -> None:
    recording = _server(run, sample_plan("aws", "cpu-llm", "validation"), assets_domain="assets.example.com",
                        assets_certificate=ACM_CERTIFICATE)
    distribution = recording.named("chat-assets-cdn").inputs
    assert distribution["aliases"] == ["assets.example.com"]
    assert distribution["viewerCertificate"] == {"acmCertificateArn": ACM_CERTIFICATE, "sslSupportMethod": "sni-only",
                                                 "minimumProtocolVersion": "TLSv1.2_2021"}
    assert distribution["defaultCacheBehavior"]["viewerProtocolPolicy"] == "https-only"
    assert recording.value["static_assets_url"] == "https://assets.example.com"


@pytest.mark.parametrize(("args", "expected"), [
    ({"assets_domain": "assets.example.com"},
     "chat.assets_certificate: is required with a domain on AWS: the ARN of an ACM certificate in us-east-1"),
    ({"assets_domain": "assets.example.com", "assets_certificate": ACM_CERTIFICATE.replace("us-east-1", "eu-west-1")},
     "chat.assets_certificate: is not the ARN of an ACM certificate in us-east-1"),
    ({"assets_domain": "Assets.Example.com", "assets_certificate": ACM_CERTIFICATE},
     "chat.assets_domain: is not a lowercase DNS name (got 'Assets.Example.com')"),
])
def test_a_domain_without_a_usable_acm_certificate_is_refused_before_anything_exists(
        run: Any, args: dict[str, str], expected: str) -> None:
    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": sample_plan("aws", "cpu-llm", "validation"), **args})  # type: ignore[typeddict-item]
        return str(caught.value)

    recording = run(program)
    assert expected in recording.value and recording.resources == []


#### Component conventions ####


@pytest.mark.parametrize(("plan", "servers"), [
    (_single_servers(sample_plan("aws", "gpu-llm", "production")), {"Instance"}),
    (sample_plan("aws", "gpu-llm", "production"), {
        "LaunchTemplate", "Group", "LoadBalancer", "TargetGroup", "Listener", "Certificate", "MetricAlarm",
        "NatGateway", "Eip"}),
], ids=["servers", "fleet"])
def test_every_taggable_resource_carries_default_and_user_tags(run: Any, plan: DeploymentPlan,
                                                               servers: set[str]) -> None:
    recording = _server(run, plan, tags={"team": "ml"})
    taggable = [r for r in recording.resources if r.custom and _accepts_tags(r.type)]
    assert {r.type.split(":")[-1] for r in taggable} >= {
        "Vpc", "Subnet", "SecurityGroup", "SecurityGroupIngressRule", "Bucket", "Distribution", "Role", *servers}
    for resource in taggable:
        tags = _tag_map(resource.inputs.get("tags", {}))
        assert tags.get("team") == "ml" and tags.get("managed-by") == "inferstack", resource.name
        assert tags.get("project") == "inferstack" and tags.get("stack") == "test", resource.name
        assert tags.get("workload") == "sample-gpu-llm", resource.name


def _tag_map(tags: Any) -> dict[str, str]:
    """Tags as a mapping; an Auto Scaling group lists them as {key, value, propagateAtLaunch}."""
    return {tag["key"]: tag["value"] for tag in tags} if isinstance(tags, list) else dict(tags)


def _accepts_tags(resource_type: str) -> bool:
    """Whether the provider class behind a type token takes a `tags` argument."""
    _, module, name = resource_type.split(":")
    python_module = "pulumi_aws" if module.startswith("index") else f"pulumi_aws.{module.split('/')[0]}"
    cls = getattr(importlib.import_module(python_module), name)
    return "tags" in inspect.signature(cls._internal_init).parameters


def test_children_are_parented_to_their_component_and_named_after_it(run: Any) -> None:
    recording = _server(run, sample_plan("aws", "gpu-llm", "production"))
    by_urn = {r.urn: r for r in recording.resources}
    (top,) = [r for r in recording.resources if r.parent is None]
    assert top.type == "inferstack:index:InferenceServer"
    for resource in recording.resources:
        if resource is not top:
            parent = by_urn[resource.parent]
            assert not parent.custom and resource.name.startswith(parent.name + "-"), resource.name


def test_component_type_tokens_use_the_index_module(run: Any) -> None:
    recording = _server(run, sample_plan("aws", "gpu-llm", "production"), api_key=pulumi.Output.secret("k"))
    components = {r.type for r in recording.resources if not r.custom}
    assert components == {f"inferstack:index:{c}" for c in (
        "InferenceServer", "Network", "Firewall", "ModelStore", "StaticAssets", "ServerSecrets", "ServerIdentity")}


def test_protect_passed_in_opts_reaches_every_child(run: Any) -> None:
    recording = _server(run, sample_plan("aws", "cpu-llm", "production"), opts=pulumi.ResourceOptions(protect=True))
    assert recording.resources and all(r.protect for r in recording.resources)


def test_explicit_provider_in_opts_serves_every_cloud_resource(run: Any) -> None:
    import pulumi_aws as aws

    def program() -> Any:
        explicit = aws.Provider("explicit", region="us-east-1")
        return InferenceServer("chat", {"plan": sample_plan("aws", "cpu-llm", "validation")},
                               opts=pulumi.ResourceOptions(providers=[explicit])).endpoint_url

    recording = run(program)
    (provider,) = recording.of_type("pulumi:providers:aws")
    served = [r for r in recording.resources if r.custom and r.type.startswith("aws:")]
    assert served and all(r.provider.startswith(provider.urn + "::") for r in served)


def test_two_servers_in_one_stack_have_unique_urns(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "production")
    recording = run(lambda: [InferenceServer(name, {"plan": plan, "api_domain": f"{name}.example.com"}).endpoint_url
                             for name in ("chat", "embed")])
    urns = Counter(r.urn for r in recording.resources)
    assert len(recording.resources) > 100
    assert [urn for urn, count in urns.items() if count > 1] == []


def test_urns_ignore_the_parent_name_so_identical_child_names_would_collide() -> None:
    # The control for the test above: children named without their component's name would clash.
    group = "aws:ec2/securityGroup:SecurityGroup"
    first = resource_urn("s", "p", "urn:pulumi:s::p::inferstack:index:Firewall::a", group, "sg")
    second = resource_urn("s", "p", "urn:pulumi:s::p::inferstack:index:Firewall::b", group, "sg")
    assert first == second


def test_urns_match_the_sdk_rule_for_nested_parents(run: Any) -> None:
    parent = "urn:pulumi:test::inferstack::inferstack:index:InferenceServer$inferstack:index:Firewall::chat-firewall"
    expected = run(lambda: pulumi.resource.create_urn("chat-firewall-sg", "aws:ec2/securityGroup:SecurityGroup",
                                                 parent=parent)).value
    assert resource_urn("test", "inferstack", parent, "aws:ec2/securityGroup:SecurityGroup",
                        "chat-firewall-sg") == expected


def test_more_zones_than_offer_the_instance_type_fails_at_lookup_with_the_zones(run: Any) -> None:
    plan = sample_plan("aws", "gpu-llm", "production").model_copy(
        update={"zones": 4, "replicas": 4, "instance_count": 4})
    with pytest.raises(InputError, match=r"g6.xlarge is offered in 3 zone\(s\) of this region "
                                         r"\(us-east-1a, us-east-1b, us-east-1c\)"):
        _server(run, plan)

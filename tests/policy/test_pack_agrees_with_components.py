"""The pack and the components agree: every deployment inferstack makes (each example project, each stack file, a
public deployment on every cloud, production and one server) passes every policy, and the pack looked at what
matters in it. A production plan is a fleet where the cloud's is built, loose servers elsewhere (the interim)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from guardrails.core import PlainResource, Stack
from guardrails.image_build import IMAGE_BUILD
from guardrails.networks import DEFAULT_SERVING_PORTS
from guardrails.resource_types import (
    ALI_BUCKET,
    ALI_INSTANCE,
    ALI_LAUNCH_TEMPLATES,
    ALI_SCALING_CONFIGURATION,
    ALI_SECURITY_GROUP_RULE,
    AWS_BUCKET,
    AWS_INGRESS_RULE,
    AWS_INSTANCE,
    AWS_LAUNCH_CONFIGURATION,
    AWS_LAUNCH_TEMPLATE,
    GCP_BUCKET,
    GCP_FIREWALL,
    GCP_INSTANCE,
    GCP_INSTANCE_TEMPLATES,
    GCP_NO_METADATA_TOKENS,
    HUAWEI_NO_METADATA_TOKENS,
    HUAWEI_NO_PUBLIC_ACCESS_BLOCK,
    HW_AS_CONFIGURATION,
    HW_BUCKET,
    HW_INSTANCE,
    HW_SECURITY_GROUP_RULE,
    PROVIDER_PACKAGES,
)
from guardrails.server_identity import (
    BOOT_BUNDLE_PREFIX,
    SERVER_GRANTS,
    ServerIdentity,
    server_identities,
)
from guardrails.servers import METADATA_HOP_LIMIT

from inferstack.bootstrap.render import BUNDLE_PREFIX
from inferstack.clouds import CLOUD_FACTS
from inferstack.components import Capability, backend_for
from inferstack.components.aws import identity as aws_identity
from inferstack.components.aws import image as aws_image
from inferstack.components.aws import servers as aws_servers
from inferstack.components.gcp import identity as gcp_identity
from inferstack.components.huawei import identity as huawei_identity
from inferstack.plan import Serving, WarmPool
from inferstack.preview import RegisteredResource, preview_deployment
from tests.policy import deployments
from tests.policy.harness import Registered, Resource, check_recording, check_resource, check_stack, pack
from tests.sample_plans import sample_plan

CLOUD_OF_PACKAGE = {facts.pulumi_package: cloud for cloud, facts in CLOUD_FACTS.items()}
INSTANCE_TYPES = {"aws": AWS_INSTANCE, "gcp": GCP_INSTANCE, "alibaba": ALI_INSTANCE,
                  "huawei": HW_INSTANCE}
# What a fleet's servers are made from, per cloud (guardrails.servers.SERVER_TEMPLATE_TYPES, by cloud).
TEMPLATE_TYPES = {"aws": {AWS_LAUNCH_TEMPLATE, AWS_LAUNCH_CONFIGURATION},
                  "gcp": set(GCP_INSTANCE_TEMPLATES),
                  "alibaba": {ALI_SCALING_CONFIGURATION, *ALI_LAUNCH_TEMPLATES},
                  "huawei": {HW_AS_CONFIGURATION}}
INGRESS_TYPES = {"aws": AWS_INGRESS_RULE, "gcp": GCP_FIREWALL, "alibaba": ALI_SECURITY_GROUP_RULE,
                 "huawei": HW_SECURITY_GROUP_RULE}
BUCKET_TYPES = {"aws": AWS_BUCKET, "gcp": GCP_BUCKET, "alibaba": ALI_BUCKET,
                "huawei": HW_BUCKET}
NO_TOKENS_REASON = {"gcp": GCP_NO_METADATA_TOKENS, "huawei": HUAWEI_NO_METADATA_TOKENS}
PUBLIC_VARIANTS = ["gpu-llm", "cpu-encoder"]

DEPLOYMENTS: dict[str, Callable[[], Registered]] = {
    **{f"example {name}": (lambda name=name: deployments.example(name)) for name in deployments.EXAMPLES},
    **{f"stack {name}": (lambda name=name: deployments.stack(name)) for name in deployments.STACKS},
    **{f"public {cloud} {variant}": (lambda cloud=cloud, variant=variant: deployments.public_deployment(cloud, variant))
       for cloud in deployments.CLOUD_SETTINGS for variant in PUBLIC_VARIANTS},
    **{f"server {cloud} gpu-llm": (lambda cloud=cloud: deployments.public_server(cloud, "gpu-llm"))
       for cloud in deployments.CLOUD_SETTINGS},
}


def cloud_of(registered: Registered) -> str:
    clouds = {CLOUD_OF_PACKAGE[r.type.split(":")[0]] for r in registered.resources()
              if r.custom and r.type.split(":")[0] in CLOUD_OF_PACKAGE}
    assert len(clouds) == 1, clouds
    return clouds.pop()


def servers_of(registered: Registered, cloud: str) -> set[str]:
    """URNs of what makes the servers: loose servers, or a fleet's templates."""
    types = {INSTANCE_TYPES[cloud], *TEMPLATE_TYPES[cloud]}
    return {r.urn for r in registered.resources() if r.type in types}


@pytest.fixture(scope="module", params=sorted(DEPLOYMENTS))
def labelled(request: pytest.FixtureRequest) -> tuple[str, Registered]:
    return request.param, DEPLOYMENTS[request.param]()


@pytest.fixture
def deployment(labelled: tuple[str, Registered]) -> Registered:
    return labelled[1]


def test_the_pack_knows_each_clouds_provider_package_as_the_registry_does() -> None:
    assert PROVIDER_PACKAGES == CLOUD_OF_PACKAGE


def test_every_deployment_passes_every_policy(labelled: tuple[str, Registered]) -> None:
    label, deployment = labelled
    report = check_recording(deployment, config=deployments.stage_config(label))
    assert [(v.policy, v.message) for v in report.violations] == []


def test_the_pack_checked_the_firewall_buckets_and_servers_of_every_deployment(deployment: Registered) -> None:
    cloud = cloud_of(deployment)
    report = check_recording(deployment)
    essentials = {INGRESS_TYPES[cloud], BUCKET_TYPES[cloud]}
    assert essentials <= {r.type for r in deployment.resources()}
    assert essentials <= report.checked["admin-ports-not-public"]
    servers = {r.type for r in deployment.resources() if r.urn in servers_of(deployment, cloud)}
    assert servers and servers <= report.checked["encryption-at-rest"]
    assert ("server-identity-least-privilege", "") not in report.not_applicable, "no server identity was found"


def test_metadata_tokens_are_not_applicable_exactly_where_the_backend_lacks_metadata_hardening(
        deployment: Registered) -> None:
    cloud = cloud_of(deployment)
    report = check_recording(deployment, policies=[pack.metadata_tokens_required])
    servers = servers_of(deployment, cloud)
    not_applicable = {urn for (policy, urn) in report.not_applicable}
    if backend_for(cloud).support(Capability.METADATA_HARDENING).available:
        assert not not_applicable
    else:
        assert servers and not_applicable == servers
        assert set(report.not_applicable.values()) == {NO_TOKENS_REASON[cloud]}


@pytest.mark.parametrize("cloud", sorted(INSTANCE_TYPES))
def test_the_pack_says_not_applicable_for_metadata_tokens_where_the_backend_says_unsupported(cloud: str) -> None:
    report = check_resource(pack.metadata_tokens_required, INSTANCE_TYPES[cloud], {})
    supported = backend_for(cloud).support(Capability.METADATA_HARDENING).available
    assert bool(report.not_applicable) != supported
    assert bool(report.violations) == supported  # where it is supported, an instance that sets nothing violates


@pytest.mark.parametrize("cloud", sorted(BUCKET_TYPES))
def test_the_pack_checks_a_public_access_block_where_the_backend_has_one(cloud: str) -> None:
    bucket = Resource(BUCKET_TYPES[cloud], "models", {"bucket": "b", "name": "b"})
    stack_report = check_stack(pack.buckets_have_public_access_block, [bucket])
    resource_report = check_resource(pack.buckets_not_public, BUCKET_TYPES[cloud], bucket.props)
    reported = stack_report.violations + resource_report.violations
    if backend_for(cloud).support(Capability.BUCKET_PUBLIC_ACCESS_BLOCK).available:
        assert reported, "a bucket without a public access block passed"
    else:
        assert not reported
        assert list(stack_report.not_applicable.values()) == [HUAWEI_NO_PUBLIC_ACCESS_BLOCK]


def test_the_default_serving_port_is_the_plans_serving_port() -> None:
    assert (Serving.model_fields["port"].default,) == DEFAULT_SERVING_PORTS


def test_the_metadata_hop_limit_is_the_one_the_aws_servers_get() -> None:
    assert METADATA_HOP_LIMIT == aws_servers.METADATA_HOP_LIMIT


def test_the_allow_list_names_the_components_own_constants() -> None:
    assert SERVER_GRANTS["aws"].anywhere == {*aws_identity.SESSION_MANAGER_ACTIONS,
                                             *aws_identity.TELEMETRY_ANYWHERE_ACTIONS,
                                             *aws_identity.LIFECYCLE_FIND_ACTIONS}
    assert SERVER_GRANTS["aws"].own_group_actions == set(aws_identity.LIFECYCLE_COMPLETE_ACTIONS)
    assert SERVER_GRANTS["aws"].log_writes == set(aws_identity.TELEMETRY_LOG_ACTIONS)
    assert SERVER_GRANTS["aws"].metric_writes == set(aws_identity.TELEMETRY_METRIC_ACTIONS)
    assert SERVER_GRANTS["gcp"].object_reads == {gcp_identity.MODEL_READER_ROLE}
    assert SERVER_GRANTS["gcp"].secret_reads == {gcp_identity.SECRET_READER_ROLE}
    assert SERVER_GRANTS["huawei"].object_reads == set(huawei_identity.MODEL_READ_ACTIONS)
    assert SERVER_GRANTS["huawei"].secret_reads == set(huawei_identity.SECRET_READ_ACTIONS)
    assert BOOT_BUNDLE_PREFIX == BUNDLE_PREFIX
    assert IMAGE_BUILD.anywhere == set(aws_image.SYSTEMS_MANAGER_AGENT_ACTIONS)
    assert IMAGE_BUILD.managed == set(aws_image.MANAGED_POLICIES)


@pytest.mark.parametrize("cloud", sorted(deployments.CLOUD_SETTINGS))
def test_the_allow_list_is_exactly_what_the_servers_identity_holds(cloud: str) -> None:
    """Not one action more than inferstack grants (the public deployment has secrets, so it holds them all)."""
    stack = Stack([_plain(r) for r in deployments.public_deployment(cloud, "gpu-llm").resources()])
    (identity,) = server_identities(stack, _no_violation)
    row = SERVER_GRANTS[cloud]
    assert identity.violations == []
    # An AWS server gets its lifecycle grant only in a group with a warm pool (the test below).
    warm_pool_only = {a.lower() for a in (*aws_identity.LIFECYCLE_FIND_ACTIONS, *row.own_group_actions)}
    assert {a.lower() for a in identity.holds} == {
        a.lower() for a in (*row.object_reads, *row.listings, *row.secret_reads, *row.anywhere, *row.log_writes,
                            *row.metric_writes)} - (warm_pool_only if cloud == "aws" else set())


def _warm_pool_identity(grant_on: str | None = None) -> ServerIdentity:
    """The servers' identity of an AWS fleet with a warm pool; `grant_on`: the lifecycle grant's Resource replaced."""
    plan = sample_plan("aws", "gpu-llm", "production")
    pool = WarmPool(servers=2, disk_gib=120, monthly_storage=None, storage_price_basis="x")
    plan = plan.model_copy(update={"startup": plan.startup.model_copy(update={"warm_pool": pool})})
    resources = [_plain(r) for r in preview_deployment(plan, {**deployments.PUBLIC,
                                                              **deployments.CLOUD_SETTINGS["aws"]}).resources]
    if grant_on is not None:
        (grant,) = [r for r in resources
                    if r.resource_type == "aws:iam/rolePolicy:RolePolicy" and r.name.endswith("-lifecycle")]
        document = json.loads(grant.props["policy"])
        document["Statement"][1]["Resource"] = grant_on
        grant.props["policy"] = json.dumps(document)
    (identity,) = server_identities(Stack(resources), lambda message, urn=None: None)
    return identity


def test_a_warm_pool_fleets_servers_may_complete_their_own_groups_hook_and_nothing_wider() -> None:
    identity = _warm_pool_identity()
    assert identity.violations == []
    assert {"autoscaling:CompleteLifecycleAction", "autoscaling:DescribeAutoScalingInstances"} <= identity.holds
    (message, _), = _warm_pool_identity(grant_on="*").violations
    assert "autoscaling:CompleteLifecycleAction on *" in message
    assert "not an Auto Scaling group of this stack" in message


def _plain(resource: RegisteredResource) -> PlainResource:
    return PlainResource(resource.type, resource.name, resource.urn, {**resource.outputs, **resource.inputs})


def _no_violation(message: str, urn: str | None = None) -> None:
    raise AssertionError(message)

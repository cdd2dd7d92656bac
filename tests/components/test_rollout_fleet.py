"""Rolling updates on every cloud, under mocks: the plan's rollout (surge, never below the floor, health-gated) as
each cloud's group takes it, or the documented gap; and a new model revision as a config change, compared resource by
resource before and after: the template (or the lone server) changes, everything else is kept.

Mocks do not run the engine, so "replaced or updated" is read from what reaches it: which inputs differ, which
resource the group takes its template from, and the options each changed resource carries.
"""

from __future__ import annotations

import base64
import gzip
import logging
from typing import Any

import pytest

from inferstack.clouds import CLOUD_FACTS
from inferstack.components import Capability, InferenceServer, backend_for
from inferstack.plan import DeploymentPlan
from inferstack.preview import Recording, RegisteredResource
from inferstack.spec import CLOUDS, Stage
from tests.components.conftest import CLOUD_ARGS
from tests.sample_plans import sample_plan

GROUPS = {"aws": "aws:autoscaling/group:Group",
          "gcp": "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager",
          "alibaba": "alicloud:ess/scalingGroup:ScalingGroup", "huawei": "huaweicloud:As/group:Group"}
# What a new revision changes in a fleet: the servers' template (AWS and Alibaba: a new version of the launch
# template, an update; GCP and Huawei: a new template, created first under a new name, never protected).
TEMPLATES = {"aws": "aws:ec2/launchTemplate:LaunchTemplate", "gcp": "gcp:compute/instanceTemplate:InstanceTemplate",
             "alibaba": "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate",
             "huawei": "huaweicloud:As/configuration:Configuration"}
LONE_SERVERS = {"aws": "aws:ec2/instance:Instance", "gcp": "gcp:compute/instance:Instance",
                "alibaba": "alicloud:ecs/instance:Instance", "huawei": "huaweicloud:Ecs/instance:Instance"}
# What a new revision must keep: the endpoint, the model bucket and the servers' identity (its grant covers every
# revision of the model, so it does not change).
KEPT = {"aws": ["aws:lb/loadBalancer:LoadBalancer", "aws:lb/targetGroup:TargetGroup", "aws:s3/bucket:Bucket",
                "aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy"],
        "gcp": ["gcp:compute/regionBackendService:RegionBackendService", "gcp:compute/forwardingRule:ForwardingRule",
                "gcp:storage/bucket:Bucket",
                "gcp:serviceaccount/account:Account", "gcp:storage/bucketIAMMember:BucketIAMMember"],
        "alibaba": ["alicloud:alb/loadBalancer:LoadBalancer", "alicloud:alb/serverGroup:ServerGroup",
                    "alicloud:oss/bucket:Bucket", "alicloud:ram/role:Role",
                    "alicloud:ram/policy:Policy"],
        "huawei": ["huaweicloud:DedicatedElb/loadbalancer:Loadbalancer", "huaweicloud:DedicatedElb/pool:Pool",
                   "huaweicloud:Obs/bucket:Bucket", "huaweicloud:Iam/agency:Agency", "huaweicloud:Iam/role:Role"]}


def with_revision(plan: DeploymentPlan, revision: str) -> DeploymentPlan:
    model = plan.model
    return plan.model_copy(update={"model": model.model_copy(update={
        "revision": revision, "bucket_prefix": f"{model.revisions_prefix}{revision}/"})})


def bigger_fleet(cloud: str, servers: int) -> DeploymentPlan:
    """The sample production plan with `servers` at its floor over two zones (rollout: surge 2 for five servers)."""
    plan = sample_plan(cloud, "gpu-llm", "production")  # type: ignore[arg-type]
    assert plan.fleet is not None
    fleet = plan.fleet.model_copy(update={"min_replicas": servers, "max_replicas": 2 * servers})
    return plan.model_copy(update={"instance_count": servers, "replicas": servers, "fleet": fleet})


def deploy(run: Any, cloud: str, plan: DeploymentPlan) -> Recording:
    return run(lambda: InferenceServer("chat", {"plan": plan, **CLOUD_ARGS[cloud]}).endpoint_url)


def one(recording: Recording, resource_type: str) -> RegisteredResource:
    (resource,) = recording.of_type(resource_type)
    return resource


#### Rollout settings per cloud ####


def test_aws_refreshes_with_the_plans_surge_never_below_the_floor_health_gated(run: Any) -> None:
    plan = bigger_fleet("aws", 5)
    rollout, fleet = plan.rolling_update, plan.fleet
    assert fleet is not None and (rollout.servers, rollout.surge, rollout.batches) == (5, 2, 3)
    recording = deploy(run, "aws", plan)
    group = one(recording, GROUPS["aws"]).inputs
    template = one(recording, TEMPLATES["aws"])
    # a new template version is what starts the refresh
    assert group["launchTemplate"] == {"id": template.id, "version": str(template.outputs["latestVersion"])}
    assert group["instanceRefresh"] == {"strategy": "Rolling", "preferences": {
        "minHealthyPercentage": 100, "maxHealthyPercentage": 140,  # 5 servers + 2 = 140 %
        "instanceWarmup": str(fleet.cold_start_s), "skipMatching": True}}
    # health-gated: a new server counts once the load balancer's health check passes, after the plan's grace
    assert group["healthCheckType"] == "ELB" and group["healthCheckGracePeriod"] == fleet.health_check_grace_s
    assert group["targetGroupArns"] == [one(recording, "aws:lb/targetGroup:TargetGroup").outputs["arn"]]


def test_gcp_updates_proactively_with_the_plans_surge_and_none_unavailable(run: Any) -> None:
    plan = bigger_fleet("gcp", 12)  # a quarter of 12: surge 3, more than one a zone
    fleet = plan.fleet
    assert fleet is not None and plan.zones == 2
    recording = deploy(run, "gcp", plan)
    group = one(recording, GROUPS["gcp"]).inputs
    template = one(recording, TEMPLATES["gcp"])
    assert group["versions"] == [{"name": "primary", "instanceTemplate": template.outputs["selfLinkUnique"]}]
    policy = group["updatePolicy"]
    assert (policy["type"], policy["minimalAction"], policy["replacementMethod"]) == ("PROACTIVE", "REPLACE",
                                                                                      "SUBSTITUTE")
    assert policy["maxSurgeFixed"] == plan.rolling_update.surge == 3 and policy["maxUnavailableFixed"] == 0
    # health-gated: autohealing judges a server by its health check, and a new one counts after the grace
    assert policy["minReadySec"] == group["autoHealingPolicies"]["initialDelaySec"] == fleet.health_check_grace_s


@pytest.mark.parametrize("cloud", ["alibaba", "huawei"])
def test_a_cloud_without_a_rolling_update_says_so_in_its_table_and_at_deploy_time(
        run: Any, cloud: str, caplog: pytest.LogCaptureFixture) -> None:
    support = backend_for(cloud).support(Capability.ROLLING_UPDATE)
    assert not support.available and not CLOUD_FACTS[cloud].rolling_update
    with caplog.at_level(logging.WARNING):
        recording = deploy(run, cloud, bigger_fleet(cloud, 5))
    assert f"chat: no rolling-update on {backend_for(cloud).display_name}" in caplog.text
    assert not recording.of_type("alicloud:ess/instanceRefresh:InstanceRefresh")
    group = one(recording, GROUPS[cloud]).inputs
    if cloud == "alibaba":  # why there is no refresh: it serves Priority groups only, and the fleet balances zones
        assert group["multiAzPolicy"] == "BALANCE" and "Priority" in support.note
        assert group["removalPolicies"][-1] == "OldestInstance"
    else:  # scale-in takes the old configuration's servers first: replacing by hand rolls forward
        assert group["instanceTerminatePolicy"] == "OLD_CONFIG_OLD_INSTANCE"


#### A new revision as a config change ####


def changed(before: Recording, after: Recording) -> dict[str, set[str]]:
    """Resources by URN whose inputs differ (the input keys that do), both runs registering the same URNs."""
    old = {r.urn: r for r in before.resources}
    new = {r.urn: r for r in after.resources}
    assert set(old) == set(new), set(old) ^ set(new)
    return {urn: {k for k in set(old[urn].raw_inputs) | set(new[urn].raw_inputs)
                  if old[urn].raw_inputs.get(k) != new[urn].raw_inputs.get(k)}
            for urn in old if old[urn].raw_inputs != new[urn].raw_inputs}


def revision_change(run: Any, cloud: str, stage: Stage) -> tuple[Recording, Recording, dict[str, set[str]]]:
    plan = sample_plan(cloud, "gpu-llm", stage)  # type: ignore[arg-type]
    before, after = (deploy(run, cloud, with_revision(plan, revision)) for revision in ("r1", "r2"))
    return before, after, changed(before, after)


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_new_revision_changes_the_fleets_template_only_and_keeps_endpoint_bucket_and_identity(
        run: Any, cloud: str) -> None:
    _, after, diff = revision_change(run, cloud, "production")
    template = one(after, TEMPLATES[cloud])
    assert set(diff) == {template.urn}, diff
    assert diff[template.urn] & {"userData", "metadata", "instanceConfig"}  # the boot script names the new prefix
    for kept in KEPT[cloud]:
        assert after.of_type(kept), f"{kept} not registered"
        assert all(r.urn not in diff for r in after.of_type(kept)), kept
    # The group takes its servers from the changed template (by version, unique link or id), so the change reaches
    # the group: a rolling update where the cloud has one.
    group = one(after, GROUPS[cloud]).inputs
    reference = {"aws": lambda g: g["launchTemplate"]["id"], "gcp": lambda g: g["versions"][0]["instanceTemplate"],
                 "alibaba": lambda g: g["launchTemplateId"], "huawei": lambda g: g["scalingConfigurationId"]}[cloud]
    assert reference(group) in (template.id, template.outputs.get("selfLinkUnique"))


def boot_text(template: RegisteredResource) -> str:
    """The template's user data as text: AWS, Alibaba and Huawei take Base64 of gzip, GCP plain metadata."""
    inputs = template.inputs
    packed = inputs.get("userData") or inputs.get("instanceConfig", {}).get("userData")
    if packed is None:
        return str(inputs["metadata"])
    return gzip.decompress(base64.b64decode(packed)).decode()


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_new_servers_read_the_new_revisions_files(run: Any, cloud: str) -> None:
    before, after, _ = revision_change(run, cloud, "production")
    old, new = boot_text(one(before, TEMPLATES[cloud])), boot_text(one(after, TEMPLATES[cloud]))
    assert "models/llama-3.1-8b/bf16/r1/" in old and "/r2/" not in old
    assert "models/llama-3.1-8b/bf16/r2/" in new and "/r1/" not in new


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_protected_fleets_template_change_is_not_blocked_by_protection(run: Any, cloud: str) -> None:
    """The issue's failure: a protected resource that must be replaced fails after the new GPU server exists. In a
    fleet, the changed template is either updated in place (a new version: AWS, Alibaba, which Pulumi's `protect`
    allows) or an unprotected resource created before the old one goes (GCP, Huawei)."""
    _, after, _ = revision_change(run, cloud, "production")
    template = one(after, TEMPLATES[cloud])
    if cloud in ("aws", "alibaba"):  # launch templates: a changed argument is a new version of the same template
        assert template.protect
    else:
        assert not template.protect
    assert one(after, GROUPS[cloud]).protect  # the group, updated in place, keeps its protection


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_new_revision_replaces_a_lone_validation_server_and_nothing_else(run: Any, cloud: str) -> None:
    _, after, diff = revision_change(run, cloud, "validation")
    (server,) = after.of_type(LONE_SERVERS[cloud])
    assert set(diff) == {server.urn}, diff
    assert not server.protect  # unprotected below production: replaced delete-first (test_server_protection.py)
    plan = sample_plan(cloud, "gpu-llm", "validation")  # type: ignore[arg-type]
    assert plan.rolling_update.strategy == "replace" and plan.rolling_update.min_healthy_percent == 0

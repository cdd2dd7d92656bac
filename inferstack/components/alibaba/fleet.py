"""An Alibaba fleet: an ESS scaling group from an ECS launch template, in private vSwitches behind the ALB of
load_balancer.py, its servers let into the load balancer by a lifecycle hook once ready, scaled by target tracking
on ALB's requests per server; a canary is a second group behind the same load balancer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from inferstack.components.alibaba.load_balancer import (
    listeners,
    load_balancer,
    load_balancer_logs,
    server_group,
    weighted_rule,
)
from inferstack.components.alibaba.names import account_name
from inferstack.components.alibaba.servers import SYSTEM_DISK_CATEGORY, ecs_user_data, server_image, system_disk_gib
from inferstack.components.contract import FleetRequest, FleetResult, StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options, server_options
from inferstack.plan import DeploymentPlan

# The instance metadata hop limit: 1, so that containers on the server cannot reach its credentials
# (ecs.EcsLaunchTemplate http_put_response_hop_limit: 1-64).
METADATA_HOP_LIMIT = 1
# ESS target tracking on an ALB server group: the metric is the server group's requests per second divided by its
# backend servers, "(ALB) QPS per Backend Server" (Auto Scaling docs); the dimension rulePool names the server
# group (the provider's acceptance test TestAccAliCloudEssScalingRule_target_tracking_rule_alarm_dimension).
ALB_QPS_PER_SERVER_METRIC = "LoadBalancerRealServerAverageQps"
ALB_SERVER_GROUP_DIMENSION = "rulePool"
QPS_DECIMALS = 3  # CreateScalingRule TargetValue is kept to three decimal places (Auto Scaling API; verify)
# The event-triggered task behind a target tracking rule checks the metric once a minute (verify): scale-in waits
# for scale_in_cooldown_s of consecutive checks below target (ess.ScalingRule scale_in_evaluation_count).
METRIC_PERIOD_S = 60
LIFECYCLE_ACTIONS = ("ess:DescribeScalingInstances", "ess:DescribeLifecycleActions", "ess:CompleteLifecycleAction")
"""What a fleet's server may do to finish its own scale-out (_lifecycle_grant); the policy pack's allow-list
(SERVER_GRANTS in policy/guardrails/server_identity.py) holds the same three."""
# ess.LifecycleHook heartbeat_timeout: 30-21600 s (Auto Scaling CreateLifecycleHook; verify).
MAX_LIFECYCLE_HOOK_S = 21600
# The tag that names a scaling group's servers (the launch template's instance tags) for its application group.
FLEET_TAG = "inferstack-fleet"

#### Compute ####


def create_fleet(parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
    assert request.plan.fleet is not None, "create_fleet is called for a plan with a fleet"
    # Required and checked with the component's arguments, before anything was created (api_endpoint_problems).
    certificate = request.api_certificate
    assert certificate is not None, "Alibaba issues no ALB certificate: api_certificate is required"
    servers = server_group(parent, name, request)
    balancer = load_balancer(parent, name, request, load_balancer_logs(parent, name, request))
    https = listeners(parent, name, request, balancer, servers, certificate)
    group = _scaling_group(parent, name, request, servers)
    if request.canary is not None:  # the same group, from the canary's plan, and a weighted rule to both
        canary = request.for_canary()
        canary_servers = server_group(parent, f"{name}-canary", canary)
        _scaling_group(parent, f"{name}-canary", canary, canary_servers)
        weighted_rule(parent, name, https, servers, canary_servers, request.canary)
    domain = request.api_domain
    balancer.dns_name.apply(lambda dns_name: pulumi.log.info(
        f"{name}: point {domain} at the load balancer with a CNAME record to {dns_name}; the endpoint serves "
        f"CAS certificate {certificate}, which must cover {domain}", resource=parent))
    watched: dict[str, pulumi.Input[str]] = {"load_balancer": balancer.id, "fleet_tag": fleet_tag(parent, name)}
    if request.canary is not None:
        watched["canary_fleet_tag"] = fleet_tag(parent, f"{name}-canary")
    return FleetResult(endpoint_url=pulumi.Output.from_input(f"https://{domain}"),
                       load_balancer_address=balancer.dns_name, group_id=group.id, watched=watched)


def fleet_tag(parent: pulumi.Resource, name: str) -> StrOutput:
    """The FLEET_TAG value of one scaling group's servers: unique to the project, stack, region and group."""
    return account_name(parent, name, "fleet", max_length=128)


#### The scaling group ####


def _scaling_group(parent: pulumi.Resource, name: str, request: FleetRequest,
                   servers: alicloud.alb.ServerGroup) -> alicloud.ess.ScalingGroup:
    """The plan's servers as an ESS group from a launch template, each added to the ALB server group once it says it
    is ready (the lifecycle hook), scaled on requests per server.

    A group made from a launch template is enabled as it is created ("Creating scaling group from launch template
    enable group automatically", ess.ScalingGroup launch_template_id) and starts its minimum at once, before its
    lifecycle hook can exist (the hook takes the group's id; ess.ScalingGroup has no hook argument in pulumi_alicloud
    4.0.0): such a server would go straight into the load balancer, be judged by its health check while the driver
    installs, and be released. So a group is created empty; once its hook exists (looked up by name at the next
    `pulumi up`), it takes the plan's floor, and every server it starts waits in the hook."""
    plan, fleet = request.plan, request.plan.fleet
    assert fleet is not None
    template = _launch_template(parent, name, request)
    group_name, hook_name = account_name(parent, name, "servers"), f"{name}-grace"
    hooked = _group_has_hook(parent, group_name, hook_name)

    def first_deploy(found: bool) -> None:
        if not found:
            pulumi.log.warn(f"{name}: a new scaling group starts empty, so that no server starts before its lifecycle "
                            f"hook exists: run `pulumi up` again to start its {fleet.min_replicas} servers "
                            "(docs/deploy-alibaba.md)", resource=parent)

    hooked.apply(first_deploy)
    group = alicloud.ess.ScalingGroup(
        f"{name}-group", scaling_group_name=group_name,
        min_size=hooked.apply(lambda found: fleet.min_replicas if found else 0), max_size=fleet.max_replicas,
        vswitch_ids=list(request.server_subnet_ids),
        **_spot_above_floor(plan), launch_template_id=template.id, launch_template_version="Latest",
        # ECS: a stopped or released server; LOAD_BALANCER: one that fails ALB's health check. Either is
        # removed and released (scaling_policy), and a new one created to keep min_size.
        health_check_types=["ECS", "LOAD_BALANCER"], scaling_policy="release",
        default_cooldown=fleet.scale_out_cooldown_s,
        removal_policies=["OldestScalingConfiguration", "OldestInstance"],
        spot_instance_remedy=True if plan.interruptible else None,
        group_deletion_protection=request.protected, tags=request.tags,
        opts=server_options(parent, request.protected))
    # A new server stays in Pending:Wait, out of the load balancer and so never judged by its health check, until it
    # says it is ready (the boot's last step calls CompleteLifecycleAction with CONTINUE: boot.sh); then
    # ESS adds it to the ALB server group. One not ready within the plan's grace is released (ABANDON) and replaced.
    grace = alicloud.ess.LifecycleHook(
        f"{name}-grace", scaling_group_id=group.id, name=hook_name, lifecycle_transition="SCALE_OUT",
        heartbeat_timeout=fleet.health_check_grace_s, default_result="ABANDON", opts=child_options(parent))
    _lifecycle_grant(parent, name, request)
    attachment = alicloud.ess.AlbServerGroupAttachment(
        f"{name}-group-alb", scaling_group_id=group.id, alb_server_group_id=servers.id,
        port=plan.serving.port, weight=100, force_attach=True,
        opts=child_options(parent, depends_on=[grace]))
    alicloud.ess.ScalingRule(
        f"{name}-requests-per-server", scaling_group_id=group.id, scaling_rule_name=f"{name}-requests-per-server",
        scaling_rule_type="TargetTrackingScalingRule", metric_name=ALB_QPS_PER_SERVER_METRIC,
        alarm_dimension={"dimension_key": ALB_SERVER_GROUP_DIMENSION, "dimension_value": servers.id},
        # Both count requests per second: the plan's target as is, to ESS's precision.
        target_value=_qps_target(fleet.target_requests_per_s),
        # A new server adds capacity once the lifecycle hook lets it into the load balancer: at the grace.
        estimated_instance_warmup=fleet.health_check_grace_s,
        scale_in_evaluation_count=math.ceil(fleet.scale_in_cooldown_s / METRIC_PERIOD_S),
        disable_scale_in=False, opts=child_options(parent, depends_on=[attachment]))
    return group


def _group_has_hook(parent: pulumi.Resource, group_name: StrOutput, hook_name: str) -> pulumi.Output[bool]:
    """Whether the scaling group of that name exists already with its lifecycle hook (a later `pulumi up`)."""
    groups = alicloud.ess.get_scaling_groups_output(
        name_regex=group_name.apply(lambda found: f"^{re.escape(found)}$"), opts=invoke_options(parent))

    def hook_of(ids: Sequence[str]) -> pulumi.Output[bool]:
        if not ids:
            return pulumi.Output.from_input(False)
        hooks = alicloud.ess.get_lifecycle_hooks_output(scaling_group_id=ids[0], name_regex=f"^{re.escape(hook_name)}$",
                                                        opts=invoke_options(parent))
        return answered(hooks.ids, "alicloud:ess/getLifecycleHooks:getLifecycleHooks ids", empty=[]).apply(bool)

    return answered(groups.ids, "alicloud:ess/getScalingGroups:getScalingGroups ids", empty=[]).apply(hook_of)


def _lifecycle_grant(parent: pulumi.Resource, name: str, request: FleetRequest) -> None:
    """What a server's boot needs to say it is ready (files/cloud_access.py `complete_lifecycle_action`): find its own
    pending lifecycle action (DescribeScalingInstances, DescribeLifecycleActions) and complete it. ESS grants these
    three on "All Resources" only: no scaling-group resource type, no condition key (Auto Scaling API 2022-02-22,
    CompleteLifecycleAction, "Authorization information", read 2026-12-07); a statement naming the group's ARN would
    not take effect, and every new server would be released at the hook's timeout. A server can complete an action
    only with its token, which DescribeLifecycleActions gives for pending actions; the runtime never holds the role
    (the metadata firewall, boot phase metadata_firewall)."""
    opts = child_options(parent)
    policy = alicloud.ram.Policy(
        f"{name}-lifecycle", policy_name=account_name(parent, name, "lifecycle"),
        policy_document=json.dumps({"Version": "1", "Statement": [
            {"Effect": "Allow", "Action": list(LIFECYCLE_ACTIONS), "Resource": "*"}]}),
        description=f"inferstack lifecycle for {name}: a server completes its own scale-out", tags=request.tags,
        opts=opts)
    alicloud.ram.RolePolicyAttachment(f"{name}-lifecycle-attachment", role_name=request.attachment,
                                      policy_name=policy.policy_name, policy_type="Custom", opts=opts)


def _spot_above_floor(plan: DeploymentPlan) -> dict[str, Any]:
    """The group's zone and purchase settings. Zones balanced ("BALANCE"); with spot above the floor
    (`plan.spot_above_floor`), the same balance as COMPOSABLE with az_balance (the settings below take effect only
    under it), the floor on-demand (`on_demand_base_capacity`), nothing on-demand above it, the plan's types in its
    order (the planned one first: `priority`) as launch template overrides; the template's SpotAsPriceGo makes the
    servers above the floor spot. ESS CreateScalingGroup (alibabacloud_ess20220222 1.13.3 CreateScalingGroupRequest:
    MultiAZPolicy, AzBalance, OnDemandBaseCapacity, OnDemandPercentageAboveBaseCapacity, AllocationStrategy,
    SpotAllocationStrategy)."""
    floor = plan.spot_above_floor
    if floor is None:
        return {"multi_az_policy": "BALANCE"}
    return {"multi_az_policy": "COMPOSABLE", "az_balance": True, "on_demand_base_capacity": floor.on_demand_base,
            "on_demand_percentage_above_base_capacity": 0, "allocation_strategy": "priority",
            "spot_allocation_strategy": "priority",
            "launch_template_overrides": [{"instance_type": t} for t in floor.instance_types]}


def _launch_template(parent: pulumi.Resource, name: str, request: FleetRequest) -> alicloud.ecs.EcsLaunchTemplate:
    """The fleet's servers, hardened as a single server is: metadata tokens (and hop limit 1), an encrypted ESSD,
    the RAM role at creation, no key pair, no public address, the same user data; spot where the plan says.

    A launch template, not an ess.ScalingConfiguration: the provider's ScalingConfiguration has http_endpoint but
    no http_tokens (pulumi_alicloud 4.0.0 ess/scaling_configuration.py), so it cannot demand metadata tokens.
    """
    plan = request.plan
    image = server_image(parent, plan)
    return alicloud.ecs.EcsLaunchTemplate(
        f"{name}-template", launch_template_name=account_name(parent, name, "servers", max_length=128),
        description="inferstack inference server of an ESS scaling group", image_id=image.image_id,
        instance_type=plan.instance_type, instance_name=f"{name}-server", instance_charge_type="PostPaid",
        security_group_ids=list(request.firewall_ids), ram_role_name=request.attachment,
        http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=METADATA_HOP_LIMIT,
        system_disk={"category": SYSTEM_DISK_CATEGORY, "size": system_disk_gib(image, plan), "encrypted": True,
                     "delete_with_instance": True},
        # No internet_max_bandwidth_out: the servers get no public address; they reach out through the NAT gateway.
        # Spot where the plan may run it: all servers (plan.spot), or those above the floor the group keeps
        # on-demand (_spot_above_floor).
        spot_strategy="SpotAsPriceGo" if plan.interruptible else None,
        user_data=ecs_user_data(parent, plan, request.user_data),
        # The servers carry their group's tag: its application group (create_alarms) watches whichever run.
        tags={**request.tags, FLEET_TAG: fleet_tag(parent, name)}, template_tags=request.tags,
        # A new image or user data is a new template version, used by the servers the group creates from then on;
        # running servers stay as they are (rolling them is ESS instance refresh). A newer image alone changes
        # nothing, as on a single server.
        opts=server_options(parent, request.protected, ignore_changes=["imageId"]))


def _qps_target(requests_per_s: float) -> float:
    """The plan's requests per second per server as ESS keeps it (three decimals), never rounded to nothing."""
    smallest: float = 10.0**-QPS_DECIMALS
    return max(round(requests_per_s, QPS_DECIMALS), smallest)

"""The fleet: an EC2 Auto Scaling group of private servers from a launch template, behind the Application Load
Balancer of load_balancer.py; its rollout by instance refresh, its scaling on requests per server; a canary as a
second group from the canary's plan behind the same load balancer; a warm pool of stopped, prepared servers where the
plan has one (`plan.startup.warm_pool`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

from inferstack.bootstrap.render import AWS_LAUNCH_HOOK
from inferstack.components.aws.identity import lifecycle_statements
from inferstack.components.aws.load_balancer import (
    forward,
    issued_certificate,
    listeners,
    load_balancer,
    load_balancer_logs,
    target_group,
)
from inferstack.components.aws.observability import GROUP_METRICS, SECONDS_PER_MINUTE
from inferstack.components.aws.servers import METADATA_HOP_LIMIT, ServerImage, server_image, user_data
from inferstack.components.aws.tags import named
from inferstack.components.contract import FleetRequest, FleetResult, StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, fleet_options, invoke_options
from inferstack.plan import DeploymentPlan, Fleet, Rollout

# Scaling. ALBRequestCountPerTarget is the load balancer's requests per target per minute (EC2 Auto Scaling User
# Guide, predefined metrics for target tracking; CloudWatch's RequestCountPerTarget comes in 60 s periods, statistic
# Sum, which "represents the average not the sum": ELB User Guide, CloudWatch metrics), so the plan's per-second rate
# is multiplied by 60. Target tracking on an Auto Scaling group has no scale-in cooldown (Application Auto Scaling's
# scaleInCooldown "is not used if the scalable resource is an Auto Scaling group"), so its scale-in is disabled and
# servers are removed by a simple-scaling policy instead: one server per `scale_in_cooldown_s` (a simple policy's
# cooldown), while the load per server has stayed below half the target for SCALE_IN_EVALUATION_MINUTES. Removing one
# of n >= 2 servers at most doubles each remaining server's share, so they stay within the target and the two
# policies never undo each other.
SCALE_IN_LOAD_FRACTION = 0.5
SCALE_IN_EVALUATION_MINUTES = 15

#### Compute: the fleet ####


def create_fleet(parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
    plan, fleet = request.plan, fleet_of(request.plan)
    template = _launch_template(parent, name, request, server_image(parent, plan),
                                user_data(parent, plan, request.user_data))
    targets = target_group(parent, name, request)
    canary = request.for_canary() if request.canary else None
    canary_targets = target_group(parent, f"{name}-canary", canary) if canary else None
    balancer = load_balancer(parent, name, request, load_balancer_logs(parent, name, request))
    certificate = request.api_certificate or issued_certificate(parent, name, request.api_domain, request.tags)
    listeners(parent, name, request, balancer, certificate, forward(request, targets, canary_targets))
    group = _group(parent, name, request, template, targets)
    _scaling_policies(parent, name, fleet, group, balancer, targets, request.tags)
    watched: dict[str, pulumi.Input[str]] = {"load_balancer": balancer.arn_suffix,
                                             "target_group": targets.arn_suffix, "group": group.name}
    if canary is not None and canary_targets is not None:  # the same group, from the canary's plan
        canary_template = _launch_template(parent, f"{name}-canary", canary, server_image(parent, canary.plan),
                                           user_data(parent, canary.plan, canary.user_data))
        canary_group = _group(parent, f"{name}-canary", canary, canary_template, canary_targets)
        _scaling_policies(parent, f"{name}-canary", fleet_of(canary.plan), canary_group, balancer, canary_targets,
                          request.tags)
        watched.update(canary_target_group=canary_targets.arn_suffix, canary_group=canary_group.name)
    # DNS stays yours: say where the domain must point.
    balancer.dns_name.apply(lambda address: pulumi.log.info(
        f"{name}: point {request.api_domain} at {address} (a CNAME, or a Route 53 alias record)", resource=parent))
    return FleetResult(endpoint_url=pulumi.Output.from_input(f"https://{request.api_domain}"),
                       load_balancer_address=balancer.dns_name, group_id=group.id, watched=watched)


def fleet_of(plan: DeploymentPlan) -> Fleet:
    """The plan's fleet: create_fleet is only called for a plan with one (and its canary's plan, made from it)."""
    assert plan.fleet is not None, "only a plan with a fleet runs as an Auto Scaling group"
    return plan.fleet


#### The servers' template and group ####


def _launch_template(parent: pulumi.Resource, name: str, request: FleetRequest, image: ServerImage,
                     encoded_user_data: StrOutput) -> aws.ec2.LaunchTemplate:
    """The servers' template: the hardening of create_servers' instances. It carries no termination protection
    (EC2 User Guide: it "does not prevent Amazon EC2 Auto Scaling from terminating an instance", and lifting it would
    change the template, which replaces every server); spot capacity is the group's (mixed instances policy)."""
    plan = request.plan
    server_tags = named(request.tags, f"{name}-server")
    return aws.ec2.LaunchTemplate(
        f"{name}-template", image_id=image.image_id, instance_type=plan.instance_type,
        iam_instance_profile={"name": request.attachment},
        metadata_options={"http_endpoint": "enabled", "http_tokens": "required",
                          "http_put_response_hop_limit": METADATA_HOP_LIMIT, "instance_metadata_tags": "disabled"},
        # LaunchTemplateBlockDeviceMappingEbsArgs types `encrypted` and `delete_on_termination` as strings.
        block_device_mappings=[{"device_name": image.root_device_name, "ebs": {
            "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true",
            "volume_size": image.root_volume_size(plan)}}],
        # No public address even in a subnet that would give one (LaunchTemplateNetworkInterfaceArgs: a string).
        network_interfaces=[{"device_index": 0, "associate_public_ip_address": "false",
                             "delete_on_termination": "true", "security_groups": list(request.firewall_ids)}],
        user_data=encoded_user_data, update_default_version=True,
        tag_specifications=[{"resource_type": kind, "tags": server_tags}
                            for kind in ("instance", "volume", "network-interface")],
        tags=named(request.tags, f"{name}-template"),
        # A newer vendor image must not replace the servers on the next `pulumi up` (as for single servers); roll it
        # out with `pulumi up --replace <template URN>` when you choose to. A baked or brought image is the stack's
        # own choice: a new one is a new template version, which the instance refresh rolls out (plan.rollout).
        opts=fleet_options(parent, request.protected,
                           ignore_changes=["image_id"] if plan.startup.image == "default" else []))


def _group(parent: pulumi.Resource, name: str, request: FleetRequest, template: aws.ec2.LaunchTemplate,
           targets: aws.lb.TargetGroup) -> aws.autoscaling.Group:
    """min..max servers over the private subnets, replaced when the load balancer's health check fails after the
    grace; a new template version replaces them by instance refresh, launching before terminating."""
    plan, fleet = request.plan, fleet_of(request.plan)
    # A refresh (started by a new template version; the version must be the template's number, not $Latest,
    # pulumi_aws GroupInstanceRefreshArgs) replaces a server only once its successor is healthy.
    launch: aws.autoscaling.GroupLaunchTemplateArgsDict = {
        "id": template.id, "version": template.latest_version.apply(str)}
    mixed = _mixed_instances(plan, launch)
    group = aws.autoscaling.Group(
        f"{name}-group", min_size=fleet.min_replicas, max_size=fleet.max_replicas,
        vpc_zone_identifiers=list(request.server_subnet_ids),
        launch_template=None if mixed else launch, mixed_instances_policy=mixed,
        capacity_rebalance=True if mixed else None,
        target_group_arns=[targets.arn], health_check_type="ELB", health_check_grace_period=fleet.health_check_grace_s,
        default_instance_warmup=fleet.cold_start_s,
        instance_refresh=_instance_refresh(plan.rolling_update, fleet),
        # The dashboard's group size: group metrics are off unless listed; at one-minute granularity they are free
        # ("Auto Scaling group metrics", Amazon EC2 Auto Scaling User Guide).
        enabled_metrics=list(GROUP_METRICS), metrics_granularity="1Minute",
        tags=[{"key": key, "value": value, "propagate_at_launch": False}
              for key, value in named(request.tags, f"{name}-group").items()],
        **_warm_pool(plan, mixed is not None),
        opts=fleet_options(parent, request.protected))
    if plan.startup.warm_pool is not None:
        _launch_hook(parent, name, fleet, group)
        _lifecycle_grant(parent, name, request, group)
    return group


def _warm_pool(plan: DeploymentPlan, mixed: bool) -> dict[str, Any]:
    """The group's warm pool (`plan.startup.warm_pool`); none without one.

    Stopped servers (pool_state Stopped: only their disks are billed), those removed by scale-in returned to the pool
    (reuse_on_scale_in); max_group_prepared_capacity is left to its default, the group's max, so the pool holds max
    minus the desired capacity (EC2 Auto Scaling User Guide, "Warm pools", read 2026-12-08). AWS stops a server
    entering the pool as soon as it is launched, without waiting for its user data, unless a launch lifecycle hook
    holds it (Warmed:Pending:Wait): `_launch_hook`. The provider does not wait for capacity: a server waits in the
    hook for minutes, and its grant to complete the hook names the group's ARN, which exists only after the group
    (_lifecycle_grant)."""
    if plan.startup.warm_pool is None:
        return {}
    assert not mixed, "AWS refuses a warm pool on a group with a mixed instances policy; the planner never plans both"
    return {"warm_pool": {"pool_state": "Stopped", "instance_reuse_policy": {"reuse_on_scale_in": True}},
            "wait_for_capacity_timeout": "0"}


MAX_HOOK_HEARTBEAT_S = 7200
"""A lifecycle hook's longest heartbeat timeout (PutLifecycleHook HeartbeatTimeout: 30 to 7200 s)."""


def _launch_hook(parent: pulumi.Resource, name: str, fleet: Fleet, group: aws.autoscaling.Group) -> None:
    """The hook AWS_LAUNCH_HOOK holds every new server, in the pool or on its way into service (Pending:Wait, out of
    the load balancer), until its boot completes the action (boot.sh: once the model answered, for the pool after
    stopping the runtime again), or ABANDONs it at the plan's grace. A resource of its own, not the group's
    initial_lifecycle_hooks, which pulumi_aws applies only when it creates the group: so turning the pool on adds the
    hook to a running group, and turning it off removes it (a hook left behind would hold every new server, whose
    boot no longer completes it, until ABANDON). The servers a new group launches in the seconds before the hook
    exists are not held: those bound for the pool may stop mid-boot and finish it when they leave the pool."""
    aws.autoscaling.LifecycleHook(
        f"{name}-launch-hook", name=AWS_LAUNCH_HOOK, autoscaling_group_name=group.name,
        lifecycle_transition="autoscaling:EC2_INSTANCE_LAUNCHING", default_result="ABANDON",
        heartbeat_timeout=min(fleet.health_check_grace_s, MAX_HOOK_HEARTBEAT_S), opts=child_options(parent))


def _lifecycle_grant(parent: pulumi.Resource, name: str, request: FleetRequest,
                     group: aws.autoscaling.Group) -> None:
    """Lets the servers complete their own launch hook (identity.lifecycle_statements): an inline policy on the role
    of the instance profile they take (the created identity's, or a brought one's: then its role gets the policy too),
    naming the group's own ARN. It comes after the group; a server asks only at the end of its preparation, minutes
    later, and waits out IAM's propagation (cloud_access.py retries a refusal for a while)."""
    profile = aws.iam.get_instance_profile_output(name=request.attachment, opts=invoke_options(parent))
    aws.iam.RolePolicy(
        f"{name}-lifecycle", role=answered(profile.role_name, "aws:iam/getInstanceProfile:getInstanceProfile roleName"),
        policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": lifecycle_statements(group.arn)}),
        opts=child_options(parent))


def _mixed_instances(plan: DeploymentPlan, launch: aws.autoscaling.GroupLaunchTemplateArgsDict
                     ) -> aws.autoscaling.GroupMixedInstancesPolicyArgsDict | None:
    """Spot capacity as the group's mixed instances policy; None: every server on-demand from the template.

    All spot (`plan.spot`, outside production): no on-demand base, price-capacity-optimized. Spot above production's
    floor (`plan.spot_above_floor`): the floor on-demand (`on_demand_base_capacity`), nothing on-demand above it, the
    plan's types as overrides in its order (the planned one first; on-demand `prioritized`, spot
    `capacity-optimized-prioritized`: the pools least likely to be interrupted, the order where capacity allows),
    with capacity rebalancing (the group replaces a spot server at risk before it is interrupted). EC2 Auto Scaling
    User Guide, "Auto Scaling groups with multiple instance types and purchase options" (read 2026-12-07)."""
    specification: aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateLaunchTemplateSpecificationArgsDict = {
        "launch_template_id": launch["id"], "version": launch["version"]}
    floor = plan.spot_above_floor
    if floor is not None:
        return {"launch_template": {"launch_template_specification": specification,
                                    "overrides": [{"instance_type": t} for t in floor.instance_types]},
                "instances_distribution": {"on_demand_base_capacity": floor.on_demand_base,
                                           "on_demand_percentage_above_base_capacity": 0,
                                           "on_demand_allocation_strategy": "prioritized",
                                           "spot_allocation_strategy": "capacity-optimized-prioritized"}}
    if plan.spot:
        return {"launch_template": {"launch_template_specification": specification},
                "instances_distribution": {"on_demand_base_capacity": 0, "on_demand_percentage_above_base_capacity": 0,
                                           "spot_allocation_strategy": "price-capacity-optimized"}}
    return None


def _instance_refresh(rollout: Rollout, fleet: Fleet) -> aws.autoscaling.GroupInstanceRefreshArgsDict:
    """The plan's rollout as an instance refresh, which a new template version starts: the plan's surge above the
    group's size (max healthy), none of its servers down (min healthy 100 %: the floor is the capacity the plan
    needs), a new server counted once the load balancer's health check passes (health_check_type ELB) and its warm-up
    is over, servers already on the new version skipped. Percentages are of the desired capacity; at the floor the
    surge is `rollout.surge` servers, above it proportionally more (MaxHealthyPercentage 100-200, at most 100 above
    MinHealthyPercentage: EC2 Auto Scaling API Reference, RefreshPreferences, read 2026-12-01). No checkpoints: a
    paused refresh leaves two revisions answering for its pause; watching a new revision on part of the traffic is
    the canary's job."""
    surge_percent = math.ceil(100 * rollout.surge / fleet.min_replicas)
    return {"strategy": "Rolling", "preferences": {
        "min_healthy_percentage": rollout.min_healthy_percent,
        "max_healthy_percentage": min(200, rollout.min_healthy_percent + surge_percent),
        "instance_warmup": str(fleet.cold_start_s), "skip_matching": True}}


#### Scaling ####


def _scaling_policies(parent: pulumi.Resource, name: str, fleet: Fleet, group: aws.autoscaling.Group,
                      balancer: aws.lb.LoadBalancer, targets: aws.lb.TargetGroup, tags: Mapping[str, str]) -> None:
    """Scale out on requests per server (target tracking), scale in one server per cooldown (see the constants)."""
    opts = child_options(parent)
    target_per_minute = fleet.target_requests_per_s * SECONDS_PER_MINUTE
    aws.autoscaling.Policy(
        f"{name}-requests", autoscaling_group_name=group.name, policy_type="TargetTrackingScaling",
        estimated_instance_warmup=fleet.scale_out_cooldown_s,
        target_tracking_configuration={
            "target_value": target_per_minute, "disable_scale_in": True,
            "predefined_metric_specification": {
                "predefined_metric_type": "ALBRequestCountPerTarget",
                # "app/<lb>/<id>/targetgroup/<tg>/<id>" (PolicyTargetTrackingConfigurationPredefinedMetric-
                # SpecificationArgs.resource_label); the target group is attached to the group.
                "resource_label": pulumi.Output.concat(
                    answered(balancer.arn_suffix, "aws:lb/loadBalancer:LoadBalancer arnSuffix"), "/",
                    answered(targets.arn_suffix, "aws:lb/targetGroup:TargetGroup arnSuffix"))}},
        opts=opts)
    scale_in = aws.autoscaling.Policy(
        f"{name}-scale-in", autoscaling_group_name=group.name, policy_type="SimpleScaling",
        adjustment_type="ChangeInCapacity", scaling_adjustment=-1, cooldown=fleet.scale_in_cooldown_s, opts=opts)
    # The alarm invokes the policy every minute it stays in ALARM; the policy's cooldown spaces the steps. No
    # request at all publishes no data point, which counts as low load.
    aws.cloudwatch.MetricAlarm(
        f"{name}-low-load", alarm_description=f"inferstack {name}: fewer than half the target requests per server "
        f"for {SCALE_IN_EVALUATION_MINUTES} minutes; remove one server", namespace="AWS/ApplicationELB",
        metric_name="RequestCountPerTarget", dimensions={"TargetGroup": targets.arn_suffix}, statistic="Sum",
        period=SECONDS_PER_MINUTE, evaluation_periods=SCALE_IN_EVALUATION_MINUTES,
        datapoints_to_alarm=SCALE_IN_EVALUATION_MINUTES, comparison_operator="LessThanThreshold",
        threshold=target_per_minute * SCALE_IN_LOAD_FRACTION, treat_missing_data="breaching",
        alarm_actions=[scale_in.arn], tags=tags, opts=opts)

"""Huawei Cloud fleets: an AS group from an AS configuration (the servers' template) behind the dedicated ELB of
load_balancer.py, a canary's group beside it, and step scaling: on CPU usage where it follows the load (CPU fleets),
on the requests per second the servers report (GPU fleets)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_huaweicloud as hw

from inferstack.components.contract import FleetRequest, FleetResult, StrOutput
from inferstack.components.huawei.load_balancer import (
    canary_pool,
    load_balancer,
    load_balancer_logs,
    weighted_policy,
)
from inferstack.components.huawei.lookups import zones_offering
from inferstack.components.huawei.servers import SYSTEM_DISK_TYPE, ecs_user_data, server_image, system_disk_key
from inferstack.components.naming import child_options, server_options
from inferstack.names import unique_name
from inferstack.plan import DeploymentPlan, Fleet

# Auto Scaling (as_/group.py, as_/policy.py): at most 300 instances; grace periods and cooldowns 0..86400 s; the
# group audits the ELB's health results every minute (health_periodic_audit_time: 0, 1, 5, 15, 60 or 180 minutes).
AS_MAX_INSTANCES = 300
AS_MAX_SECONDS = 86_400
AS_HEALTH_AUDIT_MINUTES = 1
AS_NAME_MAX_LENGTH = 64
# CPU fleets scale on the AS group's own metrics, namespace SYS.AS, averages per server reported every 5 minutes (AS
# API reference, "AS Metrics"), of which CPU usage follows a server's request load where the runtime runs on the CPU.
# The alarm carries the autoscaling action itself, as terraform-provider-huaweicloud 1.73.3's example does
# (docs/resources/ces_alarmrule.md: "If type is set to autoscaling, ... the value of namespace must be SYS.AS").
AS_METRICS_NAMESPACE = "SYS.AS"
AS_GROUP_DIMENSION = "AutoScalingGroup"
CPU_METRIC = "cpu_util"
AS_METRIC_PERIOD_S = 300
# GPU fleets scale on the requests per second each server reports to this Cloud Eye custom namespace (a namespace is
# service.item, 3-32 characters, its service not SYS, AGT or SRE: Cloud Eye API, "Adding Monitoring Data"), one series
# per deployment (dimension `group`, its main AS group's name; a canary's servers report there too), in one-minute
# periods: out after two minutes above the target, in after five below.
SERVING_NAMESPACE = "INFERSTACK.serving"
REQUESTS_METRIC = "requests_per_s"
SERVING_GROUP_DIMENSION = "group"
REQUEST_METRIC_PERIOD_S = 60
REQUEST_SCALE_OUT_PERIODS, REQUEST_SCALE_IN_PERIODS = 2, 5
# Scale out after one period above the target, scale in after three below (15 minutes); an alarm that persists
# triggers again every period (suppress_duration), the policies' cooldowns pace the steps.
SCALE_OUT_PERIODS, SCALE_IN_PERIODS = 1, 3
CPU_TARGET_BOUNDS_PERCENT = (10, 95)


#### Compute: the fleet ####


def create_fleet(parent: pulumi.Resource, name: str, request: FleetRequest) -> FleetResult:
    plan, fleet = request.plan, request.plan.fleet
    assert fleet is not None, "create_fleet is called for plans with a fleet only"
    # Required and checked with the component's arguments, before anything is created (api_endpoint_problems).
    assert request.api_certificate is not None, "Huawei issues no certificate: api_certificate is required"
    zones = zones_offering(parent, plan.instance_type, plan.zones)
    balancer = load_balancer(parent, name, request, zones)
    load_balancer_logs(parent, name, request, balancer.load_balancer_id)
    group = _scaling_group(parent, name, request, zones, [balancer.pool_id, balancer.weighted_pool_id],
                           balancer.health_checks, reported_as=group_name(name))
    if request.canary is not None:  # the same group, from the canary's plan, in a pool of its own
        canary = request.for_canary()
        canary_group_pool = canary_pool(parent, name, canary, balancer)
        weighted_policy(parent, name, balancer, canary_group_pool, request.canary)
        canary_zones = zones_offering(parent, canary.plan.instance_type, canary.plan.zones)
        # Its servers report under the main group's name (their bundle is the deployment's, create_telemetry): both
        # groups scale on the one series, each to its own plan's target.
        _scaling_group(parent, f"{name}-canary", canary, canary_zones, [canary_group_pool.pool_id],
                       [canary_group_pool.health_check], reported_as=group_name(name))
    balancer.address.apply(lambda address: pulumi.log.info(
        f"{name}: point {request.api_domain} at {address} (a DNS A record); the HTTPS listener serves ELB "
        f"certificate {request.api_certificate}, which must cover {request.api_domain}", resource=parent))
    watched: dict[str, pulumi.Input[str]] = {"load_balancer": balancer.load_balancer_id}
    if request.canary is not None:
        watched["canary_pool"] = canary_group_pool.pool_id
    return FleetResult(endpoint_url=pulumi.Output.from_input(f"https://{request.api_domain}"),
                       load_balancer_address=balancer.address, group_id=group.id, watched=watched)


def _scaling_group(parent: pulumi.Resource, name: str, request: FleetRequest, zones: pulumi.Output[list[str]],
                   pool_ids: Sequence[StrOutput], health_checks: Sequence[pulumi.Resource], *,
                   reported_as: str) -> hw.as_.Group:
    """The plan's servers as an AS group from an AS configuration, members of the ELB pools `pool_ids`."""
    plan, fleet = request.plan, request.plan.fleet
    assert fleet is not None
    template = _server_template(parent, name, request, ecs_user_data(parent, plan, request.user_data))
    group = hw.as_.Group(
        f"{name}-group", scaling_group_name=group_name(name), scaling_configuration_id=template.id,
        vpc_id=request.network_id,
        # The networks are each server's NICs, the first one primary (AS API, CreateScalingGroup: "networks: up
        # to 5 subnets; the first subnet is the primary NIC"): one subnet, which serves every zone of the region
        # (a Huawei subnet's zone is a label; servers in any zone of the VPC take addresses in it).
        networks=[{"id": request.server_subnet_ids[0]}],
        availability_zones=zones, multi_az_scaling_policy="EQUILIBRIUM_DISTRIBUTE",
        min_instance_number=fleet.min_replicas, desire_instance_number=fleet.min_replicas,
        max_instance_number=fleet.max_replicas,
        lbaas_listeners=[{"pool_id": pool_id, "protocol_port": plan.serving.port} for pool_id in pool_ids],
        # A server is judged by the ELB's health check (checked every minute), once its grace period is over;
        # an unhealthy one is removed and replaced.
        health_periodic_audit_method="ELB_AUDIT", health_periodic_audit_time=AS_HEALTH_AUDIT_MINUTES,
        health_periodic_audit_grace_period=fleet.health_check_grace_s,
        # After a scaling action the group ignores alarms this long: a new server's warm-up.
        cool_down_time=fleet.scale_out_cooldown_s,
        # Scale-in removes servers of an old AS configuration first (a new boot script reaches the fleet as
        # servers are replaced: there is no instance refresh in 0.0.12).
        instance_terminate_policy="OLD_CONFIG_OLD_INSTANCE",
        # The agency goes on the group: AS binds it to every server it adds (IamAgencyName in the provider's
        # as_group; the AS configuration has no agency argument).
        agency_name=request.attachment,
        delete_instances="yes", force_delete=True, tags=request.tags,
        # Scaling policies (and operators) move the expected count; `pulumi up` must not reset it to the floor.
        opts=server_options(parent, request.protected, ignore_changes=["desireInstanceNumber"],
                            depends_on=list(health_checks)))
    if plan.device == "cpu":
        _cpu_scaling(parent, name, group, plan, fleet)
    else:
        _request_scaling(parent, name, group, fleet, reported_as)
    return group


def _server_template(parent: pulumi.Resource, name: str, request: FleetRequest,
                     user_data: StrOutput) -> hw.as_.Configuration:
    """The AS configuration: the servers `create_servers` makes, as a template (no public address)."""
    plan = request.plan
    image = server_image(parent, plan)
    instance_config = {
        "flavor": plan.instance_type, "image": image.image_id,
        # kms_id on the system disk: the provider sends it as the disk's __system__encrypted/__system__cmkid
        # metadata, whatever the disk type (as_configuration buildDiskOpts); the SDK's docstring names DATA disks.
        "disks": [{"disk_type": "SYS", "volume_type": SYSTEM_DISK_TYPE, "kms_id": system_disk_key(parent),
                   "size": image.min_disk_gib.apply(lambda gib: max(gib, plan.disk_gib))}],
        "security_group_ids": list(request.firewall_ids), "user_data": user_data,
        # The SDK's docstring calls charging_mode a bandwidth setting; the provider reads "spot" as the market type
        # (as_configuration buildInstanceConfig) and documents postPaid and spot.
        "charging_mode": "spot" if plan.spot else "postPaid",
    }
    # Every argument, the name included, replaces the configuration (ForceNew): a new one per boot script, named
    # after it, is created before the old one (still bound to the group until the group moves) goes. Not after the
    # image, whose changes are ignored below.
    config_name = user_data.apply(lambda text: unique_name(
        [pulumi.get_project(), pulumi.get_stack(), name, "template"], unique_by=[text], max_length=AS_NAME_MAX_LENGTH))
    # A newer image must not replace the template on the next `pulumi up` (as `create_servers` ignores image_id).
    return hw.as_.Configuration(f"{name}-template", scaling_configuration_name=config_name,
                                instance_config=instance_config,
                                opts=child_options(parent, ignore_changes=["instanceConfig.image"]))


#### Scaling ####


def _cpu_scaling(parent: pulumi.Resource, name: str, group: hw.as_.Group, plan: DeploymentPlan, fleet: Fleet) -> None:
    """Step scaling on the group's average CPU usage, which follows the request rate of a server that computes on
    its CPU: one server more above the plan's target, one fewer (slowly) well below it."""
    opts = child_options(parent)
    target = cpu_target_percent(plan, fleet)
    steps = (("out", ">", target, SCALE_OUT_PERIODS, "ADD", fleet.scale_out_cooldown_s),
             ("in", "<", scale_in_percent(target, fleet), SCALE_IN_PERIODS, "REMOVE", fleet.scale_in_cooldown_s))
    for direction, operator, threshold, periods, operation, cooldown_s in steps:
        alarm = hw.cse.Alarmrule(  # Cloud Eye, filed under Cse in 0.0.12
            f"{name}-scale-{direction}-alarm", alarm_name=_as_name(name, f"scale-{direction}"),
            alarm_description=f"inferstack {name}: average CPU {operator} {threshold} % (scale {direction})",
            metric={"namespace": AS_METRICS_NAMESPACE},
            resources=[{"dimensions": [{"name": AS_GROUP_DIMENSION, "value": group.id}]}],
            conditions=[{"metric_name": CPU_METRIC, "period": AS_METRIC_PERIOD_S, "filter": "average",
                         "comparison_operator": operator, "value": threshold, "unit": "%", "count": periods,
                         "suppress_duration": AS_METRIC_PERIOD_S}],
            alarm_actions=[{"type": "autoscaling", "notification_lists": []}], alarm_action_enabled=True, opts=opts)
        hw.as_.Policy(
            f"{name}-scale-{direction}", scaling_group_id=group.id, scaling_policy_name=_as_name(name, direction),
            scaling_policy_type="ALARM", alarm_id=alarm.id, cool_down_time=cooldown_s,
            scaling_policy_action={"operation": operation, "instance_number": 1}, opts=opts)


def _request_scaling(parent: pulumi.Resource, name: str, group: hw.as_.Group, fleet: Fleet,
                     reported_as: str) -> None:
    """Step scaling on the requests per second the group's servers report (`huawei_metrics.py`: each server's rate
    over the last minute, into one series per group, which Cloud Eye averages): one server more above the plan's
    target per server, one fewer (slowly) well below it.

    AS binds an alarm rule to a policy itself ("After the alarm policy is created, an alarm-triggered action of type
    autoscaling is added automatically to the alarm_actions field of that alarm rule": AS API, CreateScalingPolicy,
    alarm_id), so the rule is created without actions and Pulumi leaves the action AS adds alone. The AS user guide
    ("Creating an AS Policy") lists custom monitoring among an alarm policy's metrics; terraform's alarm rule
    document (a 2018 sentence) says an autoscaling action needs SYS.AS: not tried on a real project."""
    opts = child_options(parent)
    target = round(fleet.target_requests_per_s, 3)
    scale_in = round(target * fleet.min_replicas / (fleet.min_replicas + 1), 3)
    series = [{"dimensions": [{"name": SERVING_GROUP_DIMENSION, "value": reported_as}]}]
    steps = (("out", ">", target, REQUEST_SCALE_OUT_PERIODS, "ADD", fleet.scale_out_cooldown_s),
             ("in", "<", scale_in, REQUEST_SCALE_IN_PERIODS, "REMOVE", fleet.scale_in_cooldown_s))
    for direction, operator, threshold, periods, operation, cooldown_s in steps:
        alarm = hw.cse.Alarmrule(
            f"{name}-scale-{direction}-alarm", alarm_name=_as_name(name, f"scale-{direction}"),
            alarm_description=f"inferstack {name}: requests per second per server {operator} {threshold} "
                              f"(scale {direction})",
            metric={"namespace": SERVING_NAMESPACE}, resources=series,
            conditions=[{"metric_name": REQUESTS_METRIC, "period": REQUEST_METRIC_PERIOD_S, "filter": "average",
                         "comparison_operator": operator, "value": threshold, "unit": "count/s", "count": periods,
                         "suppress_duration": REQUEST_METRIC_PERIOD_S}],
            alarm_action_enabled=True,
            opts=child_options(parent, ignore_changes=["alarmActions"]))
        hw.as_.Policy(
            f"{name}-scale-{direction}", scaling_group_id=group.id, scaling_policy_name=_as_name(name, direction),
            scaling_policy_type="ALARM", alarm_id=alarm.id, cool_down_time=cooldown_s,
            scaling_policy_action={"operation": operation, "instance_number": 1}, opts=opts)


def group_name(name: str) -> str:
    """The AS group's name (unique per stack): known before the group exists, so the servers' boot settings carry it
    as the dimension their requests are reported under."""
    return _as_name(name, "fleet")


def cpu_target_percent(plan: DeploymentPlan, fleet: Fleet) -> int:
    """The CPU usage of a server carrying the plan's target rate: the target's share of a server's saturation."""
    saturation_rps = plan.performance.capacity_requests_per_s / plan.replicas
    low, high = CPU_TARGET_BOUNDS_PERCENT
    return min(high, max(low, round(100 * fleet.target_requests_per_s / saturation_rps)))


def scale_in_percent(target: int, fleet: Fleet) -> int:
    """Below this average, one server fewer still leaves the rest under the target, even in the smallest group
    that can shrink (floor + 1 servers)."""
    return target * fleet.min_replicas // (fleet.min_replicas + 1)


def _as_name(name: str, role: str) -> str:
    """AS group, policy and Cloud Eye alarm names: letters, digits, "-"; at most 64 characters; per stack."""
    return unique_name([pulumi.get_project(), pulumi.get_stack(), name, role], max_length=AS_NAME_MAX_LENGTH)

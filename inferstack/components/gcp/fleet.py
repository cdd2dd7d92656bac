"""Google Cloud's fleet: a regional managed instance group built from an instance template, spread over the plan's
zones, healed and rolled over to a new template, scaled by a regional autoscaler on its load balancer's utilization
(load_balancer.py); with a canary, a second group behind the same load balancer.

Sections follow `CloudBackend` (inferstack/components/backend.py).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from inferstack.components.contract import FleetRequest, FleetResult
from inferstack.components.gcp.load_balancer import (
    AUTOHEALING_PROBE,
    LB_UTILIZATION_TARGET,
    SERVING_PORT_NAME,
    CanaryGroup,
    FrontEnd,
    external_load_balancer,
    health_check,
    internal_load_balancer,
)
from inferstack.components.gcp.naming import gcp_labels, gcp_name
from inferstack.components.gcp.servers import (
    SERVICE_ACCOUNT_SCOPES,
    SHIELDED_VM,
    Placement,
    boot_disk_type,
    disk_size_gib,
    guest_accelerators,
    instance_metadata,
    server_image,
    server_placement,
)
from inferstack.components.naming import child_options, fleet_options
from inferstack.components.shared import checked_user_data
from inferstack.plan import DeploymentPlan

# The label every server of a managed group carries (its instance template's), so that alert policies on the Ops
# Agent's gce_instance metrics can address one group (Cloud Monitoring filters: metadata.user_labels."KEY").
GROUP_LABEL = "inferstack-group"

# Compute Engine limit: autohealing's initial delay and a rolling update's min_ready_sec are 0..3600 s (pulumi_gcp
# RegionInstanceGroupManager auto_healing_policies.initial_delay_sec, update_policy.min_ready_sec).
MAX_INITIAL_DELAY_S = 3600

# Name lengths: an instance template's name_prefix of at most 37 characters gets a timestamp suffix (longer ones a
# shorter random one, more prone to collisions: pulumi_gcp InstanceTemplate name_prefix); the group appends
# "-" and four characters to the base instance name, and an instance name has at most 63.
TEMPLATE_PREFIX_LENGTH = 37
BASE_INSTANCE_NAME_LENGTH = 58


#### Compute ####


def create_fleet(parent: pulumi.Resource, name: str, request: FleetRequest, *, provider: str) -> FleetResult:
    """The group (and a canary's), its load balancer and its autoscaler; `provider` names the cloud in the region
    check of the user data."""
    plan = request.plan
    assert plan.fleet is not None, "create_fleet takes a plan with a fleet"
    placement = server_placement(parent, plan)
    template = _instance_template(parent, name, request, placement, provider=provider)
    group = _instance_group(parent, name, request, template, placement)
    canary = None
    if request.canary is not None:  # the same group, from the canary's plan
        canary_request, canary_placement = request.for_canary(), server_placement(parent, request.canary.plan)
        canary_template = _instance_template(parent, f"{name}-canary", canary_request, canary_placement,
                                             provider=provider)
        canary = CanaryGroup(canary_request, _instance_group(parent, f"{name}-canary", canary_request,
                                                             canary_template, canary_placement))
    front_end = (external_load_balancer if request.internet_facing else internal_load_balancer)(
        parent, name, request, group, placement, canary)
    _autoscaler(parent, name, "autoscaler", name, group, plan, front_end.backend)
    if canary is not None and front_end.canary_backend is not None:
        _autoscaler(parent, name, "canary-autoscaler", f"{name} canary", canary.group, canary.request.plan,
                    front_end.canary_backend)
    return FleetResult(endpoint_url=pulumi.Output.from_input(f"https://{request.api_domain}"),
                       load_balancer_address=front_end.address, group_id=group.id,
                       watched=_watched(name, request, group, front_end, canary))


def _watched(name: str, request: FleetRequest, group: gcp.compute.RegionInstanceGroupManager, front_end: FrontEnd,
             canary: CanaryGroup | None) -> dict[str, pulumi.Input[str]]:
    """What the alarms and the dashboard (observability.py) watch: the backend services, the groups and their
    servers' GROUP_LABEL, and which load balancer's metrics."""
    watched: dict[str, pulumi.Input[str]] = {
        "backend_service": front_end.backend.name, "group": group.name,  # type: ignore[attr-defined]
        "group_label": gcp_name(name, "group"),
        "scheme": "external" if request.internet_facing else "internal"}
    if canary is not None and front_end.canary_backend is not None:
        watched.update(canary_backend_service=front_end.canary_backend.name,  # type: ignore[attr-defined]
                       canary_group=canary.group.name, canary_group_label=gcp_name(f"{name}-canary", "group"))
    return watched


def fleet_scheduling(plan: DeploymentPlan) -> gcp.compute.InstanceTemplateSchedulingArgsDict:
    """A fleet server's scheduling: as a loose server's, but a preempted spot server is deleted, not stopped. The
    group recreates a server it did not stop or delete itself either way (Compute Engine, "About repairing VMs in a
    MIG"); deleting frees its disk at once, and its successor boots from the group's current template."""
    if plan.spot:  # the template's own TypedDict: the instance's (scheduling()) has other optional keys
        return {"on_host_maintenance": "TERMINATE", "provisioning_model": "SPOT", "preemptible": True,
                "automatic_restart": False, "instance_termination_action": "DELETE"}
    maintenance = "TERMINATE" if plan.device == "gpu" else "MIGRATE"
    return {"on_host_maintenance": maintenance, "provisioning_model": "STANDARD", "automatic_restart": True}


def _instance_template(parent: pulumi.Resource, name: str, request: FleetRequest, placement: Placement, *,
                       provider: str) -> gcp.compute.InstanceTemplate:
    """What every server of the group is built from: the loose server's machine, image, disk, identity, hardening
    and user data, without an external address. A template cannot change: a new one replaces it (created first,
    under a new name from `name_prefix`), and the group rolls its servers over to it."""
    plan = request.plan
    image = server_image(parent, plan, placement)
    labels = gcp_labels(request.tags)
    # A regional subnetwork serves every zone of the region: the template takes the servers' first one. Its servers
    # carry their group's label (the agent alert policies address them by it).
    return gcp.compute.InstanceTemplate(
        f"{name}-template", name_prefix=gcp_name(name, "tmpl", max_length=TEMPLATE_PREFIX_LENGTH),
        description=f"inferstack {name}: {plan.instance_type} serving {plan.model.name}",
        machine_type=plan.instance_type,
        disks=[{"boot": True, "auto_delete": True, "source_image": image.self_link,
                "disk_type": boot_disk_type(plan.instance_type), "disk_size_gb": disk_size_gib(image, plan),
                "labels": labels}],
        network_interfaces=[{"subnetwork": request.server_subnet_ids[0]}],  # no access_configs: no external address
        tags=list(request.firewall_ids),
        service_account={"email": request.attachment, "scopes": SERVICE_ACCOUNT_SCOPES},
        metadata=checked_user_data(plan, request.user_data, placement.region, provider=provider,
                                   encode=instance_metadata),
        scheduling=fleet_scheduling(plan), guest_accelerators=guest_accelerators(plan),
        shielded_instance_config=SHIELDED_VM, labels={**labels, GROUP_LABEL: gcp_name(name, "group")},
        # A newer image must not roll the whole fleet over on the next `pulumi up`; a new bootstrap does.
        opts=child_options(parent, ignore_changes=["disks[0].sourceImage"]))


def _instance_group(parent: pulumi.Resource, name: str, request: FleetRequest, template: gcp.compute.InstanceTemplate,
                    placement: Placement) -> gcp.compute.RegionInstanceGroupManager:
    plan, fleet = request.plan, request.plan.fleet
    assert fleet is not None
    autohealing = health_check(gcp.compute.HealthCheck, f"{name}-autoheal", plan, AUTOHEALING_PROBE,
                               child_options(parent))
    grace_s = min(fleet.health_check_grace_s, MAX_INITIAL_DELAY_S)  # plan_problems refuses a longer grace
    return gcp.compute.RegionInstanceGroupManager(
        f"{name}-group", name=gcp_name(name, "group"), description=f"inferstack {name}: inference servers",
        base_instance_name=gcp_name(name, "server", max_length=BASE_INSTANCE_NAME_LENGTH),
        versions=[{"name": "primary", "instance_template": template.self_link_unique}],
        # No target_size: the autoscaler sets it (a target size here would fight it).
        distribution_policy_zones=placement.zones, distribution_policy_target_shape="EVEN",
        named_ports=[{"name": SERVING_PORT_NAME, "port": plan.serving.port}],
        auto_healing_policies={"health_check": autohealing.id, "initial_delay_sec": grace_s},
        # A repaired server takes the current template.
        instance_lifecycle_policy={"force_update_on_repair": "YES"},
        # A new template rolls out by the plan's surge (at least one new server per zone: a regional group takes 0
        # or at least its zone count), none of the old ones down until the new ones count; a new server counts once
        # its autohealing health check passes and the grace is over (min_ready_sec: "(Optional, Beta)" in the
        # provider's docs, so it goes through Compute Engine's beta API).
        update_policy={"type": "PROACTIVE", "minimal_action": "REPLACE", "replacement_method": "SUBSTITUTE",
                       "instance_redistribution_type": "PROACTIVE",
                       "max_surge_fixed": plan.rolling_update.surge,
                       "max_unavailable_fixed": 0, "min_ready_sec": grace_s},
        # Protected (production): Pulumi refuses to delete or replace the group, and with it every server.
        opts=fleet_options(parent, request.protected))


def _autoscaler(parent: pulumi.Resource, name: str, role: str, label: str,
                group: gcp.compute.RegionInstanceGroupManager, plan: DeploymentPlan, backend: pulumi.Resource) -> None:
    """A group's autoscaler (`role`: the main group's or the canary's), from its own plan's fleet."""
    fleet = plan.fleet
    assert fleet is not None
    # Load-balancing utilization counts the backend service's requests: the autoscaler needs the group to be its
    # backend first. Initialization period (cooldown_period): a new server is not counted during its cold start.
    gcp.compute.RegionAutoscaler(
        f"{name}-{role}", name=gcp_name(name, role), target=group.self_link,
        description=f"inferstack {label}: {fleet.target_requests_per_s} requests/s per server",
        autoscaling_policy={
            "min_replicas": fleet.min_replicas, "max_replicas": fleet.max_replicas, "mode": "ON",
            "cooldown_period": fleet.scale_out_cooldown_s,
            "load_balancing_utilization": {"target": LB_UTILIZATION_TARGET},
            # Slow scale-in: at most one server fewer than the peak of the last scale-in period.
            "scale_in_control": {"max_scaled_in_replicas": {"fixed": 1},
                                 "time_window_sec": fleet.scale_in_cooldown_s}},
        opts=child_options(parent, depends_on=[backend]))

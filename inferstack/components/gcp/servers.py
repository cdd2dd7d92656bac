"""Google Cloud's servers: what every Compute Engine server is made of (machine series and its boot disk, image,
zones that offer the machine type, GPUs, scheduling, hardened metadata, Shielded VM), and loose servers, one
instance per replica. A fleet's template (fleet.py) builds its servers from the same parts.

Sections follow `CloudBackend` (inferstack/components/backend.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from inferstack.components.contract import ServersRequest, ServersResult, StrOutput
from inferstack.components.gcp.naming import gcp_labels
from inferstack.components.gcp.provider import provider_region, result_field
from inferstack.components.lookups import answered
from inferstack.components.naming import invoke_options, server_options
from inferstack.components.shared import checked_user_data, first_zones, nth
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan

# Compute Engine limit: one metadata value holds at most 256 KB. The cloud-config goes in `user-data` as plain
# text (about 50 KB), so no compression is needed; cloud-init reads it from the GCE datasource.
METADATA_VALUE_LIMIT_BYTES = 256 * 1024

# Images, looked up by family at deploy time. GPU: Canonical's Ubuntu 22.04 accelerator images carry the NVIDIA
# 580 driver built and signed by Canonical, so they boot with Shielded VM secure boot on (an unsigned driver,
# such as NVIDIA's .run installer builds, would not load). CPU: plain Ubuntu 22.04. One OS for the bootstrap.
IMAGE_FAMILIES: Mapping[tuple[str, str], tuple[str, str]] = {
    ("gpu", "X86_64"): ("ubuntu-os-accelerator-images", "ubuntu-accelerator-2204-amd64-with-nvidia-580"),
    ("gpu", "ARM64"): ("ubuntu-os-accelerator-images", "ubuntu-accelerator-2204-arm64-with-nvidia-580"),
    ("cpu", "X86_64"): ("ubuntu-os-cloud", "ubuntu-2204-lts"),
    ("cpu", "ARM64"): ("ubuntu-os-cloud", "ubuntu-2204-lts-arm64"),
}


@dataclass(frozen=True)
class BootDisk:
    """The boot disk type of a machine series, and where Google states that the series supports it."""

    type: str
    source: str


# The boot disk type by machine series (`machine_series`), from the "Supported disk types for <series>" section of
# each series on the Compute Engine machine-family pages. Balanced Persistent Disk wherever the series takes it
# (what every server has booted from so far: another type would replace running servers); Hyperdisk Balanced,
# the Hyperdisk type that boots, where the series takes no Persistent Disk. A series missing here is refused
# before anything is created (`GcpBackend.plan_problems`): guessing is how A3 Ultra got pd-balanced.
_GENERAL = "cloud.google.com/compute/docs/general-purpose-machines"
_COMPUTE = "cloud.google.com/compute/docs/compute-optimized-machines"
_MEMORY = "cloud.google.com/compute/docs/memory-optimized-machines"
_STORAGE = "cloud.google.com/compute/docs/storage-optimized-machines"
_ACCELERATOR = "cloud.google.com/compute/docs/accelerator-optimized-machines"
_PD, _HYPERDISK = "pd-balanced", "hyperdisk-balanced"
BOOT_DISKS: Mapping[str, BootDisk] = {
    # General-purpose: Persistent Disk up to the third generation; the fourth takes Hyperdisk only.
    "e2": BootDisk(_PD, f"{_GENERAL}: E2"),
    "n1": BootDisk(_PD, f"{_GENERAL}: N1 (also N1 with attached GPUs, cloud.google.com/compute/docs/gpus)"),
    "n2": BootDisk(_PD, f"{_GENERAL}: N2"),
    "n2d": BootDisk(_PD, f"{_GENERAL}: N2D"),
    "t2d": BootDisk(_PD, f"{_GENERAL}: Tau T2D"),
    "t2a": BootDisk(_PD, f"{_GENERAL}: Tau T2A"),
    "c3": BootDisk(_PD, f"{_GENERAL}: C3 (virtual machine types)"),
    "c3-metal": BootDisk(_HYPERDISK, f"{_GENERAL}: C3 bare metal (*-metal) takes Hyperdisk only"),
    "c3d": BootDisk(_PD, f"{_GENERAL}: C3D"),
    "c4": BootDisk(_HYPERDISK, f"{_GENERAL}: C4, Hyperdisk only"),
    "c4a": BootDisk(_HYPERDISK, f"{_GENERAL}: C4A, Hyperdisk only"),
    "c4d": BootDisk(_HYPERDISK, f"{_GENERAL}: C4D, Hyperdisk only"),
    "n4": BootDisk(_HYPERDISK, f"{_GENERAL}: N4, Hyperdisk only"),
    "n4a": BootDisk(_HYPERDISK, f"{_GENERAL}: N4A, Hyperdisk only"),
    "n4d": BootDisk(_HYPERDISK, f"{_GENERAL}: N4D, Hyperdisk only"),
    # Compute-optimized.
    "c2": BootDisk(_PD, f"{_COMPUTE}: C2"),
    "c2d": BootDisk(_PD, f"{_COMPUTE}: C2D"),
    "h3": BootDisk(_PD, f"{_COMPUTE}: H3 (Balanced Persistent Disk, its only disk type at launch)"),
    "h4d": BootDisk(_HYPERDISK, f"{_COMPUTE}: H4D, Hyperdisk only"),
    # Memory- and storage-optimized.
    "m1": BootDisk(_PD, f"{_MEMORY}: M1"),
    "m2": BootDisk(_PD, f"{_MEMORY}: M2"),
    "m3": BootDisk(_PD, f"{_MEMORY}: M3"),
    "m4": BootDisk(_HYPERDISK, f"{_MEMORY}: M4, Hyperdisk only"),
    "x4": BootDisk(_HYPERDISK, f"{_MEMORY}: X4, Hyperdisk only"),
    "z3": BootDisk(_PD, f"{_STORAGE}: Z3"),
    # Accelerator-optimized: A3 High, Mega and Edge (H100) take Persistent Disk; A3 Ultra (H200) and later take
    # Hyperdisk only.
    "a2": BootDisk(_PD, f"{_ACCELERATOR}: A2 (Standard and Ultra)"),
    "a3": BootDisk(_PD, f"{_ACCELERATOR}: A3 High, A3 Mega, A3 Edge"),
    "a3-ultragpu": BootDisk(_HYPERDISK, f"{_ACCELERATOR}: A3 Ultra, Hyperdisk only"),
    "a4": BootDisk(_HYPERDISK, f"{_ACCELERATOR}: A4, Hyperdisk only"),
    "a4x": BootDisk(_HYPERDISK, f"{_ACCELERATOR}: A4X, Hyperdisk only"),
    "g2": BootDisk(_PD, f"{_ACCELERATOR}: G2"),
    "g4": BootDisk(_HYPERDISK, f"{_ACCELERATOR}: G4, Hyperdisk only"),
}

# Metadata keys: OS Login instead of SSH keys (access is an IAM grant, revoked with it); project-wide keys are
# refused; the legacy metadata endpoints that answer without the Metadata-Flavor header stay off; no serial console.
HARDENED_METADATA: Mapping[str, str] = {
    "enable-oslogin": "TRUE",
    "block-project-ssh-keys": "TRUE",
    "disable-legacy-endpoints": "TRUE",
    "serial-port-enable": "FALSE",
}

# Shielded VM: secure boot (the accelerator image's driver is signed), vTPM, integrity monitoring.
SHIELDED_VM: gcp.compute.InstanceShieldedInstanceConfigArgsDict = {
    "enable_secure_boot": True, "enable_vtpm": True, "enable_integrity_monitoring": True}

# The instance takes its service account with the cloud-platform scope; IAM grants (identity.py) decide what it may
# do.
SERVICE_ACCOUNT_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


#### Compute ####


def create_servers(parent: pulumi.Resource, name: str, request: ServersRequest, *,
                   provider: str) -> ServersResult:
    """One instance per replica, spread over the zones that offer the machine type; `provider` names the cloud in
    the region check of the user data."""
    plan = request.plan
    placement = server_placement(parent, plan)
    image = server_image(parent, plan, placement)
    metadata = checked_user_data(plan, request.user_data, placement.region, provider=provider,
                                 encode=instance_metadata)
    labels = gcp_labels(request.tags)
    result = ServersResult(instance_ids=[], public_ips=[], private_ips=[])
    for index in range(plan.instance_count):
        server = gcp.compute.Instance(
            f"{name}-server-{index}", machine_type=plan.instance_type,
            zone=placement.zones.apply(nth(index % plan.zones)),
            boot_disk={"auto_delete": True, "initialize_params": {
                "image": image.self_link, "type": boot_disk_type(plan.instance_type), "labels": labels,
                "size": disk_size_gib(image, plan)}},
            network_interfaces=[{"subnetwork": request.subnet_ids[index % len(request.subnet_ids)],
                                 "access_configs": [{}]}],  # an ephemeral public address, for egress
            tags=list(request.firewall_ids),
            service_account={"email": request.attachment, "scopes": SERVICE_ACCOUNT_SCOPES},
            metadata=metadata, scheduling=scheduling(plan), guest_accelerators=guest_accelerators(plan),
            shielded_instance_config=SHIELDED_VM,
            # "Enable deletion protection on this instance" (pulumi_gcp compute.Instance); an update in place.
            deletion_protection=request.protected, allow_stopping_for_update=True, labels=labels,
            # A newer image must not replace a running server on the next `pulumi up`; a new bootstrap does,
            # because cloud-init runs once per instance.
            opts=server_options(parent, request.protected, ignore_changes=["bootDisk.initializeParams.image"],
                                replace_on_changes=["metadata"]))
        result.instance_ids.append(server.id)
        result.public_ips.append(server.network_interfaces.apply(_public_ip))
        result.private_ips.append(answered(server.network_interfaces.apply(
            lambda nics: result_field(nics[0], "network_ip")), "gcp:compute/instance:Instance networkIp").apply(str))
    return result


#### What every server is built from ####


@dataclass(frozen=True)
class Placement:
    """Where a plan's servers can run, looked up at deploy time."""

    zones: pulumi.Output[list[str]]
    """Zones of the provider's region that offer the machine type, the configured zone (gcp:zone) first."""
    architecture: StrOutput
    """X86_64 or ARM64, as the machine type reports it."""
    region: StrOutput
    """The provider's region, to check the plan against."""


def server_placement(parent: pulumi.Resource, plan: DeploymentPlan) -> Placement:
    """Where the servers can run: not every zone has every GPU (looked up at deploy time)."""
    invoke = invoke_options(parent)
    client = gcp.organizations.get_client_config_output(opts=invoke)
    query = f"name = {plan.instance_type}"

    def offers_in(zones: Sequence[str]) -> pulumi.Output[dict[str, list[Any]]]:
        found = [answered(gcp.compute.get_machine_types_output(zone=zone, filter=query, opts=invoke).machine_types,
                          "gcp:compute/getMachineTypes:getMachineTypes machineTypes") for zone in zones]
        return pulumi.Output.all(*found).apply(
            lambda types: {zone: list(t) for zone, t in zip(zones, types, strict=True) if t})

    offers: pulumi.Output[dict[str, list[Any]]] = answered(gcp.compute.get_zones_output(
        status="UP", opts=invoke).names, "gcp:compute/getZones:getZones names").apply(offers_in)
    zones = pulumi.Output.all(offers, client.zone).apply(lambda args: choose_zones(plan, args[0], args[1]))
    architecture = offers.apply(lambda by_zone: _architecture(by_zone))
    return Placement(zones=zones, architecture=architecture, region=provider_region(client))


def choose_zones(plan: DeploymentPlan, offers: Mapping[str, Any], preferred: str | None) -> list[str]:
    """The plan's zone count of zones offering the machine type, by name, the provider's zone first."""
    return first_zones(sorted(offers, key=lambda zone: (zone != preferred, zone)), plan.zones, plan.instance_type)


def _architecture(offers: Mapping[str, Sequence[Any]]) -> str:
    reported = {result_field(machine, "architecture") for types in offers.values() for machine in types}
    return "ARM64" if "ARM64" in reported else "X86_64"  # legacy types report none: they are x86


def machine_series(machine_type: str) -> str:
    """The series of a machine type as BOOT_DISKS names it: the name's first part (`a3` of a3-highgpu-8g), or a
    variant that takes other disks than its series (`a3-ultragpu`, `c3-metal`)."""
    parts = machine_type.split("-")
    variants = [f"{parts[0]}-metal"] if parts[-1] == "metal" else []
    variants += [f"{parts[0]}-{parts[1]}"] if len(parts) > 1 else []
    return next((variant for variant in variants if variant in BOOT_DISKS), parts[0])


def boot_disk_type(machine_type: str) -> str:
    """The boot disk type the machine type's series supports (BOOT_DISKS); KeyError for a series not listed."""
    return BOOT_DISKS[machine_series(machine_type)].type


def guest_accelerators(plan: DeploymentPlan) -> list[gcp.compute.InstanceGuestAcceleratorArgsDict]:
    """GPUs attached to a general-purpose machine (N1 + T4); A2/A3/G2 types bundle theirs and attach nothing."""
    if plan.accelerator is None or plan.accelerator.attach_type is None:
        return []
    return [{"type": plan.accelerator.attach_type, "count": plan.accelerator.count}]


def scheduling(plan: DeploymentPlan) -> gcp.compute.InstanceSchedulingArgsDict:
    """GPU servers cannot live-migrate, so host maintenance stops them; spot servers stop when preempted."""
    maintenance = "TERMINATE" if plan.device == "gpu" or plan.spot else "MIGRATE"
    if plan.spot:
        return {"on_host_maintenance": maintenance, "provisioning_model": "SPOT", "preemptible": True,
                "automatic_restart": False, "instance_termination_action": "STOP"}
    return {"on_host_maintenance": maintenance, "provisioning_model": "STANDARD", "automatic_restart": True}


def instance_metadata(user_data: str) -> dict[str, str]:
    """The instance's metadata: the cloud-config for cloud-init, and the hardening keys."""
    size = len(user_data.encode())
    if size > METADATA_VALUE_LIMIT_BYTES:
        raise input_error("bootstrap", f"is {size} bytes; a Compute Engine metadata value holds "
                          f"{METADATA_VALUE_LIMIT_BYTES}", fix="move large files out of the cloud-config "
                          "(fetch them from the model bucket)")
    return {**HARDENED_METADATA, "user-data": user_data}


def _public_ip(interfaces: Sequence[Any]) -> str:
    configs = result_field(interfaces[0], "access_configs") or []
    return str(result_field(configs[0], "nat_ip") or "") if configs else ""


def server_image(parent: pulumi.Resource, plan: DeploymentPlan,
                 placement: Placement) -> pulumi.Output[gcp.compute.GetImageResult]:
    """The workload's own image (`plan.startup.image` brought: `brought_image`), or the newest image of the family
    for the plan's device and the machine type's architecture (IMAGE_FAMILIES)."""
    if plan.startup.image == "brought" and plan.startup.image_id:
        project, name, family = brought_image(plan.startup.image_id)
        return gcp.compute.get_image_output(project=project, name=name, family=family, opts=invoke_options(parent))
    return gcp.compute.get_image_output(
        project=placement.architecture.apply(lambda arch: IMAGE_FAMILIES[(plan.device, arch)][0]),
        family=placement.architecture.apply(lambda arch: IMAGE_FAMILIES[(plan.device, arch)][1]),
        opts=invoke_options(parent))


def brought_image(image_id: str) -> tuple[str, str | None, str | None]:
    """(project, name, family) of a brought image: `projects/P/global/images/NAME` names one image,
    `projects/P/global/images/family/F` the newest of a family (the shape `CloudFacts.image_id_pattern` admits).
    get_image takes no self link, so the lookup gets its project and its name or family."""
    parts = image_id.split("/")
    if len(parts) == 6 and parts[4] == "family":
        return parts[1], None, parts[5]
    if len(parts) == 5 and parts[0] == "projects" and parts[2:4] == ["global", "images"]:
        return parts[1], parts[4], None
    raise input_error("plan.startup.image_id", "is not a Compute Engine image (projects/P/global/images/NAME, or "
                      "projects/P/global/images/family/F)", value=image_id,
                      fix="give the image's path within its project, as the workload's startup.image")


def disk_size_gib(image: pulumi.Output[gcp.compute.GetImageResult], plan: DeploymentPlan) -> pulumi.Output[int]:
    """The plan's disk, or the image's own size where that is larger (a disk is never smaller than its image)."""
    return image.disk_size_gb.apply(lambda gib: max(gib or 0, plan.disk_gib))


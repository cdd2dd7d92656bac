"""Huawei Cloud servers: ECS instances one by one (a plan without a fleet), and what a fleet's template shares with
them: the image looked up for the flavor (or the workload's own), the encrypted system disk, the user data as ECS
takes it."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_huaweicloud as hw

from inferstack.clouds import CLOUD_FACTS
from inferstack.components.contract import ServersRequest, ServersResult, StrOutput
from inferstack.components.huawei.lookups import (
    IMAGES_LOOKUP,
    KEY_LOOKUP,
    lookup_field,
    provider_region,
    zones_offering,
)
from inferstack.components.huawei.network import eip
from inferstack.components.naming import child_options, server_options
from inferstack.components.shared import checked_user_data, compressed_user_data, nth
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan

# ECS API ("Creating an ECS"): user data is at most 32 KB before Base64 encoding. The cloud-config is sent
# gzip-compressed and Base64-encoded; the provider passes Base64 through unchanged (golangsdk cloudservers
# ToServerCreateMap), and cloud-init recognises gzip by its magic bytes and unpacks it.
USER_DATA_LIMIT_BYTES = 32 * 1024

# Public IMS images, looked up at deploy time for the flavor (the lookup's flavor_id filter keeps only images
# the flavor can boot). Ubuntu 22.04 everywhere, so the bootstrap targets one OS; GPU flavors prefer the variant
# with the Tesla driver preinstalled, named "Ubuntu 22.04 server 64bit with Tesla Driver <ver> and CUDA <ver>".
UBUNTU_IMAGE_NAME = "Ubuntu 22.04 server 64bit"
TESLA_DRIVER_SUFFIX = " with Tesla Driver"

# General-purpose SSD, the provider's default, written out so that a plan reads the same in every region.
SYSTEM_DISK_TYPE = "GPSSD"
# EVS's default KMS key: it exists once EVS encryption has been authorized in the region (docs/deploy-huawei.md).
EVS_DEFAULT_KEY_ALIAS = "evs/default"


#### Compute ####


def create_servers(parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
    plan = request.plan
    image = server_image(parent, plan)
    zones = zones_offering(parent, plan.instance_type, plan.zones)
    disk_key = system_disk_key(parent)
    user_data = ecs_user_data(parent, plan, request.user_data)
    result = ServersResult(instance_ids=[], public_ips=[], private_ips=[])
    for index in range(plan.instance_count):
        resource = f"{name}-server-{index}"
        server = hw.ecs.Instance(
            resource, flavor_id=plan.instance_type, image_id=image.image_id,
            availability_zone=zones.apply(nth(index % plan.zones)),
            networks=[{"uuid": request.subnet_ids[index % len(request.subnet_ids)]}],
            security_group_ids=list(request.firewall_ids), agency_name=request.attachment,
            system_disk_type=SYSTEM_DISK_TYPE, system_disk_kms_key_id=disk_key,
            system_disk_size=image.min_disk_gib.apply(lambda gib: max(gib, plan.disk_gib)),
            delete_disks_on_termination=True, user_data=user_data,
            charging_mode="spot" if plan.spot else "postPaid", tags=request.tags,
            # A newer image must not replace a running server on the next `pulumi up`; roll it out with
            # `pulumi up --replace <urn>` when you choose to (with protection lifted). No cloud deletion flag
            # exists here: Pulumi's protect alone guards protected servers.
            opts=server_options(parent, request.protected, ignore_changes=["image_id"]))
        result.instance_ids.append(server.id)
        result.private_ips.append(server.access_ip_v4)
        # Only a public endpoint gets an elastic IP; egress goes through the network's NAT gateway.
        result.public_ips.append(_public_address(parent, resource, server, request.tags)
                                 if request.public_endpoint else pulumi.Output.from_input(""))
    return result


#### What single servers and a fleet's template share ####


def ecs_user_data(parent: pulumi.Resource, plan: DeploymentPlan, user_data: StrOutput) -> StrOutput:
    """The user data as ECS and AS take it: Base64 of gzip, at most 32 KB of gzip (the provider passes Base64
    through unchanged: golangsdk cloudservers and autoscaling configurations ToCreateMap)."""
    return checked_user_data(plan, user_data, provider_region(parent), provider=CLOUD_FACTS["huawei"].display_name,
                             encode=functools.partial(compressed_user_data, limit_bytes=USER_DATA_LIMIT_BYTES,
                                                      service="ECS"))


@dataclass(frozen=True)
class ServerImage:
    image_id: StrOutput
    min_disk_gib: pulumi.Output[int]
    """The image's minimum system disk: the disk may not be smaller."""


def server_image(parent: pulumi.Resource, plan: DeploymentPlan) -> ServerImage:
    """The workload's own image (`plan.startup.image` brought, looked up by its IMS id), or the newest public Ubuntu
    22.04 image the flavor can boot, with the Tesla driver for GPU plans if offered."""
    if plan.startup.image == "brought" and plan.startup.image_id:
        # By id alone: a brought image may be private, shared or from the marketplace (no visibility filter).
        found = lookup_field(parent, IMAGES_LOOKUP, {"imageId": plan.startup.image_id}, "images", empty=[])
        chosen = found.apply(lambda images: brought_image(images, plan))
    else:
        query = {"nameRegex": f"^{re.escape(UBUNTU_IMAGE_NAME)}", "visibility": "public",
                 "flavorId": plan.instance_type}
        found = lookup_field(parent, IMAGES_LOOKUP, query, "images", empty=[])
        chosen = found.apply(lambda images: choose_image(images, plan))
    return ServerImage(image_id=chosen.apply(lambda image: str(image["id"])),
                       min_disk_gib=chosen.apply(lambda image: int(image.get("minDiskGb") or 0)))


def brought_image(images: Sequence[Mapping[str, Any]], plan: DeploymentPlan) -> Mapping[str, Any]:
    """The brought image, as IMS describes it (its minimum disk sizes the system disk)."""
    if not images:
        raise input_error("plan.startup.image_id", f"names no image this account can use in {plan.region}",
                          value=plan.startup.image_id, fix="give the IMS id of an image of the region, private to "
                          "the account or shared with it")
    return images[0]


def choose_image(images: Sequence[Mapping[str, Any]], plan: DeploymentPlan) -> Mapping[str, Any]:
    """GPU plans: the newest driver-ready image, else plain Ubuntu (the bootstrap installs the driver)."""
    def newest(candidates: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        return max(candidates, key=lambda image: str(image.get("createdAt", ""))) if candidates else None

    plain = newest([image for image in images if image.get("name") == UBUNTU_IMAGE_NAME])
    driver_ready = newest([image for image in images
                           if str(image.get("name", "")).startswith(UBUNTU_IMAGE_NAME + TESLA_DRIVER_SUFFIX)])
    chosen = (driver_ready or plain) if plan.device == "gpu" else plain
    if chosen is None:
        raise input_error("plan.instance_type", f"no public '{UBUNTU_IMAGE_NAME}' image boots {plan.instance_type} "
                          f"in {plan.region}", value=plan.instance_type,
                          fix="plan for another flavor or region (inferstack plans for Ubuntu 22.04)")
    return chosen


def system_disk_key(parent: pulumi.Resource) -> StrOutput:
    """The EVS default KMS key, which encrypts the servers' system disks."""
    return lookup_field(parent, KEY_LOOKUP, {"keyAlias": EVS_DEFAULT_KEY_ALIAS}, "keyId").apply(str)


#### Helpers ####


def _public_address(parent: pulumi.Resource, resource: str, server: hw.ecs.Instance,
                    tags: Mapping[str, str]) -> StrOutput:
    address = eip(parent, f"{resource}-eip", tags)
    association = hw.ecs.EipAssociate(f"{resource}-eip-association", public_ip=address.address,
                                      instance_id=server.id, opts=child_options(parent))
    # The endpoint is announced once the address is bound to the server.
    return pulumi.Output.all(address.address, association.id).apply(lambda values: str(values[0]))

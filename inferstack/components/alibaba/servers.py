"""Alibaba servers that stand alone: one ECS instance per replica, from the newest Ubuntu 22.04 system image (or the
workload's own), with
metadata tokens required, an encrypted ESSD system disk, the RAM role at creation and the compressed cloud-config.

The image, the system disk and the user data are a fleet's too (fleet.py builds its launch template from them).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from inferstack.clouds import CLOUD_FACTS
from inferstack.components.alibaba.names import current_region
from inferstack.components.alibaba.network import PUBLIC_BANDWIDTH_MBPS
from inferstack.components.contract import ServersRequest, ServersResult, StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import invoke_options, server_options
from inferstack.components.shared import checked_user_data, compressed_user_data
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan

# ECS accepts at most 32 KB of user data. The cloud-config is sent gzip-compressed and Base64-encoded (cloud-init
# on Alibaba's Ubuntu images unpacks gzip by itself). Read strictly, the 32 KB bound the Base64 text: that is 24 KB
# of gzip (Base64 writes 4 characters per 3 bytes).
USER_DATA_LIMIT_BYTES = 32 * 1024 * 3 // 4
SYSTEM_DISK_CATEGORY = "cloud_essd"

# Alibaba's Ubuntu 22.04 system images (`ubuntu_22_04_x64_20G_alibase_<date>.vhd`, arm64 alike); filtering by
# instance type leaves the architecture that runs on it. No driver-ready GPU image has a stable name to look up,
# so GPU servers use the same image and the bootstrap installs the driver (docs/bootstrap.md, phase `driver`).
IMAGE_OWNER = "system"
IMAGE_NAME_REGEX = r"^ubuntu_22_04_(x64|arm64)_"

#### Compute ####


def create_servers(parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
    plan = request.plan
    image = server_image(parent, plan)
    user_data = ecs_user_data(parent, plan, request.user_data)
    result = ServersResult(instance_ids=[], public_ips=[], private_ips=[])
    for index in range(plan.instance_count):
        server = alicloud.ecs.Instance(
            f"{name}-server-{index}", instance_name=f"{name}-server-{index}", image_id=image.image_id,
            instance_type=plan.instance_type, vswitch_id=request.subnet_ids[index % len(request.subnet_ids)],
            security_groups=list(request.firewall_ids),
            # role_name (deprecated since provider 1.275.0 in favour of ecs.RamRoleAttachment) is passed to
            # RunInstances, so the role's credentials exist at first boot; an attachment made after the
            # instance starts would race the bootstrap's first read of the model bucket.
            role_name=request.attachment,
            http_endpoint="enabled", http_tokens="required",
            system_disk_category=SYSTEM_DISK_CATEGORY, system_disk_encrypted=True,
            system_disk_size=system_disk_gib(image, plan),
            instance_charge_type="PostPaid", internet_charge_type="PayByTraffic",
            internet_max_bandwidth_out=PUBLIC_BANDWIDTH_MBPS, user_data=user_data,
            # "It does not work when the instance is spot" (pulumi_alicloud ecs.Instance deletion_protection).
            deletion_protection=request.protected and not plan.spot,
            spot_strategy="SpotAsPriceGo" if plan.spot else None,
            spot_interruption_behavior="Terminate" if plan.spot else None,
            tags=request.tags, volume_tags=request.tags,
            # cloud-init runs once per instance: new user data means a new server, as on AWS. A newer image
            # must not touch a running server on the next `pulumi up`; roll it out with
            # `pulumi up --replace <urn>` when you choose to (with protection lifted).
            opts=server_options(parent, request.protected, replace_on_changes=["userData"],
                                ignore_changes=["imageId"]))
        result.instance_ids.append(server.id)
        result.public_ips.append(server.public_ip.apply(lambda ip: ip or ""))
        result.private_ips.append(server.private_ip)
    return result


#### What a single server and a fleet's template share ####


@dataclass(frozen=True)
class ServerImage:
    image_id: StrOutput
    size_gib: pulumi.Output[int]
    """Size of the image: the system disk may not be smaller."""


def server_image(parent: pulumi.Resource, plan: DeploymentPlan) -> ServerImage:
    """The workload's own image (`plan.startup.image` brought, looked up by its id), or the newest Ubuntu 22.04 system
    image that runs on the plan's instance type, looked up at deploy time."""
    if plan.startup.image == "brought" and plan.startup.image_id:
        # By id alone: no owner filter (a brought image may be the account's own, shared by another, or from the
        # marketplace), nor an instance-type one (the user chose it for the plan's type).
        found = alicloud.ecs.get_images_output(image_id=plan.startup.image_id, opts=invoke_options(parent))
        problem = ("plan.startup.image_id", f"names no image this account can use in {plan.region}",
                   plan.startup.image_id, "give an image id of the region, shared with the account (m-...)")
    else:
        found = alicloud.ecs.get_images_output(owners=IMAGE_OWNER, name_regex=IMAGE_NAME_REGEX, most_recent=True,
                                               instance_type=plan.instance_type, os_type="linux",
                                               opts=invoke_options(parent))
        problem = ("plan.instance_type", "has no Ubuntu 22.04 system image in this region", plan.instance_type,
                   "plan for another region or instance type")

    def newest(images: Sequence[Any]) -> Any:
        if not images:
            field, message, value, fix = problem
            raise input_error(field, message, value=value, fix=fix)
        return images[0]

    image = answered(found.images, "alicloud:ecs/getImages:getImages images").apply(newest)
    return ServerImage(image_id=image.apply(lambda i: str(i.id)), size_gib=image.apply(lambda i: int(i.size or 0)))


def system_disk_gib(image: ServerImage, plan: DeploymentPlan) -> pulumi.Output[int]:
    """The plan's disk, or the image's size where that is larger (a system disk may not be smaller)."""
    return image.size_gib.apply(lambda gib: max(gib, plan.disk_gib))


def ecs_user_data(parent: pulumi.Resource, plan: DeploymentPlan, user_data: StrOutput) -> StrOutput:
    """The cloud-config as ECS takes it, a single server's or a launch template's: Base64 of gzip, checked against
    the limit, once the provider's region is known to be the plan's."""
    return checked_user_data(plan, user_data, current_region(parent), provider=CLOUD_FACTS["alibaba"].display_name,
                             encode=functools.partial(compressed_user_data, limit_bytes=USER_DATA_LIMIT_BYTES,
                                                      service="ECS"))

"""Servers: single EC2 instances (IMDSv2, hop limit 1, encrypted gp3), the image they boot (the DLAMI or Ubuntu, looked
up at deploy time; the workload's own; or the one image.py bakes) and their user data; a fleet's launch template takes
the same image, user data and hardening."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from inferstack.components.aws.lookups import provider_region
from inferstack.components.aws.tags import named
from inferstack.components.contract import ServersRequest, ServersResult, StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import invoke_options, server_options
from inferstack.components.shared import checked_user_data, compressed_user_data
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan

# EC2 API limit: user data is at most 16 KB before base64 encoding. The cloud-config is sent gzip-compressed
# (cloud-init decompresses it), which is what keeps a full bootstrap under the limit.
USER_DATA_LIMIT_BYTES = 16 * 1024

# Hop limit 1: only the host reaches the metadata service; a container on a bridge network cannot borrow the
# server's credentials. The bootstrap therefore fetches the model and secrets on the host.
METADATA_HOP_LIMIT = 1

# Images, resolved at deploy time from public SSM parameters (AWS DLAMI guide "Finding the ID of a DLAMI";
# Canonical's Ubuntu parameters). Both are Ubuntu 22.04, so the bootstrap targets one OS.
IMAGE_PARAMETERS: Mapping[tuple[str, str], str] = {
    ("gpu", "x86_64"): "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    ("gpu", "arm64"): "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    ("cpu", "x86_64"): "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
    ("cpu", "arm64"): "/aws/service/canonical/ubuntu/server/22.04/stable/current/arm64/hvm/ebs-gp2/ami-id",
}

#### Compute ####


def create_servers(parent: pulumi.Resource, name: str, request: ServersRequest) -> ServersResult:
    plan = request.plan
    image = server_image(parent, plan)
    encoded_user_data = user_data(parent, plan, request.user_data)
    spot: aws.ec2.InstanceInstanceMarketOptionsArgsDict = {"market_type": "spot", "spot_options": {
        "spot_instance_type": "one-time", "instance_interruption_behavior": "terminate"}}
    result = ServersResult(instance_ids=[], public_ips=[], private_ips=[])
    for index in range(plan.instance_count):
        server = aws.ec2.Instance(
            f"{name}-server-{index}", ami=image.image_id, instance_type=plan.instance_type,
            subnet_id=request.subnet_ids[index % len(request.subnet_ids)],
            vpc_security_group_ids=list(request.firewall_ids), iam_instance_profile=request.attachment,
            metadata_options={"http_endpoint": "enabled", "http_tokens": "required",
                              "http_put_response_hop_limit": METADATA_HOP_LIMIT,
                              "instance_metadata_tags": "disabled"},
            root_block_device={"volume_type": "gp3", "encrypted": True, "delete_on_termination": True,
                               "volume_size": image.root_volume_size(plan),
                               "tags": named(request.tags, f"{name}-server-{index}")},
            user_data_base64=encoded_user_data, user_data_replace_on_change=True,  # cloud-init runs once per instance
            # Changed in place (ModifyInstanceAttribute): "You can set the value of this attribute when you
            # launch an instance, or while the instance is running or stopped", and "you can't enable
            # termination protection for Spot Instances" (EC2 User Guide, "Change instance termination
            # protection").
            disable_api_termination=request.protected and not plan.spot,
            instance_market_options=spot if plan.spot else None,
            tags=named(request.tags, f"{name}-server-{index}"),
            # A newer image must not replace a running server on the next `pulumi up`; roll it out with
            # `pulumi up --replace <urn>` when you choose to (with protection lifted).
            opts=server_options(parent, request.protected, ignore_changes=["ami"]))
        result.instance_ids.append(server.id)
        result.public_ips.append(server.public_ip.apply(lambda ip: ip or ""))
        result.private_ips.append(answered(server.private_ip, "aws:ec2/instance:Instance privateIp"))
    return result


#### User data and image ####


def user_data(parent: pulumi.Resource, plan: DeploymentPlan, rendered: StrOutput) -> StrOutput:
    """Base64 of the gzip'd cloud-config, as EC2 takes it (an instance's user_data_base64, a launch template's
    user_data), once the provider's region is known to be the plan's."""
    return checked_user_data(plan, rendered, provider_region(parent),
                             provider="AWS", encode=functools.partial(
                                 compressed_user_data, limit_bytes=USER_DATA_LIMIT_BYTES, service="EC2"))


@dataclass(frozen=True)
class ServerImage:
    image_id: StrOutput
    root_device_name: StrOutput
    root_volume_gib: pulumi.Output[int]
    """Size of the image's root snapshot: the root volume may not be smaller."""

    def root_volume_size(self, plan: DeploymentPlan) -> pulumi.Output[int]:
        return self.root_volume_gib.apply(lambda gib: max(gib, plan.disk_gib))


def server_image(parent: pulumi.Resource, plan: DeploymentPlan) -> ServerImage:
    """The image the plan's servers boot (`plan.startup.image`): the workload's own (brought), the one this stack
    baked for the plan (image.py, registered by `use_baked_image`), or by default the current DLAMI (GPU) or Ubuntu
    (CPU) for the machine type's architecture, looked up at deploy time."""
    if plan.startup.image == "baked":
        return baked_image(parent, plan)
    if plan.startup.image == "brought":
        if not plan.startup.image_id:
            raise input_error("plan.startup.image_id", "is missing, but the plan's image is 'brought'",
                              fix="plan again with startup.image: {aws: ami-...}")
        return image_facts(parent, pulumi.Output.from_input(plan.startup.image_id), brought=True)
    return image_facts(parent, vendor_image_id(parent, plan))


def vendor_image_id(parent: pulumi.Resource, plan: DeploymentPlan) -> StrOutput:
    """The current DLAMI (GPU) or Ubuntu (CPU) for the machine type's architecture (IMAGE_PARAMETERS): what servers
    boot by default, and the parent of a baked image."""
    invoke = invoke_options(parent)
    machine = aws.ec2.get_instance_type_output(instance_type=plan.instance_type, opts=invoke)
    architectures = answered(machine.supported_architectures,
                             "aws:ec2/getInstanceType:getInstanceType supportedArchitectures")
    parameter_name = architectures.apply(
        lambda archs: IMAGE_PARAMETERS[(plan.device, "x86_64" if "x86_64" in archs else "arm64")])
    return answered(aws.ssm.get_parameter_output(name=parameter_name, opts=invoke).value,
                    "aws:ssm/getParameter:getParameter value")


def image_facts(parent: pulumi.Resource, image_id: StrOutput, *, brought: bool = False) -> ServerImage:
    """The image's root device and root snapshot size, which the root volume is sized against.

    Filtered by the image id alone, without an owner: an id names one image of the region. The vendor's id comes
    from AWS's own public parameter; a brought id is the user's own choice, which may be owned by another account
    that shares it with theirs (an owner filter would refuse it), and may be deprecated since they chose it
    (include_deprecated, which is false by default, pulumi_aws ec2.get_ami)."""
    image = aws.ec2.get_ami_output(filters=image_id.apply(_image_id_filter), include_deprecated=brought or None,
                                   opts=invoke_options(parent))
    root_device_name = answered(image.root_device_name, "aws:ec2/getAmi:getAmi rootDeviceName")
    mappings = answered(image.block_device_mappings, "aws:ec2/getAmi:getAmi blockDeviceMappings")
    root_gib = pulumi.Output.all(root_device_name, mappings).apply(lambda facts: _root_snapshot_gib(*facts))
    return ServerImage(image_id=image_id, root_device_name=root_device_name, root_volume_gib=root_gib)


# The images baked for a component's plans (image.py), kept with the component so that they go with it.
_BAKED: weakref.WeakKeyDictionary[pulumi.Resource, dict[str, ServerImage]] = weakref.WeakKeyDictionary()


def use_baked_image(parent: pulumi.Resource, plan: DeploymentPlan, image: ServerImage) -> None:
    """Registers the image baked for the plan: `server_image` answers it for the plan's servers and templates."""
    _BAKED.setdefault(parent, {})[plan.model_dump_json()] = image


def baked_image(parent: pulumi.Resource, plan: DeploymentPlan) -> ServerImage:
    baked = _BAKED.get(parent, {}).get(plan.model_dump_json())
    if baked is None:
        raise input_error("plan.startup.image", "is 'baked', but no image was baked for this plan",
                          fix="create the servers through AwsBackend (create_servers or create_fleet), which bakes "
                              "the image first (inferstack/components/aws/image.py)")
    return baked


def _image_id_filter(image_id: str) -> list[aws.ec2.GetAmiFilterArgsDict]:
    return [{"name": "image-id", "values": [image_id]}]


def _root_snapshot_gib(root_device: str, mappings: Sequence[Any]) -> int:
    for mapping in mappings:
        device = mapping.get("device_name") if isinstance(mapping, Mapping) else mapping.device_name
        ebs = mapping.get("ebs") if isinstance(mapping, Mapping) else mapping.ebs
        if device == root_device and ebs and ebs.get("volume_size"):
            return int(ebs["volume_size"])
    return 0

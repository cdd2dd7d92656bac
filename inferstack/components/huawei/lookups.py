"""Huawei Cloud data-source lookups, with the component's provider: the region it deploys to, and the zones that
sell a flavor. Every module of the backend looks things up through `lookup`, by token, and reads a field of the answer
through `lookup_field` (unknown under unit-test mocks that leave it out, never None)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_huaweicloud as hw

from inferstack.components.contract import StrOutput
from inferstack.components.lookups import answered_field
from inferstack.components.naming import invoke_options
from inferstack.components.shared import first_zones

# Data sources, called by token (see `lookup`): the tokens of pulumi_huaweicloud 0.0.12.
ZONES_LOOKUP = "huaweicloud:index/getAvailabilityZones:getAvailabilityZones"
FLAVORS_LOOKUP = "huaweicloud:Ecs/getFlavors:getFlavors"
IMAGES_LOOKUP = "huaweicloud:Ims/getImages:getImages"
KEY_LOOKUP = "huaweicloud:Dew/getKey:getKey"
PROJECTS_LOOKUP = "huaweicloud:Iam/getProjects:getProjects"
VPC_LOOKUP = "huaweicloud:Vpc/getVpc:getVpc"
BUCKETS_LOOKUP = "huaweicloud:Obs/getBuckets:getBuckets"
SUBNET_LOOKUP = "huaweicloud:Vpc/getSubnet:getSubnet"
ELB_FLAVORS_LOOKUP = "huaweicloud:DedicatedElb/getFlavors:getFlavors"


def lookup(parent: pulumi.Resource, token: str, args: Mapping[str, Any]) -> pulumi.Output[dict[str, Any]]:
    """A data-source lookup with the component's provider, answered as the provider sends it (camelCase keys).

    The SDK's own lookup functions are bypassed: in 0.0.12 their `*_output` forms run a blocking invoke inside an
    apply (a nested event loop), and some typed results cannot even be built (`ims.get_images`: its result class
    declares a parameter `__support_agent_list`, which Python name-mangles, so every call raises TypeError).
    """
    # The SDK's defaults carry the provider version and plugin URL its own lookups would ask for.
    opts = pulumi.InvokeOutputOptions.merge(hw._utilities.get_invoke_opts_defaults(), invoke_options(parent))
    return pulumi.runtime.invoke_output(token, dict(args), opts=opts)


def lookup_field(parent: pulumi.Resource, token: str, args: Mapping[str, Any], field: str, *,
                 empty: Any = None) -> pulumi.Output[Any]:
    """One field of a lookup's answer (camelCase, as the provider sends it); `empty`: what the provider's leaving it
    out means (a list of matches: none)."""
    return answered_field(lookup(parent, token, args), field, token, empty=empty)


def provider_region(parent: pulumi.Resource) -> StrOutput:
    """The region the component's provider deploys to (its config, an explicit provider, or HW_REGION_NAME)."""
    return lookup_field(parent, ZONES_LOOKUP, {}, "region").apply(str)


def _flavor_generation(flavor: str) -> str:
    """The flavor's generation, the part before the first dot: "pi2" in pi2.2xlarge.4 (Huawei's naming rule)."""
    return flavor.split(".")[0]


def zones_offering(parent: pulumi.Resource, flavor: str, count: int) -> pulumi.Output[list[str]]:
    """The first `count` zones (by name) that sell the flavor: not every zone has every GPU."""
    def selling(zone: str) -> pulumi.Output[str]:
        """The zone's name if it sells the flavor, else ""."""
        sold = lookup_field(parent, FLAVORS_LOOKUP, {"availabilityZone": zone,
                                                     "generation": _flavor_generation(flavor)}, "ids", empty=[])
        return sold.apply(lambda ids: zone if flavor in ids else "")

    def offering(names: Sequence[str]) -> pulumi.Output[list[str]]:
        # One lookup per zone, possible only once the zone names are known.
        sold = pulumi.Output.all(*(selling(zone) for zone in sorted(names)))
        return sold.apply(lambda zones: first_zones([zone for zone in zones if zone], count, flavor))

    return lookup_field(parent, ZONES_LOOKUP, {"state": "available"}, "names", empty=[]).apply(offering)

"""Names Alibaba Cloud wants unique, and the region the provider deploys to.

OSS buckets and SLS projects are named globally, RAM roles and policies and CloudMonitor contact groups per account,
ESS scaling groups and launch templates per region: each name is readable, with a hash of project, stack and region
(and account, for the global ones) that keeps two stacks from colliding (`naming.unique_name`).
"""

from __future__ import annotations

import pulumi
import pulumi_alicloud as alicloud

from inferstack.components.contract import StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import invoke_options
from inferstack.names import unique_name


def current_region(parent: pulumi.Resource) -> StrOutput:
    """The region of the component's provider (an explicit provider in opts included), looked up."""
    found = alicloud.get_regions_output(current=True, opts=invoke_options(parent))
    regions = answered(found.regions, "alicloud:index/getRegions:getRegions regions")
    return regions.apply(lambda regions: str(regions[0].id))


def bucket_name(parent: pulumi.Resource, name: str, purpose: str) -> StrOutput:
    """Deterministic per stack, unique across accounts and regions (OSS names are global)."""
    account = answered(alicloud.get_caller_identity_output(opts=invoke_options(parent)).account_id,
                       "alicloud:index/getCallerIdentity:getCallerIdentity accountId")
    return pulumi.Output.all(account, current_region(parent)).apply(
        lambda where: unique_name([pulumi.get_project(), pulumi.get_stack(), name, purpose], unique_by=where))


def account_name(parent: pulumi.Resource, name: str, purpose: str, *, max_length: int = 64) -> StrOutput:
    """A name unique in the account (RAM roles and policies) or the region (ESS scaling groups, launch templates):
    readable, with a hash of project, stack and region."""
    return current_region(parent).apply(lambda region: unique_name(
        [pulumi.get_project(), pulumi.get_stack(), name, purpose], unique_by=[region], max_length=max_length))

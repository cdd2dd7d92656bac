"""The lookups several modules of the backend make (the provider's region, account and partition), each fact read
through `answered` (components/lookups.py): unknown under unit-test mocks that leave it out, never None."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from inferstack.components.contract import StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import invoke_options


def provider_region(parent: pulumi.Resource) -> StrOutput:
    """The region the component's provider deploys to."""
    return answered(aws.get_region_output(opts=invoke_options(parent)).region, "aws:index/getRegion:getRegion region")


def account_id(parent: pulumi.Resource) -> StrOutput:
    """The account the component's provider deploys to."""
    return answered(aws.get_caller_identity_output(opts=invoke_options(parent)).account_id,
                    "aws:index/getCallerIdentity:getCallerIdentity accountId")


def partition(parent: pulumi.Resource) -> tuple[StrOutput, StrOutput]:
    """The provider's partition (aws, aws-cn, aws-us-gov) and its DNS suffix (amazonaws.com, amazonaws.com.cn)."""
    found = aws.get_partition_output(opts=invoke_options(parent))
    return (answered(found.partition, "aws:index/getPartition:getPartition partition"),
            answered(found.dns_suffix, "aws:index/getPartition:getPartition dnsSuffix"))

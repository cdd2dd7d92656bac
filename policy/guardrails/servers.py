"""The servers and their templates: the metadata service answers only with a session token, one hop away, and a
managed group's servers have no public address.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from guardrails.core import NotApplicable, ReportViolation, ResourceInput, ResourceRule, boolean, integer, items, show
from guardrails.resource_types import (
    ALI_INSTANCE,
    ALI_LAUNCH_TEMPLATES,
    ALI_SCALING_CONFIGURATION,
    AWS_INSTANCE,
    AWS_LAUNCH_CONFIGURATION,
    AWS_LAUNCH_TEMPLATE,
    AWS_SPOT_INSTANCE_REQUEST,
    GCP_INSTANCE,
    GCP_INSTANCE_TEMPLATES,
    GCP_NO_METADATA_TOKENS,
    HUAWEI_NO_METADATA_TOKENS,
    HW_AS_CONFIGURATION,
    HW_AS_GROUP,
    HW_INSTANCE,
)

#### Instance metadata: session tokens required, one hop ####

METADATA_HOP_LIMIT = 1
"""inferstack's hop limit (inferstack.components.aws.servers.METADATA_HOP_LIMIT): a token requested from inside a
container (one hop further) never comes back, so only the server itself reads its credentials."""
AWS_METADATA_TYPES = (AWS_INSTANCE, AWS_LAUNCH_TEMPLATE, AWS_LAUNCH_CONFIGURATION, AWS_SPOT_INSTANCE_REQUEST)


def _metadata_hardened(options: Mapping[str, Any], prefix: str, report_violation: ReportViolation, *,
                       hop_default_is_one: bool) -> None:
    if options.get("httpEndpoint") == "disabled":  # no metadata service at all
        return
    tokens = options.get("httpTokens")
    if tokens != "required":
        report_violation(f"the metadata service answers without a session token ({prefix}httpTokens is "
                         f"{tokens or 'unset'}): set it to required")
    hops = options.get("httpPutResponseHopLimit")
    setting = f"{prefix}httpPutResponseHopLimit"
    if hops is None and not hop_default_is_one:
        report_violation(f"the metadata hop limit is unset ({setting}), so the image's default applies (2 on images "
                         f"that require tokens) and containers reach the server's credentials: set it to "
                         f"{METADATA_HOP_LIMIT}")
    elif hops is not None and integer(hops) != METADATA_HOP_LIMIT:
        report_violation(f"the metadata hop limit is {show(hops)} ({setting}), so containers on the server reach "
                         f"its credentials: set it to {METADATA_HOP_LIMIT}")


ALI_SCALING_CONFIGURATION_TOKENS = (
    "an ESS scaling configuration cannot require metadata tokens (pulumi_alicloud 4.0.0 has no httpTokens on "
    "ess.ScalingConfiguration): build the scaling group from an ECS launch template (alicloud:ecs/ecsLaunchTemplate "
    "with httpTokens required and httpPutResponseHopLimit 1, the group's launchTemplateId) instead")
METADATA_TYPES = (*AWS_METADATA_TYPES, ALI_INSTANCE, *ALI_LAUNCH_TEMPLATES, ALI_SCALING_CONFIGURATION, GCP_INSTANCE,
                  *GCP_INSTANCE_TEMPLATES, HW_INSTANCE, HW_AS_CONFIGURATION)


def check_metadata(resource: ResourceInput, report_violation: ReportViolation) -> None:
    if resource.resource_type in AWS_METADATA_TYPES:
        _metadata_hardened(resource.props.get("metadataOptions") or {}, "metadataOptions.", report_violation,
                           hop_default_is_one=False)
    elif resource.resource_type in (ALI_INSTANCE, *ALI_LAUNCH_TEMPLATES):  # the hop limit defaults to 1 on ECS
        _metadata_hardened(resource.props, "", report_violation, hop_default_is_one=True)
    elif resource.resource_type == ALI_SCALING_CONFIGURATION:
        if resource.props.get("httpEndpoint") != "disabled":
            report_violation(ALI_SCALING_CONFIGURATION_TOKENS)
    elif resource.resource_type in (GCP_INSTANCE, *GCP_INSTANCE_TEMPLATES):
        raise NotApplicable(GCP_NO_METADATA_TOKENS)
    elif resource.resource_type in (HW_INSTANCE, HW_AS_CONFIGURATION):
        raise NotApplicable(HUAWEI_NO_METADATA_TOKENS)


METADATA_TOKENS_REQUIRED = ResourceRule(
    "metadata-tokens-required",
    "The instance metadata service answers only requests with a session token (IMDSv2), one hop away.",
    check_metadata, lambda t: t in METADATA_TYPES)


#### Fleets: no server with a public address ####

# Templates of managed groups. Loose servers keep only the other rules: they may have a public address (single-server
# plans serve on their own), which the firewall rules (`exposure`) guard.
SERVER_TEMPLATE_TYPES = (AWS_LAUNCH_TEMPLATE, AWS_LAUNCH_CONFIGURATION, *GCP_INSTANCE_TEMPLATES,
                         ALI_SCALING_CONFIGURATION, *ALI_LAUNCH_TEMPLATES, HW_AS_CONFIGURATION)
NO_PUBLIC_ADDRESS_FIX = "a fleet's servers have no public address: the load balancer is their only public endpoint"


def _aws_template_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    interfaces = [nic for nic in items(props.get("networkInterfaces")) if isinstance(nic, Mapping)]
    if not interfaces:
        report_violation("the launch template does not say whether its servers get a public address (no "
                         "networkInterfaces), so the subnet's default decides: add a network interface with "
                         f"associatePublicIpAddress false (and the security groups there); {NO_PUBLIC_ADDRESS_FIX}")
    for index, nic in enumerate(interfaces):
        public = boolean(nic.get("associatePublicIpAddress"))
        if public is not False:
            what = "gets a public address" if public else "leaves the public address to the subnet's default"
            report_violation(f"network interface {index} of the launch template {what} (associatePublicIpAddress "
                             f"is {nic.get('associatePublicIpAddress', 'unset')}): set it to false; "
                             f"{NO_PUBLIC_ADDRESS_FIX}")
        _no_ipv6(nic, f"network interface {index} of the launch template", report_violation)


def _no_ipv6(nic: Mapping[str, Any], what: str, report_violation: ReportViolation) -> None:
    """IPv6 addresses are globally routable: an interface that gets one has a public address."""
    count = nic.get("ipv6AddressCount")
    if (count is not None and integer(count) != 0) or items(nic.get("ipv6Addresses")) or (
            nic.get("ipv6PrefixCount") is not None and integer(nic.get("ipv6PrefixCount")) != 0):
        report_violation(f"{what} gets IPv6 addresses, which are public: remove them; {NO_PUBLIC_ADDRESS_FIX}")


def _aws_launch_configuration_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("associatePublicIpAddress") is not False:
        report_violation("the launch configuration does not refuse a public address (associatePublicIpAddress is "
                         f"{props.get('associatePublicIpAddress', 'unset')}, so the subnet's default decides): set it "
                         f"to false; {NO_PUBLIC_ADDRESS_FIX}")


def _gcp_template_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for index, nic in enumerate(items(props.get("networkInterfaces"))):
        if items(nic.get("accessConfigs")):
            report_violation(f"network interface {index} of the template has an access config, which gives each "
                             f"server an external IPv4 address: remove accessConfigs; {NO_PUBLIC_ADDRESS_FIX}")
        if items(nic.get("ipv6AccessConfigs")):
            report_violation(f"network interface {index} of the template has an IPv6 access config, which gives "
                             f"each server an external IPv6 address: remove ipv6AccessConfigs; {NO_PUBLIC_ADDRESS_FIX}")


def _alibaba_template_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """ECS gives a server in a VPC a public address when its outbound internet bandwidth is above 0."""
    bandwidth = props.get("internetMaxBandwidthOut")
    if bandwidth is not None and integer(bandwidth) != 0:
        report_violation(f"internetMaxBandwidthOut is {show(bandwidth)}, which gives each server a public address: "
                         f"set it to 0 (servers reach the internet through the NAT gateway); {NO_PUBLIC_ADDRESS_FIX}")


def _huawei_configuration_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if (props.get("instanceConfig") or {}).get("publicIp"):
        report_violation("instanceConfig.publicIp gives each server an elastic IP: remove it (servers reach the "
                         f"internet through the NAT gateway); {NO_PUBLIC_ADDRESS_FIX}")


def _huawei_group_address(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for index, network in enumerate(items(props.get("networks"))):
        if network.get("ipv6BandwidthId"):
            report_violation(f"network {index} of the AS group gives each server IPv6 bandwidth, a public IPv6 "
                             f"address: remove ipv6BandwidthId; {NO_PUBLIC_ADDRESS_FIX}")


_PUBLIC_ADDRESS: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_LAUNCH_TEMPLATE: _aws_template_address,
    AWS_LAUNCH_CONFIGURATION: _aws_launch_configuration_address,
    **dict.fromkeys(GCP_INSTANCE_TEMPLATES, _gcp_template_address),
    ALI_SCALING_CONFIGURATION: _alibaba_template_address,
    **dict.fromkeys(ALI_LAUNCH_TEMPLATES, _alibaba_template_address),
    HW_AS_CONFIGURATION: _huawei_configuration_address,
    HW_AS_GROUP: _huawei_group_address,
}


def check_no_public_address(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _PUBLIC_ADDRESS.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


SERVERS_NO_PUBLIC_ADDRESS = ResourceRule(
    "servers-no-public-address",
    "A managed group's template gives its servers no public address (IPv4 or IPv6).",
    check_no_public_address, lambda t: t in _PUBLIC_ADDRESS, severity="critical")

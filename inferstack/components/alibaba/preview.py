"""How the offline preview answers for Alibaba Cloud: realistic ids and computed outputs of each resource type the
backend registers, and answers to its lookups, without calling the cloud (`AlibabaBackend.preview_answers`).
"""

from __future__ import annotations

import itertools

from inferstack.components.alibaba.storage import CDN_ORIGIN_ROLE
from inferstack.components.backend import PreviewAnswers, PreviewContext, PreviewLookup, PreviewResource

PREVIEW_ACCOUNT = "1234567890123456"  # a placeholder in the shape of an Alibaba account id (16 digits)
PREVIEW_REGION = "ap-southeast-1"  # the region the catalog prices Alibaba in
PREVIEW_IMAGE_ID = "ubuntu_22_04_x64_20G_alibase_preview.vhd"  # the system images' naming, with no real date
PREVIEW_IMAGE_GIB = 20


def preview_answers(region: str | None) -> PreviewAnswers:
    """The answers for a preview in `region` (the provider's, when configured)."""
    return PreviewAnswers(resources=PREVIEW_RESOURCES, lookups=PREVIEW_LOOKUPS, region=region or PREVIEW_REGION,
                          account=PREVIEW_ACCOUNT)


def _resource_id(c: PreviewContext, prefix: str) -> str:
    return f"{prefix}-{c.digest[:20]}"


PREVIEW_RESOURCES: dict[str, PreviewResource] = {
    "alicloud:kvstore/instance:Instance": lambda c: (f"r-{c.digest[:18]}", {
        "connectionDomain": f"r-{c.digest[:18]}.redis.rds.aliyuncs.com", "privateIp": c.private_ip}),
    "alicloud:vpc/network:Network": lambda c: (_resource_id(c, "vpc"), {}),
    "alicloud:vpc/switch:Switch": lambda c: (_resource_id(c, "vsw"), {}),
    "alicloud:ecs/securityGroup:SecurityGroup": lambda c: (_resource_id(c, "sg"), {}),
    "alicloud:oss/bucket:Bucket": lambda c: (c.inputs["bucket"], {
        "extranetEndpoint": f"oss-{c.region}.aliyuncs.com", "intranetEndpoint": f"oss-{c.region}-internal.aliyuncs.com",
        "location": f"oss-{c.region}"}),
    "alicloud:kms/secret:Secret": lambda c: (c.inputs["secretName"], {
        "arn": f"acs:kms:{c.region}:{c.account}:secret/{c.inputs['secretName']}"}),
    "alicloud:ram/role:Role": lambda c: (c.inputs["roleName"], {
        "arn": f"acs:ram::{c.account}:role/{c.inputs['roleName']}", "roleId": c.digest[:19]}),
    "alicloud:ram/policy:Policy": lambda c: (c.inputs["policyName"], {}),
    # The CNAME target Alibaba assigns: the domain under one of its CDN zones (the zone here is illustrative).
    "alicloud:cdn/domainNew:DomainNew": lambda c: (c.inputs["domainName"], {
        "cname": f"{c.inputs['domainName']}.w.kunlunsl.com", "status": "online"}),
    "alicloud:ecs/instance:Instance": lambda c: (_resource_id(c, "i"), {"publicIp": c.public_ip,
                                                                       "privateIp": c.private_ip}),
    # A fleet: NAT egress, the load balancer, the scaling group and its launch template (ids in each API's form).
    "alicloud:vpc/natGateway:NatGateway": lambda c: (_resource_id(c, "ngw"), {
        "snatTableIds": _resource_id(c, "stb"), "forwardTableIds": _resource_id(c, "ftb")}),
    "alicloud:ecs/eipAddress:EipAddress": lambda c: (_resource_id(c, "eip"), {"ipAddress": c.public_ip}),
    "alicloud:ecs/eipAssociation:EipAssociation": lambda c: (
        f"{c.inputs['allocationId']}:{c.inputs['instanceId']}", {}),
    "alicloud:vpc/snatEntry:SnatEntry": lambda c: (f"{c.inputs['snatTableId']}:{_resource_id(c, 'snat')}", {}),
    "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate": lambda c: (_resource_id(c, "lt"), {
        "latestVersionNumber": 1, "defaultVersionNumber": 1}),
    "alicloud:ess/scalingGroup:ScalingGroup": lambda c: (_resource_id(c, "asg"), {}),
    "alicloud:ess/lifecycleHook:LifecycleHook": lambda c: (_resource_id(c, "ash"), {}),
    "alicloud:ess/albServerGroupAttachment:AlbServerGroupAttachment": lambda c: (
        f"{c.inputs['scalingGroupId']}:{c.inputs['albServerGroupId']}:{c.inputs['port']}", {}),
    "alicloud:ess/scalingRule:ScalingRule": lambda c: (_resource_id(c, "asr"), {
        "ari": f"ari:acs:ess:{c.region}:{c.account}:scalingrule/{_resource_id(c, 'asr')}"}),
    # The DNS name ALB gives an instance: <id>.<region>.alb.aliyuncs.com.
    "alicloud:alb/loadBalancer:LoadBalancer": lambda c: (_resource_id(c, "alb"), {
        "dnsName": f"{_resource_id(c, 'alb')}.{c.region}.alb.aliyuncs.com", "status": "Active"}),
    "alicloud:alb/serverGroup:ServerGroup": lambda c: (_resource_id(c, "sgp"), {}),
    "alicloud:alb/listener:Listener": lambda c: (_resource_id(c, "lsn"), {}),
    "alicloud:alb/rule:Rule": lambda c: (_resource_id(c, "rule"), {}),
    "alicloud:alb/acl:Acl": lambda c: (_resource_id(c, "acl"), {}),
    "alicloud:alb/aclEntryAttachment:AclEntryAttachment": lambda c: (f"{c.inputs['aclId']}:entries", {}),
    "alicloud:alb/listenerAclAttachment:ListenerAclAttachment": lambda c: (
        f"{c.inputs['listenerId']}:{c.inputs['aclId']}", {}),
    "alicloud:alb/loadBalancerSecurityGroupAttachment:LoadBalancerSecurityGroupAttachment": lambda c: (
        f"{c.inputs['loadBalancerId']}:{c.inputs['securityGroupId']}", {}),
}




def _preview_zones(region: str) -> list[str]:
    # International zone ids append a letter (ap-southeast-1a); mainland ones a dash and a letter (cn-hangzhou-h).
    separator = "" if region[-1].isdigit() else "-"
    return [f"{region}{separator}{letter}" for letter in "abc"]


PREVIEW_LOOKUPS: dict[str, PreviewLookup] = {
    "alicloud:index/getCallerIdentity:getCallerIdentity": lambda a, c: {
        "accountId": c.account, "arn": f"acs:ram::{c.account}:root", "id": c.account,
        "identityType": "Account"},
    "alicloud:index/getRegions:getRegions": lambda a, c: {
        "regions": [{"id": c.region, "regionId": c.region, "localName": c.region}], "ids": [c.region], "id": c.region},
    "alicloud:index/getZones:getZones": lambda a, c: {
        "zones": [{"id": zone, "localName": zone} for zone in _preview_zones(c.region)],
        "ids": _preview_zones(c.region), "id": c.region},
    # The system image; a brought one (looked up by id) answers as itself.
    "alicloud:ecs/getImages:getImages": lambda a, c: {
        "images": [{"id": a.get("imageId") or PREVIEW_IMAGE_ID, "imageId": a.get("imageId") or PREVIEW_IMAGE_ID,
                    "size": PREVIEW_IMAGE_GIB, "architecture": "x86_64", "osType": "linux"}],
        "ids": [a.get("imageId") or PREVIEW_IMAGE_ID], "id": c.region},
    "alicloud:ram/getRoles:getRoles": lambda a, c: {
        "roles": [{"id": "300000000000000001", "name": CDN_ORIGIN_ROLE,
                   "arn": f"acs:ram::{c.account}:role/{CDN_ORIGIN_ROLE.lower()}"}],
        "names": [CDN_ORIGIN_ROLE], "ids": ["300000000000000001"], "id": CDN_ORIGIN_ROLE},
    "alicloud:alb/getZones:getZones": lambda a, c: {
        "zones": [{"id": zone, "zoneId": zone, "localName": zone} for zone in _preview_zones(c.region)],
        "ids": _preview_zones(c.region), "id": c.region},
    # A fleet's group, asked for by name: it exists with its hook (a stack past its first deploy), so the preview
    # shows the group at the plan's floor.
    "alicloud:ess/getScalingGroups:getScalingGroups": lambda a, c: {
        "groups": [{"id": "asg-preview", "name": a.get("nameRegex", "")}], "ids": ["asg-preview"], "id": c.region},
    "alicloud:ess/getLifecycleHooks:getLifecycleHooks": lambda a, c: {
        "hooks": [{"id": "ash-preview", "name": a.get("nameRegex", "")}], "ids": ["ash-preview"], "id": c.region},
    # Lookups of brought resources: one the program created itself answers as created (a VPC's range, a vSwitch's
    # zone); one from elsewhere, which the preview cannot see, with a placeholder.
    "alicloud:vpc/getNetworks:getNetworks": lambda a, c: {
        "vpcs": [{"id": vpc_id, "vpcId": vpc_id,
                  "cidrBlock": c.created_value("alicloud:vpc/network:Network", vpc_id, "cidrBlock", "10.0.0.0/16")}
                 for vpc_id in a.get("ids", [])],
        "ids": a.get("ids", []), "id": c.region},
    # vSwitches in the order asked, in the region's zones in turn (a created network's zone order).
    "alicloud:vpc/getSwitches:getSwitches": lambda a, c: {
        "vswitches": [{"id": vswitch_id, "vswitchId": vswitch_id,
                       "zoneId": c.created_value("alicloud:vpc/switch:Switch", vswitch_id, "zoneId", zone)}
                      for vswitch_id, zone in zip(a.get("ids", []), itertools.cycle(_preview_zones(c.region)))],
        "ids": a.get("ids", []), "id": c.region},
}

"""How the offline preview answers for Huawei Cloud: realistic ids (UUIDs) and computed outputs for the resources the
backend registers, and answers to the lookups it makes (zones, flavors, images, keys, projects, load balancer
flavors, and brought subnets, VPCs and buckets)."""

from __future__ import annotations

import hashlib
from typing import Any

from inferstack.components.backend import PreviewAnswers, PreviewContext, PreviewLookup, PreviewResource
from inferstack.components.huawei.servers import TESLA_DRIVER_SUFFIX, UBUNTU_IMAGE_NAME

PREVIEW_REGION = "ap-southeast-3"
PREVIEW_PROJECT_ID = "0123456789abcdef0123456789abcdef"  # IAM project ids are 32 hex characters


#### Offline preview ####


def preview_answers(configured_region: str | None) -> PreviewAnswers:
    """The answers in the provider's configured region, else PREVIEW_REGION."""
    return PreviewAnswers(resources=PREVIEW_RESOURCES, lookups=PREVIEW_LOOKUPS,
                          region=configured_region or PREVIEW_REGION, account=PREVIEW_PROJECT_ID,
                          unlisted_id=lambda c: _uuid(c.digest))


#### Resources ####


def _uuid(digest: str) -> str:
    """Huawei resource ids are UUIDs; the preview derives a stable one from the resource's type and name."""
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _bucket_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    bucket = c.inputs["bucket"]
    return bucket, {"bucketDomainName": f"{bucket}.obs.{c.region}.myhuaweicloud.com", "region": c.region}


def _instance_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    # Public addresses are elastic IPs (their own resources).
    return _uuid(c.digest), {"accessIpV4": c.private_ip, "publicIp": ""}


def _ipv4_subnet_id(subnet_id: str) -> str:
    """A subnet's IPv4 (Neutron) subnet id, the one load balancers take, stable per VPC subnet id."""
    return _uuid(hashlib.sha256(f"{subnet_id}/ipv4".encode()).hexdigest())


def _named(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    """Resources whose name the program sets (agencies, custom policies, secrets): the name is part of the state."""
    return _uuid(c.digest), {"name": c.inputs.get("name") or f"{c.name}-{c.digest[:7]}"}


SUBNET = "huaweicloud:Vpc/subnet:Subnet"

PREVIEW_RESOURCES: dict[str, PreviewResource] = {
    "huaweicloud:Dcs/instance:Instance": lambda c: (f"{c.digest[:8]}-{c.digest[8:12]}-{c.digest[12:16]}", {
        "privateIp": c.private_ip, "port": 6379, "domainName": f"redis-{c.digest[:8]}.dcs.huaweicloud.com"}),
    "huaweicloud:Vpc/vpc:Vpc": lambda c: (_uuid(c.digest), {"cidr": c.inputs["cidr"]}),
    "huaweicloud:Vpc/eip:Eip": lambda c: (_uuid(c.digest), {"address": c.public_ip}),
    "huaweicloud:Obs/bucket:Bucket": _bucket_outputs,
    "huaweicloud:Iam/role:Role": _named,
    "huaweicloud:Iam/agency:Agency": _named,
    "huaweicloud:Dew/secret:Secret": _named,
    "huaweicloud:Cdn/domain:Domain": lambda c: (_uuid(c.digest), {
        "cname": f"{c.inputs['name']}.c.cdnhwc1.com", "domainStatus": "online"}),
    "huaweicloud:Ecs/instance:Instance": _instance_outputs,
    SUBNET: lambda c: (_uuid(c.digest), {
        "ipv4SubnetId": _ipv4_subnet_id(_uuid(c.digest)), "status": "ACTIVE"}),
    # Internal load balancers answer on their private address; an internet-facing one on its elastic IP (a resource
    # of its own).
    "huaweicloud:DedicatedElb/loadbalancer:Loadbalancer": lambda c: (_uuid(c.digest), {
        "ipv4Address": c.private_ip, "ipv4PortId": _uuid(hashlib.sha256(f"{c.digest}/port".encode()).hexdigest()),
        "operatingStatus": "ONLINE"}),
    "huaweicloud:As/group:Group": lambda c: (_uuid(c.digest), {
        "status": "INSERVICE", "currentInstanceNumber": c.inputs.get("desireInstanceNumber", 0)}),
    "huaweicloud:As/configuration:Configuration": lambda c: (_uuid(c.digest), {"status": "Bound"}),
    "huaweicloud:As/policy:Policy": lambda c: (_uuid(c.digest), {"status": "INSERVICE"}),
    # Cloud Eye alarm ids: "al", 13 digits (a creation time in ms) and 9 letters or digits.
    "huaweicloud:Cse/alarmrule:Alarmrule": lambda c: (f"al{int(c.digest[:12], 16) % 10**13:013d}{c.digest[12:21]}",
                                                      {"alarmState": "ok"}),
}


#### Lookups ####


def _preview_flavors(generation: str) -> list[str]:
    """Every size of a generation, as Huawei names them (<generation>.<size>.<GiB per vCPU>). Preview only: a
    deployment asks ECS which flavors each zone sells."""
    sizes = ["large", "xlarge", *(f"{n}xlarge" for n in (2, 4, 6, 8, 12, 16, 22))]
    return [f"{generation}.{size}.{ratio}" for size in sizes for ratio in (1, 2, 4, 8)]


def _preview_images(a: dict[str, Any], c: PreviewContext) -> dict[str, Any]:
    """A plain Ubuntu image for every flavor, and a driver-ready one for GPU generations (p*, g*); a brought image
    (looked up by id), as a private image of the account."""
    if a.get("imageId"):
        return {"id": c.region, "imageId": a["imageId"], "images": [{
            "id": a["imageId"], "name": "brought-image", "visibility": "private", "minDiskGb": 40,
            "createdAt": "2025-01-01T00:00:00Z"}]}
    flavor = a.get("flavorId", "")
    images = [{"id": _uuid(hashlib.sha256(f"{c.region}/{UBUNTU_IMAGE_NAME}".encode()).hexdigest()),
               "name": UBUNTU_IMAGE_NAME, "minDiskGb": 40, "createdAt": "2025-01-01T00:00:00Z"}]
    if flavor[:1] in ("p", "g"):
        name = f"{UBUNTU_IMAGE_NAME}{TESLA_DRIVER_SUFFIX} 535.54.03 and CUDA 12.2"
        images.append({"id": _uuid(hashlib.sha256(f"{c.region}/{name}".encode()).hexdigest()), "name": name,
                       "minDiskGb": 40, "createdAt": "2025-01-01T00:00:00Z"})
    return {"id": c.region, "images": images, "flavorId": flavor, "nameRegex": a.get("nameRegex")}


# Dedicated ELB Layer-7 flavors (ELB user guide, "Specifications of Dedicated Load Balancers"): name, HTTP queries/s.
_PREVIEW_L7_FLAVORS = (("small", 2_000), ("medium", 4_000), ("large", 10_000), ("extra-large", 20_000))


def _preview_elb_flavors(kind: str, c: PreviewContext) -> dict[str, Any]:
    flavors = [{"id": _uuid(hashlib.sha256(f"{c.region}/{kind}/{size}".encode()).hexdigest()),
                "name": f"{kind}_flavor.elb.s1.{size}", "type": kind, "qps": qps, "httpsCps": qps // 10,
                "maxConnections": qps * 100, "flavorSoldOut": False, "shared": True}
               for size, qps in _PREVIEW_L7_FLAVORS]
    return {"id": c.region, "type": kind, "ids": [flavor["id"] for flavor in flavors], "flavors": flavors}


PREVIEW_LOOKUPS: dict[str, PreviewLookup] = {
    "huaweicloud:index/getAvailabilityZones:getAvailabilityZones": lambda a, c: {
        "id": c.region, "region": c.region, "names": [f"{c.region}{zone}" for zone in "abc"], "state": "available"},
    "huaweicloud:Ecs/getFlavors:getFlavors": lambda a, c: {
        "id": a["availabilityZone"], "availabilityZone": a["availabilityZone"],
        "ids": _preview_flavors(a.get("generation", "s7"))},
    "huaweicloud:Iam/getProjects:getProjects": lambda a, c: {
        "id": a.get("name", c.region),
        "projects": [{"id": c.account, "name": a.get("name", c.region), "enabled": True}]},
    "huaweicloud:Ims/getImages:getImages": _preview_images,
    "huaweicloud:Dew/getKey:getKey": lambda a, c: {
        "id": "evs-default-key", "keyId": _uuid(hashlib.sha256(f"{c.region}/evs/default".encode()).hexdigest()),
        "keyAlias": a["keyAlias"], "defaultKeyFlag": "1", "domainId": c.account, "region": c.region},
    "huaweicloud:DedicatedElb/getFlavors:getFlavors": lambda a, c: _preview_elb_flavors(a.get("type", "L7"), c),
    # Lookups of brought resources: one the program created itself answers as created (a VPC's range, a subnet's
    # range and zone); one from elsewhere, which the preview cannot see, with placeholders.
    "huaweicloud:Vpc/getSubnet:getSubnet": lambda a, c: {
        "id": a["id"], "ipv4SubnetId": _ipv4_subnet_id(a["id"]), "status": "ACTIVE", "region": c.region,
        "availabilityZone": c.created_value(SUBNET, a["id"], "availabilityZone", f"{c.region}a"),
        "cidr": c.created_value(SUBNET, a["id"], "cidr", "10.64.0.0/20")},
    "huaweicloud:Vpc/getVpc:getVpc": lambda a, c: {
        "id": a["id"], "cidr": c.created_value("huaweicloud:Vpc/vpc:Vpc", a["id"], "cidr", "192.168.0.0/16"),
        "region": c.region},
    "huaweicloud:Obs/getBuckets:getBuckets": lambda a, c: {
        "id": c.region, "buckets": [{"bucket": a["bucket"], "region": c.region, "storageClass": "STANDARD",
                                     "createdAt": "2025-01-01T00:00:00Z", "enterpriseProjectId": "0"}]},
}

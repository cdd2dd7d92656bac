"""Huawei Cloud's inference cache: DCS for Redis in the servers' subnet, SSL on, a password, a whitelist of the
servers' subnets, and the servers' egress to it."""

from __future__ import annotations

import pulumi
import pulumi_huaweicloud as hw

from inferstack.components.contract import CacheRequest, CacheResult
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options

# DCS for Redis 6.0 basic edition, which takes SSL (pulumi_huaweicloud dcs.Instance.ssl_enable; DCS docs: SSL for
# Redis 6.0 basic instances, verify per region) and whitelists; the flavors are the 1 GB single-node and
# master/standby specifications of the DCS specification table (verify with dcs.get_flavors in your region).
CACHE_ENGINE_VERSION = "6.0"
CACHE_CAPACITY_GB = 1
CACHE_FLAVORS = {False: "redis.single.xu1.large.1", True: "redis.ha.xu1.large.r2.1"}
CACHE_PORT = 6379


#### Cache ####


def create_cache(parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
    """DCS for Redis 6.0 (basic edition, master/standby in production) in the servers' first subnet: SSL, password, a
    whitelist of the servers' subnets only."""
    assert request.auth_token is not None, "DCS takes the stack's AUTH token as its password"
    opts = child_options(parent)
    subnets = [hw.vpc.get_subnet_output(id=subnet, opts=invoke_options(parent)) for subnet in request.subnet_ids]
    cache = hw.dcs.Instance(
        f"{name}-cache", name=f"{name}-cache", engine="Redis", engine_version=CACHE_ENGINE_VERSION,
        capacity=CACHE_CAPACITY_GB, flavor=CACHE_FLAVORS[request.highly_available], vpc_id=request.network_id,
        subnet_id=subnets[0].id, availability_zones=[subnets[0].availability_zone], password=request.auth_token,
        ssl_enable=True, whitelist_enable=True,
        # Redis 4.0/5.0/6.0 basic instances take whitelists, not security groups (DCS security white paper).
        whitelists=[{"group_name": "inferstack-servers", "ip_addresses": [subnet.cidr for subnet in subnets]}],
        description="inferstack inference cache", tags=request.tags,
        opts=child_options(parent, protect=True if request.protected else None))
    for index, group in enumerate(request.server_firewall_ids):
        if request.firewall_created:  # the servers' group has no egress but its listed rules
            hw.vpc.SecgroupRule(f"{name}-egress-cache-{index}", security_group_id=group, direction="egress",
                                ethertype="IPv4", protocol="tcp", port_range_min=CACHE_PORT,
                                port_range_max=CACHE_PORT, remote_ip_prefix=cache.private_ip.apply(
                                    lambda ip: f"{ip}/32"), description="Redis, the inference cache", opts=opts)
    # DCS's SSL certificate comes from Huawei's own CA, downloaded through the console or API (no provider
    # output): the connection is encrypted, the server's certificate is not verified (Capability.MANAGED_CACHE).
    return CacheResult(host=answered(cache.private_ip, "huaweicloud:Dcs/instance:Instance privateIp"),
                       port=pulumi.Output.from_input(CACHE_PORT),
                       auth_token=pulumi.Output.secret(request.auth_token),
                       ca_certificate=pulumi.Output.from_input(None), verify=False)

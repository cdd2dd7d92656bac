"""The inference cache on Alibaba: Tair (Redis OSS-compatible) in the servers' first vSwitch, TLS on, a password
(AUTH) required in the VPC, reachable from the servers' security groups only.
"""

from __future__ import annotations

import pulumi
import pulumi_alicloud as alicloud

from inferstack.components.alibaba.network import ACCEPT_PRIORITY
from inferstack.components.contract import CacheRequest, CacheResult
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options, invoke_options

# TLS needs "Redis Open-Source Edition 5.0, 6.0, or 7.0" with "the master-replica architecture"
# (alibabacloud.com/help/en/redis/user-guide/enable-tls-encryption, read 2026-12-01); the 1 GB master-replica class of
# that edition is redis.shard.small.2.ce (Alibaba's instance type table; verify in your region with
# kvstore.get_instance_classes).
CACHE_ENGINE_VERSION = "7.0"
CACHE_INSTANCE_CLASS = "redis.shard.small.2.ce"
CACHE_PORT = 6379

#### Cache ####


def create_cache(parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
    """Tair (Redis OSS-compatible) in the servers' first vSwitch: TLS, password (AUTH) required in the VPC, its
    whitelist admits the servers' security groups and no address."""
    assert request.auth_token is not None, "Tair takes the stack's AUTH token as its password"
    opts = child_options(parent)
    vswitch = request.subnet_ids[0]
    found = alicloud.vpc.get_switches_output(ids=pulumi.Output.all(vswitch), opts=invoke_options(parent))
    zone = answered(found.vswitches, "alicloud:vpc/getSwitches:getSwitches vswitches").apply(
        lambda vswitches: str(vswitches[0].zone_id))
    cache = alicloud.kvstore.Instance(
        f"{name}-cache", db_instance_name=f"{name}-cache", instance_type="Redis",
        engine_version=CACHE_ENGINE_VERSION, instance_class=CACHE_INSTANCE_CLASS, payment_type="PostPaid",
        vswitch_id=vswitch, zone_id=zone, password=request.auth_token, vpc_auth_mode="Open",
        ssl_enable="Enable",
        # Only the servers' security groups; the address whitelist keeps Tair's default 127.0.0.1, which admits
        # no client ("By default, Tair (Redis OSS-compatible) does not allow access from any IP addresses").
        security_group_id=pulumi.Output.all(*request.server_firewall_ids).apply(",".join),
        security_ips=["127.0.0.1"], tags=request.tags,
        opts=child_options(parent, protect=True if request.protected else None))
    for index, group in enumerate(request.server_firewall_ids):
        if request.firewall_created:  # the servers' group drops all egress but the web's and the cloud's
            alicloud.ecs.SecurityGroupRule(
                f"{name}-egress-cache-{index}", security_group_id=group, type="egress", ip_protocol="tcp",
                port_range=f"{CACHE_PORT}/{CACHE_PORT}", cidr_ip=cache.private_ip.apply(lambda ip: f"{ip}/32"),
                policy="accept", priority=ACCEPT_PRIORITY, nic_type="intranet",
                description="Redis, the inference cache", opts=opts)
    # Tair's TLS certificate is signed by Alibaba's own CA, downloaded from the console (no provider output):
    # the connection is encrypted, the server's certificate is not verified (Capability.MANAGED_CACHE).
    return CacheResult(host=answered(cache.connection_domain, "alicloud:kvstore/instance:Instance connectionDomain"),
                       port=pulumi.Output.from_input(CACHE_PORT),
                       auth_token=pulumi.Output.secret(request.auth_token),
                       ca_certificate=pulumi.Output.from_input(None), verify=False)

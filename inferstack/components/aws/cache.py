"""The inference cache: ElastiCache for Redis OSS in the servers' subnets, TLS and AUTH required, reachable from the
servers' security groups only."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from inferstack.components.aws.tags import named
from inferstack.components.contract import CacheRequest, CacheResult
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options

# The inference cache: ElastiCache for Redis OSS, a node-based replication group with in-transit encryption (TLS) and
# an AUTH token, which requires transit encryption (docs.aws.amazon.com/AmazonElastiCache/latest/dg/
# in-transit-encryption.html; pulumi_aws ReplicationGroup.auth_token). T4g nodes take Redis OSS 5.0.6 onward
# (docs.amazonaws.cn/AmazonElastiCache/latest/APIReference/API_CacheNode.html, read 2026-12-01); a small one holds
# ~1.4 GiB of answers, far more than an hour of a server's deterministic answers.
CACHE_ENGINE_VERSION = "7.1"
CACHE_NODE_TYPE = "cache.t4g.small"
CACHE_PORT = 6379

#### Cache ####


def create_cache(parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
    """ElastiCache for Redis OSS in the servers' subnets: TLS required, AUTH token, encrypted at rest, its own
    security group admitting the servers' security groups only."""
    assert request.auth_token is not None, "ElastiCache takes the stack's AUTH token"
    opts = child_options(parent)
    group = aws.ec2.SecurityGroup(f"{name}-cache-sg", vpc_id=request.network_id,
                                  description="inferstack inference cache: Redis from the servers only",
                                  tags=named(request.tags, f"{name}-cache-sg"), opts=opts)
    for index, server_group in enumerate(request.server_firewall_ids):
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-cache-from-servers-{index}", security_group_id=group.id, ip_protocol="tcp",
            from_port=CACHE_PORT, to_port=CACHE_PORT, referenced_security_group_id=server_group,
            description="Redis from the inference servers", tags=request.tags, opts=opts)
        if request.firewall_created:  # a created group has no egress but the web's (the default one is removed)
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-egress-cache-{index}", security_group_id=server_group, ip_protocol="tcp",
                from_port=CACHE_PORT, to_port=CACHE_PORT, referenced_security_group_id=group.id,
                description="Redis, the inference cache", tags=request.tags, opts=opts)
    subnets = aws.elasticache.SubnetGroup(f"{name}-cache-subnets", subnet_ids=list(request.subnet_ids),
                                          description="inferstack inference cache", tags=request.tags, opts=opts)
    available = request.highly_available
    cache = aws.elasticache.ReplicationGroup(
        f"{name}-cache", description="inferstack inference cache", engine="redis",
        engine_version=CACHE_ENGINE_VERSION, node_type=CACHE_NODE_TYPE, port=CACHE_PORT,
        num_cache_clusters=2 if available else 1, automatic_failover_enabled=available,
        multi_az_enabled=available, subnet_group_name=subnets.name, security_group_ids=[group.id],
        transit_encryption_enabled=True, transit_encryption_mode="required", at_rest_encryption_enabled=True,
        auth_token=request.auth_token, apply_immediately=True, tags=request.tags,
        opts=child_options(parent, protect=True if request.protected else None))
    # ElastiCache's certificates chain to Amazon's public roots: the system trust store verifies them.
    host = answered(cache.primary_endpoint_address,
                    "aws:elasticache/replicationGroup:ReplicationGroup primaryEndpointAddress")
    return CacheResult(host=host,
                       port=pulumi.Output.from_input(CACHE_PORT),
                       auth_token=pulumi.Output.secret(request.auth_token),
                       ca_certificate=pulumi.Output.from_input(None), verify=True)

"""Google Cloud's inference cache: Memorystore for Redis on the deployment's network, reachable from the servers
only.

Sections follow `CloudBackend` (inferstack/components/backend.py).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from inferstack.components.contract import CacheRequest, CacheResult
from inferstack.components.gcp.naming import gcp_labels, gcp_name
from inferstack.components.gcp.network import ALLOW_PRIORITY
from inferstack.components.lookups import answered
from inferstack.components.naming import child_options

# The inference cache: Memorystore for Redis with AUTH (Google generates the AUTH string, an output) and TLS with
# server authentication, whose CA is the instance's own (server_ca_certs); a TLS instance listens on 6378
# (pulumi_gcp redis.Instance docstrings: auth_enabled, transit_encryption_mode, server_ca_certs, port). Direct peering
# (the default connect mode) puts it on the deployment's network without a service-networking connection. 1 GB is
# the smallest capacity (M1).
CACHE_REDIS_VERSION = "REDIS_7_0"
CACHE_MEMORY_GB = 1


#### Cache ####


def create_cache(parent: pulumi.Resource, name: str, request: CacheRequest) -> CacheResult:
    """Memorystore for Redis on the deployment's network (direct peering): AUTH, TLS with the instance's CA; the
    VPC's egress lets only the servers' tag reach it."""
    opts = child_options(parent)
    cache = gcp.redis.Instance(
        f"{name}-cache", name=gcp_name(name, "cache", max_length=40), region=request.plan.region,
        tier="STANDARD_HA" if request.highly_available else "BASIC", memory_size_gb=CACHE_MEMORY_GB,
        redis_version=CACHE_REDIS_VERSION, authorized_network=request.network_id, connect_mode="DIRECT_PEERING",
        auth_enabled=True, transit_encryption_mode="SERVER_AUTHENTICATION",
        display_name="inferstack inference cache", labels=gcp_labels(request.tags),
        opts=child_options(parent, protect=True if request.protected else None,
                           additional_secret_outputs=["authString"]))
    cache_range = cache.reserved_ip_range.apply(lambda r: r or "")
    # Memorystore takes no firewall of its own: the network's egress decides who reaches its range. The servers'
    # tag may (their firewall otherwise allows only the web); every other instance of the network may not.
    gcp.compute.Firewall(
        f"{name}-cache-egress", name=gcp_name(name, "cache-egress"), network=request.network_id,
        direction="EGRESS", allows=[{"protocol": "tcp", "ports": [cache.port.apply(str)]}],
        destination_ranges=[cache_range], target_tags=list(request.server_firewall_ids), priority=ALLOW_PRIORITY,
        description="Redis, the inference cache: the servers only", opts=opts)
    gcp.compute.Firewall(
        f"{name}-cache-deny", name=gcp_name(name, "cache-deny"), network=request.network_id, direction="EGRESS",
        denies=[{"protocol": "all"}], destination_ranges=[cache_range], priority=ALLOW_PRIORITY + 1,
        description="Redis, the inference cache: no other instance of the network", opts=opts)
    ca = cache.server_ca_certs.apply(lambda certs: "".join(c.cert for c in certs or [] if c.cert) or None)
    return CacheResult(host=answered(cache.host, "gcp:redis/instance:Instance host"),
                       port=answered(cache.port, "gcp:redis/instance:Instance port"),
                       auth_token=pulumi.Output.secret(answered(cache.auth_string,
                                                                "gcp:redis/instance:Instance authString")),
                       ca_certificate=ca, verify=True)


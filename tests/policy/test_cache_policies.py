"""The policy pack on the inference cache's managed Redis: what the components register on each cloud passes (TLS,
AUTH, private network), and each way of weakening it (TLS off, AUTH off, a public whitelist or endpoint) is refused
with its message."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from inferstack.components import InferenceServer
from inferstack.spec import Cache
from tests.components.conftest import CLOUD_ARGS, STACK_CONFIG
from tests.policy import deployments
from tests.policy.harness import Registered, check_recording, check_resource, pack, record_with_dependencies
from tests.sample_plans import sample_plan

TOKEN = "Cache-policy_0123456789"
RULE = "managed-redis-private-tls-auth"
REDIS_TYPES = {"aws": "aws:elasticache/replicationGroup:ReplicationGroup", "gcp": "gcp:redis/instance:Instance",
               "alibaba": "alicloud:kvstore/instance:Instance", "huawei": "huaweicloud:Dcs/instance:Instance"}
POLICY = pack.managed_redis_private_tls_auth


@cache
def cached_deployment(cloud: str, stage: str) -> Registered:
    plan = sample_plan(cloud, "gpu-llm", stage).model_copy(update={"cache": Cache(ttl_seconds=600)})
    args: dict[str, Any] = {"plan": plan, **CLOUD_ARGS[cloud]}
    if cloud != "gcp":  # Memorystore generates its own AUTH string
        args["cache_auth_token"] = TOKEN
    return record_with_dependencies(lambda: InferenceServer("pol", args), config=STACK_CONFIG, stack="policy")


def redis_inputs(cloud: str) -> dict[str, Any]:
    (redis,) = cached_deployment(cloud, "internal").recording.of_type(REDIS_TYPES[cloud])
    return dict(redis.inputs)


@pytest.mark.parametrize("stage", ["internal", "production"])
@pytest.mark.parametrize("cloud", list(REDIS_TYPES))
def test_a_deployment_with_a_cache_passes_every_policy_and_the_redis_rule_read_its_redis(cloud: str,
                                                                                         stage: str) -> None:
    report = check_recording(cached_deployment(cloud, stage), config=deployments.policy_config(stage))
    assert [(v.policy, v.message) for v in report.mandatory()] == []
    assert REDIS_TYPES[cloud] in report.checked[RULE]


def _set(**changes: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda props: {**props, **changes}


def _without(*keys: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda props: {k: v for k, v in props.items() if k not in keys}


MUTATIONS = [
    ("aws", _set(transitEncryptionEnabled=False),
     "the Redis replication group does not encrypt in transit: set transitEncryptionEnabled true"),
    ("aws", _set(transitEncryptionMode="preferred"),
     "the Redis replication group still accepts plain connections (transitEncryptionMode preferred): set it to "
     "required"),
    ("aws", _without("authToken"),
     "the Redis replication group needs no AUTH: set authToken (a secret) or userGroupIds"),
    ("aws", _set(atRestEncryptionEnabled=False),
     "the Redis replication group is not encrypted at rest: set atRestEncryptionEnabled true"),
    ("aws", _without("securityGroupIds"),
     "the Redis replication group has no subnet group and security group of the stack: place it in the VPC's private "
     "subnets behind a security group that admits the servers only"),
    ("gcp", _set(authEnabled=False), "the Memorystore instance answers without AUTH: set authEnabled true"),
    ("gcp", _set(transitEncryptionMode="DISABLED"),
     "the Memorystore instance does not use TLS: set transitEncryptionMode SERVER_AUTHENTICATION"),
    ("gcp", _without("authorizedNetwork"),
     "the Memorystore instance is on the project's default network: set authorizedNetwork to the deployment's "
     "network"),
    ("alibaba", _set(sslEnable="Disable"), "the Tair instance does not use TLS: set sslEnable Enable"),
    ("alibaba", _set(vpcAuthMode="Close"),
     "the Tair instance answers without a password in the VPC (vpcAuthMode Close): set it to Open"),
    ("alibaba", _without("password"), "the Tair instance has no password: set password (a secret)"),
    ("alibaba", _set(securityIps=["127.0.0.1", "0.0.0.0/0"]),
     "the Tair whitelist admits public addresses (0.0.0.0/0): admit the servers' security group (securityGroupId) "
     "or private ranges only"),
    ("huawei", _set(sslEnable=False),
     "the DCS instance does not use SSL: set sslEnable true (Redis 6.0 basic edition)"),
    ("huawei", _without("password"), "the DCS instance allows password-free access: set password (a secret)"),
    ("huawei", _set(whitelistEnable=False),
     "the DCS whitelist is off, so every address in the VPC reaches the instance: enable it"),
    ("huawei", _set(whitelists=[{"groupName": "all", "ipAddresses": ["203.0.113.0/24"]}]),
     "the DCS whitelist admits public addresses (203.0.113.0/24): admit the servers' subnets only"),
]


@pytest.mark.parametrize(("cloud", "mutate", "message"), MUTATIONS, ids=[m[2][:60] for m in MUTATIONS])
def test_a_weakened_redis_is_refused_with_its_reason(cloud: str, mutate: Callable[[dict[str, Any]], dict[str, Any]],
                                                     message: str) -> None:
    compliant = redis_inputs(cloud)
    assert check_resource(POLICY, REDIS_TYPES[cloud], compliant).messages() == []
    assert check_resource(POLICY, REDIS_TYPES[cloud], mutate(compliant)).messages() == [message]


def test_a_public_tair_endpoint_and_a_standalone_redis_cluster_are_refused() -> None:
    assert check_resource(POLICY, "alicloud:kvstore/connection:Connection", {
        "instanceId": "r-1", "connectionStringPrefix": "pub", "port": "6379"}).messages() == [
        "a kvstore connection gives the Tair instance a public endpoint: reach it from the VPC only"]
    assert check_resource(POLICY, "aws:elasticache/cluster:Cluster", {"engine": "redis", "nodeType": "cache.t4g.small"
                                                                      }).messages() == [
        "a standalone ElastiCache cluster takes no AUTH token: use a replication group with transitEncryptionEnabled, "
        "authToken and atRestEncryptionEnabled"]

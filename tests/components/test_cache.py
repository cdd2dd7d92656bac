"""The inference cache under mocks, on every cloud: a plan with a cache registers a managed Redis in the private
network with TLS and AUTH, admits the servers only (and opens the servers' egress to it), keeps the AUTH token in the
secret store (never in user data or a plain input), and the servers' gateways are configured to use it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inferstack.bootstrap import gateway
from inferstack.components import InferenceServer
from inferstack.errors import InputError
from inferstack.preview import Recording
from inferstack.spec import CLOUDS, Cache
from tests.components.conftest import CLOUD_ARGS, STACK_CONFIG
from tests.sample_plans import sample_plan

TOKEN = "Cache-test_0123456789ab"
REDIS_TYPES = {"aws": "aws:elasticache/replicationGroup:ReplicationGroup", "gcp": "gcp:redis/instance:Instance",
               "alibaba": "alicloud:kvstore/instance:Instance", "huawei": "huaweicloud:Dcs/instance:Instance"}
BUNDLE_TYPES = {"aws": "aws:s3/bucketObjectv2:BucketObjectv2", "gcp": "gcp:storage/bucketObject:BucketObject",
                "alibaba": "alicloud:oss/bucketObject:BucketObject",
                "huawei": "huaweicloud:Obs/bucketObject:BucketObject"}
SERVER_FIREWALLS = {"aws": "aws:ec2/securityGroup:SecurityGroup", "alibaba": "alicloud:ecs/securityGroup:SecurityGroup",
                    "huawei": "huaweicloud:Vpc/secgroup:Secgroup"}


def cached_args(cloud: str, stage: str = "internal", **extra: Any) -> dict[str, Any]:
    plan = sample_plan(cloud, "gpu-llm", stage).model_copy(update={"cache": Cache(ttl_seconds=600)})
    args: dict[str, Any] = {"plan": plan, **CLOUD_ARGS[cloud], **extra}
    if cloud != "gcp":
        args.setdefault("cache_auth_token", TOKEN)
    return args


def deploy(args: dict[str, Any]) -> Recording:
    from inferstack.preview import record

    return record(lambda: InferenceServer("inf", args), config=STACK_CONFIG, stack="cache")


def redis(recording: Recording, cloud: str) -> dict[str, Any]:
    (found,) = recording.of_type(REDIS_TYPES[cloud])
    return found.inputs


def gateway_config(recording: Recording, cloud: str) -> str:
    (bundle,) = recording.of_type(BUNDLE_TYPES[cloud])
    files = {f["path"]: f["content"] for f in json.loads(bundle.inputs["content"])["files"]}
    return files[gateway.CONFIG_PATH] + files["/etc/systemd/system/inferstack-gateway.service"]


def test_aws_registers_elasticache_with_tls_auth_encryption_in_its_own_group_open_to_the_servers_only() -> None:
    recording = deploy(cached_args("aws", "production"))
    inputs = redis(recording, "aws")
    assert (inputs["transitEncryptionEnabled"], inputs["transitEncryptionMode"], inputs["atRestEncryptionEnabled"],
            inputs["authToken"]) == (True, "required", True, TOKEN)
    assert (inputs["numCacheClusters"], inputs["automaticFailoverEnabled"], inputs["multiAzEnabled"]) == (2, True, True)
    (cache_group,) = [g for g in recording.of_type(SERVER_FIREWALLS["aws"]) if g.name == "inf-cache-sg"]
    assert inputs["securityGroupIds"] == [cache_group.id] and inputs["subnetGroupName"]
    (server_group,) = [g for g in recording.of_type(SERVER_FIREWALLS["aws"]) if g.name == "inf-firewall-sg"]
    ingress = [r.inputs for r in recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
               if r.inputs["securityGroupId"] == cache_group.id]
    assert [(r["referencedSecurityGroupId"], r["fromPort"], r["toPort"]) for r in ingress] == [
        (server_group.id, 6379, 6379)]
    assert not any("cidrIpv4" in r for r in ingress)
    egress = [r.inputs for r in recording.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
              if r.inputs.get("referencedSecurityGroupId") == cache_group.id]
    assert [(r["securityGroupId"], r["fromPort"]) for r in egress] == [(server_group.id, 6379)]


def test_gcp_registers_memorystore_with_auth_and_tls_on_the_network_reachable_from_the_servers_tag_only() -> None:
    recording = deploy(cached_args("gcp"))
    inputs = redis(recording, "gcp")
    (network,) = recording.of_type("gcp:compute/network:Network")
    assert (inputs["authEnabled"], inputs["transitEncryptionMode"], inputs["connectMode"], inputs["tier"]) == (
        True, "SERVER_AUTHENTICATION", "DIRECT_PEERING", "BASIC")
    assert inputs["authorizedNetwork"] == network.id
    rules = {r.name: r.inputs for r in recording.of_type("gcp:compute/firewall:Firewall") if "cache" in r.name}
    allow, deny = rules["inf-cache-egress"], rules["inf-cache-deny"]
    (server_rule,) = [r.inputs for r in recording.of_type("gcp:compute/firewall:Firewall")
                      if r.name == "inf-firewall-egress-deny"]
    assert allow["direction"] == deny["direction"] == "EGRESS"
    assert allow["targetTags"] == server_rule["targetTags"] and allow["allows"] == [
        {"protocol": "tcp", "ports": ["6378"]}]
    assert "targetTags" not in deny and deny["denies"] == [{"protocol": "all"}] and deny["priority"] > allow["priority"]
    assert allow["destinationRanges"] == deny["destinationRanges"] and allow["destinationRanges"][0].endswith("/29")
    # the generated AUTH string goes to Secret Manager; the gateway reads it from there, and trusts the instance's CA
    versions = [r for r in recording.of_type("gcp:secretmanager/secretVersion:SecretVersion")
                if "cache-auth" in r.name]
    assert len(versions) == 1 and versions[0].inputs["secretData"].startswith("preview-")
    config = gateway_config(recording, "gcp")
    assert f"lua_ssl_trusted_certificate {gateway.CACHE_CA_FILE};" in config and "port = 6378" in config


def test_alibaba_registers_tair_with_tls_and_a_password_whitelisting_the_servers_security_group_only() -> None:
    recording = deploy(cached_args("alibaba"))
    inputs = redis(recording, "alibaba")
    (server_group,) = recording.of_type(SERVER_FIREWALLS["alibaba"])
    assert (inputs["sslEnable"], inputs["vpcAuthMode"], inputs["password"], inputs["instanceType"]) == (
        "Enable", "Open", TOKEN, "Redis")
    assert inputs["securityGroupId"] == server_group.id and inputs["securityIps"] == ["127.0.0.1"]
    (vswitch,) = recording.of_type("alicloud:vpc/switch:Switch")
    assert inputs["vswitchId"] == vswitch.id
    egress = [r.inputs for r in recording.of_type("alicloud:ecs/securityGroupRule:SecurityGroupRule")
              if "cache" in r.name]
    assert [(r["type"], r["portRange"], r["policy"], r["securityGroupId"]) for r in egress] == [
        ("egress", "6379/6379", "accept", server_group.id)]
    assert egress[0]["cidrIp"].endswith("/32")


def test_huawei_registers_dcs_with_ssl_and_a_password_whitelisting_the_servers_subnets_only() -> None:
    recording = deploy(cached_args("huawei"))
    inputs = redis(recording, "huawei")
    assert (inputs["sslEnable"], inputs["password"], inputs["whitelistEnable"], inputs["engineVersion"]) == (
        True, TOKEN, True, "6.0")
    (subnet,) = recording.of_type("huaweicloud:Vpc/subnet:Subnet")
    assert inputs["subnetId"] == subnet.id
    assert inputs["whitelists"] == [{"groupName": "inferstack-servers", "ipAddresses": ["10.64.0.0/20"]}]
    (server_group,) = recording.of_type(SERVER_FIREWALLS["huawei"])
    egress = [r.inputs for r in recording.of_type("huaweicloud:Vpc/secgroupRule:SecgroupRule") if "cache" in r.name]
    assert [(r["direction"], r["portRangeMin"], r["securityGroupId"]) for r in egress] == [
        ("egress", 6379, server_group.id)]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_token_stays_in_the_secret_store_and_the_gateway_reads_it_from_there(cloud: str) -> None:
    recording = deploy(cached_args(cloud))
    config = gateway_config(recording, cloud)
    assert "access_by_lua_block" in config and "ttl_seconds = 600" in config
    assert "--secret REDIS_AUTH=" in config and f"--out {gateway.CACHE_AUTH_FILE} --format env" in config
    assert TOKEN not in config
    visible = json.dumps([r.masked_inputs for r in recording.resources])
    assert TOKEN not in visible  # the Redis takes it as a secret; the secret store keeps it as one
    stored = [r for r in recording.resources if "cache-auth" in r.name and r.custom]
    assert stored, "the AUTH token is in the secret store"
    host = {"aws": "master.", "gcp": "10.64.", "alibaba": ".redis.rds.aliyuncs.com", "huawei": "10.64."}[cloud]
    assert host in config


def test_a_plan_with_a_cache_needs_a_valid_token_where_the_cloud_takes_one_and_none_where_it_makes_its_own() -> None:
    for args, field in ((cached_args("aws", cache_auth_token=None), "inf.cache_auth_token"),
                        (cached_args("alibaba", cache_auth_token="short"), "inf.cache_auth_token"),
                        (cached_args("huawei", cache_auth_token="no-upper-case-0123456"), "inf.cache_auth_token"),
                        (cached_args("gcp", cache_auth_token=TOKEN), "inf.cache_auth_token")):
        if args.get("cache_auth_token") is None:
            args.pop("cache_auth_token", None)
        with pytest.raises(InputError) as error:
            deploy(args)
        assert field in [problem.field for problem in error.value.problems]
        assert TOKEN not in str(error.value)


def test_without_a_cache_no_redis_and_a_token_is_refused() -> None:
    plain = {"plan": sample_plan("aws", "gpu-llm"), **CLOUD_ARGS["aws"]}
    recording = deploy(plain)
    assert not recording.of_type(REDIS_TYPES["aws"])
    with pytest.raises(InputError, match="the plan has no cache"):
        deploy({**plain, "cache_auth_token": TOKEN})


def test_brought_security_groups_are_admitted_but_not_changed() -> None:
    args = cached_args("aws", security_group_ids=["sg-0123456789abcdef0"])
    recording = deploy(args)
    ingress = [r.inputs for r in recording.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")]
    assert [r["referencedSecurityGroupId"] for r in ingress] == ["sg-0123456789abcdef0"]
    assert not [r for r in recording.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
                if r.inputs["securityGroupId"] == "sg-0123456789abcdef0"]

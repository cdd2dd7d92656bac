"""Issue 23's bypasses ("trust at the edges"): each produced 0 violations on the pack before the fix.

- The API key: the policy was advisory; it stayed silent when the world was split into ranges (0.0.0.0/1 +
  128.0.0.0/2 + 192.0.0.0/3, or one public /24), when an unrelated secret was named `*-api-key`, and on Google
  Cloud, Alibaba and Huawei fleets, whose Cloud Armor policy, ALB ACL or ELB IP group it never read.
- The inference cache: the managed-Redis rule passed the types it did not read (ElastiCache Serverless without
  users, a user group with a user that needs no password, Memorystore Cluster and Valkey without AUTH and TLS,
  Alibaba's TairInstance without a password and open to 0.0.0.0/0) and an explicit default network.
- Production: a plan edited to a stage below production, without its fleet, deployed loose public servers (plain
  HTTP, no load balancer, no protection) and the pack passed it.

Each case is written as the engine sends it, with the exact violation it now gets; the compliant cases beside
them show what inferstack builds still passes.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from guardrails.cache import AWS_REPLICATION_GROUP, GCP_REDIS
from guardrails.resource_types import (
    ALI_LB_SECURITY_GROUP,
    ALI_SCALING_GROUP,
    ALI_SECURITY_GROUP,
    ALI_SECURITY_GROUP_RULE,
    AWS_AUTOSCALING_GROUP,
    AWS_INGRESS_RULE,
    AWS_INSTANCE,
    AWS_LISTENERS,
    AWS_LOAD_BALANCERS,
    AWS_PARAMETER,
    AWS_ROLE,
    AWS_ROLE_POLICY,
    GCP_REGION_GROUP_MANAGER,
    HW_AS_GROUP,
    HW_LISTENER,
)
from guardrails.ruleset import RESOURCE_RULES
from pulumi_policy import EnforcementLevel

from tests.policy import deployments, fleets
from tests.policy.harness import (
    Registered,
    Resource,
    check_recording,
    check_resource,
    check_stack,
    pack,
)
from tests.sample_plans import sample_plan

WORLD = "0.0.0.0/0"
KEY_FIX = ("store it as a secret the servers' identity may read (`pulumi config set --secret inferstack:apiKey "
           "\"$(openssl rand -hex 32)\"`), or admit private networks only")
NO_KEY = "the stack stores no API key (no secret resource named '*-api-key')"


def _api_key_violations(resources: list[Resource]) -> list[tuple[str, str]]:
    report = check_stack(pack.public_api_has_api_key, resources)
    return [(v.message, v.urn.rsplit("::", 1)[-1]) for v in report.violations]


def _api_rule(name: str, cidr: str, port: float = 8000.0) -> Resource:
    return Resource(AWS_INGRESS_RULE, name, {"ipProtocol": "tcp", "fromPort": port, "toPort": port,
                                                    "cidrIpv4": cidr, "securityGroupId": "sg-srv"})


#### The API key: mandatory, for any public source ####


def test_the_api_key_policy_is_mandatory() -> None:
    assert pack.public_api_has_api_key.enforcement_level == EnforcementLevel.MANDATORY
    report = check_stack(pack.public_api_has_api_key, [_api_rule("api", WORLD)])
    assert [v.level for v in report.violations] == [EnforcementLevel.MANDATORY]


@pytest.mark.parametrize(("cidrs", "wheres"), [
    (["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3"],
     ["public network 0.0.0.0/1", "public network 128.0.0.0/2", "public network 192.0.0.0/3"]),
    (["203.0.113.0/24"], ["public network 203.0.113.0/24"]),
    (["2001:db8::/32"], ["public network 2001:db8::/32"]),
    (["::/0"], ["the whole internet (::/0)"]),
    (["any"], ["source 'any', which the pack cannot read (so it counts as public)"]),
], ids=["the world split in three", "one public /24", "an IPv6 range", "the IPv6 world",
        "a source the pack cannot read"])
def test_a_port_open_to_any_public_source_needs_an_api_key(cidrs: list[str], wheres: list[str]) -> None:
    split = [_api_rule(f"api-{index}", cidr) for index, cidr in enumerate(cidrs)]
    assert _api_key_violations(split) == [(f"port 8000 is open to {where}, and {NO_KEY}: {KEY_FIX}", f"api-{index}")
                                          for index, where in enumerate(wheres)]


def test_a_port_open_to_private_networks_only_needs_no_api_key() -> None:
    private = [_api_rule("api-0", "10.64.0.0/16"), _api_rule("api-1", "fd00::/8")]
    report = check_stack(pack.public_api_has_api_key, private)
    assert report.violations == [] and list(report.not_applicable) == [("public-api-has-api-key", "")]


def _aws_identity(*readable: str) -> list[Resource]:
    """The servers' role, reading the parameters named (their ARNs) and nothing else."""
    arns = [f"arn:aws:ssm:us-east-1:123456789012:parameter/inferstack/inv/prod/{name}" for name in readable]
    policy = fleets.policy_document([{"Effect": "Allow", "Action": ["ssm:GetParameter"], "Resource": arns}])
    return [Resource(AWS_ROLE, "identity-role", {"name": "inv-identity-role",
                                                 "assumeRolePolicy": fleets.trust_policy("ec2.amazonaws.com")}),
            Resource(AWS_ROLE_POLICY, "identity-secrets-read", {"role": "inv-identity-role", "policy": policy},
                     {"role": ["identity-role"]})]


def _parameter(name: str) -> Resource:
    return Resource(AWS_PARAMETER, name, {
        "name": f"/inferstack/inv/prod/{name}", "type": "SecureString",
        "arn": f"arn:aws:ssm:us-east-1:123456789012:parameter/inferstack/inv/prod/{name}"})


def test_an_unrelated_secret_named_like_an_api_key_is_not_the_servers_key() -> None:
    stack = [_api_rule("api", WORLD), _parameter("server-secrets-hub-token"), _parameter("billing-api-key"),
             _parameter("server-secrets-api-key")]
    assert _api_key_violations([*stack, *_aws_identity("server-secrets-hub-token")]) == [
        ("port 8000 is open to the whole internet (0.0.0.0/0), and the servers' identity identity-role may read none "
         f"of the stack's API keys (billing-api-key, server-secrets-api-key): {KEY_FIX}", "api")]
    assert _api_key_violations([*stack, *_aws_identity("server-secrets-hub-token", "server-secrets-api-key")]) == []


def test_an_api_key_that_no_server_identity_reads_is_not_the_servers_key() -> None:
    assert _api_key_violations([_api_rule("api", WORLD), _parameter("server-secrets-api-key")]) == [
        ("port 8000 is open to the whole internet (0.0.0.0/0), and the stack has no server identity that may read "
         f"its API key (server-secrets-api-key): {KEY_FIX}", "api")]


#### The API key: a load balancer's callers, on every cloud ####


def _set(**changes: Any) -> Any:
    return lambda props: {**props, **changes}


def _without_key(cloud: str) -> list[Resource]:
    return fleets.fleet(cloud, api_key=False)


@pytest.mark.parametrize("cloud", sorted(fleets.FLEETS))
def test_a_compliant_fleet_with_its_api_key_passes(cloud: str) -> None:
    assert _api_key_violations(fleets.fleet(cloud)) == []


GCP_OPEN = ("the internet-facing forwarding rule https admits public callers ({why}), and "
            f"{NO_KEY}: {KEY_FIX}")


def _armor(*rules_: dict[str, Any], name: str = "armor") -> Resource:
    return Resource("gcp:compute/securityPolicy:SecurityPolicy", name, {"name": f"inv-{name}", "type": "CLOUD_ARMOR",
                                                                       "rules": list(rules_)})


def _armor_rule(priority: float, action: str, *ranges: str) -> dict[str, Any]:
    return {"priority": priority, "action": action,
            "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": list(ranges)}}}


DENY_THE_REST = _armor_rule(2147483647.0, "deny(403)", "*")


def _gcp_behind(armor: Resource | None, policy: str = "inv-armor") -> list[Resource]:
    stack = fleets.changed(_without_key("gcp"), "backend", _set(securityPolicy=policy),
                           depends={"healthChecks": ["health"], "backends": ["group"],
                                    **({"securityPolicy": [armor.name]} if armor else {})})
    return [*stack, *([armor] if armor else [])]


@pytest.mark.parametrize(("armor", "policy", "why"), [
    (None, None, "backend service backend has no Cloud Armor policy"),
    (_armor(_armor_rule(1000.0, "allow", "*"), DENY_THE_REST), "inv-armor",
     "Cloud Armor policy armor allows * (rule 1000)"),
    (_armor(_armor_rule(1000.0, "allow", "203.0.113.0/24"), DENY_THE_REST), "inv-armor",
     "Cloud Armor policy armor allows 203.0.113.0/24 (rule 1000)"),
    (_armor(_armor_rule(1000.0, "allow", "10.64.0.0/16")), "inv-armor",
     "Cloud Armor policy armor has no default rule (priority 2147483647), so Google adds one that allows every "
     "address"),
    (_armor({"priority": 1000.0, "action": "allow", "match": {"expr": {"expression": "origin.region_code == 'CH'"}}},
            DENY_THE_REST), "inv-armor",
     "Cloud Armor policy armor allows an expression the pack cannot read (rule 1000)"),
    (None, "projects/p/global/securityPolicies/elsewhere",
     "backend service backend has Cloud Armor policy projects/p/global/securityPolicies/elsewhere, which this stack "
     "does not create, so the pack cannot read it"),
], ids=["no policy", "a policy allowing *", "a public /24", "no default rule", "an expression", "not in the stack"])
def test_a_google_load_balancer_whose_cloud_armor_admits_the_public_needs_an_api_key(
        armor: Resource | None, policy: str | None, why: str) -> None:
    stack = _without_key("gcp") if policy is None else _gcp_behind(armor, policy)
    assert _api_key_violations(stack) == [(GCP_OPEN.format(why=why), "https")]


def test_a_google_load_balancer_whose_cloud_armor_admits_private_callers_only_needs_no_api_key() -> None:
    armor = _armor(_armor_rule(1000.0, "allow", "10.64.0.0/16"), DENY_THE_REST,
                   {**_armor_rule(900.0, "allow", "*"), "preview": True})  # a preview rule enforces nothing
    assert _api_key_violations(_gcp_behind(armor)) == []
    internal = fleets.changed(_without_key("gcp"), "https", _set(loadBalancingScheme="INTERNAL_MANAGED"),
                              depends={"target": ["https-proxy"]})
    internal = fleets.changed(internal, "http", _set(loadBalancingScheme="INTERNAL_MANAGED"),
                              depends={"target": ["http-proxy"]})
    assert _api_key_violations(internal) == []


LISTENER_OPEN = "the internet-facing listener https admits public callers ({why}), and " + f"{NO_KEY}: {KEY_FIX}"


def _alibaba_acl(acl_type: str, *entries: str) -> list[Resource]:
    acl = [Resource("alicloud:alb/acl:Acl", "callers", {"aclName": "inv-callers"}),
           Resource("alicloud:alb/aclEntryAttachment:AclEntryAttachment", "callers-entries", {
               "aclId": "acl-1", "entries": [{"entry": e, "description": "allowed callers"} for e in entries]},
                    {"aclId": ["callers"]})]
    return [*acl, *(Resource("alicloud:alb/listenerAclAttachment:ListenerAclAttachment", f"{listener}-callers", {
        "listenerId": f"lsn-{listener}", "aclId": "acl-1", "aclType": acl_type},
        {"listenerId": [listener], "aclId": ["callers"]}) for listener in ("https", "http"))]


@pytest.mark.parametrize(("acl", "why"), [
    ([], "no security group is attached to the load balancer and the listener has no whitelist ACL"),
    (_alibaba_acl("White", WORLD), "its whitelist ACL callers admits 0.0.0.0/0"),
    (_alibaba_acl("White", "10.64.0.0/16", "198.51.100.7/32"), "its whitelist ACL callers admits 198.51.100.7/32"),
    (_alibaba_acl("Black", "198.51.100.7/32"), "its ACL callers is a blacklist, which admits every address it does "
                                               "not list"),
], ids=["no ACL", "a whitelist of the world", "a public address", "a blacklist"])
def test_an_alibaba_load_balancer_whose_acl_admits_the_public_needs_an_api_key(acl: list[Resource],
                                                                                why: str) -> None:
    assert _api_key_violations([*_without_key("alibaba"), *acl]) == [(LISTENER_OPEN.format(why=why), "https")]


def test_an_alibaba_load_balancer_with_a_private_whitelist_or_a_security_group_needs_no_api_key() -> None:
    assert _api_key_violations([*_without_key("alibaba"), *_alibaba_acl("White", "10.64.0.0/16")]) == []
    guarded = [Resource(ALI_SECURITY_GROUP, "lb-firewall", {"vpcId": "vpc-1"}),
               Resource(ALI_LB_SECURITY_GROUP, "lb-firewall-attachment", {"loadBalancerId": "alb-1",
                                                                               "securityGroupId": "sg-lb"},
                        {"loadBalancerId": ["lb"], "securityGroupId": ["lb-firewall"]}),
               Resource(ALI_SECURITY_GROUP_RULE, "lb-https", {
                   "type": "ingress", "ipProtocol": "tcp", "portRange": "443/443", "cidrIp": "10.0.0.0/8",
                   "policy": "accept", "securityGroupId": "sg-lb"}, {"securityGroupId": ["lb-firewall"]})]
    assert _api_key_violations([*_without_key("alibaba"), *guarded]) == []
    intranet = fleets.changed(_without_key("alibaba"), "lb", _set(addressType="Intranet"))
    assert _api_key_violations(intranet) == []


def _huawei_ip_group(*addresses: str, policy: str = "white", enable: str | None = None) -> list[Resource]:
    group = Resource("huaweicloud:DedicatedElb/ipgroup:Ipgroup", "callers",
                     {"ipLists": [{"ip": address} for address in addresses]})
    listeners = []
    for listener in fleets.huawei():
        if listener.type == HW_LISTENER:
            gated = {**listener.props, "ipGroup": "ipg-1", "accessPolicy": policy,
                     **({"ipGroupEnable": enable} if enable else {})}
            listeners.append(dataclasses.replace(listener, props=gated,
                                                 depends={**listener.depends, "ipGroup": ["callers"]}))
    kept = [r for r in _without_key("huawei") if r.type != HW_LISTENER]
    return [*kept, *listeners, group]


@pytest.mark.parametrize(("stack", "why"), [
    (_without_key("huawei"), "it has no IP address group (ipGroup)"),
    (_huawei_ip_group(WORLD), "its IP address group callers admits 0.0.0.0/0"),
    (_huawei_ip_group(), "its IP address group callers is empty, which admits every address"),
    (_huawei_ip_group("10.64.0.0/16", policy="black"), "its access policy is black, which admits every address the "
                                                       "group does not list"),
    (_huawei_ip_group("10.64.0.0/16", enable="false"), "its access control is off (ipGroupEnable false)"),
    (_huawei_ip_group("10.64.0.1-10.64.0.9", "198.51.100.1-198.51.100.9"),
     "its IP address group callers admits 198.51.100.1-198.51.100.9"),
], ids=["no IP group", "a whitelist of the world", "an empty group", "a blacklist", "access control off",
        "a public address range"])
def test_a_huawei_load_balancer_whose_ip_group_admits_the_public_needs_an_api_key(stack: list[Resource],
                                                                                   why: str) -> None:
    assert _api_key_violations(stack) == [(LISTENER_OPEN.format(why=why), "https")]


def test_a_huawei_load_balancer_with_a_private_ip_group_or_no_public_address_needs_no_api_key() -> None:
    assert _api_key_violations(_huawei_ip_group("10.64.0.0/16", "10.64.0.1-10.64.0.9")) == []
    private = fleets.changed(_without_key("huawei"), "lb", lambda props: {
        k: v for k, v in props.items() if k != "ipv4EipId"})
    assert _api_key_violations(private) == []


def test_an_aws_load_balancer_that_names_no_security_group_of_the_stack_needs_an_api_key() -> None:
    stack = [r for r in _without_key("aws") if r.name not in ("lb-https", "lb-http")]
    assert _api_key_violations(stack) == []  # its security group admits nobody
    unguarded = fleets.changed(stack, "lb", _set(securityGroups=[]), depends={})
    assert _api_key_violations(unguarded) == [
        ("the internet-facing load balancer lb admits public callers (it names no security group of this stack, so "
         f"the VPC's default security group or one the pack cannot read decides who may call it), and {NO_KEY}: "
         f"{KEY_FIX}", "lb")]


#### The inference cache: every cache type is read, or refused ####

REDIS = pack.managed_redis_private_tls_auth
CACHE_MODULES = {"pulumi_aws": ["elasticache", "memorydb"], "pulumi_gcp": ["redis", "memorystore"],
                 "pulumi_alicloud": ["kvstore", "redis"], "pulumi_huaweicloud": ["dcs"]}


def _sdk_resource_types(package: str, module: str) -> set[str]:
    """The resource type tokens a provider SDK registers in one module (its `__init__`-listed resource files)."""
    import importlib

    folder = Path(importlib.import_module(f"{package}.{module}").__file__ or "").parent
    tokens = set()
    for source in folder.glob("*.py"):
        tokens |= set(re.findall(r"""super\(\w+, __self__\)\.__init__\(\s*'([a-z]+:[A-Za-z]+/[A-Za-z]+:[A-Za-z]+)'""",
                                 source.read_text()))
    return tokens


CACHE_TYPES = sorted(t for package, modules in CACHE_MODULES.items() for m in modules
                     for t in _sdk_resource_types(package, m))


def test_the_sdks_cache_modules_were_found() -> None:
    assert len(CACHE_TYPES) >= 30 and "aws:elasticache/serverlessCache:ServerlessCache" in CACHE_TYPES


@pytest.mark.parametrize("resource_type", CACHE_TYPES)
def test_every_type_of_the_cache_modules_is_read_by_the_redis_rule(resource_type: str) -> None:
    (rule,) = [r for r in RESOURCE_RULES if r.name == REDIS.name]
    assert rule.reads(resource_type)


def test_a_cache_type_the_pack_does_not_know_is_refused() -> None:
    assert check_resource(REDIS, "aws:elasticache/futureCache:FutureCache", {}).messages() == [
        "aws:elasticache/futureCache:FutureCache is a cache type the pack cannot read, so it cannot tell whether it "
        "is private, encrypted in transit and needs AUTH: use a cache type the pack reads (docs/policy.md lists them)"]


SERVERLESS = {"engine": "valkey", "name": "inv-cache", "subnetIds": ["subnet-a", "subnet-b"],
              "securityGroupIds": ["sg-cache"], "userGroupId": "inv-users"}


@pytest.mark.parametrize(("resource_type", "props", "messages"), [
    ("aws:elasticache/serverlessCache:ServerlessCache", {k: v for k, v in SERVERLESS.items() if k != "userGroupId"},
     ["the ElastiCache serverless cache names no user group, so every client that reaches it gets in without a "
      "password: set userGroupId to a user group of users with passwords"]),
    ("aws:elasticache/serverlessCache:ServerlessCache", {"engine": "redis", "userGroupId": "inv-users"},
     ["the ElastiCache serverless cache names no subnets and security groups, so it sits in the default VPC behind "
      "its default security group: place it in the stack's private subnets behind a security group that admits "
      "the servers only"]),
    ("aws:elasticache/serverlessCache:ServerlessCache", {**SERVERLESS, "engine": "memcached"},
     ["a Memcached cache takes no AUTH: use Redis or Valkey with a user group"]),
    ("aws:elasticache/user:User", {"userId": "app", "userName": "app", "engine": "valkey",
                                   "accessString": "on ~* +@all", "authenticationMode": {
                                       "type": "no-password-required"}},
     ["the ElastiCache user app needs no password (authenticationMode no-password-required), so anyone who reaches a "
      "cache whose user group holds it gets in: give it passwords or IAM authentication"]),
    ("aws:elasticache/user:User", {"userId": "app", "userName": "app", "engine": "redis",
                                   "accessString": "on ~* +@all", "noPasswordRequired": True},
     ["the ElastiCache user app needs no password (noPasswordRequired), so anyone who reaches a cache whose user "
      "group holds it gets in: give it passwords or IAM authentication"]),
    ("aws:elasticache/userGroup:UserGroup", {"userGroupId": "inv-users", "engine": "valkey",
                                             "userIds": ["default", "app"]},
     ["the user group holds ElastiCache's built-in user default, which needs no password: hold a user of the stack "
      "named default, with a password, instead"]),
    ("gcp:redis/cluster:Cluster", {"shardCount": 3.0, "region": "us-central1",
                                   "pscConfigs": [{"network": "projects/p/global/networks/inv"}]},
     ["the Memorystore cluster answers without AUTH (authorizationMode is unset): set AUTH_MODE_IAM_AUTH",
      "the Memorystore cluster does not use TLS (transitEncryptionMode is unset): set "
      "TRANSIT_ENCRYPTION_MODE_SERVER_AUTHENTICATION"]),
    ("gcp:memorystore/instance:Instance", {"instanceId": "inv", "location": "us-central1", "shardCount": 1.0,
                                           "authorizationMode": "AUTH_DISABLED",
                                           "transitEncryptionMode": "TRANSIT_ENCRYPTION_DISABLED"},
     ["the Memorystore for Valkey instance answers without AUTH (authorizationMode is AUTH_DISABLED): set IAM_AUTH",
      "the Memorystore for Valkey instance does not use TLS (transitEncryptionMode is TRANSIT_ENCRYPTION_DISABLED): "
      "set SERVER_AUTHENTICATION"]),
    ("alicloud:redis/tairInstance:TairInstance", {"instanceClass": "tair.rdb.2g", "instanceType": "tair_rdb",
                                                  "vpcId": "vpc-1", "vswitchId": "vsw-1", "zoneId": "ap-southeast-1a",
                                                  "sslEnabled": "Enable", "securityIps": WORLD},
     ["the Tair instance has no password: set password (a secret)",
      "the Tair whitelist admits public addresses (0.0.0.0/0): admit the servers' security group (securityGroupId) "
      "or private ranges only"]),
    ("gcp:redis/instance:Instance", {"authEnabled": True, "transitEncryptionMode": "SERVER_AUTHENTICATION",
                                     "authorizedNetwork": "projects/p/global/networks/default"},
     ["the Memorystore instance is on the project's default network (authorizedNetwork "
      "projects/p/global/networks/default): set authorizedNetwork to the deployment's network"]),
], ids=["serverless without users", "serverless in the default VPC", "serverless Memcached",
        "a user without a password", "a user that needs no password", "the built-in default user",
        "Memorystore Cluster without AUTH and TLS", "Valkey without AUTH and TLS", "Tair open to the world",
        "the default network by name"])
def test_a_cache_the_rule_did_not_read_is_refused_with_its_reason(resource_type: str, props: dict[str, Any],
                                                                  messages: list[str]) -> None:
    assert check_resource(REDIS, resource_type, props).messages() == messages


@pytest.mark.parametrize(("resource_type", "props"), [
    ("aws:elasticache/serverlessCache:ServerlessCache", SERVERLESS),
    ("aws:elasticache/user:User", {"userId": "app", "userName": "default", "engine": "valkey",
                                   "accessString": "on ~* +@all", "authenticationMode": {"type": "password",
                                                                                          "passwords": ["p" * 16]}}),
    ("aws:elasticache/userGroup:UserGroup", {"userGroupId": "inv-users", "engine": "valkey", "userIds": ["app"]}),
    ("gcp:redis/cluster:Cluster", {"authorizationMode": "AUTH_MODE_IAM_AUTH", "pscConfigs": [
        {"network": "projects/p/global/networks/inv"}],
        "transitEncryptionMode": "TRANSIT_ENCRYPTION_MODE_SERVER_AUTHENTICATION"}),
    ("gcp:memorystore/instance:Instance", {"authorizationMode": "IAM_AUTH",
                                           "transitEncryptionMode": "SERVER_AUTHENTICATION"}),
    ("alicloud:redis/tairInstance:TairInstance", {"instanceType": "tair_rdb", "vswitchId": "vsw-1",
                                                  "password": "Tair-password-1", "sslEnabled": "Enable",
                                                  "securityIps": "10.64.0.0/16"}),
    ("alicloud:redis/tairInstance:TairInstance", {"instanceType": "tair_essd", "vswitchId": "vsw-1",
                                                  "password": "Tair-password-1", "securityIps": "10.64.0.0/16"}),
    ("aws:elasticache/subnetGroup:SubnetGroup", {"subnetIds": ["subnet-a"]}),
], ids=["serverless with a user group", "a user with a password", "a group of the stack's users",
        "a cluster with IAM AUTH and TLS", "Valkey with IAM AUTH and TLS", "Tair with a password and TLS",
        "Tair on disks, which has no TLS", "a subnet group"])
def test_a_cache_built_as_inferstack_would_passes(resource_type: str, props: dict[str, Any]) -> None:
    assert check_resource(REDIS, resource_type, props).messages() == []


def _cache_links(resources: list[Resource]) -> list[tuple[str, str]]:
    report = check_stack(pack.managed_redis_users_and_network, resources)
    return [(v.message, v.urn.rsplit("::", 1)[-1]) for v in report.violations]


def test_a_user_group_holding_a_user_the_stack_does_not_create_is_refused() -> None:
    app = Resource("aws:elasticache/user:User", "app", {"userId": "app", "userName": "default", "engine": "valkey",
                                                        "authenticationMode": {"type": "password"}})
    group = Resource("aws:elasticache/userGroup:UserGroup", "users", {"userGroupId": "inv-users", "engine": "valkey",
                                                                      "userIds": ["app", "ops"]})
    cache = Resource("aws:elasticache/serverlessCache:ServerlessCache", "cache", SERVERLESS,
                     {"userGroupId": ["users"]})
    assert _cache_links([app, group, cache]) == [
        ("the user group holds user ops, which this stack does not create, so the pack cannot tell whether it needs a "
         "password: hold users of this stack only", "users")]
    assert _cache_links([app, dataclasses.replace(group, props={**group.props, "userIds": ["app"]}), cache]) == []
    assert _cache_links([app, dataclasses.replace(cache, depends={})]) == [
        ("the cache names user group inv-users, which this stack does not create, so the pack cannot read its users: "
         "use a user group of this stack", "cache")]


def test_a_cache_in_a_default_network_is_refused() -> None:
    default_subnet = Resource("aws:ec2/defaultSubnet:DefaultSubnet", "default-a", {"availabilityZone": "us-east-1a"})
    subnets = Resource("aws:elasticache/subnetGroup:SubnetGroup", "cache-subnets", {"subnetIds": ["subnet-d"]},
                       {"subnetIds": ["default-a"]})
    group = Resource(AWS_REPLICATION_GROUP, "cache", {"subnetGroupName": "cache-subnets"},
                     {"subnetGroupName": ["cache-subnets"]})
    assert _cache_links([default_subnet, subnets, group]) == [
        ("the cache is in the default VPC (subnet default-a): place it in the stack's own private subnets", "cache")]
    network = Resource("gcp:compute/network:Network", "default-network", {"name": "default"})
    redis = Resource(GCP_REDIS, "redis", {"authorizedNetwork": "projects/p/global/networks/x"},
                     {"authorizedNetwork": ["default-network"]})
    assert _cache_links([network, redis]) == [
        ("the cache is on network default-network, the project's default network: use the deployment's network",
         "redis")]


#### Production: a stack of the production stage runs a protected fleet behind HTTPS ####

PRODUCTION = pack.production_runs_a_protected_fleet
STAGE_FIX = ('if this stack is not production, say so in its policy config: {"production-runs-a-protected-fleet": '
             '{"stage": "internal"}} (docs/policy.md, "Zones and the stage")')


def _tampered_production() -> Registered:
    """A production plan edited the way issue 23 describes (stage set below production, the fleet removed): five
    public servers serving plain HTTP on their own addresses."""
    plan = sample_plan("aws", "gpu-llm", "production").model_copy(update={"stage": "internal", "fleet": None,
                                                                          "replicas": 5, "instance_count": 5})
    with deployments.dependencies_recorded() as dependencies:
        result = deployments.preview_deployment(plan, {**deployments.PUBLIC, **deployments.CLOUD_SETTINGS["aws"]})
    return Registered(deployments.Recording(result.resources, [], result.outputs), dependencies)


def test_a_production_stack_whose_plan_lost_its_fleet_is_refused_for_each_loose_server() -> None:
    registered = _tampered_production()
    servers = sorted(r.name for r in registered.resources() if r.type == AWS_INSTANCE)
    assert len(servers) == 5
    report = check_recording(registered)
    found = sorted((v.message, v.urn.rsplit("::", 1)[-1]) for v in report.violations)
    assert found == [(f"server {name} runs on its own in a production stack: production servers run as a managed "
                      "group behind a load balancer that serves HTTPS (TLS 1.2 or newer), with inferstack's "
                      f"protections; {STAGE_FIX}", name) for name in servers]
    assert all(v.level == EnforcementLevel.MANDATORY for v in report.violations)
    assert check_recording(registered, config={PRODUCTION.name: {"stage": "internal"}}).violations == []


def test_the_stage_comes_from_the_policy_config_never_from_the_stack() -> None:
    """Production unless the stack's policy config says otherwise: what the stack says of itself cannot lower it."""
    assert PRODUCTION.enforcement_level == EnforcementLevel.MANDATORY
    assert PRODUCTION.config_schema is not None
    assert PRODUCTION.config_schema.properties["stage"]["default"] == "production"
    loose = [Resource(AWS_INSTANCE, "server-0", {"tags": {"inferstack:stage": "internal"}})]
    assert [v.urn.rsplit("::", 1)[-1] for v in check_stack(PRODUCTION, loose).violations] == ["server-0"]
    report = check_stack(PRODUCTION, loose, config={"stage": "validation"})
    assert report.violations == [] and list(report.not_applicable.values()) == [
        "the stack's stage is validation (policy config), not production"]


@pytest.mark.parametrize("cloud", sorted(fleets.FLEETS))
def test_a_protected_fleet_behind_https_passes_in_production(cloud: str) -> None:
    assert check_stack(PRODUCTION, fleets.fleet(cloud)).violations == []


UNPROTECTED = ("the {part} {name} of managed group group does not carry Pulumi's protect, so a change that replaces "
               "it, or `pulumi destroy`, deletes it: production fleets are protected (inferstack:protectServers)")


def _unprotected(resources: list[Resource], name: str) -> list[Resource]:
    return [dataclasses.replace(r, protect=False) if r.name == name else r for r in resources]


@pytest.mark.parametrize(("cloud", "name", "part"), [
    ("aws", "group", "group"), ("aws", "template", "template"), ("aws", "lb", "load balancer"),
    ("gcp", "group", "group"), ("gcp", "https", "load balancer"), ("gcp", "address", "address"),
    ("alibaba", "group", "group"), ("alibaba", "template", "template"), ("alibaba", "lb", "load balancer"),
    ("huawei", "group", "group"), ("huawei", "lb", "load balancer"),
])
def test_an_unprotected_part_of_a_production_fleet_is_refused(cloud: str, name: str, part: str) -> None:
    report = check_stack(PRODUCTION, _unprotected(fleets.fleet(cloud), name))
    assert [(v.message, v.urn.rsplit("::", 1)[-1]) for v in report.violations] == [
        (UNPROTECTED.format(part=part, name=name), name)]


@pytest.mark.parametrize(("cloud", "name", "flag"), [
    ("aws", "lb", "enableDeletionProtection"), ("alibaba", "lb", "deletionProtectionEnabled"),
    ("alibaba", "group", "groupDeletionProtection"), ("huawei", "lb", "deletionProtectionEnable"),
])
def test_a_production_fleet_without_the_clouds_deletion_protection_is_refused(cloud: str, name: str,
                                                                              flag: str) -> None:
    stack = fleets.changed(fleets.fleet(cloud), name, _set(**{flag: False}))
    assert [(v.message, v.urn.rsplit("::", 1)[-1]) for v in check_stack(PRODUCTION, stack).violations] == [
        (f"{name} has no deletion protection ({flag} is False), so any API call may delete it: set {flag} true "
         "(inferstack does, in production)", name)]


NO_HTTPS = ("managed group group is served by no HTTPS listener on 443 under a TLS 1.2+ policy that the pack reads: "
            "serve it through a load balancer's HTTPS listener (inferstack does, in production)")
# One edit per cloud that leaves the group behind its load balancer without HTTPS under TLS 1.2 or newer.
WITHOUT_HTTPS = [
    ("aws", "https", _set(protocol="HTTP")),
    ("aws", "https", _set(sslPolicy="ELBSecurityPolicy-2016-08")),
    ("gcp", "https-proxy", lambda props: {k: v for k, v in props.items() if k != "sslPolicy"}, {"urlMap": ["urls"]}),
    ("gcp", "tls", _set(minTlsVersion="TLS_1_0")),
    ("alibaba", "https", _set(listenerProtocol="HTTP")),
    ("alibaba", "https", _set(securityPolicyId="tls_cipher_policy_1_0")),
    ("huawei", "https", _set(protocol="HTTP")),
    ("huawei", "https", _set(tlsCiphersPolicy="tls-1-0")),
]


@pytest.mark.parametrize("edit", WITHOUT_HTTPS, ids=[f"{e[0]}-{e[1]}-{i}" for i, e in enumerate(WITHOUT_HTTPS)])
def test_a_production_fleet_served_without_https_under_tls_1_2_is_refused(edit: tuple[Any, ...]) -> None:
    cloud, name, change, *depends = edit
    stack = fleets.changed(fleets.fleet(cloud), name, change, *depends)
    assert [(v.message, v.urn.rsplit("::", 1)[-1]) for v in check_stack(PRODUCTION, stack).violations] == [
        (NO_HTTPS, "group")]


def test_a_production_fleet_behind_no_load_balancer_is_refused() -> None:
    stack = [r for r in fleets.fleet("aws") if r.type not in (*AWS_LOAD_BALANCERS, *AWS_LISTENERS)]
    assert [v.message for v in check_stack(PRODUCTION, stack).violations] == [
        "managed group group is behind no load balancer of this stack: production servers are reached through a "
        "load balancer that serves HTTPS (inferstack does, in production)"]


@pytest.mark.parametrize("cloud", sorted(deployments.CLOUD_SETTINGS))
def test_inferstacks_own_production_deployment_is_a_protected_fleet_and_unprotecting_its_group_is_refused(
        cloud: str) -> None:
    registered = deployments.public_deployment(cloud, "gpu-llm")
    assert check_recording(registered, policies=[PRODUCTION]).violations == []
    (group,) = [r for r in registered.resources() if r.type in GROUP_TYPES]
    found = check_recording(registered.with_protect(group.name, False), policies=[PRODUCTION]).violations
    assert [v.urn for v in found] == [group.urn]


GROUP_TYPES = (AWS_AUTOSCALING_GROUP, GCP_REGION_GROUP_MANAGER, ALI_SCALING_GROUP,
               HW_AS_GROUP)

"""Managed Redis (the inference cache: ElastiCache, MemoryDB, Memorystore, Tair, DCS): in the private network with
no public endpoint or whitelist entry, TLS in transit and AUTH; as a stack, the users and networks a cache names are
the stack's, and none is a default network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from guardrails.core import (
    NotApplicable,
    ReportViolation,
    ResourceInput,
    ResourceRule,
    Stack,
    StackResource,
    StackRule,
    boolean,
    items,
    linked_of,
)
from guardrails.networks import public_sources
from guardrails.resource_types import AWS_DEFAULT_SECURITY_GROUP, AWS_SUBNET

#### Managed Redis (the inference cache): private, TLS, AUTH ####

AWS_REPLICATION_GROUP = "aws:elasticache/replicationGroup:ReplicationGroup"
AWS_CACHE_CLUSTER = "aws:elasticache/cluster:Cluster"
AWS_SERVERLESS_CACHE = "aws:elasticache/serverlessCache:ServerlessCache"
AWS_CACHE_USER = "aws:elasticache/user:User"
AWS_CACHE_USER_GROUP = "aws:elasticache/userGroup:UserGroup"
AWS_CACHE_USER_GROUP_ASSOCIATION = "aws:elasticache/userGroupAssociation:UserGroupAssociation"
AWS_CACHE_SUBNET_GROUP = "aws:elasticache/subnetGroup:SubnetGroup"
AWS_MEMORYDB_CLUSTER = "aws:memorydb/cluster:Cluster"
AWS_MEMORYDB_MULTI_REGION_CLUSTER = "aws:memorydb/multiRegionCluster:MultiRegionCluster"
AWS_MEMORYDB_ACL = "aws:memorydb/acl:Acl"
AWS_MEMORYDB_USER = "aws:memorydb/user:User"
AWS_MEMORYDB_SUBNET_GROUP = "aws:memorydb/subnetGroup:SubnetGroup"
AWS_DEFAULT_SUBNET = "aws:ec2/defaultSubnet:DefaultSubnet"
AWS_DEFAULT_VPC = "aws:ec2/defaultVpc:DefaultVpc"
GCP_REDIS = "gcp:redis/instance:Instance"
GCP_REDIS_CLUSTER = "gcp:redis/cluster:Cluster"
GCP_VALKEY = "gcp:memorystore/instance:Instance"
GCP_CACHE_ACL_POLICIES = ("gcp:redis/clusterAclPolicy:ClusterAclPolicy", "gcp:memorystore/aclPolicy:AclPolicy")
GCP_CACHE_ENDPOINTS = ("gcp:redis/clusterUserCreatedConnections:ClusterUserCreatedConnections",
                       "gcp:memorystore/instanceDesiredUserCreatedEndpoints:InstanceDesiredUserCreatedEndpoints")
GCP_NETWORK = "gcp:compute/network:Network"
ALI_KVSTORE = "alicloud:kvstore/instance:Instance"
ALI_KVSTORE_CONNECTION = "alicloud:kvstore/connection:Connection"
ALI_KVSTORE_ACCOUNT = "alicloud:kvstore/account:Account"
ALI_TAIR = "alicloud:redis/tairInstance:TairInstance"
ALI_TAIR_IP_GROUP = "alicloud:redis/globalSecurityIpGroup:GlobalSecurityIpGroup"
HW_DCS = "huaweicloud:Dcs/instance:Instance"

CACHE_MODULES = ("aws:elasticache/", "aws:memorydb/", "gcp:redis/", "gcp:memorystore/", "alicloud:kvstore/",
                 "alicloud:redis/", "huaweicloud:Dcs/")
"""The provider modules of managed caches: every type in them is read below, or is a setting that holds no data
and admits nobody (CACHE_SETTINGS); any other counts as a cache the pack cannot read (fail closed)."""
CACHE_SETTINGS = frozenset({
    # Parameters, reservations, snapshots and backups (kept inside the service, encrypted at rest), audit logs.
    "aws:elasticache/parameterGroup:ParameterGroup", "aws:elasticache/reservedCacheNode:ReservedCacheNode",
    "aws:memorydb/parameterGroup:ParameterGroup", "aws:memorydb/snapshot:Snapshot",
    "alicloud:kvstore/auditLogConfig:AuditLogConfig", "alicloud:kvstore/backupPolicy:BackupPolicy",
    "alicloud:redis/backup:Backup",
    # Placement: read where a cache names it (managed-redis-users-and-network).
    AWS_CACHE_SUBNET_GROUP, AWS_MEMORYDB_SUBNET_GROUP,
    # A global datastore takes its primary replication group's settings, which are read on that group; its
    # secondary groups are replication groups, read in their own right.
    "aws:elasticache/globalReplicationGroup:GlobalReplicationGroup",
})
PLACEMENT_FIX = ("place it in the VPC's private subnets behind a security group that admits the servers only")
NO_AUTH_CACHE = "a Memcached cache takes no AUTH: use Redis or Valkey with a user group"
BUILT_IN_DEFAULT_USER = "default"
"""ElastiCache's and MemoryDB's built-in user: it needs no password ("on ~* +@all nopass"), and no user of a stack
can take its id, so a group or ACL that names it lets every client in."""


def _default_network(value: Any) -> bool:
    """A Google network named `default` (the project's auto-mode network, open inside by its default rules)."""
    return str(value or "").rstrip("/").rsplit("/", 1)[-1] == "default"


def _check_aws_redis(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if boolean(props.get("transitEncryptionEnabled")) is not True:
        report_violation("the Redis replication group does not encrypt in transit: set transitEncryptionEnabled true")
    elif props.get("transitEncryptionMode") == "preferred":
        report_violation("the Redis replication group still accepts plain connections (transitEncryptionMode "
                         "preferred): set it to required")
    if not props.get("authToken") and not props.get("userGroupIds"):
        report_violation("the Redis replication group needs no AUTH: set authToken (a secret) or userGroupIds")
    if boolean(props.get("atRestEncryptionEnabled")) is not True:
        report_violation("the Redis replication group is not encrypted at rest: set atRestEncryptionEnabled true")
    if not props.get("subnetGroupName") or not items(props.get("securityGroupIds")):
        report_violation(f"the Redis replication group has no subnet group and security group of the stack: "
                         f"{PLACEMENT_FIX}")


def _check_aws_cache_cluster(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("engine") == "memcached":
        report_violation(NO_AUTH_CACHE)
    elif props.get("replicationGroupId") is None:
        report_violation("a standalone ElastiCache cluster takes no AUTH token: use a replication group with "
                         "transitEncryptionEnabled, authToken and atRestEncryptionEnabled")


def _check_aws_serverless_cache(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """ElastiCache Serverless: "All serverless caches have in-transit encryption enabled" (ElastiCache User Guide,
    "ElastiCache in-transit encryption (TLS)", read 2026-12-07) and are encrypted at rest; RBAC user groups are "the
    only way to control access to serverless caches" (ElastiCache User Guide, "Role-Based Access Control", read
    2026-12-07): without `userGroupId`, no password is asked."""
    if props.get("engine") == "memcached":
        report_violation(NO_AUTH_CACHE)
        return
    if not props.get("userGroupId"):
        report_violation("the ElastiCache serverless cache names no user group, so every client that reaches it gets "
                         "in without a password: set userGroupId to a user group of users with passwords")
    if not items(props.get("subnetIds")) or not items(props.get("securityGroupIds")):
        # "If no other information is given this will be the VPC's Default Security Group" (pulumi_aws
        # elasticache.ServerlessCache security_group_ids).
        report_violation("the ElastiCache serverless cache names no subnets and security groups, so it sits in the "
                         "default VPC behind its default security group: place it in the stack's private subnets "
                         "behind a security group that admits the servers only")


def _check_aws_cache_user(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """An ElastiCache RBAC user: `authenticationMode.type` is password, no-password-required or iam, or the older
    `noPasswordRequired` / `passwords` (pulumi_aws elasticache.User)."""
    name = props.get("userName") or props.get("userId")
    kind = str((props.get("authenticationMode") or {}).get("type") or "")
    open_to = "so anyone who reaches a cache whose user group holds it gets in: give it passwords or IAM authentication"
    if boolean(props.get("noPasswordRequired")) is True:
        report_violation(f"the ElastiCache user {name} needs no password (noPasswordRequired), {open_to}")
    elif kind == "no-password-required":
        report_violation(f"the ElastiCache user {name} needs no password (authenticationMode no-password-required), "
                         f"{open_to}")
    elif kind and kind not in ("password", "iam"):
        report_violation(f"the ElastiCache user {name} has authenticationMode {kind}, which the pack cannot read: use "
                         "password or iam")
    elif not kind and not items(props.get("passwords")) and not props.get("passwordsWo"):
        report_violation(f"the ElastiCache user {name} names no password (passwords, authenticationMode), {open_to}")


def _holds_default_user(user_ids: Any, report_violation: ReportViolation) -> None:
    if BUILT_IN_DEFAULT_USER in [str(u) for u in items(user_ids)]:
        report_violation("the user group holds ElastiCache's built-in user default, which needs no password: hold a "
                         "user of the stack named default, with a password, instead")


def _check_aws_user_group(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _holds_default_user(props.get("userIds"), report_violation)


def _check_aws_user_group_association(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _holds_default_user(props.get("userId"), report_violation)


def _check_memorydb_cluster(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """MemoryDB: "When [tls_enabled is] set to false, the acl_name must be open-access. Defaults to true"; without
    subnet_group_name, "a subnet group consisting of default VPC subnets" (pulumi_aws memorydb.Cluster)."""
    if props.get("aclName") == "open-access":
        report_violation("the MemoryDB cluster uses the open-access ACL, so every client gets in without a password: "
                         "name an ACL of users with passwords or IAM")
    if boolean(props.get("tlsEnabled")) is False:
        report_violation("the MemoryDB cluster does not encrypt in transit (tlsEnabled false): leave it on")
    if not props.get("subnetGroupName") or not items(props.get("securityGroupIds")):
        report_violation(f"the MemoryDB cluster has no subnet group and security group of the stack: {PLACEMENT_FIX}")


def _check_memorydb_multi_region_cluster(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if boolean(props.get("tlsEnabled")) is False:
        report_violation("the MemoryDB multi-Region cluster does not encrypt in transit (tlsEnabled false): leave it "
                         "on")


def _check_memorydb_acl(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if BUILT_IN_DEFAULT_USER in [str(u) for u in items(props.get("userNames"))]:
        report_violation("the MemoryDB ACL holds the built-in user default, which needs no password: hold users of "
                         "the stack only")


def _check_memorydb_user(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """A MemoryDB user authenticates with a password or IAM ("Valid values are password or iam", pulumi_aws
    memorydb.User authentication_mode)."""
    kind = str((props.get("authenticationMode") or {}).get("type") or "")
    if kind not in ("password", "iam"):
        report_violation(f"the MemoryDB user {props.get('userName')} has authenticationMode {kind or 'unset'}, which "
                         "the pack cannot read: use password or iam")


def _check_gcp_redis(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if boolean(props.get("authEnabled")) is not True:
        report_violation("the Memorystore instance answers without AUTH: set authEnabled true")
    if props.get("transitEncryptionMode") != "SERVER_AUTHENTICATION":
        report_violation("the Memorystore instance does not use TLS: set transitEncryptionMode SERVER_AUTHENTICATION")
    network = props.get("authorizedNetwork")
    if not network or _default_network(network):
        # "If left unspecified, the default network will be used" (pulumi_gcp redis.Instance authorized_network).
        shown = f" (authorizedNetwork {network})" if network else ""
        report_violation(f"the Memorystore instance is on the project's default network{shown}: set authorizedNetwork "
                         "to the deployment's network")


def _networks(value: Any) -> list[str]:
    """Every `network` named anywhere in a (nested) value: PSC configs, endpoints and their connections."""
    if isinstance(value, Mapping):
        found = [str(value["network"])] if isinstance(value.get("network"), str) else []
        return found + [n for key, item in value.items() if key != "network" for n in _networks(item)]
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [n for item in value for n in _networks(item)]
    return []


def _on_default_network(what: str, props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    for network in _networks(props):
        if _default_network(network):
            report_violation(f"{what} is on the project's default network ({network}): use the deployment's network")


def _check_gcp_redis_cluster(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """Memorystore for Redis Cluster: `authorizationMode` "Default value is AUTH_MODE_DISABLED", `transitEncryptionMode`
    "Default value is TRANSIT_ENCRYPTION_MODE_DISABLED" (pulumi_gcp redis.Cluster)."""
    mode = props.get("authorizationMode")
    if mode != "AUTH_MODE_IAM_AUTH":
        report_violation(f"the Memorystore cluster answers without AUTH (authorizationMode is {mode or 'unset'}): set "
                         "AUTH_MODE_IAM_AUTH")
    transit = props.get("transitEncryptionMode")
    if transit != "TRANSIT_ENCRYPTION_MODE_SERVER_AUTHENTICATION":
        report_violation(f"the Memorystore cluster does not use TLS (transitEncryptionMode is {transit or 'unset'}): "
                         "set TRANSIT_ENCRYPTION_MODE_SERVER_AUTHENTICATION")
    _on_default_network("the Memorystore cluster", props, report_violation)


GCP_VALKEY_AUTH_MODES = {"IAM_AUTH", "TOKEN_AUTH"}
"""Memorystore for Valkey: "Possible values: AUTH_DISABLED IAM_AUTH. TOKEN_AUTH is also supported, but only available
in the google-beta provider" (pulumi_gcp memorystore.Instance authorization_mode)."""


def _check_gcp_valkey(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    mode = props.get("authorizationMode")
    if mode not in GCP_VALKEY_AUTH_MODES:
        report_violation(f"the Memorystore for Valkey instance answers without AUTH (authorizationMode is "
                         f"{mode or 'unset'}): set IAM_AUTH")
    transit = props.get("transitEncryptionMode")
    if transit != "SERVER_AUTHENTICATION":
        report_violation(f"the Memorystore for Valkey instance does not use TLS (transitEncryptionMode is "
                         f"{transit or 'unset'}): set SERVER_AUTHENTICATION")
    _on_default_network("the Memorystore for Valkey instance", props, report_violation)


def _check_gcp_cache_acl_policy(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """An ACL policy's rules are Redis/Valkey ACL rules ("on >password123 ~* +@all", pulumi_gcp): `nopass` lets the
    user in without a password."""
    for rule in items(props.get("rules")):
        if isinstance(rule, Mapping) and "nopass" in str(rule.get("rule") or "").split():
            report_violation(f"the ACL policy lets user {rule.get('username')} in without a password (nopass): give it "
                             "a password, or use IAM")


def _check_gcp_cache_endpoints(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _on_default_network("the cache's endpoint", props, report_violation)


ALI_TAIR_WITHOUT_TLS = {"tair_essd"}
"""Tair's TLS needs "Tair (Enterprise Edition) DRAM-based or persistent memory-optimized" instances
(alibabacloud.com/help/redis/user-guide/enable-tls-encryption, read 2026-12-07): ESSD-based ones have none."""


def _alibaba_redis_access(what: str, props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """A Tair or KVStore instance: a password in the VPC, in a vSwitch, no public whitelist entry."""
    if props.get("vpcAuthMode") == "Close":
        report_violation(f"the {what} answers without a password in the VPC (vpcAuthMode Close): set it to Open")
    if not props.get("password") and not props.get("kmsEncryptedPassword"):
        report_violation(f"the {what} has no password: set password (a secret)")
    if not props.get("vswitchId"):
        report_violation(f"the {what} is not in a vSwitch of the VPC: set vswitchId")
    public = public_sources(props.get("securityIps"))
    if public:
        report_violation(f"the Tair whitelist admits public addresses ({', '.join(public)}): admit the servers' "
                         "security group (securityGroupId) or private ranges only")


def _check_ali_kvstore(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if props.get("sslEnable") not in ("Enable", "Update"):
        report_violation("the Tair instance does not use TLS: set sslEnable Enable")
    _alibaba_redis_access("Tair instance", props, report_violation)


def _check_ali_tair(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """redis.TairInstance: `ssl_enabled` Disable, Enable or Update; `vpc_auth_mode` Open or Close ("Close ...
    enables password-free access"); `security_ips` the whitelist (pulumi_alicloud redis.TairInstance)."""
    if props.get("instanceType") not in ALI_TAIR_WITHOUT_TLS and props.get("sslEnabled") not in ("Enable", "Update"):
        report_violation("the Tair instance does not use TLS: set sslEnabled Enable")
    _alibaba_redis_access("Tair instance", props, report_violation)


def _check_ali_kvstore_connection(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    report_violation("a kvstore connection gives the Tair instance a public endpoint: reach it from the VPC only")


def _check_ali_kvstore_account(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if not any(props.get(key) for key in ("accountPassword", "accountPasswordWo", "kmsEncryptedPassword")):
        report_violation(f"the Tair account {props.get('accountName')} has no password: set accountPassword (a "
                         "secret)")


def _check_ali_tair_ip_group(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    public = public_sources(props.get("globalIpList"))
    if public:
        report_violation(f"the Tair whitelist template {props.get('globalIpGroupName')} admits public addresses "
                         f"({', '.join(public)}): admit private ranges only")


def _check_hw_dcs(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if boolean(props.get("sslEnable")) is not True:
        report_violation("the DCS instance does not use SSL: set sslEnable true (Redis 6.0 basic edition)")
    if not props.get("password"):
        report_violation("the DCS instance allows password-free access: set password (a secret)")
    if boolean(props.get("enablePublicip")) is True or props.get("publicipId"):
        report_violation("the DCS instance has a public address: reach it from the VPC only")
    if boolean(props.get("whitelistEnable")) is False:
        report_violation("the DCS whitelist is off, so every address in the VPC reaches the instance: enable it")
    for whitelist in items(props.get("whitelists")):
        public = public_sources((whitelist or {}).get("ipAddresses") if isinstance(whitelist, Mapping) else None)
        if public:
            report_violation(f"the DCS whitelist admits public addresses ({', '.join(public)}): admit the servers' "
                             "subnets only")


_MANAGED_REDIS: dict[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    AWS_REPLICATION_GROUP: _check_aws_redis, AWS_CACHE_CLUSTER: _check_aws_cache_cluster,
    AWS_SERVERLESS_CACHE: _check_aws_serverless_cache, AWS_CACHE_USER: _check_aws_cache_user,
    AWS_CACHE_USER_GROUP: _check_aws_user_group, AWS_CACHE_USER_GROUP_ASSOCIATION: _check_aws_user_group_association,
    AWS_MEMORYDB_CLUSTER: _check_memorydb_cluster,
    AWS_MEMORYDB_MULTI_REGION_CLUSTER: _check_memorydb_multi_region_cluster,
    AWS_MEMORYDB_ACL: _check_memorydb_acl, AWS_MEMORYDB_USER: _check_memorydb_user,
    GCP_REDIS: _check_gcp_redis, GCP_REDIS_CLUSTER: _check_gcp_redis_cluster, GCP_VALKEY: _check_gcp_valkey,
    **dict.fromkeys(GCP_CACHE_ACL_POLICIES, _check_gcp_cache_acl_policy),
    **dict.fromkeys(GCP_CACHE_ENDPOINTS, _check_gcp_cache_endpoints),
    ALI_KVSTORE: _check_ali_kvstore, ALI_KVSTORE_CONNECTION: _check_ali_kvstore_connection,
    ALI_KVSTORE_ACCOUNT: _check_ali_kvstore_account, ALI_TAIR: _check_ali_tair,
    ALI_TAIR_IP_GROUP: _check_ali_tair_ip_group,
    HW_DCS: _check_hw_dcs}


def _reads_cache(resource_type: str) -> bool:
    return resource_type in _MANAGED_REDIS or resource_type.startswith(CACHE_MODULES)


def check_managed_redis(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _MANAGED_REDIS.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)
    elif resource.resource_type.startswith(CACHE_MODULES) and resource.resource_type not in CACHE_SETTINGS:
        report_violation(f"{resource.resource_type} is a cache type the pack cannot read, so it cannot tell whether it "
                         "is private, encrypted in transit and needs AUTH: use a cache type the pack reads "
                         "(docs/policy.md lists them)")


MANAGED_REDIS_PRIVATE_TLS_AUTH = ResourceRule(
    "managed-redis-private-tls-auth",
    "A managed Redis (ElastiCache, Memorystore, Tair, DCS) lives in the private network with no public "
    "endpoint or whitelist entry, encrypts in transit (TLS) and requires AUTH; ElastiCache also at rest.",
    check_managed_redis, _reads_cache, severity="critical")


#### Managed Redis, as a stack: the users and networks a cache names are the stack's, and private ####

CACHES_WITH_USER_GROUPS = {AWS_REPLICATION_GROUP: "userGroupIds", AWS_SERVERLESS_CACHE: "userGroupId"}
AWS_PLACED_CACHES = (AWS_REPLICATION_GROUP, AWS_SERVERLESS_CACHE, AWS_MEMORYDB_CLUSTER)
GCP_NETWORKED_CACHES = (GCP_REDIS, GCP_REDIS_CLUSTER, GCP_VALKEY, *GCP_CACHE_ENDPOINTS)


def _unread_ids(stack: Stack, holder: StackResource, prop: str, targets: list[StackResource],
                id_key: str) -> list[str]:
    """The ids `holder.props[prop]` names that are no resource of `targets` (by property dependency, else by the
    targets' `id_key`); the built-in default user is left to the resource rule."""
    named = [str(i) for i in stack.items(stack.known(holder.props, prop)) if str(i) != BUILT_IN_DEFAULT_USER]
    linked = {d.urn for d in holder.property_dependencies.get(prop, [])} & {t.urn for t in targets}
    if len(linked) >= len(named):
        return []
    known = {str(stack.known(t.props, id_key)) for t in targets} | {str(stack.known(t.props, "id")) for t in targets}
    return [i for i in named if i not in known]


def _aws_cache_users(stack: Stack, report_violation: ReportViolation) -> None:
    groups, users = stack.of_type(AWS_CACHE_USER_GROUP), stack.of_type(AWS_CACHE_USER)
    for cache in stack.of_type(*CACHES_WITH_USER_GROUPS):
        for group_id in _unread_ids(stack, cache, CACHES_WITH_USER_GROUPS[cache.resource_type], groups,
                                    "userGroupId"):
            report_violation(f"the cache names user group {group_id}, which this stack does not create, so the pack "
                             "cannot read its users: use a user group of this stack", cache.urn)
    for group in groups:
        for user_id in _unread_ids(stack, group, "userIds", users, "userId"):
            report_violation(f"the user group holds user {user_id}, which this stack does not create, so the pack "
                             "cannot tell whether it needs a password: hold users of this stack only", group.urn)
    for association in stack.of_type(AWS_CACHE_USER_GROUP_ASSOCIATION):
        for user_id in _unread_ids(stack, association, "userId", users, "userId"):
            report_violation(f"the association adds user {user_id}, which this stack does not create, to a user group, "
                             "so the pack cannot tell whether it needs a password: add users of this stack only",
                             association.urn)


def _aws_default_vpc(stack: Stack, cache: StackResource, report_violation: ReportViolation) -> None:
    """A cache in the default VPC's subnets (an `ec2.DefaultSubnet`, or a subnet of an `ec2.DefaultVpc`, that the
    stack holds), directly or through its subnet group, or behind the default VPC's default security group."""
    holders = [cache, *linked_of(stack, cache, ("subnetGroupName",), AWS_CACHE_SUBNET_GROUP,
                                  AWS_MEMORYDB_SUBNET_GROUP)]
    subnets = [s for h in holders for s in linked_of(stack, h, ("subnetIds",), AWS_DEFAULT_SUBNET, AWS_SUBNET)]
    for subnet in subnets:
        if subnet.resource_type == AWS_DEFAULT_SUBNET or linked_of(stack, subnet, ("vpcId",), AWS_DEFAULT_VPC):
            report_violation(f"the cache is in the default VPC (subnet {subnet.name}): place it in the stack's own "
                             "private subnets", cache.urn)
    for group in linked_of(stack, cache, ("securityGroupIds",), AWS_DEFAULT_SECURITY_GROUP):
        report_violation(f"the cache is behind the default security group {group.name}: give it a security group of "
                         "the stack that admits the servers only", cache.urn)


def _gcp_default_network(stack: Stack, cache: StackResource, report_violation: ReportViolation) -> None:
    props = ("authorizedNetwork", "pscConfigs", "desiredAutoCreatedEndpoints", "desiredPscAutoConnections",
             "clusterEndpoints", "desiredUserCreatedEndpoints")
    for network in linked_of(stack, cache, props, GCP_NETWORK):
        if _default_network(stack.known(network.props, "name")):
            report_violation(f"the cache is on network {network.name}, the project's default network: use the "
                             "deployment's network", cache.urn)


def check_cache_links(stack: Stack, report_violation: ReportViolation) -> None:
    aws = stack.of_type(*AWS_PLACED_CACHES, AWS_CACHE_USER_GROUP, AWS_CACHE_USER_GROUP_ASSOCIATION)
    gcp = stack.of_type(*GCP_NETWORKED_CACHES)
    if not aws and not gcp:
        raise NotApplicable("the stack has no managed Redis that names users or a network the pack relates "
                            "(ElastiCache, MemoryDB, Memorystore)")
    _aws_cache_users(stack, report_violation)
    for cache in stack.of_type(*AWS_PLACED_CACHES):
        _aws_default_vpc(stack, cache, report_violation)
    for cache in gcp:
        _gcp_default_network(stack, cache, report_violation)


MANAGED_REDIS_USERS_AND_NETWORK = StackRule(
    "managed-redis-users-and-network",
    "What a managed Redis names is the stack's and private: ElastiCache user groups and their users are "
    "resources of the stack, and no cache sits in a default network (an AWS default VPC's subnets or "
    "security group, a Google network named default).", check_cache_links, severity="critical")

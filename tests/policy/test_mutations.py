"""Mutation check: flip one security property of what a real deployment registered, and the pack reports it.

Each case starts from a public deployment (which passes every policy, test_pack_agrees_with_components), changes one
resource the way a careless edit would, and expects one exact violation on the resource at fault. Loose servers are
mutated on a one-server deployment; a fleet on the production deployment of each cloud whose fleet is built (the
others deploy loose servers until theirs lands, and say so as the reason of the skip).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from guardrails.networks import openings
from guardrails.resource_types import (
    ALI_LAUNCH_TEMPLATES,
    ALI_LISTENER,
    ALI_LISTENER_RULE,
    ALI_SCALING_GROUP,
    ALI_SECURITY_GROUP_RULE,
    ALI_SERVER_GROUP,
    AWS_AUTOSCALING_GROUP,
    AWS_INGRESS_RULE,
    AWS_LAUNCH_TEMPLATE,
    AWS_LISTENERS,
    AWS_ROLE_POLICY_ATTACHMENT,
    AWS_TARGET_GROUPS,
    GCP_FIREWALL,
    GCP_HEALTH_CHECKS,
    GCP_HTTP_PROXY,
    GCP_HTTPS_PROXIES,
    GCP_INSTANCE_TEMPLATES,
    GCP_NETWORK_FIREWALL_POLICY_RULE,
    GCP_PROJECT_IAM_MEMBER,
    GCP_REGION_GROUP_MANAGER,
    GCP_SSL_POLICIES,
    HW_AS_CONFIGURATION,
    HW_AS_GROUP,
    HW_L7_POLICY,
    HW_LISTENER,
    HW_MONITOR,
    HW_SECURITY_GROUP_RULE,
)

from inferstack.components import Capability, backend_for
from inferstack.preview import RegisteredResource
from tests.policy import deployments
from tests.policy.harness import Registered, check_recording

ADMIN_FIX = ("inferstack opens no admin port; reach servers through the cloud's managed shell, or admit a private "
             "network only")
API_RULE = "server-firewall-api-0-0-0-0-0"
WORLD_FIX = ("only a serving port (8000), or a load balancer's HTTPS or redirect port (443, 80), may be open beyond "
             "private networks; admit private networks only, or reach other ports through the cloud's managed shell")
NEVER = ("which inferstack never grants: the servers only read their model prefix and their own secrets{shell} "
         "(docs/policy.md lists the actions); remove it")
NOT_ONE_PREFIX = ("which is not one model prefix of one bucket: grant bucket/prefix* only (no wildcard in the bucket "
                  "or the prefix)")

Props = dict[str, Any]


@dataclass(frozen=True)
class Mutation:
    label: str
    cloud: str
    target: str
    """The resource changed (or removed)."""
    change: Callable[[Props], Props] | None
    """New inputs from the recorded ones; None removes the resource."""
    policy: str
    message: Callable[[Registered], str]
    """The exact violation expected, given the unchanged deployment (some messages name its buckets)."""
    reported_on: str | None = None
    """The resource the violation names, when it is not the target (a bucket that lost its encryption resource)."""
    new_type: str | None = None


def _set(path: str, value: Any) -> Callable[[Props], Props]:
    """A change that sets one (dotted) property."""
    def change(props: Props) -> Props:
        changed = copy.deepcopy(props)
        *parents, leaf = path.split(".")
        node = changed
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
        return changed
    return change


def _without(key: str) -> Callable[[Props], Props]:
    return lambda props: {k: v for k, v in props.items() if k != key}


def _statements(key: str, edit: Callable[[list[dict[str, Any]]], None]) -> Callable[[Props], Props]:
    """A change to the statements of the JSON policy document in `key`."""
    def change(props: Props) -> Props:
        document = json.loads(props[key])
        edit(document["Statement"])
        return {**props, key: json.dumps(document)}
    return change


def _bucket(registered: Registered, name: str = "server-store-models") -> str:
    return str(registered.named(name).inputs.get("bucket") or registered.named(name).inputs.get("name"))


def _fixed(text: str) -> Callable[[Registered], str]:
    return lambda registered: text


def _aws_read_whole_bucket(statements: list[dict[str, Any]]) -> None:
    statements[1]["Resource"] = statements[1]["Resource"].split("/", 1)[0] + "/*"


MUTATIONS = [
    # AWS
    Mutation("IMDSv2 made optional", "aws", "server-server-0", _set("metadataOptions.httpTokens", "optional"),
             "metadata-tokens-required", _fixed("the metadata service answers without a session token "
                                                "(metadataOptions.httpTokens is optional): set it to required")),
    Mutation("the API rule moved to SSH", "aws", API_RULE,
             lambda p: {**p, "fromPort": 22.0, "toPort": 22.0},
             "admin-ports-not-public", _fixed(f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}")),
    Mutation("root volume unencrypted", "aws", "server-server-0", _set("rootBlockDevice.encrypted", False),
             "encryption-at-rest", _fixed("the root volume is not encrypted: set rootBlockDevice.encrypted to true")),
    Mutation("bucket encryption removed", "aws", "server-store-models-encryption", None,
             "buckets-have-default-encryption",
             _fixed("bucket server-store-models has no default encryption: add a "
                    "BucketServerSideEncryptionConfiguration"), reported_on="server-store-models"),
    Mutation("public access block removed", "aws", "server-store-data-public-access", None,
             "buckets-have-public-access-block",
             _fixed("bucket server-store-data has no BucketPublicAccessBlock: add one that blocks public ACLs and "
                    "policies"), reported_on="server-store-data"),
    Mutation("public access block half off", "aws", "server-store-logs-public-access",
             _set("blockPublicPolicy", False), "buckets-not-public",
             _fixed("the public access block leaves blockPublicPolicy off: turn all four on")),
    Mutation("bucket policy opened to everyone", "aws", "server-assets-bucket-policy",
             _statements("policy", lambda s: s.append({"Sid": "Anyone", "Effect": "Allow", "Principal": "*",
                                                       "Action": "s3:GetObject", "Resource": "*"})),
             "buckets-not-public", _fixed("bucket policy statement Anyone allows everyone (Principal \"*\"): name the "
                                          "principals that may read instead")),
    Mutation("server role reads the whole bucket", "aws", "server-identity-model-read",
             _statements("policy", _aws_read_whole_bucket), "server-identity-least-privilege",
             lambda r: f"the servers' identity may s3:GetObject on arn:aws:s3:::{_bucket(r)}/* (statement "
                       f"ReadModelFiles), {NOT_ONE_PREFIX}"),
    Mutation("server role may write", "aws", "server-identity-model-read",
             _statements("policy", lambda s: s[1].update(Action=["s3:GetObject", "s3:PutObject"])),
             "server-identity-least-privilege",
             _fixed("the servers' identity may s3:PutObject (statement ReadModelFiles), "
                    + NEVER.format(shell=" and open the managed shell"))),
    Mutation("every storage action", "aws", "server-identity-model-read",
             _statements("policy", lambda s: s[1].update(Action="s3:*")), "storage-grants-no-wildcards",
             _fixed("statement ReadModelFiles allows s3:*, which covers every storage action: name the read actions "
                    "the server needs")),
    Mutation("CloudFront allows plain HTTP", "aws", "server-assets-cdn",
             _set("defaultCacheBehavior.viewerProtocolPolicy", "allow-all"), "cdn-https-only",
             _fixed("cache behavior default serves plain HTTP (viewerProtocolPolicy is allow-all): use https-only")),
    Mutation("API key removed", "aws", "server-secrets-api-key", None, "public-api-has-api-key",
             _fixed("port 8000 is open to the whole internet (0.0.0.0/0), and the stack stores no API key (no secret "
                    "resource named '*-api-key'): store it as a secret the servers' identity may read (`pulumi config "
                    "set --secret inferstack:apiKey \"$(openssl rand -hex 32)\"`), or admit private networks only"),
             reported_on=API_RULE),
    # AWS: the hardening issue's bypasses
    Mutation("the API rule moved to another port, for half the internet", "aws", API_RULE,
             lambda p: {**p, "fromPort": 9000.0, "toPort": 9000.0, "cidrIpv4": "0.0.0.0/1"},
             "world-ingress-serving-port-only",
             _fixed(f"port 9000 is open to public network 0.0.0.0/1: {WORLD_FIX}")),
    Mutation("the API rule made every protocol, as the number -1", "aws", API_RULE,
             lambda p: {**p, "ipProtocol": -1.0}, "admin-ports-not-public",
             _fixed(f"ports 0-65535 are open to 0.0.0.0/0, including admin port 22 (SSH): {ADMIN_FIX}")),
    Mutation("metadata hop limit raised to 64", "aws", "server-server-0",
             _set("metadataOptions.httpPutResponseHopLimit", 64.0), "metadata-tokens-required",
             _fixed("the metadata hop limit is 64 (metadataOptions.httpPutResponseHopLimit), so containers on the "
                    "server reach its credentials: set it to 1")),
    Mutation("session manager policy widened to iam:*", "aws", "server-identity-session-manager",
             _statements("policy", lambda s: s[0].update(Action="iam:*")), "server-identity-least-privilege",
             _fixed("the servers' identity may iam:* (statement #0), "
                    + NEVER.format(shell=" and open the managed shell"))),
    Mutation("AmazonSSMManagedInstanceCore attached instead of the session manager policy", "aws",
             "server-identity-session-manager",
             lambda p: {"role": p["role"], "policyArn": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"},
             "server-identity-least-privilege",
             _fixed("the servers' identity has the AWS-managed policy AmazonSSMManagedInstanceCore attached, which "
                    "inferstack never grants: attach nothing but inferstack's own policies"),
             new_type=AWS_ROLE_POLICY_ATTACHMENT),
    # Google Cloud
    Mutation("firewall opens SSH to the world", "gcp", API_RULE,
             _set("allows", [{"protocol": "tcp", "ports": ["22"]}]), "admin-ports-not-public",
             _fixed(f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}")),
    Mutation("firewall opens another port to the world", "gcp", API_RULE,
             _set("allows", [{"protocol": "tcp", "ports": ["8000", "9000"]}]), "world-ingress-serving-port-only",
             _fixed(f"port 9000 is open to the whole internet (0.0.0.0/0): {WORLD_FIX}")),
    Mutation("public access prevention inherited", "gcp", "server-store-models",
             _set("publicAccessPrevention", "inherited"), "buckets-not-public",
             _fixed("public access prevention is inherited: set publicAccessPrevention to enforced")),
    Mutation("assets readable by allUsers", "gcp", "server-assets-cdn-read", _set("member", "allUsers"),
             "buckets-not-public",
             _fixed("grants roles/storage.objectViewer to allUsers, which is everyone: grant to named members only")),
    Mutation("model read without its prefix condition", "gcp", "server-identity-model-read", _without("condition"),
             "server-identity-least-privilege",
             lambda r: f"the servers' identity reads all of bucket {_bucket(r)} (roles/storage.objectViewer without a "
                       "condition limiting it to the model prefix): add one"),
    Mutation("assets served through a plain HTTP proxy", "gcp", "server-assets-https", _without("sslCertificates"),
             "cdn-https-front-ends",
             _fixed("server-assets-https serves the CDN backend server-assets-backend over plain HTTP: serve it "
                    "through a TargetHttpsProxy only, and redirect port 80 with a URL map whose defaultUrlRedirect "
                    "has httpsRedirect"), new_type=GCP_HTTP_PROXY),
    # Google Cloud: the hardening issue's bypasses
    Mutation("SSH opened by a network firewall policy rule", "gcp", API_RULE,
             lambda p: {"firewallPolicy": "fp", "priority": 1000.0, "action": "allow", "direction": "INGRESS",
                        "match": {"srcIpRanges": p["sourceRanges"],
                                  "layer4Configs": [{"ipProtocol": "tcp", "ports": ["22"]}]}},
             "admin-ports-not-public", _fixed(f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"),
             new_type=GCP_NETWORK_FIREWALL_POLICY_RULE),
    Mutation("the model read grant replaced by roles/editor on the project", "gcp", "server-identity-model-read",
             lambda p: {"project": "inferstack-preview", "role": "roles/editor", "member": p["member"]},
             "server-identity-least-privilege",
             _fixed("the servers' identity holds roles/editor on project inferstack-preview, which inferstack never "
                    "grants: the servers read their model prefix (roles/storage.objectViewer on the bucket, under a "
                    "prefix condition) and their own secrets (roles/secretmanager.secretAccessor), nothing else; "
                    "remove it"), new_type=GCP_PROJECT_IAM_MEMBER),
    # Alibaba Cloud
    Mutation("metadata tokens made optional", "alibaba", "server-server-0", _set("httpTokens", "optional"),
             "metadata-tokens-required",
             _fixed("the metadata service answers without a session token (httpTokens is optional): set it to "
                    "required")),
    Mutation("the API rule moved to SSH", "alibaba", API_RULE, _set("portRange", "22/22"), "admin-ports-not-public",
             _fixed(f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}")),
    Mutation("system disk unencrypted", "alibaba", "server-server-0", _set("systemDiskEncrypted", False),
             "encryption-at-rest", _fixed("the system disk is not encrypted: set systemDiskEncrypted to true")),
    Mutation("bucket encryption removed", "alibaba", "server-store-models-encryption", None,
             "buckets-have-default-encryption",
             _fixed("bucket server-store-models has no default encryption: add a BucketServerSideEncryption"),
             reported_on="server-store-models"),
    Mutation("bucket ACL made public", "alibaba", "server-store-data-acl", _set("acl", "public-read"),
             "buckets-not-public", _fixed("bucket ACL is public-read, which lets anyone read it: use private")),
    Mutation("https_force removed", "alibaba", "server-assets-cdn-https-only", None, "cdn-https-front-ends",
             _fixed("CDN domain static.example.com does not force HTTPS: add a DomainConfig https_force with "
                    "enable=on"), reported_on="server-assets-cdn"),
    Mutation("every bucket granted", "alibaba", "server-identity-model-read",
             _statements("policyDocument", lambda s: s[1].update(Resource="acs:oss:*:*:*")),
             "storage-grants-no-wildcards",
             _fixed("statement #1 grants storage on acs:oss:*:*:*, which is every bucket: name one bucket and prefix")),
    # Alibaba Cloud: the hardening issue's bypasses
    Mutation("secrets read on every secret", "alibaba", "server-identity-secrets-read",
             _statements("policyDocument", lambda s: s[0].update(Resource="*")), "server-identity-least-privilege",
             _fixed("the servers' identity may kms:GetSecretValue on * (statement #0), which is not a secret of this "
                    "stack: grant its own secrets only, by name")),
    Mutation("metadata hop limit raised to 64", "alibaba", "server-server-0", _set("httpPutResponseHopLimit", 64.0),
             "metadata-tokens-required",
             _fixed("the metadata hop limit is 64 (httpPutResponseHopLimit), so containers on the server reach its "
                    "credentials: set it to 1")),
    # Huawei Cloud
    Mutation("bucket encryption off", "huawei", "server-store-models", _set("encryption", False),
             "encryption-at-rest",
             _fixed("the bucket is not encrypted: set encryption to true (sseAlgorithm AES256 or kms)")),
    Mutation("system disk without a key", "huawei", "server-server-0", _without("systemDiskKmsKeyId"),
             "encryption-at-rest", _fixed("the system disk is not encrypted: set systemDiskKmsKeyId (inferstack uses "
                                          "the region's evs/default key)")),
    Mutation("the API rule moved to RDP", "huawei", API_RULE,
             lambda p: {**p, "portRangeMin": 3389.0, "portRangeMax": 3389.0}, "admin-ports-not-public",
             _fixed(f"admin port 3389 (RDP) is open to 0.0.0.0/0: {ADMIN_FIX}")),
    Mutation("bucket ACL made public", "huawei", "server-store-data", _set("acl", "public-read"),
             "buckets-not-public", _fixed("bucket ACL is public-read, which lets anyone read it: use private")),
    Mutation("model read on every object", "huawei", "server-identity-model-read",
             _statements("policy", lambda s: s[0].pop("Resource")), "server-identity-least-privilege",
             _fixed("the servers' identity may obs:object:GetObject on every resource (no Resource) (statement #0), "
                    f"{NOT_ONE_PREFIX}")),
    Mutation("CDN no longer redirects HTTP", "huawei", "server-assets-cdn",
             _set("configs.forceRedirect.enabled", False), "cdn-https-only",
             _fixed("plain HTTP is not redirected: set configs.forceRedirect to enabled, type https")),
    # Huawei Cloud: the hardening issue's bypasses
    Mutation("SSH from an address group", "huawei", API_RULE,
             lambda p: {**{k: v for k, v in p.items() if k != "remoteIpPrefix"}, "remoteAddressGroupId": "ag-1",
                        "portRangeMin": 22.0, "portRangeMax": 22.0},
             "admin-ports-not-public",
             _fixed(f"admin port 22 (SSH) is open to address group ag-1, which the pack cannot read: {ADMIN_FIX}")),
    Mutation("secrets read granted account-wide", "huawei", "server-identity-agency",
             lambda p: {**p, "domainRoles": [*p["domainRoles"], *p["projectRoles"][0]["roles"]], "projectRoles": []},
             "server-identity-least-privilege",
             _fixed("the servers' identity may csms:secretVersion:get (statement #0) as a domain role, which reads "
                    "every secret of the account: grant it as a project role of one region"),
             reported_on="server-identity-secrets-read"),
]


def _mutated(mutation: Mutation) -> tuple[Registered, Registered]:
    original = deployments.public_server(mutation.cloud, "gpu-llm")
    if mutation.change is None:
        return original, original.without(mutation.target)
    inputs = mutation.change(copy.deepcopy(original.named(mutation.target).inputs))
    return original, original.with_inputs(mutation.target, inputs, mutation.new_type)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: f"{m.cloud}: {m.label}")
def test_the_pack_reports_a_flipped_security_property(mutation: Mutation) -> None:
    original, mutated = _mutated(mutation)
    internal = deployments.policy_config("internal")  # one server: a stack of the internal stage
    assert check_recording(original, config=internal).violations == []
    report = check_recording(mutated, config=internal)
    expected_urn = original.named(mutation.reported_on or mutation.target).urn
    found = [(v.policy, v.message, v.urn) for v in report.violations]
    assert (mutation.policy, mutation.message(original), expected_urn) in found, found


def test_every_cloud_has_a_mutation_for_each_kind_of_rule() -> None:
    kinds = {"network": {"admin-ports-not-public"}, "buckets": {"buckets-not-public"},
             "encryption": {"encryption-at-rest", "buckets-have-default-encryption"},
             "identity": {"server-identity-least-privilege", "storage-grants-no-wildcards"},
             "cdn": {"cdn-https-only", "cdn-https-front-ends"}}
    for cloud in deployments.CLOUD_SETTINGS:
        covered = {m.policy for m in MUTATIONS if m.cloud == cloud}
        # Google Cloud encryption cannot be turned off, so there is nothing to flip (not applicable, with reason).
        expected = [policies for kind, policies in kinds.items() if not (cloud == "gcp" and kind == "encryption")]
        assert all(covered & policies for policies in expected), (cloud, covered)
    assert {m.cloud for m in MUTATIONS if m.policy == "metadata-tokens-required"} == {"aws", "alibaba"}


#### Fleets: the production deployment of each cloud whose fleet is built ####

ONLY_LB = ("a fleet's serving port admits its load balancer only (the load balancer's security group, the network, or "
           "Google's front ends 130.211.0.0/22, 35.191.0.0/16); callers reach the load balancer")
HEALTH_FIX = "check the serving health path (the plan's serving.health_path) over HTTP on the serving port"
NO_PUBLIC = "a fleet's servers have no public address: the load balancer is their only public endpoint"
ZONES_FIX = ("spread it over at least 2 (production plans span two; set minZones 1 in the policy config of a stack of "
             "another stage)")
SERVING_PORT = 8000
GROUP_TYPES = {"aws": AWS_AUTOSCALING_GROUP, "gcp": GCP_REGION_GROUP_MANAGER,
               "alibaba": ALI_SCALING_GROUP, "huawei": HW_AS_GROUP}
INGRESS_TYPES = {"aws": AWS_INGRESS_RULE, "gcp": GCP_FIREWALL, "alibaba": ALI_SECURITY_GROUP_RULE,
                 "huawei": HW_SECURITY_GROUP_RULE}
SUBNETS = {"aws": ("vpcZoneIdentifiers", "availabilityZone"), "alibaba": ("vswitchIds", "zoneId")}
"""Where a group names its subnets, and where a subnet names its zone."""

Select = Callable[[Registered], str]


def _one(*types: str, where: Callable[[RegisteredResource], bool] = lambda resource: True) -> Select:
    """The name of the one resource of these types that passes `where`."""
    def select(registered: Registered) -> str:
        (found,) = [r.name for r in registered.resources() if r.type in types and where(r)]
        return found
    return select


def _protocol(key: str, value: str) -> Callable[[RegisteredResource], bool]:
    return lambda resource: str(resource.inputs.get(key)).upper() == value


def _not_assets(resource: RegisteredResource) -> bool:
    """Not the static assets' load balancer (Google Cloud's CDN is one too)."""
    return "-assets-" not in resource.name


def _serving_rule(cloud: str) -> Select:
    """The servers' rule that admits the load balancer to the serving port (and nothing else)."""
    def opens_api(resource: RegisteredResource) -> bool:
        found = openings(INGRESS_TYPES[cloud], resource.inputs)
        return bool(found) and all((o.low, o.high) == (SERVING_PORT, SERVING_PORT) for o in found)
    return _one(INGRESS_TYPES[cloud], where=opens_api)


@dataclass(frozen=True)
class FleetMutation:
    label: str
    cloud: str
    target: Select
    change: Callable[[Props], Props] | None
    """New inputs from the recorded ones; None removes the resource."""
    policy: str
    message: Callable[[Registered], str]
    reported_on: Select | None = None
    dependencies: Callable[[dict[str, list[str]]], dict[str, list[str]]] | None = None
    """The target's new property dependencies (by resource name), from its recorded ones."""


def _group(registered: Registered, cloud: str) -> str:
    return _one(GROUP_TYPES[cloud])(registered)


def _without(props: Props, *keys: str) -> Props:
    return {k: v for k, v in props.items() if k not in keys}


def _world(cloud: str) -> Callable[[Props], Props]:
    """The serving-port rule opened to the whole internet instead of the load balancer."""
    return {"aws": lambda p: {**_without(p, "referencedSecurityGroupId"), "cidrIpv4": "0.0.0.0/0"},
            "gcp": lambda p: {**p, "sourceRanges": ["0.0.0.0/0"]},
            "alibaba": lambda p: {**_without(p, "sourceSecurityGroupId"), "cidrIp": "0.0.0.0/0"},
            "huawei": lambda p: {**_without(p, "remoteGroupId"), "remoteIpPrefix": "0.0.0.0/0"}}[cloud]


def _api_opened(cloud: str) -> FleetMutation:
    return FleetMutation(
        "the serving port opened to the world", cloud, _serving_rule(cloud), _world(cloud),
        "load-balancer-only-public-listener",
        lambda r: f"port 8000 is open to the whole internet (0.0.0.0/0) on the servers of managed group "
                  f"{_group(r, cloud)}: {ONLY_LB}",
        dependencies=lambda deps: _without(deps, "referencedSecurityGroupId", "sourceSecurityGroupId",
                                           "remoteGroupId"))


def _one_subnet(cloud: str) -> FleetMutation:
    """The group on its first subnet only (the dependencies follow: they are what the engine relates by)."""
    key, zone_key = SUBNETS[cloud]

    def message(registered: Registered) -> str:
        group = _group(registered, cloud)
        zone = registered.named(registered.dependency_names(group)[key][0]).inputs[zone_key]
        return f"managed group {group} spans 1 zone(s) ({zone}): {ZONES_FIX}"

    return FleetMutation("the group in one zone", cloud, _one(GROUP_TYPES[cloud]), lambda p: {**p, key: p[key][:1]},
                         "fleet-spans-zones", message, dependencies=lambda deps: {**deps, key: deps[key][:1]})


def _one_zone(cloud: str, key: str) -> FleetMutation:
    def message(registered: Registered) -> str:
        group = _group(registered, cloud)
        zone = str(registered.named(group).inputs[key][0]).rsplit("/", 1)[-1]
        return f"managed group {group} spans 1 zone(s) ({zone}): {ZONES_FIX}"

    return FleetMutation("the group in one zone", cloud, _one(GROUP_TYPES[cloud]), lambda p: {**p, key: p[key][:1]},
                         "fleet-spans-zones", message)


def _health_on_root(cloud: str, select: Select, setting: str) -> FleetMutation:
    return FleetMutation("the health check asks for /", cloud, select, _set(setting, "/"),
                         "load-balancer-backends-on-serving-port",
                         _fixed(f"the health check asks for / ({setting}), which answers before the model is loaded: "
                                f"{HEALTH_FIX}"))


def _holds_servers(resource: RegisteredResource) -> bool:
    """An Alibaba server group that holds the servers (the HTTP listener's default group holds none)."""
    return "nowhere" not in resource.name


def _load_balancers(resource: RegisteredResource) -> bool:
    """Google Cloud: the load balancer's health check (the group's autohealing check is another)."""
    return "autoheal" not in resource.name


GCP_API_PROXY = _one(*GCP_HTTPS_PROXIES, where=_not_assets)


HTTP_LISTENER = {"alibaba": _one(ALI_LISTENER, where=_protocol("listenerProtocol", "HTTP")),
                 "huawei": _one(HW_LISTENER, where=_protocol("protocol", "HTTP"))}

FLEET_MUTATIONS = [
    # AWS
    FleetMutation("servers get a public address", "aws", _one(AWS_LAUNCH_TEMPLATE),
                  _set("networkInterfaces", [{"associatePublicIpAddress": "true", "deviceIndex": 0.0}]),
                  "servers-no-public-address",
                  _fixed("network interface 0 of the launch template gets a public address (associatePublicIpAddress "
                         f"is true): set it to false; {NO_PUBLIC}")),
    FleetMutation("launch template tokens optional", "aws", _one(AWS_LAUNCH_TEMPLATE),
                  _set("metadataOptions.httpTokens", "optional"), "metadata-tokens-required",
                  _fixed("the metadata service answers without a session token (metadataOptions.httpTokens is "
                         "optional): set it to required")),
    FleetMutation("HTTPS listener on TLS 1.0", "aws", _one(*AWS_LISTENERS, where=_protocol("protocol", "HTTPS")),
                  _set("sslPolicy", "ELBSecurityPolicy-2016-08"), "load-balancer-https-only",
                  _fixed("the HTTPS listener's TLS policy is ELBSecurityPolicy-2016-08, which the pack does not know "
                         "to refuse TLS before 1.2: set sslPolicy to ELBSecurityPolicy-TLS13-1-2-2021-06 (or another "
                         "ELBSecurityPolicy-TLS13-1-2-*, -TLS13-1-3-*, -TLS-1-2-* or -FS-1-2-* policy)")),
    FleetMutation("HTTP forwards instead of redirecting", "aws",
                  _one(*AWS_LISTENERS, where=_protocol("protocol", "HTTP")),
                  _set("defaultActions", [{"type": "forward", "targetGroupArn": "arn:aws:elasticloadbalancing:tg"}]),
                  "load-balancer-https-only",
                  _fixed("the HTTP listener's default actions (forward) do not only redirect to HTTPS, so plain HTTP "
                         "reaches the servers: give it one redirect action with protocol HTTPS")),
    _health_on_root("aws", _one(*AWS_TARGET_GROUPS), "healthCheck.path"),
    _api_opened("aws"),
    _one_subnet("aws"),
    # Google Cloud
    FleetMutation("servers get an external address", "gcp", _one(*GCP_INSTANCE_TEMPLATES),
                  lambda p: {**p, "networkInterfaces": [{**p["networkInterfaces"][0], "accessConfigs": [{}]}]},
                  "servers-no-public-address",
                  _fixed("network interface 0 of the template has an access config, which gives each server an "
                         f"external IPv4 address: remove accessConfigs; {NO_PUBLIC}")),
    FleetMutation("SSL policy down to TLS 1.0", "gcp", _one(*GCP_SSL_POLICIES, where=_not_assets),
                  _set("minTlsVersion", "TLS_1_0"), "load-balancer-https-only",
                  _fixed("the SSL policy's minTlsVersion is TLS_1_0: set it to TLS_1_2")),
    FleetMutation("HTTPS proxy without an SSL policy", "gcp", GCP_API_PROXY, lambda p: _without(p, "sslPolicy"),
                  "load-balancer-https-front-ends",
                  lambda r: f"target HTTPS proxy {GCP_API_PROXY(r)} has no SSL policy, so Google's default applies, "
                            "which admits TLS 1.0: give it an SSL policy with minTlsVersion TLS_1_2",
                  dependencies=lambda deps: _without(deps, "sslPolicy")),
    _health_on_root("gcp", _one(*GCP_HEALTH_CHECKS, where=_load_balancers), "httpHealthCheck.requestPath"),
    _api_opened("gcp"),
    _one_zone("gcp", "distributionPolicyZones"),
    # Alibaba Cloud
    FleetMutation("servers get bandwidth out", "alibaba", _one(*ALI_LAUNCH_TEMPLATES),
                  _set("internetMaxBandwidthOut", 5.0), "servers-no-public-address",
                  _fixed("internetMaxBandwidthOut is 5, which gives each server a public address: set it to 0 "
                         f"(servers reach the internet through the NAT gateway); {NO_PUBLIC}")),
    FleetMutation("launch template tokens optional", "alibaba", _one(*ALI_LAUNCH_TEMPLATES),
                  _set("httpTokens", "optional"), "metadata-tokens-required",
                  _fixed("the metadata service answers without a session token (httpTokens is optional): set it to "
                         "required")),
    FleetMutation("HTTPS listener on TLS 1.0", "alibaba",
                  _one(ALI_LISTENER, where=_protocol("listenerProtocol", "HTTPS")),
                  _set("securityPolicyId", "tls_cipher_policy_1_0"), "load-balancer-https-only",
                  _fixed("the HTTPS listener's TLS policy is tls_cipher_policy_1_0, which admits TLS before 1.2: set "
                         "securityPolicyId to tls_cipher_policy_1_2 (or _1_2_strict, _1_2_strict_with_1_3, or a custom "
                         "alb.SecurityPolicy of TLSv1.2 and TLSv1.3)")),
    FleetMutation("the HTTP redirect rule removed", "alibaba", _one(ALI_LISTENER_RULE), None,
                  "load-balancer-https-front-ends",
                  lambda r: f"HTTP listener {HTTP_LISTENER['alibaba'](r)} has no rule that redirects every request "
                            "(path /*) to HTTPS, so its default action forwards plain HTTP to the servers: add an "
                            "alb.Rule with a Redirect action (protocol HTTPS) for path /*",
                  reported_on=HTTP_LISTENER["alibaba"]),
    _health_on_root("alibaba", _one(ALI_SERVER_GROUP, where=_holds_servers),
                    "healthCheckConfig.healthCheckPath"),
    _api_opened("alibaba"),
    _one_subnet("alibaba"),
    # Huawei Cloud
    FleetMutation("servers get an elastic IP", "huawei", _one(HW_AS_CONFIGURATION),
                  _set("instanceConfig.publicIp", {"eip": {"ipType": "5_bgp", "bandwidth": {"size": 5.0}}}),
                  "servers-no-public-address",
                  _fixed("instanceConfig.publicIp gives each server an elastic IP: remove it (servers reach the "
                         f"internet through the NAT gateway); {NO_PUBLIC}")),
    FleetMutation("HTTPS listener on TLS 1.0", "huawei", _one(HW_LISTENER, where=_protocol("protocol", "HTTPS")),
                  lambda p: {**_without(p, "securityPolicyId"), "tlsCiphersPolicy": "tls-1-0"},
                  "load-balancer-https-only",
                  _fixed("the HTTPS listener's TLS policy is tls-1-0, which admits TLS before 1.2: set "
                         "tlsCiphersPolicy to tls-1-2 (or tls-1-2-strict, tls-1-2-fs, tls-1-2-fs-with-1-3, "
                         "tls-1-2-strict-no-cbc, or a custom DedicatedElb.SecurityPolicy of TLSv1.2 and TLSv1.3)")),
    FleetMutation("the HTTP redirect removed", "huawei", _one(HW_L7_POLICY), None,
                  "load-balancer-https-front-ends",
                  lambda r: f"HTTP listener {HTTP_LISTENER['huawei'](r)} redirects nothing to HTTPS: add an l7policy "
                            "REDIRECT_TO_LISTENER to the HTTPS listener",
                  reported_on=HTTP_LISTENER["huawei"]),
    FleetMutation("the system disk without a key", "huawei", _one(HW_AS_CONFIGURATION),
                  lambda p: {**p, "instanceConfig": {**p["instanceConfig"], "disks": [
                      _without(d, "kmsId") for d in p["instanceConfig"]["disks"]]}},
                  "encryption-at-rest",
                  _fixed("disk 0 (SYS) of the AS configuration is not encrypted: set kmsId (inferstack uses the "
                         "region's evs/default key)")),
    _health_on_root("huawei", _one(HW_MONITOR, where=lambda r: "weighted" not in r.name), "urlPath"),
    _api_opened("huawei"),
    _one_zone("huawei", "availabilityZones"),
]


def _fleet_mutated(mutation: FleetMutation) -> tuple[Registered, Registered]:
    support = backend_for(mutation.cloud).support(Capability.MANAGED_FLEET)
    if not support.available:
        pytest.skip(f"{mutation.cloud} deploys a production plan as loose servers until its fleet lands: "
                    f"{support.note}")
    original = deployments.public_deployment(mutation.cloud, "gpu-llm")
    target = mutation.target(original)
    if mutation.change is None:
        return original, original.without(target)
    inputs = mutation.change(copy.deepcopy(original.named(target).inputs))
    dependencies = mutation.dependencies(original.dependency_names(target)) if mutation.dependencies else None
    return original, original.with_inputs(target, inputs, dependencies=dependencies)


@pytest.mark.parametrize("mutation", FLEET_MUTATIONS, ids=lambda m: f"{m.cloud}: {m.label}")
def test_the_pack_reports_a_flipped_property_of_a_fleet(mutation: FleetMutation) -> None:
    original, mutated = _fleet_mutated(mutation)
    assert check_recording(original).violations == []
    report = check_recording(mutated)
    expected_urn = original.named((mutation.reported_on or mutation.target)(original)).urn
    found = [(v.policy, v.message, v.urn) for v in report.violations]
    assert (mutation.policy, mutation.message(original), expected_urn) in found, found


def test_every_cloud_has_a_fleet_mutation_for_each_fleet_rule() -> None:
    fleet_rules = {"servers-no-public-address", "load-balancer-https-only", "load-balancer-backends-on-serving-port",
                   "load-balancer-only-public-listener", "fleet-spans-zones"}
    for cloud in deployments.CLOUD_SETTINGS:
        covered = {m.policy for m in FLEET_MUTATIONS if m.cloud == cloud}
        assert fleet_rules <= covered, (cloud, fleet_rules - covered)

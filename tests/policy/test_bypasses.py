"""The hardening issue's bypasses ("each produced 0 violations on a full deployment"), and failing closed.

Each case is one way around a guardrail, written as the engine sends it, with the exact violations it now gets.
Every violating case here passed the pack before the fix (the report in the pull request lists the run against the
previous pack); the compliant cases beside them show the rule still admits what inferstack builds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from guardrails.resource_types import (
    ALI_INSTANCE,
    ALI_POLICY,
    ALI_ROLE,
    ALI_ROLE_POLICY_ATTACHMENT,
    ALI_SECURITY_GROUP_RULE,
    AWS_DEFAULT_SECURITY_GROUP,
    AWS_INGRESS_RULE,
    AWS_INSTANCE,
    AWS_LAUNCH_CONFIGURATION,
    AWS_LAUNCH_TEMPLATE,
    AWS_MANAGED_POLICY,
    AWS_PARAMETER,
    AWS_POLICY_ATTACHMENT,
    AWS_ROLE,
    AWS_ROLE_POLICY,
    AWS_ROLE_POLICY_ATTACHMENT,
    AWS_SECURITY_GROUP,
    AWS_SECURITY_GROUP_RULE,
    AWS_SPOT_INSTANCE_REQUEST,
    GCP_BUCKET_IAM_MEMBER,
    GCP_FIREWALL,
    GCP_FIREWALL_POLICY_RULE,
    GCP_FIREWALL_POLICY_WITH_RULES,
    GCP_INSTANCE,
    GCP_NETWORK_FIREWALL_POLICY_RULE,
    GCP_NETWORK_FIREWALL_POLICY_WITH_RULES,
    GCP_PROJECT_IAM_MEMBER,
    GCP_PROJECT_IAM_POLICY,
    GCP_REGION_FIREWALL_POLICY_RULE,
    GCP_REGION_FIREWALL_POLICY_WITH_RULES,
    GCP_SECRET,
    GCP_SECRET_IAM_MEMBER,
    GCP_SERVICE_ACCOUNT,
    HW_AGENCY,
    HW_ROLE,
    HW_SECURITY_GROUP_RULE,
)

from tests.policy.harness import Resource, check_resource, check_stack, pack

BUCKET = "inferstack-dev-models-1a2b3c4d"
PREFIX = "models/llama/"
WORLD = "0.0.0.0/0"
ADMIN_FIX = ("inferstack opens no admin port; reach servers through the cloud's managed shell, or admit a private "
             "network only")
WORLD_FIX = ("only a serving port (8000), or a load balancer's HTTPS or redirect port (443, 80), may be open beyond "
             "private networks; admit private networks only, or reach other ports through the cloud's managed shell")
UNREAD_FIX = "name the protocol (tcp, udp, icmp, all, or its number) and give numeric ports"
EVERY_PORT = ("ports 0-65535 are open to {source}, including admin port 22 (SSH): " + ADMIN_FIX,
              "ports 0-65535 are open to {source}, including admin port 3389 (RDP): " + ADMIN_FIX)
NEVER = ("which inferstack never grants: the servers only read their model prefix and their own secrets{shell} "
         "(docs/policy.md lists the actions); remove it")
AWS_NEVER = NEVER.format(shell=" and open the managed shell")
NOT_ONE_PREFIX = ("which is not one model prefix of one bucket: grant bucket/prefix* only (no wildcard in the bucket "
                  "or the prefix)")


@dataclass(frozen=True)
class Case:
    label: str
    policy: Any
    resource_type: str
    props: dict[str, Any]
    messages: list[str]


def _every_port(source: str) -> list[str]:
    return [message.format(source=source) for message in EVERY_PORT]


def _aws_rule(**props: Any) -> dict[str, Any]:
    return {"type": "ingress", "protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "securityGroupId": "sg-1", **props}


def _gcp_policy_rule(action: str = "allow", direction: str = "INGRESS", **match: Any) -> dict[str, Any]:
    return {"firewallPolicy": "fp-1", "priority": 1000.0, "action": action, "direction": direction,
            "match": {"srcIpRanges": [WORLD], "layer4Configs": [{"ipProtocol": "tcp", "ports": ["22"]}], **match}}


def _hw_rule(**props: Any) -> dict[str, Any]:
    return {"direction": "ingress", "ethertype": "IPv4", "protocol": "tcp", "portRangeMin": 22.0, "portRangeMax": 22.0,
            "securityGroupId": "43b50667", **props}


GCP_POLICY_RULE_TYPES = [GCP_FIREWALL_POLICY_RULE, GCP_NETWORK_FIREWALL_POLICY_RULE,
                         GCP_REGION_FIREWALL_POLICY_RULE]
GCP_POLICY_WITH_RULES_TYPES = [GCP_FIREWALL_POLICY_WITH_RULES, GCP_NETWORK_FIREWALL_POLICY_WITH_RULES,
                               GCP_REGION_FIREWALL_POLICY_WITH_RULES]

NETWORK_CASES = [
    # Public ranges other than /0.
    Case("the internet in two halves, 0.0.0.0/1 and 128.0.0.0/1", pack.world_ingress_serving_port_only,
         AWS_SECURITY_GROUP_RULE, _aws_rule(fromPort=9000.0, toPort=9000.0,
                                            cidrBlocks=["0.0.0.0/1", "128.0.0.0/1"]),
         [f"port 9000 is open to public network 0.0.0.0/1: {WORLD_FIX}",
          f"port 9000 is open to public network 128.0.0.0/1: {WORLD_FIX}"]),
    Case("IPv6: half the internet (::/1) and all of global unicast (2000::/3)", pack.world_ingress_serving_port_only,
         AWS_SECURITY_GROUP, {"ingress": [{"protocol": "tcp", "fromPort": 5432.0, "toPort": 5432.0,
                                           "ipv6CidrBlocks": ["::/1", "2000::/3"]}]},
         [f"port 5432 is open to public network ::/1: {WORLD_FIX}",
          f"port 5432 is open to public network 2000::/3: {WORLD_FIX}"]),
    Case("a non-serving port to loopback, link-local and private networks", pack.world_ingress_serving_port_only,
         AWS_SECURITY_GROUP, {"ingress": [{"protocol": "tcp", "fromPort": 5432.0, "toPort": 5432.0,
                                           "cidrBlocks": ["127.0.0.0/8", "169.254.0.0/16", "10.0.0.0/8"],
                                           "ipv6CidrBlocks": ["fe80::/10", "fd00::/8"]}]}, []),
    Case("a source that is not an address", pack.world_ingress_serving_port_only, AWS_INGRESS_RULE,
         {"ipProtocol": "tcp", "fromPort": 9000.0, "toPort": 9000.0, "cidrIpv4": "any"},
         [f"port 9000 is open to source 'any', which the pack cannot read (so it counts as public): {WORLD_FIX}"]),
    # Resource types the pack did not read.
    Case("SSH from the world through the default security group", pack.admin_ports_not_public,
         AWS_DEFAULT_SECURITY_GROUP, {"ingress": [{"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0,
                                                   "cidrBlocks": [WORLD]}]},
         [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]),
    *(Case(f"SSH from the world through {t.rsplit(':', 1)[-1]}", pack.admin_ports_not_public, t, _gcp_policy_rule(),
           [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]) for t in GCP_POLICY_RULE_TYPES),
    *(Case(f"SSH from the world in {t.rsplit(':', 1)[-1]}", pack.admin_ports_not_public, t,
           {"rules": [_gcp_policy_rule(action="deny"), _gcp_policy_rule()]},
           [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]) for t in GCP_POLICY_WITH_RULES_TYPES),
    Case("a firewall policy rule that denies, or goes to the next level", pack.admin_ports_not_public,
         GCP_NETWORK_FIREWALL_POLICY_WITH_RULES,
         {"rules": [_gcp_policy_rule(action="deny"), _gcp_policy_rule(action="goto_next"),
                    _gcp_policy_rule(direction="EGRESS")]}, []),
    Case("a firewall policy rule admitting IAP's forwarders", pack.admin_ports_not_public,
         GCP_NETWORK_FIREWALL_POLICY_RULE, _gcp_policy_rule(srcIpRanges=["35.235.240.0/20"]), []),
    Case("a firewall policy rule for every internet source", pack.admin_ports_not_public,
         GCP_REGION_FIREWALL_POLICY_RULE,
         _gcp_policy_rule(srcIpRanges=[], srcNetworkScope="INTERNET",
                          layer4Configs=[{"ipProtocol": "ALL"}]),
         _every_port("srcNetworkScope INTERNET")),
    Case("a firewall type the pack does not know", pack.admin_ports_not_public,
         "huaweicloud:Networking/secgroupRule:SecgroupRule", _hw_rule(remoteIpPrefix=WORLD),
         ["huaweicloud:Networking/secgroupRule:SecgroupRule is a firewall type the pack cannot read, so it counts as "
          "opening every port (admin ports included) to the internet: use a rule type the pack reads (docs/policy.md "
          "lists them)"]),
    Case("a firewall type the pack does not know, on any port", pack.world_ingress_serving_port_only,
         "aws:ec2/securityGroupIngressRules:SecurityGroupIngressRules", {},
         ["aws:ec2/securityGroupIngressRules:SecurityGroupIngressRules is a firewall type the pack cannot read, so it "
          "counts as opening every port to the internet: use a rule type the pack reads (docs/policy.md lists them)"]),
    # Sources whose addresses the pack cannot see.
    Case("SSH from a prefix list", pack.admin_ports_not_public, AWS_INGRESS_RULE,
         {"ipProtocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "prefixListId": "pl-0123456789abcdef0"},
         [f"admin port 22 (SSH) is open to prefix list pl-0123456789abcdef0, which the pack cannot read: {ADMIN_FIX}"]),
    Case("SSH from an Alibaba prefix list", pack.admin_ports_not_public, ALI_SECURITY_GROUP_RULE,
         {"type": "ingress", "ipProtocol": "tcp", "portRange": "22/22", "prefixListId": "pl-wz9c6ab2sldbd4w4",
          "policy": "accept", "securityGroupId": "sg-1"},
         [f"admin port 22 (SSH) is open to prefix list pl-wz9c6ab2sldbd4w4, which the pack cannot read: {ADMIN_FIX}"]),
    Case("SSH from a Huawei address group", pack.admin_ports_not_public, HW_SECURITY_GROUP_RULE,
         _hw_rule(remoteAddressGroupId="ag-1"),
         [f"admin port 22 (SSH) is open to address group ag-1, which the pack cannot read: {ADMIN_FIX}"]),
    Case("SSH from a Google address group", pack.admin_ports_not_public, GCP_NETWORK_FIREWALL_POLICY_RULE,
         _gcp_policy_rule(srcIpRanges=[], srcAddressGroups=["projects/p/locations/global/addressGroups/ops"]),
         ["admin port 22 (SSH) is open to address group projects/p/locations/global/addressGroups/ops, which the pack "
          f"cannot read: {ADMIN_FIX}"]),
    Case("SSH from another security group (instances of the cloud, not the internet)", pack.admin_ports_not_public,
         AWS_INGRESS_RULE, {"ipProtocol": "tcp", "fromPort": 22.0, "toPort": 22.0,
                            "referencedSecurityGroupId": "sg-0bastion"}, []),
    # Protocols written another way.
    Case("every protocol as the number -1", pack.admin_ports_not_public, AWS_SECURITY_GROUP,
         {"ingress": [{"protocol": -1.0, "fromPort": 0.0, "toPort": 0.0, "cidrBlocks": [WORLD]}]}, _every_port(WORLD)),
    Case("every protocol as the text -1.0", pack.admin_ports_not_public, AWS_SECURITY_GROUP_RULE,
         _aws_rule(protocol="-1.0", fromPort=0.0, toPort=0.0, cidrBlocks=[WORLD]), _every_port(WORLD)),
    Case("TCP by number, as text with a decimal", pack.admin_ports_not_public, AWS_INGRESS_RULE,
         {"ipProtocol": "6.0", "fromPort": 22.0, "toPort": 22.0, "cidrIpv4": WORLD},
         [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]),
    Case("another protocol number, which opens every port on AWS", pack.admin_ports_not_public, AWS_INGRESS_RULE,
         {"ipProtocol": "41", "fromPort": 22.0, "toPort": 22.0, "cidrIpv4": WORLD}, _every_port(WORLD)),
    Case("ALL in capitals", pack.admin_ports_not_public, HW_SECURITY_GROUP_RULE,
         _hw_rule(protocol="ALL", portRangeMin=None, portRangeMax=None, remoteIpPrefix=WORLD), _every_port(WORLD)),
    Case("ICMP opens no port", pack.admin_ports_not_public, AWS_INGRESS_RULE,
         {"ipProtocol": "icmp", "fromPort": -1.0, "toPort": -1.0, "cidrIpv4": WORLD}, []),
    Case("a protocol the pack does not know", pack.admin_ports_not_public, AWS_INGRESS_RULE,
         {"ipProtocol": "ssh", "fromPort": 22.0, "toPort": 22.0, "cidrIpv4": WORLD},
         ["the rule's protocol 'ssh' cannot be read, so it counts as opening every port (admin ports included) to "
          f"0.0.0.0/0: {UNREAD_FIX}"]),
    # Port ranges.
    Case("a reversed port range", pack.admin_ports_not_public, ALI_SECURITY_GROUP_RULE,
         {"type": "ingress", "ipProtocol": "tcp", "portRange": "65535/1", "cidrIp": WORLD, "policy": "accept",
          "securityGroupId": "sg-1"},
         [f"ports 1-65535 are open to 0.0.0.0/0, including admin port 22 (SSH): {ADMIN_FIX}",
          f"ports 1-65535 are open to 0.0.0.0/0, including admin port 3389 (RDP): {ADMIN_FIX}"]),
    Case("a port range around SSH, with its ports as numbers", pack.admin_ports_not_public, GCP_FIREWALL,
         {"direction": "INGRESS", "sourceRanges": ["198.51.100.0/24"], "allows": [{"protocol": "tcp",
                                                                                   "ports": [20.0, "21-23"]}]},
         [f"ports 21-23 are open to 198.51.100.0/24, including admin port 22 (SSH): {ADMIN_FIX}"]),
    Case("a port the pack cannot read", pack.world_ingress_serving_port_only, GCP_FIREWALL,
         {"direction": "INGRESS", "sourceRanges": [WORLD], "allows": [{"protocol": "tcp", "ports": ["ssh"]}]},
         ["the rule's port 'ssh' cannot be read, so it counts as opening every port to the whole internet "
          f"(0.0.0.0/0): {UNREAD_FIX}"]),
]


@pytest.mark.parametrize("case", NETWORK_CASES, ids=lambda c: f"{c.policy.name}: {c.label}")
def test_a_network_bypass_is_reported_and_private_sources_still_pass(case: Case) -> None:
    report = check_resource(case.policy, case.resource_type, case.props)
    assert report.messages() == case.messages


def test_an_api_open_to_the_whole_internet_in_two_halves_needs_an_api_key() -> None:
    halves = [Resource(AWS_INGRESS_RULE, f"api-{n}", {"ipProtocol": "tcp", "fromPort": 8000.0, "toPort": 8000.0,
                                                              "cidrIpv4": cidr})
              for n, cidr in enumerate(["0.0.0.0/1", "128.0.0.0/1"])]
    report = check_stack(pack.public_api_has_api_key, halves)
    assert [v.urn for v in report.violations] == [r.urn for r in halves]
    assert report.messages() == [
        f"port 8000 is open to public network {half}, and the stack stores no API key (no secret resource named "
        "'*-api-key'): store it as a secret the servers' identity may read (`pulumi config set --secret "
        "inferstack:apiKey \"$(openssl rand -hex 32)\"`), or admit private networks only"
        for half in ("0.0.0.0/1", "128.0.0.0/1")]
    # any public source needs the key, half the internet alone too (issue 23: tests/policy/test_edge_bypasses.py)
    assert [v.urn for v in check_stack(pack.public_api_has_api_key, halves[:1]).violations] == [halves[0].urn]


#### Instance metadata ####

HOPS_64 = ("the metadata hop limit is 64 (metadataOptions.httpPutResponseHopLimit), so containers on the server reach "
           "its credentials: set it to 1")
HOPS_UNSET = ("the metadata hop limit is unset (metadataOptions.httpPutResponseHopLimit), so the image's default "
              "applies (2 on images that require tokens) and containers reach the server's credentials: set it to 1")
REQUIRED_64 = {"metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required",
                                   "httpPutResponseHopLimit": 64.0}}

METADATA_CASES = [
    Case("EC2 instance, tokens required, 64 hops", pack.metadata_tokens_required, AWS_INSTANCE, REQUIRED_64,
         [HOPS_64]),
    Case("launch template, tokens required, 64 hops", pack.metadata_tokens_required, AWS_LAUNCH_TEMPLATE,
         REQUIRED_64, [HOPS_64]),
    Case("spot instance request, tokens required, 64 hops", pack.metadata_tokens_required,
         AWS_SPOT_INSTANCE_REQUEST, REQUIRED_64, [HOPS_64]),
    Case("launch configuration without metadata options", pack.metadata_tokens_required,
         AWS_LAUNCH_CONFIGURATION, {"imageId": "ami-1"},
         ["the metadata service answers without a session token (metadataOptions.httpTokens is unset): set it to "
          "required", HOPS_UNSET]),
    Case("EC2 instance, tokens required, hop limit left to the image", pack.metadata_tokens_required,
         AWS_INSTANCE, {"metadataOptions": {"httpTokens": "required"}}, [HOPS_UNSET]),
    Case("EC2 instance, tokens required, one hop (what inferstack sets)", pack.metadata_tokens_required,
         AWS_LAUNCH_TEMPLATE, {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1.0}},
         []),
    Case("ECS instance, tokens required, 64 hops", pack.metadata_tokens_required, ALI_INSTANCE,
         {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 64.0},
         ["the metadata hop limit is 64 (httpPutResponseHopLimit), so containers on the server reach its credentials: "
          "set it to 1"]),
    Case("ECS instance, tokens required, hop limit at ECS's default of 1", pack.metadata_tokens_required,
         ALI_INSTANCE, {"httpEndpoint": "enabled", "httpTokens": "required"}, []),
]


@pytest.mark.parametrize("case", METADATA_CASES, ids=lambda c: c.label)
def test_the_metadata_service_needs_tokens_and_one_hop(case: Case) -> None:
    assert check_resource(case.policy, case.resource_type, case.props).messages() == case.messages


#### Storage grants: "?" is a wildcard too; basic roles ####


def _doc(statements: list[dict[str, Any]], version: str = "2012-10-17") -> str:
    return json.dumps({"Version": version, "Statement": statements})


def test_a_question_mark_in_a_bucket_name_is_a_wildcard() -> None:
    policy = _doc([{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::inferstack-????/models/*"}])
    report = check_resource(pack.storage_grants_no_wildcards, AWS_ROLE_POLICY, {"role": "r", "policy": policy})
    assert report.messages() == ["statement #0 grants storage on arn:aws:s3:::inferstack-????/models/*, which is every "
                                 "bucket: name one bucket and prefix"]


@pytest.mark.parametrize("role", ["roles/editor", "roles/owner", "roles/viewer"])
def test_a_basic_role_on_the_project_grants_every_bucket(role: str) -> None:
    report = check_resource(pack.storage_grants_no_wildcards, GCP_PROJECT_IAM_MEMBER,
                            {"project": "p", "role": role, "member": "user:someone@example.com"})
    assert report.messages() == [f"grants {role} on the whole project, which covers every bucket: grant a storage "
                                 "role on one bucket (BucketIAMMember) instead"]


#### The servers' identity: an allow-list ####

EC2_TRUST = _doc([{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "ec2.amazonaws.com"}}])
PARAMETER_ARN = "arn:aws:ssm:us-east-1:123456789012:parameter/inferstack/p/dev/server-secrets/api-key"
AWS_READ = [
    {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}",
     "Condition": {"StringLike": {"s3:prefix": [f"{PREFIX}*"]}}},
    {"Sid": "ReadModelFiles", "Effect": "Allow", "Action": "s3:GetObject",
     "Resource": f"arn:aws:s3:::{BUCKET}/{PREFIX}*"},
    {"Sid": "ReadSecrets", "Effect": "Allow", "Action": ["ssm:GetParameter", "ssm:GetParameters"],
     "Resource": [PARAMETER_ARN]},
    {"Sid": "Shell", "Effect": "Allow", "Action": ["ssm:UpdateInstanceInformation", "ssmmessages:OpenDataChannel"],
     "Resource": "*"}]
ROLE = Resource(AWS_ROLE, "server-role", {"assumeRolePolicy": EC2_TRUST, "name": "server-role-d992a2c",
                                          "arn": "arn:aws:iam::123456789012:role/server-role-d992a2c"})
PARAMETER = Resource(AWS_PARAMETER, "server-secrets-api-key", {"name": "/inferstack/p/dev/server-secrets/api-key",
                                                                    "arn": PARAMETER_ARN, "type": "SecureString"})


def _aws_server(statements: list[dict[str, Any]], *extra: Resource) -> list[Resource]:
    policy = Resource(AWS_ROLE_POLICY, "server-policy", {"role": "server-role-d992a2c",
                                                         "policy": _doc(statements)}, {"role": ["server-role"]})
    return [ROLE, PARAMETER, policy, *extra]


def _identity_report(stack: list[Resource]) -> list[tuple[str, str]]:
    report = check_stack(pack.server_identity_least_privilege, stack)
    return [(v.message, v.urn.rsplit("::", 1)[-1]) for v in report.violations]


def test_the_aws_server_role_holding_exactly_what_inferstack_grants_passes() -> None:
    assert _identity_report(_aws_server(AWS_READ)) == []


@pytest.mark.parametrize("action", ["iam:*", "iam:PassRole", "ssm:GetParameter*", "secretsmanager:GetSecretValue",
                                    "kms:Decrypt", "s3:PutObject", "*"])
def test_the_aws_server_role_may_hold_no_other_action(action: str) -> None:
    extra = {"Sid": "Extra", "Effect": "Allow", "Action": action, "Resource": "*"}
    assert _identity_report(_aws_server([*AWS_READ, extra])) == [
        (f"the servers' identity may {action} (statement Extra), {AWS_NEVER}", "server-policy")]


def test_the_aws_server_role_reads_its_own_secrets_only() -> None:
    every = {"Sid": "EveryParameter", "Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "*"}
    other = {"Sid": "Other", "Effect": "Allow", "Action": "ssm:GetParameters",
             "Resource": "arn:aws:ssm:us-east-1:123456789012:parameter/prod/db-password"}
    assert _identity_report(_aws_server([*AWS_READ, every, other])) == [
        ("the servers' identity may ssm:GetParameter on * (statement EveryParameter), which is not a secret of this "
         "stack: grant its own secrets only, by name", "server-policy"),
        ("the servers' identity may ssm:GetParameters on arn:aws:ssm:us-east-1:123456789012:parameter/prod/"
         "db-password (statement Other), which is not a secret of this stack: grant its own secrets only, by name",
         "server-policy")]


@pytest.mark.parametrize("resource", [f"arn:aws:s3:::inferstack-dev-models-1a2b3c4?/{PREFIX}*",
                                      f"arn:aws:s3:::{BUCKET}/models/ll?ma/*", f"arn:aws:s3:::{BUCKET}/*"])
def test_the_aws_server_role_reads_one_literal_prefix_of_one_bucket(resource: str) -> None:
    read = {"Sid": "Read", "Effect": "Allow", "Action": "s3:GetObject", "Resource": resource}
    assert _identity_report(_aws_server([read])) == [
        (f"the servers' identity may s3:GetObject on {resource} (statement Read), {NOT_ONE_PREFIX}", "server-policy")]


def test_the_aws_server_role_reads_one_prefix_only() -> None:
    second = {"Sid": "Data", "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/data/*"}
    assert _identity_report(_aws_server([*AWS_READ, second])) == [
        (f"the servers' identity reads 2 prefixes ({BUCKET}/data/*, {BUCKET}/{PREFIX}*): it reads one model prefix of "
         "one bucket (and that bucket's inferstack/bootstrap/)", "server-role")]


def test_the_aws_server_role_may_also_read_the_boot_bundles_of_its_bucket_only() -> None:
    bundles = {"Sid": "ReadBootBundles", "Effect": "Allow", "Action": "s3:GetObject",
               "Resource": f"arn:aws:s3:::{BUCKET}/inferstack/bootstrap/*"}
    assert _identity_report(_aws_server([*AWS_READ, bundles])) == []
    elsewhere = {**bundles, "Resource": "arn:aws:s3:::another-bucket/inferstack/bootstrap/*"}
    assert _identity_report(_aws_server([*AWS_READ, elsewhere])) == [
        (f"the servers' identity reads 2 prefixes (another-bucket/inferstack/bootstrap/*, {BUCKET}/{PREFIX}*): it "
         "reads one model prefix of one bucket (and that bucket's inferstack/bootstrap/)", "server-role")]


@pytest.mark.parametrize("policy", ["IAMFullAccess", "AmazonSSMManagedInstanceCore", "AmazonEC2FullAccess",
                                    "AdministratorAccess"])
def test_no_aws_managed_policy_is_attached_to_the_server_role(policy: str) -> None:
    attachment = Resource(AWS_ROLE_POLICY_ATTACHMENT, "server-extra",
                          {"role": "server-role-d992a2c", "policyArn": f"arn:aws:iam::aws:policy/{policy}"},
                          {"role": ["server-role"]})
    assert _identity_report(_aws_server(AWS_READ, attachment)) == [
        (f"the servers' identity has the AWS-managed policy {policy} attached, which inferstack never grants: attach "
         "nothing but inferstack's own policies", "server-extra")]


def test_a_policy_attached_to_the_server_role_is_read_or_refused() -> None:
    ours = Resource(AWS_MANAGED_POLICY, "server-managed", {
        "arn": "arn:aws:iam::123456789012:policy/server-managed", "policy": _doc([
            {"Sid": "PassAnyRole", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"}])})
    attach_ours = Resource(AWS_POLICY_ATTACHMENT, "server-managed-attachment", {
        "roles": ["server-role-d992a2c"], "policyArn": "arn:aws:iam::123456789012:policy/server-managed"},
        {"roles": ["server-role"], "policyArn": ["server-managed"]})
    attach_theirs = Resource(AWS_ROLE_POLICY_ATTACHMENT, "server-foreign", {
        "role": "server-role-d992a2c", "policyArn": "arn:aws:iam::123456789012:policy/elsewhere"})
    assert _identity_report(_aws_server(AWS_READ, ours, attach_ours, attach_theirs)) == [
        ("the servers' identity has policy arn:aws:iam::123456789012:policy/elsewhere attached, which is not in this "
         "stack, so the pack cannot read it: grant the server's permissions in a policy of this stack",
         "server-foreign"),
        (f"the servers' identity may iam:PassRole (statement PassAnyRole), {AWS_NEVER}", "server-managed")]


def test_what_the_pack_cannot_read_about_the_server_role_is_a_violation() -> None:
    unreadable = Resource(AWS_ROLE_POLICY, "server-unreadable", {"role": "server-role-d992a2c",
                                                                 "policy": "{not json"})
    exclusive = Resource("aws:iam/rolePoliciesExclusive:RolePoliciesExclusive", "server-exclusive",
                         {"roleName": "server-role-d992a2c", "policyNames": ["server-policy", "hand-made"]})
    broken_trust = Resource(AWS_ROLE, "batch-role", {"assumeRolePolicy": "ec2.amazonaws.com",
                                                     "name": "batch-role-1"})
    assert _identity_report(_aws_server(AWS_READ, unreadable, exclusive, broken_trust)) == [
        ("the trust policy of role batch-role cannot be read, so the pack cannot tell whether servers take it: write "
         "it as a JSON policy document", "batch-role"),
        ("a policy of the servers' identity is not a JSON policy document, so it cannot be checked",
         "server-unreadable"),
        ("server-exclusive (aws:iam/rolePoliciesExclusive:RolePoliciesExclusive) names the servers' identity "
         "server-role, and the pack cannot tell what it grants: grant the server's permissions the way inferstack "
         "does (docs/policy.md)", "server-exclusive")]


def test_a_component_passing_the_server_role_on_is_not_a_grant() -> None:
    """inferstack's own components output the role's ARN (identityId); only cloud resources grant anything."""
    component = Resource("inferstack:index:ServerIdentity", "server-identity", {"identityId": ROLE.props["arn"]})
    assert _identity_report(_aws_server(AWS_READ, component)) == []


GCP_EMAIL = "inferstack-dev-server@p.iam.gserviceaccount.com"
GCP_MEMBER = f"serviceAccount:{GCP_EMAIL}"
GCP_CONDITION = (f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/{PREFIX}") || '
                 f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{PREFIX}")')
GCP_NEVER = ("which inferstack never grants: the servers read their model prefix (roles/storage.objectViewer on the "
             "bucket, under a prefix condition) and their own secrets (roles/secretmanager.secretAccessor), nothing "
             "else; remove it")


def _gcp_server(*grants: Resource) -> list[Resource]:
    return [Resource(GCP_SERVICE_ACCOUNT, "server-account", {"email": GCP_EMAIL, "member": GCP_MEMBER}),
            Resource(GCP_INSTANCE, "server-0", {"serviceAccount": {"email": GCP_EMAIL}},
                     {"serviceAccount": ["server-account"]}),
            Resource(GCP_SECRET, "server-secrets-api-key", {"secretId": "api-key-1",
                                                                 "name": "projects/123/secrets/api-key-1"}),
            Resource(GCP_BUCKET_IAM_MEMBER, "server-model-read", {
                "bucket": BUCKET, "member": GCP_MEMBER, "role": "roles/storage.objectViewer",
                "condition": {"title": "t", "expression": GCP_CONDITION}}),
            Resource(GCP_SECRET_IAM_MEMBER, "server-secret-read", {
                "secretId": "projects/p/secrets/api-key-1", "member": GCP_MEMBER,
                "role": "roles/secretmanager.secretAccessor"}),
            *grants]


def test_the_gcp_server_account_holding_exactly_what_inferstack_grants_passes() -> None:
    assert _identity_report(_gcp_server()) == []


@pytest.mark.parametrize("role", ["roles/editor", "roles/owner", "roles/iam.serviceAccountTokenCreator",
                                  "roles/secretmanager.secretAccessor"])
def test_the_gcp_server_account_holds_no_project_role(role: str) -> None:
    grant = Resource(GCP_PROJECT_IAM_MEMBER, "server-project-role", {"project": "p", "role": role,
                                                                     "member": GCP_MEMBER})
    assert _identity_report(_gcp_server(grant)) == [
        (f"the servers' identity holds {role} on project p, {GCP_NEVER}", "server-project-role")]


def test_a_project_iam_policy_naming_the_gcp_server_account_is_read_or_refused() -> None:
    editor = Resource(GCP_PROJECT_IAM_POLICY, "project-policy", {"project": "p", "policyData": json.dumps(
        {"bindings": [{"role": "roles/editor", "members": [GCP_MEMBER, "user:ops@example.com"]},
                      {"role": "roles/viewer", "members": ["user:ops@example.com"]}]})})
    unreadable = Resource(GCP_PROJECT_IAM_POLICY, "project-policy-2", {"project": "q", "policyData": "{"},
                          {"policyData": ["server-account"]})
    assert _identity_report(_gcp_server(editor, unreadable)) == [
        (f"the servers' identity holds roles/editor on project p, {GCP_NEVER}", "project-policy"),
        ("the IAM policy of project q names the servers' identity and is not JSON, so it cannot be checked",
         "project-policy-2")]


def test_the_gcp_server_account_reads_its_own_secrets_only() -> None:
    grant = Resource(GCP_SECRET_IAM_MEMBER, "server-other-secret", {
        "secretId": "projects/p/secrets/db-password", "member": GCP_MEMBER,
        "role": "roles/secretmanager.secretAccessor"})
    assert _identity_report(_gcp_server(grant)) == [
        ("the servers' identity reads secret projects/p/secrets/db-password, which is not a secret of this stack: "
         "grant its own secrets only", "server-other-secret")]


ECS_TRUST = _doc([{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": ["ecs.aliyuncs.com"]}}],
                 "1")
ALI_NEVER = NEVER.format(shell=" and complete their own scale-out")


def _alibaba_server(statements: list[dict[str, Any]], policy_type: str = "Custom",
                    policy_name: str = "extra-1") -> list[Resource]:
    return [Resource(ALI_ROLE, "server-role", {"roleName": "server-role-8f30",
                                               "assumeRolePolicyDocument": ECS_TRUST}),
            Resource(ALI_POLICY, "server-extra", {"policyName": "extra-1",
                                                  "policyDocument": _doc(statements, "1")}),
            Resource(ALI_ROLE_POLICY_ATTACHMENT, "server-extra-attachment",
                     {"roleName": "server-role-8f30", "policyName": policy_name, "policyType": policy_type})]


def test_the_alibaba_server_role_holds_no_other_action_and_no_system_policy() -> None:
    assert _identity_report(_alibaba_server([{"Effect": "Allow", "Action": "ram:*", "Resource": "*"}])) == [
        (f"the servers' identity may ram:* (statement #0), {ALI_NEVER}", "server-extra")]
    every_secret = [{"Effect": "Allow", "Action": "kms:GetSecretValue", "Resource": "*"}]
    assert _identity_report(_alibaba_server(every_secret)) == [
        ("the servers' identity may kms:GetSecretValue on * (statement #0), which is not a secret of this stack: "
         "grant its own secrets only, by name", "server-extra")]
    assert _identity_report(_alibaba_server([], "System", "AliyunECSFullAccess")) == [
        ("the servers' identity has the system policy AliyunECSFullAccess attached, which inferstack never grants: "
         "attach nothing but inferstack's own policies", "server-extra-attachment")]


def _huawei_server(statements: list[dict[str, Any]], **roles: Any) -> list[Resource]:
    policy = json.dumps({"Version": "1.1", "Statement": statements})
    return [Resource(HW_ROLE, "server-secrets-read", {"name": "secrets-read-1", "type": "XA", "policy": policy}),
            Resource(HW_AGENCY, "server-agency", {"name": "agency-1", "delegatedServiceName": "op_svc_ecs",
                                                  **roles})]


SECRETS_READ = [{"Effect": "Allow", "Action": ["csms:secretVersion:get", "kms:dek:decrypt"]}]


def test_the_huawei_server_agency_reads_secrets_in_one_project_and_holds_no_system_role() -> None:
    assert _identity_report(_huawei_server(SECRETS_READ, projectRoles=[
        {"project": "ap-southeast-3", "roles": ["secrets-read-1"]}])) == []
    assert _identity_report(_huawei_server(SECRETS_READ, domainRoles=["secrets-read-1"])) == [
        (f"the servers' identity may {action} (statement #0) as a domain role, which reads every secret of the "
         "account: grant it as a project role of one region", "server-secrets-read")
        for action in ("csms:secretVersion:get", "kms:dek:decrypt")]
    assert _identity_report(_huawei_server(SECRETS_READ, domainRoles=["Tenant Administrator"])) == [
        ("the servers' identity holds role 'Tenant Administrator' (domain), which is not a custom role of this stack, "
         "so the pack cannot read it: grant the server's permissions in roles of this stack", "server-agency")]

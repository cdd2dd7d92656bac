"""Mutation check: flip one security property of what a real deployment registered, and the pack reports it.

Each case starts from a public production deployment (which passes every policy, test_pack_agrees_with_components),
changes one resource the way a careless edit would, and expects one exact violation on the resource at fault.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.policy import deployments
from tests.policy.harness import Registered, check_recording, rules

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
    Mutation("root volume unencrypted", "aws", "server-server-1", _set("rootBlockDevice.encrypted", False),
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
             _fixed("port 8000 is open to the whole internet (0.0.0.0/0) and the stack stores no API key (no secret "
                    "resource named '*-api-key'): set one with `pulumi config set --secret inferstack:apiKey "
                    "\"$(openssl rand -hex 32)\"`, or list your users' networks in allowedCidrs"),
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
             new_type=rules.AWS_ROLE_POLICY_ATTACHMENT),
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
                    "has httpsRedirect"), new_type=rules.GCP_HTTP_PROXY),
    # Google Cloud: the hardening issue's bypasses
    Mutation("SSH opened by a network firewall policy rule", "gcp", API_RULE,
             lambda p: {"firewallPolicy": "fp", "priority": 1000.0, "action": "allow", "direction": "INGRESS",
                        "match": {"srcIpRanges": p["sourceRanges"],
                                  "layer4Configs": [{"ipProtocol": "tcp", "ports": ["22"]}]}},
             "admin-ports-not-public", _fixed(f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"),
             new_type=rules.GCP_NETWORK_FIREWALL_POLICY_RULE),
    Mutation("the model read grant replaced by roles/editor on the project", "gcp", "server-identity-model-read",
             lambda p: {"project": "inferstack-preview", "role": "roles/editor", "member": p["member"]},
             "server-identity-least-privilege",
             _fixed("the servers' identity holds roles/editor on project inferstack-preview, which inferstack never "
                    "grants: the servers read their model prefix (roles/storage.objectViewer on the bucket, under a "
                    "prefix condition) and their own secrets (roles/secretmanager.secretAccessor), nothing else; "
                    "remove it"), new_type=rules.GCP_PROJECT_IAM_MEMBER),
    # Alibaba Cloud
    Mutation("metadata tokens made optional", "alibaba", "server-server-0", _set("httpTokens", "optional"),
             "metadata-tokens-required",
             _fixed("the metadata service answers without a session token (httpTokens is optional): set it to "
                    "required")),
    Mutation("the API rule moved to SSH", "alibaba", API_RULE, _set("portRange", "22/22"), "admin-ports-not-public",
             _fixed(f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}")),
    Mutation("system disk unencrypted", "alibaba", "server-server-1", _set("systemDiskEncrypted", False),
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
    Mutation("metadata hop limit raised to 64", "alibaba", "server-server-1", _set("httpPutResponseHopLimit", 64.0),
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
    original = deployments.public_deployment(mutation.cloud, "gpu-llm")
    if mutation.change is None:
        return original, original.without(mutation.target)
    inputs = mutation.change(copy.deepcopy(original.named(mutation.target).inputs))
    return original, original.with_inputs(mutation.target, inputs, mutation.new_type)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: f"{m.cloud}: {m.label}")
def test_the_pack_reports_a_flipped_security_property(mutation: Mutation) -> None:
    original, mutated = _mutated(mutation)
    assert check_recording(original).violations == []
    report = check_recording(mutated)
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

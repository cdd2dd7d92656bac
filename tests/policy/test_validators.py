"""Each resource policy on hand-built resources: one that complies and one that violates, for every rule and cloud.

Inputs are written as the engine sends them (camelCase, numbers as floats); the compliant ones are what the
inferstack backends register. Every expected message is spelled out in full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from guardrails import cache
from guardrails.cache import ALI_KVSTORE, AWS_REPLICATION_GROUP, HW_DCS
from guardrails.log_retention import HW_LTS_GROUP
from guardrails.resource_types import (
    ALI_BUCKET_ACL,
    ALI_BUCKET_ENCRYPTION,
    ALI_BUCKET_POLICY,
    ALI_CDN_CONFIG,
    ALI_CDN_DOMAIN,
    ALI_GROUP_ATTACHMENT,
    ALI_INSTANCE,
    ALI_LAUNCH_TEMPLATES,
    ALI_LISTENER,
    ALI_LOG_PROJECT,
    ALI_LOG_STORE,
    ALI_POLICY,
    ALI_PUBLIC_ACCESS_BLOCK,
    ALI_ROLE_POLICY_ATTACHMENT,
    ALI_SCALING_CONFIGURATION,
    ALI_SCALING_GROUP,
    ALI_SECURITY_GROUP_RULE,
    ALI_SERVER_GROUP,
    ALI_TLS_POLICY,
    AWS_BUCKET,
    AWS_BUCKET_ACL,
    AWS_BUCKET_ENCRYPTION,
    AWS_BUCKET_POLICY,
    AWS_CLASSIC_LOAD_BALANCER,
    AWS_DISTRIBUTION,
    AWS_INGRESS_RULE,
    AWS_INSTANCE,
    AWS_LAUNCH_CONFIGURATION,
    AWS_LAUNCH_TEMPLATE,
    AWS_LISTENERS,
    AWS_LOG_GROUP,
    AWS_MANAGED_POLICY,
    AWS_PUBLIC_ACCESS_BLOCK,
    AWS_ROLE,
    AWS_ROLE_POLICY,
    AWS_ROLE_POLICY_ATTACHMENT,
    AWS_SECURITY_GROUP,
    AWS_SECURITY_GROUP_RULE,
    AWS_TARGET_GROUPS,
    AWS_VOLUME,
    GCP_ALWAYS_ENCRYPTED,
    GCP_BACKEND_SERVICES,
    GCP_BUCKET,
    GCP_BUCKET_IAM_MEMBER,
    GCP_DISK,
    GCP_FIREWALL,
    GCP_FORWARDING_RULES,
    GCP_HEALTH_CHECKS,
    GCP_INSTANCE,
    GCP_INSTANCE_TEMPLATE,
    GCP_LOG_BUCKET,
    GCP_NO_METADATA_TOKENS,
    GCP_PROJECT_IAM_MEMBER,
    GCP_REGION_GROUP_MANAGER,
    GCP_REGION_INSTANCE_TEMPLATE,
    GCP_SSL_POLICIES,
    HUAWEI_NO_METADATA_TOKENS,
    HW_AS_CONFIGURATION,
    HW_AS_GROUP,
    HW_BUCKET,
    HW_BUCKET_POLICY,
    HW_CDN_DOMAIN,
    HW_INSTANCE,
    HW_LISTENER,
    HW_MONITOR,
    HW_ROLE,
    HW_SECURITY_GROUP_RULE,
    HW_TLS_POLICY,
)
from guardrails.servers import ALI_SCALING_CONFIGURATION_TOKENS

from tests.policy import fleets
from tests.policy.harness import check_resource, pack

BUCKET = "inferstack-dev-models-1a2b3c4d"
SERVER = "serviceAccount:s@p.iam.gserviceaccount.com"
ADMIN_FIX = ("inferstack opens no admin port; reach servers through the cloud's managed shell, or admit a private "
             "network only")
WORLD_FIX = ("only a serving port (8000), or a load balancer's HTTPS or redirect port (443, 80), may be open beyond "
             "private networks; admit private networks only, or reach other ports through the cloud's managed shell")
NO_TOKEN = "the metadata service answers without a session token"
HOP_UNSET = ("the metadata hop limit is unset (metadataOptions.httpPutResponseHopLimit), so the image's default "
             "applies (2 on images that require tokens) and containers reach the server's credentials: set it to 1")


@dataclass(frozen=True)
class Case:
    label: str
    policy: Any
    resource_type: str
    props: dict[str, Any]
    messages: list[str]
    config: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _policy(statements: list[dict[str, Any]], version: str = "2012-10-17") -> str:
    return json.dumps({"Version": version, "Statement": statements})


def _aws_rule(port_from: float, port_to: float, cidr: str, protocol: str = "tcp") -> dict[str, Any]:
    return {"ipProtocol": protocol, "fromPort": port_from, "toPort": port_to, "cidrIpv4": cidr,
            "securityGroupId": "sg-0123456789abcdef0"}


def _gcp_firewall(ports: list[str], sources: list[str] | None, direction: str = "INGRESS") -> dict[str, Any]:
    props: dict[str, Any] = {"direction": direction, "allows": [{"protocol": "tcp", "ports": ports}],
                             "network": "projects/p/global/networks/n", "priority": 1000.0}
    if sources is not None:
        props["sourceRanges"] = sources
    return props


def _ali_rule(port_range: str, cidr: str, *, policy: str = "accept", protocol: str = "tcp") -> dict[str, Any]:
    return {"type": "ingress", "ipProtocol": protocol, "portRange": port_range, "cidrIp": cidr, "policy": policy,
            "nicType": "intranet", "priority": 1.0, "securityGroupId": "sg-1"}


def _hw_rule(**props: Any) -> dict[str, Any]:
    return {"direction": "ingress", "ethertype": "IPv4", "securityGroupId": "43b50667", **props}


NETWORK_CASES = [
    # admin-ports-not-public
    Case("aws api port to the world", pack.admin_ports_not_public, AWS_INGRESS_RULE,
         _aws_rule(8000.0, 8000.0, "0.0.0.0/0"), []),
    Case("aws ssh from a private network", pack.admin_ports_not_public, AWS_INGRESS_RULE,
         _aws_rule(22.0, 22.0, "10.0.0.0/8"), []),
    Case("aws ssh from the world", pack.admin_ports_not_public, AWS_INGRESS_RULE,
         _aws_rule(22.0, 22.0, "0.0.0.0/0"), [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]),
    Case("aws inline rule of every protocol", pack.admin_ports_not_public, AWS_SECURITY_GROUP,
         {"ingress": [{"protocol": "-1", "fromPort": 0.0, "toPort": 0.0, "cidrBlocks": ["203.0.113.0/24"]}]},
         [f"ports 0-65535 are open to 203.0.113.0/24, including admin port 22 (SSH): {ADMIN_FIX}",
          f"ports 0-65535 are open to 203.0.113.0/24, including admin port 3389 (RDP): {ADMIN_FIX}"]),
    Case("aws legacy rule, rdp from everywhere on IPv6", pack.admin_ports_not_public, AWS_SECURITY_GROUP_RULE,
         {"type": "ingress", "protocol": "tcp", "fromPort": 3389.0, "toPort": 3389.0, "ipv6CidrBlocks": ["::/0"]},
         [f"admin port 3389 (RDP) is open to ::/0: {ADMIN_FIX}"]),
    Case("gcp ssh through IAP", pack.admin_ports_not_public, GCP_FIREWALL,
         _gcp_firewall(["22"], ["35.235.240.0/20"]), []),
    Case("gcp egress on ssh", pack.admin_ports_not_public, GCP_FIREWALL,
         _gcp_firewall(["22"], None, direction="EGRESS"), []),
    Case("gcp ssh with no source (Google's default: everywhere)", pack.admin_ports_not_public, GCP_FIREWALL,
         _gcp_firewall(["22"], None), [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]),
    Case("alibaba ssh dropped", pack.admin_ports_not_public, ALI_SECURITY_GROUP_RULE,
         _ali_rule("22/22", "0.0.0.0/0", policy="drop"), []),
    Case("alibaba ssh from the world", pack.admin_ports_not_public, ALI_SECURITY_GROUP_RULE,
         _ali_rule("22/22", "0.0.0.0/0"), [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]),
    Case("huawei api port to the world", pack.admin_ports_not_public, HW_SECURITY_GROUP_RULE,
         _hw_rule(protocol="tcp", portRangeMin=8000.0, portRangeMax=8000.0, remoteIpPrefix="0.0.0.0/0"), []),
    Case("huawei rule without protocol or remote", pack.admin_ports_not_public, HW_SECURITY_GROUP_RULE,
         _hw_rule(), [f"ports 0-65535 are open to 0.0.0.0/0, including admin port 22 (SSH): {ADMIN_FIX}",
                      f"ports 0-65535 are open to 0.0.0.0/0, including admin port 3389 (RDP): {ADMIN_FIX}"]),
    # world-ingress-serving-port-only
    Case("aws serving port to the world", pack.world_ingress_serving_port_only, AWS_INGRESS_RULE,
         _aws_rule(8000.0, 8000.0, "0.0.0.0/0"), []),
    Case("aws a load balancer's HTTPS port to the world", pack.world_ingress_serving_port_only, AWS_INGRESS_RULE,
         _aws_rule(443.0, 443.0, "0.0.0.0/0"), []),
    Case("aws a load balancer's ports 80-443 to the world", pack.world_ingress_serving_port_only,
         AWS_INGRESS_RULE, _aws_rule(80.0, 443.0, "0.0.0.0/0"),
         [f"ports 80-443 are open to the whole internet (0.0.0.0/0): {WORLD_FIX}"]),
    Case("aws other port to the world", pack.world_ingress_serving_port_only, AWS_INGRESS_RULE,
         _aws_rule(8080.0, 8080.0, "0.0.0.0/0"),
         [f"port 8080 is open to the whole internet (0.0.0.0/0): {WORLD_FIX}"]),
    Case("aws configured serving port to the world", pack.world_ingress_serving_port_only, AWS_INGRESS_RULE,
         _aws_rule(8080.0, 8080.0, "0.0.0.0/0"), [], config={"servingPorts": [8080]}),
    Case("aws other port to a named public network", pack.world_ingress_serving_port_only, AWS_INGRESS_RULE,
         _aws_rule(8080.0, 8080.0, "203.0.113.0/24"),
         [f"port 8080 is open to public network 203.0.113.0/24: {WORLD_FIX}"]),
    Case("aws other port to a private network", pack.world_ingress_serving_port_only, AWS_INGRESS_RULE,
         _aws_rule(8080.0, 8080.0, "10.64.0.0/16"), []),
    Case("gcp port range to the world", pack.world_ingress_serving_port_only, GCP_FIREWALL,
         _gcp_firewall(["8000-8010"], ["0.0.0.0/0"]),
         [f"ports 8000-8010 are open to the whole internet (0.0.0.0/0): {WORLD_FIX}"]),
    Case("gcp serving port to the world", pack.world_ingress_serving_port_only, GCP_FIREWALL,
         _gcp_firewall(["8000"], ["0.0.0.0/0"]), []),
    Case("alibaba every port to the world", pack.world_ingress_serving_port_only, ALI_SECURITY_GROUP_RULE,
         _ali_rule("-1/-1", "0.0.0.0/0", protocol="all"),
         [f"ports 0-65535 are open to the whole internet (0.0.0.0/0): {WORLD_FIX}"]),
    Case("alibaba serving port to the world", pack.world_ingress_serving_port_only, ALI_SECURITY_GROUP_RULE,
         _ali_rule("8000/8000", "0.0.0.0/0"), []),
    Case("huawei ports list to the IPv6 world", pack.world_ingress_serving_port_only, HW_SECURITY_GROUP_RULE,
         _hw_rule(protocol="tcp", ports="8000,9090", remoteIpPrefix="::/0", ethertype="IPv6"),
         [f"port 9090 is open to the whole internet (::/0): {WORLD_FIX}"]),
    Case("huawei serving port to the world", pack.world_ingress_serving_port_only, HW_SECURITY_GROUP_RULE,
         _hw_rule(protocol="tcp", portRangeMin=8000.0, portRangeMax=8000.0, remoteIpPrefix="0.0.0.0/0"), []),
]

TLS_ONLY = {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
            "Resource": [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
CDN_READ = {"Sid": "CloudFrontReadsThisBucket", "Effect": "Allow", "Principal": {"Service": "cloudfront.amazonaws.com"},
            "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/*",
            "Condition": {"StringEquals": {"AWS:SourceArn": "arn:aws:cloudfront::123456789012:distribution/E1"}}}
PUBLIC_READ = {"Sid": "PublicRead", "Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "s3:GetObject",
               "Resource": f"arn:aws:s3:::{BUCKET}/*"}
ALL_BLOCKS = {"bucket": BUCKET, "blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True,
              "restrictPublicBuckets": True}
OSS_TLS_ONLY = {"Effect": "Deny", "Principal": ["*"], "Action": ["oss:*"],
                "Resource": [f"acs:oss:*:*:{BUCKET}", f"acs:oss:*:*:{BUCKET}/*"],
                "Condition": {"Bool": {"acs:SecureTransport": ["false"]}}}
OBS_TLS_ONLY = {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": {"ID": ["*"]}, "Action": ["*"],
                "Resource": [BUCKET, f"{BUCKET}/*"], "Condition": {"Bool": {"SecureTransport": ["false"]}}}
PUBLIC_BUCKET_FIX = "name the principals that may read instead"

BUCKET_CASES = [
    Case("aws bucket", pack.buckets_not_public, AWS_BUCKET, {"bucket": BUCKET, "forceDestroy": False}, []),
    Case("aws bucket with a public canned ACL", pack.buckets_not_public, AWS_BUCKET,
         {"bucket": BUCKET, "acl": "public-read"},
         ["bucket ACL is public-read, which lets anyone read it: use private"]),
    Case("aws ACL granting AllUsers", pack.buckets_not_public, AWS_BUCKET_ACL,
         {"bucket": BUCKET, "accessControlPolicy": {"owner": {"id": "o"}, "grants": [
             {"grantee": {"type": "Group", "uri": "http://acs.amazonaws.com/groups/global/AllUsers"},
              "permission": "READ"}]}},
         ["an ACL grant admits AllUsers (READ): remove it"]),
    Case("aws private ACL", pack.buckets_not_public, AWS_BUCKET_ACL, {"bucket": BUCKET, "acl": "private"}, []),
    Case("aws policy: TLS only, CloudFront by distribution", pack.buckets_not_public, AWS_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": _policy([TLS_ONLY, CDN_READ])}, []),
    Case("aws policy allowing everyone", pack.buckets_not_public, AWS_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": _policy([TLS_ONLY, PUBLIC_READ])},
         [f"bucket policy statement PublicRead allows everyone (Principal \"*\"): {PUBLIC_BUCKET_FIX}"]),
    Case("aws policy that is not JSON", pack.buckets_not_public, AWS_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": "{not json"},
         ["the bucket policy is not a JSON policy document, so it cannot be checked"]),
    Case("aws public access block, all on", pack.buckets_not_public, AWS_PUBLIC_ACCESS_BLOCK, ALL_BLOCKS, []),
    Case("aws public access block, two off", pack.buckets_not_public, AWS_PUBLIC_ACCESS_BLOCK,
         {**ALL_BLOCKS, "ignorePublicAcls": False, "restrictPublicBuckets": False},
         ["the public access block leaves ignorePublicAcls, restrictPublicBuckets off: turn all four on"]),
    Case("gcp bucket", pack.buckets_not_public, GCP_BUCKET,
         {"name": BUCKET, "uniformBucketLevelAccess": True, "publicAccessPrevention": "enforced"}, []),
    Case("gcp bucket with ACLs and inherited prevention", pack.buckets_not_public, GCP_BUCKET,
         {"name": BUCKET, "uniformBucketLevelAccess": False, "publicAccessPrevention": "inherited"},
         ["uniform bucket-level access is off, so object ACLs could make objects public: set "
          "uniformBucketLevelAccess to true",
          "public access prevention is inherited: set publicAccessPrevention to enforced"]),
    Case("gcp member allUsers", pack.buckets_not_public, GCP_BUCKET_IAM_MEMBER,
         {"bucket": BUCKET, "role": "roles/storage.objectViewer", "member": "allUsers"},
         ["grants roles/storage.objectViewer to allUsers, which is everyone: grant to named members only"]),
    Case("gcp member log writer group", pack.buckets_not_public, GCP_BUCKET_IAM_MEMBER,
         {"bucket": BUCKET, "role": "roles/storage.objectCreator",
          "member": "group:cloud-storage-analytics@google.com"},
         []),
    Case("alibaba private ACL", pack.buckets_not_public, ALI_BUCKET_ACL, {"bucket": BUCKET, "acl": "private"},
         []),
    Case("alibaba public-read-write ACL", pack.buckets_not_public, ALI_BUCKET_ACL,
         {"bucket": BUCKET, "acl": "public-read-write"},
         ["bucket ACL is public-read-write, which lets anyone read it: use private"]),
    Case("alibaba public access block on", pack.buckets_not_public, ALI_PUBLIC_ACCESS_BLOCK,
         {"bucket": BUCKET, "blockPublicAccess": True}, []),
    Case("alibaba public access block off", pack.buckets_not_public, ALI_PUBLIC_ACCESS_BLOCK,
         {"bucket": BUCKET, "blockPublicAccess": False},
         ["the public access block is off (blockPublicAccess is not true): turn it on"]),
    Case("alibaba TLS-only policy", pack.buckets_not_public, ALI_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": _policy([OSS_TLS_ONLY], "1")}, []),
    Case("alibaba policy allowing everyone", pack.buckets_not_public, ALI_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": _policy([OSS_TLS_ONLY, {"Effect": "Allow", "Principal": ["*"],
                                                              "Action": ["oss:GetObject"],
                                                              "Resource": [f"acs:oss:*:*:{BUCKET}/*"]}], "1")},
         [f"bucket policy statement #1 allows everyone (Principal \"*\"): {PUBLIC_BUCKET_FIX}"]),
    Case("huawei private bucket with its TLS-only policy", pack.buckets_not_public, HW_BUCKET,
         {"bucket": BUCKET, "acl": "private", "policyFormat": "obs",
          "policy": json.dumps({"Statement": [OBS_TLS_ONLY]})},
         []),
    Case("huawei public-read-write bucket", pack.buckets_not_public, HW_BUCKET,
         {"bucket": BUCKET, "acl": "public-read-write"},
         ["bucket ACL is public-read-write, which lets anyone read it: use private"]),
    Case("huawei bucket policy allowing every ID", pack.buckets_not_public, HW_BUCKET_POLICY,
         {"bucket": BUCKET, "policyFormat": "obs", "policy": json.dumps({"Statement": [
             {"Sid": "Open", "Effect": "Allow", "Principal": {"ID": ["*"]}, "Action": ["GetObject"],
              "Resource": [f"{BUCKET}/*"]}]})},
         [f"bucket policy statement Open allows everyone (Principal \"*\"): {PUBLIC_BUCKET_FIX}"]),
    # The SLS project of a load balancer's access logs: private without a project policy.
    Case("alibaba log project without a policy", pack.buckets_not_public, ALI_LOG_PROJECT,
         {"projectName": "lb-logs"}, []),
    Case("alibaba log project policy allowing everyone", pack.buckets_not_public, ALI_LOG_PROJECT,
         {"projectName": "lb-logs", "policy": _policy([{"Effect": "Allow", "Principal": "*",
                                                        "Action": ["log:GetLogStoreLogs"],
                                                        "Resource": ["acs:log:*:*:project/lb-logs/*"]}], "1")},
         [f"bucket policy statement #0 allows everyone (Principal \"*\"): {PUBLIC_BUCKET_FIX}"]),
]

ENCRYPTION_CASES = [
    Case("alibaba encrypted logstore", pack.encryption_at_rest, ALI_LOG_STORE,
         {"logstoreName": "alb-access-log", "encryptConf": {"enable": True, "encryptType": "default"}}, []),
    Case("alibaba logstore without encryption", pack.encryption_at_rest, ALI_LOG_STORE,
         {"logstoreName": "alb-access-log"},
         ["the logstore is not encrypted: set encryptConf.enable to true (encryptType default or m4)"]),
    Case("aws default encryption AES256", pack.encryption_at_rest, AWS_BUCKET_ENCRYPTION,
         {"bucket": BUCKET, "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}, []),
    Case("aws default encryption without an algorithm", pack.encryption_at_rest, AWS_BUCKET_ENCRYPTION,
         {"bucket": BUCKET, "rules": [{"bucketKeyEnabled": True}]},
         ["a default encryption rule names no algorithm: set applyServerSideEncryptionByDefault.sseAlgorithm to "
          "AES256 or aws:kms"]),
    Case("aws instance with encrypted volumes", pack.encryption_at_rest, AWS_INSTANCE,
         {"rootBlockDevice": {"encrypted": True, "volumeType": "gp3"},
          "ebsBlockDevices": [{"deviceName": "/dev/sdf", "encrypted": True}]}, []),
    Case("aws instance with plain volumes", pack.encryption_at_rest, AWS_INSTANCE,
         {"rootBlockDevice": {"volumeType": "gp3"}, "ebsBlockDevices": [{"deviceName": "/dev/sdf"}]},
         ["the root volume is not encrypted: set rootBlockDevice.encrypted to true",
          "EBS volume /dev/sdf is not encrypted: set encrypted to true"]),
    Case("aws plain EBS volume", pack.encryption_at_rest, AWS_VOLUME, {"size": 100.0},
         ["the volume is not encrypted: set encrypted to true"]),
    Case("alibaba bucket encryption AES256", pack.encryption_at_rest, ALI_BUCKET_ENCRYPTION,
         {"bucket": BUCKET, "sseAlgorithm": "AES256"}, []),
    Case("alibaba bucket encryption unset", pack.encryption_at_rest, ALI_BUCKET_ENCRYPTION,
         {"bucket": BUCKET, "sseAlgorithm": ""},
         ["the server-side encryption algorithm is unset: use AES256, KMS or SM4"]),
    Case("alibaba instance with encrypted disks", pack.encryption_at_rest, ALI_INSTANCE,
         {"systemDiskEncrypted": True, "dataDisks": [{"size": 100.0, "encrypted": True}]}, []),
    Case("alibaba instance with plain disks", pack.encryption_at_rest, ALI_INSTANCE,
         {"systemDiskEncrypted": False, "dataDisks": [{"size": 100.0}]},
         ["the system disk is not encrypted: set systemDiskEncrypted to true",
          "data disk 0 is not encrypted: set encrypted to true"]),
    Case("huawei encrypted bucket", pack.encryption_at_rest, HW_BUCKET,
         {"bucket": BUCKET, "encryption": True, "sseAlgorithm": "AES256"}, []),
    Case("huawei plain bucket", pack.encryption_at_rest, HW_BUCKET, {"bucket": BUCKET, "encryption": False},
         ["the bucket is not encrypted: set encryption to true (sseAlgorithm AES256 or kms)"]),
    Case("huawei instance on the evs/default key", pack.encryption_at_rest, HW_INSTANCE,
         {"systemDiskKmsKeyId": "cbc7f3ab-fab2-8964-3b29-643cfeb93998", "systemDiskType": "GPSSD"}, []),
    Case("huawei instance with a plain system disk", pack.encryption_at_rest, HW_INSTANCE,
         {"systemDiskType": "GPSSD", "dataDisks": [{"size": 100.0, "type": "GPSSD"}]},
         ["the system disk is not encrypted: set systemDiskKmsKeyId (inferstack uses the region's evs/default key)",
          "data disk 0 is not encrypted: set kmsKeyId"]),
]

METADATA_CASES = [
    Case("aws tokens required", pack.metadata_tokens_required, AWS_INSTANCE,
         {"metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1.0}},
         []),
    Case("aws tokens optional", pack.metadata_tokens_required, AWS_INSTANCE,
         {"metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "optional", "httpPutResponseHopLimit": 1.0}},
         [f"{NO_TOKEN} (metadataOptions.httpTokens is optional): set it to required"]),
    Case("aws no metadata options", pack.metadata_tokens_required, AWS_INSTANCE, {"instanceType": "g6.xlarge"},
         [f"{NO_TOKEN} (metadataOptions.httpTokens is unset): set it to required", HOP_UNSET]),
    Case("aws metadata service off", pack.metadata_tokens_required, AWS_INSTANCE,
         {"metadataOptions": {"httpEndpoint": "disabled"}}, []),
    Case("aws launch template with optional tokens", pack.metadata_tokens_required, AWS_LAUNCH_TEMPLATE,
         {"metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 1.0}},
         [f"{NO_TOKEN} (metadataOptions.httpTokens is optional): set it to required"]),
    Case("alibaba tokens required", pack.metadata_tokens_required, ALI_INSTANCE,
         {"httpEndpoint": "enabled", "httpTokens": "required"}, []),
    Case("alibaba tokens optional", pack.metadata_tokens_required, ALI_INSTANCE,
         {"httpEndpoint": "enabled", "httpTokens": "optional"},
         [f"{NO_TOKEN} (httpTokens is optional): set it to required"]),
]

MODEL_READ = [
    {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}",
     "Condition": {"StringLike": {"s3:prefix": ["models/llama/*"]}}},
    {"Sid": "ReadModelFiles", "Effect": "Allow", "Action": "s3:GetObject",
     "Resource": f"arn:aws:s3:::{BUCKET}/models/llama/*"}]
SESSION_MANAGER = [{"Effect": "Allow", "Action": ["ssm:UpdateInstanceInformation", "ssmmessages:OpenDataChannel"],
                    "Resource": "*"}]
OSS_MODEL_READ = [
    {"Effect": "Allow", "Action": "oss:ListObjects", "Resource": f"acs:oss:*:*:{BUCKET}",
     "Condition": {"StringLike": {"oss:Prefix": ["models/llama/*"]}}},
    {"Effect": "Allow", "Action": "oss:GetObject", "Resource": f"acs:oss:*:*:{BUCKET}/models/llama/*"}]
EVERY_BUCKET = "which is every bucket: name one bucket and prefix"

IDENTITY_CASES = [
    Case("aws model read and session manager", pack.storage_grants_no_wildcards, AWS_ROLE_POLICY,
         {"role": "r", "policy": _policy(MODEL_READ + SESSION_MANAGER)}, []),
    Case("aws every storage action", pack.storage_grants_no_wildcards, AWS_ROLE_POLICY,
         {"role": "r", "policy": _policy([{"Effect": "Allow", "Action": "s3:*",
                                           "Resource": f"arn:aws:s3:::{BUCKET}/models/*"}])},
         ["statement #0 allows s3:*, which covers every storage action: name the read actions the server needs"]),
    Case("aws storage on every bucket", pack.storage_grants_no_wildcards, AWS_MANAGED_POLICY,
         {"policy": _policy([{"Sid": "Read", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"}])},
         [f"statement Read grants storage on *, {EVERY_BUCKET}"]),
    Case("aws inline policy with every action", pack.storage_grants_no_wildcards, AWS_ROLE,
         {"inlinePolicies": [{"name": "admin", "policy": _policy([{"Effect": "Allow", "Action": "*",
                                                                  "Resource": "*"}])}]},
         ["statement #0 allows *, which covers every storage action: name the read actions the server needs",
          f"statement #0 grants storage on *, {EVERY_BUCKET}"]),
    Case("aws S3 full access attached", pack.storage_grants_no_wildcards, AWS_ROLE_POLICY_ATTACHMENT,
         {"role": "r", "policyArn": "arn:aws:iam::aws:policy/AmazonS3FullAccess"},
         ["attaches AmazonS3FullAccess, which grants storage on every bucket: grant one bucket and prefix in a "
          "policy of your own"]),
    Case("aws own policy attached", pack.storage_grants_no_wildcards, AWS_ROLE_POLICY_ATTACHMENT,
         {"role": "r", "policyArn": "arn:aws:iam::123456789012:policy/model-read"}, []),
    Case("gcp storage role on the project", pack.storage_grants_no_wildcards, GCP_PROJECT_IAM_MEMBER,
         {"project": "p", "role": "roles/storage.objectViewer", "member": "serviceAccount:s@p.iam.gserviceaccount.com"},
         ["grants roles/storage.objectViewer on the whole project, which covers every bucket: grant a storage role on "
          "one bucket (BucketIAMMember) instead"]),
    Case("gcp other role on the project", pack.storage_grants_no_wildcards, GCP_PROJECT_IAM_MEMBER,
         {"project": "p", "role": "roles/logging.logWriter", "member": "serviceAccount:s@p.iam.gserviceaccount.com"},
         []),
    Case("gcp bucket admin", pack.storage_grants_no_wildcards, GCP_BUCKET_IAM_MEMBER,
         {"bucket": BUCKET, "role": "roles/storage.objectAdmin", "member": SERVER},
         ["grants roles/storage.objectAdmin to serviceAccount:s@p.iam.gserviceaccount.com, which administers the "
          "bucket: grant objectViewer (read) or objectCreator (write) instead"]),
    Case("gcp bucket reader", pack.storage_grants_no_wildcards, GCP_BUCKET_IAM_MEMBER,
         {"bucket": BUCKET, "role": "roles/storage.objectViewer", "member": SERVER},
         []),
    Case("alibaba model read", pack.storage_grants_no_wildcards, ALI_POLICY,
         {"policyName": "p", "policyDocument": _policy(OSS_MODEL_READ, "1")}, []),
    Case("alibaba every storage action on every bucket", pack.storage_grants_no_wildcards, ALI_POLICY,
         {"policyName": "p", "policyDocument": _policy([{"Effect": "Allow", "Action": ["oss:*"],
                                                         "Resource": ["acs:oss:*:*:*"]}], "1")},
         ["statement #0 allows oss:*, which covers every storage action: name the read actions the server needs",
          f"statement #0 grants storage on acs:oss:*:*:*, {EVERY_BUCKET}"]),
    Case("alibaba OSS full access attached", pack.storage_grants_no_wildcards, ALI_ROLE_POLICY_ATTACHMENT,
         {"roleName": "r", "policyName": "AliyunOSSFullAccess", "policyType": "System"},
         ["attaches AliyunOSSFullAccess, which grants storage on every bucket: grant one bucket and prefix in a "
          "policy of your own"]),
    Case("huawei model read", pack.storage_grants_no_wildcards, HW_ROLE,
         {"name": "r", "type": "AX", "policy": json.dumps({"Version": "1.1", "Statement": [
             {"Effect": "Allow", "Action": ["obs:object:GetObject"],
              "Resource": [f"obs:*:*:object:{BUCKET}/models/llama/*"]}]})}, []),
    Case("huawei storage without a resource", pack.storage_grants_no_wildcards, HW_ROLE,
         {"name": "r", "type": "AX", "policy": json.dumps({"Version": "1.1", "Statement": [
             {"Effect": "Allow", "Action": ["obs:object:GetObject"]}]})},
         ["statement #0 grants storage with no Resource, which is every bucket: name one bucket and prefix"]),
    Case("huawei secrets read without a resource", pack.storage_grants_no_wildcards, HW_ROLE,
         {"name": "r", "type": "XA", "policy": json.dumps({"Version": "1.1", "Statement": [
             {"Effect": "Allow", "Action": ["csms:secretVersion:get", "kms:dek:decrypt"]}]})}, []),
]

CLOUDFRONT = {
    "enabled": True,
    "origins": [{"originId": "assets", "domainName": f"{BUCKET}.s3.us-east-1.amazonaws.com",
                 "originAccessControlId": "E95645055CF196"}],
    "defaultCacheBehavior": {"targetOriginId": "assets", "viewerProtocolPolicy": "https-only"},
    "viewerCertificate": {"cloudfrontDefaultCertificate": True}}
ALI_CDN = {"domainName": "static.example.com", "cdnType": "web", "scope": "overseas",
           "sources": [{"type": "oss", "content": f"{BUCKET}.oss-ap-southeast-1.aliyuncs.com", "port": 443.0,
                        "priority": 20.0, "weight": 10.0}],
           "certificateConfig": {"certType": "free", "serverCertificateStatus": "on"}}
HW_CDN = {"name": "assets.example.com", "type": "web", "sources": [
    {"origin": f"{BUCKET}.obs.ap-southeast-3.myhuaweicloud.com", "originType": "obs_bucket",
     "obsBucketType": "private", "active": 1.0}],
          "configs": {"originProtocol": "https", "httpsSettings": {"httpsEnabled": True, "scmCertificateId": "scs1"},
                      "forceRedirect": {"enabled": True, "type": "https", "redirectCode": 301.0}}}

CDN_CASES = [
    Case("aws CloudFront https-only with OAC", pack.cdn_https_only, AWS_DISTRIBUTION, CLOUDFRONT, []),
    Case("aws CloudFront allowing HTTP, origin unsigned", pack.cdn_https_only, AWS_DISTRIBUTION,
         {**CLOUDFRONT, "origins": [{"originId": "assets", "domainName": f"{BUCKET}.s3.us-east-1.amazonaws.com"}],
          "defaultCacheBehavior": {"targetOriginId": "assets", "viewerProtocolPolicy": "allow-all"}},
         ["cache behavior default serves plain HTTP (viewerProtocolPolicy is allow-all): use https-only",
          "origin assets reads its S3 bucket without Origin Access Control: give it an originAccessControlId, so "
          "that the bucket stays private"]),
    Case("alibaba CDN domain with a certificate", pack.cdn_https_only, ALI_CDN_DOMAIN, ALI_CDN, []),
    Case("alibaba CDN domain without certificate, origin on port 80", pack.cdn_https_only, ALI_CDN_DOMAIN,
         {**ALI_CDN, "certificateConfig": {"serverCertificateStatus": "off"},
          "sources": [{**ALI_CDN["sources"][0], "port": 80.0}]},
         ["the CDN domain serves without an HTTPS certificate: set certificateConfig.serverCertificateStatus to on, "
          "or keep the domain offline until it has one",
          f"origin {BUCKET}.oss-ap-southeast-1.aliyuncs.com is fetched over plain HTTP: use port 443"]),
    Case("alibaba CDN domain offline without certificate (inferstack's first phase)", pack.cdn_https_only,
         ALI_CDN_DOMAIN, {key: value for key, value in ALI_CDN.items() if key != "certificateConfig"}
         | {"status": "offline"}, []),
    Case("alibaba CDN domain online without certificate", pack.cdn_https_only, ALI_CDN_DOMAIN,
         {key: value for key, value in ALI_CDN.items() if key != "certificateConfig"} | {"status": "online"},
         ["the CDN domain serves without an HTTPS certificate: set certificateConfig.serverCertificateStatus to on, "
          "or keep the domain offline until it has one"]),
    Case("alibaba https_force on", pack.cdn_https_only, ALI_CDN_CONFIG,
         {"domainName": "static.example.com", "functionName": "https_force",
          "functionArgs": [{"argName": "enable", "argValue": "on"}, {"argName": "https_rewrite", "argValue": "301"}]},
         []),
    Case("alibaba https_force off", pack.cdn_https_only, ALI_CDN_CONFIG,
         {"domainName": "static.example.com", "functionName": "https_force",
          "functionArgs": [{"argName": "enable", "argValue": "off"}]},
         ["https_force is not enabled: set its enable argument to on"]),
    Case("huawei CDN https with redirect, private origin", pack.cdn_https_only, HW_CDN_DOMAIN, HW_CDN, []),
    Case("huawei CDN without redirect, public origin over http", pack.cdn_https_only, HW_CDN_DOMAIN,
         {**HW_CDN, "sources": [{**HW_CDN["sources"][0], "obsBucketType": "public"}],
          "configs": {**HW_CDN["configs"], "originProtocol": "http", "forceRedirect": {"enabled": False}}},
         ["plain HTTP is not redirected: set configs.forceRedirect to enabled, type https",
          "the origin is fetched over http: set configs.originProtocol to https",
          f"origin {BUCKET}.obs.ap-southeast-3.myhuaweicloud.com is read as a public bucket: set obsBucketType to "
          "private (the CDN reads it with the account's agency)"]),
]

NO_PUBLIC = "a fleet's servers have no public address: the load balancer is their only public endpoint"
LISTENER_FIX = ("a load balancer listens with HTTPS on 443 (TLS 1.2 or newer) and with HTTP on 80 only to redirect to "
                "HTTPS")
HEALTH_FIX = "check the serving health path (the plan's serving.health_path) over HTTP on the serving port"


def _with(props: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**props, **changes}


FLEET_TEMPLATE_CASES = [
    # servers-no-public-address
    Case("aws launch template without a public address", pack.servers_no_public_address, AWS_LAUNCH_TEMPLATE,
         fleets.AWS_TEMPLATE, []),
    Case("aws launch template with a public address and IPv6", pack.servers_no_public_address,
         AWS_LAUNCH_TEMPLATE, _with(fleets.AWS_TEMPLATE, networkInterfaces=[
             {"associatePublicIpAddress": "true", "ipv6AddressCount": 1.0, "securityGroups": ["sg-srv"]}]),
         [f"network interface 0 of the launch template gets a public address (associatePublicIpAddress is true): "
          f"set it to false; {NO_PUBLIC}",
          "network interface 0 of the launch template gets IPv6 addresses, which are public: remove them; "
          f"{NO_PUBLIC}"]),
    Case("aws launch template that leaves the address to the subnet", pack.servers_no_public_address,
         AWS_LAUNCH_TEMPLATE, {k: v for k, v in fleets.AWS_TEMPLATE.items() if k != "networkInterfaces"},
         ["the launch template does not say whether its servers get a public address (no networkInterfaces), so the "
          "subnet's default decides: add a network interface with associatePublicIpAddress false (and the security "
          f"groups there); {NO_PUBLIC}"]),
    Case("aws launch configuration without a say", pack.servers_no_public_address, AWS_LAUNCH_CONFIGURATION,
         {"imageId": "ami-1"},
         ["the launch configuration does not refuse a public address (associatePublicIpAddress is unset, so the "
          f"subnet's default decides): set it to false; {NO_PUBLIC}"]),
    Case("gcp template without an access config", pack.servers_no_public_address, GCP_REGION_INSTANCE_TEMPLATE,
         fleets.GCP_TEMPLATE, []),
    Case("gcp template with external IPv4 and IPv6", pack.servers_no_public_address, GCP_INSTANCE_TEMPLATE,
         _with(fleets.GCP_TEMPLATE, networkInterfaces=[{"subnetwork": "s", "accessConfigs": [{}],
                                                        "ipv6AccessConfigs": [{"networkTier": "PREMIUM"}]}]),
         ["network interface 0 of the template has an access config, which gives each server an external IPv4 "
          f"address: remove accessConfigs; {NO_PUBLIC}",
          "network interface 0 of the template has an IPv6 access config, which gives each server an external IPv6 "
          f"address: remove ipv6AccessConfigs; {NO_PUBLIC}"]),
    Case("alibaba launch template without bandwidth out", pack.servers_no_public_address,
         ALI_LAUNCH_TEMPLATES[0], fleets.ALI_TEMPLATE, []),
    Case("alibaba scaling configuration with bandwidth out", pack.servers_no_public_address,
         ALI_SCALING_CONFIGURATION, {"scalingGroupId": "asg-1", "internetMaxBandwidthOut": 10.0},
         ["internetMaxBandwidthOut is 10, which gives each server a public address: set it to 0 (servers reach the "
          f"internet through the NAT gateway); {NO_PUBLIC}"]),
    Case("huawei AS configuration without an EIP", pack.servers_no_public_address, HW_AS_CONFIGURATION,
         fleets.HW_CONFIGURATION, []),
    Case("huawei AS configuration with an EIP", pack.servers_no_public_address, HW_AS_CONFIGURATION,
         {"instanceConfig": {**fleets.HW_CONFIGURATION["instanceConfig"], "publicIp": {"eip": {
             "ipType": "5_bgp", "bandwidth": {"size": 10.0, "shareType": "PER", "chargingMode": "traffic"}}}}},
         ["instanceConfig.publicIp gives each server an elastic IP: remove it (servers reach the internet through the "
          f"NAT gateway); {NO_PUBLIC}"]),
    Case("huawei AS group with IPv6 bandwidth", pack.servers_no_public_address, HW_AS_GROUP,
         {"networks": [{"id": "subnet-1", "ipv6Enable": True, "ipv6BandwidthId": "bw-1"}]},
         [f"network 0 of the AS group gives each server IPv6 bandwidth, a public IPv6 address: remove ipv6BandwidthId; "
          f"{NO_PUBLIC}"]),
    # encryption-at-rest and metadata-tokens-required on templates
    Case("aws launch template with an encrypted root volume", pack.encryption_at_rest, AWS_LAUNCH_TEMPLATE,
         fleets.AWS_TEMPLATE, []),
    Case("aws launch template with a plain volume", pack.encryption_at_rest, AWS_LAUNCH_TEMPLATE,
         _with(fleets.AWS_TEMPLATE, blockDeviceMappings=[{"deviceName": "/dev/sda1", "ebs": {"volumeSize": 200.0}}]),
         ["EBS volume /dev/sda1 of the launch template is not encrypted: set ebs.encrypted to true"]),
    Case("aws launch template that maps no volume", pack.encryption_at_rest, AWS_LAUNCH_TEMPLATE,
         {"imageId": "ami-1"},
         ["the launch template maps no EBS volume, so its servers' root volume is the image's, encrypted only if the "
          "account encrypts EBS by default: map the root device with ebs.encrypted true"]),
    Case("aws launch configuration with a plain root volume", pack.encryption_at_rest, AWS_LAUNCH_CONFIGURATION,
         {"rootBlockDevice": {"volumeSize": 200.0}},
         ["the root volume is not encrypted: set rootBlockDevice.encrypted to true"]),
    Case("alibaba launch template with encrypted disks", pack.encryption_at_rest, ALI_LAUNCH_TEMPLATES[0],
         fleets.ALI_TEMPLATE, []),
    Case("alibaba launch template with plain disks", pack.encryption_at_rest, ALI_LAUNCH_TEMPLATES[1],
         _with(fleets.ALI_TEMPLATE, systemDisk={"size": 200.0}, dataDisks=[{"size": 100.0, "encrypted": False}]),
         ["the system disk is not encrypted: set systemDisk.encrypted to true",
          "data disk 0 is not encrypted: set encrypted to true"]),
    Case("alibaba scaling configuration with a plain system disk", pack.encryption_at_rest,
         ALI_SCALING_CONFIGURATION, {"systemDiskEncrypted": False},
         ["the system disk is not encrypted: set systemDiskEncrypted to true"]),
    Case("huawei AS configuration on the evs/default key", pack.encryption_at_rest, HW_AS_CONFIGURATION,
         fleets.HW_CONFIGURATION, []),
    Case("huawei AS configuration with plain disks", pack.encryption_at_rest, HW_AS_CONFIGURATION,
         {"instanceConfig": {"disks": [{"diskType": "SYS", "size": 200.0, "volumeType": "GPSSD"},
                                       {"diskType": "DATA", "size": 100.0, "volumeType": "GPSSD"}]}},
         ["disk 0 (SYS) of the AS configuration is not encrypted: set kmsId (inferstack uses the region's evs/default "
          "key)", "disk 1 (DATA) of the AS configuration is not encrypted: set kmsId (inferstack uses the region's "
          "evs/default key)"]),
    Case("huawei AS configuration without a system disk", pack.encryption_at_rest, HW_AS_CONFIGURATION,
         {"instanceConfig": {"flavor": "s7.2xlarge.4"}},
         ["the AS configuration lists no system disk (diskType SYS), so the pack cannot tell whether it is "
          "encrypted: list it with kmsId"]),
    Case("aws launch template with tokens required", pack.metadata_tokens_required, AWS_LAUNCH_TEMPLATE,
         fleets.AWS_TEMPLATE, []),
    Case("alibaba launch template with tokens required", pack.metadata_tokens_required,
         ALI_LAUNCH_TEMPLATES[0], fleets.ALI_TEMPLATE, []),
    Case("alibaba launch template with optional tokens and 2 hops", pack.metadata_tokens_required,
         ALI_LAUNCH_TEMPLATES[0], _with(fleets.ALI_TEMPLATE, httpTokens="optional", httpPutResponseHopLimit=2.0),
         [f"{NO_TOKEN} (httpTokens is optional): set it to required",
          "the metadata hop limit is 2 (httpPutResponseHopLimit), so containers on the server reach its credentials: "
          "set it to 1"]),
    Case("alibaba scaling configuration, which cannot require tokens", pack.metadata_tokens_required,
         ALI_SCALING_CONFIGURATION, {"scalingGroupId": "asg-1", "httpEndpoint": "enabled"},
         [ALI_SCALING_CONFIGURATION_TOKENS]),
]

LISTENER_CASES = [
    Case("aws HTTPS listener, TLS 1.2 policy", pack.load_balancer_https_only, AWS_LISTENERS[0],
         fleets.AWS_HTTPS_LISTENER, []),
    Case("aws HTTP listener that redirects", pack.load_balancer_https_only, AWS_LISTENERS[1],
         fleets.AWS_HTTP_LISTENER, []),
    Case("aws HTTPS listener on the API's default TLS policy", pack.load_balancer_https_only, AWS_LISTENERS[0],
         {k: v for k, v in fleets.AWS_HTTPS_LISTENER.items() if k != "sslPolicy"},
         ["the HTTPS listener's TLS policy is unset (the API's default, ELBSecurityPolicy-2016-08), which the pack "
          "does not know to refuse TLS before 1.2: set sslPolicy to ELBSecurityPolicy-TLS13-1-2-2021-06 (or another "
          "ELBSecurityPolicy-TLS13-1-2-*, -TLS13-1-3-*, -TLS-1-2-* or -FS-1-2-* policy)"]),
    Case("aws HTTPS listener on 8443 admitting TLS 1.0", pack.load_balancer_https_only, AWS_LISTENERS[0],
         _with(fleets.AWS_HTTPS_LISTENER, port=8443.0, sslPolicy="ELBSecurityPolicy-TLS13-1-0-2021-06"),
         [f"the HTTPS listener is on port 8443: {LISTENER_FIX}",
          "the HTTPS listener's TLS policy is ELBSecurityPolicy-TLS13-1-0-2021-06, which the pack does not know to "
          "refuse TLS before 1.2: set sslPolicy to ELBSecurityPolicy-TLS13-1-2-2021-06 (or another "
          "ELBSecurityPolicy-TLS13-1-2-*, -TLS13-1-3-*, -TLS-1-2-* or -FS-1-2-* policy)"]),
    Case("aws HTTPS listener naming the API's default policy", pack.load_balancer_https_only, AWS_LISTENERS[0],
         _with(fleets.AWS_HTTPS_LISTENER, sslPolicy="ELBSecurityPolicy-2016-08"),
         ["the HTTPS listener's TLS policy is ELBSecurityPolicy-2016-08, which the pack does not know to refuse TLS "
          "before 1.2: set sslPolicy to ELBSecurityPolicy-TLS13-1-2-2021-06 (or another ELBSecurityPolicy-TLS13-1-2-*, "
          "-TLS13-1-3-*, -TLS-1-2-* or -FS-1-2-* policy)"]),
    Case("aws HTTPS listener on a FIPS TLS 1.2 policy", pack.load_balancer_https_only, AWS_LISTENERS[0],
         _with(fleets.AWS_HTTPS_LISTENER, sslPolicy="ELBSecurityPolicy-TLS13-1-2-FIPS-2023-04"), []),
    Case("aws HTTP listener that forwards", pack.load_balancer_https_only, AWS_LISTENERS[0],
         _with(fleets.AWS_HTTP_LISTENER, defaultActions=fleets.AWS_HTTPS_LISTENER["defaultActions"]),
         ["the HTTP listener's default actions (forward) do not only redirect to HTTPS, so plain HTTP reaches the "
          "servers: give it one redirect action with protocol HTTPS"]),
    Case("aws TCP listener", pack.load_balancer_https_only, AWS_LISTENERS[0],
         {"loadBalancerArn": fleets.AWS_LB_ARN, "port": 8000.0, "protocol": "TCP"},
         [f"the listener's protocol is TCP: {LISTENER_FIX}"]),
    Case("aws classic load balancer", pack.load_balancer_https_only, AWS_CLASSIC_LOAD_BALANCER,
         {"listeners": [{"lbPort": 443.0, "lbProtocol": "https", "instancePort": 8000.0, "instanceProtocol": "http"}]},
         ["this load balancer's listeners are not read by the pack (it reads AWS ALB listeners, Google Cloud "
          "forwarding rules and target proxies, Alibaba ALB listeners and Huawei dedicated ELB listeners), so they "
          f"count as public listeners it cannot check: {LISTENER_FIX}, on one of those"]),
    Case("gcp forwarding rule on 443", pack.load_balancer_https_only, GCP_FORWARDING_RULES[0],
         fleets.GCP_HTTPS_RULE, []),
    Case("gcp forwarding rule on 80", pack.load_balancer_https_only, GCP_FORWARDING_RULES[1],
         _with(fleets.GCP_HTTP_RULE, portRange="80-80"), []),
    Case("gcp forwarding rule on 8000, without a proxy", pack.load_balancer_https_only, GCP_FORWARDING_RULES[1],
         {"backendService": "b", "ports": ["8000"], "loadBalancingScheme": "EXTERNAL"},
         ["the forwarding rule has no target proxy, so it passes traffic to its backends as it comes (no HTTPS at the "
          "load balancer): forward to a target HTTPS proxy",
          f"the forwarding rule listens on port 8000: {LISTENER_FIX}"]),
    Case("gcp forwarding rule on every port", pack.load_balancer_https_only, GCP_FORWARDING_RULES[1],
         _with(fleets.GCP_HTTPS_RULE, allPorts=True, portRange=None),
         [f"the forwarding rule listens on ports 0-65535: {LISTENER_FIX}"]),
    Case("gcp SSL policy TLS 1.2", pack.load_balancer_https_only, GCP_SSL_POLICIES[0], fleets.GCP_SSL_POLICY, []),
    Case("gcp regional SSL policy on Google's default", pack.load_balancer_https_only, GCP_SSL_POLICIES[1],
         {"profile": "COMPATIBLE"},
         ["the SSL policy's minTlsVersion is unset (Google's default, TLS_1_0): set it to TLS_1_2"]),
    Case("alibaba HTTPS listener, TLS 1.2 policy", pack.load_balancer_https_only, ALI_LISTENER,
         fleets.ALI_HTTPS_LISTENER, []),
    Case("alibaba HTTPS listener with a custom policy", pack.load_balancer_https_only, ALI_LISTENER,
         _with(fleets.ALI_HTTPS_LISTENER, securityPolicyId="spy-1"), []),
    Case("alibaba HTTP listener on 80", pack.load_balancer_https_only, ALI_LISTENER, fleets.ALI_HTTP_LISTENER,
         []),
    Case("alibaba HTTPS listener on ALB's default policy", pack.load_balancer_https_only, ALI_LISTENER,
         {k: v for k, v in fleets.ALI_HTTPS_LISTENER.items() if k != "securityPolicyId"},
         ["the HTTPS listener's TLS policy is unset (ALB's default, tls_cipher_policy_1_0), which admits TLS before "
          "1.2: set securityPolicyId to tls_cipher_policy_1_2 (or _1_2_strict, _1_2_strict_with_1_3, or a custom "
          "alb.SecurityPolicy of TLSv1.2 and TLSv1.3)"]),
    Case("alibaba QUIC listener", pack.load_balancer_https_only, ALI_LISTENER,
         _with(fleets.ALI_HTTPS_LISTENER, listenerProtocol="QUIC"),
         [f"the listener's protocol is QUIC: {LISTENER_FIX}"]),
    Case("alibaba TLS policy of 1.2 and 1.3", pack.load_balancer_https_only, ALI_TLS_POLICY,
         {"securityPolicyName": "inv", "tlsVersions": ["TLSv1.2", "TLSv1.3"],
          "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"]},
         []),
    Case("alibaba TLS policy admitting 1.1", pack.load_balancer_https_only, ALI_TLS_POLICY,
         {"securityPolicyName": "inv", "tlsVersions": ["TLSv1.1", "TLSv1.2"]},
         ["the TLS policy admits TLSv1.1, TLSv1.2 (tlsVersions): admit TLSv1.2 and TLSv1.3 only"]),
    Case("alibaba classic load balancer listener", pack.load_balancer_https_only, "alicloud:slb/listener:Listener",
         {"frontendPort": 443.0, "protocol": "https"},
         ["this load balancer's listeners are not read by the pack (it reads AWS ALB listeners, Google Cloud "
          "forwarding rules and target proxies, Alibaba ALB listeners and Huawei dedicated ELB listeners), so they "
          f"count as public listeners it cannot check: {LISTENER_FIX}, on one of those"]),
    Case("huawei HTTPS listener, TLS 1.2 policy", pack.load_balancer_https_only, HW_LISTENER,
         fleets.HW_HTTPS_LISTENER, []),
    Case("huawei HTTP listener without a pool", pack.load_balancer_https_only, HW_LISTENER,
         fleets.HW_HTTP_LISTENER, []),
    Case("huawei HTTPS listener on ELB's default policy", pack.load_balancer_https_only, HW_LISTENER,
         {k: v for k, v in fleets.HW_HTTPS_LISTENER.items() if k != "tlsCiphersPolicy"},
         ["the HTTPS listener's TLS policy is unset (ELB's default, tls-1-0), which admits TLS before 1.2: set "
          "tlsCiphersPolicy to tls-1-2 (or tls-1-2-strict, tls-1-2-fs, tls-1-2-fs-with-1-3, tls-1-2-strict-no-cbc, or "
          "a custom DedicatedElb.SecurityPolicy of TLSv1.2 and TLSv1.3)"]),
    Case("huawei HTTP listener forwarding to a pool", pack.load_balancer_https_only, HW_LISTENER,
         _with(fleets.HW_HTTP_LISTENER, defaultPoolId="pool-1"),
         ["the HTTP listener forwards plain HTTP to a backend server group (defaultPoolId): remove it and redirect to "
          "the HTTPS listener (an l7policy REDIRECT_TO_LISTENER)"]),
    Case("huawei HTTPS listener on 8443", pack.load_balancer_https_only, HW_LISTENER,
         _with(fleets.HW_HTTPS_LISTENER, protocolPort=8443.0), [f"the HTTPS listener is on port 8443: {LISTENER_FIX}"]),
    Case("huawei TCP listener on the API port", pack.load_balancer_https_only, HW_LISTENER,
         {"loadbalancerId": "elb-1", "protocol": "TCP", "protocolPort": 8000.0},
         [f"the listener's protocol is TCP: {LISTENER_FIX}"]),
    Case("huawei TLS policy admitting TLSv1", pack.load_balancer_https_only, HW_TLS_POLICY,
         {"protocols": ["TLSv1", "TLSv1.2"], "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"]},
         ["the TLS policy admits TLSv1, TLSv1.2 (protocols): admit TLSv1.2 and TLSv1.3 only"]),
]

BACKEND_CASES = [
    Case("aws target group on the serving port", pack.load_balancer_backends_on_serving_port,
         AWS_TARGET_GROUPS[0], fleets.AWS_TARGET_GROUP, []),
    Case("aws target group on another port, checking /", pack.load_balancer_backends_on_serving_port,
         AWS_TARGET_GROUPS[1],
         _with(fleets.AWS_TARGET_GROUP, port=9000.0, healthCheck={"enabled": True, "protocol": "HTTP", "port": "22"}),
         ["the target group forwards to port 9000, not a serving port (8000)",
          f"the health check asks for the default path, / (healthCheck.path), which answers before the model is "
          f"loaded: {HEALTH_FIX}", "the health check probes port 22 (healthCheck.port): use traffic-port"]),
    Case("aws target group without a health check", pack.load_balancer_backends_on_serving_port,
         AWS_TARGET_GROUPS[0], _with(fleets.AWS_TARGET_GROUP, healthCheck={"enabled": False}),
         [f"the target group's health check is off: {HEALTH_FIX}"]),
    Case("gcp HTTP health check on the serving port", pack.load_balancer_backends_on_serving_port,
         GCP_HEALTH_CHECKS[0], fleets.GCP_HEALTH_CHECK, []),
    Case("gcp health check on the backend's serving port", pack.load_balancer_backends_on_serving_port,
         GCP_HEALTH_CHECKS[1], {"httpHealthCheck": {"portSpecification": "USE_SERVING_PORT",
                                                    "requestPath": fleets.HEALTH_PATH}}, []),
    Case("gcp health check on port 80 (the default) and /", pack.load_balancer_backends_on_serving_port,
         GCP_HEALTH_CHECKS[0], {"httpHealthCheck": {"requestPath": "/"}},
         [f"the health check asks for / (httpHealthCheck.requestPath), which answers before the model is loaded: "
          f"{HEALTH_FIX}", "the health check probes port 80 (the default) (httpHealthCheck.port): use the serving "
          "port, or portSpecification USE_SERVING_PORT"]),
    Case("gcp TCP health check", pack.load_balancer_backends_on_serving_port, GCP_HEALTH_CHECKS[0],
         {"tcpHealthCheck": {"port": 8000.0}},
         ["the health check is not HTTP (no httpHealthCheck, httpsHealthCheck or http2HealthCheck): "
          f"{HEALTH_FIX}"]),
    Case("gcp backend service without a health check", pack.load_balancer_backends_on_serving_port,
         GCP_BACKEND_SERVICES[0], {"backends": [{"group": "g"}], "protocol": "HTTP"},
         [f"the backend service has no health check (healthChecks): {HEALTH_FIX}"]),
    Case("gcp group naming the serving port", pack.load_balancer_backends_on_serving_port,
         GCP_REGION_GROUP_MANAGER, {"namedPorts": [{"name": "http", "port": 8000.0}]}, []),
    Case("gcp group naming another port", pack.load_balancer_backends_on_serving_port, GCP_REGION_GROUP_MANAGER,
         {"namedPorts": [{"name": "http", "port": 9000.0}]},
         ["named port http is 9000, not a serving port (8000): the load balancer would send requests there"]),
    Case("alibaba server group checking the health path", pack.load_balancer_backends_on_serving_port,
         ALI_SERVER_GROUP, fleets.ALI_SERVER_GROUP, []),
    Case("alibaba server group without a health check", pack.load_balancer_backends_on_serving_port,
         ALI_SERVER_GROUP, _with(fleets.ALI_SERVER_GROUP, healthCheckConfig={"healthCheckEnabled": False}),
         [f"the server group's health check is off (healthCheckConfig): {HEALTH_FIX}"]),
    Case("alibaba server group checking another port", pack.load_balancer_backends_on_serving_port,
         ALI_SERVER_GROUP, _with(fleets.ALI_SERVER_GROUP, healthCheckConfig={
             **fleets.ALI_SERVER_GROUP["healthCheckConfig"], "healthCheckConnectPort": 22.0}),
         ["the health check probes port 22 (healthCheckConfig.healthCheckConnectPort): use 0 (the backend's port)"]),
    Case("alibaba scaling group sending to another port", pack.load_balancer_backends_on_serving_port,
         ALI_SCALING_GROUP, {"albServerGroups": [{"albServerGroupId": "sgp-1", "port": 9000.0}]},
         ["the load balancer sends requests to port 9000 (albServerGroups.port), not a serving port (8000)"]),
    Case("alibaba server group attachment on the serving port", pack.load_balancer_backends_on_serving_port,
         ALI_GROUP_ATTACHMENT, {"scalingGroupId": "asg-1", "albServerGroupId": "sgp-1", "port": 8000.0}, []),
    Case("huawei monitor on the health path", pack.load_balancer_backends_on_serving_port, HW_MONITOR,
         fleets.HW_MONITOR, []),
    Case("huawei TCP monitor", pack.load_balancer_backends_on_serving_port, HW_MONITOR,
         _with(fleets.HW_MONITOR, protocol="TCP"), [f"the health check is not HTTP: {HEALTH_FIX}"]),
    Case("huawei monitor without a path, on another port", pack.load_balancer_backends_on_serving_port,
         HW_MONITOR, {"poolId": "pool-1", "protocol": "HTTP", "port": 9000.0},
         [f"the health check asks for the default path, / (urlPath), which answers before the model is loaded: "
          f"{HEALTH_FIX}", "the health check probes port 9000: leave port unset (the backend's port)"]),
    Case("huawei AS group registering another port", pack.load_balancer_backends_on_serving_port, HW_AS_GROUP,
         {"lbaasListeners": [{"poolId": "pool-1", "protocolPort": 9000.0}]},
         ["the load balancer sends requests to port 9000 (lbaasListeners.protocolPort), not a serving port (8000)"]),
    Case("huawei AS group registering the serving port", pack.load_balancer_backends_on_serving_port,
         HW_AS_GROUP, {"lbaasListeners": [{"poolId": "pool-1", "protocolPort": 8000.0}]}, []),
]

REDIS = pack.managed_redis_private_tls_auth
AWS_REDIS = {"description": "cache", "engine": "redis", "nodeType": "cache.t4g.small", "subnetGroupName": "inf-cache",
             "securityGroupIds": ["sg-0123456789abcdef0"], "transitEncryptionEnabled": True,
             "transitEncryptionMode": "required", "atRestEncryptionEnabled": True,
             "authToken": "Cache-token_0123456789"}
GCP_REDIS = {"memorySizeGb": 1.0, "tier": "BASIC", "authEnabled": True,
             "transitEncryptionMode": "SERVER_AUTHENTICATION", "authorizedNetwork": "projects/p/global/networks/n",
             "connectMode": "DIRECT_PEERING"}
ALI_REDIS = {"instanceType": "Redis", "engineVersion": "7.0", "sslEnable": "Enable", "vpcAuthMode": "Open",
             "password": "Cache-token_0123456789", "vswitchId": "vsw-1", "securityGroupId": "sg-1",
             "securityIps": ["127.0.0.1"]}
HW_REDIS = {"engine": "Redis", "engineVersion": "6.0", "sslEnable": True, "password": "Cache-token_0123456789",
            "whitelistEnable": True, "whitelists": [{"groupName": "servers", "ipAddresses": ["10.64.0.0/20"]}]}
REDIS_CASES = [
    Case("aws replication group with TLS, AUTH, encryption", REDIS, AWS_REPLICATION_GROUP, AWS_REDIS, []),
    Case("aws replication group without TLS or AUTH", REDIS, AWS_REPLICATION_GROUP,
         {**AWS_REDIS, "transitEncryptionEnabled": False, "authToken": None},
         ["the Redis replication group does not encrypt in transit: set transitEncryptionEnabled true",
          "the Redis replication group needs no AUTH: set authToken (a secret) or userGroupIds"]),
    Case("gcp memorystore with AUTH and TLS on its network", REDIS, cache.GCP_REDIS, GCP_REDIS, []),
    Case("gcp memorystore without TLS", REDIS, cache.GCP_REDIS, {**GCP_REDIS, "transitEncryptionMode": "DISABLED"},
         ["the Memorystore instance does not use TLS: set transitEncryptionMode SERVER_AUTHENTICATION"]),
    Case("alibaba tair with TLS, password, the servers' group", REDIS, ALI_KVSTORE, ALI_REDIS, []),
    Case("alibaba tair open to the internet", REDIS, ALI_KVSTORE, {**ALI_REDIS, "securityIps": ["0.0.0.0/0"]},
         ["the Tair whitelist admits public addresses (0.0.0.0/0): admit the servers' security group "
          "(securityGroupId) or private ranges only"]),
    Case("huawei dcs with SSL, password, a private whitelist", REDIS, HW_DCS, HW_REDIS, []),
    Case("huawei dcs without SSL", REDIS, HW_DCS, {**HW_REDIS, "sslEnable": False},
         ["the DCS instance does not use SSL: set sslEnable true (Redis 6.0 basic edition)"]),
]

RETENTION = pack.log_stores_have_retention
RETENTION_CASES = [
    Case("aws log group kept 90 days", RETENTION, AWS_LOG_GROUP, {"name": "g", "retentionInDays": 90}, []),
    Case("aws log group kept forever", RETENTION, AWS_LOG_GROUP, {"name": "g"},
         ["the log store has no retention (retentionInDays is unset), so it keeps logs forever or for a default "
          "nobody chose: set retentionInDays (inferstack keeps the servers' logs 90 days)"]),
    Case("gcp log bucket kept 90 days", RETENTION, GCP_LOG_BUCKET, {"bucketId": "b", "retentionDays": 90}, []),
    Case("alibaba logstore kept 90 days", RETENTION, ALI_LOG_STORE, {"name": "s", "retentionPeriod": 90}, []),
    Case("alibaba logstore kept forever", RETENTION, ALI_LOG_STORE, {"name": "s", "retentionPeriod": 3650},
         ["the log store has no retention (retentionPeriod is 3650), so it keeps logs forever or for a default nobody "
          "chose: set retentionPeriod (inferstack keeps the servers' logs 90 days)"]),
    Case("huawei lts group kept 365 days", RETENTION, HW_LTS_GROUP, {"groupName": "g", "ttlInDays": 365}, []),
    Case("huawei lts group without ttl", RETENTION, HW_LTS_GROUP, {"groupName": "g"},
         ["the log store has no retention (ttlInDays is unset), so it keeps logs forever or for a default nobody "
          "chose: set ttlInDays (inferstack keeps the servers' logs 90 days)"]),
    Case("gcp log bucket with retention 0", RETENTION, GCP_LOG_BUCKET, {"bucketId": "b", "retentionDays": 0},
         ["the log store has no retention (retentionDays is 0), so it keeps logs forever or for a default nobody "
          "chose: set retentionDays (inferstack keeps the servers' logs 90 days)"]),
]

CASES = (NETWORK_CASES + BUCKET_CASES + ENCRYPTION_CASES + METADATA_CASES + IDENTITY_CASES + CDN_CASES
         + FLEET_TEMPLATE_CASES + LISTENER_CASES + BACKEND_CASES + REDIS_CASES + RETENTION_CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.policy.name}: {c.label}")
def test_resource_policy_reports_exactly_these_violations(case: Case) -> None:
    report = check_resource(case.policy, case.resource_type, case.props, config=case.config)
    assert report.messages() == case.messages
    assert not report.not_applicable


def test_every_resource_policy_has_a_compliant_and_a_violating_case_on_every_cloud() -> None:
    clouds = {"aws", "gcp", "alicloud", "huaweicloud"}
    seen: dict[tuple[str, bool], set[str]] = {}
    for case in CASES:
        seen.setdefault((case.policy.name, bool(case.messages)), set()).add(case.resource_type.split(":")[0])
    # Where a cloud has no resource holding the setting, the stack tests or the not-applicable tests cover it.
    elsewhere = {("metadata-tokens-required", "gcp"), ("metadata-tokens-required", "huaweicloud"),
                 ("encryption-at-rest", "gcp"), ("cdn-https-only", "gcp")}
    for policy in pack.RESOURCE_POLICIES:
        for violates in (False, True):
            missing = clouds - seen.get((policy.name, violates), set()) - {c for p, c in elsewhere if p == policy.name}
            assert not missing, f"{policy.name}: no {'violating' if violates else 'compliant'} case for {missing}"


@pytest.mark.parametrize(("policy", "resource_type", "reason"), [
    (pack.metadata_tokens_required, GCP_INSTANCE, GCP_NO_METADATA_TOKENS),
    (pack.metadata_tokens_required, GCP_INSTANCE_TEMPLATE, GCP_NO_METADATA_TOKENS),
    (pack.metadata_tokens_required, GCP_REGION_INSTANCE_TEMPLATE, GCP_NO_METADATA_TOKENS),
    (pack.metadata_tokens_required, HW_AS_CONFIGURATION, HUAWEI_NO_METADATA_TOKENS),
    (pack.encryption_at_rest, GCP_REGION_INSTANCE_TEMPLATE, GCP_ALWAYS_ENCRYPTED),
    (pack.metadata_tokens_required, HW_INSTANCE, HUAWEI_NO_METADATA_TOKENS),
    (pack.encryption_at_rest, GCP_BUCKET, GCP_ALWAYS_ENCRYPTED),
    (pack.encryption_at_rest, GCP_INSTANCE, GCP_ALWAYS_ENCRYPTED),
    (pack.encryption_at_rest, GCP_DISK, GCP_ALWAYS_ENCRYPTED),
])
def test_a_setting_the_cloud_cannot_express_is_reported_not_applicable_with_the_reason(
        policy: Any, resource_type: str, reason: str) -> None:
    report = check_resource(policy, resource_type, {"name": "server-0"})
    assert report.violations == []
    assert list(report.not_applicable.values()) == [reason]


def test_an_unrelated_resource_passes_every_resource_policy_without_comment() -> None:
    for policy in pack.RESOURCE_POLICIES:
        report = check_resource(policy, "aws:ec2/vpc:Vpc", {"cidrBlock": "10.64.0.0/16"})
        assert report.violations == [] and report.not_applicable == {}

"""Each resource policy on hand-built resources: one that complies and one that violates, for every rule and cloud.

Inputs are written as the engine sends them (camelCase, numbers as floats); the compliant ones are what the
inferstack backends register. Every expected message is spelled out in full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.policy.harness import check_resource, pack, rules

BUCKET = "inferstack-dev-models-1a2b3c4d"
SERVER = "serviceAccount:s@p.iam.gserviceaccount.com"
ADMIN_FIX = ("inferstack opens no admin port; reach servers through the cloud's managed shell, or admit a private "
             "network only")
WORLD_FIX = ("only a serving port (8000) may be open beyond private networks; admit private networks only, or reach "
             "other ports through the cloud's managed shell")
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
    Case("aws api port to the world", pack.admin_ports_not_public, rules.AWS_INGRESS_RULE,
         _aws_rule(8000.0, 8000.0, "0.0.0.0/0"), []),
    Case("aws ssh from a private network", pack.admin_ports_not_public, rules.AWS_INGRESS_RULE,
         _aws_rule(22.0, 22.0, "10.0.0.0/8"), []),
    Case("aws ssh from the world", pack.admin_ports_not_public, rules.AWS_INGRESS_RULE,
         _aws_rule(22.0, 22.0, "0.0.0.0/0"), [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]),
    Case("aws inline rule of every protocol", pack.admin_ports_not_public, rules.AWS_SECURITY_GROUP,
         {"ingress": [{"protocol": "-1", "fromPort": 0.0, "toPort": 0.0, "cidrBlocks": ["203.0.113.0/24"]}]},
         [f"ports 0-65535 are open to 203.0.113.0/24, including admin port 22 (SSH): {ADMIN_FIX}",
          f"ports 0-65535 are open to 203.0.113.0/24, including admin port 3389 (RDP): {ADMIN_FIX}"]),
    Case("aws legacy rule, rdp from everywhere on IPv6", pack.admin_ports_not_public, rules.AWS_SECURITY_GROUP_RULE,
         {"type": "ingress", "protocol": "tcp", "fromPort": 3389.0, "toPort": 3389.0, "ipv6CidrBlocks": ["::/0"]},
         [f"admin port 3389 (RDP) is open to ::/0: {ADMIN_FIX}"]),
    Case("gcp ssh through IAP", pack.admin_ports_not_public, rules.GCP_FIREWALL,
         _gcp_firewall(["22"], ["35.235.240.0/20"]), []),
    Case("gcp egress on ssh", pack.admin_ports_not_public, rules.GCP_FIREWALL,
         _gcp_firewall(["22"], None, direction="EGRESS"), []),
    Case("gcp ssh with no source (Google's default: everywhere)", pack.admin_ports_not_public, rules.GCP_FIREWALL,
         _gcp_firewall(["22"], None), [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]),
    Case("alibaba ssh dropped", pack.admin_ports_not_public, rules.ALI_SECURITY_GROUP_RULE,
         _ali_rule("22/22", "0.0.0.0/0", policy="drop"), []),
    Case("alibaba ssh from the world", pack.admin_ports_not_public, rules.ALI_SECURITY_GROUP_RULE,
         _ali_rule("22/22", "0.0.0.0/0"), [f"admin port 22 (SSH) is open to 0.0.0.0/0: {ADMIN_FIX}"]),
    Case("huawei api port to the world", pack.admin_ports_not_public, rules.HW_SECURITY_GROUP_RULE,
         _hw_rule(protocol="tcp", portRangeMin=8000.0, portRangeMax=8000.0, remoteIpPrefix="0.0.0.0/0"), []),
    Case("huawei rule without protocol or remote", pack.admin_ports_not_public, rules.HW_SECURITY_GROUP_RULE,
         _hw_rule(), [f"ports 0-65535 are open to 0.0.0.0/0, including admin port 22 (SSH): {ADMIN_FIX}",
                      f"ports 0-65535 are open to 0.0.0.0/0, including admin port 3389 (RDP): {ADMIN_FIX}"]),
    # world-ingress-serving-port-only
    Case("aws serving port to the world", pack.world_ingress_serving_port_only, rules.AWS_INGRESS_RULE,
         _aws_rule(8000.0, 8000.0, "0.0.0.0/0"), []),
    Case("aws other port to the world", pack.world_ingress_serving_port_only, rules.AWS_INGRESS_RULE,
         _aws_rule(8080.0, 8080.0, "0.0.0.0/0"),
         [f"port 8080 is open to the whole internet (0.0.0.0/0): {WORLD_FIX}"]),
    Case("aws configured serving port to the world", pack.world_ingress_serving_port_only, rules.AWS_INGRESS_RULE,
         _aws_rule(8080.0, 8080.0, "0.0.0.0/0"), [], config={"servingPorts": [8080]}),
    Case("aws other port to a named public network", pack.world_ingress_serving_port_only, rules.AWS_INGRESS_RULE,
         _aws_rule(8080.0, 8080.0, "203.0.113.0/24"),
         [f"port 8080 is open to public network 203.0.113.0/24: {WORLD_FIX}"]),
    Case("aws other port to a private network", pack.world_ingress_serving_port_only, rules.AWS_INGRESS_RULE,
         _aws_rule(8080.0, 8080.0, "10.64.0.0/16"), []),
    Case("gcp port range to the world", pack.world_ingress_serving_port_only, rules.GCP_FIREWALL,
         _gcp_firewall(["8000-8010"], ["0.0.0.0/0"]),
         [f"ports 8000-8010 are open to the whole internet (0.0.0.0/0): {WORLD_FIX}"]),
    Case("gcp serving port to the world", pack.world_ingress_serving_port_only, rules.GCP_FIREWALL,
         _gcp_firewall(["8000"], ["0.0.0.0/0"]), []),
    Case("alibaba every port to the world", pack.world_ingress_serving_port_only, rules.ALI_SECURITY_GROUP_RULE,
         _ali_rule("-1/-1", "0.0.0.0/0", protocol="all"),
         [f"ports 0-65535 are open to the whole internet (0.0.0.0/0): {WORLD_FIX}"]),
    Case("alibaba serving port to the world", pack.world_ingress_serving_port_only, rules.ALI_SECURITY_GROUP_RULE,
         _ali_rule("8000/8000", "0.0.0.0/0"), []),
    Case("huawei ports list to the IPv6 world", pack.world_ingress_serving_port_only, rules.HW_SECURITY_GROUP_RULE,
         _hw_rule(protocol="tcp", ports="8000,9090", remoteIpPrefix="::/0", ethertype="IPv6"),
         [f"port 9090 is open to the whole internet (::/0): {WORLD_FIX}"]),
    Case("huawei serving port to the world", pack.world_ingress_serving_port_only, rules.HW_SECURITY_GROUP_RULE,
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
    Case("aws bucket", pack.buckets_not_public, rules.AWS_BUCKET, {"bucket": BUCKET, "forceDestroy": False}, []),
    Case("aws bucket with a public canned ACL", pack.buckets_not_public, rules.AWS_BUCKET,
         {"bucket": BUCKET, "acl": "public-read"},
         ["bucket ACL is public-read, which lets anyone read it: use private"]),
    Case("aws ACL granting AllUsers", pack.buckets_not_public, rules.AWS_BUCKET_ACL,
         {"bucket": BUCKET, "accessControlPolicy": {"owner": {"id": "o"}, "grants": [
             {"grantee": {"type": "Group", "uri": "http://acs.amazonaws.com/groups/global/AllUsers"},
              "permission": "READ"}]}},
         ["an ACL grant admits AllUsers (READ): remove it"]),
    Case("aws private ACL", pack.buckets_not_public, rules.AWS_BUCKET_ACL, {"bucket": BUCKET, "acl": "private"}, []),
    Case("aws policy: TLS only, CloudFront by distribution", pack.buckets_not_public, rules.AWS_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": _policy([TLS_ONLY, CDN_READ])}, []),
    Case("aws policy allowing everyone", pack.buckets_not_public, rules.AWS_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": _policy([TLS_ONLY, PUBLIC_READ])},
         [f"bucket policy statement PublicRead allows everyone (Principal \"*\"): {PUBLIC_BUCKET_FIX}"]),
    Case("aws policy that is not JSON", pack.buckets_not_public, rules.AWS_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": "{not json"},
         ["the bucket policy is not a JSON policy document, so it cannot be checked"]),
    Case("aws public access block, all on", pack.buckets_not_public, rules.AWS_PUBLIC_ACCESS_BLOCK, ALL_BLOCKS, []),
    Case("aws public access block, two off", pack.buckets_not_public, rules.AWS_PUBLIC_ACCESS_BLOCK,
         {**ALL_BLOCKS, "ignorePublicAcls": False, "restrictPublicBuckets": False},
         ["the public access block leaves ignorePublicAcls, restrictPublicBuckets off: turn all four on"]),
    Case("gcp bucket", pack.buckets_not_public, rules.GCP_BUCKET,
         {"name": BUCKET, "uniformBucketLevelAccess": True, "publicAccessPrevention": "enforced"}, []),
    Case("gcp bucket with ACLs and inherited prevention", pack.buckets_not_public, rules.GCP_BUCKET,
         {"name": BUCKET, "uniformBucketLevelAccess": False, "publicAccessPrevention": "inherited"},
         ["uniform bucket-level access is off, so object ACLs could make objects public: set "
          "uniformBucketLevelAccess to true",
          "public access prevention is inherited: set publicAccessPrevention to enforced"]),
    Case("gcp member allUsers", pack.buckets_not_public, rules.GCP_BUCKET_IAM_MEMBER,
         {"bucket": BUCKET, "role": "roles/storage.objectViewer", "member": "allUsers"},
         ["grants roles/storage.objectViewer to allUsers, which is everyone: grant to named members only"]),
    Case("gcp member log writer group", pack.buckets_not_public, rules.GCP_BUCKET_IAM_MEMBER,
         {"bucket": BUCKET, "role": "roles/storage.objectCreator",
          "member": "group:cloud-storage-analytics@google.com"},
         []),
    Case("alibaba private ACL", pack.buckets_not_public, rules.ALI_BUCKET_ACL, {"bucket": BUCKET, "acl": "private"},
         []),
    Case("alibaba public-read-write ACL", pack.buckets_not_public, rules.ALI_BUCKET_ACL,
         {"bucket": BUCKET, "acl": "public-read-write"},
         ["bucket ACL is public-read-write, which lets anyone read it: use private"]),
    Case("alibaba public access block on", pack.buckets_not_public, rules.ALI_PUBLIC_ACCESS_BLOCK,
         {"bucket": BUCKET, "blockPublicAccess": True}, []),
    Case("alibaba public access block off", pack.buckets_not_public, rules.ALI_PUBLIC_ACCESS_BLOCK,
         {"bucket": BUCKET, "blockPublicAccess": False},
         ["the public access block is off (blockPublicAccess is not true): turn it on"]),
    Case("alibaba TLS-only policy", pack.buckets_not_public, rules.ALI_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": _policy([OSS_TLS_ONLY], "1")}, []),
    Case("alibaba policy allowing everyone", pack.buckets_not_public, rules.ALI_BUCKET_POLICY,
         {"bucket": BUCKET, "policy": _policy([OSS_TLS_ONLY, {"Effect": "Allow", "Principal": ["*"],
                                                              "Action": ["oss:GetObject"],
                                                              "Resource": [f"acs:oss:*:*:{BUCKET}/*"]}], "1")},
         [f"bucket policy statement #1 allows everyone (Principal \"*\"): {PUBLIC_BUCKET_FIX}"]),
    Case("huawei private bucket with its TLS-only policy", pack.buckets_not_public, rules.HW_BUCKET,
         {"bucket": BUCKET, "acl": "private", "policyFormat": "obs",
          "policy": json.dumps({"Statement": [OBS_TLS_ONLY]})},
         []),
    Case("huawei public-read-write bucket", pack.buckets_not_public, rules.HW_BUCKET,
         {"bucket": BUCKET, "acl": "public-read-write"},
         ["bucket ACL is public-read-write, which lets anyone read it: use private"]),
    Case("huawei bucket policy allowing every ID", pack.buckets_not_public, rules.HW_BUCKET_POLICY,
         {"bucket": BUCKET, "policyFormat": "obs", "policy": json.dumps({"Statement": [
             {"Sid": "Open", "Effect": "Allow", "Principal": {"ID": ["*"]}, "Action": ["GetObject"],
              "Resource": [f"{BUCKET}/*"]}]})},
         [f"bucket policy statement Open allows everyone (Principal \"*\"): {PUBLIC_BUCKET_FIX}"]),
]

ENCRYPTION_CASES = [
    Case("aws default encryption AES256", pack.encryption_at_rest, rules.AWS_BUCKET_ENCRYPTION,
         {"bucket": BUCKET, "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}, []),
    Case("aws default encryption without an algorithm", pack.encryption_at_rest, rules.AWS_BUCKET_ENCRYPTION,
         {"bucket": BUCKET, "rules": [{"bucketKeyEnabled": True}]},
         ["a default encryption rule names no algorithm: set applyServerSideEncryptionByDefault.sseAlgorithm to "
          "AES256 or aws:kms"]),
    Case("aws instance with encrypted volumes", pack.encryption_at_rest, rules.AWS_INSTANCE,
         {"rootBlockDevice": {"encrypted": True, "volumeType": "gp3"},
          "ebsBlockDevices": [{"deviceName": "/dev/sdf", "encrypted": True}]}, []),
    Case("aws instance with plain volumes", pack.encryption_at_rest, rules.AWS_INSTANCE,
         {"rootBlockDevice": {"volumeType": "gp3"}, "ebsBlockDevices": [{"deviceName": "/dev/sdf"}]},
         ["the root volume is not encrypted: set rootBlockDevice.encrypted to true",
          "EBS volume /dev/sdf is not encrypted: set encrypted to true"]),
    Case("aws plain EBS volume", pack.encryption_at_rest, rules.AWS_VOLUME, {"size": 100.0},
         ["the volume is not encrypted: set encrypted to true"]),
    Case("alibaba bucket encryption AES256", pack.encryption_at_rest, rules.ALI_BUCKET_ENCRYPTION,
         {"bucket": BUCKET, "sseAlgorithm": "AES256"}, []),
    Case("alibaba bucket encryption unset", pack.encryption_at_rest, rules.ALI_BUCKET_ENCRYPTION,
         {"bucket": BUCKET, "sseAlgorithm": ""},
         ["the server-side encryption algorithm is unset: use AES256, KMS or SM4"]),
    Case("alibaba instance with encrypted disks", pack.encryption_at_rest, rules.ALI_INSTANCE,
         {"systemDiskEncrypted": True, "dataDisks": [{"size": 100.0, "encrypted": True}]}, []),
    Case("alibaba instance with plain disks", pack.encryption_at_rest, rules.ALI_INSTANCE,
         {"systemDiskEncrypted": False, "dataDisks": [{"size": 100.0}]},
         ["the system disk is not encrypted: set systemDiskEncrypted to true",
          "data disk 0 is not encrypted: set encrypted to true"]),
    Case("huawei encrypted bucket", pack.encryption_at_rest, rules.HW_BUCKET,
         {"bucket": BUCKET, "encryption": True, "sseAlgorithm": "AES256"}, []),
    Case("huawei plain bucket", pack.encryption_at_rest, rules.HW_BUCKET, {"bucket": BUCKET, "encryption": False},
         ["the bucket is not encrypted: set encryption to true (sseAlgorithm AES256 or kms)"]),
    Case("huawei instance on the evs/default key", pack.encryption_at_rest, rules.HW_INSTANCE,
         {"systemDiskKmsKeyId": "cbc7f3ab-fab2-8964-3b29-643cfeb93998", "systemDiskType": "GPSSD"}, []),
    Case("huawei instance with a plain system disk", pack.encryption_at_rest, rules.HW_INSTANCE,
         {"systemDiskType": "GPSSD", "dataDisks": [{"size": 100.0, "type": "GPSSD"}]},
         ["the system disk is not encrypted: set systemDiskKmsKeyId (inferstack uses the region's evs/default key)",
          "data disk 0 is not encrypted: set kmsKeyId"]),
]

METADATA_CASES = [
    Case("aws tokens required", pack.metadata_tokens_required, rules.AWS_INSTANCE,
         {"metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1.0}},
         []),
    Case("aws tokens optional", pack.metadata_tokens_required, rules.AWS_INSTANCE,
         {"metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "optional", "httpPutResponseHopLimit": 1.0}},
         [f"{NO_TOKEN} (metadataOptions.httpTokens is optional): set it to required"]),
    Case("aws no metadata options", pack.metadata_tokens_required, rules.AWS_INSTANCE, {"instanceType": "g6.xlarge"},
         [f"{NO_TOKEN} (metadataOptions.httpTokens is unset): set it to required", HOP_UNSET]),
    Case("aws metadata service off", pack.metadata_tokens_required, rules.AWS_INSTANCE,
         {"metadataOptions": {"httpEndpoint": "disabled"}}, []),
    Case("aws launch template with optional tokens", pack.metadata_tokens_required, rules.AWS_LAUNCH_TEMPLATE,
         {"metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 1.0}},
         [f"{NO_TOKEN} (metadataOptions.httpTokens is optional): set it to required"]),
    Case("alibaba tokens required", pack.metadata_tokens_required, rules.ALI_INSTANCE,
         {"httpEndpoint": "enabled", "httpTokens": "required"}, []),
    Case("alibaba tokens optional", pack.metadata_tokens_required, rules.ALI_INSTANCE,
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
    Case("aws model read and session manager", pack.storage_grants_no_wildcards, rules.AWS_ROLE_POLICY,
         {"role": "r", "policy": _policy(MODEL_READ + SESSION_MANAGER)}, []),
    Case("aws every storage action", pack.storage_grants_no_wildcards, rules.AWS_ROLE_POLICY,
         {"role": "r", "policy": _policy([{"Effect": "Allow", "Action": "s3:*",
                                           "Resource": f"arn:aws:s3:::{BUCKET}/models/*"}])},
         ["statement #0 allows s3:*, which covers every storage action: name the read actions the server needs"]),
    Case("aws storage on every bucket", pack.storage_grants_no_wildcards, rules.AWS_MANAGED_POLICY,
         {"policy": _policy([{"Sid": "Read", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"}])},
         [f"statement Read grants storage on *, {EVERY_BUCKET}"]),
    Case("aws inline policy with every action", pack.storage_grants_no_wildcards, rules.AWS_ROLE,
         {"inlinePolicies": [{"name": "admin", "policy": _policy([{"Effect": "Allow", "Action": "*",
                                                                  "Resource": "*"}])}]},
         ["statement #0 allows *, which covers every storage action: name the read actions the server needs",
          f"statement #0 grants storage on *, {EVERY_BUCKET}"]),
    Case("aws S3 full access attached", pack.storage_grants_no_wildcards, rules.AWS_ROLE_POLICY_ATTACHMENT,
         {"role": "r", "policyArn": "arn:aws:iam::aws:policy/AmazonS3FullAccess"},
         ["attaches AmazonS3FullAccess, which grants storage on every bucket: grant one bucket and prefix in a "
          "policy of your own"]),
    Case("aws own policy attached", pack.storage_grants_no_wildcards, rules.AWS_ROLE_POLICY_ATTACHMENT,
         {"role": "r", "policyArn": "arn:aws:iam::123456789012:policy/model-read"}, []),
    Case("gcp storage role on the project", pack.storage_grants_no_wildcards, rules.GCP_PROJECT_IAM_MEMBER,
         {"project": "p", "role": "roles/storage.objectViewer", "member": "serviceAccount:s@p.iam.gserviceaccount.com"},
         ["grants roles/storage.objectViewer on the whole project, which covers every bucket: grant a storage role on "
          "one bucket (BucketIAMMember) instead"]),
    Case("gcp other role on the project", pack.storage_grants_no_wildcards, rules.GCP_PROJECT_IAM_MEMBER,
         {"project": "p", "role": "roles/logging.logWriter", "member": "serviceAccount:s@p.iam.gserviceaccount.com"},
         []),
    Case("gcp bucket admin", pack.storage_grants_no_wildcards, rules.GCP_BUCKET_IAM_MEMBER,
         {"bucket": BUCKET, "role": "roles/storage.objectAdmin", "member": SERVER},
         ["grants roles/storage.objectAdmin to serviceAccount:s@p.iam.gserviceaccount.com, which administers the "
          "bucket: grant objectViewer (read) or objectCreator (write) instead"]),
    Case("gcp bucket reader", pack.storage_grants_no_wildcards, rules.GCP_BUCKET_IAM_MEMBER,
         {"bucket": BUCKET, "role": "roles/storage.objectViewer", "member": SERVER},
         []),
    Case("alibaba model read", pack.storage_grants_no_wildcards, rules.ALI_POLICY,
         {"policyName": "p", "policyDocument": _policy(OSS_MODEL_READ, "1")}, []),
    Case("alibaba every storage action on every bucket", pack.storage_grants_no_wildcards, rules.ALI_POLICY,
         {"policyName": "p", "policyDocument": _policy([{"Effect": "Allow", "Action": ["oss:*"],
                                                         "Resource": ["acs:oss:*:*:*"]}], "1")},
         ["statement #0 allows oss:*, which covers every storage action: name the read actions the server needs",
          f"statement #0 grants storage on acs:oss:*:*:*, {EVERY_BUCKET}"]),
    Case("alibaba OSS full access attached", pack.storage_grants_no_wildcards, rules.ALI_ROLE_POLICY_ATTACHMENT,
         {"roleName": "r", "policyName": "AliyunOSSFullAccess", "policyType": "System"},
         ["attaches AliyunOSSFullAccess, which grants storage on every bucket: grant one bucket and prefix in a "
          "policy of your own"]),
    Case("huawei model read", pack.storage_grants_no_wildcards, rules.HW_ROLE,
         {"name": "r", "type": "AX", "policy": json.dumps({"Version": "1.1", "Statement": [
             {"Effect": "Allow", "Action": ["obs:object:GetObject"],
              "Resource": [f"obs:*:*:object:{BUCKET}/models/llama/*"]}]})}, []),
    Case("huawei storage without a resource", pack.storage_grants_no_wildcards, rules.HW_ROLE,
         {"name": "r", "type": "AX", "policy": json.dumps({"Version": "1.1", "Statement": [
             {"Effect": "Allow", "Action": ["obs:object:GetObject"]}]})},
         ["statement #0 grants storage with no Resource, which is every bucket: name one bucket and prefix"]),
    Case("huawei secrets read without a resource", pack.storage_grants_no_wildcards, rules.HW_ROLE,
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
    Case("aws CloudFront https-only with OAC", pack.cdn_https_only, rules.AWS_DISTRIBUTION, CLOUDFRONT, []),
    Case("aws CloudFront allowing HTTP, origin unsigned", pack.cdn_https_only, rules.AWS_DISTRIBUTION,
         {**CLOUDFRONT, "origins": [{"originId": "assets", "domainName": f"{BUCKET}.s3.us-east-1.amazonaws.com"}],
          "defaultCacheBehavior": {"targetOriginId": "assets", "viewerProtocolPolicy": "allow-all"}},
         ["cache behavior default serves plain HTTP (viewerProtocolPolicy is allow-all): use https-only",
          "origin assets reads its S3 bucket without Origin Access Control: give it an originAccessControlId, so "
          "that the bucket stays private"]),
    Case("alibaba CDN domain with a certificate", pack.cdn_https_only, rules.ALI_CDN_DOMAIN, ALI_CDN, []),
    Case("alibaba CDN domain without certificate, origin on port 80", pack.cdn_https_only, rules.ALI_CDN_DOMAIN,
         {**ALI_CDN, "certificateConfig": {"serverCertificateStatus": "off"},
          "sources": [{**ALI_CDN["sources"][0], "port": 80.0}]},
         ["the CDN domain serves without an HTTPS certificate: set certificateConfig.serverCertificateStatus to on, "
          "or keep the domain offline until it has one",
          f"origin {BUCKET}.oss-ap-southeast-1.aliyuncs.com is fetched over plain HTTP: use port 443"]),
    Case("alibaba CDN domain offline without certificate (inferstack's first phase)", pack.cdn_https_only,
         rules.ALI_CDN_DOMAIN, {key: value for key, value in ALI_CDN.items() if key != "certificateConfig"}
         | {"status": "offline"}, []),
    Case("alibaba CDN domain online without certificate", pack.cdn_https_only, rules.ALI_CDN_DOMAIN,
         {key: value for key, value in ALI_CDN.items() if key != "certificateConfig"} | {"status": "online"},
         ["the CDN domain serves without an HTTPS certificate: set certificateConfig.serverCertificateStatus to on, "
          "or keep the domain offline until it has one"]),
    Case("alibaba https_force on", pack.cdn_https_only, rules.ALI_CDN_CONFIG,
         {"domainName": "static.example.com", "functionName": "https_force",
          "functionArgs": [{"argName": "enable", "argValue": "on"}, {"argName": "https_rewrite", "argValue": "301"}]},
         []),
    Case("alibaba https_force off", pack.cdn_https_only, rules.ALI_CDN_CONFIG,
         {"domainName": "static.example.com", "functionName": "https_force",
          "functionArgs": [{"argName": "enable", "argValue": "off"}]},
         ["https_force is not enabled: set its enable argument to on"]),
    Case("huawei CDN https with redirect, private origin", pack.cdn_https_only, rules.HW_CDN_DOMAIN, HW_CDN, []),
    Case("huawei CDN without redirect, public origin over http", pack.cdn_https_only, rules.HW_CDN_DOMAIN,
         {**HW_CDN, "sources": [{**HW_CDN["sources"][0], "obsBucketType": "public"}],
          "configs": {**HW_CDN["configs"], "originProtocol": "http", "forceRedirect": {"enabled": False}}},
         ["plain HTTP is not redirected: set configs.forceRedirect to enabled, type https",
          "the origin is fetched over http: set configs.originProtocol to https",
          f"origin {BUCKET}.obs.ap-southeast-3.myhuaweicloud.com is read as a public bucket: set obsBucketType to "
          "private (the CDN reads it with the account's agency)"]),
]

CASES = NETWORK_CASES + BUCKET_CASES + ENCRYPTION_CASES + METADATA_CASES + IDENTITY_CASES + CDN_CASES


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
    (pack.metadata_tokens_required, rules.GCP_INSTANCE, rules.GCP_NO_METADATA_TOKENS),
    (pack.metadata_tokens_required, rules.GCP_INSTANCE_TEMPLATE, rules.GCP_NO_METADATA_TOKENS),
    (pack.metadata_tokens_required, rules.HW_INSTANCE, rules.HUAWEI_NO_METADATA_TOKENS),
    (pack.encryption_at_rest, rules.GCP_BUCKET, rules.GCP_ALWAYS_ENCRYPTED),
    (pack.encryption_at_rest, rules.GCP_INSTANCE, rules.GCP_ALWAYS_ENCRYPTED),
    (pack.encryption_at_rest, rules.GCP_DISK, rules.GCP_ALWAYS_ENCRYPTED),
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

"""Each stack policy on hand-built stacks: the resources it relates, found by property dependency (how a preview
knows them) or by value (resources that exist), one compliant and one violating stack per rule and cloud."""

from __future__ import annotations

import json
from typing import Any

import pytest
from guardrails.resource_types import (
    ALI_BUCKET,
    ALI_BUCKET_ENCRYPTION,
    ALI_CDN_CONFIG,
    ALI_CDN_DOMAIN,
    ALI_POLICY,
    ALI_PUBLIC_ACCESS_BLOCK,
    ALI_ROLE,
    ALI_ROLE_POLICY_ATTACHMENT,
    AWS_BUCKET,
    AWS_BUCKET_ENCRYPTION,
    AWS_DISTRIBUTION,
    AWS_INGRESS_RULE,
    AWS_LOG_GROUP,
    AWS_PARAMETER,
    AWS_PUBLIC_ACCESS_BLOCK,
    AWS_ROLE,
    AWS_ROLE_POLICY,
    GCP_ALWAYS_ENCRYPTED,
    GCP_BACKEND_BUCKET,
    GCP_BUCKET,
    GCP_BUCKET_IAM_MEMBER,
    GCP_HTTP_PROXY,
    GCP_INSTANCE,
    GCP_INSTANCE_TEMPLATE,
    GCP_PROJECT_IAM_MEMBER,
    GCP_PUBLIC_ACCESS_ON_BUCKET,
    GCP_SERVICE_ACCOUNT,
    GCP_URL_MAP,
    HUAWEI_NO_PUBLIC_ACCESS_BLOCK,
    HW_AGENCY,
    HW_BUCKET,
    HW_ROLE,
)

from tests.policy import fleets
from tests.policy.harness import Resource, check_stack, pack

BUCKET = "inferstack-dev-models-1a2b3c4d"
PREFIX = "models/llama/"
NEVER = ("which inferstack never grants: the servers only read their model prefix and their own secrets{shell} "
         "(docs/policy.md lists the actions); remove it")
NOT_ONE_PREFIX = ("which is not one model prefix of one bucket: grant bucket/prefix* only (no wildcard in the bucket "
                  "or the prefix)")


def _doc(statements: list[dict[str, Any]], version: str = "2012-10-17") -> str:
    return json.dumps({"Version": version, "Statement": statements})


def _aws_bucket(name: str = "models") -> Resource:
    return Resource(AWS_BUCKET, name, {"bucket": BUCKET})


#### buckets-have-public-access-block ####

AWS_BLOCK = {"bucket": BUCKET, "blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True,
             "restrictPublicBuckets": True}


@pytest.mark.parametrize("depends", [{"bucket": ["models"]}, {}], ids=["by dependency", "by value"])
def test_an_s3_bucket_with_its_public_access_block_passes(depends: dict[str, list[str]]) -> None:
    stack = [_aws_bucket(), Resource(AWS_PUBLIC_ACCESS_BLOCK, "models-public-access", AWS_BLOCK, depends)]
    report = check_stack(pack.buckets_have_public_access_block, stack)
    assert report.violations == [] and report.not_applicable == {}


def test_an_s3_bucket_without_a_public_access_block_is_reported_on_the_bucket() -> None:
    other = Resource(AWS_PUBLIC_ACCESS_BLOCK, "logs-public-access", {**AWS_BLOCK, "bucket": "logs-bucket"})
    report = check_stack(pack.buckets_have_public_access_block, [_aws_bucket(), other])
    assert report.messages() == [
        "bucket models has no BucketPublicAccessBlock: add one that blocks public ACLs and policies"]
    assert report.violations[0].urn == _aws_bucket().urn


def test_an_oss_bucket_needs_its_public_access_block() -> None:
    bucket = Resource(ALI_BUCKET, "models", {"bucket": BUCKET})
    block = Resource(ALI_PUBLIC_ACCESS_BLOCK, "models-public-access",
                     {"bucket": BUCKET, "blockPublicAccess": True}, {"bucket": ["models"]})
    assert check_stack(pack.buckets_have_public_access_block, [bucket, block]).violations == []
    assert check_stack(pack.buckets_have_public_access_block, [bucket]).messages() == [
        "bucket models has no BucketPublicAccessBlock: add one that blocks public ACLs and policies"]


@pytest.mark.parametrize(("bucket_type", "reason"), [
    (GCP_BUCKET, GCP_PUBLIC_ACCESS_ON_BUCKET),
    (HW_BUCKET, HUAWEI_NO_PUBLIC_ACCESS_BLOCK),
])
def test_public_access_block_is_not_applicable_where_the_cloud_has_no_such_resource(bucket_type: str,
                                                                                      reason: str) -> None:
    report = check_stack(pack.buckets_have_public_access_block, [Resource(bucket_type, "models", {"bucket": BUCKET})])
    assert report.violations == [] and list(report.not_applicable.values()) == [reason]


#### buckets-have-default-encryption ####


def test_an_s3_bucket_needs_default_encryption() -> None:
    encryption = Resource(AWS_BUCKET_ENCRYPTION, "models-encryption", {
        "bucket": BUCKET, "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]},
        {"bucket": ["models"]})
    assert check_stack(pack.buckets_have_default_encryption, [_aws_bucket(), encryption]).violations == []
    assert check_stack(pack.buckets_have_default_encryption, [_aws_bucket()]).messages() == [
        "bucket models has no default encryption: add a BucketServerSideEncryptionConfiguration"]


def test_an_oss_bucket_needs_default_encryption_inline_or_separate() -> None:
    bucket = Resource(ALI_BUCKET, "models", {"bucket": BUCKET})
    inline = Resource(ALI_BUCKET, "models", {"bucket": BUCKET,
                                             "serverSideEncryptionRule": {"sseAlgorithm": "KMS"}})
    separate = Resource(ALI_BUCKET_ENCRYPTION, "models-encryption", {"bucket": BUCKET, "sseAlgorithm": "AES256"})
    assert check_stack(pack.buckets_have_default_encryption, [bucket, separate]).violations == []
    assert check_stack(pack.buckets_have_default_encryption, [inline]).violations == []
    assert check_stack(pack.buckets_have_default_encryption, [bucket]).messages() == [
        "bucket models has no default encryption: add a BucketServerSideEncryption"]


@pytest.mark.parametrize(("bucket_type", "reason"), [
    (GCP_BUCKET, GCP_ALWAYS_ENCRYPTED),
    (HW_BUCKET, "OBS encryption is a property of the bucket, which encryption-at-rest checks"),
])
def test_default_encryption_is_not_applicable_where_it_is_not_a_separate_resource(bucket_type: str,
                                                                                 reason: str) -> None:
    report = check_stack(pack.buckets_have_default_encryption, [Resource(bucket_type, "models", {"bucket": BUCKET})])
    assert report.violations == [] and list(report.not_applicable.values()) == [reason]


#### server-identity-least-privilege ####

EC2_TRUST = _doc([{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "ec2.amazonaws.com"}}])
AWS_READ = [
    {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}",
     "Condition": {"StringLike": {"s3:prefix": [f"{PREFIX}*"]}}},
    {"Sid": "ReadModelFiles", "Effect": "Allow", "Action": "s3:GetObject",
     "Resource": f"arn:aws:s3:::{BUCKET}/{PREFIX}*"}]


def _aws_identity(statements: list[dict[str, Any]], *, trust: str = EC2_TRUST) -> list[Resource]:
    return [Resource(AWS_ROLE, "server-role", {"assumeRolePolicy": trust, "name": "server-role-d992a2c"}),
            Resource(AWS_ROLE_POLICY, "server-model-read",
                     {"role": "server-role-d992a2c", "policy": _doc(statements)}, {"role": ["server-role"]})]


def test_the_aws_server_role_reading_its_model_prefix_passes() -> None:
    assert check_stack(pack.server_identity_least_privilege, _aws_identity(AWS_READ)).violations == []


def test_the_aws_server_role_may_not_write_list_unbounded_or_read_a_whole_bucket() -> None:
    statements = [
        {"Sid": "List", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}"},
        {"Sid": "Write", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": f"arn:aws:s3:::{BUCKET}/*"}]
    report = check_stack(pack.server_identity_least_privilege, _aws_identity(statements))
    assert report.messages() == [
        f"the servers' identity may list arn:aws:s3:::{BUCKET} (statement List) without a condition limiting it to "
        "one prefix: add s3:prefix with the model prefix",
        f"the servers' identity may s3:GetObject on arn:aws:s3:::{BUCKET}/* (statement Write), {NOT_ONE_PREFIX}",
        "the servers' identity may s3:PutObject (statement Write), "
        + NEVER.format(shell=" and open the managed shell")]
    assert {v.urn for v in report.violations} == {_aws_identity([])[1].urn}


def test_a_role_that_no_server_assumes_is_not_the_servers_identity() -> None:
    lambda_trust = _doc([{"Effect": "Allow", "Action": "sts:AssumeRole",
                          "Principal": {"Service": "lambda.amazonaws.com"}}])
    writer = [{"Effect": "Allow", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{BUCKET}/*"}]
    report = check_stack(pack.server_identity_least_privilege, _aws_identity(writer, trust=lambda_trust))
    assert report.violations == []
    assert list(report.not_applicable.values()) == [
        "the stack holds no server identity (an AWS or Alibaba role that the compute service assumes, a Huawei "
        "agency for ECS, a Google service account on an instance)"]


ECS_TRUST = _doc([{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": ["ecs.aliyuncs.com"]}}],
                 "1")


def _alibaba_identity(statements: list[dict[str, Any]]) -> list[Resource]:
    return [Resource(ALI_ROLE, "server-role", {"roleName": "server-role-8f30", "assumeRolePolicyDocument":
                                               ECS_TRUST}),
            Resource(ALI_POLICY, "server-model-read", {"policyName": "model-read-1",
                                                       "policyDocument": _doc(statements, "1")}),
            Resource(ALI_ROLE_POLICY_ATTACHMENT, "server-model-read-attachment",
                     {"roleName": "server-role-8f30", "policyName": "model-read-1", "policyType": "Custom"})]


def test_the_alibaba_server_role_is_found_through_its_attachments() -> None:
    read = [{"Effect": "Allow", "Action": "oss:ListObjects", "Resource": f"acs:oss:*:*:{BUCKET}",
             "Condition": {"StringLike": {"oss:Prefix": [f"{PREFIX}*"]}}},
            {"Effect": "Allow", "Action": "oss:GetObject", "Resource": f"acs:oss:*:*:{BUCKET}/{PREFIX}*"}]
    assert check_stack(pack.server_identity_least_privilege, _alibaba_identity(read)).violations == []
    whole = [{"Effect": "Allow", "Action": "oss:GetObject", "Resource": f"acs:oss:*:*:{BUCKET}/*"}]
    assert check_stack(pack.server_identity_least_privilege, _alibaba_identity(whole)).messages() == [
        f"the servers' identity may oss:GetObject on acs:oss:*:*:{BUCKET}/* (statement #0), {NOT_ONE_PREFIX}"]


def _huawei_identity(statements: list[dict[str, Any]], service: str = "op_svc_ecs") -> list[Resource]:
    return [Resource(HW_ROLE, "server-model-read", {"name": "model-read-1", "type": "AX", "policy": json.dumps(
                {"Version": "1.1", "Statement": statements})}),
            Resource(HW_AGENCY, "server-agency", {"name": "agency-1", "delegatedServiceName": service,
                                                  "domainRoles": ["model-read-1"]},
                     {"domainRoles": ["server-model-read"]})]


def test_the_huawei_server_agency_reads_its_model_prefix_and_log_delivery_is_not_the_server() -> None:
    read = [{"Effect": "Allow", "Action": ["obs:object:GetObject"],
             "Resource": [f"obs:*:*:object:{BUCKET}/{PREFIX}*"]}]
    assert check_stack(pack.server_identity_least_privilege, _huawei_identity(read)).violations == []
    write = [{"Effect": "Allow", "Action": ["obs:object:PutObject"], "Resource": ["obs:*:*:object:logs/*"]}]
    assert check_stack(pack.server_identity_least_privilege, _huawei_identity(write, "op_svc_obs")).violations == []
    assert check_stack(pack.server_identity_least_privilege, _huawei_identity(write)).messages() == [
        "the servers' identity may obs:object:PutObject (statement #0), "
        + NEVER.format(shell=" and report their requests per second to Cloud Eye")]


CONDITION = (f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/{PREFIX}") || '
             f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{PREFIX}")')


def _gcp_identity(member: dict[str, Any]) -> list[Resource]:
    email = "inferstack-dev-server@p.iam.gserviceaccount.com"
    return [Resource(GCP_SERVICE_ACCOUNT, "server-account", {"accountId": "inferstack-dev-server",
                                                                    "email": email}),
            Resource(GCP_INSTANCE, "server-0", {"serviceAccount": {"email": email}},
                     {"serviceAccount": ["server-account"]}),
            Resource(GCP_BUCKET_IAM_MEMBER, "server-model-read",
                     {"bucket": BUCKET, "member": f"serviceAccount:{email}", **member}, {"member": ["server-account"]})]


def test_the_gcp_server_account_reads_under_a_prefix_condition() -> None:
    compliant = {"role": "roles/storage.objectViewer", "condition": {"title": "t", "expression": CONDITION}}
    assert check_stack(pack.server_identity_least_privilege, _gcp_identity(compliant)).violations == []
    report = check_stack(pack.server_identity_least_privilege, _gcp_identity({"role": "roles/storage.objectViewer"}))
    assert report.messages() == [
        f"the servers' identity reads all of bucket {BUCKET} (roles/storage.objectViewer without a condition limiting "
        "it to the model prefix): add one"]
    report = check_stack(pack.server_identity_least_privilege, _gcp_identity({"role": "roles/storage.objectUser"}))
    assert report.messages() == [
        f"the servers' identity holds roles/storage.objectUser on bucket {BUCKET}, which inferstack never grants: the "
        "servers read their model prefix (roles/storage.objectViewer on the bucket, under a prefix condition) and "
        "their own secrets (roles/secretmanager.secretAccessor), nothing else; remove it"]


def _gcp_project_role(role: str) -> list[Resource]:
    compliant = {"role": "roles/storage.objectViewer", "condition": {"title": "t", "expression": CONDITION}}
    email = "inferstack-dev-server@p.iam.gserviceaccount.com"
    return [*_gcp_identity(compliant), Resource(GCP_PROJECT_IAM_MEMBER, "server-project-role", {
        "project": "p", "role": role, "member": f"serviceAccount:{email}"}, {"member": ["server-account"]})]


def test_the_gcp_server_account_may_write_logs_and_metrics_on_its_project_and_nothing_more() -> None:
    for role in ("roles/logging.logWriter", "roles/monitoring.metricWriter"):
        assert check_stack(pack.server_identity_least_privilege, _gcp_project_role(role)).violations == []
    report = check_stack(pack.server_identity_least_privilege, _gcp_project_role("roles/logging.admin"))
    assert report.messages() == [
        "the servers' identity holds roles/logging.admin on project p, which inferstack never grants: the servers "
        "read their model prefix (roles/storage.objectViewer on the bucket, under a prefix condition) and their own "
        "secrets (roles/secretmanager.secretAccessor), nothing else; remove it"]


LOG_GROUP_ARN = "arn:aws:logs:us-east-1:123456789012:log-group:inferstack/demo/prod/server"
AWS_TELEMETRY = [
    {"Sid": "WriteServerLogs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:DescribeLogStreams"],
     "Resource": [LOG_GROUP_ARN, f"{LOG_GROUP_ARN}:*"]},
    {"Sid": "PutServerLogEvents", "Effect": "Allow", "Action": "logs:PutLogEvents",
     "Resource": f"{LOG_GROUP_ARN}:log-stream:*"},
    {"Sid": "PutServerMetrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
     "Condition": {"StringEquals": {"cloudwatch:namespace": "inferstack/demo/prod/server"}}},
    {"Sid": "ReadOwnGroupTag", "Effect": "Allow", "Action": "ec2:DescribeTags", "Resource": "*"}]


def _with_log_group(resources: list[Resource]) -> list[Resource]:
    return [*resources, Resource(AWS_LOG_GROUP, "server-logs",
                                 {"arn": LOG_GROUP_ARN, "name": "inferstack/demo/prod/server"})]


def test_the_aws_server_role_writing_its_own_log_group_and_namespace_passes() -> None:
    stack = _with_log_group(_aws_identity(AWS_READ + AWS_TELEMETRY))
    assert check_stack(pack.server_identity_least_privilege, stack).violations == []


def test_the_aws_server_role_may_not_write_every_log_group_or_every_namespace() -> None:
    statements = [
        {"Sid": "Logs", "Effect": "Allow", "Action": "logs:PutLogEvents", "Resource": "*"},
        {"Sid": "Metrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"}]
    report = check_stack(pack.server_identity_least_privilege, _with_log_group(_aws_identity(AWS_READ + statements)))
    assert report.messages() == [
        "the servers' identity may logs:PutLogEvents on * (statement Logs), which is not a log group of this stack: "
        "grant the stack's own log group (and its streams) only",
        "the servers' identity may cloudwatch:PutMetricData (statement Metrics) in any namespace: add a StringEquals "
        "cloudwatch:namespace condition naming the stack's own"]


def test_the_aws_server_role_may_not_write_another_stacks_namespace() -> None:
    """A server writing another fleet's namespace could feed (or silence) that fleet's GPU-memory and disk alarms."""
    elsewhere = [{**statement, "Condition": {"StringEquals": {"cloudwatch:namespace": "inferstack/other/prod/server"}}}
                 if statement["Sid"] == "PutServerMetrics" else statement for statement in AWS_TELEMETRY]
    report = check_stack(pack.server_identity_least_privilege, _with_log_group(_aws_identity(AWS_READ + elsewhere)))
    assert report.messages() == [
        "the servers' identity may cloudwatch:PutMetricData (statement PutServerMetrics) in namespace "
        "inferstack/other/prod/server, which is not this stack's (its log groups' names: inferstack/demo/prod/server): "
        "name the stack's own namespace"]


#### cdn-https-front-ends ####


def _gcp_front_end(*, with_http: bool) -> list[Resource]:
    stack = [
        Resource(GCP_BACKEND_BUCKET, "assets-backend", {"name": "assets-backend-1", "enableCdn": True,
                                                        "bucketName": BUCKET}),
        Resource(GCP_URL_MAP, "assets-urls", {"name": "urls-1", "defaultService":
                                              "projects/p/global/backendBuckets/assets-backend-1"},
                 {"defaultService": ["assets-backend"]}),
        Resource("gcp:compute/targetHttpsProxy:TargetHttpsProxy", "assets-https",
                 {"urlMap": "projects/p/global/urlMaps/urls-1"}, {"urlMap": ["assets-urls"]})]
    if with_http:
        stack.append(Resource(GCP_HTTP_PROXY, "assets-http", {"urlMap": "projects/p/global/urlMaps/urls-1"}))
    return stack


def test_a_google_cdn_backend_is_served_over_https_only() -> None:
    assert check_stack(pack.cdn_https_front_ends, _gcp_front_end(with_http=False)).violations == []
    report = check_stack(pack.cdn_https_front_ends, _gcp_front_end(with_http=True))
    assert report.messages() == [
        "assets-http serves the CDN backend assets-backend over plain HTTP: serve it through a TargetHttpsProxy "
        "only, and redirect port 80 with a URL map whose defaultUrlRedirect has httpsRedirect"]


def _alibaba_cdn(functions: dict[str, dict[str, str]]) -> list[Resource]:
    domain = Resource(ALI_CDN_DOMAIN, "assets-cdn", {"domainName": "static.example.com", "sources": [
        {"type": "oss", "content": f"{BUCKET}.oss-ap-southeast-1.aliyuncs.com", "port": 443.0}]})
    configs = [Resource(ALI_CDN_CONFIG, f"assets-cdn-{name}", {
        "domainName": "static.example.com", "functionName": name,
        "functionArgs": [{"argName": k, "argValue": v} for k, v in args.items()]}) for name, args in functions.items()]
    return [domain, *configs]


def test_an_alibaba_cdn_domain_forces_https_and_signs_origin_requests() -> None:
    complete = {"https_force": {"enable": "on", "https_rewrite": "301"}, "l2_oss_key": {"private_oss_auth": "on"}}
    assert check_stack(pack.cdn_https_front_ends, _alibaba_cdn(complete)).violations == []
    assert check_stack(pack.cdn_https_front_ends, _alibaba_cdn({})).messages() == [
        "CDN domain static.example.com does not force HTTPS: add a DomainConfig https_force with enable=on",
        "CDN domain static.example.com reads its OSS origin without back-to-origin authentication, so the bucket "
        "would have to be public: add a DomainConfig l2_oss_key with private_oss_auth=on"]


def test_cdn_front_ends_are_not_applicable_to_cloudfront() -> None:
    report = check_stack(pack.cdn_https_front_ends, [Resource(AWS_DISTRIBUTION, "assets-cdn", {})])
    assert report.violations == [] and len(report.not_applicable) == 1


#### public-api-has-api-key ####

WORLD_API = Resource(AWS_INGRESS_RULE, "firewall-api", {"ipProtocol": "tcp", "fromPort": 8000.0,
                                                               "toPort": 8000.0, "cidrIpv4": "0.0.0.0/0"})
API_KEY_FIX = ("store it as a secret the servers' identity may read (`pulumi config set --secret inferstack:apiKey "
               "\"$(openssl rand -hex 32)\"`), or admit private networks only")


@pytest.mark.parametrize("cloud", ["aws", "gcp", "alibaba", "huawei"])
def test_a_world_open_api_with_an_api_key_the_servers_identity_reads_passes(cloud: str) -> None:
    """The API key and the identity that reads it, as each cloud's create_secrets and create_identity make them."""
    stack = [WORLD_API, *fleets.API_KEYS[cloud]()]
    if cloud == "gcp":  # a Google service account is the servers' once a server or template takes it
        stack.append(Resource(GCP_INSTANCE_TEMPLATE, "template", {"serviceAccount": {"email": fleets.GCP_EMAIL}}))
    assert check_stack(pack.public_api_has_api_key, stack).violations == []


def test_a_world_open_api_without_an_api_key_is_a_mandatory_violation() -> None:
    report = check_stack(pack.public_api_has_api_key, [WORLD_API, Resource(AWS_PARAMETER, "secrets-hub-token",
                                                                            {})])
    assert [(v.level.value, v.urn) for v in report.violations] == [("mandatory", WORLD_API.urn)]
    assert report.messages() == [
        "port 8000 is open to the whole internet (0.0.0.0/0), and the stack stores no API key (no secret resource "
        f"named '*-api-key'): {API_KEY_FIX}"]


def test_an_api_open_to_named_public_networks_needs_a_key_too() -> None:
    named = Resource(AWS_INGRESS_RULE, "firewall-api", {**WORLD_API.props, "cidrIpv4": "203.0.113.0/24"})
    assert check_stack(pack.public_api_has_api_key, [named]).messages() == [
        "port 8000 is open to public network 203.0.113.0/24, and the stack stores no API key (no secret resource "
        f"named '*-api-key'): {API_KEY_FIX}"]

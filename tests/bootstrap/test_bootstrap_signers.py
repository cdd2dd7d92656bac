"""Every signature the boot programs compute equals the one the cloud's own SDK computes for the same request
(vendor_signers): AWS (botocore), Alibaba OSS V4 (alibabacloud-oss-v2), Alibaba RPC (alibabacloud-tea-openapi),
Huawei OBS (esdk-obs-python) and Huawei API Gateway (huaweicloudsdkcore). The keys and paths are the hard
cases: space, '+', '=', '%', '~', sub-delimiters, non-ASCII."""

from __future__ import annotations

import datetime
import inspect
import json
import re
import urllib.parse

import cloud_access
import pytest
import vendor_signers as vendor
from bootstrap_fakes import ACCESS_KEY, SECRET_KEY, SESSION_TOKEN
from cloud_access import Credentials, ObjectStore, Request

FIXED_TIME = datetime.datetime(2025, 6, 1, 12, 30, 45, tzinfo=datetime.timezone.utc)
CREDENTIALS = Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)
KEYS = [
    "models/llama-3.1-8b/model-00001-of-00002.safetensors",
    "models/llama 3/a+b=c%20d.gguf",
    "models/ünïcødé/模型.bin",
    "odd/~tilde(x)!*'&$,;@:.bin",
]


#### AWS ####


class _Captured(Exception):
    pass


def _botocore_request(service: str, operation: str, **params: object):  # type: ignore[no-untyped-def]
    """The request botocore's own client sends for `operation` (captured before it leaves)."""
    import boto3

    client = boto3.client(service, region_name="eu-west-1", aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, aws_session_token=SESSION_TOKEN)
    captured = []

    def capture(request, **_: object) -> None:  # type: ignore[no-untyped-def]
        captured.append(request)
        raise _Captured

    client.meta.events.register("before-send", capture)
    with pytest.raises(_Captured):
        getattr(client, operation)(**params)
    return captured[0]


@pytest.mark.parametrize("key", KEYS)
def test_s3_object_path_is_botocores_and_its_signature_equals_s3sigv4auths(key: str) -> None:
    store = ObjectStore("aws", "eu-west-1", "models-bucket")
    signed = store.signed_get(key, CREDENTIALS, (0, 1048575))
    # The key URI-encoded once, as botocore puts it in the URL...
    reference = _botocore_request("s3", "get_object", Bucket="models-bucket", Key=key)
    assert urllib.parse.urlsplit(signed.url).path == urllib.parse.urlsplit(reference.url).path
    # ...and signed as that same path: S3's canonical URI is not encoded a second time.
    assert signed.headers["Authorization"] == vendor.aws_authorization(
        "GET", signed.url, signed.headers, b"", "s3", "eu-west-1")
    assert signed.headers["X-Amz-Security-Token"] == SESSION_TOKEN


def test_ssm_get_parameter_is_the_request_botocore_sends_and_carries_its_signature(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    import fetch_secret

    captured = {}

    def fake_send(build, read, **options):  # type: ignore[no-untyped-def]
        captured["request"] = build()
        return {"Parameter": {"Value": "v"}}

    store = argparse.Namespace(endpoint="https://ssm.eu-west-1.amazonaws.com", region="eu-west-1",
                               credentials=CREDENTIALS, retry=cloud_access.Retry())
    monkeypatch.setattr(fetch_secret, "send", fake_send)
    assert fetch_secret.read_aws("/app/api key", store) == "v"
    ours: Request = captured["request"]
    reference = _botocore_request("ssm", "get_parameter", Name="/app/api key", WithDecryption=True)
    assert (ours.method, ours.url) == (reference.method, reference.url)
    assert json.loads(ours.body) == json.loads(reference.body)
    for header in ("Content-Type", "X-Amz-Target"):
        assert ours.headers[header].encode() == reference.headers[header]  # botocore's are bytes once prepared
    assert ours.headers["Authorization"] == vendor.aws_authorization(
        "POST", ours.url, ours.headers, ours.body, "ssm", "eu-west-1")


@pytest.mark.parametrize("path", ["/", "/a%20b/c%2Bd", "/%C3%BCber/x~y"])
def test_aws_signature_of_other_services_encodes_the_path_twice_as_botocore_does(path: str) -> None:
    signed = cloud_access.sign_aws_v4(Request("GET", f"https://ssm.eu-west-1.amazonaws.com{path}?b=2&a=1", {}),
                                      CREDENTIALS, "eu-west-1", "ssm", now=FIXED_TIME)
    assert signed.headers["Authorization"] == vendor.aws_authorization(
        "GET", signed.url, signed.headers, b"", "ssm", "eu-west-1")


@pytest.mark.parametrize(("action", "operation", "params"), [
    ("CompleteLifecycleAction", "complete_lifecycle_action", {
        "AutoScalingGroupName": "chat-group-1a2b3c4", "LifecycleHookName": "inferstack-boot",
        "InstanceId": "i-0123456789abcdef0", "LifecycleActionResult": "CONTINUE"}),
    ("DescribeAutoScalingInstances", "describe_auto_scaling_instances", {"InstanceIds": ["i-0123456789abcdef0"]}),
])
def test_auto_scaling_lifecycle_calls_are_the_requests_botocore_sends_with_its_signature(
        action: str, operation: str, params: dict[str, object]) -> None:
    flat = {"InstanceIds.member.1": "i-0123456789abcdef0"} if action.startswith("Describe") else params
    ours = cloud_access.aws_query_request("autoscaling", action, flat, CREDENTIALS,  # type: ignore[arg-type]
                                          "eu-west-1", now=FIXED_TIME)
    reference = _botocore_request("autoscaling", operation, **params)
    assert (ours.method, ours.url) == (reference.method, reference.url)
    body = reference.body if isinstance(reference.body, str) else reference.body.decode()
    assert urllib.parse.parse_qs(ours.body.decode()) == urllib.parse.parse_qs(body)
    assert ours.headers["Content-Type"].encode() == reference.headers["Content-Type"]
    assert ours.headers["X-Amz-Security-Token"].encode() == reference.headers["X-Amz-Security-Token"]
    assert ours.headers["Authorization"] == vendor.aws_authorization(
        "POST", ours.url, ours.headers, ours.body, "autoscaling", "eu-west-1")
    assert "/eu-west-1/autoscaling/aws4_request" in ours.headers["Authorization"]


#### Alibaba Cloud ####


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("byte_range", [None, (1048576, 2097151)])
def test_oss_object_requests_carry_the_v4_signature_of_alibabas_sdk(key: str, byte_range: tuple[int, int] | None
                                                                   ) -> None:
    signed = ObjectStore("alibaba", "cn-hangzhou", "models-bucket").signed_get(key, CREDENTIALS, byte_range)
    assert signed.headers["Authorization"].startswith(
        f"OSS4-HMAC-SHA256 Credential={ACCESS_KEY}/{signed.headers['x-oss-date'][:8]}/cn-hangzhou/oss/"
        "aliyun_v4_request,Signature=")
    assert signed.headers["x-oss-content-sha256"] == "UNSIGNED-PAYLOAD"
    assert signed.headers["x-oss-security-token"] == SESSION_TOKEN
    assert signed.headers["Authorization"] == vendor.oss_v4_authorization(
        "GET", signed.url, signed.headers, "cn-hangzhou", "models-bucket", key)


def test_oss_v4_signature_is_the_sdks_at_a_fixed_time_and_path_style_endpoint() -> None:
    request = Request("GET", "http://127.0.0.1:9000/models-bucket/a%20b.bin", {"Range": "bytes=0-9"})
    signed = cloud_access.sign_oss_v4(request, CREDENTIALS, "ap-southeast-1", "models-bucket", "a b.bin",
                                      now=FIXED_TIME)
    assert signed.headers["x-oss-date"] == "20250601T123045Z"
    assert signed.headers["Authorization"] == vendor.oss_v4_authorization(
        "GET", signed.url, signed.headers, "ap-southeast-1", "models-bucket", "a b.bin")


@pytest.mark.parametrize("secret_name", ["api-key", "team/app api+key=1", "ünï"])
def test_alibaba_rpc_signature_equals_the_sdks(secret_name: str) -> None:
    params = {"Action": "GetSecretValue", "SecretName": secret_name, "Version": "2016-01-20", "Format": "JSON"}
    signed = cloud_access.sign_alibaba_rpc(params, CREDENTIALS)
    assert signed["Signature"] == vendor.alibaba_rpc_signature(signed)
    assert signed["SecurityToken"] == SESSION_TOKEN


# The three calls of a server's lifecycle step (cloud_access.complete_lifecycle_action), as the ESS SDK makes them.
ESS_CALLS = [
    ("DescribeScalingInstances", {"InstanceIds.1": "i-0abc123"}, {"InstanceIds": ["i-0abc123"]}),
    ("DescribeLifecycleActions", {"ScalingActivityId": "asa-0abc", "LifecycleActionStatus": "Pending"},
     {"ScalingActivityId": "asa-0abc", "LifecycleActionStatus": "Pending"}),
    ("CompleteLifecycleAction", {"LifecycleHookId": "ash-0abc", "LifecycleActionToken": "tok/en+1=",
                                 "LifecycleActionResult": "CONTINUE"},
     {"LifecycleHookId": "ash-0abc", "LifecycleActionToken": "tok/en+1=", "LifecycleActionResult": "CONTINUE"}),
]


@pytest.mark.parametrize(("action", "ours", "sdk_query"), ESS_CALLS)
@pytest.mark.parametrize("region", ["eu-central-1", "ap-southeast-1"])  # a regional endpoint, and the central one
def test_ess_lifecycle_calls_are_the_requests_alibabas_sdk_sends_with_its_signature(
        action: str, ours: dict[str, str], sdk_query: dict[str, object], region: str) -> None:
    request = cloud_access.ess_request(action, ours, CREDENTIALS, region)
    parts = urllib.parse.urlsplit(request.url)
    reference = vendor.alibaba_sdk_rpc_request(action, cloud_access.ESS_API_VERSION, {**sdk_query, "RegionId": region},
                                               region, parts.netloc)
    params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    assert (request.method, parts.scheme, parts.path, request.body) == (
        reference.method, reference.protocol.lower(), reference.pathname, b"")
    assert reference.body is None
    varying = ("Timestamp", "SignatureNonce", "Signature")  # the time, a random nonce, and what signs both
    assert {k: v for k, v in params.items() if k not in varying} == {
        k: v for k, v in reference.query.items() if k not in varying}
    assert params["Signature"] == vendor.alibaba_rpc_signature(params, "POST")


def test_ess_endpoints_follow_the_sdks_rule_for_regions_outside_its_map() -> None:
    from alibabacloud_tea_openapi.utils import Utils

    for region in ("eu-central-1", "me-central-1", "cn-zhangjiakou"):
        assert cloud_access.ess_endpoint(region) == "https://" + Utils.get_endpoint_rules(
            "ess", region, "regional", "", "")
    assert cloud_access.ess_endpoint("ap-southeast-1") == "https://ess.aliyuncs.com"


def test_ess_endpoints_are_the_ess_sdks_own_in_every_region_it_maps() -> None:
    client_module = pytest.importorskip("alibabacloud_ess20220222.client")
    source = inspect.getsource(client_module.Client.__init__)
    mapped = dict(re.findall(r"'([a-z0-9-]+)': '(ess[a-z0-9.-]*\.aliyuncs\.com)'", source))
    assert len(mapped) > 40
    for region, host in mapped.items():
        assert cloud_access.ess_endpoint(region) == f"https://{host}", region


#### Huawei Cloud ####


@pytest.mark.parametrize("key", KEYS)
def test_obs_object_requests_carry_the_signature_of_huaweis_obs_sdk(key: str) -> None:
    signed = ObjectStore("huawei", "ap-southeast-3", "models-bucket").signed_get(key, CREDENTIALS, (0, 99))
    assert signed.headers["x-obs-security-token"] == SESSION_TOKEN
    assert signed.headers["Authorization"] == vendor.obs_authorization("GET", signed.headers, "models-bucket", key)


# The API Gateway requests that matter: CSMS's (a secret name needing encoding), one with a query string, one with
# a body, one whose path ends with a slash, one that is not ASCII once decoded.
APIG_REQUESTS = [
    ("GET", "https://kms.ap-southeast-3.myhuaweicloud.com/v1/0123/secrets/api-key/versions/latest", b""),
    ("GET", "https://kms.ap-southeast-3.myhuaweicloud.com/v1/0123/secrets/my%20secret%2B1/versions/latest", b""),
    ("GET", "https://kms.ap-southeast-3.myhuaweicloud.com/v1/0123/secrets?limit=10&marker=a%20b&event_name=", b""),
    ("POST", "https://kms.ap-southeast-3.myhuaweicloud.com/v1/0123/secrets/api-key/versions",
     b'{"secret_string": "s3cr3t"}'),
    ("GET", "https://kms.ap-southeast-3.myhuaweicloud.com/v1/0123/secrets/", b""),
    ("GET", "https://kms.ap-southeast-3.myhuaweicloud.com/v1/0123/secrets/%C3%BCber", b""),
]


@pytest.mark.parametrize(("method", "url", "body"), APIG_REQUESTS)
def test_api_gateway_signature_equals_huaweicloudsdkcores(method: str, url: str, body: bytes) -> None:
    signed = cloud_access.sign_huawei_apig(Request(method, url, {"Content-Type": "application/json"}, body),
                                           CREDENTIALS, now=FIXED_TIME)
    assert signed.headers["X-Sdk-Date"] == "20250601T123045Z"
    assert signed.headers["Authorization"] == vendor.apig_authorization(method, url, signed.headers, body)

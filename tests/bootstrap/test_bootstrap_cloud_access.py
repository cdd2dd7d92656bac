"""The boot programs' cloud access: instance credentials from each cloud's metadata server, request signatures
checked against a reference (botocore) or the cloud's documented example, and secret fetching."""

from __future__ import annotations

import datetime
import os
import stat
from pathlib import Path

import cloud_access
import fetch_secret
import pytest
from bootstrap_fakes import ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, free_port
from cloud_access import AccessError, Credentials, Request

FIXED_TIME = datetime.datetime(2025, 6, 1, 12, 30, 45, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize(
    ("cloud", "expected"),
    [
        ("aws", Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)),
        ("gcp", Credentials(bearer_token="gcp-test-token")),
        ("alibaba", Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)),
        ("huawei", Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)),
    ],
)
def test_instance_credentials_come_from_each_clouds_metadata_server(
        metadata_url: str, cloud: str, expected: Credentials) -> None:
    assert cloud_access.instance_credentials(cloud, metadata_url) == expected


def _botocore_authorization(signed: Request, service: str, region: str, monkeypatch: pytest.MonkeyPatch) -> str:
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: FIXED_TIME.replace(tzinfo=None))
    headers = {k: v for k, v in signed.headers.items() if k != "Authorization"}
    reference = AWSRequest(method=signed.method, url=signed.url, headers=headers, data=signed.body)
    botocore.auth.SigV4Auth(BotoCredentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), service, region).add_auth(reference)
    return str(reference.headers["Authorization"])


@pytest.mark.parametrize(
    ("method", "url", "service", "body", "extra_headers"),
    [
        ("GET", "https://models.s3.us-east-1.amazonaws.com/models/llama 3/model-00001.safetensors", "s3", b"",
         {"Range": "bytes=0-1048575"}),
        ("POST", "https://ssm.eu-west-1.amazonaws.com/", "ssm", b'{"Name": "api-key", "WithDecryption": true}',
         {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "AmazonSSM.GetParameter"}),
        ("GET", "http://127.0.0.1:9000/bucket/key?list-type=2&prefix=a%2Fb", "s3", b"", {}),
    ],
)
def test_aws_signature_v4_equals_botocores(monkeypatch: pytest.MonkeyPatch, method: str, url: str, service: str,
                                           body: bytes, extra_headers: dict[str, str]) -> None:
    region = "eu-west-1" if service == "ssm" else "us-east-1"
    credentials = Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)
    signed = cloud_access.sign_aws_v4(Request(method, url, dict(extra_headers), body), credentials, region, service,
                                      now=FIXED_TIME)
    assert signed.headers["Authorization"] == _botocore_authorization(signed, service, region, monkeypatch)
    assert signed.headers["X-Amz-Security-Token"] == SESSION_TOKEN


def test_huawei_signature_matches_the_signing_guides_worked_example() -> None:
    # Huawei Cloud API Request Signing Guide: SK MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc signs the string below
    # (hashed canonical request b25362e6…) into signature 7be66680…
    string_to_sign = ("SDK-HMAC-SHA256\n20191115T033655Z\n"
                      "b25362e603ee30f4f25e7858e8a7160fd36e803bb2dfe206278659d71a9bcd7a")
    import hashlib
    import hmac

    signature = hmac.new(b"MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc", string_to_sign.encode(), hashlib.sha256)
    assert signature.hexdigest() == "7be6668032f70418fcc22abc52071e57aff61b84a1d2381bb430d6870f4f6ebe"
    assert cloud_access.huawei_string_to_sign("20191115T033655Z", "x").startswith("SDK-HMAC-SHA256\n20191115T033655Z\n")


def test_huawei_signed_request_carries_the_agency_token_and_a_signed_date() -> None:
    signed = cloud_access.sign_huawei_apig(
        Request("GET", "https://kms.ap-southeast-3.myhuaweicloud.com/v1/p/secrets/k/versions/latest", {}),
        Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), now=FIXED_TIME)
    assert signed.headers["X-Sdk-Date"] == "20250601T123045Z"
    assert signed.headers["X-Security-Token"] == SESSION_TOKEN
    assert signed.headers["Authorization"].startswith(
        f"SDK-HMAC-SHA256 Access={ACCESS_KEY}, SignedHeaders=host;x-sdk-date;x-security-token, Signature=")


def test_alibaba_rpc_signature_matches_the_documented_example() -> None:
    # Alibaba Cloud RPC signature example (ECS DescribeRegions, AccessKey testid / testsecret).
    params = {"Action": "DescribeRegions", "Format": "XML", "Version": "2014-05-26"}
    signed = cloud_access.sign_alibaba_rpc(
        params, Credentials("testid", "testsecret"), nonce="3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf",
        now=datetime.datetime(2016, 2, 23, 12, 46, 24, tzinfo=datetime.timezone.utc))
    assert signed["Signature"] == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="


@pytest.mark.parametrize(("scheme", "token_header"), [("OSS", "x-oss-security-token"),
                                                      ("OBS", "x-obs-security-token")])
def test_oss_and_obs_header_signature_signs_the_token_and_the_bucket_resource(scheme: str, token_header: str) -> None:
    import base64
    import hashlib
    import hmac

    signed = cloud_access.sign_header_hmac_sha1(
        Request("GET", "https://b.example/models/m.gguf", {"Range": "bytes=0-9"}),
        Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), scheme, "b", "models/m.gguf", now=FIXED_TIME)
    expected_string = (f"GET\n\n\nSun, 01 Jun 2025 12:30:45 GMT\n{token_header}:{SESSION_TOKEN}\n/b/models/m.gguf")
    digest = hmac.new(SECRET_KEY.encode(), expected_string.encode(), hashlib.sha1).digest()
    assert signed.headers["Authorization"] == f"{scheme} {ACCESS_KEY}:{base64.b64encode(digest).decode()}"
    assert signed.headers[token_header] == SESSION_TOKEN


def test_object_urls_use_each_clouds_internal_or_regional_endpoint() -> None:
    urls = {cloud: cloud_access.ObjectStore(cloud, "ap-southeast-1", "models").url("m/a b.bin")
            for cloud in cloud_access.CLOUDS}
    assert urls == {
        "aws": "https://models.s3.ap-southeast-1.amazonaws.com/m/a%20b.bin",
        "gcp": "https://storage.googleapis.com/models/m/a%20b.bin",
        "alibaba": "https://models.oss-ap-southeast-1-internal.aliyuncs.com/m/a%20b.bin",
        "huawei": "https://models.obs.ap-southeast-1.myhuaweicloud.com/m/a%20b.bin",
    }


def test_an_unreachable_endpoint_is_retried_then_fails_naming_the_host(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/nothing"
    with pytest.raises(AccessError, match=r"failed after 3 attempts: .*127\.0\.0\.1"):
        cloud_access.send(lambda: Request("GET", url, {}), attempts=3, backoff_s=0.01, what="GET nothing")
    assert capsys.readouterr().err.count("retry GET nothing") == 2


def test_secrets_are_fetched_from_ssm_into_a_root_only_env_file(metadata_url: str, s3_endpoint: str,
                                                               tmp_path: Path) -> None:
    import boto3

    ssm = boto3.client("ssm", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id=ACCESS_KEY,
                       aws_secret_access_key=SECRET_KEY)
    ssm.put_parameter(Name="/inferstack/test/api-key", Value="sk-test-0123456789", Type="SecureString",
                      Overwrite=True)
    ssm.put_parameter(Name="/inferstack/test/hub-token", Value="hf_test0123", Type="SecureString", Overwrite=True)
    out = tmp_path / "run" / "secrets.env"
    code = fetch_secret.main(["--cloud", "aws", "--region", "us-east-1",
                              "--secret", "VLLM_API_KEY=/inferstack/test/api-key",
                              "--secret", "HF_TOKEN=/inferstack/test/hub-token", "--out", str(out),
                              "--endpoint", s3_endpoint, "--metadata-endpoint", metadata_url])
    assert code == 0
    assert out.read_text() == "VLLM_API_KEY=sk-test-0123456789\nHF_TOKEN=hf_test0123\n"
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_a_secret_argument_without_an_env_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        fetch_secret.main(["--cloud", "aws", "--region", "us-east-1", "--secret", "/app/api-key", "--out", "x"])
    assert exit_info.value.code == 2
    assert "expected ENV_NAME=secret-name, got '/app/api-key'" in capsys.readouterr().err


def test_missing_secret_fails_without_writing_the_env_file(metadata_url: str, s3_endpoint: str,
                                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "secrets.env"
    code = fetch_secret.main(["--cloud", "aws", "--region", "us-east-1", "--secret", "API_KEY=/no/such/parameter",
                              "--out", str(out), "--endpoint", s3_endpoint, "--metadata-endpoint", metadata_url])
    assert code == 4
    assert not out.exists()
    assert "cannot read '/no/such/parameter' from the aws secret store: SSM GetParameter" in capsys.readouterr().err

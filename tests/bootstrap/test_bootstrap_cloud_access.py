"""The boot programs' cloud access: instance credentials from each cloud's metadata server, request signatures
checked against the cloud's documented example (the SDK comparisons are in test_bootstrap_signers.py), object
URLs, and secret fetching from a real SSM server (moto)."""

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


def test_object_urls_use_each_clouds_internal_or_regional_endpoint_with_the_key_encoded_once() -> None:
    urls = {cloud: cloud_access.ObjectStore(cloud, "ap-southeast-1", "models").url("m/a b+c%.bin")
            for cloud in cloud_access.CLOUDS}
    assert urls == {
        "aws": "https://models.s3.ap-southeast-1.amazonaws.com/m/a%20b%2Bc%25.bin",
        "gcp": "https://storage.googleapis.com/models/m/a%20b%2Bc%25.bin",
        "alibaba": "https://models.oss-ap-southeast-1-internal.aliyuncs.com/m/a%20b%2Bc%25.bin",
        "huawei": "https://models.obs.ap-southeast-1.myhuaweicloud.com/m/a%20b%2Bc%25.bin",
    }


def test_an_endpoint_override_addresses_the_bucket_path_style() -> None:
    store = cloud_access.ObjectStore("huawei", "ap-southeast-1", "models", endpoint="http://127.0.0.1:9000/")
    assert store.url("m/ü.bin") == "http://127.0.0.1:9000/models/m/%C3%BC.bin"


def test_an_unreachable_endpoint_is_retried_then_fails_naming_the_host(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/nothing"
    with pytest.raises(AccessError, match=r"failed after 3 attempts: .*127\.0\.0\.1"):
        cloud_access.send(lambda: Request("GET", url, {}), cloud_access.read_text,
                          retry=cloud_access.Retry(attempts=3, backoff_s=0.01), what="GET nothing")
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

"""The boot programs' cloud access: instance credentials from each cloud's metadata server, request signatures
checked against the cloud's documented example (the SDK comparisons are in test_bootstrap_signers.py), object
URLs, and secret fetching from a real SSM server (moto)."""

from __future__ import annotations

import datetime
import json
import os
import stat
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import cloud_access
import fetch_secret
import pytest
import vendor_signers as vendor
from bootstrap_fakes import (
    ACCESS_KEY,
    AWS_INSTANCE_ID,
    SECRET_KEY,
    SESSION_TOKEN,
    QuietHandler,
    free_port,
    metadata_server,
)
from cloud_access import AccessError, Credentials, CredentialSource, Request, Retry

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


#### Alibaba: a fleet server completes its own scale-out ####


class _EssHandler(QuietHandler):
    """ESS on loopback: checks each request's signature as ESS would (403 on a mismatch) and answers the lifecycle
    calls for one server waiting in one hook."""

    def do_POST(self) -> None:
        server: _EssServer = self.server  # type: ignore[assignment]
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query, keep_blank_values=True))
        server.calls.append(params)
        if server.refuse or params.get("Signature") != vendor.alibaba_rpc_signature(params, "POST"):
            return self._reply(403, json.dumps({"Code": "Forbidden.RAM"}))
        action = params["Action"]
        if action == "DescribeScalingInstances":
            instance = params["InstanceIds.1"]
            return self._reply(200, json.dumps({"ScalingInstances": [{
                "InstanceId": instance, "LifecycleState": server.state, "ScalingActivityId": "asa-1",
                "ScalingGroupId": "asg-1"}]}))
        if action == "DescribeLifecycleActions":
            return self._reply(200, json.dumps({"LifecycleActions": [
                {"InstanceIds": ["i-other"], "LifecycleHookId": "ash-1", "LifecycleActionToken": "other-token"},
                {"InstanceIds": ["i-mine"], "LifecycleHookId": "ash-1", "LifecycleActionToken": "my-token"}]}))
        return self._reply(200, json.dumps({"RequestId": "r-1"}))



class _EssServer(ThreadingHTTPServer):
    calls: list[dict[str, str]]
    state: str
    refuse: bool


@pytest.fixture
def ess() -> Iterator[_EssServer]:
    server = _EssServer(("127.0.0.1", 0), _EssHandler)
    server.calls, server.state, server.refuse = [], "Pending:Wait", False
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _complete(ess: _EssServer, metadata_url: str) -> str:
    endpoint = f"http://127.0.0.1:{ess.server_address[1]}"
    return cloud_access.complete_lifecycle_action("eu-central-1", "i-mine", CredentialSource("alibaba", metadata_url),
                                                  endpoint, Retry(attempts=1))


def test_a_server_waiting_in_the_hook_completes_its_own_action_with_continue(ess: _EssServer,
                                                                             metadata_url: str) -> None:
    assert _complete(ess, metadata_url) == "i-mine completed its scale-out (CONTINUE, hook ash-1)"
    assert [call["Action"] for call in ess.calls] == [
        "DescribeScalingInstances", "DescribeLifecycleActions", "CompleteLifecycleAction"]
    assert ess.calls[1]["ScalingActivityId"] == "asa-1" and ess.calls[1]["LifecycleActionStatus"] == "Pending"
    done = ess.calls[2]
    assert (done["LifecycleHookId"], done["LifecycleActionToken"], done["LifecycleActionResult"], done["RegionId"]) == (
        "ash-1", "my-token", "CONTINUE", "eu-central-1")  # its own token, not the other server's
    assert {call["SecurityToken"] for call in ess.calls} == {SESSION_TOKEN}  # the RAM role's credentials


def test_a_server_already_in_service_completes_nothing(ess: _EssServer, metadata_url: str) -> None:
    ess.state = "InService"
    assert _complete(ess, metadata_url) == "i-mine is InService: no lifecycle action to complete"
    assert [call["Action"] for call in ess.calls] == ["DescribeScalingInstances"]


def test_a_server_without_the_grant_is_outside_a_group_and_completes_nothing(ess: _EssServer,
                                                                              metadata_url: str) -> None:
    ess.refuse = True
    assert "no ESS grant" in _complete(ess, metadata_url)
    assert [call["Action"] for call in ess.calls] == ["DescribeScalingInstances"]


def test_the_boot_step_fails_loudly_when_ess_cannot_be_reached(
        metadata_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A server that cannot complete its action must not look ready: the hook then releases it at its timeout."""
    monkeypatch.setattr(cloud_access, "alibaba_instance_id", lambda endpoint, retry: "i-mine")
    monkeypatch.setattr(cloud_access, "Retry", lambda **options: Retry(attempts=1, backoff_s=0.01))
    code = cloud_access.main(["complete-lifecycle-action", "--region", "eu-central-1", "--metadata-endpoint",
                              metadata_url, "--endpoint", f"http://127.0.0.1:{free_port()}"])
    assert code == 1 and "ESS DescribeScalingInstances failed" in capsys.readouterr().err


#### AWS: a server of a group with a warm pool completes its own launch hook ####


class _AutoScalingHandler(QuietHandler):
    """Auto Scaling's Query API on loopback: checks each request's SigV4 signature as AWS would (403 on a mismatch)
    and answers for one server in `state`."""

    def do_POST(self) -> None:
        server: _AutoScalingServer = self.server  # type: ignore[assignment]
        body = self.rfile.read(int(self.headers["Content-Length"]))
        params = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
        server.calls.append(params)
        url = f"http://{self.headers['Host']}{self.path}"
        authorization = self.headers.get("Authorization", "")
        signed = authorization.partition("SignedHeaders=")[2].partition(",")[0].split(";")
        headers = {name: value for name, value in self.headers.items() if name.lower() in signed}
        if authorization != vendor.aws_authorization("POST", url, headers, body, "autoscaling", "eu-west-1"):
            return self._reply(403, "<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code></Error></ErrorResponse>")
        if params["Action"] == "DescribeAutoScalingInstances":
            member = (f"<member><InstanceId>{params['InstanceIds.member.1']}</InstanceId><AutoScalingGroupName>"
                      f"chat-group-1a2b3c4</AutoScalingGroupName><LifecycleState>{server.state}</LifecycleState>"
                      "</member>") if server.state else ""
            return self._reply(200, '<DescribeAutoScalingInstancesResponse xmlns="http://autoscaling.amazonaws.com/'
                                    f'doc/2011-01-01/"><DescribeAutoScalingInstancesResult><AutoScalingInstances>'
                                    f"{member}</AutoScalingInstances></DescribeAutoScalingInstancesResult>"
                                    "</DescribeAutoScalingInstancesResponse>")
        return self._reply(200, '<CompleteLifecycleActionResponse xmlns="http://autoscaling.amazonaws.com/doc/'
                                '2011-01-01/"><CompleteLifecycleActionResult/></CompleteLifecycleActionResponse>')



class _AutoScalingServer(ThreadingHTTPServer):
    calls: list[dict[str, str]]
    state: str


@pytest.fixture
def autoscaling() -> Iterator[_AutoScalingServer]:
    server = _AutoScalingServer(("127.0.0.1", 0), _AutoScalingHandler)
    server.calls, server.state = [], "Warmed:Pending:Wait"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _complete_aws(autoscaling: _AutoScalingServer, metadata_url: str) -> str:
    return cloud_access.complete_aws_lifecycle_action(
        "eu-west-1", AWS_INSTANCE_ID, "inferstack-boot", CredentialSource("aws", metadata_url),
        f"http://127.0.0.1:{autoscaling.server_address[1]}", Retry(attempts=1))


@pytest.mark.parametrize("state", ["Warmed:Pending:Wait", "Pending:Wait"])
def test_an_aws_server_held_by_its_launch_hook_completes_it_on_its_own_group_with_continue(
        autoscaling: _AutoScalingServer, metadata_url: str, state: str) -> None:
    autoscaling.state = state
    assert _complete_aws(autoscaling, metadata_url) == (
        f"{AWS_INSTANCE_ID} completed its launch in chat-group-1a2b3c4 from {state} (CONTINUE, hook inferstack-boot)")
    described, completed = autoscaling.calls
    assert described == {"Action": "DescribeAutoScalingInstances", "Version": "2011-01-01",
                         "InstanceIds.member.1": AWS_INSTANCE_ID}
    assert completed == {"Action": "CompleteLifecycleAction", "Version": "2011-01-01",
                         "AutoScalingGroupName": "chat-group-1a2b3c4", "LifecycleHookName": "inferstack-boot",
                         "InstanceId": AWS_INSTANCE_ID, "LifecycleActionResult": "CONTINUE"}


@pytest.mark.parametrize("state", ["InService", "Warmed:Stopped", ""])
def test_an_aws_server_not_held_by_a_hook_completes_nothing(autoscaling: _AutoScalingServer, metadata_url: str,
                                                            state: str) -> None:
    autoscaling.state = state
    assert _complete_aws(autoscaling, metadata_url).endswith(": no lifecycle action to complete")
    assert [call["Action"] for call in autoscaling.calls] == ["DescribeAutoScalingInstances"]


@pytest.mark.parametrize(("state", "expected"), [("Warmed:Stopped", "Warmed:Stopped"), ("InService", "InService"),
                                                 (None, "")])
def test_an_aws_server_reads_its_target_lifecycle_state_with_a_session_token(state: str | None,
                                                                             expected: str) -> None:
    with metadata_server(target_lifecycle_state=state) as url:
        assert cloud_access.aws_target_lifecycle_state(url, Retry(attempts=1)) == expected
        assert cloud_access.aws_instance_metadata("instance-id", url, Retry(attempts=1)) == AWS_INSTANCE_ID


def test_the_aws_lifecycle_command_prints_the_target_state_and_completes_by_instance_id(
        autoscaling: _AutoScalingServer, capsys: pytest.CaptureFixture[str]) -> None:
    with metadata_server(target_lifecycle_state="Warmed:Stopped") as url:
        assert cloud_access.main(["target-lifecycle-state", "--metadata-endpoint", url]) == 0
        assert cloud_access.main(["complete-lifecycle-action", "--cloud", "aws", "--region", "eu-west-1", "--hook",
                                  "inferstack-boot", "--metadata-endpoint", url, "--endpoint",
                                  f"http://127.0.0.1:{autoscaling.server_address[1]}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["Warmed:Stopped", f"{AWS_INSTANCE_ID} completed its launch in chat-group-1a2b3c4 from "
                                     "Warmed:Pending:Wait (CONTINUE, hook inferstack-boot)"]

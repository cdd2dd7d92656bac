"""A streaming runtime's own credentials (files/cloud_access.py `runtime_credentials`): STS AssumeRole of the model's
reader role, signed with the instance's credentials, as botocore sends it (checked against botocore's own request
and signature), against a loopback STS that checks each signature as AWS would; the answer written to a root-only
env file for `docker run --env-file`."""

from __future__ import annotations

import datetime
import os
import stat
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import cloud_access
import pytest
import vendor_signers as vendor
from bootstrap_fakes import ACCESS_KEY, AWS_INSTANCE_ID, SECRET_KEY, SESSION_TOKEN, QuietHandler
from cloud_access import AccessError, Credentials, CredentialSource, Retry
from test_bootstrap_signers import _botocore_request

FIXED_TIME = datetime.datetime(2025, 6, 1, 12, 30, 45, tzinfo=datetime.timezone.utc)
ROLE = "arn:aws:iam::123456789012:role/chat-identity-model-reader-1a2b3c4"
ASSUMED = Credentials("ASIAREADERTEST000001", "reader/secret+key=", "FwoGZXIvYXdzEreader/session+token==")


#### The request: botocore's ####


def test_assume_role_is_the_request_botocore_sends_with_its_signature() -> None:
    params = {"RoleArn": ROLE, "RoleSessionName": f"inferstack-runtime-{AWS_INSTANCE_ID}", "DurationSeconds": "3600"}
    instance = Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)
    ours = cloud_access.aws_query_request("sts", "AssumeRole", params, instance, "eu-west-1", now=FIXED_TIME)
    reference = _botocore_request("sts", "assume_role", RoleArn=ROLE, RoleSessionName=params["RoleSessionName"],
                                  DurationSeconds=3600)
    assert (ours.method, ours.url) == (reference.method, reference.url) == ("POST", "https://sts.eu-west-1."
                                                                                     "amazonaws.com/")
    body = reference.body if isinstance(reference.body, str) else reference.body.decode()
    assert urllib.parse.parse_qs(ours.body.decode()) == urllib.parse.parse_qs(body)
    assert urllib.parse.parse_qs(body)["Version"] == ["2011-06-15"]  # botocore's service model, sts 2011-06-15
    assert ours.headers["Content-Type"].encode() == reference.headers["Content-Type"]
    assert ours.headers["X-Amz-Security-Token"].encode() == reference.headers["X-Amz-Security-Token"]
    assert ours.headers["Authorization"] == vendor.aws_authorization(
        "POST", ours.url, ours.headers, ours.body, "sts", "eu-west-1")
    assert "/eu-west-1/sts/aws4_request" in ours.headers["Authorization"]


@pytest.mark.parametrize(("role", "session"), [
    ("arn:aws:iam::123456789012:user/someone", "inferstack-runtime"),  # not a role
    ("arn:aws:iam::*:role/anything", "inferstack-runtime"),
    (ROLE + "\nAWS_ACCESS_KEY_ID=x", "inferstack-runtime"),
    (ROLE, "x"), (ROLE, "inferstack runtime"),  # RoleSessionName: 2-64 of [\w+=,.@-]
])
def test_a_role_or_session_name_outside_stss_grammar_is_refused_before_any_request(role: str, session: str) -> None:
    with pytest.raises(AccessError, match="invalid role"):
        cloud_access.assume_role("eu-west-1", role, session, CredentialSource("aws", "http://127.0.0.1:9"),
                                 "http://127.0.0.1:9", Retry(attempts=1))


#### A loopback STS ####


class _StsHandler(QuietHandler):
    """STS's Query API on loopback: checks each request's SigV4 signature (403 on a mismatch) and that the instance's
    own session signed it, then answers with `server.answer`."""

    def do_POST(self) -> None:
        server: _StsServer = self.server  # type: ignore[assignment]
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server.calls.append(dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True)))
        url = f"http://{self.headers['Host']}{self.path}"
        authorization = self.headers.get("Authorization", "")
        signed = authorization.partition("SignedHeaders=")[2].partition(",")[0].split(";")
        headers = {name: value for name, value in self.headers.items() if name.lower() in signed}
        if (server.refuse or authorization != vendor.aws_authorization("POST", url, headers, body, "sts", "eu-west-1")
                or self.headers.get("X-Amz-Security-Token") != SESSION_TOKEN):
            return self._reply(403, "<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>")
        return self._reply(200, server.answer)



class _StsServer(ThreadingHTTPServer):
    calls: list[dict[str, str]]
    answer: str
    refuse: bool


def _answer(credentials: Credentials) -> str:
    return ('<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>'
            f"<Credentials><AccessKeyId>{credentials.access_key}</AccessKeyId><SecretAccessKey>"
            f"{credentials.secret_key}</SecretAccessKey><SessionToken>{credentials.session_token}</SessionToken>"
            "<Expiration>2025-06-01T13:30:45Z</Expiration></Credentials><AssumedRoleUser><AssumedRoleId>"
            "AROAREADER:inferstack-runtime</AssumedRoleId><Arn>arn:aws:sts::123456789012:assumed-role/reader/x</Arn>"
            "</AssumedRoleUser></AssumeRoleResult></AssumeRoleResponse>")


@pytest.fixture
def sts() -> Iterator[_StsServer]:
    server = _StsServer(("127.0.0.1", 0), _StsHandler)
    server.calls, server.answer, server.refuse = [], _answer(ASSUMED), False
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _endpoint(sts: _StsServer) -> str:
    return f"http://127.0.0.1:{sts.server_address[1]}"


def test_the_runtime_gets_the_reader_roles_credentials_in_a_root_only_env_file(
        sts: _StsServer, metadata_url: str, tmp_path: Path) -> None:
    out = tmp_path / "inferstack-secrets" / "runtime-credentials.env"
    said = cloud_access.runtime_credentials("eu-west-1", ROLE, str(out), metadata_url, _endpoint(sts),
                                            Retry(attempts=1))
    assert sts.calls == [{"Action": "AssumeRole", "Version": "2011-06-15", "RoleArn": ROLE,
                          "RoleSessionName": f"inferstack-runtime-{AWS_INSTANCE_ID}", "DurationSeconds": "3600"}]
    assert out.read_text() == (f"AWS_ACCESS_KEY_ID={ASSUMED.access_key}\nAWS_SECRET_ACCESS_KEY={ASSUMED.secret_key}\n"
                               f"AWS_SESSION_TOKEN={ASSUMED.session_token}\nAWS_REGION=eu-west-1\n"
                               "AWS_DEFAULT_REGION=eu-west-1\n")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and stat.S_IMODE(out.parent.stat().st_mode) == 0o700
    assert ASSUMED.secret_key not in said and ROLE in said
    assert os.listdir(out.parent) == [out.name]  # nothing half-written left beside it


def test_each_start_replaces_the_credentials_file_whole(sts: _StsServer, metadata_url: str, tmp_path: Path) -> None:
    out = tmp_path / "runtime-credentials.env"
    out.write_text("AWS_ACCESS_KEY_ID=OLD\n")
    out.chmod(0o644)
    cloud_access.runtime_credentials("eu-west-1", ROLE, str(out), metadata_url, _endpoint(sts), Retry(attempts=1))
    assert "OLD" not in out.read_text() and stat.S_IMODE(out.stat().st_mode) == 0o600


def test_an_answer_whose_credentials_would_add_a_line_is_refused_and_nothing_is_written(
        sts: _StsServer, metadata_url: str, tmp_path: Path) -> None:
    sts.answer = _answer(Credentials(ASSUMED.access_key, "secret\nAWS_ENDPOINT_URL=http://evil", "token"))
    out = tmp_path / "runtime-credentials.env"
    with pytest.raises(AccessError, match="without usable credentials"):
        cloud_access.runtime_credentials("eu-west-1", ROLE, str(out), metadata_url, _endpoint(sts),
                                         Retry(attempts=1))
    assert not out.exists()


def test_the_command_writes_the_file_and_fails_loudly_when_sts_refuses(
        sts: _StsServer, metadata_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "runtime-credentials.env"
    argv = ["runtime-credentials", "--region", "eu-west-1", "--role-arn", ROLE, "--out", str(out),
            "--metadata-endpoint", metadata_url, "--endpoint", _endpoint(sts)]
    assert cloud_access.main(argv) == 0 and out.exists()
    assert capsys.readouterr().out.startswith(f"wrote credentials of {ROLE} for the runtime to {out}")
    out.unlink()
    sts.refuse = True
    cloud_access.RUNTIME_AUTH_GRACE_S, grace = 0.0, cloud_access.RUNTIME_AUTH_GRACE_S
    try:
        assert cloud_access.main(argv) == 1
    finally:
        cloud_access.RUNTIME_AUTH_GRACE_S = grace
    assert "STS AssumeRole" in capsys.readouterr().err and not out.exists()


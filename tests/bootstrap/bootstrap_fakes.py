"""Loopback stand-ins for what a cloud server talks to at boot: the four clouds' metadata servers, a real
S3-compatible object store (moto's server) holding a model with its manifest, and `cloud_store_server`: one
cloud's object storage and secret store that checks every request's signature with the cloud's own SDK
(vendor_signers) and answers 403 to a wrong one, as the cloud would.

Only 127.0.0.1 is used; every server stops when its context ends.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import random
import re
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

from inferstack.bootstrap.manifest import write_manifest

ACCESS_KEY = "AKIAINFERSTACKTEST01"
SECRET_KEY = "inferstack-test-secret-key"
SESSION_TOKEN = "inferstack-test-session-token"
ROLE = "inferstack-test-role"
GCP_TOKEN = "gcp-test-token"
GCP_PROJECT = "inferstack-test-project"
HUAWEI_PROJECT = "0123456789abcdef"
MAX_CLOCK_SKEW = datetime.timedelta(minutes=15)  # what AWS, OSS, OBS and API Gateway accept


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


AWS_INSTANCE_ID = "i-0123456789abcdef0"
AWS_TARGET_LIFECYCLE_STATE = "/latest/meta-data/autoscaling/target-lifecycle-state"
"""Where IMDS tells an Auto Scaling instance its target state (InService, Warmed:Stopped, ...): 404 outside a group."""


class QuietHandler(BaseHTTPRequestHandler):
    """A stand-in server's handler: `_reply` sends a text body; requests are not logged."""

    def _reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _MetadataHandler(QuietHandler):
    """Answers the documented metadata paths of AWS (IMDSv2), GCP, Alibaba (hardened mode) and Huawei."""

    routes: ClassVar[dict[str, tuple[str, str | None]]] = {
        # path: (body, header that must be present)
        "/latest/meta-data/iam/security-credentials/": (ROLE, "X-aws-ec2-metadata-token"),
        f"/latest/meta-data/iam/security-credentials/{ROLE}": (json.dumps(
            {"AccessKeyId": ACCESS_KEY, "SecretAccessKey": SECRET_KEY, "Token": SESSION_TOKEN}),
            "X-aws-ec2-metadata-token"),
        "/computeMetadata/v1/instance/service-accounts/default/token": (json.dumps(
            {"access_token": GCP_TOKEN, "expires_in": 3599, "token_type": "Bearer"}), "Metadata-Flavor"),
        "/computeMetadata/v1/project/project-id": (GCP_PROJECT, "Metadata-Flavor"),
        "/latest/meta-data/ram/security-credentials/": (ROLE, "X-aliyun-ecs-metadata-token"),
        f"/latest/meta-data/ram/security-credentials/{ROLE}": (json.dumps(
            {"AccessKeyId": ACCESS_KEY, "AccessKeySecret": SECRET_KEY, "SecurityToken": SESSION_TOKEN,
             "Code": "Success"}), "X-aliyun-ecs-metadata-token"),
        "/openstack/latest/securitykey": (json.dumps(
            {"credential": {"access": ACCESS_KEY, "secret": SECRET_KEY, "securitytoken": SESSION_TOKEN}}), None),
        "/openstack/latest/meta_data.json": (json.dumps({"project_id": HUAWEI_PROJECT}), None),
        "/latest/meta-data/instance-id": (AWS_INSTANCE_ID, "X-aws-ec2-metadata-token"),
    }
    # The instance's identity, as the metadata server shows it before a role is attached: 404.
    identity_paths = ("/security-credentials/", "/securitykey", "/service-accounts/")

    def do_PUT(self) -> None:
        server: _MetadataServer = self.server  # type: ignore[assignment]
        if self.path == "/latest/api/token" and (self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                                                 or self.headers.get("X-aliyun-ecs-metadata-token-ttl-seconds")):
            with server.lock:
                server.notices.tokens_issued.append(f"{SESSION_TOKEN_PREFIX}{len(server.notices.tokens_issued) + 1}")
                token = server.notices.tokens_issued[-1]
            self._reply(200, token)
        else:
            self._reply(400, "bad token request")

    def do_GET(self) -> None:
        server: _MetadataServer = self.server  # type: ignore[assignment]
        if self.path in NOTICE_READ_WITH:
            self._notice(server.notices)
            return
        body, required_header = self.routes.get(self.path, (None, None))
        if self.path == AWS_TARGET_LIFECYCLE_STATE and server.target_lifecycle_state is not None:
            body, required_header = server.target_lifecycle_state, "X-aws-ec2-metadata-token"
        with server.lock:
            unattached = server.role_missing_for > 0 and any(p in self.path for p in self.identity_paths)
            server.role_missing_for -= unattached
        if body is None or unattached:
            self._reply(404, "not found")
        elif required_header and not self.headers.get(required_header):
            self._reply(401, f"missing {required_header}")
        else:
            self._reply(200, body)

    def _notice(self, notices: MetadataNotices) -> None:
        """An interruption notice path: 401 without the header it is read with (AWS and Alibaba: a session token this
        server issued and that is still valid), else what `notices` posts there, else "no notice"."""
        header, expected = NOTICE_READ_WITH[self.path]
        sent = self.headers.get(header)
        with notices.lock:
            notices.asked.append((self.path, sent))
            valid = sent == expected if expected else sent in notices.tokens_issued[notices.tokens_revoked:]
            posted = notices.posted.get(self.path)
        if not valid:
            self._reply(401, f"missing or invalid {header}")
        elif posted is not None:
            self._reply(200, posted)
        elif self.path in NO_NOTICE_BODY:
            self._reply(200, NO_NOTICE_BODY[self.path])
        else:
            self._reply(404, "not found")



class _MetadataServer(ThreadingHTTPServer):
    lock: threading.Lock
    role_missing_for: int
    target_lifecycle_state: str | None
    notices: MetadataNotices


SESSION_TOKEN_PREFIX = "metadata-session-token-"
AWS_INSTANCE_ACTION = "/latest/meta-data/spot/instance-action"
AWS_REBALANCE = "/latest/meta-data/events/recommendations/rebalance"
GCP_PREEMPTED = "/computeMetadata/v1/instance/preempted"
ALIBABA_TERMINATION_TIME = "/latest/meta-data/instance/spot/termination-time"
NOTICE_READ_WITH = {
    # path: (the header it must be read with, its value; None: a session token this server issued)
    AWS_INSTANCE_ACTION: ("X-aws-ec2-metadata-token", None),
    AWS_REBALANCE: ("X-aws-ec2-metadata-token", None),
    GCP_PREEMPTED: ("Metadata-Flavor", "Google"),
    ALIBABA_TERMINATION_TIME: ("X-aliyun-ecs-metadata-token", None),
}
"""The interruption notices' paths, as the vendors document them (inferstack/bootstrap/files/interruption_watch.py)."""
NO_NOTICE_BODY = {GCP_PREEMPTED: "FALSE"}
"""GCP answers FALSE until a preemption; AWS and Alibaba answer 404 until a notice."""


@dataclass
class MetadataNotices:
    """The interruption notices a stand-in metadata server posts (`posted`: path → body, as the cloud would post it;
    a path not there has no notice), the session tokens it issued, and every notice read: (path, the header sent).
    `tokens_revoked`: the first this many tokens issued are refused (401), as an expired one is."""

    posted: dict[str, str] = field(default_factory=dict)
    tokens_issued: list[str] = field(default_factory=list)
    tokens_revoked: int = 0
    asked: list[tuple[str, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def metadata_server(role_missing_for: int = 0, notices: MetadataNotices | None = None,
                    target_lifecycle_state: str | None = None) -> Iterator[str]:
    """A metadata server for all four clouds on 127.0.0.1; yields its base URL. Its first `role_missing_for`
    reads of the instance's identity answer 404, as before the role (instance profile, RAM role, agency,
    service account) is attached. It posts the interruption notices `notices` holds (none without), and AWS's
    `target_lifecycle_state` (None: 404, as for an instance outside an Auto Scaling group)."""
    server = _MetadataServer(("127.0.0.1", 0), _MetadataHandler)
    server.lock, server.role_missing_for = threading.Lock(), role_missing_for
    server.target_lifecycle_state = target_lifecycle_state
    server.notices = notices if notices is not None else MetadataNotices()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3/SSM-compatible server on 127.0.0.1 (a real HTTP server); yields its endpoint URL."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@dataclass
class CloudStore:
    """One cloud's object storage and secret store on loopback, addressed path-style (ENDPOINT/bucket/key).

    Every request's signature is recomputed with the cloud's SDK from what arrived (vendor_signers) and its signing
    time must be within 15 minutes; otherwise 403, as the cloud answers. Knobs for the failure tests:
    `refuse_next` answers that many requests 403 first (a role that has not propagated yet), `cut_next` sends
    only half of that many object bodies, `ignore_ranges` answers ranged requests with the whole object (as some
    proxies do), `secret_reply` replaces the secret store's answer.
    """

    cloud: str
    region: str
    url: str = ""
    objects: dict[str, bytes] = field(default_factory=dict)
    """"bucket/key" → content"""
    secrets: dict[str, str] = field(default_factory=dict)
    refuse_next: int = 0
    cut_next: int = 0
    ignore_ranges: bool = False
    secret_reply: bytes | None = None
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    """(method, path as sent, status answered), in order"""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def put_model(self, bucket: str, prefix: str, model_dir: Path) -> None:
        for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
            self.objects[f"{bucket}/{prefix}{path.relative_to(model_dir).as_posix()}"] = path.read_bytes()

    def take(self, knob: str) -> bool:
        """Consume one unit of a failure knob; True when there was one."""
        with self.lock:
            left: int = getattr(self, knob)
            setattr(self, knob, max(left - 1, 0))
            return left > 0


class _CloudStoreHandler(BaseHTTPRequestHandler):
    server: _CloudStoreServer

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        store = self.server.store
        body = self.rfile.read(min(int(self.headers.get("Content-Length") or 0), 1 << 20))
        parts = urllib.parse.urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}  # urllib sends them as "X-amz-date"
        is_secret = parts.path.startswith("/v1/") or "x-amz-target" in headers or "Action=" in parts.query
        if store.take("refuse_next"):
            return self._reply(403, b"AccessDenied: the role is not authorised yet")
        problem = _signature_problem(store, self.command, parts, headers, body, is_secret)
        if problem:
            return self._reply(403, f"SignatureDoesNotMatch: {problem}".encode())
        if is_secret:
            return self._secret(store, parts, body)
        bucket, _, key = parts.path[1:].partition("/")
        content = store.objects.get(f"{bucket}/{urllib.parse.unquote(key)}")
        if content is None:
            return self._reply(404, b"NoSuchKey")
        status, byte_range = 200, re.fullmatch(r"bytes=(\d+)-(\d+)", headers.get("range", ""))
        if byte_range and not store.ignore_ranges:
            status, content = 206, content[int(byte_range[1]):int(byte_range[2]) + 1]
        self._reply(status, content, cut=store.take("cut_next"))

    def _secret(self, store: CloudStore, parts: urllib.parse.SplitResult, body: bytes) -> None:
        cloud, path, query = store.cloud, urllib.parse.unquote(parts.path), dict(urllib.parse.parse_qsl(parts.query))
        names = {
            "aws": json.loads(body or b"{}").get("Name"),
            "gcp": _match(rf"/v1/projects/{GCP_PROJECT}/secrets/([^/]+)/versions/latest:access", path),
            "alibaba": query.get("SecretName") if query.get("Action") == "GetSecretValue" else None,
            "huawei": _match(rf"/v1/{HUAWEI_PROJECT}/secrets/([^/]+)/versions/latest", path),
        }
        value = store.secrets.get(names[cloud] or "")
        if value is None:
            return self._reply(404 if cloud != "aws" else 400, b'{"message": "secret not found"}')
        replies = {
            "aws": {"Parameter": {"Name": names[cloud], "Type": "SecureString", "Value": value}},
            "gcp": {"name": path[4:-7], "payload": {"data": base64.b64encode(value.encode()).decode()}},
            "alibaba": {"SecretName": names[cloud], "SecretData": value, "RequestId": "0"},
            "huawei": {"version": {"secret_string": value, "version_metadata": {"id": "v1"}}},
        }
        self._reply(200, store.secret_reply if store.secret_reply is not None else json.dumps(replies[cloud]).encode())

    def _reply(self, status: int, data: bytes, cut: bool = False) -> None:
        with self.server.store.lock:
            self.server.store.requests.append((self.command, self.path, status))
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[:len(data) // 2] if cut else data)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _CloudStoreServer(ThreadingHTTPServer):
    store: CloudStore


def _match(pattern: str, text: str) -> str | None:
    found = re.fullmatch(pattern, text)
    return found[1] if found else None


def _signature_problem(store: CloudStore, method: str, parts: urllib.parse.SplitResult, headers: dict[str, str],
                       body: bytes, is_secret: bool) -> str | None:
    """Why the request's signature is not the one the cloud's SDK computes for it (None when it is); `headers`
    have lowercase names."""
    import vendor_signers as vendor

    url = f"http://{headers.get('host')}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    authorization = headers.get("authorization", "")
    bucket, _, key = parts.path[1:].partition("/")
    key = urllib.parse.unquote(key)
    # A server uses the headers the client says it signed (urllib adds others on the way).
    named = re.search(r"SignedHeaders=([^,\s]+)", authorization)
    signed = {k: v for k, v in headers.items() if named and k.lower() in named[1].split(";")}
    if store.cloud == "gcp":
        return None if authorization == f"Bearer {GCP_TOKEN}" else f"not the instance's token: {authorization!r}"
    if store.cloud == "alibaba" and is_secret:
        params = dict(urllib.parse.parse_qsl(parts.query))
        expected, got, at = vendor.alibaba_rpc_signature(params), params.get("Signature"), params.get("Timestamp", "")
        if (params.get("AccessKeyId"), params.get("SecurityToken")) != (ACCESS_KEY, SESSION_TOKEN):
            return "not the instance's access key and security token"
        signed_at = _parse_time(at, "%Y-%m-%dT%H:%M:%SZ")
    elif store.cloud == "aws":
        service = "ssm" if is_secret else "s3"
        if headers.get("x-amz-content-sha256") != hashlib.sha256(body).hexdigest():
            return "X-Amz-Content-SHA256 is not the body's hash"
        expected, got = vendor.aws_authorization(method, url, signed, body, service, store.region), authorization
        signed_at = _parse_time(headers.get("x-amz-date", ""), "%Y%m%dT%H%M%SZ")
    elif store.cloud == "alibaba":
        expected, got = vendor.oss_v4_authorization(method, url, headers, store.region, bucket, key), authorization
        signed_at = _parse_time(headers.get("x-oss-date", ""), "%Y%m%dT%H%M%SZ")
    elif is_secret:  # temporary keys are refused without their token
        if not named or not {"host", "x-sdk-date", "x-security-token"} <= set(named[1].split(";")) or \
                headers.get("x-security-token") != SESSION_TOKEN:
            return "Host, X-Sdk-Date and the agency's X-Security-Token must be signed"
        expected, got = vendor.apig_authorization(method, url, signed, body), authorization
        signed_at = _parse_time(headers.get("x-sdk-date", ""), "%Y%m%dT%H%M%SZ")
    else:
        if headers.get("x-obs-security-token") != SESSION_TOKEN:
            return "temporary keys without the agency's x-obs-security-token"
        expected, got = vendor.obs_authorization(method, headers, bucket, key), authorization
        signed_at = _parse_time(headers.get("date", ""), "%a, %d %b %Y %H:%M:%S GMT")
    if got != expected:
        return f"expected {expected!r}, got {got!r}"
    if abs(datetime.datetime.now(datetime.timezone.utc) - signed_at) > MAX_CLOCK_SKEW:
        return f"signed at {signed_at}, more than 15 minutes from now"
    return None


def _parse_time(text: str, layout: str) -> datetime.datetime:
    try:
        return datetime.datetime.strptime(text, layout).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)


@contextmanager
def cloud_store_server(cloud: str, region: str) -> Iterator[CloudStore]:
    """`cloud`'s object storage and secret store on 127.0.0.1, checking signatures for `region`."""
    store = CloudStore(cloud, region)
    server = _CloudStoreServer(("127.0.0.1", 0), _CloudStoreHandler)
    server.store = store
    store.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield store
    finally:
        server.shutdown()
        server.server_close()


def s3_client(endpoint: str):  # type: ignore[no-untyped-def]  # boto3 ships no type hints
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


def upload_model(endpoint: str, bucket: str, prefix: str, model_dir: Path) -> None:
    """Upload every file of `model_dir` (its manifest.json included) under `prefix`."""
    client = s3_client(endpoint)
    existing = [b["Name"] for b in client.list_buckets().get("Buckets", [])]
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        client.upload_file(str(path), bucket, prefix + path.relative_to(model_dir).as_posix())


def make_model(model_dir: Path, sizes_bytes: dict[str, int], seed: int = 0) -> Path:
    """Files of pseudo-random bytes (incompressible, like weights) plus their manifest."""
    model_dir.mkdir(parents=True, exist_ok=True)
    for index, (name, size) in enumerate(sorted(sizes_bytes.items())):
        path = model_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_pseudo_random_bytes(size, seed * 1000 + index))
    write_manifest(model_dir)
    return model_dir


def _pseudo_random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)

"""Loopback stand-ins for what a cloud server talks to at boot: the four clouds' metadata servers, and a real
S3-compatible object store (moto's server) holding a model with its manifest.

Only 127.0.0.1 is used; every server stops when its context ends.
"""

from __future__ import annotations

import json
import random
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

from inferstack.bootstrap.manifest import write_manifest

ACCESS_KEY = "AKIAINFERSTACKTEST01"
SECRET_KEY = "inferstack-test-secret-key"
SESSION_TOKEN = "inferstack-test-session-token"
ROLE = "inferstack-test-role"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _MetadataHandler(BaseHTTPRequestHandler):
    """Answers the documented metadata paths of AWS (IMDSv2), GCP, Alibaba (hardened mode) and Huawei."""

    routes: ClassVar[dict[str, tuple[str, str | None]]] = {
        # path: (body, header that must be present)
        "/latest/meta-data/iam/security-credentials/": (ROLE, "X-aws-ec2-metadata-token"),
        f"/latest/meta-data/iam/security-credentials/{ROLE}": (json.dumps(
            {"AccessKeyId": ACCESS_KEY, "SecretAccessKey": SECRET_KEY, "Token": SESSION_TOKEN}),
            "X-aws-ec2-metadata-token"),
        "/computeMetadata/v1/instance/service-accounts/default/token": (json.dumps(
            {"access_token": "gcp-test-token", "expires_in": 3599, "token_type": "Bearer"}), "Metadata-Flavor"),
        "/computeMetadata/v1/project/project-id": ("inferstack-test-project", "Metadata-Flavor"),
        "/latest/meta-data/ram/security-credentials/": (ROLE, "X-aliyun-ecs-metadata-token"),
        f"/latest/meta-data/ram/security-credentials/{ROLE}": (json.dumps(
            {"AccessKeyId": ACCESS_KEY, "AccessKeySecret": SECRET_KEY, "SecurityToken": SESSION_TOKEN,
             "Code": "Success"}), "X-aliyun-ecs-metadata-token"),
        "/openstack/latest/securitykey": (json.dumps(
            {"credential": {"access": ACCESS_KEY, "secret": SECRET_KEY, "securitytoken": SESSION_TOKEN}}), None),
        "/openstack/latest/meta_data.json": (json.dumps({"project_id": "0123456789abcdef"}), None),
    }

    def do_PUT(self) -> None:
        if self.path == "/latest/api/token" and (self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                                                 or self.headers.get("X-aliyun-ecs-metadata-token-ttl-seconds")):
            self._reply(200, "metadata-session-token")
        else:
            self._reply(400, "bad token request")

    def do_GET(self) -> None:
        body, required_header = self.routes.get(self.path, (None, None))
        if body is None:
            self._reply(404, "not found")
        elif required_header and not self.headers.get(required_header):
            self._reply(401, f"missing {required_header}")
        else:
            self._reply(200, body)

    def _reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def metadata_server() -> Iterator[str]:
    """A metadata server for all four clouds on 127.0.0.1; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MetadataHandler)
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

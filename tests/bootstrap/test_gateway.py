"""The gateway's rendered nginx configuration, run for real: Debian's nginx on loopback in front of a stand-in
runtime that records what reaches it. Without the key every route but the health path answers 401; with it only
the inference API reaches the runtime (everything else is 404 at the gateway), streamed answers arrive as they are
produced, and the key itself never reaches the runtime."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import fetch_secret
import pytest
from bootstrap_fakes import free_port
from sample_plans import sample_plan

from inferstack.bootstrap import gateway
from inferstack.bootstrap.runtimes import RUNTIME_PORT
from inferstack.plan import DeploymentPlan

API_KEY = "sk-gateway.0123+abcDEF/xyz="
"""Characters the secret fetch accepts that mean something in a regular expression, and both letter cases."""
STREAM_CHUNKS = 3
STREAM_GAP_S = 0.4

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (make test installs it)")


@dataclass
class Runtime:
    """A stand-in for the inference runtime: answers every path, and remembers what it was asked."""

    port: int
    seen: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(method, path, Authorization header) of each request that reached it."""


@contextlib.contextmanager
def runtime() -> Iterator[Runtime]:
    record = Runtime(port=free_port())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            record.seen.append((self.command, self.path, self.headers.get("Authorization")))
            if self.path == "/v1/completions" and json.loads(body or b"{}").get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for index in range(STREAM_CHUNKS):
                    event = f"data: {json.dumps({'index': index})}\n\n".encode()
                    self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                    self.wfile.flush()
                    time.sleep(STREAM_GAP_S)
                self.wfile.write(b"0\r\n\r\n")
                return
            reply = json.dumps({"path": self.path}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", record.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield record
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Gateway:
    port: int
    runtime: Runtime

    def request(self, method: str, path: str, key: str | None = None, body: dict[str, object] | None = None,
                authorization: str | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if authorization is not None:
            headers["Authorization"] = authorization
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request(method, path, body=json.dumps(body).encode() if body else None, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


def local_config(plan: DeploymentPlan, directory: Path, port: int, runtime_port: int, *, api_key: bool,
                 cache: gateway.CacheEndpoint | None = None, moved_too: Mapping[str, str] | None = None) -> Path:
    """The rendered configuration with its fixed places moved: listen port, runtime port, key map, logs, pid, and
    `moved_too` (the cache's places, with `cache`)."""
    text = gateway.gateway_config(plan, api_key=api_key, cache=cache)
    replacements = {f"listen {plan.serving.port};": f"listen 127.0.0.1:{port};",
                    f"127.0.0.1:{RUNTIME_PORT}": f"127.0.0.1:{runtime_port}",
                    gateway.KEY_MAP: str(directory / "key.map"), gateway.ACCESS_LOG: str(directory / "access.log"),
                    "/run/inferstack-gateway.pid": str(directory / "nginx.pid"), **(moved_too or {})}
    if os.geteuid() != 0:
        replacements[f"user {gateway.WORKER_USER};"] = ""  # only root may switch users
    if not api_key:
        del replacements[gateway.KEY_MAP]
    for fixed, moved in replacements.items():
        assert fixed in text, fixed
        text = text.replace(fixed, moved)
    config = directory / "gateway.conf"
    config.write_text(text)
    fetch_secret.write_secret_file(str(directory / "key.map"), {"API_KEY": API_KEY}, "nginx-bearer-map")
    return config


@contextlib.contextmanager
def nginx_serving(config: Path, prefix: Path, port: int, health_path: str) -> Iterator[None]:
    """nginx on `config`, once it answers `health_path` on `port`; stopped on exit."""
    process = subprocess.Popen(["nginx", "-c", str(config), "-p", str(prefix)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), contextlib.closing(http.client.HTTPConnection(
                    "127.0.0.1", port, timeout=1)) as probe:
                probe.request("GET", health_path)
                probe.getresponse().read()
                break
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline, "nginx did not start listening"
            time.sleep(0.05)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextlib.contextmanager
def running_gateway(plan: DeploymentPlan, tmp_path: Path, *, api_key: bool = True) -> Iterator[Gateway]:
    with runtime() as backend:
        port = free_port()
        config = local_config(plan, tmp_path, port, backend.port, api_key=api_key)
        with nginx_serving(config, tmp_path, port, plan.serving.health_path):
            backend.seen.clear()
            yield Gateway(port, backend)


LLM_ROUTES_NOT_EXPOSED = ["/tokenize", "/detokenize", "/invocations", "/metrics", "/version", "/docs",
                          "/openapi.json", "/props", "/slots", "/pooling", "/score", "/v2/repository/index", "/",
                          "/v1/../tokenize", "/v1%2f..%2fmetrics"]


def test_the_rendered_configuration_passes_nginx_t_for_every_runtime(tmp_path: Path) -> None:
    for variant in ("gpu-llm", "cpu-llm", "cpu-encoder"):
        for api_key in (True, False):
            config = local_config(sample_plan("aws", variant), tmp_path, free_port(), free_port(), api_key=api_key)
            result = subprocess.run(["nginx", "-t", "-c", str(config), "-p", str(tmp_path)], capture_output=True,
                                    text=True)
            assert result.returncode == 0, f"{variant} api_key={api_key}: {result.stderr}"


def test_without_the_key_every_route_but_the_health_path_is_401(tmp_path: Path) -> None:
    with running_gateway(sample_plan("aws", "gpu-llm"), tmp_path) as gateway_:
        for path in ["/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/embeddings",
                     *LLM_ROUTES_NOT_EXPOSED]:
            for method in ("GET", "POST"):
                status, body = gateway_.request(method, path)
                assert status == 401, f"{method} {path}: {status} {body!r}"
        assert gateway_.request("POST", "/v1/completions", "sk-wrong")[0] == 401
        assert gateway_.request("POST", "/v1/completions", authorization=f"bearer {API_KEY}")[0] == 401
        assert gateway_.request("POST", "/v1/completions", authorization=API_KEY)[0] == 401
        assert gateway_.request("POST", "/v1/completions", API_KEY.upper())[0] == 401
        assert gateway_.request("POST", "/v1/completions", API_KEY.replace(".", "x").replace("+", "++"))[0] == 401
        assert gateway_.request("POST", "/v1/completions", API_KEY + "x")[0] == 401
        assert gateway_.runtime.seen == []
        assert gateway_.request("GET", "/health") == (200, b'{"path": "/health"}')


def test_with_the_key_only_the_inference_api_reaches_the_runtime_and_never_the_key(tmp_path: Path) -> None:
    with running_gateway(sample_plan("aws", "gpu-llm"), tmp_path) as gateway_:
        for path in ("/v1/models", "/v1/chat/completions"):
            assert gateway_.request("POST", path, API_KEY)[0] == 200
        for path in LLM_ROUTES_NOT_EXPOSED:
            assert gateway_.request("GET", path, API_KEY)[0] == 404, path
        assert [(method, path) for method, path, _ in gateway_.runtime.seen] == [
            ("POST", "/v1/models"), ("POST", "/v1/chat/completions")]
        assert {authorization for _, _, authorization in gateway_.runtime.seen} == {None}


def test_a_streamed_answer_passes_through_as_it_is_produced(tmp_path: Path) -> None:
    with running_gateway(sample_plan("aws", "gpu-llm"), tmp_path) as gateway_:
        connection = http.client.HTTPConnection("127.0.0.1", gateway_.port, timeout=10)
        started = time.monotonic()
        connection.request("POST", "/v1/completions", body=json.dumps({"stream": True}),
                           headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        first_event_s = None
        events = []
        for line in response:
            if line.startswith(b"data: "):
                events.append(json.loads(line[6:]))
                first_event_s = first_event_s or time.monotonic() - started
        total_s = time.monotonic() - started
        connection.close()
    assert events == [{"index": i} for i in range(STREAM_CHUNKS)]
    assert first_event_s is not None and first_event_s < STREAM_GAP_S < total_s  # not buffered until the end


def test_without_an_api_key_the_api_is_open_and_the_rest_still_closed(tmp_path: Path) -> None:
    with running_gateway(sample_plan("aws", "cpu-llm"), tmp_path, api_key=False) as gateway_:
        assert gateway_.request("POST", "/v1/completions")[0] == 200
        assert gateway_.request("GET", "/metrics")[0] == 404
        assert gateway_.request("GET", "/tokenize")[0] == 404


def test_triton_exposes_inference_and_readiness_but_not_model_control(tmp_path: Path) -> None:
    plan = sample_plan("aws", "cpu-encoder")
    with running_gateway(plan, tmp_path) as gateway_:
        assert gateway_.request("GET", "/v2/health/ready")[0] == 200
        assert gateway_.request("POST", "/v2/models/bert-base/infer")[0] == 401
        assert gateway_.request("POST", "/v2/models/bert-base/infer", API_KEY)[0] == 200
        for path in ("/v2/repository/index", "/v2/repository/models/bert-base/load", "/v2/systemsharedmemory/status",
                     "/v2/cudasharedmemory/status", "/v2/logging", "/v2/trace/setting", "/v1/models"):
            assert gateway_.request("POST", path, API_KEY)[0] == 404, path
        assert [path for _, path, _ in gateway_.runtime.seen] == ["/v2/health/ready", "/v2/models/bert-base/infer"]


def test_the_read_timeout_follows_the_plans_latency_with_a_floor() -> None:
    plan = sample_plan("aws", "gpu-llm")
    slow = plan.model_copy(update={"performance": plan.performance.model_copy(update={"latency_p95_ms": 90_000})})
    assert "proxy_read_timeout 120s;" in gateway.gateway_config(plan, api_key=True)
    assert "proxy_read_timeout 360s;" in gateway.gateway_config(slow, api_key=True)

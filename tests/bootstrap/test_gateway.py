"""The gateway's rendered nginx configuration, run for real: Debian's nginx on loopback in front of a stand-in
runtime that records what reaches it. Without the key every route but the health path answers 401 and the connection
is closed; with it only the inference API reaches the runtime (everything else is 404 at the gateway), streamed
answers arrive as they are produced, and the key itself never reaches the runtime. The health path forwards a bare
GET of itself and nothing of the client's; a single server limits the requests one client has in flight."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal, TypeVar

import fetch_secret
import pytest
from bootstrap_fakes import free_port
from sample_plans import sample_plan

from inferstack.bootstrap import gateway
from inferstack.bootstrap.runtimes import RUNTIME_PORT, resolve_mode
from inferstack.plan import DeploymentPlan

API_KEY = "sk-gateway.0123+abcDEF/xyz="
"""Characters the secret fetch accepts that mean something in a regular expression, and both letter cases."""
STREAM_CHUNKS = 3
STREAM_GAP_S = 0.4

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (make test installs it)")


@dataclass(frozen=True)
class Received:
    """One request as it reached the runtime."""

    method: str
    path: str
    """The request target as sent: path and query, unnormalised."""
    headers: dict[str, str]
    body: bytes


@dataclass
class Runtime:
    """A stand-in for the inference runtime: answers every path, and remembers what it was asked. Like Triton it
    compresses an answer when the request accepts gzip (`gzip="when asked"`), or always; `extra_headers` and
    `content_type` go on every answer; a JSON body {"hold_s": s} is answered after s seconds."""

    port: int
    seen: list[Received] = field(default_factory=list)
    gzip: Literal["never", "when asked", "always"] = "never"
    content_type: str = "application/json"
    extra_headers: dict[str, str] = field(default_factory=dict)


HOLD_BODY_LIMIT = 4096  # only a small body is looked at for "hold_s"


@contextlib.contextmanager
def runtime() -> Iterator[Runtime]:
    record = Runtime(port=free_port())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            record.seen.append(Received(self.command, self.path, dict(self.headers), body))
            request = json.loads(body) if body.startswith(b"{") and length < HOLD_BODY_LIMIT else {}
            if self.path == "/v1/completions" and request.get("stream"):
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
            time.sleep(float(request.get("hold_s", 0)))
            reply = json.dumps({"path": self.path}).encode()
            accepts_gzip = "gzip" in (self.headers.get("Accept-Encoding") or "")
            compress = record.gzip == "always" or (record.gzip == "when asked" and accepts_gzip)
            if compress:
                reply = gzip.compress(reply)
            self.send_response(200)
            self.send_header("Content-Type", record.content_type)
            self.send_header("Content-Length", str(len(reply)))
            if compress:
                self.send_header("Content-Encoding", "gzip")
            for name, value in record.extra_headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply)

        do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = _answer

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
    access_log: Path

    def request(self, method: str, path: str, key: str | None = None, body: dict[str, object] | None = None,
                authorization: str | None = None, headers: Mapping[str, str] | None = None,
                data: bytes | None = None) -> tuple[int, bytes]:
        """(status, body) of one request on a connection of its own: `body` as JSON, or `data` as it is."""
        sent = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            sent["Authorization"] = f"Bearer {key}"
        if authorization is not None:
            sent["Authorization"] = authorization
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=json.dumps(body).encode() if body else data, headers=sent)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


T = TypeVar("T")


def at_once(count: int, call: Callable[[], T]) -> list[T]:
    """`count` calls of `call`, all in flight together (one thread each)."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(lambda _: call(), range(count)))


def local_config(plan: DeploymentPlan, directory: Path, port: int, runtime_port: int, *, api_key: bool,
                 cache: gateway.CacheEndpoint | None = None, moved_too: Mapping[str, str] | None = None,
                 group: gateway.ServerGroup = "main") -> Path:
    """The rendered configuration (the plan's own install mode, `group`'s servers) with its fixed places moved:
    listen port, runtime port, key map, logs, pid, and `moved_too` (the cache's places, with `cache`)."""
    text = gateway.gateway_config(plan, api_key=api_key, mode=resolve_mode(plan, "auto"), group=group, cache=cache)
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
def nginx_serving(config: Path, prefix: Path, port: int, health_path: str) -> Iterator[subprocess.Popen[bytes]]:
    """nginx on `config`, once it answers `health_path` on `port` (its master process); stopped on exit."""
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
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=10)


@contextlib.contextmanager
def running_gateway(plan: DeploymentPlan, tmp_path: Path, *, api_key: bool = True) -> Iterator[Gateway]:
    with runtime() as backend:
        port = free_port()
        config = local_config(plan, tmp_path, port, backend.port, api_key=api_key)
        with nginx_serving(config, tmp_path, port, plan.serving.health_path):
            backend.seen.clear()
            yield Gateway(port, backend, tmp_path / "access.log")


LLM_ROUTES_NOT_EXPOSED = ["/tokenize", "/detokenize", "/invocations", "/metrics", "/version", "/docs",
                          "/openapi.json", "/props", "/slots", "/pooling", "/score", "/v2/repository/index", "/",
                          "/v1/../tokenize", "/v1%2f..%2fmetrics"]


def test_the_rendered_configuration_passes_nginx_t_for_every_runtime(tmp_path: Path) -> None:
    for variant in ("gpu-llm", "cpu-llm", "cpu-encoder"):
        for stage in ("internal", "production"):  # one server, and a fleet behind a load balancer
            for api_key in (True, False):
                plan = sample_plan("aws", variant, stage)
                config = local_config(plan, tmp_path, free_port(), free_port(), api_key=api_key)
                result = subprocess.run(["nginx", "-t", "-c", str(config), "-p", str(tmp_path)], capture_output=True,
                                        text=True)
                assert result.returncode == 0, f"{variant} {stage} api_key={api_key}: {result.stderr}"


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
        assert [(seen.method, seen.path) for seen in gateway_.runtime.seen] == [
            ("POST", "/v1/models"), ("POST", "/v1/chat/completions")]
        assert {seen.headers.get("Authorization") for seen in gateway_.runtime.seen} == {None}


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
        assert [seen.path for seen in gateway_.runtime.seen] == ["/v2/health/ready", "/v2/models/bert-base/infer"]


def test_the_read_timeout_follows_the_longest_answer_the_plan_allows_with_a_floor() -> None:
    # 4,096 tokens of context at the sample plan's p95 per-token time: 1.25 x 164.2 s = 206 s; 1,024: the 120 s floor.
    plan = sample_plan("aws", "gpu-llm")
    short = plan.model_copy(update={"serving": plan.serving.model_copy(update={"max_model_len": 1024})})
    assert "proxy_read_timeout 206s;" in gateway.gateway_config(plan, api_key=True, mode="container", group="main")
    assert "proxy_read_timeout 120s;" in gateway.gateway_config(short, api_key=True, mode="container", group="main")


#### The health path: a bare GET of itself, nothing of the client's ####


@pytest.mark.parametrize("variant", ["cpu-llm", "cpu-encoder"])
def test_the_health_path_forwards_a_bare_get_of_itself_whatever_the_client_sent(tmp_path: Path, variant: str) -> None:
    plan = sample_plan("aws", variant)  # type: ignore[arg-type]
    health = plan.serving.health_path
    raw_paths = [health, f"{health}?probe=1&next=/metrics", "/" + health[1:].replace("h", "%68", 1), "/" + health]
    with running_gateway(plan, tmp_path) as gateway_:
        for path in raw_paths:  # the query, an escaped letter, a doubled slash: nginx's match, the runtime's path
            headers = {"Cookie": "session=1", "X-Probe": "1", "Authorization": f"Bearer {API_KEY}"}
            assert gateway_.request("GET", path, headers=headers)[0] == 200, path
        assert gateway_.request("HEAD", health)[0] == 200
        forwarded = gateway_.runtime.seen
        assert [(seen.method, seen.path, seen.body) for seen in forwarded] == [("GET", health, b"")] * 5
        assert {name.lower() for seen in forwarded for name in seen.headers} <= {"host", "x-forwarded-for"}


def test_the_health_path_refuses_other_methods_and_bodies_without_forwarding_them(tmp_path: Path) -> None:
    with running_gateway(sample_plan("aws", "cpu-llm"), tmp_path) as gateway_:
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            status, body = gateway_.request(method, "/health", data=b'{"prompt": "x"}')
            assert status == 405 and "GET or HEAD" in json.loads(body)["error"]["message"], (method, body)
        status, body = gateway_.request("GET", "/health", data=b'{"prompt": "x"}')
        assert status == 400 and "body" in json.loads(body)["error"]["message"], body
        assert gateway_.runtime.seen == []


#### Connections: closed after a 401; one client's requests in flight limited on a single server ####


def exchange_until_closed(port: int, request: bytes, wait_s: float = 3.0) -> tuple[bytes, bool]:
    """(what the gateway sent back, whether it closed the connection within `wait_s`) for one raw request."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(request)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            return received, False
    return received, True


def test_after_a_401_the_gateway_closes_the_connection(tmp_path: Path) -> None:
    with running_gateway(sample_plan("aws", "cpu-llm"), tmp_path) as gateway_:
        answer, closed = exchange_until_closed(gateway_.port, b"GET /v1/models HTTP/1.1\r\nHost: api\r\n\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 401") and b"Connection: close" in head, head
        assert b"WWW-Authenticate: Bearer" in head and json.loads(body)["error"]["type"] == "authentication_error"
        assert closed, "the connection stayed open after the 401"
        # with the key, the same client keeps its connection for the next request
        with contextlib.closing(http.client.HTTPConnection("127.0.0.1", gateway_.port, timeout=10)) as connection:
            for _ in range(2):
                connection.request("GET", "/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
                response = connection.getresponse()
                assert response.status == 200 and response.getheader("Connection") != "close"
                response.read()


def test_a_single_server_limits_the_requests_one_client_has_in_flight(tmp_path: Path) -> None:
    plan = sample_plan("aws", "cpu-llm")
    limit = gateway.client_request_limit(plan)
    assert limit is not None and limit >= plan.performance.concurrency_per_replica * plan.serving.processes
    with running_gateway(plan, tmp_path) as gateway_:
        answers = at_once(limit + 1, lambda: gateway_.request("POST", "/v1/completions", API_KEY, {"hold_s": 2}))
    refused = [json.loads(body) for status, body in answers if status == 429]
    assert len(refused) == 1 and sorted(status for status, _ in answers)[:limit] == [200] * limit, answers
    assert f"{limit} requests in flight" in refused[0]["error"]["message"]
    assert len(gateway_.runtime.seen) == limit


def test_a_fleet_server_does_not_limit_the_load_balancers_address(tmp_path: Path) -> None:
    """Behind the load balancer every connection comes from its few addresses, carrying every client's requests."""
    single, fleet = sample_plan("aws", "cpu-llm"), sample_plan("aws", "cpu-llm", "production")
    assert fleet.fleet is not None and gateway.client_request_limit(fleet) is None
    many = 2 * (gateway.client_request_limit(single) or 0)
    with running_gateway(fleet, tmp_path) as gateway_:
        answers = at_once(many, lambda: gateway_.request("POST", "/v1/completions", API_KEY, {"hold_s": 1}))
    assert [status for status, _ in answers] == [200] * many


@pytest.mark.parametrize("context", [1024, 4096, 131072])
def test_the_gateway_keeps_idle_connections_longer_than_any_load_balancer_does(context: int) -> None:
    # A load balancer reuses an idle connection for up to its own idle timeout: Google's fixed 600 s, the others the
    # plan's request timeout (components/<cloud>). nginx closing first answers that reuse with a 502.
    plan = sample_plan("aws", "gpu-llm")
    plan = plan.model_copy(update={"serving": plan.serving.model_copy(update={"max_model_len": context})})
    config = gateway.gateway_config(plan, api_key=True, mode="container", group="main")
    (seconds,) = re.findall(r"^    keepalive_timeout (\d+)s;$", config, re.M)
    assert int(seconds) > max(gateway.LB_KEEPALIVE_S, plan.request_timeout_s)


def test_the_gateway_units_stop_signal_lets_a_request_in_flight_finish_before_the_runtime_stops(
        tmp_path: Path) -> None:
    """What systemd does to the gateway at shutdown (a spot reclamation, a scale-in): the unit's KillSignal, sent to
    the real nginx while a request is in flight, ends nginx only once that request is answered; and the unit is
    ordered after the runtime's units, so systemd stops the runtime only once the gateway is gone."""
    from inferstack.bootstrap import BootstrapOptions
    from inferstack.bootstrap.render import gateway_unit

    plan = sample_plan("aws", "cpu-llm", "production")
    unit = gateway_unit("aws", BootstrapOptions(model_bucket="models", region="us-east-1"),
                        ["inferstack-runtime-0", "inferstack-runtime-1"])
    settings = [line.split("=", 1) for line in unit.splitlines() if "=" in line]
    assert ["After", "network-online.target inferstack-runtime-0.service inferstack-runtime-1.service"] in settings
    (kill_signal,) = [value for key, value in settings if key == "KillSignal"]
    with runtime() as backend:
        port = free_port()
        config = local_config(plan, tmp_path, port, backend.port, api_key=True)
        with nginx_serving(config, tmp_path, port, plan.serving.health_path) as nginx, ThreadPoolExecutor(1) as pool:
            gateway_ = Gateway(port, backend, tmp_path / "access.log")
            in_flight = pool.submit(gateway_.request, "POST", "/v1/completions", API_KEY, {"hold_s": 1.5})
            while not any(seen.path == "/v1/completions" for seen in backend.seen):
                time.sleep(0.01)
            nginx.send_signal(getattr(signal, kill_signal))
            assert in_flight.result(timeout=10) == (200, b'{"path": "/v1/completions"}')
            assert nginx.wait(timeout=10) == 0


def test_the_access_log_says_which_requests_the_runtime_saw(tmp_path: Path) -> None:
    """Each line ends with `up=` the runtime's status, "-" for a request the gateway answered itself: refused for its
    key or, before the key is checked, for its size. A Huawei server counts only the former as its load."""
    from inferstack.bootstrap.files.huawei_metrics import counted

    plan = sample_plan("huawei", "gpu-llm", "production")
    with running_gateway(plan, tmp_path) as gateway_:
        before = len(gateway_.access_log.read_bytes().splitlines())  # the start's health probes
        assert gateway_.request("POST", "/v1/completions", API_KEY, {"prompt": "hi"})[0] == 200
        assert gateway_.request("POST", "/v1/completions", None, {"prompt": "hi"})[0] == 401
        too_large = b"x" * (gateway.MAX_REQUEST_BODY_MIB * 2**20 + 1)
        assert gateway_.request("POST", "/v1/completions", None, data=too_large)[0] == 413
        deadline = time.monotonic() + 10
        while len(lines := gateway_.access_log.read_bytes().splitlines(keepends=True)[before:]) < 3:
            assert time.monotonic() < deadline, lines
            time.sleep(0.05)
    assert [line.rstrip().rsplit(b" ", 1)[1] for line in lines] == [b"up=200", b"up=-", b"up=-"]
    assert [counted(line, plan.serving.health_path) for line in lines] == [True, False, False]

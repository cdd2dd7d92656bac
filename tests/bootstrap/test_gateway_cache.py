"""The gateway's inference cache, run for real: Debian's nginx with libnginx-mod-http-lua and lua-nginx-redis in front
of a stand-in runtime that counts what reaches it, and Debian's redis-server on loopback with TLS and AUTH. A
temperature-0 request asked twice reaches the runtime once; a sampled or streamed one is never cached; with Redis
stopped every request is still answered by the runtime; the hit rate is counted on a loopback status endpoint.

What the cache must never do: serve one group's answer (the canary's) to another, serve an answer encoded for one
client to another, store an answer whose headers carry meaning, give two different requests one key, tell a client
whether a request was asked before, fail with a 500 on a non-finite number, or read a large body in nginx's event
loop while the health path waits."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import fetch_secret
import pytest
from bootstrap_fakes import free_port
from redis_fakes import AUTH_TOKEN, Redis, missing_redis, redis_server
from sample_plans import sample_plan
from test_gateway import API_KEY, Gateway, at_once, nginx_serving, runtime
from test_gateway import local_config as gateway_config

from inferstack.bootstrap import gateway
from inferstack.bootstrap.runtimes import resolve_mode
from inferstack.plan import DeploymentPlan
from inferstack.spec import Cache

FILES_DIR = Path(gateway.__file__).with_name("files")


def missing_prerequisite() -> str | None:
    if shutil.which("nginx") is None:
        return "nginx is not installed (make test installs it)"
    if not all(Path(module).exists() for module in gateway.NGINX_MODULES):
        return "libnginx-mod-http-lua is not installed (make test installs it)"
    if not Path("/usr/share/lua/5.1/nginx/redis.lua").exists():
        return "lua-nginx-redis is not installed (make test installs it)"
    return missing_redis()


pytestmark = pytest.mark.skipif(missing_prerequisite() is not None, reason=str(missing_prerequisite()))


def cached_plan(variant: str = "cpu-llm", ttl_seconds: int = 600) -> DeploymentPlan:
    return sample_plan("aws", variant).model_copy(update={"cache": Cache(ttl_seconds=ttl_seconds)})  # type: ignore[arg-type]


def local_config(plan: DeploymentPlan, directory: Path, port: int, runtime_port: int, redis: Redis,
                 status_port: int, group: gateway.ServerGroup = "main") -> Path:
    """The gateway's configuration (test_gateway.local_config) with the cache's places moved too: its Lua, AUTH file,
    CA and status listener, and the loopback Redis."""
    endpoint = gateway.CacheEndpoint(host="127.0.0.1", port=redis.port, auth_secret="/inferstack/test/cache-auth",
                                     ca_certificate=redis.ca.read_text())
    lua_dir = directory / "lua"
    lua_dir.mkdir(exist_ok=True)
    shutil.copy(FILES_DIR / "inferstack_cache.lua", lua_dir / "inferstack_cache.lua")
    config = gateway_config(plan, directory, port, runtime_port, api_key=True, cache=endpoint, group=group, moved_too={
        gateway.CACHE_AUTH_FILE: str(directory / "cache.env"), gateway.CACHE_LUA_DIR: str(lua_dir),
        gateway.CACHE_CA_FILE: str(redis.ca), gateway.CACHE_STATUS_LISTEN: f"127.0.0.1:{status_port}"})
    fetch_secret.write_secret_file(str(directory / "cache.env"), {"REDIS_AUTH": AUTH_TOKEN}, "env")
    return config


@contextlib.contextmanager
def gateway_with(redis: Redis, directory: Path, plan: DeploymentPlan,
                 group: gateway.ServerGroup = "main") -> Iterator[tuple[Gateway, int]]:
    """(gateway, status port): nginx with the cache in `redis`, in front of a counting runtime of its own."""
    directory.mkdir(parents=True, exist_ok=True)
    with runtime() as backend:
        port, status_port = free_port(), free_port()
        config = local_config(plan, directory, port, backend.port, redis, status_port, group)
        with nginx_serving(config, directory, port, plan.serving.health_path):
            backend.seen.clear()
            yield Gateway(port, backend, directory / "access.log"), status_port


@contextlib.contextmanager
def cached_gateway(tmp_path: Path, plan: DeploymentPlan | None = None) -> Iterator[tuple[Gateway, Redis, int]]:
    """(gateway, redis, status port): nginx with the cache in front of a counting runtime and a TLS Redis."""
    with redis_server(tmp_path / "redis") as redis, gateway_with(redis, tmp_path, plan or cached_plan()) as (
            gateway_, status_port):
        yield gateway_, redis, status_port


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]
    cache: str
    """The outcome the access log gives the request (cache=HIT, MISS, BYPASS, ERROR or REFUSED)."""


def logged_lines(access_log: Path) -> list[str]:
    return access_log.read_text().splitlines() if access_log.exists() else []


def ask(gateway_: Gateway, path: str, body: Mapping[str, object] | None = None, *, data: bytes | None = None,
        headers: Mapping[str, str] | None = None, chunked: bool = False) -> Answer:
    """One POST with the key (`body` as JSON or `data` as it is), and its line in the access log."""
    before = len(logged_lines(gateway_.access_log))
    sent = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}", **(headers or {})}
    payload = data if data is not None else json.dumps(body).encode()
    connection = http.client.HTTPConnection("127.0.0.1", gateway_.port, timeout=30)
    try:
        connection.request("POST", path, body=iter([payload]) if chunked else payload, headers=sent,
                           encode_chunked=chunked)
        response = connection.getresponse()
        answer = response.read()
        headers_back = {name.lower(): value for name, value in response.getheaders()}
    finally:
        connection.close()
    request_line = f'"POST {path} HTTP/1.1"'
    deadline = time.monotonic() + 10
    while not (lines := [line for line in logged_lines(gateway_.access_log)[before:] if request_line in line]):
        assert time.monotonic() < deadline, "no access log line for the request"  # logged after the response
        time.sleep(0.02)
    outcome = re.search(r" cache=(\S+) up=[-0-9, :]+$", lines[0])  # gateway.py: the cache status, then the runtime's
    assert outcome, lines[0]
    return Answer(response.status, answer, headers_back, outcome.group(1))


def wait_for_keys(redis: Redis, count: int) -> list[str]:
    """The answer is stored after the response (a zero-delay timer): wait until Redis holds `count` keys."""
    deadline = time.monotonic() + 10
    while len(keys := redis.keys()) < count:
        assert time.monotonic() < deadline, f"Redis holds {keys}, expected {count} key(s)"
        time.sleep(0.05)
    return keys


STORE_WAIT_S = 1.0
"""How long an answer that is not to be stored is given to show up in Redis anyway (stores take milliseconds here)."""


def status(status_port: int) -> dict[str, float]:
    connection = http.client.HTTPConnection("127.0.0.1", status_port, timeout=10)
    try:
        connection.request("GET", "/cache-status")
        return json.loads(connection.getresponse().read())  # type: ignore[no-any-return]
    finally:
        connection.close()


def test_the_cached_configuration_passes_nginx_t_for_every_runtime(tmp_path: Path) -> None:
    with redis_server(tmp_path / "redis") as redis:
        for variant in ("gpu-llm", "cpu-llm", "cpu-encoder"):
            config = local_config(cached_plan(variant), tmp_path, free_port(), free_port(), redis, free_port())
            result = subprocess.run(["nginx", "-t", "-c", str(config), "-p", str(tmp_path)], capture_output=True,
                                    text=True)
            assert result.returncode == 0, f"{variant}: {result.stderr}"


def test_a_temperature_0_request_asked_twice_reaches_the_runtime_once(tmp_path: Path) -> None:
    request = b'{"model": "m", "prompt": "hello", "max_tokens": 8, "temperature": 0}'
    reordered = b'{"temperature":0,\n "max_tokens":8, "prompt":"hello","model":"m"}'  # the same, written otherwise
    plan = cached_plan()
    with cached_gateway(tmp_path, plan) as (gateway_, redis, status_port):
        first = ask(gateway_, "/v1/completions", data=request)
        assert first.status == 200 and first.cache == "MISS"
        (key,) = wait_for_keys(redis, 1)
        assert key.startswith(f"inferstack:{gateway.cache_scope(plan, resolve_mode(plan, 'auto'), 'main')}:")
        ttl = int(redis.cli("TTL", key))
        assert 0 < ttl <= 600
        second = ask(gateway_, "/v1/completions", data=reordered)
        assert (second.status, second.body, second.cache) == (200, first.body, "HIT")
        assert gateway_.request("POST", "/v1/completions", body=json.loads(request))[0] == 401  # the key first
        assert [seen.path for seen in gateway_.runtime.seen] == ["/v1/completions"]  # once, not twice
        counters = status(status_port)
        assert (counters["hits"], counters["misses"], counters["stores"]) == (1, 1, 1)
        assert counters["hit_rate"] == 0.5


def test_sampled_streamed_and_different_requests_are_not_served_from_the_cache(tmp_path: Path) -> None:
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        sampled = {"model": "m", "prompt": "hello", "temperature": 0.7}
        unstated = {"model": "m", "prompt": "hello"}  # the runtime's default temperature samples
        streamed = {"model": "m", "prompt": "hello", "temperature": 0, "stream": True}
        for body in (sampled, sampled, unstated, unstated, streamed, streamed):
            answer = ask(gateway_, "/v1/completions", body)
            assert answer.status == 200 and answer.cache == "BYPASS", body
        assert ask(gateway_, "/v1/chat/completions", {"messages": [], "temperature": 0}).cache == "MISS"
        assert ask(gateway_, "/v1/chat/completions", {"messages": [], "temperature": 0, "n": 2}).cache == "BYPASS"
        wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/completions", {"prompt": "other", "temperature": 0}).cache == "MISS"
        assert len(gateway_.runtime.seen) == 9


def test_with_redis_stopped_every_request_is_still_answered_by_the_runtime(tmp_path: Path) -> None:
    request = {"model": "m", "prompt": "hello", "temperature": 0}
    with cached_gateway(tmp_path) as (gateway_, redis, status_port):
        redis.stop()
        for _ in range(3):
            answer = ask(gateway_, "/v1/completions", request)
            assert answer.status == 200 and json.loads(answer.body) == {"path": "/v1/completions"}
            assert answer.cache == "ERROR"
        assert len(gateway_.runtime.seen) == 3
        assert status(status_port)["errors"] >= 3
        redis.start()  # back again: the cache serves once more
        assert ask(gateway_, "/v1/completions", request).cache == "MISS"
        wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/completions", request).cache == "HIT"
        assert len(gateway_.runtime.seen) == 4


#### Scope: one group's or one build's answers are never another's ####


def test_the_cache_scope_follows_everything_that_changes_an_answer() -> None:
    plan = cached_plan()
    serving, model = plan.serving, plan.model

    def changed(**serving_update: object) -> DeploymentPlan:
        return plan.model_copy(update={"serving": serving.model_copy(update=serving_update)})

    scopes = {
        "as planned": gateway.cache_scope(plan, "container", "main"),
        "canary group": gateway.cache_scope(plan, "container", "canary"),
        "native build": gateway.cache_scope(plan, "native", "main"),
        "revision": gateway.cache_scope(plan.model_copy(update={"model": model.model_copy(update={
            "revision": "r2", "bucket_prefix": f"{model.bucket_prefix}r2/"})}), "container", "main"),
        "model": gateway.cache_scope(plan.model_copy(update={"model": model.model_copy(update={
            "name": "another-model"})}), "container", "main"),
        "precision": gateway.cache_scope(plan.model_copy(update={"precision": "q8_0"}), "container", "main"),
        "engine": gateway.cache_scope(changed(engine="hf"), "container", "main"),
        "kv cache": gateway.cache_scope(changed(kv_cache_dtype="q8_0"), "container", "main"),
        "quantization": gateway.cache_scope(changed(quantization=None), "container", "main"),
    }
    assert len(set(scopes.values())) == len(scopes), scopes
    encoder = cached_plan("cpu-encoder")
    onnxruntime = encoder.serving.model_copy(update={"backend": "onnxruntime"})  # the sample's CPU encoder: openvino
    other_backend = encoder.model_copy(update={"serving": onnxruntime})
    assert gateway.cache_scope(encoder, "container", "main") != gateway.cache_scope(other_backend, "container", "main")
    assert gateway.cache_scope(plan, "container", "main") == gateway.cache_scope(cached_plan(), "container", "main")


def test_a_canary_answer_is_never_served_by_the_main_group(tmp_path: Path) -> None:
    """Both groups share the deployment's Redis; the canary here differs from the main group in nothing but its
    group, the closest a canary can be."""
    plan = cached_plan()
    request = {"model": "m", "prompt": "which group?", "temperature": 0}
    with redis_server(tmp_path / "redis") as redis, \
            gateway_with(redis, tmp_path / "canary", plan, "canary") as (canary, _), \
            gateway_with(redis, tmp_path / "main", plan, "main") as (main, _):
        assert ask(canary, "/v1/completions", request).cache == "MISS"
        wait_for_keys(redis, 1)
        assert ask(main, "/v1/completions", request).cache == "MISS"
        assert len(main.runtime.seen) == 1
        assert sorted(key.split(":")[1] for key in wait_for_keys(redis, 2)) == ["canary", "main"]
        assert ask(main, "/v1/completions", request).cache == "HIT"  # each group serves its own answers
        assert ask(canary, "/v1/completions", request).cache == "HIT"
        assert (len(canary.runtime.seen), len(main.runtime.seen)) == (1, 1)


#### What clients can learn, and what is stored ####


def test_no_answer_tells_the_client_whether_it_was_asked_before(tmp_path: Path) -> None:
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        first = ask(gateway_, "/v1/embeddings", {"input": "asked before?"})
        wait_for_keys(redis, 1)
        second = ask(gateway_, "/v1/embeddings", {"input": "asked before?"})
    assert (first.cache, second.cache) == ("MISS", "HIT")  # the access log says so; the client is not told
    assert (second.status, second.body) == (first.status, first.body)
    assert set(second.headers) == set(first.headers), (first.headers, second.headers)
    assert not [name for name in second.headers if "cache" in name or "inferstack" in name]


def test_gzip_asked_by_one_client_is_never_served_to_another(tmp_path: Path) -> None:
    """Triton compresses an answer when the request accepts gzip: the gateway never asks it to."""
    request = {"inputs": [{"name": "input_ids", "shape": [1, 2], "datatype": "INT64", "data": [101, 102]}]}
    with cached_gateway(tmp_path, cached_plan("cpu-encoder")) as (gateway_, redis, _):
        gateway_.runtime.gzip = "when asked"
        first = ask(gateway_, "/v2/models/bert-base/infer", request, headers={"Accept-Encoding": "gzip"})
        wait_for_keys(redis, 1)
        second = ask(gateway_, "/v2/models/bert-base/infer", request)
        assert (first.cache, second.cache) == ("MISS", "HIT")
        assert json.loads(second.body) == {"path": "/v2/models/bert-base/infer"}  # identity, readable by anyone
        assert "content-encoding" not in second.headers
        assert [seen.headers.get("Accept-Encoding") for seen in gateway_.runtime.seen] == [None]


@pytest.mark.parametrize("answer", [
    {"gzip": "always"},  # a runtime that compresses unasked
    {"extra_headers": {"Set-Cookie": "session=for-one-client"}},
    {"extra_headers": {"Vary": "Origin, Accept-Language"}},
    {"extra_headers": {"Cache-Control": "no-store"}},
    {"content_type": "application/octet-stream", "extra_headers": {"Inference-Header-Content-Length": "17"}},
    {"content_type": "text/plain"},
], ids=["content-encoding", "set-cookie", "vary", "no-store", "triton-binary-output", "not-json"])
def test_an_answer_whose_headers_carry_meaning_is_never_stored(tmp_path: Path, answer: dict[str, object]) -> None:
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        for name, value in answer.items():
            setattr(gateway_.runtime, name, value)
        outcomes = [ask(gateway_, "/v1/embeddings", {"input": "headers"}).cache for _ in range(2)]
        time.sleep(STORE_WAIT_S)
        assert outcomes == ["MISS", "MISS"] and redis.keys() == []
        assert len(gateway_.runtime.seen) == 2


def test_an_answer_varying_by_origin_only_is_stored(tmp_path: Path) -> None:
    """llama-cpp-python's CORS middleware says Vary: Origin on every answer: it selects CORS headers, never stored."""
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        gateway_.runtime.extra_headers = {"Vary": "Origin", "x-request-id": "one-per-answer"}
        assert ask(gateway_, "/v1/embeddings", {"input": "cors"}).cache == "MISS"
        wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/embeddings", {"input": "cors"}).cache == "HIT"


#### The key: exact canonical JSON ####


@pytest.mark.parametrize(("first", "second"), [
    ('{"input": []}', '{"input": {}}'),
    ('{"input": [[]]}', '{"input": [{}]}'),
    ('{"input": [9007199254740993]}', '{"input": [9007199254740992]}'),  # 2^53 + 1 and 2^53
    ('{"input": [0.123456789012341]}', '{"input": [0.123456789012342]}'),  # equal to 14 significant digits
    ('{"input": [1]}', '{"input": [1.0]}'),  # an int and a float to a Python runtime (a chat template's tojson)
    ('{"input": ["1"]}', '{"input": [1]}'),
    ('{"a": 1, "\\u0061": 2}', '{"a": 3, "a": 2}'),  # duplicate keys: which one counts is the parser's
], ids=["empty-array-object", "nested-empty", "beyond-2^53", "15-digits", "int-float", "string-number",
        "duplicate-key"])
def test_distinct_json_values_never_share_a_key(tmp_path: Path, first: str, second: str) -> None:
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        if ask(gateway_, "/v1/embeddings", data=first.encode()).cache == "MISS":  # keyed (and stored)
            wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/embeddings", data=second.encode()).cache != "HIT"
        assert [seen.body for seen in gateway_.runtime.seen] == [first.encode(), second.encode()]


def test_the_same_request_written_differently_shares_a_key(tmp_path: Path) -> None:
    written = '{"model": "m", "input": ["caf\u00e9/x \U0001f600", 1.5e3, -0, true, null]}'
    rewritten = '{ "input" : [ "caf\\u00e9\\/x \\ud83d\\ude00" , 1.5e3 , -0 , true , null ] ,\n\t"model":"m" }'
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        assert ask(gateway_, "/v1/embeddings", data=written.encode()).cache == "MISS"
        wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/embeddings", data=rewritten.encode()).cache == "HIT"
        assert len(gateway_.runtime.seen) == 1


@pytest.mark.parametrize(("route", "body", "field", "value"), [
    ("/v1/completions", '{"prompt": "x", "temperature": 0, "logit_bias": {"50256": 1e999}}', "logit_bias.50256",
     "1e999"),
    ("/v1/completions", '{"prompt": "x", "temperature": NaN}', "temperature", "NaN"),
    ("/v1/completions", '{"prompt": "x", "temperature": 0.7, "top_p": Infinity}', "top_p", "Infinity"),
    ("/v1/embeddings", '{"input": [[1, 2], [3, -Infinity]]}', "input[1][1]", "-Infinity"),
    ("/v1/embeddings", '{"input": [-1e400]}', "input[0]", "-1e400"),
], ids=["overflow", "nan", "infinity-sampled", "minus-infinity", "minus-overflow"])
def test_a_non_finite_number_is_refused_with_a_400_naming_the_field(tmp_path: Path, route: str, body: str,
                                                                   field: str, value: str) -> None:
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        answer = ask(gateway_, route, data=body.encode())
        assert (answer.status, answer.cache) == (400, "REFUSED"), answer
        error = json.loads(answer.body)["error"]
        assert error["type"] == "invalid_request_error" and error["param"] == field
        assert f"{field} is {value}" in error["message"] and "finite" in error["message"]
        assert gateway_.runtime.seen == [] and redis.keys() == []


#### Large bodies: never read into Lua; the health path stays light ####


def test_a_body_beyond_the_cap_or_without_a_length_is_not_read_by_the_cache(tmp_path: Path) -> None:
    prefix, suffix = b'{"input": "', b'"}'
    beyond = prefix + b"x" * (gateway.CACHE_MAX_REQUEST_BYTES + 1 - len(prefix) - len(suffix)) + suffix
    within = prefix + b"x" * (gateway.CACHE_MAX_REQUEST_BYTES - len(prefix) - len(suffix)) + suffix
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        for _ in range(2):
            assert ask(gateway_, "/v1/embeddings", data=beyond).cache == "BYPASS"
            assert ask(gateway_, "/v1/embeddings", data=b'{"input": "chunked"}', chunked=True).cache == "BYPASS"
        assert len(gateway_.runtime.seen) == 4
        assert ask(gateway_, "/v1/embeddings", data=within).cache == "MISS"  # the cap itself is cached
        wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/embeddings", data=within).cache == "HIT"


def token_ids_body(size_bytes: int, last: str = "7") -> bytes:
    """An embeddings request of token ids (costly JSON for a parser: a number every few bytes) of `size_bytes`, its
    last number `last`."""
    head, tail = b'{"input": [', last.encode() + b"]}"
    body = head + b"12345," * ((size_bytes - len(head) - len(tail)) // 6) + tail
    return body + b" " * (size_bytes - len(body))  # whitespace after the value, to the exact size


def post(port: int, path: str, key: str, body: bytes) -> int:
    """The status of one POST of `body` with `key`, on a connection of its own."""
    with contextlib.closing(http.client.HTTPConnection("127.0.0.1", port, timeout=120)) as connection:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json",
                                                              "Authorization": f"Bearer {key}"})
        response = connection.getresponse()
        response.read()
        return response.status


def slowest_health_answer_s(port: int, key: str, load: list[bytes], path: str) -> tuple[float, int, list[int]]:
    """(the slowest of the health path's answers, how many there were, the posts' statuses) while every body of
    `load` is posted to `path` at once, with `key`."""
    timings: list[float] = []
    finished = threading.Event()

    def probe() -> None:
        with contextlib.closing(http.client.HTTPConnection("127.0.0.1", port, timeout=30)) as connection:
            while not finished.is_set():
                started = time.monotonic()
                connection.request("GET", "/health")
                connection.getresponse().read()
                timings.append(time.monotonic() - started)
                time.sleep(0.01)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        time.sleep(0.1)
        bodies = iter(load)
        statuses = at_once(len(load), lambda: post(port, path, key, next(bodies)))
    finally:
        finished.set()
        prober.join()
    return max(timings), len(timings), statuses


HEALTH_BUDGET_S = 0.2
"""A load balancer's health check waits seconds; the gateway's own share of the answer stays under this."""


def test_the_health_path_answers_quickly_while_the_cache_reads_large_bodies(tmp_path: Path) -> None:
    """The issue's case (four 7.7 MiB requests), then as many bodies at the cap as the gateway reads in full: each
    ends with a non-finite number, so the gateway parses all of it and answers itself (400)."""
    issue_load = [token_ids_body(int(7.7 * 2**20)) for _ in range(4)]
    at_the_cap = [token_ids_body(gateway.CACHE_MAX_REQUEST_BYTES, last="1e999") for _ in range(8)]
    with cached_gateway(tmp_path) as (gateway_, _, _):
        issue_s, issue_probes, _ = slowest_health_answer_s(gateway_.port, API_KEY, issue_load, "/v1/embeddings")
        cap_s, cap_probes, refused = slowest_health_answer_s(gateway_.port, API_KEY, at_the_cap, "/v1/embeddings")
        reached_runtime = len(gateway_.runtime.seen)
    print(f"\nhealth path, slowest answer: {issue_s * 1000:.0f} ms during 4 x 7.7 MiB posts ({issue_probes} probes); "
          f"{cap_s * 1000:.0f} ms during 8 x {gateway.CACHE_MAX_REQUEST_BYTES // 1024} KiB posts read in full "
          f"({cap_probes} probes)")
    assert issue_s < HEALTH_BUDGET_S and cap_s < HEALTH_BUDGET_S
    assert refused == [400] * 8 and reached_runtime == 4 + issue_probes + cap_probes  # parsed at the gateway


def test_the_cached_configuration_keeps_bodies_in_memory_and_the_health_path_free_of_lua() -> None:
    plan = cached_plan()
    config = gateway.gateway_config(plan, api_key=True, mode="container", group="main",
                                    cache=gateway.CacheEndpoint(host="10.0.0.5", port=6379, auth_secret="cache-auth"))
    assert f"client_body_buffer_size {gateway.CACHE_MAX_REQUEST_BYTES // 1024}k;" in config
    assert f"max_request_bytes = {gateway.CACHE_MAX_REQUEST_BYTES}" in config
    assert 'proxy_set_header Accept-Encoding "";' in config
    health = config.split(f"location = {plan.serving.health_path} {{", 1)[1].split("\n        }\n", 1)[0]
    assert "proxy_pass http://inferstack_runtime;" in health and "lua" not in health

"""The gateway's inference cache, run for real: Debian's nginx with libnginx-mod-http-lua and lua-nginx-redis in front
of a stand-in runtime that counts what reaches it, and Debian's redis-server on loopback with TLS and AUTH. A
temperature-0 request asked twice reaches the runtime once; a sampled or streamed one is never cached; with Redis
stopped every request is still answered by the runtime; the hit rate is counted on a loopback status endpoint."""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import fetch_secret
import pytest
from bootstrap_fakes import free_port
from redis_fakes import AUTH_TOKEN, Redis, missing_redis, redis_server
from sample_plans import sample_plan
from test_gateway import API_KEY, Gateway, nginx_serving, runtime
from test_gateway import local_config as gateway_config

from inferstack.bootstrap import gateway
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
                 status_port: int) -> Path:
    """The gateway's configuration (test_gateway.local_config) with the cache's places moved too: its Lua, AUTH file,
    CA and status listener, and the loopback Redis."""
    endpoint = gateway.CacheEndpoint(host="127.0.0.1", port=redis.port, auth_secret="/inferstack/test/cache-auth",
                                     ca_certificate=redis.ca.read_text())
    lua_dir = directory / "lua"
    lua_dir.mkdir(exist_ok=True)
    shutil.copy(FILES_DIR / "inferstack_cache.lua", lua_dir / "inferstack_cache.lua")
    config = gateway_config(plan, directory, port, runtime_port, api_key=True, cache=endpoint, moved_too={
        gateway.CACHE_AUTH_FILE: str(directory / "cache.env"), gateway.CACHE_LUA_DIR: str(lua_dir),
        gateway.CACHE_CA_FILE: str(redis.ca), gateway.CACHE_STATUS_LISTEN: f"127.0.0.1:{status_port}"})
    fetch_secret.write_secret_file(str(directory / "cache.env"), {"REDIS_AUTH": AUTH_TOKEN}, "env")
    return config


@contextlib.contextmanager
def cached_gateway(tmp_path: Path, plan: DeploymentPlan | None = None) -> Iterator[tuple[Gateway, Redis, int]]:
    """(gateway, redis, status port): nginx with the cache in front of a counting runtime and a TLS Redis."""
    plan = plan or cached_plan()
    with runtime() as backend, redis_server(tmp_path / "redis") as redis:
        port, status_port = free_port(), free_port()
        config = local_config(plan, tmp_path, port, backend.port, redis, status_port)
        with nginx_serving(config, tmp_path, port, plan.serving.health_path):
            backend.seen.clear()
            yield Gateway(port, backend), redis, status_port


def ask(gateway_: Gateway, path: str, body: dict[str, object]) -> tuple[int, bytes, str | None]:
    """(status, body, X-Inferstack-Cache) of one request with the key."""
    connection = http.client.HTTPConnection("127.0.0.1", gateway_.port, timeout=10)
    try:
        connection.request("POST", path, body=json.dumps(body).encode(),
                           headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("X-Inferstack-Cache")
    finally:
        connection.close()


def wait_for_keys(redis: Redis, count: int) -> list[str]:
    """The answer is stored after the response (a zero-delay timer): wait until Redis holds `count` keys."""
    deadline = time.monotonic() + 10
    while len(keys := redis.keys()) < count:
        assert time.monotonic() < deadline, f"Redis holds {keys}, expected {count} key(s)"
        time.sleep(0.05)
    return keys


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
    request = {"model": "m", "prompt": "hello", "max_tokens": 8, "temperature": 0}
    reordered = {"temperature": 0.0, "max_tokens": 8, "prompt": "hello", "model": "m"}  # the same, normalised
    with cached_gateway(tmp_path) as (gateway_, redis, status_port):
        first = ask(gateway_, "/v1/completions", request)
        assert first[0] == 200 and first[2] == "MISS"
        (key,) = wait_for_keys(redis, 1)
        assert key.startswith("inferstack:llama-3.1-8b:")
        ttl = int(redis.cli("TTL", key))
        assert 0 < ttl <= 600
        second = ask(gateway_, "/v1/completions", reordered)
        assert second == (200, first[1], "HIT")
        assert gateway_.request("POST", "/v1/completions", body=request)[0] == 401  # the key before the cache
        assert [path for _, path, _ in gateway_.runtime.seen] == ["/v1/completions"]  # once, not twice
        counters = status(status_port)
        assert (counters["hits"], counters["misses"], counters["stores"]) == (1, 1, 1)
        assert counters["hit_rate"] == 0.5
    log = (tmp_path / "access.log").read_text()
    assert "cache=MISS" in log and "cache=HIT" in log


def test_sampled_streamed_and_different_requests_are_not_served_from_the_cache(tmp_path: Path) -> None:
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        sampled = {"model": "m", "prompt": "hello", "temperature": 0.7}
        unstated = {"model": "m", "prompt": "hello"}  # the runtime's default temperature samples
        streamed = {"model": "m", "prompt": "hello", "temperature": 0, "stream": True}
        for body in (sampled, sampled, unstated, unstated, streamed, streamed):
            answer = ask(gateway_, "/v1/completions", body)
            assert answer[0] == 200 and answer[2] is None, body
        assert ask(gateway_, "/v1/chat/completions", {"messages": [], "temperature": 0})[2] == "MISS"
        assert ask(gateway_, "/v1/chat/completions", {"messages": [], "temperature": 0, "n": 2})[2] is None
        wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/completions", {"prompt": "other", "temperature": 0})[2] == "MISS"
        assert len(gateway_.runtime.seen) == 9


def test_embeddings_are_cached_and_keys_follow_the_model_revision(tmp_path: Path) -> None:
    with cached_gateway(tmp_path) as (gateway_, redis, _):
        assert ask(gateway_, "/v1/embeddings", {"input": "text"})[2] == "MISS"
        wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/embeddings", {"input": "text"})[2] == "HIT"
        assert len(gateway_.runtime.seen) == 1
    plan = cached_plan()
    other = plan.model_copy(update={"precision": "q8_0"})
    assert gateway.cache_revision(plan) != gateway.cache_revision(other)
    revised = [plan.model_copy(update={"model": plan.model.model_copy(update={
        "revision": revision, "bucket_prefix": f"{plan.model.bucket_prefix}{revision}/"})})
        for revision in ("r1", "r2")]
    assert len({gateway.cache_revision(p) for p in (plan, *revised)}) == 3
    renamed = revised[0].model_copy(update={"model": revised[0].model.model_copy(update={"name": "another-model"})})
    assert gateway.cache_revision(renamed) != gateway.cache_revision(revised[0])  # a label is per model


def test_with_redis_stopped_every_request_is_still_answered_by_the_runtime(tmp_path: Path) -> None:
    request = {"model": "m", "prompt": "hello", "temperature": 0}
    with cached_gateway(tmp_path) as (gateway_, redis, status_port):
        redis.stop()
        for _ in range(3):
            answer = ask(gateway_, "/v1/completions", request)
            assert answer[0] == 200 and json.loads(answer[1]) == {"path": "/v1/completions"}
        assert len(gateway_.runtime.seen) == 3
        assert status(status_port)["errors"] >= 3
        redis.start()  # back again: the cache serves once more
        assert ask(gateway_, "/v1/completions", request)[2] == "MISS"
        wait_for_keys(redis, 1)
        assert ask(gateway_, "/v1/completions", request)[2] == "HIT"
        assert len(gateway_.runtime.seen) == 4


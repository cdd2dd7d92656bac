"""The gateway on every server: nginx (the distribution's package) in front of the inference runtime.

It is the only listener on the API port. It checks the API key on every route but the health path (which load
balancers and the boot's readiness check call without one): without the key every other route is 401, and the
connection is closed. With it, only the runtime's inference API is forwarded, streamed unbuffered; everything else
is 404. vLLM's `--api-key` guards only `/v1`, and its `/tokenize`, `/invocations` and `/metrics`, llama.cpp's
`/props` and `/slots`, and Triton's model-control and shared-memory routes never reach the network. The runtime
itself has no key and listens on loopback. The health path takes GET or HEAD without a body and forwards a bare
`GET <health path>`: no query, raw path, header or body of the client's reaches the runtime, and no Lua runs for it.

The key never appears in a file the runtime can read, in user data or on a command line: the gateway's start
fetches it from the cloud's secret store into a root-only nginx `map` file (`KEY_MAP`) that nginx's master
process (root) reads with the configuration. This module is pure: plan → configuration text (golden-tested).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from inferstack.bootstrap import interruption, replica
from inferstack.bootstrap.runtimes import image_for, native_install, runtime_processes
from inferstack.plan import DeploymentPlan
from inferstack.runtimes import RUNTIME_FACTS, Mode
from inferstack.spec import Engine, KvCacheDtype, Precision

CONFIG_PATH = "/etc/inferstack/gateway.conf"
KEY_MAP = "/run/inferstack-secrets/gateway-key.map"
"""`"Bearer <key>" 1;`, written by fetch_secret.py at the gateway's start (root only, mode 0600)."""
ACCESS_LOG = "/var/log/inferstack/gateway-access.log"
ACCESS_LOG_FORMAT = ("    log_format inferstack '$remote_addr - [$time_local] \"$request\" $status $body_bytes_sent "
                     "$request_time up=$upstream_status';\n")
"""One line per request, its seventh field the answer's time to its last byte, streams included, as in the cache's
format (the AWS latency alarm reads it: components/aws/observability.py ANSWER_TIME_PATTERN); its last, `up=`, the
runtime's status, "-" for a request the runtime never saw (refused for its key or its size, answered by the cache or
the gateway itself): what a Huawei server counts as its load (files/huawei_metrics.py)."""
WORKER_USER = "www-data"
"""The nginx package's own unprivileged user on Debian and Ubuntu."""
MAX_REQUEST_BODY_MIB = 16
LB_KEEPALIVE_S = 600
"""The longest a cloud's load balancer keeps an idle connection to a backend (Google Cloud's fixed 600 s)."""

ServerGroup = Literal["main", "canary"]
"""Which of a deployment's server groups a server belongs to: the main group, or the canary beside it."""

#### Connections ####

CLIENT_REQUESTS_FLOOR = 16
"""The fewest requests one client address may have in flight on a single server: clients behind one NAT share an
address."""


def client_request_limit(plan: DeploymentPlan) -> int | None:
    """How many requests one client address may have in flight at once on a server, or None: no limit per address.
    nginx's limit_conn counts a connection "only if it has a request being processed by the server and the whole
    request header has already been read" (nginx.org/r/limit_conn, read 2026-12-07): requests in flight.

    A single server is reached by its clients directly: one address may keep twice the server's planned peak in
    flight (a batch job alone may drive it to its peak, and queue as much again), at least CLIENT_REQUESTS_FLOOR;
    more only waits in the runtime's queue while it holds the gateway's connections. A fleet's servers are reached
    through the load balancer (their firewall admits its nodes, or on Alibaba and Huawei the VPC they sit in, and no
    client's address: components/<cloud>.py create_firewall): the few addresses of its nodes carry every client's
    requests over pooled connections, so a limit per address would throttle all clients at once. The fleet's
    per-client limits belong to the load balancer's tier (a WAF or Cloud Armor rate rule)."""
    if plan.fleet is not None:
        return None
    peak = plan.performance.concurrency_per_replica * plan.serving.processes
    return max(CLIENT_REQUESTS_FLOOR, 2 * peak)


#### Inference cache (a workload's `cache:`) ####

CACHE_AUTH_FILE = "/run/inferstack-secrets/cache.env"
"""`REDIS_AUTH=<token>`, written by fetch_secret.py at the gateway's start (root only); nginx's master reads it."""
CACHE_LUA_DIR = "/usr/local/lib/inferstack"
"""Where the bundle puts inferstack_cache.lua (files/), the cache's logic in the gateway."""
CACHE_STATUS_LISTEN = "127.0.0.1:9180"
"""The cache's counters (GET /cache-status: hits, misses, errors, stores, hit_rate), on loopback only."""
CACHE_MAX_REQUEST_BYTES = 256 * 1024
"""The largest request body the cache reads, decided from Content-Length before a byte is read (a larger body, or
one without a length, goes to the runtime unread). The cache's Lua runs in nginx's event loop, where the worker's
other connections, the health path's included, wait while it parses: a body at this size takes 3 ms (prose) to
13 ms (an array of floats) to parse (measured 2026-12-07 in Debian 12's nginx and LuaJIT on a shared 2-core
machine), and the parse yields every 64 KiB. A prompt of 64k tokens (about 256 KiB of English) still fits. nginx
keeps bodies up to this size in memory (client_body_buffer_size), so none is read from a temporary file either."""
SYSTEM_TRUST_STORE = "/etc/ssl/certs/ca-certificates.crt"
CACHE_CA_FILE = "/etc/inferstack/cache-ca.pem"
"""The Redis server's CA where the cloud gives one per instance (Memorystore's server_ca_certs)."""
NGINX_MODULES = ("/usr/lib/nginx/modules/ndk_http_module.so", "/usr/lib/nginx/modules/ngx_http_lua_module.so")
"""Debian's and Ubuntu's dynamic modules (libnginx-mod-http-ndk, libnginx-mod-http-lua); lua needs ndk first."""
CACHE_APT_PACKAGES = ("libnginx-mod-http-lua", "lua-nginx-redis", "lua-cjson")
"""The distribution's packages of the caching path: OpenResty's lua-nginx-module for Debian's nginx, lua-resty-redis
(as `nginx.redis`) and lua-cjson; installed only when the plan has a cache."""

CacheHost = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")]
"""A DNS name or an IPv4 address, as the clouds give a managed Redis's endpoint."""
PEM_CERTIFICATES_PATTERN = r"^(-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]+-----END CERTIFICATE-----\n?)+$"


class CacheEndpoint(BaseModel):
    """Where the gateway finds the deployment's managed Redis (deploy-time facts; the plan says only that there is
    one, and its TTL)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: CacheHost = Field(description="The Redis endpoint's private DNS name or address.")
    port: int = Field(ge=1, le=65535, description="Its TLS port.")
    auth_secret: str = Field(pattern=r"^[A-Za-z0-9/_][A-Za-z0-9/_.@+=-]{0,254}$",
                             description="Reference to the Redis AUTH token in the cloud's secret store.")
    ca_certificate: str | None = Field(
        default=None, pattern=PEM_CERTIFICATES_PATTERN, max_length=65536,
        description="PEM CA certificate(s) of the Redis server when the cloud issues one per instance (Memorystore); "
                    "None: the system trust store (ElastiCache's certificates chain to Amazon's public roots).")
    verify: bool = Field(default=True, description="Verify the server's certificate and name (always, where the "
                                                   "cloud's CA can be known at deploy time).")


def runtime_build(plan: DeploymentPlan, mode: Mode) -> str:
    """The pinned build of the runtime that answers (its `RuntimeFacts`): its container image, or the package
    natively. Two builds of one runtime may answer one greedy request differently (another llama.cpp, torch or
    CUDA kernel)."""
    if mode == "container":
        return image_for(plan)
    native = native_install(plan)
    return f"{native.pip_distribution}=={native.pip_version}"


def cache_scope(plan: DeploymentPlan, mode: Mode, group: ServerGroup) -> str:
    """What the cache keys are scoped by: the server group first (`inferstack:canary:*` are the canary's answers,
    which the main group never reads), then the model and its revision, and everything of the serving that changes
    an answer: precision, engine, Triton backend, KV-cache type, quantization and the runtime's build."""
    serving = plan.serving
    revision = f"@{plan.model.revision}" if plan.model.revision else ""
    facts = {"precision": Precision(plan.precision).value, "engine": Engine(serving.engine).value,
             "backend": serving.backend, "kv": KvCacheDtype(serving.kv_cache_dtype).value,
             "quantization": serving.quantization or "none", "runtime": runtime_build(plan, mode)}
    return f"{group}:{plan.model.name}{revision}:" + ",".join(
        f"{name}={value}" for name, value in facts.items() if value is not None)


def _lua_settings(plan: DeploymentPlan, cache: CacheEndpoint, scope: str) -> str:
    """The Lua table inferstack_cache.init receives: every value pattern-checked, written as JSON strings and numbers
    (which Lua reads the same)."""
    assert plan.cache is not None
    runtime = RUNTIME_FACTS[plan.serving.runtime]
    generative = plan.model.kind == "image_generation"  # diffusion samples noise: never deterministic
    values = {"scope": scope, "ttl_seconds": plan.cache.ttl_seconds, "max_request_bytes": CACHE_MAX_REQUEST_BYTES,
              "host": cache.host, "port": cache.port, "server_name": cache.host, "auth_file": CACHE_AUTH_FILE}
    lines = [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    lines += ["tls = true", f"verify = {'true' if cache.verify else 'false'}"]
    paths = () if generative else runtime.cache_deterministic_prefixes
    lines.append("paths = {" + ", ".join(json.dumps(p) for p in paths) + "}")
    lines.append("completions = {" + ", ".join(json.dumps(p) for p in runtime.cache_completion_routes) + "}")
    return ", ".join(lines)


def _cache_main() -> str:
    return "".join(f"load_module {module};\n" for module in NGINX_MODULES)


def _cache_http(plan: DeploymentPlan, cache: CacheEndpoint | None, scope: str) -> str:
    if cache is None:
        return ""
    trust = CACHE_CA_FILE if cache.ca_certificate else SYSTEM_TRUST_STORE
    return (f'    lua_package_path "{CACHE_LUA_DIR}/?.lua;;";\n'
            "    lua_shared_dict inferstack_cache_stats 1m;\n"
            f"    lua_ssl_trusted_certificate {trust};\n"
            "    lua_ssl_verify_depth 5;\n"
            "    lua_socket_log_errors off;\n"
            f'    init_by_lua_block {{ require("inferstack_cache").init({{ {_lua_settings(plan, cache, scope)} }}) }}\n'
            "    log_format inferstack_cache '$remote_addr - [$time_local] \"$request\" $status $body_bytes_sent "
            "$request_time cache=$inferstack_cache up=$upstream_status';\n"
            "    server {\n"
            f"        listen {CACHE_STATUS_LISTEN};\n"
            "        location = /cache-status {\n"
            '            content_by_lua_block { require("inferstack_cache").stats() }\n'
            "        }\n"
            "        location / {\n"
            "            return 404;\n"
            "        }\n"
            "    }\n")


_CACHE_SERVER = (
    '        set $inferstack_cache "-";\n'
    # a body the cache reads stays in memory
    f"        client_body_buffer_size {CACHE_MAX_REQUEST_BYTES // 1024}k;\n"
    # The runtime answers identity-encoded (Triton compresses for a client that accepts gzip): a stored answer is
    # one any client reads. At the server's level, beside the other proxy_set_header lines, which a location's own
    # would replace.
    '        proxy_set_header Accept-Encoding "";\n'
)
_CACHE_HANDLERS = (
    '            access_by_lua_block { require("inferstack_cache").lookup() }\n'
    '            header_filter_by_lua_block { require("inferstack_cache").header() }\n'
    '            body_filter_by_lua_block { require("inferstack_cache").body() }\n'
)


def _error(message: str, error_type: str) -> str:
    """An answer body of the gateway's own, in the runtimes' (OpenAI's) error shape, as a quoted nginx string."""
    return "'" + json.dumps({"error": {"message": message, "type": error_type}}, separators=(",", ":")) + "'"


def _health_location(health_path: str, drains: bool, replica_head: bool = False) -> str:
    """The key-free health path: GET or HEAD without a body, forwarded as a bare GET of itself: `rewrite ... ?` drops
    the query and replaces the raw path with the normalised one, and no header or body of the client's goes along.
    HEAD goes as GET: vLLM's /health is a FastAPI GET route (vllm/entrypoints/serve/instrumentator/health.py), and
    FastAPI answers HEAD on a GET route with 405 (github.com/fastapi/fastapi/issues/1773, open, read 2026-12-07).
    With `drains` (a server that may be interrupted), it answers 503 itself while the interruption watcher's drain flag
    exists (`interruption.DRAIN_FLAG`, root's): the load balancer stops sending new requests, and nothing else
    changes, so the requests in flight finish. nginx's `-f` checks the file at each request (open_file_cache is off)."""
    with_body = _error("the health path takes no body: send a GET without one", "invalid_request_error")
    draining = _error("this server is draining before a spot interruption: send requests to another server",
                      "service_unavailable")
    drain_check = (f"            if (-f {interruption.DRAIN_FLAG}) {{\n"
                   f"                return 503 {draining};\n"
                   "            }\n") if drains else ""
    if replica_head:  # a replica across servers: out of the balancer while the head's watch finds a worker lost
        degraded = _error("this replica has lost one of its servers: send requests to another replica",
                          "service_unavailable")
        drain_check += (f"            if (-f {replica.DRAIN_FLAG}) {{\n"
                        f"                return 503 {degraded};\n"
                        "            }\n")
    return (
        f"        location = {health_path} {{\n"
        "            if ($request_method !~ ^(GET|HEAD)$) {\n"
        '                add_header Allow "GET, HEAD" always;\n'
        f"                return 405 {_error('the health path takes GET or HEAD', 'method_not_allowed')};\n"
        "            }\n"
        "            if ($inferstack_request_has_body) {\n"
        f"                return 400 {with_body};\n"
        "            }\n"
        f"{drain_check}"
        "            proxy_method GET;\n"
        "            proxy_pass_request_headers off;\n"
        f"            rewrite ^ {health_path}? break;\n"
        "            proxy_pass http://inferstack_runtime;\n"
        "        }\n")


_BODY_MAP = (
    '    map "$http_content_length$http_transfer_encoding" $inferstack_request_has_body {\n'
    '        "" 0;\n'
    '        "0" 0;\n'
    "        default 1;\n"
    "    }\n"
)
_UNAUTHORIZED = (
    # One answer per connection without the key: keepalive_timeout 0 "disables keep-alive client connections"
    # (nginx.org/r/keepalive_timeout, read 2026-12-07) for the location that answers the 401, so a client without
    # the key holds no connection open for the load balancer's long keep-alive.
    "        error_page 401 @inferstack_unauthorized;\n"
    "        location @inferstack_unauthorized {\n"
    "            keepalive_timeout 0;\n"
    "            add_header WWW-Authenticate Bearer always;\n"
    "            return 401 " + _error("missing or invalid API key: send Authorization: Bearer <key>",
                                   "authentication_error") + ";\n"
    "        }\n"
)
_KEY_CHECK = (
    "            if ($inferstack_authorized = 0) {\n"
    "                return 401;\n"
    "            }\n"
)


def _client_limit_zone(limit: int | None) -> str:
    # "One megabyte zone can keep about 32 thousand 32-byte states or about 16 thousand 64-byte states"
    # (nginx.org/r/limit_conn_zone, read 2026-12-07): 10 MiB holds at least 160,000 client addresses at once.
    return "" if limit is None else "    limit_conn_zone $binary_remote_addr zone=inferstack_clients:10m;\n"


def _client_limit(limit: int | None) -> str:
    if limit is None:
        return ""
    message = (f"this address has {limit} requests in flight, the most one client may: wait for an answer before "
               "sending more")
    return (f"        limit_conn inferstack_clients {limit};\n"
            "        limit_conn_status 429;\n"
            "        error_page 429 @inferstack_too_many;\n"
            "        location @inferstack_too_many {\n"
            f"            return 429 {_error(message, 'rate_limit_error')};\n"
            "        }\n")


def gateway_config(plan: DeploymentPlan, *, api_key: bool, mode: Mode, group: ServerGroup,
                   cache: CacheEndpoint | None = None) -> str:
    """nginx.conf for `plan`, on a server of `group` running the runtime in `mode`; with `api_key`, every route but
    the health path needs `Authorization: Bearer <key>`. With `cache` (a plan with a cache), deterministic requests
    are answered from that Redis when they can be, keyed within `cache_scope(plan, mode, group)`."""
    if cache is not None and plan.cache is None:
        raise ValueError("a cache endpoint was given for a plan without a cache")
    timeout = plan.request_timeout_s  # streamed answers run as long as the plan's p95 latency, and more
    key_check = _KEY_CHECK if api_key else ""
    key_map = (
        "    map $http_authorization $inferstack_authorized {\n"
        "        default 0;\n"
        f"        include {KEY_MAP};\n"
        "    }\n"
    ) if api_key else ""
    limit = client_request_limit(plan)
    ports = [process.port for process in runtime_processes(plan)]
    # Several model processes: each request goes to the one with the fewest open requests (a long answer holds
    # its process's slot; round robin would queue behind it while another process is idle).
    balance = "        least_conn;\n" if len(ports) > 1 else ""
    upstreams = "".join(f"        server 127.0.0.1:{port};\n" for port in ports)
    listens = f"127.0.0.1:{ports[0]}" + (f" to {ports[-1]} ({len(ports)} model processes)" if len(ports) > 1 else "")
    locations = _health_location(plan.serving.health_path, interruption.watched(plan),
                                 plan.replica_nodes is not None) + "".join(
        f"        location {prefix} {{\n{key_check}{_CACHE_HANDLERS if cache else ''}"
        "            proxy_pass http://inferstack_runtime;\n"
        "        }\n" for prefix in RUNTIME_FACTS[plan.serving.runtime].api_prefixes)
    cache_http = _cache_http(plan, cache, cache_scope(plan, mode, group))
    refusals = _client_limit(limit) + (_UNAUTHORIZED if api_key else "")
    return f"""\
# inferstack gateway: the only listener on the API port; the runtime listens on {listens}.
{_cache_main() if cache else ""}user {WORKER_USER};
worker_processes auto;
daemon off;
pid /run/inferstack-gateway.pid;
error_log stderr warn;
events {{
    worker_connections 4096;
}}
http {{
{cache_http or ACCESS_LOG_FORMAT}    access_log {ACCESS_LOG} {"inferstack_cache" if cache else "inferstack"};
    server_tokens off;
    # Longer than any load balancer keeps an idle connection to a server (Google's is a fixed 600 s; the others
    # use the plan's request timeout), so nginx never closes one the load balancer is about to reuse (a 502).
    keepalive_timeout {max(LB_KEEPALIVE_S, timeout) + 20}s;
    default_type application/json;
    client_max_body_size {MAX_REQUEST_BODY_MIB}m;
{key_map}{_BODY_MAP}{_client_limit_zone(limit)}    upstream inferstack_runtime {{
{balance}{upstreams}        keepalive 32;
    }}
    server {{
        listen {plan.serving.port};
{_CACHE_SERVER if cache else ""}        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Authorization "";
        proxy_set_header Host $host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_buffering off;
        proxy_read_timeout {timeout}s;
        proxy_send_timeout {timeout}s;
{refusals}{locations}        location / {{
{key_check}            return 404 {_error("not found", "not_found")};
        }}
    }}
}}
"""

"""The gateway on every server: nginx (the distribution's package) in front of the inference runtime.

It is the only listener on the API port. It checks the API key on every route but the health path (which load
balancers and the boot's readiness check call without one): without the key every other route is 401. With it,
only the runtime's inference API is forwarded, streamed unbuffered; everything else is 404. vLLM's `--api-key`
guards only `/v1`, and its `/tokenize`, `/invocations` and `/metrics`, llama.cpp's `/props` and `/slots`, and
Triton's model-control and shared-memory routes never reach the network. The runtime itself has no key and
listens on loopback.

The key never appears in a file the runtime can read, in user data or on a command line: the gateway's start
fetches it from the cloud's secret store into a root-only nginx `map` file (`KEY_MAP`) that nginx's master
process (root) reads with the configuration. This module is pure: plan → configuration text (golden-tested).
"""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from inferstack.bootstrap.runtimes import runtime_processes
from inferstack.plan import DeploymentPlan

CONFIG_PATH = "/etc/inferstack/gateway.conf"
KEY_MAP = "/run/inferstack-secrets/gateway-key.map"
"""`"Bearer <key>" 1;`, written by fetch_secret.py at the gateway's start (root only, mode 0600)."""
ACCESS_LOG = "/var/log/inferstack/gateway-access.log"
WORKER_USER = "www-data"
"""The nginx package's own unprivileged user on Debian and Ubuntu."""
MAX_REQUEST_BODY_MIB = 16
LB_KEEPALIVE_S = 600
"""The longest a cloud's load balancer keeps an idle connection to a backend (Google Cloud's fixed 600 s)."""

# The routes each runtime serves to clients, as nginx prefix locations (behind the key).
API_PREFIXES = {"vllm": ("/v1/",), "llamacpp": ("/v1/",), "triton": ("/v2/models/",)}

#### Inference cache (a workload's `cache:`) ####

CACHE_AUTH_FILE = "/run/inferstack-secrets/cache.env"
"""`REDIS_AUTH=<token>`, written by fetch_secret.py at the gateway's start (root only); nginx's master reads it."""
CACHE_LUA_DIR = "/usr/local/lib/inferstack"
"""Where the bundle puts inferstack_cache.lua (files/), the cache's logic in the gateway."""
CACHE_STATUS_LISTEN = "127.0.0.1:9180"
"""The cache's counters (GET /cache-status: hits, misses, errors, stores, hit_rate), on loopback only."""
SYSTEM_TRUST_STORE = "/etc/ssl/certs/ca-certificates.crt"
CACHE_CA_FILE = "/etc/inferstack/cache-ca.pem"
"""The Redis server's CA where the cloud gives one per instance (Memorystore's server_ca_certs)."""
NGINX_MODULES = ("/usr/lib/nginx/modules/ndk_http_module.so", "/usr/lib/nginx/modules/ngx_http_lua_module.so")
"""Debian's and Ubuntu's dynamic modules (libnginx-mod-http-ndk, libnginx-mod-http-lua); lua needs ndk first."""
CACHE_APT_PACKAGES = ("libnginx-mod-http-lua", "lua-nginx-redis", "lua-cjson")
"""The distribution's packages of the caching path: OpenResty's lua-nginx-module for Debian's nginx, lua-resty-redis
(as `nginx.redis`) and lua-cjson; installed only when the plan has a cache."""
# Deterministic requests per runtime: routes whose answer depends on the request alone, and completion routes that
# are deterministic at temperature 0 (greedy decoding) with a single choice.
CACHE_DETERMINISTIC_PREFIXES = {"vllm": ("/v1/embeddings", "/v1/classify", "/v1/score", "/v1/rerank"),
                                "llamacpp": ("/v1/embeddings",), "triton": ("/v2/models/",)}
CACHE_COMPLETION_ROUTES = {"vllm": ("/v1/completions", "/v1/chat/completions"),
                           "llamacpp": ("/v1/completions", "/v1/chat/completions"), "triton": ()}

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


def cache_revision(plan: DeploymentPlan) -> str:
    """What the cache keys are scoped by: the model's name, its revision where the plan has one, and the precision,
    so that a new revision or quantization never serves another's answers."""
    revision = f"@{plan.model.revision}" if plan.model.revision else ""
    return f"{plan.model.name}{revision}:{plan.precision}"


def _lua_settings(plan: DeploymentPlan, cache: CacheEndpoint) -> str:
    """The Lua table inferstack_cache.init receives: every value pattern-checked, written as JSON strings and numbers
    (which Lua reads the same)."""
    assert plan.cache is not None
    runtime = plan.serving.runtime
    generative = plan.model.kind == "image_generation"  # diffusion samples noise: never deterministic
    values = {"revision": cache_revision(plan), "ttl_seconds": plan.cache.ttl_seconds, "host": cache.host,
              "port": cache.port, "server_name": cache.host, "auth_file": CACHE_AUTH_FILE}
    lines = [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    lines += ["tls = true", f"verify = {'true' if cache.verify else 'false'}"]
    paths = () if generative else CACHE_DETERMINISTIC_PREFIXES[runtime]
    lines.append("paths = {" + ", ".join(json.dumps(p) for p in paths) + "}")
    lines.append("completions = {" + ", ".join(json.dumps(p) for p in CACHE_COMPLETION_ROUTES[runtime]) + "}")
    return ", ".join(lines)


def _cache_main() -> str:
    return "".join(f"load_module {module};\n" for module in NGINX_MODULES)


def _cache_http(plan: DeploymentPlan, cache: CacheEndpoint | None) -> str:
    if cache is None:
        return ""
    trust = CACHE_CA_FILE if cache.ca_certificate else SYSTEM_TRUST_STORE
    return (f'    lua_package_path "{CACHE_LUA_DIR}/?.lua;;";\n'
            "    lua_shared_dict inferstack_cache_stats 1m;\n"
            f"    lua_ssl_trusted_certificate {trust};\n"
            "    lua_ssl_verify_depth 5;\n"
            "    lua_socket_log_errors off;\n"
            f'    init_by_lua_block {{ require("inferstack_cache").init({{ {_lua_settings(plan, cache)} }}) }}\n'
            "    log_format inferstack_cache '$remote_addr - [$time_local] \"$request\" $status $body_bytes_sent "
            "$request_time cache=$inferstack_cache';\n"
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
    "        client_body_buffer_size 1m;\n"  # a request's body stays in memory, where the cache reads it
)
_CACHE_HANDLERS = (
    '            access_by_lua_block { require("inferstack_cache").lookup() }\n'
    '            header_filter_by_lua_block { require("inferstack_cache").header() }\n'
    '            body_filter_by_lua_block { require("inferstack_cache").body() }\n'
)


def gateway_config(plan: DeploymentPlan, *, api_key: bool, cache: CacheEndpoint | None = None) -> str:
    """nginx.conf for `plan`; with `api_key`, every route but the health path needs `Authorization: Bearer <key>`.
    With `cache` (a plan with a cache), deterministic requests are answered from that Redis when they can be."""
    if cache is not None and plan.cache is None:
        raise ValueError("a cache endpoint was given for a plan without a cache")
    timeout = plan.request_timeout_s  # streamed answers run as long as the plan's p95 latency, and more
    key_check = (
        "            if ($inferstack_authorized = 0) {\n"
        "                add_header WWW-Authenticate Bearer always;\n"
        "                return 401 '{\"error\":{\"message\":\"missing or invalid API key: send Authorization: "
        "Bearer <key>\",\"type\":\"authentication_error\"}}';\n"
        "            }\n"
    ) if api_key else ""
    key_map = (
        "    map $http_authorization $inferstack_authorized {\n"
        "        default 0;\n"
        f"        include {KEY_MAP};\n"
        "    }\n"
    ) if api_key else ""
    ports = [process.port for process in runtime_processes(plan)]
    # Several model processes: each request goes to the one with the fewest open requests (a long answer holds
    # its process's slot; round robin would queue behind it while another process is idle).
    balance = "        least_conn;\n" if len(ports) > 1 else ""
    upstreams = "".join(f"        server 127.0.0.1:{port};\n" for port in ports)
    listens = f"127.0.0.1:{ports[0]}" + (f" to {ports[-1]} ({len(ports)} model processes)" if len(ports) > 1 else "")
    locations = "".join(
        f"        location {prefix} {{\n{key_check}{_CACHE_HANDLERS if cache else ''}"
        "            proxy_pass http://inferstack_runtime;\n"
        "        }\n" for prefix in API_PREFIXES[plan.serving.runtime])
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
{_cache_http(plan, cache)}    access_log {ACCESS_LOG}{" inferstack_cache" if cache else ""};
    server_tokens off;
    # Longer than any load balancer keeps an idle connection to a server (Google's is a fixed 600 s; the others
    # use the plan's request timeout), so nginx never closes one the load balancer is about to reuse (a 502).
    keepalive_timeout {max(LB_KEEPALIVE_S, timeout) + 20}s;
    default_type application/json;
    client_max_body_size {MAX_REQUEST_BODY_MIB}m;
{key_map}    upstream inferstack_runtime {{
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
        location = {plan.serving.health_path} {{
            proxy_pass http://inferstack_runtime;
        }}
{locations}        location / {{
{key_check}            return 404 '{{"error":{{"message":"not found","type":"not_found"}}}}';
        }}
    }}
}}
"""

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


def gateway_config(plan: DeploymentPlan, *, api_key: bool) -> str:
    """nginx.conf for `plan`; with `api_key`, every route but the health path needs `Authorization: Bearer <key>`."""
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
        f"        location {prefix} {{\n{key_check}"
        "            proxy_pass http://inferstack_runtime;\n"
        "        }\n" for prefix in API_PREFIXES[plan.serving.runtime])
    return f"""\
# inferstack gateway: the only listener on the API port; the runtime listens on {listens}.
user {WORKER_USER};
worker_processes auto;
daemon off;
pid /run/inferstack-gateway.pid;
error_log stderr warn;
events {{
    worker_connections 4096;
}}
http {{
    access_log {ACCESS_LOG};
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
        proxy_http_version 1.1;
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

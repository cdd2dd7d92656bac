"""A replica across servers at boot: one Ray cluster per replica, vLLM on its head (`plan.replica_nodes`).

Every server of the replica boots the same bundle. boot.sh's `replica` phase finds which member it is (the address its
route to the head leaves from: the head's own, or one of the workers') and writes it to REPLICA_ENV. The head runs the
Ray head and, once every worker has joined (`replica_gate.py`, the runtime unit's last ExecStartPre), vLLM with the Ray
executor: tensor parallel over its GPUs, pipeline parallel over the servers (vLLM's multi-node serving; its image
carries Ray: requirements/cuda.txt `ray[cgraph]`, "required for pipeline parallelism in V1"). A worker runs a Ray
worker and nothing else: no gateway (the load balancer targets heads). `replica_watch.py` on the head drains the
gateway's health path while a worker does not answer on its Ray node-manager port, so that the load balancer takes a
broken replica out until it is whole again.

Ray's ports are fixed (RAY_PORTS) so that the firewall rules among the replica's servers can name them. Ray and vLLM
run in the runtime's image as the runtime user with no capabilities, on the host's network (Ray and NCCL reach the
other servers): vLLM listens on loopback there, behind the gateway as on any server. Ray's session files are shared by
the Ray container and vLLM's (a driver on the same node) through RAY_DIR.
"""

from __future__ import annotations

from typing import Literal

from inferstack.bootstrap.runtimes import Env, Word
from inferstack.plan import DeploymentPlan

Role = Literal["head", "worker"]

RAY_UNIT = "inferstack-ray"
"""The Ray node of this server (its unit file and container name); the head's and a worker's differ in their command."""
RAY_DIR = "/var/lib/inferstack/ray"
"""Ray's session files (/tmp/ray in the containers): the Ray node's, read by vLLM's driver on the same server."""
CONTAINER_RAY_DIR = "/tmp/ray"
REPLICA_ENV = "/etc/inferstack/replica.env"
"""REPLICA_SELF, REPLICA_HEAD and REPLICA_ROLE, written by boot.sh's replica phase (data: read by systemd only)."""
GATE = "replica_gate.py"
WATCHER = "replica_watch.py"
WATCH_UNIT = "inferstack-replica-watch"
DRAIN_FLAG = "/run/inferstack-replica/degraded"
"""While it exists the head's health path answers 503 (gateway.py); root's, made and removed by the watcher only."""
GATE_TIMEOUT_S = 1800
"""How long the head's runtime waits for every worker to join: the workers sync the whole model before they join."""

# Ray's ports (`ray start --help`; docs.ray.io "Configuring Ray", ports), fixed so that firewall rules name them.
RAY_PORTS = {
    "gcs": 6379, "node_manager": 6380, "object_manager": 6381, "runtime_env_agent": 6382,
    "dashboard_agent_grpc": 6383, "dashboard_agent_listen": 6384, "metrics_export": 6385,
}
WORKER_PORTS = (10002, 10999)
"""Ray's worker processes (vLLM's GPU workers are Ray actors): one port each."""


def ray_command(role: Role) -> list[Word]:
    """The arguments of `ray` (the container's entrypoint) that start this server's Ray node in the foreground
    (systemd tracks it) on its own address: the replica's head, or a worker joining it."""
    ports = RAY_PORTS
    common: list[Word] = [
        "--block", ("--node-ip-address=", Env("REPLICA_SELF")),
        f"--node-manager-port={ports['node_manager']}", f"--object-manager-port={ports['object_manager']}",
        f"--runtime-env-agent-port={ports['runtime_env_agent']}",
        f"--dashboard-agent-grpc-port={ports['dashboard_agent_grpc']}",
        f"--dashboard-agent-listen-port={ports['dashboard_agent_listen']}",
        f"--metrics-export-port={ports['metrics_export']}",
        f"--min-worker-port={WORKER_PORTS[0]}", f"--max-worker-port={WORKER_PORTS[1]}", "--disable-usage-stats"]
    if role == "head":
        # No --ray-client-server-port: `ray start` refuses it where Ray Client's packages are missing. Where they are
        # (grpc importable), its server listens on Ray's default 10001, which the replica's firewall must name too.
        return ["start", "--head", f"--port={ports['gcs']}", "--include-dashboard=false", *common]
    return ["start", ("--address=", Env("REPLICA_HEAD"), f":{ports['gcs']}"), *common]


def gate_command(plan: DeploymentPlan, lib_dir: str) -> list[Word]:
    """The arguments of `python3` (in the runtime's image, where Ray is) that wait until all of the replica's servers
    have joined its Ray cluster. On the head, whose Ray node listens on its own address (a driver finds the node by
    the address `ray start --node-ip-address` left in the shared session files)."""
    assert plan.replica_nodes is not None
    return [f"{lib_dir}/{GATE}", "--address", (Env("REPLICA_HEAD"), f":{RAY_PORTS['gcs']}"),
            "--nodes", str(plan.replica_nodes.nodes), "--timeout", str(GATE_TIMEOUT_S)]

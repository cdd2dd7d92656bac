"""A replica across two servers forms a real Ray cluster: two network namespaces joined by a veth pair stand for the
two servers, each running its rendered Ray unit's command (the words after the runtime's image: `ray start` as the
container would run it) with the Ray vLLM's image carries (requirements/ray.lock), each in a mount namespace of its own
with a private /tmp/ray (what each server's container has: its own session files, shared with the programs beside
it). The head's runtime gate, run in the head's namespaces, holds until the worker has joined; the head's watch
drains it once the worker is killed.

Needs root (network namespaces) and PyPI for the first run (the pinned, hashed Ray goes to .cache/ray-venv)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_bootstrap_replica import replica_plan

from inferstack.bootstrap import replica
from inferstack.bootstrap.options import BootstrapOptions
from inferstack.bootstrap.render import LIB_DIR, bundle_files, command_line

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "inferstack" / "bootstrap" / "files"
LOCK = ROOT / "requirements" / "ray.lock"
VENV = ROOT / ".cache" / "ray-venv"
HEAD, WORKER = "10.77.0.1", "10.77.0.2"


@pytest.fixture(scope="module")
def units() -> dict[str, str]:
    """The bundle's files for a two-server replica whose head is HEAD and worker WORKER."""
    options = BootstrapOptions(model_bucket="models-bucket", region="us-east-1",
                               replica={"head": HEAD, "workers": [WORKER]})
    return {f.path: f.content for f in bundle_files(replica_plan(), "aws", options, "container")}


def exec_line(unit: str, key: str, containing: str) -> str:
    (line,) = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith(f"{key}=") and containing in line]
    return line


def after_image(line: str) -> list[str]:
    """The words a unit's `docker run` passes to the image's entrypoint."""
    words = line.split()
    return words[words.index("vllm/vllm-openai:v0.12.0") + 1:]


@pytest.fixture(scope="module")
def ray_bin() -> Path:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    marker = VENV / ".installed"
    if not marker.is_file() or marker.read_text() != digest:
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "--quiet", "--require-hashes", "--no-deps", "-r",
                        str(LOCK)], check=True)
        marker.write_text(digest)
    return VENV / "bin"


@pytest.fixture()
def servers(ray_bin: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Two network namespaces, one per server, joined by a veth pair; everything run in them is killed after."""
    tag = str(os.getpid() % 100000)
    spaces = {"head": f"isr-h{tag}", "worker": f"isr-w{tag}"}
    ends = (f"isrh{tag}", f"isrw{tag}")

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True)

    try:
        for space in spaces.values():
            ip("netns", "add", space)
        ip("link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
        for (_role, space), end, address in zip(spaces.items(), ends, (HEAD, WORKER), strict=True):
            ip("link", "set", end, "netns", space)
            ip("-n", space, "addr", "add", f"{address}/24", "dev", end)
            ip("-n", space, "link", "set", end, "up")
            ip("-n", space, "link", "set", "lo", "up")
        yield spaces
    finally:
        for space in spaces.values():
            kill_all(space)
            subprocess.run(["ip", "netns", "del", space], check=False)


def kill_all(space: str) -> None:
    """Kill every process of the namespace: the server is gone (Ray's own `ray stop` would kill every Ray process of
    the machine, the other namespace's too)."""
    pids = subprocess.run(["ip", "netns", "pids", space], capture_output=True, text=True).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def start_node(space: str, ray_bin: Path, words: list[str], self_address: str) -> subprocess.Popen[str]:
    """The unit's `ray start ... --block`, its ${REPLICA_*} variables as systemd would set them from replica.env, in
    the server's network namespace and a mount namespace of its own whose /tmp/ray is a private tmpfs (as each
    server's container has its own). The node's process id names its namespaces (`in_node`)."""
    values = {"${REPLICA_SELF}": self_address, "${REPLICA_HEAD}": HEAD}
    args = list(words)
    for key, value in values.items():
        args = [arg.replace(key, value) for arg in args]
    Path("/tmp/ray").mkdir(exist_ok=True)
    return subprocess.Popen(
        ["ip", "netns", "exec", space, "unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs tmpfs /tmp/ray && exec "$@"', "node", str(ray_bin / "ray"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def in_node(node: subprocess.Popen[str], *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`command` in the node's network and mount namespaces: beside its Ray node, as the head's gate runs."""
    return subprocess.run(["nsenter", "-t", str(node.pid), "-n", "-m", *command], capture_output=True, text=True,
                          timeout=timeout)


def in_space(space: str, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", space, *command], capture_output=True, text=True, timeout=timeout)


def wait_listening(space: str, port: int, node: subprocess.Popen[str], deadline_s: float = 60) -> None:
    probe = f"import socket; socket.create_connection(('{HEAD}', {port}), timeout=1)"
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and node.poll() is None:
        if in_space(space, sys.executable, "-c", probe).returncode == 0:
            return
        time.sleep(0.5)
    node.kill()
    raise AssertionError(f"nothing listens on {HEAD}:{port} in {space}: {node.communicate()[0][-3000:]}")


def test_the_head_waits_for_its_worker_and_drains_once_the_worker_is_killed(
        units: dict[str, str], ray_bin: Path, servers: dict[str, str], tmp_path: Path) -> None:
    head_unit = units[f"/etc/systemd/system/{replica.RAY_UNIT}-head.service"]
    worker_unit = units[f"/etc/systemd/system/{replica.RAY_UNIT}-worker.service"]
    server_unit = units["/etc/systemd/system/inferstack-server.service"]
    watch_unit = units[f"/etc/systemd/system/{replica.WATCH_UNIT}.service"]
    head_words = after_image(exec_line(head_unit, "ExecStart", "--entrypoint=ray"))
    worker_words = after_image(exec_line(worker_unit, "ExecStart", "--entrypoint=ray"))
    assert head_words == command_line(replica.ray_command("head")).split()
    assert worker_words == command_line(replica.ray_command("worker")).split()

    head = start_node(servers["head"], ray_bin, head_words, HEAD)
    wait_listening(servers["head"], replica.RAY_PORTS["gcs"], head)
    # The head's runtime gate, as its unit runs it (our copy of the program; a short timeout here)
    gate = after_image(exec_line(server_unit, "ExecStartPre", "--entrypoint=python3"))
    assert gate[0] == f"{LIB_DIR}/{replica.GATE}" and gate[-2:] == ["--timeout", str(replica.GATE_TIMEOUT_S)]
    # The gate shares the head's Ray session files, as its container does through RAY_DIR
    python = [str(ray_bin / "python"), str(FILES / replica.GATE)]
    gate = [word.replace("${REPLICA_HEAD}", HEAD) for word in gate]
    gate_alone = in_node(head, *python, *gate[1:-2], "--timeout", "8")
    assert gate_alone.returncode == 1, gate_alone.stdout + gate_alone.stderr
    assert "1 of 2 servers joined" in gate_alone.stderr

    worker = start_node(servers["worker"], ray_bin, worker_words, WORKER)
    gate_whole = in_node(head, *python, *gate[1:-2], "--timeout", "90")
    assert gate_whole.returncode == 0, gate_whole.stdout + gate_whole.stderr
    assert "2 of 2 servers in the Ray cluster" in gate_whole.stdout

    # The head's watch, as its unit runs it (a flag of this test's, rounds a second apart)
    watch = exec_line(watch_unit, "ExecStart", replica.WATCHER).split()
    assert watch[2:] == ["--workers", WORKER, "--port", "6380", "--drain-flag", replica.DRAIN_FLAG,
                         "--restart-unit", "inferstack-server.service"]
    flag = tmp_path / "run" / "degraded"
    args = [sys.executable, str(FILES / replica.WATCHER), *watch[2:7], str(flag), "--interval", "1"]
    whole = in_space(servers["head"], *args, "--rounds", "2")
    assert whole.returncode == 0 and not flag.exists(), whole.stdout + whole.stderr

    kill_all(servers["worker"])  # the worker server is gone: its Ray node with it
    worker.wait(timeout=30)
    lost = in_space(servers["head"], *args, "--rounds", "3")
    assert flag.read_text() == f"lost: {WORKER}\n", lost.stdout + lost.stderr
    assert "replica degraded" in lost.stdout
    assert head.poll() is None  # the head's Ray node still runs: only the replica is out of the balancer


def test_the_watch_lifts_the_drain_once_every_worker_answers_again(tmp_path: Path) -> None:
    """The watch's own rules on loopback (no namespace): two failed rounds drain, one whole round lifts."""
    sys.path.insert(0, str(FILES))
    try:
        import replica_watch
    finally:
        sys.path.remove(str(FILES))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    flag = tmp_path / "degraded"
    watch = replica_watch.Watch(["127.0.0.1"], port, str(flag))
    assert watch.check() is False  # not listening yet: one failed round is not a lost worker
    assert watch.check() is True and flag.read_text() == "lost: 127.0.0.1\n"
    listener.listen()
    assert watch.check() is False and not flag.exists()
    listener.close()


def test_the_watch_restarts_the_heads_runtime_once_whole_again(tmp_path: Path) -> None:
    """vLLM's engine dies with a lost stage and its process stays up: whole again, the watch restarts it."""
    sys.path.insert(0, str(FILES))
    try:
        import replica_watch
    finally:
        sys.path.remove(str(FILES))
    restarts: list[bool] = []
    flag = tmp_path / "degraded"
    flag.write_text("lost: 127.0.0.1\n")  # drained before the watch (re)started: it keeps the drain
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    watch = replica_watch.Watch(["127.0.0.1"], listener.getsockname()[1], str(flag),
                                restart=lambda: restarts.append(flag.exists()))
    assert watch.check() is False and not flag.exists()
    assert restarts == [True]  # restarted while still drained, then the drain lifted
    listener.close()

"""End to end, really run: the rendered native-mode bootstrap boots a Debian 12 root file system (debootstrap,
in a chroot) against a real S3-compatible server on loopback (the bundle and the model in its bucket, the secrets
in its SSM), and the server it starts (llama.cpp as an unprivileged user, behind Debian's nginx as the gateway)
answers a real completion, streamed or not, from a tiny GGUF model that this test creates, and 401 without the key.

systemd is not PID 1 in a chroot: the units are checked with `systemd-analyze verify`, and a stand-in
`systemctl` (fake_systemctl.py) starts them from their unit files as systemd would. The metadata server is
a loopback stand-in too (AWS IMDSv2 paths), so credentials follow the same code path as on EC2.

Slow when cold (debootstrap ~2 min, llama.cpp compiled by pip ~4 min on 2 cores); the Debian root file system,
the apt archives and pip's wheel cache are kept under .cache/bootstrap (or $INFERSTACK_TEST_CACHE), which makes
a warm run take about a minute. Runs only as root with debootstrap installed, and skips otherwise. Like every
chroot or container build, the root file system refuses package scripts' service starts (policy-rc.d): the
services run only as the bootstrap starts them.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from bootstrap_fakes import (
    ACCESS_KEY,
    AWS_INSTANCE_ACTION,
    SECRET_KEY,
    MetadataNotices,
    free_port,
    metadata_server,
    s3_client,
    s3_server,
    upload_model,
)
from redis_fakes import AUTH_TOKEN as CACHE_AUTH_TOKEN
from redis_fakes import Redis, missing_redis, redis_server
from sample_plans import sample_plan
from test_gateway import runtime
from test_gateway_cache import slowest_health_answer_s, token_ids_body
from tiny_gguf import write_tiny_llama

from inferstack.bootstrap import BootstrapOptions, gateway, interruption, render_bootstrap
from inferstack.bootstrap.files.interruption_watch import POLL_INTERVAL_S
from inferstack.bootstrap.gateway import CACHE_AUTH_FILE, CacheEndpoint
from inferstack.bootstrap.manifest import write_manifest
from inferstack.bootstrap.render import RenderedBootstrap
from inferstack.bootstrap.runtimes import RUNTIME_PORT
from inferstack.plan import COLD_START_PHASES, DeploymentPlan
from inferstack.sizing.coldstart import parse_phase_lines
from inferstack.spec import Cache

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("INFERSTACK_TEST_CACHE", REPO / ".cache" / "bootstrap"))
ROOTFS_TAR = CACHE_DIR / "debian12-rootfs.tar"
DEBIAN_MIRROR = os.environ.get("INFERSTACK_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = "systemd,systemd-sysv,python3,ca-certificates,curl"
"""What a Debian cloud image has that the bootstrap relies on (python3 for the sync, curl for readiness)."""
CHROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BOOT_TIMEOUT_S = 1800
BUCKET = "e2e-models"
PREFIX = "models/tiny-llama/f32/"
API_KEY = "sk-e2e-0123456789abcdef"
API_KEY_PARAMETER = "/inferstack/e2e/api-key"
HUB_TOKEN = "hf_e2e0123456789"
HUB_TOKEN_PARAMETER = "/inferstack/e2e/hub-token"
CACHE_AUTH_PARAMETER = "/inferstack/e2e/cache-auth"
"""The inference cache's AUTH token: the gateway caches in Debian's redis-server on loopback (TLS, AUTH)."""


def missing_prerequisite() -> str | None:
    if os.geteuid() != 0:
        return "the end-to-end test needs root (debootstrap, chroot, mount)"
    for tool in ("debootstrap", "chroot", "mount", "umount", "tar"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install debootstrap)"
    return missing_redis()


@dataclass
class Chroot:
    root: Path

    def run(self, *command: str, timeout_s: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["chroot", str(self.root), "/usr/bin/env", "-i", f"PATH={CHROOT_PATH}",
                                 "HOME=/root", "LANG=C.UTF-8", *command], capture_output=True, text=True,
                                timeout=timeout_s)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def path(self, inside: str) -> Path:
        return self.root / inside.lstrip("/")

    def read(self, inside: str) -> str:
        return self.path(inside).read_text()


def debian_rootfs_tar() -> Path:
    """The cached Debian 12 root file system (debootstrapped once, then reused)."""
    if ROOTFS_TAR.exists():
        return ROOTFS_TAR
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    build = CACHE_DIR / "rootfs-build"
    shutil.rmtree(build, ignore_errors=True)
    subprocess.run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm", str(build),
                    DEBIAN_MIRROR], check=True, capture_output=True, timeout=1200)
    partial = ROOTFS_TAR.with_suffix(".partial")
    subprocess.run(["tar", "-C", str(build), "-cf", str(partial), "."], check=True)
    partial.rename(ROOTFS_TAR)
    shutil.rmtree(build, ignore_errors=True)
    return ROOTFS_TAR


DEV_NODES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9), "tty": (5, 0)}
"""The character devices a chroot's /dev holds (Linux's devices.txt numbers)."""


def mount_dev(dev: Path) -> None:
    """A /dev of the chroot's own: a tmpfs with DEV_NODES, the standard links, a devpts instance of its own and a
    tmpfs /dev/shm. Never the host's /dev bound in: devtmpfs is one instance for the whole machine, so a removal
    through a mount left behind (a test killed before its teardown) would delete the host's device nodes."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,nosuid,size=16m", "tmpfs", str(dev)], check=True)
    for name, (major, minor) in DEV_NODES.items():
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(dev / name, 0o666)
    for name, target in {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                         "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}.items():
        (dev / name).symlink_to(target)
    (dev / "pts").mkdir()
    subprocess.run(["mount", "-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=0620", "devpts", str(dev / "pts")],
                   check=True)
    (dev / "shm").mkdir(mode=0o1777)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", str(dev / "shm")], check=True)


def mount_all(root: Path) -> list[Path]:
    """proc, a /dev of its own, and the caches (apt archives, pip's wheels) bound into the chroot; returns the mount
    points."""
    binds = {CACHE_DIR / "apt-archives": root / "var/cache/apt/archives", CACHE_DIR / "pip": root / "root/.cache/pip"}
    mounted: list[Path] = []
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
    mounted.append(root / "proc")
    mount_dev(root / "dev")
    mounted.append(root / "dev")
    for source, target in binds.items():
        (source / "partial").mkdir(parents=True, exist_ok=True)
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
        mounted.append(target)
    return mounted


def mounts_under(directory: Path) -> list[str]:
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[1].startswith(str(directory))]


@pytest.fixture(scope="module")
def chroot() -> Iterator[Chroot]:
    with debian_chroot() as box:
        yield box


@contextlib.contextmanager
def debian_chroot() -> Iterator[Chroot]:
    """A fresh Debian 12 root file system from the cached tar, with the stand-in systemctl; torn down after."""
    reason = missing_prerequisite()
    if reason:
        pytest.skip(reason)
    # Not under pytest's temporary directories: a concurrent pytest run prunes those, mounts and all.
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="e2e-run-", dir=CACHE_DIR))
    root = workdir / "rootfs"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "-xf", str(debian_rootfs_tar())], check=True)
    # The host's trust store (it may hold a proxy's CA) and resolver, as a cloud image has its own.
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", root / "etc/ssl/certs/ca-certificates.crt")
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    shim = root / "usr/local/bin/systemctl"
    shutil.copy(Path(__file__).with_name("fake_systemctl.py"), shim)
    shim.chmod(0o755)
    # The chroot shares the host's network: the metadata firewall's rules are recorded, never applied to the host
    # (test_bootstrap_metadata_firewall.py checks them; a `-C` check answers "absent", so each rule is inserted once).
    for tool in ("iptables", "ip6tables"):
        stand_in = root / "usr/local/sbin" / tool
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        stand_in.write_text(f'#!/bin/sh\necho "$*" >>/var/log/{tool}.calls\n[ "$2" != -C ] && [ "$2" != -L ]\n')
        stand_in.chmod(0o755)
    mounted: list[Path] = []
    box = Chroot(root)
    try:
        mounted = mount_all(root)
        yield box
    finally:
        stop_everything(box)
        for target in reversed(mounted):
            subprocess.run(["umount", "-R", "-l", str(target)], check=False)
        keep = os.environ.get("INFERSTACK_E2E_KEEP") == "1"  # leave the root file system for a post-mortem
        if not keep and not mounts_under(workdir):  # never delete through a mount that is still there
            shutil.rmtree(workdir, ignore_errors=True)


def stop_everything(box: Chroot) -> None:
    """Stop what the stand-in systemctl started in the chroot (by the process ids it recorded)."""
    state = box.path("/run/fake-systemd")
    for pid_file in sorted(state.glob("*.pid")) + sorted(state.glob("*.supervisor")) if state.exists() else []:
        with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
            os.killpg(int(pid_file.read_text()), 15)


@dataclass
class Deployment:
    box: Chroot
    storage: str
    port: int
    model_dir: Path
    redis: Redis
    plan: DeploymentPlan
    options: BootstrapOptions
    notices: MetadataNotices
    """What the stand-in metadata server posts at the interruption notices' paths."""


@pytest.fixture(scope="module")
def deployment(chroot: Chroot, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployed(chroot, tmp_path_factory) as booted:
        yield booted


@contextlib.contextmanager
def deployed(chroot: Chroot, tmp_path_factory: pytest.TempPathFactory, processes: int = 1,
             threads: int = 2, cache: bool = True, text_only: bool = False) -> Iterator[Deployment]:
    """Model in the bucket, API key in SSM, user data rendered and applied: write_files, then runcmd. With `cache`,
    the gateway caches in the Redis on loopback (its status listener, 127.0.0.1:9180, is one per network: a second
    server beside the first goes without). `text_only`: the tiny model written to answer in whole words (the load
    test's model, examples/loadtest-loop). The plan runs on spot capacity: the server watches the stand-in metadata
    server's interruption notice (`notices`)."""
    notices = MetadataNotices()
    with s3_server() as storage, metadata_server(notices=notices) as metadata, \
            redis_server(tmp_path_factory.mktemp("redis")) as redis:
        model_dir = tmp_path_factory.mktemp("model")
        write_tiny_llama(model_dir / "tiny-llama-f32.gguf", seed=1, text_only=text_only)
        (model_dir / "README.md").write_text("inferstack end-to-end test model: random weights.\n")
        write_manifest(model_dir)
        upload_model(storage, BUCKET, PREFIX, model_dir)
        import boto3

        ssm = boto3.client("ssm", endpoint_url=storage, region_name="us-east-1", aws_access_key_id=ACCESS_KEY,
                           aws_secret_access_key=SECRET_KEY)
        for name, value in ((API_KEY_PARAMETER, API_KEY), (HUB_TOKEN_PARAMETER, HUB_TOKEN),
                            (CACHE_AUTH_PARAMETER, CACHE_AUTH_TOKEN)):
            ssm.put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)
        port = free_port()
        plan = sample_plan("aws", "cpu-llm")
        plan = plan.model_copy(update={
            "model": plan.model.model_copy(update={"name": "tiny-llama", "bucket_prefix": PREFIX}),
            "serving": plan.serving.model_copy(update={"port": port, "max_model_len": 256, "threads": threads,
                                                       "processes": processes, "max_num_seqs": 1}),
            "cache": Cache(ttl_seconds=600) if cache else None, "spot": True})
        options = BootstrapOptions(
            model_bucket=BUCKET, region="us-east-1", api_key_secret=API_KEY_PARAMETER,
            hub_token_secret=HUB_TOKEN_PARAMETER, install_mode="native",
            storage_endpoint=storage, secret_endpoint=storage, metadata_endpoint=metadata,
            cache=CacheEndpoint(host="127.0.0.1", port=redis.port, auth_secret=CACHE_AUTH_PARAMETER,
                                ca_certificate=redis.ca.read_text()) if cache else None)
        result = render_bootstrap(plan, "aws", options)
        store_bundle(storage, result)
        apply_cloud_config(chroot, result.user_data)
        wait_for_boot(chroot)
        yield Deployment(chroot, storage, port, model_dir, redis, plan, options, notices)


def store_bundle(storage: str, result: RenderedBootstrap) -> None:
    """What `pulumi up` does with the bundle: store it in the model bucket under its content-addressed key."""
    s3_client(storage).put_object(Bucket=BUCKET, Key=result.bundle_key, Body=result.bundle.encode())


def apply_cloud_config(box: Chroot, user_data: str) -> None:
    """What cloud-init does with this user data: write the files, then run each runcmd line."""
    config = yaml.safe_load(user_data)
    for entry in config["write_files"]:
        target = box.path(entry["path"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(entry["content"])
        target.chmod(int(entry["permissions"], 8))
    for command in config["runcmd"]:
        box.run(*command)


def wait_for_boot(box: Chroot) -> int:
    """Wait for inferstack-boot.service (started with --no-block) to finish; returns its exit status."""
    rc_file = box.path("/run/fake-systemd/inferstack-boot.service.rc")
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while not rc_file.exists():
        assert time.monotonic() < deadline, f"boot did not finish in {BOOT_TIMEOUT_S}s:\n{boot_log(box)[-3000:]}"
        time.sleep(1)
    return int(rc_file.read_text())


def boot_again(box: Chroot) -> int:
    """Run the boot service again on the booted server (`systemctl restart` of the oneshot unit) and wait."""
    return box.run("systemctl", "restart", "inferstack-boot.service", timeout_s=BOOT_TIMEOUT_S,
                   check=False).returncode


def boot_log(box: Chroot) -> str:
    """The boot log, or (when the boot died before writing one) what the service printed."""
    journal = box.path("/var/log/fake-journal/inferstack-boot.service.log")
    for path in (box.path("/var/log/inferstack/boot.log"), journal):
        if path.exists():
            return path.read_text()
    return "(no boot log)"


def call(port: int, path: str, api_key: str | None, body: dict[str, object] | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method="POST" if body is not None else "GET",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
                 **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def complete(port: int, prompt: str, api_key: str | None, **extra: object) -> tuple[int, dict[str, object]]:
    status, body = call(port, "/v1/completions", api_key,
                        {"model": "tiny-llama", "prompt": prompt, "max_tokens": 8, **extra})
    return status, json.loads(body) if status == 200 and not extra.get("stream") else {"raw": body}


def process_uid(pid: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on `port` (the chroot shares the host's network)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def listening_socket_inodes(port: int) -> set[str]:
    """The inodes of the TCP sockets listening on `port`, as /proc/net/tcp lists them."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def process_socket_inodes(pid: str) -> set[str]:
    """The inodes of the sockets process `pid` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # a descriptor closed while listed
            link = os.readlink(fd)
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    return inodes


def snapshot(box: Chroot) -> dict[str, tuple[int, int, int]]:
    """(inode, size, mtime) of everything the bootstrap owns that must not change on a re-run."""
    owned = ["/etc/inferstack", "/var/lib/inferstack", "/opt/inferstack", "/usr/local/lib/inferstack",
             "/etc/systemd/system"]
    result = {}
    for top in owned:
        for path in [box.path(top), *box.path(top).rglob("*")]:
            stat = path.lstat()
            result[str(path.relative_to(box.root))] = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    return result


#### The tests, in the order a server lives them ####


def test_the_units_pass_systemd_analyze_verify_inside_debian(deployment: Deployment) -> None:
    result = deployment.box.run("systemd-analyze", "verify", "/etc/systemd/system/inferstack-boot.service",
                                "/etc/systemd/system/inferstack-server.service",
                                f"/etc/systemd/system/{interruption.UNIT}.service", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_first_boot_serves_a_real_completion_on_loopback(deployment: Deployment) -> None:
    box = deployment.box
    log = boot_log(box)
    assert box.read("/run/fake-systemd/inferstack-boot.service.rc").strip() == "0", log[-4000:]
    for phase in ("metadata_firewall", "driver", "runtime", "gateway", "model_sync", "service", "model_load"):
        assert f"phase={phase} status=ok duration_s=" in log, log[-4000:]
    # Only root reaches the metadata server: the native runtime's rule went to the (stand-in) host firewall.
    assert ("-w -I OUTPUT 1 -d 169.254.169.254/32 -p tcp --dport 80 -m owner ! --uid-owner 0 -j REJECT "
            "--reject-with tcp-reset") in box.read("/var/log/iptables.calls")
    measured = parse_phase_lines(log)  # the machine-readable lines, named as the plan's cold-start phases
    assert in_boot_order([m.phase for m in measured], COLD_START_PHASES), log[-4000:]
    started = {m.phase: m for m in measured}  # the sync ran beside the runtime's install (pip builds llama.cpp)
    assert started["model_sync"].start < started["runtime"].end, log[-4000:]
    assert all(m.status == "ok" and m.seconds >= 0 and m.end >= m.start for m in measured), measured
    assert measured[-1].seconds == pytest.approx(measured[-1].end - measured[-1].start, abs=0.06)
    assert "summary: ready in" in log
    assert box.read("/var/lib/inferstack/ready").startswith("model=tiny-llama version=v-")
    status, body = complete(deployment.port, "hello world", API_KEY)
    assert status == 200, body
    choice = body["choices"][0]  # type: ignore[index]
    assert isinstance(choice["text"], str) and body["usage"]["completion_tokens"] > 0  # type: ignore[index]


def test_the_gateway_answers_401_without_the_key_on_every_route_and_only_serves_the_api(
        deployment: Deployment) -> None:
    port = deployment.port
    for path in ("/v1/models", "/v1/completions", "/v1/chat/completions", "/docs", "/openapi.json", "/metrics",
                 "/tokenize", "/"):
        assert call(port, path, None)[0] == 401, path
        assert call(port, path, "sk-not-the-key")[0] == 401, path
    assert call(port, "/health", None)[0] == 200  # the load balancer's and the boot's readiness check
    assert call(port, "/v1/models", API_KEY)[0] == 200
    for path in ("/docs", "/openapi.json", "/metrics", "/tokenize", "/"):
        assert call(port, path, API_KEY)[0] == 404, path


def test_a_streamed_completion_passes_through_the_gateway(deployment: Deployment) -> None:
    status, body = complete(deployment.port, "hello world", API_KEY, stream=True)
    assert status == 200
    events = [line for line in body["raw"].split(b"\n") if line.startswith(b"data: ")]  # type: ignore[union-attr]
    assert len(events) >= 2 and events[-1] == b"data: [DONE]", events


LOADTEST_FIGURES = ("ttft_ms", "tpot_ms", "e2e_ms")
LOADTEST_KEYS = {*LOADTEST_FIGURES, "model", "served_by", "load", "requests_ok", "requests_failed",
                 "output_tokens_per_s", "requests_per_s", "duration_s", "failures"}


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_inferstack_loadtest_measures_the_real_server_through_the_gateway(deployment: Deployment, api: str) -> None:
    """`inferstack loadtest` (the command, in a process of its own) against llama.cpp behind the gateway: two
    requests at a time, so one waits for the model while the other streams. Bounded: 6 requests of 16 tokens,
    120 s at most."""
    # The chroot shares the host's network: another end-to-end run on this machine (several sessions at once) can
    # hold the runtime port, and this gateway would then measure that run's server, not this one.
    server_pid = deployment.box.read("/run/fake-systemd/inferstack-server.service.pid").strip()
    assert listening_socket_inodes(RUNTIME_PORT) <= process_socket_inodes(server_pid), \
        f"127.0.0.1:{RUNTIME_PORT} is held by another process than this server (another end-to-end run?)"
    requests = 6
    command = [sys.executable, "-m", "inferstack.cli", "loadtest", f"http://127.0.0.1:{deployment.port}/v1",
               "--api", api, "--requests", str(requests), "--concurrency", "2", "--input-tokens", "8",
               "--output-tokens", "16", "--duration", "120", "--api-key-env", "INFERSTACK_E2E_KEY", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=REPO,
                          env={**os.environ, "INFERSTACK_E2E_KEY": API_KEY, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert set(result) == LOADTEST_KEYS, result
    assert result["model"] == "tiny-llama" and result["load"] == "2 concurrent"
    assert result["served_by"] == "me"  # llama-cpp-python's /v1/models names no engine: the workload's is trusted
    assert (result["requests_ok"], result["requests_failed"], result["failures"]) == (requests, 0, {}), result
    for figure in LOADTEST_FIGURES:
        p50, p95, p99 = (result[figure][q] for q in ("p50", "p95", "p99"))
        assert 0 < p50 <= p95 <= p99, (figure, result[figure])
    assert result["ttft_ms"]["p50"] < result["e2e_ms"]["p50"]  # the first token comes before the end of a stream
    assert result["output_tokens_per_s"] > 0 and result["requests_per_s"] > 0
    assert API_KEY not in done.stdout + done.stderr


def test_the_runtime_runs_unprivileged_on_loopback_and_no_secret_is_on_a_command_line(
        deployment: Deployment) -> None:
    box = deployment.box
    runtime_uid = int(box.run("id", "-u", "inferstack").stdout)
    assert runtime_uid != 0
    server_pid = box.read("/run/fake-systemd/inferstack-server.service.pid").strip()
    assert process_uid(server_pid) == runtime_uid
    assert listening_addresses(RUNTIME_PORT) == {"0100007F"}  # 127.0.0.1 only
    environ = Path(f"/proc/{server_pid}/environ").read_bytes().split(b"\0")
    assert f"HF_TOKEN={HUB_TOKEN}".encode() in environ
    assert not any(API_KEY.encode() in entry for entry in environ)  # the runtime never sees the API key
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            arguments = cmdline.read_bytes()
            assert API_KEY.encode() not in arguments and HUB_TOKEN.encode() not in arguments, cmdline


def test_secrets_live_only_in_root_only_files_fetched_at_start(deployment: Deployment) -> None:
    box = deployment.box
    secrets_dir = box.path("/run/inferstack-secrets")
    assert secrets_dir.stat().st_uid == 0 and (secrets_dir.stat().st_mode & 0o077) == 0
    assert box.read("/run/inferstack-secrets/server.env") == f"HF_TOKEN={HUB_TOKEN}\n"
    assert box.read("/run/inferstack-secrets/gateway-key.map") == f'"~^Bearer {re.escape(API_KEY)}$" 1;\n'
    for name in ("server.env", "gateway-key.map"):
        secret_file = secrets_dir / name
        assert secret_file.stat().st_uid == 0 and (secret_file.stat().st_mode & 0o077) == 0
    log = boot_log(box)
    for secret in (API_KEY, HUB_TOKEN):
        assert secret not in log and secret not in box.read("/etc/inferstack/bootstrap.env")
        assert secret not in box.read("/etc/inferstack/gateway.conf")


def in_boot_order(logged: list[str], phases: tuple[str, ...]) -> bool:
    """Every phase once, in the plan's order, but the model sync's line: it runs in its own process beside the
    runtime's and the gateway's installs and logs when it ends."""
    return (sorted(logged) == sorted(phases)
            and [p for p in logged if p != "model_sync"] == [p for p in phases if p != "model_sync"])


def test_a_second_boot_changes_nothing(deployment: Deployment) -> None:
    box = deployment.box
    before = snapshot(box)
    server_pid = box.read("/run/fake-systemd/inferstack-server.service.pid")
    assert boot_again(box) == 0, boot_log(box)[-3000:]
    log = boot_log(box).rsplit("boot start:", 1)[1]
    assert "model unchanged" in log
    assert "native: llama_cpp_python 0.3.16 present" in log
    assert "inferstack-server.service already serving" in log
    # the boot phases again, but no second vm_boot: the machine did not reboot
    assert in_boot_order([m.phase for m in parse_phase_lines(log)], COLD_START_PHASES[1:])
    assert snapshot(box) == before
    assert box.read("/run/fake-systemd/inferstack-server.service.pid") == server_pid


def test_a_corrupted_model_update_is_detected_and_not_served(deployment: Deployment) -> None:
    box, model_dir = deployment.box, deployment.model_dir
    served = os.readlink(box.path("/var/lib/inferstack/models/tiny-llama/current"))
    write_tiny_llama(model_dir / "tiny-llama-f32.gguf", seed=2)  # a new model version and its manifest…
    write_manifest(model_dir)
    upload_model(deployment.storage, BUCKET, PREFIX, model_dir)
    corrupted = bytearray((model_dir / "tiny-llama-f32.gguf").read_bytes())
    corrupted[len(corrupted) // 2] ^= 0xFF  # …but the object in the bucket has one byte flipped
    s3_client(deployment.storage).put_object(Bucket=BUCKET, Key=PREFIX + "tiny-llama-f32.gguf", Body=bytes(corrupted))
    assert boot_again(box) != 0
    log = boot_log(box).rsplit("boot start:", 1)[1]
    assert "checksum mismatch (round 2/2): tiny-llama-f32.gguf: manifest sha256" in log
    assert "phase=model_sync status=failed" in log and "summary: FAILED in phase model_sync" in log
    assert os.readlink(box.path("/var/lib/inferstack/models/tiny-llama/current")) == served
    assert complete(deployment.port, "hello", API_KEY)[0] == 200  # the previous, verified model still serves


def test_an_unreachable_storage_endpoint_is_retried_then_fails_clearly(deployment: Deployment) -> None:
    box = deployment.box
    settings = box.path("/etc/inferstack/bootstrap.env")
    original = settings.read_text()
    unreachable = f"http://127.0.0.1:{free_port()}"
    settings.write_text(original.replace(f"STORAGE_ENDPOINT={deployment.storage}", f"STORAGE_ENDPOINT={unreachable}"))
    try:
        assert boot_again(box) != 0
    finally:
        settings.write_text(original)
    log = boot_log(box).rsplit("boot start:", 1)[1]
    assert log.count("retry GET e2e-models/models/tiny-llama/f32/manifest.json: attempt") == 4
    assert "sync FAILED: object storage unreachable or access denied" in log
    assert "phase=model_sync status=failed" in log


#### The inference cache: the gateway in front of llama.cpp, Debian's redis-server on loopback (TLS, AUTH) ####


def runtime_completions(box: Chroot) -> int:
    """Completions that reached llama.cpp: its server (uvicorn) logs one access line per request."""
    log = box.path("/var/log/fake-journal/inferstack-server.service.log")
    return log.read_text().count('"POST /v1/completions HTTP/1.1"') if log.exists() else 0


def cache_keys_after(redis: Redis, count: int) -> list[str]:
    """The answer is stored just after the response: wait (bounded) until Redis holds `count` keys."""
    deadline = time.monotonic() + 30
    while len(keys := redis.keys()) < count:
        assert time.monotonic() < deadline, f"Redis holds {keys}"
        time.sleep(0.2)
    return keys


def access_log_with(box: Chroot, text: str, path: str = gateway.ACCESS_LOG) -> str:
    """The gateway's access log once it holds `text` (nginx writes a request's line after its response)."""
    deadline = time.monotonic() + 30
    while text not in (log := box.read(path)):
        assert time.monotonic() < deadline, log[-2000:]
        time.sleep(0.2)
    return log


def test_a_temperature_0_completion_asked_twice_is_answered_once_by_llama_cpp(deployment: Deployment) -> None:
    box, redis = deployment.box, deployment.redis
    redis.cli("FLUSHALL")
    before = runtime_completions(box)
    first = complete(deployment.port, "the cache", API_KEY, temperature=0)
    assert first[0] == 200, first
    cache_keys_after(redis, 1)
    second = complete(deployment.port, "the cache", API_KEY, temperature=0)
    assert second == first  # the same answer, served from Redis
    assert runtime_completions(box) == before + 1, boot_log(box)[-2000:]
    assert "cache=MISS" in access_log_with(box, "cache=HIT")


def test_a_sampled_completion_is_never_cached(deployment: Deployment) -> None:
    box, redis = deployment.box, deployment.redis
    redis.cli("FLUSHALL")
    before = runtime_completions(box)
    for _ in range(2):
        assert complete(deployment.port, "sampled", API_KEY, temperature=0.8)[0] == 200
    assert runtime_completions(box) == before + 2
    assert redis.keys() == []


def test_with_redis_stopped_completions_still_succeed(deployment: Deployment) -> None:
    box, redis = deployment.box, deployment.redis
    redis.stop()
    try:
        before = runtime_completions(box)
        for _ in range(2):
            status, body = complete(deployment.port, "no redis", API_KEY, temperature=0)
            assert status == 200 and body["usage"]["completion_tokens"] > 0  # type: ignore[index]
        assert runtime_completions(box) == before + 2
        assert "cache=ERROR" in access_log_with(box, "cache=ERROR")
    finally:
        redis.start()


def test_the_cache_token_lives_only_in_a_root_only_file_and_never_in_the_bootstrap(deployment: Deployment) -> None:
    box = deployment.box
    token_file = box.path(CACHE_AUTH_FILE)
    assert token_file.read_text() == f"REDIS_AUTH={CACHE_AUTH_TOKEN}\n"
    assert token_file.stat().st_uid == 0 and (token_file.stat().st_mode & 0o077) == 0
    for path in ("/etc/inferstack/bootstrap.env", "/etc/inferstack/gateway.conf",
                 "/etc/systemd/system/inferstack-gateway.service"):
        assert CACHE_AUTH_TOKEN not in box.read(path)
    assert CACHE_AUTH_TOKEN not in boot_log(box)


def gateway_config_for(deployment: Deployment, group: gateway.ServerGroup) -> str:
    """The gateway configuration the bootstrap renders for a server of `group`, the deployment's plan and options."""
    rendered = render_bootstrap(deployment.plan, "aws", deployment.options.model_copy(update={"group": group}))
    files = {entry["path"]: entry["content"] for entry in json.loads(rendered.bundle)["files"]}
    return files[gateway.CONFIG_PATH]


@contextlib.contextmanager
def second_gateway(deployment: Deployment, name: str, config: str,
                   runtime_port: int = RUNTIME_PORT) -> Iterator[tuple[int, str]]:
    """Another gateway in the chroot beside the booted server's (Debian's nginx, its Lua, the cache's Redis) from
    `config`, with a port, pid, access log and status listener of its own, in front of `runtime_port` (the server's
    llama.cpp unless told). Yields (its port, its access log inside the chroot)."""
    box, port, log = deployment.box, free_port(), f"/var/log/inferstack/{name}-access.log"
    moved = {f"listen {deployment.port};": f"listen 127.0.0.1:{port};", gateway.ACCESS_LOG: log,
             "/run/inferstack-gateway.pid": f"/run/inferstack-{name}.pid",
             gateway.CACHE_STATUS_LISTEN: f"127.0.0.1:{free_port()}",
             f"server 127.0.0.1:{RUNTIME_PORT};": f"server 127.0.0.1:{runtime_port};"}
    for fixed, replacement in moved.items():
        assert fixed in config, fixed
        config = config.replace(fixed, replacement)
    path = f"/etc/inferstack/{name}-gateway.conf"
    box.path(path).write_text(config)
    process = subprocess.Popen(["chroot", str(box.root), "/usr/sbin/nginx", "-c", path], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                if call(port, deployment.plan.serving.health_path, None)[0] == 200:
                    break
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline, f"the {name} gateway did not answer"
            time.sleep(0.2)
        yield port, log
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_a_canary_answer_is_never_served_by_the_main_group(deployment: Deployment) -> None:
    """A canary gateway (the same plan rendered for the canary group) beside the server's, in front of the same
    llama.cpp and the same Redis: what the canary stored, the main group never serves."""
    box, redis = deployment.box, deployment.redis
    redis.cli("FLUSHALL")
    with second_gateway(deployment, "canary", gateway_config_for(deployment, "canary")) as (canary_port, _):
        before = runtime_completions(box)
        canary_answer = complete(canary_port, "which group answers", API_KEY, temperature=0)
        assert canary_answer[0] == 200
        (canary_key,) = cache_keys_after(redis, 1)
        assert canary_key.startswith("inferstack:canary:"), canary_key
        assert complete(deployment.port, "which group answers", API_KEY, temperature=0)[0] == 200
        assert runtime_completions(box) == before + 2, "the main group served the canary's answer"
        assert sorted(key.split(":")[1] for key in cache_keys_after(redis, 2)) == ["canary", "main"]
        assert complete(canary_port, "which group answers", API_KEY, temperature=0) == canary_answer
        assert runtime_completions(box) == before + 2  # the canary's own answer, from Redis


def test_gzip_from_the_runtime_is_never_cached(deployment: Deployment) -> None:
    """llama.cpp never compresses; Triton does for a client that accepts gzip. The server's gateway, rendered as
    booted, in front of a stand-in runtime that always compresses: its answers pass through, never stored."""
    box, redis = deployment.box, deployment.redis
    redis.cli("FLUSHALL")
    request = {"model": "tiny-llama", "prompt": "compressed", "max_tokens": 8, "temperature": 0}
    with runtime() as compressing:
        compressing.gzip = "always"
        config = gateway_config_for(deployment, "main")
        with second_gateway(deployment, "gzip", config, runtime_port=compressing.port) as (port, log):
            compressing.seen.clear()
            for _ in range(2):
                status, body = call(port, "/v1/completions", API_KEY, request, headers={"Accept-Encoding": "gzip"})
                assert status == 200 and json.loads(gzip.decompress(body)) == {"path": "/v1/completions"}
            time.sleep(2)  # an answer is stored within milliseconds of its response
            assert redis.keys() == []
            assert len(compressing.seen) == 2 and {seen.headers.get("Accept-Encoding") for seen in compressing.seen} \
                == {None}  # the gateway asked for identity; the runtime compressed anyway, and it was not kept
            assert access_log_with(box, "POST /v1/completions", log).count("cache=MISS") == 2


HEALTH_BUDGET_S = 0.2


def test_the_health_path_answers_within_200_ms_while_the_cache_reads_large_bodies(deployment: Deployment) -> None:
    """Eight bodies at the cache's cap at once, each parsed in full by the gateway's Lua: a non-finite number at its
    end, so the gateway answers each itself (400) and llama.cpp's own time is not in the figure. (Bodies beyond the
    cap go to the runtime unread: llama-cpp-python itself takes minutes over four 7.7 MiB bodies of token ids, and
    its own health route stops answering meanwhile; test_gateway_cache.py shows the gateway with those in front of a
    stand-in runtime.)"""
    at_the_cap = [token_ids_body(gateway.CACHE_MAX_REQUEST_BYTES, last="1e999") for _ in range(8)]
    rounds = [slowest_health_answer_s(deployment.port, API_KEY, at_the_cap, "/v1/embeddings") for _ in range(3)]
    slowest_s = max(seconds for seconds, _, _ in rounds)
    print(f"\nend to end, the health path's slowest answer: {slowest_s * 1000:.0f} ms while the cache parsed 3 x 8 x "
          f"{gateway.CACHE_MAX_REQUEST_BYTES // 1024} KiB at once ({sum(probes for _, probes, _ in rounds)} probes)")
    assert all(statuses == [400] * 8 for _, _, statuses in rounds)
    assert slowest_s < HEALTH_BUDGET_S


#### A spot interruption: the server drains, and no request in flight fails ####

IN_FLIGHT = 4
IN_FLIGHT_HOLD_S = POLL_INTERVAL_S + 3
"""Each slow request outlasts the watcher's longest wait for the notice: it is still in flight when the drain comes."""


def health_status(port: int, path: str) -> int:
    return call(port, path, None)[0]


def wait_for_health(ports: list[int], path: str, status: int, within_s: float) -> float:
    """Seconds until every gateway in `ports` answers `status` on the health path (at most `within_s`)."""
    started = time.monotonic()
    while {health_status(port, path) for port in ports} != {status}:
        assert time.monotonic() - started < within_s, f"the health path did not turn {status} within {within_s}s"
        time.sleep(0.1)
    return time.monotonic() - started


def test_an_interruption_notice_drains_the_server_and_every_request_in_flight_completes(
        deployment: Deployment) -> None:
    """The booted watcher (root, its unit as rendered) reads the stand-in metadata server every POLL_INTERVAL_S. Slow
    requests go through the server's gateway configuration (Debian's nginx, a second instance in the chroot, in front
    of a stand-in runtime that holds each answer IN_FLIGHT_HOLD_S) while the notice is raised: the health path of both
    gateways turns 503 within the poll interval, and every request in flight is answered 200. The notice withdrawn,
    the drain lifts (the module's later tests see a healthy server)."""
    box, port, health = deployment.box, deployment.port, deployment.plan.serving.health_path
    # Started by the first boot's service phase (a later boot of this module fails on purpose before that phase:
    # test_an_unreachable_storage_endpoint_is_retried_then_fails_clearly), and still running.
    watcher_pid = box.read(f"/run/fake-systemd/{interruption.UNIT}.service.pid").strip()
    assert process_uid(watcher_pid) == 0  # root: only root reaches the metadata server
    assert health_status(port, health) == 200
    journal = box.path(f"/var/log/fake-journal/{interruption.UNIT}.service.log")
    request = {"model": "tiny-llama", "prompt": "in flight", "max_tokens": 8, "hold_s": IN_FLIGHT_HOLD_S}
    try:
        with runtime() as slow, second_gateway(deployment, "drain", gateway_config_for(deployment, "main"),
                                               runtime_port=slow.port) as (slow_port, _), \
                ThreadPoolExecutor(IN_FLIGHT) as pool:
            in_flight = [pool.submit(call, slow_port, "/v1/completions", API_KEY, request) for _ in range(IN_FLIGHT)]
            deadline = time.monotonic() + 10
            while len(slow.seen) < IN_FLIGHT:  # every request has reached the runtime
                assert time.monotonic() < deadline, f"{len(slow.seen)} of {IN_FLIGHT} requests reached the runtime"
                time.sleep(0.05)
            deployment.notices.posted[AWS_INSTANCE_ACTION] = json.dumps(
                {"action": "terminate", "time": "2026-12-07T08:22:00Z"})
            drained_after_s = wait_for_health([port, slow_port], health, 503, POLL_INTERVAL_S + 2)
            assert not any(answer.done() for answer in in_flight)  # the drain came while they were in flight
            answers = [answer.result(timeout=60) for answer in in_flight]
        assert [status for status, _ in answers] == [200] * IN_FLIGHT, answers
        assert all(json.loads(body) == {"path": "/v1/completions"} for _, body in answers)
        assert health_status(port, health) == 503  # still drained: nginx and the runtime were never stopped
        assert complete(port, "after the notice", API_KEY)[0] == 200
        lines = [line for line in journal.read_text().splitlines() if "draining" in line]
        assert len(lines) == 1 and "aws notice" in lines[0] and '"action": "terminate"' in lines[0], lines
        print(f"\nend to end, drained {drained_after_s:.1f}s after the notice (poll interval {POLL_INTERVAL_S:g}s); "
              f"{IN_FLIGHT} requests in flight, each answered 200")
    finally:
        deployment.notices.posted.clear()
    wait_for_health([port], health, 200, POLL_INTERVAL_S + 2)
    assert not box.path(interruption.DRAIN_FLAG).exists()


#### Several model processes on one server ####


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A second server in its own chroot: the same bootstrap with two llama.cpp processes (one thread each) behind
    one gateway. Its processes listen on the ports after RUNTIME_PORT, so it runs beside the first server."""
    with debian_chroot() as box, deployed(box, tmp_path_factory, processes=2, threads=1, cache=False) as booted:
        yield booted


def test_two_llamacpp_processes_serve_through_one_gateway(two_processes: Deployment) -> None:
    box, port = two_processes.box, two_processes.port
    log = boot_log(box)
    assert box.read("/run/fake-systemd/inferstack-boot.service.rc").strip() == "0", log[-4000:]
    assert "started inferstack-server-1.service started inferstack-server-2.service" in log, log[-4000:]
    units = [f"/etc/systemd/system/inferstack-server-{index}.service" for index in (1, 2)]
    verified = box.run("systemd-analyze", "verify", *units, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    runtime_uid = int(box.run("id", "-u", "inferstack").stdout)
    pids = set()
    for index in (1, 2):  # each process: its own unprivileged process, healthy on its own loopback port
        pid = box.read(f"/run/fake-systemd/inferstack-server-{index}.service.pid").strip()
        assert process_uid(pid) == runtime_uid
        pids.add(pid)
        assert listening_addresses(RUNTIME_PORT + index) == {"0100007F"}  # 127.0.0.1 only
        status, _ = call(RUNTIME_PORT + index, "/health", None)
        assert status == 200, index
    assert len(pids) == 2
    for request in range(6):
        status, body = complete(port, f"hello {request}", API_KEY)
        assert status == 200, body
        assert body["usage"]["completion_tokens"] > 0  # type: ignore[index]
    served = [box.read(f"/var/log/fake-journal/inferstack-server-{index}.service.log")
              .count('"POST /v1/completions HTTP/1.1" 200') for index in (1, 2)]
    assert sum(served) == 6 and min(served) >= 1, served  # the gateway sent requests to both processes
    assert call(port, "/v1/models", None)[0] == 401  # the key is checked in front of both

"""How long a new server takes from its start to its first healthy answer, by boot phase, and the fleet settings that
follow from it.

A fleet that judges a server before its model has loaded replaces it forever, and one that adds servers faster
than they warm up overshoots: the health check's grace, the scale-out warm-up and the scale-in cooldown all come
from this estimate. Every plan carries it (`DeploymentPlan.cold_start`), phase by phase, under the names the boot
script logs (docs/bootstrap.md):

    vm_boot → metadata_firewall → driver → runtime → gateway → model_sync → service → model_load

Each figure below says where it comes from: a provider's documentation (with the date it was read), a measurement
(where and when), or "assumption" where nothing better is at hand. The boot log prints each phase's real duration as
a machine-readable line (`inferstack-phase {...}`, read back by `parse_phase_lines`): that is what to tune these with.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import NamedTuple

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.plan import COLD_START_PHASES, ColdStart, ColdStartPhase, ColdStartPhaseName, ServerImageKind
from inferstack.runtimes import RUNTIME_FACTS

GIB = 2**30
GB = 10**9
MB = 10**6
MIB = 2**20

#### Per-cloud facts ####
# Whether a cloud's GPU image has the driver, and which boot disk its servers get: inferstack.clouds.CLOUD_FACTS.
# Each runtime's image download, native build and warm-up: inferstack.runtimes.RUNTIME_FACTS.


def block_volume_bytes_per_s(cloud: Cloud, disk_gib: int) -> float:
    """Sequential throughput of the boot disk (`CloudFacts.block_volume`), at the size the plan gives it, with no
    extra throughput provisioned."""
    if cloud == "aws":
        # gp3: 125 MiB/s baseline, provisionable to 1000 MiB/s (EC2 API EbsBlockDevice.Throughput, "Minimum value of
        # 125. Maximum value of 1000", docs.aws.amazon.com, read 2026-12-01); the components provision none.
        return 125 * MIB
    if cloud == "gcp":
        # pd-balanced: 140 MiB/s baseline per disk plus 0.28 MiB/s per GiB (cloud.google.com/compute/docs/disks/
        # performance; assumption: figures recalled, not re-read 2026-12-01). hyperdisk-balanced's default 140 MiB/s
        # is taken to be the same.
        return (140 + 0.28 * disk_gib) * MIB
    if cloud == "alibaba":
        # ESSD PL1: min(120 + 0.5 x GiB, 350) MB/s (alibabacloud.com ESSD performance table; assumption: formula
        # recalled, not re-read 2026-12-01).
        return min(120 + 0.5 * disk_gib, 350) * MB
    if cloud == "huawei":
        # GPSSD: min(250, 100 + 0.5 x GiB) MiB/s (support.huaweicloud.com/intl/en-us/usermanual-cce-autopilot/
        # cce_11_0613.html, "EVS Disk Specifications", read 2026-12-01).
        return min(250, 100 + 0.5 * disk_gib) * MIB
    raise ValueError(f"no boot-disk throughput for cloud {cloud!r}: add its block volume's formula here")


#### Phase figures ####

VM_BOOT: Mapping[tuple[Cloud, str], tuple[int, str]] = {
    ("aws", "gpu"): (45, "provisioning a GPU machine ~45 s (tensorfuse/tensorfuse-examples#1, 2024-09-11)"),
    ("aws", "cpu"): (26, "m7i.large launch to SSH 25.8 s, median of 3 (brevdev/ec2-coldboot-research, 2026-01-31)"),
    ("gcp", "cpu"): (25, "~25 s to SSH for VMs of up to 32 vCPUs, ~5,000 VMs (Aboukhalil, 'Move Fast and Break the "
                         "Cloud', 2018-08-17)"),
}
"""Instance launch to the boot unit, per cloud and device, where a measurement was published (the boot log measures
the part from kernel start, `/proc/uptime`; the provider's provisioning before it is not visible)."""
VM_BOOT_UNMEASURED_S = 90
"""Elsewhere (assumption: 1-2 min; no published figure found for Alibaba, Huawei or GCP GPU servers)."""
DRIVER_INSTALL_S = 720
"""Installing the NVIDIA driver and rebooting (docs/bootstrap.md: 5-12 minutes when it installs; the upper end)."""
FAST_PHASE_S: Mapping[ColdStartPhaseName, int] = {"metadata_firewall": 1, "gateway": 10, "service": 1}
"""An iptables rule, nginx from the distribution, two unit starts (docs/bootstrap.md: < 1 s, ~10 s to install nginx,
< 1 s; service measured at 0.3 s in the end-to-end test)."""
PRESENT_S = 1
"""A phase whose work the image or an earlier boot holds: it checks and moves on (`docker image inspect`, nginx's
configuration written)."""
CONTAINER_TOOLS_S = 60
"""Installing Docker Engine (and, on GPUs, the NVIDIA Container Toolkit) from their apt repositories (assumption)."""
IMAGE_PULL_BYTES_PER_S = 100 * MB
"""What `docker pull` achieves at best: it downloads 3 layers at a time (dockerd `--max-concurrent-downloads`, default
3) and gunzips each on one core (assumption: 100 MB/s, not measured)."""

DEFAULT_NETWORK_GBPS = 5.0
"""Instance bandwidth where instances.csv has no `network_gbps` (every AWS, GCP and Huawei CPU type, most GCP GPU
types): a conservative assumption; the catalog's figures are the providers' "up to" bandwidth."""
SYNC_CONNECTIONS = 16
"""Parallel byte-range downloads of the model sync (bootstrap/render.py SYNC_WORKERS; a test keeps them equal)."""
OBJECT_STORE_CONNECTION_BYTES_PER_S = 50 * MB
"""One GET stream from a same-region bucket (assumption: object stores serve a single connection at tens of MB/s, which
is why they advise parallel byte-range GETs: docs.aws.amazon.com/whitepapers/latest/
s3-optimizing-performance-best-practices/use-byte-range-fetches.html, read 2026-12-01)."""
MEASURED = Path(__file__).parent / "data" / "coldstart_measured.csv"
"""Figures `benchmarks/model_sync.py --chroot --record` measured: the server's own sync program, Debian's python3 in
a Debian 12 root file system, against an S3 server on loopback (docs/bootstrap.md, "Sync benchmark")."""


class Measured(NamedTuple):
    bytes_per_s: float
    date: str
    machine: str


@cache
def measured(quantity: str) -> Measured:
    """The lowest rate recorded for a quantity without a per-connection cap (`sha256`, `load_read`, `sync`)."""
    with MEASURED.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["quantity"] == quantity
                and not row["per_connection_cap_mb_s"]]
    if not rows:
        raise ValueError(f"no {quantity} row in {MEASURED.name}: run benchmarks/model_sync.py --chroot --record")
    row = min(rows, key=lambda r: float(r["bytes_per_s"]))
    return Measured(float(row["bytes_per_s"]), row["date"], row["machine"])


STREAM_BYTES_PER_S = 15 * GB / 8.45
"""vLLM's Run:ai Model Streamer reading from S3 at concurrency 16: Llama-3-8B (15 GB) in 8.45 s on a g5.12xlarge,
same-region bucket (run-ai/runai-model-streamer docs/src/benchmarks.md @1e56c33, 2025-05-08; 4.88 s at 32)."""
STREAM_CONCURRENCY = 16
"""The streamer's concurrency the components set (its default for object storage is 8)."""
LOCAL_NVME_BYTES_PER_S = 1 * GB
"""Sequential read or write of instance-store NVMe (assumption: 1 GB/s; single NVMe SSDs do 2-3 GB/s, cloud instance
store slices less)."""

GRACE_FACTOR = 1.5
MIN_SCALE_IN_COOLDOWN_S = 900


class Server(NamedTuple):
    """What the estimate needs to know about the server and its model."""

    cloud: Cloud
    runtime: str
    device: str
    model_gib: float
    network_gbps: float | None
    local_nvme_gb: int | None
    disk_gib: int
    processes: int = 1
    stream: bool = False
    """The runtime streams the weights from the bucket (workload `startup.model_loading: stream`): it starts once
    installed, and the sync fetches and verifies them beside it."""
    image: ServerImageKind = "default"
    """A baked or brought image holds the driver, the container runtime with the runtime's image and the gateway's
    packages (docs/cold-start.md)."""
    caches: bool = False
    """The baked image holds the runtime's compile caches too (`runtime_caches`): its first start on a new server
    finds them, as a warm-pool server's does."""


def cold_start(server: Server) -> ColdStart:
    """A new server's boot, phase by phase on a timeline: the model sync runs beside the runtime's and the gateway's
    installs (boot.sh starts it once the driver is there), and the runtime starts once both are done."""
    held = server.image != "default"
    return _timeline(server, vm=_vm_boot(server), driver=_driver(server, held), runtime=_runtime(server, held),
                     gateway=_gateway(held), sync=_model_sync(server),
                     load=_model_load(server, cached=server.caches))


def runtime_caches(image: ServerImageKind, runtime: str, device: str, processes: int) -> bool:
    """Whether a baked image holds the runtime's caches: the build starts the runtime once, in its container on a
    GPU, where a start with caches is faster than without (vLLM's torch.compile, Triton and FlashInfer caches under
    the runtime user's home)."""
    facts = RUNTIME_FACTS[runtime]
    return (image == "baked" and device == "gpu" and facts.warmup_cached_s < facts.warmup_s
            and facts.auto_mode(device, processes) == "container")


def warm_start(server: Server) -> ColdStart:
    """A warm-pool server's start from Stopped (AWS Auto Scaling warm pool): its pool boot installed everything and
    started the runtime once before it stopped, so its disk holds the driver, the runtime's image and its caches;
    instance storage is empty after a stop, so a model kept on local NVMe is fetched again."""
    vm_s, vm_basis = _vm_boot_figure(server)
    vm = ColdStartPhase(phase="vm_boot", seconds=vm_s, start_s=0, basis=(
        f"start from Stopped; no GPU figure is published (a stopped m7i.large started in 21.2 s against 25.8 s "
        f"launched, brevdev/ec2-coldboot-research 2026-01-31): the launch figure kept, {vm_basis}"))
    sync = _model_sync(server) if server.local_nvme_gb else _present("model_sync", "on the data disk since the pool "
                                                                     "boot; the sync finds its manifest unchanged")
    return _timeline(server, vm=vm, driver=_present("driver", "installed in the pool boot"),
                     runtime=_present("runtime", "installed in the pool boot"), gateway=_gateway(True), sync=sync,
                     load=_model_load(server, cached=True))


def _timeline(server: Server, *, vm: ColdStartPhase, driver: ColdStartPhase, runtime: ColdStartPhase,
              gateway: ColdStartPhase, sync: ColdStartPhase, load: ColdStartPhase) -> ColdStart:
    firewall = _fast("metadata_firewall").model_copy(update={"start_s": vm.end_s})
    driver = driver.model_copy(update={"start_s": firewall.end_s})
    runtime = runtime.model_copy(update={"start_s": driver.end_s})
    gateway = gateway.model_copy(update={"start_s": runtime.end_s})
    sync = sync.model_copy(update={"start_s": driver.end_s})
    service = _fast("service").model_copy(update={"start_s": gateway.end_s if server.stream
                                                  else max(gateway.end_s, sync.end_s)})
    load = load.model_copy(update={"start_s": service.end_s})
    phases = [vm.model_copy(update={"start_s": 0}), firewall, driver, runtime, gateway, sync, service, load]
    return ColdStart(total_s=max(p.end_s for p in phases), phases=phases)


def _vm_boot_figure(server: Server) -> tuple[int, str]:
    return VM_BOOT.get((server.cloud, server.device), (VM_BOOT_UNMEASURED_S, "assumption: no published figure"))


def _vm_boot(server: Server) -> ColdStartPhase:
    seconds, basis = _vm_boot_figure(server)
    return ColdStartPhase(phase="vm_boot", seconds=seconds, start_s=0,
                          basis=f"instance start to the boot unit: {basis}")


def _fast(phase: ColdStartPhaseName) -> ColdStartPhase:
    return ColdStartPhase(phase=phase, seconds=FAST_PHASE_S[phase], start_s=0, basis="docs/bootstrap.md")


def _present(phase: ColdStartPhaseName, basis: str) -> ColdStartPhase:
    return ColdStartPhase(phase=phase, seconds=PRESENT_S, start_s=0, basis=basis)


def _gateway(held: bool) -> ColdStartPhase:
    return _present("gateway", "nginx in the image") if held else _fast("gateway")


def _driver(server: Server, held: bool) -> ColdStartPhase:
    if server.device != "gpu":
        return ColdStartPhase(phase="driver", seconds=0, start_s=0, basis="CPU server")
    if held:
        return ColdStartPhase(phase="driver", seconds=0, start_s=0, basis=f"in the {server.image} image")
    if CLOUD_FACTS[server.cloud].driver_ready_image:
        return ColdStartPhase(phase="driver", seconds=0, start_s=0, basis=f"{server.cloud}: driver-ready image")
    return ColdStartPhase(phase="driver", seconds=DRIVER_INSTALL_S, start_s=0,
                          basis=f"{server.cloud}: no driver-ready image; install and reboot (5-12 min)")


def _runtime(server: Server, held: bool) -> ColdStartPhase:
    """Installed the way the bootstrap's `auto` install mode installs it (`RuntimeFacts.auto_mode`), unless the image
    holds it."""
    if held:
        return _present("runtime", f"in the {server.image} image (read lazily from its snapshot at first: not "
                                   "modelled)")
    facts = RUNTIME_FACTS[server.runtime]
    if facts.auto_mode(server.device, server.processes) == "native":
        install = facts.native.install if facts.native else None
        if install is None:
            raise ValueError(f"no native install time for {server.runtime}: add its NativeInstall.install")
        return ColdStartPhase(phase="runtime", seconds=install.seconds, start_s=0, basis=install.basis)
    image_bytes = facts.image_download_gb * GB
    rate, limit = min((network_bytes_per_s(server), "network"), (IMAGE_PULL_BYTES_PER_S, "docker pull"))
    pull_s = math.ceil(image_bytes / rate)
    return ColdStartPhase(
        phase="runtime", seconds=CONTAINER_TOOLS_S + pull_s, start_s=0,
        basis=f"Docker {CONTAINER_TOOLS_S} s + {image_bytes / GB:g} GB image at {rate / MB:,.0f} MB/s ({limit})")


def _model_sync(server: Server) -> ColdStartPhase:
    model_bytes = server.model_gib * GIB
    rate, limit = sync_bytes_per_s(server)
    download_s = math.ceil(model_bytes / rate)
    sha256 = measured("sha256")
    hash_s = math.ceil(model_bytes / sha256.bytes_per_s)
    return ColdStartPhase(
        phase="model_sync", seconds=download_s + hash_s, start_s=0,
        basis=f"{server.model_gib:.1f} GiB at {rate / MB:,.0f} MB/s ({limit}) + sha256 {hash_s} s at "
              f"{sha256.bytes_per_s / MB:,.0f} MB/s (one core, measured {sha256.date}: benchmarks/model_sync.py "
              "--chroot), beside the runtime's install")


def _model_load(server: Server, *, cached: bool) -> ColdStartPhase:
    model_bytes = server.model_gib * GIB
    if server.stream:
        network = network_bytes_per_s(server)
        left = max(network - sync_bytes_per_s(server)[0], network / 2)
        rate, where = min((STREAM_BYTES_PER_S, f"the bucket, Run:ai streamer at concurrency {STREAM_CONCURRENCY} "
                                               "(run-ai/runai-model-streamer benchmarks, 2025-05-08)"),
                          (left, "the network beside the sync"))
        read = "stream"
    else:
        rate, where = model_disk_bytes_per_s(server)
        read = "read"
    read_s = math.ceil(model_bytes / rate)
    facts = RUNTIME_FACTS[server.runtime]
    warmup_s = facts.warmup_cached_s if cached else facts.warmup_s
    caches = "caches baked in the image" if cached and server.caches else "caches on the disk" if cached else \
        "caches empty"
    warmup = f" + {server.runtime} warm-up {warmup_s} s ({caches}: {facts.warmup_basis})" if warmup_s else ""
    return ColdStartPhase(phase="model_load", seconds=read_s + warmup_s, start_s=0,
                          basis=f"{read} {read_s} s from {where} at {rate / MB:,.0f} MB/s{warmup}")


def network_bytes_per_s(server: Server) -> float:
    gbps = server.network_gbps if server.network_gbps else DEFAULT_NETWORK_GBPS
    return gbps * GB / 8


def model_disk_bytes_per_s(server: Server) -> tuple[float, str]:
    """Where the model lives on the server (the sync's destination) and how fast that disk moves bytes."""
    if server.local_nvme_gb:
        return LOCAL_NVME_BYTES_PER_S, "local NVMe"
    return block_volume_bytes_per_s(server.cloud, server.disk_gib), CLOUD_FACTS[server.cloud].block_volume


def download_bytes_per_s(server: Server) -> tuple[float, str]:
    """The model sync's rate and what limits it: the instance's network, the bucket at the sync's parallelism, or the
    disk it writes to."""
    disk_rate, disk = model_disk_bytes_per_s(server)
    return min((network_bytes_per_s(server), "network"),
               (SYNC_CONNECTIONS * OBJECT_STORE_CONNECTION_BYTES_PER_S, f"bucket, {SYNC_CONNECTIONS} connections"),
               (disk_rate, disk))


def sync_bytes_per_s(server: Server) -> tuple[float, str]:
    """The sync's rate; beside a streaming runtime, the two share the network: each has what the other leaves, at
    least half of it."""
    rate, limit = download_bytes_per_s(server)
    if not server.stream:
        return rate, limit
    network = network_bytes_per_s(server)
    shared = max(network - STREAM_BYTES_PER_S, network / 2)
    return (rate, limit) if rate <= shared else (shared, "the network beside the stream")


def describe(estimate: ColdStart) -> str:
    """The phases that take time, e.g. "vm_boot 45 s, runtime 180 s, model_sync 35 s (beside them), ..."."""
    return ", ".join(f"{p.phase} {p.seconds} s" + (" (beside them)" if _overlaps(estimate, p) else "")
                     for p in estimate.phases if p.seconds)


def _overlaps(estimate: ColdStart, phase: ColdStartPhase) -> bool:
    """Whether the model sync ran beside other phases."""
    return phase.phase == "model_sync" and any(
        other is not phase and other.seconds and other.start_s < phase.end_s and phase.start_s < other.end_s
        for other in estimate.phases)


#### Fleet settings ####


def fleet_cold_start_s(estimate: ColdStart) -> int:
    return int(math.ceil(estimate.total_s / 10) * 10)


def health_check_grace_s(cold_start_s: int) -> int:
    return int(math.ceil(cold_start_s * GRACE_FACTOR / 10) * 10)


def scale_in_cooldown_s(cold_start_s: int) -> int:
    return max(MIN_SCALE_IN_COOLDOWN_S, 2 * cold_start_s)


#### The boot log ####

PHASE_LINE_MARKER = "inferstack-phase "
_PHASE_LINE = re.compile(re.escape(PHASE_LINE_MARKER) + r"(\{.*\})\s*$")


class MeasuredPhase(NamedTuple):
    """One `inferstack-phase` line of a boot log: a phase's real start and end (Unix seconds) and its outcome."""

    phase: str
    status: str
    start: float
    end: float
    seconds: float


def parse_phase_lines(journal_text: str) -> list[MeasuredPhase]:
    """Every `inferstack-phase {...}` line in a boot log (`journalctl -u inferstack-boot`, /var/log/inferstack/boot.log,
    with or without the journal's prefix), in order. A boot that installs the driver reboots and logs its phases again:
    sum them per phase (`measured_seconds`) to compare with the plan's `cold_start`."""
    measured = []
    for line in journal_text.splitlines():
        found = _PHASE_LINE.search(line)
        if not found:
            continue
        record = json.loads(found.group(1))
        measured.append(MeasuredPhase(phase=str(record["phase"]), status=str(record["status"]),
                                      start=float(record["start"]), end=float(record["end"]),
                                      seconds=float(record["seconds"])))
    return measured


def measured_seconds(phases: list[MeasuredPhase]) -> dict[str, float]:
    """Seconds per phase, summed over the boots in the log, in the plan's phase order."""
    totals: dict[str, float] = dict.fromkeys(COLD_START_PHASES, 0.0)
    for phase in phases:
        totals[phase.phase] = totals.get(phase.phase, 0.0) + phase.seconds
    return totals

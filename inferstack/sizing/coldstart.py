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

import json
import math
import re
from collections.abc import Mapping
from typing import NamedTuple

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.plan import COLD_START_PHASES, ColdStart, ColdStartPhase, ColdStartPhaseName
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

VM_BOOT_S = 90
"""Instance start, OS boot and cloud-init until the boot unit runs (assumption: 1-2 min on the four clouds). The boot
log measures the part from kernel start (`/proc/uptime`); the provider's provisioning before it is not visible."""
DRIVER_INSTALL_S = 720
"""Installing the NVIDIA driver and rebooting (docs/bootstrap.md: 5-12 minutes when it installs; the upper end)."""
FAST_PHASE_S: Mapping[ColdStartPhaseName, int] = {"metadata_firewall": 1, "gateway": 10, "service": 1}
"""An iptables rule, nginx from the distribution, two unit starts (docs/bootstrap.md: < 1 s, ~10 s to install nginx,
< 1 s; service measured at 0.3 s in the end-to-end test)."""
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
SHA256_BYTES_PER_S = 1 * GIB
"""The sync hashes every file after its download; one file's hash runs on one core: hashlib.sha256 at 1.0 GiB/s
(measured 2026-12-01 on a Xeon with SHA-NI, 256 MiB buffer). Taken once for the whole model (one large file)."""
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


def cold_start(server: Server) -> ColdStart:
    """The estimate, phase by phase; the total is their sum."""
    phases = [
        _vm_boot(),
        _fast("metadata_firewall"),
        _driver(server),
        _runtime(server),
        _fast("gateway"),
        _model_sync(server),
        _fast("service"),
        _model_load(server),
    ]
    return ColdStart(total_s=sum(p.seconds for p in phases), phases=phases)


def _vm_boot() -> ColdStartPhase:
    return ColdStartPhase(phase="vm_boot", seconds=VM_BOOT_S, basis="instance start to the boot unit (assumption)")


def _fast(phase: ColdStartPhaseName) -> ColdStartPhase:
    return ColdStartPhase(phase=phase, seconds=FAST_PHASE_S[phase], basis="docs/bootstrap.md")


def _driver(server: Server) -> ColdStartPhase:
    if server.device != "gpu":
        return ColdStartPhase(phase="driver", seconds=0, basis="CPU server")
    if CLOUD_FACTS[server.cloud].driver_ready_image:
        return ColdStartPhase(phase="driver", seconds=0, basis=f"{server.cloud}: driver-ready image")
    return ColdStartPhase(phase="driver", seconds=DRIVER_INSTALL_S,
                          basis=f"{server.cloud}: no driver-ready image; install and reboot (5-12 min)")


def _runtime(server: Server) -> ColdStartPhase:
    """Installed the way the bootstrap's `auto` install mode installs it (`RuntimeFacts.auto_mode`)."""
    facts = RUNTIME_FACTS[server.runtime]
    if facts.auto_mode(server.device, server.processes) == "native":
        install = facts.native.install if facts.native else None
        if install is None:
            raise ValueError(f"no native install time for {server.runtime}: add its NativeInstall.install")
        return ColdStartPhase(phase="runtime", seconds=install.seconds, basis=install.basis)
    image_bytes = facts.image_download_gb * GB
    rate, limit = min((network_bytes_per_s(server), "network"), (IMAGE_PULL_BYTES_PER_S, "docker pull"))
    pull_s = math.ceil(image_bytes / rate)
    return ColdStartPhase(
        phase="runtime", seconds=CONTAINER_TOOLS_S + pull_s,
        basis=f"Docker {CONTAINER_TOOLS_S} s + {image_bytes / GB:g} GB image at {rate / MB:,.0f} MB/s ({limit})")


def _model_sync(server: Server) -> ColdStartPhase:
    model_bytes = server.model_gib * GIB
    rate, limit = download_bytes_per_s(server)
    download_s = math.ceil(model_bytes / rate)
    hash_s = math.ceil(model_bytes / SHA256_BYTES_PER_S)
    return ColdStartPhase(
        phase="model_sync", seconds=download_s + hash_s,
        basis=f"{server.model_gib:.1f} GiB at {rate / MB:,.0f} MB/s ({limit}) + sha256 {hash_s} s")


def _model_load(server: Server) -> ColdStartPhase:
    model_bytes = server.model_gib * GIB
    rate, where = model_disk_bytes_per_s(server)
    read_s = math.ceil(model_bytes / rate)
    warmup_s = RUNTIME_FACTS[server.runtime].warmup_s
    warmup = f" + {server.runtime} warm-up {warmup_s} s" if warmup_s else ""
    return ColdStartPhase(phase="model_load", seconds=read_s + warmup_s,
                          basis=f"read {read_s} s from {where} at {rate / MB:,.0f} MB/s{warmup}")


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


def describe(estimate: ColdStart) -> str:
    """The phases that take time, e.g. "vm_boot 90 s, runtime 160 s (...), ..."."""
    return ", ".join(f"{p.phase} {p.seconds} s" for p in estimate.phases if p.seconds)


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

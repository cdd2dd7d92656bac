"""Accelerator and CPU specs: what one device can hold, read and compute.

GPU specs come from data/gpus.csv (datasheet figures, dense peaks, compute capability, the memory nvidia-smi
reports, a source per figure). CPU specs come from data/cpu_families.csv for catalog instances, or from the
command line (`estimate --cpu-*`).
"""

from __future__ import annotations

import csv
import re
from functools import cache
from pathlib import Path
from typing import NamedTuple

from inferstack.errors import input_error

DATA_DIR = Path(__file__).parent / "data"

# Memory a CUDA program sees. vLLM reports 79.18 GiB on an H100 80GB (calibration row m03) whose nvidia-smi
# "Total" is 81559 MiB (gpus.csv): the driver keeps the rest, 0.59 % of the total. Cards with a published
# nvidia-smi reading get that share of it; the others fall back to 0.9897 GiB per datasheet GB (same row).
CUDA_SHARE_OF_NVIDIA_SMI_TOTAL = 79.18 / (81559 / 1024)
VISIBLE_GIB_PER_DATASHEET_GB = 79.18 / 80

# NVIDIA Hopper generation (gpus.csv `gpu` column).
HOPPER_GPUS = frozenset({"H100", "H200", "H20", "H800"})

# One-direction bandwidth of the links between GPUs in one server, GB/s. PCIe: 16 lanes at the
# generation's per-lane rate (PCI-SIG: Gen3 0.985, Gen4 1.969, Gen5 3.938 GB/s per lane). NVLink figures
# in datasheets are totals over both directions, so half of them flows each way.
_PCIE_X16_GBPS = {"3": 15.75, "4": 31.5, "5": 63.0}


def link_bandwidth_gbps(interconnect: str) -> float:
    """One-direction GPU-to-GPU bandwidth from the catalog's interconnect text."""
    nvlink = re.search(r"NVLink\S*\s+(\d+)\s*GB/s", interconnect)
    if nvlink:
        return float(nvlink.group(1)) / 2
    pcie = re.search(r"PCIe Gen(\d)", interconnect)
    return _PCIE_X16_GBPS.get(pcie.group(1), 15.75) if pcie else 15.75


class NodeLink(NamedTuple):
    """The network between two servers of one instance type as NCCL uses it (data/node_links.csv): what a replica
    across servers (pipeline parallel) hands its activations over."""

    transport: str  # efa | gpudirect-tcpx | gpudirect-tcpxo | rdma | erdma | roce | tcp
    gbps: float  # per server, for GPU traffic between servers
    latency_us: float  # one small message between two servers
    placement: str  # the cloud's construct that places the servers close
    source: str
    latency_assumed: bool = False  # no latency published for the type: catalog.ASSUMED_LATENCY_US instead


class GpuSpec(NamedTuple):
    """One accelerator model (a row of gpus.csv)."""

    id: str
    name: str
    memory_gb: float
    memory_bandwidth_gbps: float
    fp16_tflops: float
    int8_tops: float | None
    fp8_tflops: float | None
    link_gbps: float
    source: str
    compute_capability: float  # CUDA compute capability (7.5 = Turing, 8.0 = A100, 9.0 = Hopper)
    nvidia_smi_total_mib: int | None  # nvidia-smi "Total" from a published reading; None: not found

    @property
    def visible_memory_estimated(self) -> bool:
        """True when no nvidia-smi reading backs the memory figure (the datasheet factor stands in)."""
        return self.nvidia_smi_total_mib is None

    @property
    def is_hopper(self) -> bool:
        """Hopper chips reach their datasheet tensor peak only with its warpgroup (wgmma) instructions."""
        return self.name in HOPPER_GPUS

    @property
    def visible_memory_gib(self) -> float:
        """Memory a CUDA program can allocate on one card, GiB."""
        if self.nvidia_smi_total_mib is not None:
            return self.nvidia_smi_total_mib / 1024 * CUDA_SHARE_OF_NVIDIA_SMI_TOTAL
        return self.memory_gb * VISIBLE_GIB_PER_DATASHEET_GB

    def peak_tflops(self, compute: str) -> float:
        """Dense tensor peak for the matmul type; falls back to fp16 where the GPU lacks the type."""
        if compute == "fp8" and self.fp8_tflops:
            return self.fp8_tflops
        if compute == "int8" and self.int8_tops:
            return self.int8_tops
        if compute == "fp32":
            return self.fp16_tflops / 4  # TF32/FP32 paths run at a quarter of the 16-bit tensor peak or less
        return self.fp16_tflops

    def with_memory(self, memory_gb: float) -> GpuSpec:
        """The same chip with another memory size (V100 PCIe 16 vs 32 GB share one spec row); the row's
        nvidia-smi reading belongs to its own size, so the other size falls back to the datasheet factor."""
        if memory_gb == self.memory_gb:
            return self
        return self._replace(memory_gb=memory_gb, nvidia_smi_total_mib=None)


def _number(text: str) -> float | None:
    match = re.match(r"\s*([\d.]+)", text or "")
    return float(match.group(1)) if match else None


@cache
def gpu_specs() -> dict[str, GpuSpec]:
    """All accelerators of gpus.csv, by id."""
    specs = {}
    with (DATA_DIR / "gpus.csv").open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            specs[row["id"]] = GpuSpec(
                id=row["id"],
                name=row["gpu"],
                memory_gb=float(row["vram_gb"]),
                memory_bandwidth_gbps=float(row["mem_bw_gbs"]),
                fp16_tflops=float(row["fp16_bf16_dense_tflops"]),
                int8_tops=_number(row["int8_dense_tops"]),
                fp8_tflops=_number(row["fp8_dense_tflops"]) if row["fp8_support"] == "yes" else None,
                link_gbps=link_bandwidth_gbps(row["interconnect"]),
                source=row["source"],
                compute_capability=float(row["compute_capability"]),
                nvidia_smi_total_mib=int(row["visible_memory_mib"]) if row["visible_memory_mib"] else None,
            )
    return specs


def gpu_spec(gpu_id: str) -> GpuSpec:
    """Look up an accelerator by id (case-insensitive), with an error that lists the known ids."""
    specs = gpu_specs()
    match = next((spec for key, spec in specs.items() if key.lower() == gpu_id.lower()), None)
    if match is None:
        raise input_error(
            "--gpu",
            "is not a known accelerator id",
            value=gpu_id,
            fix=f"use one of: {', '.join(specs)} (see `inferstack gpus`)",
        )
    return match


# Catalog (gpu_model, memory GB) → gpus.csv id. Rows that map to nothing are skipped with a reason.
CATALOG_GPU_IDS: dict[tuple[str, int], str] = {
    ("T4", 16): "T4",
    ("A10G", 24): "A10G",
    ("A10", 24): "A10",
    ("L4", 24): "L4",
    ("L40S", 48): "L40S",
    ("L20", 48): "L20",
    ("V100", 16): "V100-SXM2-16GB",  # Huawei p2v: V100 SXM2 16GB (catalog notes)
    ("V100", 32): "V100-PCIe",  # Huawei p2s: V100 PCIe 32GB (catalog notes); memory taken from the row
    ("A100", 40): "A100-SXM4-40GB",
    ("A100", 80): "A100-SXM4-80GB",
    ("H100", 80): "H100-SXM",
    ("H200", 141): "H200",
}
UNSUPPORTED_ACCELERATORS = {
    "Inferentia2": "AWS Inferentia2 runs the Neuron SDK, not CUDA; the speed model covers NVIDIA GPUs only",
    "A40": "no A40 row in the GPU catalog (gpus.csv): add its datasheet figures to plan on it",
    "RTX PRO 6000": "no RTX PRO 6000 row in the GPU catalog (gpus.csv): add its datasheet figures to plan on it",
    "unnamed-96GB-HBM3": "Alibaba does not name this GPU (96 GB HBM3, H20-class by specs); not assumed",
}


# Dense matmul peak of one core per cycle (a multiply-add counts 2 ops), by ISA and the matmul's data type. fp32
# runs on the vector FMA units: AVX-512 2 units x 16 lanes x 2 = 64; AVX2 2 x 8 x 2 = 32; NEON 32 (the earlier
# prior, unsourced; no Arm family is in cpu_families.csv yet). int8 on AVX-512 uses VNNI (VPDPBUSD: 16 lanes x 4
# u8*s8 multiply-adds per instruction, on the same ports as the fp32 FMA: 4x the fp32 rate; every avx512 family in
# cpu_families.csv is Cascade Lake, Ice Lake or Zen 5, all with AVX512-VNNI); int8 on AVX2 without VNNI takes
# VPMADDUBSW + VPMADDWD + VPADDD for 4x the inputs, i.e. 4/3 of the fp32 rate (nightr.gitbook.io/nnopt "Quant and
# AVX"). AMX (4th/5th-gen Xeon) runs 2048 int8 or 1024 bf16 ops per core per cycle (Intel, as cited by
# en.wikipedia.org/wiki/Advanced_Matrix_Extensions, read 2026-12-01). bf16 without AMX and int8 on NEON are credited
# the fp32 rate: no native unit is claimed without a source. fp16 runs as fp32.
CPU_MATMUL_PEAK_OPS_PER_CYCLE: dict[str, dict[str, float]] = {
    "amx": {"fp32": 64.0, "bf16": 1024.0, "int8": 2048.0},
    "avx512": {"fp32": 64.0, "bf16": 64.0, "int8": 256.0},
    "avx2": {"fp32": 32.0, "bf16": 32.0, "int8": 32.0 * 4 / 3},
    "neon": {"fp32": 32.0, "bf16": 32.0, "int8": 32.0},
}
# Which unit runs the matmul: its efficiency differs (efficiency.CPU_ITEM_MATMUL_UTILIZATION).
_CPU_MATMUL_UNIT = {("amx", "bf16"): "amx", ("amx", "int8"): "amx", ("avx512", "int8"): "vnni"}


class CpuSpec(NamedTuple):
    """What a CPU server offers an inference runtime."""

    cores: int  # physical cores (one runtime thread each)
    memory_bandwidth_gbps: float
    isa: str  # amx | avx512 | avx2 | neon
    ghz: float
    description: str
    numa_nodes: int = 1  # sockets the server spans (memory local to each); 1 where the catalog does not say

    def for_one_of(self, processes: int) -> CpuSpec:
        """One of `processes` llama.cpp processes pinned to their own share of the cores. A process never gets
        more than one NUMA node's memory bandwidth: across sockets its remote reads cross the socket link, and
        measured decode was slower, not faster (llamafile issue #765: 2x Xeon 5218, ~4 tok/s spread over both
        sockets, ~8 tok/s bound to one with numactl; llama.cpp issue #1437), so one process per node uses them."""
        if processes == 1 and self.numa_nodes == 1:
            return self
        node_gbps = self.memory_bandwidth_gbps / self.numa_nodes
        return self._replace(
            cores=max(1, self.cores // processes),
            memory_bandwidth_gbps=min(self.memory_bandwidth_gbps / processes, node_gbps),
            numa_nodes=max(1, self.numa_nodes // processes),
            description=f"{self.description}, 1 of {processes} processes" if processes > 1 else self.description,
        )

    def matmul_peak(self, compute: str) -> tuple[str, float]:
        """(unit, dense ops per second of all cores) for matmuls in `compute` (fp32 | bf16 | int8 | fp16)."""
        kind = compute if compute in ("bf16", "int8") else "fp32"
        unit = _CPU_MATMUL_UNIT.get((self.isa, kind), "vector")
        per_cycle = CPU_MATMUL_PEAK_OPS_PER_CYCLE[self.isa][kind]
        return unit, self.cores * per_cycle * self.ghz * 1e9

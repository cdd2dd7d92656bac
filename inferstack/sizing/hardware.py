"""Accelerator and CPU specs: what one device can hold, read and compute.

GPU specs come from data/gpus.csv (datasheet figures, dense peaks, source per row). CPU specs come from
data/cpu_families.csv for catalog instances, or from the command line (`estimate --cpu-*`).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from inferstack.errors import input_error

DATA_DIR = Path(__file__).parent / "data"

# Memory a CUDA program sees, as a fraction of the datasheet's "GB": vLLM reports 79.18 GiB on an
# H100 80GB (calibration row m03), i.e. 0.9897 GiB per datasheet GB.
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


@dataclass(frozen=True)
class GpuSpec:
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

    @property
    def is_hopper(self) -> bool:
        """Hopper chips reach their datasheet tensor peak only with its warpgroup (wgmma) instructions."""
        return self.name in HOPPER_GPUS

    @property
    def visible_memory_gib(self) -> float:
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
        """The same chip with another memory size (V100 PCIe 16 vs 32 GB share one spec row)."""
        return GpuSpec(
            self.id,
            self.name,
            memory_gb,
            self.memory_bandwidth_gbps,
            self.fp16_tflops,
            self.int8_tops,
            self.fp8_tflops,
            self.link_gbps,
            self.source,
        )


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


@dataclass(frozen=True)
class CpuSpec:
    """What a CPU server offers an inference runtime."""

    cores: int  # physical cores (one runtime thread each)
    memory_bandwidth_gbps: float
    isa: str  # amx | avx512 | avx2 | neon
    ghz: float
    description: str

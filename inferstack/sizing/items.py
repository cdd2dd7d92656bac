"""Memory and speed of a non-LLM server (encoders, vision, diffusion, speech) that handles items in batches.

An item costs a known number of FLOPs (from the architecture for BERT-style encoders, else the registry's
published or derived figure). A batch of b items reads the weights once and computes b items: on GPUs a
roofline with the engine's efficiencies; on CPUs the cores' matmul throughput plus one weight read.

int8 here means weights and activations in int8 (ONNX Runtime / OpenVINO / IPEX quantized models), so its
matmuls run at the int8 peak: VNNI on AVX-512 CPUs, AMX tiles on 4th/5th-gen Xeon, int8 tensor cores on GPUs.
bf16 on an AMX CPU runs on the AMX tiles; everything else on a CPU runs at the fp32 vector peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from inferstack.sizing.efficiency import CPU_ITEM_MATMUL_UTILIZATION, CPU_PROFILES, GPU_PROFILES
from inferstack.sizing.hardware import CpuSpec, GpuSpec
from inferstack.sizing.llm import CPU_OS_RESERVE_FRACTION, CPU_OS_RESERVE_GIB, GIB
from inferstack.sizing.models import ResolvedModel
from inferstack.sizing.precision import FORMATS
from inferstack.spec import Engine, Precision

# Runtime memory before any request: CUDA context + ONNX Runtime arena on GPUs, the runtime on CPUs (prior).
GPU_RUNTIME_GIB, CPU_RUNTIME_GIB = 1.0, 0.5
# Working memory per item in flight (prior): latents, attention maps and the VAE decode of a 1024² image
# dominate diffusion; classifiers and encoders need little beyond their activations.
ACTIVATION_GIB_PER_ITEM = {"image_generation": 3.0, "speech": 0.5, "vision": 0.05, "encoder": 0.02, "llm": 0.02}
FIXED_LATENCY_S = 0.002  # request handling and kernel launches per batch (prior)
# The largest batch a server runs (Triton's max batch size in the plan). Throughput b / batch_latency_s(b) rises
# with b and flattens once compute outweighs the per-batch weight read and FIXED_LATENCY_S; this cap is where
# `estimate --concurrency max` reports saturation when memory allows it.
MAX_BATCH = 64
# Matmul type of the items path by precision (see the module docstring); weight-only formats dequantize to 16 bit.
ITEM_COMPUTE = {Precision.FP32: "fp32", Precision.BF16: "bf16", Precision.INT8: "int8", Precision.FP8: "fp8"}


@dataclass(frozen=True)
class ItemServer:
    model: ResolvedModel
    precision: Precision
    engine: Engine
    gpu: GpuSpec | None = None
    gpus: int = 1
    cpu: CpuSpec | None = None
    ram_gib: float = 0.0
    sequence_tokens: int = 128
    diffusion_steps: int | None = None  # the workload's steps per image (None: the registry's basis)

    @cached_property
    def weights_gib(self) -> float:
        return self.model.params * FORMATS[self.precision].bits_per_weight / 8 / GIB

    @cached_property
    def flops_per_item(self) -> float:
        return self.model.gflops_per_item(self.sequence_tokens, self.diffusion_steps) * 1e9

    @property
    def capacity_gib(self) -> float:
        return self.gpu.visible_memory_gib * self.gpus if self.gpu else self.ram_gib

    @property
    def usable_gib(self) -> float:
        if self.gpu:
            return 0.9 * self.capacity_gib
        return self.ram_gib - max(CPU_OS_RESERVE_GIB, CPU_OS_RESERVE_FRACTION * self.ram_gib)

    def overhead_gib(self, batch: int) -> float:
        runtime = GPU_RUNTIME_GIB * self.gpus if self.gpu else CPU_RUNTIME_GIB
        return runtime + batch * ACTIVATION_GIB_PER_ITEM[self.model.kind]

    def total_gib(self, batch: int) -> float:
        return self.weights_gib + self.overhead_gib(batch)

    def fits(self, batch: int) -> bool:
        return self.total_gib(batch) <= self.usable_gib

    def max_batch(self) -> int:
        """Largest batch that fits in memory, at most MAX_BATCH (0: not even one item fits)."""
        room = self.usable_gib - self.weights_gib - self.overhead_gib(0)
        per_item = ACTIVATION_GIB_PER_ITEM[self.model.kind]
        return max(0, min(MAX_BATCH, int(room / per_item)))

    @property
    def compute_kind(self) -> str:
        return ITEM_COMPUTE.get(self.precision, "fp16")

    def cpu_matmul_ops_per_s(self) -> float:
        """Sustained matmul throughput of the CPU cores at this precision (peak of the unit x its efficiency)."""
        assert self.cpu is not None
        unit, peak = self.cpu.matmul_peak(self.compute_kind)
        return peak * CPU_ITEM_MATMUL_UTILIZATION[unit]

    @cached_property
    def _batch_latencies_s(self) -> dict[int, float]:
        """`batch_latency_s` by batch size: the planner's searches ask for the same few sizes thousands of times."""
        return {}

    def batch_latency_s(self, batch: int) -> float:
        """Seconds to run one batch of `batch` items (data-parallel across the GPUs of one server)."""
        latencies = self._batch_latencies_s
        if batch not in latencies:
            latencies[batch] = self._modelled_batch_latency_s(batch)
        return latencies[batch]

    def _modelled_batch_latency_s(self, batch: int) -> float:
        if self.gpu:
            memory_s, flops_per_s, p = self._gpu_rates
            compute_s = -(-batch // self.gpus) * self.flops_per_item / flops_per_s
            combined: float = (memory_s**p + compute_s**p) ** (1 / p)
            return combined + FIXED_LATENCY_S
        flops_per_s, bytes_per_s = self._cpu_rates
        return batch * self.flops_per_item / flops_per_s + self.weights_gib * GIB / bytes_per_s + FIXED_LATENCY_S

    @cached_property
    def _gpu_rates(self) -> tuple[float, float, float]:
        """(seconds to read the weights, matmul FLOP/s of one GPU, overlap exponent): the server's constants."""
        assert self.gpu is not None
        profile = GPU_PROFILES[self.engine]
        bytes_per_s = self.gpu.memory_bandwidth_gbps * 1e9 * profile.decode_bandwidth_utilization
        memory_s = self.weights_gib * GIB / bytes_per_s
        flops_per_s = self.gpu.peak_tflops(self.compute_kind) * 1e12 * profile.matmul_utilization
        return memory_s, flops_per_s, profile.overlap_exponent

    @cached_property
    def _cpu_rates(self) -> tuple[float, float]:
        """(matmul ops per second, memory bytes per second) of the CPU server: the server's constants."""
        assert self.cpu is not None
        cpu_profile = CPU_PROFILES[self.engine]
        bandwidth_gbps = min(
            cpu_profile.dram_bandwidth_utilization * self.cpu.memory_bandwidth_gbps,
            self.cpu.cores * cpu_profile.bandwidth_per_core_gbps,
        )
        return self.cpu_matmul_ops_per_s(), bandwidth_gbps * 1e9

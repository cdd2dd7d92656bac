"""Memory and speed of a non-LLM server (encoders, vision, diffusion, speech) that handles items in batches.

An item costs a known number of FLOPs (from the architecture for BERT-style encoders, else the registry's
published or derived figure). A batch of b items reads the weights once and computes b items: on GPUs a
roofline with the engine's efficiencies; on CPUs the cores' matmul throughput plus one weight read.

A speech model with a decoder (Whisper: `ResolvedModel.decoder`) works by audio window: a clip of `audio_seconds` is
ceil(audio_seconds / window) windows, decoded as one batch (chunked long-form transcription). A batch of b windows
runs the encoder once over all of them (a roofline of the encoder's weights and b windows' encoder work), then the
decoder's steps one token at a time, as many as the longest window writes: each step reads the decoder's weights
(but the cross-attention key and value projections, which run once a window) and the b windows' cross-attention keys
and values, computes b tokens, and pays the engine's per-layer step overhead
(`EngineProfile.step_overhead_ms_per_layer`, the LLM path's own). The decoder's self-attention cache (a few MB a
window) is left out.

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
    audio_seconds: float | None = None  # a speech decoder's audio per clip (None: one window)
    tokens_per_audio_second: float | None = None  # its text tokens per second of audio (None: the registry's basis)

    @cached_property
    def weights_gib(self) -> float:
        return self.model.params * FORMATS[self.precision].bits_per_weight / 8 / GIB

    @cached_property
    def flops_per_item(self) -> float:
        return self.model.gflops_per_item(self.sequence_tokens, self.diffusion_steps) * 1e9

    @property
    def windows_per_item(self) -> int:
        """Audio windows per clip for a speech model with a decoder; 1 for every other item."""
        decoder = self.model.decoder
        return 1 if decoder is None else decoder.windows(self.audio_seconds)

    @property
    def tokens_per_window(self) -> int:
        """Decoder steps of a batch: the tokens of its longest window (0 without a decoder)."""
        decoder = self.model.decoder
        return 0 if decoder is None else decoder.tokens_per_window(self.audio_seconds, self.tokens_per_audio_second)

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
        if self.model.decoder is not None:
            return self._speech_batch_latency_s(batch)
        if self.gpu:
            memory_s, flops_per_s, p = self._gpu_rates
            compute_s = -(-batch // self.gpus) * self.flops_per_item / flops_per_s
            return _overlapped(memory_s, compute_s, p) + FIXED_LATENCY_S
        flops_per_s, bytes_per_s = self._cpu_rates
        return batch * self.flops_per_item / flops_per_s + self.weights_gib * GIB / bytes_per_s + FIXED_LATENCY_S

    def _speech_batch_latency_s(self, batch: int) -> float:
        """A batch of `batch` windows (module docstring): the encoder once, then the decoder's steps."""
        decoder = self.model.decoder
        assert decoder is not None
        bytes_per_weight = self.weights_gib * GIB / self.model.params
        decoder_bytes = decoder.step_params * bytes_per_weight  # what each step reads
        encoder_bytes = self.weights_gib * GIB - decoder_bytes  # read once a batch: encoder, cross-attention K/V
        # the cross-attention keys and values are activations: 32 bit in an fp32 run, else 16 bit
        cross_bytes = decoder.cross_kv_values * (4 if self.compute_kind == "fp32" else 2)
        encoder_flops, token_flops = decoder.gflops_per_window * 1e9, decoder.gflops_per_token * 1e9
        if self.gpu:
            memory_s, flops_per_s, p = self._gpu_rates
            bytes_per_s = self.weights_gib * GIB / memory_s
            per_gpu = -(-batch // self.gpus)
            encoder_s = _overlapped(encoder_bytes / bytes_per_s, per_gpu * encoder_flops / flops_per_s, p)
            step_s = (_overlapped((decoder_bytes + per_gpu * cross_bytes) / bytes_per_s,
                                  per_gpu * token_flops / flops_per_s, p)
                      + decoder.layers * GPU_PROFILES[self.engine].step_overhead_ms_per_layer / 1e3)
        else:
            flops_per_s, bytes_per_s = self._cpu_rates
            encoder_s = batch * encoder_flops / flops_per_s + encoder_bytes / bytes_per_s
            step_s = batch * token_flops / flops_per_s + (decoder_bytes + batch * cross_bytes) / bytes_per_s
        return encoder_s + self.tokens_per_window * step_s + FIXED_LATENCY_S

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


def _overlapped(memory_s: float, compute_s: float, p: float) -> float:
    """Memory and compute time of one GPU pass, combined as (m^p + c^p)^(1/p) (EngineProfile.overlap_exponent)."""
    combined: float = (memory_s**p + compute_s**p) ** (1 / p)
    return combined

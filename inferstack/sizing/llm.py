"""Memory and speed of one LLM replica: a model at a precision on N GPUs (tensor parallel) or on a CPU server.

Memory follows vLLM's accounting (../shared/notes/sizing.md): the engine takes gpu_memory_utilization of
each GPU; weights, the CUDA context and the activation peak of the profiling pass come off first; what is
left holds the KV cache in 16-token blocks. Speed is a roofline: decode streams the weights and every
sequence's KV cache once per step (bandwidth bound), prefill runs 2·params·tokens FLOPs (compute bound);
tensor parallelism adds two all-reduces per layer. Engine efficiencies live in `efficiency.py`.

A replica may span several servers (`nodes`): tensor parallel over each server's GPUs, pipeline parallel across the
servers, as vLLM serves a model larger than one server (its distributed serving docs: TP inside a node, PP across
nodes, on Ray). The layers are split as vLLM splits them; the largest stage by weights sets the pace (`stage_share`),
the stage with the most layers the KV cache per GPU (`stage_layers_share`). A forward pass goes through every stage in
turn and hands the activations to the next server at each boundary (`hand_over_s`: hidden states and residual, as
vLLM's IntermediateTensors carry them, from every tensor-parallel rank), the sampled tokens coming back to the head;
vLLM keeps one batch in flight per stage (vllm/v1/engine/core.py step_with_batch_queue: a queue of the executor's
max_concurrent_batches, the pipeline's size), so at concurrency c each micro-batch holds c / nodes sequences and a
token takes every stage's step of its micro-batch plus the hand-overs. vLLM 0.12's scheduler does not balance the
micro-batches (it skips sequences in flight; vllm#41682, open): even ones are a bound on the low side. A prompt's
prefill passes the stages as one batch (chunks of other prompts' prefills are not overlapped with it: a bound on the
high side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from inferstack.sizing.architecture import LlmArchitecture
from inferstack.sizing.efficiency import CPU_PROFILES, GPU_PROFILES, CpuProfile, EngineProfile, ServingOverhead
from inferstack.sizing.hardware import CpuSpec, GpuSpec, NodeLink
from inferstack.sizing.precision import FORMATS, kv_bytes_per_element, quantized_share, weight_bytes
from inferstack.spec import Engine, KvCacheDtype, Precision

GIB = 2**30
KV_BLOCK_TOKENS = 16  # vLLM's paged-attention block

# vLLM's non-torch memory per GPU (CUDA context, NCCL buffers): 0.13 GiB at TP1 (calibration row m02),
# 0.55 GiB at TP2 (row m05).
NON_TORCH_GIB = {1: 0.13, 2: 0.55}
# Activation peak of vLLM's profiling pass (one dummy batch at the default batched-token budget), per GPU. It
# follows the vocabulary, not the width, the experts or tensor parallelism: the pass materialises fp32 logits
# for its tokens (8192 tokens x 4 B = 32 KiB per vocabulary entry; the fit gives 37.7 KiB). vLLM 0.11 logs: Llama
# 8B and 70B (vocabulary 128256) 4.76 and 4.84 GiB, Qwen3-32B (151936) 5.64 GiB at TP1 and at TP2, gpt-oss-120b
# (201088, MoE) 7.38 GiB. Fitted by benchmarks/fit.py on every vLLM memory row (a fit that also had a constant and
# a width term put both at zero). This replaces a width term, a TP exponent and a 2x MoE factor fitted on four rows.
ACTIVATION_GIB_PER_VOCAB = 3.60e-5
# CPU servers: the runtime's compute buffers, and what the OS, agents and page cache keep (≥ 2 GiB or 10 %).
CPU_RUNTIME_GIB = 1.0
CPU_OS_RESERVE_GIB, CPU_OS_RESERVE_FRACTION = 2.0, 0.10


class _GpuRates(NamedTuple):
    kv_bytes_per_s: float  # per GPU: each rank reads its own share of the cache
    weight_bytes_per_s: float  # summed over the tensor-parallel group
    flops_per_s: float  # summed over the tensor-parallel group
    overlap_exponent: float
    fixed_s: float  # per forward pass: launches and all-reduce latencies
    allreduce_s_per_token: float  # all-reduce transfer time per token in the pass


@dataclass(frozen=True)
class LlmReplica:
    """One serving replica: a model on `gpus` × `gpu` (tensor parallel) or on a CPU server with `ram_gib`."""

    arch: LlmArchitecture
    precision: Precision
    kv_dtype: KvCacheDtype
    engine: Engine
    gpu: GpuSpec | None = None
    gpus: int = 1
    cpu: CpuSpec | None = None
    ram_gib: float = 0.0
    gpu_memory_utilization: float = 0.9
    # Model processes on the CPU server, each with its own weights and KV cache: one process gets this share of the
    # usable RAM (a GPU process has its own `gpus`, so this does not change GPU memory).
    processes: int = 1
    # Measured over modelled step times for this deployment (sizing/calibration.py); 1.0 where none was measured.
    prefill_time_factor: float = 1.0
    decode_time_factor: float = 1.0
    # Servers the replica spans, one pipeline stage each, and the network between them (GPU replicas only).
    nodes: int = 1
    node_link: NodeLink | None = None

    @cached_property
    def on_gpu(self) -> bool:
        return self.gpu is not None

    @cached_property
    def tensor_parallel(self) -> int:
        return self.gpus if self.on_gpu else 1

    @cached_property
    def pipeline_parallel(self) -> int:
        return self.nodes if self.on_gpu else 1

    @cached_property
    def stage_share(self) -> float:
        """The share of the weights (and of a pass's FLOPs) the largest pipeline stage holds, as vLLM splits the layers
        (`LlmArchitecture.largest_stage_share`); 1.0 without pipeline parallelism. The pipeline runs at its pace."""
        pp = self.pipeline_parallel
        return self.arch.largest_stage_share(pp) if pp > 1 else 1.0

    @cached_property
    def stage_layers_share(self) -> float:
        """The share of the layers the stage with the most holds: its KV cache, launches and all-reduces."""
        pp = self.pipeline_parallel
        return math.ceil(self.arch.layers / pp) / self.arch.layers if pp > 1 else 1.0

    @cached_property
    def gpu_profile(self) -> EngineProfile:
        return GPU_PROFILES[self.engine]

    @cached_property
    def cpu_profile(self) -> CpuProfile:
        return CPU_PROFILES[self.engine]

    @cached_property
    def serving_overhead(self) -> ServingOverhead:
        """The server's own work per request and per token on this device (efficiency.py)."""
        return self.gpu_profile.serving if self.on_gpu else self.cpu_profile.serving

    # ---- memory -------------------------------------------------------------------------------------

    @cached_property
    def weight_bytes(self) -> float:
        return weight_bytes(self.arch, self.precision)

    @property
    def weights_gib_per_device(self) -> float:
        return self.weight_bytes * self.stage_share / self.tensor_parallel / GIB

    @cached_property
    def kv_bytes_per_element(self) -> float:
        return kv_bytes_per_element(self.kv_dtype, self.precision)

    @property
    def kv_bytes_per_token_per_device(self) -> float:
        """Full-attention KV bytes per token on one device (its stage's layers)."""
        return self._kv_bytes_per_layer_token * self.arch.layers * self.stage_layers_share

    @property
    def kv_bytes_per_token(self) -> int:
        """KV bytes per token summed over the replica's GPUs (replicated heads counted)."""
        return round(self._kv_bytes_per_layer_token * self.arch.layers * self.tensor_parallel)

    @cached_property
    def _kv_bytes_per_layer_token(self) -> float:
        return self.arch.kv_elements_per_token_per_layer(self.tensor_parallel) * self.kv_bytes_per_element

    def kv_bytes_per_sequence_per_device(self, sequence_tokens: int) -> float:
        """KV bytes one sequence occupies on one device, in whole blocks, sliding windows capped."""
        blocks = math.ceil(sequence_tokens / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
        return self.arch.kv_cached_tokens(blocks) * self._kv_bytes_per_layer_token * self.stage_layers_share

    @cached_property
    def capacity_gib(self) -> float:
        return self.gpu.visible_memory_gib if self.gpu else self.ram_gib

    @cached_property
    def usable_gib(self) -> float:
        """What one process may use: gpu_memory_utilization of a GPU, or its share of the RAM less the OS reserve."""
        if self.gpu:
            return self.gpu_memory_utilization * self.gpu.visible_memory_gib
        return (self.ram_gib - max(CPU_OS_RESERVE_GIB, CPU_OS_RESERVE_FRACTION * self.ram_gib)) / self.processes

    @cached_property
    def overhead_gib(self) -> float:
        """Per device: CUDA context + activation peak on GPUs; runtime buffers on CPUs."""
        if not self.gpu:
            return CPU_RUNTIME_GIB
        activation = ACTIVATION_GIB_PER_VOCAB * self.arch.vocab_size
        return NON_TORCH_GIB[min(self.tensor_parallel, 2)] + activation

    @cached_property
    def kv_cache_gib(self) -> float:
        """Memory left for the KV cache on one device (negative: the weights do not fit)."""
        return self.usable_gib - self.weights_gib_per_device - self.overhead_gib

    def kv_capacity_tokens(self) -> int:
        """Full-attention tokens the cache holds per replica, in whole blocks."""
        if self.kv_cache_gib <= 0 or self.kv_bytes_per_token_per_device == 0:
            return 0
        tokens = int(self.kv_cache_gib * GIB / self.kv_bytes_per_token_per_device)
        return tokens // KV_BLOCK_TOKENS * KV_BLOCK_TOKENS

    def max_concurrency(self, sequence_tokens: int) -> int:
        """Sequences of `sequence_tokens` that fit in the cache at once."""
        if self.kv_cache_gib <= 0:
            return 0
        per_sequence = self.kv_bytes_per_sequence_per_device(sequence_tokens)
        return int(self.kv_cache_gib * GIB // per_sequence) if per_sequence else 10**6

    # ---- speed --------------------------------------------------------------------------------------

    @cached_property
    def _quantized_weight_only(self) -> bool:
        fmt = FORMATS[self.precision]
        if fmt.compute == "fp8" and self.gpu is not None and self.gpu.fp8_tflops is None:
            return True  # FP8 checkpoints run as weight-only (Marlin) kernels on GPUs without FP8 tensor cores
        return fmt.weight_only

    @cached_property
    def _compute_kind(self) -> str:
        fmt = FORMATS[self.precision]
        if self.precision is Precision.FP32:
            return "fp32"
        if fmt.compute == "fp8" and not self._quantized_weight_only:
            return "fp8"
        return "fp16"

    def weights_read_bytes(self, batch: int) -> float:
        """Weight bytes one forward step streams: all of them, except experts no token was routed to."""
        if not self.arch.is_moe or batch <= 0:
            return self.weight_bytes
        experts, per_token = self.arch.routed_experts, self.arch.experts_per_token
        touched_fraction = 1 - (1 - per_token / experts) ** batch
        expert_bytes = self.arch.routed_expert_params * self.weight_bytes / self.arch.params
        return self.weight_bytes - expert_bytes * (1 - touched_fraction)

    @cached_property
    def _gpu_rates(self) -> _GpuRates:
        """The replica's constant speeds, worked out once: the planner asks for thousands of step times."""
        gpu, profile, tp = self.gpu, self.gpu_profile, self.tensor_parallel
        assert gpu is not None
        bandwidth = gpu.memory_bandwidth_gbps * 1e9 * profile.decode_bandwidth_utilization
        weight_bandwidth = bandwidth
        if self._quantized_weight_only:
            bits = FORMATS[self.precision].bits_per_weight
            weight_bandwidth *= (
                profile.int4_weight_only_bandwidth_factor if bits < 6 else profile.int8_weight_only_bandwidth_factor
            )
        utilization = profile.fp8_matmul_utilization if self._compute_kind == "fp8" else profile.matmul_utilization
        if self._quantized_weight_only:
            utilization *= profile.weight_only_matmul_factor
        hopper = profile.hopper_matmul_fraction if gpu.is_hopper else 1.0
        flops_per_s = gpu.peak_tflops(self._compute_kind) * 1e12 * utilization * hopper * tp
        share = quantized_share(self.arch, self.precision) if self._compute_kind == "fp8" else 1.0
        if share < 1:  # the modules the checkpoint keeps in 16 bit run at the 16-bit rate
            sixteen_bit = gpu.peak_tflops("fp16") * 1e12 * profile.matmul_utilization * hopper * tp
            flops_per_s = 1 / (share / flops_per_s + (1 - share) / sixteen_bit)
        # Two ring all-reduces of the activations per layer across the tensor-parallel group; a pipeline stage runs
        # its own layers' launches and all-reduces.
        layers = self.arch.layers * self.stage_layers_share
        allreduces = 2 * layers if tp > 1 else 0
        return _GpuRates(
            kv_bytes_per_s=bandwidth,
            weight_bytes_per_s=weight_bandwidth * tp,
            flops_per_s=flops_per_s,
            overlap_exponent=profile.overlap_exponent,
            fixed_s=layers * profile.step_overhead_ms_per_layer / 1e3
            + allreduces * profile.allreduce_latency_us / 1e6,
            allreduce_s_per_token=allreduces * 2 * (tp - 1) / tp * self.arch.hidden_size * 2 / (gpu.link_gbps * 1e9),
        )

    def _gpu_seconds(self, flops: float, weight_bytes: float, kv_bytes: float, tokens: int) -> float:
        """One forward pass of `tokens` tokens: through one server, or through every stage of a pipeline in turn
        (each stage's share of the FLOPs and weights, the KV bytes per device already a stage's) with a hand-over
        to the next server at each of the nodes - 1 boundaries."""
        pp = self.pipeline_parallel
        if pp == 1:
            return self._stage_seconds(flops, weight_bytes, kv_bytes, tokens)
        share = self.stage_share
        stage = self._stage_seconds(flops * share, weight_bytes * share, kv_bytes, tokens)
        return pp * stage + self.network_s(tokens)

    def network_s(self, tokens: int) -> float:
        """What one pass of `tokens` tokens spends on the servers' network: nodes - 1 hand-overs of activations, and
        the last stage's sampled tokens back to the head (a message: its latency)."""
        assert self.node_link is not None, "a replica across servers needs their network (NodeLink)"
        return (self.pipeline_parallel - 1) * self.hand_over_s(tokens) + self.node_link.latency_us / 1e6

    def hand_over_s(self, tokens: int) -> float:
        """Seconds to pass `tokens` tokens' activations to the next pipeline stage over the servers' network: the
        link's latency plus hidden states and residual at the activations' precision, from every tensor-parallel rank
        (vLLM's Ray executor binds rank i of one stage to rank i of the next, each passing the whole tensors:
        v1/executor/ray_executor.py _compiled_ray_dag) at the link's bandwidth."""
        link = self.node_link
        assert link is not None, "a replica across servers needs their network (NodeLink)"
        activation_bytes = 4 if self.precision is Precision.FP32 else 2
        size = tokens * 2 * self.arch.hidden_size * activation_bytes * self.tensor_parallel
        return link.latency_us / 1e6 + size * 8 / (link.gbps * 1e9)

    def _stage_seconds(self, flops: float, weight_bytes: float, kv_bytes: float, tokens: int) -> float:
        rates = self._gpu_rates
        memory_s = weight_bytes / rates.weight_bytes_per_s + kv_bytes / rates.kv_bytes_per_s
        compute_s = flops / rates.flops_per_s
        p = rates.overlap_exponent
        combined: float = (memory_s**p + compute_s**p) ** (1 / p)
        return combined + rates.fixed_s + tokens * rates.allreduce_s_per_token

    def _cpu_bandwidth_bytes_per_s(self) -> float:
        cpu, profile = self.cpu, self.cpu_profile
        assert cpu is not None
        return (
            min(
                profile.dram_bandwidth_utilization * cpu.memory_bandwidth_gbps,
                cpu.cores * profile.bandwidth_per_core_gbps,
            )
            * 1e9
        )

    def _cpu_flops_per_s(self) -> float:
        cpu = self.cpu
        assert cpu is not None
        return cpu.cores * self.cpu_profile.matmul_flops_per_cycle[cpu.isa] * cpu.ghz * 1e9

    @cached_property
    def _seconds(self) -> dict[tuple[str, int, int], float]:
        """Step and prefill times by their arguments: 40 % of the planner's calls repeat an earlier one."""
        return {}

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        """Seconds for one served decode step of `batch` sequences at `context_tokens` each (= TPOT): the engine's
        step plus the server's work for each sequence's token."""
        key = ("decode", batch, context_tokens)
        if key not in self._seconds:
            server_s = batch * self.serving_overhead.token_ms / 1e3
            self._seconds[key] = self.decode_time_factor * (self.engine_decode_step_s(batch, context_tokens) + server_s)
        return self._seconds[key]

    def engine_decode_step_s(self, batch: int, context_tokens: int) -> float:
        """The engine's forward pass alone (the roofline), without the server around it."""
        if self.pipeline_parallel > 1:  # one micro-batch per stage in flight: a token waits for its own
            batch = math.ceil(batch / self.pipeline_parallel)
        kv_bytes = batch * self.kv_bytes_per_sequence_per_device(context_tokens)
        flops = batch * self.arch.decode_flops(context_tokens)
        weights = self.weights_read_bytes(batch)
        if self.on_gpu:
            return self._gpu_seconds(flops, weights, kv_bytes, batch)
        return max((weights + kv_bytes) / self._cpu_bandwidth_bytes_per_s(), flops / self._cpu_flops_per_s())

    def prefill_s(self, prompts: int, prompt_tokens: int) -> float:
        """Seconds to serve `prompts` prompts of `prompt_tokens` each up to their first token, prefilled together:
        the engine's prefill plus the server's work for each request."""
        key = ("prefill", prompts, prompt_tokens)
        if key not in self._seconds:
            server_s = prompts * self.serving_overhead.request_ms / 1e3
            self._seconds[key] = self.prefill_time_factor * (self.engine_prefill_s(prompts, prompt_tokens) + server_s)
        return self._seconds[key]

    def engine_prefill_s(self, prompts: int, prompt_tokens: int) -> float:
        """The engine's prefill alone (the roofline), without the server around it."""
        flops = prompts * self.arch.prefill_flops(prompt_tokens)
        weights = self.weights_read_bytes(prompts * prompt_tokens)
        if self.on_gpu:
            return self._gpu_seconds(flops, weights, 0.0, prompts * prompt_tokens)
        return flops / self._cpu_flops_per_s() + weights / self._cpu_bandwidth_bytes_per_s()

    def batch_s(
        self, concurrency: int, prompt_tokens: int, output_tokens: int, context_tokens: int | None = None
    ) -> float:
        """Seconds to serve `concurrency` requests together: their prefill, then every decode step at a mean
        context of `context_tokens` per sequence (default: halfway through an answer of fixed length)."""
        mean_context = prompt_tokens + output_tokens // 2 if context_tokens is None else context_tokens
        return self.prefill_s(concurrency, prompt_tokens) + output_tokens * self.decode_step_s(
            concurrency, mean_context
        )

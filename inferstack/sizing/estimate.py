"""`inferstack estimate`: memory and speed of one configuration (a model on given hardware at a concurrency).

This is the sizing model without the planner: no catalog, no prices, no queueing. The fidelity benchmark
runs it on every calibration row; the planner builds on the same `LlmReplica` and `ItemServer` objects.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from inferstack.errors import input_error
from inferstack.sizing.hardware import CpuSpec, GpuSpec
from inferstack.sizing.items import ItemServer
from inferstack.sizing.latency import token_latency
from inferstack.sizing.llm import GIB, LlmReplica
from inferstack.sizing.models import ResolvedModel
from inferstack.spec import Engine, KvCacheDtype, Precision


class Estimate(BaseModel):
    """Predicted memory and speed of one configuration. Memory figures are per device (GPU, or the CPU host)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    hardware: str
    precision: str
    kv_cache_dtype: str
    engine: str
    concurrency: int
    input_tokens: int
    output_tokens: int
    weights_gib: float
    kv_cache_bytes_per_token: int
    kv_cache_gib: float
    """KV cache needed for `concurrency` sequences of input + output tokens, per device."""
    kv_cache_available_gib: float
    overhead_gib: float
    activation_gib: float
    total_gib: float
    capacity_gib: float | None
    fits: bool | None
    """Whether weights, overhead and the KV cache for `concurrency` fit (None: memory size not given)."""
    max_concurrency: int | None
    kv_cache_capacity_tokens: int | None
    ttft_ms: float
    tpot_ms: float | None
    e2e_latency_ms: float
    output_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    requests_per_s: float
    notes: list[str]


def _hardware_label(gpu: GpuSpec | None, gpus: int, cpu: CpuSpec | None) -> str:
    if gpu is not None:
        return f"{gpus}x {gpu.id}"
    assert cpu is not None
    return f"CPU {cpu.cores} cores, {cpu.memory_bandwidth_gbps:g} GB/s, {cpu.isa}"


def estimate(
    model: ResolvedModel,
    *,
    precision: Precision,
    kv_dtype: KvCacheDtype = KvCacheDtype.AUTO,
    engine: Engine,
    gpu: GpuSpec | None = None,
    gpus: int = 1,
    cpu: CpuSpec | None = None,
    ram_gib: float | None = None,
    concurrency: int | Literal["max"] = 1,
    input_tokens: int = 512,
    output_tokens: int = 128,
    gpu_memory_utilization: float = 0.9,
) -> Estimate:
    """Estimate one configuration. `concurrency="max"` uses the most sequences that fit in memory."""
    if (gpu is None) == (cpu is None):
        raise input_error("hardware", "give either a GPU or a CPU", fix="pass --gpu ID [--gpus N] or --cpu-cores ...")
    if model.arch is not None and model.kind == "llm":
        return _estimate_llm(
            model,
            precision,
            kv_dtype,
            engine,
            gpu,
            gpus,
            cpu,
            ram_gib,
            concurrency,
            input_tokens,
            output_tokens,
            gpu_memory_utilization,
        )
    return _estimate_items(model, precision, engine, gpu, gpus, cpu, ram_gib, concurrency, input_tokens)


def _estimate_llm(
    model: ResolvedModel,
    precision: Precision,
    kv_dtype: KvCacheDtype,
    engine: Engine,
    gpu: GpuSpec | None,
    gpus: int,
    cpu: CpuSpec | None,
    ram_gib: float | None,
    concurrency: int | Literal["max"],
    input_tokens: int,
    output_tokens: int,
    gpu_memory_utilization: float,
) -> Estimate:
    assert model.arch is not None
    replica = LlmReplica(
        arch=model.arch,
        precision=precision,
        kv_dtype=kv_dtype,
        engine=engine,
        gpu=gpu,
        gpus=gpus,
        cpu=cpu,
        ram_gib=ram_gib or 0.0,
        gpu_memory_utilization=gpu_memory_utilization,
    )
    notes: list[str] = []
    sequence = input_tokens + output_tokens
    memory_known = gpu is not None or ram_gib is not None
    max_concurrency = replica.max_concurrency(sequence) if memory_known else None
    if concurrency == "max":
        if not max_concurrency:
            raise input_error(
                "--concurrency",
                "max found no room for even one sequence",
                value="max",
                fix="use a larger GPU, more GPUs, or a lower precision",
            )
        concurrency = max_concurrency
    kv_needed_gib = concurrency * replica.kv_bytes_per_sequence_per_device(sequence) / GIB
    total = replica.weights_gib_per_device + replica.overhead_gib + kv_needed_gib
    fits = (replica.kv_cache_gib >= kv_needed_gib and replica.kv_cache_gib > 0) if memory_known else None
    if fits is False:
        notes.append(f"does not fit: needs {total:.2f} GiB per device, the engine may use {replica.usable_gib:.2f} GiB")
    batch_s = replica.batch_s(concurrency, input_tokens, output_tokens)
    # Continuous batching at a steady `concurrency`: each finished request is replaced by a new one, whose
    # prefill pauses the others' decode.
    latency = token_latency(
        replica,
        concurrency=concurrency,
        prompt_tokens=input_tokens,
        context_tokens=input_tokens + output_tokens // 2,
        other_prefills_per_s=(concurrency - 1) / batch_s,
    )
    ttft_s, tpot_s = latency.ttft_s, latency.tpot_s
    activation = replica.overhead_gib - (0.0 if cpu else _non_torch(replica))
    return Estimate(
        model=model.name,
        hardware=_hardware_label(gpu, gpus, cpu),
        precision=precision.value,
        kv_cache_dtype=kv_dtype.value,
        engine=engine.value,
        concurrency=concurrency,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        weights_gib=replica.weights_gib_per_device,
        kv_cache_bytes_per_token=replica.kv_bytes_per_token,
        kv_cache_gib=kv_needed_gib,
        kv_cache_available_gib=max(replica.kv_cache_gib, 0.0) if memory_known else 0.0,
        overhead_gib=replica.overhead_gib,
        activation_gib=activation,
        total_gib=total,
        capacity_gib=replica.capacity_gib if memory_known else None,
        fits=fits,
        max_concurrency=max_concurrency,
        kv_cache_capacity_tokens=replica.kv_capacity_tokens() if memory_known else None,
        ttft_ms=ttft_s * 1e3,
        tpot_ms=tpot_s * 1e3,
        e2e_latency_ms=latency.e2e_s(output_tokens) * 1e3,
        output_tokens_per_s=concurrency * output_tokens / batch_s,
        prefill_tokens_per_s=input_tokens / replica.prefill_s(1, input_tokens),
        requests_per_s=concurrency / batch_s,
        notes=notes,
    )


def _non_torch(replica: LlmReplica) -> float:
    from inferstack.sizing.llm import NON_TORCH_GIB

    return NON_TORCH_GIB[min(replica.tensor_parallel, 2)]


def _estimate_items(
    model: ResolvedModel,
    precision: Precision,
    engine: Engine,
    gpu: GpuSpec | None,
    gpus: int,
    cpu: CpuSpec | None,
    ram_gib: float | None,
    concurrency: int | Literal["max"],
    input_tokens: int,
) -> Estimate:
    server = ItemServer(
        model=model,
        precision=precision,
        engine=engine,
        gpu=gpu,
        gpus=gpus,
        cpu=cpu,
        ram_gib=ram_gib or 0.0,
        sequence_tokens=input_tokens,
    )
    memory_known = gpu is not None or ram_gib is not None
    batch = server.max_batch() if concurrency == "max" else concurrency
    latency_s = server.batch_latency_s(batch)
    fits = server.fits(batch) if memory_known else None
    return Estimate(
        model=model.name,
        hardware=_hardware_label(gpu, gpus, cpu),
        precision=precision.value,
        kv_cache_dtype="none",
        engine=engine.value,
        concurrency=batch,
        input_tokens=input_tokens,
        output_tokens=0,
        weights_gib=server.weights_gib / (gpus if gpu else 1),
        kv_cache_bytes_per_token=0,
        kv_cache_gib=0.0,
        kv_cache_available_gib=0.0,
        overhead_gib=server.overhead_gib(batch),
        activation_gib=server.overhead_gib(batch),
        total_gib=server.total_gib(batch),
        capacity_gib=server.capacity_gib if memory_known else None,
        fits=fits,
        max_concurrency=server.max_batch() if memory_known else None,
        kv_cache_capacity_tokens=None,
        ttft_ms=latency_s * 1e3,
        tpot_ms=None,
        e2e_latency_ms=latency_s * 1e3,
        output_tokens_per_s=None,
        prefill_tokens_per_s=None,
        requests_per_s=batch / latency_s,
        notes=[
            f"compute per item: {model.gflops_per_item(input_tokens):.1f} GFLOPs"
            f" ({model.gflops_basis or 'from the architecture'})"
        ],
    )

"""`inferstack estimate`: memory and speed of one configuration (a model on given hardware at a concurrency).

This is the sizing model without the planner: no catalog, no prices, no queueing. The fidelity benchmark
runs it on every calibration row; the planner builds on the same `LlmReplica` and `ItemServer` objects.

Encoders (embedding, classifier, reranker models) and other non-LLM models produce no tokens: they take
`output_tokens=0` (the default for them) and report per-item latency and items/s; TTFT, TPOT and the token
rates are None ("n/a"), never an assumed latency. A decoder LLM refuses `output_tokens=0`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from inferstack.errors import input_error
from inferstack.plan import MAX_PROCESSES_PER_SERVER
from inferstack.sizing.calibration import Calibration, CalibrationRow, hardware_key
from inferstack.sizing.hardware import CpuSpec, GpuSpec
from inferstack.sizing.items import MAX_BATCH, ItemServer
from inferstack.sizing.kernels import served_precision
from inferstack.sizing.latency import token_latency
from inferstack.sizing.llm import GIB, LlmReplica
from inferstack.sizing.models import ResolvedModel
from inferstack.spec import Engine, KvCacheDtype, Precision

MAX_GPUS_PER_SERVER = 8  # the largest GPU count of a catalog server: the valid counts listed in errors go up to it


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
    ttft_ms: float | None
    """Time to first token (None for models that produce no tokens)."""
    tpot_ms: float | None
    e2e_latency_ms: float
    output_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    requests_per_s: float
    notes: list[str]
    items_per_s: float | None = None
    """Items (texts, images) per second, for models that process items instead of generating tokens."""
    processes: int = 1
    """Model processes on the server, each with `concurrency` sequences: memory figures are one process's (on a CPU
    its share of the RAM), speeds and rates the whole server's."""


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
    output_tokens: int | None = None,
    gpu_memory_utilization: float = 0.9,
    calibration: Calibration | None = None,
    processes: int = 1,
) -> Estimate:
    """Estimate one configuration. `concurrency="max"` uses the most sequences that fit in memory (LLMs) or the
    saturating batch (other models). `output_tokens` defaults to 128 for LLMs and 0 for other models.
    `processes`: copies of an LLM on the server, each on `gpus / processes` GPUs or its share of the cores, RAM and
    (one NUMA node's at most) memory bandwidth, each running `concurrency` sequences.
    `calibration`: measured speeds that replace the model's for a GPU deployment they match (a CPU server's row
    names its instance type, which an estimate does not have)."""
    if (gpu is None) == (cpu is None):
        raise input_error("hardware", "give either a GPU or a CPU", fix="pass --gpu ID [--gpus N] or --cpu-cores ...")
    if not 0 < gpu_memory_utilization <= 1:
        raise input_error("--gpu-memory-utilization", "is the fraction of GPU memory the engine takes",
                          value=gpu_memory_utilization, fix="use a number in (0, 1], e.g. 0.9 (vLLM's default)")
    output_tokens = _output_tokens(model, output_tokens)
    _check_processes(model, processes, gpu, gpus)
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
            measured=calibration.match(model.name, precision.value, engine.value, hardware_key(gpu.id, gpus, ""))
            if calibration and gpu else None,
            calibration_source=calibration.source if calibration else "",
            processes=processes,
        )
    return _estimate_items(model, precision, engine, gpu, gpus, cpu, ram_gib, concurrency, input_tokens)


def _check_processes(model: ResolvedModel, processes: int, gpu: GpuSpec | None, gpus: int) -> None:
    if not 1 <= processes <= MAX_PROCESSES_PER_SERVER:
        raise input_error("--processes", f"must be 1 to {MAX_PROCESSES_PER_SERVER}", value=processes,
                          fix="give the number of model processes on the server")
    if processes > 1 and not model.is_llm:
        raise input_error("--processes", f"applies to LLMs; {model.name} is a {model.kind} model", value=processes,
                          fix="leave --processes out")
    if gpu is not None and gpus % processes:
        raise input_error("--processes", f"must divide the {gpus} GPUs: each process runs on its own GPUs",
                          value=processes, fix=f"use a divisor of {gpus}, or --gpus a multiple of {processes}")


def _output_tokens(model: ResolvedModel, output_tokens: int | None) -> int:
    """The tokens each request generates: at least 1 for a decoder LLM, none for every other model."""
    if model.is_llm:
        if output_tokens == 0:
            raise input_error(
                "--output-tokens",
                f"must be at least 1 for {model.name}: a decoder LLM generates tokens",
                value="0",
                fix="pass --output-tokens 1 to estimate the prompt alone (TTFT), or more; "
                "0 is for encoder models (embeddings, classifiers, rerankers)",
            )
        return 128 if output_tokens is None else output_tokens
    if output_tokens:
        raise input_error(
            "--output-tokens",
            f"does not apply to {model.name}: {model.kind} models produce no output tokens",
            value=str(output_tokens),
            fix="pass --output-tokens 0 or leave it out",
        )
    return 0


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
    *,
    measured: CalibrationRow | None,
    calibration_source: str,
    processes: int = 1,
) -> Estimate:
    assert model.arch is not None
    server_gpus, gpus = gpus, gpus // processes
    if gpu is not None and (problem := model.arch.tensor_parallel_problem(gpus)):
        sizes = [str(tp) for tp in model.arch.tensor_parallel_sizes(max(MAX_GPUS_PER_SERVER, gpus))]
        raise input_error("--gpus", f"{model.name} cannot be split that way: {problem}", value=gpus,
                          fix=f"use {', '.join(sizes[:-1])} or {sizes[-1]}" if len(sizes) > 1 else "use 1")
    replica = LlmReplica(
        arch=model.arch,
        precision=precision,
        kv_dtype=kv_dtype,
        engine=engine,
        gpu=gpu,
        gpus=gpus,
        cpu=cpu.for_one_of(processes) if cpu else None,
        ram_gib=ram_gib or 0.0,
        processes=processes if cpu else 1,
        gpu_memory_utilization=gpu_memory_utilization,
        prefill_time_factor=measured.ttft_factor if measured else 1.0,
        decode_time_factor=measured.tpot_factor if measured else 1.0,
    )
    notes: list[str] = _kernel_notes(engine, precision, gpu)
    if measured:
        notes.append(measured.sentence(calibration_source))
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
    if processes > 1:
        notes.append(_processes_note(processes, total, replica, gpu is not None, memory_known))
        if cpu and engine is Engine.LLAMACPP and concurrency > 1:
            notes.append("a CPU plan's processes run llama-cpp-python, which serves one request at a time "
                         "(`plan` sizes each as one slot): at --concurrency above 1 these are a batching server's "
                         "rates")
    return Estimate(
        model=model.name,
        hardware=_hardware_label(gpu, server_gpus, cpu),
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
        output_tokens_per_s=processes * concurrency * output_tokens / batch_s,
        prefill_tokens_per_s=input_tokens / replica.prefill_s(1, input_tokens),
        requests_per_s=processes * concurrency / batch_s,
        notes=notes,
        processes=processes,
    )


def _processes_note(processes: int, total_gib: float, replica: LlmReplica, on_gpu: bool, memory_known: bool) -> str:
    """The memory arithmetic of several processes: each holds its own weights and KV cache."""
    if on_gpu:
        return (f"{processes} processes, each on its own {replica.tensor_parallel} GPU(s) with its own weights and "
                f"KV cache; memory figures are per GPU, rates the server's")
    line = (f"{processes} processes, each with its own weights and KV cache: {processes} x {total_gib:.2f} = "
            f"{processes * total_gib:.2f} GiB")
    if memory_known:
        line += f" of the server's {replica.usable_gib * processes:.2f} GiB usable"
    return line + f"; each process on {replica.cpu.cores if replica.cpu else 0} cores; rates are the server's"


def _kernel_notes(engine: Engine, precision: Precision, gpu: GpuSpec | None) -> list[str]:
    """What the engine would really run on this GPU (engine_kernels.csv): bf16 as fp16 before Ampere, or nothing."""
    if gpu is None:
        return []
    served = served_precision(engine, precision, gpu)
    if isinstance(served, str):
        return [f"a plan would not use this: {served}"]
    return [served.note] if served.note else []


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
    notes = [
        f"compute per item: {model.gflops_per_item(input_tokens):.1f} GFLOPs"
        f" ({model.gflops_basis or 'from the architecture'}), run as {server.compute_kind}"
    ]
    batch = _saturating_batch(server, memory_known, notes) if concurrency == "max" else concurrency
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
        ttft_ms=None,
        tpot_ms=None,
        e2e_latency_ms=latency_s * 1e3,
        output_tokens_per_s=None,
        prefill_tokens_per_s=None,
        requests_per_s=batch / latency_s,
        notes=notes,
        items_per_s=batch / latency_s,
    )


def _saturating_batch(server: ItemServer, memory_known: bool, notes: list[str]) -> int:
    """`--concurrency max` for item models: the largest batch that fits in memory, at most MAX_BATCH (where
    throughput has flattened); MAX_BATCH when the memory size is not given."""
    if not memory_known:
        notes.append(f"concurrency max: batch {MAX_BATCH} (the batch cap; memory size not given, not checked)")
        return MAX_BATCH
    batch = server.max_batch()
    if batch < 1:
        raise input_error(
            "--concurrency",
            "max found no room for even one item",
            value="max",
            fix="use more memory (--ram-gib, a larger GPU) or a lower precision",
        )
    notes.append(f"concurrency max: batch {batch} (largest that fits in memory, at most {MAX_BATCH})")
    return batch

"""The conditions of every row of calibration.csv, as arguments to `inferstack.sizing.estimate`.

Each case restates what the row's source measured (model, hardware, precision, engine, batch, tokens) and
which estimate figure corresponds to the measured metric. Engines map as: FasterTransformer and
TensorRT-LLM → trtllm; gpt-fast → vllm (both decode with CUDA graphs; vLLM has no latency row here);
llama.cpp → llamacpp; vLLM → vllm. "LLaMA-7B" rows use the llama-2-7b shapes (same architecture).
TensorRT-LLM "fp8" rows quantize the KV cache to fp8 too (as TensorRT-LLM's fp8 performance runs do).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferstack.sizing.estimate import Estimate, estimate
from inferstack.sizing.hardware import CpuSpec, gpu_spec
from inferstack.sizing.models import lookup
from inferstack.spec import Engine, KvCacheDtype, Precision

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION_PATHS = (
    ROOT.parent / "shared" / "benchmarks" / "calibration.csv",
    ROOT / "tests" / "data" / "calibration.csv",
)

# Xeon w9-3475X at the fixed 2.2 GHz of llama.cpp PR #7487: 8 threads used; 8 channels of DDR5-4800
# per socket (Intel ARK) = 307.2 GB/s; AMX.
W9_3475X_8_THREADS = CpuSpec(
    cores=8, memory_bandwidth_gbps=307.2, isa="amx", ghz=2.2, description="w9-3475X, 8 threads"
)


@dataclass(frozen=True)
class Case:
    family: str  # memory | prefill | decode | throughput | encoder
    model: str
    precision: str
    engine: str
    predict: Callable[[Estimate], float]
    gpu: str | None = None
    gpus: int = 1
    cpu: CpuSpec | None = None
    kv_dtype: str = "auto"
    concurrency: int = 1
    input_tokens: int = 512
    output_tokens: int = 128
    gpu_memory_utilization: float = 0.9
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def hardware(self) -> str:
        """The device, without thread counts: rows on one machine form one group for held-out scoring."""
        if self.gpu:
            return self.gpu
        assert self.cpu is not None
        return self.cpu.description.split(",")[0]

    @property
    def group(self) -> str:
        """model × hardware: what leave-one-group-out scoring holds out together."""
        return f"{self.model} @ {self.hardware}"


def ttft(e: Estimate) -> float:
    return e.ttft_ms


def tpot(e: Estimate) -> float:
    assert e.tpot_ms is not None
    return e.tpot_ms


def decode_rate(e: Estimate) -> float:
    assert e.tpot_ms is not None
    return 1000.0 / e.tpot_ms


def throughput(e: Estimate) -> float:
    assert e.output_tokens_per_s is not None
    return e.output_tokens_per_s


def throughput_per_gpu(gpus: int) -> Callable[[Estimate], float]:
    return lambda e: throughput(e) / gpus


def prefill_rate(e: Estimate) -> float:
    assert e.prefill_tokens_per_s is not None
    return e.prefill_tokens_per_s


A100_40, A100_80, H100, L40S = "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM", "L40S"

CASES: dict[str, Case] = {
    # kipply / FasterTransformer, GPT-style 13B on A100-40GB
    "g01": Case("prefill", "gpt-13b", "fp16", "trtllm", ttft, gpu=A100_40, input_tokens=512, output_tokens=10),
    "g02": Case("decode", "gpt-13b", "fp16", "trtllm", tpot, gpu=A100_40, input_tokens=512, output_tokens=10),
    "g03": Case("prefill", "gpt-13b", "fp16", "trtllm", ttft, gpu=A100_40, gpus=2, input_tokens=512, output_tokens=10),
    "g04": Case("decode", "gpt-13b", "fp16", "trtllm", tpot, gpu=A100_40, gpus=2, input_tokens=512, output_tokens=10),
    # TensorRT-LLM performance tables (static batches: prefill + every decode step)
    "g05": Case(
        "throughput",
        "llama-2-7b",
        "fp16",
        "trtllm",
        throughput,
        gpu=A100_80,
        concurrency=384,
        input_tokens=128,
        output_tokens=128,
    ),
    "g06": Case(
        "throughput",
        "llama-2-7b",
        "fp16",
        "trtllm",
        throughput,
        gpu=A100_80,
        concurrency=60,
        input_tokens=128,
        output_tokens=2048,
    ),
    "g07": Case(
        "throughput",
        "llama-2-7b",
        "fp16",
        "trtllm",
        throughput,
        gpu=A100_80,
        concurrency=52,
        input_tokens=2048,
        output_tokens=128,
    ),
    "g08": Case(
        "throughput",
        "llama-2-7b",
        "fp8",
        "trtllm",
        throughput,
        gpu=H100,
        kv_dtype="fp8",
        concurrency=768,
        input_tokens=128,
        output_tokens=128,
    ),
    "g09": Case(
        "throughput",
        "llama-2-70b",
        "fp8",
        "trtllm",
        throughput_per_gpu(2),
        gpu=H100,
        gpus=2,
        kv_dtype="fp8",
        concurrency=1024,
        input_tokens=128,
        output_tokens=128,
    ),
    "g10": Case(
        "throughput",
        "llama-2-7b",
        "fp8",
        "trtllm",
        throughput,
        gpu=L40S,
        kv_dtype="fp8",
        concurrency=64,
        input_tokens=128,
        output_tokens=128,
    ),
    "g11": Case(
        "throughput",
        "llama-2-7b",
        "fp8",
        "trtllm",
        throughput,
        gpu=L40S,
        kv_dtype="fp8",
        concurrency=32,
        input_tokens=2048,
        output_tokens=128,
    ),
    "g12": Case("prefill", "llama-2-7b", "fp16", "trtllm", ttft, gpu=A100_80, input_tokens=128, output_tokens=1),
    "g13": Case("prefill", "llama-2-7b", "fp16", "trtllm", ttft, gpu=A100_80, input_tokens=2048, output_tokens=1),
    "g14": Case(
        "prefill", "llama-2-7b", "fp8", "trtllm", ttft, gpu=H100, kv_dtype="fp8", input_tokens=2048, output_tokens=1
    ),
    "g15": Case(
        "prefill", "llama-2-7b", "fp8", "trtllm", ttft, gpu=L40S, kv_dtype="fp8", input_tokens=2048, output_tokens=1
    ),
    "g16": Case(
        "prefill", "llama-2-70b", "fp16", "trtllm", ttft, gpu=A100_80, gpus=4, input_tokens=2048, output_tokens=1
    ),
    "g17": Case(
        "prefill",
        "llama-2-70b",
        "fp8",
        "trtllm",
        ttft,
        gpu=H100,
        gpus=4,
        kv_dtype="fp8",
        input_tokens=2048,
        output_tokens=1,
    ),
    "g18": Case(
        "throughput",
        "llama-2-7b",
        "fp16",
        "trtllm",
        throughput,
        gpu=A100_80,
        concurrency=256,
        input_tokens=128,
        output_tokens=128,
    ),
    # gpt-fast, batch 1, 5-token prompt, ~200 generated tokens
    "g38": Case("decode", "llama-2-7b", "bf16", "vllm", decode_rate, gpu=A100_80, input_tokens=5, output_tokens=200),
    "g39": Case("decode", "llama-2-7b", "int8", "vllm", decode_rate, gpu=A100_80, input_tokens=5, output_tokens=200),
    "g40": Case(
        "decode", "llama-2-7b", "int4-gptq", "vllm", decode_rate, gpu=A100_80, input_tokens=5, output_tokens=200
    ),
    "g41": Case("decode", "llama-2-70b", "int8", "vllm", decode_rate, gpu=A100_80, input_tokens=5, output_tokens=200),
    "g42": Case(
        "decode", "llama-2-70b", "bf16", "vllm", decode_rate, gpu=A100_80, gpus=8, input_tokens=5, output_tokens=200
    ),
    "g43": Case(
        "decode", "llama-2-7b", "bf16", "vllm", decode_rate, gpu=A100_80, gpus=8, input_tokens=5, output_tokens=200
    ),
    # vLLM 0.11 memory accounting on an H100 80GB (gpu_memory_utilization 0.9)
    "m01": Case("memory", "llama-3.1-8b", "bf16", "vllm", lambda e: e.weights_gib, gpu="H100-SXM"),
    "m02": Case("memory", "llama-3.1-8b", "bf16", "vllm", lambda e: e.activation_gib, gpu="H100-SXM"),
    "m03": Case("memory", "llama-3.1-8b", "bf16", "vllm", lambda e: e.kv_cache_available_gib, gpu="H100-SXM"),
    "m04": Case("memory", "qwen3-32b", "bf16", "vllm", lambda e: e.weights_gib, gpu="H100-SXM"),
    "m05": Case("memory", "llama-3.3-70b", "fp8", "vllm", lambda e: e.weights_gib, gpu="H100-SXM", gpus=2),
    "m06": Case("memory", "gpt-oss-120b", "mxfp4", "vllm", lambda e: e.weights_gib, gpu="H100-SXM"),
    "m07": Case(
        "memory", "mistral-small-3.2-24b", "bf16", "vllm", lambda e: float(e.kv_cache_bytes_per_token), gpu="H100-SXM"
    ),
    # llama.cpp on CPU (PR #7487)
    "c03": Case(
        "decode",
        "llama-2-7b",
        "q4_0",
        "llamacpp",
        decode_rate,
        cpu=W9_3475X_8_THREADS,
        input_tokens=1,
        output_tokens=128,
    ),
    "c04": Case(
        "prefill",
        "llama-2-7b",
        "q4_0",
        "llamacpp",
        prefill_rate,
        cpu=W9_3475X_8_THREADS,
        input_tokens=512,
        output_tokens=1,
    ),
}


def calibration_rows() -> list[dict[str, str]]:
    """The rows of calibration.csv (from ../shared/benchmarks, else the copy in tests/data), then the public rows
    this project added (calibration_public.csv)."""
    path = next(p for p in CALIBRATION_PATHS if p.is_file())
    return _read_csv(path) + _read_csv(PUBLIC_CALIBRATION_PATH)


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def engine_label(row: dict[str, str], case: Case) -> str:
    """The engine that measured the row, as fidelity reports it (gpt-fast rows are scored with vLLM's profile)."""
    if "gpt-fast" in row["engine"]:
        return "gpt-fast (vllm profile)"
    device = "cpu" if case.cpu else "gpu"
    return f"{case.engine} {device}"


# ---- Public rows added for issue 13 ("Sizing you can trust") -------------------------------------------------
# benchmarks/calibration_public.csv: llama.cpp on data-centre GPUs (XiongjieDai/GPU-Benchmarks-on-LLM-Inference),
# more gpt-fast batch-1 rows (tensor parallel, int4/int8, Mixtral MoE), the other thread counts of llama.cpp PR
# #7487, the rest of llm-d's vLLM 0.11 memory log table, and vLLM 0.10 serving runs (dennislee22/vLLM-benchmarking:
# N requests of 1024 tokens in and out sent at once, restated as concurrency N, whose output tokens/s `estimate`
# computes the same way: the N prefills, then the N sequences decoding together). Each row carries its source,
# commit and date, and the columns case_* that restate it as `estimate` arguments (case_hardware: a gpus.csv id,
# or cpu:<key> below; batch_or_concurrency: the requests in flight).

PUBLIC_CALIBRATION_PATH = ROOT / "benchmarks" / "calibration_public.csv"

# Looked at and left out (2026-12-01), each for a condition its source does not state: argonne-lcf/LLM-Inference-Bench
# (vLLM/TensorRT-LLM/llama.cpp static batches on "Nvidia A100/H100 GPU": SXM or PCIe, 40 or 80 GB not stated);
# LambdaLabsML/vllm-benchmark and gpustack's throughput pages (ShareGPT bursts of 500-1000 requests: how many ran at
# once is not stated); MLPerf LLM Offline results (per-sample lengths of the dataset, not restated here); the TP2
# runs of dennislee22/vLLM-benchmarking (GPUs without P2P, interconnect not stated) and its runs that queue for KV
# space; sariekr/gpu_conc (a client that saturates before the server).

PUBLIC_CPUS = {
    "cpu:w9-3475x-4t": CpuSpec(
        cores=4, memory_bandwidth_gbps=307.2, isa="amx", ghz=2.2, description="w9-3475X, 4 threads"
    ),
    "cpu:w9-3475x-16t": CpuSpec(
        cores=16, memory_bandwidth_gbps=307.2, isa="amx", ghz=2.2, description="w9-3475X, 16 threads"
    ),
}

PREDICTORS: dict[str, Callable[[Estimate], float]] = {
    "ttft": ttft,
    "tpot": tpot,
    "decode_rate": decode_rate,
    "throughput": throughput,
    "prefill_rate": prefill_rate,
    "weights_gib": lambda e: e.weights_gib,
    "activation_gib": lambda e: e.activation_gib,
    "kv_available_gib": lambda e: e.kv_cache_available_gib,
}
_PREFILL_METRICS = ("prefill_rate", "ttft")


def _public_case(row: dict[str, str]) -> Case:
    predict = row["case_predict"]
    if row["category"] == "memory":
        family = "memory"
    elif predict in _PREFILL_METRICS:
        family = "prefill"
    else:
        family = "decode" if predict in ("decode_rate", "tpot") else "throughput"
    hardware = row["case_hardware"]
    gpus = int(row["hw_count"])
    # llama-bench's tgN generates N tokens after an empty prompt (one token stands in for it); ppN prefills N.
    input_tokens = int(row["input_tokens"]) if row["input_tokens"].isdigit() else 512
    output_tokens = int(row["output_tokens"]) if row["output_tokens"].isdigit() else 128
    if row["output_tokens"] == "~200":  # gpt-fast: 5-token prompt, ~200 generated
        output_tokens = 200
    # vLLM serving rows: N requests in flight together (benchmark_serving's burst or --max-concurrency N)
    concurrency = int(row["batch_or_concurrency"]) if row["batch_or_concurrency"].isdigit() else 1
    return Case(
        family,
        row["case_model"],
        row["case_precision"],
        row["case_engine"],
        PREDICTORS[predict],
        gpu=None if hardware.startswith("cpu:") else hardware,
        gpus=1 if hardware.startswith("cpu:") else gpus,
        cpu=PUBLIC_CPUS.get(hardware),
        concurrency=concurrency,
        input_tokens=max(input_tokens, 1),
        output_tokens=max(output_tokens, 1),
        gpu_memory_utilization=float(row["case_gpu_memory_utilization"] or 0.9),
    )


CASES.update({row["id"]: _public_case(row) for row in _read_csv(PUBLIC_CALIBRATION_PATH)})


# ---- Encoders on CPU: int8 BERT-Large, MLPerf Inference datacenter bert-99, Offline ---------------------------
# These rows are kept here, not in ../shared/benchmarks/calibration.csv (read-only to this project): each states
# its measured value and source. Intel's closed-division submissions (PyTorch with Intel's int8 kernels; mapped to
# the onnxruntime engine, whose CPU speed model is the items path: the matmul unit's peak x its efficiency).
# Model: BERT-Large (24 layers, d 1024) on SQuAD v1.1, max 384 tokens; Intel's SUT sorts samples by their
# real length (40-384) and runs them unpadded (closed/Intel/code/bert-99/pytorch-cpu/csrc/bert_qsl.hpp, v3.0),
# so a sample costs its real length: 177 tokens on average = 384 x (1 - 0.54), padding being 54 % of SQuAD-v1.1
# input tokens at max length 384 (openreview.net/forum?id=3nzKUh9a4M, "Boosting distributed training
# performance of the unpadded BERT model", abstract; it does not say which split). Clock: the processor's base
# frequency, the clock every core holds under all-core AVX-512/AMX load (8380 "@ 2.30GHz" from the submission's
# own system description; 8480+ 2.0 GHz and 8592+ 1.9 GHz as Intel ARK lists them, read through secondary copies
# in code-index files 62682279668 and 11549600324). Memory: 8 DDR5-4800 (SPR) / DDR5-5600 (EMR) / DDR4-3200
# (ICX, stated) channels per socket, 2 sockets; the speed of the SPR/EMR DIMMs is not stated (ASSUMED max).
# Batch: 64 (items.MAX_BATCH, what `--concurrency max` reports; Offline runs at saturation).
# Role: e02 fits CPU_ITEM_MATMUL_UTILIZATION["amx"]; e01 (VNNI, prior not fitted), e03 and e04 are held out.


def items_rate(e: Estimate) -> float:
    assert e.items_per_s is not None
    return e.items_per_s


@dataclass(frozen=True)
class EncoderRow:
    case: Case
    measured: float  # samples per second
    role: str  # fit | held-out
    source: str


def _mlperf_bert_large(cores: int, isa: str, ghz: float, socket_gbps: float, name: str) -> Case:
    cpu = CpuSpec(cores=cores, memory_bandwidth_gbps=2 * socket_gbps, isa=isa, ghz=ghz, description=name)
    return Case(
        "encoder", "bert-large", "int8", "onnxruntime", items_rate, cpu=cpu, concurrency=64, input_tokens=177,
        output_tokens=0,
    )


ICX_8380 = _mlperf_bert_large(80, "avx512", 2.3, 204.8, "2x Xeon Platinum 8380 (Ice Lake, 40 cores each)")
SPR_8480 = _mlperf_bert_large(112, "amx", 2.0, 307.2, "2x Xeon Platinum 8480+ (Sapphire Rapids, 56 cores each)")
EMR_8592 = _mlperf_bert_large(128, "amx", 1.9, 358.4, "2x Xeon Platinum 8592+ (Emerald Rapids, 64 cores each)")
_MLPERF = "github.com/mlcommons/inference_results_{}/closed/Intel/results/{}/bert-99/{}/performance/run_1/" \
    "mlperf_log_summary.txt 'Samples per second' (system: closed/Intel/systems/{}.json)"

ENCODER_ROWS: dict[str, EncoderRow] = {
    "e01": EncoderRow(
        ICX_8380, 289.498, "held-out",
        _MLPERF.format("v1.1", "1-node-2S-ICX-PyTorch-INT8", "offline", "1-node-2S-ICX-PyTorch-INT8")
        + "; MLPerf Inference v1.1, published 2021-09",
    ),
    "e02": EncoderRow(
        SPR_8480, 1382.79, "fit",
        _MLPERF.format("v3.0", "1-node-2S-SPR-PyTorch-INT8", "Offline", "1-node-2S-SPR-PyTorch-INT8")
        + "; MLPerf Inference v3.0, published 2023-04",
    ),
    "e03": EncoderRow(
        SPR_8480, 1357.33, "held-out",
        _MLPERF.format("v3.1", "1-node-2S-SPR-PyTorch-INT8", "Offline", "1-node-2S-SPR-PyTorch-INT8")
        + "; MLPerf Inference v3.1, published 2023-09 (same hardware as e02, later software: weak hold-out)",
    ),
    "e04": EncoderRow(
        EMR_8592, 1668.5, "held-out",
        _MLPERF.format("v4.0", "1-node-2S-EMR-PyTorch", "Offline", "1-node-2S-EMR-PyTorch")
        + "; MLPerf Inference v4.0, published 2024-03",
    ),
}


# ---- Item models on GPUs under Triton: an upper bound, not a calibration ------------------------------------------
# MLPerf Inference v1.1 (published 2021-09), NVIDIA's closed-division single-GPU "TRT_Triton" systems: Triton 21.07
# serving TensorRT 8.0.1 int8 engines (BERT-Large with NVIDIA's variable-sequence-length kernels, so a sample costs
# its real length as in the Intel rows above; ResNet-50 at 224x224), Offline scenario. inferstack deploys Triton
# with the ONNX Runtime backend (bootstrap/files/boot.sh), whose GPU profile (efficiency.ONNXRUNTIME) is a prior;
# TensorRT's hand-tuned int8 engines are the fastest that GPU runs these models, so the rows are a bound: the
# onnxruntime profile must not predict more items/s than TensorRT measured. They fit nothing. The A30 rows of the
# same round are left out (no A30 in gpus.csv).
_MLPERF_TRITON = "github.com/mlcommons/inference_results_v1.1/closed/NVIDIA/results/{}/{}/Offline/performance/run_1/" \
    "mlperf_log_summary.txt 'Samples per second' (system: closed/NVIDIA/systems/{}.json); MLPerf Inference v1.1, " \
    "published 2021-09"
_TRITON_SYSTEMS = {  # gpus.csv id -> (MLPerf system, bert-99 samples/s, resnet50 samples/s)
    "A100-PCIe-80GB": ("A100-PCIe-80GBx1_TRT_Triton", 3246.43, 36911.2),
    "A100-PCIe-40GB": ("A100-PCIex1_TRT_Triton", 2836.93, 32148.4),
    "A10": ("A10x1_TRT_Triton", 1121.46, 13817.6),
    "A100-SXM4-80GB": ("DGX-A100_A100-SXM-80GBx1_TRT_Triton", 3596.25, 39761.0),
}


def _triton_bound_rows() -> dict[str, EncoderRow]:
    rows = {}
    for index, (gpu, (system, bert, resnet)) in enumerate(_TRITON_SYSTEMS.items()):
        bert_case = Case("encoder", "bert-large", "int8", "onnxruntime", items_rate, gpu=gpu, concurrency=64,
                         input_tokens=177, output_tokens=0)
        resnet_case = Case("encoder", "resnet-50", "int8", "onnxruntime", items_rate, gpu=gpu, concurrency=64,
                           input_tokens=1, output_tokens=0)
        rows[f"t{2 * index + 1:02d}"] = EncoderRow(
            bert_case, bert, "bound", _MLPERF_TRITON.format(system, "bert-99", system)
        )
        rows[f"t{2 * index + 2:02d}"] = EncoderRow(
            resnet_case, resnet, "bound", _MLPERF_TRITON.format(system, "resnet50", system)
        )
    return rows


ENCODER_ROWS.update(_triton_bound_rows())


def run_case(row_id: str) -> float:
    """The model's figure for a calibration row, by its id."""
    return predict(CASES[row_id])


def predict(case: Case) -> float:
    result = estimate(
        lookup(case.model),
        precision=Precision(case.precision),
        kv_dtype=KvCacheDtype(case.kv_dtype),
        engine=Engine(case.engine),
        gpu=gpu_spec(case.gpu) if case.gpu else None,
        gpus=case.gpus,
        cpu=case.cpu,
        concurrency=case.concurrency,
        input_tokens=case.input_tokens,
        output_tokens=case.output_tokens,
        gpu_memory_utilization=case.gpu_memory_utilization,
    )
    return case.predict(result)

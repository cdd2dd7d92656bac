"""How close each engine gets to the hardware's peaks: the calibrated constants of the speed model.

Every number here is either fitted on ../shared/benchmarks/calibration.csv by `benchmarks/fit.py`
(the rows it was fitted on are named) or, where no measured row exists, taken from the ranges in
../shared/notes/sizing.md and marked "prior". `benchmarks/fidelity.py` reports how well they predict
every calibration row.
"""

from __future__ import annotations

from typing import NamedTuple

from inferstack.spec import Engine


class ServingOverhead(NamedTuple):
    """The server's own work around the engine's forward passes, serial with them: HTTP and JSON, the tokenizer,
    the sampler, the detokenizer, one streamed chunk per token, and the Python around them. A floor under the
    roofline that matters for tiny models (microseconds of forward pass) and vanishes beside a big model's step."""

    request_ms: float  # per request: parse it, tokenize the prompt, open the stream (lands in TTFT)
    token_ms: float  # per generated token of each sequence: sample, detokenize, send its chunk (lands in TPOT)
    source: str


# Not measured apart from the engine: the constant stays out of the model rather than guessed.
NOT_MEASURED = ServingOverhead(0.0, 0.0, "not measured separately")


class EngineProfile(NamedTuple):
    """Efficiency of one engine on GPUs (or CPUs, for llama.cpp and ONNX Runtime)."""

    name: str
    decode_bandwidth_utilization: float  # MBU streaming 16-bit weights and the KV cache
    int8_weight_only_bandwidth_factor: float  # dequantising kernels reach less than the byte ratio
    int4_weight_only_bandwidth_factor: float
    matmul_utilization: float  # MFU of 16-bit tensor-core matmuls (prefill, large-batch decode)
    fp8_matmul_utilization: float
    step_overhead_ms_per_layer: float  # launch and scheduling cost per layer and decode step
    allreduce_latency_us: float  # fixed cost of one tensor-parallel all-reduce
    overlap_exponent: float  # memory and compute time combine as (m^p + c^p)^(1/p): p=1 adds, large p overlaps
    provenance: str
    # Matmuls on weight-only quantized weights (GGUF, AWQ, GPTQ) dequantize on the fly: a fraction of the MFU.
    weight_only_matmul_factor: float = 1.0
    # Kernels built on Ampere-generation mma instructions reach this fraction of a Hopper GPU's datasheet peak
    # (which needs wgmma): 1.0 for engines whose kernels use wgmma.
    hopper_matmul_fraction: float = 1.0
    serving: ServingOverhead = NOT_MEASURED


# Fitted on the FasterTransformer / TensorRT-LLM rows g01–g18 (prefill, decode, static-batch throughput) and p89
# (trtllm-serve 1.2, Qwen3-8B on an H100 SXM at 4 concurrent requests).
TRTLLM = EngineProfile(
    name="trtllm",
    decode_bandwidth_utilization=0.85,  # at the fit's upper bound (sizing.md: measured MBU 0.4–0.8)
    int8_weight_only_bandwidth_factor=0.81,  # no TensorRT-LLM weight-only row: the vLLM (gpt-fast) fit
    int4_weight_only_bandwidth_factor=0.59,
    matmul_utilization=0.729,
    fp8_matmul_utilization=0.455,
    step_overhead_ms_per_layer=0.048,
    allreduce_latency_us=26.7,
    overlap_exponent=1.21,
    provenance="fitted on calibration rows g01-g18 (FasterTransformer, TensorRT-LLM) and p89 by benchmarks/fit.py",
)

# vLLM decodes with CUDA graphs like gpt-fast: its decode constants are fitted on the dense gpt-fast rows
# (g38–g43, p23–p29: batch 1, bf16/int8/int4, TP 1–8), vLLM row p75 (Llama-3.1-8B on an A100 40GB at concurrency
# 1) and the vLLM serving rows p76–p88 (Qwen2-7B and Qwen2.5-32B on an A100 80GB, 1 to 200 requests in flight,
# 1024 in / 1024 out; Qwen3-8B on an H100 SXM at 1 to 8 concurrent ShareGPT requests). Its matmul efficiency is
# the TensorRT-LLM fit scaled by 0.9 (prior: vLLM's prefill kernels trail TensorRT-LLM's; no vLLM row isolates
# prefill).
VLLM = EngineProfile(
    name="vllm",
    decode_bandwidth_utilization=0.784,
    int8_weight_only_bandwidth_factor=0.83,
    int4_weight_only_bandwidth_factor=0.61,
    matmul_utilization=0.66,  # 0.9 x the TensorRT-LLM fit (prior)
    fp8_matmul_utilization=0.42,  # 0.9 x the TensorRT-LLM fit (prior)
    step_overhead_ms_per_layer=0.030,
    allreduce_latency_us=16.8,
    overlap_exponent=1.24,  # the TensorRT-LLM fit on g01-g18 (vLLM's batch-1 rows cannot constrain it)
    provenance="decode fitted on the dense gpt-fast rows g38-g43, p23-p29 (proxy: both decode with CUDA graphs), "
    "vLLM row p75 and the vLLM serving rows p76-p88 by benchmarks/fit.py; matmul efficiency prior (0.9 x trtllm)",
    # vLLM's per-step CPU work (scheduler, input preparation, sampler, output processing) is in the serving rows
    # p76-p88 that step_overhead_ms_per_layer was fitted on, so a separate floor would count it twice on them. What
    # it is on a model too small for that per-layer term to hold it is not measured: vLLM's RFC #6854
    # (2024-07-26, vLLM 0.5, Llama 3 8B on an H100) saw 4-13 ms of GPU idle per decode step, but V1 (vLLM >= 0.8,
    # we pin 0.12) moved detokenization and streaming to another process and no V1 figure was found.
    serving=ServingOverhead(0.0, 0.0, "not measured separately: in the fitted per-layer step overhead on the "
                            "serving rows p76-p88; no vLLM 0.12 measurement on a tiny model (vLLM RFC #6854 "
                            "measured 4-13 ms per step on vLLM 0.5)"),
)

# Hugging Face transformers, eager PyTorch: no CUDA graphs, Python per layer (prior: low end of the
# 0.4–0.8 MBU range in sizing.md; no calibration row).
HF = EngineProfile(
    name="hf",
    decode_bandwidth_utilization=0.45,
    int8_weight_only_bandwidth_factor=0.5,
    int4_weight_only_bandwidth_factor=0.4,
    matmul_utilization=0.45,
    fp8_matmul_utilization=0.3,
    step_overhead_ms_per_layer=0.25,
    allreduce_latency_us=60.0,
    overlap_exponent=1.0,
    provenance="prior (sizing.md ranges); uncalibrated",
)

# llama.cpp with CUDA, fitted on the llama-bench rows p01–p22, p53–p74 (Llama 3 8B/70B, F16 and Q4_K_M, tg and pp
# at 512 and 4096 tokens on L40S, A100 PCIe/SXM and H100 PCIe). Its quantized (MMQ) prompt matmuls reach 0.83 of
# the F16 (cuBLAS) rate; its mma.sync kernels reach 0.58 of a Hopper's datasheet peak; every token pays ~0.13 ms
# per layer of graph launch (no CUDA graphs in May 2024). Q8 weights have no row (int8 factor prior).
LLAMACPP_GPU = EngineProfile(
    name="llamacpp",
    decode_bandwidth_utilization=0.766,
    int8_weight_only_bandwidth_factor=0.85,
    int4_weight_only_bandwidth_factor=1.0,  # at the fit's bound: Q4_K_M streams as fast per byte as F16
    matmul_utilization=0.357,
    fp8_matmul_utilization=0.357,  # no FP8 GGUF path: the 16-bit figure
    step_overhead_ms_per_layer=0.129,
    allreduce_latency_us=60.0,
    overlap_exponent=1.0,
    provenance="fitted on llama-bench rows p01-p22, p53-p74 by benchmarks/fit.py; int8 factor prior",
    weight_only_matmul_factor=0.83,
    hopper_matmul_fraction=0.58,
    # GPU servers run llama.cpp's own llama-server (C++, container), not llama-cpp-python: its per-token work is
    # not measured apart from the llama-bench rows above.
    serving=ServingOverhead(0.0, 0.0, "not measured separately (llama-server, C++)"),
)

# ONNX Runtime (and Triton's ONNX Runtime backend) for encoders, vision, diffusion and speech (prior).
ONNXRUNTIME = EngineProfile(
    name="onnxruntime",
    decode_bandwidth_utilization=0.6,
    int8_weight_only_bandwidth_factor=0.8,
    int4_weight_only_bandwidth_factor=0.7,
    matmul_utilization=0.40,
    fp8_matmul_utilization=0.30,
    step_overhead_ms_per_layer=0.05,
    allreduce_latency_us=60.0,
    overlap_exponent=1.0,
    provenance="prior (sizing.md: MFU 0.4-0.67 for good kernels); uncalibrated",
)

GPU_PROFILES: dict[Engine, EngineProfile] = {
    Engine.TRTLLM: TRTLLM,
    Engine.VLLM: VLLM,
    Engine.HF: HF,
    Engine.LLAMACPP: LLAMACPP_GPU,
    Engine.ONNXRUNTIME: ONNXRUNTIME,
}


class CpuProfile(NamedTuple):
    """Efficiency of a CPU engine."""

    name: str
    dram_bandwidth_utilization: float  # η of sizing.md: decode saturates DRAM at 0.5–0.6 of peak
    bandwidth_per_core_gbps: float  # one core cannot pull the whole socket: decode scales with threads first
    matmul_flops_per_cycle: dict[str, float]  # effective FLOPs per core per cycle by ISA
    provenance: str
    serving: ServingOverhead = NOT_MEASURED


# llama-cpp-python 0.3.16's OpenAI server (llamacpp_server.py), the CPU server the bootstrap deploys natively (CPU
# plans with several processes, or install_mode native): one sequence at a time, Python around every token. The
# default CPU server is llama.cpp's own llama-server in a container (bootstrap/runtimes.py), which does this work in
# C++ and is not measured apart: for it these figures are an upper bound.
# Measured by benchmarks/server_overhead.py on 2026-12-01 21:05-21:07 UTC on
# this project's build VM (2 vCPUs, Xeon Sapphire Rapids KVM guest, shared with other jobs: load average 2.6 to 4.3),
# streaming whole-word answers of the boot test's tiny llama (text_only), whose forward pass the speed model puts at
# 0.06 ms: e.g. 6.03 ms end to end at 1 token and 120.23 ms at 64. Medians of six runs of 30 requests per cell: per
# token 1.7 ms (runs 1.54-2.06), per request 5.0 ms (4.1-8.5). Client and server shared the 2 vCPUs, so these are
# upper bounds for a dedicated server. The server re-detokenizes the whole answer at every token
# (llama_cpp/llama.py, Llama._create_completion), so the per-token cost grows slowly with the answer's length: not
# modelled. Upstream reports agree in kind: llama-cpp-python issue #1039 (streaming slower than plain completion,
# 2023-12-22) and oobabooga issue #2788 (63.35 against llama.cpp's 58.96 ms per token over 1000 tokens, 2023-06-21).
LLAMA_CPP_PYTHON_SERVING = ServingOverhead(
    request_ms=5.0,
    token_ms=1.7,
    source="measured by benchmarks/server_overhead.py, 2026-12-01 (llama-cpp-python 0.3.16, 2 shared vCPUs)",
)

# llama.cpp on CPU, fitted on rows c03/c04 and p37–p39 (Llama-2-7B Q4_0, Xeon w9-3475X at a fixed 2.2 GHz, 4, 8
# and 16 threads): decode scales with threads at ~6.2 GB/s per core (tg128 12.32 tok/s on 8 threads = 46.8 GB/s),
# prompt processing at ~32.5 FLOP/cycle/core (pp512 42.74 tok/s on 8 threads = 576 GFLOP/s). AVX-512 is taken
# equal to AMX (the AMX kernel's gain is small, ollama PR #9203); AVX2 at half (half the vector width); NEON at
# half (prior). η from sizing.md.
LLAMACPP_CPU = CpuProfile(
    name="llamacpp",
    dram_bandwidth_utilization=0.55,
    bandwidth_per_core_gbps=6.21,
    matmul_flops_per_cycle={"amx": 32.5, "avx512": 32.5, "avx2": 16.25, "neon": 16.25},
    provenance="fitted on calibration rows c03, c04, p37-p39 (4, 8 and 16 threads); ISA ratios prior",
    serving=LLAMA_CPP_PYTHON_SERVING,
)

# ONNX Runtime on CPU, for LLM estimates only (item models use CPU_ITEM_MATMUL_UTILIZATION below): the fp32
# vector FMA peak per core and cycle (AVX-512: 2 FMA units x 16 lanes x 2 = 64; AVX2 and NEON: 32) at an
# assumed 60 % efficiency (prior; no calibration row).
ONNXRUNTIME_CPU = CpuProfile(
    name="onnxruntime",
    dram_bandwidth_utilization=0.6,
    bandwidth_per_core_gbps=8.0,
    matmul_flops_per_cycle={"amx": 38.4, "avx512": 38.4, "avx2": 19.2, "neon": 19.2},
    provenance="prior (fp32 vector peak x 0.6); uncalibrated",
)

# Encoders, vision and other item models on CPU (ONNX Runtime, OpenVINO, IPEX: all run oneDNN GEMMs): the
# fraction of the matmul unit's dense peak (hardware.CPU_MATMUL_PEAK_OPS_PER_CYCLE) they sustain, by unit.
# vector (fp32 FMA): 0.6, prior (uncalibrated; the value the fp32 path always used). vnni (AVX-512 int8): 0.6,
# the same prior, not fitted; calibration row e01 (MLPerf bert-99 on Ice Lake) is held out to test it.
# amx (int8/bf16 tiles): fitted on row e02 only (MLPerf v3.0 bert-99 Offline, 2x Xeon 8480+: 1382.79 samples/s,
# see benchmarks/calibration_cases.py); rows e03 and e04 are held out. bf16 has no row: it takes the int8 fit.
# The rows use each CPU's base clock; the catalog (cpu_families.csv) gives the sustained all-core turbo, which
# AMX/AVX-512-heavy work may not hold: on a catalog instance the amx figure can be optimistic by the ratio of the
# two clocks (c7i: 3.2 GHz all-core; AWS publishes no base clock for its 8488C; not measured).
CPU_ITEM_MATMUL_UTILIZATION: dict[str, float] = {"vector": 0.6, "vnni": 0.6, "amx": 0.354}
CPU_ITEM_MATMUL_PROVENANCE: dict[str, str] = {
    "vector": "prior (fp32 vector peak x 0.6); uncalibrated",
    "vnni": "prior (int8 VNNI peak x 0.6); uncalibrated, one held-out MLPerf row (e01) within 13 %",
    "amx": "fitted on MLPerf bert-99 int8 row e02; held-out rows e03, e04 within 11 %",
}

CPU_PROFILES: dict[Engine, CpuProfile] = {
    Engine.LLAMACPP: LLAMACPP_CPU,
    Engine.ONNXRUNTIME: ONNXRUNTIME_CPU,
}

"""How many bytes a weight and a cached token take at each precision, and what engines call them.

Bits per weight follow ../shared/notes/sizing.md: GPTQ/AWQ with 128-wide groups ≈ 4.25 (scales and zeros
included), GGUF block formats carry their own scales (Q4_0 4.5, Q4_K_M ≈ 4.85, Q5_K_M ≈ 5.7, Q8_0 8.5).
AWQ/GPTQ/FP8/INT8 checkpoints keep embeddings and the output head in 16 bit; GGUF files quantize
everything at the file's average rate; MXFP4 (gpt-oss) quantizes only the routed experts.
"""

from __future__ import annotations

import csv
from functools import cache
from typing import NamedTuple

from inferstack.sizing.architecture import LlmArchitecture
from inferstack.sizing.hardware import DATA_DIR
from inferstack.spec import KvCacheDtype, Precision


class PrecisionFormat(NamedTuple):
    bits_per_weight: float
    scope: str  # "all": every weight; "linear": transformer blocks only; "experts": routed experts only
    compute: str  # which tensor-core peak runs the matmuls: fp16, fp8, int8, fp32
    weight_only: bool  # weights are dequantized to 16 bit before the matmul (slower than the byte ratio)
    engine_flag: str | None  # vLLM --quantization value (None: plain dtype)
    artifact_format: str


FORMATS: dict[Precision, PrecisionFormat] = {
    Precision.FP32: PrecisionFormat(32, "all", "fp32", False, None, "safetensors"),
    Precision.FP16: PrecisionFormat(16, "all", "fp16", False, None, "safetensors"),
    Precision.BF16: PrecisionFormat(16, "all", "fp16", False, None, "safetensors"),
    Precision.FP8: PrecisionFormat(8, "linear", "fp8", False, "fp8", "safetensors"),
    Precision.INT8: PrecisionFormat(8, "linear", "fp16", True, "compressed-tensors", "safetensors"),
    Precision.INT4_AWQ: PrecisionFormat(4.25, "linear", "fp16", True, "awq", "safetensors"),
    Precision.INT4_GPTQ: PrecisionFormat(4.25, "linear", "fp16", True, "gptq", "safetensors"),
    Precision.MXFP4: PrecisionFormat(4.25, "experts", "fp16", True, "mxfp4", "safetensors"),
    Precision.Q4_0: PrecisionFormat(4.5, "all", "fp16", True, "gguf", "gguf"),
    Precision.Q4_K_M: PrecisionFormat(4.85, "all", "fp16", True, "gguf", "gguf"),
    Precision.Q5_K_M: PrecisionFormat(5.7, "all", "fp16", True, "gguf", "gguf"),
    Precision.Q8_0: PrecisionFormat(8.5, "all", "fp16", True, "gguf", "gguf"),
}

KV_BYTES: dict[KvCacheDtype, float] = {
    KvCacheDtype.FP32: 4.0,
    KvCacheDtype.FP16: 2.0,
    KvCacheDtype.BF16: 2.0,
    KvCacheDtype.FP8: 1.0,
    KvCacheDtype.Q8_0: 34 / 32,  # 32 int8 values + one fp16 scale per block
    KvCacheDtype.Q4_0: 18 / 32,  # 32 4-bit values + one fp16 scale per block
}


def weight_bytes(arch: LlmArchitecture, precision: Precision) -> float:
    """Bytes of all weights at `precision` (16-bit where the format leaves tensors unquantized, and where the
    published checkpoint at that precision keeps modules in 16 bit: `LlmArchitecture.kept_16bit`)."""
    fmt = FORMATS[precision]
    if fmt.scope == "all":
        return arch.params * fmt.bits_per_weight / 8
    quantized = quantized_params(arch, precision)
    return quantized * fmt.bits_per_weight / 8 + (arch.params - quantized) * 2.0


def quantized_params(arch: LlmArchitecture, precision: Precision) -> int:
    """The parameters `precision` stores quantized: the routed experts (MXFP4), or the blocks' linear layers less
    the modules the published checkpoint keeps in 16 bit (FP8, INT8, AWQ, GPTQ); GGUF formats: all."""
    fmt = FORMATS[precision]
    if fmt.scope == "all":
        return arch.params
    if fmt.scope == "experts":
        return arch.routed_expert_params
    return arch.params - arch.embedding_params - arch.linear_params_kept(precision.value)


def quantized_share(arch: LlmArchitecture, precision: Precision) -> float:
    """The share of the blocks' linear work the quantized format carries (1.0 unless the checkpoint keeps modules
    in 16 bit): the rest runs at the 16-bit rate."""
    if FORMATS[precision].scope != "linear":
        return 1.0
    blocks = arch.params - arch.embedding_params
    return quantized_params(arch, precision) / blocks if blocks else 1.0


def kv_bytes_per_element(kv_dtype: KvCacheDtype, precision: Precision) -> float:
    """`auto` caches in the activation type: fp32 for fp32 models, else 16 bit."""
    if kv_dtype is KvCacheDtype.AUTO:
        return 4.0 if precision is Precision.FP32 else 2.0
    return KV_BYTES[kv_dtype]


UNQUANTIZED = (Precision.FP32, Precision.FP16, Precision.BF16)


class AccuracyFinding(NamedTuple):
    """One row of data/precision_accuracy.csv: what a published study found a precision costs in accuracy."""

    precision: Precision
    scheme: str
    finding: str
    lossless: bool
    source: str
    source_date: str


@cache
def accuracy_findings() -> dict[Precision, AccuracyFinding]:
    """The sourced accuracy findings, by precision (a precision without a row has none in inferstack's sources)."""
    with (DATA_DIR / "precision_accuracy.csv").open(newline="", encoding="utf-8") as f:
        rows = [AccuracyFinding(Precision(r["precision"]), r["scheme"], r["finding"], r["lossless"] == "yes",
                                r["source"], r["source_date"]) for r in csv.DictReader(f)]
    return {row.precision: row for row in rows}


def lossless_precisions() -> tuple[Precision, ...]:
    """The quantized precisions a source finds lossless: what `precision: auto` may choose besides the default."""
    return tuple(p for p, finding in accuracy_findings().items() if finding.lossless)


def accuracy_sentence(precision: Precision) -> str:
    """The known accuracy cost of serving `precision`, with its source, or that inferstack's sources have none."""
    if precision in UNQUANTIZED:
        return f"{precision.value} is unquantized: no accuracy cost"
    finding = accuracy_findings().get(precision)
    if finding is None:
        return (f"{precision.value}: no accuracy figure in inferstack's sources (sizing/data/precision_accuracy.csv); "
                "evaluate it on your own tasks before production")
    return f"{precision.value} ({finding.scheme}): {finding.finding} ({finding.source}, {finding.source_date})"

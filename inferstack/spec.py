"""The workload spec: what the user wants to serve, how much, how fast, and where.

Pure pydantic; no Pulumi. Load it with `load_workload(path)` (YAML or JSON) or build `WorkloadSpec(...)`
directly. Every field documents itself; validation errors quote that documentation as the fix.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from inferstack.errors import InputError, Problem

Cloud = Literal["aws", "gcp", "alibaba", "huawei"]
CLOUDS: tuple[Cloud, ...] = ("aws", "gcp", "alibaba", "huawei")
Stage = Literal["validation", "internal", "production"]
ModelKind = Literal["llm", "encoder", "vision", "image_generation", "speech"]
Device = Literal["auto", "cpu", "gpu"]


class Precision(str, Enum):
    """Weight precision. GGUF types (q*) are llama.cpp formats; int4 is AWQ or GPTQ with 128-wide groups."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4_AWQ = "int4-awq"
    INT4_GPTQ = "int4-gptq"
    MXFP4 = "mxfp4"
    Q4_0 = "q4_0"
    Q4_K_M = "q4_k_m"
    Q5_K_M = "q5_k_m"
    Q8_0 = "q8_0"

    @property
    def is_gguf(self) -> bool:
        return self.value.startswith("q")


class KvCacheDtype(str, Enum):
    """KV-cache element type. `auto` follows the model's activation type (16-bit)."""

    AUTO = "auto"
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    Q8_0 = "q8_0"
    Q4_0 = "q4_0"


class Engine(str, Enum):
    """Inference engine whose efficiency the speed model uses. `auto` picks per device and model kind."""

    AUTO = "auto"
    VLLM = "vllm"
    TRTLLM = "trtllm"
    LLAMACPP = "llamacpp"
    HF = "hf"
    ONNXRUNTIME = "onnxruntime"


_PRECISION_ALIASES = {
    "int4": "int4-awq",
    "awq": "int4-awq",
    "gptq": "int4-gptq",
    "int4_awq": "int4-awq",
    "int4_gptq": "int4-gptq",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
}


def _normalise_enum_text(value: Any) -> Any:
    """Accept `Q4_K_M`, `gguf-q4_k_m`, `int4`, `bfloat16` and similar spellings."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower().removeprefix("gguf-").removeprefix("gguf_")
    return _PRECISION_ALIASES.get(text, text)


PrecisionField = Annotated[Precision, BeforeValidator(_normalise_enum_text)]
KvCacheDtypeField = Annotated[KvCacheDtype, BeforeValidator(_normalise_enum_text)]
EngineField = Annotated[Engine, BeforeValidator(_normalise_enum_text)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenCount(_Strict):
    """A token count per request: the mean, and optionally the 95th percentile."""

    mean: int = Field(gt=0, description="Mean tokens per request (a positive integer).")
    p95: int | None = Field(
        default=None,
        gt=0,
        description="95th-percentile tokens per request; defaults to the mean. Must be at least the mean.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_number(cls, value: Any) -> Any:
        return {"mean": value} if isinstance(value, int | float) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _p95_not_below_mean(self) -> TokenCount:
        if self.p95 is not None and self.p95 < self.mean:
            raise ValueError(f"p95 ({self.p95}) is below the mean ({self.mean}); give p95 >= mean")
        return self

    @property
    def high(self) -> int:
        """The p95 if given, else the mean."""
        return self.p95 or self.mean


class ModelSpec(_Strict):
    """A model that is not in the built-in registry, or a registry model with a display name.

    Give exactly one of: `registry` (a built-in name), `config` (path to a Hugging Face config.json),
    `architecture` (the same keys inline), or `kind` with `params_m` and `gflops_per_request` (non-LLM models).
    """

    name: str | None = Field(
        default=None, description="Display name; also names the model's folder in the model bucket."
    )
    registry: str | None = Field(default=None, description="A built-in model name, as listed by `inferstack models`.")
    config: Path | None = Field(
        default=None, description="Path to a Hugging Face config.json (relative to the workload file)."
    )
    architecture: dict[str, Any] | None = Field(
        default=None, description="Hugging Face config.json keys given inline (num_hidden_layers, hidden_size, ...)."
    )
    kind: ModelKind | None = Field(
        default=None, description="For models given by size only: encoder, vision, image_generation or speech."
    )
    params_m: float | None = Field(
        default=None, gt=0, description="Parameter count in millions (models given by size only)."
    )
    gflops_per_request: float | None = Field(
        default=None, gt=0, description="Compute per request in GFLOPs (models given by size only)."
    )
    source_uri: str | None = Field(
        default=None, description="Where the weights come from (for example a Hugging Face repo id); informational."
    )

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ModelSpec:
        given = [k for k in ("registry", "config", "architecture", "kind") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of registry, config, architecture, or kind (+ params_m, gflops_per_request); "
                f"got {given or 'none'}"
            )
        if self.kind is not None:
            if self.kind == "llm":
                raise ValueError("an LLM needs its architecture: use config or architecture, not kind=llm")
            if self.params_m is None or self.gflops_per_request is None:
                raise ValueError(f"kind={self.kind} needs both params_m and gflops_per_request")
        return self


class Traffic(_Strict):
    """How much load the service must carry at peak."""

    requests_per_s: float | None = Field(
        default=None, ge=0, description="Mean request rate in requests per second (before the peak factor)."
    )
    concurrent_users: int | None = Field(
        default=None, ge=1, description="Requests in flight at the same moment (each user has one request streaming)."
    )
    prompt_tokens: TokenCount = Field(
        default=TokenCount(mean=512),
        description="Input tokens per request (for encoders: the sequence length). A number or {mean, p95}.",
    )
    output_tokens: TokenCount = Field(
        default=TokenCount(mean=256), description="Generated tokens per request (LLMs). A number or {mean, p95}."
    )
    context_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Longest sequence (prompt + output) the server must accept; defaults to p95 prompt + p95 output.",
    )
    mode: Literal["interactive", "batch"] = Field(
        default="interactive",
        description="interactive: a person waits for each answer; batch: only throughput matters.",
    )
    peak_factor: float = Field(
        default=1.0, ge=1.0, description="Peak load over mean load (1.0 = the figures above are already the peak)."
    )
    items_per_request: int = Field(
        default=1, ge=1, description="Images, sequences or audio clips per request (non-LLM models)."
    )

    @model_validator(mode="after")
    def _load_given(self) -> Traffic:
        if self.requests_per_s is None and self.concurrent_users is None and self.mode == "interactive":
            raise ValueError("give requests_per_s or concurrent_users (or both) for an interactive workload")
        if self.requests_per_s == 0 and not self.concurrent_users:
            raise ValueError("requests_per_s is 0: give the expected peak request rate (> 0)")
        return self

    @property
    def max_sequence_tokens(self) -> int:
        return self.context_tokens or (self.prompt_tokens.high + self.output_tokens.high)


class Slo(_Strict):
    """Latency and throughput targets. Unset targets fall back to the defaults named in the plan."""

    ttft_p95_ms: float | None = Field(
        default=None, gt=0, description="95th-percentile time to first token, in milliseconds (LLMs)."
    )
    tpot_p95_ms: float | None = Field(
        default=None, gt=0, description="95th-percentile time per output token after the first, in milliseconds (LLMs)."
    )
    latency_p95_ms: float | None = Field(
        default=None,
        gt=0,
        description="95th-percentile end-to-end latency per request, in milliseconds (non-LLM models).",
    )
    min_output_tokens_per_s: float | None = Field(
        default=None, gt=0, description="Minimum sustained output tokens per second over the whole deployment (LLMs)."
    )
    min_requests_per_s: float | None = Field(
        default=None, gt=0, description="Minimum sustained requests (items) per second over the whole deployment."
    )


class Placement(_Strict):
    """Where the deployment may run and what it may cost."""

    clouds: list[Cloud] = Field(
        default_factory=lambda: list(CLOUDS), min_length=1, description="Clouds to consider: aws, gcp, alibaba, huawei."
    )
    regions: dict[Cloud, list[str]] = Field(
        default_factory=dict,
        description="Allowed regions per cloud, e.g. {aws: [us-east-1]}; default: the catalog's region for each cloud.",
    )
    device: Device = Field(
        default="auto", description="cpu or gpu to force a device class; auto lets cost and SLOs decide."
    )
    gpus_allow: list[str] = Field(
        default_factory=list,
        description="Only these accelerators (ids from `inferstack gpus`, or family names like L4, A100, H100).",
    )
    gpus_deny: list[str] = Field(
        default_factory=list, description="Never these accelerators (same names as gpus_allow)."
    )
    monthly_budget: float | None = Field(
        default=None, gt=0, description="Largest acceptable monthly cost, in `currency`."
    )
    spot: bool = Field(
        default=False, description="Allow spot/preemptible capacity (validation and batch workloads only)."
    )
    currency: str = Field(
        default="USD",
        pattern=r"^[A-Z]{3}$",
        description="ISO 4217 currency for ranking and reporting (USD, EUR, CNY ...).",
    )


class WorkloadSpec(_Strict):
    """An inference workload: the model, its precision, the traffic, the targets and the placement."""

    name: str = Field(
        default="workload",
        pattern=r"^[a-z0-9][a-z0-9-]{0,39}$",
        description="Short lowercase name (letters, digits, dashes; at most 40); names the cloud resources.",
    )
    model: str | ModelSpec = Field(
        description="A built-in model name (see `inferstack models`) or a model description."
    )
    precision: PrecisionField | None = Field(
        default=None,
        description="Weight precision: fp32, fp16, bf16, fp8, int8, int4-awq, int4-gptq, q4_0, q4_k_m, q5_k_m, q8_0.",
    )
    kv_cache_dtype: KvCacheDtypeField = Field(
        default=KvCacheDtype.AUTO, description="KV-cache element type: auto, fp16, bf16, fp8, q8_0, q4_0."
    )
    engine: EngineField = Field(
        default=Engine.AUTO, description="Inference engine: auto, vllm, trtllm, llamacpp, hf, onnxruntime."
    )
    traffic: Traffic = Field(description="The load at peak: request rate and/or concurrency, token counts.")
    slo: Slo = Field(default=Slo(), description="Latency and throughput targets.")
    stage: Stage = Field(
        default="internal",
        description="validation (smallest that works), internal (headroom), production (>= 2 replicas in 2 zones).",
    )
    placement: Placement = Field(
        default=Placement(), description="Allowed clouds, regions, accelerators, budget and currency."
    )

    @property
    def model_name(self) -> str:
        if isinstance(self.model, str):
            return self.model
        return self.model.name or self.model.registry or (self.model.config.stem if self.model.config else "custom")


# Why a field may be wrong, keyed by the last element of its path: the fix quoted in errors.
def _field_docs() -> dict[str, str]:
    docs: dict[str, str] = {}
    for model in (TokenCount, ModelSpec, Traffic, Slo, Placement, WorkloadSpec):
        for name, field in model.model_fields.items():
            if field.description:
                docs.setdefault(name, field.description)
    return docs


_FIELD_DOCS = _field_docs()


def problems_from_validation(error: ValidationError, prefix: str = "") -> list[Problem]:
    """Turn pydantic's errors into Problems that name the field, the value and the fix."""
    problems = []
    for item in error.errors(include_url=False):
        path = [str(p) for p in item["loc"] if not str(p).startswith(("function-", "literal[", "is-instance["))]
        path = [p for p in path if p not in ("str", "ModelSpec", "int", "float", "TokenCount")]
        field = ".".join([prefix, *path] if prefix else path) or (prefix or "workload")
        message = str(item["msg"]).removeprefix("Value error, ")
        fix = next((_FIELD_DOCS[p] for p in reversed(path) if p in _FIELD_DOCS), None)
        if item["type"] == "extra_forbidden":
            message = "is not a known field"
            fix = "remove it or check its spelling against the documented fields"
        problems.append(Problem(field, message, value=item.get("input"), fix=fix))
    return problems


def parse_workload(data: Any, *, source: str | None = None, base_dir: Path | None = None) -> WorkloadSpec:
    """Validate plain data (from YAML, JSON or Pulumi config) into a WorkloadSpec, or raise InputError."""
    if not isinstance(data, dict):
        raise InputError(
            [
                Problem(
                    "workload",
                    "must be a mapping of fields",
                    value=data,
                    fix="start from a file in examples/workloads/",
                )
            ],
            source=source,
        )
    try:
        spec = WorkloadSpec.model_validate(data)
    except ValidationError as error:
        raise InputError(problems_from_validation(error), source=source) from None
    if base_dir is not None and isinstance(spec.model, ModelSpec) and spec.model.config is not None:
        resolved = spec.model.config if spec.model.config.is_absolute() else base_dir / spec.model.config
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"config": resolved})})
    return spec


def parse_document(text: str, *, suffix: str, source: str, field: str = "WORKLOAD") -> Any:
    """YAML or JSON text (chosen by the file suffix) as plain data, or an InputError naming `field` and `source`."""
    import yaml  # imported here: YAML is only needed for files

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available
    try:
        return json.loads(text) if suffix == ".json" else yaml.load(text, Loader=loader)
    except (ValueError, yaml.YAMLError) as error:
        first_line = str(error).splitlines()[0]
        raise InputError(
            [
                Problem(
                    "WORKLOAD", f"cannot be parsed: {first_line}", value=source, fix="check the file's JSON/YAML syntax"
                )
            ]
        ) from None


def load_workload(path: str | Path) -> WorkloadSpec:
    """Read a workload file (.yaml, .yml or .json)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(
            [
                Problem(
                    "WORKLOAD",
                    "file not found",
                    value=str(path),
                    fix="pass a path to a workload file, e.g. examples/workloads/chat-8b-public.yaml",
                )
            ]
        )
    data = parse_document(path.read_text(encoding="utf-8"), suffix=path.suffix, source=str(path))
    return parse_workload(data, source=str(path), base_dir=path.parent)

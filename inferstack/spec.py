"""The workload spec: what the user wants to serve, how much, how fast, and where.

Pure pydantic; no Pulumi. Load it with `load_workload(path)` (YAML or JSON) or build `WorkloadSpec(...)`
directly. Every field documents itself; validation errors quote that documentation as the fix.
"""

from __future__ import annotations

import difflib
import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.documents import parse_document, read_input_file
from inferstack.errors import InputError, Problem, input_error, shown_value, with_article

# ---- values that reach a shell, a unit file, a URL or a path -------------------------------------------
# Each is refused here, before planning, unless it has this exact shape. Anchored with ^...$ for pydantic,
# whose Rust regex reads $ as the end of the text. With Python's `re` use re.fullmatch: there, $ also
# matches before a final newline.

WORKLOAD_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,39}$"
"""Workload name: names cloud resources (some clouds allow only lowercase, digits and dashes)."""
MODEL_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
"""Model name: a folder in the model bucket and on the server, and an argument of the serving command."""
REGION_PATTERN = r"^[a-z]{2,12}(-[a-z0-9]{1,12}){1,3}$"
"""Any cloud's region name (us-east-1, us-central1, cn-hangzhou, northamerica-northeast1, us-gov-west-1)."""
GPU_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}$"
"""An accelerator id or family name as `inferstack gpus` lists them (L4, A100-SXM4-80GB, RTX PRO 6000)."""
SOURCE_URI_PATTERN = (
    r"^([A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?"
    r"|(https|s3|gs|oss|obs|hf)://[A-Za-z0-9._~/:%+-]{1,200})$"
)
"""Where weights come from: a Hugging Face repo id (org/name) or a URL without spaces, quotes or `$`."""
MODEL_REVISION_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,39}$"
"""A model revision: a Hugging Face commit (its 40-character lowercase sha) or a version label of the files in the
model bucket (r2, v1.1, 2026-11-30). One folder of the model's bucket prefix, on the server too."""
CURRENCY_PATTERN = r"^[A-Z]{3}$"
"""ISO 4217 currency code."""
CONFIG_PATH_PATTERN = r"^[^\x00-\x1f\x7f]{0,250}\.json$"
"""A local config.json path (read on this machine, never sent to a server): no control characters."""

# Bounds on numbers, far beyond any real deployment, so that arithmetic on them stays finite and fast.
MAX_TOKENS = 10_000_000  # the longest context windows offered today are 1-10 M tokens
MAX_REQUESTS_PER_S = 10_000_000.0
MAX_CONCURRENT_USERS = 100_000_000
MAX_PEAK_FACTOR = 1_000.0
MAX_ITEMS_PER_REQUEST = 100_000
MAX_MILLISECONDS = 86_400_000.0  # a day
MAX_THROUGHPUT = 1e12
MAX_MONTHLY_BUDGET = 1e12
MAX_PARAMS_M = 100_000_000.0  # 100 T parameters
MAX_GFLOPS_PER_REQUEST = 1e12
MAX_FLEET_REPLICAS = 1_000
MAX_ARCHITECTURE_KEYS = 1_000  # a Hugging Face config.json has a few dozen

CLOUDS: tuple[Cloud, ...] = tuple(facts.id for facts in CLOUD_FACTS.values())
Stage = Literal["validation", "internal", "production"]
STAGES: tuple[Stage, ...] = get_args(Stage)
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


def normalise_enum_text(value: Any) -> Any:
    """Accept `Q4_K_M`, `gguf-q4_k_m`, `int4`, `bfloat16` and similar spellings."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower().removeprefix("gguf-").removeprefix("gguf_")
    return _PRECISION_ALIASES.get(text, text)


def enum_aliases(enum: type[Enum]) -> list[str]:
    """The other spellings `normalise_enum_text` turns into one of `enum`'s values (int4, bfloat16, ...)."""
    values = {member.value for member in enum}
    return [alias for alias, value in _PRECISION_ALIASES.items() if value in values]


def _normalise_model_reference(value: Any) -> Any:
    """Built-in model names are looked up case-insensitively: `Llama-3.1-8B` is `llama-3.1-8b`; so are the Hugging
    Face ids the registry knows them by (`meta-llama/Llama-3.1-8B-Instruct`, sizing.models.lookup)."""
    return value.strip().lower() if isinstance(value, str) else value


WorkloadName = Annotated[str, StringConstraints(pattern=WORKLOAD_NAME_PATTERN)]
ModelName = Annotated[str, StringConstraints(pattern=MODEL_NAME_PATTERN)]
MODEL_REFERENCE_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,95}(/[a-z0-9][a-z0-9._-]{0,95})?$"
"""A built-in model's name, or its Hugging Face id (`org/name`): only ever looked up in the registry, never used as a
name or a path."""
ModelReference = Annotated[
    str, BeforeValidator(_normalise_model_reference), StringConstraints(pattern=MODEL_REFERENCE_PATTERN)
]
RegionName = Annotated[str, StringConstraints(pattern=REGION_PATTERN)]
GpuName = Annotated[str, StringConstraints(pattern=GPU_NAME_PATTERN)]
SourceUri = Annotated[str, StringConstraints(pattern=SOURCE_URI_PATTERN)]
ModelRevision = Annotated[str, StringConstraints(pattern=MODEL_REVISION_PATTERN)]
PrecisionField = Annotated[Precision, BeforeValidator(normalise_enum_text)]


def _precision_choice(value: Any) -> Any:
    """A workload's precision: one precision (any spelling `normalise_enum_text` takes), `auto`, or a non-empty list
    of precisions; anything else is refused here, with one message naming the value."""
    def one(item: Any) -> Precision:
        try:
            return Precision(normalise_enum_text(item))
        except ValueError:
            raise ValueError(f"{shown_value(item)} is not a precision: use one of "
                             f"{', '.join(p.value for p in Precision)}, auto, or a list of precisions") from None

    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None if value is None else "auto"
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError("an empty list allows no precision: name at least one, or use auto")
        return list(dict.fromkeys(one(item) for item in value))
    return one(value)


PrecisionChoice = Annotated[Precision | Literal["auto"] | list[Precision], BeforeValidator(_precision_choice)]
"""A workload's precision: one; `auto` (the default precision and, on GPUs, the quantized ones a source finds
lossless); or a list: the planner serves the cheapest of the allowed precisions that meets the targets."""
KvCacheDtypeField = Annotated[KvCacheDtype, BeforeValidator(normalise_enum_text)]
EngineField = Annotated[Engine, BeforeValidator(normalise_enum_text)]
CALIBRATION_FILE_PATTERN = r"^calibrations/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.json$"
CALIBRATION_FILE_RULE = ("must be a file calibrations/<name>.json in the Pulumi project (a name of letters, digits, "
                         "'.', '_' and '-'; no other folder), e.g. calibrations/llama-3.1-8b-l40s.json")


def _calibration_file(value: str) -> str:
    if not re.fullmatch(CALIBRATION_FILE_PATTERN, value):
        raise ValueError(CALIBRATION_FILE_RULE)
    return value


CalibrationFile = Annotated[str, AfterValidator(_calibration_file)]
"""A stack's calibration file (`inferstack:calibrationFile`): `calibrations/<name>.json` in the Pulumi project, one
folder deep and no `..`, so a stack reads nothing outside its repository."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TokenCount(_Strict):
    """A token count per request: the mean, and optionally the 95th percentile."""

    mean: int = Field(gt=0, le=MAX_TOKENS, description="Mean tokens per request (a positive integer).")
    p95: int | None = Field(
        default=None,
        gt=0,
        le=MAX_TOKENS,
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

    name: ModelName | None = Field(
        default=None,
        description="Model name: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, "
        "at most 64 characters. Names the model's folder in the model bucket and on the server.",
    )
    registry: ModelReference | None = Field(
        default=None, description="A built-in model name, as listed by `inferstack models`."
    )
    config: Path | None = Field(
        default=None,
        description="Path to a Hugging Face config.json (relative to the workload file), ending in .json; "
        "the model is named after its folder unless model.name is given.",
    )
    architecture: dict[str, Any] | None = Field(
        default=None,
        max_length=MAX_ARCHITECTURE_KEYS,
        description="Hugging Face config.json keys given inline (num_hidden_layers, hidden_size, ...).",
    )
    kind: ModelKind | None = Field(
        default=None, description="For models given by size only: encoder, vision, image_generation or speech."
    )
    params_m: float | None = Field(
        default=None, gt=0, le=MAX_PARAMS_M, description="Parameter count in millions (models given by size only)."
    )
    gflops_per_request: float | None = Field(
        default=None,
        gt=0,
        le=MAX_GFLOPS_PER_REQUEST,
        description="Compute per request in GFLOPs (models given by size only).",
    )
    source_uri: SourceUri | None = Field(
        default=None,
        description="Where the weights come from, informational: a Hugging Face repo id (org/name) or an "
        "https://, s3://, gs://, oss://, obs:// or hf:// URL without spaces or quotes.",
    )
    revision: ModelRevision | None = Field(
        default=None,
        description="Which files of the model to serve: a Hugging Face commit (the 40-character lowercase sha the "
        "files were downloaded at) or a version label of the files in the model bucket (lowercase letters, digits, "
        "'.', '_' and '-', at most 40 characters, e.g. r2). The servers load the files under the revision's own "
        "prefix, models/NAME/PRECISION/REVISION/; changing it replaces the servers (a rollout).",
    )

    @field_validator("config")
    @classmethod
    def _config_path_shape(cls, config: Path | None) -> Path | None:
        if config is not None and not re.fullmatch(CONFIG_PATH_PATTERN, str(config)):
            raise ValueError("must be the path of a .json file, without control characters (at most 255 characters)")
        return config

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
        if self.name is None and not re.fullmatch(MODEL_NAME_PATTERN, self.default_name):
            folder = f"after its folder {self.default_name!r}" if self.default_name else "(it is not in a folder)"
            raise ValueError(
                f"model.config cannot name the model {folder}: give model.name "
                "(lowercase letters, digits, '.', '_' and '-')"
            )
        return self

    @property
    def default_name(self) -> str:
        """The name the model gets without `name`: its registry name, its config.json's folder, or custom-model."""
        if self.registry:
            return self.registry
        if self.config is not None:
            return self.config.parent.name
        return "custom-model"


MAX_DIFFUSION_STEPS = 1000
"""A diffusion pipeline's step count is a few to a few hundred; 1000 is the usual training schedule's length."""
MAX_AUDIO_SECONDS = 64 * 30
"""32 minutes: a clip's 30-second windows are decoded as one batch, and a batch holds at most 64 (sizing/items.py
MAX_BATCH); longer recordings are split by the caller into clips of at most this."""
MAX_TOKENS_PER_AUDIO_SECOND = 20.0
"""Fast speech is about 4 words a second; a speech model's own window limit is checked when planning."""


class Traffic(_Strict):
    """How much load the service must carry at peak."""

    requests_per_s: float | None = Field(
        default=None,
        ge=0,
        le=MAX_REQUESTS_PER_S,
        description="Mean request rate in requests per second (before the peak factor).",
    )
    concurrent_users: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENT_USERS,
        description="Requests in flight at the same moment (each user has one request streaming).",
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
        le=MAX_TOKENS,
        description="Longest sequence (prompt + output) the server must accept, at most the model's context; defaults "
        "to p95 prompt + p95 output. Shorter than that: longer requests are truncated by their clients.",
    )
    mode: Literal["interactive", "batch"] = Field(
        default="interactive",
        description="interactive: a person waits for each answer; batch: only throughput matters.",
    )
    peak_factor: float = Field(
        default=1.0,
        ge=1.0,
        le=MAX_PEAK_FACTOR,
        description="Peak load over mean load (1.0 = the figures above are already the peak).",
    )
    items_per_request: int = Field(
        default=1,
        ge=1,
        le=MAX_ITEMS_PER_REQUEST,
        description="Images, sequences or audio clips per request (non-LLM models).",
    )
    diffusion_steps: int | None = Field(
        default=None,
        ge=1,
        le=MAX_DIFFUSION_STEPS,
        description="Denoising steps per image (image-generation models whose registry entry counts a step; "
        "default: the entry's basis, 30 for sdxl).",
    )
    audio_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_AUDIO_SECONDS,
        description="Seconds of audio per clip (speech models with a decoder, e.g. whisper-large-v3; default: the "
        "entry's window, 30 s), decoded as one batch of the model's windows: at most 1920 (32 minutes, 64 windows); "
        "split longer recordings into clips.",
    )
    tokens_per_audio_second: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TOKENS_PER_AUDIO_SECOND,
        description="Text tokens the model writes per second of audio (speech models with a decoder; default: the "
        "entry's basis, 128 tokens a 30-second window for whisper-large-v3).",
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
        default=None,
        gt=0,
        le=MAX_MILLISECONDS,
        description="95th-percentile time to first token, in milliseconds (LLMs).",
    )
    tpot_p95_ms: float | None = Field(
        default=None,
        gt=0,
        le=MAX_MILLISECONDS,
        description="95th-percentile time per output token after the first, in milliseconds (LLMs).",
    )
    latency_p95_ms: float | None = Field(
        default=None,
        gt=0,
        le=MAX_MILLISECONDS,
        description="95th-percentile end-to-end latency per request, in milliseconds (non-LLM models).",
    )
    min_output_tokens_per_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_THROUGHPUT,
        description="Minimum sustained output tokens per second over the whole deployment (LLMs).",
    )
    min_requests_per_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_THROUGHPUT,
        description="Minimum sustained requests (items) per second over the whole deployment.",
    )


class Placement(_Strict):
    """Where the deployment may run and what it may cost."""

    clouds: list[Cloud] = Field(
        default_factory=lambda: list(CLOUDS), min_length=1, description=f"Clouds to consider: {', '.join(CLOUDS)}."
    )
    # Empty defaults are values, not default_factory=dict/list: pydantic copies a mutable default for each instance,
    # and to call a builtin factory it first reads its signature by tokenizing the text (2 % of plan's start-up).
    regions: dict[Cloud, list[RegionName]] = Field(
        default={},
        description="Allowed regions per cloud, e.g. {aws: [us-east-1]}: lowercase region names as the cloud spells "
        "them, each one the cloud has (inferstack/sizing/data/regions.csv); default: the catalog's region for each "
        "cloud.",
    )
    device: Device = Field(
        default="auto", description="cpu or gpu to force a device class; auto lets cost and SLOs decide."
    )
    gpus_allow: list[GpuName] = Field(
        default=[],
        description="Only these accelerators (ids from `inferstack gpus`, or family names like L4, A100, H100).",
    )
    gpus_deny: list[GpuName] = Field(
        default=[], description="Never these accelerators (same names as gpus_allow)."
    )
    monthly_budget: float | None = Field(
        default=None, gt=0, le=MAX_MONTHLY_BUDGET, description="Largest acceptable monthly cost, in `currency`."
    )
    spot: bool = Field(
        default=False, description="Allow spot/preemptible capacity: every server outside production; in production "
                                   "only the servers above the fleet's on-demand floor (docs/pricing.md)."
    )
    currency: str = Field(
        default="USD",
        pattern=CURRENCY_PATTERN,
        description="ISO 4217 currency for ranking and reporting (USD, EUR, CNY ...).",
    )


class Scaling(_Strict):
    """How far the fleet may grow. A plan of several replicas (every production plan), or one whose ceiling is above
    its replicas, deploys as an autoscaled fleet behind one HTTPS load balancer; the floor is the plan's replicas."""

    max_replicas: int | None = Field(
        default=None,
        ge=1,
        le=MAX_FLEET_REPLICAS,
        description="Most servers the autoscaler may run, for traffic above the planned peak; default: twice the "
        "planned replicas. Give the planned replicas to keep the fleet at a fixed size.",
    )


MAX_CACHE_TTL_S = 2_592_000  # 30 days: an answer older than that is stale for any model worth caching
MAX_CACHE_HIT_RATE = 0.9  # planning for less than a tenth of the load on a guess is not planning


class Cache(_Strict):
    """An inference cache: a managed Redis in the deployment's private network (TLS and auth) in which the gateway on
    every server keeps the answers to deterministic requests (temperature 0, embeddings, classification), keyed by
    the model's revision and the normalised request, for `ttl_seconds`. A miss or a Redis outage only costs the
    runtime's answer. Example: `cache: {ttl_seconds: 3600, expected_hit_rate: 0.2}`."""

    ttl_seconds: int = Field(
        ge=1, le=MAX_CACHE_TTL_S,
        description=f"How long a cached answer is served, in seconds (1 to {MAX_CACHE_TTL_S}, 30 days).",
    )
    expected_hit_rate: float = Field(
        default=0.0, ge=0.0, le=MAX_CACHE_HIT_RATE,
        description=f"Share of peak requests you expect the cache to answer (0 to {MAX_CACHE_HIT_RATE}); the plan is "
        "sized for the rest: request rate and concurrency x (1 - hit rate). Default 0: sized for the full load.",
    )


def _model_form(value: Any) -> str:
    """`model:` is a built-in name (a string) or a description (anything else, checked as a ModelSpec)."""
    return "str" if isinstance(value, str) else "ModelSpec"


ModelChoice = Annotated[
    Annotated[ModelReference, Tag("str")] | Annotated[ModelSpec, Tag("ModelSpec")],
    Discriminator(_model_form),
]
"""A built-in model name, or a model description (`ModelSpec`)."""
MAX_CANARY_WEIGHT = 100


class Canary(_Strict):
    """A second version of the service behind the same endpoint, taking `weight` % of the requests: the new model (or
    its revision, precision or engine) on a managed group of its own, sized for its share (docs/pull-requests.md).
    Promote: move the canary's fields to the workload's own and drop `canary`; abort: weight 0, then drop `canary`."""

    model: ModelChoice | None = Field(
        default=None, description="The canary's model: a built-in name or a model description; default: the "
        "workload's model (then change its precision, engine or KV-cache type).")
    precision: PrecisionField | None = Field(
        default=None, description="The canary's weight precision (the values of the workload's precision); default: "
        "the workload's.")
    engine: EngineField | None = Field(
        default=None, description="The canary's inference engine (the values of the workload's engine); default: the "
        "workload's.")
    kv_cache_dtype: KvCacheDtypeField | None = Field(
        default=None, description="The canary's KV-cache type (the values of the workload's kv_cache_dtype); default: "
        "the workload's.")
    weight: int = Field(
        strict=True, ge=0, le=MAX_CANARY_WEIGHT,
        description="Percent of the requests the canary takes: a whole number from 0 to 100 (0: none, while its "
        "servers stay for inspection; drop `canary` to remove them).")


IMAGE_REFERENCE_PATTERN = "|".join(f"({facts.image_id_pattern.pattern})" for facts in CLOUD_FACTS.values())
ImageReference = Annotated[str, StringConstraints(pattern=IMAGE_REFERENCE_PATTERN)]
"""A server image a workload brings: an id of the shape its cloud gives (`CloudFacts.image_id_pattern`)."""


class Startup(_Strict):
    """How a new server gets to its first answer (docs/cold-start.md): the image it boots, how the weights reach the
    runtime, and stopped servers kept ready for scale-out. Each choice applies where the plan's cloud, engine and
    fleet have it; where not, the plan says so and starts the default way."""

    image: Literal["default", "baked"] | dict[Cloud, ImageReference] = Field(
        default="default",
        description="default: the cloud's driver-ready (or plain) image, everything else installed at boot; baked: "
        "an image the stack builds with the driver, the container runtime, the pinned runtime image and the "
        "gateway's packages (AWS: EC2 Image Builder); or your own image per cloud, e.g. {aws: ami-0123456789abcdef0} "
        "(the estimate takes it to hold what a baked one does; the boot installs whatever it lacks).")
    model_loading: Literal["download", "stream"] = Field(
        default="download",
        description="download: the server fetches and verifies the weights onto its disk beside the runtime's "
        "install, then the runtime loads them; stream: vLLM streams them from the bucket into GPU memory (Run:ai "
        "Model Streamer, AWS S3) while the server fetches and verifies them beside it, the endpoint opening only "
        "after both.")
    warm_pool: bool = Field(
        default=False,
        description="Keep the fleet's burst (max_replicas - min_replicas) as prepared, stopped servers that scale-out "
        "starts in place of new ones (AWS Auto Scaling warm pool; their disks are billed: the plan states it).")

    @model_validator(mode="after")
    def _images_fit_their_clouds(self) -> Startup:
        if isinstance(self.image, dict):
            for cloud, image in self.image.items():
                facts = CLOUD_FACTS[cloud]
                if not facts.image_id_pattern.fullmatch(image):
                    raise ValueError(f"image: {shown_value(image)} is not an {facts.display_name} image id (the "
                                     f"shape {facts.image_id_pattern.pattern})")
        return self


class WorkloadSpec(_Strict):
    """An inference workload: the model, its precision, the traffic, the targets and the placement."""

    name: WorkloadName = Field(
        default="workload",
        description="Short lowercase name (letters, digits, dashes; at most 40); names the cloud resources.",
    )
    model: Annotated[
        Annotated[ModelReference, Tag("str")] | Annotated[ModelSpec, Tag("ModelSpec")],
        Discriminator(_model_form),
    ] = Field(description="A built-in model name (see `inferstack models`) or a model description.")
    precision: PrecisionChoice | None = Field(
        default=None,
        description="Weight precision: fp32, fp16, bf16, fp8, int8, int4-awq, int4-gptq, q4_0, q4_k_m, q5_k_m, q8_0; "
        "or a list of them, or auto (the default precision, or on GPUs a quantized one a published study finds "
        "lossless: fp8): the planner picks the cheapest that meets the targets and states its known accuracy cost. "
        "Default: bf16 for LLMs, fp16 on GPUs and fp32 on CPUs for other models.",
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
    scaling: Scaling = Field(
        default=Scaling(),
        description="The autoscaled fleet's ceiling (max_replicas); the floor is the plan's replicas.",
    )
    cache: Cache | None = Field(
        default=None,
        description="An inference cache in a managed Redis (TLS, auth, private network), e.g. {ttl_seconds: 3600, "
        "expected_hit_rate: 0.2}; none by default.",
    )

    startup: Startup = Field(
        default=Startup(),
        description="How new servers start: image (default, baked, or yours per cloud), model_loading (download or "
        "stream) and warm_pool (stopped servers for scale-out).",
    )

    canary: Canary | None = Field(
        default=None,
        description="A canary: the new version (model, precision, engine or KV-cache type) and the percent of the "
        "requests it takes, e.g. {model: llama-3.1-8b, precision: fp8, weight: 10}; a fleet only.",
    )

    @model_validator(mode="after")
    def _canary_differs(self) -> WorkloadSpec:
        if self.canary is not None and self.planner_chooses_precision:
            raise ValueError("canary: a canary compares two versions, so the workload's precision must be one, not "
                             "auto or a list (the planner could choose the canary's precision for both); set it to "
                             "the precision its plan chose (`inferstack plan` names it)")
        if self.canary is not None and self.canary_workload().served_version == self.served_version:
            raise ValueError("canary: its model, precision, engine and KV-cache type are all the workload's own; "
                             "change at least one (the new version), or drop canary")
        return self

    @property
    def planner_chooses_precision(self) -> bool:
        """Whether the workload lets the planner choose the precision (`auto` or a list)."""
        return self.precision == "auto" or isinstance(self.precision, list)

    @property
    def served_version(self) -> tuple[Any, ...]:
        """What a canary may change: the model, precision, engine and KV-cache type."""
        return (self.model, self.precision, self.engine, self.kv_cache_dtype)

    def canary_workload(self) -> WorkloadSpec:
        """The workload as its canary version would run at full traffic (what promoting it deploys)."""
        assert self.canary is not None, "canary_workload needs a canary"
        overrides = {key: getattr(self.canary, key) for key in ("model", "precision", "engine", "kv_cache_dtype")
                     if getattr(self.canary, key) is not None}
        return self.model_copy(update={**overrides, "canary": None})

    @property
    def model_name(self) -> str:
        if isinstance(self.model, str):
            return self.model
        return self.model.name or self.model.default_name

    @property
    def model_revision(self) -> str | None:
        """The model files' revision (model.revision), None for the files under the model's unversioned prefix."""
        return None if isinstance(self.model, str) else self.model.revision


# ---- errors -------------------------------------------------------------------------------------------

SPEC_MODELS: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (TokenCount, ModelSpec, Traffic, Slo, Placement, Scaling, Canary, Cache, WorkloadSpec)
}
# Parts of a pydantic error location that name a union branch or a validator, not a field.
_NOT_FIELDS = ("str", "ModelSpec", "int", "float", "TokenCount", "[key]")
_NOT_FIELD_PREFIXES = ("function-", "literal[", "is-instance[", "constrained-")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a map key shown as it is; any other is quoted and cut


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds, looking inside Optional, unions, lists and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = _nested_model(argument)
        if found is not None:
            return found
    return None


def field_fix(model: type[BaseModel] | None, path: list[str]) -> str | None:
    """The documentation of the field at `path`, followed through the models from `model`: the fix to quote.

    `workload.name` and `model.name` are different fields with different rules; each gets its own text.
    """
    fix = None
    for part in path:
        field = model.model_fields.get(part) if model is not None else None
        if field is None:  # a list index, a map key, or a union branch
            continue
        fix = field.description
        model = _nested_model(field.annotation)
    return fix


def problems_from_validation(
    error: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> list[Problem]:
    """Turn pydantic's errors into Problems that name the field, the value and the fix.

    `model` is the class that was validated (default: the spec model named in the error), whose field
    documentation gives each problem's fix.
    """
    root = model or SPEC_MODELS.get(error.title)
    problems = []
    for item in error.errors(include_url=False):
        path = [str(p) for p in item["loc"] if not str(p).startswith(_NOT_FIELD_PREFIXES)]
        path = [p for p in path if p not in _NOT_FIELDS]
        shown_path = [p if _PLAIN_KEY.fullmatch(p) else shown_value(p) for p in path]
        field = ".".join([prefix, *shown_path] if prefix else shown_path) or (prefix or "workload")
        message = str(item["msg"]).removeprefix("Value error, ")
        fix = field_fix(root, path)
        # A missing field's "input" is the enclosing mapping, perhaps a whole document: it is not shown.
        shown = {} if item["type"] == "missing" else {"value": item.get("input")}
        if item["type"] in ("extra_forbidden", "invalid_key"):
            message = "is not a known field"
            fix = _close_field(root, path) or "remove it or check its spelling against the documented fields"
        if fix is None and root is not None:
            fix = "compare with the documented fields (README.md) and the examples in examples/workloads/"
        problems.append(Problem(field, message, fix=fix, **shown))
    return problems


def _close_field(model: type[BaseModel] | None, path: list[str]) -> str | None:
    """"did you mean traffic?" for a key that is not a field of the model at its place (`path` ends with it)."""
    for part in path[:-1]:
        field = model.model_fields.get(part) if model is not None else None
        if field is not None:
            model = _nested_model(field.annotation)
    if model is None or not path:
        return None
    close = difflib.get_close_matches(path[-1], list(model.model_fields), n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else None


def parse_workload(data: Any, *, source: str | None = None, base_dir: Path | None = None) -> WorkloadSpec:
    """Validate plain data (from YAML, JSON or Pulumi config) into a WorkloadSpec, or raise InputError."""
    if not isinstance(data, dict):
        raise InputError(
            [
                Problem(  # the value is not shown: it may be a whole file that was never a workload
                    "workload",
                    f"must be a mapping of fields (got a YAML/JSON {type(data).__name__})",
                    fix="start from a file in examples/workloads/",
                )
            ],
            source=source,
        )
    try:
        spec = WorkloadSpec.model_validate(data)
    except ValidationError as error:
        raise InputError(problems_from_validation(error, model=WorkloadSpec), source=source) from None
    if base_dir is not None and isinstance(spec.model, ModelSpec) and spec.model.config is not None:
        resolved = spec.model.config if spec.model.config.is_absolute() else base_dir / spec.model.config
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"config": resolved})})
    canary_model = spec.canary.model if spec.canary is not None else None
    if base_dir is not None and isinstance(canary_model, ModelSpec) and canary_model.config is not None:
        resolved = canary_model.config if canary_model.config.is_absolute() else base_dir / canary_model.config
        canary = spec.canary.model_copy(update={"model": canary_model.model_copy(update={"config": resolved})})  # type: ignore[union-attr]
        spec = spec.model_copy(update={"canary": canary})
    return spec


def load_workload(path: str | Path) -> WorkloadSpec:
    """Read a workload file (.yaml, .yml or .json)."""
    path = Path(path)
    text = read_input_file(
        path, field="WORKLOAD", what="a workload file", example="examples/workloads/chat-8b-public.yaml"
    )
    data = parse_document(text, suffix=path.suffix, source=str(path))
    return parse_workload(data, source=str(path), base_dir=path.parent)


#### The workload a stack deploys ####

PROVIDER_REGION_KEYS: dict[str, str] = {facts.id: facts.region_config_key for facts in CLOUD_FACTS.values()}
"""The stack config key each cloud's Pulumi provider reads its region from."""


def for_stack(workload: WorkloadSpec, cloud: Cloud, *, stage: Stage | None = None, region: str | None = None,
              cloud_field: str = "inferstack:cloud") -> WorkloadSpec:
    """The workload a stack sizes: on the stack's cloud (one the workload allows), in its provider's region, at its
    stage. The Pulumi program, `inferstack diff` and a component given a workload all size through this."""
    placement = workload.placement
    if cloud not in placement.clouds:
        raise input_error(cloud_field, "is not among the workload's allowed clouds", value=cloud,
                          fix=f"use one of {placement.clouds}, or allow {cloud} in the workload's placement.clouds")
    if region is not None and not re.fullmatch(REGION_PATTERN, region):
        raise input_error(PROVIDER_REGION_KEYS[cloud], "is not a region name", value=region,
                          fix="give the region as the cloud spells it, e.g. us-east-1, europe-west4, cn-hangzhou")
    if region is not None:
        # Imported on use: the sizing package imports this module.
        from inferstack.sizing.regions import clouds_with_region, unknown_region

        if not clouds_with_region(region, [cloud]):
            raise unknown_region(region, [cloud], field=PROVIDER_REGION_KEYS[cloud],
                                 message=f"is not {with_article(cloud)} region name")
    regions = {**placement.regions, cloud: [region]} if region is not None else placement.regions
    pinned = placement.model_copy(update={"clouds": [cloud], "regions": regions})
    return workload.model_copy(update={"placement": pinned, "stage": stage or workload.stage})

"""The plan: the contract between sizing (which writes it) and bootstrap/components (which read it).

A `DeploymentPlan` is one priced, explained deployment on one cloud. A `PlanReport` is what
`inferstack plan` computes: the best deployment per cloud, ranked alternatives, and what blocks a cloud
when nothing fits. All models are plain, frozen pydantic data: printable, diffable, JSON-serialisable.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from inferstack.clouds import Cloud
from inferstack.errors import InfeasibleError
from inferstack.runtimes import ArtifactFormat, Backend, HealthPath, Runtime
from inferstack.spec import (
    CURRENCY_PATTERN,
    GPU_NAME_PATTERN,
    MODEL_NAME_PATTERN,
    MODEL_REVISION_PATTERN,
    REGION_PATTERN,
    SOURCE_URI_PATTERN,
    WORKLOAD_NAME_PATTERN,
    Cache,
    Engine,
    ImageReference,
    KvCacheDtype,
    ModelKind,
    Precision,
    Stage,
    WorkloadSpec,
)

HOURS_PER_MONTH = 730  # the cloud providers' own convention for monthly estimates
# The catalog prices servers only (no ElastiCache, Memorystore, Tair or DCS row in ../shared/catalog, checked
# 2026-12-01), and no price is invented: a plan with a cache says so, in its rationale and in its cost cell.
UNPRICED_CACHE = "Redis (unpriced)"
UNPRICED_CACHE_SENTENCE = ("The inference cache's managed Redis is an unpriced extra: not in the catalog, not in the "
                           "monthly figure.")
MIN_REQUEST_TIMEOUT_S = 120
# A request may take this much longer than the longest answer the plan allows at its p95 times (time to first token,
# then every token of the context at the p95 time per token): room for a prompt longer than the p95's prefill and for
# the scheduler's jitter at peak load. An assumption, stated as such.
LONGEST_ANSWER_MARGIN = 1.25
# The most model processes one server runs (`sizing/processes.py`): the most GPUs a plannable catalog server has,
# one process each. It bounds a value that becomes systemd unit names and loopback ports on the server.
MAX_PROCESSES_PER_SERVER = 8
# The most servers one replica spans (`sizing/nodes.py`). Every one of them must be up for the replica to serve, so
# each more is one more way to lose it; four 8-GPU servers of 80 GB cards hold 2.3 TB, twice DeepSeek-V3 in bf16.
MAX_NODES_PER_REPLICA = 4

Quantization = Literal["fp8", "compressed-tensors", "awq", "gptq", "mxfp4", "gguf"]
"""The engines' own names for quantized weights (vLLM `--quantization`; gguf for llama.cpp files)."""

# A plan may come from a file or stack config that anyone edited, and its values reach boot scripts, unit files,
# URLs and paths on the server: every such value is a Literal, an enum or a pattern (the workload spec's, where
# the value comes from the workload), checked when the plan is read. Nothing else in a plan (rationale, warnings,
# price sources) is ever rendered into a script.
MACHINE_TYPE_PATTERN = r"^[a-z0-9][a-z0-9.-]{0,62}$"
BUCKET_PREFIX_PATTERN = r"^([a-z0-9][a-z0-9._-]{0,63}/){1,8}$"

WorkloadName = Annotated[str, StringConstraints(pattern=WORKLOAD_NAME_PATTERN)]
ModelName = Annotated[str, StringConstraints(pattern=MODEL_NAME_PATTERN)]
Region = Annotated[str, StringConstraints(pattern=REGION_PATTERN)]
MachineType = Annotated[str, StringConstraints(pattern=MACHINE_TYPE_PATTERN)]
Port = Annotated[int, Field(ge=1024, le=65535)]


class _Frozen(BaseModel):
    # Enums are stored as their values: a plan is plain data (`plan.precision == "bf16"`, JSON as written).
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=True)


class Money(_Frozen):
    """An amount with its ISO 4217 currency; figures in different currencies are never added."""

    amount: float
    currency: str = Field(pattern=CURRENCY_PATTERN)

    def __str__(self) -> str:
        return f"{self.amount:,.2f} {self.currency}"


PriceFlag = Literal["stale", "undated", "borrowed"]
"""Why a price may mislead: older than STALE_PRICE_DAYS, no source date, or another region's price."""


class Price(_Frozen):
    """What the plan's instances cost, and where each figure came from. Unknown prices stay None.

    Every figure a report compares or shows is in the report's currency (`monthly_ranking`,
    `per_million_output_tokens`); `hourly_per_instance` and `monthly` keep the currency the cloud bills in,
    as provenance of that figure."""

    hourly_per_instance: Money | None = Field(
        description="List price of one instance per hour as billed, in the catalog's (or override's) currency."
    )
    monthly: Money | None = Field(
        description="All instances for a month (730 h) as billed, in the same currency as the hourly price."
    )
    monthly_ranking: Money | None = Field(
        description="`monthly` in the report's currency (placement.currency), converted with the report's exchange "
                    "rates: the figure every table line, summary and budget check uses."
    )
    per_million_output_tokens: Money | None = Field(
        description="Ranking-currency cost per million output tokens at the planned load (LLMs)."
    )
    source: str | None = Field(description="Where the hourly price comes from (catalog source or override file).")
    source_date: str | None = Field(
        description="Date of that source (YYYY-MM-DD, or 'unknown' when the source carries none)."
    )
    priced_region: str | None = Field(
        description="Region whose price was used; differs from the plan's region for a regional substitute."
    )
    substitute: bool = Field(
        default=False, description="True when the price was taken from another region (flagged in warnings)."
    )
    age_days: int | None = Field(
        default=None, description="Days from the price's source date to the run date (None: undated or no price)."
    )
    flags: list[PriceFlag] = Field(
        default=[],  # copied per instance by pydantic; a builtin factory costs start-up (see spec.Placement.regions)
        description="stale (source date more than a year before the run), undated, borrowed (priced_region's "
                    "price used for another region). A flagged price is ranked as if 5 % dearer "
                    "(planner.DOUBTFUL_PRICE_MARGIN): it loses near-ties against fresh, same-region prices.",
    )

    @property
    def known(self) -> bool:
        return self.monthly_ranking is not None


class Accelerator(_Frozen):
    """The GPUs in each instance."""

    id: str = Field(pattern=GPU_NAME_PATTERN,
                    description="Accelerator id from the GPU catalog (`inferstack gpus`), e.g. L4, A100-SXM4-80GB.")
    name: str = Field(pattern=GPU_NAME_PATTERN, description="Family name, e.g. L4, A100, H100.")
    memory_gib: float = Field(description="Memory per GPU as the vendor states it (GB in datasheets).")
    count: int = Field(ge=1, description="GPUs per instance.")
    attach_type: str | None = Field(
        default=None, pattern=r"^[a-z0-9][a-z0-9-]{0,62}$",
        description="Accelerator type attached to a general-purpose VM (GCP N1 + T4: nvidia-tesla-t4); None: bundled.",
    )


class MemoryBreakdown(_Frozen):
    """Where the memory of one device goes: per GPU on GPU plans, per instance RAM on CPU plans."""

    device: Literal["gpu", "cpu"]
    capacity_gib: float = Field(description="Memory of one device (GPU) or of the instance (CPU).")
    usable_gib: float = Field(
        description="What the engine may use: gpu_memory_utilization × capacity, or RAM minus the OS reserve."
    )
    weights_gib: float = Field(description="Model weights held by one device (one tensor-parallel shard).")
    overhead_gib: float = Field(description="Runtime, CUDA context and activation peak.")
    kv_cache_gib: float = Field(description="Memory left for the KV cache on one device (0 for non-LLM models).")
    kv_cache_needed_gib: float = Field(description="KV cache needed on one device for the planned concurrency.")
    total_gib: float = Field(
        description="weights + overhead + KV cache needed, on one device; on a CPU plan, times `processes`.")
    processes: int = Field(
        default=1, ge=1,
        description="Model processes per server: on a CPU plan they share the RAM (weights, overhead and KV cache "
        "are one process's; total is all of them), on a GPU plan each has its own GPUs.",
    )
    kv_cache_bytes_per_token: int = Field(
        description="KV bytes per token summed over the tensor-parallel group (includes head replication)."
    )
    kv_cache_capacity_tokens: int = Field(description="Tokens the KV cache can hold per replica (in 16-token blocks).")
    max_concurrency: int = Field(description="Sequences of the workload's length that fit at once per replica.")


class Performance(_Frozen):
    """Predicted service levels at the planned peak load."""

    ttft_p95_ms: float | None = Field(description="95th-percentile time to first token (LLMs), queueing included.")
    tpot_p95_ms: float | None = Field(description="95th-percentile time per output token (LLMs).")
    latency_p95_ms: float = Field(description="95th-percentile end-to-end latency per request.")
    output_tokens_per_s: float | None = Field(
        description="Output tokens per second the whole deployment delivers at peak load (LLMs)."
    )
    capacity_requests_per_s: float = Field(
        description="Requests per second the whole deployment sustains at saturation."
    )
    load_requests_per_s: float = Field(description="Peak request rate the plan was sized for.")
    utilization: float = Field(
        description="load / capacity per replica at peak (the planner keeps it at or below 0.8)."
    )
    concurrency_per_replica: int = Field(description="Requests in flight per replica (model process) at peak.")


class Objectives(_Frozen):
    """The service levels the plan was sized to hold: the workload's `slo`, with the planner's defaults where it gave
    none. What the deployment's alarms compare measurements with (components/observability.py)."""

    ttft_p95_ms: float | None = Field(description="95th-percentile time to first token (LLMs, interactive).")
    tpot_p95_ms: float | None = Field(description="95th-percentile time per output token (LLMs, interactive).")
    latency_p95_ms: float | None = Field(
        description="95th-percentile end-to-end latency per request: the workload's target; for LLMs, the TTFT "
                    "target plus the TPOT target for each further token of a p95-long answer. None: no latency "
                    "target (batch work).")


class Serving(_Frozen):
    """How the runtime is started: what the bootstrap renders into the service unit."""

    runtime: Runtime = Field(
        description="vllm (GPU LLMs), llamacpp (GGUF LLMs), triton (encoders, vision, diffusion, speech)."
    )
    engine: Engine = Field(
        description="Engine whose efficiency the speed model used (vllm, llamacpp, onnxruntime, ...).")
    backend: Backend | None = Field(
        default=None, description="Triton backend (triton only)."
    )
    port: Port = Field(default=8000, description="HTTP port of the inference API (the server's gateway).")
    metrics_port: Port | None = Field(
        default=None,
        description="Separate metrics port (Triton: 8002); None when metrics share the API port (/metrics).",
    )
    health_path: HealthPath = Field(description="HTTP path that answers 200 once the model is loaded.")
    max_model_len: int | None = Field(default=None, ge=1, description="Longest sequence accepted (LLMs).")
    max_num_seqs: int | None = Field(default=None, ge=1, description="Concurrent sequences per replica (LLMs).")
    max_answer_tokens: int | None = Field(
        default=None, ge=1,
        description="Most tokens one answer may generate, whatever a request asks: the runtime's own cap (vLLM "
                    "--override-generation-config max_new_tokens, llama-server -n), set where the cloud's load "
                    "balancer cannot wait for an answer as long as the context (`answer_token_cap`). None: answers "
                    "run to the context (max_model_len).")
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, le=1, description="Fraction of GPU memory the engine takes (vLLM)."
    )
    tensor_parallel: int = Field(default=1, ge=1)
    pipeline_parallel: int = Field(
        default=1, ge=1, le=MAX_NODES_PER_REPLICA,
        description="Pipeline stages, one per server of a replica across servers (vLLM --pipeline-parallel-size, on "
                    "Ray); 1: the replica is one server.")
    processes: int = Field(
        default=1, ge=1, le=MAX_PROCESSES_PER_SERVER,
        description="Model processes on each server, each with its own weights and KV cache, pinned to its own "
        "GPU(s) or NUMA node, on loopback ports after `port`; the gateway balances across them.",
    )
    dtype: Precision = Field(description="Weight precision (spec value).")
    quantization: Quantization | None = Field(
        default=None, description="Engine quantization flag (awq, gptq, fp8, ...), None for 16/32-bit weights."
    )
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
    threads: int | None = Field(default=None, ge=1, description="CPU threads for the runtime (CPU plans).")


class ModelArtifact(_Frozen):
    """The model the server loads and where its files live in the model bucket."""

    name: ModelName = Field(description="Served model name; also the model's folder on the server.")
    kind: ModelKind
    source_uri: str | None = Field(
        pattern=SOURCE_URI_PATTERN,
        description="Where the weights are published (Hugging Face repo id), informational.")
    params_b: float = Field(description="Parameters in billions.")
    artifact_format: ArtifactFormat
    size_gib: float = Field(description="Size of the files on disk.")
    bucket_prefix: str = Field(pattern=BUCKET_PREFIX_PATTERN,
                               description="Prefix under which the files sit in the model bucket, ending in '/'.")
    revision: str | None = Field(
        default=None, pattern=MODEL_REVISION_PATTERN,
        description="The workload's model.revision (a Hugging Face commit or a version label), the last folder of "
                    "bucket_prefix; None: the model's unversioned prefix.")

    @model_validator(mode="after")
    def _revision_is_the_prefixs_last_folder(self) -> ModelArtifact:
        if self.revision is not None and not self.bucket_prefix.endswith(f"/{self.revision}/"):
            raise ValueError(f"model.bucket_prefix {self.bucket_prefix!r} must end in the revision's folder "
                             f"{self.revision}/")
        return self

    @property
    def revisions_prefix(self) -> str:
        """The prefix every revision of the model at this precision shares (bucket_prefix without the revision's
        folder): what the servers' identity may read, so that a new revision (a rollout, a canary) changes no grant and
        servers of the old one keep reading theirs while they drain."""
        return self.bucket_prefix.removesuffix(f"{self.revision}/") if self.revision else self.bucket_prefix


ColdStartPhaseName = Literal["vm_boot", "metadata_firewall", "driver", "runtime", "gateway", "model_sync", "service",
                             "model_load"]
"""A new server's boot phases, in order: the instance's start until the boot unit runs, then the boot script's phases
(docs/bootstrap.md), which log each one under the same name (`inferstack-phase {...}`)."""
COLD_START_PHASES: tuple[ColdStartPhaseName, ...] = ("vm_boot", "metadata_firewall", "driver", "runtime", "gateway",
                                                     "model_sync", "service", "model_load")


class ColdStartPhase(_Frozen):
    """One boot phase's estimated duration, when it starts, and what the figure rests on."""

    phase: ColdStartPhaseName
    seconds: int = Field(ge=0)
    start_s: int = Field(ge=0, description="Seconds after the server's launch at which the phase starts: the model "
                                           "sync runs beside the runtime's and the gateway's installs (and beside "
                                           "the load when the runtime streams the weights).")
    basis: str = Field(description="How the figure was reached: sizes, rates and their sources or assumptions.")

    @property
    def end_s(self) -> int:
        return self.start_s + self.seconds


class ColdStart(_Frozen):
    """Estimated seconds from a new server's start to its first healthy answer, by boot phase (sizing/coldstart.py).
    The boot log's `inferstack-phase` lines give the real figure per phase, with its start, to compare with."""

    total_s: int = Field(ge=1, description="When the last phase ends: the boot's critical path.")
    phases: list[ColdStartPhase] = Field(description="Every boot phase, in boot order.")

    @model_validator(mode="before")
    @classmethod
    def _sequential_when_unstated(cls, value: Any) -> Any:
        """A plan written before phases had a start ran them one after the other."""
        if isinstance(value, dict) and all(isinstance(p, dict) and "start_s" not in p for p in value.get("phases", ())):
            start, phases = 0, []
            for phase in value.get("phases", ()):
                phases.append({**phase, "start_s": start})
                start += int(phase.get("seconds", 0))
            return {**value, "phases": phases}
        return value

    @model_validator(mode="after")
    def _phases_in_order_and_timed(self) -> ColdStart:
        names = tuple(phase.phase for phase in self.phases)
        if names != COLD_START_PHASES:
            raise ValueError(f"cold start phases must be {', '.join(COLD_START_PHASES)} in that order, not "
                             f"{', '.join(names)}")
        if self.total_s != max(phase.end_s for phase in self.phases):
            raise ValueError(f"cold start total_s {self.total_s} is not when its last phase ends")
        return self

    def seconds(self, phase: ColdStartPhaseName) -> int:
        return next(p.seconds for p in self.phases if p.phase == phase)


ServerImageKind = Literal["default", "baked", "brought"]


class WarmPool(_Frozen):
    """Servers prepared ahead and kept stopped (AWS Auto Scaling warm pool): each boots once into the pool (driver,
    runtime, model on its disks), stops, and starts from there when the autoscaler adds a server; servers removed by
    scale-in return to it."""

    servers: int = Field(ge=1, description="Stopped servers kept: the fleet's burst, max_replicas - min_replicas.")
    disk_gib: int = Field(ge=1, description="The disk each stopped server keeps (billed while stopped).")
    monthly_storage: Money | None = Field(
        description="What the stopped servers' disks cost a month, in the report's currency (None: no storage price "
                    "is known for the region).")
    storage_price_basis: str = Field(description="The storage price used, its source and date, or why none.")


class ServerStartup(_Frozen):
    """How a new server reaches its first answer: the image it boots, how the weights reach the runtime, and the warm
    capacity that shortens scale-out (workload `startup`)."""

    image: ServerImageKind = Field(
        default="default", description="default: the cloud's driver-ready (or plain) image, everything installed at "
                                       "boot; baked: an image built by the stack with driver, container runtime, the "
                                       "pinned runtime image and the gateway's packages; brought: the workload's "
                                       "image.")
    image_id: ImageReference | None = Field(default=None, description="The brought image's id.")
    runtime_caches: bool = Field(
        default=False, description="The baked image also holds the runtime's compile and kernel caches: the image "
                                   "build starts the runtime once with the plan's model and arguments, as a server "
                                   "would, and keeps what it wrote (vLLM in a container on GPUs).")
    model_loading: Literal["download", "stream"] = Field(
        default="download", description="download: the sync fetches and verifies the weights onto the server's disk, "
                                        "then the runtime loads them; stream: the runtime streams them from the bucket "
                                        "into GPU memory while the sync fetches and verifies them beside it (the "
                                        "endpoint opens only after both).")
    warm_pool: WarmPool | None = Field(default=None, description="Stopped servers kept for scale-out; None: none.")
    warm_start: ColdStart | None = Field(
        default=None, description="A server's start from the warm pool to its first answer, by phase; None without "
                                  "a warm pool.")
    notes: list[str] = Field(default=[], description="Where the workload's startup choices do not apply on this "
                                                     "cloud, and why.")


class Fleet(_Frozen):
    """The servers as one autoscaled, self-healing group behind an HTTPS load balancer, sized by the plan.

    Each cloud maps these numbers onto its own machinery (`inferstack/components/<cloud>.py`): a managed group over
    `zones` zones with `min_replicas`..`max_replicas` servers, a health check on the serving health path with
    `health_check_grace_s` of grace, and a scaling policy on the cloud's request metric holding
    `target_requests_per_s` per server."""

    min_replicas: int = Field(ge=1, description="Servers always running: the plan's replicas (production's spare "
                                                "included).")
    max_replicas: int = Field(ge=1, description="Most servers the autoscaler may run (workload scaling.max_replicas; "
                                                "default twice the floor).")
    target_requests_per_s: float = Field(
        gt=0, description="Requests per second per server the autoscaler holds: the most one server carries within "
                          "the SLO targets at no more than 80 % of its saturation.")
    cold_start_s: int = Field(
        ge=1, description="Estimated seconds from a new server's start to its first healthy answer: the plan's "
                          "`cold_start.total_s`, rounded up to 10 s (sizing/coldstart.py).")
    health_check_grace_s: int = Field(
        ge=1, description="A new server is not judged by its health check for this long: 1.5 x the cold start.")
    scale_out_cooldown_s: int = Field(
        ge=1, description="After adding servers, the autoscaler waits this long (a new server's warm-up): the cold "
                          "start.")
    scale_in_cooldown_s: int = Field(
        ge=1, description="Servers are removed slowly: at most one step per this period (twice the cold start, at "
                          "least 15 minutes).")


MAX_FALLBACK_TYPES = 3
"""Equivalent instance types a group may launch besides the planned one (where its capacity is short, or, for spot
servers, where a pool is less likely to be interrupted)."""


class SpotAboveFloor(_Frozen):
    """A production fleet that keeps its SLO floor on on-demand servers and runs the servers its autoscaler adds above
    it on spot capacity (workload `placement.spot: true`), falling back to equivalent types when one type's capacity
    is gone. Each cloud maps it onto its own group (`inferstack/components/<cloud>/fleet.py`); the planner writes it
    only for clouds whose group can keep an on-demand base (`clouds.CloudFacts.on_demand_floor`)."""

    on_demand_base: int = Field(ge=1, description="Servers always on-demand: the fleet's floor (`min_replicas`).")
    spot_above: int = Field(ge=0, description="Servers the autoscaler may add above the floor, all on spot capacity.")
    instance_types: list[MachineType] = Field(
        min_length=1, max_length=1 + MAX_FALLBACK_TYPES,
        description="The planned type first, then equivalents the group may launch instead (on-demand "
                    "and spot alike): the same accelerators, at least its vCPUs and memory, sold in the region, "
                    "cheapest first.")
    spot_hourly_per_instance: Money | None = Field(
        description="The planned type's spot price per hour in the plan's region, as billed (None: the catalog has "
                    "none). Spot prices move; the plan's monthly cost is the on-demand floor's.")
    spot_price_source: str | None = Field(description="Where the spot price comes from.")
    spot_price_date: str | None = Field(description="Its source's date (YYYY-MM-DD or 'unknown').")
    monthly_at_ceiling: Money | None = Field(
        default=None,
        description="The blend at the fleet's ceiling for a month (730 h), in the report's currency: the floor at the "
                    "on-demand price plus `spot_above` servers at the spot price (None: a price or an exchange rate is "
                    "unknown). Servers above the floor run only while traffic is above the planned peak, so the "
                    "plan's monthly cost stays the floor's.")
    on_demand_monthly_at_ceiling: Money | None = Field(
        default=None, description="The same ceiling with every server on-demand, in the report's currency: what the "
                                  "blend is compared with.")

    @property
    def spot_share_at_ceiling(self) -> float:
        """The share of the ceiling's servers on spot capacity."""
        return self.spot_above / (self.on_demand_base + self.spot_above)


ROLLOUT_SURGE_FRACTION = 0.25
"""New servers started at once in a rolling replacement, as a share of the servers replaced: Kubernetes' default
maxSurge for a Deployment (kubernetes.io/docs/concepts/workloads/controllers/deployment, "Max Surge", 25 %, read
2026-12-01), at least one a zone (a regional GCP group takes a fixed maxSurge of 0 or at least its zone count:
cloud.google.com/compute/docs/instance-groups/rolling-out-updates-to-managed-instance-groups, read 2026-12-01)."""


class Rollout(_Frozen):
    """How a change that replaces the servers (a new model revision, plan or bootstrap) reaches them, and how long it
    takes: `servers` in `batches` of `surge`, each batch a cold start (the new servers serve only once the load
    balancer's health check passes, then the old ones drain). Each cloud maps it onto its own machinery
    (`inferstack/components/<cloud>.py`); where one has no rolling replacement its capability table says so."""

    strategy: Literal["rolling", "replace"] = Field(
        description="rolling: a fleet starts `surge` new servers beside the old ones and removes old ones only once "
                    "the new ones pass the health check, never below the servers the plan needs; replace: the one "
                    "server is replaced delete-first and the endpoint is down for about a cold start.")
    servers: int = Field(ge=1, description="Servers replaced: the fleet's floor (the plan's replicas), or the one "
                                           "server.")
    surge: int = Field(ge=0, description="New servers started at once above the group's size (0 for replace).")
    min_healthy_percent: int = Field(
        ge=0, le=100, description="Share of the group's size kept serving throughout: 100 for a fleet (the floor is "
                                  "the capacity the plan needs at the SLO), 0 for one server.")
    batches: int = Field(ge=1, description="Rounds of replacement: servers ÷ surge, rounded up.")
    duration_s: int = Field(ge=1, description="About how long the rollout takes: batches × the fleet's cold start "
                                              "(servers × cold start ÷ surge), with the group at its floor.")


def rollout_for(instance_count: int, zones: int, fleet: Fleet | None, cold_start_s: int, nodes: int = 1) -> Rollout:
    """The rollout of a plan's servers: rolling with surge for a fleet, delete-first for one server; a replica across
    `nodes` servers is replaced whole (the fleet counts replicas)."""
    if fleet is None:
        replicas = instance_count // nodes
        return Rollout(strategy="replace", servers=instance_count, surge=0, min_healthy_percent=0,
                       batches=replicas, duration_s=replicas * cold_start_s)
    replicas = fleet.min_replicas
    surge = min(replicas, max(zones, math.ceil(replicas * ROLLOUT_SURGE_FRACTION)))
    batches = math.ceil(replicas / surge)
    return Rollout(strategy="rolling", servers=replicas * nodes, surge=surge * nodes, min_healthy_percent=100,
                   batches=batches, duration_s=batches * fleet.cold_start_s)


def answer_seconds(performance: Performance, tokens: int) -> float:
    """How long an answer of `tokens` tokens takes at the plan's p95 figures: the time to its first token, then the
    time per token for each further one."""
    assert performance.ttft_p95_ms is not None and performance.tpot_p95_ms is not None, "an LLM's performance"
    return (performance.ttft_p95_ms + performance.tpot_p95_ms * max(tokens - 1, 0)) / 1000


def answer_token_cap(performance: Performance, max_model_len: int | None, limit_s: int) -> int | None:
    """The most tokens an answer may have so that the request fits `limit_s` (with LONGEST_ANSWER_MARGIN), or None
    when the whole context fits (or the model generates no tokens). At least 1: a plan whose first token alone misses
    the limit keeps a request timeout above it, which the cloud's backend refuses (`plan_problems`)."""
    if max_model_len is None or performance.ttft_p95_ms is None or performance.tpot_p95_ms is None:
        return None
    if answer_seconds(performance, max_model_len) * LONGEST_ANSWER_MARGIN <= limit_s:
        return None
    budget_ms = limit_s / LONGEST_ANSWER_MARGIN * 1000 - performance.ttft_p95_ms
    cap = 1 + math.floor(budget_ms / performance.tpot_p95_ms)
    if math.ceil(answer_seconds(performance, cap) * LONGEST_ANSWER_MARGIN) > limit_s:  # float rounding at the edge
        cap -= 1
    return max(1, cap)


def answer_cap_sentence(performance: Performance, max_model_len: int, cap: int, limit_s: int,
                        load_balancer: str) -> str:
    """The plan's rationale for capping answers: what the context would take, and what the load balancer allows."""
    return (f"Answers are capped at {cap} tokens (the runtime's own limit, whatever a request asks): one as long as "
            f"the {max_model_len}-token context would take {answer_seconds(performance, max_model_len):,.0f} s at "
            f"{performance.tpot_p95_ms:g} ms a token, and {load_balancer} waits at most {limit_s} s for an answer "
            f"({LONGEST_ANSWER_MARGIN:g}x margin kept).")


NodeTransport = Literal["efa", "gpudirect-tcpx", "gpudirect-tcpxo", "rdma", "erdma", "roce", "tcp"]
"""How a replica's servers pass data between them (node_links.csv): AWS EFA, GCP GPUDirect-TCPX/-TCPXO or RDMA,
Alibaba eRDMA, RoCE, or TCP through the servers' network."""


class ReplicaNodes(_Frozen):
    """A replica across servers: tensor parallel over each server's GPUs, pipeline parallel across the servers, one
    Ray cluster per replica (`sizing/nodes.py`)."""

    nodes: int = Field(ge=2, le=MAX_NODES_PER_REPLICA, description="Servers per replica, one pipeline stage each.")
    transport: NodeTransport
    network_gbps: float = Field(gt=0, description="Bandwidth between two of its servers, Gbit/s per server.")
    latency_us: float = Field(ge=0, description="One small message between two of its servers.")
    hand_over_ms: float = Field(
        ge=0, description="What one token's trip through the pipeline spends on the network at the planned "
                          "concurrency: nodes - 1 hand-overs of its micro-batch's activations from every "
                          "tensor-parallel rank, and the sampled tokens back to the head.")
    source: str = Field(description="Where the network figures come from (node_links.csv).")


class DeploymentPlan(_Frozen):
    """One deployment on one cloud: what to create, what it costs, how it will perform, and why."""

    model_config = ConfigDict(defer_build=True)

    workload: WorkloadName
    stage: Stage
    cloud: Cloud
    region: Region
    instance_type: MachineType = Field(description="The cloud's machine type, as its API names it.")
    offer: str = Field(
        pattern=r"^[a-z0-9][a-z0-9.-]{0,62}(\+[0-9]{1,2}x [a-z0-9-]{1,63})?$",
        description="The catalog row this plan uses (equals instance_type except for GPUs attached to a VM)."
    )
    instance_count: int = Field(ge=1, description="Instances to create: one per replica, or `replica_nodes.nodes` "
                                                 "per replica.")
    replicas: int = Field(ge=1)
    replica_nodes: ReplicaNodes | None = Field(
        default=None, description="The servers one replica spans and their network; None: a replica is one server.")
    zones: int = Field(ge=1, description="Distinct availability zones to spread the replicas over.")
    spot: bool = False
    device: Literal["gpu", "cpu"]
    vcpus: int = Field(ge=1)
    memory_gib: float = Field(gt=0)
    local_nvme_gb: int | None = Field(
        description="Bundled instance-store/local SSD in GB (None when the catalog does not say)."
    )
    accelerator: Accelerator | None
    tensor_parallel: int = Field(ge=1)
    model: ModelArtifact
    precision: Precision
    serving: Serving
    disk_gib: int = Field(
        ge=1, le=65536, description="Boot/data disk to create: OS + runtime + model files + headroom.")
    memory: MemoryBreakdown
    performance: Performance
    price: Price
    rationale: list[str] = Field(description="Why this deployment: one sentence per decision.")
    warnings: list[str]
    cold_start: ColdStart | None = Field(
        default=None, description="Boot to first healthy answer, by phase. The planner writes it on every plan; None "
                                  "only in plans written before it existed.")
    startup: ServerStartup = Field(
        default=ServerStartup(), description="How its servers start: image, model loading and warm pool (workload "
                                             "`startup`).")
    fleet: Fleet | None = Field(
        default=None, description="The autoscaled group behind a load balancer; None: one server on its own "
                                  "(validation and internal plans of one replica).")
    slo: Objectives | None = Field(
        default=None, description="The service levels the plan holds (its alarms' thresholds). The planner writes it "
                                  "on every plan; None only in plans written before it existed.")
    canary: CanaryPlan | None = Field(
        default=None, description="The workload's canary: a second group behind the same load balancer, taking its "
                                  "weight in % of the requests; this plan's own group then carries the rest and is "
                                  "sized for it (sizing/canary.py). None: no canary.")
    cache: Cache | None = Field(
        default=None, description="The workload's inference cache (a managed Redis the gateway keeps deterministic "
                                  "answers in), as the workload gives it; None: no cache.")
    spot_above_floor: SpotAboveFloor | None = Field(
        default=None, description="Spot capacity above production's on-demand floor, with fallback types; None: every "
                                  "server is on-demand, or all are spot (`spot`).")
    rollout: Rollout | None = Field(
        default=None, description="How a new model revision, plan or bootstrap replaces the servers, and how long it "
                                  "takes. The planner writes it on every plan; None only in plans written before it "
                                  "existed (`rolling_update` then derives it).")

    @model_validator(mode="after")
    def _servers_per_replica(self) -> DeploymentPlan:
        nodes = self.nodes_per_replica
        if self.instance_count != self.replicas * nodes or self.serving.pipeline_parallel != nodes:
            raise ValueError(f"a plan of {self.replicas} replica(s) of {nodes} server(s) creates "
                             f"{self.replicas * nodes} instances with pipeline_parallel {nodes}, not "
                             f"{self.instance_count} with {self.serving.pipeline_parallel}")
        return self

    @property
    def nodes_per_replica(self) -> int:
        return self.replica_nodes.nodes if self.replica_nodes else 1

    @property
    def interruptible(self) -> bool:
        """Whether any of its servers may run on spot capacity, and so be interrupted: all of them (`spot`), or those
        above production's on-demand floor (`spot_above_floor`)."""
        return self.spot or self.spot_above_floor is not None

    @property
    def longest_answer_tokens(self) -> int | None:
        """The most tokens an answer of this plan may generate: the runtime's cap, or the whole context (an LLM's
        answer can run until prompt and answer fill `max_model_len`); None for models that generate no tokens."""
        return self.serving.max_answer_tokens or self.serving.max_model_len

    @property
    def request_timeout_s(self) -> int:
        """Longest a request may take end to end, streamed answers included: the gateway's and the load balancer's
        timeouts, at least two minutes. An LLM's is its longest answer (`longest_answer_tokens`) at the plan's p95 time
        per token at peak load, after its p95 time to first token, times LONGEST_ANSWER_MARGIN; other models' is four
        times the p95 latency."""
        tokens = self.longest_answer_tokens
        if tokens is None or self.performance.tpot_p95_ms is None or self.performance.ttft_p95_ms is None:
            return max(MIN_REQUEST_TIMEOUT_S, math.ceil(4 * self.performance.latency_p95_ms / 1000))
        return max(MIN_REQUEST_TIMEOUT_S, math.ceil(answer_seconds(self.performance, tokens) * LONGEST_ANSWER_MARGIN))

    @property
    def rolling_update(self) -> Rollout:
        """The plan's rollout, derived as the planner does for a plan written before plans carried one."""
        if self.rollout is not None:
            return self.rollout
        cold_start_s = self.fleet.cold_start_s if self.fleet else self.cold_start.total_s if self.cold_start else 1
        return rollout_for(self.instance_count, self.zones, self.fleet, cold_start_s, self.nodes_per_replica)

    @property
    def gpus_per_instance(self) -> int:
        return self.accelerator.count if self.accelerator else 0

    def summary(self) -> str:
        gpus = f" ({self.accelerator.count}x {self.accelerator.name})" if self.accelerator else ""
        price = self.price
        cost = f"{price.monthly_ranking or price.monthly}/month" if price.monthly else "price unknown"
        canary = f"; {self.canary.summary()}" if self.canary else ""
        return f"{self.instance_count}x {self.instance_type}{gpus} on {self.cloud} {self.region}, {cost}{canary}"


class CanaryPlan(_Frozen):
    """A canary's share of the requests and the plan of its group: the canary version as it would run at full
    traffic (what promoting it deploys), with its replicas, fleet, price and load cut to its share."""

    model_config = ConfigDict(defer_build=True)

    weight: int = Field(ge=0, le=100, description="Percent of the requests the canary group takes.")
    plan: DeploymentPlan = Field(description="The canary group's plan.")

    def summary(self) -> str:
        return f"canary {self.weight} %: {self.plan.model.name} {self.plan.precision}, {self.plan.summary()}"


DeploymentPlan.model_rebuild()


class CloudOutcome(_Frozen):
    """The result for one cloud: the cheapest feasible deployment, the runners-up, or what blocks it."""

    cloud: Cloud
    regions: list[str]
    chosen: DeploymentPlan | None
    alternatives: list[DeploymentPlan]
    blocked_by: list[str] = Field(description="Why no deployment was feasible (empty when one was chosen).")

    def require_chosen(self, where: str, *, after: str = "") -> DeploymentPlan:
        """The chosen deployment, or InfeasibleError naming `where` and the planner's reasons (`after` adds a
        sentence to the fix)."""
        if self.chosen is not None:
            return self.chosen
        reasons = "; ".join(self.blocked_by) or "no candidate fits"
        raise InfeasibleError(f"{where}: no feasible deployment on {self.cloud}: {reasons}. Fix: relax the SLOs, the "
                              f"budget or the placement (`inferstack plan` suggests how){after}")
    candidates_checked: int


class PlanReport(_Frozen):
    """What `inferstack plan` returns."""

    workload: WorkloadSpec
    currency: str
    exchange_rates: dict[str, float] = Field(
        description="Units of the ranking currency per unit of each listed currency."
    )
    exchange_rates_source: str
    clouds: list[CloudOutcome]
    best: DeploymentPlan | None = Field(
        description="Cheapest feasible deployment with a known price across all clouds (doubtful prices ranked "
                    "5 % dearer, see Price.flags)."
    )
    cheapest_over_budget: DeploymentPlan | None = Field(
        default=None,
        description="When the monthly budget rules out every deployment: the cheapest priced deployment that meets "
                    "the targets, whatever it costs (None otherwise, or when no priced deployment meets them).",
    )
    assumptions: list[str] = Field(description="Defaults the planner filled in (SLOs, context length ...).")
    suggestions: list[str] = Field(description="Nearest feasible changes when nothing, or nothing within budget, fits.")

    def outcome(self, cloud: Cloud) -> CloudOutcome:
        return next(o for o in self.clouds if o.cloud == cloud)

    def over_budget_message(self) -> str | None:
        """When the budget rules everything out: the cheapest priced deployment that meets the targets, its cost."""
        budget = self.workload.placement.monthly_budget
        if budget is None or any(o.chosen for o in self.clouds):
            return None
        within = f"no deployment with a known price fits the monthly budget of {budget:,.2f} {self.currency}"
        cheapest = self.cheapest_over_budget
        if cheapest is None:
            return f"{within}, and no priced deployment meets the targets at any cost"
        return f"{within}: the cheapest priced one that meets the targets is {cheapest.summary()}"

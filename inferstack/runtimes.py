"""The inference runtimes inferstack deploys: each runtime's identity and facts, in one place.

    from inferstack.runtimes import RUNTIME_FACTS
    RUNTIME_FACTS["triton"].health_path  # "/v2/health/ready"

One frozen `RuntimeFacts` entry per runtime, keyed by its id in `RUNTIME_FACTS`. The planner (which runtime serves an
engine, its artifact format, health path, metrics port, memory fraction and disk), the cold-start estimate (image
download, native build, warm-up, the install mode `auto` picks) and the bootstrap (images and pins, the native install,
the gateway's routes, the cache's deterministic routes, the metrics endpoint and the series the agents keep) read their
per-runtime facts from here; a new literal keyed by runtime ids elsewhere fails `tests/test_runtimes.py`. Pure Python:
no Pulumi, no pydantic.

What stays outside, and why:

- each runtime's command line, and what its native server refuses, is code: one function per runtime in
  `inferstack/bootstrap/runtimes.py`, found by the runtime's entry (`COMMANDS`);
- how fast an engine runs is the speed model's, keyed by engine (`sizing/efficiency.py`), and which engines the
  planner plans is its `PLANNABLE_ENGINES`;
- the programs that run on the server (`bootstrap/files/`) cannot import inferstack: llama-cpp-python's wrapper
  (`llamacpp_server.py`) and boot.sh's install steps stay there;
- what each pinned runtime exposes on /metrics is the tests' evidence, read from the runtime's source:
  `tests/data/runtime_metric_names.json`.

Adding a runtime (TensorRT-LLM, an encoder-decoder server):

1. its id in the `Runtime` Literal and one `RuntimeFacts` entry below: the engines it serves (`spec.Engine` values),
   its artifact format and health path (in the `ArtifactFormat` and `HealthPath` Literals, which every plan is checked
   against), images, native install (or None), routes, metrics and figures, each outside fact with its source;
2. its command line: a function in `inferstack/bootstrap/runtimes.py` and its `RuntimeCommand` in `COMMANDS`;
3. its engine in the planner's `PLANNABLE_ENGINES` and a speed profile in `sizing/efficiency.py`;
4. the names its /metrics exposes in `tests/data/runtime_metric_names.json` (its `key_metrics` must be among them);
5. its tests: its variants in the golden boot scripts (`tests/bootstrap/test_bootstrap_render.py` SHAPES, then
   UPDATE_GOLDEN=1), the gateway's routes (`tests/bootstrap/test_gateway.py`), its cold start
   (`tests/sizing/test_coldstart.py`); `tests/test_runtimes.py` says what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

Runtime = Literal["vllm", "llamacpp", "triton"]
"""The runtimes inferstack deploys; each one's facts are its entry in RUNTIME_FACTS."""
ArtifactFormat = Literal["safetensors", "gguf", "onnx"]
HealthPath = Literal["/health", "/v2/health/ready"]
Backend = Literal["onnxruntime", "openvino"]
"""The backend a Triton server runs the model on."""
Device = Literal["cpu", "gpu"]
Mode = Literal["container", "native"]
"""How the bootstrap installs a runtime: its pinned container image, or pip into a venv on the host."""


class Duration(NamedTuple):
    """A figure of the cold-start estimate, with where it comes from."""

    seconds: int
    basis: str


class NativeInstall(NamedTuple):
    """How a runtime installs without a container: pip into /opt/inferstack/venv on the host."""

    pip_requirement: str
    """What pip installs."""
    pip_distribution: str
    pip_version: str
    """The installed distribution and its version, as boot.sh checks them (an install is skipped when present)."""
    apt_packages: tuple[str, ...]
    """Debian/Ubuntu packages the install needs (compilers when pip builds from source)."""
    devices: tuple[Device, ...]
    """The servers it installs on."""
    program: str
    """What the venv's python3 runs: a module (`-m`), or where `shipped`, a program of inferstack/bootstrap/files/."""
    shipped: bool
    """Whether `program` is ours, carried by the bundle."""
    serves_metrics: bool
    """Whether the natively installed server has the runtime's Prometheus endpoint too."""
    install: Duration | None
    """How long the install takes, for the cold-start estimate (None: `auto` never installs it natively)."""


class RuntimeFacts(NamedTuple):
    """One runtime's identity and the facts about it that more than one place reads."""

    id: Runtime
    """What plans (`serving.runtime`), boot settings and messages call it."""
    display_name: str
    engines: tuple[str, ...]
    """The engines (`spec.Engine` values) whose plans it serves."""
    models_owner: str | None
    """What its OpenAI-compatible `/v1/models` answers as each model's `owned_by`, where that names it (a load test's
    `served_by`); None: it answers nothing that names it."""
    artifact_format: ArtifactFormat
    """The model files it loads (`plan.model.artifact_format`)."""
    image_gpu: str | None
    image_cpu: str | None
    """Its pinned container image for GPU and for CPU servers (None: it has no build for them)."""
    image_download_gb: float
    """Compressed bytes `docker pull` downloads for its image (cold start)."""
    disk_gib: int
    """Disk its container image or venv takes on the server (the planner's boot disk)."""
    native: NativeInstall | None
    """Its install without a container (None: container only)."""
    health_path: HealthPath
    """The route that answers 200 once the model is loaded: the boot's readiness check and the load balancer's health
    check (the gateway's one route without the API key)."""
    metrics_port: int | None
    """Where its Prometheus metrics are served, on loopback: a port of its own, or None: `/metrics` on each process's
    API port."""
    key_metrics: tuple[str, ...]
    """The few of its Prometheus series that say how loaded it is: the AWS agent turns only these into CloudWatch
    metrics (each one is billed)."""
    api_prefixes: tuple[str, ...]
    """The routes it serves to clients, as the gateway's nginx prefix locations (behind the key)."""
    cache_deterministic_prefixes: tuple[str, ...]
    """Routes whose answer depends on the request alone: the inference cache may keep their answers."""
    cache_completion_routes: tuple[str, ...]
    """Completion routes, whose answers the cache keeps when the request is deterministic: temperature 0 (greedy
    decoding) and a single choice."""
    warmup_s: int
    """From its process start to its first answer, beyond reading the weights, on a server that has never run it
    (its compile and kernel caches empty)."""
    warmup_cached_s: int
    """The same where its caches are on the disk already: a baked image, or a warm-pool server that served before."""
    warmup_basis: str
    """Where both figures come from."""
    streams_weights: bool
    """Whether it streams the weights from the bucket into GPU memory itself (workload `startup.model_loading:
    stream`): vLLM with the Run:ai Model Streamer (`--load-format runai_streamer`)."""
    spans_servers: bool
    """Whether it serves one model across several servers (`plan.replica_nodes`): vLLM, pipeline parallel on a Ray
    cluster of the replica's servers (bootstrap/replica.py)."""
    gpu_memory_fraction: float | None
    """The share of each GPU's memory it takes (`serving.gpu_memory_utilization`); None: what it needs."""
    backend_gpu: Backend | None
    backend_cpu: Backend | None
    """The backend it runs the model on, on GPU and on CPU servers (`serving.backend`; None: its own)."""

    def image(self, device: str) -> str | None:
        return self.image_gpu if device == "gpu" else self.image_cpu

    def backend(self, device: str) -> Backend | None:
        return self.backend_gpu if device == "gpu" else self.backend_cpu

    @property
    def native_devices(self) -> tuple[Device, ...]:
        return self.native.devices if self.native else ()

    def auto_mode(self, device: str, processes: int) -> Mode:
        """The install mode `install_mode: auto` picks: its container, but natively for a CPU plan of several processes
        where it installs natively on CPUs (only systemd binds each process to its NUMA node)."""
        if device == "cpu" and processes > 1 and "cpu" in self.native_devices:
            return "native"
        return "container"


VLLM = RuntimeFacts(
    id="vllm",
    display_name="vLLM",
    engines=("vllm",),
    models_owner="vllm",  # its OpenAI-compatible server (vllm/entrypoints/openai/serving_models.py)
    artifact_format="safetensors",
    # vLLM v0.12.0: tag seen on Docker Hub (vllm/vllm-openai:v0.12.0); the PyPI wheel of the same version ships
    # CUDA kernels, so native mode needs only a driver.
    image_gpu="vllm/vllm-openai:v0.12.0",
    image_cpu=None,
    # "the image is around 12 GB" to pull (vllm-project/vllm#27154, 2025-10-18); on disk "vllm-openai:latest docker
    # image: 28.6 GB" (vllm-project/vllm#22377, 2025-08-06): 26.6 GiB, rounded up.
    image_download_gb=12,
    disk_gib=30,  # container image on disk
    native=NativeInstall(
        pip_requirement="vllm==0.12.0", pip_distribution="vllm", pip_version="0.12.0",
        apt_packages=("python3-venv",), devices=("gpu",),
        program="vllm.entrypoints.openai.api_server", shipped=False,
        serves_metrics=True, install=None),
    # A FastAPI GET route (vllm/entrypoints/serve/instrumentator/health.py).
    health_path="/health",
    metrics_port=None,  # /metrics on its API port
    # Its Prometheus gauges: requests running and queued, KV cache use (vllm 0.12.0's wheel,
    # vllm/v1/metrics/loggers.py; vllm:gpu_cache_usage_perc, the KV gauge's old name, was removed in 0.12.0 by
    # vllm-project/vllm#29330).
    key_metrics=("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"),
    api_prefixes=("/v1/",),
    cache_deterministic_prefixes=("/v1/embeddings", "/v1/classify", "/v1/score", "/v1/rerank"),
    cache_completion_routes=("/v1/completions", "/v1/chat/completions"),
    # Llama-3.1-8B on one L40S, start-up by phase (Tensorfuse, "Reducing GPU Cold Start Time when using vLLM",
    # tensorfuse.io/docs/blogs/reducing_gpu_cold_start, 2025-09-01): Dynamo 10 s + graph compilation 42 s + graph
    # capture 54 s + engine init and imports 94 s = 200 s beside 33 s of weight loading; with /root/.cache kept
    # (torch.compile, Triton and FlashInfer caches) 10 + 13 + 7 + 34 = 64 s. One published 8B breakdown: on an
    # H100 NVL vLLM 0.24 reached /health in 86.6 s cold and 28.8 s with its kernel cache prebuilt
    # (vllm-project/vllm#47456, 2026-07-06), so the figures are an L40S's, high for faster GPUs.
    warmup_s=200,
    warmup_cached_s=64,
    warmup_basis="Llama-3.1-8B on L40S (Tensorfuse 2025-09-01)",
    # The image bundles runai-model-streamer (vllm-project/vllm#26464, merged before v0.12.0, and setup.py's `runai`
    # extra, runai-model-streamer[s3,gcs]; not checked in the v0.12.0 image itself): without it the runtime fails
    # to start, and the boot with it (docs/cold-start.md).
    streams_weights=True,
    spans_servers=True,
    gpu_memory_fraction=0.9,  # vLLM's default --gpu-memory-utilization
    backend_gpu=None,
    backend_cpu=None,
)
LLAMACPP = RuntimeFacts(
    id="llamacpp",
    display_name="llama.cpp",
    engines=("llamacpp",),
    # llama-server's handle_models (tools/server); llama-cpp-python's server answers "me", which names nothing.
    models_owner="llamacpp",
    artifact_format="gguf",
    # Server images from ggml-org (build b9603; `server-cuda12-b9603` seen on the package page, CPU tag follows the
    # documented `server-<build>` naming). `auto` runs llama.cpp's own llama-server on CPUs too: it serves the plan's
    # slots at once (`-np`, continuous batching), where llama-cpp-python's server serves one request at a time (one
    # lock per model, llama_cpp/server/app.py), so only the container gives the capacity the plan counts. A CPU plan
    # with several processes still runs natively (`auto_mode`: NUMA binding), each process one request at a time.
    image_gpu="ghcr.io/ggml-org/llama.cpp:server-cuda12-b9603",
    image_cpu="ghcr.io/ggml-org/llama.cpp:server-b9603",
    # The CUDA server image (assumption); the CPU image is smaller and the CUDA image's figure is kept, an upper bound.
    image_download_gb=2,
    disk_gib=2,  # container image / venv on disk
    # llama-cpp-python builds llama.cpp from the PyPI source distribution (CPU only; a CUDA build needs the CUDA
    # toolkit, use container mode on GPUs). Its server has no metrics endpoint, and the wrapper adds the health route.
    native=NativeInstall(
        pip_requirement="llama-cpp-python[server]==0.3.16", pip_distribution="llama_cpp_python",
        pip_version="0.3.16", apt_packages=("python3-venv", "python3-dev", "build-essential"), devices=("cpu",),
        program="llamacpp_server.py", shipped=True,
        serves_metrics=False,
        # pip builds llama.cpp from source: 3-4 min on 2 cores (measured in the end-to-end test, docs/bootstrap.md).
        install=Duration(240, "pip builds llama.cpp (measured, 2 cores)")),
    health_path="/health",
    metrics_port=None,  # /metrics on its API port (llama-server --metrics)
    # llama-server's (--metrics): requests in progress and deferred (gauges), tokens generated (a counter written with
    # its _total). tools/server/server-context.cpp, the same at builds b9538 and b9713 either side of the pinned b9603
    # (read in xllamacpp's source packages, which bundle llama.cpp; the b9603 tree itself not read).
    key_metrics=("llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:tokens_predicted_total"),
    api_prefixes=("/v1/",),
    cache_deterministic_prefixes=("/v1/embeddings",),
    cache_completion_routes=("/v1/completions", "/v1/chat/completions"),
    warmup_s=0,  # starts in seconds
    warmup_cached_s=0,
    warmup_basis="starts in seconds",
    streams_weights=False,
    spans_servers=False,
    gpu_memory_fraction=None,
    backend_gpu=None,
    backend_cpu=None,
)
TRITON = RuntimeFacts(
    id="triton",
    display_name="Triton",
    engines=("onnxruntime",),
    models_owner=None,  # its KServe v2 API has no /v1/models
    artifact_format="onnx",
    # Triton 25.10 (CUDA 13.0; data-center GPUs also run on R535+ drivers). The same image serves CPU-only hosts and
    # carries both the ONNX Runtime and OpenVINO backends.
    image_gpu="nvcr.io/nvidia/tritonserver:25.10-py3",
    image_cpu="nvcr.io/nvidia/tritonserver:25.10-py3",
    image_download_gb=12,  # assumption
    disk_gib=20,  # container image on disk
    native=None,  # container-only in practice: NVIDIA ships no distro packages or wheels of the server
    health_path="/v2/health/ready",
    metrics_port=8002,  # tritonserver's default --metrics-port
    # Its counters: successful and failed inferences, queue time (triton-inference-server/core r25.10, src/metrics.cc).
    key_metrics=("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_queue_duration_us"),
    api_prefixes=("/v2/models/",),
    cache_deterministic_prefixes=("/v2/models/",),
    cache_completion_routes=(),
    warmup_s=0,  # starts in seconds
    warmup_cached_s=0,
    warmup_basis="starts in seconds",
    streams_weights=False,
    spans_servers=False,
    gpu_memory_fraction=None,
    backend_gpu="onnxruntime",
    backend_cpu="openvino",
)

RUNTIME_FACTS: Mapping[str, RuntimeFacts] = {facts.id: facts for facts in (VLLM, LLAMACPP, TRITON)}
"""Every runtime inferstack deploys, by id. Keyed by `str`, so that a name not yet checked can be looked up."""


def runtime_for_engine(engine: str) -> RuntimeFacts:
    """The runtime that serves plans of `engine` (a `spec.Engine` value)."""
    for facts in RUNTIME_FACTS.values():
        if engine in facts.engines:
            return facts
    raise ValueError(f"no runtime serves engine {engine!r}: add it to a RuntimeFacts entry's engines")

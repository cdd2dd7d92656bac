"""How the bootstrap installs and starts each inference runtime: the install mode, and each runtime's command line.

What each runtime is (images and pins, native install, routes, metrics) is its entry in `inferstack.runtimes`; what
is code stays here: the install mode a plan gets (`resolve_mode`) and each runtime's command line, with what its native
server refuses (`COMMANDS`, one `RuntimeCommand` per runtime).

The runtime never faces the network and never sees the API key: it listens on 127.0.0.1:RUNTIME_PORT (in a
container, published on the host's loopback only), runs as the unprivileged user RUNTIME_USER, and the gateway
(nginx, `gateway.py`) in front of it checks the key and exposes only the inference API and the health path.

Pins are tags and package versions, not digests: a digest cannot be verified offline here. To pin digests,
resolve each tag once on a machine with registry access and replace the tag with `name@sha256:…`:

    docker buildx imagetools inspect vllm/vllm-openai:v0.12.0 --format '{{json .Manifest.Digest}}'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan
from inferstack.runtimes import LLAMACPP, RUNTIME_FACTS, TRITON, VLLM, Device, Mode, NativeInstall, RuntimeFacts

RUNTIME_PORT = 18000
"""Where the runtime listens, on the host's loopback only; the gateway forwards to it. A plan with several model
processes per server puts process i (1..N) on RUNTIME_PORT + i instead (`runtime_processes`)."""
SERVER_UNIT = "inferstack-server"
"""The runtime's systemd unit (and container) name; process i of several is SERVER_UNIT-i."""
RUNTIME_USER = "inferstack"
"""The unprivileged system user the runtime runs as (created at boot; no login, no sudo)."""
RUNTIME_HOME = "/var/lib/inferstack-runtime"
"""That user's home: the runtime's caches (compiled kernels, hub downloads). Nothing else is writable to it."""

# NVIDIA packages from their official apt repositories (used only when the image lacks them).
NVIDIA_DRIVER_BRANCH = "580"
"""Ubuntu's `nvidia-headless-580-server` branch: current datacenter branch (535/565/570-server now point to it)."""
NVIDIA_CONTAINER_TOOLKIT_VERSION = "1.17.8-1"
"""NVIDIA Container Toolkit v1.17.8 (2025-05-30), apt version string of libnvidia-container's stable repo."""
DOCKER_VERSION_PIN = "5:28"
"""Docker Engine 28.x from download.docker.com: the apt pin is `5:28.*` (the full version differs per release)."""


def resolve_mode(plan: DeploymentPlan, requested: str) -> Mode:
    """The install mode for `plan`: the requested one when the runtime supports it there, else a clear error."""
    mode = _mode(plan, requested)
    refuse_natively = COMMANDS[plan.serving.runtime].refuse_natively
    if mode == "native" and refuse_natively is not None:
        refuse_natively(plan, requested)
    return mode


def _mode(plan: DeploymentPlan, requested: str) -> Mode:
    facts = RUNTIME_FACTS[plan.serving.runtime]
    device: Device = plan.device
    if requested == "auto":
        return facts.auto_mode(device, plan.serving.processes)
    if requested == "native" and device not in facts.native_devices:
        supported = " and ".join(facts.native_devices) or "no"
        raise input_error(
            "options.install_mode", f"{plan.serving.runtime} has no native install on {device} servers "
            f"(native supports {supported} servers)", value=requested, fix="use install_mode='container' or 'auto'")
    if requested == "container" and facts.image(device) is None:
        raise input_error("options.install_mode", f"{plan.serving.runtime} has no container image for {device}",
                          value=requested, fix="use install_mode='native' or 'auto'")
    mode: Mode = "native" if requested == "native" else "container"
    if mode == "container" and device == "cpu" and plan.serving.processes > 1:
        raise input_error(
            "options.install_mode", f"container mode cannot bind each of the {plan.serving.processes} processes to "
            "its NUMA node (systemd's NUMAMask= and CPUAffinity= reach the docker client, not the container)",
            value=requested, fix="use install_mode='native' or 'auto' for CPU plans with several processes")
    return mode


def image_for(plan: DeploymentPlan) -> str:
    image = RUNTIME_FACTS[plan.serving.runtime].image(plan.device)
    if image is None:
        raise input_error("plan.serving.runtime", f"{plan.serving.runtime} does not run on {plan.device} servers",
                          value=plan.serving.runtime, fix="plan a GPU server for vLLM")
    return image


def native_install(plan: DeploymentPlan) -> NativeInstall:
    """The runtime's install without a container (`resolve_mode` refuses native mode for a runtime without one)."""
    native = RUNTIME_FACTS[plan.serving.runtime].native
    if native is None:
        raise ValueError(f"{plan.serving.runtime} has no native install")
    return native


#### Processes ####


@dataclass(frozen=True)
class RuntimeProcess:
    """One model process on the server: its unit, its loopback port and what it is pinned to."""

    name: str
    """Unit name without `.service`, and the container's name."""
    port: int
    gpus: tuple[int, ...] = ()
    """CUDA device indexes it sees (CUDA_VISIBLE_DEVICES); empty: every GPU of the server."""
    numa_node: int | None = None
    """The NUMA node whose cores and memory it is bound to (CPU plans with several processes)."""


def runtime_processes(plan: DeploymentPlan) -> list[RuntimeProcess]:
    """The model processes of `plan` on each server: one on RUNTIME_PORT, or N on the next N ports, each on its own
    `tensor_parallel` GPUs or on its own NUMA node. Names and ports derive from the bounded `serving.processes`.
    Several processes never reuse the one-process unit's name or port, so neither collides with the other."""
    serving = plan.serving
    if serving.processes == 1:
        return [RuntimeProcess(SERVER_UNIT, RUNTIME_PORT)]
    tp = serving.tensor_parallel
    return [
        RuntimeProcess(
            f"{SERVER_UNIT}-{index + 1}", RUNTIME_PORT + index + 1,
            gpus=tuple(range(index * tp, (index + 1) * tp)) if plan.device == "gpu" else (),
            numa_node=index if plan.device == "cpu" else None)
        for index in range(serving.processes)
    ]


#### Command lines ####
# Each returns the runtime's arguments: literal words, and `Env` references to settings known only on the server
# (the model's place on disk, written by the sync to /etc/inferstack/model.env). The unit renders them as systemd
# command-line words: no shell ever reads them.


@dataclass(frozen=True)
class Env:
    """A reference to an environment variable of the service, expanded by systemd as one word: `${NAME}`."""

    name: Literal["MODEL_DIR", "MODEL_FILE", "TRITON_REPO", "MODEL_ROOT", "RUNTIME_UID", "RUNTIME_GID", "REPLICA_SELF",
                  "REPLICA_HEAD"]


Word = str | Env | tuple[str | Env, ...]
"""A command-line word: literal text, a variable, or both joined (`--model-repository=${TRITON_REPO}`)."""

_VLLM_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def listen_host(mode: Mode) -> str:
    """Loopback natively; inside a container every interface of the container, published on the host's loopback."""
    return "127.0.0.1" if mode == "native" else "0.0.0.0"


def vllm_args(plan: DeploymentPlan, mode: Mode, port: int = RUNTIME_PORT) -> list[Word]:
    serving = plan.serving
    # A replica's head runs on the host's network (its Ray node and NCCL reach the other servers): loopback there.
    host = "127.0.0.1" if plan.replica_nodes else listen_host(mode)
    args: list[Word] = [
        "--model", Env("MODEL_DIR"), "--served-model-name", plan.model.name, "--host", host,
        "--port", str(port), "--tensor-parallel-size", str(serving.tensor_parallel),
        "--dtype", _VLLM_DTYPES.get(serving.dtype, "auto")]
    if plan.replica_nodes:  # the Ray executor over the replica's servers (RAY_ADDRESS: this server's Ray node)
        args += ["--distributed-executor-backend", "ray", "--pipeline-parallel-size", str(serving.pipeline_parallel)]
    if serving.max_model_len:
        args += ["--max-model-len", str(serving.max_model_len)]
    if serving.max_num_seqs:
        args += ["--max-num-seqs", str(serving.max_num_seqs)]
    if serving.gpu_memory_utilization:
        args += ["--gpu-memory-utilization", str(serving.gpu_memory_utilization)]
    if serving.quantization and serving.quantization != "gguf":
        args += ["--quantization", serving.quantization]
    if serving.kv_cache_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if plan.startup.model_loading == "stream":
        # The Run:ai Model Streamer reads the safetensors from the bucket straight into GPU memory; --model is then
        # s3://bucket/prefix/ (boot.sh writes it as MODEL_DIR), the documented form ("Loading models with Run:ai Model
        # Streamer", docs.vllm.ai, 0.6.6 to stable: `vllm serve s3://core-llm/Llama-3-8b --load-format
        # runai_streamer`). vLLM pulls the small files (config, tokenizer) of an s3:// model into a local directory
        # with the streamer's own client (transformers_utils/runai_utils.py ObjectStorageModel.pull_files, read in
        # the API docs of 0.10.2 and 0.15.0; the v0.12.0 page of that module not read). Its credentials, concurrency
        # and the metadata server's refusal come from the container's environment (render.py container_command).
        args += ["--load-format", "runai_streamer"]
    if serving.max_answer_tokens:
        # A cap on every request's max_tokens: vLLM merges --override-generation-config into its default sampling
        # parameters, max_new_tokens becoming max_tokens (ModelConfig.get_diff_sampling_param), and each request gets
        # the least of its own max_tokens, the context left and that default (entrypoints/utils.py get_max_tokens;
        # the cap since vllm-project/vllm#12242, v0.7.1). The JSON argument's dotted form keeps the word free of
        # quotes and braces: "--json-arg.key1 value1" is "--json-arg '{"key1": value1}'", the value read as JSON
        # (FlexibleArgumentParser.parse_args). Read 2026-12-07 in vLLM's source of the 0.11-0.12 line, whose parser
        # still warns that --model goes in v0.13; the v0.12.0 tree itself not read.
        args += ["--override-generation-config.max_new_tokens", str(serving.max_answer_tokens)]
    return args


def llamacpp_server_args(plan: DeploymentPlan, mode: Mode, port: int = RUNTIME_PORT) -> list[Word]:
    """llama.cpp's own `llama-server` (container images). Context is shared by the parallel slots."""
    serving = plan.serving
    slots = serving.max_num_seqs or 1
    args: list[Word] = ["-m", Env("MODEL_FILE"), "--alias", plan.model.name, "--host", listen_host(mode),
                        "--port", str(port), "-np", str(slots), "--metrics"]  # Prometheus /metrics, for the agent
    if serving.max_model_len:
        args += ["-c", str(serving.max_model_len * slots)]
    if serving.threads:
        args += ["-t", str(serving.threads)]
    if plan.device == "gpu":
        args += ["-ngl", "999"]
    if serving.max_answer_tokens:
        # -n: the server's n_predict; a request asking more is cut to it ("n_predict = %d exceeds server
        # configuration, setting to %d", tools/server/server-context.cpp launch_slot_with_task), and one asking none
        # gets it as its default (params_from_json). Read 2026-12-07 in llama.cpp's server sources around the pinned
        # build (the fix of that warning's text, ggml-org/llama.cpp#11839, 2025-02); the b9603 tree itself not read.
        args += ["-n", str(serving.max_answer_tokens)]
    return args


def llamacpp_python_args(plan: DeploymentPlan, mode: Mode, port: int = RUNTIME_PORT) -> list[Word]:
    """llama-cpp-python's OpenAI-compatible server (native mode); it serves one sequence at a time."""
    serving = plan.serving
    args: list[Word] = ["--model", Env("MODEL_FILE"), "--model_alias", plan.model.name, "--host", listen_host(mode),
                        "--port", str(port)]
    if serving.max_model_len:
        args += ["--n_ctx", str(serving.max_model_len)]
    if serving.threads:
        args += ["--n_threads", str(serving.threads)]
    return args


def llamacpp_args(plan: DeploymentPlan, mode: Mode, port: int = RUNTIME_PORT) -> list[Word]:
    """llama-server in its container; llama-cpp-python natively."""
    if mode == "native":
        return llamacpp_python_args(plan, mode, port)
    return llamacpp_server_args(plan, mode, port)


def triton_args(plan: DeploymentPlan, mode: Mode, port: int = RUNTIME_PORT) -> list[Word]:
    serving = plan.serving
    args: list[Word] = ["tritonserver", ("--model-repository=", Env("TRITON_REPO")), f"--http-port={port}",
                        "--allow-grpc=false"]
    if serving.metrics_port:
        args.append(f"--metrics-port={serving.metrics_port}")
    return args


#### Each runtime's command ####


def refuse_llamacpp_python(plan: DeploymentPlan, requested: str) -> None:
    """What llama-cpp-python's server (llama.cpp's native install) cannot serve, refused naming the fix."""
    if plan.serving.max_answer_tokens:
        # llama-cpp-python's server takes each request's max_tokens as it comes (its settings have no server-side
        # cap; llama_cpp/server/settings.py, verify): the load balancer would cut the longer answers instead.
        raise input_error("plan.serving.max_answer_tokens", "is a cap llama.cpp's native install (llama-cpp-python) "
                          "cannot enforce, and the load balancer would cut longer answers",
                          value=plan.serving.max_answer_tokens,
                          fix="use install_mode='container' (llama-server, which caps answers with -n), or plan "
                          "with one process per server")
    slots = plan.serving.max_num_seqs or 1
    if slots > 1:
        # The plan's capacity counts its slots at once; llama-cpp-python would serve them one after another.
        served = (f"llama.cpp's native install (llama-cpp-python) serves one request at a time per process, and the "
                  f"plan counts {slots} at once (serving.max_num_seqs)")
        if plan.serving.processes == 1 and requested == "native":
            raise input_error("options.install_mode", served, value=requested,
                              fix="use install_mode='container' or 'auto' (llama-server, which serves the slots)")
        # Several CPU processes run natively in every mode (NUMA binding): the plan is what does not fit.
        raise input_error("plan.serving.max_num_seqs", f"{served}, and its {plan.serving.processes} processes run "
                          "natively (only systemd binds each to its NUMA node)", value=slots,
                          fix="plan it again: the planner sizes each of several CPU processes at one request")


class RuntimeCommand(NamedTuple):
    """How the bootstrap starts one runtime: its command line in an install mode, and the plans its native server
    cannot serve (raises InputError; None: it serves what its container serves)."""

    runtime: RuntimeFacts
    args: Callable[[DeploymentPlan, Mode, int], list[Word]]
    refuse_natively: Callable[[DeploymentPlan, str], None] | None = None


COMMANDS: Mapping[str, RuntimeCommand] = {command.runtime.id: command for command in (
    RuntimeCommand(VLLM, vllm_args),
    RuntimeCommand(LLAMACPP, llamacpp_args, refuse_natively=refuse_llamacpp_python),
    RuntimeCommand(TRITON, triton_args),
)}
"""Every runtime's command, by runtime id (`tests/test_runtimes.py`: one per entry of RUNTIME_FACTS)."""


def server_args(plan: DeploymentPlan, mode: Mode, port: int = RUNTIME_PORT) -> list[Word]:
    return COMMANDS[plan.serving.runtime].args(plan, mode, port)

"""Render a plan into what a server boots from: small cloud-init user data, and a bundle in the model bucket.

The user data carries only what fetching the bundle needs: the settings (`bootstrap.env`, with the bundle's key
and sha256), the cloud-access module, the loader and the boot unit. Everything else (the boot phases, the model
sync, the secret fetch, the runtime and gateway units, the gateway's configuration) is the **bundle**: one JSON
document, stored content-addressed in the model bucket by the components and checked against the sha256 in the
user data before a byte of it is written. This keeps every variant's user data far below the smallest limit
(EC2: 16 KiB), whatever the bundle grows to, and an unchanged plan renders the same bytes (no replacement).

Pure: same inputs, same bytes. No plan or option value reaches a shell: values in `bootstrap.env` match one
strict pattern (and boot.sh reads them as data, never sources them); command lines are systemd words built from
typed values (`unit_word`), never shell text; comments carry no user text.
"""

from __future__ import annotations

import ast
import base64
import functools
import gzip
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import yaml

from inferstack.bootstrap import gateway, interruption, replica, telemetry
from inferstack.bootstrap.options import BootstrapOptions, bucket_problem
from inferstack.bootstrap.runtimes import (
    DOCKER_VERSION_PIN,
    NVIDIA_CONTAINER_TOOLKIT_VERSION,
    NVIDIA_DRIVER_BRANCH,
    RUNTIME_HOME,
    RUNTIME_USER,
    Env,
    RuntimeProcess,
    Word,
    image_for,
    native_install,
    resolve_mode,
    runtime_processes,
    server_args,
)
from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan
from inferstack.runtimes import RUNTIME_FACTS, Mode
from inferstack.sizing.coldstart import STREAM_CONCURRENCY

LIB_DIR = "/usr/local/lib/inferstack"
CONFIG_DIR = "/etc/inferstack"
UNIT_DIR = "/etc/systemd/system"
SECRETS_DIR = "/run/inferstack-secrets"
"""Root-only (0700): secrets fetched at each start. systemd reads them for a unit (EnvironmentFile=, as root)."""
SERVER_SECRETS = f"{SECRETS_DIR}/server.env"
RUNTIME_CREDENTIALS = f"{SECRETS_DIR}/runtime-credentials.env"
"""A streaming runtime's own credentials (the model reader role's, STS AssumeRole at each start of its unit): read by
the docker client (root) with `--env-file`, never on a command line."""
HUB_TOKEN_ENV = "HF_TOKEN"  # read by huggingface_hub (vLLM) and llama.cpp for downloads from the Hugging Face Hub
VENV = "/opt/inferstack/venv"
CONTAINER_HOME = "/home/inferstack"
SYNC_WORKERS = 16
READY_TIMEOUT_S = 1800
"""How long the boot waits for the health endpoint once the service starts (large models load for minutes)."""
BUNDLE_PREFIX = "inferstack/bootstrap/"
"""Where bundles live in the model bucket; the server's identity may read this prefix (and the model's)."""
BUNDLE_FORMAT = "inferstack-bundle/1"
AWS_LAUNCH_HOOK = "inferstack-boot"
"""The launch lifecycle hook of an AWS group with a warm pool (components/aws/fleet.py): it holds each new server until
the boot completes its action (boot.sh), so that a server prepared for the pool stops only once prepared. Hook names
are unique per group only, so one fixed name serves every group."""

# Every value in bootstrap.env matches this (typed upstream; checked again here, as a renderer's invariant).
_ENV_VALUE = re.compile(r"[A-Za-z0-9._:/@+=,\[\]-]*")
# A systemd command-line word needs no quoting, specifier or variable escape when it matches this.
_UNIT_WORD = re.compile(r"[A-Za-z0-9._:/@+=,-]+")

EC2_USER_DATA_LIMIT_BYTES = 16384
"""EC2 user data limit, raw bytes before base64 (the smallest of the four clouds)."""


@dataclass(frozen=True)
class FileSpec:
    path: str
    content: str
    permissions: str


@dataclass(frozen=True)
class RenderedBootstrap:
    """What a server boots from: `user_data` (cloud-config) and the `bundle` to store at `bundle_key`."""

    user_data: str
    bundle: str
    """JSON text: {"format", "files": [{"path", "mode", "content"}]}; its sha256 is in the user data."""
    bundle_key: str
    """Object key in the model bucket: BUNDLE_PREFIX + sha256 + ".json" (content-addressed)."""
    bundle_sha256: str


def package_file(name: str) -> str:
    return resources.files("inferstack.bootstrap").joinpath("files", name).read_text(encoding="utf-8")


@functools.cache  # pure, and parsing on every render is slow
def shipped_copy(name: str) -> str:
    """A program from files/ as the server gets it: the same code without comments and docstrings."""
    source = package_file(name)
    note = f"# inferstack {name}; commented source: inferstack/bootstrap/files/{name}"
    if name.endswith(".py"):
        return f"#!/usr/bin/env python3\n{note}\n{ast.unparse(_without_docs_and_hints(ast.parse(source)))}\n"
    if name.endswith(".sh"):
        shebang, *rest = source.splitlines()
        kept = [line for line in rest if line.strip() and not
                (line.lstrip().startswith("#") and "shellcheck" not in line)]
        return "\n".join([shebang, note, *kept]) + "\n"
    return source


def _without_docs_and_hints(tree: ast.Module) -> ast.Module:
    """Drops docstrings and function annotations (dataclass field annotations stay: they declare the fields)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            kept = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                                                 and isinstance(n.value.value, str))]
            node.body = kept or [ast.Pass()]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            for argument in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                             node.args.vararg, node.args.kwarg]:
                if argument is not None:
                    argument.annotation = None
    return tree


#### Checks ####


def _check_inputs(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions) -> None:
    """What the types alone cannot say: the plan's cloud, the bucket's grammar there, a format the runtime serves."""
    if plan.cloud != cloud:
        raise input_error("cloud", f"does not match the plan's cloud {plan.cloud!r}", value=cloud,
                          fix=f"render the plan for {plan.cloud!r}, or plan for {cloud!r}")
    problem = bucket_problem(cloud, options.model_bucket, "options.model_bucket")
    if problem:
        raise input_error(problem.field, problem.message, value=problem.value, fix=problem.fix)
    if options.cache is not None and plan.cache is None:
        raise input_error("options.cache", "is given for a plan without a cache", value=options.cache.host,
                          fix="plan a workload with a `cache:` block, or leave the cache endpoint out")
    expected_format = RUNTIME_FACTS[plan.serving.runtime].artifact_format
    if plan.model.artifact_format != expected_format:
        raise input_error("plan.model.artifact_format", f"{plan.serving.runtime} cannot serve this format",
                          value=plan.model.artifact_format, fix=f"use {expected_format} files")
    _check_streaming(plan, cloud, options)
    _check_replica(plan, options)


def _check_replica(plan: DeploymentPlan, options: BootstrapOptions) -> None:
    """A replica across servers needs its members' addresses, as many as its servers, all different; they are refused
    for a plan whose replica is one server."""
    if plan.replica_nodes is None:
        if options.replica is not None:
            raise input_error("options.replica", "is given for a plan whose replica is one server",
                              value=options.replica.head, fix="leave the replica's members out")
        return
    members = options.replica
    nodes = plan.replica_nodes.nodes
    if members is None:
        raise input_error("options.replica", f"is missing: each replica spans {nodes} servers, whose addresses the "
                          "boot needs", value=None, fix="give the head's and the workers' private addresses")
    addresses = [members.head, *members.workers]
    if len(addresses) != nodes or len(set(addresses)) != nodes:
        raise input_error("options.replica", f"names {len(set(addresses))} different server(s) for a replica of "
                          f"{nodes}", value=",".join(addresses), fix=f"give {nodes} different addresses, head first")
    if plan.fleet is not None:
        raise input_error("plan.fleet", "is a fleet of replicas across servers, which is not built: the boot takes one "
                          "replica's fixed member addresses", value=plan.fleet.max_replicas,
                          fix="render one replica (a validation plan) until fleets of such replicas exist")
    if streams(plan):
        raise input_error("plan.startup.model_loading", "streams the weights, which a replica across servers does not: "
                          "its GPU workers run in the Ray nodes' containers, which get no credentials of their own",
                          value="stream", fix="plan with startup.model_loading: download")
    if not RUNTIME_FACTS[plan.serving.runtime].spans_servers or plan.device != "gpu":
        raise input_error("plan.serving.runtime", f"spans servers, which {plan.serving.runtime} on {plan.device} "
                          "servers does not do (vLLM on GPU servers does, on Ray)", value=plan.serving.runtime,
                          fix="plan again: the planner splits vLLM replicas only")


def streams(plan: DeploymentPlan) -> bool:
    """Whether the runtime streams the weights from the bucket itself (`plan.startup.model_loading`)."""
    return plan.startup.model_loading == "stream"


def _check_streaming(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions) -> None:
    """A streaming plan needs a cloud and runtime that stream, and the reader role it hands the runtime; the role is
    refused elsewhere (nothing would use it)."""
    if not streams(plan):
        if options.model_reader_role is not None:
            raise input_error("options.model_reader_role", "is given for a plan whose runtime does not stream the "
                              "weights (plan.startup.model_loading is download)", value=options.model_reader_role,
                              fix="leave the reader role out, or plan with startup.model_loading: stream")
        return
    if not CLOUD_FACTS[cloud].model_streaming:
        raise input_error("plan.startup.model_loading", f"streams the weights, which is built on AWS only, not on "
                          f"{cloud}", value="stream", fix="plan again: the planner downloads the weights there")
    if not (RUNTIME_FACTS[plan.serving.runtime].streams_weights and plan.device == "gpu"):
        raise input_error("plan.startup.model_loading", f"streams the weights, which {plan.serving.runtime} on "
                          f"{plan.device} servers does not do (vLLM on GPUs does)", value="stream",
                          fix="plan again: the planner downloads the weights for this runtime")
    if options.model_reader_role is None:
        raise input_error("options.model_reader_role", "is missing: a runtime that streams the weights gets the "
                          "credentials of a role that may only read the model's prefix, never the instance's",
                          value=None, fix="give the reader role's ARN (components/aws/identity.py creates it)")


def _check_streaming_mode(plan: DeploymentPlan, mode: Mode) -> None:
    """Streaming runs in the container only: its credentials reach the runtime by docker's --env-file, and the
    runtime's own environment is the container's (a native unit's environment is readable to the runtime's user)."""
    if streams(plan) and mode != "container":
        raise input_error("options.install_mode", "cannot stream the weights natively: the runtime's own credentials "
                          "are handed to its container only", value=mode,
                          fix="use install_mode='container' or 'auto', or plan with startup.model_loading: download")


#### systemd ####


def unit_word(word: Word) -> str:
    """One systemd command-line word. Literal text must need no quoting (a renderer bug otherwise: every value is
    typed upstream); `Env` becomes `${NAME}`, which systemd replaces by the variable's value as one word."""
    parts = word if isinstance(word, tuple) else (word,)
    rendered = []
    for part in parts:
        if isinstance(part, Env):
            rendered.append(f"${{{part.name}}}")
        elif _UNIT_WORD.fullmatch(part):
            rendered.append(part)
        else:
            raise ValueError(f"not a safe systemd word: {part!r}")
    return "".join(rendered)


def command_line(words: Sequence[Word]) -> str:
    return " ".join(unit_word(word) for word in words)


def shell_line(words: Sequence[Word]) -> str:
    """The same command for bash: each word double-quoted, `Env` as `${NAME}` (the variable's value, one word). A
    literal part holds none of the characters bash expands inside double quotes (`unit_word` refuses them)."""
    return " ".join(f'"{unit_word(word)}"' for word in words)


def unit_file(sections: dict[str, list[tuple[str, str]]]) -> str:
    return "\n".join(f"[{name}]\n" + "".join(f"{key}={value}\n" for key, value in settings)
                     for name, settings in sections.items())


# systemd-run(1): the command as a transient unit of its own, waited for (its exit status is systemd-run's), its
# output this unit's (--pipe), the unit unloaded even when it fails (--collect).
OWN_UNIT = ("/usr/bin/systemd-run", "--quiet", "--wait", "--pipe", "--collect")


def fetch_secret_command(cloud: Cloud, options: BootstrapOptions, secrets: dict[str, str], out: str,
                         file_format: str, own_unit: bool = False) -> str:
    """The secret fetch, as root; `own_unit` runs it outside the calling unit's control group, whose IP filter would
    refuse it the metadata server (where it reads the instance's credentials)."""
    words: list[Word] = [*OWN_UNIT] if own_unit else []
    words += ["/usr/bin/python3", f"{LIB_DIR}/fetch_secret.py", "--cloud", cloud, "--region", options.region]
    for env_name, secret in secrets.items():
        words += ["--secret", f"{env_name}={secret}"]
    words += ["--out", out, "--format", file_format]
    if options.secret_endpoint:
        words += ["--endpoint", options.secret_endpoint]
    if options.metadata_endpoint:
        words += ["--metadata-endpoint", options.metadata_endpoint]
    return "+" + command_line(words)  # "+": as root, outside the unit's user and sandbox


def runtime_credentials_command(options: BootstrapOptions, role_arn: str) -> str:
    """A streaming runtime's credentials, fetched as root at each start of its unit: STS AssumeRole of the model's
    reader role with the instance's credentials (only root reaches the metadata server), written to
    RUNTIME_CREDENTIALS (files/cloud_access.py runtime_credentials)."""
    words: list[Word] = ["/usr/bin/python3", f"{LIB_DIR}/cloud_access.py", "runtime-credentials",
                         "--region", options.region, "--role-arn", role_arn, "--out", RUNTIME_CREDENTIALS]
    if options.metadata_endpoint:
        words += ["--metadata-endpoint", options.metadata_endpoint]
    return "+" + command_line(words)  # "+": as root, outside the unit's sandbox


def unprivileged_run(name: str) -> list[Word]:
    """The start of every `docker run` of ours: the container `name`, removed when it ends, as the runtime user, with
    no capabilities and no way to gain privileges."""
    return ["/usr/bin/docker", "run", "--rm", "--name", name, "--init",
            ("--user=", Env("RUNTIME_UID"), ":", Env("RUNTIME_GID")), "--cap-drop=ALL",
            "--security-opt=no-new-privileges", "--ulimit", "memlock=-1"]


def container_command(plan: DeploymentPlan, process: RuntimeProcess, *, hub_token: bool) -> list[Word]:
    """`docker run` of the runtime: as the runtime user, no capabilities, published on the host's loopback only
    (`hub_token`: with the Hugging Face token from the unit's environment)."""
    port = process.port
    words = unprivileged_run(process.name)
    if plan.replica_nodes:  # a replica's head: the host's network for Ray and NCCL (vLLM listens on loopback there)
        words += ["--network=host", "-v", f"{replica.RAY_DIR}:{replica.CONTAINER_RAY_DIR}",
                  "-e", ("RAY_ADDRESS=", Env("REPLICA_HEAD"), f":{replica.RAY_PORTS['gcs']}"),
                  "-e", ("VLLM_HOST_IP=", Env("REPLICA_HEAD"))]
    else:
        words += ["-p", f"127.0.0.1:{port}:{port}"]
        if plan.serving.metrics_port:  # the agent's, local
            words += ["-p", f"127.0.0.1:{plan.serving.metrics_port}:{plan.serving.metrics_port}"]
    if plan.device == "gpu":
        words += ["--gpus", "all", "--ipc=host"]
    if process.gpus:  # every GPU is mapped; the process uses its own (docker's --gpus list needs shell quoting)
        words += ["-e", f"CUDA_VISIBLE_DEVICES={_device_list(process.gpus)}"]
    if hub_token:
        words += ["-e", HUB_TOKEN_ENV]  # the value comes from the unit's environment, never from this line
    if streams(plan):
        # The reader role's credentials from a root-only file (server_unit writes it at each start), never the
        # instance's: the AWS SDK of the streamer looks no further (its metadata lookup is off, and the metadata
        # server refuses containers anyway: boot.sh phase_metadata_firewall).
        words += ["--env-file", RUNTIME_CREDENTIALS, "-e", f"RUNAI_STREAMER_CONCURRENCY={STREAM_CONCURRENCY}",
                  "-e", "AWS_EC2_METADATA_DISABLED=true"]
    words += ["-e", f"HOME={CONTAINER_HOME}", "-e", f"USER={RUNTIME_USER}",
              "-v", f"{RUNTIME_HOME}:{CONTAINER_HOME}", "-v", (Env("MODEL_ROOT"), ":", Env("MODEL_ROOT"), ":ro"),
              image_for(plan)]
    return words + server_args(plan, "container", port)


def native_command(plan: DeploymentPlan, process: RuntimeProcess) -> list[Word]:
    native = native_install(plan)
    program = [f"{LIB_DIR}/{native.program}"] if native.shipped else ["-m", native.program]
    return [f"{VENV}/bin/python3", *program, *server_args(plan, "native", process.port)]


def _device_list(indexes: Sequence[int]) -> str:
    return ",".join(str(index) for index in indexes)


def _pinning(process: RuntimeProcess, container: bool) -> list[tuple[str, str]]:
    """A native process's own GPUs or NUMA node (its cores and its memory: systemd.exec(5), `CPUAffinity=numa`
    takes the CPUs of NUMAMask=). A container's GPUs are set on its command line."""
    settings = []
    if process.gpus and not container:
        settings.append(("Environment", f"CUDA_VISIBLE_DEVICES={_device_list(process.gpus)}"))
    if process.numa_node is not None:
        settings += [("NUMAPolicy", "bind"), ("NUMAMask", str(process.numa_node)), ("CPUAffinity", "numa")]
    return settings


def server_unit(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions, mode: Mode,
                process: RuntimeProcess) -> str:
    """The unit of one runtime process: unprivileged, its secrets (the hub token) fetched as root at each start."""
    container = mode == "container"
    processes = plan.serving.processes
    what = f"{plan.serving.runtime} ({mode})" + (f", process {process.name} of {processes}" if processes > 1 else "")
    unit = [("Description", f"inferstack inference runtime: {what}"),
            ("Wants", "network-online.target"),
            ("After", "network-online.target docker.service" if container else "network-online.target"),
            ("ConditionPathExists", f"{CONFIG_DIR}/model.env")]
    if container:
        unit.append(("Requires", "docker.service"))
    if plan.replica_nodes:  # a replica's head: vLLM joins this server's Ray node
        unit += [("Requires", f"{replica.RAY_UNIT}-head.service"), ("After", f"{replica.RAY_UNIT}-head.service")]
    service = [("Type", "exec")]
    if not container:
        service += [("User", RUNTIME_USER), ("Group", RUNTIME_USER), ("Environment", f"HOME={RUNTIME_HOME}"),
                    ("WorkingDirectory", RUNTIME_HOME)]
    service.append(("EnvironmentFile", f"{CONFIG_DIR}/model.env"))
    if plan.replica_nodes:
        service.append(("EnvironmentFile", replica.REPLICA_ENV))
    service += _pinning(process, container)
    # The host's metadata rules are gone after a reboot: the server never starts without them.
    service.append(("ExecStartPre", f"+{LIB_DIR}/boot.sh --phase metadata_firewall"))
    if options.hub_token_secret:
        # IPAddressDeny= filters every process of the unit, ExecStartPre= ones too: natively, the fetch runs apart.
        service += [("EnvironmentFile", f"-{SERVER_SECRETS}"),
                    ("ExecStartPre", fetch_secret_command(cloud, options, {HUB_TOKEN_ENV: options.hub_token_secret},
                                                          SERVER_SECRETS, "env", own_unit=not container))]
    if streams(plan) and options.model_reader_role:
        service.append(("ExecStartPre", runtime_credentials_command(options, options.model_reader_role)))
    if plan.replica_nodes:  # every worker joined first: vLLM places its pipeline's stages on them
        service += [("ExecStartPre", f"-/usr/bin/docker rm -f {replica.RAY_UNIT}-gate"),
                    ("ExecStartPre", command_line(ray_container(plan, f"{replica.RAY_UNIT}-gate", "python3",
                                                                replica.gate_command(plan, LIB_DIR), node=False)))]
    if container:
        service += [("ExecStartPre", f"-/usr/bin/docker rm -f {process.name}"),
                    ("ExecStart", command_line(container_command(plan, process,
                                                                 hub_token=bool(options.hub_token_secret)))),
                    ("ExecStop", f"/usr/bin/docker stop -t 30 {process.name}")]
    else:
        service.append(("ExecStart", command_line(native_command(plan, process))))
    start_timeout = 600 + (replica.GATE_TIMEOUT_S if plan.replica_nodes else 0)
    service += [("Restart", "on-failure"), ("RestartSec", "10"), ("TimeoutStartSec", str(start_timeout)),
                ("TimeoutStopSec", "60"), ("LimitNOFILE", "1048576"), ("LimitMEMLOCK", "infinity"),
                ("NoNewPrivileges", "yes"), ("PrivateTmp", "yes")]
    if not container:  # the docker client (root) talks to the daemon; the runtime process is sandboxed here
        service += [("ProtectSystem", "full"), ("ProtectHome", "yes"), ("CapabilityBoundingSet", ""),
                    ("RestrictSUIDSGID", "yes"), ("IPAddressDeny", " ".join(CLOUD_FACTS[cloud].metadata_addresses))]
    service.append(("SyslogIdentifier", process.name))
    return unit_file({"Unit": unit, "Service": service, "Install": [("WantedBy", "multi-user.target")]})


def ray_container(plan: DeploymentPlan, name: str, entrypoint: str, args: Sequence[Word], node: bool = True
                  ) -> list[Word]:
    """`docker run` of a program of the runtime's image beside a replica's Ray node (or, `node`, the node itself): on
    the host's network, as the runtime user with no capabilities, with Ray's session files and our programs
    (read-only); a node with the GPUs, the file limit NCCL and Ray want, and its own address for vLLM's GPU workers,
    which are its processes (vLLM's run_cluster.sh sets VLLM_HOST_IP on each node)."""
    node_words: list[Word] = ["--gpus", "all", "--ulimit", "nofile=1048576", "-e",
                              ("VLLM_HOST_IP=", Env("REPLICA_SELF"))] if node else []
    return [
        *unprivileged_run(name), "--network=host", *node_words, "--ipc=host",
        "-e", f"HOME={CONTAINER_HOME}", "-v", f"{RUNTIME_HOME}:{CONTAINER_HOME}",
        "-v", f"{replica.RAY_DIR}:{replica.CONTAINER_RAY_DIR}", "-v", f"{LIB_DIR}:{LIB_DIR}:ro",
        "-v", (Env("MODEL_ROOT"), ":", Env("MODEL_ROOT"), ":ro"), f"--entrypoint={entrypoint}", image_for(plan),
        *args]


def ray_unit(plan: DeploymentPlan, role: replica.Role) -> str:
    """This server's Ray node in a replica across servers: the head's, or a worker's. boot.sh starts the one its role
    names, after the model's sync, at every boot (no [Install]: a container started before the model's disk is
    mounted would never see the model; the model's config must be there to start). Its address, and the head's, come
    from the replica step's file."""
    name = f"{replica.RAY_UNIT}-{role}"
    unit = [("Description", f"inferstack Ray {role} of a replica across servers"),
            ("Wants", "network-online.target"), ("After", "network-online.target docker.service"),
            ("Requires", "docker.service"), ("ConditionPathExists", replica.REPLICA_ENV)]
    service = [("Type", "exec"), ("EnvironmentFile", f"{CONFIG_DIR}/model.env"),
               ("EnvironmentFile", replica.REPLICA_ENV),
               ("ExecStartPre", f"+{LIB_DIR}/boot.sh --phase metadata_firewall"),
               ("ExecStartPre", "+/usr/bin/install -d -o ${RUNTIME_UID} -g ${RUNTIME_GID} -m 0700 "
                                f"{replica.RAY_DIR}"),
               ("ExecStartPre", "/usr/bin/test -r ${MODEL_DIR}/config.json"),
               ("ExecStartPre", f"-/usr/bin/docker rm -f {name}"),
               ("ExecStart", command_line(ray_container(plan, name, "ray", replica.ray_command(role)))),
               ("ExecStop", f"/usr/bin/docker stop -t 30 {name}"),
               ("Restart", "on-failure"), ("RestartSec", "10"), ("TimeoutStartSec", "600"), ("TimeoutStopSec", "60"),
               ("NoNewPrivileges", "yes"), ("PrivateTmp", "yes"), ("SyslogIdentifier", name)]
    return unit_file({"Unit": unit, "Service": service})


def replica_watch_unit(plan: DeploymentPlan, options: BootstrapOptions) -> str:
    """The head's watch over its workers (`replica_watch.py`): it drains the gateway's health path while one does not
    answer on its Ray node-manager port. As root: only root makes or removes the flag."""
    assert options.replica is not None
    words: list[Word] = [
        "/usr/bin/python3", f"{LIB_DIR}/{replica.WATCHER}", "--workers", ",".join(options.replica.workers),
        "--port", str(replica.RAY_PORTS["node_manager"]), "--drain-flag", replica.DRAIN_FLAG,
        "--restart-unit", f"{runtime_processes(plan)[0].name}.service"]
    return unit_file({
        "Unit": [("Description", "inferstack replica watch: drains the head while a worker is lost"),
                 ("After", f"{replica.RAY_UNIT}-head.service")],
        "Service": [("Type", "exec"), ("ExecStart", command_line(words)), ("Restart", "always"), ("RestartSec", "5"),
                    ("RuntimeDirectory", "inferstack-replica"), ("RuntimeDirectoryMode", "0755"),
                    ("RuntimeDirectoryPreserve", "yes"),  # the flag outlives a restart of the watch
                    ("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                    ("PrivateTmp", "yes"), ("SyslogIdentifier", replica.WATCH_UNIT)],
        "Install": [("WantedBy", "multi-user.target")]})


def gateway_unit(cloud: Cloud, options: BootstrapOptions, runtimes: Sequence[str]) -> str:
    """nginx with our configuration; the API key is fetched into its root-only map file at each start.

    It stops gracefully, before the runtime: SIGQUIT is nginx's graceful shutdown (its workers finish the requests
    they hold, nginx.org "Controlling nginx"), and After= the runtime's units makes systemd stop the gateway first
    at shutdown, so a request in flight when the server goes down (a spot reclamation, a scale-in) is answered by a
    runtime that is still there."""
    service = [("Type", "exec")]
    if options.api_key_secret:
        service.append(("ExecStartPre", fetch_secret_command(cloud, options, {"API_KEY": options.api_key_secret},
                                                             gateway.KEY_MAP, "nginx-bearer-map")))
    if options.cache:  # the Redis AUTH token, read by nginx's master (root) before its workers start
        service.append(("ExecStartPre", fetch_secret_command(cloud, options, {"REDIS_AUTH": options.cache.auth_secret},
                                                             gateway.CACHE_AUTH_FILE, "env")))
    nginx = f"/usr/sbin/nginx -c {gateway.CONFIG_PATH}"
    service += [("ExecStartPre", f"{nginx} -t -q"), ("ExecStart", nginx), ("ExecReload", f"{nginx} -s reload"),
                ("KillSignal", "SIGQUIT"), ("Restart", "on-failure"), ("RestartSec", "5"),
                ("SyslogIdentifier", "inferstack-gateway")]
    after = " ".join(["network-online.target", *(f"{name}.service" for name in runtimes)])
    return unit_file({
        "Unit": [("Description", "inferstack gateway: API key, routes and streaming in front of the runtime"),
                 ("Wants", "network-online.target"), ("After", after)],
        "Service": service, "Install": [("WantedBy", "multi-user.target")]})


def interruption_unit(cloud: Cloud, options: BootstrapOptions) -> str:
    """The interruption watcher (bootstrap/interruption.py): as root, because only root may reach the metadata server
    (boot.sh, phase metadata_firewall), and with nothing else of root's: no capability, a read-only system but its
    drain directory, and no address but the metadata server's and loopback (a local DNS stub resolver is there)."""
    words: list[Word] = ["/usr/bin/python3", f"{LIB_DIR}/{interruption.WATCHER}", "--cloud", cloud,
                         "--drain-flag", interruption.DRAIN_FLAG]
    if options.metadata_endpoint:
        words += ["--metadata-endpoint", options.metadata_endpoint]
    addresses = " ".join(CLOUD_FACTS[cloud].metadata_addresses)
    return unit_file({
        "Unit": [("Description", "inferstack interruption watcher: drains the gateway on the cloud's spot "
                                 "interruption notice"),
                 ("Wants", "network-online.target"), ("After", "network-online.target")],
        "Service": [("Type", "exec"), ("ExecStart", command_line(words)), ("Restart", "always"), ("RestartSec", "5"),
                    # The drain flag's directory: root's, readable by the gateway's workers, kept when the watcher
                    # restarts (a drain outlives it; /run empties at the next boot).
                    ("RuntimeDirectory", interruption.DRAIN_DIR.removeprefix("/run/")),
                    ("RuntimeDirectoryMode", "0755"), ("RuntimeDirectoryPreserve", "yes"),
                    ("NoNewPrivileges", "yes"), ("CapabilityBoundingSet", ""), ("ProtectSystem", "strict"),
                    ("ProtectHome", "yes"), ("PrivateTmp", "yes"), ("PrivateDevices", "yes"),
                    ("ProtectKernelTunables", "yes"), ("ProtectKernelModules", "yes"),
                    ("ProtectControlGroups", "yes"), ("RestrictSUIDSGID", "yes"),
                    ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
                    ("IPAddressDeny", "any"), ("IPAddressAllow", f"localhost {addresses}"),
                    ("SyslogIdentifier", interruption.UNIT)],
        "Install": [("WantedBy", "multi-user.target")]})


def boot_unit() -> str:
    """Runs at every boot: the loader brings the bundle (when its sha256 changed), then boot.sh runs the phases."""
    return unit_file({
        "Unit": [("Description", "inferstack boot: bundle, GPU driver, runtime, gateway, model sync, readiness"),
                 ("Wants", "network-online.target"), ("After", "network-online.target cloud-final.service")],
        "Service": [("Type", "oneshot"), ("RemainAfterExit", "yes"),
                    ("ExecStartPre", f"/usr/bin/python3 {LIB_DIR}/fetch_bundle.py"),
                    ("ExecStart", f"{LIB_DIR}/boot.sh"), ("TimeoutStartSec", "infinity"),
                    ("SyslogIdentifier", "inferstack-boot")],
        "Install": [("WantedBy", "multi-user.target")]})


#### Settings ####


def bootstrap_env(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions, mode: Mode,
                  bundle_key: str, bundle_sha256: str) -> str:
    """Settings every boot program reads (no secret: only the secret's name)."""
    native = native_install(plan) if mode == "native" else None
    settings = {
        "INFERSTACK_CLOUD": cloud, "INFERSTACK_REGION": options.region, "DEVICE": plan.device,
        "RUNTIME": plan.serving.runtime, "INSTALL_MODE": mode, "PORT": str(plan.serving.port),
        "RUNTIME_UNITS": ",".join(f"{p.name}.service" for p in runtime_processes(plan)),
        "RUNTIME_PORTS": ",".join(str(p.port) for p in runtime_processes(plan)),
        "RUNTIME_USER": RUNTIME_USER, "RUNTIME_HOME": RUNTIME_HOME,
        "HEALTH_PATH": plan.serving.health_path, "MODEL_NAME": plan.model.name, "MODEL_BUCKET": options.model_bucket,
        "MODEL_PREFIX": plan.model.bucket_prefix, "MODEL_REVISION": plan.model.revision or "",
        "MODEL_FORMAT": plan.model.artifact_format,
        "BUNDLE_KEY": bundle_key, "BUNDLE_SHA256": bundle_sha256,
        "NVME_EXPECTED": "1" if plan.local_nvme_gb else "0", "SYNC_WORKERS": str(SYNC_WORKERS),
        "READY_TIMEOUT_S": str(READY_TIMEOUT_S), "STORAGE_ENDPOINT": options.storage_endpoint or "",
        "METADATA_ENDPOINT": options.metadata_endpoint or "",
        "METADATA_ADDRESSES": ",".join(CLOUD_FACTS[cloud].metadata_addresses),
        "TRITON_BACKEND": plan.serving.backend or "",
        "NVIDIA_DRIVER_BRANCH": NVIDIA_DRIVER_BRANCH,
        "NVIDIA_CONTAINER_TOOLKIT_VERSION": NVIDIA_CONTAINER_TOOLKIT_VERSION,
        "DOCKER_VERSION_PIN": DOCKER_VERSION_PIN,
        "RUNTIME_IMAGE": image_for(plan) if mode == "container" else "",
        "PIP_REQUIREMENT": native.pip_requirement if native else "",
        "PIP_DISTRIBUTION": native.pip_distribution if native else "",
        "PIP_VERSION": native.pip_version if native else "",
        "APT_PACKAGES": ",".join(native.apt_packages) if native else "",
    }
    if streams(plan):  # boot.sh: the runtime starts beside the sync; the gateway opens once the sync verified
        settings["MODEL_LOADING"] = "stream"
        settings["MODEL_READER_ROLE"] = options.model_reader_role or ""
    if cloud == "aws" and plan.fleet is not None and plan.startup.warm_pool is not None:
        settings["LIFECYCLE_HOOK"] = AWS_LAUNCH_HOOK  # boot.sh: prepare only for the pool, then complete the hook
    if options.replica:  # boot.sh's replica phase: which member this server is
        settings["REPLICA_HEAD"] = options.replica.head
        settings["REPLICA_WORKERS"] = ",".join(options.replica.workers)
        # a worker has joined its replica once its Ray node listens there (boot.sh)
        settings["RAY_NODE_MANAGER_PORT"] = str(replica.RAY_PORTS["node_manager"])
    if options.cache:  # the gateway's caching path: Debian's and Ubuntu's packages (gateway.CACHE_APT_PACKAGES)
        settings["GATEWAY_APT_PACKAGES"] = ",".join(gateway.CACHE_APT_PACKAGES)
    for key, value in settings.items():
        if not _ENV_VALUE.fullmatch(value):
            raise ValueError(f"bootstrap.env {key}={value!r} has characters outside {_ENV_VALUE.pattern}")
    lines = ["# inferstack settings, read as data (KEY=VALUE) by boot.sh and the loader; no secrets here."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


#### Bundle and user data ####


def bundle_files(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions, mode: Mode) -> list[FileSpec]:
    """Every file the loader writes from the bundle, in the order it writes them."""
    files = [
        FileSpec(f"{LIB_DIR}/boot.sh", shipped_copy("boot.sh"), "0755"),
        FileSpec(f"{LIB_DIR}/model_sync.py", shipped_copy("model_sync.py"), "0755"),
        FileSpec(f"{LIB_DIR}/fetch_secret.py", shipped_copy("fetch_secret.py"), "0755"),
    ]
    native = native_install(plan) if mode == "native" else None
    if native and native.shipped:  # a server program of our own (llama-cpp-python's, with its health route)
        files.append(FileSpec(f"{LIB_DIR}/{native.program}", shipped_copy(native.program), "0644"))
    if options.cache:
        files.append(FileSpec(f"{gateway.CACHE_LUA_DIR}/inferstack_cache.lua", shipped_copy("inferstack_cache.lua"),
                              "0644"))
        if options.cache.ca_certificate:
            files.append(FileSpec(gateway.CACHE_CA_FILE, options.cache.ca_certificate, "0644"))
    files += [
        FileSpec(gateway.CONFIG_PATH, gateway.gateway_config(plan, api_key=options.api_key_secret is not None,
                                                             mode=mode, group=options.group, cache=options.cache),
                 "0644"),
        *(FileSpec(f"{UNIT_DIR}/{process.name}.service", server_unit(plan, cloud, options, mode, process), "0644")
          for process in runtime_processes(plan)),
        FileSpec(f"{UNIT_DIR}/inferstack-gateway.service",
                 gateway_unit(cloud, options, [process.name for process in runtime_processes(plan)]), "0644"),
    ]
    if plan.replica_nodes:  # both Ray units (boot.sh starts its role's), the gate and the head's watch
        files += [FileSpec(f"{UNIT_DIR}/{replica.RAY_UNIT}-{role}.service", ray_unit(plan, role), "0644")
                  for role in ("head", "worker")]
        files += [FileSpec(f"{LIB_DIR}/{replica.GATE}", shipped_copy(replica.GATE), "0644"),
                  FileSpec(f"{LIB_DIR}/{replica.WATCHER}", shipped_copy(replica.WATCHER), "0755"),
                  FileSpec(f"{UNIT_DIR}/{replica.WATCH_UNIT}.service", replica_watch_unit(plan, options), "0644")]
    if interruption.watched(plan):  # a server that may run on spot capacity, on a cloud that posts a notice
        files += [FileSpec(f"{LIB_DIR}/{interruption.WATCHER}", shipped_copy(interruption.WATCHER), "0755"),
                  FileSpec(f"{UNIT_DIR}/{interruption.UNIT}.service", interruption_unit(cloud, options), "0644")]
    if options.telemetry:
        files += [FileSpec(*spec) for spec in telemetry.agent_files(plan, cloud, options.telemetry, mode)]
        files.append(FileSpec(f"{UNIT_DIR}/{telemetry.AGENT_UNIT}.service", telemetry.agent_unit(), "0644"))
    return files


def bundle_text(files: Sequence[FileSpec]) -> str:
    """The bundle as the loader reads it: deterministic JSON (same files, same bytes, same sha256)."""
    document = {"format": BUNDLE_FORMAT,
                "files": [{"path": f.path, "mode": f.permissions, "content": f.content} for f in files]}
    return json.dumps(document, indent=0, sort_keys=True, ensure_ascii=True) + "\n"


def loader_files(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions, mode: Mode,
                 bundle_key: str, bundle_sha256: str) -> list[FileSpec]:
    """What the user data writes: just enough to fetch and check the bundle, and the unit that starts it all."""
    return [
        FileSpec(f"{CONFIG_DIR}/bootstrap.env",
                 bootstrap_env(plan, cloud, options, mode, bundle_key, bundle_sha256), "0644"),
        FileSpec(f"{LIB_DIR}/cloud_access.py", shipped_copy("cloud_access.py"), "0644"),
        FileSpec(f"{LIB_DIR}/fetch_bundle.py", shipped_copy("fetch_bundle.py"), "0755"),
        FileSpec(f"{UNIT_DIR}/inferstack-boot.service", boot_unit(), "0644"),
    ]


class _LiteralDumper(yaml.SafeDumper):
    """Writes multi-line strings as `|` blocks, so the user data reads like the files it writes."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _represent_str)


def cloud_config(files: Sequence[FileSpec], header: str) -> str:
    document = {
        "write_files": [{"path": f.path, "owner": "root:root", "permissions": f.permissions, "content": f.content}
                        for f in files],
        # The boot service does the work (and runs again at every boot); cloud-init only starts it.
        "runcmd": [["systemctl", "daemon-reload"], ["systemctl", "enable", "inferstack-boot.service"],
                   ["systemctl", "start", "--no-block", "inferstack-boot.service"]],
    }
    return header + yaml.dump(document, Dumper=_LiteralDumper, sort_keys=False, width=1 << 16)


def render(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions) -> RenderedBootstrap:
    _check_inputs(plan, cloud, options)
    mode = resolve_mode(plan, options.install_mode)
    _check_streaming_mode(plan, mode)
    image_for(plan)  # a runtime that cannot run on this device fails here, with its reason
    bundle = bundle_text(bundle_files(plan, cloud, options, mode))
    sha256 = hashlib.sha256(bundle.encode()).hexdigest()
    key = f"{BUNDLE_PREFIX}{sha256}.json"
    header = (f"#cloud-config\n# inferstack bootstrap: {plan.serving.runtime} ({mode}) on {cloud} ({plan.device}).\n"
              "# Progress: journalctl -u inferstack-boot -f   Log: /var/log/inferstack/boot.log\n")
    user_data = cloud_config(loader_files(plan, cloud, options, mode, key, sha256), header)
    return RenderedBootstrap(user_data=user_data, bundle=bundle, bundle_key=key, bundle_sha256=sha256)


def user_data_gzip(user_data: str) -> bytes:
    """The user data gzip-compressed (deterministic bytes); cloud-init recognises and unpacks gzip itself."""
    return gzip.compress(user_data.encode("utf-8"), compresslevel=9, mtime=0)


def user_data_gzip_base64(user_data: str) -> str:
    """For `user_data_base64` (EC2, launch templates) or Alibaba/Huawei `user_data`: base64 of the gzip bytes."""
    return base64.b64encode(user_data_gzip(user_data)).decode("ascii")

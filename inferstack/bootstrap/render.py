"""Render a plan into cloud-init user data: files under /etc/inferstack and /usr/local/lib/inferstack, two
systemd units, and three runcmd lines that start the boot service. Pure: same inputs, same bytes.

The programs that run on the server live in `files/`; the user data carries them without comments and
docstrings (same code, fewer bytes). What varies per plan is `bootstrap.env`, `run-server.sh` and the server
unit. The text is plain, readable cloud-config (~50 KB); clouds with small user-data limits (EC2: 16 KiB,
Alibaba and Huawei: 32 KB) take it gzip-compressed, which cloud-init unpacks by itself: see
`user_data_gzip_base64`.
"""

from __future__ import annotations

import ast
import base64
import functools
import gzip
import re
import string
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import yaml

from inferstack.bootstrap.runtimes import (
    DOCKER_VERSION_PIN,
    NVIDIA_CONTAINER_TOOLKIT_VERSION,
    NVIDIA_DRIVER_BRANCH,
    RUNTIME_PINS,
    Mode,
    image_for,
    resolve_mode,
    server_args,
    shell_words,
)
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan
from inferstack.spec import Cloud

if TYPE_CHECKING:
    from inferstack.bootstrap import BootstrapOptions

LIB_DIR = "/usr/local/lib/inferstack"
CONFIG_DIR = "/etc/inferstack"
SECRETS_FILE = "/run/inferstack/secrets.env"
HUB_TOKEN_ENV = "HF_TOKEN"  # read by huggingface_hub (vLLM) and llama.cpp for downloads from the Hugging Face Hub
VENV = "/opt/inferstack/venv"
CONTAINER_NAME = "inferstack-server"
SYNC_WORKERS = 16
READY_TIMEOUT_S = 1800
"""How long the boot waits for the health endpoint once the service starts (large models load for minutes)."""

# Clouds whose instance metadata server demands no session token (the components' capability
# `metadata-hardening` is unsupported there): boot.sh lets only root reach its HTTP port (phase metadata_firewall).
METADATA_FIREWALL_CLOUDS: frozenset[Cloud] = frozenset({"gcp", "huawei"})

# Values go unquoted into a shell-sourced, systemd-read env file and into unit lines: allow only these.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9._:/@+=,\[\]-]*$")


@dataclass(frozen=True)
class FileSpec:
    path: str
    content: str
    permissions: str


EC2_USER_DATA_LIMIT_BYTES = 16384
"""EC2 user data limit, raw bytes before base64 (the smallest of the four clouds)."""


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


#### Validation ####


def _checked(field: str, value: str) -> str:
    if not _SAFE_VALUE.match(value):
        raise input_error(field, "contains characters that are unsafe in a boot script", value=value,
                          fix="use letters, digits and . _ : / @ + = , [ ] - only")
    return value


def _check_inputs(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions) -> None:
    if plan.cloud != cloud:
        raise input_error("cloud", f"does not match the plan's cloud {plan.cloud!r}", value=cloud,
                          fix=f"render the plan for {plan.cloud!r}, or plan for {cloud!r}")
    if not plan.model.bucket_prefix.endswith("/"):
        raise input_error("plan.model.bucket_prefix", "must end in '/'", value=plan.model.bucket_prefix,
                          fix=f"use {plan.model.bucket_prefix + '/'!r}")
    expected_format = {"vllm": ("safetensors",), "llamacpp": ("gguf",), "triton": ("onnx",)}[plan.serving.runtime]
    if plan.model.artifact_format not in expected_format:
        raise input_error("plan.model.artifact_format", f"{plan.serving.runtime} cannot serve this format",
                          value=plan.model.artifact_format, fix=f"use {' or '.join(expected_format)} files")
    for field, value in [("options.model_bucket", options.model_bucket), ("options.region", options.region),
                         ("options.api_key_secret", options.api_key_secret or ""),
                         ("options.hub_token_secret", options.hub_token_secret or ""),
                         ("options.storage_endpoint", options.storage_endpoint or ""),
                         ("options.secret_endpoint", options.secret_endpoint or ""),
                         ("options.metadata_endpoint", options.metadata_endpoint or ""),
                         ("plan.model.name", plan.model.name), ("plan.model.bucket_prefix", plan.model.bucket_prefix),
                         ("plan.serving.health_path", plan.serving.health_path)]:
        _checked(field, value)
    if not options.model_bucket:
        raise input_error("options.model_bucket", "is empty", value="", fix="pass the model bucket's name")


#### Files ####


def bootstrap_env(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions, mode: Mode) -> str:
    """Settings every boot program reads (no secret: only the secret's name)."""
    pin = RUNTIME_PINS[plan.serving.runtime]
    settings = {
        "INFERSTACK_CLOUD": cloud, "INFERSTACK_REGION": options.region, "DEVICE": plan.device,
        "RUNTIME": plan.serving.runtime, "INSTALL_MODE": mode, "PORT": str(plan.serving.port),
        "HEALTH_PATH": plan.serving.health_path, "MODEL_NAME": plan.model.name, "MODEL_BUCKET": options.model_bucket,
        "MODEL_PREFIX": plan.model.bucket_prefix, "MODEL_FORMAT": plan.model.artifact_format,
        "NVME_EXPECTED": "1" if plan.local_nvme_gb else "0", "SYNC_WORKERS": str(SYNC_WORKERS),
        "READY_TIMEOUT_S": str(READY_TIMEOUT_S), "STORAGE_ENDPOINT": options.storage_endpoint or "",
        "METADATA_ENDPOINT": options.metadata_endpoint or "",
        "METADATA_FIREWALL": "1" if cloud in METADATA_FIREWALL_CLOUDS else "0",
        "TRITON_BACKEND": plan.serving.backend or "",
        "NVIDIA_DRIVER_BRANCH": NVIDIA_DRIVER_BRANCH,
        "NVIDIA_CONTAINER_TOOLKIT_VERSION": NVIDIA_CONTAINER_TOOLKIT_VERSION,
        "DOCKER_VERSION_PIN": DOCKER_VERSION_PIN,
        "RUNTIME_IMAGE": image_for(plan) if mode == "container" else "",
        "PIP_REQUIREMENT": (pin.pip_requirement or "") if mode == "native" else "",
        "PIP_DISTRIBUTION": pin.pip_distribution if mode == "native" else "",
        "PIP_VERSION": pin.pip_version if mode == "native" else "",
        "APT_PACKAGES": ",".join(pin.apt_packages) if mode == "native" else "",
    }
    lines = [f"# inferstack: settings of {plan.workload} ({plan.summary()}); no secrets here."]
    lines += [f"{key}={value}" for key, value in settings.items()]  # user values checked in _check_inputs
    return "\n".join(lines) + "\n"


def run_server_script(plan: DeploymentPlan, mode: Mode) -> str:
    """The service's ExecStart: loads the API key (written by ExecStartPre), then execs the runtime."""
    runtime = plan.serving.runtime
    args = shell_words(server_args(plan, mode))
    key_env = RUNTIME_PINS[runtime].api_key_env[mode]
    lines = [
        "#!/bin/bash",
        f"# inferstack: starts {runtime} ({mode}) serving {plan.model.name} on port {plan.serving.port}.",
        "# Environment: /etc/inferstack/bootstrap.env and model.env (systemd EnvironmentFile=).",
        "set -euo pipefail",
        '[ -e "${MODEL_DIR:?}" ] || { echo "model not synced yet: $MODEL_DIR" >&2; exit 1; }',
    ]
    if mode == "native":
        program = {"llamacpp": f"{LIB_DIR}/llamacpp_server.py", "vllm": "-m vllm.entrypoints.openai.api_server"}
        lines += ["# shellcheck source=/dev/null",
                  f"if [ -f {SECRETS_FILE} ]; then set -a; . {SECRETS_FILE}; set +a; fi  # {key_env}, {HUB_TOKEN_ENV}",
                  f"exec {VENV}/bin/python3 {program[runtime]} {args}"]
        return "\n".join(lines) + "\n"
    ports = [plan.serving.port] + ([plan.serving.metrics_port] if plan.serving.metrics_port else [])
    lines += [f"docker rm -f {CONTAINER_NAME} >/dev/null 2>&1 || true",
              "options=(" + " ".join(f"-p {p}:{p}" for p in ports) + ")",
              f"[ -f {SECRETS_FILE} ] && options+=(--env-file {SECRETS_FILE})  # {key_env}, {HUB_TOKEN_ENV}"]
    if plan.device == "gpu":
        lines.append("options+=(--gpus all --ipc=host)")
    if runtime == "triton":
        # Triton has no API-key option: its restricted-API feature demands the key in an x-api-key header.
        lines += ["auth=()", "# shellcheck source=/dev/null",
                  f"if [ -f {SECRETS_FILE} ]; then . {SECRETS_FILE}; "
                  'auth=("--http-restricted-api=inference:x-api-key=${API_KEY}"); fi']
        args += ' "${auth[@]}"'
    lines += [f'exec docker run --rm --name {CONTAINER_NAME} --init --ulimit memlock=-1 "${{options[@]}}" \\',
              '    -v "${MODEL_ROOT}:${MODEL_ROOT}:ro" \\',
              f"    {image_for(plan)} {args}"]
    return "\n".join(lines) + "\n"


def service_secrets(plan: DeploymentPlan, options: BootstrapOptions, mode: Mode) -> dict[str, str]:
    """Environment variable → secret name, for the secrets the service fetches at each start."""
    secrets = {}
    if options.api_key_secret:
        secrets[RUNTIME_PINS[plan.serving.runtime].api_key_env[mode]] = options.api_key_secret
    if options.hub_token_secret:
        secrets[HUB_TOKEN_ENV] = options.hub_token_secret
    return secrets


def server_unit(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions, mode: Mode) -> str:
    runtime = plan.serving.runtime
    exec_start_pre = ""
    if cloud in METADATA_FIREWALL_CLOUDS:  # the rules are gone after a reboot; the server never starts without them
        exec_start_pre += f"ExecStartPre={LIB_DIR}/boot.sh --phase metadata_firewall\n"
    secrets = service_secrets(plan, options, mode)
    if secrets:
        command = [f"{LIB_DIR}/fetch_secret.py", "--cloud", cloud, "--region", options.region]
        for env_name, secret in secrets.items():
            command += ["--secret", f"{env_name}={secret}"]
        command += ["--out", SECRETS_FILE]
        if options.secret_endpoint:
            command += ["--endpoint", options.secret_endpoint]
        if options.metadata_endpoint:
            command += ["--metadata-endpoint", options.metadata_endpoint]
        exec_start_pre += f"ExecStartPre=/usr/bin/python3 {' '.join(command)}\n"
    container = mode == "container"
    return string.Template(package_file("inferstack-server.service.in")).substitute(
        description=f"{runtime} ({mode}) serving {plan.model.name}",
        after=" docker.service" if container else "",
        requires="Requires=docker.service\n" if container else "",
        exec_start_pre=exec_start_pre,
        exec_stop=f"ExecStop=/usr/bin/docker stop -t 30 {CONTAINER_NAME}\n" if container else "",
    )


def bootstrap_files(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions) -> list[FileSpec]:
    """Every file the user data writes, in the order cloud-init writes them."""
    _check_inputs(plan, cloud, options)
    mode = resolve_mode(plan, options.install_mode)
    image_for(plan)  # a runtime that cannot run on this device fails here, with its reason
    files = [
        FileSpec(f"{CONFIG_DIR}/bootstrap.env", bootstrap_env(plan, cloud, options, mode), "0644"),
        FileSpec(f"{LIB_DIR}/boot.sh", shipped_copy("boot.sh"), "0755"),
        FileSpec(f"{LIB_DIR}/cloud_access.py", shipped_copy("cloud_access.py"), "0644"),
        FileSpec(f"{LIB_DIR}/model_sync.py", shipped_copy("model_sync.py"), "0755"),
    ]
    if options.api_key_secret or options.hub_token_secret:
        files.append(FileSpec(f"{LIB_DIR}/fetch_secret.py", shipped_copy("fetch_secret.py"), "0755"))
    if mode == "native" and plan.serving.runtime == "llamacpp":
        files.append(FileSpec(f"{LIB_DIR}/llamacpp_server.py", shipped_copy("llamacpp_server.py"), "0644"))
    files += [
        FileSpec(f"{LIB_DIR}/run-server.sh", run_server_script(plan, mode), "0755"),
        FileSpec("/etc/systemd/system/inferstack-boot.service", package_file("inferstack-boot.service"), "0644"),
        FileSpec("/etc/systemd/system/inferstack-server.service", server_unit(plan, cloud, options, mode), "0644"),
    ]
    return files


#### cloud-config ####


class _LiteralDumper(yaml.SafeDumper):
    """Writes multi-line strings as `|` blocks, so the user data reads like the files it writes."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _represent_str)


def render_cloud_config(plan: DeploymentPlan, cloud: Cloud, options: BootstrapOptions) -> str:
    files = bootstrap_files(plan, cloud, options)
    mode = resolve_mode(plan, options.install_mode)
    document = {
        "write_files": [{"path": f.path, "owner": "root:root", "permissions": f.permissions, "content": f.content}
                        for f in files],
        # The boot service does the work (and runs again at every boot); cloud-init only starts it.
        "runcmd": [["systemctl", "daemon-reload"], ["systemctl", "enable", "inferstack-boot.service"],
                   ["systemctl", "start", "--no-block", "inferstack-boot.service"]],
    }
    header = (f"#cloud-config\n# inferstack bootstrap: {plan.serving.runtime} ({mode}) serving {plan.model.name} "
              f"on {cloud} ({plan.device}).\n# Progress: journalctl -u inferstack-boot -f   "
              "Log: /var/log/inferstack/boot.log\n")
    return header + yaml.dump(document, Dumper=_LiteralDumper, sort_keys=False, width=1 << 16)


def user_data_gzip(user_data: str) -> bytes:
    """The user data gzip-compressed (deterministic bytes); cloud-init recognises and unpacks gzip itself."""
    return gzip.compress(user_data.encode("utf-8"), compresslevel=9, mtime=0)


def user_data_gzip_base64(user_data: str) -> str:
    """For `user_data_base64` (EC2, launch templates) or Alibaba/Huawei `user_data`: base64 of the gzip bytes."""
    return base64.b64encode(user_data_gzip(user_data)).decode("ascii")

"""Pulumi stack files (`stacks/Pulumi.<stack>.yaml`) read as the Pulumi program reads them, for `inferstack pin` and
`inferstack diff`; and the one rule for every file a stack names: a relative path inside its Pulumi project.

A stack's workload is inline (`inferstack:workload`) or in a file (`inferstack:workloadFile`); it is sized on the
stack's cloud, in its provider's region, at its stage (`spec.for_stack`). The files a stack names
(workloadFile, planFile, pricesFile, a model's `config:`) are read from the project only: a stack's config is text
in a pull request, and a path to `/etc/...` or `../..` must not make `pulumi up` or a CI job read (and quote in an
error) a file of the machine it runs on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inferstack.documents import parse_document, read_input_file
from inferstack.errors import input_error
from inferstack.sizing.calibration import STACK_CALIBRATION_KEY, StackCalibration, read_stack_calibration
from inferstack.spec import (
    CLOUDS,
    PROVIDER_REGION_KEYS,
    STAGES,
    ModelSpec,
    WorkloadSpec,
    for_stack,
    load_workload,
    parse_workload,
)

STACK_WORKLOAD_KEY = "inferstack:workload"
STACK_WORKLOAD_FILE_KEY = "inferstack:workloadFile"
STACK_PRICES_FILE_KEY = "inferstack:pricesFile"
PROJECT_FILE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}){0,7}$"
PROJECT_FILE_RULE = ("must be a path relative to the Pulumi project, inside it: folders and a file name of letters, "
                     "digits, '.', '_' and '-', each starting with a letter or digit (no '/' at the start, no '..')")


def project_file(project_dir: Path, value: object, key: str) -> Path:
    """The file a stack names under `key`, inside the project: refused when the name could lead out (absolute, `..`,
    a hidden folder) or resolves outside it (a symbolic link). Whether it exists is the reader's check."""
    if not isinstance(value, str) or not re.fullmatch(PROJECT_FILE_PATTERN, value):
        raise input_error(key, PROJECT_FILE_RULE, value=value,
                          fix="copy the file into the project (the repository that holds Pulumi.yaml) and name it "
                          "from there, e.g. workloads/chat.yaml")
    path = project_dir / value
    if not path.resolve().is_relative_to(project_dir.resolve()):
        raise input_error(key, "leads outside the Pulumi project (a symbolic link)", value=value,
                          fix="commit the file itself in the project")
    return path


def confine_model_configs(spec: WorkloadSpec, project_dir: Path, key: str) -> WorkloadSpec:
    """`spec` unchanged, once each `model: {config: ...}` it names (the canary's too) is inside the project."""
    models: list[tuple[str, Any]] = [("model.config", spec.model)]
    if spec.canary is not None:
        models.append(("canary.model.config", spec.canary.model))
    root = project_dir.resolve()
    for field, model in models:
        config = model.config if isinstance(model, ModelSpec) else None
        if config is not None and not config.resolve().is_relative_to(root):
            raise input_error(f"{key}: {field}", "is outside the Pulumi project", value=str(config),
                              fix="commit the model's config.json in the project and name it relative to the workload")
    return spec


def is_stack_file(path: Path) -> bool:
    """Pulumi's name for a stack's config file: Pulumi.<stack>.yaml."""
    return path.name.startswith("Pulumi.") and path.suffix in (".yaml", ".yml") and path.name.count(".") >= 2


def project_dir_of(path: Path) -> Path:
    """The Pulumi project holding a stack file: the nearest folder above it with a Pulumi.yaml."""
    return next((d for d in path.resolve().parents if (d / "Pulumi.yaml").is_file()), path.resolve().parent)


def read_workload_file(path: Path) -> WorkloadSpec:
    """A workload file, or a Pulumi stack file (`stacks/Pulumi.<stack>.yaml`) with an inline workload."""
    if not path.is_file():
        return load_workload(path)  # raises its "file not found" error
    return spec_from_text(path.read_text(encoding="utf-8"), path, str(path))


ReadText = Callable[[Path], str]
"""Reads a file of the project: from the working tree (`read_project_text`), or as it was at a git commit (diff)."""


def read_project_text(path: Path) -> str:
    return read_input_file(path, field=STACK_WORKLOAD_FILE_KEY, what="a workload file",
                           example="examples/workloads/chat-8b-public.yaml")


def spec_from_text(text: str, path: Path, source: str, read: ReadText = read_project_text) -> WorkloadSpec:
    """The workload of a workload file's text, or of a stack file's (inline, or the file it names, read with `read`),
    sized as the stack sizes it."""
    data = parse_document(text, suffix=path.suffix, source=source)
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        return _stack_spec(data["config"], source, project_dir_of(path), read)
    return parse_workload(data, source=source, base_dir=path.parent)


def read_stack_workload(stack_file: Path) -> tuple[WorkloadSpec, Path | None]:
    """The workload a Pulumi stack file sizes (inline, or its inferstack:workloadFile) as the Pulumi program sizes
    it, and the stack's price-override file (inferstack:pricesFile)."""
    config = stack_config(stack_file)
    project_dir = project_dir_of(stack_file)
    spec = _stack_spec(config, str(stack_file), project_dir, read_project_text)
    prices = config.get(STACK_PRICES_FILE_KEY)
    return spec, None if prices is None else project_file(project_dir, prices, STACK_PRICES_FILE_KEY)


def _stack_spec(config: dict[str, Any], source: str, project_dir: Path, read: ReadText) -> WorkloadSpec:
    """The workload a stack sizes: inline, or in the workload file it names (read with `read`)."""
    workload_file = config.get(STACK_WORKLOAD_FILE_KEY)
    if STACK_WORKLOAD_KEY in config or workload_file is None:
        return _stack_workload(config, source, project_dir)
    path = project_file(project_dir, workload_file, STACK_WORKLOAD_FILE_KEY)
    shown = f"{source} ({STACK_WORKLOAD_FILE_KEY} {workload_file})"
    data = parse_document(read(path), suffix=path.suffix, source=shown)
    workload = parse_workload(data, source=str(path), base_dir=path.parent)
    return on_stack(confine_model_configs(workload, project_dir, STACK_WORKLOAD_FILE_KEY), config)


def read_stack_calibration_of(stack_file: Path) -> StackCalibration | None:
    """The calibration file a Pulumi stack file sizes with (inferstack:calibrationFile), None when it names none
    (or is a workload file named like a stack file)."""
    value = stack_config(stack_file, required=False).get(STACK_CALIBRATION_KEY)
    return None if value is None else read_stack_calibration(project_dir_of(stack_file), value)


def stack_config(stack_file: Path, *, required: bool = True) -> dict[str, Any]:
    """The `config:` mapping of a stack file."""
    text = read_input_file(stack_file, field="STACK", what="Pulumi stack file", example="stacks/Pulumi.aws-prod.yaml")
    data = parse_document(text, suffix=stack_file.suffix, source=str(stack_file), field="STACK")
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict) and not required:
        return {}
    if not isinstance(config, dict):
        raise input_error("STACK", "is not a Pulumi stack file: it has no config", value=str(stack_file),
                          fix="give a stack's config file, e.g. stacks/Pulumi.aws-prod.yaml")
    return config


def _stack_workload(config: dict[str, Any], source: str, project_dir: Path) -> WorkloadSpec:
    """The workload a stack gives inline, as the Pulumi program sizes it."""
    workload = config.get(STACK_WORKLOAD_KEY)
    if not isinstance(workload, dict):
        raise input_error(
            STACK_WORKLOAD_KEY,
            f"is not given in the stack file {source} (inline, or as {STACK_WORKLOAD_FILE_KEY})",
            fix="a stack that gives a plan (inferstack:plan, planFile) has no sizing to diff: its `pulumi preview` "
            "shows the change",
        )
    spec = parse_workload(workload, source=f"{source} ({STACK_WORKLOAD_KEY})", base_dir=project_dir)
    return on_stack(confine_model_configs(spec, project_dir, STACK_WORKLOAD_KEY), config)


def on_stack(spec: WorkloadSpec, config: dict[str, Any]) -> WorkloadSpec:
    """On the stack's cloud and region, at its stage (spec.for_stack), with the program's checks of those keys."""
    cloud, stage = config.get("inferstack:cloud"), config.get("inferstack:stage")
    if cloud not in CLOUDS:
        raise input_error("inferstack:cloud", f"is not one of {', '.join(CLOUDS)}" if cloud else "is not set",
                          value=cloud, fix="pulumi config set inferstack:cloud aws (one of aws, gcp, alibaba, huawei)")
    if stage is not None and stage not in STAGES:
        raise input_error("inferstack:stage", f"is not one of {', '.join(STAGES)}", value=stage)
    region = config.get(PROVIDER_REGION_KEYS[str(cloud)])
    return for_stack(spec, cloud, stage=stage, region=region if isinstance(region, str) else None)

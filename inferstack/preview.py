"""Offline preview: run a deployment program under Pulumi mocks and show what `pulumi up` would create.

No credentials, no Pulumi CLI, no cloud call. Every resource the program registers is recorded with its type,
name, parent, URN and inputs; the cloud backends answer with realistic ids, ARNs, addresses and lookups
(`CloudBackend.preview_outputs` / `preview_invoke`), so outputs that depend on them resolve as in a deployment. A
lookup of a resource the program created itself (your own VPC, brought to a component by id) is answered from that
resource (`ProgramAnswers`).

    result = preview_workload("chat.yaml", cloud="gcp", assets_domain="assets.example.com")
    # or preview_deployment(plan, config), preview_stack(config)
    print(result.render_tree())                    # or json.dumps(result.to_json())

    result = preview_program("examples/existing-repo", stack="dev")   # your own Pulumi program, in this process

Pulumi's mocks are process-global: each run replaces this process's Pulumi runtime settings (and restores the
stack config it changed). Never call it from inside a real `pulumi up` program.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from inferstack.clouds import Cloud
from inferstack.components.backend import PROVIDER_PACKAGES, CloudBackend, backend_for
from inferstack.components.capabilities import Capability
from inferstack.components.plan_source import size_workload
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan
from inferstack.pulumi_mocks import (
    STACK_TYPE,
    config_value,
    exporting,
    is_secret,
    run_under_mocks,
    unwrap_secret,
)
from inferstack.sizing.explain import rollout_line
from inferstack.spec import load_workload

T = TypeVar("T")

PROVIDER_TYPE_PREFIX = "pulumi:providers:"
SECRET_MARK = "[secret]"
SECRET_CONFIG_KEYS = ("inferstack:apiKey", "inferstack:hubToken")

#### What was registered ####


@dataclass(frozen=True)
class RegisteredResource:
    """One registration, as the engine would have received it."""

    urn: str
    type: str
    name: str
    parent: str | None
    """URN of the parent resource; None for a resource at the top of the stack."""
    custom: bool
    """True for a cloud resource, False for a component."""
    id: str
    raw_inputs: dict[str, Any]
    """Inputs in wire form: camelCase keys, secret values still wrapped."""
    outputs: dict[str, Any]
    protect: bool
    ignore_changes: tuple[str, ...]
    provider: str
    """Reference (`urn::id`) of the provider an explicit `provider`/`providers` option chose; "" for the default."""
    retain_on_delete: bool = False
    """Pulumi's `retain_on_delete`: the engine leaves the cloud resource in place when it replaces or deletes it."""

    @property
    def inputs(self) -> dict[str, Any]:
        """Inputs with secrets unwrapped (for tests that search them for a secret's value)."""
        unwrapped: dict[str, Any] = _transform_secrets(self.raw_inputs, unwrap_secret)
        return unwrapped

    @property
    def masked_inputs(self) -> dict[str, Any]:
        """Inputs with every secret replaced by "[secret]" (for display)."""
        masked: dict[str, Any] = _transform_secrets(self.raw_inputs, lambda _: SECRET_MARK)
        return masked

    def key_properties(self) -> str:
        """The scalar inputs worth a glance, e.g. `instanceType=g6.xlarge metadataOptions.httpTokens=required`."""
        return _key_inputs(self.masked_inputs) if self.custom else ""


@dataclass(frozen=True)
class Recording:
    """Everything one program run registered, and the resolved value the program returned."""

    resources: list[RegisteredResource]
    invokes: list[tuple[str, dict[str, Any]]]
    """Data-source lookups the program made: (token, arguments)."""
    value: Any

    def of_type(self, resource_type: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.type == resource_type]

    def named(self, name: str) -> RegisteredResource:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]

    def children(self, parent: RegisteredResource) -> list[RegisteredResource]:
        return [r for r in self.resources if r.parent == parent.urn]

    def descendants(self, ancestor: RegisteredResource) -> list[RegisteredResource]:
        found = []
        for child in self.children(ancestor):
            found += [child, *self.descendants(child)]
        return found


def resource_urn(stack: str, project: str, parent_urn: str, resource_type: str, name: str) -> str:
    """The engine's URN: the parent's type chain (the root stack excluded), this type, and the name.

    The parent's *name* is not part of it, which is why every child is named after its component.
    """
    qualified = resource_type
    if parent_urn:
        parent_chain = parent_urn.split("::")[2]
        if parent_chain != STACK_TYPE:
            qualified = f"{parent_chain}${resource_type}"
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def record(program: Callable[[], Any], *, config: Mapping[str, Any] | None = None, project: str = "inferstack",
           stack: str = "preview", answers: ProgramAnswers | None = None,
           secret_keys: Iterable[str] = SECRET_CONFIG_KEYS) -> Recording:
    """Run `program` under mocks with `config` as stack config; return what it registered and returned.

    `config` maps full keys ("inferstack:allowedCidrs", "aws:region") to values; structured values are
    stored as JSON, the way `pulumi config set --path` stores them; those of `secret_keys` are secrets. `answers`:
    how the cloud answers (the default: inferstack's own program, whose every type and lookup a backend knows).
    Exceptions from the program propagate.
    """
    answers = answers or ProgramAnswers()
    registrations, value = run_under_mocks(
        program, answers, urn=resource_urn, project=project, stack=stack,
        config={key: config_value(setting) for key, setting in (config or {}).items()},
        secret_keys=[key for key in secret_keys if key in (config or {})])
    resources = [RegisteredResource(
        urn=r.urn, type=r.type, name=r.name, parent=_parent(r.parent_urn), custom=r.custom, id=r.id,
        raw_inputs=r.wire_inputs, outputs=r.outputs, protect=r.protect, ignore_changes=r.ignore_changes,
        provider=r.provider, retain_on_delete=r.retain_on_delete) for r in registrations]
    return Recording(resources=resources, invokes=answers.invokes, value=value)


def _parent(parent_urn: str) -> str | None:
    """The parent's URN, or None for a resource at the top of the stack (the stack is not recorded)."""
    return parent_urn if parent_urn and parent_urn.split("::")[2] != STACK_TYPE else None


#### Preview of a stack ####


@dataclass(frozen=True)
class PreviewResult:
    """What `pulumi up` would create for a plan, in tree order, with the stack outputs it would export."""

    plan: DeploymentPlan
    resources: list[RegisteredResource]
    outputs: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    """What the preview left out or assumed, and how to include it."""

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan.model_dump(mode="json"),
            "resources": _resources_json(self.resources),
            "outputs": self.outputs,
            "notes": self.notes,
        }

    def render_tree(self) -> str:
        """A plain-text tree: type, name and key inputs of each resource, children indented under parents."""
        price = self.plan.price
        cost = f"{price.monthly_ranking or price.monthly}/month" if price.monthly else "price unknown"
        if price.monthly and price.monthly_ranking and price.monthly_ranking.currency != price.monthly.currency:
            cost += f" (billed in {price.monthly.currency}: {price.monthly}/month)"
        lines = [f"Plan: {self.plan.summary()}", f"Monthly cost estimate: {cost}", _resource_count(self.resources),
                 rollout_line(self.plan.rolling_update, self.plan.model.revision, self.plan.cloud)]
        return _report(lines, self.notes, self.resources, self.outputs)


def _resources_json(resources: list[RegisteredResource]) -> list[dict[str, Any]]:
    return [{"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "inputs": r.masked_inputs}
            for r in resources]


def _resource_count(resources: list[RegisteredResource]) -> str:
    return (f"Resources: {sum(r.custom for r in resources)} cloud resources in "
            f"{sum(not r.custom for r in resources)} components")


def _report(summary: list[str], notes: list[str], resources: list[RegisteredResource],
            outputs: Mapping[str, Any]) -> str:
    """A preview as text: the summary, the notes, a tree (type, name and key inputs of each resource, children
    indented under parents), and the stack outputs."""
    lines = [*summary, *(f"Note: {note}" for note in notes), ""]
    children: dict[str | None, list[RegisteredResource]] = {}
    for resource in resources:
        children.setdefault(resource.parent, []).append(resource)

    def walk(parent: str | None, indent: str) -> Iterator[str]:
        siblings = children.get(parent, [])
        for index, resource in enumerate(siblings):
            last = index == len(siblings) - 1
            details = resource.key_properties()
            yield f"{indent}{'└─ ' if last else '├─ '}{resource.type}  {resource.name}" + (
                f"  {details}" if details else "")
            yield from walk(resource.urn, indent + ("   " if last else "│  "))

    lines += walk(None, "")
    lines += ["", "Stack outputs:"] + [f"  {key}: {json.dumps(value)}" for key, value in outputs.items()]
    return "\n".join(lines)


PREVIEW_API_DOMAIN = "api.example.com"
"""The endpoint domain a fleet's preview uses when none is given (a reserved example domain, RFC 2606)."""


def preview_workload(workload: str | Path, *, cloud: Cloud, prices_file: str | Path | None = None,
                     config: Mapping[str, Any] | None = None, assets_domain: str | None = None,
                     assets_certificate: str | None = None, api_domain: str | None = None,
                     api_certificate: str | None = None) -> PreviewResult:
    """`inferstack preview WORKLOAD --cloud C`: size the workload file for one cloud, then preview that plan.

    `config` is stack config by full key (`inferstack:allowedCidrs`, `gcp:project`); `assets_domain`,
    `assets_certificate`, `api_domain` and `api_certificate` are the stack's `inferstack:assetsDomain`,
    `inferstack:assetsCertificate`, `inferstack:apiDomain` and `inferstack:apiCertificate`.
    """
    given = {"inferstack:assetsDomain": assets_domain, "inferstack:assetsCertificate": assets_certificate,
             "inferstack:apiDomain": api_domain, "inferstack:apiCertificate": api_certificate}
    config = {**(config or {}), **{key: value for key, value in given.items() if value is not None}}
    prices = Path(prices_file) if prices_file is not None else None
    plan = size_workload(load_workload(workload), cloud, field=str(workload), prices_file=prices)
    return preview_deployment(plan, config)


def preview_deployment(plan: DeploymentPlan, config: Mapping[str, Any] | None = None, *,
                       stack: str = "preview") -> PreviewResult:
    """Preview `plan` as the stack program would deploy it; `config` adds stack config (allowedCidrs, ids ...).

    The plan's cloud and region become the stack's `inferstack:cloud` and provider region. On a cloud whose CDN
    needs a domain, a config that names none and says nothing of static assets previews without them, and the
    result's notes say so (a deployment would refuse, asking for the domain).
    """
    backend = backend_for(plan.cloud)
    stack_config = {"inferstack:cloud": plan.cloud, backend.region_config_key: plan.region,
                    "inferstack:plan": plan.model_dump(mode="json"), **(config or {})}
    notes = []
    if _static_assets_need_a_domain(backend, stack_config):
        stack_config["inferstack:staticAssets"] = False
        hostname = backend.support(Capability.CDN_DEFAULT_HOSTNAME).note
        certificate = " --assets-certificate <id>" if backend.assets_certificate else ""
        notes.append(f"static assets left out: on {backend.display_name} they need a domain ({hostname}); preview "
                     f"them with --assets-domain assets.example.com{certificate}")
    if plan.fleet is not None and backend.support(Capability.MANAGED_FLEET).available and \
            "inferstack:apiDomain" not in stack_config:
        stack_config["inferstack:apiDomain"] = PREVIEW_API_DOMAIN
        notes.append(f"the plan is a fleet behind one HTTPS endpoint, which needs a domain: previewed with "
                     f"{PREVIEW_API_DOMAIN} (give yours with --api-domain; a deployment without one refuses)")
    rule = backend.api_certificate
    if plan.fleet is not None and backend.support(Capability.MANAGED_FLEET).available and rule is not None and \
            not rule.issued_without and "inferstack:apiCertificate" not in stack_config:
        stack_config["inferstack:apiCertificate"] = rule.example
        notes.append(f"the endpoint's certificate: previewed with {rule.example} ({rule.kind}; give yours with "
                     "--api-certificate; a deployment without one refuses)")
    result = preview_stack(stack_config, stack=stack)
    return PreviewResult(plan=result.plan, resources=result.resources, outputs=result.outputs, notes=notes)


def _static_assets_need_a_domain(backend: CloudBackend, config: Mapping[str, Any]) -> bool:
    unspoken = "inferstack:staticAssets" not in config and "inferstack:assetsDomain" not in config
    return unspoken and not backend.support(Capability.CDN_DEFAULT_HOSTNAME).available


def preview_stack(config: Mapping[str, Any], *, stack: str = "preview") -> PreviewResult:
    """Run the project's program (`inferstack.components.program`) for this stack config under mocks."""
    from inferstack.components.program import deploy, read_stack_config  # program imports the components

    deployments = []

    def program() -> Mapping[str, Any]:
        deployment = deploy(read_stack_config())
        deployments.append(deployment)
        return deployment.exports  # Outputs among them resolve before the run returns

    recording = record(program, config=config, stack=stack)
    return PreviewResult(plan=deployments[0].plan, resources=_tree_order(recording.resources),
                         outputs=dict(recording.value))


#### Preview of your own program ####

SERVER_TYPE = "inferstack:index:InferenceServer"
# A stack's own name (no organisation or project): "Stack names may only contain alphanumeric characters, hyphens,
# underscores, or periods" (Pulumi docs, Concepts, Stacks; read 2026-12-07).
STACK_NAME_PATTERN = r"[A-Za-z0-9_.-]+"
SECRET_PLACEHOLDER = "PreviewSecret-0123456789abcdef"
"""What an encrypted value of the stack file (`secure:`) is previewed as: only the Pulumi CLI can decrypt it. Made to
pass as an API key and as a cache AUTH token (argument_checks.CACHE_AUTH_TOKEN_PATTERN)."""


@dataclass(frozen=True)
class ProgramPreview:
    """What `pulumi up` of your own Pulumi program would create, in tree order, with the stack outputs it exports."""

    program: Path
    stack: str
    servers: dict[str, Any]
    """Each InferenceServer's name, and what it deploys (its `plan_summary` output)."""
    resources: list[RegisteredResource]
    outputs: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"program": str(self.program), "stack": self.stack, "servers": self.servers,
                "resources": _resources_json(self.resources), "outputs": self.outputs, "notes": self.notes}

    def render_tree(self) -> str:
        summary = [f"Program: {self.program} (stack {self.stack})"]
        for name, deployed in self.servers.items():
            deployed = deployed or {}
            cost = deployed.get("monthly_cost_ranking") or deployed.get("monthly_cost") or "price unknown"
            summary.append(f"InferenceServer {name}: {deployed.get('summary')}; monthly cost estimate: {cost}")
        return _report([*summary, _resource_count(self.resources)], self.notes, self.resources, self.outputs)


def preview_program(folder: str | Path, stack: str, *, config: Mapping[str, Any] | None = None) -> ProgramPreview:
    """`inferstack preview --program DIR --stack NAME`: your Pulumi program in DIR (Python: its `__main__.py`, or the
    `main` of its Pulumi.yaml), run with the config of its `Pulumi.NAME.yaml` (`config`, by full key, over it) under
    mocks that answer as `inferstack.testing.Mocks` does, and what it would create.

    It executes your program's code in this process, as `pulumi preview` would; no cloud is called.
    """
    from pulumi import ConfigMissingError  # imported after inferstack.pulumi_mocks checked that Pulumi is installed

    program = _read_program(Path(folder), stack)
    answers = ProgramAnswers(strict=False)
    try:
        recording = record(exporting(program.run), config={**program.config, **(config or {})},
                           project=program.project, stack=stack, answers=answers, secret_keys=program.secret_keys)
    except ConfigMissingError as error:
        raise input_error(program.stack_file.name, f"has no {error.key}, which the program requires",
                          fix=f"set it: pulumi config set {error.key} <value> --stack {stack}") from None
    resources = _tree_order(recording.resources)
    servers = {r.name: _whole_numbers(r.outputs.get("plan_summary")) for r in resources if r.type == SERVER_TYPE}
    notes = list(program.notes)
    if answers.unanswered:
        notes.append("lookups no inferstack component makes got no answer, so what depends on them is unknown: "
                     f"{', '.join(sorted(set(answers.unanswered)))}")
    if answers.placeholders:
        notes.append("resources brought by id that the program does not create were previewed with placeholder "
                     f"values: {', '.join(sorted(set(answers.placeholders)))}")
    return ProgramPreview(program=Path(folder), stack=stack, servers=servers, resources=resources,
                          outputs=dict(recording.value), notes=notes)


@dataclass(frozen=True)
class _Program:
    """A Pulumi project folder, read for one stack."""

    project: str
    main: Path
    stack_file: Path
    config: dict[str, Any]
    secret_keys: list[str]
    notes: list[str]

    def run(self) -> None:
        """Run the program as Pulumi's Python host does (as `__main__`, from the project folder, its own folder
        importable: `runpy.run_path(args.PROGRAM, run_name='__main__')` after `os.chdir(args.pwd)`, pulumi/pulumi
        sdk/python/cmd/pulumi-language-python-exec, read 2026-12-07), then put the process back as it was. The
        program's own modules are imported afresh, and forgotten after: a module runs its resources when imported,
        once per run."""
        saved_cwd, saved_path = Path.cwd(), list(sys.path)
        own = {path.stem if path.suffix == ".py" else path.name for path in self.main.parent.iterdir()
               if path.suffix == ".py" or (path / "__init__.py").is_file()}
        saved_modules = {name: module for name, module in sys.modules.items() if name.split(".")[0] in own}
        os.chdir(self.stack_file.parent)
        sys.path.insert(0, str(self.main.parent))
        try:
            for name in saved_modules:
                del sys.modules[name]
            runpy.run_path(str(self.main), run_name="__main__")
        finally:
            os.chdir(saved_cwd)
            sys.path[:] = saved_path
            for name in [name for name in sys.modules if name.split(".")[0] in own]:
                del sys.modules[name]
            sys.modules.update(saved_modules)


def _read_program(folder: Path, stack: str) -> _Program:
    """The project (Pulumi.yaml) and stack (Pulumi.<stack>.yaml) in `folder`; an error naming what is missing."""
    if not (folder / "Pulumi.yaml").is_file():
        raise input_error("--program", "is not a Pulumi project folder (it holds no Pulumi.yaml)", value=str(folder),
                          fix="give the folder of your Pulumi program, the one that holds its Pulumi.yaml")
    folder = folder.resolve()  # the program runs from its folder
    project_file = folder / "Pulumi.yaml"
    if not re.fullmatch(STACK_NAME_PATTERN, stack):
        raise input_error("--stack", "is not a stack's own name", value=stack,
                          fix="give the NAME of the Pulumi.NAME.yaml next to Pulumi.yaml, e.g. dev")
    project = _yaml_mapping(project_file)
    name, runtime = project.get("name"), project.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, Mapping) else runtime
    if not isinstance(name, str) or not name:
        raise input_error(f"{project_file}: name", "is missing", fix="name the project, as `pulumi new` does")
    if runtime_name != "python":
        raise input_error(f"{project_file}: runtime", "is not python; the offline preview runs Python programs",
                          value=runtime_name, fix="preview a Python program (runtime: python)")
    stack_file = folder / f"Pulumi.{stack}.yaml"
    if not stack_file.is_file():
        found = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in folder.glob("Pulumi.*.yaml"))
        raise input_error("--stack", f"has no stack file {stack_file.name} in {folder}", value=stack,
                          fix=f"give one of its stacks ({', '.join(found) or 'none yet'}), or create it: "
                              f"pulumi stack init {stack}")
    config, secret_keys = _stack_config(name, project.get("config"), _yaml_mapping(stack_file).get("config"))
    notes = [f"the stack's secret {key} (encrypted in {stack_file.name}; only the Pulumi CLI can decrypt it) was "
             "previewed with a placeholder" for key in secret_keys]
    return _Program(project=name, main=_main_file(folder, project.get("main")), stack_file=stack_file,
                    config=config, secret_keys=secret_keys, notes=notes)


def _main_file(folder: Path, main: Any) -> Path:
    """The program's entry point: Pulumi.yaml's `main` (a folder with `__main__.py`, or a file), inside `folder`.
    ("Path to the Pulumi program, relative to the location of Pulumi.yaml", Pulumi project file reference, read
    2026-12-07.)"""
    given = folder / str(main) if main else folder
    entry = given / "__main__.py" if given.is_dir() else given
    if not entry.resolve().is_relative_to(folder.resolve()):
        raise input_error(f"{folder / 'Pulumi.yaml'}: main", "points outside the project folder", value=main,
                          fix="keep the program inside the folder that holds Pulumi.yaml")
    if not entry.is_file():
        raise input_error("--program", f"has no program to run ({entry} is missing)", value=str(folder),
                          fix="put the program in __main__.py next to Pulumi.yaml, or name it in Pulumi.yaml's main")
    return entry


def _stack_config(project: str, declared: Any, stack: Any) -> tuple[dict[str, Any], list[str]]:
    """The stack config by full key (`<project>:<key>` for a key without a namespace): the project's declared
    defaults (Pulumi.yaml's `config`: a value, or `default`/`value` with a type), then the stack file's values;
    encrypted ones (`secure:`) as placeholders. (Pulumi docs, Concepts, Configuration, and the project file
    reference's config options; read 2026-12-07.)"""
    def full(key: str) -> str:
        return key if ":" in key else f"{project}:{key}"

    config: dict[str, Any] = {}
    for key, value in (declared or {}).items():
        if isinstance(value, Mapping):
            if "default" in value or "value" in value:
                config[full(key)] = value.get("value", value.get("default"))
        else:
            config[full(key)] = value
    secret_keys = []
    for key, value in (stack or {}).items():
        if isinstance(value, Mapping) and set(value) == {"secure"}:
            secret_keys.append(full(key))
            value = SECRET_PLACEHOLDER
        config[full(key)] = value
    return config, secret_keys


def _whole_numbers(value: Any) -> Any:
    """A value read back from the wire, which carries every number as a float, with whole numbers as ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _whole_numbers(item) for key, item in value.items()}
    return value


def _yaml_mapping(path: Path) -> dict[str, Any]:
    try:
        found = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise input_error(str(path), f"is not valid YAML ({error})", fix="fix the file as Pulumi would") from None
    if not isinstance(found, dict):
        raise input_error(str(path), "is not a mapping of settings", value=found, fix="fix the file as Pulumi would")
    return found


#### Mocks ####


class ProgramAnswers:
    """What the cloud would answer a program under mocks: the realistic answers of the backend of the cloud whose
    provider package the type or token belongs to, a resource's inputs passed through to its outputs; and, for a
    lookup of a resource the program created itself, that resource as created (your own VPC's range).

    `strict` (inferstack's own programs): a type or token no backend answers is an error, a bug in the backend.
    Otherwise (a user's program) a backend answers only what its components create and look up, the way they do; the
    rest is left to the caller (`resource`, `lookup` return None) or gets Pulumi's generic answers (`new_resource`,
    `invoke`: the inputs back, no lookup answer).
    """

    def __init__(self, *, strict: bool = True) -> None:
        self.strict = strict
        self.invokes: list[tuple[str, dict[str, Any]]] = []
        self.created: dict[str, dict[str, dict[str, Any]]] = {}
        """Every resource answered so far, by type and id: its inputs and outputs."""
        self.unanswered: list[str] = []
        """The tokens of a user's lookups no backend answered."""
        self.placeholders: list[str] = []
        """What a backend answered with a placeholder: a resource brought by id that the program does not create."""

    def new_resource(self, type_: str, name: str, inputs: dict[str, Any], custom: bool) -> tuple[str, dict[str, Any]]:
        return self.resource(type_, name, inputs, custom) or (f"{name}_id", inputs)

    def invoke(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        found = self.lookup(token, args)
        return {} if found is None else found

    def resource(self, type_: str, name: str, inputs: dict[str, Any],
                 custom: bool) -> tuple[str, dict[str, Any]] | None:
        """The id and outputs of a resource a backend creates; None for another resource of a user's program."""
        if not custom:
            return "", {}
        if type_.startswith(PROVIDER_TYPE_PREFIX):  # an explicit provider passed in opts
            return f"{name}-provider", inputs
        backend = self._backend(type_, lambda b: type_ in b.preview_answers().resources)
        if backend is None:
            return None
        answer = self._answer(lambda: backend.preview_outputs(type_, name, inputs, self.created, self.placeholders))
        if answer is None:
            return None
        resource_id, outputs = answer
        state = {**inputs, **outputs}
        self.created.setdefault(type_, {})[resource_id] = state
        return resource_id, state

    def lookup(self, token: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """A backend's answer to a lookup it makes; None for another lookup of a user's program."""
        backend = self._backend(token, lambda b: token in b.preview_answers().lookups)
        answer = None
        if backend is not None:
            self.invokes.append((token, args))
            answer = self._answer(lambda: backend.preview_invoke(token, args, self.created, self.placeholders))
        if answer is None:
            self.unanswered.append(token)
        return answer

    def _answer(self, answer: Callable[[], T]) -> T | None:
        """A backend's answer; in a user's program, None where it was asked in a way its components never ask (its
        table reads arguments or inputs they always send: a user's own lookup may send others)."""
        if self.strict:
            return answer()
        try:
            return answer()
        except (KeyError, IndexError, TypeError, AttributeError):
            return None

    def _backend(self, kind: str, answers: Callable[[CloudBackend], bool]) -> CloudBackend | None:
        """The backend of the provider package `kind` belongs to, when it `answers` it; raises when strict and not."""
        package = kind.split(":")[0]
        backend = backend_for(PROVIDER_PACKAGES[package]) if package in PROVIDER_PACKAGES else None
        if self.strict:
            if backend is None:
                raise NotImplementedError(f"the preview has no backend for {kind}")
            return backend  # its preview_outputs names an unlisted type, its preview_invoke refuses an unknown token
        return backend if backend is not None and answers(backend) else None


#### Helpers ####


def _transform_secrets(value: Any, replace: Callable[[Any], Any]) -> Any:
    if is_secret(value):
        return replace(value)
    if isinstance(value, Mapping):
        return {key: _transform_secrets(item, replace) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_transform_secrets(item, replace) for item in value]
    return value


def _tree_order(resources: list[RegisteredResource]) -> list[RegisteredResource]:
    """Parents before children, siblings by name: deterministic whatever order the registrations arrived in."""
    children: dict[str | None, list[RegisteredResource]] = {}
    for resource in resources:
        children.setdefault(resource.parent, []).append(resource)
    ordered: list[RegisteredResource] = []

    def visit(parent: str | None) -> None:
        for child in sorted(children.get(parent, []), key=lambda r: (r.name, r.type)):
            ordered.append(child)
            visit(child.urn)

    visit(None)
    return ordered


_LONG_TEXT_KEYS = ("userData", "userDataBase64", "policy", "assumeRolePolicy")
_HIDDEN_KEYS = ("tags", "tagsAll", "description", "comment")
_MAX_SHOWN = 16
_MAX_SHOWN_CHARS = 64


def _key_inputs(inputs: Mapping[str, Any]) -> str:
    """The scalar inputs worth a glance (one level of nesting flattened), long texts reduced to their size."""
    shown = []
    for key, value in _flatten(inputs):
        if key.split(".")[0] in _HIDDEN_KEYS:
            continue
        if isinstance(value, str) and key in _LONG_TEXT_KEYS and len(value) > _MAX_SHOWN_CHARS:
            shown.append(f"{key}=<{len(value.encode())} bytes>")
        elif isinstance(value, bool):
            shown.append(f"{key}={json.dumps(value)}")
        elif isinstance(value, int | float):  # the wire carries every number as a float
            shown.append(f"{key}={int(value) if float(value).is_integer() else value}")
        elif isinstance(value, str) and len(value) <= _MAX_SHOWN_CHARS:
            shown.append(f"{key}={value}")
    return " ".join(shown[:_MAX_SHOWN])


def _flatten(inputs: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Top-level scalars first, then the scalars of nested objects (`metadataOptions.httpTokens`)."""
    for key, value in sorted(inputs.items()):
        if not isinstance(value, Mapping | list):
            yield key, value
    for key, value in sorted(inputs.items()):
        if isinstance(value, Mapping):
            for inner_key, inner in sorted(value.items()):
                if not isinstance(inner, Mapping | list):
                    yield f"{key}.{inner_key}", inner

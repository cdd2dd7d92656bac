"""Offline preview: run the deployment program under Pulumi mocks and show what `pulumi up` would create.

No credentials, no Pulumi CLI, no cloud call. Every resource the program registers is recorded with its type,
name, parent, URN and inputs; the cloud backends answer with realistic ids, ARNs, addresses and lookups
(`CloudBackend.preview_outputs` / `preview_invoke`), so outputs that depend on them resolve as in a deployment.

    result = preview_workload("chat.yaml", cloud="gcp", assets_domain="assets.example.com")
    # or preview_deployment(plan, config), preview_stack(config)
    print(result.render_tree())                    # or json.dumps(result.to_json())

Pulumi's mocks are process-global: each run replaces this process's Pulumi runtime settings (and restores the
stack config it changed). Never call it from inside a real `pulumi up` program.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferstack.clouds import Cloud
from inferstack.components.backend import PROVIDER_PACKAGES, CloudBackend, backend_for
from inferstack.components.capabilities import Capability
from inferstack.components.plan_source import size_workload
from inferstack.plan import DeploymentPlan
from inferstack.pulumi_mocks import STACK_TYPE, config_value, is_secret, run_under_mocks, unwrap_secret
from inferstack.sizing.explain import rollout_line
from inferstack.spec import load_workload

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
           stack: str = "preview") -> Recording:
    """Run `program` under mocks with `config` as stack config; return what it registered and returned.

    `config` maps full keys ("inferstack:allowedCidrs", "aws:region") to values; structured values are
    stored as JSON, the way `pulumi config set --path` stores them. Exceptions from the program propagate.
    """
    answers = _PreviewAnswers()
    registrations, value = run_under_mocks(
        program, answers, urn=resource_urn, project=project, stack=stack,
        config={key: config_value(setting) for key, setting in (config or {}).items()},
        secret_keys=[key for key in SECRET_CONFIG_KEYS if key in (config or {})])
    resources = [RegisteredResource(
        urn=r.urn, type=r.type, name=r.name, parent=_parent(r.parent_urn), custom=r.custom, id=r.id,
        raw_inputs=r.wire_inputs, outputs=r.outputs, protect=r.protect, ignore_changes=r.ignore_changes,
        provider=r.provider) for r in registrations]
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
            "resources": [{"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent,
                           "inputs": r.masked_inputs} for r in self.resources],
            "outputs": self.outputs,
            "notes": self.notes,
        }

    def render_tree(self) -> str:
        """A plain-text tree: type, name and key inputs of each resource, children indented under parents."""
        price = self.plan.price
        cost = f"{price.monthly_ranking or price.monthly}/month" if price.monthly else "price unknown"
        if price.monthly and price.monthly_ranking and price.monthly_ranking.currency != price.monthly.currency:
            cost += f" (billed in {price.monthly.currency}: {price.monthly}/month)"
        lines = [f"Plan: {self.plan.summary()}", f"Monthly cost estimate: {cost}",
                 f"Resources: {sum(r.custom for r in self.resources)} cloud resources in "
                 f"{sum(not r.custom for r in self.resources)} components",
                 rollout_line(self.plan.rolling_update, self.plan.model.revision, self.plan.cloud)]
        lines += [f"Note: {note}" for note in self.notes] + [""]
        children: dict[str | None, list[RegisteredResource]] = {}
        for resource in self.resources:
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
        lines += ["", "Stack outputs:"] + [f"  {key}: {json.dumps(value)}" for key, value in self.outputs.items()]
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


#### Mocks ####


class _PreviewAnswers:
    """Answers from the backend of the cloud whose provider package the token belongs to."""

    def __init__(self) -> None:
        self.invokes: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, type_: str, name: str, inputs: dict[str, Any], custom: bool) -> tuple[str, dict[str, Any]]:
        if not custom:
            return "", {}
        if type_.startswith(PROVIDER_TYPE_PREFIX):  # an explicit provider passed in opts
            return f"{name}-provider", inputs
        resource_id, outputs = _backend(type_).preview_outputs(type_, name, inputs)
        return resource_id, {**inputs, **outputs}

    def invoke(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        self.invokes.append((token, args))
        return _backend(token).preview_invoke(token, args)


def _backend(token: str) -> CloudBackend:
    package = token.split(":")[0]
    if package not in PROVIDER_PACKAGES:
        raise NotImplementedError(f"the preview has no backend for {token}")
    return backend_for(PROVIDER_PACKAGES[package])


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

"""Run the policy pack's validators as the engine does: on hand-built resources, or on what a program registered.

The engine hands a resource policy one resource's inputs (camelCase, behind the SDK's unknown-checking proxy) and a
stack policy every resource with its outputs, parent and property dependencies. `check_resource`, `check_stack`
and `check_recording` build exactly those arguments with pulumi_policy's own classes, and collect what the policies
report: violations (with their enforcement level) and "not applicable" reasons.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# The pack imports its modules by plain name (`guardrails.*`), as the analyzer runs it; the tests import them too,
# after tests/policy/conftest.py has imported this module.
sys.path.insert(0, str(REPO / "policy"))

try:
    from pulumi_policy import (
        EnforcementLevel,
        Policy,
        PolicyCustomTimeouts,
        PolicyResource,
        PolicyResourceOptions,
        ResourceValidationArgs,
        ResourceValidationPolicy,
        StackValidationArgs,
        StackValidationPolicy,
    )
    from pulumi_policy.policy import _NotApplicableError  # what args.not_applicable() raises
    from pulumi_policy.proxy import unknown_checking_proxy
except ImportError as error:  # never a silent skip: the policy tests need the policy SDK
    raise ImportError(
        "tests/policy need pulumi-policy==1.21.0 (policy/requirements.txt). It pins protobuf~=5.29.5, which the "
        "main environment's google-cloud-billing (protobuf>=6.33.5) forbids, so they run in their own environment: "
        "`make policy-tests` (docs/policy.md)") from error

import inferstack_policies as pack  # noqa: E402  (after the path and the SDK check above)

from inferstack import preview  # noqa: E402
from inferstack.preview import Recording, RegisteredResource  # noqa: E402
from tests.components.neutral_view import dependencies_recorded  # noqa: E402  (shared with the matrix)


@dataclass(frozen=True)
class Violation:
    policy: str
    level: EnforcementLevel
    message: str
    urn: str


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    not_applicable: dict[tuple[str, str], str] = field(default_factory=dict)
    """(policy, urn; "" for a stack policy) → the reason the policy gave."""
    checked: dict[str, set[str]] = field(default_factory=dict)
    """Policy → resource types it was run on."""

    def messages(self, policy: str | None = None) -> list[str]:
        return [v.message for v in self.violations if policy is None or v.policy == policy]

    def mandatory(self) -> list[Violation]:
        return [v for v in self.violations if v.level == EnforcementLevel.MANDATORY]


def _options(protect: bool = False) -> PolicyResourceOptions:
    """The resource options the engine sends with a resource: only `protect` matters to the pack."""
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def _level(policy: Policy) -> EnforcementLevel:
    return policy.enforcement_level or EnforcementLevel.ADVISORY


def _run(policy: Policy, args: Any, urn: str, report: Report) -> None:
    def report_violation(message: str, violation_urn: str | None = None) -> None:
        report.violations.append(Violation(policy.name, _level(policy), message, violation_urn or urn))

    try:
        policy.validate(args, report_violation)
    except _NotApplicableError as reason:
        report.not_applicable[(policy.name, urn)] = reason.reason or ""


#### Hand-built resources ####


def check_resource(policy: ResourceValidationPolicy, resource_type: str, props: Mapping[str, Any], *,
                   config: Mapping[str, Any] | None = None, name: str = "resource") -> Report:
    """One resource policy on one resource's inputs."""
    report = Report()
    urn = f"urn:pulumi:test::test::{resource_type}::{name}"
    args = ResourceValidationArgs(resource_type, unknown_checking_proxy(dict(props)), urn, name, _options(), None,
                                  dict(config) if config is not None else None)
    _run(policy, args, urn, report)
    return report


@dataclass(frozen=True)
class Resource:
    """A resource of a hand-built stack: `depends` maps a property to the names of the resources it came from;
    `protect` is Pulumi's resource option, which stack policies see."""

    type: str
    name: str
    props: Mapping[str, Any]
    depends: Mapping[str, Sequence[str]] = field(default_factory=dict)
    protect: bool = False

    @property
    def urn(self) -> str:
        return f"urn:pulumi:test::test::{self.type}::{self.name}"


def check_stack(policy: StackValidationPolicy, resources: Sequence[Resource], *,
                config: Mapping[str, Any] | None = None) -> Report:
    """One stack policy on a hand-built stack."""
    built = {r.name: PolicyResource(r.type, unknown_checking_proxy(dict(r.props)), r.urn, r.name, _options(r.protect),
                                    None, None, [], {}) for r in resources}
    assert len(built) == len(resources), "two hand-built resources share a name"
    for resource in resources:
        for prop, names in resource.depends.items():
            built[resource.name].property_dependencies[prop] = [built[n] for n in names]
            built[resource.name].dependencies.extend(built[n] for n in names)
    report = Report()
    _run(policy, StackValidationArgs(list(built.values()), dict(config) if config is not None else None), "", report)
    return report


def check_built(resources: Sequence[Resource], *, config: Mapping[str, Mapping[str, Any]] | None = None) -> Report:
    """Every policy of the pack on a hand-built stack: resource policies on each resource, stack policies on all.
    `config` maps a policy name to its configuration."""
    report = Report()
    for policy in pack.POLICIES:
        policy_config = (config or {}).get(policy.name)
        if isinstance(policy, StackValidationPolicy):
            found = check_stack(policy, resources, config=policy_config)
        else:
            found = Report()
            for resource in resources:
                single = check_resource(policy, resource.type, resource.props, config=policy_config, name=resource.name)
                found.violations += single.violations
                found.not_applicable.update(single.not_applicable)
        report.violations += found.violations
        report.not_applicable.update(found.not_applicable)
    return report


#### What a program registered ####


def _state(resource: RegisteredResource) -> dict[str, Any]:
    """What a stack policy sees: the resource's outputs, which start as its inputs (secrets unwrapped)."""
    return {**{k: v for k, v in resource.outputs.items() if k not in resource.inputs}, **resource.inputs}


@dataclass(frozen=True)
class Registered:
    """A recording and the property dependencies of each resource, as the engine would have them."""

    recording: Recording
    dependencies: Mapping[str, Mapping[str, Sequence[str]]]

    def resources(self) -> list[RegisteredResource]:
        return [r for r in self.recording.resources if not r.type.startswith(preview.PROVIDER_TYPE_PREFIX)]

    def named(self, name: str) -> RegisteredResource:
        return self.recording.named(name)

    def with_inputs(self, name: str, inputs: Mapping[str, Any], resource_type: str | None = None,
                    dependencies: Mapping[str, Sequence[str]] | None = None) -> Registered:
        """A copy in which one resource was registered with other inputs, or as another type, or with other
        property dependencies (property → names of the resources it came from) (a mutation)."""
        changed = [_replaced(r, inputs, resource_type) if r.name == name else r for r in self.recording.resources]
        kept = dict(self.dependencies)
        if dependencies is not None:
            urns = {r.name: r.urn for r in self.recording.resources}
            kept[self.named(name).urn] = {prop: [urns[n] for n in names] for prop, names in dependencies.items()}
        return Registered(Recording(changed, self.recording.invokes, self.recording.value), kept)

    def dependency_names(self, name: str) -> dict[str, list[str]]:
        """One resource's property dependencies, by the names of the resources they came from."""
        names = {r.urn: r.name for r in self.recording.resources}
        return {prop: [names[u] for u in urns if u in names]
                for prop, urns in self.dependencies.get(self.named(name).urn, {}).items()}

    def with_protect(self, name: str, protect: bool) -> Registered:
        """A copy in which one resource was registered with another `protect` option."""
        changed = [dataclasses.replace(r, protect=protect) if r.name == name else r for r in self.recording.resources]
        return Registered(Recording(changed, self.recording.invokes, self.recording.value), self.dependencies)

    def without(self, name: str) -> Registered:
        kept = [r for r in self.recording.resources if r.name != name]
        return Registered(Recording(kept, self.recording.invokes, self.recording.value), self.dependencies)


def _replaced(resource: RegisteredResource, inputs: Mapping[str, Any],
              resource_type: str | None) -> RegisteredResource:
    computed = {k: v for k, v in resource.outputs.items() if k not in resource.inputs}
    return dataclasses.replace(resource, type=resource_type or resource.type, raw_inputs=dict(inputs),
                               outputs={**computed, **inputs})


def record_with_dependencies(program: Any, **record_args: Any) -> Registered:
    with dependencies_recorded() as dependencies:
        recording = preview.record(program, **record_args)
    return Registered(recording, dependencies)


def check_recording(registered: Registered, *, config: Mapping[str, Mapping[str, Any]] | None = None,
                    policies: Sequence[Policy] | None = None) -> Report:
    """Every policy of the pack on everything a program registered: resource policies on each cloud resource's
    inputs, stack policies on all of them. `config` maps a policy name to its configuration."""
    report = Report()
    chosen = list(policies if policies is not None else pack.POLICIES)
    resources = registered.resources()
    for resource in (r for r in resources if r.custom):
        for policy in (p for p in chosen if isinstance(p, ResourceValidationPolicy)):
            report.checked.setdefault(policy.name, set()).add(resource.type)
            policy_config = (config or {}).get(policy.name)
            args = ResourceValidationArgs(resource.type, unknown_checking_proxy(resource.inputs), resource.urn,
                                          resource.name, _options(resource.protect), None,
                                          dict(policy_config) if policy_config is not None else None)
            _run(policy, args, resource.urn, report)
    stack = _stack_resources(resources, registered.dependencies)
    for policy in (p for p in chosen if isinstance(p, StackValidationPolicy)):
        policy_config = (config or {}).get(policy.name)
        _run(policy, StackValidationArgs(stack, dict(policy_config) if policy_config is not None else None), "", report)
    return report


def _stack_resources(resources: Sequence[RegisteredResource],
                     dependencies: Mapping[str, Mapping[str, Sequence[str]]]) -> list[PolicyResource]:
    built = {r.urn: PolicyResource(r.type, unknown_checking_proxy(_state(r)), r.urn, r.name, _options(r.protect), None,
                                   None, [], {}) for r in resources}
    for resource in resources:
        target = built[resource.urn]
        target.parent = built.get(resource.parent or "")
        for prop, urns in dependencies.get(resource.urn, {}).items():
            target.property_dependencies[prop] = [built[u] for u in urns if u in built]
            target.dependencies.extend(built[u] for u in urns if u in built)
    return list(built.values())

"""What every rule stands on: how rules are called (what a rule sees, how it reports, how the pack declares it),
values as the engine sends them (policy documents among them), and how a stack's resources refer to each other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

#### How rules are called ####


class ReportViolation(Protocol):
    """`report(message)` on the resource being checked, or `report(message, urn)` on another (stack rules)."""

    def __call__(self, message: str, urn: str | None = None) -> None: ...


def discard(message: str, urn: str | None = None) -> None:
    """A ReportViolation that drops every report: for readers whose own rule reports what they find (the
    identity's grants, a load balancer's listeners)."""


class NotApplicable(Exception):
    """The setting a rule checks does not exist on this cloud; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ResourceInput:
    """What a resource rule sees: one resource's inputs, before the engine creates or updates it."""

    resource_type: str
    props: Mapping[str, Any]
    config: Mapping[str, Any] = field(default_factory=dict)
    """The rule's configuration (`--policy-pack-config`)."""


class ResourceOptions(Protocol):
    """A resource's options, as a stack rule sees them (pulumi_policy.PolicyResourceOptions has this shape)."""

    @property
    def protect(self) -> bool: ...


class StackResource(Protocol):
    """One resource of the stack, as a stack rule sees it (pulumi_policy.PolicyResource has this shape)."""

    @property
    def resource_type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def urn(self) -> str: ...
    @property
    def props(self) -> Mapping[str, Any]: ...
    @property
    def property_dependencies(self) -> Mapping[str, Sequence[StackResource]]: ...
    @property
    def opts(self) -> ResourceOptions: ...


@dataclass(frozen=True)
class PlainOptions:
    """ResourceOptions from plain values (what Pulumi's mocks recorded)."""

    protect: bool = False


@dataclass(frozen=True)
class PlainResource:
    """A StackResource from plain values (what Pulumi's mocks recorded), for `evaluate`."""

    resource_type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    """Outputs and inputs: what a stack rule sees."""
    inputs: Mapping[str, Any] | None = None
    """What a resource rule sees; None: the same as props."""
    custom: bool = True
    """A cloud resource; resource rules do not run on components (the engine does not send them)."""
    property_dependencies: Mapping[str, Sequence[StackResource]] = field(default_factory=dict)
    opts: PlainOptions = field(default_factory=PlainOptions)
    """Its resource options (`protect`: Pulumi's mocks record it, inferstack.preview.RegisteredResource.protect)."""


@dataclass(frozen=True)
class Stack:
    """Every resource of the stack, with the engine's unknown-value error types (empty outside the engine)."""

    resources: Sequence[StackResource]
    unknown_errors: tuple[type[Exception], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    """The rule's configuration (`--policy-pack-config`)."""

    def of_type(self, *resource_types: str) -> list[StackResource]:
        return [r for r in self.resources if r.resource_type in resource_types]

    def known(self, props: Mapping[str, Any], key: str) -> Any:
        """A property used only to relate two resources: None when a preview cannot know it yet."""
        try:
            return props.get(key)
        except self.unknown_errors:
            return None

    def refers(self, resource: StackResource, prop: str, target: StackResource, *values: Any) -> bool:
        """Whether `resource.props[prop]` comes from `target`: by the engine's property dependencies, else by value.

        A preview does not know the id of a resource it has not created yet, but it knows which resource an input
        came from; the value comparison serves resources that already exist (and Pulumi's mocks).
        """
        if target.urn in {d.urn for d in resource.property_dependencies.get(prop, [])}:
            return True
        value = self.known(resource.props, prop)
        wanted = {str(v) for v in values if v}
        return value is not None and any(str(item) in wanted for item in self.items(value))

    def items(self, value: Any) -> list[Any]:
        """`items`, leaving out the elements a preview cannot know yet."""
        if isinstance(value, str) or not isinstance(value, Sequence):
            return items(value)
        found = []
        for index in range(len(value)):
            try:
                found.append(value[index])
            except self.unknown_errors:
                continue
        return found

    def names_of(self, resource: StackResource) -> set[str]:
        """The values other resources name `resource` by (a Google account's IAM member too)."""
        keys = ("name", "arn", "roleName", "email", "member", "id")
        names = {str(self.known(resource.props, key)) for key in keys if self.known(resource.props, key)}
        email = self.known(resource.props, "email")
        return names | ({f"serviceAccount:{email}"} if email else set())

    def names(self, resource: StackResource, target: StackResource, names: set[str]) -> bool:
        """Whether `resource` names `target`: by a property dependency, or by one of `names` anywhere in its props."""
        if any(target.urn in {d.urn for d in deps} for deps in resource.property_dependencies.values()):
            return True
        return any(self._mentions(self.known(resource.props, key), names) for key in resource.props)

    def _mentions(self, value: Any, names: set[str]) -> bool:
        if isinstance(value, str):
            return value in names
        if isinstance(value, Mapping):
            return any(self._mentions(self.known(value, key), names) for key in value)
        return any(self._mentions(item, names) for item in self.items(value)) if isinstance(value, Sequence) else False


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    check: Callable[[ResourceInput, ReportViolation], None]
    reads: Callable[[str], bool]
    """Whether the rule checks resources of a type (for tests that prove a rule looked at something)."""
    severity: str = "high"
    level: str = "mandatory"
    config_schema: Mapping[str, Any] | None = None
    """JSON schema of the rule's properties (`--policy-pack-config`)."""


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    check: Callable[[Stack, ReportViolation], None]
    severity: str = "high"
    level: str = "mandatory"
    config_schema: Mapping[str, Any] | None = None


#### Values as the engine sends them ####


def items(value: Any) -> list[Any]:
    """A property that may hold one value or a list of them (IAM's "Action": "s3:GetObject" or [...])."""
    if value is None:
        return []
    if isinstance(value, str | Mapping) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def integer(value: Any) -> int | None:
    """22, 22.0, "22", "22.0" → 22; None for anything that is not a whole number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() else None
    return None


def boolean(value: Any) -> bool | None:
    """True, "true" → True; False, "false" → False (pulumi_aws types some flags as strings); None otherwise."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, str) else ""
    return {"true": True, "false": False}.get(text)


def show(value: Any) -> str:
    """A value as a message quotes it: 64.0 → 64, text as it is."""
    number = integer(value)
    return str(number) if number is not None else str(value)


def last_segment(value: Any) -> str:
    """The last part of a path or self link: ".../global/backendBuckets/assets" → "assets"."""
    return str(value or "").rstrip("/").rsplit("/", 1)[-1]


def policy_document(value: Any) -> Mapping[str, Any] | None:
    """A JSON policy document (a string, or a mapping where the provider takes an object); None if unreadable."""
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, Mapping) else None


@dataclass(frozen=True)
class Statement:
    label: str
    """The statement's Sid, else its position ("#0")."""
    body: Mapping[str, Any]

    @property
    def effect(self) -> str:
        return str(self.body.get("Effect", "")).lower()

    @property
    def allows(self) -> bool:
        return self.effect == "allow"

    @property
    def actions(self) -> list[str]:
        return [str(action) for action in items(self.body.get("Action"))]

    @property
    def resources(self) -> list[str]:
        return [str(resource) for resource in items(self.body.get("Resource"))]


def statements(value: Any, report_violation: ReportViolation, what: str, urn: str | None = None) -> list[Statement]:
    """The statements of a policy document; what cannot be read is reported (fail closed) and left out."""
    document = policy_document(value)
    if document is None:
        report_violation(f"{what} is not a JSON policy document, so it cannot be checked", urn)
        return []
    found = []
    for index, body in enumerate(items(document.get("Statement"))):
        label = f"#{index}"
        if not isinstance(body, Mapping):
            report_violation(f"statement {label} of {what} is not an object, so it cannot be checked", urn)
            continue
        statement = Statement(str(body.get("Sid") or label), body)
        if statement.effect not in ("allow", "deny"):
            report_violation(f"statement {statement.label} of {what} has Effect {body.get('Effect')!r}, neither Allow "
                             "nor Deny, so it cannot be checked", urn)
            continue
        found.append(statement)
    return found


#### How a stack's resources refer to each other ####

_IDENTIFIERS = ("id", "arn", "selfLink", "selfLinkUnique", "instanceGroup", "name")


def _identifiers(stack: Stack, resource: StackResource) -> set[str]:
    """What other resources may call this one by: its ARN, self link, name (ids are no property of a resource;
    inputs taken from another resource are related by property dependency first, see `linked`)."""
    found = set()
    for key in _IDENTIFIERS:
        value = stack.known(resource.props, key)
        if isinstance(value, str) and value:
            found.add(value)
    return found


def _names_in(stack: Stack, value: Any, identifiers: set[str]) -> bool:
    """Whether a (nested) value names one of the identifiers: equal, or one a path that ends in the other
    ("sg-1" and arn:...:security-group/sg-1; a Google self link and its id)."""
    if isinstance(value, str):
        return bool(value) and any(value == i or value.endswith(f"/{i}") or i.endswith(f"/{value}")
                                   for i in identifiers)
    if isinstance(value, Mapping):
        return any(_names_in(stack, stack.known(value, key), identifiers) for key in value)
    if isinstance(value, Sequence):
        return any(_names_in(stack, item, identifiers) for item in stack.items(value))
    return False


def linked(stack: Stack, source: StackResource, props: Sequence[str], target: StackResource) -> bool:
    """Whether one of `source`'s properties comes from, or names, `target`."""
    for prop in props:
        if target.urn in {d.urn for d in source.property_dependencies.get(prop, [])}:
            return True
    identifiers = _identifiers(stack, target)
    return bool(identifiers) and any(_names_in(stack, stack.known(source.props, p), identifiers) for p in props)


def linked_of(stack: Stack, source: StackResource, props: Sequence[str], *types: str) -> list[StackResource]:
    return [target for target in stack.of_type(*types) if linked(stack, source, props, target)]


def referring(stack: Stack, target: StackResource, props: Sequence[str], *types: str) -> list[StackResource]:
    return [source for source in stack.of_type(*types) if linked(stack, source, props, target)]


def known_items(stack: Stack, props: Mapping[str, Any], *keys: str) -> list[Any]:
    """The known items of the first of `keys` that is set."""
    for key in keys:
        value = stack.known(props, key)
        if value:
            return stack.items(value)
    return []

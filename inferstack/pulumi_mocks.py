"""The one module that reaches into Pulumi's runtime internals; the rest of inferstack uses its public API.

The offline preview (`inferstack.preview`) needs what only the engine's side of the wire sees: each registration's
parent, `protect`, `ignoreChanges` and provider, its inputs in wire form (secrets still marked), and the engine's
URNs. Pulumi's public mocks (`pulumi.runtime.Mocks`) are handed a resource's type, name and inputs only, so this
module records registrations at the SDK's mock resource monitor (`pulumi.runtime.mocks.MockMonitor`, which
`set_mocks(monitor=...)` accepts), with the outputs each component registers, sets and restores the stack config a run
reads, and reads secrets in wire form. The components ask it whether mocks answer for the cloud (any mocks: a user's
unit test too) and for an unknown value (`running_under_mocks`, `unknown`).

Supported: pulumi >=3.231,<4 (pyproject.toml). tests/test_pulumi_mocks.py checks every piece of it; run it, with
the preview tests, under the lowest supported version when changing the range (README, "Install").
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from inferstack.extras import require_pulumi

require_pulumi("the offline preview (inferstack.preview)")

# After the check: without Pulumi, the error names the extra to install instead of the missing module.
import pulumi  # noqa: E402
from pulumi.output import UNKNOWN  # noqa: E402
from pulumi.runtime import config as pulumi_config  # noqa: E402
from pulumi.runtime import rpc  # noqa: E402
from pulumi.runtime import settings as pulumi_settings  # noqa: E402
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs  # noqa: E402

STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class Registration:
    """One RegisterResource request as the engine receives it, and what the mocks answered."""

    urn: str
    type: str
    name: str
    parent_urn: str
    """"" for the stack itself; the stack's URN for a resource at the top."""
    custom: bool
    id: str
    wire_inputs: dict[str, Any]
    """camelCase keys, secret values still wrapped (see is_secret, unwrap_secret)."""
    outputs: dict[str, Any]
    protect: bool
    ignore_changes: tuple[str, ...]
    provider: str
    """For a component, `outputs` are those it registers (`register_outputs`), added when it does."""
    retain_on_delete: bool = False


class Answers(Protocol):
    """What a cloud would answer: a new resource's id and outputs, a lookup's result."""

    def new_resource(self, type_: str, name: str, inputs: dict[str, Any], custom: bool) -> tuple[str, dict[str, Any]]:
        ...

    def invoke(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        ...


UrnFunction = Callable[[str, str, str, str, str], str]
"""(stack, project, parent URN, type, name) → the resource's URN."""


def run_under_mocks(program: Callable[[], Any], answers: Answers, *, urn: UrnFunction,
                    config: Mapping[str, str], secret_keys: Sequence[str], project: str,
                    stack: str) -> tuple[list[Registration], Any]:
    """Run `program` with Pulumi's mocks answering from `answers` and `config` as the stack config.

    Returns every registration but the stack's, in the order they arrived, and the program's value with its
    Outputs resolved. The stack config in force before the run is restored after it.
    """
    monitor = RecordingMonitor(_Mocks(answers), lambda parent, type_, name: urn(stack, project, parent, type_, name))
    pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor)
    saved_config = dict(pulumi_config.CONFIG.get())
    saved_secret_keys = [key for key in saved_config if pulumi_config.is_config_secret(key)]
    pulumi_config.set_all_config(dict(config), list(secret_keys))
    box: dict[str, Any] = {}
    try:
        @pulumi.runtime.test  # type: ignore[untyped-decorator]
        def run() -> pulumi.Output[Any]:
            return pulumi.Output.from_input(program()).apply(lambda value: box.setdefault("value", value))

        run()
    except BaseException:
        _retrieve_abandoned_errors()
        raise
    finally:
        pulumi_config.set_all_config(saved_config, saved_secret_keys)
    return monitor.registered, box.get("value")


UNKNOWN_MARK = "[unknown]"
"""A stack output whose value only the cloud would know (it depends on a lookup the mocks left unanswered)."""


def exporting(program: Callable[[], Any]) -> Callable[[], dict[str, Any]]:
    """`program`, a Pulumi program that exports its stack outputs (`pulumi.export`) and returns nothing, made to
    return those outputs, each resolved on its own (UNKNOWN_MARK where unknown). Pulumi keeps exports on the
    process's root stack resource, which the mocks keep from run to run: it starts each run empty."""
    def run() -> dict[str, Any]:
        stack = pulumi.runtime.get_root_resource()
        stack.outputs = {}  # type: ignore[union-attr]
        program()
        exported: dict[str, Any] = stack.outputs  # type: ignore[union-attr]
        return {name: pulumi.Output.from_input(value).apply(_marked_unknown, True)
                for name, value in exported.items()}
    return run


def _marked_unknown(value: Any) -> Any:
    return UNKNOWN_MARK if rpc.contains_unknowns(value) else value


def config_value(value: Any) -> str:
    """A stack config value as `pulumi config set --path` stores it: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def running_under_mocks() -> bool:
    """True while Pulumi's mocks stand in for the engine and the cloud (`pulumi.runtime.set_mocks`: a unit test, the
    offline preview), whoever set them."""
    return isinstance(pulumi_settings.get_monitor(), MockMonitor)


def unknown() -> pulumi.Output[Any]:
    """A value known only once the cloud answers, as `pulumi preview` shows one: applies on it never run, and a
    resource input made of it reaches the mocks as absent."""
    return pulumi.Output.from_input(UNKNOWN)


def is_secret(value: Any) -> bool:
    """True for a secret in wire form (a registration's input)."""
    return bool(rpc.is_rpc_secret(value))


def unwrap_secret(value: Any) -> Any:
    """The value of a secret in wire form."""
    return rpc.unwrap_rpc_secret(value)


#### The monitor ####


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self, answers: Answers) -> None:
        self.answers = answers

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return self.answers.new_resource(args.typ, args.name, dict(args.inputs), bool(args.custom))

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return self.answers.invoke(args.token, dict(args.args)), []  # never (dict, None): the SDK crashes on it


class RecordingMonitor(MockMonitor):
    """The SDK's mock monitor, with `urn`'s URNs and a record of every registration (tests may wrap
    RegisterResource to read other fields of the request, e.g. propertyDependencies).

    `urn` is given the run's stack and project: asked from the monitor, pulumi 3.231 answers its defaults
    ("stack", "project"), 3.272 the run's."""

    def __init__(self, mocks: _Mocks, urn: Callable[[str, str, str], str]) -> None:
        super().__init__(mocks)
        self.urn = urn
        self.registered: list[Registration] = []

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        return self.urn(parent, type_, name)

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != STACK_TYPE:
            self.registered.append(Registration(
                urn=response.urn, type=request.type, name=request.name, parent_urn=request.parent,
                custom=request.custom, id=response.id, wire_inputs=rpc.deserialize_properties(request.object),
                outputs=self.get_registered_resources()[response.urn].state, protect=request.protect,
                ignore_changes=tuple(request.ignoreChanges), provider=request.provider,
                retain_on_delete=bool(request.retainOnDelete)))
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        registered = next((r for r in self.registered if r.urn == request.urn and not r.custom), None)
        if registered is not None:
            registered.outputs.update(rpc.deserialize_properties(request.outputs))
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


def _retrieve_abandoned_errors() -> None:
    """Mark as retrieved the errors of the futures a failed run leaves behind (hundreds: every Output that
    depended on the failed one). Left alone, each logs "exception was never retrieved" from a finaliser whenever the
    garbage collector reaches it, in the middle of unrelated code; under CPython 3.11.7 a finaliser that runs inside
    ast.parse makes it raise SystemError ("AST constructor recursion depth mismatch"). The run's own error is
    raised as usual."""
    for thing in gc.get_objects():
        if isinstance(thing, asyncio.Future) and thing.done() and not thing.cancelled():
            thing.exception()

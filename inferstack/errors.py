"""Errors a user can act on: each names the field, the offending value and the fix."""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Sequence
from typing import Any

_UNSET: Any = object()

# Errors quote the value they refuse. A value can be huge (a pasted file, a YAML alias bomb that expands to
# billions of items), so it is shown cut to its start: enough to recognise it, bounded in time and memory.
SHOWN_VALUE_CHARS = 80


def _bounded_repr() -> reprlib.Repr:
    shown = reprlib.Repr()
    shown.maxlevel = 3
    shown.maxdict = shown.maxlist = shown.maxtuple = shown.maxset = shown.maxfrozenset = 6
    shown.maxstring = shown.maxother = shown.maxlong = SHOWN_VALUE_CHARS
    return shown


_BOUNDED_REPR = _bounded_repr()


def shown_value(value: Any) -> str:
    """`repr(value)` cut to about SHOWN_VALUE_CHARS: a long string as its start and "… (N characters)"."""
    if isinstance(value, str):
        if len(value) <= SHOWN_VALUE_CHARS:
            return repr(value)
        return f"{value[:SHOWN_VALUE_CHARS]!r}… ({len(value)} characters)"
    try:
        text = _BOUNDED_REPR.repr(value)
    except ValueError:  # an int beyond Python's str-conversion digit limit
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= SHOWN_VALUE_CHARS else text[:SHOWN_VALUE_CHARS] + "…"


def with_article(noun: str) -> str:
    """'an AWS region', 'a GCP region': the indefinite article by the noun's first letter."""
    return f"an {noun}" if noun[:1].lower() in "aeio" else f"a {noun}"


class InferstackError(Exception):
    """Base of every error inferstack raises on purpose. The CLI prints it without a traceback."""

    exit_code = 2


class InputError(InferstackError):
    """One or more inputs are wrong. Each problem says where, what was given, and what to do instead."""

    def __init__(self, problems: Iterable[Problem], *, source: str | None = None):
        self.problems = list(problems)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = f" in {self.source}" if self.source else ""
        lines = [f"{len(self.problems)} problem(s){where}:" if len(self.problems) > 1 else f"Invalid input{where}:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class Problem:
    """One wrong input: `field` (dotted path), the `value` given, what is wrong, and the `fix`."""

    def __init__(self, field: str, message: str, *, value: Any = _UNSET, fix: str | None = None):
        self.field = field
        self.message = message
        self.value = value
        self.fix = fix

    def __str__(self) -> str:
        given = "" if self.value is _UNSET else f" (got {shown_value(self.value)})"
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.field}: {self.message}{given}.{fix}"


def input_error(field: str, message: str, *, value: Any = _UNSET, fix: str | None = None) -> InputError:
    """Shorthand for an InputError with a single problem."""
    return InputError([Problem(field, message, value=value, fix=fix)])


class MissingExtraError(InferstackError, ImportError):
    """A command or module needs an optional dependency that is not installed: one line naming the extra to install.

    An ImportError too, so that code importing inferstack's Pulumi modules can catch it as it would the module's.
    """

    def __init__(self, needed_by: str, needs: str, module: str, extras: Sequence[str]):
        self.extras = list(extras)
        others = ", ".join(f"[{extra}]" for extra in extras[1:])
        install = f"'inferstack[{extras[0]}]'" + (f" (or {others})" if others else "")
        super().__init__(f"{needed_by} needs {needs} ({module} is not installed). Fix: pip install {install}",
                         name=module)


class InfeasibleError(InferstackError):
    """No deployment meets the workload. Carries the per-cloud reasons and the nearest feasible changes."""

    exit_code = 3

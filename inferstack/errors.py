"""Errors a user can act on: each names the field, the offending value and the fix."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_UNSET: Any = object()


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
        given = "" if self.value is _UNSET else f" (got {self.value!r})"
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.field}: {self.message}{given}.{fix}"


def input_error(field: str, message: str, *, value: Any = _UNSET, fix: str | None = None) -> InputError:
    """Shorthand for an InputError with a single problem."""
    return InputError([Problem(field, message, value=value, fix=fix)])


class InfeasibleError(InferstackError):
    """No deployment meets the workload. Carries the per-cloud reasons and the nearest feasible changes."""

    exit_code = 3

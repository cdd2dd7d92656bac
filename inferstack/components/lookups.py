"""Facts only the cloud knows (a lookup's answer, a resource's computed output), read so that unit tests whose mocks
leave them out still run.

Pulumi's documented generic mocks answer every lookup with `{}` and hand a resource back its own inputs, so a fact
the components read (a region, a VPC's range, an image's root device) comes back as None. `answered` keeps such a fact
unknown instead, as `pulumi preview` shows a value the cloud has yet to compute: everything computed from it is
unknown too, never computed from None, and nothing else changes. A real provider always answers these facts; should
one not, the run stops with an error naming what was missing.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pulumi

from inferstack.errors import InferstackError
from inferstack.pulumi_mocks import running_under_mocks, unknown

T = TypeVar("T")

RETRY = "run `pulumi refresh`, then retry; report it if it persists"


def answered(fact: pulumi.Output[T | None], what: str, *, empty: T | None = None,
             fix: str = RETRY) -> pulumi.Output[T]:
    """`fact` once the cloud gave it; unknown under mocks that left it out. In a real run without it: `empty` where
    the provider leaves out a field with nothing in it (a list of matches), else an error naming `what` (the lookup or
    resource and its field, as the provider spells them) and `fix`."""
    def present(value: T | None) -> pulumi.Input[T]:
        if value is not None:
            return value
        if running_under_mocks():
            missing: pulumi.Output[T] = unknown()
            return missing
        if empty is not None:
            return empty
        raise InferstackError(f"{what}: the cloud provider answered nothing, and the servers cannot be placed "
                              f"without it. Fix: {fix}")
    return fact.apply(present)


def answered_field(answer: pulumi.Output[Any], field: str, what: str, *, empty: Any = None) -> pulumi.Output[Any]:
    """One field of a lookup answered as a mapping (a lookup called by token): `answered`, for `answer[field]`."""
    return answered(answer.apply(lambda found: found.get(field) if isinstance(found, dict) else None),
                    f"{what} {field}", empty=empty)

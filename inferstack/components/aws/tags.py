"""The tags every EC2 resource carries: the stack's, plus the Name tag the EC2 console lists resources by."""

from __future__ import annotations

from collections.abc import Mapping


def named(tags: Mapping[str, str], name: str) -> dict[str, str]:
    """Tags plus the Name tag the EC2 console lists resources by."""
    return {**tags, "Name": name}

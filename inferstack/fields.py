"""JSON documents as dotted paths: what diffs compare field by field."""

from __future__ import annotations

from typing import Any


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}, "c": [2]}` → `{"a.b": 1, "c": [2]}`: nested mappings become paths; lists are values."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def changed_paths(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The paths whose values differ between two documents (present in either), in `after`'s order, then
    `before`'s."""
    old, new = flatten(before), flatten(after)
    absent = object()  # a section that is null on one side and has fields on the other differs at both
    return [path for path in [*new, *(p for p in old if p not in new)]
            if old.get(path, absent) != new.get(path, absent)]

"""Names that must be the same wherever they are computed: by the components (which import Pulumi) and by the commands
that find a deployment's resources through the cloud's API afterwards (`inferstack status`, `logs`, `rollout`, which
do not)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

_NAME_HASH_CHARS = 8


def slug(*parts: str) -> str:
    """Lowercase letters, digits and single dashes: valid in bucket names, labels and secret paths everywhere."""
    text = "-".join(parts).lower()
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", text)).strip("-")


def unique_name(parts: Sequence[str], *, unique_by: Sequence[str] = (), max_length: int = 63) -> str:
    """A deterministic, readable name for a globally unique resource (a bucket).

    The readable part comes from `parts` (project, stack, component, purpose); a short hash of the parts and
    of `unique_by` (account, region) keeps two accounts or regions with the same stack from colliding, and
    keeps the name unique after truncation.
    """
    digest = hashlib.sha256("\0".join([*parts, *unique_by]).encode()).hexdigest()[:_NAME_HASH_CHARS]
    readable = slug(*parts)[: max_length - _NAME_HASH_CHARS - 1].rstrip("-")
    return f"{readable}-{digest}" if readable else digest

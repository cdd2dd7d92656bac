"""A cloud-neutral view of what a program registered, for security invariants that hold on every cloud.

Each cloud contributes one mapper, `facts(recording) -> SecurityFacts`, in its own module
`tests/components/facts_<cloud>.py`; `FACT_MAPPERS` collects those that exist. The invariant tests
(test_security_invariants.py) run for every cloud that has both a backend and a mapper: a new cloud adds its
module and gets the whole matrix for free.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field

from inferstack.preview import Recording
from inferstack.spec import CLOUDS

WORLD = ("0.0.0.0/0", "::/0")


@dataclass(frozen=True)
class Ingress:
    """One inbound rule: a port range open to a source network."""

    port_from: int
    port_to: int
    source: str
    """A CIDR block, or "network" when the rule's source is the server's own network range."""


@dataclass(frozen=True)
class Bucket:
    name: str
    public_access_blocked: bool
    encrypted: bool
    versioned: bool
    acls_disabled: bool
    tls_only: bool
    readers: tuple[str, ...]
    """Principals a bucket policy allows to read (service principals), beyond the account's own identities."""


@dataclass(frozen=True)
class Server:
    name: str
    metadata_tokens_required: bool
    termination_protected: bool
    root_disk_encrypted: bool
    user_data: str
    """Decoded user data, as the server receives it."""


@dataclass(frozen=True)
class Grant:
    """What the server's identity may do, classified the same way on every cloud."""

    kind: str
    """storage (object reads/writes), secrets (secret-store reads), management (the managed shell), other."""
    read_only: bool
    scope: tuple[str, ...]
    """storage: "bucket/prefix*" patterns; secrets: secret names; management and other: the raw resources."""


@dataclass(frozen=True)
class Cdn:
    https_only: bool
    private_origin: bool
    """Reads its bucket with its own signed identity (AWS OAC), and the bucket admits only this CDN."""


@dataclass(frozen=True)
class SecurityFacts:
    ingress: list[Ingress] = field(default_factory=list)
    buckets: list[Bucket] = field(default_factory=list)
    servers: list[Server] = field(default_factory=list)
    grants: list[Grant] = field(default_factory=list)
    cdns: list[Cdn] = field(default_factory=list)
    secret_values_stored: list[str] = field(default_factory=list)
    """Values written to the secret store (plaintext, for searching elsewhere)."""


def _fact_mappers() -> dict[str, Callable[[Recording], SecurityFacts]]:
    mappers = {}
    for cloud in CLOUDS:
        module_name = f"tests.components.facts_{cloud}"
        if importlib.util.find_spec(module_name) is not None:
            mappers[cloud] = importlib.import_module(module_name).facts
    return mappers


FACT_MAPPERS: dict[str, Callable[[Recording], SecurityFacts]] = _fact_mappers()

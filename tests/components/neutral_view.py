"""A cloud-neutral view of what a program registered, for security invariants that hold on every cloud.

Each cloud contributes one mapper, `facts(recording) -> SecurityFacts`, in its own module
`tests/components/facts_<cloud>.py`; `FACT_MAPPERS` collects those that exist. The invariant tests
(test_security_invariants.py) run for every cloud that has both a backend and a mapper: a new cloud adds its
module and gets the whole matrix for free. `guarded_resources` hands the same recording to the policy pack's own
rules (policy/guardrails/), as the engine would hand it to the pack: with each resource's property
dependencies (`dependencies_recorded`), which is how the engine relates a rule to its security group or a listener
to its load balancer (a resource's id is none of its properties).
"""

from __future__ import annotations

import base64
import gzip
import importlib
import importlib.util
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from guardrails.core import PlainOptions, PlainResource  # policy/, on the path from conftest.py

from inferstack import pulumi_mocks
from inferstack.preview import PROVIDER_TYPE_PREFIX, Recording, RegisteredResource
from inferstack.spec import CLOUDS

WORLD = ("0.0.0.0/0", "::/0")
SECRET_NAMES = ("api-key", "hub-token")
"""The short names of the server's secrets; every backend names a secret's resource `<component>-<short name>`."""


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
    """No ACL can open the bucket: ACLs are off, or inert under the public-access block."""
    tls_only: bool
    readers: tuple[str, ...]
    """Principals a bucket policy allows to read (service principals), beyond the account's own identities; on a
    cloud that keeps ACLs, also `acl:<grant>` for an ACL that is not private."""


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
    """storage: "bucket/prefix*" patterns; secrets: the references the secrets are read by (as in
    SecurityFacts.secret_refs), or "*" for every secret in reach; management and other: the raw resources."""


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
    secret_refs: dict[str, str] = field(default_factory=dict)
    """Short name ("api-key", "hub-token") → the reference the server reads that secret by (SSM parameter name,
    Secret Manager id, KMS secret name, CSMS secret name), as the stored secret's resource says it."""


#### Helpers the mappers share ####


def as_list(value: Any) -> list[Any]:
    """A policy field that holds one value or a list of them, as a list."""
    return [value] if isinstance(value, str) else list(value)


def ingress_source(source: str, network_cidrs: set[Any]) -> str:
    """The rule's source, or "network" when it is the server's own network range."""
    return "network" if source in network_cidrs else source


def settings_by_bucket(recording: Recording, bucket_type: str) -> dict[str, dict[str, Any]]:
    """Standalone bucket-settings resources (`<bucket type>Acl`, `...Versioning` ...) grouped by the bucket they
    configure: {bucket name: {settings type: inputs}}."""
    prefix = bucket_type.rsplit(":", 1)[0]  # "aws:s3/bucket"
    settings: dict[str, dict[str, Any]] = {}
    for resource in recording.resources:
        if resource.type.startswith(prefix) and resource.type != bucket_type:
            settings.setdefault(resource.inputs.get("bucket", ""), {})[resource.type.split(":")[-1]] = resource.inputs
    return settings


def storage_scope(path: str, condition_prefixes: Any) -> str:
    """"bucket/prefix*": an object path as it is; a bucket path (a listing grant) narrowed by its one prefix
    condition, or the whole bucket when the condition names none or several."""
    if "/" in path:
        return path
    prefixes = as_list(condition_prefixes)
    return f"{path}/{prefixes[0]}" if len(prefixes) == 1 else f"{path}/*"


@dataclass(frozen=True)
class PolicyLanguage:
    """What a JSON policy language of the AWS family (AWS IAM, Alibaba RAM, Huawei IAM) calls storage reads,
    secret reads and management, and how its resources name objects and secrets."""

    storage_service: str
    """Action prefix of object storage, lowercase ("s3:")."""
    storage_reads: frozenset[str]
    """Read-only storage actions, lowercase (actions are matched case-insensitively, as the clouds do)."""
    list_prefix_condition: str
    """StringLike condition key that narrows a listing to a prefix ("s3:prefix")."""
    object_path: Callable[[str], str]
    """A storage resource as "bucket" or "bucket/key pattern"."""
    secret_reads: frozenset[str]
    secret_ref: Callable[[str], str]
    """A secret resource as the reference the server reads that secret by ("*" stays "*")."""
    management: frozenset[str] = frozenset()
    """The managed shell's actions, lowercase."""


def policy_grants(policy_json: str | None, language: PolicyLanguage) -> list[Grant]:
    """Each Allow statement of a policy as a Grant, classified the same way on every cloud."""
    grants = []
    for statement in json.loads(policy_json or "{}").get("Statement", []):
        if statement["Effect"] != "Allow":
            continue
        actions = {action.lower() for action in as_list(statement["Action"])}
        resources = as_list(statement.get("Resource", ["*"]))  # none: every resource of the scope granted on
        if all(action.startswith(language.storage_service) for action in actions):
            prefixes = statement.get("Condition", {}).get("StringLike", {}).get(language.list_prefix_condition, "*")
            grants.append(Grant("storage", actions <= language.storage_reads, tuple(
                storage_scope(language.object_path(r), prefixes) for r in resources)))
        elif actions <= language.secret_reads:
            grants.append(Grant("secrets", True, tuple(language.secret_ref(r) for r in resources)))
        elif actions <= language.management:
            grants.append(Grant("management", False, tuple(resources)))
        else:
            grants.append(Grant("other", False, tuple(resources)))
    return grants


def gzip_user_data(encoded: str | None) -> str:
    """User data sent as Base64 of gzip, as the server's cloud-init reads it."""
    return gzip.decompress(base64.b64decode(encoded)).decode() if encoded else ""


def secret_refs(secrets: Iterable[RegisteredResource], reference: Callable[[RegisteredResource], str]
                ) -> dict[str, str]:
    """Short name → reference of each stored secret, told apart by its resource name (`<component>-<short name>`)."""
    return {short: reference(secret) for secret in secrets for short in SECRET_NAMES
            if secret.name.endswith(f"-{short}")}


#### What the guardrails see ####


Dependencies = Mapping[str, Mapping[str, Sequence[str]]]
"""URN → property → the URNs of the resources that property's value came from."""


@contextmanager
def dependencies_recorded() -> Iterator[dict[str, dict[str, list[str]]]]:
    """Record each registration's property dependencies, which the engine passes to stack rules and
    `inferstack.preview` does not keep (filled in as the program under it registers)."""
    captured: dict[str, dict[str, list[str]]] = {}
    register = pulumi_mocks.RecordingMonitor.RegisterResource

    def recording_register(self: Any, request: Any) -> Any:
        response = register(self, request)
        captured[response.urn] = {key: list(deps.urns) for key, deps in request.propertyDependencies.items()}
        return response

    pulumi_mocks.RecordingMonitor.RegisterResource = recording_register  # type: ignore[method-assign]
    try:
        yield captured
    finally:
        pulumi_mocks.RecordingMonitor.RegisterResource = register  # type: ignore[method-assign]


def guarded_resources(recording: Recording, dependencies: Dependencies | None = None) -> list[PlainResource]:
    """The resources as the engine hands them to the policy pack: resource rules see a cloud resource's inputs, stack
    rules every resource (components too) with its outputs and property dependencies; providers are not resources to
    either."""
    resources = {r.urn: PlainResource(r.type, r.name, r.urn, props={**r.outputs, **r.inputs},
                                      inputs=r.inputs, custom=r.custom, property_dependencies={},
                                      opts=PlainOptions(protect=r.protect))
                 for r in recording.resources if not r.type.startswith(PROVIDER_TYPE_PREFIX)}
    for urn, resource in resources.items():
        for prop, urns in (dependencies or {}).get(urn, {}).items():
            resource.property_dependencies[prop] = [resources[u] for u in urns if u in resources]  # type: ignore[index]
    return list(resources.values())


#### The mappers ####

# Last: each mapper module imports the helpers above from this module while it is being imported.

def _fact_mappers() -> dict[str, Callable[[Recording], SecurityFacts]]:
    mappers = {}
    for cloud in CLOUDS:
        module_name = f"tests.components.facts_{cloud}"
        if importlib.util.find_spec(module_name) is not None:
            mappers[cloud] = importlib.import_module(module_name).facts
    return mappers


FACT_MAPPERS: dict[str, Callable[[Recording], SecurityFacts]] = _fact_mappers()

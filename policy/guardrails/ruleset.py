"""The rule set: every rule of the pack in the order the pack lists it, and `evaluate`, which runs them all.

Each rule is declared in the module of its concern, next to its check; this module only lists them. The pack
(`inferstack_policies.py`) wraps `RESOURCE_RULES` and `STACK_RULES` into Pulumi policies; the components'
security-invariant matrix runs `evaluate` over what inferstack registers under Pulumi mocks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from guardrails import (
    cache,
    exposure,
    fleet,
    image_build,
    load_balancers,
    log_retention,
    servers,
    storage,
    storage_grants,
)
from guardrails.core import NotApplicable, PlainResource, ReportViolation, ResourceInput, ResourceRule, Stack, StackRule

#### The rule set, in the order the pack lists its policies ####

RESOURCE_RULES: list[ResourceRule] = [
    exposure.ADMIN_PORTS_NOT_PUBLIC,
    exposure.WORLD_INGRESS_SERVING_PORT_ONLY,
    storage.BUCKETS_NOT_PUBLIC,
    storage.ENCRYPTION_AT_REST,
    servers.METADATA_TOKENS_REQUIRED,
    storage_grants.STORAGE_GRANTS_NO_WILDCARDS,
    storage.CDN_HTTPS_ONLY,
    servers.SERVERS_NO_PUBLIC_ADDRESS,
    load_balancers.LOAD_BALANCER_HTTPS_ONLY,
    load_balancers.LOAD_BALANCER_BACKENDS_ON_SERVING_PORT,
    cache.MANAGED_REDIS_PRIVATE_TLS_AUTH,
    log_retention.LOG_STORES_HAVE_RETENTION,
]
STACK_RULES: list[StackRule] = [
    storage.BUCKETS_HAVE_PUBLIC_ACCESS_BLOCK,
    storage.BUCKETS_HAVE_DEFAULT_ENCRYPTION,
    image_build.SERVER_IDENTITY_LEAST_PRIVILEGE,
    storage.CDN_HTTPS_FRONT_ENDS,
    exposure.PUBLIC_API_HAS_API_KEY,
    fleet.LOAD_BALANCER_HTTPS_FRONT_ENDS,
    exposure.LOAD_BALANCER_ONLY_PUBLIC_LISTENER,
    fleet.FLEET_SPANS_ZONES,
    cache.MANAGED_REDIS_USERS_AND_NETWORK,
    fleet.PRODUCTION_RUNS_A_PROTECTED_FLEET,
    fleet.FLEET_WATCHED_BY_ALARMS,
]


#### Running the whole set over plain resources (the component tests) ####


@dataclass(frozen=True)
class Finding:
    rule: str
    level: str
    message: str
    urn: str


@dataclass
class Evaluation:
    findings: list[Finding] = field(default_factory=list)
    not_applicable: dict[tuple[str, str], str] = field(default_factory=dict)
    """(rule, urn; "" for a stack rule) → the reason."""
    examined: dict[str, set[str]] = field(default_factory=dict)
    """Resource rule → the resource types it checked."""


def evaluate(resources: Sequence[PlainResource], config: Mapping[str, Mapping[str, Any]] | None = None) -> Evaluation:
    """Every rule over a stack's resources, as the engine runs the pack: resource rules on each resource's inputs,
    stack rules on all of them. `config` maps a rule's name to its configuration."""
    result = Evaluation()
    for resource in (r for r in resources if r.custom):
        inputs = resource.inputs if resource.inputs is not None else resource.props
        for rule in RESOURCE_RULES:
            if rule.reads(resource.resource_type):
                result.examined.setdefault(rule.name, set()).add(resource.resource_type)
            checked = ResourceInput(resource.resource_type, inputs, (config or {}).get(rule.name, {}))
            _collect(rule.name, rule.level, resource.urn, result, functools.partial(rule.check, checked))
    for stack_rule in STACK_RULES:
        stack = Stack(resources, config=(config or {}).get(stack_rule.name, {}))
        _collect(stack_rule.name, stack_rule.level, "", result, functools.partial(stack_rule.check, stack))
    return result


def _collect(rule: str, level: str, checked_urn: str, result: Evaluation,
             run: Callable[[ReportViolation], None]) -> None:
    def report(message: str, urn: str | None = None) -> None:
        result.findings.append(Finding(rule, level, message, urn or checked_urn))

    try:
        run(report)
    except NotApplicable as verdict:
        result.not_applicable[(rule, checked_urn)] = verdict.reason

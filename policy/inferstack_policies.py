"""inferstack guardrails as Pulumi policies: each rule of the `guardrails` package wrapped for the policy engine.

The rules themselves (what is checked, on which resource types, with which messages) live in `guardrails/`, one
module per concern: plain functions that the components' security-invariant tests run too, so the pack and the
components share one rule set. This module only adapts them: a resource rule becomes a ResourceValidationPolicy (it
runs on the resource's inputs before the resource is created, so a mandatory violation stops `pulumi up` there), a
stack rule a StackValidationPolicy (it runs on the whole stack at the end of a preview or an update).
docs/policy.md says what each policy checks on each cloud and what no policy can check.

`__main__.py` builds the PolicyPack, because constructing one starts the analyzer's gRPC server and blocks forever;
everything here imports and tests like ordinary code.

Unknown values: the engine hands the policies its read-only property proxies, which raise UnknownValueError on a
value a preview cannot know; it propagates out of the rule and the engine reports "can't run policy during
preview" (advisory). Stack rules get that error type so that, where they only relate resources, an unknown value
means "not this one" instead.
"""

from __future__ import annotations

from guardrails.core import NotApplicable, ResourceInput, ResourceRule, Stack, StackRule
from guardrails.ruleset import RESOURCE_RULES, STACK_RULES
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

LEVELS = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY}
SEVERITIES = {"critical": Severity.CRITICAL, "high": Severity.HIGH, "medium": Severity.MEDIUM}


def resource_policy(rule: ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        try:
            rule.check(ResourceInput(args.resource_type, args.props, args.get_config()), report_violation)
        except NotApplicable as verdict:
            args.not_applicable(verdict.reason)

    schema = PolicyConfigSchema(properties=dict(rule.config_schema)) if rule.config_schema else None
    return ResourceValidationPolicy(name=rule.name, description=rule.description, validate=validate,
                                    enforcement_level=LEVELS[rule.level], severity=SEVERITIES[rule.severity],
                                    config_schema=schema)


def stack_policy(rule: StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        try:
            rule.check(Stack(args.resources, unknown_errors=(UnknownValueError,), config=args.get_config()),
                       report_violation)
        except NotApplicable as verdict:
            args.not_applicable(verdict.reason)

    schema = PolicyConfigSchema(properties=dict(rule.config_schema)) if rule.config_schema else None
    return StackValidationPolicy(name=rule.name, description=rule.description, validate=validate,
                                 enforcement_level=LEVELS[rule.level], severity=SEVERITIES[rule.severity],
                                 config_schema=schema)


RESOURCE_POLICIES = [resource_policy(rule) for rule in RESOURCE_RULES]
STACK_POLICIES = [stack_policy(rule) for rule in STACK_RULES]
POLICIES = [*RESOURCE_POLICIES, *STACK_POLICIES]
_BY_NAME = {policy.name: policy for policy in POLICIES}

admin_ports_not_public = _BY_NAME["admin-ports-not-public"]
world_ingress_serving_port_only = _BY_NAME["world-ingress-serving-port-only"]
buckets_not_public = _BY_NAME["buckets-not-public"]
encryption_at_rest = _BY_NAME["encryption-at-rest"]
metadata_tokens_required = _BY_NAME["metadata-tokens-required"]
storage_grants_no_wildcards = _BY_NAME["storage-grants-no-wildcards"]
cdn_https_only = _BY_NAME["cdn-https-only"]
buckets_have_public_access_block = _BY_NAME["buckets-have-public-access-block"]
buckets_have_default_encryption = _BY_NAME["buckets-have-default-encryption"]
server_identity_least_privilege = _BY_NAME["server-identity-least-privilege"]
cdn_https_front_ends = _BY_NAME["cdn-https-front-ends"]
public_api_has_api_key = _BY_NAME["public-api-has-api-key"]
servers_no_public_address = _BY_NAME["servers-no-public-address"]
load_balancer_https_only = _BY_NAME["load-balancer-https-only"]
load_balancer_backends_on_serving_port = _BY_NAME["load-balancer-backends-on-serving-port"]
load_balancer_https_front_ends = _BY_NAME["load-balancer-https-front-ends"]
load_balancer_only_public_listener = _BY_NAME["load-balancer-only-public-listener"]
fleet_spans_zones = _BY_NAME["fleet-spans-zones"]
managed_redis_private_tls_auth = _BY_NAME["managed-redis-private-tls-auth"]
log_stores_have_retention = _BY_NAME["log-stores-have-retention"]
production_runs_a_protected_fleet = _BY_NAME["production-runs-a-protected-fleet"]
managed_redis_users_and_network = _BY_NAME["managed-redis-users-and-network"]

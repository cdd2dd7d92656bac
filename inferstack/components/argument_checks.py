"""The checks every component runs on its arguments, before anything is created.

`validate_args` checks a component's arguments against its `*Args` TypedDict (unknown keys, wrong types); the rest
check values the types cannot: CIDR blocks (and which are private), domain names, the cache's AUTH token. Each
mistake becomes a Problem naming the field, the value and the fix.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, TypeVar

import pulumi
from pydantic import ConfigDict, TypeAdapter, ValidationError

from inferstack.errors import InputError, Problem, input_error, with_article
from inferstack.spec import problems_from_validation

# Networks that count as private when deciding whether an endpoint needs an API key:
# RFC 1918, RFC 6598 (carrier-grade NAT, used by overlay VPNs) and RFC 4193 (IPv6 unique local).
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_cidrs(values: Sequence[str], field_name: str) -> tuple[tuple[IpNetwork, ...], list[Problem]]:
    """Parse CIDR blocks strictly; each bad one becomes a Problem naming its index and the likely fix."""
    networks: list[IpNetwork] = []
    problems: list[Problem] = []
    for index, text in enumerate(values):
        where = f"{field_name}[{index}]"
        try:
            networks.append(ipaddress.ip_network(str(text).strip(), strict=True))
        except ValueError as error:
            if "host bits set" in str(error):
                network = ipaddress.ip_network(str(text).strip(), strict=False)
                problems.append(Problem(where, "has host bits set", value=text, fix=f"use {network}"))
            else:
                problems.append(Problem(where, "is not a CIDR block", value=text,
                                        fix="write an IPv4 or IPv6 network such as 203.0.113.0/24 or 2001:db8::/48"))
    return tuple(networks), problems


def is_private(network: IpNetwork) -> bool:
    return any(network.version == p.version and network.subnet_of(p) for p in PRIVATE_NETWORKS)  # type: ignore[arg-type]


# A lowercase DNS name: labels of letters, digits and inner dashes, a top-level label of letters (no scheme, port,
# path or wildcard). The form CDNs and certificate services accept for a domain they serve.
DOMAIN_NAME = re.compile(r"(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")


def domain_problem(field: str, domain: str) -> Problem | None:
    if DOMAIN_NAME.fullmatch(domain):
        return None
    return Problem(field, "is not a lowercase DNS name", value=domain,
                   fix="give a name such as assets.example.com, without scheme, port, path or wildcard")


# Component args (TypedDicts) carry this with `@with_config(ARGS_CONFIG)`: a misspelt argument is an error, not
# silently ignored, and Outputs are accepted where an argument is a pulumi.Input.
ARGS_CONFIG = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def validate_args(args_type: type, args: Mapping[str, Any], component: str) -> dict[str, Any]:
    """Check a component's args against its TypedDict (unknown keys, wrong types) before anything registers."""
    if not isinstance(args, Mapping):
        raise input_error(component, "args must be a mapping", value=args,
                          fix=f"pass {with_article(args_type.__name__)} dict")
    try:
        checked: dict[str, Any] = _adapter(args_type).validate_python(dict(args))
    except ValidationError as error:
        raise InputError(_distinct(problems_from_validation(error, prefix=component))) from None
    return checked


@cache
def _adapter(args_type: type) -> TypeAdapter[Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(args_type)
    # pulumi.Input refers to Output and T by forward reference; resolve them for pydantic.
    adapter.rebuild(_types_namespace={"Output": pulumi.Output, "T": TypeVar("T")})
    return adapter


def _distinct(problems: list[Problem]) -> list[Problem]:
    """One problem per field: a failed `Input[str]` otherwise reports each union member (str, Awaitable, Output)."""
    seen: dict[str, Problem] = {}
    for problem in problems:
        seen.setdefault(problem.field, problem)
    return list(seen.values())


# The AUTH token every cloud that takes one accepts: ElastiCache 16-128 printable characters without spaces, '"', '/'
# or '@' (pulumi_aws ReplicationGroup.auth_token -> AWS AUTH docs); Tair 8-32 characters of three classes among upper,
# lower, digits and `!@#$%^&*()_+-=` (pulumi_alicloud kvstore.Instance.password); DCS 8-32 characters of three classes,
# specials `~!@#$^&*()-_=+|{}:,<.>/?` (pulumi_huaweicloud dcs.Instance.password); and the server's secret fetch writes
# only [A-Za-z0-9._~+/=:@-] (fetch_secret.SAFE_VALUE). So: 16-32 of letters, digits and _+-=, with an upper, a lower
# and a digit.
CACHE_AUTH_TOKEN_PATTERN = r"^(?=.*[A-Z])(?=.*[a-z])(?=.*[0-9])[A-Za-z0-9_+=-]{16,32}$"


def checked_cache_token(token: pulumi.Input[str], field: str) -> pulumi.Output[str]:
    """The token, refused (when its value is known) unless every cloud accepts it; stays secret."""
    def check(value: str) -> str:
        if not re.fullmatch(CACHE_AUTH_TOKEN_PATTERN, value):
            raise input_error(field, "is not an AUTH token every managed Redis accepts", value="(secret, not shown)",
                              fix="give 16 to 32 characters of letters, digits and _ + - =, with an uppercase letter, "
                                  "a lowercase letter and a digit")
        return value

    return pulumi.Output.secret(token).apply(check)

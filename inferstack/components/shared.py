"""What every cloud's backend does the same way, kept once: the network's address ranges, the egress the bootstrap
needs, retention choices, zone selection, and gzip'd user data checked against the cloud's limit and the plan's
region.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pulumi

from inferstack.bootstrap.render import user_data_gzip
from inferstack.errors import input_error
from inferstack.plan import DeploymentPlan

#### Choices every cloud shares ####

# An uncommon private range, so that peering with a network built from the usual 10.0.0.0/16 or 192.168.0.0/16
# does not clash; one /20 per zone (4,091 usable addresses each).
NETWORK_CIDR = "10.64.0.0/16"
SUBNET_RANGES = tuple(str(subnet) for subnet in ipaddress.IPv4Network(NETWORK_CIDR).subnets(new_prefix=20))

# Egress the bootstrap needs: HTTPS (object storage, secret store, model hub, container registries, NVIDIA) and
# HTTP (Ubuntu mirrors serve apt over HTTP; packages are signed).
WEB_EGRESS_PORTS: Mapping[str, int] = {"https": 443, "http": 80}

# Retention choices (not any cloud's limits): roll a model back within a month; keep a year of access logs.
NONCURRENT_VERSION_DAYS = 30
NONCURRENT_VERSIONS_KEPT = 3
INCOMPLETE_UPLOAD_DAYS = 7
ACCESS_LOG_DAYS = 365


#### Helpers every backend uses ####

T = TypeVar("T")


def nth(index: int) -> Callable[[Sequence[T]], T]:
    """For `.apply`: the item at `index` of a list Output (a zone of the zones looked up)."""
    return lambda items: items[index]


def first_zones(offering: Sequence[str], count: int, machine_type: str) -> list[str]:
    """The first `count` zones, in the order given, of those offering the machine type; an error saying which do."""
    if len(offering) < count:
        raise input_error("plan.zones", f"{machine_type} is offered in {len(offering)} zone(s) of this region "
                          f"({', '.join(offering) or 'none'})", value=count,
                          fix="plan for another region or machine type, or bring your own subnets")
    return list(offering[:count])


def compressed_user_data(text: str, *, limit_bytes: int, service: str) -> str:
    """User data as Base64 of gzip: deterministic bytes (an unchanged bootstrap never replaces a server), which
    cloud-init recognises and unpacks. `limit_bytes` bounds the gzip bytes (the cloud's limit before Base64)."""
    packed = user_data_gzip(text)
    if len(packed) > limit_bytes:
        raise input_error("bootstrap", f"compresses to {len(packed)} bytes of user data; {service} accepts "
                          f"{limit_bytes}", value=f"{len(text.encode())} bytes uncompressed",
                          fix="move large files out of the cloud-config (fetch them from the model bucket)")
    return base64.b64encode(packed).decode()


def checked_user_data(plan: DeploymentPlan, user_data: pulumi.Input[str], provider_region: pulumi.Input[str], *,
                      provider: str, encode: Callable[[str], T]) -> pulumi.Output[T]:
    """The user data as the cloud takes it (`encode`), once the provider's region is known to be the plan's: the
    boot script reads the bucket and the secrets in the plan's region. The provider is resolved for the component
    (an explicit provider in opts included), which the component's region check cannot see."""
    def checked(values: list[Any]) -> T:
        text, region = values
        if region != plan.region:
            raise input_error("plan", f"was made for region {plan.region} but the {provider} provider deploys to "
                              f"{region}", fix=f"plan for {region}, or give the component a provider for {plan.region}")
        return encode(text)

    return pulumi.Output.all(user_data, provider_region).apply(checked)

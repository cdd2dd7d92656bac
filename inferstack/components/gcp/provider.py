"""What the Google Cloud provider tells: its region (stack config, environment, or its resolved client config), its
project, and the fields of its lookup results (each through `answered`: unknown under unit-test mocks that leave it
out)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from inferstack.components.contract import StrOutput
from inferstack.components.lookups import answered
from inferstack.components.naming import invoke_options

# The provider's environment variables, in its own order (pulumi_gcp/config/vars.py).
REGION_ENV = ("GOOGLE_REGION", "GCLOUD_REGION", "CLOUDSDK_COMPUTE_REGION")
ZONE_ENV = ("GOOGLE_ZONE", "GCLOUD_ZONE", "CLOUDSDK_COMPUTE_ZONE")
CLIENT_CONFIG_LOOKUP = "gcp:organizations/getClientConfig:getClientConfig"


def environment_value(names: Sequence[str]) -> str | None:
    """The first of the provider's environment variables `names` that is set."""
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def configured_region() -> str | None:
    """The region the provider will use; None when unset."""
    # The provider's own order: stack config, then the environment; a region may be implied by the zone.
    config = pulumi.Config("gcp")
    region = config.get("region") or environment_value(REGION_ENV)
    if region:
        return region
    zone = config.get("zone") or environment_value(ZONE_ENV)
    return zone.rsplit("-", 1)[0] if zone else None


def provider_region(client: pulumi.Output[gcp.organizations.GetClientConfigResult]) -> StrOutput:
    """The provider's region as it resolved it: its region setting, else the region of its zone setting."""
    region = client.apply(lambda c: c.region or (c.zone or "").rsplit("-", 1)[0] or None)
    return answered(region, f"{CLIENT_CONFIG_LOOKUP} region", fix="set gcp:region (or gcp:zone) in the stack config")


def client_project(parent: pulumi.Resource) -> StrOutput:
    """The project the component's provider deploys to."""
    client = gcp.organizations.get_client_config_output(opts=invoke_options(parent))
    return answered(client.project, f"{CLIENT_CONFIG_LOOKUP} project", fix="set gcp:project in the stack config")


def result_field(value: Any, name: str) -> Any:
    """A field of an SDK result: typed objects in a deployment, plain dicts from some mocks."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name)

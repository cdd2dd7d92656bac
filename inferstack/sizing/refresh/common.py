"""What every cloud module of the price refresh shares: the rows it reads, the answers it gives, and
the two ways it can fail before asking anything (SDK not installed, no credentials).

A cloud module (aws.py, gcp.py, alibaba.py, huawei.py) has the same names in the same order:

    SDK                    the Python package it needs (imported lazily, never at module import)
    CREDENTIALS            where its SDK reads credentials from, for error messages
    ALL_TYPES_UNSUPPORTED  None, or why `--all-types` cannot work on this cloud
    connect(region)        an SDK client built from the environment's credentials
    fetch_prices(client, region, instances)   the API's on-demand prices for those instance types
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from decimal import Decimal
from types import ModuleType

from inferstack.errors import InferstackError, input_error


@dataclass(frozen=True)
class InstanceSpec:
    """One instance type of instances.csv, with the specs a price computation or a spec check needs."""

    instance_type: str
    family: str
    vcpus: Decimal
    memory_gib: Decimal
    gpu_model: str
    gpu_count: int
    gpu_memory_gib_each: Decimal | None
    local_nvme_gb: Decimal | None  # None: instances.csv does not say


@dataclass(frozen=True)
class PriceQuote:
    """A real on-demand price the API returned (or, for GCP, composed from the API's unit prices)."""

    instance_type: str
    currency: str
    price_per_hour: Decimal
    source: str  # the API and call, e.g. "AWS Price List API get_products AmazonEC2 us-east-1"
    notes: str


@dataclass(frozen=True)
class Unpriced:
    """An instance type the API did not price, and what it said (or what was missing)."""

    instance_type: str
    reason: str


@dataclass(frozen=True)
class SpecMismatch:
    """A spec the API states differently from instances.csv. Reported, never written back."""

    instance_type: str
    field: str
    catalog_value: str
    api_value: str


@dataclass
class CloudPrices:
    """What one cloud module found for one region."""

    quotes: list[PriceQuote] = field(default_factory=list)
    unpriced: list[Unpriced] = field(default_factory=list)
    mismatches: list[SpecMismatch] = field(default_factory=list)


@dataclass(frozen=True)
class Sdk:
    """An optional dependency: the module to import and the pip package that provides it."""

    module: str
    pip_package: str


class RefreshError(InferstackError):
    """A pricing API call failed (network, throttling, server error). Nothing was written."""


def import_sdk(cloud: str, sdk: Sdk) -> ModuleType:
    """Import an SDK module on first use, or say which package to install."""
    try:
        return importlib.import_module(sdk.module)
    except ImportError as error:
        raise input_error(
            "--cloud", f"refreshing {cloud} prices needs the Python package {sdk.pip_package!r}, "
            f"which is not installed ({error})", value=cloud,
            fix=f"pip install {sdk.pip_package}  (or: pip install 'inferstack[refresh]')") from None


def missing_credentials(cloud: str, credentials: str, detail: str = "") -> InferstackError:
    """The error for absent or rejected credentials, naming where the SDK looks for them."""
    said = f" ({detail})" if detail else ""
    return input_error("credentials", f"no usable {cloud} credentials{said}", fix=f"set {credentials}")


def decimal_or_none(text: str) -> Decimal | None:
    return Decimal(text) if text.strip() else None


def spec_mismatches(instance: InstanceSpec, api_specs: dict[str, Decimal | None]) -> list[SpecMismatch]:
    """Compare the specs an API states (vcpus, memory_gib, gpu_count; None = not stated) with the catalog's."""
    catalog: dict[str, Decimal] = {"vcpus": instance.vcpus, "memory_gib": instance.memory_gib,
                                   "gpu_count": Decimal(instance.gpu_count)}
    return [SpecMismatch(instance.instance_type, name, _plain(catalog[name]), _plain(value))
            for name, value in api_specs.items() if value is not None and value != catalog[name]]


def format_price(value: Decimal) -> str:
    """A price as the CSV stores it: plain digits, at most 10 decimals, no trailing zeros."""
    text = f"{value.quantize(Decimal('1e-10')):f}".rstrip("0").rstrip(".")
    return text or "0"


def _plain(value: Decimal) -> str:
    return f"{value.normalize():f}"

"""GCP: on-demand prices composed from the Cloud Billing Catalog API (google-cloud-billing,
CloudCatalogClient.list_skus on the Compute Engine service, services/6F81-5844-456A).

Google does not price machine types; it prices the parts: per vCPU-hour and per GiB-hour of memory of a
machine series, per GPU-hour of an accelerator, per GiB-month of Local SSD. A type's hourly price is

    vcpus × core + memory_gib × ram + gpu_count × gpu + bundled_local_ssd_gib × local_ssd / 730

with the shape (vCPUs, memory, GPUs, bundled Local SSD) from instances.csv and 730 hours a month, the
convention of Google's pricing calculator. Only OnDemand SKUs that list the region in serviceRegions
count, and each part must match exactly one price, in the unit expected; otherwise the type stays
unpriced with the reason. The description patterns below are the SKU names Google uses (e.g.
"N2 Instance Core running in Americas", "Nvidia L4 GPU running in Americas"); a series or GPU without
a pattern (e.g. H200 in a3-ultragpu) is listed as unpriced, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from inferstack.sizing.refresh.common import (
    CloudPrices,
    InstanceSpec,
    PriceQuote,
    RefreshError,
    Sdk,
    Unpriced,
    import_sdk,
    missing_credentials,
)

SDK = Sdk(module="google.cloud.billing_v1", pip_package="google-cloud-billing")
CREDENTIALS = ("GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run "
               "`gcloud auth application-default login` (Application Default Credentials)")
ALL_TYPES_UNSUPPORTED: str | None = (
    "the Billing Catalog prices vCPUs, memory and GPUs, not machine types, so the machine shapes to price "
    "come from instances.csv; add a row there to price another type"
)

COMPUTE_ENGINE_SERVICE = "services/6F81-5844-456A"
HOURS_PER_MONTH = Decimal(730)  # Google Cloud pricing calculator convention

# Machine series (instance type prefix) → (vCPU SKU, memory SKU) description patterns.
SERIES_SKUS: dict[str, tuple[str, str]] = {
    "n1": (r"N1 Predefined Instance Core running in ", r"N1 Predefined Instance Ram running in "),
    "n2": (r"N2 Instance Core running in ", r"N2 Instance Ram running in "),
    "c3": (r"C3 Instance Core running in ", r"C3 Instance Ram running in "),
    "g2": (r"G2 Instance Core running in ", r"G2 Instance Ram running in "),
    "g4": (r"G4 Instance Core running in ", r"G4 Instance Ram running in "),
    "a2": (r"A2 Instance Core running in ", r"A2 Instance Ram running in "),
    "a3": (r"A3 Instance Core running in ", r"A3 Instance Ram running in "),
}
# (gpu_model, GiB per GPU) as instances.csv names them → GPU SKU description pattern.
GPU_SKUS: dict[tuple[str, int], str] = {
    ("T4", 16): r"Nvidia Tesla T4 GPU running in ",
    ("L4", 24): r"Nvidia L4 GPU running in ",
    ("A100", 40): r"Nvidia Tesla A100 GPU running in ",
    ("A100", 80): r"Nvidia Tesla A100 80GB GPU running in ",
    ("H100", 80): r"Nvidia H100 80GB GPU running in ",
    ("RTX PRO 6000", 96): r"RTX 6000 96GB running in ",
}
LOCAL_SSD_SKU = r"SSD backed Local Storage( in .+)?$"
# Families whose machine types come with Local SSD that is billed with them (A2 Ultra, A3 High).
BUNDLED_LOCAL_SSD_FAMILIES = {"a2-ultragpu", "a3-highgpu"}

_UNIT_CORE, _UNIT_RAM, _UNIT_GPU, _UNIT_SSD = "h", "GiBy.h", "h", "GiBy.mo"


@dataclass(frozen=True)
class UnitPrice:
    """One OnDemand SKU that serves the region: its price per usage unit."""

    sku_id: str
    description: str
    usage_unit: str
    currency: str
    price: Decimal | None  # None: tiered pricing, not a single list price


@dataclass(frozen=True)
class _Part:
    label: str
    quantity: Decimal
    pattern: str
    unit: str
    per_hour_divisor: Decimal = Decimal(1)


def connect(region: str) -> Any:
    """A CloudCatalogClient with Application Default Credentials."""
    billing = import_sdk("gcp", SDK)
    google_auth = import_sdk("gcp", Sdk("google.auth", "google-cloud-billing"))
    auth_exceptions = import_sdk("gcp", Sdk("google.auth.exceptions", "google-cloud-billing"))
    try:
        credentials, _project = google_auth.default()
    except auth_exceptions.DefaultCredentialsError as error:
        raise missing_credentials("GCP", CREDENTIALS, str(error).splitlines()[0]) from None
    return billing.CloudCatalogClient(credentials=credentials)


def fetch_prices(client: Any, region: str, instances: Sequence[InstanceSpec] | None) -> CloudPrices:
    """List Compute Engine's SKUs once, keep the region's OnDemand ones, compose each type's price."""
    if instances is None:
        raise ValueError(f"GCP cannot refresh all types: {ALL_TYPES_UNSUPPORTED}")
    unit_prices = region_unit_prices(client, region)
    result = CloudPrices()
    for instance in instances:
        parts_or_reason = _parts(instance)
        if isinstance(parts_or_reason, str):
            result.unpriced.append(Unpriced(instance.instance_type, parts_or_reason))
            continue
        quote_or_reason = _compose(instance, region, parts_or_reason, unit_prices)
        if isinstance(quote_or_reason, str):
            result.unpriced.append(Unpriced(instance.instance_type, quote_or_reason))
        else:
            result.quotes.append(quote_or_reason)
    return result


def region_unit_prices(client: Any, region: str) -> list[UnitPrice]:
    """Every OnDemand Compute Engine SKU whose serviceRegions include `region` (all pages)."""
    billing = import_sdk("gcp", SDK)
    request = billing.ListSkusRequest(parent=COMPUTE_ENGINE_SERVICE)
    found = []
    with _api_errors():
        for sku in client.list_skus(request=request):
            if sku.category.usage_type == "OnDemand" and region in sku.service_regions and sku.pricing_info:
                found.append(_unit_price(sku))
    return found


def _unit_price(sku: Any) -> UnitPrice:
    expression = sku.pricing_info[0].pricing_expression
    rates = list(expression.tiered_rates)
    price = None
    currency = rates[0].unit_price.currency_code if rates else ""
    if len(rates) == 1:
        money = rates[0].unit_price
        price = Decimal(money.units) + Decimal(money.nanos) / Decimal(10**9)
    return UnitPrice(sku.sku_id, sku.description, expression.usage_unit, currency, price)


def _parts(instance: InstanceSpec) -> list[_Part] | str:
    """The priced parts of a machine type, or why it cannot be priced from SKUs."""
    series = instance.instance_type.split("-")[0]
    if series not in SERIES_SKUS:
        return f"no SKU pattern for machine series {series!r} (known: {', '.join(SERIES_SKUS)})"
    core, ram = SERIES_SKUS[series]
    parts = [_Part("vCPU", instance.vcpus, core, _UNIT_CORE), _Part("GiB RAM", instance.memory_gib, ram, _UNIT_RAM)]
    if instance.gpu_count:
        gpu_key = (instance.gpu_model, int(instance.gpu_memory_gib_each or 0))
        if gpu_key not in GPU_SKUS:
            return (f"no SKU pattern for the GPU {instance.gpu_model} {gpu_key[1]} GiB "
                    "(its SKU name is not verified); not composed")
        parts.append(_Part("GPU", Decimal(instance.gpu_count), GPU_SKUS[gpu_key], _UNIT_GPU))
    if instance.family in BUNDLED_LOCAL_SSD_FAMILIES:
        if not instance.local_nvme_gb:
            return f"{instance.family} bundles Local SSD but instances.csv gives no local_nvme_gb to price it"
        parts.append(_Part("GiB Local SSD", instance.local_nvme_gb, LOCAL_SSD_SKU, _UNIT_SSD, HOURS_PER_MONTH))
    return parts


def _compose(instance: InstanceSpec, region: str, parts: list[_Part],
             unit_prices: list[UnitPrice]) -> PriceQuote | str:
    total = Decimal(0)
    currencies = set()
    terms = []
    for part in parts:
        match = _single_match(part, unit_prices, region)
        if isinstance(match, str):
            return match
        sku, price = match
        total += part.quantity * price / part.per_hour_divisor
        currencies.add(sku.currency)
        per = f"/{part.per_hour_divisor}h" if part.per_hour_divisor != 1 else ""
        terms.append(f"{part.quantity:f} {part.label} x {price:f}{per} (SKU {sku.sku_id})")
    if len(currencies) != 1:
        return f"the parts are priced in different currencies ({', '.join(sorted(currencies))})"
    notes = ("on-demand list price, no sustained-use discount; composed from SKU unit prices: "
             + " + ".join(terms))
    return PriceQuote(instance.instance_type, currencies.pop(), total,
                      f"Cloud Billing Catalog API list_skus {COMPUTE_ENGINE_SERVICE} {region}", notes)


def _single_match(part: _Part, unit_prices: list[UnitPrice], region: str) -> tuple[UnitPrice, Decimal] | str:
    pattern = re.compile("^" + part.pattern)
    matches = [u for u in unit_prices if pattern.match(u.description)]
    if not matches:
        return f"no OnDemand SKU matching {part.pattern!r} serves {region}"
    wrong_unit = [u for u in matches if u.usage_unit != part.unit]
    if wrong_unit:
        return f"SKU {wrong_unit[0].sku_id} is priced per {wrong_unit[0].usage_unit!r}, expected {part.unit!r}"
    prices = {(u.price, u.currency) for u in matches}
    if len(prices) > 1:
        ids = ", ".join(u.sku_id for u in matches)
        return f"ambiguous: SKUs {ids} all match {part.pattern!r} in {region} with different prices"
    price = matches[0].price
    if price is None:
        return f"SKU {matches[0].sku_id} has tiered prices, not one list price"
    return matches[0], price


@contextmanager
def _api_errors() -> Iterator[None]:
    """Turn google-api-core's errors into ones that say what to do."""
    api_exceptions = import_sdk("gcp", Sdk("google.api_core.exceptions", "google-cloud-billing"))
    auth_exceptions = import_sdk("gcp", Sdk("google.auth.exceptions", "google-cloud-billing"))
    try:
        yield
    except (api_exceptions.Unauthenticated, api_exceptions.PermissionDenied, auth_exceptions.RefreshError) as error:
        raise missing_credentials("GCP", CREDENTIALS, f"the Cloud Billing API answered: {error}") from None
    except api_exceptions.GoogleAPIError as error:
        raise RefreshError(f"Cloud Billing Catalog API list_skus failed: {error}") from None

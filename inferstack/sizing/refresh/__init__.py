"""`inferstack catalog refresh`: replace one cloud's on-demand prices in a prices CSV with what that
cloud's own pricing API says today.

    result = refresh_prices("aws", output=DEFAULT_PRICES_CSV)
    print(result.summary())

One module per cloud (aws, gcp, alibaba, huawei: `CloudFacts.pricing_module`) with the same names (see common.py
and `CloudPricing`), imported when its cloud is refreshed; writer.py reads instances.csv and rewrites the prices
CSV atomically. The SDKs are optional dependencies, imported only when their cloud is refreshed.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Protocol, cast

from pydantic import BaseModel, ConfigDict

from inferstack.clouds import CLOUD_FACTS
from inferstack.errors import input_error
from inferstack.sizing.refresh.common import CloudPrices, InstanceSpec, PriceQuote, RefreshError, Sdk, format_price
from inferstack.sizing.refresh.writer import PriceRow, read_instances, read_price_rows, replace_rows, write_price_rows

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
DEFAULT_INSTANCES_CSV = DATA_DIR / "instances.csv"
DEFAULT_PRICES_CSV = DATA_DIR / "prices.csv"


class CloudPricing(Protocol):
    """The shape every cloud module has (a module satisfies it)."""

    SDK: Sdk
    CREDENTIALS: str
    ALL_TYPES_UNSUPPORTED: str | None

    def connect(self, region: str) -> Any: ...

    def fetch_prices(self, client: Any, region: str, instances: Sequence[InstanceSpec] | None) -> CloudPrices: ...



class UnpricedType(BaseModel):
    """An instance type the refresh asked about and the API did not price."""

    model_config = ConfigDict(frozen=True)

    region: str
    instance_type: str
    reason: str


class SpecDifference(BaseModel):
    """A spec the API states differently from instances.csv (reported; instances.csv is not changed)."""

    model_config = ConfigDict(frozen=True)

    region: str
    instance_type: str
    field: str
    catalog_value: str
    api_value: str


class RefreshResult(BaseModel):
    """What a refresh wrote, what it could not price, and what it noticed (`model_dump` for JSON output)."""

    model_config = ConfigDict(frozen=True)

    cloud: str
    regions: tuple[str, ...]
    output: Path
    source_date: str
    written: tuple[PriceRow, ...]
    unpriced: tuple[UnpricedType, ...]
    dropped: tuple[PriceRow, ...]  # earlier rows of refreshed types that the API no longer prices
    spec_differences: tuple[SpecDifference, ...]

    def summary(self) -> str:
        """A plain-text report for the command line."""
        lines = [f"{self.cloud}: {len(self.written)} price(s) written for {', '.join(self.regions)} "
                 f"to {self.output} (source_date {self.source_date})"]
        lines += [f"  {r.region} {r.instance_type}: {r.price_per_hour} {r.currency}/h" for r in self.written]
        if self.unpriced:
            lines.append(f"Not priced by the API ({len(self.unpriced)}), left without a price row:")
            lines += [f"  {u.region} {u.instance_type}: {u.reason}" for u in self.unpriced]
        if self.dropped:
            lines.append(f"Earlier rows removed because the API no longer prices them ({len(self.dropped)}):")
            lines += [f"  {r.region} {r.instance_type}: was {r.price_per_hour} {r.currency} "
                      f"({r.source}, {r.source_date})" for r in self.dropped]
        if self.spec_differences:
            lines.append(f"Specs that differ from instances.csv ({len(self.spec_differences)}); "
                         "instances.csv was not changed:")
            lines += [f"  {d.region} {d.instance_type} {d.field}: instances.csv {d.catalog_value}, API {d.api_value}"
                      for d in self.spec_differences]
        return "\n".join(lines)


def refresh_prices(cloud: str, *, region: str | None = None, output: Path | None = None, all_types: bool = False,
                   instances_csv: Path = DEFAULT_INSTANCES_CSV, client: Any = None,
                   today: date | None = None) -> RefreshResult:
    """Ask `cloud`'s pricing API for on-demand prices and replace that cloud's rows in `output`.

    region: price this region (default: every region the cloud has in instances.csv).
    output: the prices CSV to rewrite (default: DEFAULT_PRICES_CSV, the packaged one); another path keeps a
        private catalog, created if absent.
    all_types: price every type the API sells in the region, not just the instances.csv types (AWS only).
    client: an SDK client to use instead of one built from the environment (tests pass a stub).
    Nothing is written unless every API call succeeded and each region got at least one price.
    """
    pricing = _cloud_module(cloud)
    if all_types and pricing.ALL_TYPES_UNSUPPORTED:
        raise input_error("--all-types", f"is not available for {cloud}: {pricing.ALL_TYPES_UNSUPPORTED}",
                          value=True, fix="drop --all-types")
    catalog = read_instances(instances_csv, cloud)
    regions = [region] if region else list(catalog)
    if not regions:
        raise input_error("--region", f"instances.csv ({instances_csv}) has no {cloud} rows to take regions from",
                          fix=f"name a region with --region, or add {cloud} rows to instances.csv")
    output = output or DEFAULT_PRICES_CSV
    rows = read_price_rows(output)  # an unreadable --output fails here, before any API call
    source_date = (today or date.today()).isoformat()
    outcomes = []
    for name in regions:
        instances = None if all_types else _instances_for(catalog, name, cloud)
        found = pricing.fetch_prices(client if client is not None else pricing.connect(name), name, instances)
        rows, outcome = _apply(rows, cloud, name, instances, found, source_date)
        outcomes.append(outcome)
    write_price_rows(output, rows)
    return RefreshResult(
        cloud=cloud, regions=tuple(regions), output=output, source_date=source_date,
        written=tuple(row for o in outcomes for row in o.written),
        unpriced=tuple(u for o in outcomes for u in o.unpriced),
        dropped=tuple(row for o in outcomes for row in o.dropped),
        spec_differences=tuple(d for o in outcomes for d in o.spec_differences))


@dataclass(frozen=True)
class _RegionOutcome:
    written: list[PriceRow]
    unpriced: list[UnpricedType]
    dropped: list[PriceRow]
    spec_differences: list[SpecDifference]


def _apply(rows: list[PriceRow], cloud: str, region: str, instances: Sequence[InstanceSpec] | None,
           found: CloudPrices, source_date: str) -> tuple[list[PriceRow], _RegionOutcome]:
    """Put one region's answer into the rows; refuse an answer that priced nothing."""
    if not found.quotes:
        reasons = "; ".join(f"{u.instance_type}: {u.reason}" for u in found.unpriced[:3])
        raise RefreshError(f"{cloud} priced none of the {len(found.unpriced)} types asked for in {region}; "
                           f"nothing was written. First reasons: {reasons}")
    new_rows = [_price_row(cloud, region, quote, source_date) for quote in found.quotes]
    asked = None if instances is None else [i.instance_type for i in instances]
    rows, removed = replace_rows(rows, cloud, region, asked, new_rows)
    priced = {row.instance_type for row in new_rows}
    return rows, _RegionOutcome(
        written=new_rows,
        unpriced=[UnpricedType(region=region, instance_type=u.instance_type, reason=u.reason)
                  for u in found.unpriced],
        dropped=[row for row in removed if row.instance_type not in priced],
        spec_differences=[SpecDifference(region=region, instance_type=m.instance_type, field=m.field,
                                         catalog_value=m.catalog_value, api_value=m.api_value)
                          for m in found.mismatches])


def _cloud_module(cloud: str) -> CloudPricing:
    if cloud not in CLOUD_FACTS:
        raise input_error("--cloud", "is not a cloud this refresh knows", value=cloud,
                          fix=f"use one of: {', '.join(CLOUD_FACTS)}")
    return cast(CloudPricing, importlib.import_module(CLOUD_FACTS[cloud].pricing_module))


def _instances_for(catalog: dict[str, list[InstanceSpec]], region: str, cloud: str) -> list[InstanceSpec]:
    """The region's instances.csv types; for a region instances.csv lacks, every type the cloud has there."""
    if region in catalog:
        return catalog[region]
    by_type: dict[str, InstanceSpec] = {}
    for specs in catalog.values():
        for spec in specs:
            by_type.setdefault(spec.instance_type, spec)
    if not by_type:
        raise input_error("--cloud", f"instances.csv has no {cloud} instance types to price", value=cloud,
                          fix=f"add {cloud} rows to instances.csv"
                          + ("" if _cloud_module(cloud).ALL_TYPES_UNSUPPORTED else ", or use --all-types"))
    return list(by_type.values())


def _price_row(cloud: str, region: str, quote: PriceQuote, source_date: str) -> PriceRow:
    return PriceRow(cloud=cloud, region=region, instance_type=quote.instance_type, currency=quote.currency,
                    price_per_hour=format_price(quote.price_per_hour), source=quote.source,
                    source_date=source_date, notes=quote.notes)


__all__ = ["DEFAULT_INSTANCES_CSV", "DEFAULT_PRICES_CSV", "RefreshError", "RefreshResult",
           "SpecDifference", "UnpricedType", "refresh_prices"]

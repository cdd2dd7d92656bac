"""The instance catalog: what each cloud offers (specs) and what it costs (prices), with sources and dates.

Specs (data/instances.csv) and prices (data/prices.csv) are separate tables: a type can be known without
a price (all of Huawei today). Prices keep their own currency; `PriceBook` converts for ranking with
exchange rates (data/exchange_rates.csv, or the user's override file) and flags regional substitutes.
"""

from __future__ import annotations

import csv
import datetime
import math
import os
import re
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.documents import parse_document, read_input_file
from inferstack.errors import Problem, input_error
from inferstack.sizing.hardware import (
    CATALOG_GPU_IDS,
    DATA_DIR,
    UNSUPPORTED_ACCELERATORS,
    CpuSpec,
    GpuSpec,
    NodeLink,
    gpu_specs,
)
from inferstack.spec import CLOUDS, CURRENCY_PATTERN, REGION_PATTERN

# The region each cloud's specs were catalogued for (shared/catalog/README.md).
CATALOG_REGIONS: dict[Cloud, str] = {facts.id: facts.catalog_region for facts in CLOUD_FACTS.values()}
_ATTACHED = re.compile(r"^(?P<machine>[\w-]+)\+(?P<count>\d+)x\s*(?P<accelerator>[\w-]+)$")


class Offer(NamedTuple):
    """One instance type of one cloud, as the catalog describes it."""

    cloud: Cloud
    region: str
    name: str  # catalog row name (GCP N1+T4: "n1-standard-4+1x nvidia-tesla-t4")
    machine_type: str  # what the cloud's API calls it
    attach_type: str | None  # accelerator attached to a general VM (GCP N1 + T4)
    family: str
    vcpus: int
    memory_gib: float
    gpu: GpuSpec | None
    gpu_count: int
    gpu_model: str  # catalog name, kept for offers whose accelerator the speed model does not cover
    local_nvme_gb: int | None
    network_gbps: float | None  # None: instances.csv does not say
    spec_source: str
    spec_date: str
    cpu: CpuSpec | None  # host CPU, when cpu_families.csv knows the family
    link: NodeLink | None = None  # the network between two such servers (node_links.csv); None: not known

    @property
    def has_gpu(self) -> bool:
        return self.gpu_count > 0

    @property
    def unsupported_reason(self) -> str | None:
        """Why the planner cannot use this offer (None: it can)."""
        if self.has_gpu and self.gpu is None:
            return UNSUPPORTED_ACCELERATORS.get(self.gpu_model, f"no GPU spec for {self.gpu_model}")
        return None


def _int_or_none(text: str) -> int | None:
    return int(float(text)) if text.strip() else None


@cache
def cpu_families() -> dict[tuple[str, str], dict[str, str]]:
    """Rows of cpu_families.csv by (cloud, family); empty when the file is absent."""
    path = DATA_DIR / "cpu_families.csv"
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {(row["cloud"], row["family"]): row for row in csv.DictReader(f)}


def host_cpu(cloud: str, family: str, vcpus: int) -> CpuSpec | None:
    """The share of a host's CPU an instance gets: its cores, and memory bandwidth pro rata of its socket.

    Where the catalog does not say how many vCPUs share a socket, the instance is credited the whole
    socket's bandwidth; the per-core limit of the engine's CPU profile still applies. None when the ISA,
    clock or socket bandwidth is unknown: no CPU speed is estimated without them.
    """
    row = cpu_families().get((cloud, family))
    if not row or not row["isa"] or not row["socket_memory_bandwidth_gbps"]:
        return None
    ghz_text = row["sustained_all_core_ghz"] or row["max_turbo_ghz"]
    if not ghz_text:
        return None
    per_core = int(row["vcpus_per_core"] or 2)
    socket_bandwidth = float(row["socket_memory_bandwidth_gbps"])
    per_socket = int(row["vcpus_per_socket"]) if row["vcpus_per_socket"] else None
    bandwidth = socket_bandwidth * vcpus / per_socket if per_socket else socket_bandwidth
    return CpuSpec(
        cores=max(1, vcpus // per_core),
        memory_bandwidth_gbps=bandwidth,
        isa=row["isa"],
        ghz=float(ghz_text),
        description=f"{row['processor']} ({vcpus} vCPU)",
        numa_nodes=max(1, math.ceil(vcpus / per_socket)) if per_socket else 1,
    )


def _cloud(name: str) -> Cloud:
    if name not in CLOUDS:
        raise ValueError(f"instances.csv names an unknown cloud {name!r}")
    return name


def _gpu_for(row: dict[str, str]) -> GpuSpec | None:
    count = int(row["gpu_count"] or 0)
    if not count:
        return None
    memory = round(float(row["gpu_memory_gib_each"]))
    spec_id = CATALOG_GPU_IDS.get((row["gpu_model"], memory))
    if spec_id is None:
        return None
    spec = gpu_specs()[spec_id]
    return spec if spec.memory_gb == memory else spec.with_memory(memory)


# A hand-over's latency where none is published for the type (node_links.csv leaves it empty): an assumption, the
# largest small-message figure published for two cloud GPU servers that we found, a whole two-server all-reduce of 8
# bytes over 16 GPUs of p4de.24xlarge (EFA), 164.3 us in nccl-tests output (aws-samples/awsome-distributed-training
# micro-benchmarks/nccl-tests/README.md @7217859f), where one hand-over is a single message. Nothing published shows
# TCP between cloud GPU servers below it: it is not a bound, and every plan that uses it says so. Its weight is small
# (0.2 ms of a 49 ms token on the Alibaba DeepSeek-V3 plan).
ASSUMED_LATENCY_US = 164.3
_ASSUMED_LATENCY_SOURCE = (
    "latency not published for this type: assumed 164.3 us, a two-server 8-byte all-reduce on 2x p4de.24xlarge "
    "(aws-samples/awsome-distributed-training nccl-tests README @7217859f)")


@cache
def node_links() -> dict[tuple[str, str], NodeLink]:
    """The network between two servers of each multi-GPU type, by (cloud, instance type): node_links.csv rows with a
    bandwidth and a construct that places servers close. A row without either stays in the file with its reason and
    plans no replica across servers; one without a latency gets ASSUMED_LATENCY_US, said in its source."""
    links = {}
    for row in _read_csv(DATA_DIR / "node_links.csv"):
        if not row["gbps"].strip() or row["cluster_placement"].strip() in ("", "none"):
            continue
        latency = row["latency_us"].strip()
        links[(row["cloud"], row["instance_type"])] = NodeLink(
            transport=row["transport"], gbps=float(row["gbps"]),
            latency_us=float(latency) if latency else ASSUMED_LATENCY_US,
            placement=row["cluster_placement"],
            source=row["source"] if latency else f"{row['source']}; {_ASSUMED_LATENCY_SOURCE}",
            latency_assumed=not latency)
    return links


@cache
def instance_rows() -> tuple[dict[str, str], ...]:
    """The rows of instances.csv, as written."""
    with (DATA_DIR / "instances.csv").open(newline="", encoding="utf-8") as f:
        return tuple(csv.DictReader(f))


def offer_of(row: dict[str, str]) -> Offer:
    """The offer one instances.csv row describes."""
    attached = _ATTACHED.match(row["instance_type"])
    vcpus = int(row["vcpus"])
    return Offer(
        cloud=_cloud(row["cloud"]),
        region=row["region"],
        name=row["instance_type"],
        machine_type=attached["machine"] if attached else row["instance_type"],
        attach_type=attached["accelerator"] if attached else None,
        family=row["family"],
        vcpus=vcpus,
        memory_gib=float(row["memory_gib"]),
        gpu=_gpu_for(row),
        gpu_count=int(row["gpu_count"] or 0),
        gpu_model=row["gpu_model"],
        local_nvme_gb=_int_or_none(row["local_nvme_gb"]),
        network_gbps=float(row["network_gbps"]) if row["network_gbps"].strip() else None,
        spec_source=row["spec_source"],
        spec_date=row["spec_date"],
        cpu=host_cpu(row["cloud"], row["family"], vcpus),
        link=node_links().get((row["cloud"], row["instance_type"])),
    )


@cache
def offers() -> tuple[Offer, ...]:
    """Every catalog instance type."""
    return tuple(offer_of(row) for row in instance_rows())


# ---- prices ---------------------------------------------------------------------------------------------

# A list price older than a year has likely moved: cloud list prices are revised every few months, and the
# packaged Alibaba rows (2024-12-30) are the ones a refresh would change first. Such a price is flagged `stale`.
STALE_PRICE_DAYS = 365
# "Today" for price ages comes from here alone: the system date, or this variable (YYYY-MM-DD) so that a test or a
# reproducible CI run sees the same ages every day.
RUN_DATE_VARIABLE = "INFERSTACK_TODAY"


def run_date() -> datetime.date:
    """The date prices are aged against: $INFERSTACK_TODAY when set, else the system date."""
    text = os.environ.get(RUN_DATE_VARIABLE, "").strip()
    if not text:
        return datetime.date.today()
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise input_error(
            RUN_DATE_VARIABLE,
            "must be a date YYYY-MM-DD",
            value=text,
            fix=f"unset it (today is the system date), or set e.g. {RUN_DATE_VARIABLE}=2026-12-01",
        ) from None


def price_age_days(source_date: str, today: datetime.date) -> int | None:
    """Days from a price's source date to `today`; None when the source carries no date."""
    try:
        return (today - datetime.date.fromisoformat(source_date)).days
    except ValueError:
        return None


class ListPrice(NamedTuple):
    amount_per_hour: float
    currency: str
    region: str
    source: str
    source_date: str
    from_override_file: bool = False  # the user's own price: discounts do not apply to it


class ExchangeRates(NamedTuple):
    """Units of USD per unit of each currency, with where they came from."""

    usd_per_unit: dict[str, float]
    source: str

    def convert(self, amount: float, from_currency: str, to_currency: str) -> float | None:
        if from_currency == to_currency:
            return amount
        if from_currency not in self.usd_per_unit or to_currency not in self.usd_per_unit:
            return None
        return amount * self.usd_per_unit[from_currency] / self.usd_per_unit[to_currency]


def _read_csv(path: Path) -> list[dict[str, str]]:
    """Rows by column name (csv.DictReader's result, built at a third of its cost: plans read prices.csv whole)."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = csv.reader(f)
        header = next(rows, [])
        return [dict(zip(header, row, strict=True)) for row in rows if row]


@cache
def default_exchange_rates() -> ExchangeRates:
    """The packaged, dated default rates (data/exchange_rates.csv)."""
    path = DATA_DIR / "exchange_rates.csv"
    rates: dict[str, float] = {"USD": 1.0}
    sources: set[str] = set()
    if path.is_file():
        for row in _read_csv(path):
            value = row.get("usd_per_unit", "").strip()
            if value and row["currency"] != "USD":
                rates[row["currency"]] = float(value)
                sources.add(f"{row['source'].split(' (')[0]} ({row['date']})")
    return ExchangeRates(rates, "; ".join(sorted(sources)) or "none packaged")


class PriceBook:
    """List prices by (cloud, region, type), overrides applied, convertible to a ranking currency."""

    def __init__(self, rows: list[dict[str, str]], rates: ExchangeRates, discounts: dict[str, float] | None = None,
                 spot_rows: tuple[dict[str, str], ...] | None = ()):
        self._prices: dict[tuple[str, str], list[ListPrice]] = {}
        for row in rows:
            price = ListPrice(
                float(row["price_per_hour"]),
                row["currency"],
                row["region"],
                row["source"],
                row["source_date"],
                from_override_file=row.get("from_override_file") == "yes",
            )
            self._prices.setdefault((row["cloud"], row["instance_type"]), []).append(price)
        listed = [(row["cloud"], row["region"], row["instance_type"]) for row in rows
                  if row.get("from_override_file") != "yes"]
        self._listed_regions = {(cloud, region) for cloud, region, _ in listed}
        self._listed_types = {(cloud, name) for cloud, _, name in listed}
        self.rows = tuple(rows)  # as read, overrides merged in: what a pin records of them
        self._spot_rows = spot_rows  # spot prices: never ranked, never borrowed; None: the packaged ones, read if asked
        self.rates = rates
        self.discounts = discounts or {}

    @classmethod
    def load(cls, override_file: Path | None = None) -> PriceBook:
        """The packaged prices, with the user's override file (prices, discounts, exchange rates) on top."""
        rows = _read_csv(DATA_DIR / "prices.csv")
        rates = default_exchange_rates()
        discounts: dict[str, float] = {}
        if override_file is not None:
            override = _read_override(override_file)
            rows = _merge_rows(rows, override.get("prices", []), override_file)
            if "exchange_rates" in override:
                rates = _override_rates(override["exchange_rates"], rates, override_file)
            discounts = _override_discounts(override.get("discounts", {}), override_file)
        return cls(rows, rates, discounts, None)

    @property
    def spot_rows(self) -> tuple[dict[str, str], ...]:
        """Its spot price rows (data/spot_prices.csv unless given): read only by plans that show spot capacity."""
        return spot_price_rows() if self._spot_rows is None else self._spot_rows

    def spot_price(self, cloud: str, region: str, instance_type: str) -> ListPrice | None:
        """The type's spot price in `region` itself (a spot price is the region's market: never borrowed)."""
        row = next((r for r in self.spot_rows
                    if (r["cloud"], r["region"], r["instance_type"]) == (cloud, region, instance_type)), None)
        if row is None:
            return None
        return ListPrice(float(row["price_per_hour"]), row["currency"], row["region"], row["source"],
                         row["source_date"])

    def lookup(self, cloud: str, region: str, instance_type: str) -> tuple[ListPrice, bool] | None:
        """The price in `region` if listed, else the catalog region's (flagged as a substitute), else any."""
        candidates = self._prices.get((cloud, instance_type), [])
        for wanted in (region, CATALOG_REGIONS.get(cloud)):  # type: ignore[call-overload]
            found = next((p for p in candidates if p.region == wanted), None)
            if found:
                return self._discounted(cloud, found), found.region != region
        if candidates:
            return self._discounted(cloud, min(candidates, key=lambda p: p.amount_per_hour)), True
        return None

    def not_sold_in(self, cloud: str, region: str, instance_type: str) -> str | None:
        """Why `instance_type` is not offered in `region` (None: it is, or nothing says otherwise).

        A cloud's price list names a type only where the cloud sells it: a packaged price source that lists the region
        and knows the type, but lists no price for it there, says it is not sold there. A region no packaged source
        lists, or a type none knows (a family newer than the sources), stays possible; a price of the user's own
        (override file) offers the type in its region."""
        if any(price.region == region for price in self._prices.get((cloud, instance_type), [])):
            return None
        if (cloud, region) not in self._listed_regions or (cloud, instance_type) not in self._listed_types:
            return None
        return f"not sold in {region} (its price list there does not name the type)"

    def _discounted(self, cloud: str, price: ListPrice) -> ListPrice:
        percent = self.discounts.get(cloud, 0.0)
        if not percent or price.from_override_file:
            return price
        return ListPrice(
            price.amount_per_hour * (1 - percent / 100),
            price.currency,
            price.region,
            f"{price.source}, less {percent:g} % (override file)",
            price.source_date,
        )


@cache
def spot_price_rows() -> tuple[dict[str, str], ...]:
    """Packaged spot prices (data/spot_prices.csv, tools/regional_prices.py): listed by `catalog --coverage` and shown
    beside a production plan's spot capacity above its floor; never ranked (spot prices move, and a plan prices the
    on-demand capacity it keeps)."""
    return tuple(_read_csv(DATA_DIR / "spot_prices.csv"))


def _read_override(path: Path) -> dict[str, Any]:
    text = read_input_file(path, field="--prices", what="a price-override YAML file", example="docs/pricing.md")
    data = parse_document(text, suffix=path.suffix, source=str(path), field="--prices") or {}
    if not isinstance(data, dict) or not set(data) <= {"prices", "exchange_rates", "discounts"}:
        raise input_error(
            "--prices",
            "must be a mapping with prices, exchange_rates and/or discounts",
            value=sorted(data) if isinstance(data, dict) else data,
            fix="see docs/pricing.md for the override file format",
        )
    return data


# What an override entry's text fields may hold: they become plan fields, shown in PR comments and outputs.
_INSTANCE_TYPE = re.compile(r"[a-z0-9][a-z0-9.+_-]{0,79}", re.IGNORECASE)
_NOTE = re.compile(r"[^\x00-\x1f\x7f]{1,200}")  # source, date: one line of printable text


def _entry_problem(item: Any) -> str | None:
    """What is wrong with one `prices` entry (None: nothing)."""
    fields = {"cloud", "region", "instance_type", "price_per_hour", "currency"}
    if not isinstance(item, dict) or fields - set(item):
        return f"needs {', '.join(sorted(fields))}"
    if item["cloud"] not in CLOUDS:
        return f"cloud must be one of {', '.join(CLOUDS)}"
    if not (isinstance(item["region"], str) and re.fullmatch(REGION_PATTERN, item["region"])):
        return "region must be a region name such as us-east-1"
    if not (isinstance(item["instance_type"], str) and _INSTANCE_TYPE.fullmatch(item["instance_type"])):
        return "instance_type must be an instance type name as the catalog spells it (`inferstack catalog`)"
    if not _is_positive(item["price_per_hour"]):
        return "price_per_hour must be a positive number"
    if not _is_currency(item["currency"]):
        return "currency must be an ISO 4217 code such as USD"
    if any(not _NOTE.fullmatch(str(item.get(key, "-"))) for key in ("source", "date")):
        return "source and date must be one line of text (at most 200 characters)"
    return None


def _merge_rows(rows: list[dict[str, str]], overrides: list[dict[str, Any]], path: Path) -> list[dict[str, str]]:
    problems, replaced = [], {}
    if not isinstance(overrides, list):
        raise input_error("prices", "must be a list of entries", value=overrides, fix="see docs/pricing.md")
    for i, item in enumerate(overrides):
        wrong = _entry_problem(item)
        if wrong:
            problems.append(Problem(f"prices[{i}]", wrong, value=item, fix="correct the entry (see docs/pricing.md)"))
            continue
        key = (item["cloud"], item["region"], item["instance_type"])
        replaced[key] = {
            "cloud": item["cloud"],
            "region": item["region"],
            "instance_type": item["instance_type"],
            "currency": item["currency"].upper(),
            "price_per_hour": str(float(item["price_per_hour"])),
            "source": str(item.get("source", f"override file {path.name}")),
            "source_date": str(item.get("date", "unknown")),
            "from_override_file": "yes",
        }
    if problems:
        from inferstack.errors import InputError

        raise InputError(problems, source=str(path))
    kept = [r for r in rows if (r["cloud"], r["region"], r["instance_type"]) not in replaced]
    return kept + list(replaced.values())


def _override_rates(section: Any, defaults: ExchangeRates, path: Path) -> ExchangeRates:
    rates_given = section.get("usd_per_unit") if isinstance(section, dict) else None
    if (
        not isinstance(rates_given, dict)
        or not all(_is_currency(k) and _is_positive(v) for k, v in rates_given.items())
        or any(not _NOTE.fullmatch(str(section.get(key, "-"))) for key in ("source", "date"))
    ):
        raise input_error(
            "exchange_rates",
            "must have usd_per_unit: {CURRENCY: rate}",
            value=section,
            fix="e.g. exchange_rates: {usd_per_unit: {CNY: 0.14}, source: ..., date: YYYY-MM-DD} "
            "(ISO 4217 codes, positive rates, one-line source and date)",
        )
    rates = dict(defaults.usd_per_unit)
    rates.update({str(k).upper(): float(v) for k, v in section["usd_per_unit"].items()})
    source = f"{section.get('source', path.name)} ({section.get('date', 'undated')})"
    return ExchangeRates(rates, source)


_MAX_AMOUNT = 1e12  # per hour or per currency unit: far beyond any price; keeps the arithmetic finite


def _is_positive(value: Any) -> bool:
    """A positive, finite number (not NaN, not infinity, not a 4000-digit integer)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= _MAX_AMOUNT


def _is_currency(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(CURRENCY_PATTERN, value.upper()) is not None


def _is_percentage(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 100


def _override_discounts(section: Any, path: Path) -> dict[str, float]:
    if not isinstance(section, dict) or not all(k in CLOUDS and _is_percentage(v) for k, v in section.items()):
        raise input_error(
            "discounts",
            "must map clouds to a percentage off list price (0–100)",
            value=section,
            fix="e.g. discounts: {aws: 20}",
        )
    return {k: float(v) for k, v in section.items()}


class Catalog(NamedTuple):
    """What a plan is made from: the instance types, their prices, and the date the prices are aged against. The
    packaged catalog with a price-override file on top, today (`load_catalog`), or the rows a pinned plan was made
    from, on the day it was pinned (`inferstack.pin`)."""

    offers: tuple[Offer, ...]
    prices: PriceBook
    today: datetime.date


def load_catalog(prices_file: Path | None = None) -> Catalog:
    """The packaged catalog, the user's price-override file (prices, discounts, exchange rates) on top, at the run
    date."""
    return Catalog(offers(), PriceBook.load(prices_file), run_date())

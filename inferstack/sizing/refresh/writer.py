"""Reads the instance catalog and rewrites a prices CSV: one cloud's refreshed rows in, everything else
kept byte-for-byte in its place, written to a temporary file and renamed over the old one."""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from inferstack.errors import input_error
from inferstack.sizing.refresh.common import InstanceSpec, decimal_or_none

PRICE_COLUMNS = ("cloud", "region", "instance_type", "currency", "price_per_hour", "source", "source_date", "notes")


@dataclass(frozen=True)
class PriceRow:
    """One row of prices.csv."""

    cloud: str
    region: str
    instance_type: str
    currency: str
    price_per_hour: str
    source: str
    source_date: str
    notes: str

    @classmethod
    def from_csv(cls, row: dict[str, str]) -> PriceRow:
        return cls(**{column: row.get(column) or "" for column in PRICE_COLUMNS})

    def as_csv(self) -> dict[str, str]:
        return {column: getattr(self, column) for column in PRICE_COLUMNS}


def read_instances(path: Path, cloud: str) -> dict[str, list[InstanceSpec]]:
    """The cloud's rows of instances.csv, by region, in file order."""
    by_region: dict[str, list[InstanceSpec]] = {}
    for line, row in enumerate(_read_csv(path), start=2):
        if row.get("cloud") == cloud:
            by_region.setdefault(row["region"], []).append(_instance_spec(row, path, line))
    return by_region


def read_price_rows(path: Path) -> list[PriceRow]:
    """Every row of a prices CSV; an absent file is an empty catalog (a new private one)."""
    if not path.exists():
        return []
    rows = _read_csv(path, required=PRICE_COLUMNS)
    return [PriceRow.from_csv(row) for row in rows]


def replace_rows(existing: Sequence[PriceRow], cloud: str, region: str, instance_types: Iterable[str] | None,
                 new_rows: Sequence[PriceRow]) -> tuple[list[PriceRow], list[PriceRow]]:
    """Swap the rows of (cloud, region) for the given types (None: every type) for `new_rows`.

    The new rows take the place of the first row they replace (or go last), so a diff shows prices
    changing in place. Returns (all rows, old rows removed).
    """
    wanted = None if instance_types is None else set(instance_types)

    def replaced(row: PriceRow) -> bool:
        return row.cloud == cloud and row.region == region and (wanted is None or row.instance_type in wanted)

    result: list[PriceRow] = []
    removed: list[PriceRow] = []
    inserted = False
    for row in existing:
        if not replaced(row):
            result.append(row)
            continue
        removed.append(row)
        if not inserted:
            result.extend(new_rows)
            inserted = True
    if not inserted:
        result.extend(new_rows)
    return result, removed


def write_price_rows(path: Path, rows: Sequence[PriceRow]) -> None:
    """Write the whole CSV to a temporary file beside `path`, then rename it over `path`.

    A reader (or a crash) sees either the old file or the new one, never half of one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=PRICE_COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(row.as_csv() for row in rows)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            temp.chmod(path.stat().st_mode & 0o777)
        else:
            temp.chmod(0o644)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _read_csv(path: Path, required: Sequence[str] = ()) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [column for column in required if column not in (reader.fieldnames or [])]
            if missing:
                raise input_error(str(path), f"is not a prices CSV: columns {missing} are missing",
                                  fix=f"give a CSV with the header {','.join(PRICE_COLUMNS)}")
            return list(reader)
    except FileNotFoundError:
        raise input_error(str(path), "does not exist", fix="give the path of an existing CSV file") from None


def _instance_spec(row: dict[str, str], path: Path, line: int) -> InstanceSpec:
    try:
        return InstanceSpec(
            instance_type=row["instance_type"], family=row["family"], vcpus=Decimal(row["vcpus"]),
            memory_gib=Decimal(row["memory_gib"]), gpu_model=row["gpu_model"],
            gpu_count=int(row["gpu_count"] or 0), gpu_memory_gib_each=decimal_or_none(row["gpu_memory_gib_each"]),
            local_nvme_gb=decimal_or_none(row["local_nvme_gb"]))
    except (KeyError, ValueError, InvalidOperation) as error:
        raise input_error(f"{path}:{line}", f"is not a valid instances.csv row ({error})",
                          value=row.get("instance_type"),
                          fix="fix the row: vcpus, memory_gib and gpu_count must be numbers") from None

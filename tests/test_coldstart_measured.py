"""Specification of inferstack/sizing/data/coldstart_measured.csv: the cold-start throughputs measured by
`benchmarks/model_sync.py --chroot --record` (the boot's model sync replayed in Debian against a loopback object store),
which the plan's phase figures cite.

Every row says what was measured, on which machine, when, and with which command, so that it can be re-run.
"""

import csv
import datetime
from pathlib import Path

MEASURED_CSV = Path(__file__).resolve().parents[1] / "inferstack" / "sizing" / "data" / "coldstart_measured.csv"
COLUMNS = ["quantity", "connections", "per_connection_cap_mb_s", "bytes_per_s", "model_bytes", "repeats", "machine",
           "date", "command"]
QUANTITIES = {"sync", "load_read", "sha256"}
"""sync: the sync program end to end; load_read: the synced files read cold; sha256: the sync's hash rate."""


def rows() -> list[dict[str, str]]:
    with MEASURED_CSV.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == COLUMNS, f"{MEASURED_CSV.name}: columns {reader.fieldnames}, expected {COLUMNS}"
        return list(reader)


def test_every_row_names_a_known_quantity_with_positive_figures_a_date_and_the_benchmark_command() -> None:
    measured = rows()
    assert measured, f"{MEASURED_CSV.name} has no rows"
    for number, row in enumerate(measured, start=2):
        where = f"{MEASURED_CSV.name} line {number}: {row}"
        assert row["quantity"] in QUANTITIES, where
        assert float(row["bytes_per_s"]) > 0, where
        assert int(row["model_bytes"]) > 0 and int(row["repeats"]) > 0, where
        assert row["machine"].strip(), where
        datetime.date.fromisoformat(row["date"])
        assert "benchmarks/model_sync.py" in row["command"] and "--chroot" in row["command"], where


def test_only_sync_rows_have_a_connection_count_and_a_cap() -> None:
    for row in rows():
        if row["quantity"] == "sync":
            assert int(row["connections"]) > 0, row
            assert row["per_connection_cap_mb_s"] == "" or float(row["per_connection_cap_mb_s"]) > 0, row
        else:
            assert row["connections"] == row["per_connection_cap_mb_s"] == "", row


def test_each_quantity_is_measured_and_each_sync_setting_once() -> None:
    measured = rows()
    assert {row["quantity"] for row in measured} == QUANTITIES
    settings = [(row["quantity"], row["connections"], row["per_connection_cap_mb_s"]) for row in measured]
    assert len(settings) == len(set(settings)), settings

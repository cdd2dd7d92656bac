"""Specification of inferstack/sizing/data/cpu_families.csv: the CPU facts the sizing model reads.

The file is research data: every fact carries a source, nothing may be guessed, and a cell is left empty
only when the row's notes say why. These tests read the CSV with the standard library only.
"""

import csv
import re
from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parents[2] / "inferstack" / "sizing" / "data"
CPU_FAMILIES_CSV = DATA_DIR / "cpu_families.csv"
INSTANCES_CSV = DATA_DIR / "instances.csv"

COLUMNS = [
    "cloud",
    "family",
    "processor",
    "microarchitecture",
    "isa",
    "max_turbo_ghz",
    "sustained_all_core_ghz",
    "vcpus_per_core",
    "memory_type",
    "memory_channels_per_socket",
    "memory_mt_s",
    "socket_memory_bandwidth_gbps",
    "vcpus_per_socket",
    "source",
    "source_date",
    "notes",
]
ISA_VALUES = {"amx", "avx512", "avx2", "neon"}
MEMORY_TYPES = {"DDR4", "DDR5"}
CLOUDS = {"aws", "gcp", "alibaba", "huawei"}
# Bytes moved per transfer on one DDR4/DDR5 channel (64-bit data bus).
BYTES_PER_TRANSFER = 8
BANDWIDTH_TOLERANCE_GBPS = 0.1


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


CPU_ROWS = _read(CPU_FAMILIES_CSV)
INSTANCE_ROWS = _read(INSTANCES_CSV)


def _row_id(row: dict[str, str]) -> str:
    return f"{row['cloud']}/{row['family']}"


def _cpu_only_families() -> set[tuple[str, str]]:
    return {(row["cloud"], row["family"]) for row in INSTANCE_ROWS if row["gpu_count"] == "0"}


def test_header_lists_the_documented_columns_in_order() -> None:
    with CPU_FAMILIES_CSV.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert header == COLUMNS


def test_every_cpu_only_family_in_the_instance_catalog_has_a_row() -> None:
    documented = {(row["cloud"], row["family"]) for row in CPU_ROWS}
    missing = _cpu_only_families() - documented
    assert not missing, f"CPU-only families without a cpu_families.csv row: {sorted(missing)}"


def test_the_instance_catalog_still_has_the_cpu_only_families_this_file_was_researched_for() -> None:
    assert _cpu_only_families() >= {
        ("aws", "c7i"),
        ("aws", "m7i"),
        ("aws", "r7i"),
        ("gcp", "n2-standard"),
        ("gcp", "n2-highmem"),
        ("gcp", "c3-standard"),
        ("alibaba", "g7"),
        ("alibaba", "c7"),
        ("alibaba", "r7"),
        ("huawei", "c7"),
        ("huawei", "s7"),
        ("huawei", "m7"),
    }


def test_every_row_names_a_family_of_the_instance_catalog() -> None:
    catalog = {(row["cloud"], row["family"]) for row in INSTANCE_ROWS}
    orphans = [_row_id(row) for row in CPU_ROWS if (row["cloud"], row["family"]) not in catalog]
    assert not orphans, f"rows for families absent from instances.csv: {orphans}"


def test_each_cloud_and_family_appears_once() -> None:
    ids = [_row_id(row) for row in CPU_ROWS]
    duplicates = sorted({row_id for row_id in ids if ids.count(row_id) > 1})
    assert not duplicates, f"duplicate rows: {duplicates}"


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_cloud_is_one_of_the_four_supported_clouds(row: dict[str, str]) -> None:
    assert row["cloud"] in CLOUDS


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_isa_is_a_supported_value_when_present(row: dict[str, str]) -> None:
    assert row["isa"] == "" or row["isa"] in ISA_VALUES, f"isa {row['isa']!r} not in {sorted(ISA_VALUES)}"


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_memory_type_is_ddr4_or_ddr5_when_present(row: dict[str, str]) -> None:
    assert row["memory_type"] == "" or row["memory_type"] in MEMORY_TYPES


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_bandwidth_is_channels_times_8_bytes_times_transfer_rate(row: dict[str, str]) -> None:
    channels, transfer_rate_mt_s = row["memory_channels_per_socket"], row["memory_mt_s"]
    if not (channels and transfer_rate_mt_s):
        pytest.skip("channels or MT/s not sourced; covered by the empty-bandwidth test")
    expected_gbps = int(channels) * BYTES_PER_TRANSFER * int(transfer_rate_mt_s) / 1000
    assert float(row["socket_memory_bandwidth_gbps"]) == pytest.approx(expected_gbps, abs=BANDWIDTH_TOLERANCE_GBPS)


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_bandwidth_is_empty_unless_both_channels_and_transfer_rate_are_sourced(row: dict[str, str]) -> None:
    if not (row["memory_channels_per_socket"] and row["memory_mt_s"]):
        assert row["socket_memory_bandwidth_gbps"] == ""


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_numbers_are_physically_plausible(row: dict[str, str]) -> None:
    for column in ("max_turbo_ghz", "sustained_all_core_ghz"):
        if row[column]:
            assert 1.0 <= float(row[column]) <= 6.0, f"{column}={row[column]} GHz"
    if row["max_turbo_ghz"] and row["sustained_all_core_ghz"]:
        assert float(row["sustained_all_core_ghz"]) <= float(row["max_turbo_ghz"])
    if row["vcpus_per_core"]:
        assert row["vcpus_per_core"] in {"1", "2"}
    if row["vcpus_per_socket"]:
        assert int(row["vcpus_per_socket"]) > 0
        if row["vcpus_per_core"]:
            assert int(row["vcpus_per_socket"]) % int(row["vcpus_per_core"]) == 0
    if row["memory_channels_per_socket"]:
        assert 1 <= int(row["memory_channels_per_socket"]) <= 12
    if row["memory_mt_s"]:
        assert 2133 <= int(row["memory_mt_s"]) <= 8800


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_every_row_cites_a_source(row: dict[str, str]) -> None:
    assert row["source"].strip(), "source is required"


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_source_date_is_an_iso_date_or_unknown(row: dict[str, str]) -> None:
    assert row["source_date"] == "unknown" or re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["source_date"])


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_an_empty_cell_is_named_and_explained_in_the_notes(row: dict[str, str]) -> None:
    empty_columns = [column for column in COLUMNS if column != "notes" and not row[column].strip()]
    unexplained = [column for column in empty_columns if column not in row["notes"]]
    assert not unexplained, f"empty cells not explained in notes: {unexplained}"


@pytest.mark.parametrize("row", CPU_ROWS, ids=_row_id)
def test_an_amx_row_is_a_sapphire_rapids_or_later_intel_part(row: dict[str, str]) -> None:
    if row["isa"] == "amx":
        assert row["microarchitecture"] in {"Sapphire Rapids", "Emerald Rapids", "Granite Rapids"}

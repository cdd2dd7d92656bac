"""The default exchange-rate table: dated, sourced, and equal to the reference figures its source quotes."""

from __future__ import annotations

import csv
import re
from datetime import date
from decimal import Decimal

from inferstack.sizing.refresh import DATA_DIR

RATES = DATA_DIR / "exchange_rates.csv"


def rates() -> dict[str, dict[str, str]]:
    with RATES.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["currency", "usd_per_unit", "source", "date"]
        return {row["currency"]: row for row in reader}


def test_usd_eur_and_cny_each_have_a_positive_rate_a_source_and_an_iso_date():
    table = rates()

    assert {"USD", "EUR", "CNY"} <= set(table)
    assert table["USD"]["usd_per_unit"] == "1"
    for row in table.values():
        assert Decimal(row["usd_per_unit"]) > 0
        assert row["source"]
        date.fromisoformat(row["date"])


def test_cross_rates_match_the_ecb_euro_reference_rates_quoted_in_the_source():
    table = rates()

    for currency in ("EUR", "CNY"):
        source = table[currency]["source"]
        assert "ECB" in source
        quoted = re.search(r"EUR 1 = USD ([\d.]+) = CNY ([\d.]+)", source)
        assert quoted, source
        usd_per_eur, cny_per_eur = Decimal(quoted.group(1)), Decimal(quoted.group(2))
        expected = {"EUR": usd_per_eur, "CNY": usd_per_eur / cny_per_eur}[currency]
        assert abs(Decimal(table[currency]["usd_per_unit"]) - expected) / expected < Decimal("1e-5")

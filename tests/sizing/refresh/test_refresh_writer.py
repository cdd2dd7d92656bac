"""Writing the prices CSV: atomic replace, rows kept in place, private catalogs, nothing written on failure."""

from __future__ import annotations

import os
import stat

import pytest

from inferstack.sizing.refresh import RefreshError, refresh_prices
from inferstack.sizing.refresh import writer as writer_module
from inferstack.sizing.refresh.writer import PriceRow, read_price_rows, write_price_rows

NEW_ROW = PriceRow("huawei", "ap-southeast-3", "c7.large.2", "CNY", "1", "test-source", "2026-11-30", "test row")


def test_the_csv_is_written_to_a_temporary_file_beside_it_then_renamed(catalog, monkeypatch):
    renames = []
    real_replace = os.replace

    def spy(source, target):
        renames.append((os.path.dirname(source), os.path.basename(source), target))
        real_replace(source, target)

    monkeypatch.setattr(writer_module.os, "replace", spy)

    write_price_rows(catalog.prices, [*read_price_rows(catalog.prices), NEW_ROW])

    [(folder, name, target)] = renames
    assert folder == str(catalog.prices.parent)
    assert name.startswith(".prices.csv.") and name.endswith(".tmp")
    assert target == catalog.prices
    assert not list(catalog.prices.parent.glob(".prices.csv.*.tmp"))
    assert read_price_rows(catalog.prices)[-1] == NEW_ROW


def test_a_failed_rename_keeps_the_old_file_and_removes_the_temporary_one(catalog, monkeypatch):
    before = catalog.prices.read_bytes()

    def fail(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(writer_module.os, "replace", fail)

    with pytest.raises(OSError, match="disk full"):
        write_price_rows(catalog.prices, [NEW_ROW])

    assert catalog.prices.read_bytes() == before
    assert not list(catalog.prices.parent.glob(".prices.csv.*.tmp"))


def test_the_file_keeps_its_permissions(catalog):
    catalog.prices.chmod(0o600)

    write_price_rows(catalog.prices, [NEW_ROW])

    assert stat.S_IMODE(catalog.prices.stat().st_mode) == 0o600


def test_refreshed_rows_take_the_place_of_the_rows_they_replace(catalog, refresh, ecs_client):
    refresh("alibaba", ecs_client)

    keys = [(r["cloud"], r["region"], r["instance_type"]) for r in catalog.price_rows()]
    assert keys[5:9] == [
        ("alibaba", "ap-southeast-1", "ecs.g7.large"), ("alibaba", "ap-southeast-1", "ecs.gn7i-c8g1.2xlarge"),
        ("alibaba", "cn-hangzhou", "ecs.g7.large"), ("alibaba", "cn-hangzhou", "ecs.r7.8xlarge")]


def test_a_new_private_catalog_holds_only_the_refreshed_rows(catalog, tmp_path, bss_client):
    private = tmp_path / "mine" / "my-prices.csv"

    refresh_prices("huawei", output=private, instances_csv=catalog.instances, client=bss_client)

    lines = private.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "cloud,region,instance_type,currency,price_per_hour,source,source_date,notes"
    assert [line.split(",")[:3] for line in lines[1:]] == [
        ["huawei", "ap-southeast-3", "c7.large.2"], ["huawei", "ap-southeast-3", "pi2.2xlarge.4"]]


def test_nothing_is_written_when_the_api_prices_none_of_the_types(catalog, refresh, bss_client):
    refused = "huawei/list_on_demand_resource_ratings_error_p3.2xlarge.8.json"
    bss_client.client.files.update({"c7.large.2": refused, "pi2.2xlarge.4": refused})
    before = catalog.prices.read_bytes()

    with pytest.raises(RefreshError, match="priced none of the 3 types asked for in ap-southeast-3"):
        refresh("huawei", bss_client)

    assert catalog.prices.read_bytes() == before


def test_without_an_output_the_packaged_prices_csv_is_rewritten(catalog, bss_client, monkeypatch):
    import inferstack.sizing.refresh as refresh_package

    monkeypatch.setattr(refresh_package, "DEFAULT_PRICES_CSV", catalog.prices)  # stands in for the packaged file

    result = refresh_prices("huawei", instances_csv=catalog.instances, client=bss_client)

    assert result.output == catalog.prices
    assert ("huawei", "ap-southeast-3", "c7.large.2") in {
        (r["cloud"], r["region"], r["instance_type"]) for r in catalog.price_rows()}


def test_the_result_dumps_to_json_for_the_command_line(refresh, bss_client):
    dumped = refresh("huawei", bss_client).model_dump(mode="json")

    assert dumped["cloud"] == "huawei" and dumped["regions"] == ["ap-southeast-3"]
    assert dumped["written"][0]["instance_type"] == "c7.large.2"
    assert dumped["written"][0]["price_per_hour"] == "1"
    assert dumped["unpriced"] == [{"region": "ap-southeast-3", "instance_type": "p3.2xlarge.8",
                                   "reason": "ListOnDemandResourceRatings answered CBC.99003651: "
                                             "The product does not exist."}]
    assert isinstance(dumped["output"], str)

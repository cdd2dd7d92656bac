"""GCP refresh: list_skus pagination, prices composed from the region's OnDemand SKUs, unpriceable shapes."""

from __future__ import annotations

import pytest

from inferstack.errors import InputError

SOURCE = "Cloud Billing Catalog API list_skus services/6F81-5844-456A us-central1"


def test_list_skus_asks_for_compute_engine_and_follows_the_page_token(refresh, gcp_catalog_client):
    refresh("gcp", gcp_catalog_client)

    assert gcp_catalog_client.requests == [
        {"parent": "services/6F81-5844-456A", "page_token": ""},
        {"parent": "services/6F81-5844-456A", "page_token": "recorded-next-page-token"}]


def test_price_is_vcpus_times_core_plus_memory_times_ram(catalog, refresh, gcp_catalog_client):
    refresh("gcp", gcp_catalog_client)

    n2 = next(r for r in catalog.rows_of("gcp") if r["instance_type"] == "n2-standard-2")
    # recorded: N2 core 0.01 USD/h, N2 RAM 0.001 USD/GiB-h, so 2 x 0.01 + 8 x 0.001
    assert (n2["price_per_hour"], n2["currency"], n2["source"], n2["source_date"]) == (
        "0.028", "USD", SOURCE, "2026-11-30")
    assert "SKU TEST-0000-0001" in n2["notes"] and "SKU TEST-0000-0002" in n2["notes"]


def test_spot_custom_and_other_region_skus_are_not_used(catalog, refresh, gcp_catalog_client):
    refresh("gcp", gcp_catalog_client)

    n2 = next(r for r in catalog.rows_of("gcp") if r["instance_type"] == "n2-standard-2")
    for ignored in ("TEST-0000-0003", "TEST-0000-0004", "TEST-0000-0005"):
        assert ignored not in n2["notes"]


def test_gpu_machines_add_the_gpu_and_bundled_local_ssd(catalog, refresh, gcp_catalog_client):
    refresh("gcp", gcp_catalog_client)

    prices = {r["instance_type"]: r["price_per_hour"] for r in catalog.rows_of("gcp")}
    # G2: 4 x 0.02 + 16 x 0.002 + 1 L4 x 0.5
    assert prices["g2-standard-4"] == "0.612"
    # A2 Ultra: 12 x 0.03 + 170 x 0.003 + 1 A100 80GB x 3 + 375 GiB Local SSD x 0.073 / 730 h
    assert prices["a2-ultragpu-1g"] == "3.9075"


def test_shapes_the_skus_cannot_price_are_listed_and_their_old_rows_removed(catalog, refresh, gcp_catalog_client):
    result = refresh("gcp", gcp_catalog_client)

    reasons = {u.instance_type: u.reason for u in result.unpriced}
    assert set(reasons) == {"a3-ultragpu-8g", "c3-standard-4"}
    assert "no SKU pattern for the GPU H200" in reasons["a3-ultragpu-8g"]
    assert reasons["c3-standard-4"] == "no OnDemand SKU matching 'C3 Instance Core running in ' serves us-central1"
    assert [r.instance_type for r in result.dropped] == ["c3-standard-4"]
    assert {r["instance_type"] for r in catalog.rows_of("gcp")} == {"n2-standard-2", "g2-standard-4",
                                                                    "a2-ultragpu-1g"}


def test_other_clouds_are_untouched(catalog, refresh, gcp_catalog_client):
    before = catalog.lines_not_of("gcp")

    refresh("gcp", gcp_catalog_client)

    assert catalog.lines_not_of("gcp") == before


def test_all_types_is_refused_with_the_reason(refresh, gcp_catalog_client):
    with pytest.raises(InputError, match="--all-types: is not available for gcp: the Billing Catalog prices"):
        refresh("gcp", gcp_catalog_client, all_types=True)

"""Huawei refresh: ListOnDemandResourceRatings inquiries, official website price, currency as returned."""

from __future__ import annotations

SOURCE = "Huawei Cloud BSS ListOnDemandResourceRatings hws.resource.type.vm ap-southeast-3"


def test_each_flavor_gets_one_hourly_linux_inquiry_with_the_project_id(refresh, bss_client):
    refresh("huawei", bss_client)

    assert bss_client.client.requests[0] == {
        "project_id": "test-project-id", "inquiry_precision": None,
        "product_infos": [{
            "id": "1", "cloud_service_type": "hws.service.type.ec2", "resource_type": "hws.resource.type.vm",
            "resource_spec": "c7.large.2.linux", "region": "ap-southeast-3", "available_zone": None,
            "resource_size": None, "size_measure_id": None, "usage_factor": "Duration", "usage_value": 1,
            "usage_measure_id": 4, "subscription_num": 1}]}
    specs = [r["product_infos"][0]["resource_spec"] for r in bss_client.client.requests]
    assert specs == ["c7.large.2.linux", "pi2.2xlarge.4.linux", "p3.2xlarge.8.linux"]


def test_the_official_website_price_is_written_in_the_returned_currency(catalog, refresh, bss_client):
    refresh("huawei", bss_client)

    c7 = next(r for r in catalog.rows_of("huawei") if r["instance_type"] == "c7.large.2"
              and r["region"] == "ap-southeast-3")
    # recorded: official_website_amount 1.0, amount 0.9, currency CNY
    assert (c7["price_per_hour"], c7["currency"], c7["source"], c7["source_date"]) == (
        "1", "CNY", SOURCE, "2026-11-30")
    assert "amount for the querying account: 0.9" in c7["notes"]


def test_an_empty_currency_is_recorded_as_cny_and_says_so(catalog, refresh, bss_client):
    refresh("huawei", bss_client)

    pi2 = next(r for r in catalog.rows_of("huawei") if r["instance_type"] == "pi2.2xlarge.4")
    assert (pi2["currency"], pi2["price_per_hour"]) == ("CNY", "10")
    assert "currency came back empty, which the API documents as CNY" in pi2["notes"]


def test_a_flavor_the_api_does_not_know_is_listed_with_its_error(catalog, refresh, bss_client):
    result = refresh("huawei", bss_client)

    assert [(u.instance_type, u.reason) for u in result.unpriced] == [
        ("p3.2xlarge.8", "ListOnDemandResourceRatings answered CBC.99003651: The product does not exist.")]
    assert "p3.2xlarge.8" not in {r["instance_type"] for r in catalog.rows_of("huawei")}


def test_huawei_rows_of_other_regions_and_other_clouds_stay(catalog, refresh, bss_client):
    before = catalog.lines_not_of("huawei")

    refresh("huawei", bss_client)

    assert catalog.lines_not_of("huawei") == before
    north4 = [(r["instance_type"], r["price_per_hour"]) for r in catalog.rows_of("huawei")
              if r["region"] == "cn-north-4"]
    assert north4 == [("c7.large.2", "0.3")]

"""Alibaba refresh: DescribePrice requests, the instanceType part's list price, the API's currency."""

from __future__ import annotations

import pytest

from inferstack.errors import InputError

SOURCE = "Alibaba Cloud ECS DescribePrice ResourceType=instance PriceUnit=Hour ap-southeast-1"


def test_describe_price_asks_for_the_hourly_pay_as_you_go_price_of_each_type(refresh, ecs_client):
    refresh("alibaba", ecs_client)

    price_requests = [r for r in ecs_client.requests if r["operation"] == "DescribePrice"]
    assert [(r["RegionId"], r["ResourceType"], r["InstanceType"], r["PriceUnit"], r["Period"])
            for r in price_requests] == [
        ("ap-southeast-1", "instance", "ecs.g7.large", "Hour", 1),
        ("ap-southeast-1", "instance", "ecs.gn7i-c8g1.2xlarge", "Hour", 1),
        ("ap-southeast-1", "instance", "ecs.gn8v.4xlarge", "Hour", 1)]


def test_the_instance_part_list_price_is_written_in_the_currency_the_api_returned(catalog, refresh, ecs_client):
    refresh("alibaba", ecs_client)

    rows = {(r["region"], r["instance_type"]): r for r in catalog.rows_of("alibaba")}
    g7 = rows[("ap-southeast-1", "ecs.g7.large")]
    # recorded: instanceType part OriginalPrice 0.1, TradePrice 0.09; system disk 0.01 (not counted)
    assert (g7["price_per_hour"], g7["currency"], g7["source"], g7["source_date"]) == (
        "0.1", "USD", SOURCE, "2026-11-30")
    assert "TradePrice for the querying account: 0.09" in g7["notes"]
    assert rows[("ap-southeast-1", "ecs.gn7i-c8g1.2xlarge")]["price_per_hour"] == "2"


def test_a_china_site_account_gets_cny_rows(catalog, refresh, ecs_client):
    ecs_client.price_files["ecs.g7.large"] = "alibaba/describe_price_ecs.g7.large_china_site.json"

    refresh("alibaba", ecs_client)

    g7 = next(r for r in catalog.rows_of("alibaba") if r["instance_type"] == "ecs.g7.large"
              and r["region"] == "ap-southeast-1")
    assert (g7["currency"], g7["price_per_hour"]) == ("CNY", "1")


def test_a_type_the_api_refuses_is_listed_with_the_api_error(catalog, refresh, ecs_client):
    result = refresh("alibaba", ecs_client)

    assert [(u.instance_type, u.reason) for u in result.unpriced] == [
        ("ecs.gn8v.4xlarge",
         "DescribePrice answered InvalidInstanceType.NotFound: The specified InstanceType does not exist.")]
    assert "ecs.gn8v.4xlarge" not in {r["instance_type"] for r in catalog.rows_of("alibaba")}


def test_the_old_row_of_a_refreshed_type_is_replaced_even_in_another_currency(catalog, refresh, ecs_client):
    refresh("alibaba", ecs_client)

    singapore = [(r["instance_type"], r["currency"], r["price_per_hour"]) for r in catalog.rows_of("alibaba")
                 if r["region"] == "ap-southeast-1"]
    assert singapore == [("ecs.g7.large", "USD", "0.1"), ("ecs.gn7i-c8g1.2xlarge", "USD", "2")]


def test_rows_of_other_regions_and_untouched_types_stay(catalog, refresh, ecs_client):
    before = catalog.lines_not_of("alibaba")

    refresh("alibaba", ecs_client)

    hangzhou = [(r["instance_type"], r["price_per_hour"]) for r in catalog.rows_of("alibaba")
                if r["region"] == "cn-hangzhou"]
    assert hangzhou == [("ecs.g7.large", "0.4"), ("ecs.r7.8xlarge", "8")]
    assert catalog.lines_not_of("alibaba") == before


def test_spec_check_uses_describe_instance_types_and_reports_differences(refresh, ecs_client):
    result = refresh("alibaba", ecs_client)

    type_requests = [r for r in ecs_client.requests if r["operation"] == "DescribeInstanceTypes"]
    assert [r["InstanceTypes"] for r in type_requests] == [
        ["ecs.g7.large", "ecs.gn7i-c8g1.2xlarge", "ecs.gn8v.4xlarge"]]
    assert [(d.instance_type, d.field, d.catalog_value, d.api_value) for d in result.spec_differences] == [
        ("ecs.gn7i-c8g1.2xlarge", "gpu_count", "1", "2")]


def test_a_region_outside_instances_csv_prices_every_alibaba_type_there(catalog, refresh, ecs_client):
    result = refresh("alibaba", ecs_client, region="cn-hangzhou")

    assert {r.instance_type for r in result.written} == {"ecs.g7.large", "ecs.gn7i-c8g1.2xlarge"}
    hangzhou = {(r["instance_type"], r["currency"]) for r in catalog.rows_of("alibaba") if r["region"] == "cn-hangzhou"}
    # ecs.r7.8xlarge is not in instances.csv, so this refresh did not ask about it and its row stays
    assert hangzhou == {("ecs.g7.large", "USD"), ("ecs.gn7i-c8g1.2xlarge", "USD"), ("ecs.r7.8xlarge", "CNY")}
    assert {r["RegionId"] for r in ecs_client.requests if r["operation"] == "DescribePrice"} == {"cn-hangzhou"}


def test_rejected_access_key_stops_the_refresh_and_writes_nothing(catalog, refresh, ecs_client, monkeypatch):
    from alibabacloud_tea_openapi import exceptions

    def refuse(request):
        raise exceptions.ClientException(status_code=401, code="InvalidAccessKeyId.NotFound",
                                         message="Specified access key is not found.")

    monkeypatch.setattr(ecs_client, "describe_price", refuse)
    before = catalog.prices.read_bytes()

    with pytest.raises(InputError, match="ALIBABA_CLOUD_ACCESS_KEY_ID"):
        refresh("alibaba", ecs_client)

    assert catalog.prices.read_bytes() == before

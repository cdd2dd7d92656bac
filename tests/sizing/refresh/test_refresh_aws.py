"""AWS refresh: get_products requests, parsed prices, unpriced and ambiguous types, spec mismatches."""

from __future__ import annotations

import pytest

from inferstack.errors import InputError
from inferstack.sizing.refresh.aws import filters

SOURCE = "AWS Price List API get_products AmazonEC2 us-east-1"
CATALOG_TYPES = ("c7i.large", "g5.xlarge", "m7i.large", "p5e.48xlarge", "r7i.2xlarge")


@pytest.fixture
def expect_get_products(recorded):
    """Queue one recorded get_products response, with the exact request it must answer."""

    def expect(stubber, response_file: str, instance_type: str | None, next_token: str | None = None) -> None:
        params = {"ServiceCode": "AmazonEC2", "Filters": filters("us-east-1", instance_type),
                  "FormatVersion": "aws_v1", "MaxResults": 100}
        if next_token:
            params["NextToken"] = next_token
        stubber.add_response("get_products", recorded(response_file), params)

    return expect


@pytest.fixture
def aws_client(aws_pricing, expect_get_products):
    """The stubbed client, primed with one filtered get_products answer per instances.csv type."""
    client, stubber = aws_pricing
    for instance_type in CATALOG_TYPES:
        expect_get_products(stubber, f"aws/get_products_{instance_type}.json", instance_type)
    return client


def test_filters_ask_for_linux_shared_tenancy_on_demand_capacity_of_one_type():
    assert {f["Field"]: f["Value"] for f in filters("us-east-1", "g5.xlarge")} == {
        "regionCode": "us-east-1", "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
        "capacitystatus": "Used", "instanceType": "g5.xlarge"}
    assert {f["Type"] for f in filters("us-east-1", None)} == {"TERM_MATCH"}
    assert "instanceType" not in {f["Field"] for f in filters("us-east-1", None)}


def test_refresh_writes_the_api_price_with_source_and_date(catalog, refresh, aws_client):
    result = refresh("aws", aws_client)

    rows = {(r["region"], r["instance_type"]): r for r in catalog.rows_of("aws")}
    assert rows[("us-east-1", "c7i.large")] == {
        "cloud": "aws", "region": "us-east-1", "instance_type": "c7i.large", "currency": "USD",
        "price_per_hour": "0.1", "source": SOURCE, "source_date": "2026-11-30",
        "notes": "on-demand list price, Linux, shared tenancy"}
    assert rows[("us-east-1", "g5.xlarge")]["price_per_hour"] == "1"
    assert rows[("us-east-1", "r7i.2xlarge")]["price_per_hour"] == "0.5"
    assert [r.instance_type for r in result.written] == ["c7i.large", "g5.xlarge", "r7i.2xlarge"]


def test_types_without_a_price_or_with_two_prices_are_listed_not_written(catalog, refresh, aws_client):
    result = refresh("aws", aws_client)

    reasons = {u.instance_type: u.reason for u in result.unpriced}
    assert reasons["p5e.48xlarge"].startswith("no on-demand hourly USD price")
    assert reasons["m7i.large"].startswith("ambiguous: 2 different hourly prices (0.2000000000, 0.3000000000)")
    written = {r["instance_type"] for r in catalog.rows_of("aws") if r["region"] == "us-east-1"}
    assert written == {"c7i.large", "g5.xlarge", "r7i.2xlarge"}


def test_an_earlier_row_the_api_no_longer_prices_is_removed_and_reported(refresh, aws_client):
    result = refresh("aws", aws_client)

    assert [(r.instance_type, r.price_per_hour) for r in result.dropped] == [("p5e.48xlarge", "99")]
    assert "p5e.48xlarge: was 99 USD" in result.summary()


def test_other_regions_and_clouds_are_untouched(catalog, refresh, aws_client):
    before = catalog.lines_not_of("aws")

    refresh("aws", aws_client)

    assert catalog.lines_not_of("aws") == before
    west = [r for r in catalog.rows_of("aws") if r["region"] == "us-west-2"]
    assert [(r["instance_type"], r["price_per_hour"], r["source"]) for r in west] == [
        ("c7i.large", "0.09", "earlier-source")]


def test_spec_differences_are_reported_and_instances_csv_is_not_changed(catalog, refresh, aws_client):
    instances_before = catalog.instances.read_bytes()

    result = refresh("aws", aws_client)

    assert [(d.instance_type, d.field, d.catalog_value, d.api_value) for d in result.spec_differences] == [
        ("r7i.2xlarge", "memory_gib", "60", "64")]
    assert catalog.instances.read_bytes() == instances_before


def test_all_types_follows_next_token_through_every_page(catalog, refresh, aws_pricing, expect_get_products):
    client, stubber = aws_pricing
    expect_get_products(stubber, "aws/get_products_all_page_1.json", None)
    expect_get_products(stubber, "aws/get_products_all_page_2.json", None, next_token="recorded-next-token-page-2")

    result = refresh("aws", client, all_types=True)

    assert sorted(r.instance_type for r in result.written) == ["c7i.large", "g5.xlarge", "r7i.2xlarge"]
    east = {r["instance_type"] for r in catalog.rows_of("aws") if r["region"] == "us-east-1"}
    assert east == {"c7i.large", "g5.xlarge", "r7i.2xlarge"}  # every earlier us-east-1 row was replaced


def test_rejected_credentials_stop_the_refresh_with_the_variables_to_set(catalog, refresh, aws_pricing):
    client, stubber = aws_pricing
    stubber.add_client_error("get_products", service_error_code="UnrecognizedClientException",
                             service_message="The security token included in the request is invalid.",
                             http_status_code=400)
    before = catalog.prices.read_bytes()

    with pytest.raises(InputError, match="AWS_ACCESS_KEY_ID") as raised:
        refresh("aws", client)

    assert "UnrecognizedClientException" in str(raised.value)
    assert catalog.prices.read_bytes() == before


def test_the_page_size_is_the_largest_the_price_list_service_model_allows() -> None:
    # Stubs accept any MaxResults; the service refuses one above the model's bound (botocore's own service model).
    import botocore.session

    from inferstack.sizing.refresh.aws import PAGE_SIZE

    bounds = botocore.session.get_session().get_service_model("pricing").operation_model(
        "GetProducts").input_shape.members["MaxResults"].metadata
    assert bounds["min"] <= PAGE_SIZE == bounds["max"]

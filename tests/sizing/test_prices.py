"""Prices: sources, currencies, the override file, discounts and exchange rates."""

import pytest
import yaml

from inferstack.errors import InputError
from inferstack.sizing.catalog import PriceBook


def override(tmp_path, data):
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_every_packaged_price_has_a_source_date_and_currency():
    book = PriceBook.load()
    for (cloud, _type), prices in book._prices.items():
        for price in prices:
            assert price.source and price.source_date and len(price.currency) == 3, (cloud, price)


def test_override_price_replaces_the_catalog_row_and_names_its_source(tmp_path):
    path = override(
        tmp_path,
        {
            "prices": [
                {
                    "cloud": "aws",
                    "region": "us-east-1",
                    "instance_type": "g6.xlarge",
                    "price_per_hour": 0.5,
                    "currency": "USD",
                    "source": "contract",
                }
            ]
        },
    )
    price, substitute = PriceBook.load(path).lookup("aws", "us-east-1", "g6.xlarge")
    assert (price.amount_per_hour, price.source, substitute) == (0.5, "contract", False)


def test_discount_applies_to_list_prices_not_to_your_own(tmp_path):
    path = override(
        tmp_path,
        {
            "discounts": {"aws": 20},
            "prices": [
                {
                    "cloud": "aws",
                    "region": "us-east-1",
                    "instance_type": "g6.xlarge",
                    "price_per_hour": 0.5,
                    "currency": "USD",
                }
            ],
        },
    )
    book = PriceBook.load(path)
    listed = PriceBook.load().lookup("aws", "us-east-1", "g5.xlarge")[0].amount_per_hour
    assert book.lookup("aws", "us-east-1", "g5.xlarge")[0].amount_per_hour == pytest.approx(listed * 0.8)
    assert book.lookup("aws", "us-east-1", "g6.xlarge")[0].amount_per_hour == 0.5


def test_exchange_rates_convert_both_ways_and_can_be_overridden(tmp_path):
    rates = PriceBook.load().rates
    assert rates.convert(100.0, "USD", "USD") == 100.0
    cny_in_usd = rates.convert(100.0, "CNY", "USD")
    assert 10 < cny_in_usd < 20  # dated ECB reference rate, about 0.14 USD per CNY
    assert rates.convert(cny_in_usd, "USD", "CNY") == pytest.approx(100.0)
    path = override(
        tmp_path, {"exchange_rates": {"usd_per_unit": {"CNY": 0.2}, "source": "desk", "date": "2026-11-28"}}
    )
    assert PriceBook.load(path).rates.convert(100.0, "CNY", "USD") == pytest.approx(20.0)


def test_missing_region_falls_back_to_the_catalog_region_and_says_so():
    price, substitute = PriceBook.load().lookup("aws", "eu-west-1", "g6.xlarge")
    assert substitute and price.region == "us-east-1"


def test_type_without_price_has_no_price():
    assert PriceBook.load().lookup("huawei", "ap-southeast-3", "pi2.2xlarge.4") is None


@pytest.mark.parametrize(
    "bad",
    [
        {"prices": [{"cloud": "azure", "region": "x", "instance_type": "y", "price_per_hour": 1, "currency": "USD"}]},
        {"discounts": {"aws": 150}},
        {"discounts": {"aws": "twenty"}},
        {
            "prices": [
                {"cloud": "aws", "region": "x", "instance_type": "y", "price_per_hour": "cheap", "currency": "USD"}
            ]
        },
        {"prices": "g6.xlarge: 1"},
        {"exchange_rates": {"usd_per_unit": {"CNY": -1}}},
        {"exchange_rates": {"CNY": 0.1}},
        {"unknown_section": 1},
    ],
)
def test_bad_override_file_is_a_clear_error(tmp_path, bad):
    with pytest.raises(InputError):
        PriceBook.load(override(tmp_path, bad))

"""The --prices file is input like a workload: read bounded, every value checked, never a traceback."""

import pytest
import yaml

from inferstack.errors import InputError
from inferstack.sizing.catalog import PriceBook

ENTRY = {"cloud": "aws", "region": "us-east-1", "instance_type": "g6.xlarge", "price_per_hour": 0.5, "currency": "USD"}


def override(tmp_path, data):
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_malformed_price_file_names_the_flag_and_where_it_breaks(tmp_path):
    (tmp_path / "prices.yaml").write_text("prices: [unclosed\n")
    with pytest.raises(InputError, match=r"--prices: cannot be parsed: .* \(line 2, column 1\)"):
        PriceBook.load(tmp_path / "prices.yaml")


def test_a_price_file_that_is_a_directory_or_not_utf8_says_so(tmp_path):
    with pytest.raises(InputError, match="--prices: is a directory"):
        PriceBook.load(tmp_path)
    (tmp_path / "prices.yaml").write_bytes(b"source: \xff\n")
    with pytest.raises(InputError, match="--prices: is not UTF-8 text"):
        PriceBook.load(tmp_path / "prices.yaml")


def test_a_price_file_alias_bomb_is_refused(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)
    ]
    (tmp_path / "prices.yaml").write_text("\n".join([*lines, "prices: *a8"]))
    with pytest.raises(InputError, match="--prices: expands to more than"):
        PriceBook.load(tmp_path / "prices.yaml")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"region": ["us-east-1"]}, "region must be a region name"),
        ({"region": "us-east-1\n"}, "region must be a region name"),
        ({"instance_type": "g6.xlarge; reboot"}, "instance_type must be an instance type name"),
        ({"price_per_hour": float("inf")}, "price_per_hour must be a positive number"),
        ({"price_per_hour": float("nan")}, "price_per_hour must be a positive number"),
        ({"price_per_hour": 10**400}, "price_per_hour must be a positive number"),
        ({"currency": "US$"}, "currency must be an ISO 4217 code"),
        ({"source": "line one\nline two"}, "source and date must be one line of text"),
        ({"cloud": "azure"}, "cloud must be one of aws, gcp, alibaba, huawei"),
    ],
)
def test_a_price_entry_with_a_value_of_the_wrong_shape_is_refused_by_name(tmp_path, change, expected):
    with pytest.raises(InputError, match=r"prices\[0\]: " + expected):
        PriceBook.load(override(tmp_path, {"prices": [{**ENTRY, **change}]}))


def test_exchange_rates_need_currency_codes_and_finite_rates(tmp_path):
    for rates in ({"CN Y": 0.14}, {"CNY": float("inf")}):
        with pytest.raises(InputError, match="exchange_rates: must have usd_per_unit"):
            PriceBook.load(override(tmp_path, {"exchange_rates": {"usd_per_unit": rates}}))


def test_a_well_formed_entry_is_still_used(tmp_path):
    price, substitute = PriceBook.load(override(tmp_path, {"prices": [ENTRY]})).lookup("aws", "us-east-1", "g6.xlarge")
    assert (price.amount_per_hour, price.currency, substitute) == (0.5, "USD", False)

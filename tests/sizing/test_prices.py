"""Prices: sources, currencies, the override file, discounts and exchange rates."""

import re

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


# ---- doubtful prices: stale, undated, borrowed ----------------------------------------------------------
# chat-70b with 15 users (the sample has 16: one 4x A100-80GB server would then have 2 % of arrivals waiting
# for a slot, over the planner's ceiling), Alibaba in ap-southeast-5, where ecs.gn7e-c16g1.16xlarge has a price of its
# own (2024-12-30, CNY) that comes out 1.5 % cheaper than GCP's a2-ultragpu-4g (2026-07-30, us-central1): a near-tie
# a stale price must lose. In me-east-1, a known region no price source lists, its price is borrowed from another
# region; in ap-southeast-1, whose price list does not name it, it is not sold.

GN7E = "ecs.gn7e-c16g1.16xlarge"
GN7E_AP5_CNY_PER_HOUR = 137.94  # prices.csv, ap-southeast-5
OWN_PRICE = {"alibaba": ["ap-southeast-5"]}
NO_PRICE_LIST = {"alibaba": ["me-east-1"]}


def chat_70b(regions=None, **placement):
    from pathlib import Path

    from inferstack.spec import parse_workload

    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples/workloads/chat-70b.yaml").read_text())
    data["traffic"]["concurrent_users"] = 15
    return parse_workload({**data, "placement": {"regions": regions or OWN_PRICE, **placement}})


def gn7e_in_singapore(tmp_path, *, date, factor=1.0):
    """A price of the user's own for the Alibaba near-tie in ap-southeast-1 (which it offers there): the ap-southeast-5
    amount times `factor`, dated `date`."""
    entry = {"cloud": "alibaba", "region": "ap-southeast-1", "instance_type": GN7E, "currency": "CNY",
             "price_per_hour": GN7E_AP5_CNY_PER_HOUR * factor, "source": "quote", "date": date}
    return override(tmp_path, {"prices": [entry]})


def gn7e_regions():
    return {row["region"] for row in PriceBook.load().rows if row["instance_type"] == GN7E}


def test_stale_borrowed_price_is_flagged_with_its_age_and_region():
    from inferstack.sizing.planner import plan_workload

    plan = plan_workload(chat_70b(NO_PRICE_LIST), clouds=["alibaba"]).outcome("alibaba").chosen
    assert plan is not None and plan.offer == GN7E and plan.region == "me-east-1"
    assert plan.price.flags == ["stale", "borrowed"] and plan.price.priced_region in gn7e_regions() - {"me-east-1"}
    assert plan.price.age_days == 701  # 2024-12-30 → 2026-12-01 (tests/conftest.py)
    assert any("23 months old" in w for w in plan.warnings)


def test_a_type_its_regions_price_list_leaves_out_is_not_sold_there():
    from inferstack.sizing.planner import plan_workload

    assert "ap-southeast-1" not in gn7e_regions()
    outcome = plan_workload(chat_70b({"alibaba": ["ap-southeast-1"]}), clouds=["alibaba"]).outcome("alibaba")
    assert outcome.chosen is not None and outcome.chosen.offer != GN7E
    assert all(plan.offer != GN7E for plan in outcome.alternatives)
    both = plan_workload(chat_70b({"alibaba": ["ap-southeast-1", "ap-southeast-5"]}), clouds=["alibaba"])
    assert both.outcome("alibaba").chosen.offer == GN7E  # type: ignore[union-attr]
    assert both.outcome("alibaba").chosen.region == "ap-southeast-5"  # type: ignore[union-attr]


def test_a_price_of_your_own_offers_its_type_in_its_region(tmp_path):
    from inferstack.sizing.planner import plan_workload

    prices = gn7e_in_singapore(tmp_path, date="2026-11-01")
    plan = plan_workload(chat_70b({"alibaba": ["ap-southeast-1"]}), clouds=["alibaba"], prices_file=prices)
    assert plan.outcome("alibaba").chosen.offer == GN7E  # type: ignore[union-attr]


def test_not_sold_needs_a_price_list_for_the_region_that_knows_the_type(tmp_path):
    book = PriceBook.load(gn7e_in_singapore(tmp_path, date="2026-11-01"))
    assert "not sold in cn-qingdao" in (book.not_sold_in("alibaba", "cn-qingdao", GN7E) or "")
    assert book.not_sold_in("alibaba", "ap-southeast-1", GN7E) is None  # the user's own price
    assert book.not_sold_in("alibaba", "me-east-1", GN7E) is None  # no price list for the region
    assert book.not_sold_in("alibaba", "cn-qingdao", "ecs.gn8is.2xlarge") is None  # a type no list knows
    assert book.not_sold_in("alibaba", "ap-southeast-5", GN7E) is None  # listed there


def test_a_price_under_a_year_old_from_its_own_region_carries_no_flag():
    from inferstack.sizing.planner import plan_workload

    plan = plan_workload(chat_70b(), clouds=["gcp"]).outcome("gcp").chosen
    assert plan is not None and plan.price.flags == [] and plan.price.age_days == 124  # 2026-07-30


def test_run_date_comes_from_one_variable_and_ages_prices(monkeypatch):
    from inferstack.sizing.planner import plan_workload

    monkeypatch.setenv("INFERSTACK_TODAY", "2025-06-01")
    plan = plan_workload(chat_70b(NO_PRICE_LIST), clouds=["alibaba"]).outcome("alibaba").chosen
    assert plan is not None and plan.price.age_days == 153 and plan.price.flags == ["borrowed"]


def test_a_run_date_that_is_no_date_is_a_clear_error(monkeypatch):
    from inferstack.sizing.catalog import run_date

    monkeypatch.setenv("INFERSTACK_TODAY", "yesterday")
    with pytest.raises(InputError, match=r"INFERSTACK_TODAY: must be a date YYYY-MM-DD \(got 'yesterday'\)"):
        run_date()


def test_a_stale_price_loses_a_near_tie_for_best_overall():
    from inferstack.sizing.planner import plan_workload

    report = plan_workload(chat_70b(), clouds=["gcp", "alibaba"])
    alibaba, gcp = report.outcome("alibaba").chosen, report.outcome("gcp").chosen
    assert alibaba and gcp and alibaba.price.monthly_ranking and gcp.price.monthly_ranking
    assert alibaba.price.flags == ["stale"]
    assert alibaba.price.monthly_ranking.amount < gcp.price.monthly_ranking.amount < \
        alibaba.price.monthly_ranking.amount * 1.05
    assert report.best == gcp  # was alibaba, 1.5 % cheaper on a 23-month-old price


@pytest.mark.parametrize(("date", "factor", "best"), [
    ("2026-11-01", 1.0, "alibaba"),  # fresh and same-region: the cheaper price wins
    ("2024-12-30", 1.0, "gcp"),      # same region but stale: loses the 1.5 % tie
    ("2024-12-30", 0.9, "alibaba"),  # stale but clearly (> 5 %) cheaper: still wins
])
def test_only_a_stale_or_borrowed_price_within_the_margin_loses(tmp_path, date, factor, best):
    from inferstack.sizing.planner import plan_workload

    report = plan_workload(chat_70b({"alibaba": ["ap-southeast-1"]}), clouds=["gcp", "alibaba"],
                           prices_file=gn7e_in_singapore(tmp_path, date=date, factor=factor))
    assert report.best is not None and report.best.cloud == best
    assert not report.outcome("alibaba").chosen.price.substitute  # type: ignore[union-attr]


def test_the_table_flags_doubtful_prices_and_says_why_the_cheaper_one_lost(capsys):
    from inferstack.report import print_plan_report
    from inferstack.sizing.planner import plan_workload

    print_plan_report(plan_workload(chat_70b(), clouds=["gcp", "alibaba"]))
    out = " ".join(capsys.readouterr().out.split())  # lines are wrapped to the terminal's width
    assert "STALE" in out and "BORROWED" not in out
    assert f"not 1x {GN7E} (4x A100) on alibaba ap-southeast-5" in out
    assert "1.5% cheaper, but its price is stale" in out
    print_plan_report(plan_workload(chat_70b(NO_PRICE_LIST), clouds=["alibaba"]))
    borrowed = " ".join(capsys.readouterr().out.split())
    assert "STALE" in borrowed and "BORROWED from" in borrowed
    assert re.search(r"price borrowed from cn-[a-z]+: its list price, used for me-east-1", borrowed)


def test_flags_are_in_the_json_plan():
    import json

    from inferstack.sizing.planner import plan_workload

    data = json.loads(plan_workload(chat_70b(NO_PRICE_LIST), clouds=["alibaba"]).model_dump_json())
    price = data["clouds"][0]["chosen"]["price"]
    assert (price["flags"], price["age_days"]) == (["stale", "borrowed"], 701)
    assert price["priced_region"] in gn7e_regions() - {"me-east-1"}


# ---- one currency per run ----------------------------------------------------------------------------------

def money_in(data):
    """Every Money ({amount, currency}) in a JSON document, with the key it sits under."""
    if isinstance(data, dict):
        if set(data) == {"amount", "currency"}:
            return []
        found = [(k, v) for k, v in data.items() if isinstance(v, dict) and set(v) == {"amount", "currency"}]
        return found + [m for v in data.values() for m in money_in(v)]
    if isinstance(data, list):
        return [m for v in data for m in money_in(v)]
    return []


BILLED_FIELDS = {"hourly_per_instance", "monthly"}  # the published list price, as billed: provenance


def test_with_eur_every_compared_figure_in_the_json_is_in_eur():
    import json

    from inferstack.sizing.planner import plan_workload

    data = json.loads(plan_workload(chat_70b(currency="EUR")).model_dump_json())
    money = money_in(data)
    assert len(money) > 30
    assert {m["currency"] for k, m in money if k not in BILLED_FIELDS} == {"EUR"}
    assert data["best"]["price"]["monthly_ranking"]["currency"] == "EUR"
    assert data["exchange_rates_source"].count("2026-02-20") == 1


def test_with_eur_every_figure_in_the_table_is_in_eur_and_the_rate_date_is_stated_once(capsys):
    import re

    from inferstack.report import print_plan_report
    from inferstack.sizing.planner import plan_workload

    print_plan_report(plan_workload(chat_70b(currency="EUR")))
    out = " ".join(capsys.readouterr().out.split())  # lines are wrapped to the terminal's width
    amounts = re.findall(r"\d[\d,]*\.\d\d ([A-Z]{3})", out)
    assert len(amounts) > 20 and set(amounts) == {"EUR"}
    assert "Best overall: 1x a2-ultragpu-4g (4x A100) on gcp us-central1, 12,578.30 EUR/month" in out
    assert out.count("2026-02-20") == 1


def test_a_budget_in_eur_is_checked_and_reported_in_eur():
    from inferstack.sizing.planner import plan_workload

    report = plan_workload(chat_70b(currency="EUR", monthly_budget=1000), clouds=["gcp"])
    assert report.over_budget_message() == (
        "no deployment with a known price fits the monthly budget of 1,000.00 EUR: the cheapest priced one that "
        "meets the targets is 1x a2-ultragpu-4g (4x A100) on gcp us-central1, 12,578.30 EUR/month"
    )
    assert any("12,578.30 EUR per month, budget 1,000.00 EUR" in b for b in report.outcome("gcp").blocked_by)


def test_an_alternative_says_what_ranks_above_it_and_never_that_it_was_chosen() -> None:
    """Each alternative's plan carries its own rationale: it names its rank and the first option, not "chosen over"
    (which read "that price is , and a doubtful price loses…" for an alternative behind a sound, cheaper price)."""
    from inferstack.sizing.planner import plan_workload
    from inferstack.spec import parse_workload

    workload = parse_workload({"name": "chat", "model": "llama-3.1-8b", "precision": "bf16", "stage": "production",
                               "traffic": {"requests_per_s": 5}, "placement": {"clouds": ["aws"]}})
    outcome = plan_workload(workload, clouds=["aws"], alternatives=3).outcome("aws")
    assert outcome.chosen is not None and len(outcome.alternatives) == 3
    first = outcome.chosen.instance_type
    assert not any("is an alternative" in line for line in outcome.chosen.rationale)
    for rank, alternative in enumerate(outcome.alternatives, start=2):
        line = next(line for line in alternative.rationale if "is an alternative" in line)
        assert f"ranked {rank} of" in line and f"the first is {first}" in line, line
        assert not any("chosen over" in text for text in alternative.rationale)


def test_a_workload_that_pins_the_device_is_not_told_the_other_kind_failed_its_targets() -> None:
    from inferstack.sizing.planner import plan_workload
    from inferstack.spec import parse_workload

    workload = parse_workload({"name": "chat", "model": "llama-3.1-8b", "precision": "q4_k_m",
                               "traffic": {"requests_per_s": 0.2}, "placement": {"clouds": ["aws"], "device": "cpu"}})
    chosen = plan_workload(workload, clouds=["aws"]).outcome("aws").chosen
    assert chosen is not None and chosen.device == "cpu"
    assert "CPU, as placement.device asks (GPU offers were not considered)." in chosen.rationale
    assert not any("no GPU option" in line for line in chosen.rationale)

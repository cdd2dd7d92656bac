"""Spot capacity above a production fleet's on-demand floor (issue 25, item 4): where a cloud's group can keep the
floor on-demand, the plan says how many servers stay on-demand, how many spot ones may come above them, which
equivalent types the group falls back on, and the spot price where the catalog has one."""

from pathlib import Path

import pytest
import yaml

from inferstack.clouds import CLOUD_FACTS
from inferstack.pin import PinnedCatalog
from inferstack.plan import MAX_FALLBACK_TYPES
from inferstack.report import _capacity_mix
from inferstack.sizing.catalog import PriceBook, offers
from inferstack.sizing.planner import plan_workload
from inferstack.spec import load_workload, parse_workload

ROOT = Path(__file__).resolve().parents[2]
CHAT = yaml.safe_load((ROOT / "examples/workloads/chat-8b-public.yaml").read_text())  # production
REGIONS = {"aws": ["us-west-2"], "gcp": ["europe-west4"], "alibaba": ["cn-hangzhou"]}


def chat(**placement):
    return parse_workload({**CHAT, "placement": {"regions": REGIONS, **placement}})


def chosen(report, cloud):
    plan = report.outcome(cloud).chosen
    assert plan is not None
    return plan


def specs(cloud):
    return {offer.machine_type: offer for offer in offers() if offer.cloud == cloud}


@pytest.mark.parametrize("cloud", [c for c, facts in CLOUD_FACTS.items() if facts.on_demand_floor])
def test_spot_above_the_floor_keeps_the_floor_on_demand_with_equivalent_fallback_types(cloud):
    plan = chosen(plan_workload(chat(spot=True), clouds=[cloud]), cloud)
    floor, fleet = plan.spot_above_floor, plan.fleet
    assert floor is not None and fleet is not None and plan.spot is False and plan.interruptible
    assert (floor.on_demand_base, floor.spot_above) == (fleet.min_replicas, fleet.max_replicas - fleet.min_replicas)
    planned, *fallbacks = floor.instance_types
    assert planned == plan.instance_type and fallbacks and len(fallbacks) <= MAX_FALLBACK_TYPES
    catalog = specs(cloud)
    for name in fallbacks:
        other = catalog[name]
        assert other.gpu == catalog[planned].gpu and other.gpu_count == catalog[planned].gpu_count
        assert other.vcpus >= plan.vcpus and other.memory_gib >= plan.memory_gib
        assert PriceBook.load().not_sold_in(cloud, plan.region, other.name) is None
    assert any(line.startswith("spot above the floor:") for line in plan.rationale)
    assert plan.price.monthly == chosen(plan_workload(chat(), clouds=[cloud]), cloud).price.monthly  # the floor's


@pytest.mark.parametrize("cloud", [c for c, facts in CLOUD_FACTS.items() if not facts.on_demand_floor])
def test_a_cloud_whose_group_keeps_no_on_demand_floor_stays_on_demand_and_says_why(cloud):
    plan = chosen(plan_workload(chat(spot=True), clouds=[cloud]), cloud)
    assert plan.spot_above_floor is None and not plan.interruptible
    assert any("keeps every server on-demand" in w and "spot-above-floor" in w for w in plan.warnings)


def test_without_spot_or_outside_production_there_is_no_floor():
    assert chosen(plan_workload(chat(), clouds=["aws"]), "aws").spot_above_floor is None
    internal = parse_workload({**CHAT, "stage": "internal", "placement": {"spot": True, "regions": REGIONS}})
    plan = chosen(plan_workload(internal, clouds=["aws"]), "aws")
    assert plan.spot and plan.spot_above_floor is None and plan.interruptible


def test_a_fleet_without_room_above_its_floor_adds_no_spot_server_and_says_so():
    report = plan_workload(chat(spot=True), clouds=["aws"])
    floor = chosen(report, "aws").fleet.min_replicas  # type: ignore[union-attr]
    capped = parse_workload({**CHAT, "scaling": {"max_replicas": floor},
                             "placement": {"regions": REGIONS, "spot": True}})
    plan = chosen(plan_workload(capped, clouds=["aws"]), "aws")
    assert plan.spot_above_floor is None and any("no room above its on-demand floor" in w for w in plan.warnings)


def test_the_spot_price_is_the_regions_own_and_a_pin_keeps_it(tmp_path):
    book = PriceBook.load()
    row = next(r for r in book.spot_rows if r["cloud"] == "aws")
    price = book.spot_price("aws", row["region"], row["instance_type"])
    assert price is not None and price.amount_per_hour == float(row["price_per_hour"])
    unlisted = "ca-central-1"  # a region the spot file has no row for: never borrowed from another region
    assert not any(r["region"] == unlisted for r in book.spot_rows)
    assert book.spot_price("aws", unlisted, row["instance_type"]) is None
    pinned = PinnedCatalog.of("aws", book, [row["region"]])
    assert pinned.spot_prices and all(row["region"] in line for line in pinned.spot_prices[1:])
    again = pinned.catalog(book_date()).prices.spot_price("aws", row["region"], row["instance_type"])
    assert again == price
    assert PinnedCatalog.of("aws", book).spot_prices == []  # a plan that shows no spot price pins none


def book_date():
    import datetime

    return datetime.date(2026, 12, 1)


def test_a_plan_shows_the_spot_price_its_region_lists_and_a_cpu_plan_has_no_fallback_type():
    bert = yaml.safe_load((ROOT / "examples/workloads/embeddings-bert.yaml").read_text())
    spec = parse_workload({**bert, "stage": "production",
                           "placement": {"device": "cpu", "spot": True, "regions": {"aws": ["us-west-2"]}}})
    plan = chosen(plan_workload(spec, clouds=["aws"]), "aws")
    floor = plan.spot_above_floor
    listed = PriceBook.load().spot_price("aws", "us-west-2", plan.offer)
    assert floor is not None and listed is not None and floor.instance_types == [plan.instance_type]
    assert floor.spot_hourly_per_instance is not None
    assert floor.spot_hourly_per_instance.amount == listed.amount_per_hour
    assert (floor.spot_price_source, floor.spot_price_date) == (listed.source, listed.source_date)
    line = next(line for line in plan.rationale if line.startswith("spot above the floor:"))
    assert "spot prices move" in line and "no equivalent type to fall back on" in line
    # The blend at the ceiling: the floor on-demand, the servers above it at the spot price (USD, as ranked).
    hourly = plan.price.hourly_per_instance
    assert hourly is not None and hourly.currency == listed.currency == "USD" and listed.amount_per_hour < hourly.amount
    base, above = floor.on_demand_base, floor.spot_above
    assert floor.monthly_at_ceiling is not None and floor.on_demand_monthly_at_ceiling is not None
    blend = (hourly.amount * base + listed.amount_per_hour * above) * 730
    assert floor.monthly_at_ceiling.amount == pytest.approx(blend)
    assert floor.on_demand_monthly_at_ceiling.amount == pytest.approx(hourly.amount * (base + above) * 730)
    assert floor.spot_share_at_ceiling == above / (base + above)
    assert (f"{floor.spot_share_at_ceiling:.0%} of the servers on spot, all {plan.instance_type}) "
            f"{floor.monthly_at_ceiling} a month") in line
    cell = _capacity_mix(plan)
    assert str(floor.monthly_at_ceiling) in cell and str(floor.on_demand_monthly_at_ceiling) in cell


def test_the_spot_example_falls_back_on_at_least_two_equivalent_types_where_its_cloud_keeps_a_floor():
    spec = load_workload(ROOT / "examples/workloads/chat-7b-spot.yaml")
    report = plan_workload(spec)
    for cloud, facts in CLOUD_FACTS.items():
        plan = chosen(report, cloud)
        if facts.on_demand_floor:
            floor = plan.spot_above_floor
            assert floor is not None and len(floor.instance_types) >= 3, (cloud, floor)
            listed = PriceBook.load().spot_price(cloud, plan.region, plan.offer)
            if listed is None:  # Alibaba: no spot price in the catalog
                assert floor.monthly_at_ceiling is None and "spot price unknown" in _capacity_mix(plan)
            else:  # AWS g6e.xlarge in us-west-2: the blend is cheaper than the ceiling all on-demand
                assert floor.monthly_at_ceiling is not None and floor.on_demand_monthly_at_ceiling is not None
                assert floor.monthly_at_ceiling.amount < floor.on_demand_monthly_at_ceiling.amount
        else:
            assert plan.spot_above_floor is None and _capacity_mix(plan) == "all on-demand"

"""A monthly budget: only a deployment with a known price can be shown to meet it.

chat-8b-public needs at least 5x g6e.xlarge (6,792.65 USD/month) among AWS's priced offers; the unpriced
p5e.48xlarge also meets its targets. Before this guarantee, a budget of 100 let that unpriced offer through.
"""

from pathlib import Path

import pytest
import yaml

from inferstack.errors import InfeasibleError
from inferstack.sizing.planner import plan_workload
from inferstack.spec import WorkloadSpec, parse_workload

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"
CHEAPEST_AWS = "5x g6e.xlarge (1x L40S) on aws us-east-1, 6,792.65 USD/month"


def chat_8b(**placement: object) -> WorkloadSpec:
    data = yaml.safe_load((WORKLOADS / "chat-8b-public.yaml").read_text())
    data["placement"] = placement
    return parse_workload(data)


def test_an_offer_without_a_price_never_passes_a_budget():
    report = plan_workload(chat_8b(monthly_budget=100), clouds=["aws"])
    outcome = report.outcome("aws")
    assert outcome.chosen is None  # was: 2x p5e.48xlarge, "the smallest that fits", price unknown
    assert any("p5e.48xlarge" in line and "cannot be shown to meet the budget" in line for line in outcome.blocked_by)


def test_over_budget_names_the_cheapest_priced_option_that_meets_the_targets_and_its_cost():
    report = plan_workload(chat_8b(monthly_budget=100))
    assert not any(o.chosen for o in report.clouds)
    assert report.cheapest_over_budget is not None and report.cheapest_over_budget.summary() == CHEAPEST_AWS
    assert report.over_budget_message() == (
        "no deployment with a known price fits the monthly budget of 100.00 USD: "
        f"the cheapest priced one that meets the targets is {CHEAPEST_AWS}"
    )


def test_a_budget_on_a_cloud_without_prices_says_no_priced_option_exists():
    report = plan_workload(chat_8b(monthly_budget=1_000_000), clouds=["huawei"])
    assert report.outcome("huawei").chosen is None and report.cheapest_over_budget is None
    assert "no priced deployment meets the targets at any cost" in (report.over_budget_message() or "")


def test_a_budget_met_by_a_priced_offer_chooses_that_offer():
    report = plan_workload(chat_8b(monthly_budget=7000), clouds=["aws", "huawei"])
    chosen = report.outcome("aws").chosen
    assert chosen is not None and chosen.summary() == CHEAPEST_AWS
    assert report.outcome("huawei").chosen is None  # its offers fit, but none has a price to compare
    assert report.best == chosen and report.over_budget_message() is None


def test_without_a_budget_an_unpriced_pick_says_how_it_was_chosen_and_never_claims_cheapest():
    outcome = plan_workload(chat_8b(), clouds=["huawei"]).outcome("huawei")
    plan = outcome.chosen
    assert plan is not None and plan.price.monthly is None and plan.summary().endswith("price unknown")
    line = next(r for r in plan.rationale if "known price" in r)
    assert "fewest GPUs in total across its replicas" in line and "neither the cheapest" in line
    assert "smallest" not in line
    gpus = [p.instance_count * p.gpus_per_instance for p in (plan, *outcome.alternatives)]
    assert gpus[0] == min(gpus)  # what the sentence claims


def test_the_stack_program_refuses_the_same_way():
    """InferenceServer(workload=...) sizes with size_workload: the same refusal, as the error a `pulumi up` shows."""
    pytest.importorskip("pulumi")
    from inferstack.components.plan_source import size_workload

    with pytest.raises(InfeasibleError, match="cannot be shown to meet the budget") as error:
        size_workload(chat_8b(monthly_budget=100, clouds=["aws"]), "aws")
    assert "5x g6e.xlarge in us-east-1: 6,792.65 USD per month, budget 100.00 USD" in str(error.value)


def test_a_budget_exactly_the_cheapest_monthly_cost_admits_it():
    # The budget is a ceiling the deployment may reach: `cost <= budget`, not `<` (a mutation issue 24 found alive).
    cheapest = plan_workload(chat_8b(), clouds=["aws"]).outcome("aws").chosen
    assert cheapest is not None and cheapest.price.monthly_ranking is not None
    exact = plan_workload(chat_8b(monthly_budget=cheapest.price.monthly_ranking.amount), clouds=["aws"])
    within = exact.outcome("aws").chosen
    assert within is not None and within.summary() == cheapest.summary()  # the same servers at the same cost
    below = plan_workload(chat_8b(monthly_budget=cheapest.price.monthly_ranking.amount - 0.01), clouds=["aws"])
    assert below.outcome("aws").chosen is None or below.outcome("aws").chosen.summary() != cheapest.summary()

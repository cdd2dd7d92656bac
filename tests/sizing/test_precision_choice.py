"""Precision as a choice (issue 26, item 6): a workload may let the planner choose its precision (`auto`, or a list);
the planner serves the cheapest one that meets the targets, and the plan always says which it chose, what the
others would cost and the chosen precision's known accuracy cost with its source."""

from pathlib import Path

import pytest
import yaml

from inferstack.errors import InputError
from inferstack.sizing.planner import plan_workload, precision_choices
from inferstack.sizing.precision import accuracy_findings, lossless_precisions
from inferstack.spec import Precision, parse_workload

ROOT = Path(__file__).resolve().parents[2]
CHAT_70B = yaml.safe_load((ROOT / "examples/workloads/chat-70b.yaml").read_text())  # bf16
CLOUDS = ["aws", "gcp"]


def chat_70b(**changes):
    return parse_workload({**CHAT_70B, **changes})


def notes(plan):
    return [line for line in plan.rationale if line.startswith("precision ")]


def test_auto_chooses_fp8_for_the_70b_chat_where_cheaper_and_says_what_it_costs_in_accuracy():
    fixed = plan_workload(chat_70b(), clouds=CLOUDS)
    auto = plan_workload(chat_70b(precision="auto"), clouds=CLOUDS)
    for cloud in CLOUDS:
        bf16, chosen = fixed.outcome(cloud).chosen, auto.outcome(cloud).chosen
        assert bf16 is not None and chosen is not None and bf16.precision == "bf16"
        assert chosen.price.monthly_ranking is not None and bf16.price.monthly_ranking is not None
        assert chosen.price.monthly_ranking.amount <= bf16.price.monthly_ranking.amount
        if chosen.precision == "fp8":
            assert chosen.price.monthly_ranking.amount < bf16.price.monthly_ranking.amount
        [line] = notes(chosen)
        assert f"precision {chosen.precision}, chosen (precision: auto)" in line
        finding = accuracy_findings()[Precision.FP8]
        if chosen.precision == "fp8":  # the source and its date, and the bf16 option it beat
            assert finding.source in line and finding.source_date in line and finding.finding in line
            assert f"bf16: {bf16.replicas}x {bf16.offer}, {bf16.price.monthly_ranking}/month" in line
    assert {auto.outcome(c).chosen.precision for c in CLOUDS} == {"fp8"}  # type: ignore[union-attr]


def test_a_fixed_precision_plans_as_before_and_says_nothing_about_a_choice():
    plan = plan_workload(chat_70b(), clouds=["aws"]).outcome("aws").chosen
    assert plan is not None and plan.precision == "bf16" and notes(plan) == []


def test_a_list_is_served_only_at_its_own_precisions_and_a_lossy_choice_says_so():
    spec = chat_70b(precision=["int4-awq", "bf16"])
    plan = plan_workload(spec, clouds=["aws"]).outcome("aws").chosen
    assert plan is not None and plan.precision == "int4-awq"  # 1x p5.4xlarge, cheaper than bf16's 1x p4d.24xlarge
    [line] = notes(plan)
    assert "chosen (precision: [int4-awq, bf16])" in line and "bf16: 1x p4d.24xlarge" in line
    assert accuracy_findings()[Precision.INT4_AWQ].finding in line
    int8 = plan_workload(chat_70b(precision=["int8"]), clouds=["aws"]).outcome("aws").chosen
    assert int8 is not None and int8.precision == "int8"
    assert "no accuracy figure in inferstack's sources" in notes(int8)[0]


def test_auto_adds_only_precisions_a_source_finds_lossless_and_only_for_llms_on_gpus():
    assert lossless_precisions() == (Precision.FP8,)
    spec = chat_70b(precision="auto")
    assert precision_choices(spec, llm=True, gpu=True) == [Precision.BF16, Precision.FP8]
    assert precision_choices(spec, llm=True, gpu=False) == [Precision.BF16]
    assert precision_choices(spec, llm=False, gpu=True) == [Precision.FP16]
    assert precision_choices(chat_70b(precision=["fp8", "fp8", "bf16"]), True, True) == [Precision.FP8, Precision.BF16]


@pytest.mark.parametrize("value", ["automatic", [], ["bf16", "fp7"]])
def test_a_precision_that_is_neither_a_precision_auto_nor_a_list_of_them_is_refused_naming_the_field(value):
    with pytest.raises(InputError) as caught:
        chat_70b(precision=value)
    assert "precision" in str(caught.value)


def test_a_canary_beside_a_precision_the_planner_chooses_is_refused_naming_the_fix():
    with pytest.raises(InputError, match="canary: a canary compares two versions, so the workload's precision must be "
                                         "one, not auto or a list"):
        chat_70b(precision="auto", stage="production", canary={"precision": "fp8", "weight": 10})


def test_at_equal_cost_the_less_quantized_precision_wins_and_a_weight_only_fp8_gpu_says_so():
    small = {**CHAT_70B, "model": "mistral-7b", "traffic": {"concurrent_users": 1, "prompt_tokens": {"mean": 200},
                                                            "output_tokens": {"mean": 100}}}
    fp8, bf16 = (plan_workload(parse_workload({**small, "precision": p}), clouds=["aws"]).outcome("aws").chosen
                 for p in ("fp8", "bf16"))
    assert fp8 is not None and bf16 is not None and fp8.offer == bf16.offer == "g6.xlarge"  # one price for both
    listed = plan_workload(parse_workload({**small, "precision": ["fp8", "bf16"]}), clouds=["aws"]).outcome("aws")
    assert listed.chosen is not None and listed.chosen.precision == "bf16"  # fp8 must be cheaper to be chosen
    a10 = parse_workload({**small, "precision": ["fp8"], "placement": {"gpus_allow": ["A10G"]}})
    on_a10 = plan_workload(a10, clouds=["aws"]).outcome("aws").chosen
    assert on_a10 is not None and "runs the FP8 weights weight-only" in notes(on_a10)[0]

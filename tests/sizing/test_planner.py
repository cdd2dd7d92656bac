"""Planner cases from the source documents, and the planner's guarantees as properties."""

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferstack.errors import InputError
from inferstack.sizing import planner
from inferstack.sizing.catalog import load_catalog, offers
from inferstack.sizing.demand import demand_of
from inferstack.sizing.evaluate import size_candidate
from inferstack.sizing.models import resolve
from inferstack.sizing.planner import plan_workload
from inferstack.spec import WorkloadSpec, load_workload, parse_workload

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"


def workload(name: str, **changes: object) -> WorkloadSpec:
    data = yaml.safe_load((WORKLOADS / name).read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return parse_workload(data)


# ---- cases from the source documents ----------------------------------------------------------------


def test_internal_7b_knowledge_base_qa_may_run_on_cpu_with_at_least_20_gb_at_fp16():
    report = plan_workload(workload("kb-qa-7b-internal.yaml", placement__device="cpu"), clouds=["aws"])
    plan = report.outcome("aws").chosen
    assert plan is not None and plan.device == "cpu"
    assert plan.memory_gib * 1.073741824 >= 20  # GiB → GB
    assert plan.memory.total_gib <= plan.memory.usable_gib


def test_internal_7b_knowledge_base_qa_is_cheaper_on_cpu_at_int4():
    fp16 = plan_workload(workload("kb-qa-7b-internal.yaml", placement__device="cpu"), clouds=["aws"])
    int4 = plan_workload(workload("kb-qa-7b-internal.yaml", placement__device="cpu", precision="int4"), clouds=["aws"])
    fp16_plan, int4_plan = fp16.outcome("aws").chosen, int4.outcome("aws").chosen
    assert fp16_plan and int4_plan
    assert int4_plan.precision == "q4_k_m"  # llama.cpp serves int4 as GGUF Q4_K_M
    assert int4_plan.price.monthly_ranking.amount < fp16_plan.price.monthly_ranking.amount


def test_public_8b_chat_needs_gpus_with_kv_cache_for_100_sequences():
    report = plan_workload(load_workload(WORKLOADS / "chat-8b-public.yaml"))
    for outcome in report.clouds:
        plan = outcome.chosen
        assert plan is not None, outcome.blocked_by
        assert plan.device == "gpu"
        serving_replicas = plan.replicas - 1  # production keeps one spare
        assert plan.performance.concurrency_per_replica * serving_replicas * plan.serving.processes >= 100
        assert plan.memory.kv_cache_needed_gib <= plan.memory.kv_cache_gib
        assert plan.memory.max_concurrency >= plan.performance.concurrency_per_replica
        assert plan.performance.ttft_p95_ms <= 1000 and plan.performance.tpot_p95_ms <= 60


def test_production_spreads_at_least_two_replicas_over_two_zones():
    plan = plan_workload(load_workload(WORKLOADS / "chat-8b-public.yaml"), clouds=["gcp"]).outcome("gcp").chosen
    assert plan and plan.replicas >= 2 and plan.zones == 2


def test_spot_in_production_is_never_dropped_silently():
    production = workload("chat-8b-public.yaml", placement__spot=True)
    assert production.stage == "production"
    aws = plan_workload(production, clouds=["aws"]).outcome("aws").chosen
    assert aws is not None and aws.spot is False and aws.spot_above_floor is not None  # tests/sizing/test_spot.py
    gcp = plan_workload(production, clouds=["gcp"]).outcome("gcp").chosen
    assert gcp is not None and gcp.spot is False and gcp.spot_above_floor is None
    assert any(line.startswith("spot: true keeps every server on-demand on Google Cloud") for line in gcp.warnings)
    internal = plan_workload(workload("chat-8b-public.yaml", placement__spot=True, stage="internal"),
                             clouds=["aws"]).outcome("aws").chosen
    assert internal is not None and internal.spot is True and internal.spot_above_floor is None
    assert not any("keeps every server on-demand" in line for line in internal.warnings)


def test_70b_model_needs_tensor_parallelism_at_16_bit():
    report = plan_workload(load_workload(WORKLOADS / "chat-70b.yaml"))
    for outcome in report.clouds:
        assert outcome.chosen is not None
        assert outcome.chosen.tensor_parallel > 1


def test_70b_model_on_one_gpu_needs_int4():
    single_gpu = workload("chat-70b.yaml", placement__gpus_allow=["L40S"], placement__clouds=["aws"])
    report = plan_workload(single_gpu)
    one_gpu_plans = [
        p
        for o in report.clouds
        for p in ([o.chosen] if o.chosen else []) + o.alternatives
        if p.accelerator and p.accelerator.count == 1
    ]
    assert not one_gpu_plans  # bf16 70B never fits one 48 GB GPU
    int4 = plan_workload(
        workload("chat-70b.yaml", placement__gpus_allow=["H100"], placement__clouds=["aws"], precision="int4-awq")
    )
    plan = int4.outcome("aws").chosen
    assert plan is not None and plan.accelerator and plan.accelerator.count == 1  # p5.4xlarge


def test_cheapest_priced_plan_is_the_overall_best():
    report = plan_workload(load_workload(WORKLOADS / "embeddings-bert.yaml"))
    priced = [o.chosen for o in report.clouds if o.chosen and o.chosen.price.monthly_ranking]
    assert report.best == min(priced, key=lambda p: p.price.monthly_ranking.amount)


def test_unknown_price_is_shown_but_never_ranked_best():
    report = plan_workload(load_workload(WORKLOADS / "embeddings-bert.yaml"), clouds=["huawei"])
    plan = report.outcome("huawei").chosen
    assert plan is not None and plan.price.monthly is None
    assert report.best is None
    assert any("no published price" in w for w in plan.warnings)


def test_cny_prices_are_converted_for_ranking_and_keep_their_currency():
    plan = (
        plan_workload(load_workload(WORKLOADS / "embeddings-bert.yaml"), clouds=["alibaba"]).outcome("alibaba").chosen
    )
    assert plan is not None and plan.price.monthly and plan.price.monthly.currency == "CNY"
    assert plan.price.monthly_ranking is not None and plan.price.monthly_ranking.currency == "USD"


def test_regional_price_substitute_is_flagged():
    plan = (
        plan_workload(load_workload(WORKLOADS / "chat-70b.yaml"), clouds=["aws"], region="ca-central-1")
        .outcome("aws")
        .chosen
    )
    assert plan is not None and plan.region == "ca-central-1"  # a known region no price source lists
    assert plan.price.substitute and plan.price.priced_region == "us-east-1"
    assert any("regional substitute" in w for w in plan.warnings)


def test_impossible_slo_reports_blockers_and_nearest_feasible_changes():
    impossible = workload("chat-70b.yaml", slo__ttft_p95_ms=5, placement__clouds=["aws"])
    report = plan_workload(impossible)
    outcome = report.outcome("aws")
    assert outcome.chosen is None
    assert any("TTFT" in reason for reason in outcome.blocked_by)
    assert report.suggestions and all(s.startswith("with ") for s in report.suggestions)


def test_plannable_engines_only():
    with pytest.raises(InputError, match="engine"):
        plan_workload(workload("chat-8b-public.yaml", engine="trtllm"))


@pytest.mark.parametrize("name", sorted(path.name for path in WORKLOADS.glob("*.yaml")))
def test_gpu_offers_with_the_same_accelerators_are_sized_alike(name):
    # The planner sizes each shared_sizing_key once, so a GPU offer's sizing must read nothing else of the offer
    # (host vCPUs or memory, name, cloud): every catalog offer sized on its own agrees.
    spec = load_workload(WORKLOADS / name)
    demand = demand_of(spec, resolve(spec.model))
    first, shared = {}, 0
    for offer in offers():
        candidate = planner.candidate_for(demand, offer)
        if isinstance(candidate, str) or (key := planner.shared_sizing_key(candidate)) is None:
            continue
        sizing = size_candidate(demand, candidate)
        if key in first:
            shared += 1
            # Its queueing model (load_model) is a new object per sizing: the figures are what must agree.
            assert sizing._replace(load_model=None) == first[key]._replace(candidate=candidate, load_model=None), \
                offer.name
        first.setdefault(key, sizing)
    assert shared > 0


def test_plan_carries_sources_and_rationale():
    plan = plan_workload(load_workload(WORKLOADS / "chat-8b-public.yaml"), clouds=["aws"]).outcome("aws").chosen
    assert plan is not None
    assert plan.price.source and plan.price.source_date
    assert any("cheapest" in line for line in plan.rationale)
    assert any(line.startswith(("GPU rather than CPU", "CPU rather than GPU")) for line in plan.rationale)


# ---- properties --------------------------------------------------------------------------------------

relaxed = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
chat_loads = st.fixed_dictionaries(
    {
        "users": st.integers(1, 300),
        "prompt": st.integers(64, 4000),
        "output": st.integers(16, 1500),
        "model": st.sampled_from(["llama-3.1-8b", "qwen2.5-14b", "mistral-7b", "phi-3-mini"]),
    }
).filter(lambda load: load["model"] != "phi-3-mini" or load["prompt"] + load["output"] <= 4096)  # its context


def chat_spec(load: dict[str, object], **placement: object) -> WorkloadSpec:
    return parse_workload(
        {
            "name": "property",
            "model": load["model"],
            "traffic": {
                "concurrent_users": load["users"],
                "prompt_tokens": load["prompt"],
                "output_tokens": load["output"],
            },
            "slo": {"ttft_p95_ms": 3000, "tpot_p95_ms": 150},
            "placement": {"clouds": ["aws", "gcp"], **placement},
        }
    )


@relaxed
@given(chat_loads)
def test_a_plan_never_exceeds_memory(load):
    for outcome in plan_workload(chat_spec(load)).clouds:
        for plan in ([outcome.chosen] if outcome.chosen else []) + outcome.alternatives:
            assert plan.memory.total_gib <= plan.memory.usable_gib + 1e-6
            assert plan.memory.kv_cache_needed_gib <= plan.memory.kv_cache_gib + 1e-6


@relaxed
@given(chat_loads, st.floats(0.05, 0.99))
def test_adding_a_cheaper_feasible_instance_never_raises_the_cost(tmp_path_factory, load, price_factor):
    spec = chat_spec(load)
    before = plan_workload(spec, clouds=["aws"]).outcome("aws").chosen
    if before is None or before.price.hourly_per_instance is None:
        return
    original = next(o for o in offers() if o.name == before.offer)
    cheaper = original._replace(name=f"{original.name}-cheaper", machine_type=f"{original.machine_type}-cheaper")
    prices = tmp_path_factory.mktemp("prices") / "prices.yaml"
    prices.write_text(
        yaml.safe_dump(
            {
                "prices": [
                    {
                        "cloud": "aws",
                        "region": before.region,
                        "instance_type": cheaper.name,
                        "currency": "USD",
                        "price_per_hour": before.price.hourly_per_instance.amount * price_factor,
                    }
                ]
            }
        )
    )
    catalog = load_catalog(prices)._replace(offers=(*offers(), cheaper))
    after = plan_workload(spec, clouds=["aws"], catalog=catalog).outcome("aws").chosen
    assert after is not None
    assert after.price.monthly_ranking.amount <= before.price.monthly_ranking.amount + 1e-6


@pytest.mark.parametrize(("cloud", "region"), [("aws", "us-central1"), ("gcp", "us-east-1"), ("huawei", "singapore")])
def test_a_region_of_another_cloud_is_a_clear_error(cloud, region):
    article = "an" if cloud == "aws" else "a"
    with pytest.raises(InputError, match=rf"--region: is not {article} {cloud} region name \(got '{region}'\)"):
        plan_workload(load_workload(WORKLOADS / "embeddings-bert.yaml"), clouds=[cloud], region=region)


@pytest.mark.parametrize("region", ["us-east-1\n", "us-east-1\nDEVICE=gpu"])
def test_a_region_with_a_trailing_line_is_refused_whole(region):
    with pytest.raises(InputError, match=r"--region: is not an aws region name"):
        plan_workload(load_workload(WORKLOADS / "chat-70b.yaml"), clouds=["aws"], region=region)


def test_a_plan_carries_the_slo_it_holds_with_an_llms_end_to_end_bound():
    # chat-8b-public: ttft 1000 ms, tpot 60 ms, answers of 800 tokens at p95: 1000 + 60 x 799 ms end to end.
    report = plan_workload(load_workload(WORKLOADS / "chat-8b-public.yaml"), clouds=["aws"])
    plan = report.outcome("aws").chosen
    assert plan is not None and plan.slo is not None
    assert (plan.slo.ttft_p95_ms, plan.slo.tpot_p95_ms) == (1000, 60)
    assert plan.slo.latency_p95_ms == 1000 + 60 * 799
    assert plan.performance.latency_p95_ms <= plan.slo.latency_p95_ms

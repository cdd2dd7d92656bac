"""Replicas across servers: a model larger than one server is planned on several, tensor parallel within each and
pipeline parallel across them (vLLM on Ray), with the servers' network in the speed model and the plan."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from inferstack.plan import MAX_NODES_PER_REPLICA, DeploymentPlan
from inferstack.sizing import planner
from inferstack.sizing.catalog import ASSUMED_LATENCY_US, load_catalog, node_links, offers
from inferstack.sizing.demand import Demand, demand_of
from inferstack.sizing.evaluate import Candidate, llm_replica
from inferstack.sizing.models import resolve
from inferstack.sizing.nodes import multi_node_problem, node_counts
from inferstack.spec import Engine, Precision, WorkloadSpec, parse_workload


def workload(model: str = "llama-3.1-405b", precision: str = "bf16", gpus: list[str] | None = None,
             engine: str = "auto", clouds: list[str] | None = None) -> WorkloadSpec:
    return parse_workload({
        "name": "big", "model": model, "precision": precision, "engine": engine, "stage": "internal",
        "traffic": {"requests_per_s": 1, "prompt_tokens": {"mean": 1000, "p95": 2000},
                    "output_tokens": {"mean": 200, "p95": 400}},
        "placement": {"gpus_allow": gpus or ["H100"], **({"clouds": clouds} if clouds else {})}})


def demand(spec: WorkloadSpec) -> Demand:
    return demand_of(spec, resolve(spec.model))


def p5() -> Candidate:
    offer = next(o for o in offers() if o.name == "p5.48xlarge")
    return Candidate(offer, Engine.VLLM, Precision.BF16)


def test_405b_in_bf16_on_h100_is_planned_as_two_server_replicas_on_aws_and_gcp():
    report = planner.plan_workload(workload(), clouds=["aws", "gcp"])
    for cloud in ("aws", "gcp"):
        plan = report.outcome(cloud).chosen
        assert plan is not None, report.outcome(cloud).blocked_by
        assert plan.replica_nodes is not None and plan.replica_nodes.nodes == 2
        assert plan.serving.pipeline_parallel == 2 and plan.tensor_parallel == 8
        assert plan.instance_count == 2 * plan.replicas
        assert plan.price.hourly_per_instance is not None and plan.price.monthly is not None
        assert plan.price.monthly.amount == pytest.approx(plan.price.hourly_per_instance.amount * 730
                                                          * plan.instance_count)
        assert plan.memory.weights_gib == pytest.approx(756.0 / 16, rel=0.01)  # half the layers on each server
        assert any("spans 2" in line and "pipeline parallel 2" in line and "Gbit/s" in line
                   for line in plan.rationale)


def test_a_model_that_fits_one_server_keeps_one_server_per_replica():
    plan = planner.plan_workload(workload(model="llama-3.3-70b"), clouds=["aws"]).outcome("aws").chosen
    assert plan is not None and plan.replica_nodes is None and plan.serving.pipeline_parallel == 1
    assert plan.instance_count == plan.replicas


def test_the_fewest_servers_that_hold_the_weights_and_one_more_are_sized():
    d = demand(workload())
    assert node_counts(d, p5()) == [2, 3]
    one = llm_replica(d, p5())
    two = llm_replica(d, p5()._replace(nodes=2))
    assert one.kv_cache_gib < 0 < two.kv_cache_gib
    # 126 layers: 63 a stage, each GPU holds a sixteenth of the weights
    assert two.weights_gib_per_device == pytest.approx(one.weights_gib_per_device / 2)
    assert two.kv_bytes_per_token_per_device == pytest.approx(one.kv_bytes_per_token_per_device / 2)
    assert two.kv_bytes_per_token == one.kv_bytes_per_token  # summed over the replica


def test_an_uneven_split_is_sized_by_its_largest_stage():
    d = demand(workload())
    three = llm_replica(d, p5()._replace(nodes=3))  # 126 layers: 42 a stage
    four = llm_replica(d, p5()._replace(nodes=4))  # vLLM: 31 + 32 + 32 + 31, the remainder before the last stage
    assert three.stage_layers_share == pytest.approx(42 / 126)
    assert four.stage_layers_share == pytest.approx(32 / 126)
    arch = four.arch  # the largest stage by weights: 32 layers and no embedding or head (a middle stage)
    layer = arch.attention_params_per_layer + arch.norm_params_per_layer + arch.dense_mlp_params
    assert four.stage_share == pytest.approx(32 * layer / arch.params)
    # DeepSeek-V3, three stages of 20 + 21 + 20 layers, its first 3 dense: the middle stage holds the most weights,
    # more than a third of them, though the first holds the embedding
    ds = resolve("deepseek-v3").arch
    dense = ds.attention_params_per_layer + ds.norm_params_per_layer + ds.dense_mlp_params
    moe = (ds.params - ds.embedding_params - ds.hidden_size - ds.dense_layers * dense) / ds.moe_layers
    assert ds.largest_stage_share(3) == pytest.approx(21 * moe / ds.params)
    assert ds.largest_stage_share(3) > 21 / 61 > 1 / 3


def test_a_token_passes_every_stage_and_each_hand_over():
    d = demand(workload())
    two = llm_replica(d, p5()._replace(nodes=2))
    link = two.node_link
    assert link is not None
    # one sequence: both stages in turn (no faster than a replica of one server would be), a hand-over of hidden
    # states and residual (bf16) from each of the 8 ranks, and the sampled token back to the head
    hand_over = link.latency_us / 1e6 + 1 * 2 * 16384 * 2 * 8 * 8 / (link.gbps * 1e9)
    assert two.hand_over_s(1) == pytest.approx(hand_over)
    back = link.latency_us / 1e6

    def stage(batch: int) -> float:
        return two._stage_seconds(batch * two.arch.decode_flops(1200) * two.stage_share,
                                  two.weights_read_bytes(batch) * two.stage_share,
                                  batch * two.kv_bytes_per_sequence_per_device(1200), batch)

    assert two.engine_decode_step_s(1, 1200) == pytest.approx(2 * stage(1) + hand_over + back)
    # 64 sequences: one micro-batch of 32 per stage in flight; a token waits for its own micro-batch's steps only
    assert two.engine_decode_step_s(64, 1200) == pytest.approx(2 * stage(32) + two.hand_over_s(32) + back)
    assert two.engine_decode_step_s(63, 1200) == pytest.approx(two.engine_decode_step_s(64, 1200))


def test_a_slower_network_makes_every_token_slower():
    d = demand(workload())
    two = llm_replica(d, p5()._replace(nodes=2))
    link = two.node_link
    assert link is not None
    slow_offer = p5().offer._replace(link=link._replace(gbps=10.0, latency_us=1000.0))
    slow = llm_replica(d, p5()._replace(nodes=2, offer=slow_offer))
    assert slow.engine_decode_step_s(32, 1200) - two.engine_decode_step_s(32, 1200) == pytest.approx(
        slow.network_s(16) - two.network_s(16))
    assert slow.network_s(16) == pytest.approx(2 * 1e-3 + 16 * 2 * 16384 * 2 * 8 * 8 / 10e9)
    assert slow.engine_prefill_s(1, 2000) > two.engine_prefill_s(1, 2000) + 0.9e-3


def test_only_vllm_on_a_type_with_network_facts_spans_servers():
    d = demand(workload())
    assert multi_node_problem(d, p5()) is None
    assert "llamacpp" in str(multi_node_problem(d, p5()._replace(engine=Engine.LLAMACPP)))
    unknown = p5()._replace(offer=p5().offer._replace(link=None))
    assert "node_links.csv" in str(multi_node_problem(d, unknown))
    assert node_counts(d, unknown) == []


def test_a_type_without_network_facts_stays_blocked_by_memory():
    catalog = load_catalog()
    stripped = tuple(o._replace(link=None) for o in catalog.offers)
    report = planner.plan_workload(workload(clouds=["aws"]), catalog=catalog._replace(offers=stripped))
    outcome = report.outcome("aws")
    assert outcome.chosen is None
    assert any(line.startswith("does not fit in memory") for line in outcome.blocked_by)


def test_no_replica_spans_more_than_the_bound():
    # Llama-3.1-405B in fp32 (1.5 TiB) on 8x A100-40GB servers: more than four of them
    d = demand(workload(precision="fp32", gpus=["A100-SXM4-40GB"]))
    offer = next(o for o in offers() if o.name == "p4d.24xlarge")
    if offer.link is None:
        pytest.skip("no network facts for p4d.24xlarge")
    candidate = Candidate(offer, Engine.VLLM, Precision.FP32)
    assert llm_replica(d, candidate._replace(nodes=MAX_NODES_PER_REPLICA)).kv_cache_gib < 0
    assert node_counts(d, candidate) == []


def test_every_network_row_names_its_source_and_a_known_instance_type():
    types = {(o.cloud, o.name) for o in offers()}
    assert node_links(), "node_links.csv has no usable row"
    for key, link in node_links().items():
        assert key in types, key
        assert link.source.strip() and link.gbps > 0 and link.latency_us >= 0 and link.placement.strip()


def test_a_plan_whose_instances_disagree_with_its_replicas_is_refused():
    plan = planner.plan_workload(workload(), clouds=["aws"]).outcome("aws").chosen
    assert plan is not None
    data = plan.model_dump(mode="json")
    DeploymentPlan.model_validate(data)
    for change in ({"instance_count": plan.replicas},
                   {"serving": {**data["serving"], "pipeline_parallel": 1}},
                   {"replica_nodes": None}):
        with pytest.raises(ValidationError, match="replica"):
            DeploymentPlan.model_validate({**data, **change})


def test_deepseek_v3_in_fp8_is_planned_across_servers_on_alibaba():
    spec = parse_workload({
        "name": "ds", "model": "deepseek-v3", "precision": "fp8", "stage": "internal",
        "traffic": {"requests_per_s": 1, "prompt_tokens": 1000, "output_tokens": 200},
        "placement": {"clouds": ["alibaba"]}})
    plan = planner.plan_workload(spec).outcome("alibaba").chosen
    assert plan is not None and plan.replica_nodes is not None
    assert plan.replica_nodes.nodes >= 2 and plan.instance_count == plan.replicas * plan.replica_nodes.nodes
    assert plan.replica_nodes.transport in ("erdma", "tcp")


def test_a_type_without_a_published_latency_takes_the_stated_bound():
    link = node_links()[("gcp", "a3-highgpu-8g")]
    assert link.latency_assumed and link.latency_us == ASSUMED_LATENCY_US and "164.3" in link.source
    published = node_links()[("aws", "p5.48xlarge")]
    assert not published.latency_assumed and published.latency_us == 20
    plan = planner.plan_workload(workload(clouds=["gcp"])).outcome("gcp").chosen
    assert plan is not None and any("no latency is published for this type" in line for line in plan.rationale)


def test_a_pull_request_diff_shows_the_servers_per_replica():
    from inferstack.diff import diff_reports, render_markdown

    base = planner.plan_workload(workload(gpus=["H200"], clouds=["aws"]))
    head = planner.plan_workload(workload(clouds=["aws"]))
    markdown = render_markdown(diff_reports(base, head))
    assert "| servers per replica | 1 | 2 | +1 |" in markdown
    assert "**Rollout: server instance type, offer, accelerator, serving," in markdown  # pipeline_parallel


def test_a_workload_one_server_serves_keeps_its_single_server_plan():
    """Replicas across servers are planned, not provisioned: they are sized only where no replica of one server
    serves the workload on the cloud (two gn7i servers per replica would be cheaper than one gn8is-8x here, and
    could not be deployed)."""
    spec = parse_workload({
        "name": "m", "model": "llama-3.3-70b", "precision": "fp8", "stage": "internal",
        "traffic": {"requests_per_s": 1, "prompt_tokens": 1000, "output_tokens": 200},
        "placement": {"clouds": ["alibaba"]}})
    outcome = planner.plan_workload(spec, alternatives=None).outcome("alibaba")
    assert outcome.chosen is not None and outcome.chosen.instance_type == "ecs.gn8is-8x.32xlarge"
    assert all(p.replica_nodes is None for p in [outcome.chosen, *outcome.alternatives])


def production(**extra: object) -> WorkloadSpec:
    return parse_workload({
        "name": "big", "model": "llama-3.1-405b", "precision": "bf16", "stage": "production",
        "traffic": {"requests_per_s": 1, "prompt_tokens": 1000, "output_tokens": 200},
        "scaling": {"max_replicas": 6}, "placement": {"gpus_allow": ["H100"], "clouds": ["aws"]}, **extra})


def test_a_production_fleet_of_replicas_across_servers_counts_its_servers():
    plan = planner.plan_workload(production(placement={"gpus_allow": ["H100"], "clouds": ["aws"], "spot": True})
                                 ).outcome("aws").chosen
    assert plan is not None and plan.replica_nodes is not None and plan.fleet is not None
    nodes = plan.replica_nodes.nodes
    rollout = plan.rolling_update
    assert rollout.servers == plan.fleet.min_replicas * nodes == plan.instance_count
    assert rollout.surge % nodes == 0
    floor = plan.spot_above_floor
    assert floor is not None
    assert floor.on_demand_base == plan.fleet.min_replicas * nodes
    assert floor.spot_above == (plan.fleet.max_replicas - plan.fleet.min_replicas) * nodes


def test_a_warm_pool_of_replicas_across_servers_keeps_every_server_of_the_burst():
    plan = planner.plan_workload(production(startup={"warm_pool": True})).outcome("aws").chosen
    assert plan is not None and plan.replica_nodes is not None and plan.fleet is not None
    if plan.startup.warm_pool is None:
        pytest.skip("no warm pool kept for this plan: " + "; ".join(plan.startup.notes))
    assert plan.startup.warm_pool.servers == (plan.fleet.max_replicas - plan.fleet.min_replicas) * 2


def test_a_canary_beside_replicas_across_servers_and_its_simulation_hold():
    from inferstack.plan import PlanReport
    from inferstack.sizing.simulate import simulate_plan

    spec = production(canary={"precision": "fp8", "weight": 10})
    report = planner.plan_workload(spec)
    PlanReport.model_validate_json(report.model_dump_json())  # the main group's servers are its replicas' servers
    plan = report.outcome("aws").chosen
    assert plan is not None and plan.replica_nodes is not None
    simulated = simulate_plan(spec, plan, requests=400)
    assert simulated


def test_where_no_type_can_be_split_the_plan_says_why():
    spec = parse_workload({
        "name": "ds", "model": "deepseek-v3", "precision": "fp8", "stage": "internal",
        "traffic": {"requests_per_s": 1, "prompt_tokens": 1000, "output_tokens": 200},
        "placement": {"clouds": ["huawei"]}})
    outcome = planner.plan_workload(spec).outcome("huawei")
    assert outcome.chosen is None
    assert any(line.startswith("no replica across servers of A100 offers") and "keep servers apart" in line
               for line in outcome.blocked_by), outcome.blocked_by

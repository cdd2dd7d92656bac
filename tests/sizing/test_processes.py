"""Several model processes per server: the planner runs one per NUMA node of a multi-socket CPU server, or one per
GPU (group) of a multi-GPU server, where that needs fewer servers at the SLO, and only where N copies fit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inferstack.errors import InputError
from inferstack.plan import MAX_PROCESSES_PER_SERVER, Serving
from inferstack.sizing import planner
from inferstack.sizing.catalog import Offer, host_cpu, load_catalog, offers
from inferstack.sizing.demand import STAGES, Demand, demand_of
from inferstack.sizing.estimate import estimate
from inferstack.sizing.evaluate import SERIAL_UTILIZATION_CEILING, Sizing, size_candidate
from inferstack.sizing.hardware import CpuSpec, gpu_spec
from inferstack.sizing.models import lookup, resolve
from inferstack.sizing.processes import process_counts, size_processes
from inferstack.sizing.simulate import simulate_plan
from inferstack.spec import Engine, Precision, WorkloadSpec, parse_workload

# AWS c7i.48xlarge: 192 vCPU, 384 GiB, two Xeon 8488C sockets of 96 vCPU (cpu_families.csv). The catalog has no
# instance this large; the hourly price below is a test value, not a quoted price.
TWO_SOCKET_PRICE_PER_HOUR = 8.0


def two_socket_server(memory_gib: float = 384.0) -> Offer:
    base = next(o for o in offers() if o.cloud == "aws" and o.family == "c7i" and not o.has_gpu)
    return base._replace(name="c7i.48xlarge", machine_type="c7i.48xlarge", vcpus=192, memory_gib=memory_gib,
                   cpu=host_cpu("aws", "c7i", 192))


def cpu_workload(model: str, precision: str, requests_per_s: float, ttft_ms: float, tpot_ms: float) -> WorkloadSpec:
    return parse_workload({
        "name": "procs", "model": model, "precision": precision, "stage": "internal",
        "traffic": {"requests_per_s": requests_per_s, "prompt_tokens": {"mean": 400, "p95": 800},
                    "output_tokens": {"mean": 150, "p95": 300}},
        "slo": {"ttft_p95_ms": ttft_ms, "tpot_p95_ms": tpot_ms},
        "placement": {"clouds": ["aws"], "device": "cpu"}})


def demand(spec: WorkloadSpec) -> Demand:
    return demand_of(spec, resolve(spec.model))


def plan_on(spec: WorkloadSpec, offer: Offer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"prices": [
        {"cloud": "aws", "region": "us-east-1", "instance_type": offer.name, "currency": "USD",
         "price_per_hour": TWO_SOCKET_PRICE_PER_HOUR}]}))
    catalog = load_catalog(prices)._replace(offers=(offer,))
    return planner.plan_workload(spec, clouds=["aws"], catalog=catalog).outcome("aws").chosen


def test_a_two_socket_server_is_credited_one_nodes_bandwidth_per_process():
    cpu = two_socket_server().cpu
    assert cpu is not None and cpu.numa_nodes == 2 and cpu.memory_bandwidth_gbps == pytest.approx(614.4)
    one, each_of_two = cpu.for_one_of(1), cpu.for_one_of(2)
    assert one.memory_bandwidth_gbps == pytest.approx(307.2) and one.cores == 96  # one process spans both sockets
    assert each_of_two.memory_bandwidth_gbps == pytest.approx(307.2) and each_of_two.cores == 48
    assert process_counts(demand(cpu_workload("mistral-7b", "int4", 3.0, 30000, 400)),
                          planner.candidate_for(demand(cpu_workload("mistral-7b", "int4", 3.0, 30000, 400)),
                                             two_socket_server())) == [1, 2]


def one_and_two_processes(spec: WorkloadSpec, offer: Offer) -> tuple[Sizing, Sizing]:
    """The offer sized with one model process per server, and with two."""
    wanted = demand(spec)
    candidate = planner.candidate_for(wanted, offer)
    assert not isinstance(candidate, str)
    return size_candidate(wanted, candidate), size_candidate(wanted, candidate._replace(processes=2))


def test_a_cpu_plan_keeps_one_batching_process_where_serial_processes_need_more_servers(tmp_path, monkeypatch):
    # Several processes run llama-cpp-python natively, one request at a time each; one process runs llama-server,
    # which batches 16: at a loose TPOT target the batch carries the load on half the servers.
    spec = cpu_workload("mistral-7b", "int4", 3.0, 30000, 400)
    offer = two_socket_server()
    one, two = one_and_two_processes(spec, offer)
    assert one.feasible and two.feasible and one.slots == 16 and two.slots == 1
    assert one.replicas < two.replicas  # 6 servers against 12

    plan = plan_on(spec, offer, tmp_path, monkeypatch)
    assert plan is not None and plan.serving.processes == 1 and plan.instance_count == one.replicas


def test_a_cpu_plan_runs_one_serial_process_per_numa_node_where_that_needs_fewer_servers(tmp_path, monkeypatch):
    # At 60 ms TPOT one batching process carries little (other prompts' prefills stall its answers) and is best
    # held to one slot too; two serial processes per server, one per socket, each with its socket's bandwidth,
    # need fewer servers than one process across both.
    spec = cpu_workload("mistral-7b", "int4", 3.0, 30000, 60)
    offer = two_socket_server()
    one, two = one_and_two_processes(spec, offer)
    assert one.feasible and two.feasible and one.slots == two.slots == 1 and two.replicas < one.replicas
    assert two.tpot_p95_ms is not None and two.tpot_p95_ms <= 60

    plan = plan_on(spec, offer, tmp_path, monkeypatch)
    assert plan is not None
    assert plan.serving.processes == 2 and plan.memory.processes == 2 and plan.instance_count == two.replicas
    assert plan.serving.max_num_seqs == 1  # what llama-cpp-python's server runs at once
    assert plan.serving.threads == 48  # each process on its own socket's cores
    memory = plan.memory
    per_process = memory.weights_gib + memory.overhead_gib + memory.kv_cache_needed_gib
    assert memory.total_gib == pytest.approx(2 * per_process, abs=0.02)
    assert memory.total_gib <= memory.usable_gib == pytest.approx(384 - 38.4, abs=0.02)
    assert memory.kv_cache_needed_gib <= memory.kv_cache_gib
    why = " ".join(plan.rationale)
    assert "2 model processes per server (one per NUMA node" in why
    assert f"{two.replicas} server(s), against {one.replicas} with one process" in why
    assert "2 processes each hold their own weights and cache: 2 x" in why
    assert "limit 70%: one request at a time" in why
    assert plan.price.monthly.amount == pytest.approx(TWO_SOCKET_PRICE_PER_HOUR * 730 * two.replicas)
    # The whole fleet carries the load: its processes, not its servers, are the replicas of the queueing model,
    # each loaded to at most SERIAL_UTILIZATION_CEILING.
    assert plan.performance.capacity_requests_per_s >= plan.performance.load_requests_per_s == pytest.approx(3.0)
    assert plan.performance.utilization <= SERIAL_UTILIZATION_CEILING
    assert plan.fleet is not None and plan.fleet.target_requests_per_s * plan.instance_count >= 3.0


def test_a_batching_server_that_misses_the_tpot_target_among_prefills_runs_one_slot_where_alone_it_meets_it():
    # One process of 96 cores: among other prompts' prefills one answer's TPOT p95 is 42 ms, over 40; served one
    # at a time (llama-server -np 1) it decodes alone, within 40 ms, and the plan needs more servers instead.
    spec = cpu_workload("mistral-7b", "int4", 3.0, 30000, 40)
    wanted = demand(spec)
    candidate = planner.candidate_for(wanted, two_socket_server())
    assert not isinstance(candidate, str)
    one = size_candidate(wanted, candidate)
    assert one.feasible and one.slots == 1 and one.load_model is not None and one.load_model.serial
    assert one.tpot_p95_ms is not None and one.tpot_p95_ms <= 40


def test_two_processes_are_not_planned_where_two_copies_of_the_weights_do_not_fit(tmp_path, monkeypatch):
    # Llama 3.1 405B at Q4_K_M: ~229 GiB of weights fit once in the server's 345.6 usable GiB, not twice.
    spec = cpu_workload("llama-3.1-405b", "q4_k_m", 0.02, 3_600_000, 60_000)  # two servers with one process
    offer = two_socket_server()
    wanted = demand(spec)
    candidate = planner.candidate_for(wanted, offer)
    assert not isinstance(candidate, str)
    two = size_candidate(wanted, candidate._replace(processes=2))
    assert two.blocked is not None and two.blocked.kind == "memory"
    assert "172.8 GiB usable per process (2 processes per server, each with its own weights)" in str(two.blocked)

    plan = plan_on(spec, offer, tmp_path, monkeypatch)
    assert plan is not None and plan.serving.processes == 1 and plan.memory.processes == 1
    assert plan.memory.total_gib <= plan.memory.usable_gib < 2 * plan.memory.weights_gib
    assert "2 processes per server do not fit" in " ".join(plan.rationale)


def test_a_small_model_on_a_multi_gpu_server_may_run_one_process_per_gpu_pair():
    spec = parse_workload(yaml.safe_load((Path(__file__).parents[2] / "examples/workloads/chat-8b-public.yaml")
                                         .read_text()))
    wanted = demand(spec)
    offer = next(o for o in offers() if o.name == "ecs.gn7i-4x.16xlarge")  # 4x A10
    candidate = planner.candidate_for(wanted, offer)
    assert not isinstance(candidate, str)
    assert process_counts(wanted, candidate) == [1, 2, 4]
    chosen = size_processes(wanted, candidate, lambda c: size_candidate(wanted, c))
    single = size_candidate(wanted, candidate)
    assert chosen.processes > 1 and chosen.replicas < single.replicas
    assert chosen.capacity_rps >= chosen.load_rps


def test_plan_simulate_runs_one_process_of_a_multi_process_plan_at_its_share(monkeypatch):
    # `plan --simulate` simulates one replica of the queueing model: one process on its own GPUs, at the peak load
    # over every serving process (before, the whole server's GPUs at the load over its servers: TTFT -100 %).
    spec = parse_workload(yaml.safe_load((Path(__file__).parents[2] / "examples/workloads/chat-8b-public.yaml")
                                         .read_text()))
    offer = next(o for o in offers() if o.name == "ecs.gn7i-4x.16xlarge")  # 4x A10
    plan = planner.plan_workload(spec, clouds=["alibaba"], region="cn-hangzhou",  # where the price list sells it
                                 catalog=load_catalog()._replace(offers=(offer,))).outcome("alibaba").chosen
    assert plan is not None and plan.serving.processes == 2 and plan.tensor_parallel == 2
    simulated = simulate_plan(spec, plan)
    processes = (plan.replicas - STAGES[plan.stage].spare_replicas) * plan.serving.processes
    assert simulated["requests_per_s_per_replica"] == pytest.approx(plan.performance.load_requests_per_s / processes,
                                                                    abs=1e-4)
    for metric in ("ttft_p95_ms", "tpot_p95_ms", "latency_p95_ms"):
        assert simulated[metric] == pytest.approx(simulated[f"predicted_{metric}"], rel=0.15), metric


def test_a_process_count_beyond_the_bound_is_refused_by_the_plan_model():
    with pytest.raises(ValueError, match="less than or equal to 8"):
        Serving(runtime="llamacpp", engine="llamacpp", health_path="/health", dtype="q4_k_m",
                processes=MAX_PROCESSES_PER_SERVER + 1)


def test_estimate_with_two_processes_splits_cores_ram_and_gpus_and_reports_the_server():
    model = lookup("llama-3.1-8b")
    cpu = CpuSpec(cores=96, memory_bandwidth_gbps=614.4, isa="amx", ghz=3.2, description="test", numa_nodes=2)
    common = {"precision": Precision.Q4_K_M, "engine": Engine.LLAMACPP, "cpu": cpu, "ram_gib": 384.0,
              "concurrency": 8, "input_tokens": 64, "output_tokens": 512}
    one, two = estimate(model, **common), estimate(model, **common, processes=2)  # type: ignore[arg-type]
    assert two.processes == 2 and one.processes == 1
    # each process holds its own weights, in its half of the usable RAM
    assert two.weights_gib == pytest.approx(one.weights_gib)
    assert two.kv_cache_available_gib == pytest.approx((384 - 38.4) / 2 - two.weights_gib - two.overhead_gib)
    assert "2 processes, each with its own weights and KV cache: 2 x" in " ".join(two.notes)
    assert "llama-cpp-python, which serves one request at a time" in " ".join(two.notes)  # at --concurrency 8
    # one process is credited one socket's bandwidth: two, one per socket, decode about twice the server's tokens
    assert two.output_tokens_per_s > 1.5 * one.output_tokens_per_s

    gpus = estimate(model, precision=Precision.BF16, engine=Engine.VLLM, gpu=gpu_spec("L4"), gpus=4, processes=2)
    assert gpus.processes == 2 and "on its own 2 GPU(s)" in " ".join(gpus.notes)
    with pytest.raises(InputError, match="--processes: must divide the 4 GPUs"):
        estimate(model, precision=Precision.BF16, engine=Engine.VLLM, gpu=gpu_spec("L4"), gpus=4, processes=3)
    with pytest.raises(InputError, match="--processes: must be 1 to 8"):
        estimate(model, **common, processes=9)  # type: ignore[arg-type]


def test_a_looser_tpot_target_never_costs_more():
    # A batch of few slots is held to where 2 % of arrivals wait (M/M/2: about 10 % of saturation), one serial slot
    # to 70 %: the planner sizes both where the slot would need fewer servers, so loosening TPOT from 120 ms (one
    # slot) to 150 ms (batches of 5) cannot raise the price (it did: 85,480 to 116,557 USD/month).
    costs = []
    for tpot_ms in (60, 100, 120, 150, 200, 400):
        plan = planner.plan_workload(cpu_workload("mistral-7b", "int4", 3.0, 30000, tpot_ms),
                                     clouds=["aws"]).outcome("aws").chosen
        assert plan is not None and plan.price.monthly_ranking is not None
        costs.append(plan.price.monthly_ranking.amount)
    assert costs == sorted(costs, reverse=True), costs


def test_concurrent_users_block_a_serial_process_with_the_reason():
    spec = parse_workload({
        "name": "users", "model": "mistral-7b", "precision": "int4", "stage": "internal",
        "traffic": {"concurrent_users": 4, "prompt_tokens": {"mean": 400, "p95": 800},
                    "output_tokens": {"mean": 150, "p95": 300}},
        "slo": {"ttft_p95_ms": 30000, "tpot_p95_ms": 400}, "placement": {"clouds": ["aws"], "device": "cpu"}})
    wanted = demand(spec)
    candidate = planner.candidate_for(wanted, two_socket_server())
    assert not isinstance(candidate, str)
    two = size_candidate(wanted, candidate._replace(processes=2))
    assert two.blocked is not None and "serves one request at a time, and each of the 4 concurrent users" in str(
        two.blocked)
    assert size_candidate(wanted, candidate).feasible  # one batching process takes them

"""The planner's queueing view of one LLM replica: the slot hold, the TPOT tail and the slot-wait ceiling."""

import math
import sys
from pathlib import Path

import pytest

from inferstack.sizing.evaluate import (
    SERIAL_UTILIZATION_CEILING,
    SLOT_WAIT_CEILING,
    TPOT_TAIL_PER_PREFILL_SHARE,
    Z_95,
    _LlmLoadModel,
    predict_llm_replica,
    size_candidate,
    with_autoscaling,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import simulation

RAG_ON_L40S = simulation.GridPoint("llama-3.1-8b", "bf16", "L40S", 1, "rag", None)
CHAT_ON_H100 = simulation.GridPoint("llama-3.1-8b", "bf16", "H100-SXM", 1, "chat", None)


def _model(point):
    demand = simulation._demand(point)
    prediction = predict_llm_replica(demand, simulation._candidate(point), 1.0)
    return demand, prediction, _LlmLoadModel(demand, prediction.replica)


def test_a_slot_is_held_at_the_time_averaged_context_of_the_batch():
    # Long answers hold their slot longer, so the running batch reads prompt + output·(1 + CV²)/2 tokens per
    # sequence on average, more than a fixed-length answer's prompt + output/2: the hold is the TPOT model's.
    demand, prediction, model = _model(RAG_ON_L40S)
    replica = prediction.replica
    assert demand.kv_context_tokens > demand.prompt_tokens + demand.output_tokens // 2
    expected = replica.prefill_s(8, demand.prompt_tokens) + demand.output_tokens * replica.decode_step_s(
        8, demand.kv_context_tokens
    )
    assert model.cycle_s(8) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("slots", [1, 5, 8, 9, 16, 29, 52])
def test_the_slot_queue_holds_the_cycle_exactly_up_to_8_and_every_8th_and_straight_lines_between(slots):
    _, _, model = _model(RAG_ON_L40S)
    holds = model.slot_holds
    for n in reversed(range(1, slots + 1)):  # whatever is asked first
        below = n - n % 8
        if n <= 8 or n == below:
            assert holds[n] == model.cycle_s(n)
        else:
            share = (n - below) / 8
            assert holds[n] == pytest.approx(model.cycle_s(below) * (1 - share) + model.cycle_s(below + 8) * share,
                                             rel=1e-12)
            assert holds[n] != pytest.approx(model.cycle_s(n), rel=1e-9)  # interpolated, not the cycle itself


def test_a_slot_queue_at_light_load_works_out_only_the_holds_it_walks():
    demand, prediction, model = _model(RAG_ON_L40S)
    fresh, slots = type(model)(demand, prediction.replica), 200
    queue = fresh.slot_queue(0.05 * slots / fresh.cycle_s(slots), slots)
    assert queue.p_wait == 0.0  # the chain stopped past its mode
    assert slots in fresh.slot_holds and len(fresh.slot_holds) < slots / 4  # the drain rate's, and the walk's


def test_the_tpot_tail_widens_with_the_spread_of_the_prefill_stalls_an_answer_sits_through():
    demand, prediction, model = _model(RAG_ON_L40S)
    rate = 0.6 * prediction.saturation_rps
    concurrency = model.concurrency_at(rate, prediction.slots)
    latency = model.token_latency(concurrency, rate)
    decoding_s = (demand.output_tokens - 1) * latency.tpot_s
    stalls = rate * decoding_s  # prefills of 3,000-token prompts during one answer: about ten
    assert 5 < stalls < 20
    spread = math.sqrt(stalls * model.prefill_mean_s**2 * (1 + model.prefill_cv2)) / decoding_s
    expected = latency.tpot_s * (1 + TPOT_TAIL_PER_PREFILL_SHARE * latency.prefill_share + Z_95 * spread)
    assert model.tpot_p95_s(concurrency, rate) == pytest.approx(expected, rel=1e-9)
    assert Z_95 * spread > 0.1  # for long prompts the stalls' spread is a tenth of the TPOT or more


@pytest.mark.parametrize("point", [RAG_ON_L40S, CHAT_ON_H100], ids=lambda p: p.shape)
def test_the_ceiling_is_where_the_slot_queue_makes_2_percent_of_arrivals_wait_or_the_utilization_cap(point):
    demand, prediction, model = _model(point)
    ceiling, slots = prediction.ceiling_rps, prediction.slots
    assert ceiling <= demand.stage.max_utilization * prediction.saturation_rps * (1 + 1e-9)
    assert model.slot_queue(ceiling, slots).p_wait <= SLOT_WAIT_CEILING
    at_cap = math.isclose(ceiling, demand.stage.max_utilization * prediction.saturation_rps, rel_tol=1e-6)
    assert at_cap or model.slot_queue(ceiling * 1.001, slots).p_wait > SLOT_WAIT_CEILING


def test_a_replica_with_few_slots_is_capped_by_its_slot_queue_below_the_utilization_cap():
    # 26 slots of 3,000-token prompts: 2 % of arrivals would wait for a slot at about 68 % of saturation.
    _, prediction, _ = _model(RAG_ON_L40S)
    assert prediction.ceiling_rps < 0.75 * prediction.saturation_rps
    _, roomy, _ = _model(CHAT_ON_H100)  # 256 slots: the 80 % cap binds first
    assert roomy.ceiling_rps == pytest.approx(0.8 * roomy.saturation_rps, rel=1e-6)


def test_a_sizing_gets_its_autoscaling_figures_from_its_own_replicas_ceiling_when_asked():
    demand, prediction, _ = _model(RAG_ON_L40S)
    sizing = size_candidate(demand, simulation._candidate(RAG_ON_L40S))
    assert sizing.feasible and sizing.target_rps == 0  # worked out only for the plans a report shows
    scaled = with_autoscaling(sizing)
    assert scaled.utilization_limit == pytest.approx(prediction.ceiling_rps / prediction.saturation_rps, rel=1e-12)
    per_replica = scaled.target_rps / scaled.processes
    assert sizing.replica_load_rps <= per_replica <= prediction.ceiling_rps * (1 + 1e-12)
    assert with_autoscaling(scaled) == scaled


def test_a_serial_replica_decodes_each_answer_alone_and_is_loaded_to_its_own_ceiling():
    # One of two llama-cpp-python processes on a CPU server: one request at a time, so nothing stalls its answer
    # (every token is the decode step of one sequence, at any load) and the whole wait is for the slot.
    point = next(p for p in simulation.GRID if not p.gpus and p.utilization is None)
    demand, candidate = simulation._demand(point), simulation._candidate(point)
    at_saturation = predict_llm_replica(demand, candidate, 1.0)
    assert at_saturation.slots == 1
    replica, saturation = at_saturation.replica, at_saturation.saturation_rps
    alone_ms = replica.decode_step_s(1, demand.kv_context_tokens) * 1e3
    light, heavy = (predict_llm_replica(demand, candidate, share * saturation) for share in (0.2, 0.6))
    assert light.tpot_p95_ms == pytest.approx(alone_ms) and heavy.tpot_p95_ms == pytest.approx(alone_ms)
    assert heavy.ttft_p95_ms > 2 * light.ttft_p95_ms  # waiting behind whole requests
    assert at_saturation.ceiling_rps == pytest.approx(SERIAL_UTILIZATION_CEILING * saturation, rel=1e-6)


def test_a_replica_of_one_slot_is_serial_whatever_its_server():
    # vLLM at --max-num-seqs 1 prefills a waiting request only once the slot is free: no prefill stalls an answer.
    demand, candidate = simulation._demand(CHAT_ON_H100), simulation._candidate(CHAT_ON_H100)
    at_saturation = predict_llm_replica(demand, candidate, 1.0, slots=1)
    alone_ms = at_saturation.replica.decode_step_s(1, demand.kv_context_tokens) * 1e3
    loaded = predict_llm_replica(demand, candidate, 0.6 * at_saturation.saturation_rps, slots=1)
    assert loaded.tpot_p95_ms == pytest.approx(alone_ms)
    assert at_saturation.ceiling_rps == pytest.approx(SERIAL_UTILIZATION_CEILING * at_saturation.saturation_rps,
                                                      rel=1e-6)

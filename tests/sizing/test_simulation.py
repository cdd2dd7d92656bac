"""The simulator against queueing theory, and the planner's closed forms against the simulator."""

import math
import random
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from inferstack.sizing.demand import lognormal_sigma
from inferstack.sizing.hardware import gpu_spec
from inferstack.sizing.llm import LlmReplica
from inferstack.sizing.models import lookup
from inferstack.sizing.queueing import md1_mean_wait_s
from inferstack.sizing.simulate import TrafficShape, simulate_replica
from inferstack.spec import Engine, KvCacheDtype, Precision

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import simulation

REPLICA = LlmReplica(
    arch=lookup("llama-3.1-8b").arch,
    precision=Precision.BF16,
    kv_dtype=KvCacheDtype.AUTO,
    engine=Engine.VLLM,
    gpu=gpu_spec("H100-SXM"),
)
FIXED = TrafficShape(
    prompt_tokens=512, prompt_tokens_p95=512, output_tokens=64, output_tokens_p95=64, max_model_len=1024
)
CHAT = TrafficShape(
    prompt_tokens=800, prompt_tokens_p95=2000, output_tokens=300, output_tokens_p95=800, max_model_len=2816
)


@pytest.mark.parametrize(("mean", "p95"), [(300, 800), (800, 2000), (200, 400)])
def test_lognormal_fit_has_the_given_mean_and_p95(mean, p95):
    sigma = lognormal_sigma(mean, p95)
    mu = math.log(mean) - sigma**2 / 2
    rng = random.Random(3)
    draws = sorted(rng.lognormvariate(mu, sigma) for _ in range(100_000))
    assert statistics.fmean(draws) == pytest.approx(mean, rel=0.02)
    assert draws[95_000] == pytest.approx(p95, rel=0.02)


def test_one_slot_with_fixed_lengths_queues_like_md1():
    # One slot and fixed lengths: every request holds the server for the same time (its prefill, then 63 decode
    # steps alone), so the first token waits as in M/D/1 and the mean wait is Pollaczek–Khinchine's.
    service_s = REPLICA.prefill_s(1, 512) + 63 * REPLICA.decode_step_s(1, 512 + 32)
    rate = 0.6 / service_s
    result = simulate_replica(REPLICA, FIXED, arrival_rps=rate, slots=1, requests=20_000, seed=5)
    expected_ms = (md1_mean_wait_s(rate, service_s) + REPLICA.prefill_s(1, 512)) * 1e3
    assert result.ttft_mean_ms == pytest.approx(expected_ms, rel=0.05)
    assert result.mean_concurrency == pytest.approx(0.6, rel=0.05)


def test_the_simulation_is_reproducible_and_the_seed_matters():
    first = simulate_replica(REPLICA, CHAT, arrival_rps=10.0, slots=256, requests=500, seed=7)
    again = simulate_replica(REPLICA, CHAT, arrival_rps=10.0, slots=256, requests=500, seed=7)
    other = simulate_replica(REPLICA, CHAT, arrival_rps=10.0, slots=256, requests=500, seed=8)
    assert first == again
    assert first != other


def test_a_full_kv_cache_makes_requests_wait_for_blocks():
    roomy = simulate_replica(REPLICA, CHAT, arrival_rps=4.0, slots=256, requests=1500, seed=2)
    cramped = replace(REPLICA, gpu_memory_utilization=0.27)  # 14k tokens: about 10 sequences of 1400
    assert cramped.kv_capacity_tokens() < 1.5 * roomy.mean_concurrency * 1400
    tight = simulate_replica(cramped, CHAT, arrival_rps=4.0, slots=256, requests=1500, seed=2)
    assert tight.ttft_p95_ms > 3 * roomy.ttft_p95_ms


@pytest.mark.parametrize("point", simulation.GRID, ids=lambda p: p.label)
def test_the_planners_p95_latencies_agree_with_the_simulation_within_15_percent(point):
    at_ceiling = point.utilization is None
    result = simulation.run_point(
        point, requests=simulation.TEST_REQUESTS_AT_CEILING if at_ceiling else simulation.TEST_REQUESTS
    )
    errors = {metric: result.error(metric) for metric in simulation.METRICS}
    assert all(abs(error) <= simulation.TOLERANCE for error in errors.values()), errors

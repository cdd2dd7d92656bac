"""The queueing formulas against published worked examples and textbook closed forms."""

import math
import random

import pytest

from inferstack.sizing.queueing import (
    SlotQueue,
    erlang_c,
    md1_mean_wait_s,
    md1_wait_p95_s,
    mg1_mean_wait_s,
    mg1_wait_p95_s,
    mmm_mean_wait_s,
    mmm_wait_p95_s,
    p95_after_a_wait_s,
)


def _mmm_wait_probability_from_states(servers: int, offered_load: float) -> float:
    """P(wait) summed directly from M/M/m's stationary distribution (an independent route to Erlang C)."""

    def term(k: int) -> float:  # a^k / k!, in logs so that 256 servers do not overflow
        return math.exp(k * math.log(offered_load) - math.lgamma(k + 1))

    below = sum(term(k) for k in range(servers))
    at_or_above = term(servers) / (1 - offered_load / servers)
    return at_or_above / (below + at_or_above)


def test_erlang_c_matches_the_call_centre_helper_worked_example():
    # Call Centre Helper, "Erlang C Formula – Made Simple With an Easy Worked Example": 100 calls in 30 minutes,
    # 180 s handling time (A = 10 Erlangs), 11 agents: probability of waiting 68.21 %, average speed of answer
    # P_w · AHT / (N − A) = 122.8 s.
    p_wait = erlang_c(11, 10.0)
    assert p_wait == pytest.approx(0.6821, abs=5e-5)
    assert p_wait * 180 / (11 - 10) == pytest.approx(122.8, abs=0.05)


def test_erlang_c_matches_the_textbook_ten_server_example():
    # Kleinrock-style exercise: 120 customers/h, 3 min each (a = 6 Erlangs), 10 servers: "from the Erlang C
    # curve, the probability of waiting is about 0.10".
    assert erlang_c(10, 6.0) == pytest.approx(0.10, abs=0.005)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9])
def test_erlang_c_with_one_server_is_the_utilisation(rho):
    assert erlang_c(1, rho) == pytest.approx(rho, rel=1e-12)  # M/M/1: an arrival waits when the server is busy


@pytest.mark.parametrize(("servers", "offered_load"), [(2, 1.0), (2, 1.5), (8, 6.4), (64, 51.2), (256, 230.0)])
def test_erlang_c_agrees_with_the_stationary_distribution(servers, offered_load):
    assert erlang_c(servers, offered_load) == pytest.approx(
        _mmm_wait_probability_from_states(servers, offered_load), rel=1e-9
    )


def test_erlang_c_is_certain_waiting_at_or_past_saturation_and_none_without_load():
    assert erlang_c(4, 4.0) == 1.0 and erlang_c(4, 5.0) == 1.0
    assert erlang_c(4, 0.0) == 0.0


def test_mm1_p95_wait_is_the_closed_form_quantile():
    # M/M/1 at λ = 0.8/s, service 1 s: P(W > t) = ρ·exp(−(μ − λ)t), so t95 = ln(ρ/0.05)/(μ − λ) = ln 16 / 0.2.
    assert mmm_wait_p95_s(0.8, 1.0, 1) == pytest.approx(math.log(16) / 0.2, rel=1e-12)


@pytest.mark.parametrize(("servers", "arrival_rate", "service_s"), [(4, 3.0, 1.0), (16, 1.2, 10.0), (64, 5.6, 10.0)])
def test_mmm_p95_wait_leaves_five_percent_of_arrivals_waiting_longer(servers, arrival_rate, service_s):
    t95 = mmm_wait_p95_s(arrival_rate, service_s, servers)
    p_wait = _mmm_wait_probability_from_states(servers, arrival_rate * service_s)
    tail = p_wait * math.exp(-(servers / service_s - arrival_rate) * t95)
    assert t95 > 0
    assert tail == pytest.approx(0.05, rel=1e-9)


def test_mmm_p95_wait_is_zero_when_fewer_than_five_percent_wait_and_infinite_when_unstable():
    assert mmm_wait_p95_s(1.0, 1.0, 8) == 0.0  # a = 1 Erlang on 8 servers: P(wait) ≈ 1e-5
    assert mmm_wait_p95_s(9.0, 1.0, 8) == math.inf


@pytest.mark.parametrize(
    ("arrival_rate", "service_s", "expected_s"), [(0.5, 1.0, 0.5), (0.9, 1.0, 4.5), (2.0, 0.25, 0.125)]
)
def test_md1_mean_wait_is_pollaczek_khinchine(arrival_rate, service_s, expected_s):
    # P–K: W = λ·E[S²] / 2(1 − ρ); a deterministic service has E[S²] = s², half the M/M/1 wait ρs/(1 − ρ).
    assert md1_mean_wait_s(arrival_rate, service_s) == pytest.approx(expected_s, rel=1e-12)
    rho = arrival_rate * service_s
    assert md1_mean_wait_s(arrival_rate, service_s) == pytest.approx(rho * service_s / (1 - rho) / 2, rel=1e-12)


def test_md1_waits_are_infinite_when_unstable():
    assert md1_mean_wait_s(1.0, 1.0) == math.inf
    assert md1_wait_p95_s(2.0, 1.0) == math.inf


@pytest.mark.parametrize(
    ("servers", "arrival_rate", "service_s"), [(1, 0.8, 1.0), (11, 10 / 180, 180.0), (57, 2.5, 19.0)]
)
def test_the_slot_queue_with_a_constant_service_time_is_erlang_c(servers, arrival_rate, service_s):
    queue = SlotQueue.solve(arrival_rate, lambda _: service_s, servers)
    assert queue.p_wait == pytest.approx(erlang_c(servers, arrival_rate * service_s), rel=1e-9)
    assert queue.wait_p95_s() == pytest.approx(mmm_wait_p95_s(arrival_rate, service_s, servers), rel=1e-9)
    assert queue.mean_wait_s() == pytest.approx(mmm_mean_wait_s(arrival_rate, service_s, servers), rel=1e-9)


def test_the_slot_queue_waits_longer_when_service_slows_with_load():
    constant = SlotQueue.solve(2.0, lambda _: 10.0, 32)
    slowing = SlotQueue.solve(2.0, lambda n: 10.0 * (1 + n / 64), 32)
    assert slowing.p_wait > constant.p_wait and slowing.wait_p95_s() > constant.wait_p95_s()


def test_mean_mmm_wait_matches_the_call_centre_average_speed_of_answer():
    assert mmm_mean_wait_s(100 / 1800, 180.0, 11) == pytest.approx(122.8, abs=0.05)  # the worked example above


def test_mg1_with_exponential_service_is_mm1():
    # M/M/1 at ρ = 0.8: mean wait ρs/(1 − ρ) = 4 s, p95 ln(ρ/0.05)/(μ − λ) = ln 16 / 0.2.
    assert mg1_mean_wait_s(0.8, 1.0, 1.0) == pytest.approx(4.0, rel=1e-12)
    assert mg1_wait_p95_s(0.8, 1.0, 1.0) == pytest.approx(math.log(16) / 0.2, rel=1e-12)
    assert mg1_mean_wait_s(0.8, 1.0, 0.0) == pytest.approx(md1_mean_wait_s(0.8, 1.0), rel=1e-12)


def test_the_slot_queue_solves_the_birth_death_chain_worked_by_hand():
    # 3 slots, λ = 1/s, a request holds its slot 1 + n/2 s with n in service: weights p_n/p_0 = 1, 1.5, 1.5, 1.25,
    # then × λ·S(3)/3 = 5/6 per state: the tail from 3 sums to 1.25 / (1/6) = 7.5 of 11.5. Drain 3/2.5 − 1.
    queue = SlotQueue.solve(1.0, lambda n: 1 + n / 2, 3)
    assert queue.p_wait == pytest.approx(7.5 / 11.5, rel=1e-12)
    assert queue.drain_rate == pytest.approx(0.2, rel=1e-12)
    assert queue.mean_wait_s() == pytest.approx(7.5 / 11.5 / 0.2, rel=1e-12)


def test_a_peaked_slot_queue_raises_the_chains_distribution_to_the_power_one_over_z():
    # The hand-worked chain above with peakedness 2: weights 1, √1.5, √1.5·√1, then × √(5/6) per state beyond 3.
    queue = SlotQueue.solve(1.0, lambda n: 1 + n / 2, 3, peakedness=2.0)
    top = math.sqrt(1.5) * math.sqrt(5 / 6)
    at_or_above = top / (1 - math.sqrt(5 / 6))
    assert queue.p_wait == pytest.approx(at_or_above / (1 + 2 * math.sqrt(1.5) + at_or_above), rel=1e-12)
    assert queue.drain_rate == pytest.approx(0.2, rel=1e-12)  # once waiting, the queue drains as before


@pytest.mark.parametrize(("servers", "arrival_rate", "service_s"), [(26, 1.4, 13.0), (55, 2.3, 19.0)])
def test_peaked_traffic_finds_every_slot_busy_more_often_than_poisson(servers, arrival_rate, service_s):
    poisson = SlotQueue.solve(arrival_rate, lambda _: service_s, servers)
    peaked = SlotQueue.solve(arrival_rate, lambda _: service_s, servers, peakedness=1.3)
    assert poisson.p_wait == pytest.approx(erlang_c(servers, arrival_rate * service_s), rel=1e-9)
    assert 1.2 * poisson.p_wait < peaked.p_wait < 1.0


def test_p95_after_a_wait_is_unchanged_without_a_wait_and_adds_the_exponential_when_every_request_waits():
    assert p95_after_a_wait_s(0.2, 0.3, 0.0, 1.0) == 0.3
    # X nearly constant at 1 s, every request waits Exp(2/s): the p95 is 1 + ln 20 / 2.
    assert p95_after_a_wait_s(1.0, 1.0 + 1e-7, 1.0, 2.0) == pytest.approx(1 + math.log(20) / 2, rel=1e-4)


@pytest.mark.parametrize("p_wait", [0.02, 0.05, 0.2])
def test_p95_after_a_wait_matches_sampling_the_sum(p_wait):
    # X = 0.1 s + Exp(κ) with mean 0.2 s (κ = 10/s); a share p_wait of requests then waits Exp(1.5/s).
    rng = random.Random(11)
    draws = sorted(
        0.1 + rng.expovariate(10.0) + (rng.expovariate(1.5) if rng.random() < p_wait else 0.0)
        for _ in range(400_000)
    )
    p95_x = 0.1 + math.log(20) / 10
    assert p95_after_a_wait_s(0.2, p95_x, p_wait, 1.5) == pytest.approx(draws[380_000], rel=0.01)

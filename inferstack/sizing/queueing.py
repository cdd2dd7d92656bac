"""Waiting times of a replica under Poisson arrivals: Erlang C for batch slots, M/D/1 for serialised work.

A continuous-batching LLM server is an M/M/m queue whose m servers are its batch slots (max_num_seqs):
a request waits only when every slot is busy. Prefill work is serialised on the device: an M/G/1 queue
(M/D/1 when every prompt has the same length).
p95 waits use the exponential tail of the M/M/m waiting time, P(W > t) = C(m, a)·exp(−(mμ − λ)t); traffic more
bunched than Poisson is read through Hayward's peakedness (`SlotQueue`), and a wait that only a few per cent of
requests have is put on top of the rest of the latency by `p95_after_a_wait_s`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

P95_TAIL = 0.05
NEGLIGIBLE = 1e-12  # relative probability below which the slot queue stops adding states


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in an M/M/m queue (offered load a = λ/μ, in Erlangs)."""
    if offered_load <= 0:
        return 0.0
    if offered_load >= servers:
        return 1.0
    inverse_b = 1.0  # Erlang B by its stable recursion, then C from B
    for k in range(1, servers + 1):
        inverse_b = 1.0 + inverse_b * k / offered_load
    erlang_b = 1.0 / inverse_b
    rho = offered_load / servers
    return erlang_b / (1 - rho * (1 - erlang_b))


class SlotQueue(NamedTuple):
    """M/M(n)/m: Poisson arrivals to m slots whose requests finish faster or slower with the number in service.

    With n ≤ m requests in service each holds its slot for `service_s(n)` on average, so they leave at rate
    n / service_s(n); beyond m the queue drains at m / service_s(m). The birth–death chain's stationary
    distribution gives the probability of waiting; the wait is then exponential at the drain rate. With a
    constant service time this is M/M/m and the probability of waiting is Erlang C.

    Traffic more bunched than Poisson, of peakedness z = Var(N)/E(N) of what it would keep busy on endless
    slots, finds every slot busy more often. Hayward's approximation serves it as Poisson traffic of λ/z on m/z
    slots, each slot z requests wide: the distribution of the number in the system is the Poisson one raised to
    the power 1/z (p_n/p_{n−1} = step^(1/z)), flatter, with z times the variance. z = 1 is the chain itself.
    """

    p_wait: float
    drain_rate: float  # per second, once every slot is busy (≤ 0: the queue is unstable)

    @classmethod
    def solve(
        cls, arrival_rate: float, service_s: Callable[[int], float], servers: int, peakedness: float = 1.0
    ) -> SlotQueue:
        drain_rate = servers / service_s(servers) - arrival_rate
        if arrival_rate <= 0:
            return cls(0.0, drain_rate)
        if drain_rate <= 0:
            return cls(1.0, drain_rate)
        weight, below = 1.0, 0.0  # p_n / p_0, built up state by state
        exponent, negligible = 1 / peakedness, NEGLIGIBLE  # locals: the planner runs this loop ~100,000 times a plan
        for n in range(1, servers + 1):
            below += weight
            step = arrival_rate * service_s(n) / n
            if step < 1 and weight < negligible * below:
                # Past the mode the weights only shrink (service_s(n)/n does not grow): no wait worth counting.
                return cls(0.0, drain_rate)
            weight *= step**exponent
        tail_ratio = (arrival_rate * service_s(servers) / servers) ** exponent
        at_or_above = weight / (1 - tail_ratio)  # geometric tail beyond m
        return cls(at_or_above / (below + at_or_above), drain_rate)

    def mean_wait_s(self) -> float:
        return self.p_wait / self.drain_rate if self.drain_rate > 0 else math.inf

    def wait_p95_s(self) -> float:
        if self.drain_rate <= 0:
            return math.inf
        return 0.0 if self.p_wait <= P95_TAIL else math.log(self.p_wait / P95_TAIL) / self.drain_rate


def mmm_mean_wait_s(arrival_rate: float, service_s: float, servers: int) -> float:
    """Mean wait for a free slot in M/M/m, C(m, a)·s/(m − a) (inf when the queue is unstable)."""
    if arrival_rate <= 0:
        return 0.0
    offered_load = arrival_rate * service_s
    if offered_load >= servers:
        return math.inf
    return erlang_c(servers, offered_load) * service_s / (servers - offered_load)


def mmm_wait_p95_s(arrival_rate: float, service_s: float, servers: int) -> float:
    """95th-percentile wait for a free slot in M/M/m (inf when the queue is unstable)."""
    if arrival_rate <= 0:
        return 0.0
    drain_rate = servers / service_s - arrival_rate
    if drain_rate <= 0:
        return math.inf
    p_wait = erlang_c(servers, arrival_rate * service_s)
    return 0.0 if p_wait <= P95_TAIL else math.log(p_wait / P95_TAIL) / drain_rate


def mg1_mean_wait_s(arrival_rate: float, service_s: float, service_cv2: float = 0.0) -> float:
    """Mean wait in M/G/1 by Pollaczek–Khinchine, λ·E[S²]/2(1−ρ) = ρs(1 + CV²)/2(1−ρ) (inf when unstable)."""
    rho = arrival_rate * service_s
    if rho <= 0:
        return 0.0
    if rho >= 1:
        return math.inf
    return rho * service_s * (1 + service_cv2) / (2 * (1 - rho))


def md1_mean_wait_s(arrival_rate: float, service_s: float) -> float:
    """Mean wait in M/D/1: Pollaczek–Khinchine with a constant service time, ρs/2(1−ρ)."""
    return mg1_mean_wait_s(arrival_rate, service_s)


def mg1_wait_p95_s(arrival_rate: float, service_s: float, service_cv2: float = 0.0) -> float:
    """95th-percentile wait in M/G/1 from an exponential tail through P(W > 0) = ρ and the P–K mean:
    P(W > t) = ρ·exp(−ρt/W̄), exact for M/M/1 (CV² = 1)."""
    rho = arrival_rate * service_s
    if rho <= P95_TAIL:
        return 0.0
    if rho >= 1:
        return math.inf
    return mg1_mean_wait_s(arrival_rate, service_s, service_cv2) / rho * math.log(rho / P95_TAIL)


def md1_wait_p95_s(arrival_rate: float, service_s: float) -> float:
    """Approximate 95th-percentile wait in M/D/1 (batches of items): the mean wait stretched by an exponential
    tail. Not yet checked against a simulation, unlike the LLM path's `mg1_wait_p95_s`."""
    if arrival_rate * service_s <= P95_TAIL:
        return 0.0
    return md1_mean_wait_s(arrival_rate, service_s) * math.log(1 / P95_TAIL)


def p95_after_a_wait_s(mean_s: float, p95_s: float, p_wait: float, wait_rate: float) -> float:
    """95th percentile of X + W, where X has the given mean and p95 and W is a wait that occurs with probability
    `p_wait` and then lasts an exponential time at `wait_rate` per second.

    X's tail is taken exponential through its mean and p95 (X = a + Exp(κ), κ = (ln 20 − 1)/(p95 − mean)), so
    P(X + W > a + u) = (1 − p)·e^(−κu) + p·(θe^(−κu) − κe^(−θu))/(θ − κ), solved for 5 % by bisection. When a
    few per cent wait this counts them where a p95 of the wait alone (zero below 5 %) would not.
    """
    if p_wait <= 0:
        return p95_s
    if wait_rate <= 0:
        return math.inf
    spread = max(p95_s - mean_s, 1e-9)
    kappa = (math.log(1 / P95_TAIL) - 1) / spread
    theta = wait_rate if abs(wait_rate - kappa) > 1e-9 * kappa else wait_rate * (1 + 1e-6)
    shift = mean_s - 1 / kappa

    def tail(u: float) -> float:
        after_wait = (theta * math.exp(-kappa * u) - kappa * math.exp(-theta * u)) / (theta - kappa)
        return (1 - p_wait) * math.exp(-kappa * u) + p_wait * after_wait

    low, high = 0.0, spread
    while tail(high) > P95_TAIL:
        low, high = high, 2 * high
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if tail(middle) > P95_TAIL else (low, middle)
    return shift + high

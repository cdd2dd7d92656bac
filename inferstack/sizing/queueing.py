"""Waiting times of a replica under Poisson arrivals: Erlang C for batch slots, M/D/1 for serialised work.

A continuous-batching LLM server is an M/M/m queue whose m servers are its batch slots (max_num_seqs):
a request waits only when every slot is busy. Prefill work is serialised on the device: an M/D/1 queue.
p95 waits use the exponential tail of the M/M/m waiting time, P(W > t) = C(m, a)·exp(−(mμ − λ)t).
"""

from __future__ import annotations

import math

P95_TAIL = 0.05


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


def mmm_wait_p95_s(arrival_rate: float, service_s: float, servers: int) -> float:
    """95th-percentile wait for a free slot in M/M/m (inf when the queue is unstable)."""
    if arrival_rate <= 0:
        return 0.0
    drain_rate = servers / service_s - arrival_rate
    if drain_rate <= 0:
        return math.inf
    p_wait = erlang_c(servers, arrival_rate * service_s)
    return 0.0 if p_wait <= P95_TAIL else math.log(p_wait / P95_TAIL) / drain_rate


def md1_mean_wait_s(arrival_rate: float, service_s: float) -> float:
    """Mean wait in M/D/1 by Pollaczek–Khinchine, λ·E[S²]/2(1−ρ) = ρs/2(1−ρ) (inf when unstable)."""
    rho = arrival_rate * service_s
    if rho <= 0:
        return 0.0
    if rho >= 1:
        return math.inf
    return rho * service_s / (2 * (1 - rho))


def md1_wait_p95_s(arrival_rate: float, service_s: float) -> float:
    """Approximate 95th-percentile wait in M/D/1: the mean wait stretched by an exponential tail."""
    if arrival_rate * service_s <= P95_TAIL:
        return 0.0
    return md1_mean_wait_s(arrival_rate, service_s) * math.log(1 / P95_TAIL)

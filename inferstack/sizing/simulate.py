"""A discrete-event simulation of one continuous-batching LLM replica, to check the planner's closed forms.

The server is the one `evaluate.py` reasons about, run request by request instead of in averages: Poisson
arrivals; prompt and output lengths drawn from lognormals fitted to the workload's mean and p95 (clipped to
the context); at most `slots` sequences at once (max_num_seqs); a request is admitted only when the KV cache
has blocks for its whole prompt + output, first come first served. The engine loop is vLLM's default
scheduler without chunked prefill: when requests can be admitted it runs one prefill step for all of them
(the decode of the others stalls), otherwise one decode step for every running sequence. Step times come
from the same `LlmReplica` speed model the planner uses. The random streams are seeded: same inputs, same
figures.

simpy is imported here only: `inferstack plan` without --simulate never loads this module.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from inferstack.plan import DeploymentPlan
from inferstack.sizing.catalog import offers
from inferstack.sizing.demand import STAGES, Demand, demand_of, lognormal_sigma
from inferstack.sizing.evaluate import Candidate, predict_llm_replica
from inferstack.sizing.llm import KV_BLOCK_TOKENS, LlmReplica
from inferstack.sizing.models import resolve
from inferstack.spec import Engine, Precision, WorkloadSpec

WARMUP_FRACTION = 0.1  # requests that arrive into an empty server are not counted


@dataclass(frozen=True)
class TrafficShape:
    """Token counts per request (mean and p95) and the longest sequence the server accepts."""

    prompt_tokens: int
    prompt_tokens_p95: int
    output_tokens: int
    output_tokens_p95: int
    max_model_len: int

    @classmethod
    def of(cls, demand: Demand) -> TrafficShape:
        """The shape a workload's demand gives its requests."""
        return cls(demand.prompt_tokens, demand.prompt_tokens_p95, demand.output_tokens, demand.output_tokens_p95,
                   demand.max_model_len)


@dataclass(frozen=True)
class SimulatedLatency:
    """p95 latencies of the simulated requests (after warm-up), and how busy the replica was."""

    requests: int
    ttft_mean_ms: float
    ttft_p95_ms: float
    tpot_p95_ms: float
    latency_p95_ms: float
    mean_concurrency: float


def length_sampler(rng: random.Random, mean: int, p95: int, low: int, high: int) -> Callable[[], int]:
    """Token counts drawn from the lognormal through `mean` and `p95`, clipped to [low, high]."""
    sigma = lognormal_sigma(mean, p95)
    mu = math.log(mean) - sigma**2 / 2

    def draw() -> int:
        value = round(rng.lognormvariate(mu, sigma)) if sigma else mean
        return min(max(value, low), high)

    return draw


@dataclass
class _Request:
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    kv_blocks: int
    admitted_s: float = 0.0
    first_token_s: float = 0.0
    finish_s: float = 0.0
    decode_start: int = 0  # the engine's decode-step count when this request's first token came out


@dataclass
class _Server:
    """The scheduler's state: the waiting queue, the running batch, the free KV blocks."""

    replica: LlmReplica
    slots: int
    free_blocks: int
    waiting: deque[_Request] = field(default_factory=deque)
    finishing: list[tuple[int, int, _Request]] = field(default_factory=list)  # (last decode step, order, request)
    decode_steps: int = 0
    context_offset: int = 0  # Σ (prompt + 1 − decode_start) over running requests: mean context in O(1)
    busy_area: float = 0.0  # ∫ running sequences dt
    _step_cache: dict[tuple[int, int], float] = field(default_factory=dict)
    _prefill_cache: dict[tuple[int, int], float] = field(default_factory=dict)

    @property
    def running(self) -> int:
        return len(self.finishing)

    def admit(self) -> list[_Request]:
        admitted: list[_Request] = []
        while self.waiting and self.running + len(admitted) < self.slots:
            head = self.waiting[0]
            if head.kv_blocks > self.free_blocks:
                break  # first come, first served: the head waits for blocks, the rest wait behind it
            self.free_blocks -= head.kv_blocks
            admitted.append(self.waiting.popleft())
        return admitted

    def prefill_s(self, admitted: list[_Request]) -> float:
        mean_prompt = sum(r.prompt_tokens for r in admitted) / len(admitted)
        key = (len(admitted), round(mean_prompt / KV_BLOCK_TOKENS))
        if key not in self._prefill_cache:
            self._prefill_cache[key] = self.replica.prefill_s(len(admitted), max(key[1], 1) * KV_BLOCK_TOKENS)
        return self._prefill_cache[key]

    def decode_step_s(self) -> float:
        batch = self.running
        mean_context = self.context_offset / batch + self.decode_steps
        key = (batch, math.ceil(mean_context / KV_BLOCK_TOKENS))
        if key not in self._step_cache:
            self._step_cache[key] = self.replica.decode_step_s(batch, key[1] * KV_BLOCK_TOKENS)
        return self._step_cache[key]

    def start_decoding(self, admitted: list[_Request], now_s: float, order: int) -> None:
        for offset, request in enumerate(admitted):
            request.first_token_s = now_s
            request.decode_start = self.decode_steps
            if request.output_tokens <= 1:
                self._finish(request, now_s)
                continue
            last_step = self.decode_steps + request.output_tokens - 1
            heapq.heappush(self.finishing, (last_step, order + offset, request))
            self.context_offset += request.prompt_tokens + 1 - request.decode_start

    def decode_done(self, now_s: float) -> None:
        self.decode_steps += 1
        while self.finishing and self.finishing[0][0] <= self.decode_steps:
            _, _, request = heapq.heappop(self.finishing)
            self.context_offset -= request.prompt_tokens + 1 - request.decode_start
            self._finish(request, now_s)

    def _finish(self, request: _Request, now_s: float) -> None:
        request.finish_s = now_s
        self.free_blocks += request.kv_blocks


def simulate_replica(
    replica: LlmReplica,
    traffic: TrafficShape,
    *,
    arrival_rps: float,
    slots: int,
    requests: int = 4000,
    seed: int = 0,
) -> SimulatedLatency:
    """Serve `requests` Poisson arrivals at `arrival_rps` on one replica and measure their p95 latencies."""
    if arrival_rps <= 0 or slots < 1:
        raise ValueError(f"arrival_rps ({arrival_rps}) and slots ({slots}) must be positive")
    workload = _draw_requests(traffic, arrival_rps, requests, seed)
    capacity_tokens = replica.kv_capacity_tokens() if replica.on_gpu or replica.ram_gib else 10**9
    server = _Server(replica=replica, slots=slots, free_blocks=capacity_tokens // KV_BLOCK_TOKENS)
    too_long = [r for r in workload if r.kv_blocks > server.free_blocks]
    if too_long:
        raise ValueError(f"a {too_long[0].kv_blocks * KV_BLOCK_TOKENS}-token sequence exceeds the KV cache")
    env = simpy.Environment()
    wake: list[simpy.Event | None] = [None]
    env.process(_arrivals(env, server, workload, wake))
    env.process(_engine(env, server, len(workload), wake))
    env.run()
    return _summarise(workload, server, env.now)


def simulate_plan(spec: WorkloadSpec, plan: DeploymentPlan, requests: int = 4000, seed: int = 0) -> dict[str, float]:
    """Simulate one replica of an LLM plan at its planned per-replica peak rate, beside what the plan predicts."""
    demand = demand_of(spec, resolve(spec.model))
    offer = next(o for o in offers() if (o.cloud, o.name) == (plan.cloud, plan.offer))  # specs: one per type
    # A replica is one process (its GPUs or its share of the CPU), or the servers one replica spans
    candidate = Candidate(offer, Engine(plan.serving.engine), Precision(plan.precision),
                          processes=plan.serving.processes, nodes=plan.nodes_per_replica)
    perf, slots = plan.performance, plan.serving.max_num_seqs
    if slots is None or perf.ttft_p95_ms is None or perf.tpot_p95_ms is None:
        raise ValueError(f"{plan.workload} is not an LLM plan: nothing to simulate")
    rate = perf.load_requests_per_s / (serving_replicas(plan) * plan.serving.processes)  # per process
    replica = predict_llm_replica(demand, candidate, rate, slots).replica
    traffic = TrafficShape.of(demand)
    simulated = simulate_replica(replica, traffic, arrival_rps=rate, slots=slots, requests=requests, seed=seed)
    return {
        "requests_per_s_per_replica": round(rate, 4),
        "requests_simulated": simulated.requests,
        "seed": seed,
        "ttft_p95_ms": round(simulated.ttft_p95_ms, 1),
        "tpot_p95_ms": round(simulated.tpot_p95_ms, 2),
        "latency_p95_ms": round(simulated.latency_p95_ms, 1),
        "predicted_ttft_p95_ms": perf.ttft_p95_ms,
        "predicted_tpot_p95_ms": perf.tpot_p95_ms,
        "predicted_latency_p95_ms": perf.latency_p95_ms,
        "mean_concurrency": round(simulated.mean_concurrency, 1),
    }


def _draw_requests(traffic: TrafficShape, arrival_rps: float, count: int, seed: int) -> list[_Request]:
    rng = random.Random(seed)
    max_prompt = max(traffic.max_model_len - 1, 1)
    draw_prompt = length_sampler(rng, traffic.prompt_tokens, traffic.prompt_tokens_p95, 1, max_prompt)
    draw_output = length_sampler(rng, traffic.output_tokens, traffic.output_tokens_p95, 1, traffic.max_model_len)
    clock, drawn = 0.0, []
    for _ in range(count):
        clock += rng.expovariate(arrival_rps)
        prompt = draw_prompt()
        output = min(draw_output(), traffic.max_model_len - prompt)
        drawn.append(_Request(clock, prompt, output, math.ceil((prompt + output) / KV_BLOCK_TOKENS)))
    return drawn


def _arrivals(
    env: simpy.Environment, server: _Server, workload: list[_Request], wake: list[simpy.Event | None]
) -> Generator[simpy.Event, Any, None]:
    for request in workload:
        yield env.timeout(request.arrival_s - env.now)
        server.waiting.append(request)
        event = wake[0]
        if event is not None and not event.triggered:
            event.succeed()


def _engine(
    env: simpy.Environment, server: _Server, total: int, wake: list[simpy.Event | None]
) -> Generator[simpy.Event, Any, None]:
    admitted_so_far = 0
    while True:
        admitted = server.admit()
        started = env.now
        if admitted:
            for request in admitted:
                request.admitted_s = started
            yield env.timeout(server.prefill_s(admitted))
            server.busy_area += server.running * (env.now - started)
            server.start_decoding(admitted, env.now, admitted_so_far)
            admitted_so_far += len(admitted)
        elif server.running:
            yield env.timeout(server.decode_step_s())
            server.busy_area += server.running * (env.now - started)
            server.decode_done(env.now)
        elif admitted_so_far == total:
            return
        else:
            event = env.event()
            wake[0] = event
            yield event


def serving_replicas(plan: DeploymentPlan) -> int:
    """Replicas the plan sized to carry its peak load: production's spare is down in the sizing case."""
    return max(plan.replicas - STAGES[plan.stage].spare_replicas, 1)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (`fraction` 0.95: the p95) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(math.ceil(fraction * len(ordered)) - 1, 0))]


def _summarise(workload: list[_Request], server: _Server, end_s: float) -> SimulatedLatency:
    counted = workload[int(len(workload) * WARMUP_FRACTION) :]
    ttft = [r.first_token_s - r.arrival_s for r in counted]
    tpot = [(r.finish_s - r.first_token_s) / (r.output_tokens - 1) for r in counted if r.output_tokens > 1]
    latency = [r.finish_s - r.arrival_s for r in counted]
    return SimulatedLatency(
        requests=len(counted),
        ttft_mean_ms=sum(ttft) / len(ttft) * 1e3,
        ttft_p95_ms=percentile(ttft, 0.95) * 1e3,
        tpot_p95_ms=percentile(tpot, 0.95) * 1e3 if tpot else 0.0,
        latency_p95_ms=percentile(latency, 0.95) * 1e3,
        mean_concurrency=server.busy_area / end_s if end_s else 0.0,
    )

"""Can one catalog offer serve the demand, and with how many replicas? The feasibility core of the planner.

For an LLM the replica is a continuous-batching server: a request holds a batch slot from arrival to its
last token. At concurrency c a replica completes c requests per cycle of `batch_s(c)` (their prefills plus
every decode step), so a request sees TPOT(c) = step(c) + prefill(c)/output_tokens. Saturation is the
largest concurrency that memory and the TPOT target allow; each replica may run at most at the stage's
utilization of it (80 %), and only where few arrivals (2 %) wait for a slot. TTFT adds the prompt's own
prefill, a decode step it joins, the wait behind other prefills (M/G/1) and the wait for a free slot (a
load-dependent Erlang C chain, read with the peakedness of the simulated traffic).

Non-LLM servers batch items dynamically: a batch of b items takes `batch_latency_s(b)`; a request waits
for the batch in flight (M/D/1) and then runs in its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from inferstack.sizing.catalog import Offer
from inferstack.sizing.demand import Demand
from inferstack.sizing.items import MAX_BATCH, ItemServer
from inferstack.sizing.latency import TokenLatency, token_latency
from inferstack.sizing.llm import GIB, LlmReplica
from inferstack.sizing.queueing import (
    SlotQueue,
    md1_wait_p95_s,
    mg1_mean_wait_s,
    mg1_wait_p95_s,
    p95_after_a_wait_s,
)
from inferstack.spec import Engine, Precision

if TYPE_CHECKING:  # calibration.py is loaded only when a plan has a calibration (its pydantic models cost start-up)
    from inferstack.sizing.calibration import CalibrationRow

MAX_REPLICAS = 64
MAX_NUM_SEQS_GPU = 256  # vLLM's default max_num_seqs
MAX_SLOTS_CPU = 16  # llama.cpp --parallel beyond this only splits the context further
# A CPU plan with several processes runs llama-cpp-python's server natively, one process per NUMA node (only systemd
# binds a process to its node: bootstrap/runtimes.resolve_mode), and that server runs one request at a time (one lock
# per model, llama_cpp/server/app.py): each of its processes is a replica of one slot.
NATIVE_CPU_SLOTS = 1
# p95 of the per-request TPOT over its mean: 1 + per_share × (share of engine time spent prefilling) + z × the
# spread of the prefill stalls one answer sits through (see `_LlmLoadModel.tpot_p95_s`); per_share is fitted on
# the simulated grid of benchmarks/simulation.py (the batch size that rises and falls with the prefills).
TPOT_TAIL_PER_PREFILL_SHARE = 0.7
Z_95 = 1.6448536269514722
SLOT_HOLD_KNOTS = 8  # the slot queue interpolates the cycle time between these concurrencies
KV_HEADROOM_SIGMAS = 1.0  # KV cache kept free for sequences longer than the mean (see _memory_slots)
# Arrivals find every slot busy more often than the slot queue's Poisson chain says: a prefill stalls every
# running answer at once, and a long answer's growing context slows every decode step, so the number in flight
# swings wider (simulated at 85 %, Var(N) is 1.07–1.25× the chain's). The chain is read with Hayward's
# peakedness z (see `SlotQueue`). Against 60,000-request simulations, z = 1.3 gives the share of arrivals that
# wait for a slot on the chat shapes (70B on 4x A100 at 80 %: 3.3 % for 3.2 % simulated, where z = 1 gave
# 1.6 %; Qwen3-32B at 85 %: 1.9 % for 1.8 %); it reads RAG's 26-slot replica high (8B on L40S at 80 %: 12 % for
# 8 %) and chat-8b-public's 52 slots low (75 %: 1.9 % for 2.7 %).
SLOT_PEAKEDNESS = 1.3
# The most a replica is loaded, besides the stage's utilization cap: where 2 % of arrivals wait for a slot.
# From about 5 % the p95 request waits and its TTFT climbs steeply, too steeply for a closed form (or a
# 6,000-request simulation: at 85 % its p95 varies 849–2,168 ms with the seed for 70B on 4x A100) to hold 15 %.
# chat-8b-public on one L40S, 60,000 simulated requests: 247 ms at 75 % of saturation (predicted 229), 838 ms at
# 80 % (predicted 340).
SLOT_WAIT_CEILING = 0.02
# The most a serial replica (one request at a time) is loaded. Its arrivals wait behind whole requests, a share ρ
# of them (M/G/1), and past 70 % of saturation the closed form's exponential tail reads the p95 wait high against
# 24,000-request simulations (benchmarks/simulation.py, mistral-7b q4_k_m, one of two processes on an m7i.24xlarge:
# TTFT +15 % to +25 % over four seeds at 80 %, +10 % to +15 % over three at 70 %).
SERIAL_UTILIZATION_CEILING = 0.7


class Candidate(NamedTuple):
    """An offer with the engine and precision it would run."""

    offer: Offer
    engine: Engine
    precision: Precision  # the checkpoint's precision (what the model bucket holds)
    notes: tuple[str, ...] = ()
    dtype: Precision | None = None  # what the server runs when it differs (bf16 served as fp16 before Ampere)
    # Model processes per server, each a replica of its own behind the server's gateway (LLMs): on its own
    # offer.gpu_count / processes GPUs, or on its own share of the CPU cores and RAM (`processes.py`).
    processes: int = 1
    # Servers one replica spans (LLMs on vLLM): tensor parallel within each, pipeline parallel across (`nodes.py`).
    nodes: int = 1

    @property
    def on_gpu(self) -> bool:
        return self.offer.has_gpu

    @property
    def served_dtype(self) -> Precision:
        return self.dtype or self.precision


class Blocker(NamedTuple):
    """Why a candidate cannot serve the demand: a kind to group by, a sentence, and how far off it is."""

    kind: str  # memory | tensor_parallel | ttft | tpot | latency | replicas | cpu_facts
    message: str
    gap: float = math.inf  # achieved / target (>1 misses); what relaxing the target by this factor would fix

    def __str__(self) -> str:
        return self.message


class Sizing(NamedTuple):
    """A feasible deployment of one candidate (or, with `blocked`, why there is none)."""

    candidate: Candidate
    blocked: Blocker | None
    replicas: int = 0  # servers; with `Candidate.nodes` > 1, replicas of that many servers each (`servers`)
    processes: int = 1  # model processes per server; slots, concurrency, utilization and memory are per process
    slots: int = 0  # batch slots per replica (max_num_seqs, llama.cpp --parallel, Triton max batch)
    concurrency_per_replica: int = 0
    utilization: float = 0.0
    # The most a replica may carry, of its saturation (0: the stage's cap), and target_rps below: an LLM's are worked
    # out by `with_autoscaling`, only for the plans a report shows (searches the other sizings would waste).
    utilization_limit: float = 0.0
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    latency_p95_ms: float = 0.0
    capacity_rps: float = 0.0  # whole deployment, at saturation
    load_rps: float = 0.0
    replica_load_rps: float = 0.0  # per replica (model process), at peak
    target_rps: float = 0.0  # per server: the most it carries within the targets at <= max utilization (autoscaling)
    output_tokens_per_s: float | None = None  # whole deployment, at peak load
    weights_gib: float = 0.0
    overhead_gib: float = 0.0
    kv_cache_gib: float = 0.0
    kv_needed_gib: float = 0.0
    usable_gib: float = 0.0
    capacity_gib: float = 0.0
    kv_bytes_per_token: int = 0
    kv_capacity_tokens: int = 0
    max_concurrency: int = 0
    threads: int | None = None
    # A feasible LLM sizing's queueing model, with what it has worked out, for `with_autoscaling`: an object of its
    # own per sizing, so compare sizings' figures with load_model=None.
    load_model: _LlmLoadModel | None = None

    @property
    def feasible(self) -> bool:
        return self.blocked is None

    @property
    def servers(self) -> int:
        """Servers the deployment runs: each replica's servers (`Candidate.nodes`), or the replicas themselves."""
        return self.replicas * self.candidate.nodes


def highest_feasible_rate(low: float, high: float, feasible: Callable[[float], bool]) -> float:
    """The highest rate in [low, high] that `feasible` accepts, by bisection (feasibility falls as the rate rises);
    `low` is known to be feasible."""
    if feasible(high):
        return high
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if feasible(middle) else (low, middle)
    return low


def _blocked(candidate: Candidate, kind: str, message: str, gap: float = math.inf) -> Sizing:
    return Sizing(candidate=candidate, blocked=Blocker(kind, message, gap))


def size_candidate(demand: Demand, candidate: Candidate) -> Sizing:
    if demand.model.is_llm:
        return _size_llm(demand, candidate)
    return _size_items(demand, candidate)


# ---- LLMs ----------------------------------------------------------------------------------------------


def calibration_row(demand: Demand, candidate: Candidate) -> CalibrationRow | None:
    """The measured speed of this model, precision, engine and hardware, when the calibration has it."""
    if demand.calibration is None:
        return None
    from inferstack.sizing.calibration import hardware_key

    offer = candidate.offer
    hardware = hardware_key(offer.gpu.id if offer.gpu else None, offer.gpu_count, offer.name)
    return demand.calibration.match(demand.model.name, candidate.precision.value, candidate.engine.value, hardware)


def llm_replica(demand: Demand, candidate: Candidate) -> LlmReplica:
    offer, processes = candidate.offer, candidate.processes
    assert demand.model.arch is not None
    measured = calibration_row(demand, candidate)
    return LlmReplica(
        arch=demand.model.arch,
        precision=candidate.precision,
        kv_dtype=demand.spec.kv_cache_dtype,
        engine=candidate.engine,
        gpu=offer.gpu,
        gpus=max(offer.gpu_count // processes, 1),
        cpu=offer.cpu.for_one_of(processes) if offer.cpu and not offer.has_gpu else offer.cpu,
        ram_gib=offer.memory_gib,
        processes=1 if offer.has_gpu else processes,
        prefill_time_factor=measured.ttft_factor if measured else 1.0,
        decode_time_factor=measured.tpot_factor if measured else 1.0,
        nodes=candidate.nodes,
        node_link=offer.link if candidate.nodes > 1 else None,
    )


def with_autoscaling(sizing: Sizing) -> Sizing:
    """A feasible LLM sizing with `utilization_limit` and `target_rps` worked out (a non-LLM sizing has them already).
    The planner asks only for the plans its report shows: for the others these searches would be wasted."""
    return sizing if sizing.load_model is None else sizing.load_model.with_autoscaling(sizing)


def _size_llm(demand: Demand, candidate: Candidate) -> Sizing:
    replica = llm_replica(demand, candidate)
    if candidate.on_gpu and (problem := replica.arch.tensor_parallel_problem(replica.tensor_parallel)):
        return _blocked(candidate, "tensor_parallel", problem)
    if not candidate.on_gpu and replica.cpu is None:
        return _blocked(
            candidate, "cpu_facts", f"no CPU facts for the {candidate.offer.family} family (cpu_families.csv)"
        )
    if replica.kv_cache_gib <= 0:
        needed = replica.weights_gib_per_device + replica.overhead_gib
        return _blocked(
            candidate,
            "memory",
            f"weights {replica.weights_gib_per_device:.1f} GiB + overhead "
            f"{replica.overhead_gib:.1f} GiB exceed the {replica.usable_gib:.1f} GiB usable "
            f"per {'GPU' if candidate.on_gpu else 'server' if candidate.processes == 1 else 'process'}"
            + (f" ({candidate.processes} processes per server, each with its own weights)"
               if candidate.processes > 1 and not candidate.on_gpu else ""),
            needed / replica.usable_gib,
        )
    if replica.max_concurrency(demand.max_model_len) < 1:
        return _blocked(
            candidate,
            "memory",
            f"the KV cache ({replica.kv_cache_gib:.1f} GiB) cannot hold one {demand.max_model_len}-token sequence",
        )
    model, slots = _load_model(demand, candidate, replica)
    if slots < 1:
        tpot_ms = model.tpot_p95_s(1) * 1e3
        return _blocked(
            candidate,
            "tpot",
            f"TPOT p95 {tpot_ms:.0f} ms even for one sequence exceeds the {demand.tpot_p95_ms:g} ms target",
            tpot_ms / (demand.tpot_p95_ms or 1),
        )
    own_ttft_s = model.ttft_floor_s()
    if demand.ttft_p95_ms is not None and own_ttft_s * 1e3 > demand.ttft_p95_ms:
        return _blocked(
            candidate,
            "ttft",
            f"prefill of a p95 prompt alone takes {own_ttft_s * 1e3:.0f} ms, over "
            f"the {demand.ttft_p95_ms:g} ms TTFT target",
            own_ttft_s * 1e3 / demand.ttft_p95_ms,
        )
    sizing = model.size_replicas(candidate, slots, slots / model.cycle_s(slots))
    return sizing if model.serial else _fewer_servers(sizing, _one_slot(demand, candidate, replica, sizing))


def _one_slot(demand: Demand, candidate: Candidate, replica: LlmReplica, batching: Sizing) -> Sizing | None:
    """The replica held to one slot (serial), where that could need fewer servers than `batching`: a batch's
    2 %-wait ceiling is low at few slots (M/M/2: about 10 % of saturation), one serial slot's is 70 %. None where
    one slot cannot need fewer servers (the stage's floor, or its capacity bound) or misses the TPOT target."""
    rules = demand.stage
    if batching.feasible and batching.replicas <= rules.fewest_servers:
        return None
    model = _LlmLoadModel(demand, replica, serial=True)
    if batching.feasible:
        capacity_rps = model.utilization_cap / model.cycle_s(1) * candidate.processes
        fewest = rules.servers(math.ceil(model.required_rps(1) / capacity_rps))
        if fewest >= batching.replicas:
            return None
    if model.largest_concurrency_meeting_tpot(1) < 1:
        return None
    return model.size_replicas(candidate, 1, 1 / model.cycle_s(1))


def _fewer_servers(batching: Sizing, serial: Sizing | None) -> Sizing:
    """The sizing that needs fewer servers; the batching one on a tie (it has room to grow)."""
    if serial is None or not serial.feasible:
        return batching
    return serial if not batching.feasible or serial.replicas < batching.replicas else batching


def _load_model(
    demand: Demand, candidate: Candidate, replica: LlmReplica, slots: int | None = None
) -> tuple[_LlmLoadModel, int]:
    """The replica's queueing model and its slots: the most sequences the KV cache holds and the TPOT target allows
    (unless given). A replica of one slot is serial, whatever its server (vLLM's --max-num-seqs 1, llama-server's
    -np 1: a waiting request is prefilled only once the slot is free), and so is one whose answers miss the TPOT
    target even one at a time among other prompts' prefills: alone on its slot an answer decodes unstalled."""
    model = _LlmLoadModel(demand, replica)
    if slots is None:
        fit = _memory_slots(demand, candidate, replica)
        slots = model.largest_concurrency_meeting_tpot(fit)
        if slots == 0 and fit >= 1:
            model = _LlmLoadModel(demand, replica, serial=True)  # its TPOT at one sequence is the one to report
            return model, model.largest_concurrency_meeting_tpot(1)
    if slots == 1:
        model = _LlmLoadModel(demand, replica, serial=True)
    return model, slots


def _serves_one_at_a_time(candidate: Candidate) -> bool:
    """Whether the candidate's server runs one request at a time (NATIVE_CPU_SLOTS): a CPU plan with several
    processes."""
    return not candidate.on_gpu and candidate.processes > 1


def _memory_slots(demand: Demand, candidate: Candidate, replica: LlmReplica) -> int:
    """Sequences the KV cache holds with room for their lengths to vary: n with n + z·√n·CV ≤ cache / mean, so
    that n sequences drawn at random fit about five times in six (z = 1)."""
    if candidate.on_gpu:
        cap = MAX_NUM_SEQS_GPU
    elif _serves_one_at_a_time(candidate):
        cap = NATIVE_CPU_SLOTS
    else:
        cap = min(MAX_SLOTS_CPU, replica.cpu.cores if replica.cpu else 1)
    in_mean_sequences = replica.max_concurrency(demand.kv_sequence_tokens)
    spread = demand.sequence_tokens_cv * KV_HEADROOM_SIGMAS
    root = (-spread + math.sqrt(spread**2 + 4 * in_mean_sequences)) / 2
    return min(cap, max(math.floor(root**2), min(in_mean_sequences, 1)))


class ReplicaPrediction(NamedTuple):
    """What the planner's closed forms predict for one LLM replica at a given Poisson arrival rate."""

    replica: LlmReplica
    slots: int
    saturation_rps: float
    concurrency: int
    ttft_p95_ms: float
    tpot_p95_ms: float
    latency_p95_ms: float
    ceiling_rps: float  # the most the planner loads this replica with (utilization cap, slot-wait ceiling)


def predict_llm_replica(
    demand: Demand, candidate: Candidate, arrival_rps: float, slots: int | None = None
) -> ReplicaPrediction:
    """The planner's p95 TTFT/TPOT/end-to-end for one replica at `arrival_rps` (slots: the planner's unless given)."""
    replica = llm_replica(demand, candidate)
    model, slots = _load_model(demand, candidate, replica, slots)
    concurrency = model.concurrency_at(arrival_rps, slots)
    ttft_s = model.ttft_p95_s(concurrency, arrival_rps, slots)
    tpot_s = model.tpot_p95_s(concurrency, arrival_rps)
    saturation_rps = slots / model.cycle_s(slots)
    return ReplicaPrediction(
        replica=replica,
        slots=slots,
        saturation_rps=saturation_rps,
        concurrency=concurrency,
        ttft_p95_ms=ttft_s * 1e3,
        tpot_p95_ms=tpot_s * 1e3,
        latency_p95_ms=model.latency_p95_s(concurrency, arrival_rps, slots) * 1e3,
        ceiling_rps=model.ceiling_rps(slots, saturation_rps),
    )


class _SlotHolds(dict[int, float]):
    """What a request holds its slot for at n requests in service, by n: `cycle_s(n)`, exact up to 8 and at every
    8th n, interpolated between. The slot queue asks at every n it walks, for every rate the planner tries, and the
    cycle is smooth in n. Each is worked out when first asked for (`__missing__`): a solve stops past the chain's
    mode, mostly far below the slots, and a known one is a plain dict lookup."""

    def __init__(self, cycle_s: Callable[[int], float]):
        super().__init__()
        self.cycle_s = cycle_s

    def __missing__(self, n: int) -> float:
        if n <= SLOT_HOLD_KNOTS:
            self[n] = self.cycle_s(n)
        else:  # the stretch between two knots at once: the walk goes on through it
            below = (n - 1) // SLOT_HOLD_KNOTS * SLOT_HOLD_KNOTS
            lower, upper = self.cycle_s(below), self.cycle_s(below + SLOT_HOLD_KNOTS)
            for step in range(1, SLOT_HOLD_KNOTS):
                fraction = step / SLOT_HOLD_KNOTS
                self[below + step] = lower * (1 - fraction) + upper * fraction
            self[below + SLOT_HOLD_KNOTS] = upper
        return self[n]


class _LlmLoadModel:
    """The queueing view of one LLM replica for one demand: `token_latency` plus the waits and the p95 rules.

    `serial`: the server runs one request at a time (a replica of one slot: `_load_model`). Nothing then joins a
    running answer: its tokens come at the decode step of one sequence, and a request waits for the slot behind
    whole requests (the slot queue's M/G/1 wait), not behind other prompts' prefills besides."""

    def __init__(self, demand: Demand, replica: LlmReplica, serial: bool = False):
        self.demand, self.replica, self.serial = demand, replica, serial
        # A long answer waits longer for a slot: Allen–Cunneen scales M/M/m waits by (1 + CV²ₛ)/2 for a
        # service time of that variability (the slot is held for the whole answer).
        self.service_variability = (1 + demand.output_tokens_cv2) / 2
        self._cycles: dict[int, float] = {}
        self.slot_holds = _SlotHolds(self.cycle_s)
        # Latencies and slot queues by their arguments: the sizing asks again for rates its searches already tried.
        self._latencies: dict[tuple[int, float | None, int], TokenLatency] = {}
        self._ttfts: dict[tuple[int, float, int], tuple[float, float]] = {}
        self._slot_queues: dict[tuple[float, int], SlotQueue] = {}
        self.prefill_mean_s = replica.prefill_s(1, demand.prompt_tokens)
        self.prefill_p95_s = replica.prefill_s(1, demand.prompt_tokens_p95)
        # Prefill time is a fixed part (weights, launches) plus a part per token: only the latter varies.
        extra_tokens = max(demand.prompt_tokens_p95 - demand.prompt_tokens, 1)
        per_token_s = (self.prefill_p95_s - self.prefill_mean_s) / extra_tokens
        self.prefill_cv2 = demand.prompt_tokens_cv2 * (per_token_s * demand.prompt_tokens / self.prefill_mean_s) ** 2
        if serial:  # the slot is held for the prefill too, and prompts vary in length as well as answers
            prefill_s, answer_s = self.prefill_mean_s, self.cycle_s(1) - self.prefill_mean_s
            service_cv2 = (self.prefill_cv2 * prefill_s**2 + demand.output_tokens_cv2 * answer_s**2) / (
                prefill_s + answer_s) ** 2
            self.service_variability = (1 + service_cv2) / 2

    def cycle_s(self, concurrency: int) -> float:
        """Seconds a request holds its slot at `concurrency` (cached: the slot queue asks for every n ≤ slots)."""
        if concurrency not in self._cycles:
            d = self.demand
            self._cycles[concurrency] = self.replica.batch_s(
                concurrency, d.prompt_tokens, d.output_tokens, d.kv_context_tokens
            )
        return self._cycles[concurrency]

    def token_latency(
        self, concurrency: int, arrival_rps: float | None = None, own_prompt_tokens: int = 0
    ) -> TokenLatency:
        """Mean latencies at `concurrency`; other prompts arrive at `arrival_rps` (default: Little's law)."""
        key = (concurrency, arrival_rps, own_prompt_tokens)
        if key not in self._latencies:
            self._latencies[key] = self._token_latency(concurrency, arrival_rps, own_prompt_tokens)
        return self._latencies[key]

    def _token_latency(self, concurrency: int, arrival_rps: float | None, own_prompt_tokens: int) -> TokenLatency:
        d = self.demand
        # Other prompts' prefills stall a running answer at this rate; a serial server prefills none meanwhile.
        rate = arrival_rps if arrival_rps is not None else concurrency / self.cycle_s(concurrency)
        if self.serial:
            rate = 0.0
        return token_latency(
            self.replica,
            concurrency=concurrency,
            prompt_tokens=d.prompt_tokens,
            context_tokens=d.kv_context_tokens,
            other_prefills_per_s=rate,
            own_prompt_tokens=own_prompt_tokens or d.prompt_tokens,
        )

    def tpot_p95_s(self, concurrency: int, arrival_rps: float | None = None) -> float:
        """p95 over requests of their mean TPOT. An answer decoding for D seconds sits through a Poisson number
        of other prompts' prefills (rate λ, each p seconds with CV² c): their total has variance λ·D·p²(1 + c),
        so its TPOT spreads by √(share·p(1 + c)/D) of the mean (share = λp), most for long prompts and short
        answers. The batch size rises and falls with the prefills too: a share term fitted on the grid."""
        latency = self.token_latency(concurrency, arrival_rps)
        if not math.isfinite(latency.tpot_s):
            return math.inf
        decoding_s = max(self.demand.output_tokens - 1, 1) * latency.tpot_s
        stall_spread = math.sqrt(latency.prefill_share * self.prefill_mean_s * (1 + self.prefill_cv2) / decoding_s)
        return latency.tpot_s * (1 + TPOT_TAIL_PER_PREFILL_SHARE * latency.prefill_share + Z_95 * stall_spread)

    def largest_concurrency_meeting_tpot(self, limit: int) -> int:
        target = self.demand.tpot_p95_ms
        if target is None:
            return limit
        low, high = 0, limit
        while low < high:  # TPOT grows with concurrency: binary search the last one within target
            middle = (low + high + 1) // 2
            if self.tpot_p95_s(middle) * 1e3 <= target:
                low = middle
            else:
                high = middle - 1
        return low

    def ttft_floor_s(self) -> float:
        return self.replica.prefill_s(1, self.demand.prompt_tokens_p95)

    def slot_queue(self, arrival_rps: float, slots: int) -> SlotQueue:
        key = (arrival_rps, slots)
        if key not in self._slot_queues:
            # A serial server has no batch for a prefill to stall: its queue is plain M/G/1 (peakedness 1).
            peakedness = 1.0 if self.serial else SLOT_PEAKEDNESS
            self._slot_queues[key] = SlotQueue.solve(arrival_rps, self.slot_holds.__getitem__, slots, peakedness)
        return self._slot_queues[key]

    @property
    def utilization_cap(self) -> float:
        """The most of its saturation a replica carries: the stage's cap, and SERIAL_UTILIZATION_CEILING too for a
        serial replica."""
        cap = self.demand.stage.max_utilization
        return min(cap, SERIAL_UTILIZATION_CEILING) if self.serial else cap

    def within_ceiling(self, arrival_rps: float, slots: int, saturation_rps: float) -> bool:
        """Whether a replica may carry `arrival_rps`: at most its utilization cap, and few enough arrivals waiting
        for a slot that the p95 request does not (SLOT_WAIT_CEILING). A serial replica has no such load (a share ρ
        of its arrivals waits): the TTFT target, whose p95 counts the wait, bounds it below its cap."""
        if arrival_rps > self.utilization_cap * saturation_rps:
            return False
        return self.serial or self.slot_queue(arrival_rps, slots).p_wait <= SLOT_WAIT_CEILING

    def ceiling_rps(self, slots: int, saturation_rps: float) -> float:
        """The highest rate `within_ceiling` accepts."""
        return highest_feasible_rate(
            0.0,
            self.demand.stage.max_utilization * saturation_rps,
            lambda rate: self.within_ceiling(rate, slots, saturation_rps),
        )

    def ttft_s(self, concurrency: int, arrival_rps: float, slots: int) -> tuple[float, float]:
        """(mean, p95) time to first token. Before a slot is free: the own prompt's prefill, the decode step it
        joins and the wait behind other prefills (M/G/1: prompts vary in length), whose spreads above their
        means add in quadrature (a p95 prompt rarely meets a p95 wait). Then the wait for a slot, which a few
        per cent of requests have: `p95_after_a_wait_s` puts it on top of that."""
        key = (concurrency, arrival_rps, slots)
        if key not in self._ttfts:
            self._ttfts[key] = self._ttft_s(concurrency, arrival_rps, slots)
        return self._ttfts[key]

    def _ttft_s(self, concurrency: int, arrival_rps: float, slots: int) -> tuple[float, float]:
        prefill_rps = 0.0 if self.serial else arrival_rps  # serial: the slot queue's wait is the whole wait
        prefill_wait_mean = mg1_mean_wait_s(prefill_rps, self.prefill_mean_s, self.prefill_cv2)
        prefill_wait_p95 = mg1_wait_p95_s(prefill_rps, self.prefill_mean_s, self.prefill_cv2)
        mean = self.token_latency(concurrency, arrival_rps).ttft_s + prefill_wait_mean
        p95 = mean + math.hypot(self.prefill_p95_s - self.prefill_mean_s, prefill_wait_p95 - prefill_wait_mean)
        slot_queue = self.slot_queue(arrival_rps, slots)
        slot_wait_mean = slot_queue.mean_wait_s() * self.service_variability
        wait_rate = slot_queue.drain_rate / self.service_variability
        return mean + slot_wait_mean, p95_after_a_wait_s(mean, p95, slot_queue.p_wait, wait_rate)

    def ttft_p95_s(self, concurrency: int, arrival_rps: float, slots: int) -> float:
        return self.ttft_s(concurrency, arrival_rps, slots)[1]

    def latency_p95_s(self, concurrency: int, arrival_rps: float, slots: int) -> float:
        """p95 end-to-end: the first token's wait and the answer's length vary independently, so their spreads
        above the mean add in quadrature (summing two p95s would plan for a request slower than 1 in 400)."""
        d = self.demand
        tpot_s = self.token_latency(concurrency, arrival_rps).tpot_s
        ttft_mean, ttft_p95 = self.ttft_s(concurrency, arrival_rps, slots)
        answer_mean, answer_p95 = max(d.output_tokens - 1, 0) * tpot_s, max(d.output_tokens_p95 - 1, 0) * tpot_s
        return ttft_mean + answer_mean + math.hypot(ttft_p95 - ttft_mean, answer_p95 - answer_mean)

    def concurrency_at(self, arrival_rps: float, slots: int) -> int:
        """Requests in flight at `arrival_rps` (Little's law, solved by fixed-point iteration)."""
        concurrency = 1
        for _ in range(20):
            following = min(slots, max(1, math.ceil(arrival_rps * self.cycle_s(concurrency))))
            if following == concurrency:
                break
            concurrency = following
        return concurrency

    def size_replicas(self, candidate: Candidate, slots: int, saturation_rps: float) -> Sizing:
        d, rules = self.demand, self.demand.stage
        per_server = candidate.processes  # each process is a replica; the stage's rules count servers
        needed_rps = self.required_rps(slots)
        users = d.concurrent_users
        if users and self.serial:
            # A user whose next request waits for its answer keeps a one-slot replica busy all the time: past the
            # serial ceiling at any replica count. Closed-loop users on serial servers are not modelled.
            return _blocked(candidate, "replicas", f"serves one request at a time, and each of the {users} "
                            "concurrent users would keep a replica busy past its "
                            f"{SERIAL_UTILIZATION_CEILING:.0%} ceiling")
        active = max(1, math.ceil(needed_rps / (rules.max_utilization * saturation_rps)))
        if users:
            active = max(active, math.ceil(users / slots))
        for serving in range(math.ceil(active / per_server), MAX_REPLICAS + 1):
            replicas = rules.servers(serving)
            per_replica_rps = needed_rps / (serving * per_server)
            if users:
                concurrency = math.ceil(users / (serving * per_server))
                per_replica_rps = max(per_replica_rps, concurrency / self.cycle_s(concurrency))
            else:
                concurrency = self.concurrency_at(per_replica_rps, slots)
            utilization = per_replica_rps / saturation_rps
            if concurrency > slots or not self.within_ceiling(per_replica_rps, slots, saturation_rps):
                continue
            ttft_s = self.ttft_p95_s(concurrency, per_replica_rps, slots)
            if d.ttft_p95_ms is not None and ttft_s * 1e3 > d.ttft_p95_ms:
                continue
            return self._sizing(
                candidate, replicas, serving, slots, concurrency, utilization, ttft_s, saturation_rps, per_replica_rps
            )
        return _blocked(
            candidate, "replicas", f"needs more than {MAX_REPLICAS} replicas to carry the load within the targets"
        )

    def with_autoscaling(self, sizing: Sizing) -> Sizing:
        """`sizing` (this model's) with the replica's utilization limit and the autoscaler's target per server."""
        slots = sizing.slots
        saturation_rps = slots / self.cycle_s(slots)
        ceiling_rps = self.ceiling_rps(slots, saturation_rps)
        return sizing._replace(
            target_rps=self._target_rps(sizing.replica_load_rps, slots, ceiling_rps) * sizing.processes,
            utilization_limit=ceiling_rps / saturation_rps,
        )

    def _target_rps(self, planned_rps: float, slots: int, ceiling_rps: float) -> float:
        """The most one replica carries within the TTFT target and the ceiling (what an autoscaler holds)."""
        d = self.demand

        def feasible(rate: float) -> bool:
            concurrency = self.concurrency_at(rate, slots)
            within_ttft = d.ttft_p95_ms is None or self.ttft_p95_s(concurrency, rate, slots) * 1e3 <= d.ttft_p95_ms
            return concurrency <= slots and within_ttft

        return highest_feasible_rate(planned_rps, ceiling_rps, feasible)

    def required_rps(self, slots: int) -> float:
        """Peak request rate to plan for: the given rate, the users' rate, or a throughput floor."""
        d = self.demand
        rates = [d.requests_per_s or 0.0]
        if d.min_requests_per_s:
            rates.append(d.min_requests_per_s)
        if d.min_output_tokens_per_s:
            rates.append(d.min_output_tokens_per_s / max(d.output_tokens, 1))
        if d.concurrent_users:
            concurrency = min(d.concurrent_users, slots)
            rates.append(d.concurrent_users / self.cycle_s(concurrency))
        return max(rates)

    def _sizing(
        self,
        candidate: Candidate,
        replicas: int,
        serving: int,
        slots: int,
        concurrency: int,
        utilization: float,
        ttft_s: float,
        saturation_rps: float,
        per_replica_rps: float,
    ) -> Sizing:
        d, r = self.demand, self.replica
        tpot_s = self.tpot_p95_s(concurrency, per_replica_rps)
        kv_needed = concurrency * r.kv_bytes_per_sequence_per_device(d.kv_sequence_tokens) / GIB
        processes = candidate.processes
        return Sizing(
            candidate=candidate,
            blocked=None,
            replicas=replicas,
            processes=processes,
            slots=slots,
            concurrency_per_replica=concurrency,
            utilization=utilization,
            ttft_p95_ms=ttft_s * 1e3,
            tpot_p95_ms=tpot_s * 1e3,
            latency_p95_ms=self.latency_p95_s(concurrency, per_replica_rps, slots) * 1e3,
            capacity_rps=saturation_rps * replicas * processes,
            load_rps=per_replica_rps * serving * processes,
            replica_load_rps=per_replica_rps,
            output_tokens_per_s=per_replica_rps * serving * processes * d.output_tokens,
            weights_gib=r.weights_gib_per_device,
            overhead_gib=r.overhead_gib,
            kv_cache_gib=r.kv_cache_gib,
            kv_needed_gib=kv_needed,
            usable_gib=r.usable_gib,
            capacity_gib=r.capacity_gib,
            kv_bytes_per_token=r.kv_bytes_per_token,
            kv_capacity_tokens=r.kv_capacity_tokens(),
            max_concurrency=r.max_concurrency(d.sequence_tokens),
            threads=r.cpu.cores if r.cpu and not candidate.on_gpu else None,
            load_model=self,
        )


# ---- non-LLM models ------------------------------------------------------------------------------------


def _size_items(demand: Demand, candidate: Candidate) -> Sizing:
    offer = candidate.offer
    if not candidate.on_gpu and offer.cpu is None:
        return _blocked(candidate, "cpu_facts", f"no CPU facts for the {offer.family} family (cpu_families.csv)")
    server = ItemServer(
        model=demand.model,
        precision=candidate.precision,
        engine=candidate.engine,
        gpu=offer.gpu,
        gpus=max(offer.gpu_count, 1),
        cpu=offer.cpu,
        ram_gib=offer.memory_gib,
        sequence_tokens=demand.prompt_tokens,
        diffusion_steps=demand.spec.traffic.diffusion_steps,
        audio_seconds=demand.spec.traffic.audio_seconds,
        tokens_per_audio_second=demand.spec.traffic.tokens_per_audio_second,
    )
    items = demand.items_per_request * server.windows_per_item  # a speech decoder's clip: its audio windows
    if items > MAX_BATCH:
        return _blocked(candidate, "batch", f"one request is {items} items (windows of audio, for a speech model), "
                                            f"more than the {MAX_BATCH} one batch holds: split it")
    max_batch = server.max_batch()
    if max_batch < items:
        return _blocked(
            candidate,
            "memory",
            f"{server.total_gib(items):.1f} GiB needed for one request exceeds the {server.usable_gib:.1f} GiB usable",
            server.total_gib(items) / max(server.usable_gib, 1e-9),
        )
    target_s = demand.latency_p95_ms / 1e3 if demand.latency_p95_ms else math.inf
    # A request waits for the batch in flight, then runs in its own: both must fit within the target.
    batch = max_batch
    while batch > items and 2 * server.batch_latency_s(batch) > target_s:
        batch -= items
    single_s = server.batch_latency_s(items)
    if single_s > target_s:
        return _blocked(
            candidate,
            "latency",
            f"one request takes {single_s * 1e3:.0f} ms, over the {demand.latency_p95_ms:g} ms target",
            single_s / target_s,
        )
    saturation_items = batch / server.batch_latency_s(batch)
    rules = demand.stage
    needed_items = max(demand.requests_per_s or 0.0, demand.min_requests_per_s or 0.0) * items
    if demand.concurrent_users:
        needed_items = max(needed_items, demand.concurrent_users * items / single_s)
    fewest = max(1, math.ceil(needed_items / (rules.max_utilization * saturation_items)))
    def latency_p95_at(per_replica: float) -> tuple[float, int]:  # (seconds, items in flight) at items/s
        in_flight = min(batch, max(items, math.ceil(per_replica * server.batch_latency_s(batch))))
        latency_s = server.batch_latency_s(in_flight)
        return latency_s + md1_wait_p95_s(per_replica / in_flight, latency_s), in_flight

    for serving in range(fewest, MAX_REPLICAS + 1):
        per_replica = needed_items / serving
        latency_p95_s, in_flight = latency_p95_at(per_replica)
        if latency_p95_s <= target_s:
            replicas = rules.servers(serving)
            return Sizing(
                candidate=candidate,
                blocked=None,
                replicas=replicas,
                slots=batch,
                concurrency_per_replica=max(1, in_flight // items),
                utilization=per_replica / saturation_items,
                latency_p95_ms=latency_p95_s * 1e3,
                capacity_rps=saturation_items / items * replicas,
                load_rps=needed_items / items,
                target_rps=highest_feasible_rate(
                    per_replica, rules.max_utilization * saturation_items,
                    lambda rate: latency_p95_at(rate)[0] <= target_s) / items,
                weights_gib=server.weights_gib,
                overhead_gib=server.overhead_gib(batch),
                usable_gib=server.usable_gib,
                capacity_gib=server.capacity_gib,
                threads=offer.cpu.cores if offer.cpu and not candidate.on_gpu else None,
            )
    return _blocked(
        candidate, "replicas", f"needs more than {MAX_REPLICAS} replicas to carry the load within the target"
    )

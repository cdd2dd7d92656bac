"""The planner's closed forms against a discrete-event simulation of the same replica.

    python benchmarks/simulation.py [--requests N]

For each grid point (a model on a GPU, or one of several processes on a CPU server; a traffic shape; a load) it
prints the planner's p95 TTFT / TPOT / end-to-end beside the simulated ones (inferstack.sizing.simulate) and the
relative error. The loads are 30 % and 60 % of the replica's saturation rate and its ceiling: the most the planner
puts on it (the stage's utilization cap, or where 2 % of arrivals would wait for a slot:
`evaluate.SLOT_WAIT_CEILING`; for a server of one request at a time, `evaluate.SERIAL_UTILIZATION_CEILING`).
Target (issue 13): every figure within 15 %; exits non-zero when one is not. Points at 85 %, past the ceiling,
follow for reference and are not gated: the p95 request waits for a slot there, the closed form reads TTFT high
(up to +41 % against 60,000 requests, 8B RAG on one L40S), and a simulated p95 of a few thousand requests swings
with the seed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from inferstack.sizing.catalog import offers
from inferstack.sizing.demand import Demand, demand_of
from inferstack.sizing.evaluate import Candidate, ReplicaPrediction, predict_llm_replica
from inferstack.sizing.models import lookup
from inferstack.sizing.simulate import SimulatedLatency, TrafficShape, simulate_replica
from inferstack.spec import Engine, Precision, parse_workload

TOLERANCE = 0.15
TEST_REQUESTS = 6000  # per point in tests/sizing/test_simulation.py (the benchmark defaults to 12000)
# At the ceiling a few per cent of requests wait for a slot and the simulated TTFT p95 of 6,000 varies ±15 % with
# the seed (70B on 4x A100: 600–832 ms over seeds 1–6): the test runs those points four times longer.
TEST_REQUESTS_AT_CEILING = 24000
METRICS = ("ttft", "tpot", "latency")

# (prompt mean, p95), (output mean, p95): short chat, long-context RAG, long answers
SHAPES = {
    "chat": ((800, 2000), (300, 800)),
    "rag": ((3000, 6000), (200, 400)),
    "long-answer": ((300, 600), (1000, 2000)),
}


@dataclass(frozen=True)
class GridPoint:
    model: str
    precision: str
    hardware: str  # a GPU id, or a CPU offer's name (gpus 0)
    gpus: int
    shape: str
    utilization: float | None  # of the saturation rate; None: the planner's ceiling for this replica
    processes: int = 1  # model processes per server (on a CPU, several run one request at a time each)
    slots: int | None = None  # None: the planner's

    @property
    def label(self) -> str:
        load = "ceiling" if self.utilization is None else f"{self.utilization:.0%}"
        where = f"{self.gpus}x{self.hardware}" if self.gpus else f"{self.hardware}/{self.processes} processes"
        one_slot = " 1 slot" if self.slots == 1 else ""
        return f"{self.model} {self.precision} {where}{one_slot} {self.shape} @{load}"


# (model, precision, GPU id or CPU offer, GPUs, shapes, processes, slots)
CONFIGURATIONS = (
    ("llama-3.1-8b", "bf16", "L40S", 1, ("chat", "rag"), 1, None),
    ("llama-3.1-8b", "bf16", "H100-SXM", 1, ("chat", "long-answer"), 1, None),
    ("qwen3-32b", "fp8", "H100-SXM", 1, ("chat",), 1, None),
    ("llama-3.3-70b", "bf16", "A100-SXM4-80GB", 4, ("chat",), 1, None),
    # Serial replicas, one request at a time: one process of a CPU plan with several (llama-cpp-python's server),
    # and vLLM held to one slot.
    ("mistral-7b", "q4_k_m", "m7i.24xlarge", 0, ("chat",), 2, None),
    ("llama-3.1-8b", "bf16", "L40S", 1, ("chat",), 1, 1),
)


def _points(loads: tuple[float | None, ...]) -> tuple[GridPoint, ...]:
    return tuple(
        GridPoint(model, precision, hardware, gpus, shape, load, processes, slots)
        for model, precision, hardware, gpus, shapes, processes, slots in CONFIGURATIONS
        for shape in shapes
        for load in loads
    )


GRID = _points((0.3, 0.6, None))
PAST_THE_CEILING = _points((0.85,))


@dataclass(frozen=True)
class PointResult:
    point: GridPoint
    arrival_rps: float
    predicted: ReplicaPrediction
    simulated: SimulatedLatency

    def error(self, metric: str) -> float:
        predicted = getattr(self.predicted, f"{metric}_p95_ms")
        simulated = getattr(self.simulated, f"{metric}_p95_ms")
        return float((predicted - simulated) / simulated)


def _demand(point: GridPoint) -> Demand:
    (prompt, prompt_p95), (output, output_p95) = SHAPES[point.shape]
    spec = parse_workload(
        {
            "name": "simulation-grid",
            "model": point.model,
            "precision": point.precision,
            "traffic": {
                "requests_per_s": 1.0,
                "prompt_tokens": {"mean": prompt, "p95": prompt_p95},
                "output_tokens": {"mean": output, "p95": output_p95},
            },
            "stage": "internal",
        }
    )
    return demand_of(spec, lookup(point.model))


def _candidate(point: GridPoint) -> Candidate:
    if not point.gpus:
        offer = next(o for o in offers() if o.name == point.hardware)
        return Candidate(offer, Engine.LLAMACPP, Precision(point.precision), processes=point.processes)
    offer = next(o for o in offers() if o.gpu is not None and o.gpu.id == point.hardware and o.gpu_count == point.gpus)
    return Candidate(offer, Engine.VLLM, Precision(point.precision), processes=point.processes)


def run_point(point: GridPoint, requests: int = 12000, seed: int = 1) -> PointResult:
    demand, candidate = _demand(point), _candidate(point)
    at_saturation = predict_llm_replica(demand, candidate, 1.0, point.slots)
    if point.utilization is None:
        arrival_rps = at_saturation.ceiling_rps
    else:
        arrival_rps = point.utilization * at_saturation.saturation_rps
    predicted = predict_llm_replica(demand, candidate, arrival_rps, point.slots)
    traffic = TrafficShape.of(demand)
    simulated = simulate_replica(
        predicted.replica, traffic, arrival_rps=arrival_rps, slots=predicted.slots, requests=requests, seed=seed
    )
    return PointResult(point, arrival_rps, predicted, simulated)


def table(results: list[PointResult]) -> str:
    lines = [
        "| point | slots | rps (% of sat.) | conc. pred/sim | TTFT p95 pred/sim ms | err | TPOT p95 pred/sim ms | err "
        "| e2e p95 pred/sim ms | err |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        p, s = r.predicted, r.simulated
        lines.append(
            f"| {r.point.label} | {p.slots} | {r.arrival_rps:.2f} ({r.arrival_rps / p.saturation_rps:.0%}) "
            f"| {p.concurrency}/{s.mean_concurrency:.1f} "
            f"| {p.ttft_p95_ms:.0f}/{s.ttft_p95_ms:.0f} | {r.error('ttft'):+.0%} "
            f"| {p.tpot_p95_ms:.1f}/{s.tpot_p95_ms:.1f} | {r.error('tpot'):+.0%} "
            f"| {p.latency_p95_ms:.0f}/{s.latency_p95_ms:.0f} | {r.error('latency'):+.0%} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=12000, help="simulated requests per point (default 12000)")
    args = parser.parse_args()
    results = [run_point(point, args.requests) for point in GRID]
    print(table(results))
    worst = max((abs(r.error(m)), r.point.label, m) for r in results for m in METRICS)
    print(f"\nworst: {worst[2]} at {worst[1]}: {worst[0]:.1%} (target within {TOLERANCE:.0%})")
    print("\npast the ceiling, for reference (not gated):\n")
    print(table([run_point(point, args.requests) for point in PAST_THE_CEILING]))
    return 0 if worst[0] <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())

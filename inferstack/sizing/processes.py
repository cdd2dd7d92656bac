"""How many model processes one server runs: each a replica of its own, behind the server's gateway.

A server may run N copies of the model instead of one: one per NUMA node of a multi-socket CPU server (a llama.cpp
process is credited one node's memory bandwidth, `CpuSpec.for_one_of`), or one per GPU (or per group of GPUs) of a
multi-GPU server, data parallel instead of one tensor-parallel group when the model fits fewer GPUs. Each process
holds its own weights and KV cache: on a CPU server the N processes share its RAM (memory × N must fit); on GPUs
each has its own cards. The planner sizes every count and keeps the one that needs the fewest servers (the cost of
an offer is servers × its price), one process on a tie.

Within one NUMA node the speed model gives splitting no gain (the processes share the node's bandwidth and each
reads its own weights every step), so CPU counts stop at the node count. No catalog GPU offer is a MIG slice
(instances.csv lists whole GPUs), so no process runs on a slice of a GPU.
"""

from __future__ import annotations

from collections.abc import Callable

from inferstack.plan import MAX_PROCESSES_PER_SERVER
from inferstack.sizing.demand import Demand
from inferstack.sizing.evaluate import Candidate, Sizing


def process_counts(demand: Demand, candidate: Candidate) -> list[int]:
    """The process counts per server worth sizing for this candidate, 1 first."""
    offer, arch = candidate.offer, demand.model.arch
    if arch is None or not demand.model.is_llm:
        return [1]
    if offer.has_gpu:
        return [
            n for n in range(1, min(offer.gpu_count, MAX_PROCESSES_PER_SERVER) + 1)
            if offer.gpu_count % n == 0 and arch.tensor_parallel_problem(offer.gpu_count // n) is None
        ] or [1]
    nodes = offer.cpu.numa_nodes if offer.cpu else 1
    return [1] if nodes == 1 else [1, min(nodes, MAX_PROCESSES_PER_SERVER)]


def size_processes(demand: Demand, candidate: Candidate, size: Callable[[Candidate], Sizing]) -> Sizing:
    """`size` for each process count of `process_counts`; the feasible one with the fewest servers (fewer processes
    on a tie), with a note saying why, or the one-process sizing when none is feasible."""
    counts = process_counts(demand, candidate)
    single = size(candidate)
    if len(counts) == 1 or (single.feasible and single.replicas <= demand.stage.fewest_servers):
        return single  # more processes cannot need fewer servers than the stage's least
    sizings = [single, *(size(candidate._replace(processes=n)) for n in counts[1:])]
    feasible = [s for s in sizings if s.feasible]
    if not feasible:
        return single
    best = min(feasible, key=lambda s: (s.replicas, s.processes))
    # On a CPU server the processes share the RAM: say when N copies do not fit (on GPUs each has its own cards).
    too_big = [s for s in sizings if s.blocked is not None and s.blocked.kind == "memory" and not s.candidate.on_gpu]
    if best.processes == 1 and not too_big:
        return best
    note = _why(best, sizings[0], too_big)
    return best._replace(candidate=best.candidate._replace(notes=(*best.candidate.notes, note)))


def _layout(candidate: Candidate) -> str:
    offer, n = candidate.offer, candidate.processes
    if not offer.has_gpu:
        return "one per NUMA node, each pinned to its node's cores and memory"
    gpus = offer.gpu_count // n
    return f"one per {gpus} GPU(s), " + (f"tensor parallel {gpus}" if gpus > 1 else "no tensor parallelism")


def _why(best: Sizing, single: Sizing, too_big: list[Sizing]) -> str:
    """One sentence: the process count chosen, against one process, and the counts that do not fit in memory."""
    if best.processes > 1:
        one = (f"{single.replicas} with one process" if single.feasible else f"one process: {single.blocked}")
        line = (f"{best.processes} model processes per server ({_layout(best.candidate)}): "
                f"{best.replicas} server(s), against {one}")
    else:
        line = "one model process per server"
    return line + "".join(f"; {s.candidate.processes} processes per server do not fit: {s.blocked}" for s in too_big)

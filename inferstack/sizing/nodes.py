"""Replicas across servers: a model larger than one server of an offer, served by vLLM on several of them.

vLLM serves such a model tensor parallel over each server's GPUs and pipeline parallel across the servers, on a
Ray cluster of the replica's servers (vLLM's distributed serving docs; Ray Serve's DeepSeek guide runs TP 8 x PP 2
on two 8x H100 servers). The planner tries it only where no replica of one server serves the workload on the cloud
(such replicas are planned, not yet provisioned), and for an offer only where one server cannot hold the weights or
one sequence's KV cache: the fewest servers whose GPUs hold them, and one more (room for the KV cache, or a faster
step), up to MAX_NODES_PER_REPLICA. The speed model (llm.py) adds the pipeline's hand-overs over the servers'
network, which node_links.csv gives per instance type with its source; a type without those facts is not split.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from inferstack.plan import MAX_NODES_PER_REPLICA, ReplicaNodes
from inferstack.sizing.demand import Demand
from inferstack.sizing.evaluate import Candidate, Sizing, llm_replica
from inferstack.spec import Engine


def multi_node_problem(demand: Demand, candidate: Candidate) -> str | None:
    """Why a replica of this candidate cannot span servers (None: it can)."""
    offer = candidate.offer
    if not demand.model.is_llm or demand.model.arch is None or not offer.has_gpu:
        return "only LLMs on GPU servers span servers"
    if candidate.engine is not Engine.VLLM:
        return f"{candidate.engine.value} does not serve one model across servers (vLLM does, on Ray)"
    if offer.link is None:
        return ("node_links.csv gives no bandwidth between two such servers, or no construct of the cloud that places "
                "them close (Huawei's server groups keep servers apart)")
    return None


def node_counts(demand: Demand, candidate: Candidate) -> list[int]:
    """The servers per replica worth sizing: the fewest whose GPUs hold the weights and the overhead, and one more;
    empty where no count up to MAX_NODES_PER_REPLICA does (or the replica cannot span servers)."""
    if multi_node_problem(demand, candidate) is not None:
        return []
    for nodes in range(2, MAX_NODES_PER_REPLICA + 1):
        if llm_replica(demand, candidate._replace(nodes=nodes)).kv_cache_gib > 0:
            return list(range(nodes, min(nodes + 1, MAX_NODES_PER_REPLICA) + 1))
    return []


def size_nodes(demand: Demand, candidate: Candidate, single: Sizing, size: Callable[[Candidate], Sizing]
               ) -> Sizing:
    """`single` (one server per replica) unless the weights do not fit one server: then the feasible sizing across
    servers that runs the fewest servers (fewer per replica on a tie), or, where none is feasible, the one with
    the fewest servers per replica, whose blocker says what else stands in the way."""
    if single.feasible or single.blocked is None or single.blocked.kind != "memory":
        return single
    counts = node_counts(demand, candidate)
    if not counts:
        return single
    sizings = [size(candidate._replace(nodes=n, processes=1)) for n in counts]
    feasible = [s for s in sizings if s.feasible]
    if not feasible:
        return sizings[0]
    return min(feasible, key=lambda s: (s.servers, s.candidate.nodes))


def replica_nodes(demand: Demand, sizing: Sizing) -> ReplicaNodes | None:
    """The plan's account of a replica across servers (None: a replica is one server)."""
    candidate = sizing.candidate
    if candidate.nodes == 1:
        return None
    replica = llm_replica(demand, candidate)
    link = replica.node_link
    assert link is not None
    micro_batch = math.ceil(max(sizing.concurrency_per_replica, 1) / candidate.nodes)
    return ReplicaNodes(
        nodes=candidate.nodes, transport=link.transport, network_gbps=link.gbps, latency_us=link.latency_us,
        hand_over_ms=round(replica.network_s(micro_batch) * 1e3, 3), source=link.source)

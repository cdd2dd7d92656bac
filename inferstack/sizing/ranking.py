"""How priced options are ranked: the planner ranks by it, and the plan's rationale (explain.py) says why."""

from __future__ import annotations

import math
from typing import NamedTuple

from inferstack.plan import Price
from inferstack.sizing.evaluate import Sizing
from inferstack.sizing.precision import FORMATS

# A stale, undated or borrowed price is ranked as if this much dearer, so it wins only when it is clearly cheaper
# than a fresh, same-region one. 5 % is the band within which two offers count as a tie (a choice, not a
# measurement); such a price can be off by far more (the same Alibaba type is listed 1-90 % apart between regions
# in prices.csv): the flag on the plan, not this margin, carries that warning.
DOUBTFUL_PRICE_MARGIN = 0.05


class Priced(NamedTuple):
    """One sized offer in one region, with its price."""

    sizing: Sizing
    region: str
    price: Price


def ranking_cost(price: Price) -> float:
    """The monthly cost an option is ranked by: a doubtful (flagged) price counts DOUBTFUL_PRICE_MARGIN dearer."""
    if price.monthly_ranking is None:
        return math.inf
    return price.monthly_ranking.amount * (1 + DOUBTFUL_PRICE_MARGIN if price.flags else 1)


def rank_key(p: Priced) -> tuple[int, float, float, float]:
    """Known prices first, by ranking cost, then (at equal cost) the less quantized precision (`precision: auto` or
    a list: a quantized option must be cheaper to be chosen), then latency; unknown prices by the fewest GPUs in
    total, then vCPUs, then memory."""
    offer = p.sizing.candidate.offer
    if p.price.monthly_ranking is not None:
        bits = FORMATS[p.sizing.candidate.precision].bits_per_weight
        return (0, ranking_cost(p.price), -bits, p.sizing.latency_p95_ms)
    size = p.sizing.servers * (offer.gpu_count * 1000 + offer.vcpus)
    return (1, 0.0, size, offer.memory_gib)

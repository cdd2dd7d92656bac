"""Token latencies of a continuous-batching LLM replica at a concurrency: the one model `estimate` and `plan` share.

A request's first token comes after its own prefill and the decode step already in flight when it joined.
Every later token takes one decode step of the running batch, except that the engine stops decoding while it
prefills other requests' prompts (vLLM's default scheduler without chunked prefill): if prefills take a share
f of the engine's time, a token takes step / (1 − f) on average. `estimate` asks at a fixed concurrency (the
other requests' prefills arrive as their predecessors finish); the planner at the concurrency and arrival
rate its queueing model derives, and adds the waits and the p95 rules in `evaluate.py`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from inferstack.sizing.llm import LlmReplica


class TokenLatency(NamedTuple):
    """Mean latencies of one request at a concurrency, without waiting for a slot or behind other prefills."""

    ttft_s: float  # own prefill + the decode step it joins
    tpot_s: float  # mean seconds per output token after the first (inf: prefills alone saturate the engine)
    prefill_share: float  # fraction of the engine's time spent prefilling other requests

    def e2e_s(self, output_tokens: int) -> float:
        return self.ttft_s + max(output_tokens - 1, 0) * self.tpot_s


def token_latency(
    replica: LlmReplica,
    *,
    concurrency: int,
    prompt_tokens: int,
    context_tokens: int,
    other_prefills_per_s: float,
    own_prompt_tokens: int | None = None,
) -> TokenLatency:
    """Latencies at `concurrency` sequences of `context_tokens` mean context, while other requests' prompts of
    `prompt_tokens` arrive at `other_prefills_per_s`; the request's own prompt has `own_prompt_tokens`."""
    joined_s = replica.decode_step_s(concurrency - 1, context_tokens) if concurrency > 1 else 0.0
    ttft_s = replica.prefill_s(1, own_prompt_tokens or prompt_tokens) + joined_s
    share = other_prefills_per_s * replica.prefill_s(1, prompt_tokens) if other_prefills_per_s > 0 else 0.0
    step_s = replica.decode_step_s(max(concurrency, 1), context_tokens)
    tpot_s = step_s / (1 - share) if share < 1 else math.inf
    return TokenLatency(ttft_s=ttft_s, tpot_s=tpot_s, prefill_share=share)

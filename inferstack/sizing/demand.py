"""What the workload asks of the deployment, with every default the planner fills in made explicit.

`Demand` is the spec reduced to numbers: peak load, token counts (mean and p95), latency targets and the
stage's rules. Each default becomes an assumption line in the plan, so nothing is silently invented.
Token targets (TTFT, TPOT, output tokens/s) set for a model that generates no tokens are an error, not
silently ignored: such a model is held to its per-request latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

from inferstack.errors import InputError, Problem, input_error
from inferstack.sizing.models import ResolvedModel
from inferstack.spec import Stage, WorkloadSpec

if TYPE_CHECKING:
    from inferstack.sizing.calibration import Calibration

# Targets used when the spec gives none (interactive use): a first token within 2 s, then text faster
# than reading speed (≥ 10 tokens/s); other models answer within 1 s.
DEFAULT_TTFT_P95_MS = 2000.0
DEFAULT_TPOT_P95_MS = 100.0
DEFAULT_LATENCY_P95_MS = 1000.0
# SLO fields only a model that generates tokens (an LLM) can be held to.
TOKEN_SLO_FIELDS = ("ttft_p95_ms", "tpot_p95_ms", "min_output_tokens_per_s")


class StageRules(NamedTuple):
    """What each stage requires of a deployment."""

    min_replicas: int
    min_zones: int
    spare_replicas: int  # replicas that may fail while the rest still meet the load at target utilization
    max_utilization: float  # of saturation throughput, per replica, at peak

    def servers(self, serving: int) -> int:
        """Servers a deployment of this stage runs for `serving` of them to carry the load: the spares beside them,
        and no fewer than the stage's floor."""
        return max(self.min_replicas, serving + self.spare_replicas)

    @property
    def fewest_servers(self) -> int:
        """No deployment of this stage has fewer servers: one serving, with its spares and floor."""
        return self.servers(1)


STAGES: dict[Stage, StageRules] = {
    "validation": StageRules(min_replicas=1, min_zones=1, spare_replicas=0, max_utilization=0.8),
    "internal": StageRules(min_replicas=1, min_zones=1, spare_replicas=0, max_utilization=0.8),
    "production": StageRules(min_replicas=2, min_zones=2, spare_replicas=1, max_utilization=0.8),
}


@dataclass(frozen=True)
class Demand:
    """Peak load and targets, in the units the planner computes with."""

    spec: WorkloadSpec
    model: ResolvedModel
    interactive: bool
    requests_per_s: float | None  # peak
    concurrent_users: int | None  # peak
    prompt_tokens: int
    prompt_tokens_p95: int
    output_tokens: int
    output_tokens_p95: int
    max_model_len: int
    items_per_request: int
    ttft_p95_ms: float | None
    tpot_p95_ms: float | None
    latency_p95_ms: float | None
    min_output_tokens_per_s: float | None
    min_requests_per_s: float | None
    stage: StageRules
    assumptions: list[str] = field(default_factory=list)
    calibration: Calibration | None = None  # measured speed of some deployments (`plan --calibration`)

    @property
    def sequence_tokens(self) -> int:
        """Mean tokens one sequence holds in the KV cache at the end of its answer."""
        return self.prompt_tokens + self.output_tokens

    # The length statistics below are cached: the planner's queueing model reads them thousands of times a plan.
    @cached_property
    def prompt_tokens_cv2(self) -> float:
        """Squared coefficient of variation of the prompt length (lognormal through the mean and p95)."""
        return math.expm1(lognormal_sigma(self.prompt_tokens, self.prompt_tokens_p95) ** 2)

    @cached_property
    def output_tokens_cv2(self) -> float:
        """Squared coefficient of variation of the output length (lognormal through the mean and p95)."""
        return math.expm1(lognormal_sigma(self.output_tokens, self.output_tokens_p95) ** 2)

    @cached_property
    def sequence_tokens_cv(self) -> float:
        """Coefficient of variation of prompt + output (independent lengths)."""
        variance = self.prompt_tokens**2 * self.prompt_tokens_cv2 + self.output_tokens**2 * self.output_tokens_cv2
        return math.sqrt(variance) / self.sequence_tokens

    @cached_property
    def kv_sequence_tokens(self) -> int:
        """Tokens one running sequence holds in the KV cache, averaged over time: a long answer holds its blocks
        longer, so the cache sees E[(prompt + output)·output] / E[output] = prompt + output·(1 + CV²)."""
        return round(self.prompt_tokens + self.output_tokens * (1 + self.output_tokens_cv2))

    @cached_property
    def kv_context_tokens(self) -> int:
        """Mean context of the running batch, averaged over time (what a decode step reads per sequence)."""
        return round(self.prompt_tokens + self.output_tokens * (1 + self.output_tokens_cv2) / 2)


Z_95 = 1.6448536269514722  # standard normal 95th percentile


def lognormal_sigma(mean: float, p95: float) -> float:
    """σ of the lognormal whose mean and 95th percentile are given (0: a constant length).

    mean = exp(μ + σ²/2) and p95 = exp(μ + z·σ) give σ²/2 − z·σ + ln(p95/mean) = 0; the smaller root is the
    one with a finite tail. Past p95/mean = exp(z²/2) ≈ 3.9 no lognormal fits both: σ = z is the closest.
    """
    if p95 <= mean:
        return 0.0
    discriminant = Z_95**2 - 2 * math.log(p95 / mean)
    return Z_95 - math.sqrt(max(discriminant, 0.0))


def demand_of(spec: WorkloadSpec, model: ResolvedModel) -> Demand:
    _check_token_targets(spec, model)
    traffic, slo = spec.traffic, spec.slo
    assumptions: list[str] = []
    interactive = traffic.mode == "interactive"
    rps = traffic.requests_per_s * traffic.peak_factor if traffic.requests_per_s is not None else None
    users = math.ceil(traffic.concurrent_users * traffic.peak_factor) if traffic.concurrent_users else None
    if traffic.peak_factor > 1:
        assumptions.append(f"peak = {traffic.peak_factor:g} x the given load")
    rps, users = _after_cache(spec, rps, users, assumptions)
    llm = model.is_llm
    ttft = slo.ttft_p95_ms
    tpot = slo.tpot_p95_ms
    latency = slo.latency_p95_ms
    if interactive and llm and ttft is None:
        ttft = DEFAULT_TTFT_P95_MS
        assumptions.append(f"no ttft_p95_ms given: {ttft:g} ms assumed for interactive use")
    if interactive and llm and tpot is None:
        tpot = DEFAULT_TPOT_P95_MS
        assumptions.append(f"no tpot_p95_ms given: {tpot:g} ms assumed (faster than reading speed)")
    if interactive and not llm and latency is None:
        latency = DEFAULT_LATENCY_P95_MS
        assumptions.append(f"no latency_p95_ms given: {latency:g} ms assumed")
    prompt, output = traffic.prompt_tokens, traffic.output_tokens
    max_len = _context_tokens(spec, model, assumptions) if llm else (
        traffic.context_tokens or _round_up(prompt.high + output.high, 256))
    return Demand(
        spec=spec,
        model=model,
        interactive=interactive,
        requests_per_s=rps,
        concurrent_users=users,
        prompt_tokens=prompt.mean,
        prompt_tokens_p95=prompt.high,
        output_tokens=output.mean if llm else 0,
        output_tokens_p95=output.high if llm else 0,
        max_model_len=max_len,
        items_per_request=traffic.items_per_request,
        ttft_p95_ms=ttft,
        tpot_p95_ms=tpot,
        latency_p95_ms=latency,
        min_output_tokens_per_s=slo.min_output_tokens_per_s,
        min_requests_per_s=slo.min_requests_per_s,
        stage=STAGES[spec.stage],
        assumptions=assumptions,
    )


def _after_cache(spec: WorkloadSpec, rps: float | None, users: int | None,
                 assumptions: list[str]) -> tuple[float | None, int | None]:
    """The load the runtime still carries when the workload's cache answers `expected_hit_rate` of the requests: the
    request rate and the concurrency x (1 - hit rate) (a hit is answered by the gateway in about a Redis round trip,
    so it holds no runtime slot)."""
    cache = spec.cache
    if cache is None or cache.expected_hit_rate == 0:
        return rps, users
    remaining = 1 - cache.expected_hit_rate
    assumptions.append(f"cache: {cache.expected_hit_rate:.0%} of requests expected from the cache, so the runtime is "
                       f"sized for {remaining:.0%} of the peak load")
    return (rps * remaining if rps is not None else None,
            max(1, math.ceil(users * remaining)) if users is not None else None)


def _context_tokens(spec: WorkloadSpec, model: ResolvedModel, assumptions: list[str]) -> int:
    """The longest sequence the server accepts: `context_tokens`, else the p95 prompt and answer rounded up to 256
    (no further than the model's limit). Past the model's limit it is refused, never capped silently: a sequence the
    model cannot hold would be refused by the server (vLLM and llama.cpp answer 400). A `context_tokens` shorter than
    the p95 sequence says that longer requests are truncated by the client, and the plan says so."""
    traffic = spec.traffic
    limit = model.arch.max_position if model.arch is not None and model.arch.context_stated else None
    p95 = traffic.prompt_tokens.high + traffic.output_tokens.high
    given = traffic.context_tokens
    if limit is not None and given is not None and given > limit:
        raise input_error("traffic.context_tokens", f"is longer than {model.name}'s context of {limit} tokens",
                          value=given, fix=f"set it to {limit} or less: the server accepts no longer sequence, and "
                          "clients truncate longer prompts to fit")
    if limit is not None and given is None and p95 > limit:
        raise input_error("traffic", f"p95 prompt ({traffic.prompt_tokens.high}) + p95 output "
                          f"({traffic.output_tokens.high}) = {p95} tokens, longer than {model.name}'s context of "
                          f"{limit} tokens", fix=f"lower the p95 lengths, choose a model with a longer context, or set "
                          f"traffic.context_tokens (at most {limit}) to size the server for that and have clients "
                          "truncate longer prompts to fit")
    if given is not None:
        if given < p95:
            assumptions.append(f"context_tokens {given} < p95 prompt + output ({p95}): longer requests are truncated "
                               "by their clients to fit (the server refuses them)")
        return given
    max_len = _round_up(p95, 256) if limit is None else min(_round_up(p95, 256), limit)
    assumptions.append(f"context_tokens not given: the server accepts {max_len} tokens (p95 prompt + output)")
    return max_len


def _check_token_targets(spec: WorkloadSpec, model: ResolvedModel) -> None:
    steps = spec.traffic.diffusion_steps
    if steps is not None and model.step is None:
        raise input_error("traffic.diffusion_steps", f"does not apply to {model.name}: its registry entry counts no "
                          "denoising step", value=steps, fix="remove it (it sizes image-generation models whose "
                          "entry has gflops_per_step, e.g. sdxl)")
    for name in ("audio_seconds", "tokens_per_audio_second"):
        value = getattr(spec.traffic, name)
        if value is not None and model.decoder is None:
            raise input_error(f"traffic.{name}", f"does not apply to {model.name}: its registry entry has no "
                              "speech decoder", value=value, fix="remove it (it sizes speech models with a decoder, "
                              "e.g. whisper-large-v3)")
    rate = spec.traffic.tokens_per_audio_second
    if rate is not None and model.decoder is not None and rate * model.decoder.window_s > model.decoder.max_tokens:
        limit = model.decoder.max_tokens / model.decoder.window_s
        raise input_error("traffic.tokens_per_audio_second", f"is more than {model.name} writes: at most "
                          f"{model.decoder.max_tokens} tokens a {model.decoder.window_s:g}-second window",
                          value=rate, fix=f"give at most {limit:.2f}")
    if model.is_llm:
        return
    problems = [
        Problem(
            f"slo.{name}",
            f"does not apply to {model.name}: {model.kind} models generate no tokens",
            value=getattr(spec.slo, name),
            fix="remove it; hold the model to slo.latency_p95_ms (per request) and slo.min_requests_per_s",
        )
        for name in TOKEN_SLO_FIELDS
        if getattr(spec.slo, name) is not None
    ]
    if problems:
        raise InputError(problems)


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step

"""The plan's reasons and warnings, in sentences a reviewer can check against the numbers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from inferstack.clouds import CLOUD_FACTS
from inferstack.plan import UNPRICED_CACHE_SENTENCE, ColdStart, Fleet, Price, ReplicaNodes, Rollout, SpotAboveFloor
from inferstack.sizing.catalog import STALE_PRICE_DAYS, Offer
from inferstack.sizing.coldstart import describe
from inferstack.sizing.demand import Demand
from inferstack.sizing.efficiency import CPU_ITEM_MATMUL_PROVENANCE, CPU_PROFILES, GPU_PROFILES
from inferstack.sizing.items import ITEM_COMPUTE
from inferstack.sizing.ranking import DOUBTFUL_PRICE_MARGIN, Priced

if TYPE_CHECKING:
    from inferstack.clouds import Cloud
    from inferstack.sizing.evaluate import Candidate, Sizing

_UNOFFICIAL_GPU_SPECS = {
    "A10G": "A10G compute figures are community figures, not NVIDIA's (gpus.csv)",
    "L20": "L20 compute figures are unverified (gpus.csv)",
}


def _hardware(priced: Priced) -> str:
    offer = priced.sizing.candidate.offer
    if offer.gpu:
        return f"{offer.gpu_count}x {offer.gpu.id}, {offer.vcpus} vCPU, {offer.memory_gib:g} GiB"
    return f"{offer.vcpus} vCPU, {offer.memory_gib:g} GiB"


def _cost(priced: Priced) -> str:
    return f"{priced.price.monthly_ranking}/month" if priced.price.monthly_ranking else "price unknown"


def rationale(demand: Demand, chosen: Priced, ranked: list[Priced], nodes: ReplicaNodes | None = None) -> list[str]:
    """One sentence per decision; `nodes`: the plan's replica across servers, where it spans several."""
    sizing, offer = chosen.sizing, chosen.sizing.candidate.offer
    model = demand.model
    lines = [_model_line(demand, chosen), _load_line(demand)]
    known = [p for p in ranked if p.price.monthly_ranking]
    if chosen.price.monthly_ranking:
        lines.append(_cheapest_line(chosen, known))
    else:
        what = "a price in the ranking currency" if chosen.price.monthly else "a known price"
        unpriced = len(ranked) - len(known)
        lines.append(
            f"No feasible {offer.cloud} option has {what}: of {unpriced} that fit, {offer.name} ({_hardware(chosen)}) "
            "has the fewest GPUs in total across its replicas (then vCPUs, then memory); its cost is unknown, so it "
            "is neither the cheapest nor ranked against priced options."
        )
    lines.append(_device_line(demand, chosen, ranked))
    lines.append(_replica_line(demand, sizing))
    if nodes is not None:
        lines.append(_nodes_line(demand, sizing, nodes))
    lines.append(_memory_line(demand, sizing))
    if model.is_llm:
        lines.append(
            f"Predicted p95 at peak: TTFT {sizing.ttft_p95_ms:.0f} ms"
            f"{_target(demand.ttft_p95_ms)}, TPOT {sizing.tpot_p95_ms:.0f} ms{_target(demand.tpot_p95_ms)}, "
            f"{sizing.output_tokens_per_s:.0f} output tokens/s in total."
        )
    else:
        lines.append(f"Predicted p95 latency at peak: {sizing.latency_p95_ms:.0f} ms{_target(demand.latency_p95_ms)}.")
    lines.extend(f"{note[0].upper()}{note[1:]}." for note in sizing.candidate.notes)
    from inferstack.sizing.evaluate import calibration_row

    if demand.calibration and (measured := calibration_row(demand, sizing.candidate)):
        sentence = measured.sentence(demand.calibration.source)
        lines.append(f"{sentence[0].upper()}{sentence[1:]}.")
        lines.append("The TTFT, TPOT and output tokens/s above, and the replicas sized from them, are the calibrated "
                     "model's predictions at this plan's load, not measurements (the load tests measured one load); "
                     "memory and cost remain the model's estimates.")
    elif demand.calibration and model.is_llm:
        candidate = sizing.candidate
        lines.append(f"Calibration {demand.calibration.source} has no row for {model.name} {candidate.precision.value} "
                     f"on {candidate.engine.value}, {_calibration_hardware(candidate.offer)}: every figure here is "
                     "estimated.")
    return lines


def _calibration_hardware(offer: Offer) -> str:
    from inferstack.sizing.calibration import hardware_key  # loaded only by a plan with --calibration

    return hardware_key(offer.gpu.id if offer.gpu else None, offer.gpu_count, offer.name)


def _cheapest_line(chosen: Priced, known: list[Priced]) -> str:
    """Why this priced option: the cheapest, or the cheapest once doubtful prices count 5 % dearer."""
    offer, amount = chosen.sizing.candidate.offer, _amount(chosen)
    cheaper = [p for p in known if _amount(p) < amount]
    if known and known[0] is not chosen:  # an alternative's plan: what ranks above it, not why it was chosen
        rank = next(index for index, p in enumerate(known) if p is chosen) + 1
        line = (f"{offer.name} ({_hardware(chosen)}) at {_cost(chosen)} is an alternative, ranked {rank} of "
                f"{len(known)} feasible priced {offer.cloud} options; the first is "
                f"{known[0].sizing.candidate.offer.name} at {_cost(known[0])}")
    elif not cheaper:
        line = f"{offer.name} ({_hardware(chosen)}) is the cheapest of {len(known)} feasible priced " \
               f"{offer.cloud} options at {_cost(chosen)}"
    else:
        passed = min(cheaper, key=_amount)
        line = (
            f"{offer.name} ({_hardware(chosen)}) at {_cost(chosen)} is chosen over "
            f"{passed.sizing.candidate.offer.name} at {_cost(passed)} ({_amount(passed) / amount - 1:.1%}): that "
            f"price is {_doubt(passed.price)}, and a doubtful price loses to a sound one within "
            f"{DOUBTFUL_PRICE_MARGIN:.0%}"
        )
    runner_up = next((p for p in known if p is not chosen and _amount(p) >= amount), None)
    if runner_up:
        other = runner_up.sizing.candidate.precision
        at = f" at {other.value}" if other is not chosen.sizing.candidate.precision else ""  # `precision: auto`
        line += f"; next: {runner_up.sizing.candidate.offer.name}{at} at {_cost(runner_up)} " \
                f"(+{_amount(runner_up) / amount - 1:.0%})"
    return line + "."


def _amount(priced: Priced) -> float:
    assert priced.price.monthly_ranking is not None
    return priced.price.monthly_ranking.amount


def _doubt(price: Price) -> str:
    """What makes a price doubtful, in words: 'from 2024-12-30 (23 months old) and cn-hangzhou's'."""
    parts = []
    if "stale" in price.flags and price.age_days is not None:
        parts.append(f"from {price.source_date} ({price.age_days // 30} months old)")
    if "undated" in price.flags:
        parts.append("undated")
    if "borrowed" in price.flags:
        parts.append(f"borrowed from {price.priced_region}")
    return " and ".join(parts)


def cold_start_line(estimate: ColdStart) -> str:
    """A server's boot to its first healthy answer, for plans without a fleet."""
    return f"A new server is estimated healthy after {_minutes(estimate.total_s)} ({describe(estimate)})."


def fleet_line(fleet: Fleet, sizing: Sizing, demand: Demand, estimate: ColdStart) -> str:
    """Why the fleet's numbers: floor, ceiling, the per-server target, and the warm-up they wait for."""
    target = (f"the {demand.ttft_p95_ms:g} ms TTFT target" if demand.ttft_p95_ms is not None
              else f"the {demand.latency_p95_ms:g} ms latency target" if demand.latency_p95_ms is not None
              else "its targets")
    saturation = sizing.capacity_rps / sizing.replicas
    nodes = sizing.candidate.nodes
    unit, one = ("servers", "server") if nodes == 1 else (f"replicas of {nodes} servers", "replica")
    return (
        f"Fleet: {fleet.min_replicas} to {fleet.max_replicas} {unit} behind one HTTPS load balancer; the autoscaler "
        f"holds {fleet.target_requests_per_s:.3g} requests/s per {one} ({fleet.target_requests_per_s * 60:.0f} a "
        f"minute), the most one carries within {target} at {fleet.target_requests_per_s / saturation:.0%} of its "
        f"saturation. A new {one} is estimated healthy after {_minutes(fleet.cold_start_s)} ({describe(estimate)}): "
        f"health checks wait {_minutes(fleet.health_check_grace_s)}, scale-out waits "
        f"{_minutes(fleet.scale_out_cooldown_s)} between steps, scale-in {_minutes(fleet.scale_in_cooldown_s)}."
    )


def rollout_line(rollout: Rollout, revision: str | None, cloud: Cloud) -> str:
    """What a new model revision, plan or bootstrap does to the servers, and how long it takes."""
    serving = f"model revision {revision}" if revision else "the model's unversioned files"
    facts = CLOUD_FACTS[cloud]
    if rollout.strategy == "rolling" and not facts.rolling_update:
        how = ("`inferstack rollout STACK` replaces them after pulumi up" if facts.rollout_command else
               "you replace them")
        return (f"Rollout (a new model revision, plan or bootstrap; now {serving}): {facts.display_name}'s group does "
                f"not replace running servers by itself (docs/deploy-{cloud}.md, rolling-update): new servers take the "
                f"new template, the {rollout.servers} running ones keep the old until {how}, "
                f"{rollout.surge} at a time by raising the group's size and lowering it again: about "
                f"{_minutes(rollout.duration_s)} ({rollout.batches} batch(es) × the cold start).")
    if rollout.strategy == "replace":
        return (f"Rollout (a new model revision, plan or bootstrap; now {serving}): the one server is replaced "
                f"delete-first, so the endpoint is down for about {_minutes(rollout.duration_s)} (its cold start); a "
                "protected one (protect_servers) is refused by `pulumi up` before anything is created, until "
                "protection is lifted. A fleet (several replicas or scaling.max_replicas) rolls without downtime.")
    return (f"Rollout (a new model revision, plan or bootstrap; now {serving}): {rollout.servers} servers replaced "
            f"{rollout.surge} at a time (surge {rollout.surge}), never fewer than {rollout.servers} serving, each new "
            f"one taking traffic once its health check passes: about {_minutes(rollout.duration_s)} "
            f"({rollout.batches} batch(es) × the cold start).")


def _minutes(seconds: int) -> str:
    return f"{seconds / 60:.1f} min" if seconds % 60 else f"{seconds // 60} min"


def _target(value: float | None) -> str:
    return f" (target {value:g})" if value is not None else ""


def _model_line(demand: Demand, chosen: Priced) -> str:
    model, sizing = demand.model, chosen.sizing
    candidate = sizing.candidate
    split = f", {sizing.weights_gib:.2f} GiB per GPU" if candidate.offer.gpu_count > 1 and model.is_llm else ""
    params = f"{model.params / 1e9:.2f} B" if model.params >= 1e9 else f"{model.params / 1e6:.0f} M"
    if model.step is not None:  # a diffusion model: its steps per image set its compute
        steps = demand.spec.traffic.diffusion_steps or model.step.default_steps
        split += (f", {steps} denoising steps per image ({model.gflops_per_item(0, steps):,.0f} GFLOPs: "
                  f"{model.step.gflops:,.1f} per step, {model.step.fixed_gflops:,.1f} once"
                  + ("; traffic.diffusion_steps sets it" if demand.spec.traffic.diffusion_steps is None else "") + ")")
    if model.decoder is not None:  # a speech decoder: its windows and the tokens it writes set its time
        traffic, decoder = demand.spec.traffic, model.decoder
        seconds = traffic.audio_seconds or decoder.window_s
        rate = traffic.tokens_per_audio_second or decoder.default_tokens_per_s
        windows = decoder.windows(traffic.audio_seconds)
        tokens = decoder.tokens_per_window(traffic.audio_seconds, traffic.tokens_per_audio_second)
        unset = [name for name in ("audio_seconds", "tokens_per_audio_second") if getattr(traffic, name) is None]
        split += (f", {seconds:g} s of audio per clip: {windows} window(s) of {decoder.window_s:g} s, each the "
                  f"encoder once ({decoder.gflops_per_window:,.1f} GFLOPs) and {tokens} decoder steps at "
                  f"{rate:.2f} tokens per second of audio, every step reading the decoder's weights and each "
                  "window's cross-attention keys and values"
                  + (f" (the entry's basis; traffic.{' and traffic.'.join(unset)} set"
                     f"{'s it' if len(unset) == 1 else ' them'})" if unset else ""))
    kept = model.arch.linear_params_kept(candidate.precision.value) if model.arch else 0
    checkpoint = (f" Sized as the published {candidate.precision.value} checkpoint, which keeps {kept / 1e9:.1f} B "
                  "parameters of its linear layers in 16 bit (its quantization_config)." if kept else "")
    return (
        f"{model.display_name} ({params} parameters) at {candidate.precision.value} on {candidate.engine.value}{split}."
        + checkpoint
    )


def cache_line(demand: Demand) -> list[str]:
    """The cache's sentence: the load the runtime was sized for once the expected hits are taken off."""
    cache, traffic = demand.spec.cache, demand.spec.traffic
    if cache is None:
        return []
    if cache.expected_hit_rate == 0:
        return [f"Inference cache (managed Redis, {cache.ttl_seconds} s TTL): no hit rate stated, so the runtime is "
                "sized for the full load.", UNPRICED_CACHE_SENTENCE]
    given = []
    if traffic.requests_per_s is not None:
        given.append(f"{traffic.requests_per_s * traffic.peak_factor:g} requests/s x (1 - "
                     f"{cache.expected_hit_rate:g}) = {demand.requests_per_s:g} requests/s")
    if traffic.concurrent_users is not None:
        given.append(f"{math.ceil(traffic.concurrent_users * traffic.peak_factor)} in flight x (1 - "
                     f"{cache.expected_hit_rate:g}) -> {demand.concurrent_users}")
    return [f"Inference cache (managed Redis, {cache.ttl_seconds} s TTL) expected to answer "
            f"{cache.expected_hit_rate:.0%} of requests: the runtime is sized for the load that remains, "
            f"{' and '.join(given)}.", UNPRICED_CACHE_SENTENCE]


def _load_line(demand: Demand) -> str:
    parts = []
    if demand.requests_per_s is not None:
        parts.append(f"{demand.requests_per_s:g} requests/s")
    if demand.concurrent_users is not None:
        parts.append(f"{demand.concurrent_users} requests in flight")
    load = " and ".join(parts) or "throughput floor only"
    if demand.model.is_llm:
        return (
            f"Peak load: {load}; prompts {demand.prompt_tokens} tokens (p95 {demand.prompt_tokens_p95}), "
            f"answers {demand.output_tokens} (p95 {demand.output_tokens_p95}), context up to "
            f"{demand.max_model_len}."
        )
    return f"Peak load: {load}, {demand.items_per_request} item(s) per request."


def _device_line(demand: Demand, chosen: Priced, ranked: list[Priced]) -> str:
    on_gpu = chosen.sizing.candidate.on_gpu
    other = next((p for p in ranked if p.sizing.candidate.on_gpu != on_gpu), None)
    kind, other_kind = ("GPU", "CPU") if on_gpu else ("CPU", "GPU")
    if demand.spec.placement.device != "auto":
        return f"{kind}, as placement.device asks ({other_kind} offers were not considered)."
    if other is None:
        return f"{kind} rather than {other_kind}: no {other_kind} option on this cloud meets the targets."
    if chosen.price.monthly_ranking and other.price.monthly_ranking:
        extra = other.price.monthly_ranking.amount / chosen.price.monthly_ranking.amount - 1
        return (
            f"{kind} rather than {other_kind}: the cheapest feasible {other_kind} option "
            f"({other.sizing.candidate.offer.name}) costs {_cost(other)} (+{extra:.0%})."
        )
    return f"{kind} chosen; a feasible {other_kind} option ({other.sizing.candidate.offer.name}) has an unknown price."


def _replica_line(demand: Demand, sizing: object) -> str:
    from inferstack.sizing.evaluate import SLOT_WAIT_CEILING, Sizing

    assert isinstance(sizing, Sizing)
    rules = demand.stage
    limit = f"limit {rules.max_utilization:.0%}"
    if sizing.load_model is not None and sizing.load_model.serial:
        limit = (f"limit {sizing.utilization_limit:.0%}: one request at a time, so a share of requests as large as "
                 "the load waits for the one before it")
    elif 0 < sizing.utilization_limit < rules.max_utilization - 0.005:
        limit = f"limit {sizing.utilization_limit:.0%}, where {SLOT_WAIT_CEILING:.0%} of requests would wait for a slot"
    line = (
        f"{sizing.replicas} replica(s), each at {sizing.utilization:.0%} of its saturation at peak "
        f"({limit}), {sizing.concurrency_per_replica} request(s) in flight per replica"
    )
    if sizing.processes > 1:
        line = (
            f"{sizing.replicas} server(s) of {sizing.processes} model processes, each process at "
            f"{sizing.utilization:.0%} of its saturation at peak ({limit}), {sizing.concurrency_per_replica} "
            "request(s) in flight per process"
        )
    if rules.spare_replicas:
        line += (
            f"; {demand.spec.stage}: {rules.spare_replicas} spare replica so the load still fits with one down, "
            f"spread over {rules.min_zones} zones"
        )
    return line + "."


def _nodes_line(demand: Demand, sizing: object, nodes: ReplicaNodes) -> str:
    """Why and how a replica spans servers, and what their network costs each token."""
    from inferstack.sizing.evaluate import Sizing, llm_replica

    assert isinstance(sizing, Sizing)
    candidate, offer = sizing.candidate, sizing.candidate.offer
    one = llm_replica(demand, candidate._replace(nodes=1))
    assert offer.gpu is not None and offer.link is not None
    gpus = f"{offer.gpu_count}x {offer.gpu.id}"
    if one.kv_cache_gib <= 0:
        why = (f"one server's {gpus} hold {one.usable_gib * offer.gpu_count:.0f} GiB, less than the weights and "
               f"overhead ({(one.weights_gib_per_device + one.overhead_gib) * offer.gpu_count:.0f} GiB)")
    else:
        why = (f"on one server's {gpus} the KV cache ({one.kv_cache_gib:.1f} GiB a GPU) cannot hold one "
               f"{demand.max_model_len}-token sequence")
    tpot = f" of its {sizing.tpot_p95_ms:.0f} ms p95 TPOT" if sizing.tpot_p95_ms else ""
    latency = ("no latency is published for this type: an assumed figure, a whole two-server all-reduce on "
               "p4de.24xlarge; " if offer.link.latency_assumed else "")
    return (
        f"Each replica spans {nodes.nodes} {offer.name} servers: {why}. vLLM runs tensor parallel "
        f"{offer.gpu_count} within each server and pipeline parallel {nodes.nodes} across them, on a Ray cluster of "
        f"the replica's servers, placed close ({offer.link.placement}). Between them: {nodes.transport} at "
        f"{nodes.network_gbps:,.0f} Gbit/s, {nodes.latency_us:g} µs a message ({latency}sources in node_links.csv "
        f"and the plan's replica_nodes.source); a token's {nodes.nodes - 1} hand-over(s) of its micro-batch's "
        f"activations from each of the {offer.gpu_count} ranks, and its sampled tokens back to the head, take "
        f"{nodes.hand_over_ms:.2f} ms{tpot}. A token passes every stage in turn, so a replica across servers decodes "
        "no faster than one server would; its throughput comes from one micro-batch per stage in flight. Each "
        "server downloads the whole model (vLLM's loader reads every file and keeps its stage's layers), so its "
        "cold start is one server's; fleets, rollouts and healing count whole replicas."
    )


def _memory_line(demand: Demand, sizing: object) -> str:
    from inferstack.sizing.evaluate import Sizing

    assert isinstance(sizing, Sizing)
    shared_ram = sizing.processes > 1 and not sizing.candidate.on_gpu
    where = "per GPU" if sizing.candidate.on_gpu else "per process" if shared_ram else "per server"
    line = f"Memory {where}: {sizing.weights_gib:.2f} GiB weights + {sizing.overhead_gib:.2f} GiB overhead"
    if demand.model.is_llm:
        line += (
            f" + {sizing.kv_needed_gib:.2f} GiB KV cache for {sizing.concurrency_per_replica} sequence(s) of "
            f"{demand.sequence_tokens} tokens, of {sizing.usable_gib:.2f} GiB usable; the cache holds "
            f"{sizing.max_concurrency} such sequences"
        )
    else:
        line += f", of {sizing.usable_gib:.2f} GiB usable"
    if shared_ram:
        per_process = sizing.weights_gib + sizing.overhead_gib + sizing.kv_needed_gib
        line += (
            f" (its share); {sizing.processes} processes each hold their own weights and cache: "
            f"{sizing.processes} x {per_process:.2f} = {sizing.processes * per_process:.2f} GiB of the server's "
            f"{sizing.usable_gib * sizing.processes:.2f} GiB usable"
        )
    return line + "."


def spot_line(spot: SpotAboveFloor) -> str:
    """What a production fleet's spot capacity above its floor is, and what it costs where the catalog knows."""
    price = (f"{spot.spot_hourly_per_instance} per {spot.instance_types[0]} server-hour on spot (from "
             f"{spot.spot_price_source}, {spot.spot_price_date}; the dearest zone's where prices differ by zone; spot "
             "prices move)" if spot.spot_hourly_per_instance else
             "spot price not in the catalog")
    planned, *others = spot.instance_types
    fallback = (f"; besides {planned} the group may launch {', '.join(others)} (where capacity is short)" if others else
                "; no equivalent type to fall back on")
    if spot.monthly_at_ceiling and spot.on_demand_monthly_at_ceiling:
        blend = (f"; at the ceiling ({spot.spot_share_at_ceiling:.0%} of the servers on spot, all {planned}) "
                 f"{spot.monthly_at_ceiling} a month against {spot.on_demand_monthly_at_ceiling} all on-demand")
    elif spot.spot_hourly_per_instance is None:
        blend = "; the blend at the ceiling is unknown without a spot price"
    else:
        blend = ("; the blend at the ceiling is unknown: the on-demand price is another region's or has no "
                 "exchange rate to the report's currency")
    return (f"spot above the floor: {spot.on_demand_base} servers always on-demand (the SLO floor, the monthly cost "
            f"above), up to {spot.spot_above} more on spot capacity: {price}{blend}{fallback}")


def warnings(demand: Demand, chosen: Priced, fleet: Fleet | None = None) -> list[str]:
    sizing, price = chosen.sizing, chosen.price
    offer, candidate = sizing.candidate.offer, sizing.candidate
    result = []
    if price.monthly is None:
        result.append(
            f"no published price for {offer.name} in {chosen.region}: cost unknown, not ranked; "
            f"`inferstack catalog refresh --cloud {offer.cloud}` fetches it"
        )
    else:
        if price.substitute:
            result.append(
                f"price borrowed from {price.priced_region}: its list price, used for {chosen.region} "
                "(regional substitute)"
            )
        if price.monthly_ranking is None:
            result.append(f"no exchange rate for {price.monthly.currency}: not ranked across clouds")
        elif price.monthly.currency != price.monthly_ranking.currency:
            result.append(
                f"{price.monthly.currency} list price converted to {price.monthly_ranking.currency} "
                "at the report's exchange rate"
            )
        if "undated" in price.flags:
            result.append("price source carries no date")
        elif "stale" in price.flags and price.age_days is not None:
            result.append(
                f"price is from {price.source_date} ({price.age_days // 30} months old, more than "
                f"{STALE_PRICE_DAYS} days): refresh before quoting"
            )
    if demand.spec.placement.spot and demand.spec.stage == "production":
        facts = CLOUD_FACTS[offer.cloud]
        if not facts.on_demand_floor:
            result.append(f"spot: true keeps every server on-demand on {facts.display_name}: its managed group cannot "
                          "keep an on-demand floor under spot servers (capability spot-above-floor)")
        elif fleet is None or fleet.max_replicas <= fleet.min_replicas:
            result.append("spot: true adds no spot server: the fleet has no room above its on-demand floor (raise "
                          "scaling.max_replicas)")
    elif demand.spec.placement.spot:
        result.append("spot prices are not in the catalog: costs are on-demand list prices")
    provenance = _speed_provenance(demand, candidate)
    if "uncalibrated" in provenance or "prior" in provenance.split(";")[0]:
        result.append(
            f"{candidate.engine.value} speed on {'GPU' if candidate.on_gpu else 'CPU'} is uncalibrated ({provenance})"
        )
    if offer.gpu and offer.gpu.id in _UNOFFICIAL_GPU_SPECS:
        result.append(_UNOFFICIAL_GPU_SPECS[offer.gpu.id])
    if offer.cpu is None and not offer.has_gpu:
        result.append(f"no CPU facts for {offer.family}: CPU speed not estimated")
    if "not verified" in offer.spec_source or offer.spec_date == "unknown":
        result.append(f"{offer.name} specs come from an undated or unverified source ({offer.spec_source})")
    return result


def _speed_provenance(demand: Demand, candidate: Candidate) -> str:
    """Where the speed constants come from: the engine profile, or for item models on CPU the matmul unit's."""
    offer = candidate.offer
    if candidate.on_gpu:
        return GPU_PROFILES[candidate.engine].provenance
    if demand.model.is_llm or offer.cpu is None:
        return CPU_PROFILES[candidate.engine].provenance
    unit, _ = offer.cpu.matmul_peak(ITEM_COMPUTE.get(candidate.precision, "fp16"))
    return CPU_ITEM_MATMUL_PROVENANCE[unit]


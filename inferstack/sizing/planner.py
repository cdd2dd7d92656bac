"""The planner: workload spec → the cheapest feasible deployment per cloud, ranked alternatives, and why.

For every allowed cloud and region, every catalog offer is sized (`evaluate.size_candidate`), priced
(`catalog.PriceBook`) and ranked by monthly cost in the ranking currency; the plans the report shows get their
autoscaling figures last (`evaluate.with_autoscaling`). Offers without a known price are shown but never ranked as
cheapest. When nothing fits, the report says what blocks each cloud and which
nearest change (a lower precision, a looser target, another accelerator or cloud) would make it feasible.
"""

from __future__ import annotations

import datetime
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.errors import InputError, Problem, input_error, with_article
from inferstack.plan import (
    HOURS_PER_MONTH,
    MAX_FALLBACK_TYPES,
    Accelerator,
    CloudOutcome,
    ColdStart,
    DeploymentPlan,
    Fleet,
    MemoryBreakdown,
    ModelArtifact,
    Money,
    Objectives,
    Performance,
    PlanReport,
    Price,
    Serving,
    SpotAboveFloor,
    answer_cap_sentence,
    answer_token_cap,
    rollout_for,
)
from inferstack.runtimes import runtime_for_engine
from inferstack.sizing.catalog import (
    CATALOG_REGIONS,
    STALE_PRICE_DAYS,
    Catalog,
    Offer,
    PriceBook,
    load_catalog,
    offers,
    price_age_days,
)
from inferstack.sizing.coldstart import (
    Server,
    cold_start,
    fleet_cold_start_s,
    health_check_grace_s,
    runtime_caches,
    scale_in_cooldown_s,
    warm_start,
)
from inferstack.sizing.demand import Demand, demand_of
from inferstack.sizing.evaluate import Candidate, Sizing, size_candidate, with_autoscaling
from inferstack.sizing.hardware import gpu_specs
from inferstack.sizing.kernels import served_precision
from inferstack.sizing.models import resolve
from inferstack.sizing.nodes import multi_node_problem, replica_nodes, size_nodes
from inferstack.sizing.precision import FORMATS, accuracy_sentence, lossless_precisions, weight_bytes
from inferstack.sizing.processes import size_processes
from inferstack.sizing.ranking import Priced, rank_key, ranking_cost
from inferstack.sizing.regions import clouds_with_region, unknown_region
from inferstack.sizing.startup import model_loading, server_image, startup_line, warm_pool
from inferstack.spec import CLOUDS, Engine, Precision, WorkloadSpec

if TYPE_CHECKING:  # loaded only when a plan has a calibration (see evaluate.calibration_row)
    from inferstack.sizing.calibration import Calibration

ALTERNATIVES_SHOWN = 4
PLANNABLE_ENGINES = (Engine.AUTO, Engine.VLLM, Engine.LLAMACPP, Engine.ONNXRUNTIME)
# llama.cpp serves GGUF files: the nearest GGUF type for each checkpoint precision.
CPU_GGUF_FOR = {
    Precision.INT4_AWQ: Precision.Q4_K_M,
    Precision.INT4_GPTQ: Precision.Q4_K_M,
    Precision.INT8: Precision.Q8_0,
    Precision.FP8: Precision.Q8_0,
}
DISK_BASE_GIB = {"gpu": 80, "cpu": 30}  # DLAMI/DLVM GPU images need ~75 GB; Ubuntu server images fit in 30


def plan_workload(
    spec: WorkloadSpec,
    *,
    clouds: Iterable[Cloud] | None = None,
    region: str | None = None,
    prices_file: Path | None = None,
    alternatives: int | None = ALTERNATIVES_SHOWN,
    calibration: Calibration | None = None,
    catalog: Catalog | None = None,
) -> PlanReport:
    """Plan `spec` on each allowed cloud. `clouds`/`region` narrow the spec's placement (CLI flags).
    `calibration`: measured speeds that replace the model's where they match (`plan --calibration`).
    `catalog`: what to plan from (a pin's rows); default the packaged catalog with `prices_file` on top, today.

    `alternatives`: runners-up kept per cloud, cheapest first; None keeps every feasible one (`plan --plot`).
    When no cloud has a feasible deployment, the report carries the nearest feasible changes.
    """
    if catalog is not None and prices_file is not None:
        raise ValueError("give a catalog or a prices file, not both: the catalog has its prices")
    catalog = catalog or load_catalog(prices_file)
    report = plan_once(spec, clouds=clouds, region=region, catalog=catalog, alternatives=alternatives,
                       calibration=calibration)
    if spec.canary is not None and any(o.chosen for o in report.clouds):
        from inferstack.sizing.canary import with_canary

        report = with_canary(report, lambda canary: plan_once(canary, catalog=catalog, alternatives=0,
                                                              calibration=calibration))
    if any(o.chosen for o in report.clouds):
        return report
    from inferstack.sizing.suggest import nearest_feasible_changes

    changes = nearest_feasible_changes(spec, [o.cloud for o in report.clouds],
                                       lambda changed, clouds: plan_once(changed, clouds=clouds, region=region,
                                                                         catalog=catalog))
    over_budget = None
    if spec.placement.monthly_budget is not None:
        unbounded = spec.model_copy(update={"placement": spec.placement.model_copy(update={"monthly_budget": None})})
        over_budget = plan_once(unbounded, clouds=[o.cloud for o in report.clouds], region=region,
                                catalog=catalog).best
    return report.model_copy(update={"suggestions": changes, "cheapest_over_budget": over_budget})


def plan_once(
    spec: WorkloadSpec,
    *,
    clouds: Iterable[Cloud] | None = None,
    region: str | None = None,
    catalog: Catalog | None = None,
    alternatives: int | None = ALTERNATIVES_SHOWN,
    calibration: Calibration | None = None,
) -> PlanReport:
    """One planning pass, without looking for nearest feasible changes (`catalog`: as plan_workload's)."""
    if spec.engine not in PLANNABLE_ENGINES:
        raise input_error(
            "engine",
            "has no runtime the bootstrap installs",
            value=spec.engine.value,
            fix="use vllm, llamacpp or onnxruntime (or auto); compare others with `inferstack estimate`",
        )
    _check_accelerator_names(spec)
    model = resolve(spec.model)
    demand = replace(demand_of(spec, model), calibration=calibration)
    catalog = catalog or load_catalog()
    book = catalog.prices
    currency = spec.placement.currency
    if book.rates.convert(1.0, "USD", currency) is None:
        raise input_error(
            "placement.currency",
            "has no exchange rate",
            value=currency,
            fix=f"use one of {', '.join(sorted(book.rates.usd_per_unit))} or add the rate in a --prices file",
        )
    shared: dict[tuple[object, ...], Sizing] = {}
    outcomes = [
        _plan_cloud(demand, cloud, _regions(spec, cloud, region), catalog, shared, alternatives)
        for cloud in _chosen_clouds(spec, clouds, region)
    ]
    ranked = sorted((o.chosen for o in outcomes if o.chosen and o.chosen.price.monthly_ranking),
                    key=lambda p: ranking_cost(p.price))
    return PlanReport(
        workload=spec,
        currency=currency,
        exchange_rates=_rates_for(book, currency),
        exchange_rates_source=book.rates.source,
        clouds=outcomes,
        best=ranked[0] if ranked else None,
        assumptions=demand.assumptions,
        suggestions=[],
    )


def known_accelerator_names() -> list[str]:
    """Names gpus_allow/gpus_deny accept: gpus.csv ids and chip names, and the catalog's accelerator names."""
    names = {name for spec in gpu_specs().values() for name in (spec.id, spec.name)}
    names |= {offer.gpu_model for offer in offers() if offer.gpu_model}
    return sorted(names, key=str.lower)


def _check_accelerator_names(spec: WorkloadSpec) -> None:
    known = known_accelerator_names()
    known_lower = {name.lower() for name in known}
    problems = [
        Problem(f"placement.{field}[{index}]", "is not a known accelerator", value=name,
                fix=f"use one of {', '.join(known)} (see `inferstack gpus`)")
        for field in ("gpus_allow", "gpus_deny")
        for index, name in enumerate(getattr(spec.placement, field))
        if name.lower() not in known_lower
    ]
    if problems:
        raise InputError(problems)


def _chosen_clouds(spec: WorkloadSpec, clouds: Iterable[Cloud] | None, region: str | None = None) -> list[Cloud]:
    allowed = list(spec.placement.clouds)
    if clouds is None:
        return _clouds_of_region(spec, region) if region else allowed
    chosen = list(clouds)
    unknown = [c for c in chosen if c not in CLOUDS]
    if unknown:
        raise input_error(
            "--cloud", "is not a supported cloud", value=unknown[0], fix=f"use one of {', '.join(CLOUDS)}"
        )
    return chosen


def _clouds_of_region(spec: WorkloadSpec, region: str) -> list[Cloud]:
    """The one allowed cloud a `--region` given without `--cloud` belongs to: the cloud whose placement.regions
    list it, else the one cloud that has a region of that name (regions.csv). A name several clouds use needs
    --cloud."""
    allowed = list(spec.placement.clouds)
    listed = [c for c in allowed if region in (spec.placement.regions.get(c) or [])]
    having = listed or clouds_with_region(region, allowed)
    if len(having) == 1:
        return having
    if not having:
        raise unknown_region(region, allowed, field="--region",
                             message=f"is not a region name of the workload's clouds ({', '.join(allowed)})")
    raise input_error("--region", f"could be a region of {', '.join(having[:-1])} or {having[-1]}", value=region,
                      fix=f"say which cloud with --cloud ({' or '.join(f'--cloud {c}' for c in having)})")


def _regions(spec: WorkloadSpec, cloud: Cloud, region: str | None) -> list[str]:
    field_name = "--region" if region else f"placement.regions.{cloud}"
    regions = [region] if region else (spec.placement.regions.get(cloud) or [CATALOG_REGIONS[cloud]])
    for name in regions:
        if not clouds_with_region(name, [cloud]):  # refused, not planned at a price borrowed from another region
            raise unknown_region(name, [cloud], field=field_name, message=f"is not {with_article(cloud)} region name")
    return regions


def _rates_for(book: PriceBook, currency: str) -> dict[str, float]:
    return {c: r for c in book.rates.usd_per_unit if (r := book.rates.convert(1.0, c, currency)) is not None}


# ---- one cloud -----------------------------------------------------------------------------------------


def _plan_cloud(demand: Demand, cloud: Cloud, regions: list[str], catalog: Catalog,
                shared: dict[tuple[object, ...], Sizing], alternatives: int | None = ALTERNATIVES_SHOWN
                ) -> CloudOutcome:
    excluded: Counter[str] = Counter()
    blockers: dict[str, list[tuple[float, str]]] = {}
    priced: list[Priced] = []
    too_big: list[tuple[Candidate, Sizing, list[str]]] = []  # one server holds too little: for replicas across servers
    checked = 0

    def add(sizing: Sizing, sold_in: list[str]) -> None:
        if sizing.blocked is not None:
            nodes = sizing.candidate.nodes
            what = sizing.candidate.offer.name + (f" across {nodes} servers a replica" if nodes > 1 else "")
            blockers.setdefault(sizing.blocked.kind, []).append((sizing.blocked.gap, f"{what}: {sizing.blocked}"))
            return
        for region in sold_in:
            price = _price(demand, sizing, region, catalog.prices, catalog.today)
            over = _over_budget(demand, sizing, region, price)
            if over is not None:
                blockers.setdefault(over[0], []).append(over[1])
                continue
            priced.append(Priced(sizing, region, price))

    for offer in catalog.offers:
        if offer.cloud != cloud:
            continue
        checked += 1
        not_sold = {region: catalog.prices.not_sold_in(cloud, region, offer.name) for region in regions}
        sold_in = [region for region, reason in not_sold.items() if reason is None]
        if not sold_in:
            excluded[" and ".join(filter(None, not_sold.values()))] += 1
            continue
        for precision in precision_choices(demand.spec, demand.model.is_llm, offer.has_gpu):
            candidate_or_reason = _candidate(demand, offer, precision)
            if isinstance(candidate_or_reason, str):
                excluded[candidate_or_reason] += 1
                continue
            sizing = size_processes(demand, candidate_or_reason, lambda c: _size(demand, c, shared))
            if sizing.blocked is not None and sizing.blocked.kind == "memory":
                too_big.append((candidate_or_reason, sizing, sold_in))
            add(sizing, sold_in)
    # Replicas across servers are planned, not provisioned yet (MULTI_NODE_REPLICAS): sized only where no replica of
    # one server serves the workload on this cloud, so that they never displace one that can be deployed.
    if not priced:
        for candidate, single, sold_in in too_big:
            across = size_nodes(demand, candidate, single, lambda c: _size(demand, c, shared))
            if across is not single:
                add(across, sold_in)
            elif candidate.offer.has_gpu and (why := multi_node_problem(demand, candidate)):
                excluded[f"no replica across servers of {candidate.offer.gpu_model} offers: {why}"] += 1
    ranked = sorted(priced, key=rank_key)
    shown = len(ranked) if alternatives is None else alternatives + 1
    ranked[:shown] = [p._replace(sizing=with_autoscaling(p.sizing)) for p in ranked[:shown]]
    plans = [_deployment_plan(demand, p, ranked, cloud, catalog.prices) for p in ranked[:shown]]
    return CloudOutcome(
        cloud=cloud,
        regions=regions,
        chosen=plans[0] if plans else None,
        alternatives=plans[1:],
        blocked_by=[] if plans else _summarise_blocks(blockers, excluded),
        candidates_checked=checked,
    )


def shared_sizing_key(candidate: Candidate) -> tuple[object, ...] | None:
    """All that sizing reads of a GPU offer: its accelerators and what runs on them, not its name, vCPUs or host
    memory (a calibration row, too, names GPU hardware by id and count). GPU offers (of any cloud) that agree on it
    are sized once; CPU offers, one by one (None)."""
    offer = candidate.offer
    if offer.gpu is None:
        return None
    return (offer.gpu, offer.gpu_count, candidate.engine, candidate.precision, candidate.dtype, candidate.notes,
            candidate.processes, candidate.nodes, offer.link if candidate.nodes > 1 else None)


def _size(demand: Demand, candidate: Candidate, shared: dict[tuple[object, ...], Sizing]) -> Sizing:
    """`size_candidate`, reusing the sizing of an offer with the same `shared_sizing_key` (the costly part of a plan:
    a cloud lists the same accelerators in several sizes of host, and the clouds share accelerators)."""
    key = shared_sizing_key(candidate)
    if key is None:
        return size_candidate(demand, candidate)
    if key not in shared:
        shared[key] = size_candidate(demand, candidate)
    return shared[key]._replace(candidate=candidate)


def _over_budget(demand: Demand, sizing: Sizing, region: str, price: Price) -> tuple[str, tuple[float, str]] | None:
    """Why this option is outside the monthly budget (blocker kind, (gap, line)); None: within it, or no budget.

    An option without a price in the report's currency cannot be shown to meet a budget, so it never bypasses one.
    """
    budget = demand.spec.placement.monthly_budget
    if budget is None:
        return None
    currency = demand.spec.placement.currency
    what = f"{sizing.servers}x {sizing.candidate.offer.name} in {region}"
    if price.monthly_ranking is None:
        reason = "no price known" if price.monthly is None else f"no exchange rate for {price.monthly.currency}"
        return "budget_unpriced", (math.inf, f"{what}: {reason}, so it cannot be shown to meet the budget")
    if price.monthly_ranking.amount <= budget:
        return None
    line = f"{what}: {price.monthly_ranking} per month, budget {budget:,.2f} {currency}"
    return "budget", (price.monthly_ranking.amount / budget, line)


BLOCKER_LABELS = {
    "memory": "does not fit in memory",
    "ttft": "misses the TTFT target",
    "tpot": "misses the TPOT target",
    "latency": "misses the latency target",
    "replicas": "needs too many replicas",
    "tensor_parallel": "GPU count does not suit tensor parallelism",
    "cpu_facts": "no CPU facts",
    "batch": "one request is more than one batch holds",
    "budget": "over the monthly budget",
    "budget_unpriced": "no known price, so not within the monthly budget",
}


def _summarise_blocks(blockers: dict[str, list[tuple[float, str]]], excluded: Counter[str]) -> list[str]:
    """One line per kind of blocker, closest to feasible first, naming the closest offer."""
    lines = []
    for kind, items in sorted(blockers.items(), key=lambda item: min(gap for gap, _ in item[1])):
        closest = min(items, key=lambda item: item[0])[1]
        lines.append(f"{BLOCKER_LABELS.get(kind, kind)} ({len(items)} offers); closest: {closest}")
    lines += [reason + (f" ({count} offers)" if count > 1 else "") for reason, count in excluded.most_common()]
    return lines or ["no catalog offer matches the placement"]


def candidate_for(demand: Demand, offer: Offer, processes: int = 1, precision: Precision | None = None
                  ) -> Candidate | str:
    """The engine and precision `offer` runs for `demand` as the planner chooses them, with `processes` model processes
    per server: a planned deployment rebuilt (`inferstack calibrate`), or why the planner would not make it.
    `precision`: the plan's, where the workload let the planner choose (default: the workload's first choice)."""
    chosen = precision or precision_choices(demand.spec, demand.model.is_llm, offer.has_gpu)[0]
    candidate = _candidate(demand, offer, chosen)
    return candidate if isinstance(candidate, str) else candidate._replace(processes=processes)


def default_precision(llm: bool, gpu: bool) -> Precision:
    """A workload's precision when it names none: bf16 for LLMs, fp16 on GPUs and fp32 on CPUs for other models."""
    return Precision.BF16 if llm else (Precision.FP16 if gpu else Precision.FP32)


def precision_choices(spec: WorkloadSpec, llm: bool, gpu: bool) -> list[Precision]:
    """The precisions the planner may serve a workload's model at on one kind of offer: the workload's one, each of its
    list, or for `auto` the default and, for an LLM on a GPU, the quantized precisions a published study finds
    lossless (sizing/data/precision_accuracy.csv). The cheapest feasible one wins; the plan states its accuracy."""
    precision = spec.precision
    if precision is None:
        return [default_precision(llm, gpu)]
    if precision == "auto":
        return [default_precision(llm, gpu), *(lossless_precisions() if llm and gpu else ())]
    if isinstance(precision, list):
        return list(dict.fromkeys(precision))
    return [precision]


def _candidate(demand: Demand, offer: Offer, precision: Precision) -> Candidate | str:
    """The engine `offer` would run at `precision`, or why the offer is excluded before sizing."""
    spec = demand.spec
    placement = spec.placement
    if offer.unsupported_reason:
        return f"{offer.gpu_model} offers skipped: {offer.unsupported_reason}"
    device = "gpu" if offer.has_gpu else "cpu"
    if placement.device != "auto" and placement.device != device:
        return f"{device.upper()} offers excluded by placement.device={placement.device}"
    if offer.gpu is not None and not _gpu_allowed(offer, placement.gpus_allow, placement.gpus_deny):
        return f"{offer.gpu.id} excluded by placement.gpus_allow/gpus_deny"
    llm = demand.model.is_llm
    notes: list[str] = []
    if not llm:
        if precision.is_gguf:
            return f"GGUF precision {precision.value} applies to LLMs only"
        engine = Engine.ONNXRUNTIME if spec.engine is Engine.AUTO else spec.engine
        if engine is not Engine.ONNXRUNTIME:
            return f"engine {engine.value} does not serve {demand.model.kind} models (use onnxruntime)"
        return _runnable(offer, engine, precision)
    if offer.has_gpu:
        engine = (
            spec.engine if spec.engine is not Engine.AUTO else (Engine.LLAMACPP if precision.is_gguf else Engine.VLLM)
        )
        if engine is Engine.ONNXRUNTIME:
            return "onnxruntime does not serve LLMs in inferstack (use vllm or llamacpp)"
        if engine is Engine.VLLM and precision.is_gguf:
            return f"vLLM does not serve GGUF ({precision.value}): use engine llamacpp"
        return _runnable(offer, engine, precision)
    if spec.engine not in (Engine.AUTO, Engine.LLAMACPP):
        return f"engine {spec.engine.value} has no CPU model (CPU LLMs run on llama.cpp)"
    if precision is Precision.MXFP4:
        return "MXFP4 checkpoints are not served by llama.cpp on CPU"
    gguf = CPU_GGUF_FOR.get(precision, precision)
    if gguf is not precision:
        notes.append(f"on CPU, llama.cpp serves {precision.value} as GGUF {gguf.value}")
    return Candidate(offer, Engine.LLAMACPP, gguf, tuple(notes))


def _runnable(offer: Offer, engine: Engine, precision: Precision) -> Candidate | str:
    """The candidate with the dtype its GPU runs (engine_kernels.csv), or why the GPU cannot run it."""
    if offer.gpu is None:
        return Candidate(offer, engine, precision)
    served = served_precision(engine, precision, offer.gpu)
    if isinstance(served, str):
        return served
    notes = (served.note,) if served.note else ()
    return Candidate(offer, engine, precision, notes, dtype=served.precision)


def _gpu_allowed(offer: Offer, allow: list[str], deny: list[str]) -> bool:
    assert offer.gpu is not None
    names = {offer.gpu.id.lower(), offer.gpu.name.lower(), offer.gpu_model.lower()}
    if any(d.lower() in names for d in deny):
        return False
    return not allow or any(a.lower() in names for a in allow)


# ---- prices --------------------------------------------------------------------------------------------


def _price(demand: Demand, sizing: Sizing, region: str, book: PriceBook, today: datetime.date) -> Price:
    offer = sizing.candidate.offer
    found = book.lookup(offer.cloud, region, offer.name)
    if found is None:
        return Price(
            hourly_per_instance=None,
            monthly=None,
            monthly_ranking=None,
            per_million_output_tokens=None,
            source=None,
            source_date=None,
            priced_region=None,
        )
    listed, substitute = found
    age = price_age_days(listed.source_date, today)
    monthly = listed.amount_per_hour * HOURS_PER_MONTH * sizing.servers
    currency = demand.spec.placement.currency
    converted = book.rates.convert(monthly, listed.currency, currency)
    per_million = None
    if converted is not None and sizing.output_tokens_per_s:
        tokens_per_month = sizing.output_tokens_per_s * 3600 * HOURS_PER_MONTH
        per_million = Money(amount=converted / tokens_per_month * 1e6, currency=currency)
    return Price(
        hourly_per_instance=Money(amount=listed.amount_per_hour, currency=listed.currency),
        monthly=Money(amount=monthly, currency=listed.currency),
        monthly_ranking=Money(amount=converted, currency=currency) if converted is not None else None,
        per_million_output_tokens=per_million,
        source=listed.source,
        source_date=listed.source_date,
        priced_region=listed.region,
        substitute=substitute,
        age_days=age,
        flags=[flag for flag, raised in (("stale", age is not None and age > STALE_PRICE_DAYS),
                                         ("undated", age is None), ("borrowed", substitute)) if raised],
    )


# ---- the plan ------------------------------------------------------------------------------------------


def _deployment_plan(demand: Demand, priced: Priced, ranked: list[Priced], cloud: Cloud,
                     book: PriceBook) -> DeploymentPlan:
    sizing, candidate = priced.sizing, priced.sizing.candidate
    offer, spec = candidate.offer, demand.spec
    device = "gpu" if offer.has_gpu else "cpu"
    runtime = runtime_for_engine(candidate.engine.value)
    model = demand.model
    fmt = FORMATS[candidate.precision]
    size_gib = (
        weight_bytes(model.arch, candidate.precision) if model.arch else model.params * fmt.bits_per_weight / 8
    ) / 2**30
    processes = sizing.processes
    tp = offer.gpu_count // processes if offer.has_gpu and model.is_llm else 1
    performance = Performance(
        ttft_p95_ms=_round(sizing.ttft_p95_ms),
        tpot_p95_ms=_round(sizing.tpot_p95_ms),
        latency_p95_ms=round(sizing.latency_p95_ms, 1),
        output_tokens_per_s=_round(sizing.output_tokens_per_s),
        capacity_requests_per_s=round(sizing.capacity_rps, 3),
        load_requests_per_s=round(sizing.load_rps, 3),
        utilization=round(sizing.utilization, 3),
        concurrency_per_replica=sizing.concurrency_per_replica,
    )
    max_model_len = demand.max_model_len if model.is_llm else None
    disk = DISK_BASE_GIB[device] + runtime.disk_gib + math.ceil(size_gib * 1.2)
    disk_gib = int(math.ceil(disk / 10) * 10)
    image, image_notes = server_image(spec.startup, cloud)
    stream, stream_notes = model_loading(spec.startup, cloud, runtime.id, device)
    server = Server(cloud=cloud, runtime=runtime.id, device=device, model_gib=size_gib,
                    network_gbps=offer.network_gbps, local_nvme_gb=offer.local_nvme_gb, disk_gib=disk_gib,
                    processes=sizing.processes, stream=stream, image=image.image,
                    caches=runtime_caches(image.image, runtime.id, device, sizing.processes))
    start = cold_start(server)
    fleet = _fleet(spec, sizing, start)
    spot_floor = _spot_above_floor(demand, priced, ranked, fleet, book)
    warm = warm_start(server)
    pool, pool_notes = warm_pool(spec.startup, cloud, priced.region, fleet, spot_floor, disk_gib, book.rates,
                                 spec.placement.currency, cold=start, warm=warm, caches=server.caches,
                                 local_storage=bool(offer.local_nvme_gb), nodes=candidate.nodes)
    if pool is not None and fleet is not None:  # the autoscaler waits for a pool server's start
        fleet = fleet.model_copy(update={"scale_out_cooldown_s": fleet_cold_start_s(warm)})
    startup = image.model_copy(update={"runtime_caches": server.caches,
                                       "model_loading": "stream" if stream else "download", "warm_pool": pool,
                                       "warm_start": warm if pool else None,
                                       "notes": image_notes + stream_notes + pool_notes})
    # Behind a load balancer, an answer may last no longer than the balancer waits: past that, the runtime caps it.
    limit_s = CLOUD_FACTS[cloud].load_balancer_timeout_s
    answer_cap = answer_token_cap(performance, max_model_len, limit_s) if fleet else None
    cap_notes: list[str] = []
    cap_warnings: list[str] = []
    if answer_cap is not None and max_model_len is not None:
        cap_notes.append(answer_cap_sentence(performance, max_model_len, answer_cap, limit_s,
                                             f"{CLOUD_FACTS[cloud].display_name}'s load balancer"))
        if answer_cap < demand.output_tokens_p95:
            cap_warnings.append(f"answers are cut at {answer_cap} tokens, fewer than the workload's p95 answer of "
                                f"{demand.output_tokens_p95}: plan a faster machine (slo.tpot_p95_ms) or a cloud "
                                "whose load balancer waits longer")
    serving = Serving(
        runtime=runtime.id,
        engine=candidate.engine.value,
        backend=runtime.backend(device),
        metrics_port=runtime.metrics_port,
        health_path=runtime.health_path,
        max_model_len=max_model_len,
        max_num_seqs=sizing.slots if model.is_llm else None,
        max_answer_tokens=answer_cap,
        gpu_memory_utilization=runtime.gpu_memory_fraction,
        tensor_parallel=tp,
        pipeline_parallel=candidate.nodes,
        processes=processes,
        dtype=candidate.served_dtype.value,
        quantization=fmt.engine_flag,
        kv_cache_dtype=spec.kv_cache_dtype.value,
        threads=sizing.threads,
    )
    cpu_processes = 1 if offer.has_gpu else processes  # CPU processes share the server's RAM
    accelerator = (
        Accelerator(
            id=offer.gpu.id,
            name=offer.gpu.name,
            memory_gib=offer.gpu.memory_gb,
            count=offer.gpu_count,
            attach_type=offer.attach_type,
        )
        if offer.gpu
        else None
    )
    from inferstack.sizing.explain import (
        cache_line,
        cold_start_line,
        fleet_line,
        rationale,
        rollout_line,
        spot_line,
        warnings,
    )

    nodes = replica_nodes(demand, sizing)
    zones = min(sizing.replicas, demand.stage.min_zones) if sizing.replicas > 1 else 1
    rollout = rollout_for(sizing.servers, zones, fleet, fleet_cold_start_s(start), candidate.nodes)
    fleet_notes = [fleet_line(fleet, sizing, demand, start)] if fleet else [cold_start_line(start)]
    fleet_notes.append(rollout_line(rollout, spec.model_revision, cloud))
    started = startup_line(startup, fleet, start, priced.price.monthly_ranking)
    fleet_notes += ([started] if started else []) + startup.notes
    revision = spec.model_revision
    return DeploymentPlan(
        workload=spec.name,
        stage=spec.stage,
        cloud=cloud,
        region=priced.region,
        instance_type=offer.machine_type,
        offer=offer.name,
        instance_count=sizing.servers,
        replicas=sizing.replicas,
        replica_nodes=nodes,
        zones=zones,
        spot=spec.placement.spot and spec.stage != "production",
        device=device,
        vcpus=offer.vcpus,
        memory_gib=offer.memory_gib,
        local_nvme_gb=offer.local_nvme_gb,
        accelerator=accelerator,
        tensor_parallel=tp,
        model=ModelArtifact(
            name=model.name,
            kind=model.kind,
            source_uri=model.source_uri,
            params_b=round(model.params / 1e9, 3),
            artifact_format=runtime.artifact_format,
            size_gib=round(size_gib, 2),
            bucket_prefix=f"models/{model.name}/{candidate.precision.value}/" + (f"{revision}/" if revision else ""),
            revision=revision,
        ),
        precision=candidate.precision.value,
        serving=serving,
        disk_gib=disk_gib,
        memory=MemoryBreakdown(
            device=device,
            capacity_gib=round(sizing.capacity_gib, 2),
            usable_gib=round(sizing.usable_gib * cpu_processes, 2),
            weights_gib=round(sizing.weights_gib, 2),
            overhead_gib=round(sizing.overhead_gib, 2),
            kv_cache_gib=round(max(sizing.kv_cache_gib, 0), 2),
            kv_cache_needed_gib=round(sizing.kv_needed_gib, 2),
            total_gib=round((sizing.weights_gib + sizing.overhead_gib + sizing.kv_needed_gib) * cpu_processes, 2),
            processes=processes,
            kv_cache_bytes_per_token=sizing.kv_bytes_per_token,
            kv_cache_capacity_tokens=sizing.kv_capacity_tokens,
            max_concurrency=sizing.max_concurrency,
        ),
        performance=performance,
        price=priced.price,
        rationale=rationale(demand, priced, ranked, nodes) + cache_line(demand) + fleet_notes + cap_notes
        + ([spot_line(spot_floor)] if spot_floor else []) + _precision_notes(demand, priced, ranked),
        warnings=warnings(demand, priced, fleet) + _ceiling_warning(spec, sizing) + cap_warnings,
        cold_start=start,
        startup=startup,
        fleet=fleet,
        slo=_objectives(demand),
        cache=spec.cache,
        spot_above_floor=spot_floor,
        rollout=rollout,
    )


def _spot_above_floor(demand: Demand, priced: Priced, ranked: list[Priced], fleet: Fleet | None,
                      book: PriceBook) -> SpotAboveFloor | None:
    """A production fleet's spot capacity above its on-demand floor (workload `placement.spot: true`), where its cloud's
    group can keep such a floor and the autoscaler may grow above it (explain.warnings says why not otherwise).

    Fallback types are the options this plan ranked in its region that size exactly as it does (the same accelerators,
    engine and precision: `shared_sizing_key`) with at least its vCPUs and memory, cheapest first: a CPU plan has none,
    since CPU families differ in speed."""
    spec, sizing = demand.spec, priced.sizing
    offer = sizing.candidate.offer
    if not spec.placement.spot or spec.stage != "production" or fleet is None:
        return None
    if not CLOUD_FACTS[offer.cloud].on_demand_floor or fleet.max_replicas <= fleet.min_replicas:
        return None
    key = shared_sizing_key(sizing.candidate)
    fallbacks = [] if key is None else [
        p.sizing.candidate.offer.machine_type for p in ranked
        if p.region == priced.region and p.sizing.candidate.offer.name != offer.name
        and shared_sizing_key(p.sizing.candidate) == key and p.sizing.replicas == sizing.replicas
        and p.sizing.candidate.offer.vcpus >= offer.vcpus and p.sizing.candidate.offer.memory_gib >= offer.memory_gib]
    spot = book.spot_price(offer.cloud, priced.region, offer.name)
    nodes = sizing.candidate.nodes  # servers per replica: the fleet counts replicas
    base, above = fleet.min_replicas * nodes, (fleet.max_replicas - fleet.min_replicas) * nodes
    # A borrowed on-demand price (another region's) is not blended with this region's spot price.
    hourly = None if priced.price.substitute else priced.price.hourly_per_instance
    currency = spec.placement.currency

    def monthly(amount: float | None, billed_in: str) -> Money | None:  # in the report's currency, like the cost row
        converted = None if amount is None else book.rates.convert(amount * HOURS_PER_MONTH, billed_in, currency)
        return None if converted is None else Money(amount=converted, currency=currency)

    on_demand = monthly(hourly.amount * base, hourly.currency) if hourly else None
    spot_part = monthly(spot.amount_per_hour * above, spot.currency) if spot else None
    return SpotAboveFloor(
        on_demand_base=base,
        spot_above=above,
        instance_types=[offer.machine_type, *list(dict.fromkeys(fallbacks))[:MAX_FALLBACK_TYPES]],
        spot_hourly_per_instance=Money(amount=spot.amount_per_hour, currency=spot.currency) if spot else None,
        spot_price_source=spot.source if spot else None,
        spot_price_date=spot.source_date if spot else None,
        monthly_at_ceiling=(Money(amount=on_demand.amount + spot_part.amount, currency=currency)
                            if on_demand and spot_part else None),
        on_demand_monthly_at_ceiling=monthly(hourly.amount * (base + above), hourly.currency) if hourly else None,
    )


def _precision_notes(demand: Demand, priced: Priced, ranked: list[Priced]) -> list[str]:
    """Where the workload let the planner choose the precision (`precision: auto` or a list): which one it chose,
    among which, what the cheapest option at each other precision costs, and the chosen one's known accuracy cost
    with its source. Never silent: a plan whose precision was chosen always says so."""
    spec, candidate = demand.spec, priced.sizing.candidate
    offer = candidate.offer
    if not spec.planner_chooses_precision:
        return []
    choices = precision_choices(spec, demand.model.is_llm, offer.has_gpu)
    others = []
    for precision in choices:
        best = next((p for p in ranked if p.sizing.candidate.precision is precision
                     and p.sizing.candidate.offer.has_gpu == offer.has_gpu), None)
        if precision is not candidate.precision:
            where = f"{best.sizing.replicas}x {best.sizing.candidate.offer.name}" if best else ""
            others.append(f"{precision.value}: " + (
                "no feasible option" if best is None else
                f"{where}, {best.price.monthly_ranking}/month" if best.price.monthly_ranking else
                f"{where}, price unknown"))
    how = f"precision: {spec.precision}" if spec.precision == "auto" else (
        "precision: [" + ", ".join(p.value for p in choices) + "]")
    weight_only = (candidate.precision is Precision.FP8 and offer.gpu is not None and offer.gpu.fp8_tflops is None)
    served = (f" (on {offer.gpu.id} the engine runs the FP8 weights weight-only, activations in 16 bit: not the "
              "studied W8A8 scheme)" if weight_only and offer.gpu else "")
    ranked_by = ("as the cheapest precision that meets the targets" if priced.price.monthly_ranking else
                 "by the fewest GPUs among unpriced options (no price is known)")
    return [f"precision {candidate.precision.value}, chosen ({how}) {ranked_by}"
            + (f" (the best at each other: {'; '.join(others)})" if others else "")
            + f"; accuracy: {accuracy_sentence(candidate.precision)}{served}"]


def _objectives(demand: Demand) -> Objectives:
    """The targets the plan holds; an LLM's end-to-end bound is its TTFT target plus its TPOT target for each further
    token of a p95-long answer (both p95s summed: a bound, not a percentile)."""
    latency = demand.latency_p95_ms
    if latency is None and demand.ttft_p95_ms is not None and demand.tpot_p95_ms is not None:
        latency = demand.ttft_p95_ms + demand.tpot_p95_ms * max(demand.output_tokens_p95 - 1, 0)
    return Objectives(ttft_p95_ms=demand.ttft_p95_ms, tpot_p95_ms=demand.tpot_p95_ms,
                      latency_p95_ms=round(latency, 1) if latency is not None else None)


def _fleet(spec: WorkloadSpec, sizing: Sizing, estimate: ColdStart) -> Fleet | None:
    """An autoscaled fleet when the plan has several replicas, or when the workload lets it grow beyond one."""
    if sizing.replicas == 1 and (spec.scaling.max_replicas or 1) <= 1:
        return None
    ceiling = spec.scaling.max_replicas or 2 * sizing.replicas
    start = fleet_cold_start_s(estimate)
    return Fleet(
        min_replicas=sizing.replicas,
        max_replicas=max(ceiling, sizing.replicas),
        # The load balancer counts the requests the cache answers too: a server carries its target of runtime
        # requests at target / (1 - hit rate) requests in all.
        target_requests_per_s=round(sizing.target_rps / (1 - (spec.cache.expected_hit_rate if spec.cache else 0)), 4),
        cold_start_s=start,
        health_check_grace_s=health_check_grace_s(start),
        scale_out_cooldown_s=start,
        scale_in_cooldown_s=scale_in_cooldown_s(start),
    )


def _ceiling_warning(spec: WorkloadSpec, sizing: Sizing) -> list[str]:
    ceiling = spec.scaling.max_replicas
    if ceiling is None or ceiling >= sizing.replicas:
        return []
    return [f"scaling.max_replicas ({ceiling}) is below the {sizing.replicas} servers the plan needs: the fleet is "
            f"fixed at {sizing.replicas}; raise it to let the fleet grow"]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)

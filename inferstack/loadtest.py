"""`inferstack loadtest URL`: drive an OpenAI-compatible endpoint and measure TTFT, TPOT, latency and throughput.

The engine is a thin asyncio client over aiohttp, not a load-generator package. Those were weighed on PyPI
(2026-12) against what a load test of one endpoint needs:
- guidellm 0.8.1 requires torch, transformers and datasets: gigabytes to send HTTP requests;
- aiperf 0.13.0 requires some 45 packages (transformers, dash, kubernetes-asyncio, pandas~=2.3, rich~=14.1 …)
  and runs as a multi-process ZeroMQ service driven by its own CLI, not a library call;
- inference-perf has no distribution that installs here;
- locust runs on gevent (it monkey-patches the process) and times a request as one figure: the first-token
  and per-token timing of a stream would be hand-written on top of it all the same.
What is measured is small: per request, the clock at the first content chunk, at the last one and at the end
of the stream, and the tokens generated. aiohttp (one package) streams the server-sent events; the client is
tested against a stub server with known, injected latencies (tests/test_loadtest.py).

Definitions (those of vLLM's benchmark_serving):
- TTFT: request sent → first chunk with content. E2E: request sent → end of the stream.
- TPOT: (last content chunk − first) / (output tokens − 1), per request with at least 2 tokens.
- Output tokens: the server's `usage.completion_tokens` when it sends usage, else the content chunks.
- Throughput: tokens and requests of the successful requests over the first send → last end window.
Percentiles are nearest-rank over the successful requests.

Prompts are the word "hello" repeated: one token per repetition in the Llama, Qwen and GPT tokenizers, so
the prompt is `--input-tokens` long to within the chat template. `ignore_eos` asks vLLM, SGLang and
llama.cpp for exactly `max_tokens` tokens.

Load is open (`--rate`: Poisson arrivals, seeded) or closed (`--concurrency`: that many requests in flight).
With `--workload` and neither, the rate is the plan's: per server by default, the fleet's with `--fleet`
(see `plan_target`). Every run is bounded: at most `--requests` requests, and at `--duration` seconds no new
request starts and the ones in flight are cut and counted as failed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import re
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import aiohttp

from inferstack.clouds import Cloud
from inferstack.errors import InfeasibleError, input_error
from inferstack.plan import DeploymentPlan
from inferstack.sizing.simulate import TrafficShape, length_sampler, percentile, serving_replicas
from inferstack.spec import Engine, Precision, WorkloadSpec

Api = Literal["chat", "completions"]

PROMPT_WORD = "hello "
CONNECT_TIMEOUT_S = 10.0
CUT_AT_DURATION = "cut at --duration"
NO_REQUEST_SUCCEEDED = 1  # the exit code when every request failed: the figures measure nothing
MAX_REQUESTS = 1_000_000  # token counts and arrival times are drawn up front: a bound on that memory
SWEEP_STEPS = 8  # concurrency 1, 2, 4 … 128 at most
SWEEP_MIN_GAIN = 0.10  # a step that adds less than 10 % output tokens/s means the server is saturated


# ---- inputs --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The endpoint: its base URL (before /v1), which API, the model (None: the first /v1/models lists)."""

    base_url: str
    api: Api = "chat"
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class LoadShape:
    """What to send: how many requests, open (rate) or closed (concurrency) loop, and their token counts."""

    requests: int
    traffic: TrafficShape
    rate_per_s: float | None = None
    concurrency: int | None = None
    duration_s: float = 600.0
    seed: int = 0


def base_url(text: str) -> str:
    """The endpoint's root: an http(s) URL with a host; a trailing /v1 (as clients are configured) is dropped."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise input_error("URL", "must be an http:// or https:// URL with a host", value=text,
                          fix="give the server's address, e.g. http://127.0.0.1:8000 or https://api.example.com/v1")
    root = text.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def api_key_from_env(variable: str | None) -> str | None:
    """The API key from the environment variable named by --api-key-env (never from the command line)."""
    if variable is None:
        return None
    key = os.environ.get(variable)
    if not key:
        raise input_error("--api-key-env", f"environment variable {variable} is not set or empty", value=variable,
                          fix=f"export {variable}=<your key> first, or leave out --api-key-env")
    return key


def constant_traffic(input_tokens: int, output_tokens: int) -> TrafficShape:
    return TrafficShape(input_tokens, input_tokens, output_tokens, output_tokens, input_tokens + output_tokens)


# ---- one request ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestRecord:
    """One request's timing, in seconds from its send; `error` None when it succeeded."""

    ttft_s: float = 0.0
    last_token_s: float = 0.0
    e2e_s: float = 0.0
    output_tokens: int = 0
    error: str | None = None

    @property
    def tpot_s(self) -> float | None:
        return (self.last_token_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else None


def _request_body(target: Target, model: str, prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
    prompt = PROMPT_WORD * prompt_tokens
    body: dict[str, Any] = {"model": model, "max_tokens": output_tokens, "stream": True, "ignore_eos": True,
                            "temperature": 0, "stream_options": {"include_usage": True}}
    if target.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def _chunk_text(chunk: dict[str, Any], api: Api) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    if api == "chat":
        return str((choices[0].get("delta") or {}).get("content") or "")
    return str(choices[0].get("text") or "")


async def send_request(session: aiohttp.ClientSession, target: Target, model: str, prompt_tokens: int,
                       output_tokens: int) -> RequestRecord:
    """Send one streaming request and time it; any failure is a record with the reason, never an exception."""
    loop = asyncio.get_running_loop()
    sent = loop.time()
    first = last = None
    chunks = 0
    usage_tokens: int | None = None
    path = "/v1/chat/completions" if target.api == "chat" else "/v1/completions"
    try:
        async with session.post(target.base_url + path,
                                json=_request_body(target, model, prompt_tokens, output_tokens)) as response:
            if response.status != 200:
                return RequestRecord(error=f"HTTP {response.status}")
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[len(b"data:"):].strip()
                if data == b"[DONE]":
                    continue  # read on to the end of the body: a connection left half-read is not reused
                chunk = json.loads(data)
                if _chunk_text(chunk, target.api):
                    last = loop.time()
                    first = first or last
                    chunks += 1
                usage_tokens = (chunk.get("usage") or {}).get("completion_tokens") or usage_tokens
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
        return RequestRecord(error=type(error).__name__)
    if first is None or last is None:
        return RequestRecord(error="no output tokens")
    return RequestRecord(ttft_s=first - sent, last_token_s=last - sent, e2e_s=loop.time() - sent,
                         output_tokens=usage_tokens or chunks)


async def served_model(session: aiohttp.ClientSession, target: Target) -> tuple[str, str | None]:
    """The model to ask for (--model, else the first the endpoint lists at /v1/models) and what the listing says owns
    it (`owned_by`: vLLM and llama-server name their engine), None when it is not listed."""
    try:
        async with session.get(target.base_url + "/v1/models") as response:
            listed: list[dict[str, Any]] = []
            if response.status == 200:
                listed = (await response.json(content_type=None)).get("data") or []
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
        if target.model:
            return target.model, None
        raise input_error("URL", f"could not list the models at {target.base_url}/v1/models ({error})",
                          fix="check the address and that the server is up, or pass --model NAME") from None
    if target.model:
        entry = next((m for m in listed if isinstance(m, dict) and m.get("id") == target.model), {})
        return target.model, _owner(entry)
    if not listed:
        raise input_error("--model", f"{target.base_url}/v1/models lists no model",
                          fix="pass --model NAME (the name the server serves)")
    return str(listed[0]["id"]), _owner(listed[0])


def _owner(entry: dict[str, Any]) -> str | None:
    owner = entry.get("owned_by")
    return owner if isinstance(owner, str) and re.fullmatch(r"[A-Za-z0-9._-]{1,64}", owner) else None


# ---- a run ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p95: float
    p99: float

    @classmethod
    def of_seconds(cls, values: list[float]) -> Percentiles:
        if not values:
            return cls(0.0, 0.0, 0.0)
        return cls(*(round(percentile(values, q) * 1e3, 2) for q in (0.50, 0.95, 0.99)))


@dataclass(frozen=True)
class LoadResult:
    """What one run measured. `load` says what was offered: a rate or a concurrency."""

    model: str
    load: str
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    requests_ok: int
    requests_failed: int
    output_tokens_per_s: float
    requests_per_s: float
    duration_s: float
    failures: dict[str, int]
    served_by: str | None = None
    """What the server's model listing says owns the model (`owned_by`); None when it does not say."""

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model, "served_by": self.served_by, "load": self.load,
            "ttft_ms": vars(self.ttft_ms), "tpot_ms": vars(self.tpot_ms), "e2e_ms": vars(self.e2e_ms),
            "requests_ok": self.requests_ok, "requests_failed": self.requests_failed,
            "output_tokens_per_s": self.output_tokens_per_s, "requests_per_s": self.requests_per_s,
            "duration_s": self.duration_s, "failures": self.failures,
        }


def _summarise(model: str, load: str, records: list[RequestRecord], window_s: float) -> LoadResult:
    ok = [r for r in records if r.error is None]
    tpot = [t for t in (r.tpot_s for r in ok) if t is not None]
    window = max(window_s, 1e-9)
    return LoadResult(
        model=model, load=load,
        ttft_ms=Percentiles.of_seconds([r.ttft_s for r in ok]),
        tpot_ms=Percentiles.of_seconds(tpot),
        e2e_ms=Percentiles.of_seconds([r.e2e_s for r in ok]),
        requests_ok=len(ok), requests_failed=len(records) - len(ok),
        output_tokens_per_s=round(sum(r.output_tokens for r in ok) / window, 2) if ok else 0.0,
        requests_per_s=round(len(ok) / window, 3) if ok else 0.0,
        duration_s=round(window_s, 3),
        failures=dict(Counter(r.error for r in records if r.error is not None)),
    )


def _token_counts(shape: LoadShape) -> list[tuple[int, int]]:
    """(prompt, output) tokens per request, drawn like the simulator's: lognormal through mean and p95."""
    rng = random.Random(shape.seed)
    traffic = shape.traffic
    draw_prompt = length_sampler(rng, traffic.prompt_tokens, traffic.prompt_tokens_p95, 1,
                                 max(traffic.max_model_len - 1, 1))
    draw_output = length_sampler(rng, traffic.output_tokens, traffic.output_tokens_p95, 1, traffic.max_model_len)
    counts = []
    for _ in range(shape.requests):
        prompt = draw_prompt()
        counts.append((prompt, max(min(draw_output(), traffic.max_model_len - prompt), 1)))
    return counts


def arrival_offsets_s(shape: LoadShape) -> list[float]:
    """Poisson arrivals at `rate_per_s`: the send time of each request, in seconds from the start (seeded)."""
    assert shape.rate_per_s is not None
    rng = random.Random(shape.seed + 1)  # its own stream: the arrivals do not move when token counts change
    clock, offsets = 0.0, []
    for _ in range(shape.requests):
        offsets.append(clock)
        clock += rng.expovariate(shape.rate_per_s)
    return offsets


async def _drive(session: aiohttp.ClientSession, target: Target, model: str, shape: LoadShape) -> LoadResult:
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + shape.duration_s
    counts = iter(_token_counts(shape))
    records: list[RequestRecord] = []
    sent = 0
    last_end = start

    async def send(prompt_tokens: int, output_tokens: int) -> None:
        nonlocal sent, last_end
        sent += 1
        records.append(await send_request(session, target, model, prompt_tokens, output_tokens))
        last_end = loop.time()

    async def closed_loop_worker() -> None:
        for prompt_tokens, output_tokens in counts:
            if loop.time() >= deadline:
                return
            await send(prompt_tokens, output_tokens)

    tasks: list[asyncio.Task[None]] = []
    if shape.rate_per_s is not None:
        load = f"Poisson {shape.rate_per_s:g} requests/s"
        for offset, (prompt_tokens, output_tokens) in zip(arrival_offsets_s(shape), counts, strict=False):
            await asyncio.sleep(max(start + offset - loop.time(), 0.0))
            if loop.time() >= deadline:
                break
            tasks.append(asyncio.create_task(send(prompt_tokens, output_tokens)))
    else:
        load = f"{shape.concurrency} concurrent"
        tasks = [asyncio.create_task(closed_loop_worker()) for _ in range(shape.concurrency or 1)]
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=max(deadline - loop.time(), 0.0))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    records += [RequestRecord(error=CUT_AT_DURATION)] * (sent - len(records))
    return _summarise(model, load, records, last_end - start)


def _session(target: Target) -> aiohttp.ClientSession:
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    return aiohttp.ClientSession(
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
        # No pool limit: an open loop's requests must not queue in the client, where the wait would read as TTFT.
        connector=aiohttp.TCPConnector(limit=0),
    )


async def _run(target: Target, shape: LoadShape) -> LoadResult:
    async with _session(target) as session:
        model, served_by = await served_model(session, target)
        result = await _drive(session, target, model, shape)
        return dataclasses.replace(result, served_by=served_by)


T = TypeVar("T")


def _run_in_own_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` in an event loop of its own, leaving the process's as it was. asyncio.run would end by
    setting the current loop to None, after which asyncio.get_event_loop() raises, and code run later in the same
    process that asks for the current loop (Pulumi's mocks, `inferstack preview`) fails."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def run_loadtest(target: Target, shape: LoadShape) -> LoadResult:
    """One bounded run: `shape.requests` requests at most, `shape.duration_s` seconds at most."""
    return _run_in_own_loop(_run(target, shape))


async def _sweep(target: Target, shape: LoadShape, max_concurrency: int) -> list[LoadResult]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + shape.duration_s
    steps: list[LoadResult] = []
    async with _session(target) as session:
        model, _ = await served_model(session, target)
        concurrency = 1
        while concurrency <= max_concurrency and len(steps) < SWEEP_STEPS and loop.time() < deadline:
            step = LoadShape(shape.requests, shape.traffic, concurrency=concurrency,
                             duration_s=deadline - loop.time(), seed=shape.seed)
            steps.append(await _drive(session, target, model, step))
            if _saturated(steps):
                break
            concurrency *= 2
    return steps


def _saturated(steps: list[LoadResult]) -> bool:
    """The last step failed requests, or added less than SWEEP_MIN_GAIN output tokens/s over the one before."""
    last = steps[-1]
    if last.requests_failed:
        return True
    return len(steps) > 1 and last.output_tokens_per_s < steps[-2].output_tokens_per_s * (1 + SWEEP_MIN_GAIN)


def sweep_loadtest(target: Target, shape: LoadShape, max_concurrency: int) -> list[LoadResult]:
    """Closed-loop runs at concurrency 1, 2, 4 … up to `max_concurrency` or saturation (see `_saturated`), all
    within `shape.duration_s` together."""
    return _run_in_own_loop(_sweep(target, shape, max_concurrency))


# ---- the plan's predictions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanTarget:
    """The planned deployment, the rate to drive it at, and what the plan predicts at that rate."""

    deployment: str
    serves: dict[str, Any]  # model, precision, engine and accelerators: what a measurement is a measurement of
    basis: dict[str, Any]  # what `inferstack calibrate` rebuilds the prediction from (sizing/calibrate.py)
    rate_per_s: float
    traffic: TrafficShape
    ttft_p95_ms: float | None
    tpot_p95_ms: float | None
    latency_p95_ms: float
    output_tokens_per_s: float | None


def plan_target(plan: DeploymentPlan, traffic: TrafficShape, fleet: bool,
                workload: WorkloadSpec | None = None) -> PlanTarget:
    """What to offer and what to expect. The planner sizes each serving replica for load / serving replicas
    (production's spare down) and predicts its p95s at that rate, so one server (the default) is driven at that
    share and those p95s are its predictions. `fleet`: the URL is the load balancer, driven at the whole peak
    rate; with every replica up each carries less than in the sizing case, so the p95s are an upper bound."""
    perf = plan.performance
    share = 1 if fleet else serving_replicas(plan)
    tokens_per_s = perf.output_tokens_per_s / share if perf.output_tokens_per_s is not None else None
    where = "fleet" if fleet else "one server"
    return PlanTarget(
        deployment=f"{plan.summary()} ({where})",
        serves={"model": plan.model.name, "precision": Precision(plan.precision).value,
                "engine": Engine(plan.serving.engine).value,
                "accelerator": plan.accelerator.id if plan.accelerator else None,
                "accelerators_per_server": plan.gpus_per_instance, "instance_type": plan.instance_type},
        basis={"workload": workload.model_dump(mode="json") if workload else None, "cloud": plan.cloud,
               "offer": plan.offer, "processes": plan.serving.processes, "slots": plan.serving.max_num_seqs,
               "source_uri": plan.model.source_uri, "fleet": fleet},
        rate_per_s=perf.load_requests_per_s / share,
        traffic=traffic,
        ttft_p95_ms=perf.ttft_p95_ms,
        tpot_p95_ms=perf.tpot_p95_ms,
        latency_p95_ms=perf.latency_p95_ms,
        output_tokens_per_s=tokens_per_s,
    )


def workload_target(path: Path, cloud: Cloud | None, fleet: bool) -> PlanTarget:
    """Plan the workload file and take the chosen deployment (on `cloud`, else the cheapest)."""
    from inferstack.sizing.demand import demand_of
    from inferstack.sizing.models import resolve
    from inferstack.sizing.planner import plan_workload
    from inferstack.spec import load_workload

    spec = load_workload(path)
    report = plan_workload(spec, clouds=[cloud] if cloud else None)
    plan = report.outcome(cloud).chosen if cloud else report.best
    if plan is None:
        raise InfeasibleError(f"{path}: no feasible deployment to compare with; run `inferstack plan {path}`")
    return plan_target(plan, TrafficShape.of(demand_of(spec, resolve(spec.model))), fleet, spec)


def comparison(result: LoadResult, planned: PlanTarget) -> list[dict[str, Any]]:
    """Each predicted figure beside the measured one: 'plan p95 TTFT 193 ms, measured 240 ms, +24 %'."""
    rows = []
    for name, predicted, measured, unit in (
        ("p95 TTFT", planned.ttft_p95_ms, result.ttft_ms.p95, "ms"),
        ("p95 TPOT", planned.tpot_p95_ms, result.tpot_ms.p95, "ms"),
        ("p95 end-to-end", planned.latency_p95_ms, result.e2e_ms.p95, "ms"),
        ("output tokens/s", planned.output_tokens_per_s, result.output_tokens_per_s, "tokens/s"),
    ):
        if predicted is None:
            continue
        change = round((measured - predicted) / predicted * 100, 1) if predicted else None
        rows.append({"figure": name, "unit": unit, "plan": round(predicted, 2), "measured": measured,
                     "change_percent": change})
    return rows


def comparison_line(row: dict[str, Any]) -> str:
    change = "" if row["change_percent"] is None else f", {row['change_percent']:+.0f} %"
    return f"plan {row['figure']} {row['plan']:g} {row['unit']}, measured {row['measured']:g} {row['unit']}{change}"


# ---- the command ---------------------------------------------------------------------------------------


def render(result: LoadResult) -> str:
    """The human-readable table of one run."""
    lines = [f"{result.model}: {result.load}, {result.duration_s:g} s",
             f"  {'':<8}{'p50':>10}{'p95':>10}{'p99':>10}"]
    for name, figures in (("TTFT", result.ttft_ms), ("TPOT", result.tpot_ms), ("E2E", result.e2e_ms)):
        lines.append(f"  {name:<8}" + "".join(f"{v:>7.1f} ms" for v in (figures.p50, figures.p95, figures.p99)))
    failed = ", ".join(f"{reason}: {count}" for reason, count in result.failures.items())
    lines.append(f"  requests ok {result.requests_ok}, failed {result.requests_failed}"
                 + (f" ({failed})" if failed else ""))
    lines.append(f"  {result.output_tokens_per_s:g} output tokens/s, {result.requests_per_s:g} requests/s")
    return "\n".join(lines)


def shape_from_args(args: argparse.Namespace, planned: PlanTarget | None) -> LoadShape:
    """The load the flags ask for; with a workload, its token counts and the plan's rate unless overridden."""
    traffic = planned.traffic if planned else constant_traffic(args.input_tokens or 512, args.output_tokens or 128)
    if planned and (args.input_tokens or args.output_tokens):
        traffic = constant_traffic(args.input_tokens or traffic.prompt_tokens,
                                   args.output_tokens or traffic.output_tokens)
    rate = args.rate if args.rate is not None else (planned.rate_per_s if planned and not args.concurrency else None)
    concurrency = args.concurrency or (None if rate else 1)
    return LoadShape(requests=args.requests, traffic=traffic, rate_per_s=rate, concurrency=concurrency,
                     duration_s=args.duration, seed=args.seed)


def run_from_args(args: argparse.Namespace) -> int:
    """`inferstack loadtest`: validate, plan (with --workload), run or sweep, print; exit 1 when no request
    succeeded."""
    if args.requests > MAX_REQUESTS:
        raise input_error("--requests", f"must be at most {MAX_REQUESTS:,}", value=args.requests,
                          fix="run several load tests, or bound a long one by --duration")
    target = Target(base_url(args.url), api=args.api, model=args.model, api_key=api_key_from_env(args.api_key_env))
    planned = workload_target(args.workload, args.cloud, args.fleet) if args.workload else None
    shape = shape_from_args(args, planned)
    if args.sweep:
        steps = sweep_loadtest(target, shape, max_concurrency=args.concurrency or 2 ** (SWEEP_STEPS - 1))
        if args.json:
            print(json.dumps({"sweep": [s.to_json() for s in steps]}, indent=2))
        else:
            print("\n".join(render(s) for s in steps))
        return 0
    result = run_loadtest(target, shape)
    rows = comparison(result, planned) if planned else None
    # The plan predicts its own load: its rate and the workload's lengths. Other flags make the comparison a hint.
    as_planned = not (args.rate or args.concurrency or args.input_tokens or args.output_tokens)
    if args.json:
        out = result.to_json()
        if planned and rows is not None:
            out["plan"] = {"deployment": planned.deployment, **planned.serves, "as_planned": as_planned,
                           "rate_per_s": round(planned.rate_per_s, 4), "comparison": rows, "basis": planned.basis}
        print(json.dumps(out, indent=2))
    else:
        print(render(result))
        if planned and rows is not None:
            print(f"Compared with the plan: {planned.deployment}"
                  + ("" if as_planned else " (at another load or lengths than planned: a hint only)"))
            print("\n".join(f"  {comparison_line(row)}" for row in rows))
    return 0 if result.requests_ok else NO_REQUEST_SUCCEEDED

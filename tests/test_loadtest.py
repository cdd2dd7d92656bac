"""`inferstack loadtest` against a stub OpenAI-compatible server on loopback with known, injected latencies.

The stub (tests/openai_stub.py, a process of its own) streams each answer as the real engines do: its first
token `ttft_s` after the request, then one token every `gap_s`, `max_tokens` tokens in all, then a usage
chunk and [DONE]. What the load test measures must match what the stub did within a few per cent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inferstack import loadtest
from inferstack.cli import main
from inferstack.errors import InputError
from inferstack.loadtest import LoadShape, Target, constant_traffic, run_loadtest
from inferstack.sizing.calibration import load_calibration
from inferstack.sizing.catalog import offers
from inferstack.sizing.demand import demand_of
from inferstack.sizing.evaluate import calibration_row, predict_llm_replica
from inferstack.sizing.models import resolve
from inferstack.sizing.planner import candidate_for
from inferstack.sizing.simulate import TrafficShape
from inferstack.spec import load_workload

WORKLOADS = Path(__file__).parents[1] / "examples" / "workloads"


class Stub:
    """The stub server (tests/openai_stub.py) in a process of its own on 127.0.0.1; `configure` sets its
    behaviour, `state` returns what it saw."""

    def __init__(self, process: subprocess.Popen[str], port: int):
        self.process = process
        self.url = f"http://127.0.0.1:{port}"

    def configure(self, **config: object) -> None:
        request = urllib.request.Request(self.url + "/stub/config", data=json.dumps(config).encode(), method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    def state(self) -> dict[str, list[Any]]:
        with urllib.request.urlopen(self.url + "/stub/state", timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]


@pytest.fixture
def stub() -> Iterator[Stub]:
    process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("openai_stub.py"))],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), line
        yield Stub(process, int(line.split()[1]))
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the stub ends when its stdin closes
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _shape(requests: int, *, output_tokens: int = 10, **load: float) -> LoadShape:
    return LoadShape(requests=requests, traffic=constant_traffic(16, output_tokens), duration_s=30, **load)  # type: ignore[arg-type]


def _within(measured: float, expected: float, relative: float) -> bool:
    return abs(measured - expected) <= relative * expected


# ---- the measurement -----------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_ttft_tpot_and_e2e_match_the_injected_latencies(stub: Stub, api: str) -> None:
    stub.configure(ttft_s=0.200, gap_s=0.020)
    # 4 rounds of 4: most requests reuse a connection, as in a steady load
    result = run_loadtest(Target(stub.url, api=api), _shape(16, output_tokens=10, concurrency=4))  # type: ignore[arg-type]
    assert result.requests_ok == 16 and result.requests_failed == 0
    # Against what the stub did (its clock at each write): 3 % for TPOT and end-to-end. TTFT 5 %: the client's
    # clock also runs while the request crosses loopback to another process, which on a loaded 2-core machine
    # waits a few ms to be scheduled (2-8 ms seen).
    served = stub.state()["served"]
    served_ttft = statistics.median(first for first, _, _ in served) * 1e3
    served_tpot = statistics.median((last - first) / 9 for first, last, _ in served) * 1e3
    served_e2e = statistics.median(end for _, _, end in served) * 1e3
    assert _within(result.ttft_ms.p50, served_ttft, 0.05), (result.ttft_ms, served_ttft)
    assert _within(result.tpot_ms.p50, served_tpot, 0.03), (result.tpot_ms, served_tpot)
    assert _within(result.e2e_ms.p50, served_e2e, 0.03), (result.e2e_ms, served_e2e)
    # Against the injected figures: 200 ms, 20 ms, 200 + 9 × 20 ms.
    assert _within(result.ttft_ms.p50, 200, 0.05) and _within(result.tpot_ms.p50, 20, 0.05)
    assert _within(result.e2e_ms.p50, 380, 0.05)
    # 4 in flight, each 10 tokens in 0.38 s, four rounds: 160 tokens in about 1.52 s
    assert _within(result.output_tokens_per_s, 160 / 1.52, 0.05), result.output_tokens_per_s
    assert _within(result.requests_per_s, 16 / 1.52, 0.05), result.requests_per_s


def test_a_run_leaves_the_process_event_loop_as_it_was(stub: Stub) -> None:
    # asyncio.run would leave no current loop behind, and Pulumi's mocks (run later in the same process, as in
    # `make test`) then fail with "There is no current event loop".
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # left as the current loop, as Pulumi's runtime would create it
    assert run_loadtest(Target(stub.url), _shape(2, concurrency=1)).requests_ok == 2
    assert asyncio.get_event_loop_policy().get_event_loop() is loop


def test_output_tokens_are_counted_from_chunks_when_the_server_sends_no_usage(stub: Stub) -> None:
    stub.configure(send_usage=False, gap_s=0.010)
    result = run_loadtest(Target(stub.url, api="completions"), _shape(3, output_tokens=6, concurrency=1))
    assert result.requests_ok == 3
    assert _within(result.tpot_ms.p50, 10, 0.10), result.tpot_ms  # (last − first) / 5 chunks
    assert _within(result.output_tokens_per_s * result.duration_s, 18, 0.01)


def test_server_errors_are_counted_as_failed_requests_by_reason(stub: Stub) -> None:
    stub.configure(fail_every=3)
    result = run_loadtest(Target(stub.url), _shape(9, output_tokens=2, concurrency=1))
    assert (result.requests_ok, result.requests_failed) == (6, 3)
    assert result.failures == {"HTTP 500": 3}


def test_requests_still_running_at_the_duration_cap_are_cut_and_counted(stub: Stub) -> None:
    stub.configure(ttft_s=5.0)
    shape = LoadShape(requests=4, traffic=constant_traffic(4, 2), concurrency=2, duration_s=0.3)
    result = run_loadtest(Target(stub.url), shape)
    assert result.requests_ok == 0
    assert result.failures == {loadtest.CUT_AT_DURATION: 2}  # the other two never started


def test_poisson_arrivals_honour_the_rate(stub: Stub) -> None:
    result = run_loadtest(Target(stub.url), _shape(100, output_tokens=1, rate_per_s=50))
    arrivals = stub.state()["arrivals_s"]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert result.requests_ok == 100
    assert _within(statistics.mean(gaps), 1 / 50, 0.25)
    assert 0.7 < statistics.stdev(gaps) / statistics.mean(gaps) < 1.3  # exponential gaps: CV 1, not even spacing


def test_an_open_loop_does_not_queue_requests_in_the_client(stub: Stub) -> None:
    stub.configure(ttft_s=0.5)
    result = run_loadtest(Target(stub.url, model="m"), _shape(150, output_tokens=1, rate_per_s=2000))
    arrivals = stub.state()["arrivals_s"]
    assert result.requests_ok == 150
    assert max(arrivals) - min(arrivals) < 0.4  # a pool of 100 connections would hold the last 50 for 0.5 s


def test_workload_lengths_vary_between_mean_and_tail(stub: Stub) -> None:
    traffic = TrafficShape(100, 300, 20, 60, 1000)
    run_loadtest(Target(stub.url), LoadShape(requests=60, traffic=traffic, concurrency=8, duration_s=30))
    outputs = sorted(int(b["max_tokens"]) for b in stub.state()["bodies"])
    assert 14 <= statistics.mean(outputs) <= 26
    assert outputs[-1] > 30 and outputs[0] < 20


def test_the_first_listed_model_is_requested_when_none_is_given(stub: Stub) -> None:
    stub.configure(models=["first-model", "second-model"])
    result = run_loadtest(Target(stub.url), _shape(1, output_tokens=1, concurrency=1))
    assert result.model == "first-model" and stub.state()["bodies"][0]["model"] == "first-model"


# ---- the command ---------------------------------------------------------------------------------------


def test_json_output_has_the_figures_and_sends_the_key_as_a_bearer_header_without_printing_it(
    stub: Stub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-secret-123")
    stub.configure(gap_s=0.001)
    code = main(["loadtest", stub.url + "/v1/", "--api-key-env", "STUB_KEY", "--requests", "3", "--concurrency",
                 "2", "--output-tokens", "4", "--model", "m", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert stub.state()["authorization"] == ["Bearer sk-secret-123"] * 3
    assert "sk-secret" not in out + err
    figures = json.loads(out)
    assert {"p50", "p95", "p99"} == set(figures["ttft_ms"]) == set(figures["tpot_ms"]) == set(figures["e2e_ms"])
    assert figures["requests_ok"] == 3 and figures["requests_failed"] == 0
    assert figures["output_tokens_per_s"] > 0 and figures["requests_per_s"] > 0


def test_the_exit_code_is_1_when_no_request_succeeded(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    stub.configure(fail_every=1)
    assert main(["loadtest", stub.url, "--requests", "2", "--model", "m", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["failures"] == {"HTTP 500": 2}


def test_a_missing_key_variable_is_an_input_error_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["loadtest", "http://127.0.0.1:9", "--api-key-env", "NO_SUCH_VARIABLE_SET"]) == 2
    assert "--api-key-env: environment variable NO_SUCH_VARIABLE_SET is not set" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["ftp://host/v1", "127.0.0.1:8000", "http://"])
def test_a_url_that_is_not_http_is_refused_with_the_fix(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["loadtest", url]) == 2
    err = capsys.readouterr().err
    assert f"URL: must be an http:// or https:// URL with a host (got {url!r})" in err and "Fix:" in err


@pytest.mark.parametrize("flag", ["--rate", "--requests", "--duration", "--concurrency", "--output-tokens"])
def test_zero_or_negative_numbers_are_refused_naming_the_flag(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["loadtest", "http://127.0.0.1:9", flag, "0"])
    assert exit_.value.code == 2
    assert f"argument {flag}:" in capsys.readouterr().err


def test_more_requests_than_the_bound_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["loadtest", "http://127.0.0.1:9", "--requests", str(loadtest.MAX_REQUESTS + 1)]) == 2
    assert "--requests: must be at most 1,000,000 (got 1000001)" in capsys.readouterr().err


def test_a_trailing_v1_is_dropped_from_the_base_url() -> None:
    assert loadtest.base_url("https://api.example.com/v1/") == "https://api.example.com"
    with pytest.raises(InputError):
        loadtest.base_url("localhost:8000")


def test_the_command_names_the_extra_when_aiohttp_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)
    monkeypatch.delitem(sys.modules, "inferstack.loadtest")
    assert main(["loadtest", "http://127.0.0.1:9"]) == 2
    assert "pip install 'inferstack[loadtest]'" in capsys.readouterr().err


def test_plan_does_not_import_the_load_test() -> None:
    code = "import sys, inferstack.cli; print('inferstack.loadtest' in sys.modules, 'aiohttp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == (
        "False False\n"
    )


def test_sweep_stops_when_throughput_stops_rising(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    # The stub answers every request in 100 ms whatever the load, so throughput grows with concurrency until
    # --concurrency 4 caps the sweep (the client's own overhead on a busy 2-core machine keeps it under 4x).
    stub.configure(ttft_s=0.100)
    assert main(["loadtest", stub.url, "--sweep", "--concurrency", "4", "--requests", "8", "--output-tokens", "1",
                 "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["sweep"]
    assert [s["load"] for s in steps] == ["1 concurrent", "2 concurrent", "4 concurrent"]
    assert steps[2]["requests_per_s"] > 2 * steps[0]["requests_per_s"]


def test_saturation_is_a_step_that_adds_under_ten_percent() -> None:
    def step(tokens_per_s: float, failed: int = 0) -> loadtest.LoadResult:
        zero = loadtest.Percentiles(0, 0, 0)
        return loadtest.LoadResult("m", "", zero, zero, zero, 1, failed, tokens_per_s, 1.0, 1.0, {})

    assert not loadtest._saturated([step(100), step(111)])
    assert loadtest._saturated([step(100), step(109)])
    assert loadtest._saturated([step(100, failed=1)])


# ---- the plan's predictions ----------------------------------------------------------------------------


def test_with_a_workload_the_table_compares_each_figure_with_the_plan(
    stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.configure(gap_s=0.001)
    code = main(["loadtest", stub.url, "--workload", str(WORKLOADS / "chat-8b-public.yaml"), "--cloud", "aws",
                 "--requests", "4", "--input-tokens", "8", "--output-tokens", "4", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    rows = {row["figure"]: row for row in out["plan"]["comparison"]}
    assert set(rows) == {"p95 TTFT", "p95 TPOT", "p95 end-to-end", "output tokens/s"}
    ttft = rows["p95 TTFT"]
    assert ttft["measured"] == out["ttft_ms"]["p95"]
    assert ttft["change_percent"] == pytest.approx((ttft["measured"] - ttft["plan"]) / ttft["plan"] * 100, abs=0.1)
    assert out["load"].startswith("Poisson") and "(one server)" in out["plan"]["deployment"]
    assert out["plan"]["model"] == "llama-3.1-8b" and out["plan"]["engine"] and out["plan"]["accelerator"]


def test_one_server_is_driven_at_its_share_of_the_fleet_rate() -> None:
    from sample_plans import sample_plan

    plan = sample_plan("aws", "gpu-llm", "production").model_copy(update={"replicas": 4})
    traffic = constant_traffic(10, 10)
    one, fleet = loadtest.plan_target(plan, traffic, fleet=False), loadtest.plan_target(plan, traffic, fleet=True)
    assert fleet.rate_per_s == plan.performance.load_requests_per_s
    assert one.rate_per_s == pytest.approx(fleet.rate_per_s / 3)  # production sizes 4 replicas with one spare down
    assert one.ttft_p95_ms == fleet.ttft_p95_ms == plan.performance.ttft_p95_ms


def test_a_comparison_line_reads_plan_measured_and_change() -> None:
    row = {"figure": "p95 TTFT", "unit": "ms", "plan": 193.0, "measured": 240.0, "change_percent": 24.4}
    assert loadtest.comparison_line(row) == "plan p95 TTFT 193 ms, measured 240 ms, +24 %"


def _stub_run(stub: Stub, tmp_path: Path, capsys: pytest.CaptureFixture[str],
              served: str) -> tuple[Path, Path, dict[str, Any]]:
    """A load test of a stub server 1.2x slower to the first token and 1.1x slower per token than the plan of a small
    chat predicts, answering as model `served`: (workload, result, the plan it measured)."""
    workload = tmp_path / "small-chat.yaml"
    workload.write_text("name: small-chat\nmodel: llama-3.1-8b\nprecision: bf16\nstage: validation\n"
                        "traffic: {requests_per_s: 2, prompt_tokens: 100, output_tokens: 20}\n"
                        "slo: {ttft_p95_ms: 2000}\nplacement: {clouds: [aws]}\n")
    assert main(["plan", str(workload), "--json"]) == 0
    measured_plan = json.loads(capsys.readouterr().out)["clouds"][0]["chosen"]
    predicted = measured_plan["performance"]
    stub.configure(ttft_s=1.2 * predicted["ttft_p95_ms"] / 1e3, gap_s=1.1 * predicted["tpot_p95_ms"] / 1e3,
                   models=[served])
    result = tmp_path / "result.json"
    assert main(["loadtest", stub.url, "--workload", str(workload), "--requests", "8", "--json"]) == 0
    result.write_text(capsys.readouterr().out)
    return workload, result, measured_plan


def test_loadtest_results_calibrate_the_plan_so_that_it_predicts_what_was_measured_at_that_rate(
    stub: Stub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload, result, measured_plan = _stub_run(stub, tmp_path, capsys, served="llama-3.1-8b")
    measured = json.loads(result.read_text())
    calibration = tmp_path / "calibration.json"
    assert main(["calibrate", str(result), "--output", str(calibration)]) == 0
    row = json.loads(calibration.read_text())["rows"][0]
    assert row["measured_at_requests_per_s"] == pytest.approx(measured["requests_per_s"], rel=1e-3)
    # The planner's own prediction for the measured server at the measured rate, with the file as `plan
    # --calibration` reads it (its row found by model, precision, engine and GPU): the measured p95s, within 10 %.
    spec = load_workload(workload)
    demand = replace(demand_of(spec, resolve(spec.model)), calibration=load_calibration(calibration))
    offer = next(o for o in offers() if (o.cloud, o.name) == ("aws", measured_plan["offer"]))
    candidate = candidate_for(demand, offer, measured_plan["serving"]["processes"])
    assert not isinstance(candidate, str) and calibration_row(demand, candidate) is not None
    predicted = predict_llm_replica(demand, candidate, measured["requests_per_s"],
                                    measured_plan["serving"]["max_num_seqs"])
    assert predicted.ttft_p95_ms == pytest.approx(measured["ttft_ms"]["p95"], rel=0.10)
    assert predicted.tpot_p95_ms == pytest.approx(measured["tpot_ms"]["p95"], rel=0.10)
    # And `plan --calibration` uses the row where it plans that hardware, and says so.
    capsys.readouterr()
    assert main(["plan", str(workload), "--calibration", str(calibration), "--json"]) == 0
    outcome = json.loads(capsys.readouterr().out)["clouds"][0]
    (same_offer,) = [p for p in [outcome["chosen"], *outcome["alternatives"]] if p["offer"] == measured_plan["offer"]]
    assert any(line.startswith("Speed calibrated by 1 load test(s) of llama-3.1-8b bf16 on vllm, 1x ")
               for line in same_offer["rationale"])


def test_a_stub_answering_as_another_model_calibrates_nothing_unless_forced(
    stub: Stub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, result, _ = _stub_run(stub, tmp_path, capsys, served="stub-model")
    assert main(["calibrate", str(result)]) == 2
    assert "measured a server that answered as model 'stub-model', not the plan's llama-3.1-8b" in \
        capsys.readouterr().err
    assert main(["calibrate", str(result), "--force"]) == 0


def test_the_measured_percentiles_are_the_nearest_rank_p50_p95_and_p99_in_milliseconds() -> None:
    # 1..100 ms: nearest rank gives 50, 95 and 99 exactly (a p90 reported as the p95 would read 90).
    from inferstack.loadtest import Percentiles

    measured = Percentiles.of_seconds([n / 1000 for n in range(100, 0, -1)])
    assert (measured.p50, measured.p95, measured.p99) == (50.0, 95.0, 99.0)
    assert Percentiles.of_seconds([]) == Percentiles(0.0, 0.0, 0.0)

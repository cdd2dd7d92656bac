"""Calibration from load tests: results → factors → plan and estimate use them where they match, and say so."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inferstack.cli import main
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.sizing.calibrate import calibrate
from inferstack.sizing.calibration import Calibration, CalibrationRow, load_calibration
from inferstack.sizing.catalog import offers
from inferstack.sizing.demand import demand_of
from inferstack.sizing.estimate import estimate
from inferstack.sizing.evaluate import predict_llm_replica
from inferstack.sizing.hardware import gpu_spec
from inferstack.sizing.models import lookup, resolve
from inferstack.sizing.planner import candidate_for, plan_workload
from inferstack.sizing.simulate import serving_replicas
from inferstack.spec import Engine, Precision, WorkloadSpec, load_workload

WORKLOAD = Path(__file__).parents[2] / "examples" / "workloads" / "chat-8b-public.yaml"


def _planned() -> DeploymentPlan:
    chosen = plan_workload(load_workload(WORKLOAD), clouds=["aws"]).outcome("aws").chosen
    assert chosen is not None and chosen.accelerator is not None and chosen.accelerator.id == "L40S"
    return chosen


def _result(tmp_path: Path, name: str, *, ttft: float, tpot: float, served: str = "llama-3.1-8b",
            served_by: str | None = "vllm", rate_share: float = 1.0, **plan: Any) -> Path:
    """A `loadtest --workload --json` result of chat-8b-public's AWS plan (one server), measuring `ttft` and `tpot`
    times the plan's p95s at `rate_share` of the plan's rate per server."""
    planned = _planned()
    rate = planned.performance.load_requests_per_s / serving_replicas(planned) * rate_share
    data = {
        "model": served, "served_by": served_by, "requests_ok": 100, "requests_failed": 0,
        "requests_per_s": rate,
        "ttft_ms": {"p50": 1.0, "p95": ttft * (planned.performance.ttft_p95_ms or 0), "p99": 1.0},
        "tpot_ms": {"p50": 1.0, "p95": tpot * (planned.performance.tpot_p95_ms or 0), "p99": 1.0},
        "plan": {"model": "llama-3.1-8b", "precision": "bf16", "engine": "vllm", "accelerator": "L40S",
                 "accelerators_per_server": 1, "instance_type": planned.instance_type, "as_planned": True,
                 "comparison": [], "basis": {
                     "workload": load_workload(WORKLOAD).model_copy(update={"placement": load_workload(
                         WORKLOAD).placement.model_copy(update={"clouds": ["aws"]})}).model_dump(mode="json"),
                     "cloud": "aws", "offer": planned.offer, "processes": planned.serving.processes,
                     "slots": planned.serving.max_num_seqs, "source_uri": planned.model.source_uri,
                     "fleet": False}, **plan},
    }
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _predicted(result: Path, calibration: Calibration) -> tuple[float, float]:
    """The planner's p95 TTFT and TPOT for the measured server at the measured load, with `calibration`."""
    data = json.loads(result.read_text())
    spec = WorkloadSpec.model_validate(data["plan"]["basis"]["workload"])
    demand = replace(demand_of(spec, resolve(spec.model)), calibration=calibration)
    offer = next(o for o in offers() if (o.cloud, o.name) == ("aws", data["plan"]["basis"]["offer"]))
    candidate = candidate_for(demand, offer, data["plan"]["basis"]["processes"])
    assert not isinstance(candidate, str)
    prediction = predict_llm_replica(demand, candidate, data["requests_per_s"], data["plan"]["basis"]["slots"])
    return prediction.ttft_p95_ms, prediction.tpot_p95_ms


def _row(**factors: float) -> Calibration:
    row = CalibrationRow(model="llama-3.1-8b", precision="bf16", engine="vllm", hardware="1x L40S",
                         ttft_factor=factors.get("ttft", 1.0), tpot_factor=factors.get("tpot", 1.0), load_tests=1,
                         sources=["r.json"])
    return Calibration(rows=[row], source="cal.json")


# ---- calibrate -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("ttft", "tpot", "rate_share"), [(1.5, 1.2, 1.0), (0.8, 0.9, 0.5), (3.0, 1.1, 1.0)])
def test_the_fitted_factors_make_the_plan_predict_the_measured_p95s_at_the_measured_load(
        tmp_path: Path, ttft: float, tpot: float, rate_share: float) -> None:
    result = _result(tmp_path, "r.json", ttft=ttft, tpot=tpot, rate_share=rate_share)
    measured = json.loads(result.read_text())
    calibration = calibrate([result])
    (row,) = calibration.rows
    assert (row.hardware, row.load_tests) == ("1x L40S", 1)
    assert row.measured_at_requests_per_s == pytest.approx(measured["requests_per_s"], rel=1e-3)
    ttft_ms, tpot_ms = _predicted(result, calibration)
    assert ttft_ms == pytest.approx(measured["ttft_ms"]["p95"], rel=0.01)
    assert tpot_ms == pytest.approx(measured["tpot_ms"]["p95"], rel=0.01)


def test_raw_ratios_would_overshoot_the_measured_ttft_which_the_fit_does_not(tmp_path: Path) -> None:
    # Queueing amplifies a slower step: scaling the prefill by the raw TTFT ratio predicts more than was measured.
    result = _result(tmp_path, "r.json", ttft=1.5, tpot=1.2)
    measured = json.loads(result.read_text())
    raw = _row(ttft=1.5, tpot=1.2)
    assert _predicted(result, raw)[0] > 2 * measured["ttft_ms"]["p95"]  # 1,321 ms against 304 measured
    fitted = calibrate([result]).rows[0]
    assert fitted.ttft_factor < 1.5 and fitted.tpot_factor < 1.2  # prefill stalls are part of the measured TPOT


def test_results_of_one_deployment_are_fitted_together_into_one_row(tmp_path: Path) -> None:
    first, second = (_result(tmp_path, f"{n}.json", ttft=t, tpot=d) for n, t, d in (("a", 1.2, 1.1), ("b", 2.0, 1.1)))
    one, two = (calibrate([path]).rows[0] for path in (first, second))
    (both,) = calibrate([first, second]).rows
    assert both.load_tests == 2 and both.sources == [str(first), str(second)]
    assert min(one.ttft_factor, two.ttft_factor) < both.ttft_factor < max(one.ttft_factor, two.ttft_factor)
    # Both measured the same load: the joint fit's prediction is the geometric mean of the two measured p95 TTFTs.
    measured = [json.loads(path.read_text())["ttft_ms"]["p95"] for path in (first, second)]
    predicted = _predicted(first, Calibration(rows=[both]))[0]
    assert predicted == pytest.approx((measured[0] * measured[1]) ** 0.5, rel=0.01)


def test_a_server_that_answered_as_another_model_is_refused_unless_forced(tmp_path: Path) -> None:
    stub = _result(tmp_path, "stub.json", ttft=1.2, tpot=1.1, served="stub")
    with pytest.raises(InputError, match=re.escape("measured a server that answered as model 'stub', not the plan's "
                                                   "llama-3.1-8b")):
        calibrate([stub])
    assert calibrate([stub], force=True).rows[0].hardware == "1x L40S"
    by_id = _result(tmp_path, "id.json", ttft=1.2, tpot=1.1, served="meta-llama/Llama-3.1-8B-Instruct")
    assert calibrate([by_id]).rows  # the model's Hugging Face id is its name too


def test_a_server_of_another_engine_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="measured a server of engine llamacpp, not the plan's vllm"):
        calibrate([_result(tmp_path, "r.json", ttft=1.2, tpot=1.1, served_by="llamacpp")])
    assert calibrate([_result(tmp_path, "me.json", ttft=1.2, tpot=1.1, served_by="me")]).rows  # names no engine


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"plan": None}, "is not a load-test result made with --workload"),
        ({"as_planned": False}, "was run at another rate or token lengths than the plan's"),
        ({"fleet": True}, "was run against a load balancer"),
        ({"requests_ok": 0}, "has no successful request"),
    ],
)
def test_results_that_cannot_calibrate_are_refused_naming_the_file(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = _result(tmp_path, "r.json", ttft=1.2, tpot=1.1)
    data = json.loads(path.read_text())
    for key, value in change.items():
        target = data["plan"] if key == "as_planned" else data["plan"]["basis"] if key == "fleet" else data
        target[key] = value
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as error:
        calibrate([path])
    assert message in str(error.value) and str(path) in str(error.value)


def test_a_measurement_no_factor_within_ten_times_reproduces_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no prefill and decode factors within 0\.1-10\.0x make the plan predict"):
        calibrate([_result(tmp_path, "r.json", ttft=1.0, tpot=40.0)])


# ---- plan and estimate use it --------------------------------------------------------------------------


def test_a_matching_row_slows_the_plan_and_the_rationale_says_so() -> None:
    spec = load_workload(WORKLOAD)
    plain = plan_workload(spec, clouds=["aws"]).outcome("aws").chosen
    assert plain is not None and plain.accelerator is not None and plain.accelerator.id == "L40S"
    calibrated = plan_workload(spec, clouds=["aws"], calibration=_row(ttft=1.2, tpot=1.3)).outcome("aws").chosen
    assert calibrated is not None and plain.performance.tpot_p95_ms and calibrated.performance.tpot_p95_ms
    assert calibrated.performance.tpot_p95_ms > 1.1 * plain.performance.tpot_p95_ms
    assert ("Speed calibrated by 1 load test(s) of llama-3.1-8b bf16 on vllm, 1x L40S (cal.json): prefill x1.20, "
            "decode x1.30.") in calibrated.rationale


def test_a_row_for_other_hardware_changes_nothing() -> None:
    spec = load_workload(WORKLOAD)
    other = _row(ttft=3, tpot=3).model_copy(update={"rows": [_row(ttft=3, tpot=3).rows[0].model_copy(
        update={"hardware": "1x H100"})]})
    plain = plan_workload(spec, clouds=["aws"]).outcome("aws").chosen
    calibrated = plan_workload(spec, clouds=["aws"], calibration=other).outcome("aws").chosen
    assert plain is not None and calibrated is not None
    assert calibrated.performance == plain.performance
    assert not any("calibrated by" in line for line in calibrated.rationale)


def test_estimate_scales_tpot_by_the_factor_and_notes_it() -> None:
    common: dict[str, Any] = {"precision": Precision.BF16, "engine": Engine.VLLM, "gpu": gpu_spec("L40S"),
                              "input_tokens": 512, "output_tokens": 128}
    model = lookup("llama-3.1-8b")
    plain = estimate(model, **common)
    calibrated = estimate(model, **common, calibration=_row(tpot=1.5))
    assert plain.tpot_ms and calibrated.tpot_ms
    assert calibrated.tpot_ms == pytest.approx(1.5 * plain.tpot_ms, rel=0.01)
    assert any("decode x1.50" in note for note in calibrated.notes)


# ---- the commands --------------------------------------------------------------------------------------


def test_calibrate_writes_a_file_that_plan_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "calibration.json"
    assert main(["calibrate", str(_result(tmp_path, "r.json", ttft=1.3, tpot=1.2)), "--output", str(output)]) == 0
    factor = load_calibration(output).rows[0].tpot_factor
    assert factor > 1.05
    capsys.readouterr()
    assert main(["plan", str(WORKLOAD), "--cloud", "aws", "--calibration", str(output), "--json"]) == 0
    rationale = json.loads(capsys.readouterr().out)["clouds"][0]["chosen"]["rationale"]
    assert any(f"decode x{factor:.2f}, fitted so that the prediction at the measured" in line for line in rationale)


def test_a_calibration_file_with_a_wrong_field_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "calibration.json"
    data = json.loads(_row(tpot=1.2).model_dump_json())
    data["rows"][0]["tpot_factor"] = 0
    bad.write_text(json.dumps(data))
    assert main(["estimate", "--model", "llama-3.1-8b", "--gpu", "L40S", "--calibration", str(bad)]) == 2
    assert "tpot_factor" in capsys.readouterr().err


LOOP = Path(__file__).parents[2] / "examples" / "loadtest-loop"


def test_the_tiny_model_at_the_workloads_rate_is_refused_its_ttft_wait_is_the_queue_models_error() -> None:
    # examples/loadtest-loop/result.json: the real llama.cpp server, one request at a time, at 5 requests/s. The
    # plan's wait for the single slot (119 ms p95 TTFT) is longer than the measured 43.6 ms: no prefill factor
    # within 0.1-10x reproduces it, and calibrate says so rather than fitting a factor that would hide it.
    with pytest.raises(InputError, match=r"no prefill and decode factors within 0\.1-10\.0x make the plan predict"):
        calibrate([LOOP / "result.json"])


def test_the_tiny_model_at_a_light_rate_calibrates_and_the_re_plan_predicts_what_was_measured() -> None:
    # examples/loadtest-loop/result-light.json: the same server at 0.5 requests/s. The plan times the tiny model at
    # the server's floor (efficiency.LLAMA_CPP_PYTHON_SERVING), not at 0 ms, so the factors are finite, and the
    # re-planned deployment (the one measured) predicts the measured p95s at the measured rate.
    result = json.loads((LOOP / "result-light.json").read_text())
    measured = {row["figure"]: row["measured"] for row in result["plan"]["comparison"]}
    calibration = calibrate([LOOP / "result-light.json"])
    (row,) = calibration.rows
    committed = load_calibration(LOOP / "calibration.json").rows[0]
    assert (row.hardware, row.ttft_factor, row.tpot_factor) == (
        committed.hardware, committed.ttft_factor, committed.tpot_factor)
    assert row.hardware == "cpu:c7i.large"

    spec = load_workload(LOOP / "workload-light.yaml")
    before = plan_workload(spec, clouds=["aws"]).outcome("aws").chosen
    after = plan_workload(spec, clouds=["aws"], calibration=calibration).outcome("aws").chosen
    assert before is not None and after is not None
    assert before.instance_type == after.instance_type == "c7i.large"  # one core, one slot
    assert before.performance.ttft_p95_ms is not None and after.performance.ttft_p95_ms is not None
    assert before.performance.ttft_p95_ms < measured["p95 TTFT"] / 2
    assert after.performance.ttft_p95_ms == pytest.approx(measured["p95 TTFT"], rel=0.10)
    assert after.performance.tpot_p95_ms == pytest.approx(measured["p95 TPOT"], rel=0.10)


def test_a_calibration_without_a_row_for_the_chosen_deployment_says_every_figure_is_estimated() -> None:
    other = _row(ttft=3, tpot=3).model_copy(update={"rows": [_row(ttft=3, tpot=3).rows[0].model_copy(
        update={"hardware": "1x H100"})]})
    chosen = plan_workload(load_workload(WORKLOAD), clouds=["aws"], calibration=other).outcome("aws").chosen
    assert chosen is not None
    assert ("Calibration cal.json has no row for llama-3.1-8b bf16 on vllm, 1x L40S: every figure here is "
            "estimated.") in chosen.rationale
    assert not any("calibrated model's predictions" in line for line in chosen.rationale)


def test_a_matching_row_says_the_figures_are_predictions_not_measurements() -> None:
    chosen = plan_workload(load_workload(WORKLOAD), clouds=["aws"], calibration=_row(ttft=1.2, tpot=1.3)).outcome(
        "aws").chosen
    assert chosen is not None
    assert any(line.startswith("The TTFT, TPOT and output tokens/s above, and the replicas sized from them, are the "
                               "calibrated model's predictions at this plan's load, not measurements")
               for line in chosen.rationale)
    assert not any("Measured, not estimated" in line for line in chosen.rationale)


@pytest.mark.parametrize("precision", ["fp8", "bf16"])
def test_a_plan_whose_precision_the_planner_chose_calibrates_the_precision_it_served(
        tmp_path: Path, precision: str) -> None:
    path = _result(tmp_path, "r.json", ttft=1.2, tpot=1.1, precision=precision)
    data = json.loads(path.read_text())
    data["plan"]["basis"]["workload"]["precision"] = ["bf16", "fp8"]  # `precision: [bf16, fp8]`: the plan's is chosen
    path.write_text(json.dumps(data))
    assert calibrate([path]).rows[0].precision == precision
    data["plan"]["precision"] = "fp7"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="names precision 'fp7', which inferstack does not know"):
        calibrate([path])

"""Calibration from load tests: results → factors → plan and estimate use them where they match, and say so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inferstack.cli import main
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.sizing.calibration import Calibration, CalibrationRow, calibrate, load_calibration
from inferstack.sizing.estimate import estimate
from inferstack.sizing.hardware import gpu_spec
from inferstack.sizing.models import lookup
from inferstack.sizing.planner import plan_workload
from inferstack.spec import Engine, Precision, load_workload

WORKLOAD = Path(__file__).parents[2] / "examples" / "workloads" / "chat-8b-public.yaml"


def _result(tmp_path: Path, name: str, *, ttft: tuple[float, float], tpot: tuple[float, float],
            accelerator: str | None = "L40S", **plan: Any) -> Path:
    """A `loadtest --workload --json` result: (planned, measured) p95 TTFT and TPOT."""
    data = {
        "requests_ok": 10, "requests_failed": 0,
        "plan": {"model": "llama-3.1-8b", "precision": "bf16", "engine": "vllm", "accelerator": accelerator,
                 "accelerators_per_server": 1 if accelerator else 0, "instance_type": "g6e.xlarge",
                 "as_planned": True, **plan,
                 "comparison": [
                     {"figure": "p95 TTFT", "unit": "ms", "plan": ttft[0], "measured": ttft[1]},
                     {"figure": "p95 TPOT", "unit": "ms", "plan": tpot[0], "measured": tpot[1]},
                 ]},
    }
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _row(**factors: float) -> Calibration:
    row = CalibrationRow(model="llama-3.1-8b", precision="bf16", engine="vllm", hardware="1x L40S",
                         ttft_factor=factors.get("ttft", 1.0), tpot_factor=factors.get("tpot", 1.0), load_tests=1,
                         sources=["r.json"])
    return Calibration(rows=[row], source="cal.json")


# ---- calibrate -----------------------------------------------------------------------------------------


def test_results_of_one_deployment_give_one_row_with_the_geometric_mean_ratios(tmp_path: Path) -> None:
    first = _result(tmp_path, "a.json", ttft=(200, 300), tpot=(40, 40))
    second = _result(tmp_path, "b.json", ttft=(200, 600), tpot=(40, 90))
    other_gpu = _result(tmp_path, "c.json", ttft=(100, 100), tpot=(20, 10), accelerator="H100")
    rows = {row.hardware: row for row in calibrate([first, second, other_gpu]).rows}
    assert set(rows) == {"1x L40S", "1x H100"}
    assert rows["1x L40S"].ttft_factor == pytest.approx((1.5 * 3.0) ** 0.5, abs=1e-4)
    assert rows["1x L40S"].tpot_factor == pytest.approx((1.0 * 2.25) ** 0.5)  # √(1 × 2.25) = 1.5
    assert rows["1x L40S"].load_tests == 2 and rows["1x L40S"].sources == [str(first), str(second)]
    assert (rows["1x H100"].ttft_factor, rows["1x H100"].tpot_factor) == (1.0, 0.5)


def test_a_cpu_result_is_keyed_by_its_instance_type(tmp_path: Path) -> None:
    result = _result(tmp_path, "cpu.json", ttft=(100, 110), tpot=(50, 55), accelerator=None,
                     engine="llamacpp", instance_type="c7i.4xlarge")
    assert calibrate([result]).rows[0].hardware == "cpu:c7i.4xlarge"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"plan": None}, "is not a load-test result made with --workload"),
        ({"as_planned": False}, "was run at another rate or token lengths than the plan's"),
        ({"requests_ok": 0}, "has no successful request"),
    ],
)
def test_results_that_cannot_calibrate_are_refused_naming_the_file(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = _result(tmp_path, "r.json", ttft=(200, 240), tpot=(40, 44))
    data = json.loads(path.read_text())
    for key, value in change.items():
        (data["plan"] if key == "as_planned" else data)[key] = value
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as error:
        calibrate([path])
    assert message in str(error.value) and str(path) in str(error.value)


def test_a_factor_beyond_ten_times_is_refused_as_a_broken_measurement(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"measured TPOT is 20.00x the plan's"):
        calibrate([_result(tmp_path, "r.json", ttft=(200, 240), tpot=(10, 200))])


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
    assert main(["calibrate", str(_result(tmp_path, "r.json", ttft=(200, 260), tpot=(40, 48))),
                 "--output", str(output)]) == 0
    assert load_calibration(output).rows[0].tpot_factor == 1.2
    capsys.readouterr()
    assert main(["plan", str(WORKLOAD), "--cloud", "aws", "--calibration", str(output), "--json"]) == 0
    rationale = json.loads(capsys.readouterr().out)["clouds"][0]["chosen"]["rationale"]
    assert any("decode x1.20" in line for line in rationale)


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


def test_the_tiny_model_at_the_workloads_rate_is_refused_its_ttft_is_a_queue_the_plan_does_not_model() -> None:
    # examples/loadtest-loop/result.json: the real llama.cpp server at 5 requests/s. It serves one request at a time
    # while the planner gives the CPU server several slots, so the measured p95 TTFT (81.6 ms) is mostly waiting,
    # 15.7x the plan's 5.2 ms: a prefill factor would be the wrong correction, and calibrate refuses it.
    with pytest.raises(InputError, match=r"measured TTFT is 15\.70x the plan's for tiny-llama on cpu:c7i\.4xlarge, "
                       r"outside 0\.1-10\.0x"):
        calibrate([LOOP / "result.json"])


def test_the_tiny_model_at_a_light_rate_calibrates_and_the_re_plan_predicts_what_was_measured() -> None:
    # examples/loadtest-loop/result-light.json: the same server at 0.5 requests/s, where requests rarely wait. The
    # plan times the tiny model at the server's floor (efficiency.LLAMA_CPP_PYTHON_SERVING), not at 0 ms, so the
    # measured/planned ratios are finite and the re-plan lands on the measured p95s.
    result = json.loads((LOOP / "result-light.json").read_text())
    measured = {row["figure"]: row["measured"] for row in result["plan"]["comparison"]}
    calibration = calibrate([LOOP / "result-light.json"])
    (row,) = calibration.rows
    assert (row.hardware, row.ttft_factor, row.tpot_factor) == ("cpu:c7i.2xlarge", 6.2333, 1.5333)
    committed = load_calibration(LOOP / "calibration.json").rows[0]
    assert (committed.ttft_factor, committed.tpot_factor) == (row.ttft_factor, row.tpot_factor)

    spec = load_workload(LOOP / "workload-light.yaml")

    def measured_hardware(calibration: Calibration | None) -> DeploymentPlan:
        outcome = plan_workload(spec, clouds=["aws"], calibration=calibration).outcome("aws")
        assert outcome.chosen is not None and outcome.chosen.instance_type == "c7i.large"  # one core, one slot
        return next(p for p in outcome.alternatives if p.instance_type == "c7i.2xlarge")

    # The cheapest option, a c7i.large, has no measurement and stays estimated; the calibrated one is the hardware
    # the load test measured.
    before, after = measured_hardware(None), measured_hardware(calibration)
    assert before.performance.ttft_p95_ms is not None and before.performance.tpot_p95_ms is not None
    assert before.performance.ttft_p95_ms < measured["p95 TTFT"] / 5
    assert after.performance.ttft_p95_ms == pytest.approx(measured["p95 TTFT"], rel=0.05)
    assert after.performance.tpot_p95_ms == pytest.approx(measured["p95 TPOT"], rel=0.15)


def test_a_calibration_without_a_row_for_the_chosen_deployment_says_every_figure_is_estimated() -> None:
    other = _row(ttft=3, tpot=3).model_copy(update={"rows": [_row(ttft=3, tpot=3).rows[0].model_copy(
        update={"hardware": "1x H100"})]})
    chosen = plan_workload(load_workload(WORKLOAD), clouds=["aws"], calibration=other).outcome("aws").chosen
    assert chosen is not None
    assert ("Calibration cal.json has no row for llama-3.1-8b bf16 on vllm, 1x L40S: every figure here is "
            "estimated.") in chosen.rationale
    assert not any(line.startswith("Measured, not estimated") for line in chosen.rationale)


def test_a_matching_row_names_the_figures_it_measured() -> None:
    chosen = plan_workload(load_workload(WORKLOAD), clouds=["aws"], calibration=_row(ttft=1.2, tpot=1.3)).outcome(
        "aws").chosen
    assert chosen is not None
    assert any(line.startswith("Measured, not estimated: the predicted TTFT, TPOT and output tokens/s above")
               for line in chosen.rationale)

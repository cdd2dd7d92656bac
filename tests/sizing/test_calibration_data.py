"""The public calibration rows (benchmarks/calibration_public.csv) say where each figure comes from and restate the
conditions it was measured under, so that benchmarks/fidelity.py scores each one against the situation it measured."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from calibration_cases import CASES, ENCODER_ROWS, PREDICTORS, PUBLIC_CALIBRATION_PATH, _read_csv, predict

PUBLIC_ROWS = _read_csv(PUBLIC_CALIBRATION_PATH)


@pytest.mark.parametrize("row", PUBLIC_ROWS, ids=lambda row: row["id"])
def test_every_public_row_names_its_source_its_date_and_how_to_restate_it(row):
    assert row["source"].strip() and row["date"].strip()
    assert float(row["value"]) > 0
    assert row["case_predict"] in PREDICTORS and row["case_model"] and row["case_hardware"]
    assert row["spec_quality"] in ("A", "B")


def test_a_serving_row_is_scored_at_the_requests_it_had_in_flight():
    serving = {row["id"]: int(row["batch_or_concurrency"]) for row in PUBLIC_ROWS
               if row["batch_or_concurrency"].isdigit() and int(row["batch_or_concurrency"]) > 1}
    assert serving["p83"] == 200 and serving["p88"] == 8  # a burst of 200 requests; --max-concurrency 8
    assert all(CASES[row_id].concurrency == in_flight for row_id, in_flight in serving.items())
    assert {CASES[row_id].engine for row_id in serving} == {"vllm", "trtllm"}  # serving engines, not llama-bench


@pytest.mark.parametrize("row_id", [r for r, row in ENCODER_ROWS.items() if row.role == "bound"])
def test_the_onnxruntime_gpu_prior_stays_below_tensorrts_mlperf_rate(row_id):
    # Triton + TensorRT int8 (MLPerf v1.1) on the same GPU: the fastest these models run there, never fitted.
    row = ENCODER_ROWS[row_id]
    assert row.case.gpu and row.case.engine == "onnxruntime"
    assert predict(row.case) < row.measured

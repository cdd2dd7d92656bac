"""The load test → calibrate → re-plan loop against the real server the bootstrap deploys: llama.cpp, one thread, one
request at a time, behind the gateway, in a Debian chroot (test_bootstrap_e2e.py). `inferstack loadtest --workload`
measures it at the light example's rate, `inferstack calibrate` fits the factors, and `inferstack plan
--calibration` at the measured rate must predict the measured p95 TTFT and TPOT within 10 %.

A module of its own: the server listens on the runtime's port, which the end-to-end module's servers hold until that
module ends. Bounded: 20 requests at 0.5 requests/s, about 40 s after the boot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_bootstrap_e2e import API_KEY, REPO, Deployment, debian_chroot, deployed

pytestmark = pytest.mark.e2e

LOOP = REPO / "examples" / "loadtest-loop"


@pytest.fixture(scope="module")
def serial_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """What examples/loadtest-loop measured: the model that answers in whole words, one llama.cpp thread, no cache
    (the load test's prompts repeat, and a cached answer is not the model's speed)."""
    with debian_chroot() as box, deployed(box, tmp_path_factory, threads=1, cache=False, text_only=True) as booted:
        yield booted


def inferstack(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inferstack.cli", *arguments], capture_output=True, text=True,
                          timeout=300, cwd=REPO,
                          env={**os.environ, "INFERSTACK_E2E_KEY": API_KEY, "PYTHONPATH": str(REPO)})


def test_a_plan_calibrated_on_the_real_server_predicts_its_measured_p95s_at_the_measured_rate(
        serial_server: Deployment, tmp_path: Path) -> None:
    result_file, calibration_file = tmp_path / "result.json", tmp_path / "calibration.json"
    ran = inferstack("loadtest", f"http://127.0.0.1:{serial_server.port}/v1", "--api", "completions",
                     "--workload", str(LOOP / "workload-light.yaml"), "--requests", "20", "--duration", "120",
                     "--api-key-env", "INFERSTACK_E2E_KEY", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result_file.write_text(ran.stdout)
    result = json.loads(ran.stdout)
    assert (result["requests_ok"], result["requests_failed"]) == (20, 0), result
    assert result["plan"]["basis"]["offer"] == "c7i.large", result["plan"]  # one core: one slot, a serial server

    calibrated = inferstack("calibrate", str(result_file), "--output", str(calibration_file))
    assert calibrated.returncode == 0, calibrated.stdout + calibrated.stderr

    # The same workload at the rate the load test reached, planned with the calibration.
    workload = yaml.safe_load((LOOP / "workload-light.yaml").read_text())
    workload["traffic"]["requests_per_s"] = result["requests_per_s"]
    at_measured_rate = tmp_path / "workload.yaml"
    at_measured_rate.write_text(yaml.safe_dump(workload))
    planned = inferstack("plan", str(at_measured_rate), "--cloud", "aws", "--calibration", str(calibration_file),
                         "--json")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    chosen = json.loads(planned.stdout)["clouds"][0]["chosen"]
    assert chosen["instance_type"] == "c7i.large", chosen["instance_type"]
    performance = chosen["performance"]
    assert performance["ttft_p95_ms"] == pytest.approx(result["ttft_ms"]["p95"], rel=0.10), (performance, result)
    assert performance["tpot_p95_ms"] == pytest.approx(result["tpot_ms"]["p95"], rel=0.10), (performance, result)

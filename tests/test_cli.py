"""The command line, run as a user runs it: exit codes, JSON keys, and errors without tracebacks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / "examples" / "workloads"
ESTIMATE_KEYS = {
    "weights_gib",
    "kv_cache_bytes_per_token",
    "kv_cache_gib",
    "overhead_gib",
    "total_gib",
    "fits",
    "max_concurrency",
    "kv_cache_capacity_tokens",
    "ttft_ms",
    "tpot_ms",
    "e2e_latency_ms",
    "output_tokens_per_s",
    "prefill_tokens_per_s",
    "requests_per_s",
}


def inferstack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inferstack.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_estimate_json_has_the_documented_keys_and_hand_checked_values():
    result = inferstack("estimate", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--precision", "bf16", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data.keys() >= ESTIMATE_KEYS
    assert data["kv_cache_bytes_per_token"] == 131_072
    assert data["weights_gib"] == pytest.approx(14.96, abs=0.01)
    assert data["fits"] is True


def test_estimate_with_several_gpus_reports_weights_per_gpu():
    one = json.loads(inferstack("estimate", "--model", "llama-3.1-70b", "--gpu", "A100-SXM4-80GB", "--json").stdout)
    four = json.loads(
        inferstack("estimate", "--model", "llama-3.1-70b", "--gpu", "A100-SXM4-80GB", "--gpus", "4", "--json").stdout
    )
    assert four["weights_gib"] == pytest.approx(one["weights_gib"] / 4)
    assert one["fits"] is False and four["fits"] is True


def test_estimate_max_concurrency_uses_every_sequence_that_fits():
    data = json.loads(
        inferstack(
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "L40S",
            "--concurrency",
            "max",
            "--input-tokens",
            "1000",
            "--output-tokens",
            "200",
            "--json",
        ).stdout
    )
    assert data["concurrency"] == data["max_concurrency"] > 1


def test_estimate_on_cpu():
    result = inferstack(
        "estimate",
        "--model",
        "llama-2-7b",
        "--cpu-cores",
        "8",
        "--cpu-mem-bw-gbps",
        "307.2",
        "--cpu-isa",
        "amx",
        "--cpu-ghz",
        "2.2",
        "--precision",
        "q4_0",
        "--output-tokens",
        "128",
        "--input-tokens",
        "1",
        "--json",
    )
    data = json.loads(result.stdout)
    assert 1000 / data["tpot_ms"] == pytest.approx(12.32, rel=0.2)  # calibration row c03


def test_unknown_gpu_is_a_clear_error_not_a_traceback():
    result = inferstack("estimate", "--model", "llama-3.1-8b", "--gpu", "H900")
    assert result.returncode == 2
    assert "--gpu: is not a known accelerator id (got 'H900')" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_model_is_a_clear_error():
    result = inferstack("estimate", "--model", "gpt-7", "--gpu", "L4")
    assert result.returncode == 2 and "is not a built-in model" in result.stderr and "Traceback" not in result.stderr


def test_plan_prints_every_cloud_and_the_best(tmp_path):
    result = inferstack("plan", str(WORKLOADS / "chat-8b-public.yaml"), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [c["cloud"] for c in report["clouds"]] == ["aws", "gcp", "alibaba", "huawei"]
    assert report["best"]["price"]["monthly_ranking"]["currency"] == "USD"


def test_plan_table_for_people():
    result = inferstack("plan", str(WORKLOADS / "embeddings-bert.yaml"))
    assert result.returncode == 0, result.stderr
    assert "Best overall" in result.stdout and "huawei" in result.stdout


def test_infeasible_plan_exits_3_with_reasons_and_suggestions(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "model: llama-3.1-405b\ntraffic: {concurrent_users: 4}\nslo: {ttft_p95_ms: 10}\nplacement: {clouds: [aws]}\n"
    )
    result = inferstack("plan", str(workload))
    assert result.returncode == 3
    assert "misses the TTFT target" in result.stdout and "→ with " in result.stdout
    assert "Traceback" not in result.stderr


def test_negative_qps_is_rejected_before_planning(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text("model: bert-base\ntraffic: {requests_per_s: -5}\n")
    result = inferstack("plan", str(workload))
    assert result.returncode == 2
    assert "traffic.requests_per_s" in result.stderr and "-5" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["models", "gpus", "catalog"])
def test_listings_as_json(command):
    result = inferstack(command, "--json")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) > 10


def test_diff_of_two_workloads_is_markdown_for_a_pull_request():
    result = inferstack("diff", str(WORKLOADS / "kb-qa-7b-internal.yaml"), str(WORKLOADS / "chat-8b-public.yaml"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("### inferstack plan diff")


def test_diff_with_a_bad_base_ref_is_a_clear_error():
    result = inferstack("diff", "--base-ref", "no-such-ref-xyz", str(WORKLOADS / "chat-8b-public.yaml"))
    assert result.returncode == 2 and "Traceback" not in result.stderr and "no-such-ref-xyz" in result.stderr


def test_manifest_lists_every_file_with_size_and_sha256(tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"weights")
    result = inferstack("manifest", str(tmp_path))
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    sha256_of_weights = "9a129038d9a00aed0cf6a7ea059ca50a813449061ab87848cf1a13eafdf33b2c"
    assert manifest["files"] == [{"path": "model.gguf", "size": 7, "sha256": sha256_of_weights}]

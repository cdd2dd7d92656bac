"""Encoders (embedding, classifier, reranker models): estimated like the CLI documents, at the peak of the CPU unit
that runs their matmuls, checked against held-out MLPerf rows, and never given token figures they cannot have."""

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

from inferstack import report
from inferstack.errors import InputError
from inferstack.sizing.estimate import estimate
from inferstack.sizing.hardware import CpuSpec
from inferstack.sizing.items import MAX_BATCH, ItemServer
from inferstack.sizing.models import lookup
from inferstack.sizing.planner import plan_workload
from inferstack.sizing.suggest import _slo_times
from inferstack.spec import Engine, Precision, parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from calibration_cases import ENCODER_ROWS, predict

# A 4th-gen Xeon (AMX) and a 3rd-gen (AVX-512 with VNNI), 32 cores each, as `estimate --cpu-*` describes them.
SAPPHIRE_RAPIDS = CpuSpec(cores=32, memory_bandwidth_gbps=307.2, isa="amx", ghz=2.0, description="test")
ICE_LAKE = CpuSpec(cores=32, memory_bandwidth_gbps=204.8, isa="avx512", ghz=2.0, description="test")


def items_per_s(model: str, precision: Precision, cpu: CpuSpec, **kwargs: object) -> float:
    result = estimate(
        lookup(model), precision=precision, engine=Engine.ONNXRUNTIME, cpu=cpu, concurrency=32, input_tokens=128,
        **kwargs,  # type: ignore[arg-type]
    )
    assert result.items_per_s is not None
    return result.items_per_s


# ---- output tokens -------------------------------------------------------------------------------------------


def test_an_encoder_is_estimated_with_zero_output_tokens_and_no_token_figures():
    result = estimate(
        lookup("bert-base"), precision=Precision.FP32, engine=Engine.ONNXRUNTIME, cpu=ICE_LAKE, output_tokens=0
    )
    assert result.output_tokens == 0
    assert result.ttft_ms is None and result.tpot_ms is None
    assert result.output_tokens_per_s is None and result.prefill_tokens_per_s is None
    assert result.items_per_s is not None and result.items_per_s > 0
    assert result.e2e_latency_ms > 0


def test_an_encoder_defaults_to_zero_output_tokens():
    result = estimate(lookup("bert-base"), precision=Precision.FP32, engine=Engine.ONNXRUNTIME, cpu=ICE_LAKE)
    assert result.output_tokens == 0


def test_an_encoder_refuses_output_tokens_it_cannot_produce():
    with pytest.raises(InputError, match=r"--output-tokens: does not apply to bert-base.*pass --output-tokens 0"):
        estimate(
            lookup("bert-base"), precision=Precision.FP32, engine=Engine.ONNXRUNTIME, cpu=ICE_LAKE, output_tokens=5
        )


def test_a_decoder_llm_refuses_zero_output_tokens_and_says_what_to_pass():
    with pytest.raises(InputError, match=r"--output-tokens: must be at least 1 for llama-3.1-8b.*--output-tokens 1"):
        estimate(
            lookup("llama-3.1-8b"), precision=Precision.BF16, engine=Engine.LLAMACPP, cpu=ICE_LAKE, output_tokens=0
        )


def test_a_decoder_llm_still_defaults_to_128_output_tokens():
    result = estimate(lookup("llama-3.1-8b"), precision=Precision.BF16, engine=Engine.LLAMACPP, cpu=ICE_LAKE)
    assert result.output_tokens == 128


# ---- concurrency max -----------------------------------------------------------------------------------------


def test_concurrency_max_without_a_memory_size_runs_the_batch_cap_and_reports_its_throughput():
    result = estimate(
        lookup("bert-base"), precision=Precision.INT8, engine=Engine.ONNXRUNTIME, cpu=SAPPHIRE_RAPIDS, concurrency="max"
    )
    one = estimate(lookup("bert-base"), precision=Precision.INT8, engine=Engine.ONNXRUNTIME, cpu=SAPPHIRE_RAPIDS)
    assert result.concurrency == MAX_BATCH
    assert result.items_per_s is not None and one.items_per_s is not None
    assert result.items_per_s > one.items_per_s > 0
    assert any("memory size not given" in note for note in result.notes)


def test_concurrency_max_with_a_memory_size_runs_the_largest_batch_that_fits():
    result = estimate(
        lookup("bert-large"),
        precision=Precision.FP32,
        engine=Engine.ONNXRUNTIME,
        cpu=ICE_LAKE,
        ram_gib=4.0,  # 2 GiB usable - 1.24 GiB fp32 weights - 0.5 GiB runtime: room for 12 items of 0.02 GiB
        concurrency="max",
    )
    assert result.concurrency == result.max_concurrency == 12
    assert result.fits is True
    assert result.items_per_s is not None and result.items_per_s > 0


def test_concurrency_max_with_no_room_for_one_item_is_a_clear_error():
    with pytest.raises(InputError, match="--concurrency: max found no room for even one item"):
        estimate(
            lookup("bert-large"), precision=Precision.FP32, engine=Engine.ONNXRUNTIME, cpu=ICE_LAKE, ram_gib=1.0,
            concurrency="max",
        )


# ---- int8 and bf16 CPU peaks ---------------------------------------------------------------------------------


def test_int8_on_an_amx_cpu_runs_at_least_ten_times_faster_than_fp32():
    # AMX int8 peak 2048 ops/cycle x 0.354 against the fp32 vector peak 64 x 0.6: 18.9x on the matmuls alone.
    int8 = items_per_s("bert-base", Precision.INT8, SAPPHIRE_RAPIDS)
    fp32 = items_per_s("bert-base", Precision.FP32, SAPPHIRE_RAPIDS)
    assert int8 / fp32 > 10


def test_int8_on_an_avx512_cpu_uses_vnni_at_about_four_times_fp32():
    ratio = items_per_s("bert-base", Precision.INT8, ICE_LAKE) / items_per_s("bert-base", Precision.FP32, ICE_LAKE)
    assert 3.0 < ratio <= 4.0


def matmul_ops_per_s(precision: Precision, cpu: CpuSpec) -> float:
    server = ItemServer(model=lookup("bert-base"), precision=precision, engine=Engine.ONNXRUNTIME, cpu=cpu)
    return server.cpu_matmul_ops_per_s()


def test_bf16_runs_on_amx_tiles_but_at_the_fp32_rate_without_amx():
    # AMX bf16 1024 ops/cycle x 0.354 against fp32 64 x 0.6: 9.4x.
    assert matmul_ops_per_s(Precision.BF16, SAPPHIRE_RAPIDS) == pytest.approx(
        9.44 * matmul_ops_per_s(Precision.FP32, SAPPHIRE_RAPIDS), rel=0.01
    )
    assert matmul_ops_per_s(Precision.BF16, ICE_LAKE) == matmul_ops_per_s(Precision.FP32, ICE_LAKE)


@pytest.mark.parametrize("row_id", ["e01", "e03", "e04"])
def test_int8_bert_large_matches_held_out_mlperf_rows_within_15_percent(row_id):
    row = ENCODER_ROWS[row_id]
    assert row.role == "held-out"
    assert predict(row.case) == pytest.approx(row.measured, rel=0.15)


def test_the_amx_efficiency_is_fitted_on_one_row_only():
    assert [row_id for row_id, row in ENCODER_ROWS.items() if row.role == "fit"] == ["e02"]


# ---- not applicable, not assumed -----------------------------------------------------------------------------


def test_the_estimate_table_says_n_a_for_token_figures_of_an_encoder(monkeypatch):
    result = estimate(lookup("bert-base"), precision=Precision.FP32, engine=Engine.ONNXRUNTIME, cpu=ICE_LAKE)
    out = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=out, width=200))
    report.print_estimate(result)
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in out.getvalue().splitlines()
            if line.count("│") == 3}
    assert rows["tpot_ms"] == rows["ttft_ms"] == rows["output_tokens_per_s"] == "n/a"
    assert rows["fits"] == "unknown (no memory size)"
    assert float(rows["items_per_s"].replace(",", "")) > 0


ENCODER_WORKLOAD = {"model": "bert-base", "traffic": {"requests_per_s": 20, "prompt_tokens": 128}}


@pytest.mark.parametrize("field", ["tpot_p95_ms", "ttft_p95_ms", "min_output_tokens_per_s"])
def test_a_token_target_for_an_encoder_is_an_error_naming_the_field_and_the_fix(field):
    spec = parse_workload({**ENCODER_WORKLOAD, "slo": {field: 50}})
    with pytest.raises(InputError, match=rf"slo\.{field}: does not apply to bert-base.*slo\.latency_p95_ms"):
        plan_workload(spec, clouds=["aws"])


def test_an_encoder_plan_reports_no_ttft_or_tpot_and_no_assumed_token_targets():
    plan = plan_workload(parse_workload({**ENCODER_WORKLOAD, "slo": {"latency_p95_ms": 200}}), clouds=["aws"])
    assert plan.best is not None
    performance = plan.best.performance
    assert performance.ttft_p95_ms is None and performance.tpot_p95_ms is None
    assert performance.output_tokens_per_s is None
    assert not any("tpot" in line or "ttft" in line for line in plan.assumptions)


def test_relaxing_the_default_targets_of_an_encoder_sets_no_token_target():
    update = _slo_times(2)(parse_workload(ENCODER_WORKLOAD))
    assert update is not None
    slo = update["slo"]
    assert slo.latency_p95_ms == 2000 and slo.tpot_p95_ms is None and slo.ttft_p95_ms is None


def cpu_plan_warnings(precision: str) -> list[str]:
    workload = {**ENCODER_WORKLOAD, "precision": precision, "placement": {"device": "cpu", "clouds": ["aws"]}}
    plan = plan_workload(parse_workload(workload), clouds=["aws"])
    assert plan.best is not None and plan.best.offer.startswith(("c7i", "m7i", "r7i"))  # AMX families
    return plan.best.warnings


def test_an_int8_encoder_on_amx_is_not_flagged_uncalibrated_but_fp32_is():
    assert not any("uncalibrated" in w for w in cpu_plan_warnings("int8"))
    assert any("uncalibrated" in w and "fp32 vector peak" in w for w in cpu_plan_warnings("fp32"))


def test_sdxl_is_sized_from_its_denoising_steps_and_the_field_is_refused_where_it_does_not_apply():
    """Issue 26 item 5: a diffusion model's compute is its steps (the UNet twice under guidance) plus the
    once-per-image rest, from the registry's derivation; traffic.diffusion_steps sets the steps."""
    from inferstack.errors import InputError
    from inferstack.sizing.models import lookup
    from inferstack.sizing.planner import plan_workload
    from inferstack.spec import parse_workload

    sdxl = lookup("sdxl")
    assert sdxl.step is not None and sdxl.step.default_steps == 30
    basis = sdxl.gflops_per_item(0)
    assert abs(basis - sdxl.gflops_per_request) / sdxl.gflops_per_request < 1e-5  # the entry's 30-step figure
    assert sdxl.gflops_per_item(0, 60) == sdxl.step.fixed_gflops + 60 * sdxl.step.gflops
    base = {"name": "img", "model": "sdxl", "precision": "fp16", "traffic": {"requests_per_s": 1.0},
            "slo": {"latency_p95_ms": 60000}, "stage": "internal", "placement": {"clouds": ["aws"]}}
    plans = {steps: plan_workload(parse_workload({**base, "traffic": {"requests_per_s": 1.0,
                                                                       "diffusion_steps": steps}})).outcome("aws")
             for steps in (15, 60)}
    few, many = plans[15].chosen, plans[60].chosen
    assert few is not None and many is not None
    per_replica = {n: p.performance.capacity_requests_per_s / p.replicas for n, p in ((15, few), (60, many))}
    assert per_replica[60] < per_replica[15]
    assert "60 denoising steps per image" in many.rationale[0]
    with pytest.raises(InputError, match=r"traffic\.diffusion_steps: does not apply to llama-3\.1-8b"):
        plan_workload(parse_workload({**base, "model": "llama-3.1-8b", "slo": {},
                                      "traffic": {"requests_per_s": 1.0, "diffusion_steps": 30}}))


def _asr_plan(**traffic):  # type: ignore[no-untyped-def]
    from inferstack.sizing.planner import plan_workload
    from inferstack.spec import parse_workload

    spec = {"name": "asr", "model": "whisper-large-v3", "precision": "fp16",
            "traffic": {"requests_per_s": 4.0, **traffic}, "slo": {"latency_p95_ms": 60000}, "stage": "internal",
            "placement": {"clouds": ["aws"]}}
    return plan_workload(parse_workload(spec)).outcome("aws").chosen


def test_whisper_is_sized_from_its_audio_windows_and_the_decoders_sequential_steps():
    """Issue 26 item 5: a clip is ceil(audio / 30 s) windows; a batch of windows runs the encoder once, then the
    decoder one token at a time, each step reading the decoder's weights and every window's cross-attention K/V."""
    from inferstack.sizing.hardware import gpu_spec
    from inferstack.sizing.items import ItemServer
    from inferstack.sizing.models import lookup
    from inferstack.spec import Engine, Precision

    whisper = lookup("whisper-large-v3")
    assert whisper.decoder is not None and whisper.decoder.max_tokens == 448
    # the decoder's parameters from the config; the encoder's are the rest (about 636 M)
    assert 0.90e9 < whisper.decoder.params < 0.91e9 and 0.63e9 < whisper.params - whisper.decoder.params < 0.64e9
    assert whisper.gflops_per_item(0) == pytest.approx(whisper.gflops_per_request, rel=1e-3)  # the 2,827 basis

    def server(**audio):  # type: ignore[no-untyped-def]
        return ItemServer(model=whisper, precision=Precision.BF16, engine=Engine.ONNXRUNTIME,
                          gpu=gpu_spec("T4"), **audio)

    long = server(audio_seconds=95.0)
    assert long.windows_per_item == 4 and long.tokens_per_window == 128
    assert server(audio_seconds=10.0).tokens_per_window == 43  # ceil(10 s x 128/30)
    assert server(tokens_per_audio_second=20.0).tokens_per_window == 448  # the model writes no more a window
    # Time is the decoder's steps: twice the tokens, nearly twice the time; a batch is the encoder once and the steps
    base, wordy = server(), server(tokens_per_audio_second=2 * 128 / 30)
    assert 1.6 < wordy.batch_latency_s(8) / base.batch_latency_s(8) < 2.0
    # A batch-1 window on a T4 takes over a second (128 steps each reading ~1.8 GB): an encoder-only count made
    # it ~0.1 s, which planned one T4 for 4 clips/s where an A100 is published near 5 (issue 26)
    assert base.batch_latency_s(1) > 1.0 and 16 / base.batch_latency_s(16) < 4.0


def test_a_whisper_plan_follows_its_audio_and_says_how():
    short, default, hour = _asr_plan(audio_seconds=10), _asr_plan(), _asr_plan(audio_seconds=600)
    assert short is not None and default is not None and hour is not None
    per_replica = {name: plan.performance.capacity_requests_per_s / plan.replicas
                   for name, plan in (("short", short), ("default", default), ("hour", hour))}
    assert per_replica["short"] > per_replica["default"] > per_replica["hour"]
    assert hour.replicas > default.replicas
    assert "600 s of audio per clip: 20 window(s) of 30 s" in hour.rationale[0]
    assert "the entry's basis; traffic.audio_seconds and traffic.tokens_per_audio_second set them" in \
        default.rationale[0]


def test_audio_fields_are_refused_where_they_do_not_apply_or_exceed_the_model():
    from inferstack.errors import InputError
    from inferstack.sizing.planner import plan_workload
    from inferstack.spec import parse_workload

    llm = {"name": "chat", "model": "llama-3.1-8b", "traffic": {"requests_per_s": 1.0, "audio_seconds": 30},
           "stage": "internal", "placement": {"clouds": ["aws"]}}
    with pytest.raises(InputError, match=r"traffic\.audio_seconds: does not apply to llama-3\.1-8b"):
        plan_workload(parse_workload(llm))
    with pytest.raises(InputError, match=r"traffic\.tokens_per_audio_second: is more than whisper-large-v3 writes"):
        _asr_plan(tokens_per_audio_second=15.5)


def test_a_request_larger_than_one_batch_says_so_and_a_clip_over_32_minutes_is_refused_by_name():
    from inferstack.errors import InputError
    from inferstack.sizing.planner import plan_workload
    from inferstack.spec import parse_workload

    spec = {"name": "asr", "model": "whisper-large-v3", "precision": "fp16", "stage": "internal",
            "traffic": {"requests_per_s": 0.1, "audio_seconds": 1800, "items_per_request": 3},
            "slo": {"latency_p95_ms": 600000}, "placement": {"clouds": ["aws"]}}
    outcome = plan_workload(parse_workload(spec)).outcome("aws")
    assert outcome.chosen is None  # 3 clips of 60 windows: 180, over the 64 a batch holds
    assert any("one request is more than one batch holds" in line for line in outcome.blocked_by)
    with pytest.raises(InputError, match=r"traffic\.audio_seconds: .*1920.*split longer recordings"):
        parse_workload({**spec, "traffic": {"requests_per_s": 0.1, "audio_seconds": 1921}})


def test_the_decoder_steps_read_all_but_the_cross_attention_projections_and_fp32_activations_are_wider():
    from inferstack.sizing.hardware import gpu_spec
    from inferstack.sizing.items import ItemServer
    from inferstack.sizing.models import lookup
    from inferstack.spec import Engine, Precision

    decoder = lookup("whisper-large-v3").decoder
    assert decoder is not None and decoder.params - decoder.step_params == 32 * 2 * 1280 * 1280
    half = ItemServer(model=lookup("whisper-large-v3"), precision=Precision.BF16, engine=Engine.ONNXRUNTIME,
                      gpu=gpu_spec("T4"))
    full = ItemServer(model=lookup("whisper-large-v3"), precision=Precision.FP32, engine=Engine.ONNXRUNTIME,
                      gpu=gpu_spec("T4"))
    assert full.batch_latency_s(8) > 1.9 * half.batch_latency_s(8)  # twice the weights and the cross K/V bytes

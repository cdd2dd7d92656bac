"""One latency model: what `estimate` reports is `token_latency` at its concurrency."""

import pytest

from inferstack.sizing.architecture import read_llm_config
from inferstack.sizing.efficiency import LLAMA_CPP_PYTHON_SERVING
from inferstack.sizing.estimate import estimate
from inferstack.sizing.hardware import CpuSpec, gpu_spec
from inferstack.sizing.latency import token_latency
from inferstack.sizing.llm import LlmReplica
from inferstack.sizing.models import lookup
from inferstack.spec import Engine, KvCacheDtype, Precision

MODEL = lookup("llama-3.1-8b")
REPLICA = LlmReplica(
    arch=MODEL.arch, precision=Precision.BF16, kv_dtype=KvCacheDtype.AUTO, engine=Engine.VLLM, gpu=gpu_spec("H100-SXM")
)


def _estimate(concurrency: int):
    return estimate(
        MODEL,
        precision=Precision.BF16,
        engine=Engine.VLLM,
        gpu=gpu_spec("H100-SXM"),
        concurrency=concurrency,
        input_tokens=800,
        output_tokens=300,
    )


def test_one_sequence_alone_decodes_at_the_bare_step_time_after_its_own_prefill():
    result = _estimate(1)
    assert result.tpot_ms == pytest.approx(REPLICA.decode_step_s(1, 950) * 1e3, rel=1e-12)
    assert result.ttft_ms == pytest.approx(REPLICA.prefill_s(1, 800) * 1e3, rel=1e-12)


def test_at_a_concurrency_the_others_prefills_stretch_every_token():
    result = _estimate(32)
    others_per_s = 31 / REPLICA.batch_s(32, 800, 300)
    latency = token_latency(
        REPLICA, concurrency=32, prompt_tokens=800, context_tokens=950, other_prefills_per_s=others_per_s
    )
    share = others_per_s * REPLICA.prefill_s(1, 800)
    assert result.tpot_ms == pytest.approx(REPLICA.decode_step_s(32, 950) / (1 - share) * 1e3, rel=1e-12)
    assert result.tpot_ms == pytest.approx(latency.tpot_s * 1e3, rel=1e-12)
    assert result.ttft_ms == pytest.approx(latency.ttft_s * 1e3, rel=1e-12)
    assert result.e2e_latency_ms == pytest.approx((latency.ttft_s + 299 * latency.tpot_s) * 1e3, rel=1e-12)


# ---- the server's own work per request and per token (efficiency.ServingOverhead) ----------------------------


# The boot test's tiny llama (examples/loadtest-loop/workload.yaml): a forward pass of microseconds.
TINY = read_llm_config({
    "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 267, "max_position_embeddings": 512,
})
C7I_2XLARGE = CpuSpec(cores=4, memory_bandwidth_gbps=76.8, isa="amx", ghz=3.2, description="c7i.2xlarge")


def _cpu_replica(arch, precision: Precision) -> LlmReplica:
    return LlmReplica(arch=arch, precision=precision, kv_dtype=KvCacheDtype.AUTO, engine=Engine.LLAMACPP,
                      cpu=C7I_2XLARGE, ram_gib=16.0)


def test_a_tiny_model_on_the_llama_cpp_server_is_timed_at_the_servers_floor_not_at_zero():
    replica = _cpu_replica(TINY, Precision.FP32)
    assert replica.engine_decode_step_s(1, 100) < 1e-4  # the roofline: under 0.1 ms
    assert replica.decode_step_s(1, 100) == pytest.approx(
        replica.engine_decode_step_s(1, 100) + LLAMA_CPP_PYTHON_SERVING.token_ms / 1e3, rel=1e-12)
    assert replica.prefill_s(1, 32) == pytest.approx(
        replica.engine_prefill_s(1, 32) + LLAMA_CPP_PYTHON_SERVING.request_ms / 1e3, rel=1e-12)
    assert replica.decode_step_s(1, 100) > 10 * replica.engine_decode_step_s(1, 100)  # the floor dominates
    assert replica.prefill_s(1, 32) > 10 * replica.engine_prefill_s(1, 32)


def test_the_servers_work_is_per_sequence_in_a_step_and_per_request_in_a_prefill():
    replica = _cpu_replica(TINY, Precision.FP32)
    token_s, request_s = LLAMA_CPP_PYTHON_SERVING.token_ms / 1e3, LLAMA_CPP_PYTHON_SERVING.request_ms / 1e3
    assert replica.decode_step_s(4, 100) - replica.engine_decode_step_s(4, 100) == pytest.approx(4 * token_s)
    assert replica.prefill_s(3, 32) - replica.engine_prefill_s(3, 32) == pytest.approx(3 * request_s)


def test_the_floor_is_a_small_share_of_a_big_models_step():
    replica = _cpu_replica(lookup("llama-3.1-8b").arch, Precision.Q4_K_M)
    engine_s = replica.engine_decode_step_s(1, 1000)
    assert engine_s > 0.03  # tens of ms per token for 8B on four cores
    assert replica.decode_step_s(1, 1000) / engine_s - 1 < 0.05


def test_a_calibration_factor_scales_the_served_time_the_load_test_measured():
    measured = LlmReplica(arch=TINY, precision=Precision.FP32, kv_dtype=KvCacheDtype.AUTO, engine=Engine.LLAMACPP,
                          cpu=C7I_2XLARGE, ram_gib=16.0, decode_time_factor=2.0, prefill_time_factor=3.0)
    modelled = _cpu_replica(TINY, Precision.FP32)
    assert measured.decode_step_s(1, 100) == pytest.approx(2.0 * modelled.decode_step_s(1, 100), rel=1e-12)
    assert measured.prefill_s(1, 32) == pytest.approx(3.0 * modelled.prefill_s(1, 32), rel=1e-12)


def test_vllm_has_no_separate_floor_its_step_overhead_is_in_the_fitted_per_layer_term():
    assert REPLICA.serving_overhead.token_ms == REPLICA.serving_overhead.request_ms == 0.0
    assert REPLICA.decode_step_s(8, 950) == REPLICA.engine_decode_step_s(8, 950)

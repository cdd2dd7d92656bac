"""One latency model: what `estimate` reports is `token_latency` at its concurrency."""

import pytest

from inferstack.sizing.estimate import estimate
from inferstack.sizing.hardware import gpu_spec
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

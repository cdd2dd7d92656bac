"""The memory model against hand-computed values and vLLM's own measurements."""

import pytest

from inferstack.sizing.hardware import gpu_spec
from inferstack.sizing.llm import GIB, NON_TORCH_GIB, LlmReplica
from inferstack.sizing.models import lookup
from inferstack.sizing.precision import weight_bytes
from inferstack.spec import Engine, KvCacheDtype, Precision


def replica(model: str, precision: str = "bf16", gpu: str = "H100-SXM", gpus: int = 1, kv: str = "auto") -> LlmReplica:
    arch = lookup(model).arch
    assert arch is not None
    return LlmReplica(
        arch=arch,
        precision=Precision(precision),
        kv_dtype=KvCacheDtype(kv),
        engine=Engine.VLLM,
        gpu=gpu_spec(gpu),
        gpus=gpus,
    )


def test_llama_3_1_8b_bf16_caches_131072_bytes_per_token():
    # 2 (K and V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes
    assert replica("llama-3.1-8b").kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131_072


def test_llama_3_1_8b_bf16_weights_are_14_96_gib():
    assert replica("llama-3.1-8b").weights_gib_per_device == pytest.approx(14.96, abs=0.01)


def test_qwen3_32b_bf16_weights_match_vllm_measurement():
    assert replica("qwen3-32b").weights_gib_per_device == pytest.approx(61.03, rel=0.003)  # calibration row m04


def test_fp8_checkpoint_keeps_embeddings_in_16_bit():
    arch = lookup("llama-3.3-70b").arch
    assert arch is not None
    expected = (arch.params - arch.embedding_params) * 1 + arch.embedding_params * 2
    assert weight_bytes(arch, Precision.FP8) == expected
    assert replica("llama-3.3-70b", "fp8", gpus=2).weights_gib_per_device == pytest.approx(33.88, rel=0.01)  # m05


def test_kv_heads_are_replicated_when_tensor_parallel_exceeds_them():
    # 8 KV heads on 16 ranks: each rank still holds one head, so the group caches twice the model's figure
    assert replica("llama-3.1-8b", gpus=16).kv_bytes_per_token == 2 * 131_072


def test_kv_heads_are_split_when_tensor_parallel_divides_them():
    assert replica("llama-3.1-8b", gpus=4).kv_bytes_per_token_per_device == 131_072 / 4


def test_mla_caches_the_compressed_latent_per_layer():
    # DeepSeek-V2-Lite: 27 layers x (kv_lora_rank 512 + rope 64) x 2 bytes
    assert replica("deepseek-v2-lite").kv_bytes_per_token == 27 * (512 + 64) * 2


def test_sliding_window_caps_the_cache_of_a_long_sequence():
    mistral = replica("mistral-7b")  # v0.1: every layer attends within 4096 tokens
    assert mistral.kv_bytes_per_sequence_per_device(8192) == mistral.kv_bytes_per_sequence_per_device(4096)


def test_gemma_2_caps_only_its_local_layers():
    gemma = replica("gemma-2-9b")
    short, long = gemma.kv_bytes_per_sequence_per_device(4096), gemma.kv_bytes_per_sequence_per_device(8192)
    assert short < long < 2 * short  # global layers grow, the sliding half stays at the window


def test_sequences_occupy_whole_16_token_blocks():
    r = replica("llama-3.1-8b")
    assert r.kv_bytes_per_sequence_per_device(17) == r.kv_bytes_per_sequence_per_device(32) == 32 * 131_072


def test_fp8_kv_cache_halves_the_bytes():
    assert replica("llama-3.1-8b", kv="fp8").kv_bytes_per_token == 65_536


def test_available_kv_cache_is_what_the_engine_may_use_less_weights_and_overhead():
    # vLLM's accounting (calibration row m03 shows it: 0.9 x 79.18 - 14.99 - 4.76 - 0.13 = 51.38 GiB); the
    # activation constant is fitted on the memory rows, so the test checks the identity, not a fitted figure.
    r = replica("llama-3.1-8b")
    assert r.kv_cache_gib == pytest.approx(0.9 * r.capacity_gib - r.weights_gib_per_device - r.overhead_gib)


def test_profiling_peak_follows_the_vocabulary_not_tensor_parallelism():
    # vLLM 0.11 logs the same activation peak for Qwen3-32B at TP1 and TP2 (rows p45, p48), and a larger one for
    # larger vocabularies (Llama 128256: 4.76 GiB; Qwen3 151936: 5.64 GiB; gpt-oss 201088: 7.38 GiB)
    one, two = replica("qwen3-32b"), replica("qwen3-32b", gpus=2)
    assert one.overhead_gib - NON_TORCH_GIB[1] == pytest.approx(two.overhead_gib - NON_TORCH_GIB[2])
    assert replica("llama-3.1-8b").overhead_gib < one.overhead_gib < replica("gpt-oss-120b").overhead_gib


def test_mixtral_activates_two_of_eight_experts():
    arch = lookup("mixtral-8x7b").arch
    assert arch is not None
    assert arch.params / 1e9 == pytest.approx(46.7, abs=0.1)
    assert arch.active_params / 1e9 == pytest.approx(12.9, abs=0.2)


def test_gguf_q4_k_m_quantizes_every_weight_at_its_average_rate():
    arch = lookup("llama-2-7b").arch
    assert arch is not None
    assert weight_bytes(arch, Precision.Q4_K_M) == pytest.approx(arch.params * 4.85 / 8)


def test_cpu_server_keeps_an_os_reserve():
    arch = lookup("mistral-7b").arch
    assert arch is not None
    cpu = LlmReplica(
        arch=arch, precision=Precision.FP16, kv_dtype=KvCacheDtype.AUTO, engine=Engine.LLAMACPP, ram_gib=32.0
    )
    assert cpu.usable_gib == 32.0 - 3.2
    assert cpu.weights_gib_per_device == pytest.approx(arch.params * 2 / GIB)
    # a 7B model in 16 bit does not fit a 16 GiB server: the planner must pick >= 20 GB RAM
    small = LlmReplica(
        arch=arch, precision=Precision.FP16, kv_dtype=KvCacheDtype.AUTO, engine=Engine.LLAMACPP, ram_gib=16.0
    )
    assert small.kv_cache_gib < 0

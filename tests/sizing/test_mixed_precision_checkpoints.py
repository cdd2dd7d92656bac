"""Mixed-precision checkpoints (issue 26, item 2): a published checkpoint at a quantized precision may keep modules in
16 bit, and its quantization_config says which (`modules_to_not_convert`, `ignore`). The sizing reads that list, from
the registry's `checkpoints` or from a config.json, and sizes weights, bandwidth and matmul work per module: Meta's
Llama-3.1-405B-Instruct-FP8 keeps every layer's attention, the first and last layers and the output head in bf16."""

from dataclasses import replace

import pytest

from inferstack.sizing.architecture import read_llm_config, unmatched_patterns
from inferstack.sizing.hardware import gpu_spec
from inferstack.sizing.llm import GIB, LlmReplica
from inferstack.sizing.models import lookup, registry
from inferstack.sizing.precision import quantized_share, weight_bytes
from inferstack.spec import Engine, KvCacheDtype, Precision

LLAMA_405B = lookup("llama-3.1-405b").arch
assert LLAMA_405B is not None


def replica(arch, gpus: int = 8) -> LlmReplica:
    return LlmReplica(arch=arch, precision=Precision.FP8, kv_dtype=KvCacheDtype.AUTO, engine=Engine.VLLM,
                      gpu=gpu_spec("H100-SXM"), gpus=gpus)


def test_the_405b_fp8_checkpoint_keeps_attention_the_first_and_last_layers_and_the_head_in_bf16():
    arch = LLAMA_405B
    h, layers = arch.hidden_size, arch.layers
    attention = arch.attention_params_per_layer * layers
    mlp_kept = 2 * 3 * h * arch.intermediate_size  # layers 0 and 125: gate, up and down
    assert arch.linear_params_kept("fp8") == attention + mlp_kept
    quantized = arch.params - arch.embedding_params - attention - mlp_kept
    assert weight_bytes(arch, Precision.FP8) == quantized * 1 + (arch.params - quantized) * 2
    # 487 GB, 56.7 GiB per GPU at tensor parallel 8, where FP8 on every linear layer would be 410 GB (16 % light).
    assert weight_bytes(arch, Precision.FP8) / 1e9 == pytest.approx(487.16, abs=0.01)
    plain = replace(arch, kept_16bit=())
    assert weight_bytes(plain, Precision.FP8) / 1e9 == pytest.approx(410.06, abs=0.01)
    assert replica(arch).weights_gib_per_device == pytest.approx(487.16e9 / 8 / GIB, rel=1e-4)


def test_the_modules_kept_in_16_bit_run_their_matmuls_at_the_16_bit_rate():
    share = quantized_share(LLAMA_405B, Precision.FP8)
    assert 0.80 < share < 0.81  # 81 % of the blocks' linear parameters are FP8
    mixed, plain = replica(LLAMA_405B), replica(replace(LLAMA_405B, kept_16bit=()))
    assert mixed._gpu_rates.flops_per_s < plain._gpu_rates.flops_per_s
    assert mixed.engine_prefill_s(1, 4096) > plain.engine_prefill_s(1, 4096)
    assert quantized_share(LLAMA_405B, Precision.INT4_AWQ) == 1.0  # no AWQ checkpoint listed: the default scope


def test_a_config_json_with_its_own_quantization_config_is_sized_by_it():
    config = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
              "max_position_embeddings": 131072,
              "quantization_config": {"quant_method": "fp8", "ignore": ["lm_head", "re:.*self_attn.*"]}}
    arch = read_llm_config(config)
    assert arch.kept_at("fp8") == ("lm_head", "re:.*self_attn.*")
    assert arch.linear_params_kept("fp8") == arch.attention_params_per_layer * 32
    assert read_llm_config({**config, "quantization_config": {"quant_method": "awq"}}).kept_16bit == ()


def test_every_registry_checkpoint_names_modules_inferstack_counts():
    """A misspelt or unsupported module name would otherwise be ignored silently."""
    for name, entry in registry().items():
        arch = lookup(name).arch
        for precision in entry.get("checkpoints", {}):
            Precision(precision)  # a precision inferstack knows
            assert arch is not None and arch.kept_at(precision), (name, precision)
            assert unmatched_patterns(arch, precision) == [], (name, precision)
    typo = replace(LLAMA_405B, kept_16bit=(("fp8", ("model.layer.0", "lm_head")),))
    assert unmatched_patterns(typo, "fp8") == ["model.layer.0"]

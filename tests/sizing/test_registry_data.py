"""The built-in model registry (inferstack/sizing/data/models.yaml) is complete and internally consistent.

These tests check the data, not the reader: the parameter and KV-cache formulas live here on purpose, so a typo
in a config (a wrong head count, intermediate size or vocabulary) shows up as a mismatch with the published
parameter count or with a measured figure from shared/benchmarks/calibration.csv.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

REGISTRY_PATH = Path(__file__).resolve().parents[2] / "inferstack" / "sizing" / "data" / "models.yaml"
ROOT = REGISTRY_PATH.parents[3]

REQUIRED_MODELS = {
    "llm": [
        "llama-2-7b",
        "llama-2-13b",
        "llama-2-70b",
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "llama-3.3-70b",
        "mistral-7b",
        "mixtral-8x7b",
        "qwen2.5-7b",
        "qwen2.5-14b",
        "qwen2.5-32b",
        "qwen2.5-72b",
        "qwen3-32b",
        "qwen3-8b",
        "deepseek-v2-lite",
        "gemma-2-9b",
        "gemma-2-27b",
        "phi-3-mini",
        "mistral-small-3.2-24b",
        "gpt-oss-120b",
        "gpt-13b",
    ],
    "encoder": ["bert-base", "bert-large", "mobilebert", "tinybert"],
    "vision": ["resnet-50", "mobilenetv3", "yolov8n"],
    "image_generation": ["sdxl"],
    "speech": ["whisper-large-v3"],
}
VALID_KINDS = set(REQUIRED_MODELS)

# Dense decoder-only models with a llama-style block: q/k/v/o attention, 3-matrix gated MLP, two norms per layer.
DENSE_LLAMA_FAMILY = [
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.3-70b",
    "mistral-7b",
    "qwen2.5-7b",
    "qwen2.5-14b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "qwen3-32b",
    "qwen3-8b",
    "phi-3-mini",
]
PUBLISHED_COUNT_TOLERANCE = 0.02

# GPT-2 config.json files name their keys n_layer/n_embd/...; transformers maps them onto the usual names.
KEY_ALIASES = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer"),
    "hidden_size": ("hidden_size", "n_embd"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "intermediate_size": ("intermediate_size", "n_inner"),
    "vocab_size": ("vocab_size",),
}
MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
# Architectures whose config.json has no KV-head key because every head has its own K and V.
MULTI_HEAD_ONLY_MODEL_TYPES = {"gpt2"}

BYTES_PER_GIB = 2**30
BF16_BYTES = 2


def load_registry() -> list[dict[str, Any]]:
    with REGISTRY_PATH.open(encoding="utf-8") as registry_file:
        return yaml.safe_load(registry_file)


REGISTRY = load_registry()
BY_NAME = {entry["name"]: entry for entry in REGISTRY}


def language_config(entry: dict[str, Any]) -> dict[str, Any]:
    """The language model's keys: multimodal config.json files nest them under text_config."""
    config: dict[str, Any] = entry["config"]
    return config.get("text_config", config)


def config_value(config: dict[str, Any], key: str) -> Any:
    for alias in KEY_ALIASES[key]:
        if alias in config:
            return config[alias]
    raise KeyError(key)


def dense_llama_params(config: dict[str, Any]) -> int:
    """Embeddings (+ untied lm_head) + layers x (q, k, v, o with real KV heads and head_dim + gated MLP + 2 norms)."""
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    query_width = heads * head_dim
    kv_width = config["num_key_value_heads"] * head_dim
    embeddings = config["vocab_size"] * hidden * (1 if config["tie_word_embeddings"] else 2)
    attention = hidden * query_width + 2 * hidden * kv_width + query_width * hidden
    gated_mlp = 3 * hidden * config["intermediate_size"]
    per_layer = attention + gated_mlp + 2 * hidden
    return embeddings + config["num_hidden_layers"] * per_layer + hidden


def bert_params(config: dict[str, Any]) -> int:
    """BertModel: word/position/type embeddings + LayerNorm, layers (attention, FFN, 2 LayerNorms), pooler."""
    hidden, intermediate = config["hidden_size"], config["intermediate_size"]
    embedding_rows = config["vocab_size"] + config["max_position_embeddings"] + config["type_vocab_size"]
    embeddings = embedding_rows * hidden + 2 * hidden
    attention = 4 * hidden * hidden + 4 * hidden
    ffn = 2 * hidden * intermediate + intermediate + hidden
    per_layer = attention + ffn + 2 * 2 * hidden
    pooler = hidden * hidden + hidden
    return embeddings + config["num_hidden_layers"] * per_layer + pooler


def kv_cache_bytes_per_token(config: dict[str, Any], bytes_per_value: int) -> int:
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * bytes_per_value


def entries_of_kind(kind: str) -> list[dict[str, Any]]:
    return [entry for entry in REGISTRY if entry["kind"] == kind]


# ---------------------------------------------------------------------------------------------------------------
# Completeness and shape of every entry
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "name"), [(kind, name) for kind, names in REQUIRED_MODELS.items() for name in names])
def test_every_required_model_is_present_with_its_kind(kind: str, name: str) -> None:
    assert name in BY_NAME, f"{name} is missing from {REGISTRY_PATH.name}"
    assert BY_NAME[name]["kind"] == kind


def test_registry_names_are_unique() -> None:
    names = [entry["name"] for entry in REGISTRY]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert duplicates == []


def test_registry_names_are_lowercase_registry_keys() -> None:
    badly_named = [
        entry["name"] for entry in REGISTRY if entry["name"] != entry["name"].lower() or " " in entry["name"]
    ]
    assert badly_named == []


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda entry: entry["name"])
def test_every_entry_has_a_valid_kind(entry: dict[str, Any]) -> None:
    assert entry["kind"] in VALID_KINDS


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda entry: entry["name"])
def test_every_entry_names_its_source_and_how_it_was_checked(entry: dict[str, Any]) -> None:
    for field in ("display_name", "source", "source_checked"):
        assert isinstance(entry.get(field), str), f"{entry['name']}: {field} missing"
        assert entry[field].strip(), f"{entry['name']}: {field} is empty"
    assert "source_uri" in entry, f"{entry['name']}: source_uri missing (null where weights were never published)"
    datetime.date.fromisoformat(entry["checked_on"])


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda entry: entry["name"])
def test_unverified_keys_name_fields_that_exist(entry: dict[str, Any]) -> None:
    fields = set(entry) | set(entry.get("config", {})) | set(language_config(entry) if "config" in entry else {})
    unknown = [key for key in entry.get("unverified", []) if key not in fields]
    assert unknown == []


# ---------------------------------------------------------------------------------------------------------------
# LLM configs
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", entries_of_kind("llm"), ids=lambda entry: entry["name"])
def test_llm_config_has_the_keys_a_size_and_speed_reader_needs(entry: dict[str, Any]) -> None:
    config = language_config(entry)
    for key in KEY_ALIASES:
        value = config_value(config, key)
        assert isinstance(value, int), f"{entry['name']}: {key} = {value!r}"
        assert value > 0
    has_kv_heads = isinstance(config.get("num_key_value_heads"), int)
    has_mla = all(isinstance(config.get(key), int) for key in MLA_KEYS)
    multi_head_only = entry["config"]["model_type"] in MULTI_HEAD_ONLY_MODEL_TYPES
    assert has_kv_heads or has_mla or multi_head_only, f"{entry['name']}: no KV-head count and no MLA keys"
    assert isinstance(entry["published_params_b"], (int, float))


@pytest.mark.parametrize("entry", entries_of_kind("llm"), ids=lambda entry: entry["name"])
def test_llm_heads_divide_into_kv_groups(entry: dict[str, Any]) -> None:
    config = language_config(entry)
    if "num_key_value_heads" in config:
        assert config["num_attention_heads"] % config["num_key_value_heads"] == 0


@pytest.mark.parametrize("name", DENSE_LLAMA_FAMILY)
def test_dense_llama_family_parameter_count_matches_the_published_count(name: str) -> None:
    entry = BY_NAME[name]
    computed_b = dense_llama_params(language_config(entry)) / 1e9
    published_b = entry["published_params_b"]
    assert computed_b == pytest.approx(published_b, rel=PUBLISHED_COUNT_TOLERANCE), (
        f"{name}: computed {computed_b:.3f} B from the config, published {published_b} B"
    )


def test_llama_3_1_8b_comes_to_8_03_billion_parameters() -> None:
    assert dense_llama_params(BY_NAME["llama-3.1-8b"]["config"]) / 1e9 == pytest.approx(8.03, abs=0.005)


def test_qwen3_32b_comes_to_32_8_billion_parameters_and_61_gib_in_bf16() -> None:
    params = dense_llama_params(BY_NAME["qwen3-32b"]["config"])
    assert params / 1e9 == pytest.approx(32.8, abs=0.05)
    # vLLM 0.11 measured 61.03 GiB of bf16 weights (calibration.csv row m04).
    assert params * BF16_BYTES / BYTES_PER_GIB == pytest.approx(61.03, rel=0.005)


def test_llama_3_1_8b_kv_cache_is_128_kib_per_token_in_bf16() -> None:
    # calibration.csv row m03: 131072 B/token.
    assert kv_cache_bytes_per_token(BY_NAME["llama-3.1-8b"]["config"], BF16_BYTES) == 131072


def test_mistral_small_kv_cache_matches_the_163840_bytes_per_token_vllm_measured() -> None:
    # calibration.csv row m07: 28.20 GiB / 184,832 tokens = 163,840 B/token.
    config = language_config(BY_NAME["mistral-small-3.2-24b"])
    assert kv_cache_bytes_per_token(config, BF16_BYTES) == 163840


@pytest.mark.parametrize("entry", entries_of_kind("llm"), ids=lambda entry: entry["name"])
def test_moe_active_parameters_are_a_fraction_of_the_total(entry: dict[str, Any]) -> None:
    config = language_config(entry)
    experts = config.get("num_local_experts") or config.get("n_routed_experts") or config.get("num_experts")
    if experts is None:
        assert "published_active_params_b" not in entry
        return
    assert config["num_experts_per_tok"] < experts
    assert 0 < entry["published_active_params_b"] < entry["published_params_b"]


@pytest.mark.parametrize("entry", entries_of_kind("llm"), ids=lambda entry: entry["name"])
def test_layer_types_list_one_attention_kind_per_layer(entry: dict[str, Any]) -> None:
    config = language_config(entry)
    if "layer_types" not in config:
        return
    layer_types = config["layer_types"]
    assert len(layer_types) == config["num_hidden_layers"]
    assert set(layer_types) <= {"sliding_attention", "full_attention"}
    assert isinstance(config["sliding_window"], int)


@pytest.mark.parametrize("name", ["gemma-2-9b", "gemma-2-27b", "gpt-oss-120b"])
def test_alternating_models_slide_on_even_layers_and_attend_fully_on_odd_layers(name: str) -> None:
    layer_types = language_config(BY_NAME[name])["layer_types"]
    expected = ["sliding_attention" if index % 2 == 0 else "full_attention" for index in range(len(layer_types))]
    assert layer_types == expected


def test_mistral_7b_is_v0_1_with_a_4096_token_sliding_window() -> None:
    entry = BY_NAME["mistral-7b"]
    assert entry["source_uri"] == "mistralai/Mistral-7B-v0.1"
    assert entry["config"]["sliding_window"] == 4096


def test_gpt_13b_has_the_gpt_3_13b_shape() -> None:
    config = BY_NAME["gpt-13b"]["config"]
    assert (config["n_layer"], config["n_embd"], config["n_head"]) == (40, 5120, 40)
    assert config["n_inner"] == 4 * config["n_embd"]
    assert (config["vocab_size"], config["n_positions"]) == (50257, 2048)


# ---------------------------------------------------------------------------------------------------------------
# Encoders
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", entries_of_kind("encoder"), ids=lambda entry: entry["name"])
def test_encoder_config_has_the_keys_a_flops_reader_needs(entry: dict[str, Any]) -> None:
    config = entry["config"]
    for key in (
        "num_hidden_layers",
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "vocab_size",
        "max_position_embeddings",
        "type_vocab_size",
    ):
        assert isinstance(config.get(key), int), f"{entry['name']}: {key}"
    assert entry["published_params_m"] > 0


def test_mobilebert_carries_its_bottleneck_keys() -> None:
    config = BY_NAME["mobilebert"]["config"]
    assert config["use_bottleneck"] is True
    assert config["true_hidden_size"] == config["intra_bottleneck_size"] == 128
    assert config["num_feedforward_networks"] == 4


@pytest.mark.parametrize("name", ["bert-base", "bert-large", "tinybert"])
def test_bert_parameter_count_matches_the_published_count(name: str) -> None:
    entry = BY_NAME[name]
    computed_m = bert_params(entry["config"]) / 1e6
    assert computed_m == pytest.approx(entry["published_params_m"], rel=PUBLISHED_COUNT_TOLERANCE)


# ---------------------------------------------------------------------------------------------------------------
# Vision, image generation, speech: parameters and FLOPs per request
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [entry for entry in REGISTRY if entry["kind"] in ("vision", "image_generation", "speech")],
    ids=lambda entry: entry["name"],
)
def test_non_llm_entry_states_params_flops_and_what_one_request_is(entry: dict[str, Any]) -> None:
    assert entry["params_m"] > 0
    assert entry["gflops_per_request"] > 0
    for field in ("gflops_basis", "gflops_source"):
        assert entry[field].strip(), f"{entry['name']}: {field} is empty"
    if "derived here" in entry["gflops_source"]:
        assert entry["gflops_derivation"].strip()


def test_sdxl_parameter_total_is_the_sum_of_its_components() -> None:
    sdxl = BY_NAME["sdxl"]
    components = sdxl["components"]
    assert set(components) == {"unet", "text_encoder", "text_encoder_2", "vae"}
    assert all(component["source"].strip() for component in components.values())
    assert sum(component["params_m"] for component in components.values()) == pytest.approx(sdxl["params_m"], abs=0.5)


def test_whisper_carries_its_encoder_decoder_config() -> None:
    config = BY_NAME["whisper-large-v3"]["config"]
    for key in (
        "d_model",
        "encoder_layers",
        "decoder_layers",
        "encoder_attention_heads",
        "decoder_attention_heads",
        "encoder_ffn_dim",
        "decoder_ffn_dim",
        "vocab_size",
        "num_mel_bins",
        "max_source_positions",
        "max_target_positions",
    ):
        assert isinstance(config.get(key), int), key
    assert BY_NAME["whisper-large-v3"]["params_m"] == pytest.approx(
        BY_NAME["whisper-large-v3"]["published_params_m"], rel=PUBLISHED_COUNT_TOLERANCE
    )


def test_packaged_json_registry_matches_the_yaml_source():
    """models.json is what the package loads; tools/build_registry.py rebuilds it from models.yaml."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_registry", ROOT / "tools" / "build_registry.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    packaged = (ROOT / "inferstack" / "sizing" / "data" / "models.json").read_text(encoding="utf-8")
    assert packaged == module.registry_json(), "run `python tools/build_registry.py` after editing models.yaml"

"""Model architectures: read from a Hugging Face config.json (or the same keys inline) and count what matters.

An `LlmArchitecture` knows its parameter counts (total and active per token), the KV cache it needs per
token, and the FLOPs of a forward pass. It understands dense GQA (Llama, Qwen, Mistral, Gemma-2, Phi-3),
MoE (Mixtral, DeepSeek, gpt-oss: experts, experts per token, shared experts, leading dense layers),
MLA (DeepSeek: kv_lora_rank + qk_rope_head_dim cached per token), sliding windows, tied embeddings,
GPT-style learned positions with 2-matrix MLPs, and BERT-style encoders.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from inferstack.documents import parse_document, read_input_file
from inferstack.errors import Problem, input_error

CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")
"""Where a config.json states the model's context limit."""


@dataclass(frozen=True)
class LlmArchitecture:
    """The numbers of a transformer that decide its memory and speed."""

    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position: int
    """The longest sequence the model holds: its config's max_position_embeddings (else 4096, for counting learned
    position embeddings only: `context_stated` is then False and no context is refused for it)."""
    tied_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU/GeGLU (3 matrices) vs GPT/BERT (2 matrices)
    learned_positions: bool = False
    qkv_bias: bool = False
    sliding_window: int | None = None
    sliding_window_layers: int = 0  # how many of the layers attend only within the window
    # Mixture of experts
    routed_experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate_size: int = 0
    dense_layers: int = 0  # leading layers with a dense MLP (DeepSeek's first_k_dense_replace)
    # Multi-head latent attention (DeepSeek)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    context_stated: bool = True
    encoder_only: bool = False
    kept_16bit: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(precision value, modules) pairs: the linear modules the published checkpoint at that precision keeps in 16
    bit, as its quantization_config names them (`modules_to_not_convert`, `ignore`): Hugging Face module names, `*`
    for any part, `re:` for a regular expression (`linear_params_kept`). Registry `checkpoints`, or a config.json's
    own."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ---- parameter counts -------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        return self.routed_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @cached_property
    def embedding_params(self) -> int:
        """Token embeddings, untied output head and learned positions: kept 16-bit by AWQ/GPTQ/FP8."""
        count = self.vocab_size * self.hidden_size * (1 if self.tied_embeddings or self.encoder_only else 2)
        if self.learned_positions:
            count += self.max_position * self.hidden_size
        return count

    @cached_property
    def attention_params_per_layer(self) -> int:
        h = self.hidden_size
        if self.is_mla:
            q_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (
                h * self.q_lora_rank + self.q_lora_rank * self.heads * q_head + self.q_lora_rank
                if self.q_lora_rank
                else h * self.heads * q_head
            )
            kv_down = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv_up = self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv_down + kv_up + self.heads * self.v_head_dim * h
        q_width, kv_width = self.heads * self.head_dim, self.kv_heads * self.head_dim
        bias = (q_width + 2 * kv_width) if self.qkv_bias else 0
        return h * q_width + 2 * h * kv_width + q_width * h + bias

    def _mlp_params(self, intermediate: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden_size * intermediate

    @cached_property
    def expert_params(self) -> int:
        """One routed expert's MLP."""
        return self._mlp_params(self.moe_intermediate_size)

    @cached_property
    def dense_mlp_params(self) -> int:
        return self._mlp_params(self.intermediate_size)

    @property
    def norm_params_per_layer(self) -> int:
        return 2 * self.hidden_size

    def _moe_mlp_params(self, experts_counted: int) -> int:
        """One MoE layer's MLP: `experts_counted` routed experts, the shared ones and the router."""
        return (experts_counted + self.shared_experts) * self.expert_params + self.hidden_size * self.routed_experts

    def _block_params(self, experts_counted: int) -> int:
        dense_mlp_layers = self.layers - self.moe_layers
        moe = self.moe_layers * self._moe_mlp_params(experts_counted)
        attention_and_norms = self.layers * (self.attention_params_per_layer + self.norm_params_per_layer)
        return attention_and_norms + dense_mlp_layers * self.dense_mlp_params + moe + self.hidden_size

    @cached_property
    def params(self) -> int:
        """All parameters."""
        return self.embedding_params + self._block_params(self.routed_experts)

    def largest_stage_share(self, stages: int) -> float:
        """The share of the parameters the largest of `stages` pipeline stages holds, split as vLLM splits the layers
        (vllm/distributed/utils.py get_pp_indices: layers // stages each, the remainder one each to the stages before
        the last), the input embedding on the first stage and the output head on the last."""
        per_layer = self.attention_params_per_layer + self.norm_params_per_layer
        moe_layer = per_layer + self._moe_mlp_params(self.routed_experts)
        dense_layer = per_layer + self.dense_mlp_params
        sizes = [self.layers // stages] * stages
        for index in range(2, self.layers % stages + 2):
            sizes[-index] += 1
        head = self.vocab_size * self.hidden_size
        totals, first = [], 0
        for stage, size in enumerate(sizes):
            layers = range(first, first + size)
            total = sum(moe_layer if self.is_moe and layer >= self.dense_layers else dense_layer for layer in layers)
            if stage == 0:  # the input embedding (a tied head is its own copy on the last stage)
                total += self.embedding_params - (0 if self.tied_embeddings else head)
            if stage == stages - 1:  # the final norm and the output head
                total += self.hidden_size + head
            totals.append(total)
            first += size
        return max(totals) / self.params

    @cached_property
    def linear_modules(self) -> tuple[tuple[str, int], ...]:
        """The blocks' linear modules by Hugging Face name (Llama/Qwen naming: self_attn.{q,k,v,o}_proj,
        mlp.{gate,up,down}_proj; an MoE layer's mlp.experts, mlp.shared_experts and mlp.gate as units; MLA attention
        as one unit) with their parameters: what a checkpoint's list of unconverted modules is matched against."""
        h, modules = self.hidden_size, []
        q_width, kv_width = self.heads * self.head_dim, self.kv_heads * self.head_dim
        bias = self.qkv_bias
        for layer in range(self.layers):
            prefix = f"model.layers.{layer}"
            if self.is_mla:
                modules.append((f"{prefix}.self_attn", self.attention_params_per_layer))
            else:
                modules += [(f"{prefix}.self_attn.q_proj", h * q_width + (q_width if bias else 0)),
                            (f"{prefix}.self_attn.k_proj", h * kv_width + (kv_width if bias else 0)),
                            (f"{prefix}.self_attn.v_proj", h * kv_width + (kv_width if bias else 0)),
                            (f"{prefix}.self_attn.o_proj", q_width * h)]
            if self.is_moe and layer >= self.dense_layers:
                modules += [(f"{prefix}.mlp.experts", self.routed_experts * self.expert_params),
                            (f"{prefix}.mlp.gate", h * self.routed_experts)]
                if self.shared_experts:
                    modules.append((f"{prefix}.mlp.shared_experts", self.shared_experts * self.expert_params))
            elif self.gated_mlp:
                modules += [(f"{prefix}.mlp.{name}", h * self.intermediate_size)
                            for name in ("gate_proj", "up_proj", "down_proj")]
            else:
                modules += [(f"{prefix}.mlp.{name}", h * self.intermediate_size) for name in ("up_proj", "down_proj")]
        return tuple(modules)

    def kept_at(self, precision: str) -> tuple[str, ...]:
        """The modules the published checkpoint at `precision` keeps in 16 bit (none known: empty)."""
        return next((modules for value, modules in self.kept_16bit if value == precision), ())

    def linear_params_kept(self, precision: str) -> int:
        """Parameters of the blocks' linear modules that the published checkpoint at `precision` keeps in 16 bit (0:
        none kept, or no checkpoint known). A pattern matches a module or any module under it (`model.layers.0`
        covers that layer's attention and MLP); `lm_head` and `model.embed_tokens` are 16-bit anyway."""
        patterns = self.kept_at(precision)
        if not patterns:  # most models at most precisions: no walk over every layer's modules
            return 0
        return sum(count for name, count in self.linear_modules if any(_covers(p, name) for p in patterns))

    @cached_property
    def routed_expert_params(self) -> int:
        """Parameters in routed experts (what MXFP4 checkpoints quantize)."""
        return self.moe_layers * self.routed_experts * self.expert_params

    @cached_property
    def active_params(self) -> int:
        """Parameters one token passes through (MoE: only its experts), including the output head."""
        output_head = self.vocab_size * self.hidden_size
        return self._block_params(self.experts_per_token) + (0 if self.encoder_only else output_head)

    # ---- KV cache ---------------------------------------------------------------------------------

    def kv_elements_per_token_per_layer(self, tensor_parallel: int = 1) -> int:
        """Cached elements per token per layer on ONE tensor-parallel rank.

        Each rank holds max(kv_heads / tp, 1) heads: KV heads are replicated when tp > kv_heads.
        MLA caches one compressed latent (kv_lora_rank + rope dims) that every rank keeps whole.
        """
        if self.encoder_only:
            return 0
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        heads_per_rank = max(self.kv_heads // tensor_parallel, 1)
        return 2 * heads_per_rank * self.head_dim

    def tensor_parallel_problem(self, tensor_parallel: int) -> str | None:
        """Why `tensor_parallel` GPUs cannot split this model (None: they can): the attention heads must divide
        evenly, and the KV heads must divide too or be replicated (a group size that is a multiple of them)."""
        tp = tensor_parallel
        if tp == 1:
            return None
        if self.heads % tp:
            return f"{tp} GPUs do not divide the model's {self.heads} attention heads (tensor parallelism)"
        if not self.is_mla and self.kv_heads % tp and tp % self.kv_heads:
            return f"{tp} GPUs do not divide or replicate the model's {self.kv_heads} KV heads"
        return None

    def tensor_parallel_sizes(self, up_to: int) -> list[int]:
        """The GPU counts from 1 to `up_to` that can split this model."""
        return [tp for tp in range(1, up_to + 1) if self.tensor_parallel_problem(tp) is None]

    def kv_cached_tokens(self, sequence_tokens: int) -> int:
        """Layer-tokens a sequence occupies: sliding-window layers keep at most the window."""
        full_layers = self.layers - self.sliding_window_layers
        window = min(sequence_tokens, self.sliding_window or sequence_tokens)
        return full_layers * sequence_tokens + self.sliding_window_layers * window

    # ---- FLOPs ------------------------------------------------------------------------------------

    @cached_property
    def attention_width(self) -> int:
        """Query heads × head dim: the width of the score and value products."""
        if self.is_mla:
            return self.heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.heads * self.head_dim

    def prefill_flops(self, tokens: int) -> float:
        """Forward FLOPs for one sequence of `tokens`: 2·active·n for the matmuls plus the attention scores.

        Causal attention does ~2·L·width·n² (QKᵀ and AV over half the square); an encoder sees the whole square.
        """
        attention = (4.0 if self.encoder_only else 2.0) * self.layers * self.attention_width * tokens * tokens
        return 2.0 * self.active_params * tokens + attention

    def decode_flops(self, context_tokens: int) -> float:
        """Forward FLOPs for one new token attending to `context_tokens`."""
        return 2.0 * self.active_params + 4.0 * self.layers * self.attention_width * context_tokens


# ---- reading config.json ------------------------------------------------------------------------------


EMBEDDING_MODULES = ("lm_head", "model.embed_tokens")
"""Modules outside the blocks, which the precisions that quantize linear layers keep in 16 bit anyway."""
QUANT_METHOD_PRECISIONS = {"fp8": "fp8", "fbgemm_fp8": "fp8"}
"""A config.json's quantization_config.quant_method, as the precision whose unconverted modules it lists."""


def _covers(pattern: str, module: str) -> bool:
    """Whether a quantization_config entry names `module` or a module above it (`model.layers.0` covers
    `model.layers.0.mlp.down_proj`): `re:` entries are regular expressions (compressed-tensors), others may use `*`."""
    parts = module.split(".")
    names = [".".join(parts[:end]) for end in range(1, len(parts) + 1)]
    if pattern.startswith("re:"):
        expression = re.compile(pattern[3:])
        return any(expression.fullmatch(name) for name in names)
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def unmatched_patterns(arch: LlmArchitecture, precision: str) -> list[str]:
    """Entries of a checkpoint's unconverted-module list that name no module inferstack counts (a misspelt or
    unsupported name would otherwise be ignored silently): the registry's test refuses them."""
    names = [name for name, _ in arch.linear_modules]
    return [p for p in arch.kept_at(precision)
            if p not in EMBEDDING_MODULES and not any(_covers(p, name) for name in names)]


def kept_modules(quantization_config: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A config.json's quantization_config as ((precision, modules it keeps in 16 bit),) (empty: a method inferstack
    does not read this way)."""
    if not isinstance(quantization_config, dict):
        return ()
    precision = QUANT_METHOD_PRECISIONS.get(str(quantization_config.get("quant_method", "")))
    kept = quantization_config.get("modules_to_not_convert") or quantization_config.get("ignore") or []
    if precision is None or not isinstance(kept, list):
        return ()
    return ((precision, tuple(str(entry) for entry in kept)),)


def _first(config: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def _sliding_window(config: dict[str, Any], layers: int) -> tuple[int | None, int]:
    """(window, layers using it). Gemma-2 alternates sliding and global layers; Qwen2 switches it off."""
    window = config.get("sliding_window")
    if not window or config.get("use_sliding_window") is False:
        return None, 0
    if "layer_types" in config:
        return int(window), sum(1 for t in config["layer_types"] if t == "sliding_attention")
    if config.get("model_type") in ("gemma2", "gemma3", "cohere2") or config.get("sliding_window_pattern"):
        pattern = int(config.get("sliding_window_pattern") or 2)  # gemma-2: every other layer is local
        return int(window), layers - layers // pattern
    if window >= int(_first(config, "max_position_embeddings", "n_positions", default=window)):
        return None, 0  # a window as long as the context changes nothing
    return int(window), layers


def read_llm_config(config: dict[str, Any], *, field_name: str = "model.architecture") -> LlmArchitecture:
    """Build an LlmArchitecture from Hugging Face config.json keys (decoder LMs and BERT-style encoders)."""
    config = {**config, **config.get("text_config", {})}
    missing = [
        k
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads")
        if _first(config, k, *_ALIASES.get(k, ())) is None
    ]
    if missing:
        raise input_error(
            field_name,
            f"is missing {', '.join(missing)}",
            value=sorted(config)[:12],
            fix="pass a complete Hugging Face config.json (decoder or BERT-style encoder)",
        )
    hidden = int(_first(config, "hidden_size", "d_model", "n_embd"))
    layers = int(_first(config, "num_hidden_layers", "n_layer", "num_layers"))
    heads = int(_first(config, "num_attention_heads", "n_head"))
    model_type = str(config.get("model_type", ""))
    encoder_only = model_type in ("bert", "roberta", "mobilebert", "distilbert", "xlm-roberta", "electra") or any(
        a.endswith(("ForMaskedLM", "ForSequenceClassification", "Model")) and "Causal" not in a
        for a in config.get("architectures", [])
        if a.startswith(("Bert", "Roberta", "MobileBert"))
    )
    window, window_layers = _sliding_window(config, layers)
    routed = int(_first(config, "n_routed_experts", "num_local_experts", "num_experts", default=0) or 0)
    intermediate = int(_first(config, "intermediate_size", "n_inner", "ffn_dim", default=4 * hidden) or 4 * hidden)
    act = str(_first(config, "hidden_act", "activation_function", default="silu"))
    gated = (
        not encoder_only and not act.startswith("gelu_new") and model_type not in ("gpt2", "gptj", "gpt_neox", "opt")
    )
    if model_type.startswith("gemma"):
        gated = True
    return LlmArchitecture(
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=int(_first(config, "num_key_value_heads", "n_head_kv", default=heads)),
        head_dim=int(_first(config, "head_dim", default=hidden // heads)),
        intermediate_size=intermediate,
        vocab_size=int(_first(config, "vocab_size", default=32000)),
        max_position=int(_first(config, *CONTEXT_KEYS, default=4096)),
        context_stated=any(key in config for key in CONTEXT_KEYS),
        tied_embeddings=bool(config.get("tie_word_embeddings", model_type.startswith("gemma") or encoder_only)),
        gated_mlp=gated,
        learned_positions=model_type in ("gpt2", "opt", "bert", "mobilebert", "roberta") or encoder_only,
        qkv_bias=bool(config.get("attention_bias") or model_type in ("qwen2", "qwen2_moe") or encoder_only),
        sliding_window=window,
        sliding_window_layers=window_layers,
        routed_experts=routed,
        experts_per_token=int(_first(config, "num_experts_per_tok", "experts_per_token", default=0) or 0),
        shared_experts=int(config.get("n_shared_experts") or 0),
        moe_intermediate_size=int(_first(config, "moe_intermediate_size", default=intermediate) or intermediate),
        dense_layers=int(config.get("first_k_dense_replace") or 0),
        kv_lora_rank=int(config.get("kv_lora_rank") or 0),
        q_lora_rank=int(config.get("q_lora_rank") or 0),
        qk_rope_head_dim=int(config.get("qk_rope_head_dim") or 0),
        qk_nope_head_dim=int(config.get("qk_nope_head_dim") or 0),
        v_head_dim=int(config.get("v_head_dim") or 0),
        encoder_only=encoder_only,
        kept_16bit=kept_modules(config.get("quantization_config")),
        extra={"model_type": model_type},
    )


_ALIASES = {
    "hidden_size": ("d_model", "n_embd"),
    "num_hidden_layers": ("n_layer", "num_layers"),
    "num_attention_heads": ("n_head",),
}


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a config.json (bounded like a workload file), with errors that say which file and what is wrong."""
    text = read_input_file(path, field="model.config", what="the model's Hugging Face config.json",
                           example="models/my-model/config.json")
    data = parse_document(text, suffix=".json", source=str(path), field="model.config")
    if not isinstance(data, dict):
        raise input_error("model.config", "must be a JSON object", value=str(path), fix="give a config.json")
    return data


__all__ = ["LlmArchitecture", "Problem", "read_config_file", "read_llm_config"]

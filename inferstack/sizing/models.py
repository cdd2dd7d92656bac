"""The built-in model registry (data/models.yaml) and resolution of a workload's `model` field.

A resolved model is either an LLM (an `LlmArchitecture`, from a registry entry, a config.json or inline
keys) or a non-LLM model described by its parameter count and compute per request. Encoders with a
BERT-style config are read like LLMs (encoder_only) so their FLOPs follow the sequence length.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from inferstack.errors import input_error
from inferstack.sizing.architecture import LlmArchitecture, read_config_file, read_llm_config
from inferstack.spec import ModelKind, ModelSpec

DATA_DIR = Path(__file__).parent / "data"


class ResolvedModel(NamedTuple):
    """A model the sizing code can reason about."""

    name: str
    kind: ModelKind
    display_name: str
    source_uri: str | None
    source: str | None
    arch: LlmArchitecture | None  # decoder LLMs and BERT-style encoders
    params: float  # total parameters
    gflops_per_request: float | None  # non-transformer models: compute per item, as published/derived
    gflops_basis: str | None
    step: DiffusionStep | None = None  # diffusion models: what one denoising step and the rest of an item cost
    decoder: SpeechDecoder | None = None  # encoder-decoder speech models: work by audio window and output token

    @property
    def is_llm(self) -> bool:
        return self.kind == "llm"

    def gflops_per_item(self, sequence_tokens: int, steps: int | None = None) -> float:
        """Compute for one item: from the architecture for encoders; for a diffusion model at `steps` denoising steps
        (None: its basis), its steps plus the once-per-image work; else the registry figure."""
        if self.arch is not None and self.arch.encoder_only:
            return self.arch.prefill_flops(sequence_tokens) / 1e9
        if self.step is not None:
            return self.step.fixed_gflops + (steps or self.step.default_steps) * self.step.gflops
        if self.decoder is not None:  # one window at its basis's tokens (items.py runs its decoder's steps)
            return self.decoder.gflops_per_window + self.decoder.default_tokens * self.decoder.gflops_per_token
        if self.gflops_per_request is None:
            raise ValueError(f"{self.name}: no compute figure")
        return self.gflops_per_request


class DiffusionStep(NamedTuple):
    """A diffusion model's compute by step (registry `gflops_per_step`, `gflops_fixed`, `default_steps`): each
    denoising step (the UNet, twice under classifier-free guidance) and the once-per-image rest (text encoders, VAE
    decode); `gflops_per_request` is the entry's basis at `default_steps`."""

    gflops: float
    fixed_gflops: float
    default_steps: int


class SpeechDecoder(NamedTuple):
    """An encoder-decoder speech model (Whisper) by audio window (registry `window_s`, `gflops_per_window`,
    `gflops_per_token`, `default_tokens_per_window`; its config's decoder and source positions): each window runs
    the encoder and the cross-attention K/V projections once, then the decoder one token at a time, each step
    reading the decoder's weights and every window's cross-attention K/V."""

    window_s: float
    gflops_per_window: float
    gflops_per_token: float
    default_tokens: int
    max_tokens: int
    layers: int
    params: float
    """The decoder's parameters (self- and cross-attention, MLP, token embedding shared with the output head)."""
    step_params: float
    """Those a decoder step reads: all but the cross-attention key and value projections, which run once per window
    over the encoder's output (in gflops_per_window)."""
    cross_kv_values: int
    """Cross-attention keys and values a window holds: layers x 2 x source positions x d_model."""

    @property
    def default_tokens_per_s(self) -> float:
        return self.default_tokens / self.window_s

    def windows(self, audio_seconds: float | None) -> int:
        """The windows a clip of `audio_seconds` is decoded as (None: one, the entry's basis)."""
        return 1 if audio_seconds is None else max(1, math.ceil(audio_seconds / self.window_s))

    def tokens_per_window(self, audio_seconds: float | None, tokens_per_s: float | None) -> int:
        """The decoder steps of a clip's batch of windows: the tokens its longest window writes at `tokens_per_s`
        (None: the entry's basis), at most `max_tokens`."""
        seconds = min(audio_seconds or self.window_s, self.window_s)
        return min(self.max_tokens, math.ceil((tokens_per_s or self.default_tokens_per_s) * seconds))


def _speech_decoder(entry: dict[str, Any]) -> SpeechDecoder | None:
    if "gflops_per_window" not in entry:
        return None
    config = entry["config"]
    d, layers, ffn = config["d_model"], config["decoder_layers"], config["decoder_ffn_dim"]
    # per layer: self-attention q, k, v, o and cross-attention q, k, v, o (d x d each), the MLP (d x ffn twice)
    params = layers * (8 * d * d + 2 * d * ffn) + config["vocab_size"] * d + config["max_target_positions"] * d
    return SpeechDecoder(window_s=float(entry["window_s"]), gflops_per_window=float(entry["gflops_per_window"]),
                         gflops_per_token=float(entry["gflops_per_token"]),
                         default_tokens=int(entry["default_tokens_per_window"]),
                         max_tokens=int(config["max_target_positions"]), layers=layers, params=float(params),
                         step_params=float(params - layers * 2 * d * d),
                         cross_kv_values=layers * 2 * config["max_source_positions"] * d)


@cache
def registry() -> dict[str, dict[str, Any]]:
    """Raw registry entries by name, from models.json: models.yaml (the maintained, commented source) as JSON.

    Parsing the YAML takes ~30 ms, a third of `inferstack plan`'s budget; `tools/build_registry.py` writes the
    JSON and a test fails when the two differ.
    """
    with (DATA_DIR / "models.json").open(encoding="utf-8") as f:
        entries: list[dict[str, Any]] = json.load(f)
    return {entry["name"]: entry for entry in entries}


def _from_entry(entry: dict[str, Any]) -> ResolvedModel:
    config = entry.get("config")
    kind: ModelKind = entry["kind"]
    arch = (
        read_llm_config(config, field_name=f"models.yaml:{entry['name']}")
        if config and kind in ("llm", "encoder")
        else None
    )
    if arch is not None and entry.get("checkpoints"):  # published checkpoints at other precisions (models.yaml)
        arch = replace(arch, kept_16bit=tuple(
            (precision, tuple(checkpoint["quantization_config"].get("modules_to_not_convert")
                              or checkpoint["quantization_config"].get("ignore") or ()))
            for precision, checkpoint in entry["checkpoints"].items()))
    if arch is not None:
        params = float(arch.params)
    elif entry.get("params_m") is not None:
        params = float(entry["params_m"]) * 1e6
    else:
        params = float(entry.get("published_params_m") or 0) * 1e6 or float(entry.get("published_params_b") or 0) * 1e9
    return ResolvedModel(
        name=entry["name"],
        kind=kind,
        display_name=entry.get("display_name", entry["name"]),
        source_uri=entry.get("source_uri"),
        source=entry.get("source"),
        arch=arch,
        params=params,
        gflops_per_request=entry.get("gflops_per_request"),
        gflops_basis=entry.get("gflops_basis"),
        step=DiffusionStep(entry["gflops_per_step"], entry["gflops_fixed"], entry["default_steps"])
        if "gflops_per_step" in entry else None,
        decoder=_speech_decoder(entry),
    )


def lookup(name: str, *, field_name: str = "model") -> ResolvedModel:
    """A registry model by name or by its Hugging Face id (case-insensitive), or an error that suggests the closest
    names (and, for an id the registry lacks, how to describe the model from its config.json)."""
    entries = registry()
    key = name.strip().lower()
    if "/" in key:
        return _by_source_uri(name, key, field_name)
    if key not in entries:
        close = difflib.get_close_matches(key, list(entries), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise input_error(
            field_name,
            "is not a built-in model",
            value=name,
            fix=f"{hint}run `inferstack models` for the list, or describe the model with "
            "model.config (a config.json) or model.architecture",
        )
    return _from_entry(entries[key])


def _by_source_uri(name: str, key: str, field_name: str) -> ResolvedModel:
    """The registry model published under the Hugging Face id `key` (its `source_uri`)."""
    found = next((entry for entry in registry().values() if str(entry.get("source_uri") or "").lower() == key), None)
    if found is None:
        example = "model: {config: path/to/config.json, source_uri: " + name + "}"
        raise input_error(field_name, "is a Hugging Face id the built-in registry does not have", value=name,
                          fix=f"download the model's config.json and describe it: {example} (or use a built-in "
                          "model, `inferstack models`)")
    return _from_entry(found)


def resolve(model: str | ModelSpec) -> ResolvedModel:
    """Turn a workload's `model` field into a ResolvedModel."""
    if isinstance(model, str):
        return lookup(model)
    if model.registry:
        found = lookup(model.registry, field_name="model.registry")
        return found if not model.name else _renamed(found, model.name)
    name = model.name or model.default_name
    if model.kind is not None:
        assert model.params_m is not None and model.gflops_per_request is not None
        return ResolvedModel(
            name=name,
            kind=model.kind,
            display_name=name,
            source_uri=model.source_uri,
            source="workload spec",
            arch=None,
            params=model.params_m * 1e6,
            gflops_per_request=model.gflops_per_request,
            gflops_basis="one request (workload spec)",
        )
    if model.config is not None:
        config, field_name, source = read_config_file(model.config), "model.config", str(model.config)
    else:
        config, field_name, source = dict(model.architecture or {}), "model.architecture", "workload spec"
    arch = read_llm_config(config, field_name=field_name)
    return ResolvedModel(
        name=name,
        kind="encoder" if arch.encoder_only else "llm",
        display_name=name,
        source_uri=model.source_uri,
        source=source,
        arch=arch,
        params=float(arch.params),
        gflops_per_request=None,
        gflops_basis=None,
    )


def _renamed(model: ResolvedModel, name: str) -> ResolvedModel:

    return model._replace(name=name, display_name=name)

"""A tiny but real llama-architecture GGUF model (random weights, byte-level SentencePiece vocabulary) that
llama.cpp loads and generates from. A few hundred kilobytes; built with the `gguf` package."""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_EMBD = 64
N_HEAD = 4
N_LAYER = 2
N_FF = 128
N_CTX = 512
PIECES = ["▁the", "▁a", "▁model", "▁server", "▁is", "▁ready", "▁hello", "▁world"]
FIRST_PIECE_ID = 3 + 256  # after <unk> <s> </s> and the 256 byte tokens
# text_only: the merge path to "▁hello" (SentencePiece merges pairs that are tokens), so that the load test's prompt
# word "hello " is one token, as in real tokenizers; and enough words that greedy decoding picks one of them.
TEXT_PIECES = ["▁", "▁h", "▁he", "▁hel", "▁hell"] + [f"▁w{i}" for i in range(251)]


def _vocabulary(pieces: list[str]) -> tuple[list[str], list[float], list[int]]:
    """<unk> <s> </s>, the 256 byte tokens SentencePiece falls back to, and word pieces."""
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + pieces
    types = ([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
             + [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * len(pieces))
    scores = [0.0] * (3 + 256) + [-float(i) for i in range(len(pieces))]
    return tokens, scores, [int(t) for t in types]


def write_tiny_llama(path: Path, seed: int = 0, *, text_only: bool = False) -> Path:
    """The boot test's model. `text_only` (the load-test example, examples/loadtest-loop) makes it answer in whole
    words, as a trained model does: the output rows of the control and byte tokens are zero, so their logit is 0
    while the largest of 264 random word logits is positive (all negative: odds 2^-264), and a random byte never
    makes the server hold text back as incomplete UTF-8."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, scores, types = _vocabulary(PIECES + TEXT_PIECES if text_only else PIECES)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("inferstack-tiny-llama")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    n_vocab = len(tokens)
    writer.add_tensor("token_embd.weight", weight(n_vocab, N_EMBD))
    for layer in range(N_LAYER):
        prefix = f"blk.{layer}"
        writer.add_tensor(f"{prefix}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{prefix}.{name}.weight", weight(N_EMBD, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"{prefix}.ffn_gate.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_up.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_down.weight", weight(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    output = weight(n_vocab, N_EMBD)
    if text_only:
        output[:FIRST_PIECE_ID] = 0.0
    writer.add_tensor("output.weight", output)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    import sys

    print(write_tiny_llama(Path(sys.argv[1]), text_only="--text-only" in sys.argv[2:]))

"""Measure the llama.cpp server's own work per request and per generated token (the serving floor).

Runs the server the bootstrap deploys on CPU (inferstack/bootstrap/files/llamacpp_server.py on llama-cpp-python)
on 127.0.0.1 with the boot test's tiny random-weight llama (tests/bootstrap/tiny_gguf.py: 2 layers, 64 wide,
0.47 MB) and times streamed completions end to end, one request at a time, at 1 and at N output tokens, in
interleaved rounds. The model's forward pass is microseconds (the speed model's figure is printed), so what is
measured is the server: HTTP and JSON, the tokenizer, the sampler, the detokenizer, one SSE chunk per token and
the Python around them.

    .venv/bin/python benchmarks/server_overhead.py --python /path/to/venv-with-llama-cpp-python/bin/python

- per token:   (end-to-end at N − end-to-end at 1) / (N − 1), less the speed model's decode step;
- per request: end-to-end at 1 token, less that token and the speed model's prefill.

Two rows: "words" biases the sampler to the vocabulary's whole-word pieces (logit_bias), so every token is text,
as a trained model's are; "bytes" lets the random model pick byte tokens, as `inferstack loadtest` against it does.
llama-cpp-python 0.3.16 holds back text that is not yet valid UTF-8 and re-detokenizes it at every token
(llama_cpp/llama.py, Llama._create_completion), so random bytes cost more per token the longer the answer: the
"bytes" row is what the boot test's model costs, the "words" row the floor a real model's server has.
The "words" figures go into `inferstack/sizing/efficiency.py` (LLAMA_CPP_PYTHON_SERVING) with the date, machine and
load average printed here. Client and server share the machine: on a loaded machine they are upper bounds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "bootstrap"))

from tiny_gguf import N_CTX, PIECES, write_tiny_llama  # noqa: E402

from inferstack.sizing.architecture import read_llm_config  # noqa: E402
from inferstack.sizing.hardware import CpuSpec  # noqa: E402
from inferstack.sizing.llm import LlmReplica  # noqa: E402
from inferstack.spec import Engine, KvCacheDtype, Precision  # noqa: E402

SERVER = ROOT / "inferstack" / "bootstrap" / "files" / "llamacpp_server.py"
MODEL = "tiny-llama"
WORD_PIECES_FIRST_ID = 3 + 256  # after <unk> <s> </s> and the 256 byte tokens (tiny_gguf._vocabulary)
# The tiny model as the planner sees it (examples/loadtest-loop/workload.yaml).
TINY_ARCH = {
    "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 267, "max_position_embeddings": 512,
    "tie_word_embeddings": False,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_server(python: str, model: Path, threads: int):  # type: ignore[no-untyped-def]
    port = free_port()
    command = [python, str(SERVER), "--model", str(model), "--model_alias", MODEL, "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(N_CTX), "--n_threads", str(threads)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start: {' '.join(command)}") from None
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def end_to_end_ms(url: str, output_tokens: int, words: bool, prompt_words: int) -> float:
    """One streamed completion of exactly `output_tokens`, request sent to the end of the stream."""
    host, port = url.removeprefix("http://").split(":")
    body: dict[str, object] = {"model": MODEL, "prompt": "hello " * prompt_words, "max_tokens": output_tokens,
                               "stream": True, "temperature": 0}
    if words:
        body["logit_bias"] = {str(WORD_PIECES_FIRST_ID + i): 100.0 for i in range(len(PIECES))}
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    start = time.perf_counter()
    connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    elapsed_ms = (time.perf_counter() - start) * 1e3
    connection.close()
    if response.status != 200 or not data.rstrip().endswith(b"data: [DONE]"):
        raise SystemExit(f"the request failed: HTTP {response.status}: {data[-300:]!r}")
    return elapsed_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="an interpreter with llama-cpp-python installed")
    parser.add_argument("--rounds", type=int, default=30, help="requests per output length and kind")
    parser.add_argument("--prompt-words", type=int, default=32, help="words of the prompt ('hello ' each)")
    parser.add_argument("--output-tokens", type=int, default=64, help="N, the long answer")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    replica = LlmReplica(arch=read_llm_config(TINY_ARCH), precision=Precision.FP32,
                         kv_dtype=KvCacheDtype.AUTO, engine=Engine.LLAMACPP,
                         cpu=CpuSpec(cores=args.threads, memory_bandwidth_gbps=50.0, isa="avx512", ghz=2.0,
                                     description="this machine (order of magnitude)"),
                         ram_gib=8.0)
    # "hello " is at most 8 tokens in the tiny vocabulary (bytes, or "▁hello" and bytes), plus <s>.
    prompt_tokens = 8 * args.prompt_words + 1
    engine_prefill_ms = replica.engine_prefill_s(1, prompt_tokens) * 1e3
    engine_step_ms = replica.engine_decode_step_s(1, prompt_tokens + args.output_tokens // 2) * 1e3

    lengths = (1, args.output_tokens)
    samples: dict[tuple[str, int], list[float]] = {(kind, n): [] for kind in ("words", "bytes") for n in lengths}
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_llama(Path(tmp) / "tiny-llama-f32.gguf", seed=1)
        with llama_server(args.python, model, args.threads) as url:
            for n in lengths:  # warm-up
                end_to_end_ms(url, n, True, args.prompt_words)
            for _ in range(args.rounds):  # interleaved, so that load from other jobs falls on every row alike
                for kind, n in samples:
                    samples[(kind, n)].append(end_to_end_ms(url, n, kind == "words", args.prompt_words))
    version = subprocess.run([args.python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {os.cpu_count()} CPUs ({platform.machine()}); "
          f"load average after the run: {os.getloadavg()[0]:.2f}; llama-cpp-python {version}, {args.threads} "
          f"threads; a {args.prompt_words}-word prompt; {args.rounds} requests per cell (medians)")
    print(f"speed model, engine only: prefill {engine_prefill_ms:.4f} ms, decode step {engine_step_ms:.4f} ms")
    print("| output | end-to-end ms at 1 token | at N tokens | N | per token ms | per request ms |")
    print("|---|---|---|---|---|---|")
    for kind in ("words", "bytes"):
        one, many = (statistics.median(samples[(kind, n)]) for n in lengths)
        per_token_ms = (many - one) / (lengths[1] - 1) - engine_step_ms
        per_request_ms = one - (per_token_ms + engine_step_ms) - engine_prefill_ms
        print(f"| {kind} | {one:.2f} | {many:.2f} | {lengths[1]} | {per_token_ms:.2f} | {per_request_ms:.2f} |")

if __name__ == "__main__":
    main()

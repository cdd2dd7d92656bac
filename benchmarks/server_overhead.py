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

Two rows: "text" is the model written with `text_only` (it answers in whole words, as a trained model does, and
the prompt's "hello " is one token); "bytes" is the boot test's model as it is, which answers in random byte tokens.
llama-cpp-python 0.3.16 holds back text that is not yet valid UTF-8 and re-detokenizes what it holds at every token
(llama_cpp/llama.py, Llama._create_completion), so random bytes cost more per token the longer the answer, and the
first text arrives late. The "text" figures are the floor a real model's server has; they go into
`inferstack/sizing/efficiency.py` (LLAMA_CPP_PYTHON_SERVING) with the date, machine and load average printed here.
Client and server share the machine: on a loaded machine they are upper bounds.
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

from tiny_gguf import N_CTX, TEXT_PIECES, write_tiny_llama  # noqa: E402

from inferstack.sizing.architecture import read_llm_config  # noqa: E402
from inferstack.sizing.hardware import CpuSpec  # noqa: E402
from inferstack.sizing.llm import LlmReplica  # noqa: E402
from inferstack.spec import Engine, KvCacheDtype, Precision  # noqa: E402

SERVER = ROOT / "inferstack" / "bootstrap" / "files" / "llamacpp_server.py"
MODEL = "tiny-llama"
# The tiny model as the planner sees it (examples/loadtest-loop/workload.yaml).
TINY_ARCH = {
    "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 267 + len(TEXT_PIECES),
    "max_position_embeddings": 512,
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


def end_to_end_ms(url: str, output_tokens: int, prompt_words: int) -> float:
    """One streamed completion of `output_tokens`, request sent to the end of the stream."""
    host, port = url.removeprefix("http://").split(":")
    body = {"model": MODEL, "prompt": "hello " * prompt_words, "max_tokens": output_tokens, "stream": True,
            "temperature": 0}
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


def medians(python: str, model: Path, threads: int, lengths: tuple[int, ...], rounds: int,
            prompt_words: int) -> list[float]:
    """Median end-to-end ms per output length, lengths interleaved so that other jobs' load falls on each alike."""
    samples: list[list[float]] = [[] for _ in lengths]
    with llama_server(python, model, threads) as url:
        for n in lengths:  # warm-up
            end_to_end_ms(url, n, prompt_words)
        for _ in range(rounds):
            for i, n in enumerate(lengths):
                samples[i].append(end_to_end_ms(url, n, prompt_words))
    return [statistics.median(s) for s in samples]


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
    # "hello " is one token in the text-only vocabulary (plus <s> and a closing "▁"), 8 bytes in the boot test's.
    prompt_tokens = {"text": args.prompt_words + 2, "bytes": 8 * args.prompt_words + 1}
    engine_prefill_ms = {k: replica.engine_prefill_s(1, n) * 1e3 for k, n in prompt_tokens.items()}
    engine_step_ms = {k: replica.engine_decode_step_s(1, n + args.output_tokens // 2) * 1e3
                      for k, n in prompt_tokens.items()}

    lengths = (1, args.output_tokens)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, text_only in (("text", True), ("bytes", False)):
            model = write_tiny_llama(Path(tmp) / f"tiny-llama-{kind}.gguf", seed=1, text_only=text_only)
            rows[kind] = medians(args.python, model, args.threads, lengths, args.rounds, args.prompt_words)
    version = subprocess.run([args.python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {os.cpu_count()} CPUs ({platform.machine()}); "
          f"load average after the run: {os.getloadavg()[0]:.2f}; llama-cpp-python {version}, {args.threads} "
          f"threads; a {args.prompt_words}-word prompt; {args.rounds} requests per cell (medians)")
    print("| answer | end-to-end ms at 1 token | at N tokens | N | engine prefill, step ms (speed model) | "
          "per token ms | per request ms |")
    print("|---|---|---|---|---|---|---|")
    for kind, (one, many) in rows.items():
        prefill_ms, step_ms = engine_prefill_ms[kind], engine_step_ms[kind]
        per_token_ms = (many - one) / (lengths[1] - 1) - step_ms
        per_request_ms = one - (per_token_ms + step_ms) - prefill_ms
        print(f"| {kind} | {one:.2f} | {many:.2f} | {lengths[1]} | {prefill_ms:.3f}, {step_ms:.3f} | "
              f"{per_token_ms:.2f} | {per_request_ms:.2f} |")

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Run llama-cpp-python's OpenAI-compatible server, plus an unauthenticated GET /health.

llama-cpp-python's server has no health route and puts every route behind the API key, so a load balancer
could not check it. The model is loaded while the app is created, before the port opens: /health answering
200 means the model is ready. The API key, when set, comes from the API_KEY environment variable (read by
llama-cpp-python's ServerSettings), never from the command line.

Requests wait their turn: llama-cpp-python's `interrupt_requests` (default true) ends a running stream early,
with [DONE], as soon as another request waits for the model, so under any concurrency clients got cut answers
(found by `inferstack loadtest` at concurrency 2: 5 of 6 streams broken).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvicorn  # type: ignore[import-not-found,unused-ignore]  # in the server's venv only
from llama_cpp.server.app import create_app  # type: ignore[import-not-found,unused-ignore]
from llama_cpp.server.settings import ModelSettings, ServerSettings  # type: ignore[import-not-found,unused-ignore]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="llama-cpp-python server with GET /health.")
    parser.add_argument("--model", required=True, help="GGUF file (first shard of a split model)")
    parser.add_argument("--model_alias", required=True, help="model name clients send")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--n_ctx", type=int, default=None, help="context length in tokens")
    parser.add_argument("--n_threads", type=int, default=None, help="CPU threads")
    args = parser.parse_args(argv)
    server_settings = ServerSettings(host=args.host, port=args.port, interrupt_requests=False)
    model_options: dict[str, object] = {"model": args.model, "model_alias": args.model_alias}
    if args.n_ctx:
        model_options["n_ctx"] = args.n_ctx
    if args.n_threads:
        # Prompts too: llama-cpp-python's n_threads_batch defaults to every logical CPU, not the planned threads.
        # On a busy 2-vCPU machine the extra spinning thread made a 150-token prefill of the loop example's tiny
        # model take 1.07 s instead of 4.8 ms (examples/loadtest-loop/README.md).
        model_options["n_threads"] = model_options["n_threads_batch"] = args.n_threads
    app = create_app(server_settings=server_settings, model_settings=[ModelSettings(**model_options)])

    @app.get("/health", include_in_schema=False)  # type: ignore[untyped-decorator,unused-ignore]
    def health() -> dict[str, str]:
        return {"status": "ok"}

    uvicorn.run(app, host=server_settings.host, port=server_settings.port)


if __name__ == "__main__":
    main()

"""A stub OpenAI-compatible streaming server with injected, known latencies, for the load-test tests.

Run as its own process (`python openai_stub.py`: it prints `PORT <n>` once it listens on 127.0.0.1), so that
its clock and the client's do not wait on each other for one interpreter lock. It streams each answer as the
real engines do: the first token `ttft_s` after the request arrives, then one every `gap_s` (on an absolute
schedule, so a late wake-up does not push back the tokens after it), `max_tokens` in all, a usage chunk and
[DONE]. POST /stub/config sets the behaviour; GET /stub/state returns what it saw and when it wrote.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from aiohttp import web

CONFIG_DEFAULTS: dict[str, Any] = {
    "ttft_s": 0.0,
    "gap_s": 0.0,
    "fail_every": 0,  # every n-th request answers HTTP 500
    "send_usage": True,
    "models": ["stub-model"],
}


class Stub:
    def __init__(self) -> None:
        self.config = dict(CONFIG_DEFAULTS)
        self.state: dict[str, list[Any]] = {"arrivals_s": [], "bodies": [], "authorization": [], "served": []}

    async def configure(self, request: web.Request) -> web.Response:
        self.config.update(await request.json())
        return web.json_response(self.config)

    async def report(self, request: web.Request) -> web.Response:
        return web.json_response(self.state)

    async def list_models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model"}
                                                             for m in self.config["models"]]})

    async def complete(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        arrival_s = loop.time()
        self.state["arrivals_s"].append(arrival_s)
        self.state["authorization"].append(request.headers.get("Authorization"))
        body = await request.json()
        self.state["bodies"].append(body)
        fail_every = self.config["fail_every"]
        if fail_every and len(self.state["bodies"]) % fail_every == 0:
            return web.Response(status=500, text="injected failure")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chat = request.path.endswith("/chat/completions")
        tokens = int(body["max_tokens"])
        written = []
        for index in range(tokens):
            await asyncio.sleep(max(arrival_s + self.config["ttft_s"] + index * self.config["gap_s"] - loop.time(), 0))
            choice = {"index": 0, "delta": {"content": "tok"}} if chat else {"index": 0, "text": "tok"}
            await response.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
            written.append(loop.time() - arrival_s)
        if self.config["send_usage"]:
            usage = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": tokens}}
            await response.write(f"data: {json.dumps(usage)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        self.state["served"].append([written[0], written[-1], loop.time() - arrival_s])
        return response


async def serve() -> None:
    stub = Stub()
    app = web.Application()
    app.router.add_post("/stub/config", stub.configure)
    app.router.add_get("/stub/state", stub.report)
    app.router.add_get("/v1/models", stub.list_models)
    app.router.add_post("/v1/chat/completions", stub.complete)
    app.router.add_post("/v1/completions", stub.complete)
    runner = web.AppRunner(app, shutdown_timeout=0.5)  # a test that cut its requests does not wait on them
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {port}", flush=True)
    # Ends when the test closes stdin (or dies): a stub never outlives its test.
    await loop_until_stdin_closes()
    await runner.cleanup()


async def loop_until_stdin_closes() -> None:
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(serve())

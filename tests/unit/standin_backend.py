"""A stand-in for a vLLM backend, for the on-demand controller's tests:
`python -m tests.unit.standin_backend PORT NAME [--start-delay S] [--bad-flag]`.

Like vLLM: /health, /v1/models, /v1/chat/completions (JSON, or SSE with one chunk per `max_tokens`,
`delay` seconds apart: a body field vLLM does not have), and sleep mode: POST /sleep, POST /wake_up,
GET /is_sleeping; while asleep /v1/models still answers and chat requests HANG, as vLLM's do.
/stats counts chat requests started, finished and cut off by their client; every answer names the
backend's pid (a restart changes it) and echoes the Authorization header it got.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from aiohttp import web


def make_app(name: str) -> web.Application:
    state = {"asleep": False, "started": 0, "finished": 0, "cut": 0, "sleeps": 0, "wakes": 0}

    def chunk(content: str | None, finish: str | None = None) -> bytes:
        delta = {"content": content} if content is not None else {}
        body = {
            "id": "chatcmpl-standin",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        state["started"] += 1
        while state["asleep"]:  # vLLM: a sleeping engine never answers
            await asyncio.sleep(0.1)
        extra = {"pid": os.getpid(), "auth": request.headers.get("Authorization"), "backend": name}
        try:
            if not body.get("stream"):
                await asyncio.sleep(float(body.get("delay", 0)))
                state["finished"] += 1
                return web.json_response(
                    {
                        "id": "chatcmpl-standin",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": name,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": f"ok from {name}"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
                        **extra,
                    }
                )
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Standin": json.dumps(extra)})
            await resp.prepare(request)
            for i in range(int(body.get("max_tokens", 5))):
                await resp.write(chunk(f"t{i} "))
                await asyncio.sleep(float(body.get("delay", 0.05)))
            await resp.write(chunk(None, "stop"))
            await resp.write(b"data: [DONE]\n\n")
            state["finished"] += 1
            return resp
        except (asyncio.CancelledError, ConnectionResetError):
            state["cut"] += 1
            raise

    async def sleep(request: web.Request) -> web.Response:
        state["asleep"], state["sleeps"] = True, state["sleeps"] + 1
        return web.json_response({"status": "sleeping", "level": int(request.query.get("level", 1))})

    async def wake_up(_: web.Request) -> web.Response:
        await asyncio.sleep(0.3)
        state["asleep"], state["wakes"] = False, state["wakes"] + 1
        return web.json_response({"status": "awake", "tags": None})

    async def is_sleeping(_: web.Request) -> web.Response:
        return web.json_response({"is_sleeping": state["asleep"]})

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="")

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"}]})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({**state, "pid": os.getpid()})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/sleep", sleep)
    app.router.add_post("/wake_up", wake_up)
    app.router.add_get("/is_sleeping", is_sleeping)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", stats)
    return app


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("name")
    ap.add_argument("--start-delay", type=float, default=0)
    args, unknown = ap.parse_known_args()
    if unknown:  # as vLLM's parser: a bad flag ends the start with a clear line
        print("INFO loading the model configuration", flush=True)
        print(f"api_server.py: error: unrecognized arguments: {' '.join(unknown)}", flush=True)
        sys.exit(2)
    time.sleep(args.start_delay)  # a loading model: the port stays closed meanwhile
    web.run_app(make_app(args.name), host="127.0.0.1", port=args.port, print=None)

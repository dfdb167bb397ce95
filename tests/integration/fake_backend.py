"""A misbehaving OpenAI-compatible backend for fault tests: `python -m tests.integration.fake_backend MODE PORT [KEY]`.

With KEY it stands in for a hosted API (models.yml `provider:`): every route but /health answers 401 unless the
request sends `Authorization: Bearer KEY`.

MODE ok: answers (JSON or SSE); hang: accepts and never answers; cut: streams two chunks, then
drops the connection without `[DONE]` (a backend crash mid-answer, or a hung one the gateway cut off:
backend_health.py); 500: answers every chat with 500. /v1/responses (vLLM's own, which LiteLLM forwards) does the
same in modes ok, hang and cut.
In mode ok, a request with `tools` is answered with a call of its first tool with TOOL_ARGUMENTS (streamed: the
arguments in two pieces), as an OpenAI-compatible API with function calling answers. GET /last-request answers the
body of the last chat or Responses request it got (what the gateway sent a backend).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from aiohttp import web


def _chunk(content: str | None = None, finish: str | None = None) -> bytes:
    return _event({"index": 0, "delta": {"content": content} if content is not None else {}, "finish_reason": finish})


TOOL_ARGUMENTS = '{"city": "Paris", "days": 2}'
TOOL_CALL_ID = "call_fake_1"


def _tool_chunks(name: str) -> list[bytes]:
    first = {"index": 0, "id": TOOL_CALL_ID, "type": "function", "function": {"name": name, "arguments": ""}}
    half = len(TOOL_ARGUMENTS) // 2
    pieces = [TOOL_ARGUMENTS[:half], TOOL_ARGUMENTS[half:]]
    deltas = [{"tool_calls": [first]}] + [{"tool_calls": [{"index": 0, "function": {"arguments": a}}]} for a in pieces]
    return [_event({"index": 0, "delta": d, "finish_reason": None}) for d in deltas] + [
        _event({"index": 0, "delta": {}, "finish_reason": "tool_calls"})
    ]


def _event(choice: dict) -> bytes:
    body = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": "fake"}
    return f"data: {json.dumps({**body, 'choices': [choice]})}\n\n".encode()


def make_app(mode: str, key: str | None = None) -> web.Application:
    seen: list[dict] = [{}]  # the body of the last chat or Responses request

    async def chat(request: web.Request) -> web.StreamResponse:
        body = seen[0] = await request.json()
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "500":
            return web.json_response({"error": {"message": "backend exploded"}}, status=500)
        if body.get("tools"):
            return await tool_call(request, body)
        if not body.get("stream"):
            return web.json_response(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "fake",
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_chunk("Hello"))
        await resp.write(_chunk(" there"))
        if mode == "cut":
            await asyncio.sleep(0.2)
            request.transport.abort()  # no [DONE], no finish_reason: the connection just dies
            return resp
        await resp.write(_chunk(finish="stop"))
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def tool_call(request: web.Request, body: dict) -> web.StreamResponse:
        name = body["tools"][0]["function"]["name"]
        if not body.get("stream"):
            call = {"id": TOOL_CALL_ID, "type": "function", "function": {"name": name, "arguments": TOOL_ARGUMENTS}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return web.json_response(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "fake",
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for chunk in _tool_chunks(name):
            await resp.write(chunk)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def responses(request: web.Request) -> web.StreamResponse:
        """/v1/responses as vLLM's own (LiteLLM forwards it): streamed, the events of one message; `cut` drops the
        connection after its first text delta."""
        body = seen[0] = await request.json()
        if mode == "hang":
            await asyncio.sleep(3600)
        made = {"id": "resp_fake", "object": "response", "created_at": int(time.time()), "model": "fake"}
        text = {"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed"}
        done = {**made, "status": "completed", "output": [{**text, "content": [
            {"type": "output_text", "text": "Hello there", "annotations": []}]}],
            "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}}  # fmt: skip
        if not body.get("stream"):
            return web.json_response(done)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        events = [
            {"type": "response.created", "response": {**made, "status": "in_progress", "output": []}},
            {"type": "response.output_item.added", "output_index": 0, "item": {**text, "content": []}},
            {"type": "response.output_text.delta", "item_id": "msg_fake", "content_index": 0, "delta": "Hello"},
        ]
        for n, event in enumerate(events):
            data = json.dumps({**event, "sequence_number": n})
            await resp.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
        if mode == "cut":
            await asyncio.sleep(0.2)
            request.transport.abort()
            return resp
        last = {"type": "response.completed", "response": done, "sequence_number": len(events)}
        await resp.write(f"event: response.completed\ndata: {json.dumps(last)}\n\n".encode())
        return resp

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def last_request(_: web.Request) -> web.Response:
        return web.json_response(seen[0])

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    @web.middleware
    async def keyed(request: web.Request, handler):
        if key is not None and request.path != "/health" and request.headers.get("Authorization") != f"Bearer {key}":
            return web.json_response({"error": {"message": "invalid api key", "type": "auth_error"}}, status=401)
        return await handler(request)

    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[keyed])
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/responses", responses)
    app.router.add_get("/health", health)
    app.router.add_get("/last-request", last_request)
    app.router.add_get("/v1/models", models)
    return app


if __name__ == "__main__":
    web.run_app(make_app(sys.argv[1], *sys.argv[3:4]), host="127.0.0.1", port=int(sys.argv[2]), print=None)

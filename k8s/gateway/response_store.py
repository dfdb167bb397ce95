# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""Stored responses: the Responses API's state, kept by the gateway in the stack's Redis (vLLM keeps none).

A `/v1/responses` answer whose request did not say `store: false` (OpenAI's default is to store) is kept for
gateway.responses_ttl (GATEWAY_RESPONSES_TTL, seconds; 0: nothing is stored) under its owner: the person whose key
asked (people.py), or the master key. What is kept: the input the model read (the request's input, after a
`previous_response_id` was expanded into it) and the response object the client got; never a key or a header.

- `previous_response_id`: the request guard (request_guard.py) replaces it, before any check of the gateway and before
  LiteLLM, by the stored input and output (reasoning items and tool calls as they were answered), followed by the
  request's own input: every replica, worker, fallback or hosted model can continue a conversation, and the person's
  models, limits, the context count and the clamp see all of it. An id another key stored is a 403, an unknown,
  expired or deleted one a 404 naming it.
- The answer is read as it passes through the guard (the whole body, or the stream's `response.completed` event)
  and stored before its last bytes reach the client: a follow-up sent at once finds it, on any worker.
- `GET /v1/responses/{id}`, `GET /v1/responses/{id}/input_items` (paged as OpenAI pages: limit, order, after),
  `DELETE /v1/responses/{id}` and `POST /v1/responses/{id}/cancel` are answered here, for the owner only
  (install(): routes in front of LiteLLM's, which would ask a backend that keeps nothing).

In Redis: `gateway:response:<id>` (the record, JSON, expiring), and per owner `gateway:responses:<owner>` (a sorted
set: id -> when it expires) and `gateway:responses:<owner>:bytes` (a hash: id -> bytes), which `make status`, the
page and a person's `stored_responses` limit read. Standard library only, plus `redis` (a LiteLLM dependency).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads this file by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import stack_redis  # noqa: E402

TTL_ENV = "GATEWAY_RESPONSES_TTL"
DEFAULT_TTL = 30 * 86400  # seconds: OpenAI keeps a stored response 30 days
MASTER = "master-key"  # the owner of what the master key stores (a person is "person:<name>": no name has a colon)
MAX_CAPTURE = 64 * 1024 * 1024  # bytes of one answer read to store it; a longer one is passed on, not stored
PAGE_DEFAULT, PAGE_MOST = 20, 100  # input_items: OpenAI's default and largest `limit`
# the routes of a stored response (any of LiteLLM's prefixes); OpenAI's ids, and LiteLLM's re-encoded ones, are resp_...
ROUTE = re.compile(r"^(?:/openai)?(?:/v1)?/responses/(resp_[^/]+)(/input_items|/cancel)?/?$")
ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


def ttl() -> int:
    """Seconds a stored response is kept (0: responses are not stored)."""
    try:
        return max(0, int(float(os.environ.get(TTL_ENV, DEFAULT_TTL))))
    except ValueError:
        return DEFAULT_TTL


def owner_of(person: str | None) -> str:
    return MASTER if person is None else f"person:{person}"


def record_key(rid: str) -> str:
    return f"gateway:response:{rid}"


def index_key(owner: str) -> str:
    return f"gateway:responses:{owner}"


def sizes_key(owner: str) -> str:
    return f"gateway:responses:{owner}:bytes"


class Problem(Exception):
    """A refusal with its HTTP status (403, 404, 429, 503), raised to the guard or a route."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


def not_found(rid: str) -> Problem:
    return Problem(
        404, f"no stored response {rid!r}: it is unknown, expired or deleted (docs/apis.md)", "previous_response_id"
    )


_redis: Any = None


def redis_client() -> Any:
    """The stack's Redis, or None (a stack without one, or responses_ttl 0: nothing is stored)."""
    global _redis
    if _redis is None and ttl() > 0:
        _redis = stack_redis.client(timeout=2)
    return _redis


async def load(client: Any, rid: str, owner: str) -> dict:
    """The stored record of `rid` if `owner` stored it; Problem 404 / 403 otherwise, 503 when Redis does not answer."""
    if client is None:
        raise not_found(rid)
    try:
        raw = await client.get(record_key(rid))
    except Exception as exc:  # any failure of the Redis client: the request cannot be judged
        raise unavailable(exc) from exc
    if raw is None:
        raise not_found(rid)
    record = json.loads(raw)
    if record.get("owner") != owner:
        raise Problem(403, f"response {rid!r} was stored by another key: only its owner may use it", "response_id")
    return record


def unavailable(exc: BaseException) -> Problem:
    return Problem(503, f"the gateway's store of responses (its Redis) does not answer ({type(exc).__name__}); retry")


def as_items(value: object) -> list:
    """A request's `input` as a list of items: a string is one user message (as OpenAI lists it)."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    return list(value) if isinstance(value, list) else []


async def expand(client: Any, owner: str, body: dict) -> None:
    """Replace the body's `previous_response_id` by the conversation it continues: the stored input and output, then
    the request's own input (OpenAI's order; instructions are not carried over). Problem when it cannot be used."""
    rid = body.pop("previous_response_id")
    record = await load(client, rid, owner)
    output = (record.get("response") or {}).get("output") or []
    body["input"] = [*record.get("input", []), *output, *as_items(body.get("input"))]


def wants_store(body: dict) -> bool:
    return body.get("store") is not False


async def usage(client: Any, owner: str, now: float | None = None) -> tuple[int, int]:
    """(stored responses, their bytes) of `owner`; forgets the ones that expired."""
    now = time.time() if now is None else now
    expired = await client.zrangebyscore(index_key(owner), "-inf", now)
    async with client.pipeline(transaction=False) as pipe:
        if expired:
            pipe.zrem(index_key(owner), *expired)
            pipe.hdel(sizes_key(owner), *expired)
        pipe.zcard(index_key(owner))
        pipe.hvals(sizes_key(owner))
        *_, count, sizes = await pipe.execute()
    return int(count), sum(int(s) for s in sizes)


async def over_quota(client: Any, owner: str, most: int | None) -> Problem | None:
    """A 429 when the owner's stored responses hold `most` bytes or more (people: `stored_responses`)."""
    if most is None or client is None:
        return None
    _, size = await usage(client, owner)
    if size < most:
        return None
    return Problem(
        429,
        f"your stored responses hold {size} bytes, of the {most} your key may keep (stored_responses in models.yml "
        "people:): delete some (DELETE /v1/responses/{id}), send `store: false`, or wait until they expire",
        "store",
    )


async def save(client: Any, owner: str, input_items: list, response: dict, previous: str | None) -> None:
    """Keep `response` (its input and the response object) for ttl() seconds under `owner`."""
    rid = response.get("id")
    if client is None or not isinstance(rid, str) or not rid:
        return
    keep = ttl()
    response = {**response, "store": True, "previous_response_id": previous}
    record = json.dumps({"owner": owner, "input": input_items, "response": response}, separators=(",", ":"))
    now = time.time()
    async with client.pipeline(transaction=False) as pipe:
        pipe.set(record_key(rid), record, ex=keep)
        pipe.zadd(index_key(owner), {rid: now + keep})
        pipe.hset(sizes_key(owner), rid, len(record))
        pipe.expire(index_key(owner), keep)
        pipe.expire(sizes_key(owner), keep)
        await pipe.execute()


async def delete(client: Any, rid: str, owner: str) -> None:
    await load(client, rid, owner)
    async with client.pipeline(transaction=False) as pipe:
        pipe.delete(record_key(rid))
        pipe.zrem(index_key(owner), rid)
        pipe.hdel(sizes_key(owner), rid)
        await pipe.execute()


def listed(rid: str, index: int, item: object) -> dict:
    """An input item as OpenAI lists it: an id (the item's own, or one made from the response and its place) and a
    type; a message's string content as a content part."""
    entry = dict(item) if isinstance(item, dict) else {"type": "message", "role": "user", "content": str(item)}
    kind = entry.setdefault("type", "message")
    if kind == "message" and isinstance(entry.get("content"), str):
        part = "output_text" if entry.get("role") == "assistant" else "input_text"
        entry["content"] = [{"type": part, "text": entry["content"]}]
    if not entry.get("id"):
        digest = hashlib.sha256(f"{rid}:{index}".encode()).hexdigest()[:24]
        entry["id"] = f"{ID_PREFIX.get(str(kind), 'item')}_{digest}"
    return entry


def page(rid: str, items: list, limit: object, order: object, after: object) -> dict:
    """OpenAI's list of input items: `order` desc (newest first, the default) or asc, `limit` 1-100 (20), `after` an
    item id: the items after it in that order."""
    try:
        size = int(str(limit)) if limit is not None else PAGE_DEFAULT
    except ValueError:
        raise Problem(400, "`limit` must be an integer from 1 to 100", "limit") from None
    if not 1 <= size <= PAGE_MOST:
        raise Problem(400, "`limit` must be an integer from 1 to 100", "limit")
    if order not in (None, "asc", "desc"):
        raise Problem(400, "`order` must be asc or desc", "order")
    entries = [listed(rid, i, item) for i, item in enumerate(items)]
    if order != "asc":
        entries.reverse()
    if after is not None:
        ids = [e["id"] for e in entries]
        if after not in ids:
            raise Problem(404, f"no input item {after!r} in response {rid!r}", "after")
        entries = entries[ids.index(after) + 1 :]
    data = entries[:size]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(entries) > size,
    }


# --- reading the answer as it passes -----------------------------------------------------------------------------

Send = Callable[[dict], Awaitable[None]]


def capturing(send: Send, store: Callable[[dict], Awaitable[None]]) -> Send:
    """`send`, reading a 200 answer of /v1/responses on its way: the JSON body, or the stream's `response.completed`
    (or `response.incomplete`) event; `store(response)` runs before the bytes that complete it are sent on. A failure
    to read or store never breaks the answer."""
    state: dict[str, Any] = {"ok": False, "stream": False, "body": bytearray(), "tail": b"", "done": False}

    async def keep(response: object) -> None:
        if state["done"] or not isinstance(response, dict) or response.get("object") != "response":
            return
        state["done"] = True
        if response.get("status") in ("completed", "incomplete"):
            try:
                await store(response)
            except Exception as exc:  # noqa: BLE001  the answer was given: say why it is not kept, never break it
                print(f"response_store: not stored: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    async def events(chunk: bytes) -> None:
        data = state["tail"] + chunk
        *whole, state["tail"] = re.split(rb"\r?\n\r?\n", data)
        if len(state["tail"]) > MAX_CAPTURE:
            state["ok"], state["tail"] = False, b""
        for event in whole:
            if b"response.completed" not in event and b"response.incomplete" not in event:
                continue
            text = b"".join(line[5:].strip() for line in event.splitlines() if line.startswith(b"data:"))
            try:
                parsed = json.loads(text)
            except ValueError:
                continue
            if isinstance(parsed, dict) and parsed.get("type") in ("response.completed", "response.incomplete"):
                await keep(parsed.get("response"))

    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers = {k.lower(): v for k, v in message.get("headers") or []}
            state["ok"] = message.get("status") == 200
            state["stream"] = headers.get(b"content-type", b"").startswith(b"text/event-stream")
        elif message["type"] == "http.response.body" and state["ok"] and not state["done"]:
            chunk = message.get("body", b"")
            try:
                if state["stream"]:
                    await events(chunk)
                elif len(state["body"]) + len(chunk) > MAX_CAPTURE:
                    state["ok"] = False
                else:
                    state["body"] += chunk
                    if not message.get("more_body", False):
                        await keep(json.loads(bytes(state["body"])))
            except Exception as exc:  # noqa: BLE001  an answer that is not what we read: passed on, not stored
                state["ok"] = False
                print(f"response_store: answer not read: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        await send(message)

    return wrapped


# --- the routes of a stored response -------------------------------------------------------------------------------

Owner = Callable[[str | None], "str | None"]  # a request's key -> its owner (owner_of), None when the key is invalid


async def answer(method: str, rid: str, what: str | None, owner: str, query: dict) -> tuple[int, dict]:
    """(status, JSON) of one route for `owner`."""
    client = redis_client()
    if method == "DELETE" and what is None:
        await delete(client, rid, owner) if client is not None else await load(client, rid, owner)
        return 200, {"id": rid, "object": "response", "deleted": True}
    record = await load(client, rid, owner)
    if method == "GET" and what is None:
        return 200, record["response"]
    if method == "GET" and what == "/input_items":
        return 200, page(rid, record.get("input") or [], query.get("limit"), query.get("order"), query.get("after"))
    if method == "POST" and what == "/cancel":
        status = (record.get("response") or {}).get("status")
        raise Problem(400, f"response {rid!r} is {status}: only a background response can be cancelled", "response_id")
    raise Problem(405, f"{method} is not served on this route")


def install(owner: Owner, key_problem: str, app: Any = None) -> None:
    """Put the stored responses' routes in front of the app's (LiteLLM's proxy app by default; once per process)."""
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from fastapi.routing import APIRoute

    if app is None:
        from litellm.proxy.proxy_server import app

    routes = app.router.routes
    if any(getattr(r, "name", "").startswith("gateway_responses") for r in routes):
        return

    async def endpoint(request: Request) -> JSONResponse:
        header = (
            request.headers.get("authorization") or request.headers.get("api-key") or request.headers.get("x-api-key")
        )
        who = owner(request.headers.get("x-litellm-api-key") or header)
        if who is None:
            return error(401, key_problem)
        match = ROUTE.match(request.url.path)
        if match is None:
            return error(404, "not found")
        try:
            status, body = await answer(request.method, match[1], match[2], who, dict(request.query_params))
        except Exception as exc:  # noqa: BLE001  a refusal, or Redis gone: say so, never a 500 with a trace
            p = exc if isinstance(exc, Problem) else unavailable(exc)
            return error(p.status, p.message, p.param)
        return JSONResponse(body, status_code=status)

    endpoint.__annotations__["request"] = Request  # a type, not the text `from __future__` makes: FastAPI reads it
    for prefix in ("/v1", "", "/openai/v1"):
        for path, methods in (("", ["GET", "DELETE"]), ("/input_items", ["GET"]), ("/cancel", ["POST"])):
            route = f"{prefix}/responses/{{rid}}{path}"
            routes.insert(
                0, APIRoute(route, endpoint, methods=methods, name="gateway_responses", include_in_schema=False)
            )


def error(status: int, message: str, param: str | None = None) -> Any:
    from fastapi.responses import JSONResponse

    kind = {401: "auth_error", 403: "permission_error", 429: "rate_limit_error"}.get(status, "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": str(status)}}
    return JSONResponse(body, status, headers={"retry-after": "5"} if status == 503 else None)

"""Stored responses (response_store.py) through the real request guard and the routes it installs, against a real
redis-server (Debian's, as the local runtime runs it) and a stand-in for LiteLLM's /v1/responses that answers like
vLLM (a reasoning item, then the answer or a function call; streamed or not) and records what it was sent:
previous_response_id expanded before every check, the owner's reads, lists, deletes, 403 for another key, 404 for
an unknown, deleted or expired id, a person's byte limit, and a stack without a store."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tests.unit.test_gateway_hooks import load_like_litellm
from tests.unit.test_replica_placement import PASSWORD, redis_db, redis_port  # noqa: F401  (fixtures)

MASTER = "sk-master-0123456789abcdef0123456789abcdef"
KEYS = {MASTER: None, "ann-key": "ann", "bob-key": "bob"}
REASONING = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "I think."}]}
CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}


def answer(body: dict) -> dict:
    """What vLLM answers: a reasoning item, then a function call when tools were sent, else a message."""
    last = body["input"][-1] if isinstance(body["input"], list) else body["input"]
    said = f"answer {len(body['input']) if isinstance(body['input'], list) else 1}"
    out = (
        CALL
        if body.get("tools") and not (isinstance(last, dict) and last.get("type") == "function_call_output")
        else {
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": said, "annotations": []}],
        }
    )
    return {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "status": "completed",
        "model": body["model"],
        "output": [{**REASONING, "id": f"rs_{uuid.uuid4().hex[:8]}"}, {**out, "id": f"x_{uuid.uuid4().hex[:8]}"}],
        "store": False,
    }


@pytest.fixture
def gateway(monkeypatch, redis_port, redis_db):  # noqa: F811  (fixtures imported above)
    """call(method, path, json=None, key=MASTER) through the guard, its response routes and the stand-in."""
    monkeypatch.setenv("REDIS_HOST", "127.0.0.1")
    monkeypatch.setenv("REDIS_PORT", str(redis_port))
    monkeypatch.setenv("REDIS_PASSWORD", PASSWORD)
    guard = load_like_litellm("request_guard")
    import people
    import response_store as store  # the copies the guard imports (beside it)

    monkeypatch.setattr(store, "_redis", None)
    monkeypatch.setattr(guard, "litellm_refusal", lambda body, path: None)
    monkeypatch.setattr(guard, "judge", lambda api, body, size: None)  # request_shapes' own tests judge bodies
    limits: dict[str, int] = {}
    monkeypatch.setattr(
        people.DIRECTORY,
        "who",
        lambda key: (
            None
            if KEYS.get(bare(key)) is None
            else people.Person(KEYS[bare(key)], None, *[None] * 5, limits.get(bare(key)))
        ),
    )
    seen: list[dict] = []
    app = FastAPI()

    @app.post("/v1/responses")
    async def responses(request: Request):
        body = await request.json()
        seen.append(body)
        reply = answer(body)
        if not body.get("stream"):
            return JSONResponse(reply)

        async def events():
            created = {"type": "response.created", "response": {**reply, "status": "in_progress", "output": []}}
            yield f"event: response.created\ndata: {json.dumps(created)}\n\n"
            for item in reply["output"]:
                yield f"data: {json.dumps({'type': 'response.output_item.done', 'item': item})}\n\n"
            done = json.dumps({"type": "response.completed", "response": reply})
            yield f"event: response.completed\ndata: {done[:40]}"  # an event cut across two chunks
            yield f"{done[40:]}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    store.install(lambda key: store.owner_of(KEYS[bare(key)]) if bare(key) in KEYS else None, "bad key", app)
    middleware = guard.RequestGuard(app, lambda key: bare(key) in KEYS, "bad key")

    def call(method: str, path: str, body: dict | None = None, key: str = MASTER) -> httpx.Response:
        store._redis = None  # a client per event loop: each call is a loop of its own here (a worker has one)

        async def go():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=middleware), base_url="http://gw") as c:
                return await c.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})

        return asyncio.run(go())

    call.seen, call.store, call.limits, call.db = seen, store, limits, redis_db
    return call


def bare(key: str | None) -> str:
    return (key or "").removeprefix("Bearer ")


@pytest.mark.parametrize("stream", [False, True])
def test_three_turns_by_previous_response_id_send_the_whole_conversation_reasoning_included(gateway, stream):
    first = gateway("POST", "/v1/responses", {"model": "m", "input": "hi", "stream": stream})
    assert first.status_code == 200
    rid = answer_id(first, stream)
    second = gateway(
        "POST", "/v1/responses", {"model": "m", "input": "and?", "previous_response_id": rid, "stream": stream}
    )
    assert second.status_code == 200, second.text
    sent = gateway.seen[-1]
    assert "previous_response_id" not in sent  # nothing downstream (LiteLLM, vLLM) sees the id
    assert [i.get("type") for i in sent["input"]] == ["message", "reasoning", "message", "message"]
    assert sent["input"][0]["content"] == [{"type": "input_text", "text": "hi"}]
    assert sent["input"][1]["content"] == REASONING["content"]  # the reasoning item as it was answered
    assert sent["input"][-1] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and?"}]}
    third = gateway(
        "POST",
        "/v1/responses",
        {
            "model": "m",
            "input": [{"role": "user", "content": "more"}],
            "previous_response_id": answer_id(second, stream),
            "stream": stream,
        },
    )
    assert third.status_code == 200
    assert len(gateway.seen[-1]["input"]) == 7  # 3 turns: 3 user messages, 2 x (reasoning + answer)
    listed = gateway("GET", f"/v1/responses/{answer_id(third, stream)}/input_items?order=asc&limit=100").json()
    assert [i["type"] for i in listed["data"]] == [
        "message",
        "reasoning",
        "message",
        "message",
        "reasoning",
        "message",
        "message",
    ]
    assert all(i["id"] for i in listed["data"]) and listed["has_more"] is False


def answer_id(r: httpx.Response, stream: bool) -> str:
    if not stream:
        return r.json()["id"]
    done = [json.loads(line[5:]) for line in r.text.replace("\n\n", "\n").splitlines() if line.startswith("data: {")]
    return next(e["response"]["id"] for e in done if e["type"] == "response.completed")


def test_a_tool_calls_result_continues_by_previous_response_id(gateway):
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    first = gateway("POST", "/v1/responses", {"model": "m", "input": "weather?", "tools": tools}).json()
    assert first["output"][1]["type"] == "function_call"
    result = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    second = gateway(
        "POST", "/v1/responses", {"model": "m", "input": [result], "tools": tools, "previous_response_id": first["id"]}
    )
    assert [i["type"] for i in gateway.seen[-1]["input"]] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert second.json()["output"][1]["type"] == "message"


def test_the_owner_reads_lists_pages_and_deletes_and_nobody_else_does(gateway):
    first = gateway("POST", "/v1/responses", {"model": "m", "input": "hi"}, key="ann-key").json()
    rid = first["id"]
    got = gateway("GET", f"/v1/responses/{rid}", key="ann-key")
    assert got.status_code == 200 and got.json()["output"] == first["output"] and got.json()["store"] is True
    second = gateway(
        "POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": rid}, key="ann-key"
    ).json()
    assert gateway("GET", f"/v1/responses/{second['id']}", key="ann-key").json()["previous_response_id"] == rid
    # paged as OpenAI pages: newest first by default, `after` an item id
    items = gateway("GET", f"/v1/responses/{second['id']}/input_items?limit=2", key="ann-key").json()
    assert items["object"] == "list" and len(items["data"]) == 2 and items["has_more"] is True
    assert items["data"][0]["content"] == [{"type": "input_text", "text": "x"}]
    rest = gateway(
        "GET", f"/v1/responses/{second['id']}/input_items?limit=2&after={items['last_id']}", key="ann-key"
    ).json()
    assert [i["type"] for i in rest["data"]] == ["reasoning", "message"] and rest["has_more"] is False
    assert gateway("GET", f"/v1/responses/{rid}/input_items?limit=0", key="ann-key").status_code == 400
    for method, path in (("GET", ""), ("GET", "/input_items"), ("DELETE", ""), ("POST", "/cancel")):
        for other in ("bob-key", MASTER):  # another person, and the admin: a person's responses are theirs
            r = gateway(method, f"/v1/responses/{rid}{path}", key=other)
            assert r.status_code == 403, (method, path, other, r.text)
    r = gateway("POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": rid}, key="bob-key")
    assert r.status_code == 403 and "another key" in r.json()["error"]["message"]
    assert gateway("POST", f"/v1/responses/{rid}/cancel", key="ann-key").status_code == 400  # not a background one
    assert gateway("GET", f"/v1/responses/{rid}", key="nobody").status_code == 401
    deleted = gateway("DELETE", f"/v1/responses/{rid}", key="ann-key")
    assert deleted.json() == {"id": rid, "object": "response", "deleted": True}
    for method, path in (("GET", ""), ("GET", "/input_items"), ("DELETE", "")):
        assert gateway(method, f"/v1/responses/{rid}{path}", key="ann-key").status_code == 404
    r = gateway("POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": rid}, key="ann-key")
    assert r.status_code == 404 and rid in r.json()["error"]["message"]
    assert asyncio.run(usage(gateway, "person:ann"))[0] == 1  # the second one is still there


async def usage(gateway, owner: str) -> tuple[int, int]:
    import redis.asyncio as aioredis

    client = aioredis.Redis(port=int(gateway.db.connection_pool.connection_kwargs["port"]), password=PASSWORD)
    try:
        return await gateway.store.usage(client, owner)
    finally:
        await client.aclose()


def test_store_false_keeps_nothing_and_an_unknown_id_is_a_404_naming_it(gateway):
    r = gateway("POST", "/v1/responses", {"model": "m", "input": "hi", "store": False}).json()
    assert gateway("GET", f"/v1/responses/{r['id']}").status_code == 404
    r = gateway("POST", "/v1/responses", {"model": "m", "input": "hi", "previous_response_id": "resp_nope"})
    assert r.status_code == 404 and "resp_nope" in r.json()["error"]["message"]
    assert gateway.seen[-1]["store"] is False  # the unknown id never reached the backend


def test_an_expired_response_is_a_404_and_leaves_the_owners_count(gateway, monkeypatch):
    monkeypatch.setenv(gateway.store.TTL_ENV, "1")
    rid = gateway("POST", "/v1/responses", {"model": "m", "input": "hi"}, key="bob-key").json()["id"]
    assert gateway("GET", f"/v1/responses/{rid}", key="bob-key").status_code == 200
    assert asyncio.run(usage(gateway, "person:bob"))[0] == 1
    time.sleep(2.1)
    assert gateway("GET", f"/v1/responses/{rid}", key="bob-key").status_code == 404
    assert asyncio.run(usage(gateway, "person:bob")) == (0, 0)


def test_a_person_whose_stored_responses_fill_their_limit_may_not_store_more(gateway):
    gateway.limits["ann-key"] = 10  # bytes: the first stored response fills it
    assert gateway("POST", "/v1/responses", {"model": "m", "input": "hi"}, key="ann-key").status_code == 200
    r = gateway("POST", "/v1/responses", {"model": "m", "input": "hi"}, key="ann-key")
    assert r.status_code == 429 and "stored_responses" in r.json()["error"]["message"]
    assert (
        gateway("POST", "/v1/responses", {"model": "m", "input": "hi", "store": False}, key="ann-key").status_code
        == 200
    )
    assert gateway("POST", "/v1/responses", {"model": "m", "input": "hi"}, key="bob-key").status_code == 200


def test_what_is_stored_holds_no_key(gateway):
    gateway("POST", "/v1/responses", {"model": "m", "input": "hi"}, key="ann-key")
    gateway("POST", "/v1/responses", {"model": "m", "input": "hi"})
    dump = b"".join(gateway.db.dump(k) or b"" for k in gateway.db.keys("*"))
    assert b"ann-key" not in dump and MASTER.encode() not in dump
    assert {k.decode().rsplit(":", 1)[0] for k in gateway.db.keys("gateway:responses:*")} >= {
        "gateway:responses:person"
    }


def test_without_a_store_previous_response_id_is_a_404_and_answers_are_passed_on(gateway, monkeypatch):
    monkeypatch.setenv(gateway.store.TTL_ENV, "0")
    r = gateway("POST", "/v1/responses", {"model": "m", "input": "hi"})
    assert r.status_code == 200 and gateway.db.keys("gateway:response:*") == []
    assert (
        gateway(
            "POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": r.json()["id"]}
        ).status_code
        == 404
    )


def test_with_the_store_down_a_continuation_is_a_503_not_a_5xx_trace(gateway, monkeypatch):
    monkeypatch.setenv("REDIS_PORT", "1")
    monkeypatch.setattr(gateway.store, "_redis", None)
    r = gateway("POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": "resp_x"})
    assert r.status_code == 503 and r.headers["retry-after"] == "5"
    r = gateway("GET", "/v1/responses/resp_x")
    assert r.status_code == 503 and r.headers["retry-after"] == "5"

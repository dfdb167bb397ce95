"""route_order.py: the inference routes first in the route table, answering every request as before.

Two proofs: a small FastAPI app built like LiteLLM's (routers included with dependencies and a prefix, a route a router
before it shadows), handled through the real ASGI stack; and the route walk over LiteLLM 1.108.7's own table (every
route x method, path parameters filled in): the same route answers each before and after.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.testclient import TestClient
from starlette.routing import Match

from generator.compile.gateway_process import BASE_ENV
from tests.unit.test_replica_routing import hook_module

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "generator/shipped/gateway_hooks"
ro = hook_module("route_order")


def needs_header(request: Request) -> None:
    if request.headers.get("x-team") != "yes":
        raise HTTPException(403, "the router's own dependency")


def app_like_litellms() -> FastAPI:
    app = FastAPI()
    admin = APIRouter()
    for i in range(40):  # routes ahead of the inference ones, as LiteLLM's management routers are
        admin.add_api_route(f"/admin/{i}/{{thing}}", lambda thing: {"admin": thing}, methods=["GET"])
    shadow = APIRouter()
    shadow.add_api_route("/v1/embeddings", lambda: {"by": "shadow"}, methods=["POST"])  # wins: included first
    chat = APIRouter()
    chat.add_api_route("/v1/chat/completions", lambda: {"by": "chat"}, methods=["POST"])
    chat.add_api_route("/v1/embeddings", lambda: {"by": "chat"}, methods=["POST"])
    chat.add_api_route("/v1/responses", lambda: {"by": "responses"}, methods=["POST"])
    chat.add_api_route("/v1/responses", lambda: {"by": "responses-get"}, methods=["GET"])
    inner = APIRouter()
    inner.add_api_route("/v1/messages", lambda: {"by": "messages"}, methods=["POST"])
    outer = APIRouter()
    outer.include_router(inner, dependencies=[Depends(needs_header)])
    prefixed = APIRouter()
    prefixed.add_api_route("/completions", lambda: {"by": "prefixed"}, methods=["POST"])
    app.include_router(admin)
    app.include_router(shadow)
    app.include_router(chat)
    app.include_router(outer)
    app.include_router(prefixed, prefix="/v1")
    return app


def answers(app: FastAPI) -> list:
    client = TestClient(app)
    out = []
    for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings", "/v1/completions"):
        for method in ("GET", "POST", "PUT", "DELETE"):
            for headers in ({}, {"x-team": "yes"}):
                r = client.request(method, path, headers=headers)
                out.append((method, path, headers, r.status_code, r.headers.get("allow"), r.text))
    return out


def full_match_index(routes, path: str) -> int:
    """The index of the table's entry that POST `path` stops at."""
    return next(i for i, r in enumerate(routes) if r.matches(ro.scope_of("POST", path))[0] is Match.FULL)


def test_hot_routes_go_first_and_every_request_is_answered_as_before():
    before = answers(app_like_litellms())
    app = app_like_litellms()
    entries = len(app.router.routes)
    moved = ro.hot_routes_first(app)
    # the shadowed /v1/embeddings moves too: the route in front is the one that answered it (the first router's)
    assert moved == ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/completions", "/v1/embeddings"]
    assert [getattr(r, ro.NAME, False) for r in app.router.routes[:5]] == [True] * 5
    assert answers(app) == before  # status, Allow of a 405, body; the nested router's dependency still runs
    assert full_match_index(app.router.routes, "/v1/messages") == 2
    assert ro.hot_routes_first(app) == [] and len(app.router.routes) == entries + 5  # once per process
    assert "/v1/messages" in app.openapi()["paths"]  # listed once, where it was


def test_a_route_whose_move_would_change_an_answer_stays_where_it_was():
    app = FastAPI()
    first = APIRouter()
    first.add_api_route("/v1/messages", lambda: {"by": "first"}, methods=["GET"])  # its 405 answers PUT first
    second = APIRouter()
    second.add_api_route("/v1/messages", lambda: {"by": "second"}, methods=["POST"])
    app.include_router(first)
    app.include_router(second)
    before = TestClient(app).put("/v1/messages")
    assert ro.hot_routes_first(app, ("/v1/messages",)) == []
    after = TestClient(app).put("/v1/messages")
    assert (after.status_code, after.headers["allow"]) == (before.status_code, before.headers["allow"]) == (405, "GET")


WALK = textwrap.dedent(
    """
    import json, re, sys
    sys.path.insert(0, sys.argv[1])
    from fastapi.routing import _IncludedRouter
    from starlette.routing import Match
    from litellm.proxy.proxy_server import app
    import route_order as ro

    ro.load_lazy_features(app, ro.HOT)  # what LiteLLM's first /v1/messages does: the table before
    old = list(app.router.routes)
    def full_match_index(routes, path):
        return next(i for i, r in enumerate(routes) if r.matches(ro.scope_of("POST", path))[0] is Match.FULL)

    old_index = full_match_index(old, "/v1/messages")
    moved = ro.hot_routes_first(app)
    new = app.router.routes
    front = new[: len(new) - len(old)]

    def leaves(routes):
        for r in routes:
            if isinstance(r, _IncludedRouter):
                yield from (c.original_route for c in r.effective_route_contexts())
            else:
                yield r

    # every route of the table, its path parameters filled in, and each method it serves
    routed = [r for r in leaves(old) if isinstance(getattr(r, "path", None), str) and hasattr(r, "methods")]
    walk = sorted({(re.sub(r"{[^}]*}", "x", r.path), m) for r in routed for m in (r.methods or {"GET"})})
    paths = sorted({p for p, _ in walk} | {p + "/" for p, _ in walk})
    # 1. an entry in front matches its own path only (a route matches a path, fully or as a 405, whatever the
    #    method), so no request for another path can reach it
    stray = [(e.original_router.routes[0].path, p) for e in front for p in paths
             if p != e.original_router.routes[0].path and e.matches(ro.scope_of("PATCH", p))[0] is not Match.NONE]
    # 2. on those paths, every method is answered by the same route as before (a 405 too)
    hot = [(m, p) for p in moved for m in ro.METHODS
           if ro.answering(old, ro.scope_of(m, p))[0] is not ro.answering(new, ro.scope_of(m, p))[0]]
    # 3. and every route of the table, asked with each of its methods, answers as before
    differ = [(m, p) for p, m in walk
              if ro.answering(old, ro.scope_of(m, p))[0] is not ro.answering(new, ro.scope_of(m, p))[0]]
    print(json.dumps({"moved": moved, "walked": len(walk), "stray": stray, "hot": hot, "differ": differ,
                      "old_index": old_index, "new_index": full_match_index(new, "/v1/messages")}))
    """
)


def test_the_route_walk_over_litellms_table_answers_every_route_and_method_as_before():
    env = {**os.environ, **BASE_ENV}  # no price-map fetch, as the gateway starts
    run = subprocess.run(
        [sys.executable, "-c", WALK, str(HOOKS)], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    walk = json.loads(run.stdout.strip().splitlines()[-1])
    assert walk["stray"] == [], walk["stray"][:20]
    assert walk["hot"] == [], walk["hot"]
    assert walk["differ"] == [], walk["differ"][:20]
    assert walk["walked"] > 500  # the whole table, the lazily loaded Anthropic router's routes included
    assert set(walk["moved"]) == set(ro.HOT), walk["moved"]
    assert walk["old_index"] > 50 and walk["new_index"] < len(ro.HOT)  # /v1/messages: last before, first now


def test_litellms_order_is_kept_when_asked(monkeypatch):
    """GATEWAY_ROUTE_ORDER=litellm: the bench's A/B variant (bench/tune.py) runs the gateway with LiteLLM's order."""
    app = app_like_litellms()
    entries = list(app.router.routes)
    monkeypatch.setenv(ro.KEEP_ENV, "litellm")
    assert ro.hot_routes_first(app) == [] and app.router.routes == entries

"""The inference routes first in the gateway's route table, so a request finds its route in one step (once per process).

Starlette asks each entry of the app's route table in turn until one matches. FastAPI 0.165 keeps each included router
as one entry (an ``_IncludedRouter``) whose own routes it asks in turn, and LiteLLM 1.108.7 includes the Anthropic
router lazily, on the first ``/v1/messages``, after every other one: each ``POST /v1/messages`` was matched against
every route of the proxy first (1-7 ms of a worker's CPU a request, against 0.03-0.2 ms for chat; docs/benchmarks.md).
LiteLLM's own ``hot_routes_first`` (route_priority.py) moves only plain routes, and sees none of these.

`hot_routes_first` here, at config load in each worker: loads the lazily included routers that serve a hot route
(LiteLLM's ``_lazy_features``: as its first request of them would, with the same registration and precedence), then
puts in front of the table, for each hot route, an entry holding that route alone, included exactly as the route's
own router is (the same include context: dependencies, response class, body limits), so it is handled as before.

It answers nothing differently, and checks it: an entry is put in front only for a route with a fixed path (it can
match no other path), and only when, for every HTTP method, the route table with it answers that path with the same
route as the table without it (the first that matches fully, else the first that matches the path only: the 405).
A route that fails the check stays where it was. ``tests/unit/test_route_order.py`` walks every route of LiteLLM's
table the same way; the integration tests answer every API through it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Iterable
from functools import partial
from typing import Any

# the inference routes the coding agents and SDKs send (POST): chat, completions, responses, messages, embeddings
HOT: tuple[str, ...] = (
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/responses",
    "/responses",
    "/v1/messages",
    "/v1/completions",
    "/completions",
    "/v1/embeddings",
    "/embeddings",
)
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
NAME = "gateway_hot_route"  # the name of the entries put in front (the route inside keeps its own)
KEEP_ENV = "GATEWAY_ROUTE_ORDER"  # "litellm": LiteLLM's order left as it is (the bench's A/B: bench/tune.py)


def scope_of(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": [], "query_string": b""}


def answering(routes: Iterable[Any], scope: dict[str, Any]) -> tuple[Any, Any, bool]:
    """(the route that answers `scope` in `routes`, the included router it is reached through or None, whether it
    matched fully), as Starlette and FastAPI pick it: the first full match, else the first partial one (a 405), else
    (None, None, False)."""
    from fastapi.routing import _IncludedRouter
    from starlette.routing import Match

    partial_hit = None
    for entry in routes:
        match, _ = entry.matches(scope)
        if match is Match.NONE:
            continue
        route, via = entry, None
        while isinstance(route, _IncludedRouter):  # nested includes: down to the route itself
            via = route
            _, _, route, _ = route._match(scope)
        if match is Match.FULL:
            return route, via, True
        if partial_hit is None:
            partial_hit = (route, via, False)
    return partial_hit or (None, None, False)


def same_answers(routes: list[Any], entry: Any, path: str) -> bool:
    """`entry` in front of `routes` answers `path` with the same route as `routes` alone, for every method. The
    entry holds one route of a fixed path, so it matches this path only: in front, it answers a method it matches
    fully, and one it matches partially (a 405) unless a route of the table matches that method fully."""
    for method in METHODS:
        scope = scope_of(method, path)
        before, _, full = answering(routes, scope)
        held, _, held_full = answering([entry], scope)
        if held is not None and (held_full or not full) and held is not before:
            return False
    return True


def load_lazy_features(app: Any, paths: Iterable[str]) -> list[str]:
    """Register now the lazy features of LiteLLM that serve `paths` (LiteLLM's own registration, as its middleware
    does on their first request); the names of those loaded here."""
    try:
        from litellm.proxy import _lazy_features as lazy
    except ImportError:  # a LiteLLM without lazy features: every router is there already
        return []
    if lazy.lazy_routes_disabled():
        return []  # every feature is registered at start already
    loaded = []
    for feat in lazy.LAZY_FEATURES:
        if feat.module_path in lazy._lazy_loaded(app) or not any(feat.matches(p) for p in paths):
            continue
        if lazy._install(app, feat, partial(importlib.import_module, feat.module_path), lazy.LAZY_FEATURES):
            loaded.append(feat.name)
    return loaded


def hot_routes_first(app: Any = None, paths: tuple[str, ...] = HOT) -> list[str]:
    """Put the routes of `paths` (POST) in front of `app`'s route table; returns the paths moved. LiteLLM's proxy app
    by default, whose lazily included routers that serve `paths` are loaded first. Idempotent; does nothing on a
    FastAPI without included-router entries (its routes are plain ones, which LiteLLM's hot_routes_first orders)."""
    try:
        from fastapi import APIRouter
        from fastapi.routing import _IncludedRouter
    except ImportError:
        return []
    if os.environ.get(KEEP_ENV) == "litellm":
        return []
    if app is None:
        from litellm.proxy.proxy_server import app

        load_lazy_features(app, paths)
    routes = app.router.routes
    if any(getattr(r, NAME, False) for r in routes):
        return []
    front: list[Any] = []
    moved = []
    for path in paths:
        route, via, _ = answering(routes, scope_of("POST", path))
        if (
            via is None
            or not isinstance(getattr(route, "path", None), str)
            or "{" in via.include_context.path_for(route)
        ):
            continue  # none, already a plain route, or one whose path has parameters (it would match other paths)
        holder = APIRouter()
        holder.routes.append(route)
        context = dataclasses.replace(via.include_context, include_in_schema=False)  # listed once, where it was
        entry = _IncludedRouter(original_router=holder, include_context=context)
        setattr(entry, NAME, True)
        if same_answers(routes, entry, path):
            front.append(entry)
            moved.append(path)
    routes[:0] = front
    return moved


def build_route_contexts(app: Any = None) -> int:
    """Have FastAPI build now what it builds on a request's first walk through the route table: each included
    router's route contexts (0.9-1.5 CPU-s on LiteLLM's proxy, paid by the first request that walks past them, such
    as the search for /v1/messages in hot_routes_first). gateway_serve.py calls it before it makes the fork server,
    so every worker is forked with them built. Returns how many."""
    try:
        from fastapi.routing import _IncludedRouter
    except ImportError:
        return 0
    if app is None:
        from litellm.proxy.proxy_server import app
    return sum(len(list(r.effective_route_contexts())) for r in app.router.routes if isinstance(r, _IncludedRouter))

"""The gateway's page for its people: ``GET /gateway/`` (docs/page.md), on the gateway's own port.

Four static files beside this module (gateway_page.html, .js, .css, .svg: no build step, nothing from outside, no inline
script) and one JSON route of its own:

* ``GET /gateway/me`` (any valid key): who the key is (a person of models.yml `people:` or the admin), the models it
  may use (kind, context, output budget, tools, reasoning, description, listed aliases), the person's limits and
  their usage rows: status_report.usage over the gateway's counters, the one computation `make usage` shows too.
  Nothing about other people.
* the admin's view reads ``GET /gateway/report`` (gateway_status.py), as `make status` does.

The page keeps the key in the browser's session storage and sends it as `Authorization: Bearer` from script; it is
never in a URL or a cookie. Every answer here carries a Content-Security-Policy that allows only this origin's script
and style (no inline script, no outside host), and the page writes every text from models.yml as text, never as
HTML. A wrong key waits before its 401 (request_guard.py, on every route). `gateway.ui: false` (GATEWAY_UI=0): none of
these routes is installed (404).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads these files by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import gateway_backends as gb  # noqa: E402
import gateway_status  # noqa: E402
import people  # noqa: E402
import status_report  # noqa: E402

UI_ENV = "GATEWAY_UI"  # "0": no page (models.yml gateway.ui: false)
PREFIX = "/gateway/"
ME_PATH = "/gateway/me"
# the page's files, beside this module (renderers/litellm.py copies them with the hooks): URL name -> (file, type)
ASSETS = {
    "": ("gateway_page.html", "text/html; charset=utf-8"),
    "page.js": ("gateway_page.js", "text/javascript; charset=utf-8"),
    "page.css": ("gateway_page.css", "text/css; charset=utf-8"),
    "icon.svg": ("gateway_page.svg", "image/svg+xml"),
}
HEADERS = {
    # this origin's script, style and fetches only: no inline script or style, no outside host, no frame, no form post
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-frame-options": "DENY",
}
ADAPTER_OF = gateway_status.ADAPTER_OF  # model_info of a LoRA adapter: its base model
DESCRIPTION = "gateway_description"  # renderers/litellm.py: models.yml `description:`


def enabled() -> bool:
    return os.environ.get(UI_ENV, "1") not in ("0", "false", "False")


def kind_of(info: dict) -> str:
    """chat, embedding, rerank (a pooling model's mode) or adapter (a LoRA adapter of a chat model)."""
    if info.get(ADAPTER_OF):
        return "adapter"
    mode = info.get("mode")
    return str(mode) if mode in ("embedding", "rerank") else "chat"


def model_card(name: str, dep: object, aliases: list[str]) -> dict:
    """What the page shows of one model: from its deployment's model_info (the generated config)."""
    info = gb.info(dep)
    kind = kind_of(info)
    return {
        "name": name,
        "kind": kind,
        "base": info.get(ADAPTER_OF),
        "description": str(info.get(DESCRIPTION) or ""),
        "context": gb.as_int(info.get("max_input_tokens")),
        "max_output_tokens": gb.as_int(info.get("max_output_tokens")) if kind in ("chat", "adapter") else None,
        "tools": bool(info.get("supports_function_calling")),
        "reasoning": bool(info.get("supports_reasoning")),
        "hosted": info.get(gb.HOSTED),
        "nodes": gb.as_int(info.get(gb.NODES)),  # served across hosts as one group (models.yml nodes:)
        "aliases": aliases,
    }


def models_for(person: people.Person | None, rt: Any) -> list[dict]:
    """The models a key may use (a person's `models:`, or every model), each once, in name order."""
    listed = gb.listed_aliases(rt) if rt is not None else {}
    cards = []
    for name in gb.model_names(rt) if rt is not None else []:
        if person is not None and person.models is not None and name not in person.models:
            continue
        deps = gb.deployments(rt, name)
        if deps:
            cards.append(model_card(name, deps[0], sorted(a for a, m in listed.items() if m == name)))
    return cards


def limits_of(person: people.Person) -> dict:
    return {
        "rpm": person.rpm,
        "tpm": person.tpm,
        "parallel": person.parallel,
        "tokens_per_day": person.tokens_per_day,
        "tokens_per_month": person.tokens_per_month,
        "stored_responses": person.stored_responses,
    }


async def me(person: people.Person | None) -> dict:
    """The /gateway/me answer: a person's own models, limits and usage; for the admin (None), every model."""
    rt = gb.router()
    out: dict = {"admin": person is None, "person": None if person is None else person.name}
    out["models"] = models_for(person, rt)
    if person is not None:
        gw = await gateway_status.gateway(person.name)  # their tokens this day and month only, not everyone's
        rows = status_report.usage(gw.get("metrics") or {}, gw.get("budgets") or {})
        out["limits"] = limits_of(person)
        out["usage"] = [r for r in rows if r["person"] == person.name]
        out["usage_error"] = gw.get("metrics_error")
    return out


def asset(name: str) -> Response:
    file, media = ASSETS[name]
    with open(os.path.join(HERE, file), "rb") as fh:
        return Response(fh.read(), media_type=media, headers=HEADERS)


def install(is_master: Callable[[str | None], bool], key_problem: str) -> None:
    """Put the page's routes in front of LiteLLM's (once per process); none when the page is off."""
    if not enabled():
        return
    from litellm.proxy.proxy_server import app

    routes = app.router.routes
    if any(getattr(r, "name", None) == "gateway_page_me" for r in routes):
        return

    async def whoami(request: Request) -> JSONResponse:
        key = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        person = None if is_master(key) else people.DIRECTORY.who(key)
        if person is None and not is_master(key):  # no key (a wrong one is the request guard's slowed 401)
            return JSONResponse({"error": {"message": key_problem}}, status_code=401, headers=HEADERS)
        return JSONResponse(await me(person), headers=HEADERS)

    def serve(name: str) -> Callable[[], Response]:
        def endpoint() -> Response:
            return asset(name)

        return endpoint

    new = [APIRoute(ME_PATH, whoami, methods=["GET"], name="gateway_page_me", include_in_schema=False)]
    new += [  # HEAD too: FastAPI's routes, unlike Starlette's, do not add it for GET (`curl -I` got a 405)
        APIRoute(PREFIX + name, serve(name), methods=["GET", "HEAD"], name=f"gateway_page_{name or 'index'}")
        for name in ASSETS
    ]
    new.append(
        APIRoute(PREFIX.rstrip("/"), lambda: RedirectResponse(PREFIX), methods=["GET"], name="gateway_page_redirect")
    )
    for route in new:
        route.include_in_schema = False
        routes.insert(0, route)

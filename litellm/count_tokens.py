# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""``POST /v1/messages/count_tokens`` answered by the gateway, from the model's own backend.

LiteLLM (1.103.7, and still 1.108.7) counts these itself: with a provider token counter
(Anthropic's servers for an Anthropic-looking model, LiteLLM #29764), else with tiktoken, which is
not the served model's tokenizer. Claude Code calls this endpoint to decide when to compact; a self-hosted gateway must
never send a prompt to the internet for it, and should count with the tokenizer that will read it.

This route takes precedence over LiteLLM's (installed first in the app's routes by
gateway_guard.py, at config load): it translates the request to chat the way LiteLLM does for
/v1/messages and asks vLLM's ``/tokenize`` on the configured ``api_base`` of the requested model
(its chat template and tokenizer): the only host ever contacted is that backend. An unknown model is a 404 naming the
models; a backend that cannot count is a 502; errors use the Anthropic error shape.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads this file by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import gateway_backends as gb  # noqa: E402

PATH = "/v1/messages/count_tokens"


def anthropic_error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"type": "error", "error": {"type": kind, "message": message}})


def given_key(request: Request) -> str:
    """The key as an Anthropic client (x-api-key) or an OpenAI client (Authorization) sends it."""
    return request.headers.get("x-api-key") or request.headers.get("authorization", "")


async def count_tokens(request: Request, authorize: Callable[[Request, str], Awaitable[object]]) -> JSONResponse:
    await authorize(request, given_key(request))  # raises the guard's 401
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return anthropic_error(
            400, "invalid_request_error", "the body must be a JSON object with `model` and `messages`"
        )
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return anthropic_error(400, "invalid_request_error", "`messages` must be a non-empty list")
    rt = gb.router()
    deps = gb.deployments(rt, body["model"]) if rt is not None else []
    if not deps:
        names = ", ".join(gb.model_names(rt)) if rt is not None else ""
        return anthropic_error(404, "not_found_error", f"model {body['model']!r} is not served here; models: {names}")
    if any(gb.hosted(dep) for dep in deps):
        return anthropic_error(
            400,
            "invalid_request_error",
            f"{body['model']} is a hosted model: the gateway counts tokens only on its own backends",
        )
    try:
        tokens = None
        for dep in deps:  # the replicas of a model in turn: a dead one does not answer, the next one counts
            if (tokens := await gb.count_message_tokens(dep, body)) is not None:
                break
    except Exception as exc:  # noqa: BLE001  LiteLLM's translation or the backend's tokenizer (BackendRefused) refused it
        return anthropic_error(400, "invalid_request_error", f"these messages cannot be counted: {exc}"[:500])
    if tokens is None:
        return anthropic_error(502, "api_error", f"the backend of {body['model']} could not count the tokens")
    return JSONResponse({"input_tokens": tokens})


def install(authorize: Callable[[Request, str], Awaitable[object]]) -> None:
    """Put the route in front of LiteLLM's own (once per process)."""
    from litellm.proxy.proxy_server import app

    routes = app.router.routes
    if any(getattr(r, "name", None) == "gateway_count_tokens" for r in routes):
        return

    async def endpoint(request: Request) -> JSONResponse:
        return await count_tokens(request, authorize)

    routes.insert(0, APIRoute(PATH, endpoint, methods=["POST"], name="gateway_count_tokens", include_in_schema=False))

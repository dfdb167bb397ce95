"""An ASGI middleware in front of all of LiteLLM: every API's request body is checked before LiteLLM reads it.

For a POST to one of the APIs of request_shapes.py (chat, completions, responses, messages, count_tokens,
embeddings), in this order:

1. no valid key in any header LiteLLM reads a key from: 401 (the body is never parsed; a wrong key waits
   WRONG_KEY_DELAY first, on every route);
2. a body larger than the largest `limits.request_size` of any model: 413, read to its end but not kept
   (answering before the client finished sending would look like a reset connection);
3. not JSON, or not a JSON object: 400;
4. the API's shape check (request_shapes.py): 400 naming the field and what it must be;
5. a field that picks where or how LiteLLM sends the request (`api_base`, `mock_response`, any of its deployment
   settings: `tpm`, credentials, prices, ...) and
   LiteLLM's own request-body check (its list of banned fields): 400 with LiteLLM's reason;
6. the requested model's `limits:` (model_info.gateway_limits in the rendered config): 400 naming the field
   and the bound (`n`, `best_of`, `tools`, `logit_bias`), 413 for a body over its `request_size`;
7. more logprobs per token (completions' `logprobs`, chat's and responses' `top_logprobs`, `prompt_logprobs`) than
   the model's backend computes (model_info.gateway_max_logprobs: vLLM --max-logprobs, 20 by default): 400 naming
   the field (vLLM refuses it too, but in a stream LiteLLM made its refusal a 500: the fuzz test found it);
8. a prompt's logprobs (`prompt_logprobs`, or `echo` with completions' `logprobs` / chat's `top_logprobs`) asked
   of a model whose backend cannot compute them (model_info.gateway_no_prompt_logprobs: LoRA on a CPU backend,
   where vLLM 0.32 stops its engine over them): 400 naming the field.

With the admin UI off (`hide_ui`), LiteLLM's UI pages, assets and logins and its API docs are a 404 for anyone:
LiteLLM mounts the UI whatever DISABLE_ADMIN_UI says, and its docs list every route.

A request that passes goes on unchanged: the body is replayed to LiteLLM and its parsed form left where LiteLLM
looks first (scope["parsed_body"]), so it is not parsed twice. Errors use each API's own shape (Anthropic's for
/v1/messages). The guard never breaks a request it cannot judge: an internal failure lets the request through.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads these files by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import fallbacks  # noqa: E402
import people  # noqa: E402
import request_counters as counters  # noqa: E402
import request_shapes as shapes  # noqa: E402
import response_store as stored  # noqa: E402
import worker_gc  # noqa: E402  (collections only at safe points: CPython's HAMT crash)

# LiteLLM's Azure-style aliases name the model in the path (/openai/deployments/<model>/chat/completions)
MODEL_IN_PATH = re.compile(r"/(?:engines|deployments)/([^/]+)/")
CHECKED = "gateway_guard_checked"  # scope key: the middleware judged this request (custom auth need not)
STORE = "gateway_response_store"  # scope key: (owner, input, previous id) of a /v1/responses answer to keep
# LiteLLM's order: x-litellm-api-key wins over Authorization, then Azure's api-key, then Anthropic's x-api-key
KEY_HEADERS = (b"x-litellm-api-key", b"authorization", b"api-key", b"x-api-key")
# seconds a wrong key waits for its 401, on every route (the page's login and the APIs alike): guesses are slowed down
# the same in every worker and replica, with no state to share; a missing key is answered at once
WRONG_KEY_DELAY = 1.0
# when the config names no limits (a hand-written config). LiteLLM's own max_request_size_mb is enterprise-only;
# a 128K-token prompt is well under 1 MiB of text
DEFAULT_REQUEST_BYTES = 16 * 1024 * 1024
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")
ANTHROPIC_APIS = ("messages", "count_tokens")
# fields that choose where or how LiteLLM sends a request: the config decides that, never a client
CLIENT_CONTROL: tuple[str, ...] = (
    "api_base",
    "base_url",
    "api_key",
    "api_version",
    "user_config",
    "model_list",
    "mock_response",
    "mock_tool_calls",
    "mock_testing_fallbacks",
    "mock_timeout",
    "callbacks",
    "logger_fn",
    # LiteLLM takes these from a body as its own arguments too (found by the fuzz test, 2026-11-27): `client` (its SDK
    # client object: a 500), `custom_llm_provider` (another provider's API for the model), `extra_body` (merged into
    # the backend's request after every check: `extra_body: {"n": 5}` got 5 choices past `limits.n`), the headers sent
    # to the backend, and its timeouts and retries (a list was a 500; a number the client's, not the config's)
    "client",
    "custom_llm_provider",
    "extra_body",
    "headers",
    "extra_headers",
    "timeout",
    "stream_timeout",
    "max_retries",
    "num_retries",
    # ... and these (2026-11-28): `request_timeout` (a string was a 500), `deployment_id` (the backend answered 401),
    # the SDK client's `default_headers` and `organization`
    "request_timeout",
    "deployment_id",
    "default_headers",
    "organization",
)


def _litellm_params() -> tuple[str, ...]:
    """Every field of LiteLLM's GenericLiteLLMParams: LiteLLM takes each from a request body as a deployment setting
    (found by the fuzz test, 2026-11-29: `tpm: {...}` was a 500 on /v1/completions), among them the backend's
    credentials (`aws_*`, `vertex_credentials`, ...), its prices (`input_cost_per_token`, what a person's budget is
    counted in) and its limits (`rpm`, `tpm`). No API's own request has one of them."""
    try:
        from litellm.types.router import GenericLiteLLMParams
    except ImportError:  # the unit tests of this module without LiteLLM: the names above only
        return ()
    return tuple(sorted(set(GenericLiteLLMParams.model_fields) - set(CLIENT_CONTROL)))


CLIENT_CONTROL += _litellm_params()
CONTROLLED = frozenset(CLIENT_CONTROL)
# bound name -> (request field, how much of it the request asks)
LIMITED: dict[str, Callable[[object], int | None]] = {
    "n": lambda v: v if isinstance(v, int) and not isinstance(v, bool) else None,
    "best_of": lambda v: v if isinstance(v, int) and not isinstance(v, bool) else None,
    "tools": lambda v: len(v) if isinstance(v, list) else None,
    "logit_bias": lambda v: len(v) if isinstance(v, dict) else None,
}

# LiteLLM's admin UI (pages, assets, its login and SSO helpers, its config for the UI) and API docs
UI_ROUTES = frozenset(
    {
        "/",
        "/ui",
        "/docs",
        "/redoc",
        "/openapi.json",
        "/login",
        "/v2/login",
        "/fallback/login",
        "/get_image",
        "/.well-known/litellm-ui-config",
    }
)
UI_PREFIXES = (
    "/ui/",
    "/_next/",
    "/litellm-asset-prefix/",
    "/swagger/",
    "/docs/",
    "/redoc/",
    "/sso/",
    "/onboarding/",
    "/litellm/.well-known/",
)
UI_OFF = "not served: LiteLLM's admin UI and API docs are off in this gateway (gateway.admin_ui)"

Send = Callable[[dict], Awaitable[None]]
Receive = Callable[[], Awaitable[dict]]


class Refusal(Exception):
    def __init__(
        self, status: int, message: str, param: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers or {}


def error_body(api: str | None, status: int, message: str, param: str | None) -> bytes:
    if api in ANTHROPIC_APIS:
        kind = {
            401: "authentication_error",
            403: "permission_error",
            413: "request_too_large",
            429: "rate_limit_error",
        }.get(status, "invalid_request_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    kind = {401: "auth_error", 403: "permission_error", 429: "rate_limit_error"}.get(status, "invalid_request_error")
    return json.dumps({"error": {"message": message, "type": kind, "param": param, "code": str(status)}}).encode()


async def respond(
    send: Send,
    api: str | None,
    status: int,
    message: str,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    body = error_body(api, status, message, param)
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})


LIMIT_WINDOW = "60"  # seconds: LiteLLM's rpm/tpm windows are a minute


def with_retry_after(send: Send) -> Send:
    """LiteLLM's limiter answers 429 with Retry-After on chat, but some APIs' error paths (e.g. /v1/messages) drop
    its headers: a 429 without one gets the window's length, so every API tells a client when to come back."""

    async def wrapped(message: dict) -> None:
        if message.get("type") == "http.response.start" and message.get("status") == 429:
            headers = list(message.get("headers") or [])
            if not any(k.lower() == b"retry-after" for k, _ in headers):
                message = {**message, "headers": [*headers, (b"retry-after", LIMIT_WINDOW.encode())]}
        await send(message)

    return wrapped


class ClientGone(Exception):
    pass


async def read_body(receive: Receive, limit: int) -> tuple[bytes | None, int]:
    """(the body, its size); None for a body over `limit`, which is still read to its end, not kept."""
    chunks: list[bytes] = []
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= limit and chunk:
            chunks.append(chunk)
        more = message.get("more_body", False)
    return (b"".join(chunks) if size <= limit else None), size


def parse(body: bytes) -> object:
    try:
        import orjson  # LiteLLM's own parser (a dependency of LiteLLM)

        return orjson.loads(body)
    except ImportError:
        return json.loads(body)


def dumps(data: object) -> bytes:
    try:
        import orjson

        return orjson.dumps(data)
    except ImportError:
        return json.dumps(data).encode()


def alias_target(model: object) -> str | None:
    """The model an alias names (models.yml `aliases:`), or None (never breaks a request)."""
    try:
        import gateway_backends as gb

        return gb.alias_target(gb.router(), model)
    except Exception:  # noqa: BLE001  LiteLLM's router resolves the alias then
        return None


def model_limits(model: object) -> dict[str, int]:
    """The requested model's bounds from the rendered config (model_info.gateway_limits), or {}."""
    import gateway_backends as gb

    rt = gb.router()
    if rt is None or not isinstance(model, str):
        return {}
    found: dict[str, int] = {}
    for dep in gb.deployments(rt, model):
        for key, value in (gb.info(dep).get("gateway_limits") or {}).items():
            if isinstance(value, int):
                found[key] = min(value, found.get(key, value))  # the strictest deployment of the group
    return found


def largest_request() -> int:
    """The largest body any model takes: past it, no need to read what the body asks for."""
    import gateway_backends as gb

    rt = gb.router()
    sizes = (
        [
            v
            for d in (getattr(rt, "model_list", None) or [])
            if isinstance(v := gb.info(d).get("gateway_limits", {}).get("request_bytes"), int)
        ]
        if rt
        else []
    )
    return max(sizes, default=DEFAULT_REQUEST_BYTES)


def limits_problem(body: dict, size: int, limits: dict[str, int]) -> Refusal | None:
    model = body.get("model")
    where = f"{model} (limits.{{}} in models.yml)"
    if (most := limits.get("request_bytes")) is not None and size > most:
        return Refusal(
            413,
            f"the request body is {size} bytes, over the {most} that {where.format('request_size')} "
            "takes: send less (long documents in parts)",
        )
    for key, asked_of in LIMITED.items():
        asked = asked_of(body.get(key))
        if asked is not None and (most := limits.get(key)) is not None and asked > most:
            what = "entries" if key in ("tools", "logit_bias") else ""
            return Refusal(
                400,
                f"`{key}` asks {asked}{' ' + what if what else ''}, over the {most} that {where.format(key)} allows",
                key,
            )
    return None


def litellm_refusal(body: dict, path: str) -> Refusal | None:
    """LiteLLM's own request-body check (its banned fields), answered as the 400 it means; None when it passes
    or cannot run here."""
    try:
        from litellm.proxy import proxy_server
        from litellm.proxy.auth.auth_utils import is_request_body_safe
    except ImportError:
        return None
    try:
        is_request_body_safe(
            request_body=body,
            general_settings=proxy_server.general_settings or {},
            llm_router=proxy_server.llm_router,
            model=str(body.get("model") or ""),
            route=path,
        )
    except TypeError:  # another LiteLLM without the route argument
        return None
    except ValueError as exc:
        return Refusal(400, str(exc))
    except Exception as exc:  # noqa: BLE001  an HTTPException or LiteLLM's own error type: its status if a 4xx
        status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
        if isinstance(status, int) and 400 <= status < 500:
            return Refusal(status, str(getattr(exc, "detail", None) or exc))
        return None
    return None


NO_PROMPT_LOGPROBS = "gateway_no_prompt_logprobs"  # model_info (renderers/litellm.py)
ECHOED = {"completions": "logprobs", "chat": "top_logprobs"}  # with `echo`, vLLM computes the prompt's logprobs too


MAX_LOGPROBS = "gateway_max_logprobs"  # model_info (renderers/litellm.py): the backend's vLLM --max-logprobs
# each API's fields that ask vLLM for N logprobs per token (vLLM's to_sampling_params: chat's and responses'
# top_logprobs become its `logprobs`); -1 asks for the whole vocabulary
LOGPROB_FIELDS = {
    "completions": ("logprobs", "prompt_logprobs"),
    "chat": ("top_logprobs", "prompt_logprobs"),
    "responses": ("top_logprobs",),
}


def logprobs_problem(api: str, body: dict) -> Refusal | None:
    """A 400 naming the field when a request asks for more logprobs per token than the model's backend computes
    (vLLM --max-logprobs): vLLM refuses it too, but in a stream LiteLLM turns its refusal into a 500."""
    asked = [
        (field, value)
        for field in LOGPROB_FIELDS.get(api, ())
        if isinstance(value := body.get(field), int) and not isinstance(value, bool) and (value > 0 or value == -1)
    ]
    model = body.get("model")
    if not asked or not isinstance(model, str):
        return None
    import gateway_backends as gb

    rt = gb.router()
    bounds = [gb.as_int(gb.info(d).get(MAX_LOGPROBS)) for d in (gb.deployments(rt, model) if rt is not None else [])]
    known = [b for b in bounds if b is not None]
    if not known or -1 in known:  # no bound in the config (a hand-written one), or the whole vocabulary
        return None
    most = min(known)
    for field, value in asked:
        if value == -1 or value > most:
            what = "every token of the vocabulary" if value == -1 else f"{value}"
            return Refusal(
                400,
                f"invalid request: `{field}` asks {what} logprobs per token, over the {most} that {model}'s backend "
                "computes (vLLM --max-logprobs in its command)",
                field,
            )
    return None


def prompt_logprobs_problem(api: str, body: dict) -> Refusal | None:
    """A 400 when the request asks vLLM for its prompt's logprobs (vLLM's to_sampling_params: `prompt_logprobs`, or
    `echo` with the API's logprobs field) and the model's backend cannot compute them."""
    field = (
        "prompt_logprobs"
        if body.get("prompt_logprobs") is not None
        else ECHOED[api]
        if api in ECHOED and body.get("echo") and body.get(ECHOED[api]) is not None
        else None
    )
    model = body.get("model")
    if field is None or not isinstance(model, str):
        return None
    import gateway_backends as gb

    rt = gb.router()
    if rt is None or not any(gb.info(d).get(NO_PROMPT_LOGPROBS) for d in gb.deployments(rt, model)):
        return None
    asked = "`prompt_logprobs`" if field == "prompt_logprobs" else f"`echo` with `{field}`"
    return Refusal(
        400,
        f"invalid request: {asked} asks for the prompt's logprobs, which {model} does not serve: its "
        "backend runs LoRA adapters on CPU, where vLLM 0.32 stops its engine computing them "
        "(docs/limits.md); ask for the answer's logprobs only",
        field,
    )


def judge(api: str, body: object, size: int) -> Refusal | None:
    """Everything the guard says about a parsed body (steps 3-6), or None when it goes on."""
    if not isinstance(body, dict):
        return Refusal(400, "invalid request: the body must be a JSON object")
    if (why := shapes.problem(api, body)) is not None:
        return Refusal(400, f"invalid request: {why}", why.split("`")[1] if "`" in why else None)
    for name in body:
        if name in CONTROLLED:
            return Refusal(
                400,
                f"invalid request: `{name}` is not taken from a request: the gateway's config "
                "decides where and how each model is served",
                name,
            )
    return (
        limits_problem(body, size, model_limits(body.get("model")))
        or logprobs_problem(api, body)
        or prompt_logprobs_problem(api, body)
        or kind_problem(api, body.get("model"))
    )


# API -> the model_info.mode its model must have, and what a model without it is told (the generated config gives
# pooling models mode embedding or rerank; a chat model has none)
POOLING_APIS = {
    "embeddings": (
        "embedding",
        "is not an embedding model: its backend serves no /v1/embeddings (vLLM serves "
        "embeddings only for a pooling model, `vllm serve ... --runner pooling`)",
    ),
    "rerank": (
        "rerank",
        "is not a rerank model: its backend serves no rerank (vLLM serves it only for a pooling model "
        "with a scoring head, `vllm serve ... --runner pooling`)",
    ),
}


def kind_problem(api: str, model: object) -> Refusal | None:
    """An embeddings or rerank request to a model of another kind: a 400 naming the model, before its backend is
    asked (it answered 404; the route walk of tests/integration/test_people.py saw those requests reach it)."""
    import gateway_backends as gb

    if api not in POOLING_APIS or not isinstance(model, str) or (rt := gb.router()) is None:
        return None
    mode, why = POOLING_APIS[api]
    deps = gb.deployments(rt, model)
    if deps and any(gb.info(dep).get("mode") != mode for dep in deps):
        return Refusal(400, f"{model} {why}", "model")
    return None


Admit = Callable[[str | None, dict], Awaitable["Refusal | None"]]
RouteCheck = Callable[[str | None, str], "str | None"]  # (key, path) -> why the key may not ask this route, or None


def _any_route(key: str | None, path: str) -> str | None:
    return None


async def _admit_all(key: str | None, body: dict) -> Refusal | None:
    return None


async def refuse(receive: Receive, send: Send, status: int, message: str) -> None:
    """Answer a request that is not an API's (no body of ours to judge) with `status`, once its body is read to its
    end and dropped (answering first would look like a reset connection); nothing when the client has gone."""
    try:
        await read_body(receive, -1)
    except ClientGone:
        return None
    return await respond(send, None, status, message)


def is_ui_path(path: str) -> bool:
    return path in UI_ROUTES or path.startswith(UI_PREFIXES)


def key_of(headers: dict[bytes, bytes]) -> str | None:
    """The key LiteLLM will read: the first of KEY_HEADERS the request has."""
    for h in KEY_HEADERS:
        if h in headers:
            return headers[h].decode("latin-1")
    return None


class RequestGuard:
    """The middleware; `key_is_valid` is the guard's constant-time key check (the master key or a person's),
    `key_problem` its 401 text, `admit(key, body)` what the key's holder may ask (a person's models and budgets:
    403/429), answered here, before LiteLLM, whose error path would hand the key to its failure callbacks."""

    def __init__(
        self,
        app: Any,
        key_is_valid: Callable[[str | None], bool],
        key_problem: str,
        admit: Admit = _admit_all,
        hide_ui: bool = False,
        route_check: RouteCheck = _any_route,
    ) -> None:
        self.app = app
        self.route_check = route_check
        self.key_is_valid = key_is_valid
        self.key_problem = key_problem
        self.admit = admit
        self.hide_ui = hide_ui

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        worker_gc.safe_point()  # no HAMT node is being allocated here
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        api = shapes.api_of(scope.get("path", "")) if scope.get("method") == "POST" else None
        if api is None and self.hide_ui and is_ui_path(scope.get("path", "")):
            return await refuse(receive, send, 404, UI_OFF)
        if api is None:
            # any other route: a key that is sent and unknown is a 401 here (LiteLLM's own 401 path would pass the
            # key to its failure callbacks and metrics); no key at all is LiteLLM's to judge (public routes)
            headers = dict(scope.get("headers") or [])
            sent = [headers[h].decode("latin-1") for h in KEY_HEADERS if h in headers]
            if sent and not any(self.key_is_valid(k) for k in sent):
                await asyncio.sleep(WRONG_KEY_DELAY)
                return await refuse(receive, send, 401, self.key_problem)
            # a route the key may not ask: 403 here too (LiteLLM's error path after custom auth puts the raw key in its
            # failure metric's hashed_api_key label)
            if sent and (why := self.route_check(key_of(headers), scope.get("path", ""))) is not None:
                return await refuse(receive, send, 403, why)
            return await self.app(scope, receive, send)
        try:
            refusal, body = await self.check(scope, receive, api)
        except ClientGone:
            return None
        if refusal is not None:
            return await respond(send, api, refusal.status, refusal.message, refusal.param, refusal.headers)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        scope[CHECKED] = True
        send = with_retry_after(send)
        if (keep := scope.get(STORE)) is not None:
            send = stored.capturing(send, keeper(*keep))
        if counters.enabled():
            send = counted(send, model_of(scope), person_of(dict(scope.get("headers") or [])))
        return await self.app(scope, replay, send)

    async def check(self, scope: dict, receive: Receive, api: str) -> tuple[Refusal | None, bytes]:
        headers = dict(scope.get("headers") or [])
        if not any(self.key_is_valid(headers[h].decode("latin-1")) for h in KEY_HEADERS if h in headers):
            await read_body(receive, -1)  # to its end, kept nowhere: the body of a stranger is not read
            if any(h in headers for h in KEY_HEADERS):  # a key was sent, and is wrong: a guess is slowed down
                await asyncio.sleep(WRONG_KEY_DELAY)
            return Refusal(401, self.key_problem), b""
        try:
            limit = largest_request()
        except Exception:  # noqa: BLE001  never break a request on our own failure
            limit = DEFAULT_REQUEST_BYTES
        body, size = await read_body(receive, limit)
        if body is None:
            return Refusal(
                413,
                f"the request body is over {limit} bytes, the most any model here takes "
                "(limits.request_size in models.yml)",
            ), b""
        content_type = headers.get(b"content-type", b"").decode("latin-1").lower()
        if content_type.startswith(FORM_TYPES):
            return Refusal(400, "invalid request: send the body as JSON (Content-Type: application/json)"), body
        try:
            data = parse(body)
        except ValueError as exc:  # orjson's and json's decode errors are ValueErrors
            return Refusal(400, f"invalid request: the body is not JSON ({exc})"), body
        path = scope.get("path", "")
        if isinstance(data, dict) and "model" not in data and (named := MODEL_IN_PATH.search(path)):
            data = {"model": named[1], **data}  # for the checks only: LiteLLM reads the path itself
        if isinstance(data, dict) and (target := alias_target(data.get("model"))) is not None:
            data["model"] = target  # an alias: its model's name, for every check, LiteLLM and the answer
            if not named_in_path(path):
                body = dumps(data)
        if api == "responses" and isinstance(data, dict) and shapes.problem(api, data) is None:
            try:
                if await responses_state(scope, key_of(headers), data):
                    body = dumps(data)  # the conversation a previous_response_id stood for, checked as sent on
                    size = len(body)
            except Exception as exc:  # noqa: BLE001  a refusal, or the store (Redis) does not answer: never a trace
                p = exc if isinstance(exc, stored.Problem) else stored.unavailable(exc)
                return Refusal(p.status, p.message, p.param, {"retry-after": "5"} if p.status == 503 else None), body
        try:
            refusal = judge(api, data, size)  # refuses a body that is not an object
            if refusal is None and isinstance(data, dict):
                refusal = litellm_refusal(data, path)
        except Exception:  # noqa: BLE001  never break a request on our own failure: LiteLLM judges it
            return None, body
        if refusal is None and isinstance(data, dict):
            try:
                refusal = await self.admit(key_of(headers), data)
            except Exception:  # noqa: BLE001  e.g. the stack's Redis is down: never let a person past their limits
                refusal = Refusal(
                    503,
                    "the gateway cannot check this key's limits right now (its Redis does not "
                    "answer); try again shortly",
                    None,
                    {"retry-after": "5"},
                )
        if refusal is None and isinstance(data, dict) and not named_in_path(path):
            scope["parsed_body"] = (tuple(data.keys()), data)  # where LiteLLM looks before parsing the body itself
        return refusal, body


async def responses_state(scope: dict, key: str | None, data: dict) -> bool:
    """/v1/responses' state (response_store.py): a `previous_response_id` expanded into the conversation it continues
    (True: `data` changed), and, unless the request says `store: false`, what its answer is kept with (scope[STORE]);
    a person whose stored responses fill their `stored_responses` is refused storing (response_store.Problem)."""
    person = people.DIRECTORY.who(key)
    owner = stored.owner_of(person.name if person is not None else None)
    client = stored.redis_client()
    previous = data.get("previous_response_id")
    if previous is not None:
        await stored.expand(client, owner, data)
    if client is not None and stored.wants_store(data):
        if person is not None and (over := await stored.over_quota(client, owner, person.stored_responses)):
            raise over
        scope[STORE] = (client, owner, stored.as_items(data.get("input")), previous)
    return previous is not None


def keeper(client: object, owner: str, items: list, previous: str | None) -> Callable[[dict], Awaitable[None]]:
    async def keep(response: dict) -> None:
        await stored.save(client, owner, items, response, previous)

    return keep


def model_of(scope: dict) -> str:
    """The requested model: the body's `model` (parsed by check()), or the one a path names."""
    parsed = scope.get("parsed_body")
    if parsed and isinstance(parsed[1].get("model"), str):
        return parsed[1]["model"]
    named = MODEL_IN_PATH.search(scope.get("path", ""))
    return named[1] if named else ""


def person_of(headers: dict[bytes, bytes]) -> str:
    """The name of the person whose key the request carries (people.py), "" for the master key."""
    try:
        person = people.DIRECTORY.who(key_of(headers))
    except Exception:  # noqa: BLE001  never break a request on our own failure
        return ""
    return person.name if person is not None else ""


def counted(send: Send, model: str, person: str = "") -> Send:
    """`send`, counting the answer's status once (gateway.metrics: light; request_counters.py), under the model that
    answered: a fallback's answer is its fallback's, as its tokens are (people.py), not the model asked for's."""

    async def counting_send(message: dict) -> None:
        if message["type"] == "http.response.start":
            try:
                counters.count(fallbacks.answered_by(message.get("headers")) or model, message["status"], person)
            except Exception:  # noqa: BLE001  never break a request on our own failure
                pass
        await send(message)

    return counting_send


def named_in_path(path: str) -> bool:
    return MODEL_IN_PATH.search(path) is not None


def install(
    key_is_valid: Callable[[str | None], bool],
    key_problem: str,
    app: Any = None,
    admit: Admit = _admit_all,
    hide_ui: bool = False,
    route_check: RouteCheck = _any_route,
) -> None:
    """Put the guard in front of LiteLLM's middlewares (once per process). The proxy app has started when LiteLLM
    loads custom auth (its lifespan loads the config), so the built middleware stack is wrapped in place."""
    if app is None:
        from litellm.proxy.proxy_server import app

    if getattr(app, "gateway_request_guard", False):
        return
    app.gateway_request_guard = True
    if app.middleware_stack is None:  # not started yet: the ordinary way
        app.add_middleware(
            RequestGuard,
            key_is_valid=key_is_valid,
            key_problem=key_problem,
            admit=admit,
            hide_ui=hide_ui,
            route_check=route_check,
        )
    else:
        app.middleware_stack = RequestGuard(
            app.middleware_stack, key_is_valid, key_problem, admit, hide_ui, route_check
        )

# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""The gateway's guard, the first code of ours on every request: LiteLLM's custom auth, and an ASGI middleware
in front of all of LiteLLM (request_guard.py) that checks every API's request body before LiteLLM reads it.

1. the master key (the admin's) or a person's key (models.yml `people:`, people.py) opens the gateway; a missing or
   wrong key is a 401; a person's request for a model not theirs a 403, past a token budget a 429, and their
   rpm/tpm/parallel limits are LiteLLM's limiter's (the UserAPIKeyAuth this returns carries them);
2. only the OpenAI inference routes are open; LiteLLM's admin/management routes (keys, users,
   teams, config, UI, ...) are a 403 unless GATEWAY_ADMIN_ROUTES=1 (`gateway.admin_ui: true`), and its UI pages
   and API docs a 404 (request_guard.py); `/health`, which makes every backend generate, is the master key's;
3. a malformed request on any API (chat, completions, responses, messages, count_tokens, embeddings, rerank) is a 400
   naming the field and what it must be, a body over the model's `limits.request_size` a 413, and a request
   past the model's other `limits:` a 400 naming the field and the bound (request_guard.py, request_shapes.py);
4. at import, it puts count_tokens.py's ``/v1/messages/count_tokens`` route (answered from the
   model's own backend, never forwarded elsewhere) and gateway_status.py's ``/gateway/status``
   (backends' health and metrics, for `make status`; the key only), gateway_page.py's page (``/gateway/``) and
   ``/gateway/me``, and response_store.py's routes of a stored response (``GET /v1/responses/{id}``, its
   ``input_items``, ``DELETE``, ``cancel``: the owner's only) and messages_route.py's ``/v1/messages`` (the stack's
   own backends' requests translated once, then LiteLLM's chat path) in front of LiteLLM's, and the request guard in
   front of LiteLLM's middlewares; and route_order.py puts the inference routes (LiteLLM's, /v1/messages' router
   loaded now instead of on its first request) in front of every other, so a request finds its route in one step;
5. at import, litellm_cuts.py takes LiteLLM's per-request costs the stack does not need off every request, and
   tool_schemas.py has the tools of a chat or /v1/messages request reach the stack's backends as the client sent them.

Referenced from the generated config.yaml, with this file (and the modules it imports) copied next to it:

    general_settings:
      custom_auth: gateway_guard.user_api_key_auth

Why here: without a database LiteLLM 1.103.7 answers a wrong key with 400 "No connected db." and a
missing key with a 500 (its error path imports the optional prisma package); wrong types
(`tools: true`, `messages: false`, `input: 5`) crash its request set-up with a 500 before any pre-call hook
runs; and its own checks before custom auth (a non-object body, `api_base` in the body) end in a 500 or a
reset connection. So the body checks run in a middleware before any of LiteLLM; custom auth repeats the
shape check only for a request the middleware did not see. The key comparison is constant-time.
"""

from __future__ import annotations

import os
import secrets
import sys

from fastapi import HTTPException, Request
from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth
from litellm.proxy.common_utils.http_parsing_utils import _read_request_body

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads this file by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import backend_client  # noqa: E402
import count_tokens  # noqa: E402
import gateway_backends  # noqa: E402
import gateway_page  # noqa: E402
import gateway_status  # noqa: E402
import graceful_shutdown  # noqa: E402,F401  (patches uvicorn's worker shutdown on import)
import litellm_cuts  # noqa: E402
import messages_route  # noqa: E402
import people  # noqa: E402
import request_guard  # noqa: E402
import request_shapes  # noqa: E402
import response_store  # noqa: E402
import route_order  # noqa: E402
import tool_schemas  # noqa: E402
import worker_gc  # noqa: E402,F401  (the worker's garbage collector settings, on import: CPython's HAMT crash)

MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
OPENAI_PREFIXES = (
    "/v1/",
    "/v2/rerank",
    "/chat/completions",
    "/completions",
    "/embeddings",
    "/rerank",
    "/models",
    "/health",
    "/tokenize",
)
OWN_PREFIX = "/gateway/"  # our own routes (gateway_status.py): each checks its own key
# /health (and its other routes) makes every backend the key may use generate, outside any limit: the master key's;
# a person's monitoring asks these, which answer without touching a backend
PERSON_HEALTH = ("/health/readiness", "/health/liveliness", "/health/liveness")
ADMIN_ROUTES = os.environ.get("GATEWAY_ADMIN_ROUTES", "") in ("1", "true", "True")
KEY_PROBLEM = "missing or invalid API key: send `Authorization: Bearer <key>`"


# Besides the inference APIs (request_shapes.py, each metered by the guard and LiteLLM's limiter), all a person's key
# opens: the model list. Not LiteLLM's other /v1 routes (model info with its api_base, files, batches, audio, images,
# MCP, agents, ...): a route walk with a person's key (tests/integration/test_people.py) found some reach a backend
# and others show the deployment.
def is_model_list(path: str) -> bool:
    """/v1/models, /models and one model's entry; not Google's /models/<m>:generateContent (and :countTokens)."""
    return path in ("/v1/models", "/models") or (path.startswith(("/v1/models/", "/models/")) and ":" not in path)


def is_master(api_key: str | None) -> bool:
    """`api_key` (with or without "Bearer ") is the master key; constant-time."""
    expected = os.environ.get(MASTER_KEY_ENV, "")
    given = people.bare_key(api_key)
    return bool(expected and given and secrets.compare_digest(given.encode(), expected.encode()))


def key_is_valid(api_key: str | None) -> bool:
    """The master key or a person's (people.py: its hash is in people-keys.json)."""
    return is_master(api_key) or people.DIRECTORY.who(api_key) is not None


async def check_key(api_key: str) -> None:
    """A 401 unless `api_key` is the master key (the admin's routes: /gateway/status)."""
    if not is_master(api_key):
        raise HTTPException(status_code=401, detail=KEY_PROBLEM)


async def admit(api_key: str | None, body: dict) -> request_guard.Refusal | None:
    """What a person may ask (the middleware calls it with the parsed body, before LiteLLM): a model not theirs is a
    403 naming the model, a used-up token budget a 429 with Retry-After; the master key may ask anything."""
    person = None if is_master(api_key) else people.DIRECTORY.who(api_key)
    if person is None:
        return None
    model = body.get("model")
    if (why := people.model_problem(person, model)) is not None:
        return request_guard.Refusal(403, why, "model")
    if (over := await people.over_budget(person)) is not None:
        what, seconds = over
        return request_guard.Refusal(429, f"{what}; it resets in {seconds} s", None, {"retry-after": str(seconds)})
    return None


def person_models(person: people.Person) -> list[str]:
    """The names a person's key may send, for LiteLLM ([]: every model): their models and the aliases of these that
    /v1/models lists (`list_aliases: true`). Any alias of theirs is theirs: the guard puts its model in the body."""
    if person.models is None:
        return []
    listed = gateway_backends.listed_aliases(gateway_backends.router())
    return sorted({*person.models, *(alias for alias, model in listed.items() if model in person.models)})


def person_auth(person: people.Person) -> UserAPIKeyAuth:
    """The person as LiteLLM's key object: its limiter counts rpm/tpm/parallel per `api_key` (the person's name,
    nothing derived from the key), its metrics label requests with `key_alias`, /v1/models lists `models`."""
    return UserAPIKeyAuth(
        api_key=people.API_KEY_PREFIX + person.name,
        key_alias=person.name,
        user_id=person.name,
        models=person_models(person),
        rpm_limit=person.rpm,
        tpm_limit=person.tpm,
        max_parallel_requests=person.parallel,
    )


def route_problem(api_key: str | None, path: str) -> str | None:
    """Why the holder of `api_key` (a valid key) may not ask `path`, or None. The request guard answers it 403
    before LiteLLM; custom auth asks again for a request it did not see."""
    if path.startswith(OWN_PREFIX):  # our routes check their own key (/gateway/status: the master key's)
        return None
    person = None if is_master(api_key) else people.DIRECTORY.who(api_key)
    if (person is not None or not ADMIN_ROUTES) and not path.startswith(OPENAI_PREFIXES):
        return f"{path} is an admin route, off in this gateway (gateway.admin_ui)"
    if person is None:
        return None
    if path.startswith("/health"):
        return (
            None
            if path in PERSON_HEALTH
            else f"{path} makes every backend generate: the master key's; ask /health/readiness, or `make status`"
        )
    if request_shapes.api_of(path) is None and not is_model_list(path) and not response_store.ROUTE.match(path):
        return (
            f"{path}: a person's key opens the inference APIs (chat, completions, responses, messages, "
            "embeddings, rerank), their stored responses and the model list; the rest is the master key's"
        )
    return None


def response_owner(api_key: str | None) -> str | None:
    """Whose stored responses a key reads (response_store.py): the master key's, a person's, or None (no valid key)."""
    if is_master(api_key):
        return response_store.owner_of(None)
    person = people.DIRECTORY.who(api_key)
    return response_store.owner_of(person.name) if person is not None else None


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    master = is_master(api_key)
    person = None if master else people.DIRECTORY.who(api_key)
    if not master and person is None:
        raise HTTPException(status_code=401, detail=KEY_PROBLEM)
    path = request.url.path
    if (why := route_problem(api_key, path)) is not None:
        raise HTTPException(status_code=403, detail=why)
    api = request_shapes.api_of(path) if request.method == "POST" else None
    if api is not None and not request.scope.get(request_guard.CHECKED):  # the middleware did not see it
        data = await _read_request_body(request)  # cached: LiteLLM reuses it
        if (why := request_shapes.problem(api, data)) is not None:
            raise HTTPException(status_code=400, detail=f"invalid request: {why}")
        if person is not None and isinstance(data, dict) and (refusal := await admit(api_key, data)) is not None:
            raise HTTPException(status_code=refusal.status, detail=refusal.message, headers=refusal.headers or None)
    if person is not None:
        return person_auth(person)
    return UserAPIKeyAuth(api_key="gateway-master-key", user_role=LitellmUserRoles.PROXY_ADMIN, user_id="gateway-admin")


try:
    count_tokens.install(user_api_key_auth)
    messages_route.install()
    response_store.install(response_owner, KEY_PROBLEM)
    gateway_status.install(check_key)
    gateway_page.install(is_master, KEY_PROBLEM)
    request_guard.install(key_is_valid, KEY_PROBLEM, admit=admit, hide_ui=not ADMIN_ROUTES, route_check=route_problem)
    route_order.hot_routes_first()
except ImportError:  # not inside the proxy (unit tests import this module alone)
    pass
litellm_cuts.install()
tool_schemas.install()
backend_client.install()

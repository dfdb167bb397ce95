# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""LiteLLM proxy custom auth, the first code of ours on every request:

1. only the master key opens the gateway; a missing or wrong key is a 401;
2. only the OpenAI inference routes are open; LiteLLM's admin/management routes (keys, users,
   teams, config, UI, ...) are a 403 unless GATEWAY_ADMIN_ROUTES=1 (`gateway.admin_ui: true`);
3. a malformed chat request is a 400 naming the field, before LiteLLM touches it;
4. at import, it puts count_tokens.py's ``/v1/messages/count_tokens`` route (answered from the
   model's own backend, never forwarded elsewhere) and gateway_status.py's ``/gateway/status``
   (backends' health and metrics, for `make status`; the key only) in front of LiteLLM's.

Referenced from the generated config.yaml, with this file (and the modules it imports) copied next to it:

    general_settings:
      custom_auth: gateway_guard.user_api_key_auth

Why here: without a database LiteLLM 1.103.7 answers a wrong key with 400 "No connected db." and a
missing key with a 500 (its error path imports the optional prisma package); and wrong types
(`tools: true`, `messages: false`) crash its request set-up with a 500 before any pre-call hook
runs. Auth runs before that set-up, so the checks live here. The key comparison is constant-time.
Checks only types and shapes of the OpenAI chat fields; values are the backend's business.
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
import count_tokens  # noqa: E402
import gateway_status  # noqa: E402
import graceful_shutdown  # noqa: E402,F401  (patches uvicorn's worker shutdown on import)

MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
CHAT_PATHS = ("/chat/completions", "/v1/chat/completions")
OPENAI_PREFIXES = ("/v1/", "/chat/completions", "/completions", "/embeddings", "/models", "/health", "/tokenize")
ADMIN_ROUTES = os.environ.get("GATEWAY_ADMIN_ROUTES", "") in ("1", "true", "True")
ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
INTS = ("max_tokens", "max_completion_tokens", "n", "seed", "top_k", "top_logprobs")
NUMBERS = ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty")
BOOLS = ("stream", "logprobs", "parallel_tool_calls")
# LiteLLM's own max_request_size_mb is enterprise-only; a 128K-token prompt is well under 1 MB of text.
MAX_TEXT_BYTES = int(float(os.environ.get("GATEWAY_MAX_REQUEST_MB", "16")) * 1024 * 1024)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def problem(data: dict) -> str | None:
    """The first thing wrong with a chat request, or None."""
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        return "`messages` must be a non-empty list of {role, content} objects"
    size = 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            return f"`messages[{i}]` needs a `role`, one of {sorted(ROLES)}"
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            return f"`messages[{i}].content` must be a string, a list of parts or null"
        size += len(content) if isinstance(content, str) else 0
    if size > MAX_TEXT_BYTES:
        return f"the messages hold {size} characters, over the gateway's {MAX_TEXT_BYTES} (GATEWAY_MAX_REQUEST_MB)"
    for key in INTS:
        if data.get(key) is not None and not _is_int(data[key]):
            return f"`{key}` must be an integer"
    for key in ("max_tokens", "max_completion_tokens", "n"):
        if _is_int(data.get(key)) and data[key] < 1:
            return f"`{key}` must be at least 1"
    for key in NUMBERS:
        if data.get(key) is not None and not _is_number(data[key]):
            return f"`{key}` must be a number"
    for key in BOOLS:
        if data.get(key) is not None and not isinstance(data[key], bool):
            return f"`{key}` must be true or false"
    stop = data.get("stop")
    if stop is not None and not (isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))):
        return "`stop` must be a string or a list of strings"
    tools = data.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            return "`tools` must be a list"
        for i, t in enumerate(tools):
            fn = t.get("function") if isinstance(t, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                return f"`tools[{i}]` must be {{type: function, function: {{name, parameters}}}}"
    choice = data.get("tool_choice")
    if choice is not None and not (
        choice in ("auto", "none", "required")
        or (isinstance(choice, dict) and isinstance(choice.get("function"), dict)
            and isinstance(choice["function"].get("name"), str))
    ):
        return "`tool_choice` must be auto, none, required or {type: function, function: {name}}"
    return None


async def check_key(api_key: str) -> None:
    """A 401 unless `api_key` (with or without "Bearer ") is the master key; constant-time."""
    expected = os.environ.get(MASTER_KEY_ENV, "")
    given = (api_key or "").removeprefix("Bearer ").strip()
    if not (expected and given and secrets.compare_digest(given.encode(), expected.encode())):
        raise HTTPException(status_code=401, detail="missing or invalid API key: send `Authorization: Bearer <key>`")


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    await check_key(api_key)
    path = request.url.path
    if not ADMIN_ROUTES and not path.startswith(OPENAI_PREFIXES):
        raise HTTPException(status_code=403, detail=f"{path} is an admin route, off in this gateway (gateway.admin_ui)")
    if request.method == "POST" and request.url.path.rstrip("/") in CHAT_PATHS:
        data = await _read_request_body(request)  # cached: LiteLLM reuses it
        if not isinstance(data, dict):
            raise HTTPException(status_code=400, detail="invalid request: the body must be a JSON object")
        if (why := problem(data)) is not None:
            raise HTTPException(status_code=400, detail=f"invalid request: {why}")
    return UserAPIKeyAuth(api_key="gateway-master-key", user_role=LitellmUserRoles.PROXY_ADMIN, user_id="gateway-admin")


def skip_failing_otel_seed() -> bool:
    """Take a LiteLLM 1.103.7 cost off every request (bench/README.md, "Profile"): after auth, LiteLLM
    calls `_seed_request_destinations`, which starts with `from litellm.integrations.otel.logger import`.
    That import fails without opentelemetry-sdk (and the opentelemetry-api fastapi needs lacks `_events`);
    the function swallows the error, and as a failed import is not cached, Python finds and unmarshals
    the module again on every request: 5-9 % of a worker's CPU. When the import fails here, at load, the
    function cannot do anything on any request, so it is replaced by a no-op; with OTel importable, or
    GATEWAY_LITELLM_OTEL_SEED=keep (the bench's A/B), it is left alone. True when replaced."""
    if os.environ.get("GATEWAY_LITELLM_OTEL_SEED") == "keep":
        return False
    try:
        from litellm.proxy.auth import user_api_key_auth as auth
    except ImportError:  # not inside the proxy
        return False
    if not hasattr(auth, "_seed_request_destinations"):
        return False  # another LiteLLM: nothing to do
    try:
        import litellm.integrations.otel.logger  # noqa: F401  the import LiteLLM retries per request
        return False
    except Exception:  # noqa: BLE001  any failure is the one LiteLLM would swallow on every request
        auth._seed_request_destinations = lambda *args, **kwargs: None
        return True


try:
    count_tokens.install(user_api_key_auth)
    gateway_status.install(check_key)
except ImportError:  # not inside the proxy (unit tests import this module alone)
    pass
skip_failing_otel_seed()

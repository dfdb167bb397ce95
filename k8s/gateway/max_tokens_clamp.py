# GENERATED from models.yml (sha256 53953d209ab85bf9) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""LiteLLM proxy hook: clamp a request's output budget to what the model's context leaves.

Referenced from the generated config.yaml, with this file copied next to it:

    litellm_settings:
      callbacks: ["max_tokens_clamp.proxy_handler_instance"]

For a chat (or text) completion it lowers ``max_tokens`` / ``max_completion_tokens`` so that
``prompt_tokens + max_tokens <= context`` and tells the client with the response header
``x-gateway-max-tokens-clamped: <original>-><new>``.

* context: the deployment's ``model_info.max_input_tokens`` from the config (the smallest of the
  group's deployments), else the group info the router merged, else the backend's own
  ``max_model_len`` reported by ``/tokenize``, else ``GATEWAY_CLAMP_DEFAULT_CONTEXT`` (2048).
* prompt tokens: the vLLM backend's ``POST {api_base minus /v1}/tokenize`` with the backend key,
  short timeout; if that fails, the UTF-8 byte length of the JSON of messages (+ tools), which is
  an upper bound for byte-level BPE tokenizers.
* the requested budget: the client's ``max_completion_tokens`` (vLLM prefers it) or
  ``max_tokens``; when the client sent neither, the deployment's configured default
  (``litellm_params.max_tokens``), which a client-level value overrides.
* when the budget that would be left is < 1 the request is passed on unchanged, so the backend
  answers with its own 400.

Any failure inside the hook leaves the request unchanged: the hook must never break a request.
Works with litellm 1.103.x and 1.109.x (router ``registry()`` API when present, else the older
``get_model_list`` / ``model_list``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from litellm._logging import verbose_proxy_logger
from litellm.integrations.custom_logger import CustomLogger

HEADER = "x-gateway-max-tokens-clamped"
METADATA_KEY = "gateway_max_tokens_clamped"
CHAT_CALL_TYPES = frozenset({"completion", "acompletion"})
TEXT_CALL_TYPES = frozenset({"text_completion", "atext_completion"})
OUTPUT_KEYS = ("max_completion_tokens", "max_tokens")  # vLLM uses max_completion_tokens first


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


TOKENIZE_TIMEOUT = _env_float("GATEWAY_CLAMP_TOKENIZE_TIMEOUT", 2.0)
DEFAULT_CONTEXT = int(_env_float("GATEWAY_CLAMP_DEFAULT_CONTEXT", 2048))


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _get(obj: object, key: str) -> object:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def _router() -> Any:
    try:
        from litellm.proxy import proxy_server

        return getattr(proxy_server, "llm_router", None)
    except Exception:  # noqa: BLE001
        return None


def _deployments(router: Any, model: str) -> list:
    """The config deployments of a model group, as dicts with litellm_params and model_info."""
    registry = getattr(router, "registry", None)
    if callable(registry):  # litellm >= 1.105: Router.registry().deployments(name)
        try:
            found = registry().deployments(model)
            if found:
                return list(found)
        except Exception:  # noqa: BLE001
            pass
    else:
        try:
            found = router.get_model_list(model_name=model)
            if found:
                return list(found)
        except Exception:  # noqa: BLE001
            pass
    try:
        return [d for d in (router.model_list or []) if _get(d, "model_name") == model]
    except Exception:  # noqa: BLE001
        return []


def _config_context(router: Any, model: str, deployments: list) -> int | None:
    values = []
    for dep in deployments:
        v = _as_int(_get(_get(dep, "model_info") or {}, "max_input_tokens"))
        if v and v > 0:
            values.append(v)
    if values:
        return min(values)
    info = None
    registry = getattr(router, "registry", None)
    try:
        if callable(registry):
            info = registry().group(model)
        else:
            info = router.get_model_group_info(model_group=model)
    except Exception:  # noqa: BLE001
        info = None
    v = _as_int(_get(info, "max_input_tokens")) if info is not None else None
    return v if v and v > 0 else None


def _secret(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("os.environ/"):
        return os.environ.get(value[len("os.environ/"):])
    return value


def _tokenize_url(api_base: str) -> str:
    base = api_base.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/tokenize"


def _estimate_tokens(payload: dict) -> int:
    """At most one token per byte of the JSON text: a safe upper bound."""
    return len(json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8"))


class MaxTokensClamp(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(timeout=TOKENIZE_TIMEOUT)
        return self._client

    async def _tokenize(self, deployment: object, payload: dict) -> tuple[int | None, int | None]:
        """(prompt token count, backend max_model_len) from vLLM's /tokenize, or (None, None)."""
        params = _get(deployment, "litellm_params") or {}
        api_base = _get(params, "api_base")
        if not isinstance(api_base, str) or not api_base:
            return None, None
        backend_model = str(_get(params, "model") or "")
        if "/" in backend_model and backend_model.split("/", 1)[0] in ("hosted_vllm", "openai"):
            backend_model = backend_model.split("/", 1)[1]
        body = {"model": backend_model, **payload}
        headers = {}
        key = _secret(_get(params, "api_key"))
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            resp = await self._http().post(_tokenize_url(api_base), json=body, headers=headers)
            if resp.status_code != 200:
                verbose_proxy_logger.debug("max_tokens_clamp: /tokenize answered %s", resp.status_code)
                return None, None
            out = resp.json()
            return _as_int(out.get("count")), _as_int(out.get("max_model_len"))
        except Exception as e:  # noqa: BLE001
            verbose_proxy_logger.debug("max_tokens_clamp: /tokenize failed: %r", e)
            return None, None

    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        try:
            await self._clamp(data, call_type)
        except Exception as e:  # noqa: BLE001 - never break a request
            verbose_proxy_logger.warning("max_tokens_clamp: skipped after error: %r", e)
        return data

    async def _clamp(self, data: dict, call_type: object) -> None:
        if not isinstance(data, dict):
            return
        ct = str(getattr(call_type, "value", call_type))
        if ct in CHAT_CALL_TYPES and isinstance(data.get("messages"), list):
            payload: dict = {"messages": data["messages"], "add_generation_prompt": True}
            if data.get("tools"):
                payload["tools"] = data["tools"]
            estimate_of = {"messages": data["messages"], "tools": data.get("tools")}
        elif ct in TEXT_CALL_TYPES and isinstance(data.get("prompt"), str):
            payload = {"prompt": data["prompt"]}
            estimate_of = {"prompt": data["prompt"]}
        else:
            return
        model = data.get("model")
        if not isinstance(model, str):
            return
        router = _router()
        if router is None:
            return
        deployments = _deployments(router, model)
        if not deployments:
            return

        # the budget the backend would be asked for
        present = [k for k in OUTPUT_KEYS if _as_int(data.get(k)) is not None]
        if present:
            requested = _as_int(data[present[0]])
            targets = present
        else:
            defaults = [
                _as_int(_get(_get(d, "litellm_params") or {}, k)) for d in deployments for k in OUTPUT_KEYS
            ]
            defaults = [v for v in defaults if v is not None]
            if not defaults:
                return  # nothing set anywhere: vLLM defaults to what the context leaves
            requested = max(defaults)
            targets = ["max_tokens"]  # a client-level value overrides the deployment default
        if requested is None or requested < 1:
            return

        context = _config_context(router, model, deployments)
        upper_bound = _estimate_tokens(estimate_of)
        if context is not None and upper_bound + requested <= context:
            return  # fits even at one token per byte: no need to ask the backend
        prompt_tokens, max_model_len = await self._tokenize(deployments[0], payload)
        source = "tokenize"
        if prompt_tokens is None:
            prompt_tokens = upper_bound
            source = "estimate"
        if context is None:
            context = max_model_len or DEFAULT_CONTEXT
        if prompt_tokens + requested <= context:
            return
        allowed = context - prompt_tokens
        if allowed < 1:
            return  # nothing left: let the backend answer with its own 400
        for key in targets:
            data[key] = allowed
        note = f"{requested}->{allowed}"
        metadata = data.get("metadata")
        if not isinstance(metadata, dict):
            metadata = {}
            data["metadata"] = metadata
        metadata[METADATA_KEY] = note
        verbose_proxy_logger.info(
            "max_tokens_clamp: model=%s %s clamped %s (prompt=%s tokens by %s, context=%s)",
            model, "/".join(targets), note, prompt_tokens, source, context,
        )

    async def async_post_call_response_headers_hook(
        self,
        data: dict,
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict | None = None,
        litellm_call_info: dict | None = None,
    ) -> dict | None:
        metadata = data.get("metadata") if isinstance(data, dict) else None
        note = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
        return {HEADER: str(note)} if note else None


proxy_handler_instance = MaxTokensClamp()

# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""What the gateway hooks know about a model group and its vLLM backend; shared by
max_tokens_clamp.py (pre-call hook) and count_tokens.py (the /v1/messages/count_tokens route).

Everything here reads the router LiteLLM built from the generated config.yaml:

* context: the deployment's ``model_info.max_input_tokens`` (the smallest of the group), else the
  group info the router merged, else the backend's own ``max_model_len`` from ``/tokenize``;
* defaults: the deployment's ``litellm_params`` (max_tokens, temperature, top_p, ...);
* tools: ``model_info.supports_function_calling`` (true when the model has a tool parser);
* the backend: ``litellm_params.api_base`` and ``api_key``; the backend's own tokenizer is asked
  through vLLM's ``POST /tokenize`` (Responses and Messages requests first become the chat request
  LiteLLM builds for them). Only the configured ``api_base`` is ever contacted: nothing here leaves
  the backend network.

Works with litellm 1.103.x through 1.109.x (router ``registry()`` API when present, else the
``get_model_list`` / ``model_list`` that 1.103.7 and the pinned 1.108.7 have).
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
from fastapi import HTTPException
from litellm._logging import verbose_proxy_logger

# names of the litellm_params the generator writes as request defaults (see README, `litellm:`)
DEFAULT_KEYS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "stop",
)


class RequestError(HTTPException):
    """A 400 every LiteLLM route reports with this message as is: the chat, responses and messages
    routes read an HTTPException's detail, the /v1/completions route reads message/type/param."""

    def __init__(self, message: str) -> None:
        super().__init__(status_code=400, detail=message)
        self.message = message
        self.type = "invalid_request_error"
        self.param = None


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


TOKENIZE_TIMEOUT = _env_float("GATEWAY_CLAMP_TOKENIZE_TIMEOUT", 5.0)


def as_int(value: object) -> int | None:
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


def get(obj: object, key: str) -> object:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def router() -> Any:
    try:
        from litellm.proxy import proxy_server

        return getattr(proxy_server, "llm_router", None)
    except Exception:  # noqa: BLE001
        return None


def deployments(rt: Any, model: str) -> list:
    """The config deployments of a model group, as dicts with litellm_params and model_info."""
    registry = getattr(rt, "registry", None)
    if callable(registry):  # litellm >= 1.105: Router.registry().deployments(name)
        try:
            found = registry().deployments(model)
            if found:
                return list(found)
        except Exception:  # noqa: BLE001
            pass
    else:
        try:
            found = rt.get_model_list(model_name=model)
            if found:
                return list(found)
        except Exception:  # noqa: BLE001
            pass
    try:
        return [d for d in (rt.model_list or []) if get(d, "model_name") == model]
    except Exception:  # noqa: BLE001
        return []


def _aliases(rt: Any) -> dict:
    aliases = getattr(rt, "model_group_alias", None)
    return aliases if isinstance(aliases, dict) else {}


def _alias_entry(target: object) -> tuple[str | None, bool]:
    """One router_settings.model_group_alias value: (the model it names, listed in /v1/models). LiteLLM takes a
    name (listed) or {model, hidden}."""
    model = target.get("model") if isinstance(target, dict) else target
    listed = not (isinstance(target, dict) and target.get("hidden"))
    return (model if isinstance(model, str) else None), listed


def alias_target(rt: Any, name: object) -> str | None:
    """The model an alias names (router_settings.model_group_alias: models.yml `aliases:`), or None."""
    aliases = _aliases(rt)
    return _alias_entry(aliases[name])[0] if isinstance(name, str) and name in aliases else None


def listed_aliases(rt: Any) -> dict[str, str]:
    """The aliases /v1/models lists (`list_aliases: true`) -> the model each names."""
    entries = {alias: _alias_entry(target) for alias, target in _aliases(rt).items()}
    return {alias: model for alias, (model, listed) in entries.items() if listed and model is not None}


def model_names(rt: Any) -> list[str]:
    try:
        return sorted({str(get(d, "model_name")) for d in (rt.model_list or [])})
    except Exception:  # noqa: BLE001
        return []


def info(dep: object) -> dict:
    value = get(dep, "model_info")
    return value if isinstance(value, dict) else {}


def params(dep: object) -> dict:
    value = get(dep, "litellm_params")
    return value if isinstance(value, dict) else {}


def config_context(rt: Any, model: str, deps: list) -> int | None:
    values = [v for d in deps if (v := as_int(info(d).get("max_input_tokens"))) and v > 0]
    if values:
        return min(values)
    group = None
    registry = getattr(rt, "registry", None)
    try:
        group = registry().group(model) if callable(registry) else rt.get_model_group_info(model_group=model)
    except Exception:  # noqa: BLE001
        group = None
    v = as_int(get(group, "max_input_tokens")) if group is not None else None
    return v if v and v > 0 else None


def takes_tools(dep: object) -> bool:
    """False only when the config says so (a model without --tool-call-parser)."""
    return info(dep).get("supports_function_calling") is not False


def tool_models(rt: Any) -> list[str]:
    """The model groups whose every deployment takes tools."""
    names = []
    for name in model_names(rt):
        deps = deployments(rt, name)
        if deps and all(takes_tools(d) for d in deps):
            names.append(name)
    return names


def defaults(deps: list) -> dict[str, object]:
    """The group's request defaults from the config (first deployment that sets each)."""
    found: dict[str, object] = {}
    for dep in deps:
        p = params(dep)
        for key in DEFAULT_KEYS:
            if key not in found and p.get(key) is not None:
                found[key] = p[key]
    return found


def _secret(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("os.environ/"):
        return os.environ.get(value[len("os.environ/") :])
    return value


HOSTED = "gateway_hosted"  # model_info of a hosted model (renderers/litellm.py): its provider
NODES = "gateway_nodes"  # model_info of a model served across hosts (renderers/litellm.py): how many nodes
PROVIDER_BASES = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com/v1"}


def nodes(dep: object) -> int | None:
    """How many hosts serve the deployment's model as one group (models.yml `nodes:`), or None for one host."""
    return as_int(info(dep).get(NODES))


def hosted(dep: object) -> str | None:
    """The provider of a hosted model's deployment (an API somebody else serves), or None for a backend of ours."""
    value = info(dep).get(HOSTED)
    return value if isinstance(value, str) else None


def hosted_request(dep: object) -> tuple[str, dict[str, str]]:
    """(URL of the hosted API's model list, its headers with the provider's key): what status asks it."""
    provider = hosted(dep) or ""
    base = params(dep).get("api_base") or PROVIDER_BASES.get(provider, "")
    key = _secret(params(dep).get("api_key"))
    if provider == "anthropic":
        headers = {"anthropic-version": "2023-06-01", **({"x-api-key": key} if key else {})}
    else:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
    return str(base).rstrip("/") + "/models", headers


def backend_root(dep: object) -> str | None:
    """The backend's base URL without /v1, from the config's api_base."""
    api_base = params(dep).get("api_base")
    if not isinstance(api_base, str) or not api_base:
        return None
    return api_base.rstrip("/").removesuffix("/v1")


def backend_model(dep: object) -> str:
    name = str(params(dep).get("model") or "")
    prefix, _, rest = name.partition("/")
    return rest if rest and prefix in ("hosted_vllm", "openai") else name


def backend_headers(dep: object) -> dict[str, str]:
    key = _secret(params(dep).get("api_key"))
    return {"Authorization": f"Bearer {key}"} if key else {}


_client: httpx.AsyncClient | None = None


def http() -> httpx.AsyncClient:
    """One client for the backend calls; trust_env=False: no proxy variable reroutes them."""
    global _client
    if _client is None or _client.is_closed:
        _client = httpx.AsyncClient(timeout=TOKENIZE_TIMEOUT, trust_env=False)
    return _client


class BackendRefused(Exception):
    """The backend answered 4xx: the request is what it refused (a client's error), not the backend's failure."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


async def backend_post(dep: object, path: str, body: dict, refusals: bool = False) -> dict | None:
    """POST to the configured backend (only there); the JSON answer, or None on any failure (with
    `refusals`, a 4xx raises BackendRefused instead)."""
    root = backend_root(dep)
    if root is None:
        return None
    try:
        resp = await http().post(root + path, json={"model": backend_model(dep), **body}, headers=backend_headers(dep))
        if refusals and 400 <= resp.status_code < 500:
            raise BackendRefused(resp.status_code, resp.text[:300])
        if resp.status_code != 200:
            verbose_proxy_logger.debug("gateway hooks: %s answered %s: %s", path, resp.status_code, resp.text[:200])
            return None
        out = resp.json()
        return out if isinstance(out, dict) else None
    except BackendRefused:
        raise
    except Exception as e:  # noqa: BLE001
        verbose_proxy_logger.debug("gateway hooks: %s failed: %r", path, e)
        return None


async def tokenize(dep: object, payload: dict, refusals: bool = False) -> tuple[int | None, int | None]:
    """(prompt token count, backend max_model_len) from vLLM's /tokenize, or (None, None)."""
    out = await backend_post(dep, "/tokenize", payload, refusals)
    if out is None:
        return None, None
    return as_int(out.get("count")), as_int(out.get("max_model_len"))


def plain(obj: object) -> object:
    """LiteLLM's typed messages as plain JSON data."""
    return json.loads(json.dumps(obj, default=lambda o: o.model_dump() if hasattr(o, "model_dump") else dict(o)))


def messages_as_chat(body: dict) -> dict:
    """An Anthropic Messages request as the chat request LiteLLM sends to vLLM for it (its own
    translation), ready for /tokenize."""
    from litellm.llms.anthropic.pass_through.adapters.transformation import AnthropicAdapter

    keep = ("model", "messages", "system", "tools", "tool_choice", "max_tokens")
    chat = AnthropicAdapter().translate_completion_input_params({k: body[k] for k in keep if body.get(k) is not None})
    if chat is None:  # its annotation allows it; a bad request is its ValueError too
        raise ValueError("LiteLLM's AnthropicAdapter translated the request to nothing")
    payload: dict = {"messages": plain(chat["messages"]), "add_generation_prompt": True}
    if chat.get("tools"):
        payload["tools"] = plain(chat["tools"])
    return payload


async def count_message_tokens(dep: object, body: dict) -> int | None:
    """Input tokens of an Anthropic Messages request by the backend's tokenizer and chat template, or
    None. Not vLLM's own /v1/messages/count_tokens: that one fails for a prompt longer than the
    context, the one case where the count matters most."""
    return (await tokenize(dep, messages_as_chat(body), refusals=True))[0]


TEMPLATE_MARGIN = 1024  # tokens a chat template may add of its own (tool instructions, default system text)


def byte_upper_bound(payload: object) -> int:
    """At most one token per byte of the JSON text, plus the template's own text: an upper bound
    for byte-level tokenizers, good enough to skip counting a prompt that clearly fits.

    The JSON text is json.dumps' (", " and ": " between items), measured without writing it: orjson's compact text
    plus one byte for each comma and colon in it (every separator, and any inside a string: never less, but a byte
    for a float json.dumps writes with a longer exponent, 1e-09 for 1e-9; the margin is 1,024). On a coding
    agent's prompt json.dumps was 3 % of a /v1/messages request's CPU (76 KB: ~0.2 ms; bench/README.md)."""
    try:
        import orjson  # LiteLLM's own JSON library (a dependency of LiteLLM)

        text = orjson.dumps(payload, default=str, option=orjson.OPT_NON_STR_KEYS)
        return len(text) + text.count(b",") + text.count(b":") + TEMPLATE_MARGIN
    except (ImportError, TypeError):  # no orjson, or what it cannot write (json.dumps can: a huge int)
        return len(json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")) + TEMPLATE_MARGIN

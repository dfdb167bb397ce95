# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""LiteLLM router callback: which replica of a model serves a request (models.yml `replicas:`, docs/replicas.md).

Referenced from the generated config.yaml when some model has replicas (`replica_routing.routing_instance` in
`litellm_settings.callbacks`). The router calls ``async_filter_deployments`` for every attempt of every request,
after it has dropped the deployments in cooldown, before its routing strategy picks one:

1. only deployments of a replicated model take part (their ``model_info.gateway_replica`` names the replica);
2. a replica this request already failed on (``metadata.previous_models``, which the router fills before each
   retry) is left out, so a retry goes to another replica even when the failure put nothing in cooldown
   (LiteLLM puts no APIConnectionError in cooldown: BerriAI/litellm#27362);
3. the conversation's key picks the replica by rendezvous hashing (highest sha256(key, replica name) among the
   live ones). The key is, first found:
   - the session id LiteLLM's proxy puts in ``metadata.session_id`` (1.108.7: from ``x-litellm-session-id``,
     any ``x-<vendor>-session-id`` header: Claude Code 2.1 sends ``X-Claude-Code-Session-Id``; Codex's
     ``session-id``; opencode's ``X-Session-Id``; Anthropic ``metadata.user_id`` ``..._session_<id>``),
     never one LiteLLM generated itself;
   - the body's ``prompt_cache_key`` (Codex and opencode send their session id there on the Responses API);
   - else a hash of the conversation's leading part: system prompt / instructions and the first user turn, the
     part every later turn resends unchanged.

Why hashing and no shared map: the choice is a pure function of the key and of which replicas are live, so
every worker of every gateway replica makes the same choice with no Redis and no per-process pin that other
workers cannot see; when a replica dies only its own conversations move (to their second choice), and they come
back when it is live again. What it does not do: weigh load. New conversations spread evenly by the hash, not to
the least busy replica (LiteLLM's own least-busy counts per worker anyway).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from litellm.integrations.custom_logger import CustomLogger

REPLICA = "gateway_replica"  # model_info key of a replicated model's deployments (the backend's name)
GENERATED = "litellm_session_id_generated"  # litellm.constants.SESSION_ID_GENERATED_METADATA_KEY (1.108.7)
LEADING_CHARS = 8192  # of the leading part's JSON: enough to tell conversations apart, cheap to hash


def replica_of(deployment: Mapping) -> str | None:
    info = deployment.get("model_info")
    name = info.get(REPLICA) if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else None


def deployment_id(deployment: Mapping) -> str | None:
    info = deployment.get("model_info")
    value = info.get("id") if isinstance(info, Mapping) else None
    return None if value is None else str(value)


def _metadata(request: Mapping) -> list[Mapping]:
    return [m for key in ("litellm_metadata", "metadata") if isinstance(m := request.get(key), Mapping)]


def failed_attempts(request: Mapping) -> set[str]:
    """Deployment ids this request already failed on (the router's breadcrumbs of earlier attempts)."""
    failed = set()
    for meta in _metadata(request):
        for crumb in meta.get("previous_models") or ():
            if isinstance(crumb, Mapping) and crumb.get("deployment_id") is not None:
                failed.add(str(crumb["deployment_id"]))
    return failed


def _text(content: object) -> object:
    """A message's content as plain JSON data (LiteLLM may hand typed objects)."""
    return json.loads(json.dumps(content, default=lambda o: o.model_dump() if hasattr(o, "model_dump") else str(o)))


def leading_part(request: Mapping, messages: object) -> object | None:
    """What every turn of one conversation starts with: the system prompt (or instructions) and the first user
    turn; None when the request has no conversation."""
    system = request.get("system") or request.get("instructions")
    turns = messages if isinstance(messages, list) else request.get("messages") or request.get("input")
    if isinstance(turns, str):  # a Responses API `input` text
        turns = [{"role": "user", "content": turns}]
    first = None
    if isinstance(turns, list):
        for turn in turns:
            role = turn.get("role") if isinstance(turn, Mapping) else getattr(turn, "role", None)
            content = turn.get("content") if isinstance(turn, Mapping) else getattr(turn, "content", None)
            if role in ("system", "developer") and system is None:
                system = content
            elif role == "user":
                first = content
                break
    prompt = request.get("prompt")  # /v1/completions: the prompt's start stands for both
    if first is None and isinstance(prompt, str):
        first = prompt[:LEADING_CHARS]
    if system is None and first is None:
        return None
    return [_text(system), _text(first)]


def conversation_key(request: Mapping, messages: object = None) -> str | None:
    for meta in _metadata(request):
        session = meta.get("session_id")
        if session and not meta.get(GENERATED):
            return f"session:{session}"
    cache_key = request.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key:
        return f"cache-key:{cache_key}"
    leading = leading_part(request, messages)
    if leading is None:
        return None
    text = json.dumps(leading, sort_keys=True, ensure_ascii=False)[:LEADING_CHARS]
    return "leading:" + hashlib.sha256(text.encode()).hexdigest()


def rendezvous(key: str, names: list[str]) -> str:
    """The name with the highest hash of (key, name): stable for a key while that name is among `names`."""
    return max(names, key=lambda name: hashlib.sha256(f"{key}\0{name}".encode()).digest())


def choose(deployments: list, request: Mapping | None, messages: object = None) -> list:
    """The deployments the router may pick from for this attempt (see the module docstring)."""
    named = [d for d in deployments if isinstance(d, Mapping) and replica_of(d)]
    if len(named) != len(deployments) or len(named) < 2:
        return deployments
    request = request or {}
    failed = failed_attempts(request)
    live = [d for d in named if deployment_id(d) not in failed] or named
    key = conversation_key(request, messages)
    if key is None or len(live) == 1:
        return live
    chosen = rendezvous(key, [replica_of(d) for d in live])
    return [d for d in live if replica_of(d) == chosen]


class ReplicaRouting(CustomLogger):
    async def async_filter_deployments(self, model, healthy_deployments, messages, request_kwargs=None,
                                       parent_otel_span=None):
        try:
            return choose(healthy_deployments, request_kwargs, messages)
        except Exception:  # noqa: BLE001 - never break a request: the router's own choice stands
            return healthy_deployments


routing_instance = ReplicaRouting()

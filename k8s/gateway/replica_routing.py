# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""LiteLLM router callback: which replica of a model serves a request (models.yml `replicas:`, docs/replicas.md).

Referenced from the generated config.yaml when some model has replicas (`replica_routing.routing_instance` in
`litellm_settings.callbacks`). The router calls ``async_filter_deployments`` for every attempt of every request,
after it has dropped the deployments in cooldown, before its routing strategy picks one:

1. only deployments of a replicated model take part (their ``model_info.gateway_replica`` names the replica);
2. a replica this request already failed on (``metadata.previous_models``, which the router fills before each
   retry) is left out, so a retry goes to another replica even when the failure put nothing in cooldown
   (LiteLLM puts no APIConnectionError in cooldown: BerriAI/litellm#27362);
3. the conversation's key (``conversation_key``), first found:
   - the session id LiteLLM's proxy puts in ``metadata.session_id`` (1.108.7: from ``x-litellm-session-id``,
     any ``x-<vendor>-session-id`` header: Claude Code 2.1 sends ``X-Claude-Code-Session-Id``; Codex's
     ``session-id``; opencode's ``X-Session-Id``; Anthropic ``metadata.user_id`` ``..._session_<id>``),
     never one LiteLLM generated itself;
   - the body's ``prompt_cache_key`` (Codex and opencode send their session id there on the Responses API);
   - else a hash of the conversation's leading part: system prompt / instructions and the first user turn, the
     part every later turn resends unchanged;
4. the placement, in the stack's Redis (``Placement``: one Lua script, atomic across every worker of every
   gateway replica): a conversation's first request goes to the live replica with the fewest requests in flight
   and claims it (a key with a TTL, refreshed on every turn); later turns follow the claim while that replica is
   live and not overloaded (fewer than 2 x the least-loaded live replica's count + OVERLOAD_MARGIN in flight),
   else the next live replica in the conversation's rendezvous order that is not overloaded, which the claim
   moves to (it now holds the conversation's newest prefix). In flight: per replica a sorted set of the requests
   the gateway sent there (member: LiteLLM's call id, score: when it stops counting, now + the request timeout);
   a request leaves it when LiteLLM logs its success or failure, or at that deadline (a worker that died
   mid-request leaves no count behind for longer).
   A copy of a `replicas: {min, max}` model that only the load starts takes part only while the on-demand
   controller says it serves (scaled_copies.py): a stopped, starting or draining copy is left out, a new one is in
   within a second of serving;
5. without Redis (a stack without one, or Redis down, slow or refusing: then not asked again for BACKOFF
   seconds in this process), the stateless choice of before: the live replica with the highest
   sha256(key, replica name) (rendezvous hashing), the same in every worker; never an error for the request.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import Mapping
from typing import Any

import litellm
from litellm.integrations.custom_logger import CustomLogger

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads this file by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import stack_redis  # noqa: E402
from scaled_copies import Serving  # noqa: E402

REPLICA = "gateway_replica"  # model_info key of a replicated model's deployments (the backend's name)
# model_info key: "hash" keeps a model group on the stateless rendezvous hash (the benchmark's baseline arm)
PLACEMENT = "gateway_placement"
GENERATED = "litellm_session_id_generated"  # litellm.constants.SESSION_ID_GENERATED_METADATA_KEY (1.108.7)
LEADING_CHARS = 8192  # of the leading part's JSON: enough to tell conversations apart, cheap to hash
CLAIM_TTL = 3600  # seconds a conversation's claim outlives its last turn (refreshed on every turn)
OVERLOAD_MARGIN = 8  # a claimed replica is overloaded at 2 x the least-loaded live replica's count + this
REDIS_TIMEOUT = 0.5  # seconds for connecting to Redis and for its reply; past it the request routes by hash
BACKOFF = 5.0  # seconds this process leaves Redis alone after it failed (a dead Redis costs no request a timeout)
DEFAULT_HOLD = 600.0  # seconds a request counts as in flight at most when LiteLLM has no request_timeout
KEY_PREFIX = "gateway:replicas:"


def replica_of(deployment: Mapping) -> str | None:
    info = deployment.get("model_info")
    name = info.get(REPLICA) if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else None


def replica_names(deployments: list) -> list[str]:
    """The replica names of `deployments` (each of candidates()' has one), in their order."""
    return [name for d in deployments if (name := replica_of(d)) is not None]


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


def _score(key: str, name: str) -> bytes:
    return hashlib.sha256(f"{key}\0{name}".encode()).digest()


def rendezvous(key: str, names: list[str]) -> str:
    """The name with the highest hash of (key, name): stable for a key while that name is among `names`."""
    return max(names, key=lambda name: _score(key, name))


def preference(key: str, names: list[str]) -> list[str]:
    """`names` in the key's rendezvous order: the first is rendezvous(key, names), then its second choice, ..."""
    return sorted(names, key=lambda name: _score(key, name), reverse=True)


def candidates(deployments: list, request: Mapping) -> tuple[list, list] | None:
    """(the replicas the router offers, the live ones among them: not failed for this request), or None when
    this is not a choice among a replicated model's replicas."""
    named = [d for d in deployments if isinstance(d, Mapping) and replica_of(d)]
    if not named or len(named) != len(deployments):
        return None  # (one replica offered, the others in cooldown: still placed, so its count and claim hold)
    failed = failed_attempts(request)
    return named, [d for d in named if deployment_id(d) not in failed] or named


def choose(deployments: list, request: Mapping | None, messages: object = None) -> list:
    """The stateless choice (no Redis): the live replica first in the conversation's rendezvous order."""
    request = request or {}
    offered = candidates(deployments, request)
    if offered is None:
        return deployments
    _, live = offered
    key = conversation_key(request, messages)
    if key is None or len(live) == 1:
        return live
    chosen = rendezvous(key, replica_names(live))
    return [d for d in live if replica_of(d) == chosen]


# One round trip, atomic across every worker and gateway replica. KEYS[1]: the conversation's claim ("" for a
# request that has none), KEYS[2..n+1]: each replica's in-flight set, in the conversation's rendezvous order.
# ARGV: member ("" counts nothing), seconds it counts at most, the claim's TTL, the overload margin, then n live
# flags ("1"/"0") and n replica names. Returns the chosen replica's name.
PLACE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local member, hold, ttl, margin = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = #KEYS - 1
local loads, least = {}, nil
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[i + 1], '-inf', now)
  if member ~= '' then redis.call('ZREM', KEYS[i + 1], member) end
  loads[i] = redis.call('ZCARD', KEYS[i + 1])
  if ARGV[4 + i] == '1' and (least == nil or loads[i] < least) then least = loads[i] end
end
local function usable(i) return ARGV[4 + i] == '1' and loads[i] < 2 * least + margin end
local chosen = nil
local claimed = false
if KEYS[1] ~= '' then claimed = redis.call('GET', KEYS[1]) end
if claimed then
  for i = 1, n do
    if ARGV[4 + n + i] == claimed and usable(i) then chosen = i end
  end
  for i = 1, n do
    if chosen == nil and usable(i) then chosen = i end
  end
else
  for i = 1, n do
    if chosen == nil and ARGV[4 + i] == '1' and loads[i] == least then chosen = i end
  end
end
local name = ARGV[4 + n + chosen]
if KEYS[1] ~= '' then redis.call('SET', KEYS[1], name, 'EX', ttl) end
if member ~= '' then
  redis.call('ZADD', KEYS[chosen + 1], now + hold, member)
  redis.call('EXPIRE', KEYS[chosen + 1], math.ceil(hold) + 60)
end
return name
"""


def inflight_key(replica: str) -> str:
    return f"{KEY_PREFIX}inflight:{replica}"


def claim_key(model: str, key: str) -> str:
    return f"{KEY_PREFIX}claim:{model}:{hashlib.sha256(key.encode()).hexdigest()[:32]}"


def request_id(request: Mapping) -> str:
    """What the request is counted under in flight: LiteLLM's call id (the same in its success/failure events)."""
    call_id = request.get("litellm_call_id")
    return str(call_id) if call_id else ""


def hold_seconds() -> float:
    """How long a request counts as in flight at most: the gateway's request timeout."""
    try:
        return float(getattr(litellm, "request_timeout", None) or DEFAULT_HOLD)
    except (TypeError, ValueError):
        return DEFAULT_HOLD


class Placement:
    """The shared placement in the stack's Redis. `connect()` gives a Redis client or None (no Redis)."""

    def __init__(self, connect=lambda: stack_redis.client(REDIS_TIMEOUT)) -> None:
        self._connect = connect
        self._client: Any = None
        self._script: Any = None
        self._down_until = 0.0
        # every replica of each model this process has seen offered: a request's count is dropped from all of
        # them (the router leaves a replica in cooldown out of its offer, and a request that failed there may have
        # been retried without LiteLLM logging that attempt's failure)
        self.known: dict[str, set[str]] = {}

    def replicas(self, model: str, offered: list[str]) -> list[str]:
        """`offered` and the other replicas of `model` this process has seen offered before."""
        known = self.known.setdefault(model, set())
        known.update(offered)
        return sorted(known)

    def _redis(self) -> Any:
        if time.monotonic() < self._down_until:
            return None
        if self._client is None:
            self._client = self._connect()
            if self._client is not None:
                self._script = self._client.register_script(PLACE_SCRIPT)
        return self._client

    def _failed(self, what: str, exc: Exception) -> None:
        if time.monotonic() >= self._down_until:
            print(
                f"replica_routing: Redis {what} failed ({type(exc).__name__}: {exc}); routing by hash for "
                f"{BACKOFF:g} s",
                file=sys.stderr,
                flush=True,
            )
        self._down_until = time.monotonic() + BACKOFF

    async def place(
        self, model: str, key: str | None, order: list[str], live: set[str], member: str, hold: float
    ) -> str | None:
        """The replica for this request (see the module docstring), or None without a working Redis."""
        client = self._redis()
        if client is None:
            return None
        keys = [claim_key(model, key) if key else ""] + [inflight_key(name) for name in order]
        args = [member, f"{hold:.3f}", CLAIM_TTL, OVERLOAD_MARGIN, *("1" if n in live else "0" for n in order), *order]
        try:
            name = await self._script(keys=keys, args=args, client=client)
        except Exception as exc:  # noqa: BLE001 - Redis down, slow or refusing: the hash decides
            self._failed("placement", exc)
            return None
        return name.decode() if isinstance(name, bytes) else name

    async def release(self, model: str, replica: str, member: str) -> None:
        """The request no longer counts in flight on `replica` (nor on any other replica of `model`)."""
        client = self._redis()
        if client is None or not member:
            return
        try:
            async with client.pipeline(transaction=False) as pipe:
                for name in self.replicas(model, [replica]):
                    pipe.zrem(inflight_key(name), member)
                await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - its deadline ends it anyway
            self._failed("release", exc)

    async def loads(self, replicas: list[str]) -> dict[str, int]:
        """Requests in flight per replica (expired ones not counted); {} without a working Redis."""
        client = self._redis()
        if client is None:
            return {}
        now = time.time()
        try:
            return {name: int(await client.zcount(inflight_key(name), now, "+inf")) for name in replicas}
        except Exception as exc:  # noqa: BLE001
            self._failed("read", exc)
            return {}


async def route(
    placement: Placement,
    deployments: list,
    request: Mapping | None,
    messages: object = None,
    serving: Serving | None = None,
) -> list:
    """The deployments the router may pick from for this attempt (see the module docstring)."""
    request = request or {}
    offered = candidates(deployments, request)
    if offered is None:
        return deployments
    named, live = offered
    if serving is not None and (out := await serving.left_out(named)):  # a copy the load started: only once it serves
        if kept := [d for d in deployments if replica_of(d) not in out]:
            deployments = kept
            named, live = candidates(deployments, request) or (named, live)
    if any((d.get("model_info") or {}).get(PLACEMENT) == "hash" for d in named):
        return choose(deployments, request, messages)
    key = conversation_key(request, messages)
    member = request_id(request)
    model = str(named[0].get("model_name") or "")
    names = placement.replicas(model, replica_names(named))  # with those in cooldown: not live
    order = preference(key or member or uuid.uuid4().hex, names)  # no conversation: ties go anywhere
    chosen = await placement.place(model, key, order, set(replica_names(live)), member, hold_seconds())
    if chosen is None:
        return choose(deployments, request, messages)
    return [d for d in live if replica_of(d) == chosen] or live


def _finished(kwargs: Mapping) -> tuple[str, str, str] | None:
    """(model, replica, call id) of a finished attempt on a replica, from LiteLLM's success/failure event."""
    params = kwargs.get("litellm_params")
    replica = replica_of(params) if isinstance(params, Mapping) else None
    member = kwargs.get("litellm_call_id")
    metadata = params.get("metadata") if isinstance(params, Mapping) else None
    model = (metadata or {}).get("model_group") if isinstance(metadata, Mapping) else None
    return (str(model or ""), replica, str(member)) if replica and member else None


class ReplicaRouting(CustomLogger):
    def __init__(self, placement: Placement | None = None, serving: Serving | None = None) -> None:
        super().__init__()
        self.placement = placement or Placement()
        self.serving = serving or Serving()  # replicas: {min, max}: which copies serve (scaled_copies.py)

    async def async_filter_deployments(
        self, model, healthy_deployments, messages, request_kwargs=None, parent_otel_span=None
    ):
        try:
            return await route(self.placement, healthy_deployments, request_kwargs, messages, self.serving)
        except Exception:  # noqa: BLE001 - never break a request: the router's own choice stands
            return healthy_deployments

    async def _release(self, kwargs: Mapping) -> None:
        try:
            if (done := _finished(kwargs)) is not None:
                await self.placement.release(*done)
        except Exception:  # noqa: BLE001 - counting must never break an answer
            pass

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        await self._release(kwargs)

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
        await self._release(kwargs)


routing_instance = ReplicaRouting()

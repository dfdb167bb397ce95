# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""Who is asking: the master key (the admin) or a person of models.yml `people:`, and what that person may do.

Two files beside this module (the gateway's config folder), read again whenever they change (looked at no more than
once a second per worker), so adding a person, changing limits, rotating or revoking a key needs no restart:

- people.json (generated from models.yml, no secret): {name: {models, rpm, tpm, parallel, tokens_per_day,
  tokens_per_month, stored_responses}}; `models` null = every model;
- people-keys.json (written by `make key` / the runtime from the keys file): {sha256 of a key: name}. The gateway
  never holds a person's key, only its hash; a key whose hash is not there is unknown (401).

A person's request is handed to LiteLLM as a `UserAPIKeyAuth` whose `api_key` is ``person:<name>`` (never the key or
its hash: LiteLLM shows `api_key` in its 429 bodies and in the `hashed_api_key` metric label) with the person's
name as `key_alias` and `user_id`, the models and rpm/tpm/parallel limits; LiteLLM's own limiter (v3) counts those,
in the stack's Redis when there is one (every worker and replica share one count). Tokens per day/month (every
person's, against their budgets when they have some) are counted here, in the same Redis (LiteLLM's budgets are
spend in dollars, and every self-hosted model costs 0).
Standard library only, plus `redis` (a LiteLLM dependency) for the budgets.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
import threading
import time
from typing import Any, NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads this file by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import stack_redis  # noqa: E402

PEOPLE_FILE = "people.json"
KEYS_FILE = "people-keys.json"
RELOAD_EVERY = 1.0  # seconds between looks at the files' modification times
API_KEY_PREFIX = "person:"  # LiteLLM's api_key for a person: the name, nothing derived from the secret


class Person(NamedTuple):  # not a dataclass: LiteLLM loads the hooks without registering them in sys.modules
    name: str
    models: frozenset[str] | None  # None: every model
    rpm: int | None
    tpm: int | None
    parallel: int | None
    tokens_per_day: int | None
    tokens_per_month: int | None
    stored_responses: int | None = None  # bytes of stored responses (response_store.py) this person may keep


def key_hash(key: str) -> str:
    """sha256 of the key, hex. Keys are 256-bit random (secrets.token_urlsafe(32)): a fast hash is enough."""
    return hashlib.sha256(key.encode()).hexdigest()


def bare_key(api_key: str | None) -> str:
    return (api_key or "").removeprefix("Bearer ").strip()


def _person(name: str, spec: dict) -> Person:
    models = spec.get("models")
    return Person(
        name,
        None if models is None else frozenset(models),
        spec.get("rpm"),
        spec.get("tpm"),
        spec.get("parallel"),
        spec.get("tokens_per_day"),
        spec.get("tokens_per_month"),
        spec.get("stored_responses"),
    )


class Directory:
    """The people and their key hashes, from the two files in `folder`, reloaded when either changes."""

    def __init__(self, folder: str = HERE) -> None:
        self.folder = folder
        self.keys_path = os.environ.get("GATEWAY_PEOPLE_KEYS") or os.path.join(folder, KEYS_FILE)
        self.people_path = os.path.join(folder, PEOPLE_FILE)
        self._lock = threading.Lock()
        self._seen: tuple = ()
        self._checked = 0.0
        self.people: dict[str, Person] = {}
        self.hashes: dict[str, str] = {}

    def _stamp(self) -> tuple:
        stamps: list[tuple[int, int, int] | None] = []
        for path in (self.people_path, self.keys_path):
            try:
                st = os.stat(path)
                stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def refresh(self, force: bool = False, now_please: bool = False) -> None:
        """Read the files again when they changed, looking at most every RELOAD_EVERY seconds (now_please: now; force:
        read them whatever their stamps)."""
        now = time.monotonic()
        if not (force or now_please) and now - self._checked < RELOAD_EVERY:
            return
        with self._lock:
            self._checked = now
            stamp = self._stamp()
            if stamp == self._seen and not force:
                return
            try:
                people = {n: _person(n, s or {}) for n, s in (_read_json(self.people_path).get("people") or {}).items()}
                hashes = {h: n for h, n in _read_json(self.keys_path).items() if n in people}
            except (OSError, ValueError, TypeError, AttributeError):
                return  # half-written or unreadable: keep what was read last, look again next time
            self.people, self.hashes, self._seen = people, hashes, stamp

    def who(self, api_key: str | None) -> Person | None:
        """The person this key belongs to, or None (unknown, empty, or no people)."""
        self.refresh()
        key = bare_key(api_key)
        if not key:
            return None
        digest = key_hash(key)
        if digest not in self.hashes:  # a key `make key` made a moment ago: its file is looked at now (two stats)
            self.refresh(now_please=True)
        name = self.hashes.get(digest)
        return self.people.get(name) if name else None


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object")
    return data


def model_problem(person: Person, model: object) -> str | None:
    """Why this person may not use this model (the 403's text), or None."""
    if person.models is None or not isinstance(model, str) or model in person.models:
        return None
    allowed = ", ".join(sorted(person.models)) or "none"
    return f"model {model!r} is not one of the models your key may use ({allowed}); ask the gateway's admin"


# --- token budgets (per UTC day / month), counted in the stack's Redis ------------------------------------------


def periods(now: dt.datetime) -> dict[str, tuple[str, int]]:
    """{"day"|"month": (its key suffix, seconds until it ends)} for this UTC instant."""
    now = now.astimezone(dt.UTC)
    tomorrow = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    month_end = (now.replace(day=28) + dt.timedelta(days=4)).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return {
        "day": (now.strftime("%Y-%m-%d"), int((tomorrow - now).total_seconds()) + 1),
        "month": (now.strftime("%Y-%m"), int((month_end - now).total_seconds()) + 1),
    }


def budget_key(name: str, period: str, suffix: str) -> str:
    return f"gateway:tokens:{name}:{period}:{suffix}"


def budgets(person: Person) -> dict[str, int]:
    return {p: v for p, v in (("day", person.tokens_per_day), ("month", person.tokens_per_month)) if v is not None}


_redis: Any = None


def redis_client() -> Any:
    """The stack's Redis (REDIS_HOST / REDIS_PORT / REDIS_PASSWORD, as LiteLLM's coordination Redis), or None."""
    global _redis
    if _redis is None:
        _redis = stack_redis.client(timeout=2)
    return _redis


async def over_budget(person: Person, now: dt.datetime | None = None) -> tuple[str, int] | None:
    """(what, seconds until it resets) when the person used up a token budget; None otherwise or without Redis."""
    limits = budgets(person)
    client = redis_client() if limits else None
    if client is None:
        return None
    spans = periods(now or dt.datetime.now(dt.UTC))
    names = list(limits)
    used = await client.mget([budget_key(person.name, p, spans[p][0]) for p in names])
    for period, value in zip(names, used):
        if value is not None and int(value) >= limits[period]:
            return f"the token budget of {limits[period]} per {period} (UTC) is used up", spans[period][1]
    return None


async def add_tokens(name: str, tokens: int, now: dt.datetime | None = None) -> None:
    """Count `tokens` (prompt + output) against this person's day and month."""
    client = redis_client()
    if client is None or tokens <= 0:
        return
    spans = periods(now or dt.datetime.now(dt.UTC))
    async with client.pipeline(transaction=False) as pipe:
        for period, (suffix, ttl) in spans.items():
            key = budget_key(name, period, suffix)
            pipe.incrby(key, tokens)
            pipe.expire(key, ttl + 86400)
        await pipe.execute()


async def used_tokens(name: str, now: dt.datetime | None = None) -> dict[str, int]:
    """{"day": n, "month": n} this person used (0 without Redis)."""
    client = redis_client()
    if client is None:
        return {"day": 0, "month": 0}
    spans = periods(now or dt.datetime.now(dt.UTC))
    values = await client.mget([budget_key(name, p, s) for p, (s, _) in spans.items()])
    return {p: int(v or 0) for p, v in zip(spans, values)}


DIRECTORY = Directory()


def _usage_counter() -> Any:
    """LiteLLM callback (config: litellm_settings.callbacks "people.usage_counter") that adds each answered request's
    tokens to its person's day and month in the stack's Redis (when there is one: their budgets, their page, `make
    usage`) and, with gateway.metrics: light, to the per-person token counters LiteLLM's prometheus callback would
    have counted (request_counters.py)."""
    import request_counters
    from litellm.integrations.custom_logger import CustomLogger

    class UsageCounter(CustomLogger):
        async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
            try:
                payload = kwargs.get("standard_logging_object") or {}
                name = (payload.get("metadata") or {}).get("user_api_key_alias")
                DIRECTORY.refresh()  # LiteLLM loads this module by path: its own copy, not the guard's
                person = DIRECTORY.people.get(name) if isinstance(name, str) else None
                if person is None:
                    return
                if request_counters.enabled():
                    request_counters.count_tokens(
                        person.name,
                        str(payload.get("model_group") or ""),
                        int(payload.get("prompt_tokens") or 0),
                        int(payload.get("completion_tokens") or 0),
                    )
                await add_tokens(person.name, int(payload.get("total_tokens") or 0))  # nothing without a Redis
            except Exception as exc:  # noqa: BLE001  counting must never break an answer already given
                print(f"people: could not count tokens: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    return UsageCounter()


def __getattr__(name: str) -> Any:
    """`usage_counter` is made when LiteLLM first asks for it (importing LiteLLM is slow; `make key` imports this
    module for key_hash alone)."""
    if name == "usage_counter":
        globals()["usage_counter"] = counter = _usage_counter()
        return counter
    raise AttributeError(name)

"""Copies that follow the load (models.yml `replicas: {min, max}`, docs/replicas.md): when a model's copies queue
requests, the controller starts one more copy; a copy above min that has been idle drains and stops (the policy's
idle unload: policy.py). Scaler decides with no I/O (unit tests drive it with a fake clock); watch() is the loop the
server runs: it reads each running copy's vLLM `vllm:num_requests_waiting` from its /metrics (no key: vLLM serves
/metrics unauthenticated) once a second.

Rules (per model):
- running copies: the always-on ones (1..min) and the managed ones the policy holds `loaded`;
- the signal: the requests waiting in the running copies' vLLM (summed) plus those waiting in this controller for
  a copy that loads (min 0's first copy), per running copy;
- above `waiting` for `up_after` s (and no copy of the model loading): the next stopped copy, in order, is loaded
  (policy.want; a copy sharing GPUs with an on-demand group first unloads that group's model);
- a managed copy with no request for `idle` s drains (no new request; those in flight end) and stops: policy.py's idle
  unload, which never touches the always-on copies, so the model never goes below min;
- every decision is kept (the last one per model, with its reason, on /status) and counted (/metrics).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

log = logging.getLogger("on_demand")
WATCH_SECONDS = 1.0  # between two reads of the copies' queues
_WAITING = re.compile(r"^vllm:num_requests_waiting(?:\{[^}]*\})?\s+([0-9.eE+-]+|NaN)\s*$", re.M)


@dataclass(frozen=True)
class CopySpec:
    name: str
    url: str  # backend root, no /v1
    managed: bool  # the controller starts and stops it (a copy above min); else always on


@dataclass(frozen=True)
class ScaleSpec:
    model: str
    min: int
    max: int
    waiting: int
    up_after: float
    idle: float
    copies: tuple[CopySpec, ...]


def parse_scale(model: str, data: dict) -> ScaleSpec:
    """One model of the config's "scaling" (KeyError, TypeError or ValueError on a bad one: config.py says where)."""
    return ScaleSpec(
        model=model,
        min=int(data["min"]),
        max=int(data["max"]),
        waiting=int(data["waiting"]),
        up_after=float(data["up_after"]),
        idle=float(data["idle"]),
        copies=tuple(
            CopySpec(str(c["name"]), str(c["url"]).rstrip("/").removesuffix("/v1"), bool(c["managed"]))
            for c in data["copies"]
        ),
    )


def waiting_in(metrics_text: str) -> float:
    """vllm:num_requests_waiting in a vLLM /metrics answer (summed over its series; 0 when absent)."""
    total = 0.0
    for value in _WAITING.findall(metrics_text):
        if value != "NaN":
            total += float(value)
    return total


@dataclass
class Decision:
    at: float  # wall clock
    action: str  # up | down
    copy: str
    reason: str


@dataclass
class Scaler:
    specs: dict[str, ScaleSpec]
    above_since: dict[str, float] = field(default_factory=dict)
    last: dict[str, Decision] = field(default_factory=dict)
    events: dict[tuple[str, str], int] = field(default_factory=dict)  # (model, up|down) -> count
    owner: dict[str, str] = field(init=False)  # copy -> model

    def __post_init__(self) -> None:
        self.owner = {c.name: s.model for s in self.specs.values() for c in s.copies}

    def step(
        self, spec: ScaleSpec, states: dict[str, str], waiting: float, queued: int, now: float
    ) -> tuple[str, str] | None:
        """(copy to load, reason) when the model needs one more copy now, else None. `states`: each managed copy's
        policy state; `waiting`: vLLM's queue summed over the running copies; `queued`: requests waiting here."""
        running = [c for c in spec.copies if not c.managed or states.get(c.name) == "loaded"]
        if any(states.get(c.name) == "loading" for c in spec.copies if c.managed) or not running:
            self.above_since.pop(spec.model, None)  # one step at a time; no copy: min 0's first loads on a request
            return None
        per_copy = (waiting + queued) / len(running)
        if per_copy <= spec.waiting:
            self.above_since.pop(spec.model, None)
            return None
        since = self.above_since.setdefault(spec.model, now)
        if now - since < spec.up_after:
            return None
        stopped = [c for c in spec.copies if c.managed and states.get(c.name) in ("stopped", "failed", "asleep")]
        if not stopped:
            return None  # at max
        self.above_since.pop(spec.model, None)
        reason = (
            f"{waiting + queued:g} request(s) waiting on {len(running)} copy(ies): {per_copy:.1f} per copy > "
            f"{spec.waiting} for {now - since:.0f}s"
        )
        return stopped[0].name, reason

    def record(self, copy: str, action: str, reason: str, wall: float | None = None) -> None:
        """A scaling decision on `copy` (up: its load; down: its unload, as the policy gave it)."""
        model = self.owner.get(copy)
        if model is None:
            return
        self.last[model] = Decision(time.time() if wall is None else wall, action, copy, reason)
        self.events[(model, action)] = self.events.get((model, action), 0) + 1
        log.info("%s: scale %s: %s (%s)", model, action, copy, reason)

    def status(self, states: dict[str, str]) -> dict[str, dict]:
        """Per model: the range, each copy's state (running / starting / draining / stopped / failed), the last
        decision with its reason, and the decisions counted."""
        names = {"loaded": "running", "loading": "starting", "draining": "draining", "asleep": "stopped"}
        out = {}
        for model, spec in self.specs.items():
            last = self.last.get(model)
            out[model] = {
                "min": spec.min,
                "max": spec.max,
                # started by the load only (gateway_hooks/scaled_copies.py leaves them out while not running)
                "by_load": [c.name for i, c in enumerate(spec.copies, start=1) if c.managed and i > max(spec.min, 1)],
                "copies": {
                    c.name: "running" if not c.managed else names.get(states.get(c.name, ""), states.get(c.name, "?"))
                    for c in spec.copies
                },
                "last": None
                if last is None
                else {"at": round(last.at, 3), "action": last.action, "copy": last.copy, "reason": last.reason},
                "events": {a: self.events.get((model, a), 0) for a in ("up", "down")},
            }
        return out


async def read_waiting(client, urls: Iterable[str]) -> float:
    """vLLM's queue summed over these copies (a copy that does not answer counts 0)."""

    async def one(url: str) -> float:
        try:
            r = await client.get(f"{url}/metrics", timeout=2)
            return waiting_in(r.text) if r.status_code == 200 else 0.0
        except Exception:  # noqa: BLE001 - a copy starting or gone: nothing waits there
            return 0.0

    return sum(await asyncio.gather(*(one(u) for u in urls)))


async def watch(
    scaler: Scaler, client, states: Callable[[], dict[str, str]], queued: Callable[[str], int], want
) -> None:
    """The loop: every WATCH_SECONDS, each model's signal; `want(copy, reason)` loads a copy (the server's)."""
    while True:
        await asyncio.sleep(WATCH_SECONDS)
        for spec in scaler.specs.values():
            try:
                now_states = states()
                urls = [c.url for c in spec.copies if not c.managed or now_states.get(c.name) == "loaded"]
                waiting = await read_waiting(client, urls)
                queue = sum(queued(c.name) for c in spec.copies if c.managed)
                step = scaler.step(spec, states(), waiting, queue, time.monotonic())
                if step is not None:
                    want(*step)
            except Exception:  # a bug here must not stop scaling of the other models (logged)
                log.exception("scaling %s", spec.model)

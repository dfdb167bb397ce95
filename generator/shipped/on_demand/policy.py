"""The on-demand controller's decisions, with no I/O: which request goes through, waits or is refused,
which model loads or unloads, and when. The server (server.py) feeds it events with the time they
happened (`now`, seconds on a monotonic clock) and carries out the actions it returns (actions.py
names them); unit tests drive it with a fake clock.

States of a model: stopped -> loading -> loaded -> draining -> stopped | asleep; a load that fails
leaves it `failed` (with its error) until the next request retries.

Rules:
- a request for a loaded model goes through (in flight +1, last use = now);
- any other request waits in the model's FIFO queue (full: refused, 503 + Retry-After) and asks for a load;
- loading a model first unloads the loaded member of its group (at most one member of a group is
  loaded), once that member's requests in flight have finished (draining; after drain_timeout it is cut);
  requests arriving for a draining model wait for its next load, so a drain always ends;
- a swap (a load, or an unload) is one at a time per "lane": a group, joined with every group that
  shares a GPU index with it;
- waiters older than load_timeout are refused (503 + Retry-After), never left hanging;
- a loaded model with nothing in flight and no use for idle_timeout seconds (> 0) unloads, least
  recently used first;
- a failed load refuses its waiters with the cause (502, naming the model); the next request retries;
- a copy of a `replicas: {min, max}` model that only the load starts (by_load, scaling.py) is loaded by want(), never
  by a request: a request for it while it does not serve is refused at once (503, Retry-After 1: the gateway retries
  another copy); want() takes its group's GPUs only from a member idle for YIELD_AFTER seconds;
- a loaded model whose backend hangs (connected, /health silent: the server's probes) is killed at once, its
  requests in flight cut (they get the dropped connection, the gateway's fallbacks or error), and loaded again as
  soon as a request waits for it;
- backends found running when the controller starts are adopted (loaded, or asleep); a group found with
  more than one loaded member unloads the least recently used ones, one at a time.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

YIELD_AFTER = 30.0  # seconds without a request before an on-demand model gives its GPUs to a copy the load wants


class State(str, Enum):  # noqa: UP042 - a StrEnum's str() is its value, this one's State.X: kept as it was
    STOPPED = "stopped"
    LOADING = "loading"
    LOADED = "loaded"
    DRAINING = "draining"  # no new request; unloads when in_flight reaches 0 (or at drain_timeout)
    ASLEEP = "asleep"  # unload: sleep; its process is up, its weights off the GPU
    FAILED = "failed"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    group: str
    idle_timeout: float  # 0: never for idleness, only when its group needs room
    unload: str = "stop"  # stop | sleep
    gpus: tuple[int, ...] = ()
    by_load: bool = False  # a copy started by its model's queue (scaling.py), never by a request of its own


@dataclass(frozen=True)
class Settings:
    queue: int = 64
    load_timeout: float = 900
    drain_timeout: float = 300


@dataclass
class Waiter:
    id: int
    model: str
    since: float


# --- what the server must do -------------------------------------------------------------------------
@dataclass(frozen=True)
class Admit:
    waiter: Waiter  # go: forward it (it is counted in flight already)


@dataclass(frozen=True)
class Refuse:
    waiter: Waiter
    status: int  # 503 (try again later) or 502 (the backend failed to load)
    message: str
    retry_after: int | None  # seconds, for the Retry-After header


@dataclass(frozen=True)
class Load:
    model: str
    wake: bool  # asleep: wake it up rather than start it


@dataclass(frozen=True)
class Unload:
    model: str
    how: str  # stop | sleep | kill (a hung backend: SIGKILL at once, no drain, no sleep)
    cut: int  # requests still in flight that the unload cuts (drain_timeout passed); 0 normally
    reason: str  # "idle 20s", "group g: x needs room", ...


Action = Admit | Refuse | Load | Unload


@dataclass
class ModelState:
    spec: ModelSpec
    state: State = State.STOPPED
    in_flight: int = 0
    queue: deque[Waiter] = field(default_factory=deque)
    last_used: float | None = None
    last_error: str | None = None
    since: float = 0.0  # when the current state began
    load_seconds: float | None = None  # the last successful load's duration
    unload_seconds: float | None = None
    unloading: bool = False  # draining, and the unload itself is under way (Unload was emitted)
    unload_reason: str = ""
    wanted_since: float | None = None  # scaling.py asked for a load (want()), not yet started
    unload_how: str = ""  # the Unload's `how`: a killed sleep-mode model is stopped, not asleep

    @property
    def holds_room(self) -> bool:
        """Counts as the loaded member of its group (it or its swap occupies the group's memory)."""
        return self.state in (State.LOADING, State.LOADED, State.DRAINING)


class Policy:
    def __init__(self, models: list[ModelSpec], settings: Settings = Settings()):
        self.settings = settings
        self.models = {m.name: ModelState(m) for m in models}
        self.lanes = _lanes(models)
        self._ids = itertools.count(1)
        self._actions: list[Action] = []

    # --- events ----------------------------------------------------------------------------------
    def request(self, name: str, now: float) -> Waiter:
        """A request for `name` arrived; the returned waiter gets an Admit or a Refuse action."""
        m = self.models[name]
        w = Waiter(next(self._ids), name, now)
        if m.state is State.LOADED:
            self._admit(m, w, now)
        elif m.spec.by_load:  # the gateway sent it to a copy that is not serving: it retries another copy at once
            self._emit(
                Refuse(
                    w,
                    503,
                    f"copy {name} is {m.state.value} (started and stopped by its model's load); another copy answers",
                    1,
                )
            )
        elif len(m.queue) >= self.settings.queue:
            self._emit(
                Refuse(
                    w,
                    503,
                    f"model {name} is {m.state.value}: {len(m.queue)} requests already wait for it "
                    f"(queue: {self.settings.queue}); try again later",
                    self._retry_after(m, now),
                )
            )
        else:
            m.queue.append(w)
            self._schedule(now)
        return w

    def release(self, name: str, now: float) -> None:
        """A request that went through finished (its response ended, or the client went away)."""
        m = self.models[name]
        m.in_flight = max(0, m.in_flight - 1)
        if m.state is State.LOADED:
            m.last_used = now
        self._schedule(now)

    def loaded(self, name: str, now: float) -> None:
        m = self.models[name]
        m.load_seconds = now - m.since
        self._set(m, State.LOADED, now)
        m.last_error = None
        while m.queue:
            self._admit(m, m.queue.popleft(), now)
        m.last_used = now
        self._schedule(now)

    def load_failed(self, name: str, error: str, now: float) -> None:
        m = self.models[name]
        self._set(m, State.FAILED, now)
        m.last_error = error
        while m.queue:
            w = m.queue.popleft()  # one that waited load_timeout already (the load's own timeout): 503, as at a tick
            self._emit(
                self._timed_out(m, w, now, error)
                if now - w.since >= self.settings.load_timeout
                else Refuse(w, 502, f"model {name} failed to load: {error}", None)
            )
        self._schedule(now)

    def unloaded(self, name: str, now: float, error: str | None = None) -> None:
        """The unload finished (error: it did not go cleanly; the backend is treated as gone anyway)."""
        m = self.models[name]
        m.unload_seconds = now - m.since if m.unloading else None
        m.unloading = False
        asleep = m.unload_how == "sleep" and error is None
        self._set(m, State.ASLEEP if asleep else State.STOPPED, now)
        if error:
            m.last_error = f"unload: {error}"
        self._schedule(now)

    def adopt(self, name: str, now: float, asleep: bool = False) -> None:
        """The backend was found running (or asleep) when the controller started: take it as it is."""
        m = self.models[name]
        self._set(m, State.ASLEEP if asleep else State.LOADED, now)
        if not asleep:
            m.last_used = now  # its idle time counts from now
        self._schedule(now)

    def lost(self, name: str, error: str, now: float) -> None:
        """A loaded backend went away by itself (crashed, killed): the next request loads it again."""
        m = self.models[name]
        if m.state in (State.LOADED, State.DRAINING) and not m.unloading:
            self._set(m, State.FAILED, now)
            m.last_error = error
            self._schedule(now)

    def hung(self, name: str, why: str, now: float) -> None:
        """A loaded backend hangs (connected, nothing answers): killed now, whatever is in flight (a drain would wait
        on requests that never end); requests that wait for it, or come later, load it again."""
        m = self.models[name]
        if m.state not in (State.LOADED, State.DRAINING) or m.unloading:
            return
        self._set(m, State.DRAINING, now)
        m.unloading, m.unload_reason, m.unload_how = True, f"hung: {why}", "kill"
        m.last_error = f"hung: {why}"
        self._emit(Unload(name, "kill", m.in_flight, m.unload_reason))

    def tick(self, now: float) -> None:
        """Timeouts: waiters past load_timeout, drains past drain_timeout, idle models."""
        for m in self.models.values():
            while m.queue and now - m.queue[0].since >= self.settings.load_timeout:
                self._emit(self._timed_out(m, m.queue.popleft(), now))
        self._schedule(now)

    def want(self, name: str, now: float) -> bool:
        """Load `name` without a request (scaling.py: its model's queue grew); False when it is not stopped, or when
        the member of its group that holds the GPUs is in use (a copy takes the GPUs of an idle on-demand model only:
        nothing in flight or queued and no request for YIELD_AFTER seconds)."""
        m = self.models[name]
        if m.state not in (State.STOPPED, State.FAILED, State.ASLEEP) or m.wanted_since is not None:
            return False
        holders = [o for o in self.models.values() if o.spec.group == m.spec.group and o is not m and o.holds_room]
        if any(
            o.in_flight or o.queue or o.state is State.LOADING or now - (o.last_used or o.since) < YIELD_AFTER
            for o in holders
        ):
            return False
        m.wanted_since = now
        self._schedule(now)
        return True

    def actions(self) -> list[Action]:
        """What to do now, in order; each action is returned once."""
        out, self._actions = self._actions, []
        return out

    # --- views -----------------------------------------------------------------------------------
    def status(self, now: float, wall_offset: float = 0.0) -> dict[str, dict]:
        """Per model; last_used is on the wall clock when wall_offset = time.time() - the policy clock."""
        return {
            n: {
                "state": m.state.value,
                "group": m.spec.group,
                "in_flight": m.in_flight,
                "queued": len(m.queue),
                "last_used": None if m.last_used is None else round(m.last_used + wall_offset, 3),
                "idle_seconds": None
                if m.last_used is None or m.state is not State.LOADED
                else round(now - m.last_used, 1),
                "state_seconds": round(now - m.since, 1),
                "last_error": m.last_error,
                "load_seconds": _round(m.load_seconds),
                "unload_seconds": _round(m.unload_seconds),
            }
            for n, m in self.models.items()
        }

    # --- internals -------------------------------------------------------------------------------
    def _emit(self, action: Action) -> None:
        self._actions.append(action)

    def _set(self, m: ModelState, state: State, now: float) -> None:
        m.state = state
        m.since = now

    def _admit(self, m: ModelState, w: Waiter, now: float) -> None:
        m.in_flight += 1
        m.last_used = now
        self._emit(Admit(w))

    def _timed_out(self, m: ModelState, w: Waiter, now: float, cause: str | None = None) -> Refuse:
        why = f"its load failed: {cause}" if cause else f"it is {m.state.value}"
        return Refuse(
            w,
            503,
            f"model {m.spec.name} did not become ready within the load timeout "
            f"({self.settings.load_timeout:g}s; {why}); try again later",
            self._retry_after(m, now),
        )

    def _retry_after(self, m: ModelState, now: float) -> int:
        """About when the model could be ready: the rest of its load, else its last load time, else 30 s."""
        expected = m.load_seconds or 30.0
        if m.state is State.LOADING:
            expected = max(1.0, expected - (now - m.since))
        return max(1, math.ceil(expected))

    def _busy(self, lane: frozenset[str]) -> bool:
        return any(self.models[n].state is State.LOADING or self.models[n].unloading for n in lane)

    def _start_unload(self, m: ModelState, now: float, reason: str) -> None:
        if m.state is not State.DRAINING:
            self._set(m, State.DRAINING, now)
            m.unload_reason = reason
        cut = m.in_flight
        if cut == 0 or now - m.since >= self.settings.drain_timeout:
            m.unloading, m.unload_how = True, m.spec.unload
            m.since = now  # the unload's own duration is measured from here
            self._emit(Unload(m.spec.name, m.spec.unload, cut, m.unload_reason))

    def _schedule(self, now: float) -> None:
        """Start what may start: per lane, one swap at a time."""
        for lane in self.lanes:
            if self._busy(lane):
                continue
            # a drain under way in this lane: finish it (or cut it) before anything else
            draining = [self.models[n] for n in sorted(lane) if self.models[n].state is State.DRAINING]
            if draining:
                self._start_unload(draining[0], now, draining[0].unload_reason)
                continue
            crowded = self._crowded(lane)
            if crowded is not None:
                self._start_unload(crowded, now, f"group {crowded.spec.group}: more than one member loaded")
                continue
            wanted = sorted(
                (
                    self.models[n]
                    for n in lane
                    if (self.models[n].queue or self.models[n].wanted_since is not None)
                    and not self.models[n].holds_room
                ),
                key=lambda m: m.queue[0].since if m.queue else (m.wanted_since or 0.0),
            )
            if wanted:
                target = wanted[0]
                holders = sorted(
                    (
                        o
                        for o in self.models.values()
                        if o.spec.group == target.spec.group and o is not target and o.holds_room
                    ),
                    key=lambda o: o.last_used or 0.0,
                )
                if holders:  # least recently used first (a group holds one, but be safe)
                    self._start_unload(holders[0], now, f"group {target.spec.group}: {target.spec.name} needs it")
                else:
                    wake = target.state is State.ASLEEP
                    target.wanted_since = None
                    self._set(target, State.LOADING, now)
                    self._emit(Load(target.spec.name, wake))
                continue
            idle = sorted(
                (self.models[n] for n in lane if self._idle(self.models[n], now)), key=lambda m: m.last_used or 0.0
            )
            if idle:
                self._start_unload(idle[0], now, f"idle {idle[0].spec.idle_timeout:g}s")

    def _crowded(self, lane: frozenset[str]) -> ModelState | None:
        """The least recently used loaded member of a group that has more than one (adopted at start)."""
        groups: dict[str, list[ModelState]] = {}
        for n in sorted(lane):
            if self.models[n].state is State.LOADED:
                groups.setdefault(self.models[n].spec.group, []).append(self.models[n])
        extra = [
            m
            for members in groups.values()
            if len(members) > 1
            for m in sorted(members, key=lambda m: m.last_used or 0.0)[:-1]
        ]
        return extra[0] if extra else None

    def _idle(self, m: ModelState, now: float) -> bool:
        return (
            m.state is State.LOADED
            and m.in_flight == 0
            and not m.queue
            and m.spec.idle_timeout > 0
            and m.last_used is not None
            and now - m.last_used >= m.spec.idle_timeout
        )


def _lanes(models: list[ModelSpec]) -> list[frozenset[str]]:
    """Models whose swaps must not overlap: a group, joined with every group sharing a GPU index."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    by_gpu: dict[int, str] = {}
    for m in models:
        find("g:" + m.group)
        for gpu in m.gpus:
            if gpu in by_gpu:
                union("g:" + m.group, "g:" + by_gpu[gpu])
            by_gpu[gpu] = m.group
    lanes: dict[str, set[str]] = {}
    for m in models:
        lanes.setdefault(find("g:" + m.group), set()).add(m.name)
    return [frozenset(v) for _, v in sorted(lanes.items())]


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)

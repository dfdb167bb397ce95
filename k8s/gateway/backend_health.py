# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""Hung backends (issue 58, docs/replicas.md, "A hung backend"): found by the gateway's own probes, shared by every
worker through the stack's Redis, kept out of routing, and what waits on them cut off so it goes elsewhere.

A GPU backend that hangs (an NCCL or CUDA stall, an engine deadlock, a GPU fallen off the bus) keeps its process and
its port: connections are accepted, nothing answers. LiteLLM would wait `timeout` (600 s) for a whole answer,
`stream_timeout` (120 s) for a stream's first chunk, and only then fail over.

- **Found**: every gateway worker asks each backend's ``/health`` every PROBE_INTERVAL seconds (connect within
  CONNECT_TIMEOUT, answer within PROBE_TIMEOUT, as `make status` does). A backend is *hung* once SILENT_PROBES
  probes in a row connected and got no answer; any answer (or a refused connection: then it is down, which LiteLLM
  handles by itself in milliseconds) ends it. Hung-ness is shared: the worker that finds it writes
  ``gateway:health:hung:<backend>`` (when the silence began, kept alive by every later silent probe, MARK_TTL), the
  worker whose probe gets an answer deletes it, and every worker reads the marks each round: hung for one worker is
  hung for all. Without Redis (or while it fails) each worker goes by its own probes.
- **Kept out**: ``async_filter_deployments`` (a router callback, called for every attempt after LiteLLM's cooldown
  filter) leaves hung backends out. When every backend of the model is hung it raises a 503 naming the model and the
  reason (with Retry-After): the router then tries the model's fallbacks (with the checks fallbacks get), else the
  client gets that 503 (max_tokens_clamp's failure hook, `hung_failure`).
- **Cut off**: every round, each worker shuts down its own TCP connections to a hung backend's address
  (``shutdown(SHUT_RDWR)`` on each socket of the process whose peer is that address). Every request waiting on it
  fails at once as a dropped connection, which LiteLLM treats as the backend's failure: a replicated model's retry
  policy re-sends it to another replica, else its fallbacks take it, else the client gets the 503 above. A stream
  that has sent bytes ends with the API's error event.
- **Back**: the first probe that gets an answer deletes the mark: the backend gets requests again, no restart.

Why hand-written: LiteLLM 1.108.7's own health-check routing (`enable_health_check_routing`) sends every deployment a
real completion from every worker, keeps its verdict in the router's cache (shared only when the router itself has
Redis, which would move every cooldown and usage counter there: docs/replicas.md) and routes to an unhealthy
deployment anyway when all of a group are unhealthy (its safety net), so a lone hung model would still hold
requests; its cooldowns (what the replicas use) follow request failures, and a hung backend fails no request
until a timeout. Nothing in LiteLLM aborts a request in flight: the connection is the one handle every API and
transport (httpx, aiohttp) shares.

Not covered here: on-demand models (their api_base is the controller, shared by every on-demand model; the
controller's /health is the loaded backend's), hosted models (an API somebody else runs).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import litellm
from fastapi import HTTPException
from litellm.integrations.custom_logger import CustomLogger

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads the hooks by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import gateway_backends as gb  # noqa: E402
import stack_redis  # noqa: E402
from gateway_serve import served  # noqa: E402


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name) or default)
    except ValueError:
        return default


PROBE_INTERVAL = _env_float("GATEWAY_HUNG_PROBE_INTERVAL", 1.0)  # seconds between the starts of a worker's rounds
PROBE_TIMEOUT = _env_float("GATEWAY_HUNG_PROBE_TIMEOUT", 3.0)  # seconds a connected /health may take to answer
CONNECT_TIMEOUT = 2.0
SILENT_PROBES = 2  # silent probes in a row that make a backend hung
MARK_TTL = 30  # seconds a hung mark outlives the last silent probe (a gateway gone leaves none behind for long)
RETRY_AFTER = 10  # seconds a client is asked to wait before asking a hung model again
REDIS_TIMEOUT = 0.5
BACKOFF = 5.0  # seconds a worker leaves Redis alone after it failed
KEY_PREFIX = "gateway:health:hung:"
METRIC = "gateway_backend_hung"  # 1 while the backend is hung, per backend (the replica's or the model's name)

ANSWERED, SILENT, DOWN = "answered", "silent", "down"


def targets(rt: Any) -> dict[str, str]:
    """Backend root URL -> its name (the replica's, else the model's), for every backend the gateway probes: not
    hosted, not on demand (a path after the host: the controller's), an adapter's backend once."""
    found: dict[str, str] = {}
    for name in gb.model_names(rt):
        for dep in gb.deployments(rt, name):
            root = gb.backend_root(dep)
            if root is None or gb.hosted(dep) or urlsplit(root).path.strip("/"):
                continue
            if gb.info(dep).get("gateway_adapter_of") and root in found:
                continue
            found.setdefault(root, str(gb.info(dep).get("gateway_replica") or name))
    return found


def reason(since: float, now: float | None = None) -> str:
    """How status says it: `hung since 12:03:10 (connected, /health silent for 9 s)`."""
    silent = max(0, round((now if now is not None else time.time()) - since))
    return f"hung since {time.strftime('%H:%M:%S', time.localtime(since))} (connected, /health silent for {silent} s)"


def address(root: str) -> tuple[str, int]:
    parts = urlsplit(root)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


async def peers(root: str) -> set[tuple[str, int]]:
    """The (ip, port) pairs a connection to `root` has as its peer."""
    host, port = address(root)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return set()
    return {(str(info[4][0]), int(info[4][1])) for info in infos}


def cut(addresses: set[tuple[str, int]]) -> int:
    """Shut down every TCP connection of this process whose peer is one of `addresses`; how many. A shutdown acts on
    the socket, not the descriptor: a duplicate of each descriptor is asked and closed, the owner's stays open and
    reads the end of the stream (its request fails as a dropped connection)."""
    if not addresses:
        return 0
    done = 0
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    for entry in fds:
        try:
            if not os.readlink(f"/proc/self/fd/{entry}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(entry)))
        except (OSError, ValueError):
            continue
        try:
            if sock.type == socket.SOCK_STREAM and sock.family in (socket.AF_INET, socket.AF_INET6):
                if tuple(sock.getpeername()[:2]) in addresses:
                    sock.shutdown(socket.SHUT_RDWR)
                    done += 1
        except OSError:
            pass  # not connected, or already gone
        finally:
            sock.close()
    return done


class Monitor:
    """One worker's view of which backends are hung (root -> when the silence began), kept up by `round()`."""

    def __init__(self, connect=lambda: stack_redis.client(REDIS_TIMEOUT), clock=time.time) -> None:
        self._connect = connect
        self._client: Any = None
        self._down_until = 0.0
        self.clock = clock
        self.hung: dict[str, float] = {}
        self.names: dict[str, str] = {}  # root -> backend name (for the metric and messages)
        self.silent: dict[str, tuple[int, float]] = {}  # this worker's own probes: silent in a row, since when
        self.cuts = 0  # connections cut so far (the tests read it)
        self._http: aiohttp.ClientSession | None = None
        self._task: asyncio.Task | None = None
        self._gauge: Any = None

    def http(self) -> aiohttp.ClientSession:
        """The probes' client (kept-alive connections). aiohttp, not httpx: a probe is 0.22 ms of CPU with it against
        0.73 with httpx (hot, measured here), and an idle gateway does nothing but probe."""
        if self._http is None or self._http.closed:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=PROBE_TIMEOUT)
            self._http = aiohttp.ClientSession(timeout=timeout, trust_env=False)
        return self._http

    async def probe(self, root: str) -> str:
        try:
            async with self.http().get(root + "/health", allow_redirects=False) as answer:
                await answer.read()
            return ANSWERED
        except aiohttp.SocketTimeoutError:  # connected, no answer within PROBE_TIMEOUT (a connect timeout is not)
            return SILENT
        except Exception:  # noqa: BLE001 - refused, unreachable: down, not hung (LiteLLM fails over by itself)
            return DOWN

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    def _redis(self) -> Any:
        if time.monotonic() < self._down_until:
            return None
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _failed(self, exc: Exception) -> None:
        if time.monotonic() >= self._down_until:
            print(f"backend_health: Redis failed ({type(exc).__name__}: {exc}); own probes only for {BACKOFF:g} s",
                  file=sys.stderr, flush=True)  # fmt: skip
        self._down_until = time.monotonic() + BACKOFF

    def judge(self, root: str, outcome: str, started: float) -> float | None:
        """This worker's verdict after one probe: when the silence began if the backend is hung, else None."""
        if outcome != SILENT:
            self.silent.pop(root, None)
            return None
        count, since = self.silent.get(root, (0, started))
        self.silent[root] = (count + 1, since)
        return since if count + 1 >= SILENT_PROBES else None

    async def share(self, verdicts: dict[str, tuple[str, float | None]]) -> dict[str, float] | None:
        """Write this round's verdicts to Redis and read every worker's: root -> since; None without Redis."""
        client = self._redis()
        if client is None:
            return None
        roots = sorted(verdicts)
        try:
            async with client.pipeline(transaction=False) as pipe:
                for root, (outcome, since) in verdicts.items():
                    key = KEY_PREFIX + root
                    if since is not None:
                        pipe.set(key, json.dumps({"since": since}), nx=True, ex=MARK_TTL)
                        pipe.expire(key, MARK_TTL)
                    elif outcome != SILENT:
                        pipe.delete(key)
                pipe.mget([KEY_PREFIX + root for root in roots])
                marks = (await pipe.execute())[-1]
        except Exception as exc:  # noqa: BLE001 - Redis down, slow or refusing: this worker's own probes decide
            self._failed(exc)
            return None
        shared = {}
        for root, mark in zip(roots, marks):
            try:
                if mark is not None:
                    shared[root] = float(json.loads(mark)["since"])
            except (ValueError, KeyError, TypeError):
                continue
        return shared

    async def round(self, found: dict[str, str]) -> None:
        """Probe every backend once, agree with the other workers, cut what waits on a hung one."""
        self.names = dict(found)
        started = self.clock()
        outcomes = await asyncio.gather(*(self.probe(root) for root in found))
        verdicts = {root: (outcome, self.judge(root, outcome, started)) for root, outcome in zip(found, outcomes)}
        shared = await self.share(verdicts)
        if shared is None:
            shared = {root: since for root, (_, since) in verdicts.items() if since is not None}
        self.hung = shared
        for root in self.hung:
            self.cuts += cut(await peers(root))
        self._publish()

    def _publish(self) -> None:
        try:
            if self._gauge is None:
                from prometheus_client import Gauge  # multiprocess mode in the workers: the live workers' max

                self._gauge = Gauge(
                    METRIC, "1 while the gateway finds the backend hung (connected, /health silent)",
                    ["backend"], multiprocess_mode="livemax",
                )  # fmt: skip
            for root, name in self.names.items():
                self._gauge.labels(name).set(1 if root in self.hung else 0)
        except Exception:  # noqa: BLE001 - a metric never breaks the probes
            pass

    async def run(self) -> None:
        try:
            while True:
                begun = time.monotonic()
                try:
                    rt = gb.router()
                    if rt is not None:
                        await self.round(targets(rt))
                except Exception as exc:  # noqa: BLE001 - the loop outlives any one round
                    print(f"backend_health: round failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                await asyncio.sleep(max(0.05, PROBE_INTERVAL - (time.monotonic() - begun)))
        finally:  # cancelled at the worker's shutdown: its connections closed, not left to aiohttp's warning
            await self.close()

    def start(self) -> bool:
        """Run the probes on this worker's event loop (once; only in a gateway worker)."""
        if self._task is not None and not self._task.done():
            return True
        if not served():
            return False
        try:
            self._task = asyncio.get_running_loop().create_task(self.run())
        except RuntimeError:
            return False
        return True

    def since(self, root: str | None) -> float | None:
        return self.hung.get(root) if root else None


MONITOR = Monitor()


class Unavailable(litellm.ServiceUnavailableError):
    """Every backend of a model is hung: LiteLLM's 503 (its router tries the model's fallbacks on it, as on any
    backend failure) with the reason; the client gets `hung_failure`'s."""

    def __init__(self, model: str, why: str) -> None:
        super().__init__(message=unavailable_message(model, why), llm_provider="hosted_vllm", model=model)


def unavailable_message(model: str, why: str) -> str:
    return f"model {model} cannot answer now: {why}; retry after {RETRY_AFTER} s"


def hung_failure(request_data: dict, exc: Exception, monitor: Monitor = MONITOR) -> HTTPException | None:
    """The client's answer when a request failed because its model's backends are hung (no replica and no fallback
    left): a 503 naming the model and the reason, with Retry-After; None for any other failure."""
    model = request_data.get("model") if isinstance(request_data, dict) else None
    if not isinstance(model, str) or not monitor.hung:
        return None
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
        return None  # the client's own error
    rt = gb.router()
    why = why_unavailable(model, gb.deployments(rt, model), monitor) if rt is not None else None
    if why is None:
        return None
    return HTTPException(
        status_code=503, detail=unavailable_message(model, why), headers={"Retry-After": str(RETRY_AFTER)}
    )


def why_unavailable(model: str, deps: list, monitor: Monitor = MONITOR) -> str | None:
    """Why `model` cannot answer now (every backend of it hung), or None."""
    roots = [gb.backend_root(d) for d in deps]
    if not roots or any(monitor.since(r) is None for r in roots):
        return None
    now = monitor.clock()
    parts = [f"{monitor.names.get(r) or model} is {reason(monitor.hung[r], now)}" for r in roots if r]
    return "its backend " + "; ".join(parts) if len(parts) == 1 else "its backends " + "; ".join(parts)


def keep(deployments: list, monitor: Monitor = MONITOR) -> list:
    """The deployments whose backend is not hung."""
    return [d for d in deployments if monitor.since(gb.backend_root(d)) is None]


class BackendHealth(CustomLogger):
    def __init__(self, monitor: Monitor = MONITOR) -> None:
        super().__init__()
        self.monitor = monitor
        monitor.start()

    async def async_filter_deployments(
        self, model, healthy_deployments, messages, request_kwargs=None, parent_otel_span=None
    ):
        self.monitor.start()
        if not self.monitor.hung or not healthy_deployments:
            return healthy_deployments
        kept = keep(healthy_deployments, self.monitor)
        if kept:
            return kept
        why = why_unavailable(str(model), healthy_deployments, self.monitor)
        raise Unavailable(str(model), why or "every backend is hung")


def _the_monitor() -> Monitor:
    """The one monitor of this process: LiteLLM loads a callback's module by path without registering it, so the
    copy the other hooks import (`import backend_health`, registered) holds it."""
    import backend_health

    return backend_health.MONITOR


health_instance = BackendHealth(_the_monitor())

"""The controller's HTTP side: one asyncio process (one uvicorn worker), the single decider however many
gateway workers call it.

    /m/{model}/{path}  streaming reverse proxy to the model's backend; a POST loads the model first when it
                       is not loaded (and waits in its queue); a GET never loads it: for a model that is not
                       loaded, GET answers 503 with its state (so LiteLLM's health checks and the status
                       reader, which GET /health, /metrics and /v1/models, neither load it nor read it healthy)
    /healthz           the controller itself
    /status            per model: state, in_flight, queued, last_used, last_error, load/unload seconds
    /metrics           per model: its state, for Prometheus (metrics.py)

Headers (Authorization included) go through unchanged but for hop-by-hop ones; the body is streamed back
chunk by chunk as the backend sends it (SSE too). A request counts in flight from its admission until its
response body ends or its client goes away; a client that goes away while waiting leaves the queue.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

import httpx

from .config import ConfigProblem, ControllerConfig, ModelConfig
from .drivers import Docker, Driver, LoadError, LocalProcesses, NoStarter, Sleep
from .metrics import CONTENT_TYPE, metrics_text
from .policy import Admit, Load, Policy, Refuse, State, Unload, Waiter
from .scaling import Scaler, watch

log = logging.getLogger("on_demand")
TICK = 0.5  # seconds between timeout / idle checks
HUNG_PROBES = 2  # silent /health probes in a row that make a loaded backend hung
STATE_HEADER = "x-on-demand-state"  # on every /m/<model>/ answer: the model's state (gateway_status.py reads it)
SCALING_HEADER = "x-on-demand-scaling"  # ... and for a copy that follows the load, its model's scaling (JSON)
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


def drivers_for(config: ControllerConfig) -> dict[str, Driver]:
    """Per model: local processes when the config gives an argv, else Docker; wrapped in Sleep for unload: sleep."""
    local: LocalProcesses | None = None
    docker: Docker | None = None
    out: dict[str, Driver] = {}
    for name, m in config.models.items():
        if m.argv:
            local = local or LocalProcesses()
            base: Driver = local
        elif config.docker_socket is None:  # models.yml did not give the controller the Docker socket
            if m.unload != "sleep":
                raise ConfigProblem(
                    f"models.{name}: unload: stop of a container needs the Docker socket "
                    f"(on_demand.docker_socket: true in models.yml)"
                )
            base = NoStarter()
        else:
            docker = docker or Docker(config.docker_socket, config.compose_project)
            base = docker
        out[name] = Sleep(base) if m.unload == "sleep" else base
    return out


class Controller:
    def __init__(
        self,
        config: ControllerConfig,
        drivers: dict[str, Driver] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.config = config
        self.clock = clock
        self.policy = Policy([m.spec for m in config.models.values()], config.settings)
        self.drivers = drivers if drivers is not None else drivers_for(config)
        self.waiting: dict[int, asyncio.Future] = {}
        self.tasks: set[asyncio.Task] = set()
        self.client: httpx.AsyncClient | None = None
        self._ticker: asyncio.Task | None = None
        self.scaler = Scaler(config.scaling)  # replicas: {min, max}: copies that follow the load (scaling.py)
        self._prober: asyncio.Task | None = None
        self.silent: dict[str, int] = {}  # loaded model -> its silent /health probes in a row

    # --- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        # read timeout: none here; the gateway's request/stream timeouts bound a request
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10), follow_redirects=False)
        await self._adopt()
        self._ticker = asyncio.create_task(self._tick_loop())
        if self.config.scaling:
            self._spawn(watch(self.scaler, self.client, self._states, self._queued, self.want))
        self._prober = asyncio.create_task(self._probe_loop())
        log.info(
            "controller ready: %s",
            ", ".join(
                f"{n} (group {m.group}, idle {m.idle_timeout:g}s, unload {m.unload})"
                for n, m in self.config.models.items()
            ),
        )

    async def _adopt(self) -> None:
        """Backends already running (compose `up` started their containers, a controller restart) are taken
        as loaded, or asleep; a backend this controller did not start and cannot stop is never adopted."""
        for name, m in self.config.models.items():
            driver = self.drivers[name]
            try:
                if not await driver.alive(m):
                    continue
                asleep = isinstance(driver, Sleep) and bool(await driver.is_sleeping(m))
                if not asleep:
                    assert self.client is not None
                    if (await self.client.get(f"{m.url}/health", timeout=5)).status_code != 200:
                        continue
            except (httpx.HTTPError, LoadError):
                continue
            log.info("%s: found running at start (%s): adopted", name, "asleep" if asleep else "loaded")
            self.policy.adopt(name, self.clock(), asleep=asleep)
        self._act()

    async def stop(self) -> None:
        for task in (self._ticker, self._prober):
            if task:
                task.cancel()
        for t in list(self.tasks):
            t.cancel()
        seen = set()
        for d in self.drivers.values():  # stops the backends it started (local processes)
            if id(d) not in seen:
                seen.add(id(d))
                try:
                    await d.close()
                except Exception as exc:  # noqa: BLE001 - shutting down: report and go on
                    log.warning("closing a driver: %s", exc)
        if self.client:
            await self.client.aclose()
        log.info("controller stopped (and every backend process it had started)")

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            try:
                self.policy.tick(self.clock())
                self._act()
            except Exception:  # a bug here must not stop every later timeout and idle unload (logged)
                log.exception("tick")

    # --- scaling (scaling.py) ---------------------------------------------------------------------
    def _states(self) -> dict[str, str]:
        return {n: m.state.value for n, m in self.policy.models.items()}

    def _queued(self, name: str) -> int:
        m = self.policy.models.get(name)
        return len(m.queue) if m else 0

    def _scaling_header(self, copy: str) -> dict[str, str]:
        """For a copy of a `replicas: {min, max}` model: its model's scaling (scaling.py), for the status reader."""
        model = self.scaler.owner.get(copy)
        if model is None:
            return {}
        return {SCALING_HEADER: json.dumps({"model": model, **self.scaler.status(self._states())[model]})}

    def want(self, copy: str, reason: str) -> None:
        """Start one more copy of a model whose queue grew."""
        if self.policy.want(copy, self.clock()):
            self.scaler.record(copy, "up", reason)
            self._act()

    async def _probe_loop(self) -> None:
        """Loaded backends that hang: two probes of /health in a row that connect and get no answer within
        hung_probe_timeout make the model hung (policy.hung: killed, loaded again on demand). A refused connection
        is not a hang: a dead backend is found by the requests that fail on it (policy.lost)."""
        while True:
            begun = time.monotonic()
            try:
                loaded = [n for n, m in self.policy.models.items() if m.state is State.LOADED and not m.unloading]
                for name in set(self.silent) - set(loaded):
                    del self.silent[name]
                answers = await asyncio.gather(*(self._silent(self.config.models[n]) for n in loaded))
                for name, silent in zip(loaded, answers):
                    self.silent[name] = self.silent.get(name, 0) + 1 if silent else 0
                    if self.silent[name] >= HUNG_PROBES and self.policy.models[name].state is State.LOADED:
                        why = f"connected, /health silent for {self.silent[name] * self.config.hung_probe_timeout:g}s"
                        log.error("%s: hung (%s): killing it; the next request loads it again", name, why)
                        self.policy.hung(name, why, self.clock())
                        del self.silent[name]
                self._act()
            except Exception:  # a bug here must not stop the probes (logged)
                log.exception("probe")
            await asyncio.sleep(max(0.05, self.config.hung_probe_interval - (time.monotonic() - begun)))

    async def _silent(self, m: ModelConfig) -> bool:
        """True: connected, and /health did not answer within hung_probe_timeout."""
        assert self.client is not None
        try:
            await self.client.get(f"{m.url}/health", timeout=httpx.Timeout(self.config.hung_probe_timeout, connect=2))
        except httpx.TimeoutException as exc:
            return not isinstance(exc, httpx.ConnectTimeout)
        except httpx.HTTPError:
            return False
        return False

    # --- policy <-> actions ---------------------------------------------------------------------
    def _act(self) -> None:
        for a in self.policy.actions():
            if isinstance(a, (Admit, Refuse)):
                fut = self.waiting.pop(a.waiter.id, None)
                if fut is not None and not fut.done():
                    fut.set_result(a)
                elif isinstance(a, Admit):  # its client left in the meantime
                    self.policy.release(a.waiter.model, self.clock())
            elif isinstance(a, Load):
                self._spawn(self._load(a))
            elif isinstance(a, Unload):
                self.scaler.record(a.model, "down", a.reason)  # a copy of a model with a range (else ignored)
                self._spawn(self._unload(a))

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _load(self, a: Load) -> None:
        m = self.config.models[a.model]
        start = time.monotonic()
        log.info("%s: %s", a.model, "waking up" if a.wake else "loading")
        try:
            await self.drivers[a.model].load(m, self.config.load_timeout, wake=a.wake)
        except LoadError as exc:
            log.error("%s: load failed after %.1fs: %s", a.model, time.monotonic() - start, exc)
            self.policy.load_failed(a.model, str(exc), self.clock())
        except Exception as exc:  # any driver error is this model's failure, not the controller's (logged)
            log.exception("%s: load failed", a.model)
            self.policy.load_failed(a.model, f"{type(exc).__name__}: {exc}", self.clock())
        else:
            log.info("%s: loaded in %.1fs", a.model, time.monotonic() - start)
            self.policy.loaded(a.model, self.clock())
        self._act()

    async def _unload(self, a: Unload) -> None:
        m = self.config.models[a.model]
        start = time.monotonic()
        log.info(
            "%s: unloading (%s, %s)%s",
            a.model,
            a.how,
            a.reason,
            f", cutting {a.cut} request(s) in flight" if a.cut else "",
        )
        error = None
        try:
            await self.drivers[a.model].unload(m, cut=a.cut, kill=a.how == "kill")
        except Exception as exc:  # noqa: BLE001
            error = f"{type(exc).__name__}: {exc}"
            log.error("%s: unload failed: %s", a.model, error)
        log.info("%s: unloaded in %.1fs", a.model, time.monotonic() - start)
        self.policy.unloaded(a.model, self.clock(), error)
        self._act()

    async def admit(self, name: str) -> Admit | Refuse:
        """Wait for the policy's word on a request for `name` (cancelled: the request leaves the queue)."""
        w = self.policy.request(name, self.clock())
        fut = asyncio.get_running_loop().create_future()
        self.waiting[w.id] = fut
        self._act()
        try:
            return await fut
        except asyncio.CancelledError:
            self.waiting.pop(w.id, None)
            # admitted just as its client left; a cancelled wait cancelled `fut` too (no result: it still queues)
            if fut.done() and not fut.cancelled() and isinstance(fut.result(), Admit):
                self.release(name)
            else:
                self._withdraw(w)
            raise

    def _withdraw(self, w: Waiter) -> None:
        m = self.policy.models[w.model]
        if w in m.queue:
            m.queue.remove(w)
        self._act()

    def release(self, name: str) -> None:
        self.policy.release(name, self.clock())
        self._act()

    def status(self) -> dict:
        now = self.clock()
        out = {
            "models": self.policy.status(now, time.time() - now),
            "lanes": [sorted(lane) for lane in self.policy.lanes],
        }
        if self.config.scaling:
            out["scaling"] = self.scaler.status(self._states())
        return out

    # --- ASGI -----------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/healthz":
            await _json(send, 200, {"status": "ok"})
        elif path == "/status":
            await _json(send, 200, self.status())
        elif path == "/metrics":
            body = metrics_text(
                {n: m.state for n, m in self.policy.models.items()}, self.scaler.events if self.config.scaling else None
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", CONTENT_TYPE.encode()), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
        elif path.startswith("/m/"):
            name, _, rest = path[3:].partition("/")
            if name not in self.config.models:
                await _json(
                    send,
                    404,
                    _error(f"no on-demand model {name!r} here (known: {', '.join(sorted(self.config.models))})", 404),
                )
            else:
                await self._proxy(scope, receive, send, self.config.models[name], rest)
        else:
            await _json(send, 404, _error(f"no route {path}; use /m/<model>/..., /status, /metrics or /healthz", 404))

    async def _lifespan(self, receive, send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await self.start()
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _proxy(self, scope, receive, send, m: ModelConfig, rest: str) -> None:
        method = scope["method"]
        state = self.policy.models[m.name]
        if method in ("GET", "HEAD"):
            if state.state is not State.LOADED:
                log.info("%s: %s /%s while %s: 503, not loading it", m.name, method, rest, state.state.value)
                await _json(
                    send,
                    503,
                    {
                        **_error(
                            f"model {m.name} is {state.state.value} (on demand: a request "
                            f"loads it; this {method} does not)",
                            503,
                        ),
                        "model": m.name,
                        "state": state.state.value,
                        "last_error": state.last_error,
                    },
                    {STATE_HEADER: state.state.value, **self._scaling_header(m.name)},
                )
                return
            await self._forward(scope, receive, send, m, rest, b"", counted=False)
            return
        body, disconnected = await _read_body(receive)
        if disconnected:
            return
        waiting = asyncio.ensure_future(self.admit(m.name))
        gone = asyncio.ensure_future(_disconnect(receive))
        done, _ = await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
        if waiting not in done:  # the client went away while it waited
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            return
        gone.cancel()
        outcome = waiting.result()
        if isinstance(outcome, Refuse):
            headers = {"retry-after": str(outcome.retry_after)} if outcome.retry_after else {}
            await _json(send, outcome.status, {**_error(outcome.message, outcome.status), "model": m.name}, headers)
            return
        try:
            await self._forward(scope, receive, send, m, rest, body, counted=True)
        finally:
            self.release(m.name)

    async def _forward(self, scope, receive, send, m: ModelConfig, rest: str, body: bytes, counted: bool) -> None:
        url = f"{m.url}/{rest}"
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in HOP_BY_HOP
        ]
        assert self.client is not None
        request = self.client.build_request(scope["method"], url, headers=headers, content=body)
        try:
            upstream = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if counted and not await self.drivers[m.name].alive(m):
                self.policy.lost(m.name, f"backend gone: {cause}", self.clock())
                self._act()
            await _json(
                send,
                502,
                {**_error(f"model {m.name}: its backend at {m.url} did not answer ({cause})", 502), "model": m.name},
            )
            return
        try:
            out_headers = [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in upstream.headers.multi_items()
                if k.lower() not in HOP_BY_HOP or k.lower() == "content-length"
            ]
            if not counted:  # a GET (/health: the status reader's probe), not a request's answer
                out_headers += [(k.encode(), v.encode()) for k, v in self._scaling_header(m.name).items()]
            out_headers.append((STATE_HEADER.encode(), State.LOADED.value.encode()))  # the status reader tells
            # an on-demand model's /health from an always-on backend's by it

            async def stream() -> None:
                await send({"type": "http.response.start", "status": upstream.status_code, "headers": out_headers})
                try:
                    async for chunk in upstream.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx.HTTPError as exc:  # the backend dropped the stream (crash, unload cut it)
                    log.warning("%s: stream from the backend broke: %s", m.name, exc)
                    raise
                await send({"type": "http.response.body", "body": b"", "more_body": False})

            sending = asyncio.ensure_future(stream())
            gone = asyncio.ensure_future(_disconnect(receive))
            done, _ = await asyncio.wait({sending, gone}, return_when=asyncio.FIRST_COMPLETED)
            if sending not in done:
                log.info("%s: client went away mid-response; closing the backend request", m.name)
                sending.cancel()
            gone.cancel()
            await asyncio.gather(sending, gone, return_exceptions=True)
        finally:
            await upstream.aclose()


async def _read_body(receive) -> tuple[bytes, bool]:
    chunks = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return b"", True
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body"):
            return b"".join(chunks), False


async def _disconnect(receive) -> None:
    """Returns when the client has gone away (the body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _error(message: str, status: int) -> dict:
    kind = "service_unavailable" if status == 503 else "bad_gateway" if status == 502 else "not_found"
    return {"error": {"message": message, "type": kind, "code": status}}


async def _json(send, status: int, obj: dict, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(obj).encode()
    hdrs = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    hdrs += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})

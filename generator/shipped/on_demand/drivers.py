"""How a model is loaded and unloaded: the controller's hands (the policy decides, these act).

- LocalProcesses: the local runtime's backends, started as runtime/local.py starts them (argv, env, log),
  each in its own process group inside the controller's session, or forked from the stack's vLLM fork server
  (vllm_fork.py) inside that server's session (`runtime down` ends both sessions, and them with them); ready when
  /health answers 200; stopped with SIGTERM to the group, then SIGKILL.
- Docker: compose backends: the service's container started/stopped through the Docker Engine HTTP API
  on its Unix socket (httpx, already in the gateway image: an async client and no new dependency; the
  Docker SDK for Python is synchronous, built on requests, and would be one more package in the image
  for three calls).
- Sleep: vLLM sleep mode (level 1: weights to CPU memory, KV cache freed): POST /sleep, POST /wake_up,
  GET /is_sleeping (vLLM's dev routes: VLLM_SERVER_DEV_MODE=1 and --enable-sleep-mode; not behind
  --api-key). The first start and a dead process go through the driver it wraps. A sleeping vLLM answers
  /v1/models but hangs chat requests, so nothing is forwarded to it before wake_up answered.

A failed load raises LoadError with one line for people: what happened and the backend's own last
error line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Protocol

import httpx

from . import vllm_fork
from .config import ModelConfig
from .process_group import group_members, signal_group, tail

log = logging.getLogger("on_demand")
HEALTH_POLL = 0.5  # seconds between /health probes while a backend loads
MARK = "--- on-demand load of "  # the line the controller writes into a backend's log at each start
_ERROR_LINE = re.compile(r"error|exception|traceback|failed|unrecognized|invalid|no such", re.I)


class LoadError(RuntimeError):
    """A backend did not come up; the message names the cause."""


class Driver(Protocol):
    async def load(self, m: ModelConfig, timeout: float, wake: bool = False) -> None: ...
    async def unload(self, m: ModelConfig, cut: int = 0, kill: bool = False) -> None: ...
    async def alive(self, m: ModelConfig) -> bool: ...
    async def close(self) -> None: ...


def last_error_line(text: str) -> str:
    """The line of a log tail that says what went wrong: the last one that looks like an error, else the last."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith(MARK)]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    return (errors or lines or ["(empty log)"])[-1][:400]


async def wait_healthy(url: str, timeout: float, gone=None) -> None:
    """Until GET {url}/health answers 200; LoadError when `gone()` returns a reason or after `timeout`."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=httpx.Timeout(5, connect=2)) as client:
        while True:
            if gone is not None and (reason := gone()):
                raise LoadError(reason)
            try:
                if (await client.get(f"{url}/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise LoadError(f"not ready after {timeout:g}s (the load timeout)")
            await asyncio.sleep(HEALTH_POLL)


class LocalProcesses:
    """Backends as local processes (config: argv, env, cwd, log); keys from the controller's environment."""

    def __init__(self, grace: float = 10):
        self._signal_group, self._tail = signal_group, tail
        self.grace = grace
        self.procs: dict[str, subprocess.Popen | vllm_fork.ForkedProcess] = {}

    def _log(self, m: ModelConfig) -> Path:
        return Path(m.log or f"{m.name}.log")

    async def load(self, m: ModelConfig, timeout: float, wake: bool = False) -> None:
        if not m.argv:
            raise LoadError(f"no argv for {m.name} in the controller config (a local backend needs one)")
        await self.unload(m)  # a leftover of a failed or crashed start
        path = self._log(m)
        path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **m.env}
        if m.api_key_env and m.api_key_env in os.environ:
            env["VLLM_API_KEY"] = os.environ[m.api_key_env]
        with path.open("ab") as fh:
            fh.write(f"{MARK}{m.name} at {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
        proc: subprocess.Popen | vllm_fork.ForkedProcess | None = None
        if m.fork_socket:  # in the fork server's session, a process group of its own: `runtime down` ends it
            try:
                proc = await asyncio.to_thread(
                    vllm_fork.fork,
                    m.fork_socket,
                    list(m.fork_args),
                    env,
                    m.cwd or os.getcwd(),
                    str(path.absolute()),
                    False,
                )
            except vllm_fork.ForkUnavailable as exc:
                log.warning("%s: %s; started as a process of its own", m.name, exc)
        if proc is None:
            with path.open("ab") as fh:
                try:
                    proc = subprocess.Popen(
                        list(m.argv),
                        env=env,
                        cwd=m.cwd,
                        stdout=fh,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        process_group=0,
                    )
                except OSError as exc:
                    raise LoadError(f"could not start {m.argv[0]}: {exc}") from None
        self.procs[m.name] = proc

        def gone() -> str | None:
            if proc.poll() is None:
                return None
            return (
                f"exited with code {proc.returncode} before it was ready: "
                f"{last_error_line(self._tail(path))} (log: {path})"
            )

        try:
            await wait_healthy(m.url, timeout, gone)
        except LoadError as exc:
            await self.unload(m)
            if "not ready after" in str(exc):
                raise LoadError(
                    f"{exc}, stopped; last log line: {last_error_line(self._tail(path))} (log: {path})"
                ) from None
            raise

    async def unload(self, m: ModelConfig, cut: int = 0, kill: bool = False) -> None:
        """SIGTERM to its group, SIGKILL after the grace; `kill` (a hung backend, which never ends on SIGTERM): SIGKILL
        at once."""
        proc = self.procs.pop(m.name, None)
        if proc is None or proc.poll() is not None:
            return
        self._signal_group(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        if proc.poll() is None:
            self._signal_group(proc.pid, signal.SIGKILL)
            await asyncio.to_thread(proc.wait, 10)
        self._signal_group(proc.pid, signal.SIGKILL)  # whatever of its group outlived it (engine subprocesses)
        # ... and until it is gone: vLLM's engine, a fork of the API server, holds its listening socket too, and the
        # API server may exit before the engine it killed (an "unloaded" model whose port still answered, in CI)
        deadline = time.monotonic() + self.grace
        while group_members(proc.pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)

    async def alive(self, m: ModelConfig) -> bool:
        proc = self.procs.get(m.name)
        if proc is not None and proc.poll() is not None and group_members(proc.pid):
            # its API server is gone: what is left of its group (the engine, re-parented to init, holding the port
            # and the memory) goes too, before the model is loaded again
            self._signal_group(proc.pid, signal.SIGKILL)
        return proc is not None and proc.poll() is None

    async def close(self) -> None:
        for name in list(self.procs):
            proc = self.procs[name]
            if proc.poll() is None:
                self._signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while any(p.poll() is None for p in self.procs.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        for proc in self.procs.values():
            self._signal_group(proc.pid, signal.SIGKILL)
            if proc.poll() is None:
                await asyncio.to_thread(proc.wait, 10)
        self.procs.clear()


class Docker:
    """Compose backends: start/stop the service's container (labels com.docker.compose.project/service)."""

    def __init__(
        self,
        socket_path: str = "/var/run/docker.sock",
        project: str | None = None,
        stop_grace: int = 30,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        # the project: given, else $COMPOSE_PROJECT_NAME, else that of the controller's own container
        self.project = project or os.environ.get("COMPOSE_PROJECT_NAME")
        self.stop_grace = stop_grace
        self.client = httpx.AsyncClient(
            transport=transport or httpx.AsyncHTTPTransport(uds=socket_path),
            base_url="http://docker/v1.41",
            timeout=httpx.Timeout(60, connect=5),
        )

    async def _own_project(self) -> str | None:
        """The compose project of the container this controller runs in (its host name is its container id)."""
        try:
            r = await self.client.get(f"/containers/{socket.gethostname()}/json")
            if r.status_code == 200:
                return (r.json().get("Config", {}).get("Labels") or {}).get("com.docker.compose.project")
        except (httpx.HTTPError, ValueError):
            pass
        return None

    async def container(self, m: ModelConfig) -> str:
        if self.project is None:
            self.project = await self._own_project() or ""
        labels = [f"com.docker.compose.service={m.service}"]
        if self.project:
            labels.append(f"com.docker.compose.project={self.project}")
        r = await self.client.get("/containers/json", params={"all": "true", "filters": json.dumps({"label": labels})})
        if r.status_code != 200:
            raise LoadError(f"Docker Engine answered {r.status_code} listing containers: {r.text[:200]}")
        found = r.json()
        if len(found) != 1:
            raise LoadError(
                f"{len(found)} containers for compose service {m.service}"
                f"{f' of project {self.project}' if self.project else ''} (expected 1; "
                f"`docker compose create` makes it)"
            )
        return found[0]["Id"]

    async def load(self, m: ModelConfig, timeout: float, wake: bool = False) -> None:
        try:
            cid = await self.container(m)
            r = await self.client.post(f"/containers/{cid}/start")
        except httpx.HTTPError as exc:
            raise LoadError(f"Docker Engine not reachable: {exc}") from None
        if r.status_code not in (204, 304):
            raise LoadError(f"Docker Engine refused to start {m.service}: {r.status_code} {r.text[:200]}")

        state: dict = {}

        async def check() -> None:
            state["running"] = (await self.client.get(f"/containers/{cid}/json")).json().get("State", {})

        def gone() -> str | None:
            s = state.get("running") or {}
            if s and not s.get("Running", True):
                return f"container {m.service} exited with code {s.get('ExitCode')} before it was ready"
            return None

        async def watch() -> None:
            while True:
                try:
                    await check()
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(2)

        watcher = asyncio.create_task(watch())
        try:
            await wait_healthy(m.url, timeout, gone)
        except LoadError as exc:
            logs = await self._last_log(cid)
            await self.unload(m)
            raise LoadError(f"{exc}; last log line: {logs}") from None
        finally:
            watcher.cancel()

    async def _last_log(self, cid: str) -> str:
        try:
            r = await self.client.get(f"/containers/{cid}/logs", params={"stdout": "1", "stderr": "1", "tail": "30"})
            # multiplexed stream: 8-byte frame headers; strip them roughly for one readable line
            text = re.sub(rb"[\x00-\x02]\x00\x00\x00.{4}", b"", r.content, flags=re.S).decode(errors="replace")
            return last_error_line(text)
        except httpx.HTTPError:
            return "(logs unavailable)"

    async def unload(self, m: ModelConfig, cut: int = 0, kill: bool = False) -> None:
        cid = await self.container(m)
        grace = 0 if kill else self.stop_grace  # t=0: the Engine's SIGKILL at once (a hung backend)
        r = await self.client.post(f"/containers/{cid}/stop", params={"t": str(grace)}, timeout=grace + 30)
        if r.status_code not in (204, 304):
            raise RuntimeError(f"Docker Engine refused to stop {m.service}: {r.status_code} {r.text[:200]}")

    async def alive(self, m: ModelConfig) -> bool:
        try:
            cid = await self.container(m)
            return bool((await self.client.get(f"/containers/{cid}/json")).json().get("State", {}).get("Running"))
        except (httpx.HTTPError, LoadError):
            return False

    async def close(self) -> None:
        await self.client.aclose()  # compose stops its containers itself (`docker compose down`)


class NoStarter:
    """A sleep-mode backend's starter when the controller has no Docker socket: compose starts the container
    (and its restart policy restarts it); the controller can only wait for it or say why it cannot."""

    async def load(self, m: ModelConfig, timeout: float, wake: bool = False) -> None:
        raise LoadError(
            f"its backend at {m.url} is not running, and the controller cannot start it without the "
            f"Docker socket: check `docker compose ps {m.service}` (on_demand.docker_socket: true lets "
            f"the controller start it)"
        )

    async def unload(self, m: ModelConfig, cut: int = 0, kill: bool = False) -> None:
        return None

    async def alive(self, m: ModelConfig) -> bool:
        return False

    async def close(self) -> None:
        return None


class Sleep:
    """vLLM sleep mode over HTTP; `starter` starts the process the first time (or after it died)."""

    def __init__(self, starter: Driver):
        self.starter = starter
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(120, connect=3))

    async def is_sleeping(self, m: ModelConfig) -> bool | None:
        """None: nothing answers at the URL (never started, or dead)."""
        try:
            r = await self.client.get(f"{m.url}/is_sleeping")
            return bool(r.json().get("is_sleeping")) if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    async def load(self, m: ModelConfig, timeout: float, wake: bool = False) -> None:
        sleeping = await self.is_sleeping(m)
        if sleeping is None:
            await self.starter.load(m, timeout)
            return
        if sleeping:
            try:
                r = await self.client.post(f"{m.url}/wake_up", timeout=timeout)
            except httpx.HTTPError as exc:
                raise LoadError(f"wake_up failed: {type(exc).__name__}: {exc}") from None
            if r.status_code != 200:
                raise LoadError(f"wake_up answered {r.status_code}: {r.text[:200]}")
            deadline = time.monotonic() + timeout
            while await self.is_sleeping(m):
                if time.monotonic() > deadline:
                    raise LoadError(f"still asleep {timeout:g}s after wake_up")
                await asyncio.sleep(HEALTH_POLL)
        await wait_healthy(m.url, timeout)

    async def unload(self, m: ModelConfig, cut: int = 0, kill: bool = False) -> None:
        if kill:  # a hung backend answers no /sleep: its process goes, and the next load starts it afresh
            await self.starter.unload(m, cut, kill=True)
            return
        # drained (cut == 0): mode=wait changes nothing; cut: abort what is still running, as vLLM does by default
        r = await self.client.post(f"{m.url}/sleep", params={"level": "1", "mode": "abort" if cut else "wait"})
        if r.status_code != 200:
            raise RuntimeError(f"sleep answered {r.status_code}: {r.text[:200]}")

    async def alive(self, m: ModelConfig) -> bool:
        return await self.is_sleeping(m) is not None

    async def close(self) -> None:
        await self.client.aclose()
        await self.starter.close()

"""Run a Plan as local processes: one vLLM OpenAI server per model, then the LiteLLM proxy.

Everything binds to 127.0.0.1. Keys are made per stack and kept in STATE_DIR/.env (mode 600).
The stack records the processes it started in STATE_DIR/state.json and `stop` ends exactly
those (each in its own process group), so a second `down` or a crashed run never kills strangers.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

import httpx
from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..output import read_env_file
from ..renderers import LITELLM_FILE, gateway_modules
from ..renderers.text import dump_yaml, header
from ..plan import ModelPlan, Plan
from ..gateway_process import gateway_args, gateway_env
from ..renderers.litellm import local_api_base, render_litellm

VLLM_ENTRYPOINT = ["-m", "vllm.entrypoints.openai.api_server"]  # `vllm serve` with the same flags


class StackError(RuntimeError):
    """A backend or the gateway did not come up; the message carries its last log lines."""


@dataclass
class Proc:
    name: str
    cmd: list[str]
    log: Path
    health_url: str
    popen: subprocess.Popen | None = None
    pid: int | None = None
    ready_after: float | None = None

    def alive(self) -> bool:
        return self.popen.poll() is None if self.popen else _pid_alive(self.pid)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def tail(path: Path, lines: int = 25) -> str:
    try:
        with path.open(errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines))
    except FileNotFoundError:
        return "(no log)"


@dataclass
class LocalStack:
    plan: Plan
    state_dir: Path
    vllm_python: str
    gateway_python: str = sys.executable
    gateway_cpus: frozenset[int] | None = None  # pin the gateway (taskset), e.g. away from a load generator
    console: Console = field(default_factory=lambda: Console(stderr=True))
    procs: list[Proc] = field(default_factory=list)

    # --- keys and files -------------------------------------------------------------------------
    @property
    def env_path(self) -> Path:
        return self.state_dir / ".env"

    def keys(self) -> dict[str, str]:
        """Per-stack random keys, created once and reused (mode 600)."""
        existing = read_env_file(self.env_path) if self.env_path.exists() else {}
        wanted = {n: existing.get(n) or secrets.token_urlsafe(32) for n in self.plan.secret_envs}
        if wanted != existing:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self.env_path.write_text("".join(f"{k}={v}\n" for k, v in wanted.items()))
            self.env_path.chmod(0o600)
        return wanted

    @property
    def master_key(self) -> str:
        return self.keys()[self.plan.gateway.master_key_env]

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.plan.gateway.port}"

    def write_gateway_config(self, api_base: Callable[[ModelPlan], str] = local_api_base) -> Path:
        """Same renderer as the compose target, with loopback backends."""
        config = self.state_dir / LITELLM_FILE
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(header(self.plan) + dump_yaml(render_litellm(self.plan, api_base)))
        for rel, text in gateway_modules(self.plan).items():
            (self.state_dir / rel).write_text(text)
        return config

    # --- processes ------------------------------------------------------------------------------
    def _backend(self, m: ModelPlan) -> Proc:
        cmd = [self.vllm_python, *VLLM_ENTRYPOINT, "--model", m.model, *m.flag_args, "--host", "127.0.0.1"]
        return Proc(m.name, cmd, self.state_dir / "logs" / f"{m.name}.log", f"http://127.0.0.1:{m.port}/health")

    def _gateway(self, config: Path) -> Proc:
        g = self.plan.gateway
        cmd = [self.gateway_python, "-m", "litellm.proxy.proxy_cli", *gateway_args(g, str(config)),
               "--host", "127.0.0.1"]
        if self.gateway_cpus:
            cmd = ["taskset", "-c", ",".join(map(str, sorted(self.gateway_cpus))), *cmd]
        return Proc("gateway", cmd, self.state_dir / "logs" / "gateway.log", f"{self.gateway_url}/health/liveliness")

    def _spawn(self, proc: Proc, env: dict[str, str]) -> None:
        proc.log.parent.mkdir(parents=True, exist_ok=True)
        with proc.log.open("ab") as log:
            proc.popen = subprocess.Popen(proc.cmd, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True, cwd=os.getcwd())
        proc.pid = proc.popen.pid
        self.procs.append(proc)
        self._save_state()

    def _save_state(self) -> None:
        state = {"gateway_url": self.gateway_url,
                 "procs": [{"name": p.name, "pid": p.pid, "cmd": p.cmd} for p in self.procs]}
        (self.state_dir / "state.json").write_text(json.dumps(state, indent=1))

    def start(self, timeout: float = 900) -> None:
        """Start every backend, wait for all to be healthy, then start the gateway. Cleans up on failure."""
        try:
            for m in self.plan.models:
                self.start_backend(m.name, wait=False)
            self._wait(list(self.procs), timeout)
            self.start_gateway()
        except BaseException:
            self.stop()
            raise

    def start_backend(self, name: str, wait: bool = True, timeout: float = 600) -> None:
        """Start (or restart, after `kill`) one model's vLLM process."""
        m = next(m for m in self.plan.models if m.name == name)
        proc = self._backend(m)
        self._spawn(proc, {**m.env, "VLLM_API_KEY": self.keys()[m.api_key_env]})
        if wait:
            self._wait([proc], timeout)

    def start_gateway(self, api_base: Callable[[ModelPlan], str] = local_api_base) -> None:
        self._spawn(self._gateway(self.write_gateway_config(api_base)), {**self.keys(), **self.gateway_env()})
        self._wait([self.procs[-1]], 180)

    def gateway_env(self) -> dict[str, str]:
        return gateway_env(self.plan.gateway)

    def kill(self, name: str) -> None:
        """Kill one process of this stack at once (SIGKILL), as a crash would; for fault tests."""
        procs = [p for p in self.procs if p.name == name and p.alive()]
        for p in procs:
            _signal_group(p.pid, signal.SIGKILL)
            p.popen.wait(timeout=30)
        self.procs = [p for p in self.procs if p not in procs]
        self._save_state()

    def _wait(self, procs: list[Proc], timeout: float) -> None:
        try:
            self._poll(procs, timeout)
        finally:
            if not self.console.is_terminal:
                self.console.print()  # Live leaves the last table without a newline in logs

    def _poll(self, procs: list[Proc], timeout: float) -> None:
        start = time.monotonic()
        with httpx.Client(timeout=2) as client, Live(self._table(procs, start), console=self.console,
                                                      refresh_per_second=2, transient=False) as live:
            while True:
                for p in procs:
                    if p.ready_after is not None:
                        continue
                    if not p.alive():
                        live.update(self._table(procs, start))
                        raise StackError(f"{p.name} exited before it was ready (exit code "
                                         f"{p.popen.poll() if p.popen else '?'}); last lines of {p.log}:\n{tail(p.log)}")
                    try:
                        if client.get(p.health_url).status_code == 200:
                            p.ready_after = time.monotonic() - start
                    except httpx.HTTPError:
                        pass
                live.update(self._table(procs, start))
                if all(p.ready_after is not None for p in procs):
                    return
                if time.monotonic() - start > timeout:
                    late = [p for p in procs if p.ready_after is None]
                    raise StackError(f"{', '.join(p.name for p in late)} not ready after {timeout:.0f}s; "
                                     f"last lines of {late[0].log}:\n{tail(late[0].log)}")
                time.sleep(1)

    @staticmethod
    def _table(procs: list[Proc], start: float) -> Table:
        table = Table("process", "status", "log", box=None)
        now = time.monotonic() - start
        for p in procs:
            if p.ready_after is not None:
                status = f"[green]ready[/] after {p.ready_after:.0f}s"
            elif not p.alive():
                status = "[red]exited[/]"
            else:
                status = f"[yellow]starting[/] {now:.0f}s"
            table.add_row(p.name, status, str(p.log))
        return table

    def stop(self, grace: float = 15) -> None:
        """End exactly the processes this stack started (their whole process groups)."""
        stop_processes(self.procs, grace)
        self.procs.clear()
        state = self.state_dir / "state.json"
        state.unlink(missing_ok=True)

    def __enter__(self) -> "LocalStack":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_processes(procs: list[Proc], grace: float = 15) -> None:
    live = [p for p in reversed(procs) if p.alive()]
    for p in live:
        _signal_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.alive() for p in live):
        for p in live:
            if p.popen:
                p.popen.poll()
        time.sleep(0.2)
    for p in live:
        if p.alive():
            _signal_group(p.pid, signal.SIGKILL)
        if p.popen:
            p.popen.wait(timeout=10)


def _signal_group(pid: int | None, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the group the stack created with start_new_session
    except (ProcessLookupError, PermissionError, TypeError):
        pass


def stop_recorded(state_dir: Path) -> int:
    """`down` from another process: stop what state.json says this stack started, if still ours."""
    state_file = state_dir / "state.json"
    if not state_file.exists():
        return 0
    procs = []
    for entry in json.loads(state_file.read_text())["procs"]:
        pid = entry["pid"]
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except FileNotFoundError:
            continue
        if [c.decode() for c in cmdline] == entry["cmd"]:  # the pid was not reused by someone else
            procs.append(Proc(entry["name"], entry["cmd"], Path(), "", pid=pid))
    stop_processes(procs)
    state_file.unlink(missing_ok=True)
    return len(procs)

"""The OS side of the local runtime: processes started in their own sessions, stopped as a whole
(also from another process, by the session ids a state file recorded), their logs, and ports.

Every backend and the gateway is started as a session leader (start_new_session), so whatever it
becomes (a wrapper script that execs python, vLLM's engine subprocesses) stays in that session and
is found and stopped with it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ...shipped.on_demand.process_group import signal_group, tail  # noqa: F401  (one definition; re-exported)
from ...shipped.on_demand.vllm_fork import ForkedProcess


@dataclass
class Proc:
    name: str
    cmd: list[str]
    log: Path
    health_url: str
    popen: subprocess.Popen | ForkedProcess | None = None
    pid: int | None = None
    ready_after: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    waits_for: tuple[str, ...] = ()  # processes that must be ready (or failed) before this one starts
    failed: str | None = None  # why it is not running, once it failed
    started: float | None = None  # its start time, read once at spawn: tells it from a later reuse of its pid
    fork_socket: str | None = None  # a vLLM backend forked from this fork server (vllm_fork.py), else spawned
    fork_args: tuple[str, ...] = ()  # its `vllm serve` flags, when forked

    def alive(self) -> bool:
        return self.popen.poll() is None if self.popen else _pid_alive(self.pid)

    @property
    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen else None


def _pid_alive(pid: int | None) -> bool:
    """A process we hold no Popen for (attached from state.json): alive unless gone or a zombie."""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_processes(procs: list[Proc], grace: float = 15) -> None:
    """End each process's whole session: a live leader's group, and what outlived a leader that is gone (its
    engine, re-parented to init, still holding the port and the memory)."""
    live = [p for p in reversed(procs) if p.alive()]
    orphans = [m for p in reversed(procs) if not p.alive() for m in session_processes(p.pid, p.started)]
    for p in live:
        signal_group(p.pid, signal.SIGTERM)
    for m in orphans:
        _signal(m, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and (any(p.alive() for p in live) or any(_running(m) for m in orphans)):
        for p in live:
            if p.popen:
                p.popen.poll()
        time.sleep(0.2)
    for p in live:
        if p.alive():
            signal_group(p.pid, signal.SIGKILL)
        if p.popen:
            p.popen.wait(timeout=10)
    for m in orphans:
        _signal(m, signal.SIGKILL)


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def started_at(pid: int | None) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, TypeError, ValueError):
        return None


def _session_members(sid: int) -> list[psutil.Process]:
    members = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                members.append(p)
        except (ProcessLookupError, PermissionError, OSError):
            continue
    return members


def session_processes(sid: int | None, started: float | None) -> list[psutil.Process]:
    """The processes of the session `sid` that are ours: the leader we started (its start time is `started`, as
    recorded), and every member started after it, whether or not the leader still lives (a backend's API server
    killed leaves its engine in the session, re-parented to init). A leader with another start time is a stranger
    that got a reused pid: nothing. `started` None (not recorded): nothing."""
    if not sid or started is None:
        return []
    members = _session_members(sid)
    leader = next((p for p in members if p.pid == sid), None)
    if leader is not None and abs((started_at(sid) or 0) - started) > 1:
        return []  # the pid was reused by a stranger
    return [p for p in members if (started_at(p.pid) or 0) >= started - 1]


def end_session(sid: int | None, started: float | None, grace: float = 10) -> int:
    """End what is left of the session `sid` (SIGTERM, then SIGKILL), if its leader was ours (start time
    `started`) or is gone (then the members started after it); the number of processes signalled."""
    if not sid:
        return 0
    members = _session_members(sid)
    if started is not None:
        members = session_processes(sid, started)
    elif any(p.pid == sid for p in members):
        return 0  # a live leader we cannot tell from a stranger
    _terminate(members, grace)
    return len(members)


def _terminate(procs: list[psutil.Process], grace: float) -> None:
    """SIGTERM, up to `grace` seconds to end, then SIGKILL for what is left."""
    for p in procs:
        _signal(p, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        _signal(p, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=10)


def stop_recorded(state_dir: Path, grace: float = 15) -> int:
    """`down` from another process: end every process of the sessions state.json recorded.

    Each backend and the gateway was started as a session leader (start_new_session), so whatever it
    became (a wrapper script that execs python, vLLM's engine subprocesses) stays in that session.
    A leader whose start time differs from the recorded one is a stranger that got a reused pid: skipped. A leader
    that is gone leaves its session's members started after it (session_processes): ended too.
    """
    state_file = state_dir / "state.json"
    if not state_file.exists():
        return 0
    victims: list[psutil.Process] = []
    for entry in json.loads(state_file.read_text())["procs"]:
        # the leader and its session, or what is left of it when the leader is gone (checked by start times)
        victims += session_processes(entry.get("sid", entry["pid"]), entry.get("started"))
    _terminate(victims, grace)
    state_file.unlink(missing_ok=True)
    return len({p.pid for p in victims})


def _signal(p: psutil.Process, sig: int) -> None:
    try:
        p.send_signal(sig)
    except psutil.Error:
        pass


def port_problem(port: int, who: str) -> str | None:
    """None if 127.0.0.1:port can be bound; else which process holds it, when this user may see that."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: TIME_WAIT is no conflict
        try:
            sock.bind(("127.0.0.1", port))
            return None
        except OSError:
            pass
    holder = ""
    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                proc = psutil.Process(conn.pid)
                holder = f" by pid {conn.pid} ({' '.join(proc.cmdline())[:120]})"
                break
    except (psutil.Error, OSError):
        pass
    return (
        f"port {port} ({who}) is already in use{holder}; stop that process (if it is another stack: "
        "`python -m generator.operate.runtime down --state-dir <its state dir>`) "
        f"or give {who} another port in models.yml"
    )

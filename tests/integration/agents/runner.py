"""Run one coding agent non-interactively against the gateway; stop it after its first tool round.

Each run gets a throw-away HOME, the GENERATED client config, telemetry and updates off, and a dead
proxy for everything but 127.0.0.1 (HTTP(S)_PROXY -> a closed local port, NO_PROXY=127.0.0.1), so
an agent that tries the internet fails at once instead of leaking. The agent's own JSON event stream
is read line by line (its log lines too, as {"stderr": line}); `done(event)` says when the first round
is over, then the whole process group is killed (opencode ignores SIGTERM).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

DEAD_PROXY = "http://127.0.0.1:9"  # discard port: nothing listens, connections fail at once
PROMPT = "What is the weather in Paris? Use the get_weather tool."


@dataclass
class Run:
    events: list[dict] = field(default_factory=list)
    stderr: str = ""
    seconds: float = 0.0
    finished: bool = False  # done() said so (else: the deadline or the agent's own exit)
    returncode: int | None = None

    def explain(self) -> str:
        tail = "\n".join(json.dumps(e)[:400] for e in self.events[-6:])
        return (
            f"{len(self.events)} events after {self.seconds:.1f}s, exit {self.returncode}\n{tail}\n"
            f"stderr: {self.stderr[-1500:]}"
        )


def base_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CI": "1",
        "HTTP_PROXY": DEAD_PROXY,
        "HTTPS_PROXY": DEAD_PROXY,
        "ALL_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY,
        "all_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"),
    }
    for k in ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"):
        if k in os.environ:
            env[k] = os.environ[k]
    return {**env, **extra}


def run_agent(
    cmd: list[str], env: dict[str, str], cwd: Path, done: Callable[[dict], bool], timeout: float = 120
) -> Run:
    run = Run()
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    buf, err = b"", []
    try:
        while not run.finished and time.monotonic() - start < timeout:
            ready = sel.select(timeout=0.5)
            if not ready and proc.poll() is not None:
                break
            for key, _ in ready:
                chunk = os.read(key.fileobj.fileno(), 65536)
                if key.fileobj is proc.stderr:  # logs: done() sees each line as {"stderr": line}
                    err.append(chunk)
                    if not chunk:
                        sel.unregister(proc.stderr)
                    for line in chunk.decode(errors="replace").splitlines():
                        run.finished = run.finished or done({"stderr": line})
                    continue
                if not chunk:
                    sel.unregister(proc.stdout)
                    continue
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict):
                        run.events.append(event)
                        run.finished = run.finished or done(event)
            if proc.poll() is not None and not sel.get_map().get(proc.stdout.fileno()):
                break
    finally:
        run.seconds = time.monotonic() - start
        stop(proc)
        run.returncode = proc.returncode
        run.stderr = b"".join(err).decode(errors="replace")
    return run


def stop(proc: subprocess.Popen) -> None:
    """End the agent and everything it started (its own process group)."""
    for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # the group may outlive its leader
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()


def fresh_home(root: Path) -> tuple[Path, Path]:
    """A throw-away HOME and an empty working directory inside it."""
    if root.exists():
        shutil.rmtree(root)
    (root / "work").mkdir(parents=True)
    return root, root / "work"

"""gateway_serve.py (shipped beside the hooks; compose, the local runtime and a Kubernetes pod run LiteLLM through it):
uvicorn's workers forked from the parent instead of spawned, and the supervisor's count of them (workers_of) in both
modes, through a rolling restart (SIGHUP). Real uvicorn with a tiny app; LiteLLM itself through it:
tests/integration/test_gateway_basics.py (the demo's 2-worker gateway) and tests/compose/test_compose.py."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from generator.operate.runtime.ports import free_port
from generator.shipped.gateway_hooks.gateway_supervisor import workers_of

HOOKS = Path(__file__).resolve().parents[2] / "generator" / "shipped" / "gateway_hooks"
APP = '''
import os
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": str(os.getpid()).encode()})
'''


@pytest.fixture()
def serve():
    spec = importlib.util.spec_from_file_location("gateway_serve", HOOKS / "gateway_serve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(tmp_path: Path, fork: bool) -> tuple[subprocess.Popen, int]:
    (tmp_path / "tiny_app.py").write_text(APP)
    port = free_port()
    code = (f"import sys; sys.path[:0] = [{str(HOOKS)!r}, {str(tmp_path)!r}]; import gateway_serve, uvicorn; "
            + ("why = gateway_serve.fork_workers(); assert why is None, why; " if fork else "")
            + f"uvicorn.run('tiny_app:app', port={port}, workers=2, log_level='warning', timeout_worker_healthcheck=60)")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True), port


def _wait(check, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout}s")


def _answers(port: int) -> set[int]:
    """The worker pids that answered 20 requests (new connections: both workers get some)."""
    pids = set()
    for _ in range(20):
        try:
            pids.add(int(httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text))
        except httpx.HTTPError:
            return set()
    return pids


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_workers_are_counted_forked_or_spawned_and_after_a_rolling_restart(tmp_path, fork):
    """Forked workers carry the parent's command line, spawned ones multiprocessing's `spawn_main`: workers_of
    finds the 2 either way (not the resource tracker that spawning starts), and the 2 new ones after SIGHUP;
    every answer comes from a worker it counted."""
    proc, port = _run(tmp_path, fork)
    try:
        first = _wait(lambda: len(w := workers_of(proc.pid)) == 2 and _answers(port) and w, "2 serving workers")
        parent = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        same = [Path(f"/proc/{w}/cmdline").read_bytes() == parent for w in first]
        assert same == [fork, fork], (fork, same)
        assert _answers(port) <= first
        proc.send_signal(signal.SIGHUP)  # uvicorn replaces its workers one at a time
        second = _wait(lambda: len(w := workers_of(proc.pid)) == 2 and not (w & first) and w, "2 new workers", 120)
        assert _answers(port) <= second
    finally:
        proc.terminate()
        out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out
    assert workers_of(proc.pid) == set()


def test_an_unknown_uvicorn_keeps_spawning_and_says_why(serve, monkeypatch):
    import uvicorn._subprocess as sub

    original = sub.spawn
    monkeypatch.setattr(sub, "spawn", None)
    assert "not a multiprocessing context" in serve.fork_workers()
    monkeypatch.setattr(sub, "spawn", original)  # and back to it after the test, whatever fork_workers set
    assert serve.fork_workers() is None and sub.spawn.get_start_method() == "fork"

"""calm_tick.py (generator/shipped/gateway_hooks/): a real uvicorn server, patched in a process of its own, ticks once
a second instead of ten times, keeps its Date header current and still ends at once on SIGTERM; uvicorn's parent of
two workers, patched, still rolls them on SIGHUP, ends on SIGTERM at once and replaces a worker that died."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from generator.operate.runtime.ports import free_port
from generator.shipped.on_demand.process_group import signal_group

HOOKS = Path(__file__).resolve().parents[2] / "generator" / "shipped" / "gateway_hooks"
SERVER = """
import sys, uvicorn, uvicorn.server, calm_tick
port, interval, patched = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1"
assert not patched or calm_tick.calm(uvicorn.server.Server, interval)
ticks = []
on_tick = uvicorn.server.Server.on_tick
async def counted(self, counter):
    ticks.append(counter)
    return await on_tick(self, counter)
uvicorn.server.Server.on_tick = counted
async def app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(len(ticks)).encode()})
uvicorn.run(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
"""


def serve(interval: float, patched: bool = True):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), str(interval), "1" if patched else "0"],
        cwd=HOOKS,
        start_new_session=True,  # stop() ends its whole group
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url)
            return proc, url
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                pytest.fail(f"the server did not start (exit {proc.poll()})")
            time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    """Kill the process and everything in its group: a parent's workers and multiprocessing's resource tracker too
    (killed alone, the parent left them running after the test)."""
    signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_calm_server_ticks_once_a_second_and_its_date_moves():
    proc, url = serve(1.0)
    plain, plain_url = serve(1.0, patched=False)
    try:
        first = httpx.get(url)
        base = int(httpx.get(plain_url).text)
        time.sleep(3)
        ticks = int(httpx.get(url).text) - int(first.text)
        plain_ticks = int(httpx.get(plain_url).text) - base
        later = httpx.get(url)
    finally:
        stop(proc)
        stop(plain)
    assert 1 <= ticks <= 5, ticks  # uvicorn's own: ~30 in 3 s (beside it, unpatched)
    assert plain_ticks > 10, plain_ticks
    assert first.headers["date"] != later.headers["date"]


def test_a_calm_server_ends_on_sigterm_without_waiting_for_its_tick():
    proc, url = serve(600.0)  # a tick every 10 minutes: only the wake-up can end it in time
    try:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    finally:
        stop(proc)
    assert code == -signal.SIGTERM  # uvicorn 0.54 raises the signal again once it has shut down


def test_calm_patches_once_and_leaves_an_unknown_server_alone():
    sys.path.insert(0, str(HOOKS))
    try:
        import calm_tick
    finally:
        sys.path.remove(str(HOOKS))

    class Unknown:
        pass

    assert calm_tick.calm(Unknown) is False and not hasattr(Unknown, "_calm_tick")

    class Known:
        should_exit = False

        async def main_loop(self) -> None: ...

        async def on_tick(self, counter: int) -> bool:
            return True

    assert calm_tick.calm(Known) and calm_tick.calm(Known)
    server = Known()
    assert server.should_exit is False
    server.should_exit = True  # no loop yet: nothing to wake
    assert server.should_exit is True


PARENT = """
import sys, uvicorn, uvicorn.supervisors.multiprocess as mp, calm_tick
port, interval = int(sys.argv[1]), float(sys.argv[2])
assert calm_tick.calm_parent(mp.Multiprocess, mp.SIGNALS, mp.logger, interval)
uvicorn.run("app:app", host="127.0.0.1", port=port, workers=2, log_level="warning")
"""
APP = """
async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
"""


def parent(tmp_path, interval: float):
    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{HOOKS}:{tmp_path}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(port), str(interval)], cwd=tmp_path, env=env, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while len(workers(proc)) < 2 or not _answers(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            pytest.fail(f"the workers did not start (exit {proc.poll()})")
        time.sleep(0.2)
    return proc


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/").status_code == 200
    except httpx.TransportError:
        return False


def workers(proc: subprocess.Popen) -> set[int]:
    """The worker processes (multiprocessing's resource tracker aside)."""
    found = set()
    for child in psutil.Process(proc.pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(child.cmdline()):
                found.add(child.pid)
        except psutil.Error:  # ended (or a zombie) between the listing and the look
            continue
    return found


def wait_for(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_calm_parent_rolls_its_workers_on_sighup_and_ends_on_sigterm_without_waiting_for_its_look(tmp_path):
    proc = parent(tmp_path, 600.0)  # a look every 10 minutes: only the wake-up can handle a signal in time
    try:
        before = workers(proc)
        proc.send_signal(signal.SIGHUP)
        rolled = wait_for(lambda: len(workers(proc)) == 2 and not workers(proc) & before, 60)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    finally:
        stop(proc)
    assert rolled, "SIGHUP did not replace the workers"
    assert code == 0


def test_a_calm_parent_replaces_a_worker_that_died_at_its_next_look(tmp_path):
    proc = parent(tmp_path, 1.0)
    try:
        victim = min(workers(proc))
        os.kill(victim, signal.SIGKILL)
        replaced = wait_for(lambda: len(workers(proc)) == 2 and victim not in workers(proc), 30)
    finally:
        stop(proc)
    assert replaced, workers(proc)

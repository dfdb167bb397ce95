"""gateway_serve.py (shipped beside the hooks; compose, the local runtime and a Kubernetes pod run LiteLLM through it):
uvicorn's workers forked from a fork server that imported the app once, instead of spawned (each importing it again),
and the supervisor's count of them (workers_of) in both modes, through a rolling restart (SIGHUP) that picks up a
changed module the app imports at start (as LiteLLM's workers import the hook modules). Real uvicorn with a tiny app;
LiteLLM itself through it: tests/integration/test_gateway_basics.py (the demo's 2-worker gateway) and
tests/compose/test_compose.py."""

from __future__ import annotations

import importlib.util
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
from generator.shipped.gateway_hooks.gateway_supervisor import fork_server_of, workers_of

HOOKS = Path(__file__).resolve().parents[2] / "generator" / "shipped" / "gateway_hooks"
# the app: its answer names the worker, the process that imported the app module and the hook module's word, which
# it imports at start-up (as a LiteLLM worker imports the hook modules when it reads config.yaml)
APP = """
import importlib, os
IMPORTED_IN = os.getpid()
async def app(scope, receive, send):
    global WORD
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            WORD = importlib.import_module("tiny_hook").WORD
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": f"{os.getpid()} {IMPORTED_IN} {WORD}".encode()})
"""


@pytest.fixture()
def serve():
    spec = importlib.util.spec_from_file_location("gateway_serve", HOOKS / "gateway_serve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_gateway(tmp_path: Path, fork: bool, lifespan: str = "auto") -> tuple[list[str], dict, int]:
    """The tiny app and its hook in `tmp_path`, and the command, environment and port of a 2-worker uvicorn serving
    it (through gateway_serve's fork server when `fork`)."""
    (tmp_path / "tiny_app.py").write_text(APP)
    (tmp_path / "tiny_hook.py").write_text("WORD = 'before'\n")
    port = free_port()
    # PYTHONPATH, not sys.path: the fork server is a new interpreter (Python 3.11's does not take the parent's sys.path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HOOKS), str(tmp_path)])}
    code = (
        "import gateway_serve, uvicorn; "
        + (
            "why = gateway_serve.serve_workers_from_a_fork_server(['tiny_app']); assert why is None, why; "
            if fork
            else ""
        )
        + f"uvicorn.run('tiny_app:app', port={port}, workers=2, log_level='warning', lifespan={lifespan!r}, "
        "timeout_worker_healthcheck=60)"
    )
    return [sys.executable, "-c", code], env, port


def _run(tmp_path: Path, fork: bool) -> tuple[subprocess.Popen, int]:
    command, env, port = _tiny_gateway(tmp_path, fork)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env), port


def _wait(check, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout}s")


def _answers(port: int) -> set[tuple[int, int, str]]:
    """(worker pid, pid that imported the app, hook word) of 20 answers (new connections: both workers get some)."""
    answers = set()
    for _ in range(20):
        try:
            worker, imported_in, word = httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text.split()
        except httpx.HTTPError:
            return set()
        answers.add((int(worker), int(imported_in), word))
    return answers


def _workers(answers: set[tuple[int, int, str]]) -> set[int]:
    return {worker for worker, _, _ in answers}


@pytest.mark.parametrize("fork", [True, False], ids=["fork-server", "spawned"])
def test_workers_are_counted_forked_or_spawned_and_after_a_rolling_restart(tmp_path, fork):
    """Workers forked from the fork server (itself a fork of the gateway process, made once it imported the app)
    carry its command line and did not import the app themselves; spawned ones run multiprocessing's `spawn_main` and
    did. workers_of finds the 2 either way (not the resource tracker nor
    the fork server), and the 2 new ones after SIGHUP, which serve the hook module as it is now; every answer comes
    from a worker it counted."""
    proc, port = _run(tmp_path, fork)
    try:
        first = _wait(lambda: len(w := workers_of(proc.pid)) == 2 and _answers(port) and w, "2 serving workers")
        answers = _answers(port)
        assert _workers(answers) <= first and {word for _, _, word in answers} == {"before"}
        imported_elsewhere = {worker != imported_in for worker, imported_in, _ in answers}
        assert imported_elsewhere == {fork}, answers
        parents = {psutil.Process(w).ppid() for w in first}
        if fork:  # the gateway process imported the app once; its fork server (a fork of it) and the workers did not
            assert {imported_in for _, imported_in, _ in answers} == {proc.pid} != parents, (answers, parents)
            (server,) = parents
            assert (
                psutil.Process(server).cmdline() == psutil.Process(proc.pid).cmdline()
            )  # a fork, not a new interpreter
            assert all(psutil.Process(w).cmdline() == psutil.Process(server).cmdline() for w in first)
            assert psutil.Process(server).ppid() == proc.pid and fork_server_of(proc.pid) == server
        else:
            assert parents == {proc.pid}
            assert all("spawn_main" in " ".join(psutil.Process(w).cmdline()) for w in first)
        (tmp_path / "tiny_hook.py").write_text("WORD = 'after'\n")
        proc.send_signal(signal.SIGHUP)  # uvicorn replaces its workers one at a time
        second = _wait(lambda: len(w := workers_of(proc.pid)) == 2 and not (w & first) and w, "2 new workers", 120)
        answers = _answers(port)
        assert _workers(answers) <= second and {word for _, _, word in answers} == {"after"}, answers
    finally:
        proc.terminate()
        out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out
    assert workers_of(proc.pid) == set()


def test_an_unknown_uvicorn_keeps_spawning_and_says_why(serve, monkeypatch):
    import uvicorn._subprocess as sub

    original = sub.spawn
    monkeypatch.setattr(sub, "spawn", None)
    assert "not a multiprocessing context" in serve.serve_workers_from_a_fork_server()
    monkeypatch.setattr(sub, "spawn", original)  # and back to it after the test, whatever the call below sets
    assert serve.serve_workers_from_a_fork_server() is None and sub.spawn.get_start_method() == "forkserver"


def test_the_supervisor_rolls_a_changed_hook_in_and_reports_a_broken_one_with_the_gateways_reason(tmp_path):
    """The real supervisor in front of the tiny app through the fork server (lifespan 'on', as LiteLLM's FastAPI app
    fails its start-up on an error): a changed hook module is rolled in ("reloaded"); one that raises at import makes
    the new worker end before it serves, uvicorn keeps the old ones, and the supervisor says "reload failed", which
    reload_outcome (what `make apply` prints) carries with the worker's own error line. The old workers keep serving
    the previous hook throughout. The broken hook takes a second to fail, as LiteLLM's start-up would."""
    from generator.shipped.gateway_hooks.gateway_supervisor import digest, reload_outcome, supervised_workers

    command, env, port = _tiny_gateway(tmp_path, fork=True, lifespan="on")
    (tmp_path / "config.yaml").write_text("model_list: []\n")
    gateway = [*command, "--config", str(tmp_path / "config.yaml"), "--num_workers", "2"]
    env["GATEWAY_RELOAD_POLL"] = "0.2"
    env.pop("GATEWAY_METRICS_PORT", None)
    log = tmp_path / "gateway.log"
    with log.open("wb") as out:
        sup = subprocess.Popen(
            [sys.executable, str(HOOKS / "gateway_supervisor.py"), *gateway], env=env, stdout=out, stderr=out
        )
    try:
        first = _wait(lambda: len(w := supervised_workers(sup.pid)) == 2 and _answers(port) and w, "2 workers")
        for word in ("after", "broken"):
            offset = log.stat().st_size
            hook = (
                f"WORD = '{word}'\n"
                if word == "after"
                else "import time\ntime.sleep(1)\nraise RuntimeError('the hook is broken')\n"
            )
            (tmp_path / "tiny_hook.py").write_text(hook)
            new = digest(tmp_path)
            done, said = _wait(
                lambda o=offset, d=new: reload_outcome(log.read_bytes()[o:].decode(errors="replace"), d),
                f"the supervisor's word on {word}",
                120,
            )
            assert done == (word == "after"), said
            assert {w for _, _, w in _answers(port)} == {"after"}, said
        assert said.startswith(f"reload failed {new}: new worker ") and "2 of 2 workers keep" in said, said
        assert "RuntimeError: the hook is broken" in said, said
        assert supervised_workers(sup.pid).isdisjoint(first)  # the workers of the good reload kept serving
    finally:
        sup.terminate()
        sup.wait(timeout=60)
    assert sup.returncode == 0, log.read_text()[-3000:]

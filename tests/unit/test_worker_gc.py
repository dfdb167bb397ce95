"""What only a gateway worker does: its garbage collection (generator/shipped/gateway_hooks/worker_gc.py) and its
shared backend client (backend_client.py). CPython 3.11's contextvars HAMT crash (python/cpython#148891) reproduced
on this interpreter with CPython's own collector, and gone when the same work collects at safe points only, as a
gateway worker does; a worker that loads the generated hooks the way LiteLLM does (on its event loop, in a process
gateway_serve.py started) has automatic collection off, its imports frozen and one backend client; any other
process that imports them keeps CPython's collector and LiteLLM's clients. Each in a subprocess: the switch is per
process."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from generator.shipped.gateway_hooks.gateway_serve import SERVED_ENV as SERVED

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "generator" / "shipped" / "gateway_hooks"

# The crash's mechanism (the issue's): cyclic garbage with a weakref whose callback sets a context variable, and a
# collection that starts while ContextVar.set allocates a node of a multi-level HAMT. ITERATIONS sets with garbage
# made before each; prints how many callbacks ran (how much garbage was collected).
REPRO = """
import asyncio, contextvars, gc, sys, weakref
pads = [contextvars.ContextVar(f"pad{i}") for i in range(64)]
var = contextvars.ContextVar("var")
refs, fired = [], [0]

class Node:
    pass

def callback(_):
    fired[0] += 1
    var.set(object())

def garbage():
    node = Node()
    node.me = node
    refs.append(weakref.ref(node, callback))

def work(n, safe_point):
    for p in pads:
        p.set(object())
    for i in range(n):
        garbage()
        safe_point()
        pads[i % 64].set(object())
        if len(refs) > 1000:
            del refs[:500]

async def main(mode, n):
    if mode == "automatic":
        gc.set_threshold(1)  # a collection at nearly every allocation: inside ContextVar.set's too
        contextvars.Context().run(work, n, lambda: None)
        return
    import worker_gc
    assert worker_gc.arm() and not gc.isenabled()
    worker_gc.THRESHOLDS = (1, 10, 10)  # as eager, at safe points only
    contextvars.Context().run(work, n, worker_gc.safe_point)
    before = fired[0]
    garbage()
    worker_gc.THRESHOLDS = (1, 1, 1)
    await asyncio.sleep(worker_gc.TICK + 0.3)  # the loop's timer (armed on import) collects it
    print(before, fired[0] - before)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""
ITERATIONS = 100_000


def no_core_dump() -> None:
    # the deliberate crash must leave nothing behind: a machine whose core_pattern is `core` and whose limit allows
    # one would write it into the child's working directory (in the checkout: a file CI's clean-tree check refuses)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(code: str, *args: str, env: dict[str, str] | None = None, cwd: Path = HOOKS) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        preexec_fn=no_core_dump,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(HOOKS), **(env or {})},
    )


def test_the_crash_reproduces_here_with_cpythons_own_collector(tmp_path):
    out = run(REPRO, "automatic", str(ITERATIONS), cwd=tmp_path)
    assert out.returncode == -signal.SIGSEGV, (
        f"exit {out.returncode}, not SIGSEGV: does {sys.version.split()[0]} have python/cpython#148891's fix? "
        f"then worker_gc.py can go. {out.stderr[-500:]}"
    )


def test_collecting_at_safe_points_only_does_not_crash_and_collects_the_garbage():
    out = run(REPRO, "safe-points", str(ITERATIONS), env={SERVED: "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    during, by_the_timer = map(int, out.stdout.split())
    assert during >= ITERATIONS - 1, "the garbage of the loop was not collected at its safe points"
    assert by_the_timer == 1, "the event loop's timer did not collect"


LOAD_LIKE_A_WORKER = """
import asyncio, gc, sys
async def start():  # LiteLLM loads custom auth from config.yaml in its start-up, on the worker's event loop
    sys.path.insert(0, ".")
    import gateway_guard, litellm
    print(gc.isenabled(), gc.get_freeze_count() > 10000, type(litellm.aclient_session).__name__)
asyncio.run(start())
"""


def test_a_worker_that_loads_the_generated_hooks_collects_only_at_safe_points_and_froze_its_imports():
    out = subprocess.run(
        [sys.executable, "-c", LOAD_LIKE_A_WORKER],
        cwd=ROOT / "litellm",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", SERVED: "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # and LiteLLM's text-completion paths share one backend client (backend_client.py), not one per request
    assert out.stdout.split() == ["False", "True", "AsyncClient"]


UNSERVED = """
import asyncio, gc
async def start():
    import backend_client, worker_gc
    print(gc.isenabled(), gc.get_freeze_count() > 0, backend_client.install())
asyncio.run(start())
"""


def test_without_gateway_serves_variable_a_process_that_imports_the_hooks_keeps_cpythons_collector():
    """A unit test, a script: the same imports on an event loop change nothing, and no backend client is shared
    (one client must not outlive the event loop it was first used on)."""
    out = run(UNSERVED)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False", "False"]


GUARD_FIRST = """
import asyncio, gc, weakref
async def main():
    import request_guard, worker_gc
    worker_gc.THRESHOLDS = (1, 1, 1)
    class Node:
        pass
    node = Node()
    node.me = node
    seen = weakref.ref(node)
    del node
    async def app(scope, receive, send):
        print(seen() is None)
    await request_guard.RequestGuard(app, lambda key: True, "")({"type": "lifespan"}, None, None)
asyncio.run(main())
"""


def test_the_request_guard_collects_first_on_every_request():
    out = run(GUARD_FIRST, env={SERVED: "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True"], "the garbage made before the request was not collected when it came"


def test_gateway_serve_switches_it_on_for_litellm_and_its_workers(tmp_path):
    """gateway_serve.main sets the variable before LiteLLM's CLI runs (a stand-in `litellm` package that reports it);
    the workers get the gateway process's environment (test_gateway_serve.py)."""
    cli = tmp_path / "litellm" / "proxy"
    cli.mkdir(parents=True)
    (tmp_path / "litellm" / "__init__.py").write_text("")
    (cli / "__init__.py").write_text("")
    (cli / "proxy_cli.py").write_text(f"import os\ndef run_server():\n    print(os.environ.get({SERVED!r}))\n")
    out = run(
        "import gateway_serve; gateway_serve.main(['--port', '1'])",
        env={"PYTHONPATH": os.pathsep.join([str(HOOKS), str(tmp_path)])},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1"]

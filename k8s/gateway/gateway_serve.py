# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""Run LiteLLM's proxy in this process with its uvicorn workers forked from a fork server that is itself a fork of this
process, made once LiteLLM is imported: ``python3 gateway_serve.py ARGS`` (ARGS: the ``litellm`` CLI's own arguments).

With ``--num_workers N`` > 1, LiteLLM's CLI imports the whole proxy, then uvicorn starts each worker with
multiprocessing's *spawn*: a new interpreter that imports the whole proxy again (~7 CPU-s here), for every worker at
start and for every new worker of a rolling reload. Here uvicorn's context is multiprocessing's *forkserver* instead,
and its fork server is not the fresh interpreter multiprocessing would start (which imported the proxy once more,
~10 CPU-s a gateway start) but a fork of this process made right after it imported the proxy and before LiteLLM's CLI
ran: every worker, at start and on a rolling reload, is a fork of that server and runs the proxy's start-up only (it
reads config.yaml and imports the hook modules, so a reload still picks up a changed hook module). Each worker gets
what a spawned worker gets: the pickled uvicorn config, the listening sockets, and this process's environment as it is
when the worker starts (LiteLLM's CLI sets WORKER_CONFIG and more after the fork server was made).

Why not plain *fork* from this process when uvicorn starts a worker (tried, docs/testing.md): by then it runs other
threads (LiteLLM's query-engine reaper, started just before uvicorn) and holds the state its CLI built; in 1 of 4 CI
runs both freshly forked workers hung after LiteLLM's banner. The fork server is made while this process is one
Python thread that has done nothing but import (numpy's idle BLAS thread aside, as in a fresh fork server): forking
that is what multiprocessing's forkserver is for.

The switch is uvicorn's module-level ``spawn`` context (``uvicorn/_subprocess.py``, uvicorn 0.3x, which LiteLLM
pins) and multiprocessing's ``util.spawnv_passfds`` while the fork server starts: if this interpreter has no LiteLLM
or uvicorn keeps it elsewhere, LiteLLM runs as its CLI would (spawned workers) and one line says so. Standard library
only until LiteLLM is imported. What only a gateway worker may do (collect garbage at safe points only, worker_gc.py;
share one backend client, backend_client.py) the hook modules do when `served()`: this sets it in the environment
LiteLLM and its workers get; a unit test or a script that imports the hooks is left as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import multiprocessing.context
import os
import sys

NAME = "gateway-serve"
SERVED_ENV = "GATEWAY_SERVED"  # "1" in LiteLLM's process and its workers: what only a gateway worker does (served())
PRELOAD = ["litellm.proxy.proxy_server"]  # what every worker imports first (uvicorn's app: proxy_server:app)


def served() -> bool:
    """True in LiteLLM's process started by main() and in its workers."""
    return os.environ.get(SERVED_ENV) == "1"


def _run_with_env(env: dict[str, str], started, /, **kwargs) -> None:
    """In a worker: the environment the gateway process had when it started the worker, then uvicorn's own start
    (`started`: uvicorn's subprocess_started, whose keywords include a `target` of its own)."""
    os.environ.clear()
    os.environ.update(env)
    started(**kwargs)


class ForkServerWithEnv(multiprocessing.context.ForkServerContext):
    """multiprocessing's forkserver context whose processes take the starting process's environment along."""

    # a factory method where multiprocessing has the class itself: uvicorn only calls it
    def Process(self, target=None, kwargs=None, **kw):  # type: ignore[override]
        return multiprocessing.context.ForkServerProcess(
            target=_run_with_env, args=(dict(os.environ), target), kwargs=kwargs or {}, **kw
        )


def _fork_server_here(preload: list[str]) -> None:
    """Start multiprocessing's fork server as a fork of this process (which has imported `preload`) instead of a new
    interpreter: its `main` loop runs in the child, with only the fds it is given (and stdio) open."""
    from multiprocessing import forkserver, util

    spawnv = util.spawnv_passfds

    def fork_instead(path, args, passfds):
        if not any("multiprocessing.forkserver import main" in os.fsdecode(a) for a in args):
            return spawnv(path, args, passfds)  # the resource tracker: a process of its own, as always
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            return pid
        try:
            keep = {0, 1, 2, *passfds}
            for fd in [int(fd) for fd in os.listdir("/proc/self/fd")]:
                if fd not in keep:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            forkserver.main(passfds[0], passfds[1], preload)  # imports nothing new: `preload` is there already
        finally:
            os._exit(0)

    util.spawnv_passfds = fork_instead
    try:
        forkserver.ensure_running()
    finally:
        util.spawnv_passfds = spawnv


def _build_route_contexts() -> None:
    """FastAPI's route contexts of the proxy's routers, built once here for every worker (route_order.py, beside
    this file): each worker's search for its hot routes at start would build them again (~1 CPU-s)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        import route_order
    except ImportError:  # a copy without it: each worker builds them when it needs them, as before
        return
    route_order.build_route_contexts()


def serve_workers_from_a_fork_server(preload: list[str] = PRELOAD) -> str | None:
    """Import `preload` here and make uvicorn start its workers from a fork server forked from this process now;
    None when done, else why not (and uvicorn spawns as before)."""
    try:
        import uvicorn._subprocess as subprocess_module
    except ImportError as e:
        return f"no uvicorn here ({e})"
    if not isinstance(getattr(subprocess_module, "spawn", None), multiprocessing.context.BaseContext):
        return "uvicorn._subprocess.spawn is not a multiprocessing context in this uvicorn"
    for module in preload:
        importlib.import_module(module)
    if "litellm.proxy.proxy_server" in preload:
        _build_route_contexts()
    context = ForkServerWithEnv()
    context.set_forkserver_preload(preload)
    _fork_server_here(preload)
    subprocess_module.spawn = context  # type: ignore[assignment]  # typed as its spawn context: the point is the swap
    return None


def _num_workers(args: list[str]) -> int:
    """The CLI's --num_workers (the supervisor always gives it, resolved); LiteLLM's NUM_WORKERS, else 1."""
    for i, arg in enumerate(args):
        value = args[i + 1] if arg == "--num_workers" and i + 1 < len(args) else arg.partition("--num_workers=")[2]
        if value.isdigit():
            return int(value)
    value = os.environ.get("NUM_WORKERS", "1")
    return int(value) if value.isdigit() else 1


def _calm_uvicorn() -> None:
    """uvicorn's server loop ticking once a second, not ten times, and its parent looking at its workers every 2 s,
    not twice a second (calm_tick.py, beside this file)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        import calm_tick
        import uvicorn.server
        import uvicorn.supervisors.multiprocess as multiprocess
    except ImportError:  # a copy without it, or no uvicorn: uvicorn ticks as it does
        return
    if not calm_tick.calm(uvicorn.server.Server):
        print(f"{NAME}: uvicorn's server loop is not the one calm_tick knows: 10 ticks a second", file=sys.stderr)
    if not calm_tick.calm_parent(multiprocess.Multiprocess, multiprocess.SIGNALS, multiprocess.logger):
        print(f"{NAME}: uvicorn's parent is not the one calm_tick knows: 2 looks a second", file=sys.stderr)


def main(args: list[str]) -> None:
    os.environ[SERVED_ENV] = "1"  # the hook modules' switch for what only a gateway worker does (served())
    if importlib.util.find_spec("litellm") is None:  # an image whose `litellm` CLI runs another interpreter
        print(
            f"{NAME}: no LiteLLM in {sys.executable}: running the litellm CLI (workers spawned)",
            file=sys.stderr,
            flush=True,
        )
        os.execvp("litellm", ["litellm", *args])
    _calm_uvicorn()  # before the fork server is made: every worker is a fork of it
    why = serve_workers_from_a_fork_server() if _num_workers(args) > 1 else None  # one worker: uvicorn forks none
    if why:
        print(
            f"{NAME}: uvicorn's workers are spawned, not forked from a fork server: {why}", file=sys.stderr, flush=True
        )
    from litellm.proxy.proxy_cli import run_server

    sys.argv = ["litellm", *args]
    run_server()  # click: parses sys.argv[1:], exits with the server's code


if __name__ == "__main__":
    main(sys.argv[1:])

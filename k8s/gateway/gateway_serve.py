# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""Run LiteLLM's proxy in this process with its uvicorn workers started from a fork server that has already imported
LiteLLM, not spawned: ``python3 gateway_serve.py ARGS`` (ARGS: the ``litellm`` CLI's own arguments).

With ``--num_workers N`` > 1, LiteLLM's CLI imports the whole proxy, then uvicorn starts each worker with
multiprocessing's *spawn*: a new interpreter that imports the whole proxy again (~7 CPU-s here), for every worker at
start and for every new worker of a rolling reload. Here uvicorn's context is multiprocessing's *forkserver* instead,
with LiteLLM's proxy module preloaded: the first worker start launches one fresh interpreter (the fork server) that
imports the proxy once and then only forks; every worker, at start and on a rolling reload, is a fork of it and runs
the proxy's start-up only (it reads config.yaml and imports the hook modules, so a reload still picks up a changed
hook module). The workers get what a spawned worker gets (the pickled uvicorn config, the listening sockets, the
environment the parent had when the first worker started) and inherit nothing of the parent's run time.

Why not plain *fork* from the parent (tried, docs/testing.md): the parent forks with other threads running (LiteLLM's
query-engine reaper, started just before uvicorn) and with the state its CLI built; in 1 of 4 CI runs both freshly
forked workers hung after LiteLLM's banner. The fork server is single-threaded Python that has done nothing but
import (numpy's idle BLAS thread aside): forking it is what multiprocessing's forkserver is for.

The switch is uvicorn's module-level ``spawn`` context (``uvicorn/_subprocess.py``, uvicorn 0.3x, which LiteLLM
pins): if this interpreter has no LiteLLM or uvicorn keeps it elsewhere, LiteLLM runs as its CLI would (spawned
workers) and one line says so. Standard library only until LiteLLM is imported.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import sys

NAME = "gateway-serve"
PRELOAD = ["litellm.proxy.proxy_server"]  # what every worker imports first (uvicorn's app: proxy_server:app)


def serve_workers_from_a_fork_server(preload: list[str] = PRELOAD) -> str | None:
    """Make uvicorn start its workers from a fork server that imported `preload`; None when done, else why not."""
    try:
        import uvicorn._subprocess as subprocess_module
    except ImportError as e:
        return f"no uvicorn here ({e})"
    if not isinstance(getattr(subprocess_module, "spawn", None), multiprocessing.context.BaseContext):
        return "uvicorn._subprocess.spawn is not a multiprocessing context in this uvicorn"
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preload)
    subprocess_module.spawn = context
    return None


def main(args: list[str]) -> None:
    if importlib.util.find_spec("litellm") is None:  # an image whose `litellm` CLI runs another interpreter
        print(f"{NAME}: no LiteLLM in {sys.executable}: running the litellm CLI (workers spawned)", file=sys.stderr,
              flush=True)
        os.execvp("litellm", ["litellm", *args])
    why = serve_workers_from_a_fork_server()
    if why:
        print(f"{NAME}: uvicorn's workers are spawned, not forked from a fork server: {why}", file=sys.stderr,
              flush=True)
    from litellm.proxy.proxy_cli import run_server

    sys.argv = ["litellm", *args]
    run_server()  # click: parses sys.argv[1:], exits with the server's code


if __name__ == "__main__":
    main(sys.argv[1:])

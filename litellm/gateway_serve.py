# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""Run LiteLLM's proxy in this process with its uvicorn workers forked, not spawned: ``python3 gateway_serve.py ARGS``
(ARGS: the ``litellm`` CLI's own arguments).

With ``--num_workers N`` > 1, LiteLLM's CLI imports the whole proxy, then uvicorn starts each worker with
multiprocessing's *spawn*: a new interpreter that imports the whole proxy again, for every worker at start and for
every new worker of a rolling reload. Forked instead, a worker starts from the parent's imports and only runs the
proxy's start-up (it reads config.yaml and imports the hook modules). Measured on this repo's 2-core machine,
idle, LiteLLM 1.108.7, a 2-worker gateway up to its first answer: 26-30 CPU-s and 19-21 s spawned, 15 CPU-s and
15 s forked (docs/architecture.md). LiteLLM's own gunicorn mode (``--run_gunicorn``, preload) does the same; uvicorn
is kept for its rolling reload (a new worker serves before the old one stops: gateway_supervisor.py).

The parent never imports the hook modules (LiteLLM loads config.yaml's callbacks in each worker), so the workers a
rolling reload forks import the files as they are then: a changed hook module is picked up as before. A change to
LiteLLM itself (a new image) restarts the gateway anyway.

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


def fork_workers() -> str | None:
    """Make uvicorn start its workers with fork; None when done, else why not."""
    try:
        import uvicorn._subprocess as subprocess_module
    except ImportError as e:
        return f"no uvicorn here ({e})"
    context = getattr(subprocess_module, "spawn", None)
    if not isinstance(context, multiprocessing.context.BaseContext):
        return "uvicorn._subprocess.spawn is not a multiprocessing context in this uvicorn"
    subprocess_module.spawn = multiprocessing.get_context("fork")
    return None


def main(args: list[str]) -> None:
    if importlib.util.find_spec("litellm") is None:  # an image whose `litellm` CLI runs another interpreter
        print(f"{NAME}: no LiteLLM in {sys.executable}: running the litellm CLI (workers spawned)", file=sys.stderr,
              flush=True)
        os.execvp("litellm", ["litellm", *args])
    why = fork_workers()
    if why:
        print(f"{NAME}: uvicorn's workers are spawned, not forked: {why}", file=sys.stderr, flush=True)
    from litellm.proxy.proxy_cli import run_server

    sys.argv = ["litellm", *args]
    run_server()  # click: parses sys.argv[1:], exits with the server's code


if __name__ == "__main__":
    main(sys.argv[1:])

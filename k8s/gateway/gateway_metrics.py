# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""The gateway's metrics process: ``python3 gateway_metrics.py --host H --port P --dir D``.

Serves on H:P (``/metrics``; any path) the sum of what every gateway worker wrote to D, the workers'
PROMETHEUS_MULTIPROC_DIR: LiteLLM's prometheus callback's series, or the guard's counters
(request_counters.py). This is prometheus_client's multiprocess mode as its documentation gives it: a
MultiProcessCollector in a registry of its own, served by prometheus_client's own HTTP server.
gateway_start.py starts it beside LiteLLM; it exits when its parent (the supervisor, or the gateway
that gateway_start.py became) is gone.

LiteLLM ships the same server (``litellm.proxy.prometheus_metrics_server``: the same collector behind
FastAPI), but it imports all of LiteLLM first: 2.6 CPU-s and 200 MB resident per start, measured, where
this one takes ~0.1 CPU-s and ~20 MB (docs/observability.md), and a gateway starts often (every test
stack, every restart of a one-worker gateway). Needs only prometheus_client, which LiteLLM's proxy
installs (its `prometheus` callback).
"""

from __future__ import annotations

import argparse
import os
import time

PARENT_POLL = 1.0  # seconds between looks at whether the parent is still there


def serve(host: str, port: int, folder: str) -> None:
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    os.makedirs(folder, exist_ok=True)  # the collector refuses a folder that does not exist (yet)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=folder)
    start_http_server(port, addr=host, registry=registry)  # a daemon thread: it ends with this process


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", required=True, help="the workers' PROMETHEUS_MULTIPROC_DIR")
    args = parser.parse_args(argv)
    parent = os.getppid()
    serve(args.host, args.port, args.dir)
    while os.getppid() == parent:
        time.sleep(PARENT_POLL)


if __name__ == "__main__":
    main()

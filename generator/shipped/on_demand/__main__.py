"""`python -m generator.shipped.on_demand --config on-demand.json`: the on-demand controller (see server.py).

One process, one worker: it must be the only one deciding what is loaded. SIGTERM stops it and every
backend it started as a local process (compose containers are left to `docker compose down`).
"""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from .config import ConfigProblem, load_config
from .server import Controller


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generator.shipped.on_demand", description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="the controller's JSON config (on-demand.json)")
    ap.add_argument("--host", help="address to listen on (default: the config's host, else 0.0.0.0)")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s on-demand %(levelname)s %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per proxied request otherwise
    try:
        config = load_config(args.config)
        controller = Controller(config)  # its drivers: a model it could never load is a config problem
    except ConfigProblem as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = uvicorn.Server(
        uvicorn.Config(
            controller,
            host=args.host or config.host,
            port=config.port,
            workers=1,
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=3,
        )
    )
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

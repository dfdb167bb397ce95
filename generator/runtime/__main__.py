"""`python -m generator.runtime up|down`: run models.yml as local processes (no Docker, no GPU needed).

    python -m generator.runtime up --models examples/cpu-demo/models.yml   # start, wait, leave running
    python -m generator.runtime down                                       # stop what `up` started
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

from ..errors import ConfigError, print_problems
from ..loader import load_plan
from .local import LocalStack, StackError, stop_recorded

DEFAULT_STATE = Path(".cache/local-stack")
DEFAULT_VLLM_PYTHON = ".venv-vllm/bin/python"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generator.runtime", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start every model and the gateway, wait until ready")
    up.add_argument("--models", type=Path, default=Path("models.yml"))
    up.add_argument("--vllm-python", default=os.environ.get("VLLM_PYTHON", DEFAULT_VLLM_PYTHON),
                    help="interpreter with vLLM installed (default: $VLLM_PYTHON or .venv-vllm/bin/python)")
    up.add_argument("--timeout", type=float, default=900, help="seconds to wait for the backends")
    for p in (up, sub.add_parser("down", help="stop the processes `up` started")):
        p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    args = ap.parse_args(argv)
    console = Console(stderr=True, highlight=False)
    if args.action == "down":
        stopped = stop_recorded(args.state_dir)
        console.print(f"stopped {stopped} process(es)")
        return 0
    try:
        plan = load_plan(args.models)
    except ConfigError as exc:
        print_problems(exc, console)
        return 2
    if not Path(args.vllm_python).exists():
        console.print(f"[red]error:[/] no vLLM interpreter at {args.vllm_python}; run `make venv-vllm` or set VLLM_PYTHON")
        return 2
    stop_recorded(args.state_dir)  # a previous `up` in this state dir
    stack = LocalStack(plan, args.state_dir, args.vllm_python, console=console)
    try:
        stack.start(timeout=args.timeout)
    except StackError as exc:
        console.print(f"[red]error:[/] {exc}", soft_wrap=True)
        return 1
    except KeyboardInterrupt:
        return 130
    console.print(f"gateway ready at {stack.gateway_url}/v1; key: {plan.gateway.master_key_env} in {stack.env_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m generator.operate.runtime up|down`: run models.yml as local processes (no Docker, no GPU needed).

    python -m generator.operate.runtime up --models examples/cpu-demo/models.yml   # start, wait, leave running
    python -m generator.operate.runtime down                                       # stop what `up` started

`up` reuses a stack an earlier `up` left running when it was started from the same models.yml and code
(every process alive and healthy: nothing is restarted); otherwise it stops that one and starts afresh.
`up` exits 0 when every model is ready, 1 when some failed (the others and the gateway keep running;
each failure is printed with its exit code and last log lines), 2 for a bad models.yml.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

from ...compile.load.loader import load_plan
from ...compile.output import missing_provider_keys
from ...errors import ConfigError, print_problems
from .local import LocalStack, StackError, down

DEFAULT_STATE = Path(".cache/local-stack")
DEFAULT_VLLM_PYTHON = ".venv-vllm/bin/python"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generator.operate.runtime", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start every model and the gateway, wait until ready")
    up.add_argument("--models", type=Path, default=Path("models.yml"))
    up.add_argument(
        "--vllm-python",
        default=os.environ.get("VLLM_PYTHON", DEFAULT_VLLM_PYTHON),
        help="interpreter with vLLM installed (default: $VLLM_PYTHON or .venv-vllm/bin/python)",
    )
    up.add_argument("--timeout", type=float, default=900, help="seconds to wait for the backends (all, in order)")
    for p in (up, sub.add_parser("down", help="stop the processes `up` started")):
        p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    args = ap.parse_args(argv)
    console = Console(stderr=True, highlight=False)
    if args.action == "down":
        stopped = down(args.state_dir)
        console.print(f"stopped {stopped} process(es)")
        return 0
    try:
        plan = load_plan(args.models, notify=lambda line: console.print(line, soft_wrap=True, markup=False))
    except ConfigError as exc:
        print_problems(exc, console)
        return 2
    if not Path(args.vllm_python).exists():
        console.print(
            f"[red]error:[/] no vLLM interpreter at {args.vllm_python}; run `make venv-vllm` or set VLLM_PYTHON"
        )
        return 2
    running = LocalStack.attach(plan, args.state_dir, args.vllm_python, console=console)
    if running:
        console.print(
            f"already running from {args.models}, healthy: reusing it (stop it with `make down`)", soft_wrap=True
        )
        console.print(
            f"gateway ready at {running.gateway_url}/v1 serving "
            f"{', '.join(m.served_name for m in plan.client_models)}; key: {plan.gateway.master_key_env} in "
            f"{running.env_path}",
            soft_wrap=True,
        )
        return 0
    if stopped := down(args.state_dir):  # a previous `up` in this state dir (other file, or not healthy)
        console.print(
            f"stopped {stopped} process(es) of the stack that ran before (another models.yml, or not healthy)"
        )
    stack = LocalStack(plan, args.state_dir, args.vllm_python, console=console)
    for line in missing_provider_keys(plan, stack.env_path):
        console.print(f"[yellow]warning:[/] {line}", soft_wrap=True)
    try:
        failures = stack.start(timeout=args.timeout, partial=True)
    except StackError as exc:
        console.print(f"[red]error:[/] {exc}", soft_wrap=True)
        return 1
    except KeyboardInterrupt:
        return 130
    for failure in failures:
        console.print(f"[red]failed:[/] {failure}", soft_wrap=True)
    failed = {f.name for f in failures}
    serving = list(
        dict.fromkeys(
            m.served_name + (" (on demand)" if m.on_demand and plan.controller else "")
            for m in plan.models
            if m.name not in failed
        )
    ) + [f"{m.served_name} (hosted)" for m in plan.hosted]  # a model's replicas: once
    console.print(
        f"gateway ready at {stack.gateway_url}/v1 serving {', '.join(serving) or 'no model'}; "
        f"key: {plan.gateway.master_key_env} in {stack.env_path}",
        soft_wrap=True,
    )
    if failures:
        console.print(
            f"[red]{len(failures)} of {len(plan.models)} model(s) failed to start: "
            f"{', '.join(sorted(failed))}[/] (requests for them get an error; the rest is up; "
            f"stop everything with `python -m generator.operate.runtime down --state-dir {args.state_dir}`)",
            soft_wrap=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m generator [TARGET]`: models.yml -> generated files.

TARGET (or --target) picks what is written; the default, `stack`, is compose/docker-compose.yml +
litellm/config.yaml (+ its hooks). Every target is rendered from the same validated plan.

Exit codes: 0 written (or up to date), 1 --check found drift, 2 bad input (one line per problem).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from rich.console import Console

from .compile.load.loader import load_plan
from .compile.output import (
    ENV_FILE,
    checked_targets,
    ensure_env_file,
    missing_provider_keys,
    remove_orphans,
    render_files,
    stale_files,
    write_files,
)
from .compile.renderers import TARGETS
from .compile.summary import print_summary
from .errors import ConfigError, print_problems
from .operate.keys import write_hashes

EXIT_DRIFT, EXIT_BAD_INPUT = 1, 2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m generator", description="Generate the gateway stack from models.yml.")
    ap.add_argument(
        "target_arg",
        nargs="?",
        choices=sorted(TARGETS),
        metavar="TARGET",
        help=f"what to write: {', '.join(sorted(TARGETS))} (default: stack)",
    )
    ap.add_argument("--target", choices=sorted(TARGETS), help="same as TARGET")
    ap.add_argument("--models", type=Path, default=Path("models.yml"), help="the models file (default: models.yml)")
    ap.add_argument("--out", type=Path, default=Path("."), help="root to write compose/ and litellm/ into (default: .)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if the files on disk are stale")
    ap.add_argument("--quiet", "-q", action="store_true", help="no summary table")
    ap.add_argument("--verbose", "-v", action="store_true", help="tracebacks for unexpected errors")
    args = ap.parse_args(argv)
    if args.target_arg and args.target and args.target_arg != args.target:
        ap.error(f"two targets given: {args.target_arg} and {args.target}")
    args.target = args.target_arg or args.target or "stack"
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["apply"]:  # not a target: it changes a running stack (generator/operate/apply.py)
        from .operate.apply import main as apply_main

        return apply_main(argv[1:])
    args = parse_args(argv)
    out, err = Console(width=max(120, Console().width)), Console(stderr=True, highlight=False)
    try:
        plan = load_plan(
            args.models, notify=None if args.quiet else lambda line: err.print(line, soft_wrap=True, markup=False)
        )
        targets = checked_targets(args.target, args.out) if args.check else (args.target,)
        rendered = {target: render_files(plan, (target,)) for target in targets}
    except ConfigError as exc:
        print_problems(exc, err)
        err.print("nothing was written", soft_wrap=True)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - a bug of ours, not the user's input
        if args.verbose:
            traceback.print_exc()
        err.print(
            f"[red]internal error:[/] {type(exc).__name__}: {exc} (run with --verbose for details)", soft_wrap=True
        )
        return 3
    if args.check:
        stale = [
            (rel, target)
            for target, files in rendered.items()
            for rel in stale_files(files, args.out, TARGETS[target].folders)
        ]
        for rel, target in stale:
            err.print(
                f"stale: {rel} differs from what {args.models} generates; run `{TARGETS[target].regenerate}`",
                soft_wrap=True,
            )
        if not stale:
            out.print(f"up to date: {', '.join(rel for files in rendered.values() for rel in files)}")
        return EXIT_DRIFT if stale else 0
    target = TARGETS[args.target]
    files = rendered[args.target]
    changed = write_files(files, args.out)
    changed += [f"(removed) {rel}" for rel in remove_orphans(files, args.out, target.folders)]
    keys = target.keys_file  # (the file of the stack's keys, its header), or None
    env_file = keys[0] if keys else None
    added = ensure_env_file(args.out / keys[0], plan.secret_envs, keys[1]) if keys else []
    if env_file and plan.people:  # the hashes of people's keys (make key) for the gateway, for the people still there
        write_hashes(plan, args.out / env_file, args.out / Path(files_dir(target.name)))
    if not args.quiet:
        print_summary(
            plan, out, keys_file=env_file or ENV_FILE, url=target.gateway_url(plan) if target.gateway_url else None
        )
    for warning in [*target.warnings(plan), *(missing_provider_keys(plan, args.out / env_file) if env_file else [])]:
        err.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    out.print(f"wrote {', '.join(changed)}" if changed else "generated files already up to date")
    if added:
        out.print(f"created {len(added)} new key(s) in {args.out / env_file} (mode 600, git-ignored)")
    return 0


def files_dir(target: str) -> str:
    """Where a target's gateway reads people-keys.json: beside config.yaml (compose, local) or k8s/ (a Secret)."""
    return "k8s" if target == "k8s" else "litellm"


if __name__ == "__main__":
    sys.exit(main())

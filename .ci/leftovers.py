"""Print every process still running from this checkout once the CI run's tests are over: a Python of its
environments (.venv, .venv-vllm: pytest's children, a test's server, workers a killed parent left behind, wherever
their working directory is) or anything whose command line names a path inside it. Exit 1 if there is one.

A test must end what it starts; a leak used to be found only when a later session saw it (a uvicorn parent killed
alone left its two spawned workers and multiprocessing's resource tracker running for the rest of the machine's day).
"""

from __future__ import annotations

import os
import sys

import psutil

ENVS = (".venv/", ".venv-vllm/")


def from_checkout(cmdline: list[str], cwd: str | None, root: str) -> bool:
    """Whether a process with this command line and working directory was started from the checkout at `root`."""
    if not cmdline:
        return False
    first = cmdline[0] if os.path.isabs(cmdline[0]) or cwd is None else os.path.join(cwd, cmdline[0])
    if any(os.path.normpath(first).startswith(os.path.join(root, env)) for env in ENVS):
        return True
    return any(arg.startswith(root + os.sep) for arg in cmdline)


def main(root: str, spared: set[int]) -> int:
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd"]):
        if p.pid in spared:
            continue
        cmdline = p.info["cmdline"] or []
        if from_checkout(cmdline, p.info["cwd"], root):
            left.append(f"{p.pid} {' '.join(cmdline)[:200]}")
    print("\n".join(left))
    return 1 if left else 0


if __name__ == "__main__":
    # argv: the checkout's root, then pids to spare (the CPU sampler, which finish ends)
    sys.exit(main(os.path.realpath(sys.argv[1]), {os.getpid(), os.getppid(), *map(int, sys.argv[2:])}))

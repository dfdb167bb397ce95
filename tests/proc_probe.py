"""Each process's command line and how many gloo polling threads (gloo_tcp_loop) it runs, read from /proc: the
local tests import it; the compose tests run it inside a backend's container (`python3 -c <this file's text>
[PID ...]`, JSON on stdout). Standard library only.

Spawned or forked: vLLM renames its engine process (VLLM::EngineCore) either way, and that rewrites the memory
/proc/PID/cmdline and /proc/PID/environ are read from. What multiprocessing's spawn context leaves besides is a
resource tracker process ("from multiprocessing.resource_tracker import main"), started with the first spawned child;
its fork context starts none (measured in the vllm-cpu image: spawned engine, a tracker; forked, none).
"""

from __future__ import annotations

import json
import os
import sys


def _raw(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:  # the process or thread ended meanwhile
        return b""


def _read(path: str) -> str:
    return _raw(path).replace(b"\0", b" ").decode(errors="replace").strip()


def gloo_loops(pid: int) -> int:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    return sum(_read(f"/proc/{pid}/task/{t}/comm") == "gloo_tcp_loop" for t in tasks)


def processes(pids: list[int] | None = None) -> list[dict]:
    """[{pid, ppid, cmd, gloo}] of `pids`, or of every other process this one sees (its own command line, when run
    with -c, holds this text and so SPAWN_MARKS)."""
    pids = pids or [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    return [
        {
            "pid": p,
            "ppid": int((_read(f"/proc/{p}/stat").rpartition(")")[2].split() or ["", "0"])[1]),
            "cmd": _read(f"/proc/{p}/cmdline"),
            "gloo": gloo_loops(p),
        }
        for p in pids
    ]


SPAWN_MARKS = ("multiprocessing.resource_tracker", "multiprocessing.spawn")


def spawned(procs: list[dict]) -> list[dict]:
    """The processes among `procs` that show multiprocessing's spawn (see the module's docstring)."""
    return [p for p in procs if any(mark in p["cmd"] for mark in SPAWN_MARKS)]


if __name__ == "__main__":
    print(json.dumps(processes([int(a) for a in sys.argv[1:]] or None)))

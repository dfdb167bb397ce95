"""Two process helpers the controller's local driver and the local runtime share (standard library only: the
controller's copy in its container has nothing else of the generator)."""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path


def tail(path: Path, lines: int = 25) -> str:
    try:
        with path.open(errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines))
    except FileNotFoundError:
        return "(no log)"


def signal_group(pid: int | None, sig: int) -> None:
    if pid is None:  # never started
        return
    try:
        os.killpg(pid, sig)  # the group the stack created with start_new_session
    except (ProcessLookupError, PermissionError):
        pass


def running_group(pid: int | str) -> int | None:
    """The process group of `pid` while it runs; None when it is gone or a zombie (it holds no port or memory)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state, _ppid, group = fh.read().rsplit(")", 1)[1].split()[:3]
    except (OSError, ValueError):
        return None
    return None if state == "Z" else int(group)


def group_members(pgid: int | None) -> list[int]:
    """The processes of group `pgid` that still run."""
    if pgid is None:
        return []
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and running_group(entry) == pgid]

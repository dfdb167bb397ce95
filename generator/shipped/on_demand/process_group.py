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


def group_members(pgid: int | None) -> list[int]:
    """The processes of group `pgid` that still run (zombies left out: they hold no port or memory)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                state, _ppid, group = fh.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if state != "Z" and int(group) == pgid:
            found.append(int(entry))
    return found

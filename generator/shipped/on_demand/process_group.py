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
    try:
        os.killpg(pid, sig)  # the group the stack created with start_new_session
    except (ProcessLookupError, PermissionError, TypeError):
        pass

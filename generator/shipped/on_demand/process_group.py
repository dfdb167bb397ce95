"""Two process helpers the controller's local driver and the local runtime share (standard library only: the
controller's copy in its container has nothing else of the generator)."""

from __future__ import annotations

import os
import signal
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


def _stat(path: str) -> tuple[str, int] | None:
    """(state, process group) from a /proc stat file; None when it is gone."""
    try:
        with open(path) as fh:
            state, _ppid, group = fh.read().rsplit(")", 1)[1].split()[:3]
    except (OSError, ValueError):
        return None
    return state, int(group)


def running_group(pid: int | str) -> int | None:
    """The process group of `pid` while it runs; None when it is gone or a zombie (it holds no port or memory).

    A zombie is a process whose threads have all ended: its main thread's "Z" alone is not one. The main thread of a
    killed process can end before the others; the last thread out frees the memory and then closes the files, the
    listening socket among them (an "unloaded" vLLM whose port still answered, in CI). Until then it runs."""
    stat = _stat(f"/proc/{pid}/stat")
    if stat is None:
        return None
    state, group = stat
    if state != "Z":
        return group
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    return group if any((t := _stat(f"/proc/{pid}/task/{tid}/stat")) and t[0] != "Z" for tid in threads) else None


def group_members(pgid: int | None) -> list[int]:
    """The processes of group `pgid` that still run."""
    if pgid is None:
        return []
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and running_group(entry) == pgid]


PR_SET_PDEATHSIG = 1  # linux/prctl.h
_forking: dict[str, int] = {}  # the pid of the process that forks, set just before each fork (register_at_fork)


def _die_with_parent() -> None:
    """In a just-forked child: SIGKILL when the process that forked it ends (Linux's parent-death signal), and end
    now if it already has."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: `down` still ends the session's members
        return
    if os.getppid() != _forking.get("pid"):
        os._exit(1)  # the parent ended between the fork and the prctl


def children_die_with_this_process() -> None:
    """Every process forked from now on (by this process, or its own forks in turn) ends when the process that forked
    it ends: a backend's API server killed takes its engine with it (vLLM's engine, re-parented to init, kept the
    backend's port and memory: issue 58). Linux sends the signal when the forking *thread* ends; vLLM starts its
    engine from the API server's main thread."""
    os.register_at_fork(before=lambda: _forking.__setitem__("pid", os.getpid()), after_in_child=_die_with_parent)

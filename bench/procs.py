"""Resource readings of a process and its children (the gateway and its workers), with psutil."""

from __future__ import annotations

import psutil


def _tree(pid: int, children: bool = True) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *(root.children(recursive=True) if children else [])]
    except psutil.NoSuchProcess:
        return []


def tree_rss_mb(pid: int) -> float:
    total = 0
    for p in _tree(pid):
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


def tree_cpu_s(pid: int, children: bool = True) -> float:
    """User + system CPU seconds used so far by the process and its live children (children=False: its own)."""
    total = 0.0
    for p in _tree(pid, children):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total

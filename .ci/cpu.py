"""How busy the machine's cores were during the CI run: where parallel phases would still gain (idle cores) and where
only less work would (busy cores). Standard library only (it runs before any venv exists).

    python3 .ci/cpu.py sample FILE   # every 10 s: "<seconds since start> <busy %> <runnable tasks>" (until killed),
                                     # and "proc <seconds> <kind>=<CPU seconds> ...": what used the cores, by kind
    python3 .ci/cpu.py report FILE [TESTS]  # one line per minute: busy % and a bar (and the phases .ci/run marked
                                     # ending), then CPU seconds per kind of process over the run; with TESTS (the
                                     # PYTEST_TIMELINE file tests/conftest.py appends to), the test files that held
                                     # the cores

Per kind: each process's own CPU time (utime + stime) read every POLL seconds and attributed by its command line
(a process inside a container is a host process too); what ran for less than POLL, or in a process's last POLL,
is counted as "unattributed".
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

STEP = 10.0
POLL = 2.0  # seconds between readings of every process's CPU time
TICK = os.sysconf("SC_CLK_TCK")
KINDS = (  # (kind, a regular expression on the command line), first match wins; else the parent's kind
    ("installs (pip, apt, mmdebstrap, npm)", r"\bpip3?\b|\bapt(-get)?\b|\bdpkg\b|mmdebstrap|\bnpm\b"),
    ("vLLM backends", r"vllm serve|vllm\.entrypoints|VLLM::|vllm_fork"),
    ("gateway (LiteLLM)", r"litellm"),
    ("on-demand controller", r"generator\.shipped\.on_demand"),
    ("pytest and what it runs", r"pytest"),
    ("docker engine and builds", r"dockerd|containerd|\bdocker\b|\brunc\b"),
    ("node (coding agents)", r"\bnode\b|claude|codex|opencode"),
    ("nginx, redis, prometheus", r"nginx|redis-server|prometheus"),
)
PATTERNS = [(kind, re.compile(pattern)) for kind, pattern in KINDS]


def jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot (iowait counts as idle: a core waiting on the disk is free)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return total - idle, total


def busy_since(then: tuple[int, int]) -> float:
    busy, total = jiffies()
    return 100.0 * (busy - then[0]) / max(1, total - then[1])


def kind_of(cmdline: str) -> str | None:
    return next((kind for kind, pattern in PATTERNS if pattern.search(cmdline)), None)


def processes() -> dict[int, tuple[int, str]]:
    """{pid: (its own CPU jiffies, its kind)} of every process now; a process no pattern names has its parent's kind
    (a uvicorn worker of the gateway, a compiler vLLM runs), or "other"."""
    found: dict[int, tuple[int, int, str | None]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        found[int(entry.name)] = (int(fields[11]) + int(fields[12]), int(fields[1]), kind_of(cmdline))  # utime+stime
    out = {}
    for pid, (cpu, ppid, kind) in found.items():
        for _ in range(8):  # up the parents until one is named
            if kind is not None or ppid not in found:
                break
            _, ppid, kind = found[ppid]
        out[pid] = (cpu, kind or "other")
    return out


def sample(path: Path) -> None:
    start, last, seen = time.monotonic(), jiffies(), processes()
    used: dict[str, float] = {}
    next_step = start + STEP
    with path.open("a") as f:
        f.write(f"start {time.time():.1f}\n")  # the wall clock of t=0, for the tests' timeline
        while True:
            time.sleep(POLL)
            now = processes()
            for pid, (cpu, kind) in now.items():
                used[kind] = used.get(kind, 0.0) + max(0, cpu - seen.get(pid, (0, kind))[0]) / TICK
            seen = now
            if time.monotonic() < next_step:
                continue
            next_step += STEP
            busy = busy_since(last)
            last = jiffies()
            runnable = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            t = time.monotonic() - start
            f.write(f"{t:.0f} {busy:.0f} {runnable}\n")
            f.write(
                f"proc {t:.0f} " + " ".join(f"{k.replace(' ', '_')}={v:.1f}" for k, v in sorted(used.items())) + "\n"
            )
            f.flush()
            used = {}


def by_test_file(rows: list[list[str]], timeline: Path, top: int = 25) -> None:
    """The cores' busy CPU seconds of each 10 s sample split among the test files running in it, by how long each
    ran in it (approximate: a file that waits beside a busy one gets its share; a module's stack start counts in its
    first test), then the files that held the most. Spans of the compose phase's pytest runs are marked `compose:`."""
    start = next((float(r[1]) for r in rows if r[0] == "start"), None)
    if start is None or not timeline.exists():
        return
    spans = []
    for line in timeline.read_text().splitlines():
        try:
            t = json.loads(line)
            spans.append((t["start"] - start, t["end"] - start, t["file"]))
        except (ValueError, KeyError):
            continue
    cores = os.cpu_count() or 1
    held: dict[str, float] = {}
    for r in rows:
        if r[0] in ("proc", "mark", "start"):
            continue
        t1 = float(r[0])
        t0, cpu = t1 - STEP, float(r[1]) / 100 * STEP * cores
        overlap: dict[str, float] = {}
        for a, b, name in spans:
            if b > t0 and a < t1:
                overlap[name] = overlap.get(name, 0.0) + min(b, t1) - max(a, t0)
        total = sum(overlap.values())
        for name, seconds in overlap.items() if total else [("(no test running)", 1.0)]:
            held[name] = held.get(name, 0.0) + cpu * seconds / (total or 1.0)
    print(f"ci: cpu: by test file (the cores' busy time split among the files running, by wall time; top {top}):")
    for name, secs in sorted(held.items(), key=lambda kv: -kv[1])[:top]:
        print(f"ci: cpu:   {name:60} {secs:7.0f} s")


def report(path: Path, timeline: Path | None = None) -> None:
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    rows = [r for r in rows if r[0] != "start"] + [r for r in rows if r[0] == "start"]
    minutes: dict[int, list[float]] = {}
    ended: dict[int, list[str]] = {}  # .ci/run's "mark <seconds> <phase>" lines: the phases that ended that minute
    kinds: dict[str, float] = {}
    for t, busy, *rest in rows:
        if t == "start":
            continue
        if t == "proc":
            for item in rest:
                kind, _, secs = item.rpartition("=")
                kinds[kind.replace("_", " ")] = kinds.get(kind.replace("_", " "), 0.0) + float(secs)
        elif t == "mark":
            ended.setdefault(int(float(busy) // 60), []).append(" ".join(rest))
        else:
            minutes.setdefault(int(float(t) // 60), []).append(float(busy))
    if not minutes:
        print("ci: cpu: no samples")
        return
    every = [b for m in minutes.values() for b in m]
    print(
        f"ci: cpu: {os.cpu_count()} cores, busy {sum(every) / len(every):.0f}% on average "
        f"over {len(every) * STEP:.0f}s (per minute below; an idle core is time a phase beside could use)"
    )
    for m, values in sorted(minutes.items()):
        avg = sum(values) / len(values)
        phases = f"  <- {', '.join(ended[m])} ended" if m in ended else ""
        print(f"ci: cpu: min {m:3d} {avg:4.0f}% {'#' * round(avg / 5):20}{phases}")
    busy_s = sum(every) / 100 * STEP * (os.cpu_count() or 1)
    attributed = sum(kinds.values())
    print(f"ci: cpu: {busy_s:.0f} CPU seconds in all; by kind of process:")
    for kind, secs in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"ci: cpu:   {kind:38} {secs:7.0f} s  {100 * secs / max(busy_s, 1):3.0f}%")
    print(f"ci: cpu:   {'unattributed (short-lived processes)':38} {max(0.0, busy_s - attributed):7.0f} s")
    if timeline is not None:
        by_test_file(rows, timeline)


if __name__ == "__main__":
    cmd, arg = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    if cmd == "sample":
        sample(Path(arg))
    elif cmd == "report":
        report(Path(arg), Path(sys.argv[3]) if len(sys.argv) > 3 else None)
    else:
        sys.exit(f"usage: {__doc__}")

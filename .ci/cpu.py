"""How busy the machine's cores were during the CI run: where parallel phases would still gain (idle cores) and where
only less work would (busy cores). Standard library only (it runs before any venv exists).

    python3 .ci/cpu.py sample FILE   # every 10 s: "<seconds since start> <busy %> <runnable tasks>" (until killed)
    python3 .ci/cpu.py report FILE   # one line per minute: busy % and a bar (and the phases .ci/run marked ending)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

STEP = 10.0


def jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot (iowait counts as idle: a core waiting on the disk is free)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return total - idle, total


def busy_since(then: tuple[int, int]) -> float:
    busy, total = jiffies()
    return 100.0 * (busy - then[0]) / max(1, total - then[1])


def sample(path: Path) -> None:
    start, last = time.monotonic(), jiffies()
    with path.open("a") as f:
        while True:
            time.sleep(STEP)
            busy = busy_since(last)
            last = jiffies()
            runnable = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            f.write(f"{time.monotonic() - start:.0f} {busy:.0f} {runnable}\n")
            f.flush()


def report(path: Path) -> None:
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    minutes: dict[int, list[float]] = {}
    ended: dict[int, list[str]] = {}  # .ci/run's "mark <seconds> <phase>" lines: the phases that ended that minute
    for t, busy, *rest in rows:
        if t == "mark":
            ended.setdefault(int(float(busy) // 60), []).append(" ".join(rest))
        else:
            minutes.setdefault(int(float(t) // 60), []).append(float(busy))
    if not minutes:
        print("ci: cpu: no samples")
        return
    every = [b for m in minutes.values() for b in m]
    print(f"ci: cpu: {os.cpu_count()} cores, busy {sum(every) / len(every):.0f}% on average over {len(every) * STEP:.0f}s "
          f"(per minute below; an idle core is time a phase beside could use)")
    for m, values in sorted(minutes.items()):
        avg = sum(values) / len(values)
        phases = f"  <- {', '.join(ended[m])} ended" if m in ended else ""
        print(f"ci: cpu: min {m:3d} {avg:4.0f}% {'#' * round(avg / 5):20}{phases}")


if __name__ == "__main__":
    cmd, arg = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    if cmd == "sample":
        sample(Path(arg))
    elif cmd == "report":
        report(Path(arg))
    else:
        sys.exit(f"usage: {__doc__}")

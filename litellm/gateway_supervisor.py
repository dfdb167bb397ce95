# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""The gateway's first process: runs LiteLLM and moves it onto its config whenever its files change.

    python3 gateway_supervisor.py <the gateway's own command: litellm --config DIR/config.yaml ...>

LiteLLM reads config.yaml and imports its hook modules once per worker process, at the worker's start,
and has no reload route. This process watches what the gateway reads (config.yaml and the *.py modules
beside it, generated headers left out) and, once a change has been stable for a poll, applies it:

- several workers (uvicorn's multiprocess mode): SIGHUP to uvicorn's parent. uvicorn then replaces its
  workers one at a time: it starts the new worker (which reads the new config), waits until it serves,
  then sends the old one SIGTERM and waits for it: an old worker stops accepting, finishes every request
  it holds (a stream runs to its end), then exits. Connections keep being accepted throughout. If a new
  worker does not start (a broken config), uvicorn keeps the old one and the previous config stays in
  service ("reload failed" below).
- one worker (no multiprocess parent to roll): the gateway is restarted, which cuts requests in
  flight; `gateway.workers: 2` or more avoids that.

Lines it prints (`make apply` waits for them): `gateway-supervisor: reloaded <digest>` /
`gateway-supervisor: reload failed <digest>: ...`. SIGTERM/SIGINT go to the gateway (the container's
stop); SIGHUP to this process forces a reload. Standard library only (it runs in the gateway image).

`--num_workers auto` is resolved once, here, at start, by gateway_start.py beside this file (the CPUs and
memory of this container or process): the gateway runs that number, and the rolling reload counts on it.
The gateway's metrics process (gateway_start.start_metrics) is started here too, once: it keeps serving
across gateway restarts and reloads, and is started again if it exits (at most every GATEWAY_METRICS_RESTART_GAP s).
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL = float(os.environ.get("GATEWAY_RELOAD_POLL", "1"))  # seconds between looks at the files
# seconds between starts of a metrics process that keeps exiting (its port taken): a line each, not each poll
METRICS_RESTART_GAP = float(os.environ.get("GATEWAY_METRICS_RESTART_GAP", "10"))
# seconds a rolling restart must look given up (a new worker ended, no more than the old count left) before it is
# said to have failed: /proc read while a process starts or ends can miss it for a poll
GIVE_UP_GRACE = 3.0
NO_REPLACEMENT = 30.0  # seconds of a rolling restart with no more workers than before: it is said to have failed
ROLL_POLL = 0.1  # seconds between looks at the workers while they roll: a new worker that fails may live only a second
HEADER = "# GENERATED from "  # the generator's header names models.yml's digest: not something LiteLLM reads
NAME = "gateway-supervisor"

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # run as a script or imported as a package module: gateway_start is beside it
    sys.path.insert(0, HERE)
import gateway_start  # noqa: E402


def watched(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and (p.name == "config.yaml" or p.suffix == ".py")
    )


def content(text: str) -> str:
    """A file as the gateway reads it: the generator's two header lines (they change with any models.yml
    edit) are comments, left out so a change elsewhere does not reload the gateway."""
    return text.split("\n", 2)[2] if text.startswith(HEADER) and text.count("\n") >= 2 else text


_DIGESTS: dict[Path, tuple[tuple, str]] = {}  # folder -> (its files' stats, digest) at the last look


def _stats(files: list[Path]) -> tuple:
    """What changes when a file is written or renamed in (inode, size, mtime, ctime in ns), per file."""
    out: list[tuple] = []
    for p in files:
        try:
            st = p.stat()
        except OSError:  # renamed away: a stat no file has, so the next look reads again
            out.append((p.name, -1))
            continue
        out.append((p.name, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def digest(folder: Path) -> str:
    """sha256 (first 16 hex) of config.yaml and the modules beside it, as the gateway reads them. The files are read
    again only when one's stat changed: reading and hashing all ~35 of them every second was most of an idle
    supervisor's CPU (2.5 % of a core here). The generator writes each file to a temp file and renames it in (a new
    inode); an edit in place changes mtime and ctime."""
    files = watched(folder)
    stats = _stats(files)
    known = _DIGESTS.get(folder)
    if known is not None and known[0] == stats:
        return known[1]
    h = hashlib.sha256()
    for p in files:
        try:
            text = p.read_text()
        except OSError:  # renamed away between listing and reading: the next poll sees the new state
            text = ""
        h.update(f"{p.name}\0{content(text)}\0".encode())
    value = h.hexdigest()[:16]
    _DIGESTS[folder] = (stats, value)
    return value


def config_folder(cmd: list[str]) -> Path:
    config = gateway_start.option(cmd, "--config")
    return Path(config).parent if config else Path(__file__).resolve().parent


def expected_workers(cmd: list[str]) -> int:
    """The gateway's worker count: `--num_workers N` (LiteLLM's default 1; a value that is not a number
    counts as the CPUs here)."""
    value = gateway_start.option(cmd, "--num_workers") or os.environ.get("NUM_WORKERS", "1")
    return int(value) if value.isdigit() else (os.cpu_count() or 1)


def say(msg: str) -> None:
    print(f"{NAME}: {msg}", flush=True)


# the gateway's own lines that say why a new worker did not start: uvicorn's ("New child process [..] was not ready in
# time; ...", "Child process [..] died", "Application startup failed") and a Python error's last line
CAUSE = re.compile(r"child process|startup failed|^\s*[\w.]*(Error|Exception|Interrupt|Exit)\b:?", re.IGNORECASE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def reload_outcome(log: str, new: str) -> tuple[bool, str] | None:
    """What the supervisor said of its reload onto `new` in the gateway's log text `log` (written since the reload was
    asked for): (True, its line) when done, (False, its line and the gateway's lines before it that say why) when
    the reload failed, None while it has said neither (`make apply` and the local runtime read this)."""
    lines = [ANSI.sub("", line) for line in log.splitlines()]
    outcome = re.compile(rf"(reloaded|reload failed) {re.escape(new)}\b")
    for i, line in enumerate(lines):
        said = line.partition(f"{NAME}: ")[2]
        if not (m := outcome.match(said)):
            continue
        if m.group(1) == "reloaded":
            return True, said
        why = [" ".join(cut.split())[:300] for cut in lines[:i] if CAUSE.search(cut) and f"{NAME}: " not in cut]
        return False, "; ".join([said, *why[-4:]])
    return None


def children(pid: int) -> dict[int, bytes]:
    """The processes whose parent is `pid`, with their command lines (NUL-separated, as /proc gives them): from the
    kernel's list of each of its threads' children (/proc/PID/task/TID/children, a few reads: the supervisor looks
    10 times a second while workers roll), else from a walk of every process's stat."""
    try:
        pids = {
            int(child)
            for task in (Path("/proc") / str(pid) / "task").iterdir()
            for child in (task / "children").read_text().split()
        }
    except FileNotFoundError as e:  # `pid` ended, or a kernel without CONFIG_PROC_CHILDREN
        if (Path("/proc") / str(pid)).exists() and "children" in str(e.filename):
            return _children_by_walk(pid)
        return {}
    except OSError:  # a thread ended between listing and reading
        return _children_by_walk(pid)
    found = {}
    for child in pids:
        try:
            found[child] = (Path("/proc") / str(child) / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
    return found


def _children_by_walk(pid: int) -> dict[int, bytes]:
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
    return found


FORK_SERVER = b"multiprocessing.forkserver"  # in the command line of a fork server multiprocessing started itself


def fork_server_of(pid: int) -> int | None:
    """The fork server the gateway process `pid` starts its workers from: a child of it with its own command line
    (gateway_serve.py forks it from the gateway process) or multiprocessing's own (FORK_SERVER); None without one."""
    try:
        own = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return next((child for child, cmdline in children(pid).items() if cmdline == own or FORK_SERVER in cmdline), None)


def workers_of(pid: int) -> set[int]:
    """uvicorn's worker processes of the gateway process `pid`: the children of its fork server (forked from it, so
    with its command line) or its own children started by multiprocessing's spawn (`spawn_main`: LiteLLM's own CLI);
    empty when the gateway runs a single process. multiprocessing's resource tracker, a child too, is neither."""
    found = {child for child, cmdline in children(pid).items() if b"spawn_main" in cmdline}
    if (server := fork_server_of(pid)) is not None:
        try:
            line = (Path("/proc") / str(server) / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            return found
        found |= {worker for worker, cmdline in children(server).items() if cmdline == line}
    return found


def supervised_workers(supervisor: int) -> set[int]:
    """The gateway's uvicorn workers under the supervisor process `supervisor` (for tests and benchmarks)."""
    return {w for child in children(supervisor) for w in workers_of(child)}


class Supervisor:
    def __init__(self, cmd: list[str]):
        cmd, line = gateway_start.resolve(cmd)  # `--num_workers auto` -> a number, said once
        say(line)
        self.cmd = cmd
        self.folder = config_folder(cmd)
        self.workers = expected_workers(cmd)
        self.child: subprocess.Popen | None = None
        self.metrics: subprocess.Popen | None = None
        self.metrics_since = 0.0  # when the metrics process last started
        self.stopping = False
        self.force = False
        self.applied = digest(self.folder)
        self.rolling: tuple[str, set[int], int, float] | None = None  # (digest, old workers, n, since)
        self.short_since: float | None = None
        self.left: set[int] = set()  # old workers not yet exited
        self.replacements: set[int] = set()  # new workers seen during the rolling restart

    @property
    def gateway(self) -> subprocess.Popen:
        """The gateway's process, once start() (which run() calls first) has started it."""
        if self.child is None:
            raise RuntimeError("the gateway is not started yet (Supervisor.start)")
        return self.child

    def start(self) -> None:
        self.metrics, self.metrics_since = gateway_start.start_metrics(self.cmd), time.monotonic()
        self.child = subprocess.Popen(self.cmd)
        say(
            f"started the gateway (pid {self.child.pid}), config {self.applied} in {self.folder}"
            + (f"; its metrics process (pid {self.metrics.pid})" if self.metrics else "")
        )

    def check_metrics(self) -> None:
        if (
            self.metrics
            and (code := self.metrics.poll()) is not None
            and time.monotonic() - self.metrics_since >= METRICS_RESTART_GAP
        ):
            say(f"the metrics process exited with code {code}; starting it again")
            self.metrics, self.metrics_since = gateway_start.start_metrics(self.cmd), time.monotonic()

    def stop_metrics(self) -> None:
        if self.metrics and self.metrics.poll() is None:
            self.metrics.terminate()
            try:
                self.metrics.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.metrics.kill()

    def on_stop(self, signum, frame) -> None:
        self.stopping = True
        if self.child and self.child.poll() is None:
            self.child.send_signal(signum)

    def on_hup(self, signum, frame) -> None:
        self.force = True

    def reload(self, new: str) -> bool:
        """Move the gateway onto `new`; False when it cannot start yet (workers still starting)."""
        old_workers = workers_of(self.gateway.pid)
        if self.workers > 1 and len(old_workers) < self.workers:
            return False  # uvicorn is starting (or replacing a dead) worker: it reads the files as they are now
        if self.workers > 1:
            say(
                f"config {self.applied} -> {new}: rolling restart of {len(old_workers)} workers (SIGHUP); "
                f"each old worker finishes its requests before it exits"
            )
            self.rolling = (new, old_workers, len(old_workers), time.monotonic())
            self.left = set(old_workers)
            self.short_since = None
            self.replacements = set()
            self.gateway.send_signal(signal.SIGHUP)
        else:
            say(
                f"config {self.applied} -> {new}: one worker, restarting the gateway "
                f"(requests in flight are cut; gateway.workers >= 2 reloads without a cut)"
            )
            self.gateway.terminate()
            try:
                self.gateway.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.gateway.kill()
                self.gateway.wait()
            self.child = subprocess.Popen(self.cmd)
            say(f"reloaded {new} (restarted, pid {self.child.pid})")
        self.applied = new
        return True

    def check_rolling(self, rolling: tuple[str, set[int], int, float]) -> None:
        new, old, n, since = rolling
        now = workers_of(self.gateway.pid)
        for pid in sorted(self.left - now):  # it exits once its last request (a stream too) is answered
            say(f"old worker {pid} exited after {time.monotonic() - since:.1f}s")
        self.left &= now
        self.replacements |= now - old
        if not now & old:
            if len(now) >= n:
                say(f"reloaded {new} in {time.monotonic() - since:.1f}s ({len(now)} new workers)")
                self.rolling = None
            return
        # uvicorn gave up: it ends a new worker that died or was not serving within --timeout_worker_healthcheck and
        # keeps the old ones. Seen as a new worker that ended (looked for every ROLL_POLL meanwhile), or, for one that
        # ended unseen, as no more workers than before for NO_REPLACEMENT s (in a restart that goes on, uvicorn's
        # parent starts the next new worker as soon as an old one has exited). A new worker still starting is no
        # failure, however long it takes.
        ended = self.replacements - now
        if len(now) <= n:
            self.short_since = self.short_since or time.monotonic()
            waited = time.monotonic() - self.short_since
            if (ended and waited > GIVE_UP_GRACE) or waited > NO_REPLACEMENT:
                what = (
                    f"new worker {', '.join(map(str, sorted(ended)))} ended before it served"
                    if ended
                    else f"no new worker started in {NO_REPLACEMENT:.0f}s (or one ended unseen)"
                )
                say(
                    f"reload failed {new}: {what}; {len(now & old)} of {n} workers keep the previous config "
                    f"(see the errors above)"
                )
                self.rolling = None
        else:
            self.short_since = None

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.on_stop)
        signal.signal(signal.SIGHUP, self.on_hup)
        self.start()
        try:
            return self.loop()
        finally:
            self.stop_metrics()

    def loop(self) -> int:
        seen = self.applied
        while True:
            code = self.gateway.poll()
            if code is not None:
                if not self.stopping:
                    say(f"the gateway exited with code {code}")
                return code
            if os.getpid() == 1:  # as a container's first process, reap orphans handed to us
                try:
                    while (reaped := os.waitpid(-1, os.WNOHANG))[0] > 0:
                        if self.metrics and reaped[0] == self.metrics.pid:
                            self.metrics.returncode = os.waitstatus_to_exitcode(reaped[1])
                        if reaped[0] == self.gateway.pid:
                            self.gateway.returncode = os.waitstatus_to_exitcode(reaped[1])
                            break
                except ChildProcessError:
                    pass
                if self.gateway.returncode is not None:
                    continue
            time.sleep(min(POLL, ROLL_POLL) if self.rolling else POLL)
            if self.stopping:
                continue
            self.check_metrics()
            if self.rolling:
                self.check_rolling(self.rolling)
                continue
            now = digest(self.folder)
            if (now != self.applied and now == seen) or self.force:  # stable for one poll: all files renamed in
                if self.reload(now):
                    self.force = False
            seen = now


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    return Supervisor(argv).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`make bench-profile`: where the gateway's serving processes spend their CPU, per API, with py-spy.

The generated gateway (--workers, pinned to the gateway CPUs) in front of the nginx mock, warmed up with 50
requests per API (what a worker builds once, on its first requests of an API, is not a request's cost), then loaded
with --concurrency requests always in flight for --seconds per API (chat, streamed chat, and the coding agents'
/v1/messages, its count_tokens and /v1/responses with their tool lists, whole and streamed: bench/apis.py) while
one `py-spy record --gil --nonblocking` per serving process samples the thread holding the GIL (the CPU the Python
code uses; LiteLLM's idle thread-pool workers would otherwise fill the profile). The serving processes are
uvicorn's workers (their fork server's children), or the gateway process itself when it runs one; never the
supervisor, the fork server or the metrics exporter, which serve no request.

Prints, per API, the samples per request, the functions with the most samples on the stack (inclusive) grouped
by where they live (our hooks, LiteLLM, the server stack), and the share of our own modules; writes the
collapsed stacks to --out for a flame graph. Refuses (exit 1) a profile with fewer than --min-samples whole stacks
or with no request answered, and leaves out a process none of whose samples is in the request guard (it served
nothing): a profile of a process that serves no request would look like a result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from generator.compile.renderers.litellm import GATEWAY_MODULES
from generator.operate.runtime.local import LocalStack
from generator.shipped.gateway_hooks.gateway_supervisor import children, supervised_workers

from .apis import Scenario
from .arms import Arm
from .loadgen import LoadGen
from .run import SCENARIOS
from .session import MODELS, bench_session

# each API as `make bench` sends it (bench/apis.py: the coding agents' tool lists), by the profile's names
APIS: dict[str, Scenario] = {("chat" if s.name == "small" else s.name): s for s in SCENARIOS if s.name != "large"}
GUARD = "request_guard"  # every request passes through it first (an ASGI middleware): a serving process's mark
# our frames on every sample of a worker, whatever it does: its start (gateway_serve.py) and the guard's ASGI call,
# which awaits the whole app. Not "our" CPU unless innermost (self time)
WRAPPERS = ("gateway_serve", "RequestGuard.__call__")
# the modules of a worker's start and its event loop's run (multiprocessing, uvicorn's server, asyncio's runner and
# threads): on nearly every sample, they say nothing of a request's cost; left out of the top list
TRUNK: tuple[str, ...] = ("/gateway_serve.py", "/multiprocessing/", "/uvicorn/main.py", "/uvicorn/server.py")
TRUNK += ("/uvicorn/_compat.py", "/uvicorn/_subprocess.py", "/uvicorn/supervisors/", "/asyncio/runners.py")
TRUNK += ("/asyncio/base_events.py", "/threading.py", "/concurrent/futures/thread.py", "/click/")
TRUNK += ("/litellm/proxy/proxy_cli.py",)
SERVE_MODULE = b"gateway_serve.py"  # the gateway process's command line (a single process serves itself)
FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^:()]*)(?::\d+)?\)$")


def where(path: str) -> str:
    name = Path(path).stem
    if name in GATEWAY_MODULES:
        return "ours"
    for part in ("litellm", "uvicorn", "starlette", "fastapi", "pydantic", "aiohttp", "httpx", "asyncio", "json"):
        if f"/{part}/" in path or path.startswith(part):
            return part
    return "other"


def is_ours(frame: dict) -> bool:
    """A frame of our modules that does work of its own, not one that only wraps the request (WRAPPERS)."""
    return where(frame["file"]) == "ours" and not {Path(frame["file"]).stem, frame["fn"]} & set(WRAPPERS)


ROOTS = ("<module>", "Thread._bootstrap")  # the first frame of a whole stack: the process's main module, or a thread's


def summarise(collapsed: str, top: int) -> dict:
    """Inclusive sample counts per function and per place, and the share of samples in our modules, over the samples
    whose stack is whole (from a root frame: a --nonblocking read may tear one); `partial` says how many were not."""
    total, ours, guard, partial = 0, 0, 0, 0
    per_fn: Counter[str] = Counter()
    per_place: Counter[str] = Counter()
    trunk: set[str] = set()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [m.groupdict() for f in stack.split(";") if (m := FRAME.match(f.strip()))]
        if not frames or frames[0]["fn"] not in ROOTS:
            partial += n
            continue
        total += n
        seen = set()
        for f in frames:
            key = f"{f['fn']} ({Path(f['file']).name})"
            if key not in seen:
                seen.add(key)
                per_fn[key] += n
                if any(t in f["file"] for t in TRUNK):
                    trunk.add(key)
        if where(frames[-1]["file"]) == "ours" or any(is_ours(f) for f in frames):
            ours += n
        if any(Path(f["file"]).stem == GUARD for f in frames):
            guard += n
        per_place[where(frames[-1]["file"])] += n  # self time by place (innermost frame)
    pct = (lambda n: round(100 * n / total, 1)) if total else (lambda n: 0.0)
    return {
        "samples": total,
        "partial_samples": partial,
        "guard_samples": guard,
        "ours_pct": pct(ours),
        "self_by_place_pct": {k: pct(v) for k, v in per_place.most_common()},
        "top_inclusive_pct": [(k, pct(v)) for k, v in per_fn.most_common(top + len(trunk)) if k not in trunk][:top],
    }


async def load(url: str, key: str, api: str, concurrency: int, seconds: float, measure: Callable[[], object]):
    """Warm the API up (a worker's first requests of an API build what later ones reuse: LiteLLM's lazily loaded
    routers, FastAPI's route contexts, tokenizers), then call `measure` (starts the samplers) and load it."""
    t = Arm(api, url, key).scenario_target(APIS[api])
    async with LoadGen(timeout_s=30) as gen:
        await gen.warm_up(t, 50)
        measure()
        p = await gen.closed_loop(t, concurrency, seconds)
        return p.ok, p.errors


def serving_processes(supervisor: int, workers: int, timeout_s: float = 60.0) -> list[int]:
    """The processes that serve the gateway's requests: uvicorn's `workers` workers under the supervisor, or the
    gateway process itself when it runs one (its only child with the gateway's command line). Waits for all of
    them: the gateway answers as soon as its first worker does."""
    deadline = time.monotonic() + timeout_s
    while True:
        if workers > 1:
            found = sorted(supervised_workers(supervisor))
        else:
            found = sorted(pid for pid, cmdline in children(supervisor).items() if SERVE_MODULE in cmdline)
        if len(found) == workers or time.monotonic() > deadline:
            if len(found) != workers:
                raise RuntimeError(f"found {len(found)} serving process(es) under {supervisor}, not {workers}")
            return found
        time.sleep(0.2)


def spy_on(spy: str, pid: int, rate: int, seconds: float, raw: Path) -> subprocess.Popen:
    """py-spy on one process, --nonblocking: py-spy's default pauses every thread of the process for
    each sample, and on a loaded worker that cut the requests it served (5 s of chat: ~400 unsampled, 176 at 50 and
    100 samples/s, 32-300 at 200, streams down to none), so the profile was of a process mostly stopped. Reading a
    running process's stacks tears some (a third to a half here: their root frames missing); summarise() counts
    only the whole ones."""
    cmd = [spy, "record", "--gil", "--full-filenames", "-p", str(pid), "-r", str(rate)]
    cmd += ["-d", str(max(1, round(seconds))), "--nonblocking"]
    return subprocess.Popen([*cmd, "-f", "raw", "-o", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def merge(raws: dict[int, Path], console: Console) -> tuple[str, dict[int, int]]:
    """The collapsed stacks of the processes that served (a sample in the request guard), and each process's
    sample count; a process that served nothing is left out, and said so."""
    kept, per_pid = [], {}
    for pid, raw in raws.items():
        text = raw.read_text()
        s = summarise(text, 0)
        per_pid[pid] = s["samples"]
        if s["guard_samples"]:
            kept.append(text)
        else:
            console.print(f"  process {pid}: {s['samples']} samples, none in {GUARD}: it served nothing, left out")
    return "".join(t if t.endswith("\n") or not t else t + "\n" for t in kept), per_pid


def profile_api(args, spy: str, pids: list[int], url: str, key: str, api: str, console: Console) -> dict:
    """One API's profile over every serving process; raises ProfileRefused when it would not be one."""
    raws = {pid: args.out / f"{api}-{pid}.txt" for pid in pids}
    spies: dict[int, subprocess.Popen] = {}

    def measure() -> None:
        spies.update({pid: spy_on(spy, pid, args.rate, args.seconds, raw) for pid, raw in raws.items()})

    ok, errors = asyncio.run(load(url, key, api, args.concurrency, args.seconds + 1, measure))
    for pid, proc in spies.items():
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0 or not raws[pid].exists():
            raise ProfileRefused(f"py-spy failed on process {pid}: {err.decode(errors='replace')[-500:]}")
    collapsed, per_pid = merge(raws, console)
    for raw in raws.values():
        raw.unlink()
    if not ok:
        raise ProfileRefused(f"{api}: no request answered ({errors} failed) while sampling: not a profile of serving")
    if not collapsed:
        raise ProfileRefused(f"{api}: none of the processes {pids} served a request ({ok} answered): not a profile")
    (args.out / f"{api}.txt").write_text(collapsed)
    r = {"requests": ok, "errors": errors, "samples_per_process": per_pid, **summarise(collapsed, args.top)}
    r["samples_per_request"] = round(r["samples"] / ok, 2)
    if r["samples"] < args.min_samples:
        raise ProfileRefused(
            f"{api}: {r['samples']} samples over {ok} requests, fewer than {args.min_samples}: too few for a profile"
            " (longer --seconds or a higher --rate)"
        )
    return r


class ProfileRefused(Exception):
    pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=MODELS, help="default: $BENCH_MODELS or bench/models.yml")
    ap.add_argument("--state-dir", type=Path, default=Path(".cache/bench-profile"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/profile"))
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--workers", type=int, default=1, help="the gateway's uvicorn workers; each is profiled")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--min-samples", type=int, default=1000, help="fewer per API: refused, not printed")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--apis", nargs="*", default=list(APIS), choices=list(APIS))
    args = ap.parse_args(argv)
    console = Console(stderr=True, highlight=False)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        console.print("[red]error:[/] py-spy is not installed: .venv/bin/pip install py-spy (make venv installs it)")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    report = {}
    with bench_session(args.models, args.state_dir) as (plan, _, gateway_cpus):
        plan = replace(plan, gateway=replace(plan.gateway, workers=args.workers))
        gw = LocalStack(plan, args.state_dir / "generated", vllm_python="", gateway_cpus=gateway_cpus, console=console)
        try:
            gw.start_gateway()
            # taskset execs the supervisor: its pid is the process started; the requests are served below it
            supervisor = gw.procs[-1].pid
            assert supervisor is not None  # start_gateway waited for it
            pids = serving_processes(supervisor, args.workers)
            console.print(
                f"profiling the serving process(es) {pids}, {args.rate} samples/s, {args.seconds:g} s per API"
            )
            for api in args.apis:
                try:
                    r = report[api] = profile_api(args, spy, pids, gw.gateway_url, gw.master_key, api, console)
                except ProfileRefused as e:
                    console.print(f"[red]refused:[/] {e}")
                    return 1
                console.print(
                    f"\n[bold]{api}[/]: {r['requests']} requests ({r['errors']} errors), {r['samples']} samples "
                    f"({r['samples_per_request']} per request; per process {r['samples_per_process']}; "
                    f"{r['partial_samples']} torn, not counted); "
                    f"our modules on the stack {r['ours_pct']}%; self time by place {r['self_by_place_pct']}"
                )
                for fn, pct in r["top_inclusive_pct"]:
                    console.print(f"  {pct:5.1f}%  {fn}")
        finally:
            gw.stop()
    (args.out / "profile.json").write_text(json.dumps(report, indent=1) + "\n")
    summary = {
        api: {k: r[k] for k in ("samples", "samples_per_request", "ours_pct", "errors")} for api, r in report.items()
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

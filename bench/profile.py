"""`make bench-profile`: where one gateway worker spends its CPU, per API, with py-spy.

The generated gateway (1 worker, pinned to the gateway CPUs) in front of the nginx mock, loaded with
--concurrency requests always in flight for --seconds per API (chat, streamed chat, /v1/responses,
/v1/messages) while `py-spy record --gil` samples the thread holding the GIL (the CPU the Python code
uses; LiteLLM's idle thread-pool workers would otherwise fill the profile). Prints, per API, the functions with the
most samples on the stack (inclusive) grouped by where they live (our hooks, LiteLLM, the server stack), and the
share of our own modules; writes the collapsed stacks to --out for a flame graph.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from generator.compile.renderers.litellm import GATEWAY_MODULES
from generator.operate.runtime.local import LocalStack

from .loadgen import LoadGen, Target
from .session import MODELS, bench_session

PROMPT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "benchmark prompt text"}]
APIS = {
    "chat": ("/v1/chat/completions", {"model": "mock", "messages": PROMPT}, False),
    "stream": ("/v1/chat/completions", {"model": "mock-stream", "messages": PROMPT, "stream": True}, True),
    "responses": ("/v1/responses", {"model": "mock", "input": "benchmark prompt text"}, False),
    "messages": (
        "/v1/messages",
        {"model": "mock", "max_tokens": 64, "messages": [{"role": "user", "content": "benchmark prompt text"}]},
        False,
    ),
}
FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^:()]*)(?::\d+)?\)$")


def where(path: str) -> str:
    name = Path(path).stem
    if name in GATEWAY_MODULES:
        return "ours"
    for part in ("litellm", "uvicorn", "starlette", "fastapi", "pydantic", "aiohttp", "httpx", "asyncio", "json"):
        if f"/{part}/" in path or path.startswith(part):
            return part
    return "other"


def summarise(collapsed: str, top: int) -> dict:
    """Inclusive sample counts per function and per place, and the share of samples in our modules."""
    total, ours = 0, 0
    per_fn: Counter[str] = Counter()
    per_place: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [m.groupdict() for f in stack.split(";") if (m := FRAME.match(f.strip()))]
        seen = set()
        for f in frames:
            key = f"{f['fn']} ({Path(f['file']).name})"
            if key not in seen:
                seen.add(key)
                per_fn[key] += n
        if any(where(f["file"]) == "ours" for f in frames):
            ours += n
        if frames:
            per_place[where(frames[-1]["file"])] += n  # self time by place (innermost frame)
    pct = (lambda n: round(100 * n / total, 1)) if total else (lambda n: 0.0)
    return {
        "samples": total,
        "ours_pct": pct(ours),
        "self_by_place_pct": {k: pct(v) for k, v in per_place.most_common()},
        "top_inclusive_pct": [(k, pct(v)) for k, v in per_fn.most_common(top)],
    }


async def load(url: str, key: str, api: str, concurrency: int, seconds: float) -> tuple[int, int]:
    path, body, stream = APIS[api]
    headers = {"Authorization": f"Bearer {key}", "x-api-key": key, "Content-Type": "application/json"}
    t = Target(url + path, headers, json.dumps(body).encode(), stream)
    async with LoadGen(timeout_s=30) as gen:
        await gen.warm_up(t, 50)
        p = await gen.closed_loop(t, concurrency, seconds)
        return p.ok, p.errors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=MODELS, help="default: $BENCH_MODELS or bench/models.yml")
    ap.add_argument("--state-dir", type=Path, default=Path(".cache/bench-profile"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/profile"))
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
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
        plan = replace(plan, gateway=replace(plan.gateway, workers=1))
        gw = LocalStack(plan, args.state_dir / "generated", vllm_python="", gateway_cpus=gateway_cpus, console=console)
        try:
            gw.start_gateway()
            pid = gw.procs[-1].pid
            # taskset execs the start module, which execs LiteLLM: the pid is the serving process
            for api in args.apis:
                raw = args.out / f"{api}.txt"
                spy_proc = subprocess.Popen(
                    [
                        spy,
                        "record",
                        "--gil",
                        "-p",
                        str(pid),
                        "-r",
                        str(args.rate),
                        "-d",
                        str(int(args.seconds)),
                        "-f",
                        "raw",
                        "-o",
                        str(raw),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
                ok, errors = asyncio.run(load(gw.gateway_url, gw.master_key, api, args.concurrency, args.seconds + 1))
                _, err = spy_proc.communicate(timeout=120)
                if spy_proc.returncode != 0 or not raw.exists():
                    console.print(f"[red]py-spy failed:[/] {err.decode(errors='replace')[-500:]}")
                    return 1
                report[api] = {"requests": ok, "errors": errors, **summarise(raw.read_text(), args.top)}
                r = report[api]
                console.print(
                    f"\n[bold]{api}[/]: {ok} requests ({errors} errors), {r['samples']} samples; "
                    f"our modules on the stack {r['ours_pct']}%; self time by place {r['self_by_place_pct']}"
                )
                for fn, pct in r["top_inclusive_pct"]:
                    console.print(f"  {pct:5.1f}%  {fn}")
        finally:
            gw.stop()
    (args.out / "profile.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({api: {"ours_pct": r["ours_pct"], "errors": r["errors"]} for api, r in report.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

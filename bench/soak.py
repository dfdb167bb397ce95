"""`make bench-soak`: the generated gateway under a moderate steady load for a while; does it leak?

Offers --rate requests per second (small, streamed and large prompts in turn) for --minutes and
samples the gateway's resident memory (the process and its workers, with psutil) every
--sample seconds. Prints RSS at start and end, the peak, and the error count; writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from rich.console import Console

from generator.runtime.local import LocalStack

from .arms import Arm
from .loadgen import LoadGen
from .procs import tree_rss_mb
from .run import SCENARIOS, request_body
from .session import bench_session


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path(__file__).with_name("models.yml"))
    ap.add_argument("--state-dir", type=Path, default=Path(".cache/bench-soak"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/soak.json"))
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=30.0, help="offered requests per second")
    ap.add_argument("--sample", type=float, default=15.0, help="seconds between RSS samples")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True, highlight=False)
    with bench_session(args.models, args.state_dir) as (plan, _, gateway_cpus):
        # the soak is about what we ship: only the generated gateway
        generated = LocalStack(plan, args.state_dir / "generated", vllm_python="", gateway_cpus=gateway_cpus,
                               console=console)
        try:
            generated.start_gateway()
            arm = Arm("generated", generated.gateway_url, generated.master_key)
            targets = [arm.target(request_body(s), s.stream) for s in SCENARIOS]
            samples = asyncio.run(soak(args, targets, generated.procs[-1].pid, console))
        finally:
            generated.stop()
    start, end = samples[0], samples[-1]
    peak = max(s["rss_mb"] for s in samples)
    errors = sum(s["errors"] for s in samples)
    sent = sum(s["sent"] for s in samples)
    report = {"rate": args.rate, "minutes": args.minutes, "samples": samples, "rss_start_mb": start["rss_mb"],
              "rss_end_mb": end["rss_mb"], "rss_peak_mb": peak, "sent": sent, "errors": errors}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"soak: gateway RSS {start['rss_mb']:.0f} MB at start, {end['rss_mb']:.0f} MB after "
          f"{args.minutes:g} min at {args.rate:g} req/s (peak {peak:.0f} MB); {sent} requests, {errors} errors")
    return 0


async def soak(args, targets, pid: int, console: Console) -> list[dict]:
    samples = [{"t": 0.0, "rss_mb": tree_rss_mb(pid), "sent": 0, "errors": 0}]
    console.print(f"t=   0s  gateway RSS {samples[0]['rss_mb']:.0f} MB")
    began = time.monotonic()
    async with LoadGen(timeout_s=30) as gen:
        i = 0
        while time.monotonic() - began < args.minutes * 60:
            p = await gen.open_loop(targets[i % len(targets)], args.rate, args.sample)
            i += 1
            s = {"t": round(time.monotonic() - began, 1), "rss_mb": tree_rss_mb(pid), "sent": p.sent, "errors": p.errors}
            samples.append(s)
            console.print(f"t={s['t']:4.0f}s  gateway RSS {s['rss_mb']:.0f} MB  "
                          f"({p.sent} sent, {p.errors} errors, p50 {p.p50_ms:.1f} ms)")
    return samples


if __name__ == "__main__":
    sys.exit(main())

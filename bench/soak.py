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
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from generator.operate.runtime.local import LocalStack
from generator.operate.runtime.processes import Proc
from generator.shipped.gateway_hooks.gateway_supervisor import supervised_workers

from .arms import Arm
from .loadgen import LoadGen
from .procs import tree_rss_mb
from .run import CHAT_SCENARIOS
from .session import ALL_CPUS, MODELS, bench_session


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=MODELS, help="default: $BENCH_MODELS or bench/models.yml")
    ap.add_argument("--state-dir", type=Path, default=Path(".cache/bench-soak"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/soak.json"))
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=30.0, help="offered requests per second")
    ap.add_argument("--sample", type=float, default=15.0, help="seconds between RSS samples")
    ap.add_argument("--workers", type=int, default=2, help="gateway workers (1: pinned to the gateway CPUs)")
    ap.add_argument(
        "--max-requests",
        type=int,
        default=None,
        help="recycle each worker after this many requests (LiteLLM's --max_requests_before_restart)",
    )
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True, highlight=False)
    with bench_session(args.models, args.state_dir) as (plan, _, gateway_cpus):
        # the soak is about what we ship: only the generated gateway, with --workers workers
        plan = replace(plan, gateway=replace(plan.gateway, workers=args.workers))
        generated = RecyclingStack(
            plan,
            args.state_dir / "generated",
            vllm_python="",
            console=console,
            gateway_cpus=gateway_cpus if args.workers == 1 else ALL_CPUS,
            max_requests=args.max_requests,
        )
        try:
            generated.start_gateway()
            arm = Arm("generated", generated.gateway_url, generated.master_key)
            targets = [arm.scenario_target(s) for s in CHAT_SCENARIOS]
            pid = generated.procs[-1].pid
            if pid is None:
                raise RuntimeError("the gateway's process has no pid: it did not start")
            samples, failures = asyncio.run(soak(args, targets, pid, console))
        finally:
            generated.stop()
    start, end = samples[0], samples[-1]
    peak = max(s["rss_mb"] for s in samples)
    errors = sum(s["errors"] for s in samples)
    sent = sum(s["sent"] for s in samples)
    pids = {pid for s in samples for pid in s["workers"]}
    restarts = max(0, len(pids) - max(len(samples[0]["workers"]), 1)) if args.workers > 1 else 0
    report = {
        "rate": args.rate,
        "minutes": args.minutes,
        "workers": args.workers,
        "max_requests": args.max_requests,
        "samples": samples,
        "rss_start_mb": start["rss_mb"],
        "rss_end_mb": end["rss_mb"],
        "rss_peak_mb": peak,
        "sent": sent,
        "errors": errors,
        "failures": failures,
        "worker_restarts": restarts,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    recycled = f", max {args.max_requests} requests per worker: {restarts} worker restarts" if args.max_requests else ""
    print(
        f"soak: {args.workers} worker(s), gateway RSS {start['rss_mb']:.0f} MB at start, {end['rss_mb']:.0f} MB after "
        f"{args.minutes:g} min at {args.rate:g} req/s (peak {peak:.0f} MB){recycled}; {sent} requests, {errors} errors"
        + (f" ({failures})" if failures else "")
    )
    return 0


@dataclass
class RecyclingStack(LocalStack):
    max_requests: int | None = None

    def _gateway(self, config: Path) -> Proc:
        proc = super()._gateway(config)
        if self.max_requests:
            proc.cmd.extend(["--max_requests_before_restart", str(self.max_requests)])
        return proc


def workers(pid: int) -> list[int]:
    """The uvicorn worker processes of the gateway whose supervisor is `pid`."""
    return sorted(supervised_workers(pid))


async def soak(args, targets, pid: int, console: Console) -> tuple[list[dict], dict[str, int]]:
    samples = [{"t": 0.0, "rss_mb": tree_rss_mb(pid), "sent": 0, "errors": 0, "workers": workers(pid)}]
    console.print(f"t=   0s  gateway RSS {samples[0]['rss_mb']:.0f} MB")
    began = time.monotonic()
    async with LoadGen(timeout_s=30) as gen:
        i = 0
        while time.monotonic() - began < args.minutes * 60:
            p = await gen.open_loop(targets[i % len(targets)], args.rate, args.sample)
            i += 1
            s = {
                "t": round(time.monotonic() - began, 1),
                "rss_mb": tree_rss_mb(pid),
                "sent": p.sent,
                "errors": p.errors,
                "workers": workers(pid),
            }
            samples.append(s)
            console.print(
                f"t={s['t']:4.0f}s  gateway RSS {s['rss_mb']:.0f} MB  "
                f"({p.sent} sent, {p.errors} errors, p50 {p.p50_ms:.1f} ms, workers {s['workers']})"
            )
    return samples, dict(gen.failures)


if __name__ == "__main__":
    sys.exit(main())

"""`make bench-pairs`: two scenarios through one generated gateway, taking turns, for a difference under a millisecond.

`make bench` measures its scenarios one after another, about a minute apart, and this VM's speed moves by more than
a millisecond within minutes (docs/testing.md, "Idle CPU"). The difference of two requests' latency is read here the
way bench.tune reads a setting's: the same gateway (1 worker, pinned to the gateway CPUs, the generated config)
answers --requests sequential requests of one scenario, then of the other, in --rounds rounds (alternating which
goes first); each round gives one difference of the two p50s, and the median of those is the answer. A drift of the
machine touches both sides of a round alike. The gateway's CPU per request over each sequential block is printed too.

Made for the question of issue 62: what an API costs beside chat on the same request (`messages messages-as-chat`,
`responses responses-as-chat`) and what the request's size costs on chat (`messages-as-chat small`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from generator.compile.gateway_process import gateway_env
from generator.compile.renderers.litellm import local_api_base, render_litellm

from .arms import Arm, VariantGateway
from .loadgen import LoadGen
from .procs import tree_cpu_s
from .run import SCENARIOS
from .session import MODELS, bench_session

NAMES = [s.name for s in SCENARIOS]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.pairs", description=__doc__.splitlines()[0])
    ap.add_argument("first", choices=NAMES)
    ap.add_argument("second", choices=NAMES)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--requests", type=int, default=100, help="sequential requests per scenario and round")
    ap.add_argument("--models", type=Path, default=MODELS, help="default: $BENCH_MODELS or bench/models.yml")
    ap.add_argument("--state-dir", type=Path, default=Path(".cache/bench-pairs"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/pairs.json"))
    return ap.parse_args(argv)


async def measure(args, url: str, key: str, pid: int, console: Console) -> dict[str, dict[str, list[float]]]:
    arm = Arm("generated", url, key)
    targets = {n: arm.scenario_target(next(s for s in SCENARIOS if s.name == n)) for n in (args.first, args.second)}
    got: dict[str, dict[str, list[float]]] = {n: {"p50_ms": [], "cpu_ms": []} for n in targets}
    async with LoadGen(timeout_s=30) as gen:
        for target in targets.values():
            await gen.warm_up(target, 60)
        for r in range(args.rounds):
            for name in list(targets) if r % 2 == 0 else list(targets)[::-1]:
                before = tree_cpu_s(pid)
                point = await gen.sequential(targets[name], args.requests)
                if point.errors:
                    raise RuntimeError(f"{name}: {point.errors} failed requests ({dict(gen.failures)})")
                got[name]["p50_ms"].append(point.p50_ms)
                got[name]["cpu_ms"].append((tree_cpu_s(pid) - before) * 1000 / args.requests)
            a, b = (got[n]["p50_ms"][-1] for n in targets)
            console.print(
                f"round {r + 1}/{args.rounds}: {args.first} {a:.2f} ms, {args.second} {b:.2f} ms, {a - b:+.2f}"
            )
    return got


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.first == args.second:
        print("bench.pairs: two different scenarios, please", file=sys.stderr)
        return 2
    console = Console(stderr=True, highlight=False)
    with bench_session(args.models, args.state_dir) as (plan, _, gateway_cpus):
        gplan = replace(plan, gateway=replace(plan.gateway, workers=1))  # on the file's gateway.port, as make bench's
        gateway = VariantGateway(
            plan=gplan,
            state_dir=args.state_dir / "gateway",
            vllm_python="",
            gateway_cpus=gateway_cpus,
            console=console,
            config=render_litellm(gplan, local_api_base),
            workers=1,
            env_overrides=gateway_env(gplan.gateway),
        )
        try:
            gateway.start_gateway()
            pid = gateway.procs[-1].pid
            assert pid is not None  # started
            got = asyncio.run(measure(args, gateway.gateway_url, gateway.master_key, pid, console))
        finally:
            gateway.stop()
    first, second = got[args.first], got[args.second]
    diffs = [a - b for a, b in zip(first["p50_ms"], second["p50_ms"], strict=True)]
    cpu = [a - b for a, b in zip(first["cpu_ms"], second["cpu_ms"], strict=True)]
    report = {
        "first": args.first,
        "second": args.second,
        "p50_ms": {n: statistics.median(g["p50_ms"]) for n, g in got.items()},
        "d_p50_ms": statistics.median(diffs),
        "d_p50_ms_rounds": diffs,
        "d_cpu_ms": statistics.median(cpu),
        "rounds": got,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"{args.first} - {args.second}: p50 {report['d_p50_ms']:+.2f} ms (rounds "
        f"{', '.join(f'{d:+.2f}' for d in diffs)}), gateway CPU {report['d_cpu_ms']:+.2f} ms a request; "
        f"p50 {report['p50_ms'][args.first]:.2f} against {report['p50_ms'][args.second]:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

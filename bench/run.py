"""`make bench`: direct vs LiteLLM defaults vs the generated gateway, in one run on this machine.

    python -m bench.run [--repeats 3] [--duration 2] [--out bench/results]

For each scenario (small prompt, streamed small prompt, large prompt) and each repeat: a
sequential phase (one request at a time: added latency) and an open-loop sweep of offered rates,
growing until each arm is past saturation (max rate). Arms are interleaved at every step and
their order rotates between repeats; the report gives the median of the repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from rich.console import Console

from generator.errors import ConfigError
from generator.loader import load_plan

from .arms import Arm, model_by_name, start_gateways
from .loadgen import LoadGen, Target
from .mock import MockError, NginxMock
from .stats import PointStats, max_rate, median_point, next_rate, summary_line

ARMS = ("direct", "default", "generated")
DEFAULT_GATEWAY_PORT = 4302


@dataclass(frozen=True)
class Scenario:
    name: str
    model: str  # bench model: `mock` answers JSON, `mock-stream` answers SSE
    stream: bool
    prompt_chars: int


SCENARIOS = (
    Scenario("small", "mock", False, 40),
    Scenario("stream", "mock-stream", True, 40),
    Scenario("large", "mock", False, 32_000),  # about 8K tokens of text
)


def request_body(s: Scenario) -> bytes:
    words = ("benchmark prompt text " * (s.prompt_chars // 22 + 1))[: s.prompt_chars]
    body = {"model": s.model, "stream": s.stream,
            "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": words}]}
    return json.dumps(body).encode()


def split_cpus() -> tuple[frozenset[int] | None, frozenset[int] | None]:
    """(load generator + mock, gateway): half the CPUs each, so they do not take turns on one core."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    half = len(cpus) // 2
    return frozenset(cpus[:half]), frozenset(cpus[half:])


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cpu": model, "cpus": os.cpu_count(), "python": platform.python_version(),
            "litellm": version("litellm"), "platform": platform.platform()}


class Bench:
    def __init__(self, args, console: Console):
        self.args, self.console = args, console
        self.raw: dict = {s.name: {a: {"sequential": [], "sweep": []} for a in ARMS} for s in SCENARIOS}

    def targets(self, arms: dict[str, Arm], plan) -> dict[tuple[str, str], Target]:
        out = {}
        for s in SCENARIOS:
            port = model_by_name(plan, s.model).port
            body = request_body(s)
            out[(s.name, "direct")] = arms["direct"].target(body, s.stream, direct_port=port)
            for a in ("default", "generated"):
                out[(s.name, a)] = arms[a].target(body, s.stream)
        return out

    async def run(self, targets: dict[tuple[str, str], Target]) -> None:
        a = self.args
        async with LoadGen(timeout_s=a.timeout) as gen:
            for t in targets.values():
                await gen.warm_up(t, a.warmup)
            for rep in range(a.repeats):
                order = ARMS[rep % 3:] + ARMS[: rep % 3]  # rotate which arm goes first
                for s in SCENARIOS:
                    for arm in order:
                        p = await gen.sequential(targets[(s.name, arm)], a.sequential)
                        self.raw[s.name][arm]["sequential"].append(p)
                        self._show(rep, s, arm, p)
                    rate, active = a.start_rate, list(order)
                    sweep = {arm: [] for arm in order}
                    while active and rate <= a.max_rate:
                        for arm in list(active):
                            p = await gen.open_loop(targets[(s.name, arm)], rate, a.duration)
                            sweep[arm].append(p)
                            self._show(rep, s, arm, p)
                            if p.saturated:
                                active.remove(arm)
                            await asyncio.sleep(a.pause)
                        rate = next_rate(rate, a.factor)
                    for arm in order:
                        self.raw[s.name][arm]["sweep"].append(sweep[arm])

    def _show(self, rep: int, s: Scenario, arm: str, p: PointStats) -> None:
        rate = "sequential" if p.offered == 0 else f"{p.offered:7.1f}/s"
        mark = " [yellow]saturated[/]" if p.saturated else ""
        self.console.print(f"repeat {rep + 1}/{self.args.repeats} {s.name:6} {arm:9} {rate:>10}  "
                           f"p50 {p.p50_ms:7.2f} ms  p99 {p.p99_ms:7.2f} ms  {p.achieved:7.1f} req/s  "
                           f"errors {p.error_rate:5.1%}{mark}", highlight=False, soft_wrap=True)

    def report(self) -> dict:
        scenarios = {}
        for s in SCENARIOS:
            per_arm = {}
            for arm in ARMS:
                raw = self.raw[s.name][arm]
                seq = median_point(raw["sequential"])
                rates = sorted({p.offered for rep in raw["sweep"] for p in rep})
                sweep = [median_point([p for rep in raw["sweep"] for p in rep if p.offered == r]) for r in rates]
                per_arm[arm] = {
                    "sequential": seq.to_dict(),
                    "sweep": [p.to_dict() for p in sweep],
                    "max_rate": statistics.median(max_rate(rep) for rep in raw["sweep"]),
                    "repeats": {"sequential": [p.to_dict() for p in raw["sequential"]],
                                "sweep": [[p.to_dict() for p in rep] for rep in raw["sweep"]]},
                }
            direct = per_arm["direct"]
            for arm in ("default", "generated"):
                per_arm[arm]["added_p50_ms"] = per_arm[arm]["sequential"]["p50_ms"] - direct["sequential"]["p50_ms"]
                per_arm[arm]["added_p99_ms"] = per_arm[arm]["sequential"]["p99_ms"] - direct["sequential"]["p99_ms"]
                per_arm[arm]["max_rate_ratio"] = (per_arm[arm]["max_rate"] / direct["max_rate"]
                                                  if direct["max_rate"] else 0.0)
            scenarios[s.name] = per_arm
        head = scenarios["small"]
        line = summary_line(head["generated"]["added_p50_ms"], head["default"]["added_p50_ms"],
                            head["generated"]["max_rate_ratio"], head["default"]["max_rate_ratio"])
        return {"summary": line, "scenarios": scenarios}


def print_table(console: Console, report: dict) -> None:
    from rich.table import Table

    table = Table("scenario", "arm", "seq p50 ms", "seq p99 ms", "added p50 ms", "max req/s", "ratio", box=None)
    for name, per_arm in report["scenarios"].items():
        for arm, r in per_arm.items():
            table.add_row(name, arm, f"{r['sequential']['p50_ms']:.2f}", f"{r['sequential']['p99_ms']:.2f}",
                          f"{r.get('added_p50_ms', 0):.2f}", f"{r['max_rate']:.0f}",
                          f"{r.get('max_rate_ratio', 1):.2f}")
    console.print(table)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path(__file__).with_name("models.yml"))
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--state-dir", type=Path, default=Path(".cache/bench"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per offered-rate point")
    ap.add_argument("--sequential", type=int, default=200, help="requests in each sequential phase")
    ap.add_argument("--start-rate", type=float, default=50.0)
    ap.add_argument("--factor", type=float, default=1.6, help="each sweep step multiplies the offered rate by this")
    ap.add_argument("--max-rate", type=float, default=4000.0)
    ap.add_argument("--warmup", type=int, default=100, help="requests per arm and scenario before measuring")
    ap.add_argument("--timeout", type=float, default=15.0, help="seconds before a request counts as an error")
    ap.add_argument("--pause", type=float, default=0.3, help="seconds between points")
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny sweep, one repeat (for tests)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.duration, args.sequential, args.max_rate, args.warmup = 1, 0.5, 20, 80, 10
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up below
    console = Console(stderr=True, highlight=False)
    try:
        plan = load_plan(args.models)
    except ConfigError as exc:
        for problem in exc.problems:
            console.print(f"[red]error:[/] {problem}", soft_wrap=True)
        return 2
    client_cpus, gateway_cpus = split_cpus()
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    started = time.monotonic()
    json_port, sse_port = model_by_name(plan, "mock").port, model_by_name(plan, "mock-stream").port
    mock = NginxMock(args.state_dir / "nginx", json_port, sse_port, set(client_cpus or ()))
    try:
        mock.start()
    except MockError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    try:
        console.print(f"CPUs: load generator + mock {sorted(client_cpus or [])}, gateways {sorted(gateway_cpus or [])}")
        generated, default = start_gateways(plan, args.state_dir, DEFAULT_GATEWAY_PORT, gateway_cpus, console)
        try:
            arms = {"direct": Arm("direct", "", "unused"),
                    "default": Arm("default", default.gateway_url, default.master_key),
                    "generated": Arm("generated", generated.gateway_url, generated.master_key)}
            bench = Bench(args, console)
            asyncio.run(bench.run(bench.targets(arms, plan)))
        finally:
            generated.stop()
            default.stop()
    finally:
        mock.stop()
    report = {"machine": machine(), "settings": {k: str(v) for k, v in vars(args).items()},
              "cpus": {"client": sorted(client_cpus or []), "gateway": sorted(gateway_cpus or [])},
              "seconds": round(time.monotonic() - started, 1), **bench.report()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(report, indent=1, default=float) + "\n")
    from .plot import plot

    plot(report, args.out / "bench.png")
    print_table(console, report)
    console.print(f"results: {args.out / 'bench.json'}, {args.out / 'bench.png'} ({report['seconds']:.0f} s)")
    print(report["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make bench`: direct vs LiteLLM defaults vs the generated gateway, in one run on this machine.

    python -m bench.run [--repeats 3] [--duration 1.5] [--out bench/results]

For each chat scenario (small prompt, streamed small prompt, large prompt) and each repeat: a
sequential phase (one request at a time: added latency), an open-loop sweep of offered rates
growing until each arm is past saturation (latency vs load), and a closed-loop capacity phase
(max rate, gateway CPU per request). For the coding agents' other APIs (/v1/messages and /v1/responses, whole and
streamed, /v1/messages/count_tokens; bench/apis.py) the sequential and capacity phases of direct, default and
generated. Arms are interleaved at every step and their order rotates between repeats; the report gives the median
of the repeats. Then, each repeat, each API that has its request also sent as chat (bench/apis.py as_chat) takes turns
with that twin and the short chat request of its kind (small, or stream for a stream), in slices, on the generated and
default gateways (the paired phase): the summary's last part, what the API costs over chat on the same request and
over a short one, read in the same minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

from rich.console import Console

from generator.errors import ConfigError, print_problems

from .apis import Scenario
from .arms import Arm, start_gateways, stop_all
from .loadgen import LoadGen, Target
from .mock import MockError
from .procs import tree_cpu_s
from .session import MODELS, bench_session, model_port
from .stats import PointStats, max_rate, median_point, next_rate, percentile, point_stats, summary_line, workers_for

ARMS = ("direct", "default", "generated", "generated-2w")
GATEWAYS = ARMS[1:]
SWEEP_ARMS = ARMS[:3]  # the 2-worker gateway shares the CPUs with the load generator: its sweep would say little
SLICE = 20  # sequential requests per arm before the next arm's turn


SCENARIOS = (
    Scenario("small", "mock", False, 40),
    Scenario("stream", "mock-stream", True, 40),
    Scenario("large", "mock", False, 32_000),  # about 8K tokens of text
    # the coding agents' APIs, with their agents' system prompt and tool list (bench/apis.py)
    Scenario("opencode", "mock", False, 40, agent=True),  # opencode's chat: its system prompt and tools
    Scenario("opencode-stream", "mock-stream", True, 40, agent=True),
    Scenario("messages", "mock", False, 40, "messages"),  # Claude Code
    # each agent's request also sent as chat, measured next to its own API's (bench/apis.py as_chat): what the API
    # itself costs beside chat on the same request, apart from what the request's size costs on any API
    Scenario("messages-as-chat", "mock", False, 40, as_chat="messages"),
    Scenario("messages-stream", "mock-stream", True, 40, "messages"),
    Scenario("messages-as-chat-stream", "mock-stream", True, 40, as_chat="messages"),
    Scenario("count_tokens", "mock", False, 40, "count_tokens"),  # Claude Code, before compacting
    Scenario("responses", "mock", False, 40, "responses"),  # Codex
    Scenario("responses-as-chat", "mock", False, 40, as_chat="responses"),
    Scenario("responses-stream", "mock-stream", True, 40, "responses"),
    Scenario("responses-as-chat-stream", "mock-stream", True, 40, as_chat="responses"),
)
CHAT_SCENARIOS = tuple(s for s in SCENARIOS if s.chat)
# API scenario -> its request sent as chat (whole or streamed, as the API's), and the short chat request of that kind
TWINS = {
    next(a.name for a in SCENARIOS if a.api == s.as_chat and a.stream == s.stream and not a.as_chat): s.name
    for s in SCENARIOS
    if s.as_chat
}
SHORT = {s.name: "stream" if s.stream else "small" for s in SCENARIOS if s.name in TWINS}
API_ARMS = ARMS[:3]  # the other APIs: direct, default, generated (the 2-worker gateway is chat's question)


def arms_of(s: Scenario) -> tuple[str, ...]:
    return ARMS if s.chat else API_ARMS


def machine() -> dict:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "litellm": version("litellm"),
        "platform": platform.platform(),
    }


class Bench:
    def __init__(self, args, console: Console):
        self.args, self.console = args, console
        self.raw: dict = {
            s.name: {a: {"sequential": [], "sweep": [], "capacity": [], "at_load": []} for a in arms_of(s)}
            for s in SCENARIOS
        }
        self.pids: dict[str, int | None] = {}
        self.paired_raw: dict[str, dict[str, list[dict[str, float]]]] = {}  # API -> arm -> each repeat's p50s

    def targets(self, arms: dict[str, Arm], plan) -> dict[tuple[str, str], Target]:
        self.pids = {name: arm.pid for name, arm in arms.items()}
        out = {}
        for s in SCENARIOS:
            out[(s.name, "direct")] = arms["direct"].scenario_target(s, direct_port=model_port(plan, s.model))
            for a in arms_of(s)[1:]:
                out[(s.name, a)] = arms[a].scenario_target(s)
        return out

    async def run(self, targets: dict[tuple[str, str], Target]) -> None:
        a = self.args
        async with LoadGen(timeout_s=a.timeout) as gen:
            for t in targets.values():
                await gen.warm_up(t, a.warmup)
            for rep in range(a.repeats):
                for s in SCENARIOS:
                    arms = arms_of(s)
                    order = arms[rep % len(arms) :] + arms[: rep % len(arms)]  # rotate which arm goes first
                    for arm, p in (await self.sequential(gen, targets, s, order)).items():
                        self.raw[s.name][arm]["sequential"].append(p)
                        self._show(rep, s, arm, p)
                    rate, active = a.start_rate, [arm for arm in order if arm in SWEEP_ARMS and s.chat]
                    sweep: dict[str, list[PointStats]] = {arm: [] for arm in active}
                    while active and rate <= a.max_rate:
                        for arm in list(active):
                            p = await gen.open_loop(targets[(s.name, arm)], rate, a.duration)
                            sweep[arm].append(p)
                            self._show(rep, s, arm, p)
                            if p.saturated:
                                active.remove(arm)
                            await asyncio.sleep(a.pause)
                        rate = next_rate(rate, a.factor)
                    for arm in sweep:
                        self.raw[s.name][arm]["sweep"].append(sweep[arm])  # (none for the other APIs)
                    caps = await self.capacity(gen, targets, s, order)
                    for arm, c in caps.items():
                        self.raw[s.name][arm]["capacity"].append(c)
                        cpu = (
                            f"  gateway CPU {c['cpu_ms']:.2f} ms/request, {c['gateway_cores']:.2f} cores"
                            if c["cpu_ms"] is not None
                            else ""
                        )
                        cpu += f"  load generator + mock {c['client_cores']:.2f} cores"
                        cpu += f"  [red]{c['errors']} failed: {c['failures']}[/]" if c["errors"] else ""
                        self.console.print(
                            f"repeat {rep + 1}/{a.repeats} {s.name:6} {arm:9} {'capacity':>10}  "
                            f"{c['rate']:7.1f} req/s with {a.concurrency} in flight{cpu}",
                            highlight=False,
                            soft_wrap=True,
                        )
                    if not s.chat:
                        continue  # the at-load phase compares 1 and 2 workers: chat's question
                    for arm, c in (await self.at_load(gen, targets, s, caps["generated"]["rate"])).items():
                        self.raw[s.name][arm]["at_load"].append(c)
                        self.console.print(
                            f"repeat {rep + 1}/{a.repeats} {s.name:6} {arm:9} {'at load':>10}  "
                            f"{c['offered']:7.1f} req/s offered, {c['rate']:7.1f} done, gateway CPU "
                            f"{c['cpu_ms']:.2f} ms/request, {c['gateway_cores']:.2f} cores",
                            highlight=False,
                            soft_wrap=True,
                        )
                await self.paired(gen, targets, rep)

    async def paired(self, gen: LoadGen, targets, rep: int) -> None:
        """Each API with a twin (its request sent as chat) takes turns with the twin and the short chat request, SLICE
        requests at a time, --api-sequential of each, on the generated and the default gateway: p50s read in the same
        minutes, so their difference is the API's (or the request size's) and not the machine's drift."""
        for api, twin in TWINS.items():
            short = SHORT[api]
            for arm in ("generated", "default"):
                names = (api, twin, short)
                latencies: dict[str, list[float]] = {n: [] for n in names}
                errors = 0
                for _ in range(max(1, self.args.api_sequential // SLICE)):
                    for name in names:
                        lat, err = await gen.latencies(targets[(name, arm)], SLICE)
                        latencies[name] += lat
                        errors += err
                if errors:  # a p50 without the failed requests is no measure: fail as bench.pairs does
                    raise RuntimeError(f"paired phase, {api} on {arm}: {errors} failed requests ({dict(gen.failures)})")
                p50 = {n: percentile([x * 1000 for x in lat], 50) for n, lat in latencies.items()}
                self.paired_raw.setdefault(api, {}).setdefault(arm, []).append(p50)
                self.console.print(
                    f"repeat {rep + 1}/{self.args.repeats} {api:6} {arm:9} {'paired':>10}  p50 {p50[api]:.2f} ms, "
                    f"as chat {p50[twin]:.2f} ms, {short} chat {p50[short]:.2f} ms",
                    highlight=False,
                    soft_wrap=True,
                )

    async def at_load(self, gen: LoadGen, targets, s: Scenario, rate_1w: float) -> dict[str, dict]:
        """CPU per request of 1 and 2 workers at the same load per worker (--load-share of 1 worker's max
        rate, times the workers), open loop: how a host sized with headroom runs. At saturation one busy
        event loop handles many ready requests per wake-up, so CPU per request is lowest there; a fleet
        of workers each partly busy pays more per request, and this is the figure sizing needs."""
        done = {arm: {"ok": 0, "seconds": 0.0, "cpu_s": 0.0, "offered": 0.0} for arm in ("generated", "generated-2w")}
        for _ in range(self.args.capacity_slices):
            for arm, workers in (("generated", 1), ("generated-2w", 2)):
                offered = max(1.0, rate_1w * self.args.load_share * workers)
                p, cpu_s = await gen.open_loop_cpu(
                    targets[(s.name, arm)], offered, self.args.capacity_seconds, self.pids.get(arm)
                )
                d = done[arm]
                d["ok"] += p.ok
                d["seconds"] += p.ok / p.achieved if p.achieved else self.args.capacity_seconds
                d["cpu_s"] += cpu_s
                d["offered"] = offered
        return {
            arm: {
                "offered": d["offered"],
                "rate": d["ok"] / d["seconds"] if d["seconds"] else 0.0,
                "cpu_ms": d["cpu_s"] * 1000 / max(d["ok"], 1),
                "gateway_cores": d["cpu_s"] / d["seconds"],
            }
            for arm, d in done.items()
        }

    async def sequential(self, gen: LoadGen, targets, s: Scenario, order) -> dict[str, PointStats]:
        """One request at a time, the arms taking turns in slices of SLICE requests, so a drift in
        the machine's speed during the phase touches every arm alike."""
        latencies: dict[str, list[float]] = {arm: [] for arm in order}
        errors = dict.fromkeys(order, 0)
        count = self.args.sequential if s.chat else self.args.api_sequential
        for _ in range(max(1, count // SLICE)):
            for arm in order:
                lat, err = await gen.latencies(targets[(s.name, arm)], SLICE)
                latencies[arm] += lat
                errors[arm] += err
        return {arm: point_stats(0, latencies[arm], errors[arm], sum(latencies[arm]) or 1.0) for arm in order}

    async def capacity(self, gen: LoadGen, targets, s: Scenario, order) -> dict[str, dict]:
        """Max rate: completed req/s with --concurrency requests always in flight (closed loop), the arms
        taking turns in slices; plus the gateway's CPU time per request over the same requests."""
        done = {arm: {"ok": 0, "errors": 0, "seconds": 0.0, "cpu_s": 0.0, "client_s": 0.0} for arm in order}
        failed: dict[str, Counter[str]] = {arm: Counter() for arm in order}  # what went wrong, per arm
        for _ in range(self.args.capacity_slices):
            for arm in order:
                client_before, failures_before = client_cpu_s(self.args.state_dir), gen.failures.copy()
                p, cpu_s = await gen.closed_loop_cpu(
                    targets[(s.name, arm)], self.args.concurrency, self.args.capacity_seconds, self.pids.get(arm)
                )
                failed[arm] += gen.failures - failures_before
                d = done[arm]
                d["ok"] += p.ok
                d["errors"] += p.errors
                d["seconds"] += p.ok / p.achieved if p.achieved else self.args.capacity_seconds
                d["cpu_s"] += cpu_s
                d["client_s"] += client_cpu_s(self.args.state_dir) - client_before
        return {
            arm: {
                "rate": d["ok"] / d["seconds"],
                "errors": d["errors"],
                "failures": dict(failed[arm]),  # e.g. {"TimeoutError": 3, "HTTP 500": 1}
                "cpu_ms": d["cpu_s"] * 1000 / d["ok"] if self.pids.get(arm) and d["ok"] else None,
                "gateway_cores": d["cpu_s"] / d["seconds"],
                "client_cores": d["client_s"] / d["seconds"],
            }
            for arm, d in done.items()
        }

    def _show(self, rep: int, s: Scenario, arm: str, p: PointStats) -> None:
        rate = "sequential" if p.offered == 0 else f"{p.offered:7.1f}/s"
        mark = " [yellow]saturated[/]" if p.saturated else ""
        self.console.print(
            f"repeat {rep + 1}/{self.args.repeats} {s.name:6} {arm:9} {rate:>10}  "
            f"p50 {p.p50_ms:7.2f} ms  p99 {p.p99_ms:7.2f} ms  {p.achieved:7.1f} req/s  "
            f"errors {p.error_rate:5.1%}{mark}",
            highlight=False,
            soft_wrap=True,
        )

    def report(self) -> dict:
        scenarios = {}
        for s in SCENARIOS:
            per_arm = {}
            for arm in arms_of(s):
                raw = self.raw[s.name][arm]
                seq = median_point(raw["sequential"])
                rates = sorted({p.offered for rep in raw["sweep"] for p in rep})
                sweep = [median_point([p for rep in raw["sweep"] for p in rep if p.offered == r]) for r in rates]
                cpu = [c["cpu_ms"] for c in raw["capacity"] if c["cpu_ms"] is not None]
                cores = {k: statistics.median(c[k] for c in raw["capacity"]) for k in ("gateway_cores", "client_cores")}
                per_arm[arm] = {
                    "sequential": seq.to_dict(),
                    "sweep": [p.to_dict() for p in sweep],
                    "max_rate": statistics.median(c["rate"] for c in raw["capacity"]),
                    "cpu_ms_per_request": statistics.median(cpu) if cpu else None,
                    # a gateway core's worth of requests: 1000 / CPU ms per request
                    "req_per_gateway_core": 1000 / statistics.median(cpu) if cpu else None,
                    **cores,
                    "cpu_ms_at_load": (
                        statistics.median(c["cpu_ms"] for c in raw["at_load"]) if raw["at_load"] else None
                    ),
                    "sweep_max_rate": (
                        statistics.median(max_rate(rep) for rep in raw["sweep"]) if raw["sweep"] else None
                    ),
                    "repeats": {
                        "sequential": [p.to_dict() for p in raw["sequential"]],
                        "sweep": [[p.to_dict() for p in rep] for rep in raw["sweep"]],
                        "capacity": raw["capacity"],
                    },
                }
            direct = per_arm["direct"]
            for arm in arms_of(s)[1:]:
                per_arm[arm]["added_p50_ms"] = per_arm[arm]["sequential"]["p50_ms"] - direct["sequential"]["p50_ms"]
                per_arm[arm]["added_p99_ms"] = per_arm[arm]["sequential"]["p99_ms"] - direct["sequential"]["p99_ms"]
                per_arm[arm]["max_rate_ratio"] = (
                    per_arm[arm]["max_rate"] / direct["max_rate"] if direct["max_rate"] else 0.0
                )
            scenarios[s.name] = per_arm
        head = scenarios["small"]
        workers = scaling(head["generated"], head["generated-2w"], self.args.sizing_rate)
        line = summary_line(
            head["generated"]["added_p50_ms"],
            head["default"]["added_p50_ms"],
            head["generated"]["max_rate_ratio"],
            head["default"]["max_rate_ratio"],
            workers,
        )
        line += "; " + api_line(scenarios)
        pairs = like_for_like(self.paired_raw)
        if pairs:
            line += "; " + paired_line(pairs)
        return {"summary": line, "workers": workers, "scenarios": scenarios, "like_for_like": pairs}


def api_line(scenarios: dict) -> str:
    """Every API's added p50 and CPU per request at saturation, the generated gateway's and LiteLLM's defaults'."""
    parts = []
    for name, per_arm in scenarios.items():
        g, d = per_arm["generated"], per_arm["default"]
        parts.append(
            f"{name} {g['added_p50_ms']:.2f}/{g['cpu_ms_per_request']:.2f} "
            f"({d['added_p50_ms']:.2f}/{d['cpu_ms_per_request']:.2f})"
        )
    return "added p50 ms / CPU ms per request, generated (default): " + ", ".join(parts)


def like_for_like(paired_raw: dict) -> dict[str, dict[str, dict[str, float]]]:
    """{API: {arm: {"over_chat": ..., "over_small": ...}}}: the median over the repeats of the API's p50 minus its
    twin's (the same request sent as chat) and minus the short chat request's (small, or stream for a streamed API),
    from the paired phase."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for api, arms in paired_raw.items():
        twin, short = TWINS[api], SHORT[api]
        out[api] = {
            arm: {
                "over_chat": statistics.median(r[api] - r[twin] for r in reps),
                "over_small": statistics.median(r[api] - r[short] for r in reps),
            }
            for arm, reps in arms.items()
        }
    return out


def paired_line(pairs: dict) -> str:
    return "taking turns, p50 over the same request as chat / over short chat, generated (default): " + ", ".join(
        f"{api} {d['generated']['over_chat']:+.2f}/{d['generated']['over_small']:+.2f} "
        f"({d['default']['over_chat']:+.2f}/{d['default']['over_small']:+.2f}) ms"
        for api, d in pairs.items()
    )


def client_cpu_s(state_dir: Path) -> float:
    """CPU seconds of the load generator (this process) and the nginx mock so far."""
    total = tree_cpu_s(os.getpid(), children=False)
    try:
        total += tree_cpu_s(int((state_dir / "nginx" / "nginx.pid").read_text()))
    except (OSError, ValueError):
        pass
    return total


def scaling(one: dict, two: dict, backend_rate: float) -> dict:
    """1 vs 2 workers (the `small` scenario) and the worker count a backend's rate needs. The 2-worker
    gateway shares this machine's cores with the load generator, so its raw rate understates it:
    `projected_ratio` is its rate on 2 free cores (2 x its req/s per gateway core at saturation) over 1
    worker's on one. CPU per request and sizing use the at-load figures (each worker --load-share busy)."""
    cpu1, cpu2 = one["cpu_ms_at_load"], two["cpu_ms_at_load"]
    sat1, sat2 = one["cpu_ms_per_request"], two["cpu_ms_per_request"]
    return {
        "cpu_ms_1w": cpu1,
        "cpu_ms_2w": cpu2,
        "cpu_change": cpu2 / cpu1 - 1,
        "saturated_cpu_ms_1w": sat1,
        "saturated_cpu_ms_2w": sat2,
        "req_per_core_1w": 1000 / cpu1,
        "req_per_core_2w": 1000 / cpu2,
        "rate_1w": one["max_rate"],
        "rate_2w": two["max_rate"],
        "rate_ratio": two["max_rate"] / one["max_rate"],
        "cores_1w": one["gateway_cores"],
        "cores_2w": two["gateway_cores"],
        "client_cores_2w": two["client_cores"],
        "projected_ratio": 2 * sat1 / sat2,
        "sizing_rate": backend_rate,
        "workers_for_rate": workers_for(backend_rate, max(cpu1, cpu2)),
    }


def print_table(console: Console, report: dict) -> None:
    from rich.table import Table

    table = Table(
        "scenario",
        "arm",
        "seq p50 ms",
        "seq p99 ms",
        "added p50 ms",
        "max req/s",
        "ratio",
        "CPU ms/req",
        "req/s per core",
        "gateway cores",
        "client cores",
        "sweep max req/s",
        box=None,
    )
    for name, per_arm in report["scenarios"].items():
        for arm, r in per_arm.items():
            table.add_row(
                name,
                arm,
                f"{r['sequential']['p50_ms']:.2f}",
                f"{r['sequential']['p99_ms']:.2f}",
                f"{r.get('added_p50_ms', 0):.2f}",
                f"{r['max_rate']:.0f}",
                f"{r.get('max_rate_ratio', 1):.3f}",
                f"{r['cpu_ms_per_request']:.2f}" if r["cpu_ms_per_request"] else "-",
                f"{r['req_per_gateway_core']:.0f}" if r["req_per_gateway_core"] else "-",
                f"{r['gateway_cores']:.2f}",
                f"{r['client_cores']:.2f}",
                f"{r['sweep_max_rate']:.0f}" if r["sweep_max_rate"] is not None else "-",
            )
    console.print(table)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=MODELS, help="default: $BENCH_MODELS or bench/models.yml")
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--state-dir", type=Path, default=Path(".cache/bench"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=1.5, help="seconds per offered-rate point")
    ap.add_argument("--sequential", type=int, default=200, help="requests in each sequential phase")
    ap.add_argument("--api-sequential", type=int, default=200, help="the same for the other APIs' scenarios")
    ap.add_argument("--start-rate", type=float, default=50.0)
    ap.add_argument("--factor", type=float, default=1.6, help="each sweep step multiplies the offered rate by this")
    ap.add_argument("--max-rate", type=float, default=4000.0)
    ap.add_argument("--warmup", type=int, default=100, help="requests per arm and scenario before measuring")
    ap.add_argument("--timeout", type=float, default=15.0, help="seconds before a request counts as an error")
    ap.add_argument("--pause", type=float, default=0.3, help="seconds between points")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight in the capacity phase")
    ap.add_argument("--capacity-slices", type=int, default=4, help="turns per arm in the capacity phase")
    ap.add_argument("--capacity-seconds", type=float, default=1.0, help="seconds per capacity turn")
    ap.add_argument(
        "--load-share",
        type=float,
        default=0.6,
        help="at-load phase: offered rate per worker, as a share of 1 worker's max rate",
    )
    ap.add_argument(
        "--sizing-rate",
        type=float,
        default=600.0,
        help="backend req/s the summary line sizes the gateway for (workers needed)",
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny sweep, one repeat (for tests)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.duration, args.sequential, args.max_rate, args.warmup = 1, 0.5, 40, 80, 10
        args.api_sequential = SLICE
        args.capacity_slices, args.capacity_seconds = 1, 0.3
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True, highlight=False)
    started = time.monotonic()
    try:
        with bench_session(args.models, args.state_dir) as (plan, client_cpus, gateway_cpus):
            console.print(
                f"CPUs: load generator + mock {sorted(client_cpus or [])}, gateways {sorted(gateway_cpus or [])}"
            )
            gateways = start_gateways(plan, args.state_dir, gateway_cpus, console)
            try:
                arms = {
                    "direct": Arm("direct", "", "unused"),
                    **{
                        name: Arm(name, gw.gateway_url, gw.master_key, gw.procs[-1].pid)
                        for name, gw in gateways.items()
                    },
                }
                bench = Bench(args, console)
                asyncio.run(bench.run(bench.targets(arms, plan)))
            finally:
                stop_all(gateways.values())
    except ConfigError as exc:
        print_problems(exc, console)
        return 2
    except MockError as exc:
        console.print(f"[red]error:[/] {exc}", soft_wrap=True)
        return 2
    report = {
        "machine": machine(),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "cpus": {"client": sorted(client_cpus or []), "gateway": sorted(gateway_cpus or [])},
        "seconds": round(time.monotonic() - started, 1),
        **bench.report(),
    }
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

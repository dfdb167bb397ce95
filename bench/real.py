"""`make bench-real BACKEND_URL=...`: the same requests straight to one backend and through the gateway, on a
running deployment (a GPU host): completed req/s at 1, 16 and 64 requests in flight, plain and streamed,
and the ratio gateway / direct.

    python -m bench.real --backend-url http://172.18.0.3:8001 [--model NAME] [--models models.yml]
                         [--keys compose/.env] [--gateway-url http://127.0.0.1:4000] [--seconds 10]

The model defaults to the first in models.yml, the gateway URL to its gateway.port on 127.0.0.1, the keys to
the generated compose/.env (LITELLM_MASTER_KEY and the model's VLLM_API_KEY_*). Direct and gateway take turns
in slices (--slices per point), so a drift of the host's speed touches both alike. Streams: the whole stream
is read and must end with [DONE]; their latency is the time to the first chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from generator.compile.load.loader import load_plan
from generator.compile.output import read_env_file
from generator.errors import ConfigError, print_problems

from .loadgen import LoadGen, Target
from .stats import PointStats

PROMPT = "Write one short sentence about the sea."


def body(model: str, stream: bool, max_tokens: int) -> bytes:
    return json.dumps(
        {"model": model, "stream": stream, "max_tokens": max_tokens, "messages": [{"role": "user", "content": PROMPT}]}
    ).encode()


def target(base: str, key: str, payload: bytes, stream: bool) -> Target:
    base = base.rstrip("/")
    url = base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")
    return Target(url, {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}, payload, stream)


async def measure(args, direct: dict[bool, Target], gateway: dict[bool, Target], console: Console) -> list[dict]:
    rows = []
    async with LoadGen(timeout_s=args.timeout, max_connections=max(args.concurrency) * 2) as gen:
        for stream in (False, True):
            for t in (direct[stream], gateway[stream]):
                await gen.warm_up(t, min(32, max(args.concurrency)))
            for c in args.concurrency:
                got: dict[str, list[PointStats]] = {"direct": [], "gateway": []}
                for i in range(args.slices):
                    order = ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct")
                    for arm in order:
                        t = direct[stream] if arm == "direct" else gateway[stream]
                        got[arm].append(await gen.closed_loop(t, c, args.seconds / args.slices))
                row = {"stream": stream, "concurrency": c}
                for arm, points in got.items():
                    ok = sum(p.ok for p in points)
                    row[arm] = {
                        "rate": ok
                        / sum(p.ok / p.achieved if p.achieved else args.seconds / args.slices for p in points),
                        "p50_ms": statistics.median([p.p50_ms for p in points if p.ok] or [math.nan]),
                        "errors": sum(p.errors for p in points),
                    }
                row["ratio"] = row["gateway"]["rate"] / row["direct"]["rate"] if row["direct"]["rate"] else 0.0
                rows.append(row)
                console.print(
                    f"{'stream' if stream else 'plain':6} {c:3} in flight: direct {row['direct']['rate']:8.1f} "
                    f"req/s, gateway {row['gateway']['rate']:8.1f} req/s, ratio {row['ratio']:.2f}",
                    highlight=False,
                )
    if gen.failures:
        console.print(f"[yellow]failures: {dict(gen.failures)}[/]")
    return rows


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.real", description=__doc__.splitlines()[0])
    ap.add_argument("--backend-url", required=True, help="one model's vLLM, e.g. http://<container IP>:8001")
    ap.add_argument("--model", help="models.yml name of that backend's model (default: the first)")
    ap.add_argument("--models", type=Path, default=Path("models.yml"))
    ap.add_argument("--keys", type=Path, default=Path("compose/.env"), help="the generated keys file")
    ap.add_argument("--gateway-url", help="default: http://127.0.0.1:<gateway.port>")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--seconds", type=float, default=10.0, help="per arm and point, in --slices turns")
    ap.add_argument("--slices", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--out", type=Path, default=Path("bench/results/real.json"))
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True, highlight=False)
    try:
        plan = load_plan(args.models)
    except ConfigError as exc:
        print_problems(exc, console)
        return 2
    m = next((m for m in plan.models if m.name == args.model), None) if args.model else plan.models[0]
    if m is None:
        console.print(
            f"[red]error:[/] --model {args.model}: not in {args.models} ({', '.join(x.name for x in plan.models)})"
        )
        return 2
    keys = read_env_file(args.keys) if args.keys.exists() else {}
    missing = [k for k in (plan.gateway.master_key_env, m.api_key_env) if k not in keys]
    if missing:
        console.print(f"[red]error:[/] {args.keys} has no {', '.join(missing)}: pass --keys (the stack's keys file)")
        return 2
    gateway_url = args.gateway_url or f"http://127.0.0.1:{plan.gateway.port}"
    direct = {
        s: target(args.backend_url, keys[m.api_key_env], body(m.served_name, s, args.max_tokens), s)
        for s in (False, True)
    }
    gateway = {
        s: target(gateway_url, keys[plan.gateway.master_key_env], body(m.served_name, s, args.max_tokens), s)
        for s in (False, True)
    }
    console.print(f"{m.name}: direct {direct[False].url} vs gateway {gateway[False].url}, max_tokens {args.max_tokens}")
    rows = asyncio.run(measure(args, direct, gateway, console))
    table = Table(
        "", "in flight", "direct req/s", "gateway req/s", "ratio", "direct p50 ms", "gateway p50 ms", "errors", box=None
    )
    for r in rows:
        table.add_row(
            "stream" if r["stream"] else "plain",
            str(r["concurrency"]),
            f"{r['direct']['rate']:.1f}",
            f"{r['gateway']['rate']:.1f}",
            f"{r['ratio']:.2f}",
            f"{r['direct']['p50_ms']:.1f}",
            f"{r['gateway']['p50_ms']:.1f}",
            str(r["direct"]["errors"] + r["gateway"]["errors"]),
        )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "model": m.name,
                "backend_url": args.backend_url,
                "gateway_url": gateway_url,
                "max_tokens": args.max_tokens,
                "points": rows,
            },
            indent=1,
        )
        + "\n"
    )
    top = max(args.concurrency)
    at_top = {r["stream"]: r["ratio"] for r in rows if r["concurrency"] == top}
    print(f"gateway/direct at {top} in flight: plain {at_top[False]:.2f}, streamed {at_top[True]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make bench-replicas`: the prefix-cache hit rate of multi-turn conversations on a replicated model, by arm.

One local stack (the model's replicas + the real gateway), three arms through that gateway, one after another:

- one-replica: every request to the first replica (what one copy of the model gives);
- shuffle: both replicas, LiteLLM's simple-shuffle (what LiteLLM alone gives users today);
- routed: both replicas, the generated config (replica_routing.py keeps a conversation on one replica).

Then the placement of new conversations, with conversations of uneven lengths (CLIENTS clients, each starting
the next conversation of one seeded list when its last one ends, so at any moment CLIENTS conversations run):

- hashed: both replicas, each conversation on its rendezvous-hash choice (the stateless routing, as without
  Redis; model_info gateway_placement: hash);
- least-loaded: the generated config (a new conversation goes to the replica with the fewest requests in flight).

Reported per arm: requests per replica; each replica's requests in flight averaged over the arm's time and the
average gap between the busiest and the idlest replica, from the client's own requests (sent, answered, and the
replica the gateway names in its x-litellm-model-id header); TTFT p50/p95. The JSON also holds the replicas' own
gauges (vllm:num_requests_running + waiting) sampled every 0.2 s (on a CPU host most of a request's time is
spent in the gateway, so they see little of it).

The arms are model groups of one gateway config (the generated one plus two groups the benchmark adds), so they
share the gateway, its workers and the backends; each arm's conversations have text of their own, so no arm
finds another's prefixes in the cache. Each arm runs CONVERSATIONS conversations at once, TURNS turns each,
every turn resending the whole conversation (a growing prefix, as coding agents do), streamed. Reported per arm:
the prefix-cache hit rate from vLLM's own counters (vllm:prefix_cache_hits / vllm:prefix_cache_queries, the
arm's increase summed over the replicas), the time to first token p50 (client side) and the requests per replica.

MODELS=... picks another models.yml (its first model with replicas > 1; a GPU host measures the same with its own
file: `make bench-replicas MODELS=examples/replicas/models.yml`). Default: examples/cpu-replicas/models.yml.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import statistics
import time
import uuid
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from generator.compile.load.loader import load_plan
from generator.compile.load.schema import TOP_LEVEL
from generator.compile.plan import ModelPlan
from generator.operate.runtime.local import LocalStack
from generator.operate.runtime.ports import consecutive_free_ports, free_port

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ROOT / "examples/cpu-replicas/models.yml"
ARMS = ("one-replica", "shuffle", "routed")
PLACEMENT_ARMS = ("hashed", "least-loaded")
RUN = uuid.uuid4().hex[:8]
LENGTHS = (1, 1, 1, 2, 2, 3, 6, 12)  # turns of a conversation in the placement arms, drawn with a fixed seed
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


class BenchStack(LocalStack):
    """The generated gateway config plus three model groups on the same backends: `<model>--one-replica` (the
    first replica alone), `<model>--shuffle` (every replica, left to LiteLLM's simple-shuffle) and
    `<model>--hashed` (every replica, routed by the stateless rendezvous hash)."""

    def write_gateway_config(self, api_base=None) -> Path:
        path = super().write_gateway_config(api_base)
        config = yaml.safe_load(path.read_text())
        name = self.model.served_name
        replicas = [e for e in config["model_list"] if e["model_name"] == name]
        for e in replicas:  # ids that name the replica: the gateway's x-litellm-model-id header tells the client
            e["model_info"] = {**e["model_info"], "id": f"{name}@{e['model_info']['gateway_replica']}"}
        extra = []
        for arm, entries in (("one-replica", replicas[:1]), ("shuffle", replicas)):
            for e in entries:
                info = {
                    k: v
                    for k, v in e["model_info"].items()
                    if k not in ("gateway_replica", "allowed_fails_policy", "cooldown_time")
                }
                info["id"] = f"{name}--{arm}@{e['model_info']['gateway_replica']}"
                extra.append({**e, "model_name": f"{name}--{arm}", "model_info": info})
        for e in replicas:
            extra.append(
                {
                    **e,
                    "model_name": f"{name}--hashed",
                    "model_info": {
                        **e["model_info"],
                        "gateway_placement": "hash",
                        "id": f"{name}--hashed@{e['model_info']['gateway_replica']}",
                    },
                }
            )
        config["model_list"] += extra
        policy = (config.get("router_settings") or {}).get("model_group_retry_policy") or {}
        if name in policy:
            policy[f"{name}--hashed"] = policy[name]
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    @property
    def model(self) -> ModelPlan:
        return next(m for m in self.plan.models if m.replicas > 1)


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(n))


def counters(stack: BenchStack) -> dict[str, dict[str, float]]:
    """Per replica: prefix-cache queries and hits, finished requests (cumulative, from its /metrics)."""
    key = stack.keys()[stack.model.api_key_env]
    wanted = {
        "vllm:prefix_cache_queries_total": "queries",
        "vllm:prefix_cache_hits_total": "hits",
        "vllm:request_success_total": "requests",
    }
    out = {}
    for m in stack.plan.models:
        if m.served_name != stack.model.served_name:
            continue
        text = httpx.get(
            f"http://127.0.0.1:{m.port}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=30
        ).text
        values = dict.fromkeys(wanted.values(), 0.0)
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in wanted:
                    values[wanted[s.name]] += s.value
        out[m.name] = values
    return out


def gauges(stack: BenchStack) -> dict[str, float]:
    """Per replica: requests running or waiting now (its /metrics)."""
    key = stack.keys()[stack.model.api_key_env]
    out = {}
    for m in stack.plan.models:
        if m.served_name == stack.model.served_name:
            text = httpx.get(
                f"http://127.0.0.1:{m.port}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=30
            ).text
            out[m.name] = sum(
                s.value
                for f in text_string_to_metric_families(text)
                for s in f.samples
                if s.name in ("vllm:num_requests_running", "vllm:num_requests_waiting")
            )
    return out


def conversation(
    url: str, key: str, model: str, seed: int, turns: int, lead_words: int, turn_words: int, max_tokens: int
) -> list[dict]:
    """One conversation, turn after turn, streamed; per turn: the time to first token, when it was sent and
    answered (monotonic clock) and the replica that served it (the gateway's x-litellm-model-id header)."""
    rng = random.Random(seed)
    # RUN: text of this run's own, so no claim or cached prefix of an earlier run (the state dir is reused) applies
    messages = [
        {"role": "system", "content": f"You are a coding agent ({RUN}). " + words(rng, lead_words)},
        {"role": "user", "content": words(rng, turn_words)},
    ]
    ttft = []
    with httpx.Client(timeout=600, headers={"Authorization": f"Bearer {key}"}) as client:
        for _ in range(turns):
            start = time.monotonic()
            first = None
            text = ""
            body = {"model": model, "messages": messages, "stream": True, "max_tokens": max_tokens}
            with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
                r.raise_for_status()
                replica = r.headers.get("x-litellm-model-id", "").rpartition("@")[2]
                for line in r.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                    if first is None and (delta.get("content") or delta.get("reasoning_content")):
                        first = time.monotonic() - start
                    text += delta.get("content") or ""
            ttft.append(
                {
                    "ttft": first if first is not None else time.monotonic() - start,
                    "start": start,
                    "end": time.monotonic(),
                    "replica": replica,
                }
            )
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": words(rng, turn_words)}]
    return ttft


def run_arm(stack: BenchStack, arm: str, args: argparse.Namespace, seed: int) -> dict:
    name = stack.model.served_name
    model = name if arm == "routed" else f"{name}--{arm}"
    before = counters(stack)
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.conversations) as pool:
        ttfts = list(
            pool.map(
                lambda i: conversation(
                    stack.gateway_url,
                    stack.master_key,
                    model,
                    seed + i,
                    args.turns,
                    args.lead_words,
                    args.turn_words,
                    args.max_tokens,
                ),
                range(args.conversations),
            )
        )
    seconds = time.monotonic() - started
    after = counters(stack)
    grew = {r: {k: after[r][k] - before[r][k] for k in after[r]} for r in after}
    queries = sum(g["queries"] for g in grew.values())
    hits = sum(g["hits"] for g in grew.values())
    flat = [t["ttft"] for conv in ttfts for t in conv]
    later = [t["ttft"] for conv in ttfts for t in conv[1:]]  # turns 2..: the ones a cache can help
    return {
        "arm": arm,
        "hit_rate": hits / queries if queries else 0.0,
        "hits": hits,
        "queries": queries,
        "ttft_p50_s": statistics.median(flat),
        "ttft_p50_later_turns_s": statistics.median(later) if later else None,
        "requests_per_replica": {r: g["requests"] for r, g in grew.items()},
        "seconds": seconds,
    }


def gateway_counts(stack: BenchStack) -> dict[str, int]:
    """The gateway's own count of requests in flight per replica (the placement's, in the stack's Redis)."""
    import redis

    if not stack.redis_port:
        return {}
    db = redis.Redis(port=stack.redis_port, password=stack.keys()["REDIS_PASSWORD"], socket_timeout=5)
    try:
        return {
            m.name: int(db.zcard(f"gateway:replicas:inflight:{m.name}"))
            for m in stack.plan.models
            if m.served_name == stack.model.served_name
        }
    finally:
        db.close()


def in_flight(records: list[dict], names: list[str]) -> tuple[dict[str, float], float]:
    """From the client's requests (sent, answered, replica): each replica's requests in flight, averaged over the
    arm's time, and the average gap between the busiest and the idlest replica."""
    events = sorted([(r["start"], 1, r["replica"]) for r in records] + [(r["end"], -1, r["replica"]) for r in records])
    if not events:
        return dict.fromkeys(names, 0.0), 0.0
    now = dict.fromkeys(names, 0)
    area = dict.fromkeys(names, 0.0)
    gap, last = 0.0, events[0][0]
    for t, step, replica in events:
        width = t - last
        for n in names:
            area[n] += now[n] * width
        gap += (max(now.values()) - min(now.values())) * width
        now[replica] = now.get(replica, 0) + step
        last = t
    total = (events[-1][0] - events[0][0]) or 1.0
    return {n: area[n] / total for n in names}, gap / total


def run_placement_arm(stack: BenchStack, arm: str, args: argparse.Namespace, seed: int) -> dict:
    """`args.clients` clients run `args.placement_conversations` conversations of uneven lengths (the same lengths
    in every arm, text of the arm's own), each client starting the next when its last one ends."""
    import queue
    import threading

    name = stack.model.served_name
    model = name if arm == "least-loaded" else f"{name}--{arm}"
    lengths = random.Random(7).choices(LENGTHS, k=args.placement_conversations)
    todo: queue.Queue = queue.Queue()
    for i, turns in enumerate(lengths):
        todo.put((i, turns))
    records: list[dict] = []
    samples: list[dict[str, float]] = []
    done = threading.Event()

    def client() -> None:
        while True:
            try:
                i, turns = todo.get_nowait()
            except queue.Empty:
                return
            records.extend(
                conversation(
                    stack.gateway_url,
                    stack.master_key,
                    model,
                    seed + i,
                    turns,
                    args.placement_lead_words,
                    args.placement_turn_words,
                    args.max_tokens,
                )
            )

    def sample() -> None:
        while not done.wait(0.2):
            samples.append(gauges(stack))
            placed_now.append(gateway_counts(stack))

    placed_now: list[dict[str, int]] = []

    before = counters(stack)
    started = time.monotonic()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
        for f in [pool.submit(client) for _ in range(args.clients)]:
            f.result()
    done.set()
    sampler.join()
    seconds = time.monotonic() - started
    after = counters(stack)
    grew = {r: {k: after[r][k] - before[r][k] for k in after[r]} for r in after}
    names = sorted(after)
    mean = {r: statistics.fmean(s[r] for s in samples) if samples else 0.0 for r in names}
    gap = statistics.fmean(max(s.values()) - min(s.values()) for s in samples) if samples else 0.0
    queries = sum(g["queries"] for g in grew.values())
    ordered = sorted(r["ttft"] for r in records)
    concurrency, spread = in_flight(records, names)
    by_header = {n: sum(r["replica"] == n for r in records) for n in names}
    gateway_mean = {n: statistics.fmean(p.get(n, 0) for p in placed_now) if placed_now else 0.0 for n in names}
    return {
        "arm": arm,
        "conversations": len(lengths),
        "turns": sum(lengths),
        "requests_per_replica": {r: grew[r]["requests"] for r in names},
        "vllm_in_flight_mean": mean,
        "vllm_in_flight_gap_mean": gap,
        "samples": len(samples),
        "in_flight_mean": concurrency,
        "in_flight_gap_mean": spread,
        "requests_by_header": by_header,
        "gateway_count_mean": gateway_mean,
        "hit_rate": sum(g["hits"] for g in grew.values()) / queries if queries else 0.0,
        "ttft_p50_s": statistics.median(ordered),
        "ttft_p95_s": ordered[int(0.95 * (len(ordered) - 1))],
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.replicas", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--lead-words", type=int, default=1500, help="words of the system prompt (the shared lead)")
    ap.add_argument("--turn-words", type=int, default=300, help="words each user turn adds")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--clients", type=int, default=8, help="placement arms: conversations at once")
    ap.add_argument("--placement-conversations", type=int, default=48, help="placement arms: conversations")
    ap.add_argument("--placement-lead-words", type=int, default=1500)
    ap.add_argument("--placement-turn-words", type=int, default=300)
    ap.add_argument("--arms", default=",".join(ARMS + PLACEMENT_ARMS), help="which arms, comma-separated")
    ap.add_argument("--out", type=Path, default=ROOT / ".cache/bench-replicas.json")
    ap.add_argument("--vllm-python", default=os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python")))
    args = ap.parse_args(argv)
    console = Console()
    doc = yaml.safe_load(args.models.read_text())
    state = ROOT / ".cache/bench-replicas"
    src = state / "models.yml"
    src.parent.mkdir(parents=True, exist_ok=True)
    # free ports: never a running demo's (a replicated model takes consecutive ones from its `port:`)
    doc["gateway"] = {**(doc.get("gateway") or {}), "port": free_port()}
    for name, entry in doc.items():
        if name not in TOP_LEVEL and isinstance(entry, dict):
            entry.pop("port", None)
            entry["port"] = consecutive_free_ports(int(entry.get("replicas") or 1))
    src.write_text(yaml.safe_dump(doc, sort_keys=False))
    os.chdir(ROOT)  # relative model paths in the examples
    plan = load_plan(src)
    if not plan.replicated:
        console.print(f"[red]error:[/] {args.models} has no model with replicas > 1")
        return 2
    stack = BenchStack(plan, state / "state", args.vllm_python, console=console)
    results, placed = [], []
    wanted = args.arms.split(",")
    try:
        stack.start(timeout=900)
        for i, arm in enumerate(ARMS):
            if arm in wanted:
                console.print(f"{arm}: {args.conversations} conversations x {args.turns} turns ...")
                results.append(run_arm(stack, arm, args, seed=1000 * (i + 1)))
        for i, arm in enumerate(PLACEMENT_ARMS):
            if arm in wanted:
                console.print(
                    f"{arm}: {args.placement_conversations} conversations of uneven lengths, {args.clients} at once ..."
                )
                placed.append(run_placement_arm(stack, arm, args, seed=100_000 * (i + 1)))
    finally:
        stack.stop()
    print_tables(console, stack, args, results, placed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "models": str(args.models),
                "args": {k: str(v) for k, v in vars(args).items()},
                "results": results,
                "placement": placed,
            },
            indent=1,
        )
    )
    console.print(f"wrote {args.out}")
    return 0


def print_tables(
    console: Console, stack: BenchStack, args: argparse.Namespace, results: list[dict], placed: list[dict]
) -> None:
    if results:
        print_hit_rates(console, stack, args, results)
    if placed:
        table = Table(
            title=f"placement of new conversations, {placed[0]['conversations']} conversations of "
            f"uneven lengths ({placed[0]['turns']} turns), {args.clients} at once",
            title_justify="left",
        )
        for col in (
            "arm",
            "requests per replica",
            "in flight, mean per replica",
            "busiest - idlest, mean",
            "hit rate",
            "TTFT p50",
            "TTFT p95",
            "seconds",
        ):
            table.add_column(col)
        for r in placed:
            table.add_row(
                r["arm"],
                ", ".join(f"{k} {v:.0f}" for k, v in r["requests_per_replica"].items()),
                ", ".join(f"{k} {v:.2f}" for k, v in r["in_flight_mean"].items()),
                f"{r['in_flight_gap_mean']:.2f}",
                f"{r['hit_rate']:.3f}",
                f"{1000 * r['ttft_p50_s']:.0f} ms",
                f"{1000 * r['ttft_p95_s']:.0f} ms",
                f"{r['seconds']:.0f}",
            )
        console.print(table)


def print_hit_rates(console: Console, stack: BenchStack, args: argparse.Namespace, results: list[dict]) -> None:
    one = results[0]["hit_rate"] or 1.0
    table = Table(
        title=f"prefix-cache hit rate, {stack.model.served_name} x {stack.model.replicas} replicas "
        f"({args.conversations} conversations x {args.turns} turns)",
        title_justify="left",
    )
    for col in ("arm", "hit rate", "vs one replica", "TTFT p50", "TTFT p50 turns 2+", "requests per replica"):
        table.add_column(col)
    for r in results:
        table.add_row(
            r["arm"],
            f"{r['hit_rate']:.3f}",
            f"{r['hit_rate'] / one:.2f}",
            f"{1000 * r['ttft_p50_s']:.0f} ms",
            f"{1000 * r['ttft_p50_later_turns_s']:.0f} ms" if r["ttft_p50_later_turns_s"] else "-",
            ", ".join(f"{k} {v:.0f}" for k, v in r["requests_per_replica"].items()),
        )
    console.print(table)


if __name__ == "__main__":
    raise SystemExit(main())

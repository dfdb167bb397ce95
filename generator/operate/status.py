"""`make status` (`python -m generator.operate.status`): a running stack at a glance.

    python -m generator.operate.status            # two samples `--interval` apart, one table
    python -m generator.operate.status --watch    # refreshes in place until Ctrl-C
    python -m generator.operate.status --json     # {"gateway": {...}, "models": [{...}, ...]} for scripts

Every target is read the same way: the gateway's `/gateway/status` route (generator/shipped/gateway_hooks/
gateway_status.py), which probes each backend's /health and /metrics from inside the stack and
returns cumulative counters. Rates (tokens/s, requests/s) and the TTFT median over the last interval
are computed here from two samples, so the route holds no state and any gateway worker answers.

Where the gateway and its key are found (first that applies):
  --url / --key, or GATEWAY_URL / GATEWAY_KEY (as tests/integration use them);
  the local stack `python -m generator.operate.runtime up` (make demo) started, while its gateway process runs
  (.cache/local-stack/state.json, key in .cache/local-stack/.env): without --models, or with the
  models.yml that stack runs;
  otherwise models.yml (--models): http://127.0.0.1:<gateway.port>, key from compose/.env, or from
  k8s/secrets.env with --k8s (after `kubectl -n llm-gateway port-forward svc/litellm <port>:<port>`).
When nothing answers there, one line says that no stack is running.

Errors are the backends' own failures (the gateway's failed requests with a 5xx status, a timeout
(408) or an overload (429)); other 4xx answers are the clients' mistakes, counted apart.

Exit code: 0 when the gateway and every model are healthy (an on-demand model: loaded, loading, draining,
asleep or stopped), 1 otherwise (no stack running included), 2 when no key is found.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..compile.load.loader import load_plan
from ..compile.output import read_env_file
from ..compile.plan import Plan
from ..errors import ConfigError, print_problems
from .runtime.processes import started_at

ROUTE = "/gateway/status"
DEFAULT_STATE = Path(".cache/local-stack")
STATE_STYLE = {
    "healthy": "green",
    "starting": "yellow",
    "unhealthy": "red",
    "down": "red",
    # on-demand models (the controller's states): not loaded is not a failure
    "loaded": "green",
    "loading": "yellow",
    "draining": "yellow",
    "asleep": "blue",
    "stopped": "blue",
    "failed": "red",
}
FINE = {"healthy", "loaded", "loading", "draining", "asleep", "stopped"}  # exit 0


# --- where the gateway is ---------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    url: str  # without /v1
    key: str | None
    plan: Plan | None  # for GPUs and the models' order; None when no models.yml was found
    where: str  # which stack it is, for messages: "the local stack in .cache/local-stack", "models.yml"
    keys: str = "--key / GATEWAY_KEY"  # where the key was read from, for messages


def _plan(path: Path | str | None) -> Plan | None:
    if path is None or not Path(path).exists():
        return None
    return load_plan(path)


def _key_from(keys: Path, plan: Plan | None) -> str | None:
    if not keys.exists():
        return None
    return read_env_file(keys).get(plan.gateway.master_key_env if plan else "LITELLM_MASTER_KEY")


class NoStack(Exception):
    """Nothing to ask: the one line that says so."""

    def __init__(self, message: str, url: str | None = None):
        super().__init__(message)
        self.url = url


def running_local_stack(state_dir: Path) -> dict | None:
    """What state.json records, while the gateway process it records is still the one it started
    (a stack that was stopped, or crashed, leaves a file whose pid is gone or reused); else None."""
    try:
        recorded = json.loads((state_dir / "state.json").read_text())
    except (OSError, ValueError):
        return None
    for entry in recorded.get("procs") or []:
        if entry.get("name") == "gateway" and entry.get("started") is not None:
            now = started_at(entry.get("pid"))
            if now is not None and abs(now - entry["started"]) <= 1:
                return recorded
    return None


def _same_file(a: Path | str, b: Path | str | None) -> bool:
    return b is not None and Path(a).resolve() == Path(b).resolve()


def find_target(args: argparse.Namespace, env: dict[str, str]) -> Target:
    """The gateway URL, key and plan from flags, environment, the running local stack's state, or models.yml."""
    url, key = args.url or env.get("GATEWAY_URL"), args.key or env.get("GATEWAY_KEY")
    local = running_local_stack(args.state_dir) if url is None and args.keys is None and not args.k8s else None
    if local and (args.models is None or _same_file(args.models, local.get("models"))):
        plan = _plan(local.get("models"))
        return Target(
            local["gateway_url"],
            key or _key_from(args.state_dir / ".env", plan),
            plan,
            f"the local stack in {args.state_dir}",
            "--key" if key else str(args.state_dir / ".env"),
        )
    models = args.models or Path("models.yml")
    plan = _plan(models)
    keys = args.keys or Path("k8s/secrets.env" if args.k8s else "compose/.env")
    if url is None:
        if plan is None:
            raise NoStack(
                f"no stack is running: no local stack in {args.state_dir} and no {models} here "
                "(start one with `make demo`, or give --models, or --url and --key)"
            )
        host = plan.gateway.bind if plan.gateway.bind not in ("0.0.0.0", "::") else "127.0.0.1"
        url = f"http://{f'[{host}]' if ':' in host else host}:{plan.gateway.port}"
    return Target(
        url.rstrip("/").removesuffix("/v1"),
        key or _key_from(keys, plan),
        plan,
        str(models),
        "--key" if key else str(keys),
    )


def answers(url: str, timeout: float) -> bool:
    """Something answers HTTP at the gateway's address (any status: the key is checked later)."""
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            client.get(url + "/health/liveliness")
        return True
    except httpx.HTTPError:
        return False


# --- one sample, and what two samples say ------------------------------------------------------
def fetch(client: httpx.Client, target: Target) -> dict:
    """The route's JSON, or {"error": ..., "state": ...} when the gateway cannot be asked."""
    try:
        r = client.get(target.url + ROUTE, headers={"Authorization": f"Bearer {target.key}"})
    except httpx.HTTPError as exc:
        return {"state": "down", "error": f"{target.url}: {type(exc).__name__}: {exc}"}
    if r.status_code == 401:
        return {
            "state": "unauthorized",
            "error": f"{target.url} refused the key from {target.keys} (401; the gateway of {target.where})",
        }
    if r.status_code != 200:
        return {"state": "unhealthy", "error": f"{target.url}{ROUTE} answered {r.status_code}: {r.text[:200]}"}
    return r.json()


def rate(before: float | None, after: float | None, seconds: float) -> float | None:
    """Per second between two readings of a counter; a counter that went down was reset (its process
    restarted), so everything it counts now is new."""
    if before is None or after is None or seconds <= 0:
        return None
    return (after - before if after >= before else after) / seconds


def quantile(q: float, before: dict | None, after: dict | None) -> float | None:
    """The q-quantile of the observations between two readings of a cumulative histogram
    ({"buckets": [["0.5", count], ..., ["+Inf", count]]}), interpolated within its bucket as Prometheus's
    histogram_quantile does; None without new observations."""
    if not after or not after.get("buckets"):
        return None
    old = {float(le): n for le, n in (before or {}).get("buckets", [])}
    reset = before is None or after.get("count", 0) < before.get("count", 0)
    buckets = sorted((float(le), n - (0 if reset else old.get(float(le), 0))) for le, n in after["buckets"])
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for le, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(le):
                return lower  # above the largest finite bound: that bound is all we know
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = le, cumulative
    return lower


def _m(entry: dict | None, field: str):
    return ((entry or {}).get("metrics") or {}).get(field)


def report(before: dict | None, after: dict, target: Target) -> dict:
    """What status shows: states, gauges and counters of `after`, rates over the interval since `before`."""
    gw_after = after.get("gateway") or {}
    gw_before = (before or {}).get("gateway") or {}
    seconds = after["time"] - before["time"] if before and "time" in before and "time" in after else 0.0
    gm_after, gm_before = gw_after.get("metrics") or {}, gw_before.get("metrics") or {}
    gateway = {
        "url": target.url,
        "state": after.get("state") or gw_after.get("state", "unhealthy"),
        "error": after.get("error") or gw_after.get("metrics_error"),
        "workers": gw_after.get("workers"),
        "answered": "error" not in after,  # False: the route could not be asked (down, key refused, ...)
        "requests_total": gm_after.get("requests_total"),
        "errors_total": gm_after.get("errors_total"),  # the backends' failures (5xx, 408, 429)
        "client_errors_total": gm_after.get("client_errors_total"),  # other 4xx: what clients got wrong
        "requests_per_s": rate(gm_before.get("requests_total"), gm_after.get("requests_total"), seconds),
        "interval_s": round(seconds, 3) if seconds else None,
    }
    found = {m["name"]: m for m in after.get("models") or []}
    previous = {m["name"]: m for m in (before or {}).get("models") or []}
    # one row per backend: a replicated model's replicas under their own names (<model>-<i>), the others under the
    # name clients send; the gateway's counters are per name clients send
    planned = (
        [(m.name if m.replicas > 1 else m.served_name, m.gpus, m.served_name) for m in target.plan.models]
        + [(m.served_name, None, m.served_name) for m in target.plan.hosted]  # hosted: no GPU of ours
        if target.plan
        else []
    )
    names = [n for n, _, _ in planned] + sorted(set(found) - {n for n, _, _ in planned})
    gpus = {n: g for n, g, _ in planned if g is not None}
    served = {n: s for n, _, s in planned} | {n: e.get("model") or n for n, e in found.items() if n not in gpus}
    # LoRA adapters: under the backend(s) that serve them (the plan's, else what the gateway reports)
    adapters = (
        {
            n: [a.name for a in m.adapters]
            for m in target.plan.models
            for n in [m.name if m.replicas > 1 else m.served_name]
        }
        if target.plan
        else {}
    )
    adapters |= {n: e.get("adapters") or [] for n, e in found.items() if n not in adapters}
    models = []
    for name in names:
        cur, old = found.get(name), previous.get(name)
        model = served.get(name, name)
        reachable = "error" not in after
        models.append(
            {
                "name": name,
                "adapter_of": None,  # a LoRA adapter's row: the backend row it is served by
                "state": cur["state"] if cur else ("down" if reachable else "unknown"),
                "reason": cur["reason"]
                if cur
                else ("not in the gateway's config" if reachable else "the gateway did not answer"),
                "gpus": list(gpus[name]) if name in gpus else None,
                "requests_running": _m(cur, "requests_running"),
                "requests_waiting": _m(cur, "requests_waiting"),
                "kv_cache_usage": _m(cur, "kv_cache_usage"),
                "prompt_tokens_per_s": rate(_m(old, "prompt_tokens_total"), _m(cur, "prompt_tokens_total"), seconds),
                "generation_tokens_per_s": rate(
                    _m(old, "generation_tokens_total"), _m(cur, "generation_tokens_total"), seconds
                ),
                "ttft_p50_s": quantile(0.5, _m(old, "ttft_seconds"), _m(cur, "ttft_seconds")) if old else None,
                "preemptions_total": _m(cur, "preemptions_total"),
                "model": model,
                "gateway_requests_total": (gm_after.get("requests_by_model") or {}).get(model, 0.0)
                if gm_after
                else None,
                "gateway_errors_total": (gm_after.get("errors_by_model") or {}).get(model, 0.0) if gm_after else None,
                "gateway_client_errors_total": (gm_after.get("client_errors_by_model") or {}).get(model, 0.0)
                if gm_after
                else None,
                # requests this model's fallbacks answered since the gateway started: {fallback: {reason: n}}
                "fallbacks": (gm_after.get("fallbacks") or {}).get(model, {}) if gm_after else None,
            }
        )
        models += [adapter_row(models[-1], adapter, gm_after) for adapter in adapters.get(name, [])]
    return {"gateway": gateway, "models": models, "people": usage(gm_after, gw_after.get("budgets") or {})}


def adapter_row(base: dict, adapter: str, gm: dict) -> dict:
    """A LoRA adapter's row: its base backend's state (the same vLLM serves it; the backend's load, tokens and KV
    cache are the base's row, shared), the gateway's counters under the adapter's own name."""
    by = lambda field: (gm.get(field) or {}).get(adapter, 0.0) if gm else None  # noqa: E731
    return {
        **{k: None for k in base},
        "name": adapter,
        "adapter_of": base["name"],
        "model": adapter,
        "state": base["state"],
        "reason": base["reason"],
        "gpus": base["gpus"],
        "gateway_requests_total": by("requests_by_model"),
        "gateway_errors_total": by("errors_by_model"),
        "gateway_client_errors_total": by("client_errors_by_model"),
    }


def usage(metrics: dict, budgets: dict) -> list[dict]:
    """One row per person and model (models.yml people:): requests and tokens in/out since the gateway started
    (LiteLLM's counters, labelled with the person's name), and the token budget used this UTC day / month."""
    rows = []
    for person, models in (metrics.get("people") or {}).items():
        for model, c in models.items():
            rows.append(
                {
                    "person": person,
                    "model": model,
                    **{k: c.get(k, 0.0) for k in ("requests", "input_tokens", "output_tokens")},
                }
            )
    for person, b in budgets.items():
        rows.append(
            {
                "person": person,
                "model": "(budget)",
                "tokens_today": b.get("day"),
                "tokens_this_month": b.get("month"),
                "limits": b.get("limits"),
            }
        )
    return rows


def render_usage(rep: dict) -> Table:
    table = Table(
        box=None,
        header_style="bold",
        pad_edge=False,
        title="usage per person since the gateway started",
        title_justify="left",
        title_style="bold",
    )
    table.add_column("person", no_wrap=True)
    table.add_column("model", no_wrap=True)
    for name in ("requests", "tokens in", "tokens out"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rep.get("people") or []:
        if r["model"] == "(budget)":
            limits = r.get("limits") or {}
            text = ", ".join(
                f"{r['tokens_today' if p == 'day' else 'tokens_this_month']} of {v} tokens this {p}"
                for p, v in limits.items()
            )
            table.add_row(r["person"], Text("budget (UTC)", style="dim"), "", "", text)
        else:
            table.add_row(
                r["person"], r["model"], _num(r["requests"]), _num(r["input_tokens"]), _num(r["output_tokens"])
            )
    return table


def healthy(rep: dict) -> bool:
    return rep["gateway"]["state"] == "healthy" and all(m["state"] in FINE for m in rep["models"])


# --- the terminal view ---------------------------------------------------------------------------
def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _why(reasons: dict[str, float]) -> str:
    """A fallback's counts by reason (gateway_hooks/fallbacks.py), for people."""
    words = {"context": "prompt over its context", "error": "it failed"}
    return ", ".join(f"{_num(n)} {words.get(r, r)}" for r, n in reasons.items())


def render(rep: dict) -> Group | Text:
    g = rep["gateway"]
    style = STATE_STYLE.get(g["state"], "red")
    if not g.get("answered", True):  # nothing to tabulate: one line says why
        return Text.assemble("gateway ", (g["url"], "bold"), " ", (g["state"], style), f": {g['error']}")
    head = Text.assemble("gateway ", (g["url"], "bold"), " ", (g["state"], style))
    if g["state"] == "healthy":
        head.append(
            f"  {_num(g['workers'])} worker(s)  {_num(g['requests_per_s'], '{:.1f}')} req/s  "
            f"{_num(g['requests_total'])} requests, {_num(g['errors_total'])} backend errors since start"
        )
        if g.get("client_errors_total"):
            head.append(f" ({_num(g['client_errors_total'])} client errors: 4xx)", style="dim")
        if g["interval_s"]:
            head.append(f"  (rates over {g['interval_s']:.1f}s)", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("model", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for name in ("gpus", "run", "wait", "KV", "prompt/s", "gen/s", "TTFT p50", "errors"):
        table.add_column(name, justify="right", no_wrap=True)
    for m in rep["models"]:
        table.add_row(
            f"└ {m['name']}" if m.get("adapter_of") else m["name"],
            Text(m["state"], STATE_STYLE.get(m["state"], "red")),
            "-" if m["gpus"] is None else (",".join(map(str, m["gpus"])) or "none"),
            _num(m["requests_running"]),
            _num(m["requests_waiting"]),
            "-" if m["kv_cache_usage"] is None else f"{100 * m['kv_cache_usage']:.1f}%",
            _num(m["prompt_tokens_per_s"], "{:.1f}"),
            _num(m["generation_tokens_per_s"], "{:.1f}"),
            "-" if m["ttft_p50_s"] is None else f"{1000 * m['ttft_p50_s']:.0f} ms",
            _num(m["gateway_errors_total"]),
        )
    notes: list[Text | Table] = [
        Text(f"{m['name']}: {m['reason']}", style="dim")
        for m in rep["models"]
        if m["state"] not in ("healthy", "loaded") and not m.get("adapter_of")
    ]
    handed = {m["model"]: m["fallbacks"] for m in reversed(rep["models"]) if m.get("fallbacks")}  # once per model
    notes += [
        Text(f"{model}: {_num(sum(by.values()))} request(s) answered by its fallback {to} ({_why(by)})", style="dim")
        for model, fallbacks in handed.items()
        for to, by in fallbacks.items()
    ]
    if g.get("error"):
        notes.insert(0, Text(g["error"], style="red" if g["state"] != "healthy" else "dim"))
    if rep.get("people"):
        notes.append(render_usage(rep))
    return Group(head, table, *notes)


# --- command line ------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m generator.operate.status",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    ap.add_argument(
        "--models",
        type=Path,
        default=None,
        help="models.yml of the stack (default: the running local stack, else ./models.yml)",
    )
    ap.add_argument("--url", help="gateway URL (default: $GATEWAY_URL, or from the stack)")
    ap.add_argument("--key", help="master key (default: $GATEWAY_KEY, or from the stack's keys file)")
    ap.add_argument("--keys", type=Path, help="keys file to read the master key from")
    ap.add_argument("--k8s", action="store_true", help="the Kubernetes target's keys (k8s/secrets.env)")
    ap.add_argument("--state-dir", type=Path, default=DEFAULT_STATE, help="the local stack's state (make demo)")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between the two samples rates come from")
    ap.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for the gateway's answer")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--watch", action="store_true", help="refresh in place until Ctrl-C")
    mode.add_argument("--json", action="store_true", help="print JSON for scripts")
    mode.add_argument("--usage", action="store_true", help="only the table per person and model (make usage)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    err = Console(stderr=True, highlight=False)
    try:
        target = find_target(args, dict(os.environ))
        if not answers(target.url, min(args.timeout, 5.0)):
            raise NoStack(
                f"no stack is running: nothing answers at {target.url} (the gateway of {target.where})", target.url
            )
    except ConfigError as exc:
        print_problems(exc, err)
        return 2
    except NoStack as exc:
        if args.json:
            print(
                json.dumps(
                    {"gateway": {"url": exc.url, "state": "not running", "error": str(exc)}, "models": []}, indent=1
                )
            )
        else:
            err.print(str(exc), soft_wrap=True, markup=False)
        return 1
    if not target.key:
        err.print(
            f"[red]error:[/] no gateway key for {target.where}: looked in {target.keys}; give --key or GATEWAY_KEY"
        )
        return 2
    with httpx.Client(timeout=args.timeout, trust_env=False) as client:
        if args.watch:
            return watch(client, target, args.interval)
        first = fetch(client, target)
        before: dict | None = None
        if "error" not in first:
            time.sleep(args.interval)
            before, after = first, fetch(client, target)
        else:
            after = first
        rep = report(before if before and "error" not in before else None, after, target)
    if args.json:
        print(json.dumps(rep, indent=1))
    elif args.usage:
        Console(highlight=False).print(
            render_usage(rep)
            if rep.get("people")
            else Text("no usage by people yet (models.yml people:, make key NAME=...)")
        )
        return 0 if rep["gateway"].get("answered", True) else 1
    else:
        view = render(rep)
        Console(highlight=False).print(view, soft_wrap=isinstance(view, Text))  # a one-line answer stays one line
    return 0 if healthy(rep) else 1


def watch(client: httpx.Client, target: Target, interval: float) -> int:
    before = None
    try:
        with Live(Text("asking the gateway..."), refresh_per_second=4, screen=False) as live:
            while True:
                after = fetch(client, target)
                live.update(render(report(before, after, target)))
                before = after if "error" not in after else None
                time.sleep(interval)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())

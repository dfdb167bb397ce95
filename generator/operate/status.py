"""`make status` (`python -m generator.operate.status`): a running stack at a glance.

    python -m generator.operate.status            # two samples `--interval` apart, one table
    python -m generator.operate.status --watch    # refreshes in place until Ctrl-C
    python -m generator.operate.status --json     # {"gateway": {...}, "models": [{...}, ...]} for scripts

Every target is read the same way: the gateway's `/gateway/report` route (generator/shipped/gateway_hooks/
gateway_status.py), which probes each backend's /health and /metrics from inside the stack twice, `--interval`
apart, and answers the report of the two samples (status_report.py: rates, the TTFT median over the interval,
usage per person); the gateway's page (/gateway/) reads the same route. The route holds no state, so any gateway
worker answers. Here, only what models.yml says is added (GPUs, a model the running config lacks).

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
from ..shipped.gateway_hooks import status_report
from .runtime.processes import started_at

ROUTE = "/gateway/report"  # generator/shipped/gateway_hooks/gateway_status.py; the page reads it too
DEFAULT_STATE = Path(".cache/local-stack")
STATE_STYLE = {
    "healthy": "green",
    "starting": "yellow",
    "unhealthy": "red",
    "hung": "red",
    "down": "red",
    # on-demand models (the controller's states): not loaded is not a failure
    "loaded": "green",
    "loading": "yellow",
    "draining": "yellow",
    "asleep": "blue",
    "stopped": "blue",
    "failed": "red",
}


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


# --- the gateway's report ------------------------------------------------------------------------
def fetch(client: httpx.Client, target: Target, interval: float) -> dict:
    """The report the gateway computes from two samples `interval` seconds apart (its /gateway/report route, the one
    the page reads), with models.yml's view added; when the route cannot be asked, a report that says why."""
    try:
        r = client.get(
            target.url + ROUTE,
            params={"interval": interval},
            headers={"Authorization": f"Bearer {target.key}"},
            timeout=client.timeout.read + interval if client.timeout.read is not None else None,
        )
    except httpx.HTTPError as exc:
        return report(None, {"state": "down", "error": f"{target.url}: {type(exc).__name__}: {exc}"}, target)
    if r.status_code == 401:
        failed = {
            "state": "unauthorized",
            "error": f"{target.url} refused the key from {target.keys} (401; the gateway of {target.where})",
        }
        return report(None, failed, target)
    if r.status_code != 200:
        return report(
            None,
            {"state": "unhealthy", "error": f"{target.url}{ROUTE} answered {r.status_code}: {r.text[:200]}"},
            target,
        )
    rep = r.json()
    rep["gateway"]["url"] = target.url
    return with_plan(rep, target.plan)


def report(before: dict | None, after: dict, target: Target) -> dict:
    """The report of two samples of the status route (status_report.py, as the gateway's /gateway/report computes
    it), with models.yml's view added (with_plan)."""
    return with_plan(status_report.report(before, after, target.url), target.plan)


def with_plan(rep: dict, plan: Plan | None) -> dict:
    """What the gateway does not know, from models.yml: each backend's GPUs, the models' order, and a row for a
    planned model the running config lacks (down: "not in the gateway's config"; a hosted model has no GPU of ours)."""
    if plan is None:
        return rep
    # one row per backend: a replicated model's replicas under their own names (<model>-<i>), the others under the
    # name clients send; the gateway's counters are per name clients send
    planned: list[tuple[str, tuple[int, ...] | None, str, tuple]] = [
        (m.name if m.replicas > 1 else m.served_name, m.gpus, m.served_name, m.adapters) for m in plan.models
    ]
    planned += [(m.served_name, None, m.served_name, ()) for m in plan.hosted]
    nodes = {m.served_name: m.nodes.count for m in plan.models if m.nodes}  # a model on nodes: one row, its nodes
    backends = {r["name"]: r for r in rep["models"] if not r.get("adapter_of")}
    adapters: dict[str, list[dict]] = {}
    for r in rep["models"]:
        if r.get("adapter_of"):
            adapters.setdefault(r["adapter_of"], []).append(r)
    reachable, gm = rep["gateway"].get("answered", True), rep.get("counters")
    models = []
    for name, gpus, served, planned_adapters in planned:
        row = backends.pop(name, None) or {
            **{k: None for k in ROW_FIELDS},
            "name": name,
            "state": "down" if reachable else "unknown",
            "reason": "not in the gateway's config" if reachable else "the gateway did not answer",
            "model": served,
            **status_report.model_counters(gm, served),
        }
        row["gpus"] = list(gpus) if gpus is not None else None
        row["nodes"] = nodes.get(name)
        found = adapters.pop(name, None)
        rows = found or [status_report.adapter_row(row, a.name, gm or {}) for a in planned_adapters]
        models += [row, *({**a, "gpus": row["gpus"]} for a in rows)]
    for name in sorted(backends):  # served, but not in this models.yml
        models += [backends[name], *adapters.get(name, [])]
    return {**rep, "models": models}


ROW_FIELDS = (  # a model's row (status_report.report), for a planned model the gateway does not serve
    "name",
    "adapter_of",
    "state",
    "reason",
    "gpus",
    "nodes",
    "hosted",
    "requests_running",
    "requests_waiting",
    "kv_cache_usage",
    "prompt_tokens_per_s",
    "generation_tokens_per_s",
    "ttft_p50_s",
    "preemptions_total",
    "model",
)


def budget_text(row: dict) -> str:
    """A person's tokens this UTC day and month, each of its budget when they have one, then the responses they keep
    stored (of their stored_responses limit)."""
    limits = row.get("limits") or {}
    parts = [
        f"{row[field]}{f' of {limits[period]}' if period in limits else ''} tokens {words}"
        for period, field, words in (("day", "tokens_today", "today"), ("month", "tokens_this_month", "this month"))
    ]
    text = ", ".join(parts) + " (UTC)"
    if row.get("stored_responses") is not None:
        most = f" of {limits['stored_bytes']}" if "stored_bytes" in limits else ""
        text += f", {row['stored_responses']} stored responses ({row.get('stored_bytes') or 0}{most} bytes)"
    return text


def render_usage(rep: dict) -> Group:
    """The requests and tokens per person and model since the gateway started, then one line per person with their
    tokens this UTC day and month (of their budgets)."""
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
    rows = rep.get("people") or []
    for r in rows:
        if r["model"] != status_report.BUDGET_ROW:
            table.add_row(
                r["person"], r["model"], _num(r["requests"]), _num(r["input_tokens"]), _num(r["output_tokens"])
            )
    days = [Text(f"{r['person']}: {budget_text(r)}") for r in rows if r["model"] == status_report.BUDGET_ROW]
    return Group(table, *days)


healthy = status_report.healthy


# --- the terminal view ---------------------------------------------------------------------------
def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _why(reasons: dict[str, float]) -> str:
    """A fallback's counts by reason (gateway_hooks/fallbacks.py), for people."""
    words = {"context": "prompt over its context", "error": "it failed"}
    return ", ".join(f"{_num(n)} {words.get(r, r)}" for r, n in reasons.items())


def _gpus(m: dict) -> str:
    """The gpus column: models.yml's GPUs; a model on nodes: each node's, times its nodes."""
    if m["gpus"] is None:
        return "-"
    gpus = ",".join(map(str, m["gpus"])) or "none"
    return f"{gpus} x {m['nodes']} nodes" if m.get("nodes") else gpus


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
            _gpus(m),
            _num(m["requests_running"]),
            _num(m["requests_waiting"]),
            "-" if m["kv_cache_usage"] is None else f"{100 * m['kv_cache_usage']:.1f}%",
            _num(m["prompt_tokens_per_s"], "{:.1f}"),
            _num(m["generation_tokens_per_s"], "{:.1f}"),
            "-" if m["ttft_p50_s"] is None else f"{1000 * m['ttft_p50_s']:.0f} ms",
            _num(m["gateway_errors_total"]),
        )
    notes: list[Text | Table | Group] = [
        Text(f"{m['name']}: {m['reason']}", style="dim")
        for m in rep["models"]
        if m["state"] not in ("healthy", "loaded") and not m.get("adapter_of") and not m.get("scaling")
    ]
    scaled = {
        m["scaling"].get("model"): m["scaling"] for m in rep["models"] if m.get("scaling")
    }  # replicas: {min, max}
    notes += [Text(f"{model}: {status_report.scaling_line(s)}", style="dim") for model, s in scaled.items()]
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
        rep = fetch(client, target, args.interval)
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
    try:
        with Live(Text("asking the gateway..."), refresh_per_second=4, screen=False) as live:
            while True:  # the gateway takes its two samples `interval` apart: each answer is a fresh interval
                rep = fetch(client, target, interval)
                live.update(render(rep))
                if not rep["gateway"].get("answered", True):
                    time.sleep(interval)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())

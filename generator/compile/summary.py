"""The table `make regenerate` prints: what each model gets."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .load.parser_repairs import run_by
from .load.sizes import fmt_tokens
from .plan import ModelPlan, Plan


def fmt_duration(seconds: float) -> str:
    """600 -> 10m, 5400 -> 90m, 3600 -> 1h, 45 -> 45s."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _starts(m) -> str:
    if m.on_demand:
        od = m.on_demand
        group = f"group {od.group}, " if od.group != m.name else ""
        idle = f"idle {fmt_duration(od.idle_timeout)}" if od.idle_timeout else "no idle unload"
        return f"on demand ({group}{idle}, {od.unload})"
    return ("after " + ", ".join(m.start_after)) if m.start_after else "at once"


def routes_line(m) -> str:
    """What the gateway does besides serving the model under its name (docs/routing.md), or ""."""
    parts = []
    if m.fallbacks:
        parts.append("when it fails: " + ", then ".join(m.fallbacks))
    if m.context_fallbacks:
        parts.append("prompt over its context: " + ", then ".join(m.context_fallbacks))
    if m.aliases:
        parts.append("also answers to " + ", ".join(m.aliases) + (" (listed)" if m.list_aliases else ""))
    return "; ".join(parts)


def repairs_line(m: ModelPlan, vllm_version: str) -> str:
    """Which of the model's vLLM parsers the stack's repairs replace, and why (load/parser_repairs.py), or ""."""
    parts = [
        f"{r.parser} {r.kind} parser" + ("" if i else " replaced by the stack's repair") + f" ({r.why})"
        for i, r in enumerate(run_by(m))
    ]
    return f"vLLM {vllm_version}'s " + "; ".join(parts) if parts else ""


def title(plan: Plan) -> str:
    """ "2 model(s)", or with replicas "3 model(s) (4 backends)": a model's replicas are one model for its users."""
    own = len({m.entry for m in plan.models})
    backends = f" ({len(plan.models)} backends)" if len(plan.models) != own else ""
    return f"{own + len(plan.hosted)} model(s)" + backends + (f", {len(plan.hosted)} hosted" if plan.hosted else "")


def print_summary(plan: Plan, console: Console, keys_file: str = "compose/.env", url: str | None = None) -> None:
    table = Table(title=f"{title(plan)} from {plan.source}", title_justify="left")
    for col in ("model", "served as", "GPUs", "starts", "context", "max_tokens", "tool parser", "reasoning parser"):
        table.add_column(col)
    for m in plan.models:
        table.add_row(
            m.name,
            m.served_name,
            ",".join(map(str, m.gpus)) or "none",
            _starts(m),
            fmt_tokens(m.context),
            f"- ({m.kind})" if m.pooling else fmt_tokens(m.max_tokens) + (" (derived)" if m.max_tokens_derived else ""),
            m.tool_parser or "-",
            m.reasoning_parser or "-",
        )
        for a in m.adapters if m.replica <= 1 else ():  # a LoRA adapter: a model name of its own, on this backend
            table.add_row(
                f"└ {a.name}",
                a.name,
                "",
                f"LoRA of {m.served_name}",
                fmt_tokens(m.context),
                fmt_tokens(a.max_tokens) + (" (derived)" if a.max_tokens_derived else ""),
                m.tool_parser or "-",
                m.reasoning_parser or "-",
            )
    for m in plan.hosted:  # an API somebody else serves
        assert m.hosted is not None
        table.add_row(
            m.name,
            m.served_name,
            "-",
            f"hosted ({m.hosted.provider}: {m.hosted.model})",
            fmt_tokens(m.context) + (" (LiteLLM's map)" if m.hosted.context_from else ""),
            fmt_tokens(m.max_tokens),
            "tools" if m.takes_tools else "-",
            "-",
        )
    console.print(table)
    for m in plan.models:
        if m.pooling:
            console.print(f"kind {m.name}: {m.kind} ({m.kind_from})", soft_wrap=True, markup=False)
        for a in m.adapters if m.replica <= 1 else ():
            console.print(
                f"adapter {a.name} of {m.entry}: {a.source}, rank "
                + (f"{a.rank} ({a.rank_from})" if a.rank else f"unknown ({a.rank_from})"),
                soft_wrap=True,
                markup=False,
            )
        if m.context_from:
            console.print(
                f"context {m.name}: {fmt_tokens(m.context)} from {m.context_from}", soft_wrap=True, markup=False
            )
    for m in plan.models:
        if m.replica <= 1 and (line := repairs_line(m, plan.vllm_version)):  # a model's replicas run the same
            console.print(f"parsers {m.entry}: {line}", soft_wrap=True, markup=False)
    for m in plan.served:
        if line := routes_line(m):
            console.print(f"routes {m.served_name}: {line}", soft_wrap=True, markup=False)
    for m in plan.models:
        if m.fit:
            console.print(f"fit {m.name}: {m.fit}", soft_wrap=True, markup=False)
    for note in plan.notes:
        console.print(f"note: {note}", soft_wrap=True)
    g = plan.gateway
    console.print(f"gateway: {url or f'http://{g.bind}:{g.port}/v1'} (key: {g.master_key_env} in {keys_file})")
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/] {warning}")

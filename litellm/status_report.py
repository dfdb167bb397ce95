# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""What `make status`, `make usage` and the gateway's page show, computed once: from two samples of the status route
(gateway_status.py: states, gauges and cumulative counters), the rates over the interval between them, every
backend's row, and the usage per person.

The gateway answers it as ``GET /gateway/report`` (gateway_page.py) and both readers take it from there: the CLI
(generator/operate/status.py) only adds what models.yml says and the gateway does not know (GPUs, models not in the
running config), the page only draws it. Standard library only: the CLI imports it as a module of the generator.
"""

from __future__ import annotations

import math
import time

# states that are not a failure (`make status` exits 0): an on-demand model that is not loaded is fine
FINE = {"healthy", "loaded", "loading", "draining", "asleep", "stopped"}
BUDGET_ROW = "(budget)"  # the model of a person's usage row that holds their token budgets


def scaling_line(s: dict) -> str:
    """A `replicas: {min, max}` model's scaling as the controller reports it (gateway_status.py), in one line:
    `copies 0-2 follow the load: scaled-1 running, scaled-2 stopped; last: up scaled-2 at 12:03:10
    (3 request(s) waiting ...); 1 up, 0 down`."""
    copies = ", ".join(f"{n} {state}" for n, state in (s.get("copies") or {}).items())
    line = f"copies {s.get('min')}-{s.get('max')} follow the load: {copies}"
    if last := s.get("last"):
        at = time.strftime("%H:%M:%S", time.localtime(float(last.get("at") or 0)))
        line += f"; last: {last.get('action')} {last.get('copy')} at {at} ({last.get('reason')})"
    events = s.get("events") or {}
    return line + f"; {events.get('up', 0)} up, {events.get('down', 0)} down"


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


def model_counters(gm: dict | None, model: str) -> dict:
    """The gateway's counters for the name clients send (None: the gateway's metrics could not be read)."""
    by = lambda field: (gm.get(field) or {}).get(model, 0.0) if gm else None  # noqa: E731
    return {
        "gateway_requests_total": by("requests_by_model"),
        "gateway_errors_total": by("errors_by_model"),
        "gateway_client_errors_total": by("client_errors_by_model"),
        # requests this model's fallbacks answered since the gateway started: {fallback: {reason: n}}
        "fallbacks": ((gm.get("fallbacks") or {}).get(model, {})) if gm else None,
    }


def report(before: dict | None, after: dict, url: str) -> dict:
    """What status shows: states, gauges and counters of `after`, rates over the interval since `before` (None: no
    rates). `after` may be {"state": ..., "error": ...}: the route could not be asked."""
    gw_after = after.get("gateway") or {}
    gw_before = (before or {}).get("gateway") or {}
    seconds = after["time"] - before["time"] if before and "time" in before and "time" in after else 0.0
    gm_after, gm_before = gw_after.get("metrics") or {}, gw_before.get("metrics") or {}
    gateway = {
        "url": url,
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
    previous = {m["name"]: m for m in (before or {}).get("models") or []}
    models: list[dict] = []
    for cur in after.get("models") or []:  # one row per backend, in the gateway's (models.yml's) order
        old = previous.get(cur["name"])
        model = cur.get("model") or cur["name"]
        models.append(
            {
                "name": cur["name"],
                "adapter_of": None,  # a LoRA adapter's row: the backend row it is served by
                "state": cur["state"],
                "reason": cur["reason"],
                "scaling": cur.get("scaling"),  # a copy that follows the load: its model's range, copies, last decision
                "gpus": None,  # models.yml's, not the gateway's: the CLI adds them
                "nodes": cur.get("nodes"),  # hosts serving it as one group (models.yml nodes:), None: one
                "hosted": cur.get("hosted"),
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
                **model_counters(gm_after or None, model),
            }
        )
        models += [adapter_row(models[-1], adapter, gm_after) for adapter in cur.get("adapters") or []]
    return {
        "gateway": gateway,
        "models": models,
        "people": usage(gm_after, gw_after.get("budgets") or {}),
        "counters": gm_after or None,  # what the CLI needs for a planned model the gateway does not serve
    }


def adapter_row(base: dict, adapter: str, gm: dict) -> dict:
    """A LoRA adapter's row: its base backend's state (the same vLLM serves it; the backend's load, tokens and KV
    cache are the base's row, shared), the gateway's counters under the adapter's own name."""
    counters = model_counters(gm or None, adapter)
    del counters["fallbacks"]
    return {
        **{k: None for k in base},
        "name": adapter,
        "adapter_of": base["name"],
        "model": adapter,
        "state": base["state"],
        "reason": base["reason"],
        "gpus": base["gpus"],
        **counters,
    }


def usage(metrics: dict, budgets: dict) -> list[dict]:
    """One row per person and model (models.yml people:): requests and tokens in/out since the gateway started
    (LiteLLM's counters, labelled with the person's name), and the tokens each person used this UTC day / month
    with their budgets (`limits`: {"day": n, "month": n, "stored_bytes": n}, only those set), and the /v1/responses
    they keep stored (`stored_responses`, `stored_bytes`; None where the stack stores none)."""
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
                "model": BUDGET_ROW,
                "tokens_today": b.get("day"),
                "tokens_this_month": b.get("month"),
                "stored_responses": (b.get("stored") or {}).get("responses"),
                "stored_bytes": (b.get("stored") or {}).get("bytes"),
                "limits": b.get("limits"),
            }
        )
    return rows


def healthy(rep: dict) -> bool:
    return rep["gateway"]["state"] == "healthy" and all(m["state"] in FINE for m in rep["models"])

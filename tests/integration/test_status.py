"""`make status` against the real stack: the /gateway/status route and `python -m generator.operate.status
--json` through the gateway, the gateway's metrics (summed over its workers), and the public /metrics
closed. The killed-backend case is in test_faults.py (it shares the backend kill)."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.helpers import run_status, status_json

ROOT = Path(__file__).resolve().parents[2]
HELLO = [{"role": "user", "content": "Say hello."}]


def route(gateway, key: str | None = None) -> httpx.Response:
    return httpx.get(
        gateway.url.removesuffix("/v1") + "/gateway/status",
        timeout=30,
        headers={"Authorization": f"Bearer {key or gateway.key}"},
    )


def test_status_json_shows_every_model_healthy_with_its_numbers(gateway):
    code, rep = status_json(gateway)
    assert rep["gateway"]["state"] == "healthy", rep["gateway"]
    workers = gateway.plan.gateway.workers
    if workers == "auto" and gateway.stack is not None:  # resolved on this machine, as the local gateway did
        from generator.shipped.gateway_hooks.gateway_start import resolve

        workers = int(resolve(["--num_workers", "auto"])[0][1])
    if workers == "auto":  # a deployment elsewhere resolved it for its own CPUs
        assert rep["gateway"]["workers"] >= 1
    else:
        assert rep["gateway"]["workers"] == workers
    assert rep["gateway"]["requests_total"] is not None, rep["gateway"]["error"]
    names = [m["name"] for m in rep["models"]]
    assert names == [name for m in gateway.plan.models for name in (m.served_name, *(a.name for a in m.adapters))]
    adapters = [m for m in rep["models"] if m.get("adapter_of")]  # each right under its base (the order above)
    assert [(m["name"], m["adapter_of"], m["state"]) for m in adapters] == [
        (a.name, m.served_name, "healthy") for m in gateway.plan.models for a in m.adapters
    ]
    for m, planned in zip([m for m in rep["models"] if not m.get("adapter_of")], gateway.plan.models):
        assert m["state"] == "healthy", m
        assert m["gpus"] == list(planned.gpus)
        assert m["requests_running"] is not None and m["requests_waiting"] is not None
        assert 0 <= m["kv_cache_usage"] <= 1
        assert m["prompt_tokens_per_s"] is not None and m["generation_tokens_per_s"] is not None
    assert code == 0


def test_the_route_needs_the_master_key(gateway):
    assert route(gateway).status_code == 200
    assert route(gateway, key="wrong").status_code == 401
    assert httpx.get(gateway.url.removesuffix("/v1") + "/gateway/status", timeout=30).status_code == 401


def test_the_public_metrics_route_is_closed_with_or_without_the_key(gateway):
    """The gateway's metrics are served only on its internal metrics port; LiteLLM's /metrics on the
    public port asks our guard, which refuses it (401 without the key, admin route with it)."""
    base = gateway.url.removesuffix("/v1")
    for headers in ({}, {"Authorization": f"Bearer {gateway.key}"}):
        r = httpx.get(base + "/metrics", headers=headers, timeout=30)
        assert r.status_code in (401, 403), r.text[:200]
        assert "# TYPE" not in r.text and "_total{" not in r.text  # no Prometheus text at all


def _counters(gateway) -> tuple[float, dict[str, float]]:
    body = route(gateway).json()
    metrics = body["gateway"]["metrics"]
    assert metrics is not None, body["gateway"]["metrics_error"]
    return metrics["requests_total"], {
        m["name"]: (m["metrics"] or {}).get("generation_tokens_total") for m in body["models"]
    }


def test_the_gateway_counts_every_request_once_summed_over_its_workers(gateway):
    """N requests through the gateway add exactly N to its request counter, whichever worker took each
    (the route reads LiteLLM's metrics process, which sums the workers' files), and tokens to the
    model's vLLM counter."""
    model = gateway.plan.models[0].served_name
    n = 6
    before, tokens_before = _counters(gateway)
    client = gateway.client(timeout=60)
    for _ in range(n):
        client.chat.completions.create(model=model, messages=HELLO, max_tokens=8)
    deadline = time.monotonic() + 20  # LiteLLM records a request in its success callback, after the answer
    while True:
        after, tokens_after = _counters(gateway)
        if after - before >= n or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert after - before == n, f"{after - before} counted for {n} requests ({gateway.plan.gateway.workers} workers)"
    assert tokens_after[model] > tokens_before[model]


def _errors(gateway, model: str) -> tuple[float, float]:
    metrics = route(gateway).json()["gateway"]["metrics"]
    return metrics["errors_by_model"].get(model, 0.0), metrics["client_errors_by_model"].get(model, 0.0)


def test_answers_a_client_got_wrong_are_not_counted_as_backend_errors(gateway):
    """4xx the client provoked (here: prompts over the context) are client errors in
    `make status`, never the backend's errors."""
    model = gateway.plan.models[0].served_name
    # settled first: LiteLLM records failures after the answers, and earlier tests (the fuzz test's thousands
    # of 4xx) may still be being counted
    settle = time.monotonic() + 60
    errors_before, client_before = _errors(gateway, model)
    while time.monotonic() < settle:
        time.sleep(1)
        now = _errors(gateway, model)
        if now == (errors_before, client_before):
            break
        errors_before, client_before = now
    # 4xx that LiteLLM itself answers (the guard's refusals never reach LiteLLM, whose metrics status reads):
    # prompts over the context, refused after /tokenize, before any prefill (~3 characters per context token)
    context = gateway.plan.models[0].context
    rng = random.Random(1)
    long = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(context * 3))
    bad = [{"model": model, "messages": [{"role": "user", "content": long}], "max_tokens": 4}] * 2
    for body in bad:
        r = httpx.post(
            gateway.url + "/chat/completions", json=body, timeout=60, headers={"Authorization": f"Bearer {gateway.key}"}
        )
        assert 400 <= r.status_code < 500, r.text[:300]
    deadline = time.monotonic() + 20  # recorded by LiteLLM's failure callback, after the answer
    while (errors := _errors(gateway, model))[1] < client_before + len(bad) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert errors == (errors_before, client_before + len(bad)), errors


def test_status_reads_the_local_stack_it_runs_by_its_models_yml_with_that_stacks_key(gateway):
    """`make status MODELS=<the file the local stack runs>`: that stack's key, not compose/.env's (whatever
    compose/.env holds, the local stack has keys of its own)."""
    if gateway.stack is None:
        pytest.skip("needs the local stack (this session's or make demo's), not GATEWAY_URL")
    env = {k: v for k, v in os.environ.items() if k not in ("GATEWAY_URL", "GATEWAY_KEY")}
    out = run_status("--models", gateway.plan.source, "--state-dir", str(gateway.stack.state_dir), env=env)
    rep = json.loads(out.stdout)
    assert rep["gateway"]["url"] == gateway.stack.gateway_url and rep["gateway"]["state"] == "healthy", out.stdout
    assert out.returncode == 0, out.stderr

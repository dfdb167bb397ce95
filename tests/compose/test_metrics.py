"""Prometheus in the compose stack (issue 17): every target up, counters equal to what was sent through the
gateway, its UI on 127.0.0.1 only, and every query of the generated Grafana dashboard answered with data.

The gateway's own metrics (LiteLLM's prometheus callback on the internal port 4001) come with the gateway side
of issue 17: the tests that read them skip, saying so, when the compose file's gateway does not serve them."""

from __future__ import annotations

import math
import os
import re

import openai
import pytest

from generator.compile.load.loader import load_plan
from generator.compile.renderers.dashboard import BACKEND_ERRORS_PANEL, RATE, dashboard, rows

from .prometheus import GATEWAY_JOB, VLLM_JOB, gateway_metrics_on, prometheus_of
from .stack import connects, container_of, host_addresses, inspect

HELLO = [{"role": "user", "content": "Say hello."}]
N = 3  # requests per model per test
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def prom(deployed):
    p = prometheus_of(deployed.doc)
    if p is None:
        pytest.skip("metrics are off in this models.yml: no Prometheus service")
    return p


@pytest.fixture(scope="module")
def gateway_metrics(deployed):
    if not gateway_metrics_on(deployed.doc):
        pytest.skip("this compose file's gateway serves no metrics port (the gateway side of issue 17)")


def _send(deployed, n: int = N) -> dict[str, list]:
    """n chat requests per backend through the gateway; their responses (usage counts), by service."""
    client = deployed.client(120)
    return {
        s: [
            client.chat.completions.create(model=deployed.served_name(s), messages=HELLO, max_tokens=16)
            for _ in range(n)
        ]
        for s in deployed.backends
    }


def _refused_model(deployed) -> str:
    """A model the gateway refuses tools for (served without a tool parser), else a model name it does not know
    (LiteLLM counts those under requested_model="other")."""
    toolless = [s for s in deployed.backends if "--tool-call-parser" not in deployed.doc["services"][s]["command"]]
    return deployed.served_name(toolless[0]) if toolless else "other"


def _refused(deployed) -> None:
    """One request the gateway answers with a 400, counted by LiteLLM as a failed request."""
    model = _refused_model(deployed)
    with pytest.raises(openai.BadRequestError):
        deployed.client().chat.completions.create(
            model=model if model != "other" else "no-such-model", messages=HELLO, max_tokens=16, tools=[TOOL]
        )


def _sum(prom, metric: str, model: str) -> float:
    return prom.value(f'sum({metric}{{job="{VLLM_JOB}",model="{model}"}})') or 0.0


def test_every_target_is_up_and_labelled_with_its_model_and_gpus(deployed, prom):
    plan = load_plan(os.environ["GATEWAY_MODELS"])
    for m in plan.models:
        assert prom.wait_for(f'max(up{{job="{VLLM_JOB}",model="{m.name}"}})', 1, 10 * prom.interval) == 1, (
            f"{m.name} is not up"
        )
        (series,) = prom.query(f'up{{job="{VLLM_JOB}",model="{m.name}"}}')
        assert series["metric"]["gpus"] == (",".join(map(str, m.gpus)) or "none")
        assert series["metric"]["served_model_name"] == m.served_name
    targets = {s["metric"]["model"] for s in prom.query(f'up{{job="{VLLM_JOB}"}}')}
    assert targets == {m.name for m in plan.models}
    if gateway_metrics_on(deployed.doc):
        assert prom.wait_for(f'max(up{{job="{GATEWAY_JOB}"}})', 1, 10 * prom.interval) == 1, (
            "the gateway's metrics are not up"
        )


def test_prometheus_answers_on_127_0_0_1_and_on_no_other_host_address(deployed, prom):
    port = int(prom.url.rsplit(":", 1)[1])
    assert prom.query("up"), "no answer from Prometheus on 127.0.0.1"
    others = [a for a in host_addresses() if a != "127.0.0.1" and connects(a, port)]
    assert not others, f"Prometheus's port {port} also answers on {others}"
    bindings = inspect(container_of("prometheus"))["NetworkSettings"]["Ports"]
    assert {b["HostIp"] for bs in bindings.values() if bs for b in bs} == {"127.0.0.1"}


def test_vllm_counters_equal_what_was_sent_through_the_gateway(deployed, prom):
    """Requests, prompt and generated tokens per model in Prometheus grow by exactly what the responses report."""
    names = {
        "requests": "vllm:request_success_total",
        "prompt": "vllm:prompt_tokens_total",
        "generated": "vllm:generation_tokens_total",
    }
    prom.fresh(VLLM_JOB)  # the tests before (a restarted backend's first request) are all counted
    before = {s: {k: _sum(prom, metric, s) for k, metric in names.items()} for s in deployed.backends}
    sent = _send(deployed)
    for s, replies in sent.items():
        want = {
            "requests": len(replies),
            "prompt": sum(r.usage.prompt_tokens for r in replies),
            "generated": sum(r.usage.completion_tokens for r in replies),
        }
        for k, metric in names.items():
            expr = f'sum({metric}{{job="{VLLM_JOB}",model="{s}"}})'
            got = prom.wait_for(expr, before[s][k] + want[k], 6 * prom.interval)
            assert got == before[s][k] + want[k], f"{s} {metric}: {before[s][k]} + {want[k]} sent, Prometheus has {got}"
    # one more scrape: nothing counted twice (no retry through the gateway)
    prom.wait_for("vector(0)", lambda v: False, 2 * prom.interval)
    for s, replies in sent.items():
        assert _sum(prom, names["requests"], s) == before[s]["requests"] + len(replies)


def test_gateway_counters_equal_what_was_sent(deployed, prom, gateway_metrics):
    """LiteLLM's request counter per model (summed over its workers) grows by what was sent; a refused request
    (tools to a model served without a tool parser: 400 from the gateway) is counted as a failure."""
    total, failed = "litellm_proxy_total_requests_metric_total", "litellm_proxy_failed_requests_metric_total"

    def count(metric: str, model: str, extra: str = "") -> float:
        return prom.value(f'sum({metric}{{job="{GATEWAY_JOB}",requested_model="{model}"{extra}}})') or 0.0

    served = {s: deployed.served_name(s) for s in deployed.backends}
    prom.fresh(GATEWAY_JOB)
    before = {s: count(total, m, ',status_code="200"') for s, m in served.items()}
    sent = _send(deployed)
    for s, m in served.items():
        expr = f'sum({total}{{job="{GATEWAY_JOB}",requested_model="{m}",status_code="200"}})'
        want = before[s] + len(sent[s])
        assert prom.wait_for(expr, want, 6 * prom.interval) == want, f"{m}: {before[s]} + {len(sent[s])} sent"
    model = _refused_model(deployed)
    prom.fresh(GATEWAY_JOB)
    failed_before = count(failed, model, ',exception_status="400"')
    _refused(deployed)
    expr = f'sum({failed}{{job="{GATEWAY_JOB}",requested_model="{model}",exception_status="400"}})'
    assert prom.wait_for(expr, failed_before + 1, 6 * prom.interval) == failed_before + 1


def _window(prom) -> str:
    """What Grafana makes of $__rate_interval here (at least 4 scrapes), with room for a slow run."""
    return f"{max(60, int(8 * prom.interval))}s"


def _has_data(result: list[dict]) -> bool:
    return any(not math.isnan(float(s["value"][1])) for s in result)


@pytest.mark.parametrize("row", ["Models", "Gateway"])
def test_every_dashboard_query_returns_data_after_traffic(deployed, prom, row):
    plan = load_plan(os.environ["GATEWAY_MODELS"])
    panels = dict(rows(plan))[row]
    if row == "Gateway" and not gateway_metrics_on(deployed.doc):
        pytest.skip("the gateway serves no metrics in this compose file (the gateway side of issue 17)")
    _send(deployed, 2)
    if row == "Gateway":  # one error for the errors panel
        _refused(deployed)
    prom.wait_for("vector(0)", lambda v: False, 2 * prom.interval)  # two scrapes after the traffic
    dash = dashboard(plan)
    # the backend-errors panel needs a backend failure: test_compose.py's crashed-backend test checks it
    in_row = {p.title for p in panels if not p.title.startswith(BACKEND_ERRORS_PANEL)}
    checked, empty = 0, []
    for p in dash["panels"]:
        if p["type"] == "row" or p["title"] not in in_row:
            continue
        for t in p["targets"]:
            assert set(re.findall(r"\$\w+", t["expr"])) <= {RATE}, f"{p['title']}: a variable the test cannot fill"
            result = prom.query(t["expr"].replace(RATE, _window(prom)))
            checked += 1
            if not _has_data(result):
                empty.append(f"{p['title']}: {t['expr']}")
    assert checked >= len(in_row)
    assert not empty, "dashboard queries without data after traffic:\n" + "\n".join(empty)

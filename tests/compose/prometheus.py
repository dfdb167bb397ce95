"""The compose stack's Prometheus, through its published port (127.0.0.1 only): the HTTP query API."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import httpx

from generator.compile.gateway_process import GATEWAY_METRICS_PORT, METRICS_PORT_ENV
from generator.compile.load.loader import load_plan
from generator.compile.load.schema import _seconds
from generator.compile.renderers.metrics import JOBS, PROMETHEUS


@dataclass
class Prometheus:
    url: str
    interval: float  # seconds between scrapes (metrics.scrape_interval)

    def query(self, expr: str) -> list[dict]:
        r = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", f"{expr}: {r.status_code} {body}"
        return body["data"]["result"]

    def value(self, expr: str) -> float | None:
        """The value of a one-series result (None when there is no series)."""
        result = self.query(expr)
        assert len(result) <= 1, f"{expr} gave {len(result)} series: {result}"
        return float(result[0]["value"][1]) if result else None

    def up(self, job: str, **labels: str) -> float | None:
        selector = ",".join([f'job="{job}"', *(f'{k}="{v}"' for k, v in labels.items())])
        return self.value(f"max(up{{{selector}}})")

    def fresh(self, job: str) -> None:
        """Wait until every target of `job` was scraped after now: counters read next are not older than
        what already happened (a request that ended just before would otherwise count as sent later)."""
        now = time.time()
        got = self.wait_for(
            f'min(timestamp(up{{job="{job}"}}))', lambda v: v is not None and v > now, 4 * self.interval
        )
        assert got is not None and got > now, f"no scrape of {job} after {now:.0f} within {4 * self.interval}s"

    def wait_for(self, expr: str, want, seconds: float) -> float | None:
        """Poll until `expr` has the value `want` (a number, or a predicate), else the last value seen."""
        ok = want if callable(want) else (lambda v: v is not None and math.isclose(v, want))
        deadline, value = time.monotonic() + seconds, None
        while time.monotonic() < deadline:
            value = self.value(expr)
            if ok(value):
                return value
            time.sleep(min(1.0, self.interval / 2))
        return value


def prometheus_of(doc: dict) -> Prometheus | None:
    """The stack's Prometheus (None when models.yml turned metrics off)."""
    service = doc["services"].get(PROMETHEUS)
    if not service:
        return None
    host_port = service["ports"][0].rsplit(":", 2)[-2]
    plan = load_plan(os.environ.get("GATEWAY_MODELS", "models.yml"))
    return Prometheus(f"http://127.0.0.1:{host_port}", _seconds(plan.metrics.scrape_interval))


def gateway_metrics_on(doc: dict) -> bool:
    """Whether the gateway of this compose file serves LiteLLM's metrics on its internal port (the gateway
    metrics part of issue 17: `expose: [4001]` / GATEWAY_METRICS_PORT on the litellm service)."""
    gateway = doc["services"]["litellm"]
    return str(GATEWAY_METRICS_PORT) in [str(p) for p in gateway.get("expose") or []] or METRICS_PORT_ENV in (
        gateway.get("environment") or {}
    )


GATEWAY_JOB, VLLM_JOB = JOBS["gateway"], JOBS["vllm"]

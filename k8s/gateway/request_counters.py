# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""gateway.metrics: light (the default): the gateway's request, error and per-person token counters, counted by the
request guard (request_guard.py) and people.py's usage callback instead of LiteLLM's prometheus callback, whose
per-request work is the cost docs/benchmarks.md measures. Only what `make status`, `make usage`, the page, the
dashboard and the Prometheus rules read, under the names and labels of LiteLLM's own series so that each reader
works with either level:

    litellm_proxy_total_requests_metric_total{requested_model, status_code, api_key_alias}
    litellm_proxy_failed_requests_metric_total{requested_model, exception_status, exception_class}  (status >= 400)
    litellm_input_tokens_metric_total{api_key_alias, requested_model}    (a person's answered requests)
    litellm_output_tokens_metric_total{api_key_alias, requested_model}

Requests are counted once per request the guard let through to LiteLLM (as the callback counts only what LiteLLM
handles), under the model that answered (a fallback's, as the callback's `model_group`; else the model asked for),
with the HTTP status LiteLLM answered (for a stream: the status it started with) and the person's name
(models.yml people:; "" for the master key); tokens from each answered request's usage, as LiteLLM's callback counts
them. The workers write them to
PROMETHEUS_MULTIPROC_DIR (gateway_start.py sets it, GATEWAY_METRICS_PORT being set), and the gateway's metrics
process (gateway_metrics.py) serves them merged on the internal metrics port, as it serves the callback's.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "GATEWAY_LIGHT_METRICS"  # set by the generator (gateway_process.metrics_env) for gateway.metrics: light
REQUESTS = "litellm_proxy_total_requests_metric"  # prometheus_client adds _total
FAILED = "litellm_proxy_failed_requests_metric"
INPUT_TOKENS = "litellm_input_tokens_metric"
OUTPUT_TOKENS = "litellm_output_tokens_metric"

_counters: tuple[Any, Any] | None = None
_tokens: tuple[Any, Any] | None = None


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def _made() -> tuple[Any, Any]:
    global _counters
    if _counters is None:
        from prometheus_client import Counter  # multiprocess mode: PROMETHEUS_MULTIPROC_DIR is set in the workers

        _counters = (
            Counter(
                REQUESTS,
                "Requests the gateway answered (gateway.metrics: light)",
                ["requested_model", "status_code", "api_key_alias"],
            ),
            Counter(
                FAILED,
                "Requests the gateway answered with an error (gateway.metrics: light)",
                ["requested_model", "exception_status", "exception_class"],
            ),
        )
    return _counters


def count(model: str, status: int, person: str = "") -> None:
    requests, failed = _made()
    requests.labels(model, str(status), person).inc()
    if status >= 400:
        failed.labels(model, str(status), "").inc()


def count_tokens(person: str, model: str, prompt: int, completion: int) -> None:
    """A person's answered request: its prompt and output tokens (people.py's usage callback calls it)."""
    global _tokens
    if _tokens is None:
        from prometheus_client import Counter

        labels = ["api_key_alias", "requested_model"]
        _tokens = (
            Counter(INPUT_TOKENS, "Prompt tokens per person (gateway.metrics: light)", labels),
            Counter(OUTPUT_TOKENS, "Output tokens per person (gateway.metrics: light)", labels),
        )
    _tokens[0].labels(person, model).inc(max(prompt, 0))
    _tokens[1].labels(person, model).inc(max(completion, 0))

"""Plan -> Grafana (opt-in, `metrics.grafana.enabled`): the Prometheus datasource, a dashboard provider and the
dashboard itself, made from the plan (one series per model, a GPU row when a model has GPUs).

    grafana/provisioning/datasources/prometheus.yml   the compose Prometheus, uid DATASOURCE_UID
    grafana/provisioning/dashboards/llm-gateway.yml   load every dashboard in GRAFANA_DASHBOARDS, read-only
    grafana/dashboards/llm-gateway.json               the dashboard (JSON has no comments: the header is its
                                                      `description`)

Every query uses only `$__rate_interval` (Grafana: at least 4 scrape intervals) as a variable, so the compose
test can run each one against the real Prometheus.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..plan import Plan
from .metrics import (
    BACKEND_STATE,
    GPU_FRACTION,
    GPU_GIVEN,
    GPU_USED,
    JOBS,
    PROMETHEUS,
    PROMETHEUS_PORT,
    STATE_DOWN,
    STATE_STOPPED,
    STATE_UP,
    failed_requests,
    gpu_users,
)
from .text import dump_yaml, header

GRAFANA = "grafana"  # compose service
GRAFANA_PORT = 3000  # in the container; metrics.grafana.port on the host
GRAFANA_DIR = "grafana"
GRAFANA_PROVISIONING = "/etc/grafana/provisioning"
GRAFANA_DASHBOARDS = "/etc/grafana/dashboards"
GRAFANA_DATA = "grafana-data"  # named volume: Grafana's database (users, the admin password)
DASHBOARD_FILE = f"{GRAFANA_DIR}/dashboards/llm-gateway.json"
DATASOURCE_FILE = f"{GRAFANA_DIR}/provisioning/datasources/prometheus.yml"
PROVIDER_FILE = f"{GRAFANA_DIR}/provisioning/dashboards/llm-gateway.yml"
DATASOURCE_UID = "llm-gateway-prometheus"
DATASOURCE = {"type": "prometheus", "uid": DATASOURCE_UID}
SCHEMA_VERSION = 39  # the dashboard JSON model of Grafana 10.3-11; Grafana 12 migrates it on load
RATE = "$__rate_interval"
VLLM, GATEWAY = JOBS["vllm"], JOBS["gateway"]


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    values: tuple[tuple[int, str, str], ...] = ()  # (value, text, color): Grafana value mappings


def _quantiles(metric: str) -> tuple[Query, ...]:
    return tuple(
        Query(
            f'histogram_quantile({q}, sum by (model, le) (rate({metric}_bucket{{job="{VLLM}"}}[{RATE}])))',
            f"{{{{model}}}} p{int(q * 100)}",
        )
        for q in (0.5, 0.95)
    )


def _per_model(expr: str) -> tuple[Query, ...]:
    return (Query(expr, "{{model}}"),)


def model_panels() -> list[Panel]:
    j = f'job="{VLLM}"'
    return [
        Panel(
            "Backend state",
            "1 up: Prometheus reached the backend's /metrics at the last scrape; 0 down: it did not; 2 stopped: an "
            "on-demand model the controller has not loaded (stopped, asleep, loading), not a failure "
            f"({BACKEND_STATE}, prometheus/rules.yml; without those rules: up)",
            # `up` where the rules are not loaded (a Prometheus of your own): then 1 / 0 only
            _per_model(f"max by (model) ({BACKEND_STATE}) or max by (model) (up{{{j}}})"),
            values=((STATE_DOWN, "down", "red"), (STATE_UP, "up", "green"), (STATE_STOPPED, "stopped", "blue")),
        ),
        Panel(
            "Requests running",
            "Requests in the engine's batch now (vllm:num_requests_running)",
            _per_model(f"sum by (model) (vllm:num_requests_running{{{j}}})"),
        ),
        Panel(
            "Requests waiting",
            "Requests queued for a place in the batch (vllm:num_requests_waiting)",
            _per_model(f"sum by (model) (vllm:num_requests_waiting{{{j}}})"),
        ),
        Panel(
            "KV cache in use",
            "Share of the KV cache blocks in use (vllm:kv_cache_usage_perc, 1 = full)",
            _per_model(f"max by (model) (vllm:kv_cache_usage_perc{{{j}}})"),
            "percentunit",
        ),
        Panel(
            "Prompt tokens/s",
            "Prompt tokens prefilled per second (vllm:prompt_tokens_total)",
            _per_model(f"sum by (model) (rate(vllm:prompt_tokens_total{{{j}}}[{RATE}]))"),
            "short",
        ),
        Panel(
            "Generation tokens/s",
            "Tokens generated per second (vllm:generation_tokens_total)",
            _per_model(f"sum by (model) (rate(vllm:generation_tokens_total{{{j}}}[{RATE}]))"),
            "short",
        ),
        Panel(
            "Time to first token p50 / p95",
            "vllm:time_to_first_token_seconds, over the requests of the window",
            _quantiles("vllm:time_to_first_token_seconds"),
            "s",
        ),
        Panel(
            "End-to-end latency p50 / p95",
            "vllm:e2e_request_latency_seconds, over the requests of the window",
            _quantiles("vllm:e2e_request_latency_seconds"),
            "s",
        ),
        Panel(
            "Preemptions",
            "Requests preempted (KV cache full) in the window (vllm:num_preemptions_total)",
            _per_model(f"sum by (model) (increase(vllm:num_preemptions_total{{{j}}}[{RATE}]))"),
        ),
    ]


BACKEND_ERRORS_PANEL = "Gateway errors (backend failures)"  # a panel title's start (the compose tests find it)


def gateway_panels() -> list[Panel]:
    total = "litellm_proxy_total_requests_metric_total"
    return [
        Panel(
            "Gateway requests/s by model and status",
            "Every request the gateway answered, by the model asked for and the HTTP status (LiteLLM's "
            "litellm_proxy_total_requests_metric, summed over the gateway's workers)",
            (
                Query(
                    f"sum by (requested_model, status_code) (rate({total}[{RATE}]))",
                    "{{requested_model}} {{status_code}}",
                ),
            ),
            "reqps",
        ),
        Panel(
            f"{BACKEND_ERRORS_PANEL} by model and status",
            "Requests the gateway failed in the window because of the backend side: a 5xx, a timeout (408), an "
            "overload (429), by model, status and exception (litellm_proxy_failed_requests_metric; the same rule "
            "as make status and the llm_gateway:backend_errors rule)",
            (
                Query(
                    f"sum by (requested_model, exception_status, exception_class) "
                    f"(increase({failed_requests(True)}[{RATE}]))",
                    "{{requested_model}} {{exception_status}} {{exception_class}}",
                ),
            ),
        ),
        Panel(
            "Gateway client errors (4xx) by model and status",
            "Requests a client got wrong in the window (a bad body, a wrong key, a prompt over the context, ...; "
            "every 4xx but 408 and 429): not the backends' failures",
            (
                Query(
                    f"sum by (requested_model, exception_status) (increase({failed_requests(False)}[{RATE}]))",
                    "{{requested_model}} {{exception_status}}",
                ),
            ),
        ),
        Panel(
            "Gateway up",
            "1 = Prometheus reached the gateway's metrics port at the last scrape",
            (Query(f'max(up{{job="{GATEWAY}"}})', "gateway"),),
        ),
    ]


def people_panels() -> list[Panel]:
    """models.yml `people:`: LiteLLM labels its per-key counters with the key's alias, the person's name."""
    who = 'api_key_alias!="", api_key_alias!="None"'
    return [
        Panel(
            "Requests/s per person and model",
            "litellm_proxy_total_requests_metric by the person's name "
            "(models.yml people:) and the model asked for; 429s are requests over the person's limits",
            (
                Query(
                    f"sum by (api_key_alias, requested_model, status_code) "
                    f"(rate(litellm_proxy_total_requests_metric_total{{{who}}}[{RATE}]))",
                    "{{api_key_alias}} {{requested_model}} {{status_code}}",
                ),
            ),
            "reqps",
        ),
        Panel(
            "Tokens/s per person (in / out)",
            "litellm_input_tokens_metric and litellm_output_tokens_metric by the person's name and model",
            (
                Query(
                    "sum by (api_key_alias, requested_model) "
                    f"(rate(litellm_input_tokens_metric_total{{{who}}}[{RATE}]))",
                    "{{api_key_alias}} {{requested_model}} in",
                ),
                Query(
                    "sum by (api_key_alias, requested_model) "
                    f"(rate(litellm_output_tokens_metric_total{{{who}}}[{RATE}]))",
                    "{{api_key_alias}} {{requested_model}} out",
                ),
            ),
        ),
    ]


def gpu_panels(plan: Plan) -> list[Panel]:
    shared = ", ".join(f"GPU {g}: {', '.join(m.name for m in ms)}" for g, ms in gpu_users(plan).items())
    return [
        Panel(
            "GPU memory used vs given",
            f"Framebuffer in use (DCGM_FI_DEV_FB_USED over used + free) against the sum of the "
            f"--gpu-memory-utilization fractions of the models on the GPU ({shared})",
            (Query(GPU_USED, "GPU {{gpu}} used ({{models}})"), Query(GPU_GIVEN, "GPU {{gpu}} given ({{models}})")),
            "percentunit",
        ),
        Panel(
            "GPU memory given per model",
            "Each model's --gpu-memory-utilization on each of its GPUs",
            (Query(GPU_FRACTION, "GPU {{gpu}} {{model}}"),),
            "percentunit",
        ),
        Panel(
            "GPU utilization",
            "DCGM_FI_DEV_GPU_UTIL per GPU, with the models sharing it",
            (
                Query(
                    "DCGM_FI_DEV_GPU_UTIL * on(gpu) group_left(models) llm_gateway:gpu_models:info",
                    "GPU {{gpu}} ({{models}})",
                ),
            ),
            "percent",
        ),
    ]


def rows(plan: Plan) -> list[tuple[str, list[Panel]]]:
    out = [("Models", model_panels()), ("Gateway", gateway_panels())]
    if plan.people:
        out.append(("People", people_panels()))
    if plan.metrics.gpu_exporter:
        out.append(("GPUs", gpu_panels(plan)))
    return out


def _mappings(panel: Panel) -> dict:
    if not panel.values:
        return {}
    return {
        "mappings": [
            {
                "type": "value",
                "options": {
                    str(value): {"text": text, "color": color, "index": i}
                    for i, (value, text, color) in enumerate(panel.values)
                },
            }
        ]
    }


def _timeseries(panel: Panel, pid: int, x: int, y: int) -> dict:
    return {
        "id": pid,
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 8, "x": x, "y": y},
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "datasource": DATASOURCE,
                "expr": q.expr,
                "legendFormat": q.legend,
                "range": True,
                "editorMode": "code",
            }
            for i, q in enumerate(panel.queries)
        ],
        "fieldConfig": {"defaults": {"unit": panel.unit, "min": 0, **_mappings(panel)}, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def dashboard(plan: Plan) -> dict:
    panels: list[dict] = []
    pid, y = 1, 0
    for title, members in rows(plan):
        panels.append(
            {
                "type": "row",
                "id": pid,
                "title": title,
                "collapsed": False,
                "panels": [],
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        pid, y = pid + 1, y + 1
        for i, panel in enumerate(members):
            panels.append(_timeseries(panel, pid, (i % 3) * 8, y + (i // 3) * 8))
            pid += 1
        y += ((len(members) + 2) // 3) * 8
    return {
        "uid": "llm-gateway",
        "title": "LLM gateway",
        "description": header(plan).replace("# ", "").replace("\n", " ").strip(),
        "tags": ["llm-gateway", "vllm", "litellm"],
        "timezone": "browser",
        "editable": False,
        "graphTooltip": 1,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "templating": {"list": []},
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }


def queries(dash: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every query of every panel: what the compose test runs against Prometheus."""
    return [(p["title"], t["expr"]) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]


def datasource(plan: Plan) -> dict:
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Prometheus",
                "type": "prometheus",
                "uid": DATASOURCE_UID,
                "access": "proxy",
                "url": f"http://{PROMETHEUS}:{PROMETHEUS_PORT}",
                "isDefault": True,
                "editable": False,
                # Grafana's $__rate_interval is at least 4 x this: every rate() sees enough samples
                "jsonData": {"timeInterval": plan.metrics.scrape_interval},
            }
        ],
    }


def provider() -> dict:
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "llm-gateway",
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "options": {"path": GRAFANA_DASHBOARDS},
            }
        ],
    }


def grafana_files(plan: Plan) -> dict[str, str]:
    if not plan.grafana:
        return {}
    return {
        DATASOURCE_FILE: header(plan) + dump_yaml(datasource(plan)),
        PROVIDER_FILE: header(plan) + dump_yaml(provider()),
        DASHBOARD_FILE: json.dumps(dashboard(plan), indent=2) + "\n",
    }

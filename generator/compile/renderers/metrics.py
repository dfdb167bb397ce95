"""Plan -> Prometheus: what it scrapes (prometheus/prometheus.yml) and its recording rules (prometheus/rules.yml):
the gateway's errors split into the backends' failures and the clients' 4xx (the rule `make status` uses:
shipped/gateway_hooks/error_kinds.py), and, on GPU hosts, each GPU index mapped to the models sharing it. The
compose services are in compose.py.

Targets, all on the compose backend network (nothing here is published but Prometheus's own UI):
    job vllm     every backend's /metrics (vLLM serves it without a key), labelled model= and gpus=
    job litellm  the gateway's metrics process, litellm:GATEWAY_METRICS_PORT (no key; never published)
    job dcgm     NVIDIA's dcgm-exporter, when a model has GPUs (its `gpu` label is the host's GPU index)
    job on-demand  the on-demand controller's /metrics, when a model is on demand: each model's state, so that a
                 model unloaded on purpose reads "stopped", not "down" (its backend's scrape fails: up 0)
"""

from __future__ import annotations

from collections import defaultdict

from ...shipped.gateway_hooks.error_kinds import CLIENT_ERROR_STATUS
from ...shipped.on_demand.metrics import STATE_METRIC
from ..gateway_process import GATEWAY_METRICS_PORT
from ..plan import ModelPlan, Plan
from .litellm import CONTROLLER_SERVICE

PROMETHEUS_DIR = "prometheus"
PROMETHEUS_FILE = f"{PROMETHEUS_DIR}/prometheus.yml"
RULES_FILE = f"{PROMETHEUS_DIR}/rules.yml"
CONTAINER_CONFIG = "/etc/prometheus"  # where the Prometheus container sees PROMETHEUS_DIR (read-only)
CONTAINER_DATA = "/prometheus"  # its TSDB, on the named volume DATA_VOLUME
DATA_VOLUME = "prometheus-data"
PROMETHEUS = "prometheus"  # compose service name
PROMETHEUS_PORT = 9090  # in the container; metrics.port on the host
GATEWAY = "litellm"  # the gateway's compose service
DCGM = "dcgm-exporter"  # compose service name
DCGM_PORT = 9400
JOBS = {"vllm": "vllm", "gateway": "litellm", "gpus": "dcgm", "on_demand": "on-demand"}
# recording rules (prometheus/rules.yml); the dashboard's GPU panels read them
GPU_MODELS = "llm_gateway:gpu_models:info"  # 1 per GPU index, label models="a,b"
GPU_FRACTION = "llm_gateway:gpu_memory_fraction"  # per (gpu, model): its --gpu-memory-utilization
GPU_USED = "llm_gateway:gpu_memory_used:ratio"  # DCGM framebuffer used / total, per GPU, with models=
GPU_GIVEN = "llm_gateway:gpu_memory_given:ratio"  # sum of the fractions given on that GPU, with models=
# the gateway's failed requests per second, by requested_model: the backends' failures (5xx, 408, 429) and the
# clients' other 4xx, apart (LiteLLM's litellm_proxy_failed_requests_metric, summed over the gateway's workers)
FAILED = "litellm_proxy_failed_requests_metric_total"
# each backend's state: 1 up, 0 down, 2 stopped on purpose (an on-demand model the controller has not loaded:
# stopped, asleep, or loading); the dashboard's first panel and the BackendDown alert read it
BACKEND_STOPPED = "llm_gateway:backend_stopped"  # per on-demand model: 1 while it is not loaded, else 0
BACKEND_STATE = "llm_gateway:backend_state"
STATE_UP, STATE_DOWN, STATE_STOPPED = 1, 0, 2
UNLOADED_STATES = ("stopped", "asleep", "loading")  # on-demand states that are not a failure (the controller's)
BACKEND_DOWN_ALERT = "LLMGatewayBackendDown"
BACKEND_ERRORS = "llm_gateway:backend_errors:rate5m"
CLIENT_ERRORS = "llm_gateway:client_errors:rate5m"


def failed_requests(backend: bool) -> str:
    """The selector of the gateway's failed requests that are the backends' (True) or the clients' (False)."""
    return f'{FAILED}{{exception_status{"!~" if backend else "=~"}"{CLIENT_ERROR_STATUS}"}}'


def gpus_label(m: ModelPlan) -> str:
    return ",".join(map(str, m.gpus)) or "none"


def gpu_users(plan: Plan) -> dict[int, list[ModelPlan]]:
    """GPU index -> the models pinned to it (file order), for every GPU models.yml names."""
    users: dict[int, list[ModelPlan]] = defaultdict(list)
    for m in plan.models:
        for gpu in m.gpus:
            users[gpu].append(m)
    return dict(sorted(users.items()))


def scrape_configs(plan: Plan) -> list[dict]:
    jobs = [
        {
            "job_name": JOBS["vllm"],
            "metrics_path": "/metrics",
            "static_configs": [
                {
                    "targets": [f"{m.compose_host}:{m.port}"],
                    "labels": {"model": m.name, "served_model_name": m.served_name, "gpus": gpus_label(m)},
                }
                for m in plan.models
            ],
        },
        {
            "job_name": JOBS["gateway"],
            "metrics_path": "/metrics",
            "static_configs": [{"targets": [f"{GATEWAY}:{GATEWAY_METRICS_PORT}"]}],
        },
    ]
    if plan.metrics.gpu_exporter:
        jobs.append(
            {
                "job_name": JOBS["gpus"],
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [f"{DCGM}:{DCGM_PORT}"]}],
            }
        )
    if plan.on_demand:
        jobs.append(
            {
                "job_name": JOBS["on_demand"],
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [f"{CONTROLLER_SERVICE}:{plan.required_controller().port}"]}],
            }
        )
    return jobs


def prometheus_config(plan: Plan) -> dict:
    m = plan.metrics
    config: dict = {
        "global": {
            "scrape_interval": m.scrape_interval,
            "evaluation_interval": m.scrape_interval,
            "external_labels": {"stack": "llm-gateway"},
        },
    }
    config["rule_files"] = ["rules.yml"]  # relative to this file: /etc/prometheus/ in the container
    config["scrape_configs"] = scrape_configs(plan)
    return config


def _number(x: float) -> str:
    return f"{x:g}"


def recording_rules(plan: Plan) -> dict:
    """prometheus/rules.yml: the error rules always, the GPU rules when dcgm-exporter runs."""
    groups = [backend_rules(), error_rules()]
    if plan.metrics.gpu_exporter:
        groups.append(gpu_rules(plan))
    return {"groups": groups}


def backend_rules() -> dict:
    """Each backend's state (1 up, 0 down, 2 stopped on purpose) and an alert for a backend down that the
    on-demand controller did not stop: a scrape that fails while the controller says the model is unloaded is
    "stopped", not "down". Without on-demand models the state is `up`."""
    stopped = f"({BACKEND_STOPPED} == 1)"
    return {
        "name": "llm-gateway-backends",
        "rules": [
            {
                "record": BACKEND_STOPPED,
                "expr": f"max by (model) ({STATE_METRIC}"
                f'{{job="{JOBS["on_demand"]}",state=~"{"|".join(UNLOADED_STATES)}"}})',
            },
            {
                "record": BACKEND_STATE,
                "expr": f'(max by (model) (up{{job="{JOBS["vllm"]}"}}) unless on(model) {stopped}) '
                f"or on(model) ({STATE_STOPPED} * {stopped})",
            },
            {
                "alert": BACKEND_DOWN_ALERT,
                "expr": f"{BACKEND_STATE} == {STATE_DOWN}",
                "for": "2m",
                "labels": {"severity": "critical"},
                "annotations": {
                    "summary": "{{ $labels.model }}: its backend is down (Prometheus cannot scrape it, and it "
                    "is not an on-demand model the controller stopped)"
                },
            },
        ],
    }


def error_rules() -> dict:
    return {
        "name": "llm-gateway-errors",
        "rules": [
            {"record": BACKEND_ERRORS, "expr": f"sum by (requested_model) (rate({failed_requests(True)}[5m]))"},
            {"record": CLIENT_ERRORS, "expr": f"sum by (requested_model) (rate({failed_requests(False)}[5m]))"},
        ],
    }


def gpu_rules(plan: Plan) -> dict:
    """Recording rules: which models share each GPU and the memory fraction each was given, joined to DCGM's
    framebuffer readings by GPU index (dcgm-exporter's `gpu` label)."""
    rules: list[dict] = []
    for gpu, models in gpu_users(plan).items():
        rules.append(
            {
                "record": GPU_MODELS,
                "expr": "vector(1)",
                "labels": {"gpu": str(gpu), "models": ",".join(m.name for m in models)},
            }
        )
        for m in models:
            rules.append(
                {
                    "record": GPU_FRACTION,
                    "expr": f"vector({_number(m.memory_fraction)})",
                    "labels": {"gpu": str(gpu), "model": m.name},
                }
            )
    rules += [
        {
            "record": GPU_USED,
            "expr": f"(DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)) "
            f"* on(gpu) group_left(models) {GPU_MODELS}",
        },
        {"record": GPU_GIVEN, "expr": f"sum by (gpu) ({GPU_FRACTION}) * on(gpu) group_left(models) {GPU_MODELS}"},
    ]
    return {"name": "llm-gateway-gpus", "rules": rules}

"""Plan -> Prometheus: what it scrapes (prometheus/prometheus.yml) and, on GPU hosts, the recording rules that
map each GPU index to the models sharing it (prometheus/rules.yml). The compose services are in compose.py.

Targets, all on the compose backend network (nothing here is published but Prometheus's own UI):
    job vllm     every backend's /metrics (vLLM serves it without a key), labelled model= and gpus=
    job litellm  the gateway's metrics process, litellm:GATEWAY_METRICS_PORT (no key; never published)
    job dcgm     NVIDIA's dcgm-exporter, when a model has GPUs (its `gpu` label is the host's GPU index)
"""

from __future__ import annotations

from collections import defaultdict

from ..gateway_process import GATEWAY_METRICS_PORT
from ..plan import ModelPlan, Plan

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
JOBS = {"vllm": "vllm", "gateway": "litellm", "gpus": "dcgm"}
# recording rules (prometheus/rules.yml); the dashboard's GPU panels read them
GPU_MODELS = "llm_gateway:gpu_models:info"  # 1 per GPU index, label models="a,b"
GPU_FRACTION = "llm_gateway:gpu_memory_fraction"  # per (gpu, model): its --gpu-memory-utilization
GPU_USED = "llm_gateway:gpu_memory_used:ratio"  # DCGM framebuffer used / total, per GPU, with models=
GPU_GIVEN = "llm_gateway:gpu_memory_given:ratio"  # sum of the fractions given on that GPU, with models=


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
    jobs = [{
        "job_name": JOBS["vllm"],
        "metrics_path": "/metrics",
        "static_configs": [{"targets": [f"{m.name}:{m.port}"],
                            "labels": {"model": m.name, "served_model_name": m.served_name, "gpus": gpus_label(m)}}
                           for m in plan.models],
    }, {
        "job_name": JOBS["gateway"],
        "metrics_path": "/metrics",
        "static_configs": [{"targets": [f"{GATEWAY}:{GATEWAY_METRICS_PORT}"]}],
    }]
    if plan.metrics.gpu_exporter:
        jobs.append({"job_name": JOBS["gpus"], "metrics_path": "/metrics",
                     "static_configs": [{"targets": [f"{DCGM}:{DCGM_PORT}"]}]})
    return jobs


def prometheus_config(plan: Plan) -> dict:
    m = plan.metrics
    config: dict = {
        "global": {"scrape_interval": m.scrape_interval, "evaluation_interval": m.scrape_interval,
                   "external_labels": {"stack": "llm-gateway"}},
    }
    if m.gpu_exporter:
        config["rule_files"] = ["rules.yml"]  # relative to this file: /etc/prometheus/ in the container
    config["scrape_configs"] = scrape_configs(plan)
    return config


def _number(x: float) -> str:
    return f"{x:g}"


def gpu_rules(plan: Plan) -> dict:
    """Recording rules: which models share each GPU and the memory fraction each was given, joined to DCGM's
    framebuffer readings by GPU index (dcgm-exporter's `gpu` label)."""
    rules: list[dict] = []
    for gpu, models in gpu_users(plan).items():
        rules.append({"record": GPU_MODELS, "expr": "vector(1)",
                      "labels": {"gpu": str(gpu), "models": ",".join(m.name for m in models)}})
        for m in models:
            rules.append({"record": GPU_FRACTION, "expr": f"vector({_number(m.memory_fraction)})",
                          "labels": {"gpu": str(gpu), "model": m.name}})
    rules += [
        {"record": GPU_USED,
         "expr": f"(DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)) "
                 f"* on(gpu) group_left(models) {GPU_MODELS}"},
        {"record": GPU_GIVEN,
         "expr": f"sum by (gpu) ({GPU_FRACTION}) * on(gpu) group_left(models) {GPU_MODELS}"},
    ]
    return {"groups": [{"name": "llm-gateway-gpus", "rules": rules}]}

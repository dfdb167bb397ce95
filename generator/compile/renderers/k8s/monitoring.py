"""With `metrics.k8s.service_monitor: true`: k8s/monitoring.yaml for a cluster running the Prometheus Operator.

    Service litellm-metrics          ClusterIP, the gateway pods' metrics port only (never the gateway Service's
                                     port list: with gateway.k8s.expose every port of that Service faces outside)
    ServiceMonitor llm-gateway-backends   every backend Service's `http` port, /metrics, labelled model=<name>
    ServiceMonitor llm-gateway-gateway    litellm-metrics's `metrics` port

The backends' NetworkPolicy admits the Prometheus pods named by metrics.k8s (backend.network_policy).
"""

from __future__ import annotations

from ...gateway_process import GATEWAY_METRICS_PORT
from ...plan import Plan
from .objects import GATEWAY, PART_OF, labels, selector

MONITORING_FILE = "monitoring.yaml"  # relative to k8s/
METRICS_SERVICE = f"{GATEWAY}-metrics"
INSTANCE_LABEL = "__meta_kubernetes_service_label_app_kubernetes_io_instance"


def metrics_service() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": METRICS_SERVICE, "labels": labels("gateway", METRICS_SERVICE)},
        "spec": {
            "type": "ClusterIP",
            "selector": selector("gateway", GATEWAY),
            "ports": [
                {"name": "metrics", "port": GATEWAY_METRICS_PORT, "targetPort": GATEWAY_METRICS_PORT, "protocol": "TCP"}
            ],
        },
    }


def _monitor(plan: Plan, name: str, component: str, port: str, interval: str, relabel: list[dict]) -> dict:
    endpoint: dict = {"port": port, "path": "/metrics", "interval": interval}
    if relabel:
        endpoint["relabelings"] = relabel
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": name, "labels": {**labels(component, name), **plan.metrics.k8s.service_monitor_labels}},
        "spec": {
            "selector": {
                "matchLabels": {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/component": component}
            },
            "endpoints": [endpoint],
        },
    }


def monitoring_objects(plan: Plan) -> list[dict]:
    interval = plan.metrics.scrape_interval
    model = [{"action": "replace", "sourceLabels": [INSTANCE_LABEL], "targetLabel": "model"}]
    backends = _monitor(plan, f"{PART_OF}-backends", "backend", "http", interval, model)
    gateway = _monitor(plan, f"{PART_OF}-gateway", "gateway", "metrics", interval, [])
    # only the metrics Service has a `metrics` port; the gateway Service (port `http`) is not scraped
    gateway["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] = METRICS_SERVICE
    return [metrics_service(), backends, gateway]

"""models.yml `metrics:` (docs/observability.md): Prometheus's and Grafana's host ports (distinct from each other and
from the gateway's), the warning for a Prometheus published beyond this machine, and the MetricsPlan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plan import GrafanaPlan, MetricsK8sPlan, MetricsPlan, ModelPlan
from .schema import Metrics

if TYPE_CHECKING:
    from .state import Finding, State


def metrics_ports(metrics, gateway_port: int) -> list[Finding]:
    """Prometheus's and Grafana's host ports: distinct from each other and from the gateway's."""
    if not metrics.enabled:
        return []
    findings: list[Finding] = []
    if metrics.port == gateway_port:
        findings.append((("metrics", "port"), f"port {metrics.port} is the gateway's port; pick another (e.g. 9090)"))
    g = metrics.grafana
    if g.enabled and g.port in (gateway_port, metrics.port):
        owner = "the gateway's" if g.port == gateway_port else "Prometheus's (metrics.port)"
        findings.append((("metrics", "grafana", "port"), f"port {g.port} is {owner} port; pick another (e.g. 3000)"))
    return findings


def _metrics_plan(m: Metrics, models: list[ModelPlan]) -> tuple[MetricsPlan, list[str]]:
    """models.yml `metrics:` -> MetricsPlan (its ports are checked apart: metrics_ports)."""
    warnings = []
    if m.enabled and m.bind not in ("127.0.0.1", "::1"):
        warnings.append(
            f"metrics: Prometheus published on {m.bind}:{m.port}, reachable beyond this machine with no "
            "login (it shows every model, target and label); Docker-published ports bypass host firewalls"
        )
    g = m.grafana
    plan = MetricsPlan(
        enabled=m.enabled,
        port=m.port,
        bind=m.bind,
        scrape_interval=m.scrape_interval,
        retention=m.retention,
        retention_size=m.retention_size,
        image=m.image,
        gpu_exporter=m.gpu_exporter and any(x.gpus for x in models),
        gpu_exporter_image=m.gpu_exporter_image,
        grafana=GrafanaPlan(enabled=g.enabled, port=g.port, image=g.image),
        k8s=MetricsK8sPlan(
            service_monitor=m.k8s.service_monitor,
            service_monitor_labels=dict(sorted(m.k8s.service_monitor_labels.items())),
            prometheus_namespace=m.k8s.prometheus_namespace,
            prometheus_pod_labels=dict(sorted(m.k8s.prometheus_pod_labels.items())),
        ),
    )
    return plan, warnings


def plan(s: State) -> MetricsPlan:
    s.findings += metrics_ports(s.file.metrics, s.file.gateway.port)
    metrics, warned = _metrics_plan(s.file.metrics, s.backends)
    s.warnings += warned
    return metrics

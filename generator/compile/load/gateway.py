"""models.yml `gateway:` -> the GatewayPlan, and the warnings of what it exposes: the autoheal container's Docker
socket, a gateway published beyond this machine. (Its command line and environment: compile/gateway_process.py.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plan import GatewayK8sPlan, GatewayPlan

if TYPE_CHECKING:
    from .state import State


def plan(s: State) -> GatewayPlan:
    g = s.file.gateway
    gateway = GatewayPlan(
        port=g.port,
        bind=g.bind,
        image=g.image,
        workers=g.workers,
        log_level=g.log_level,
        clamp_max_tokens=g.clamp_max_tokens,
        request_timeout=g.request_timeout,
        stream_timeout=g.stream_timeout,
        backend_internet=g.backend_internet,
        admin_ui=g.admin_ui,
        autoheal=g.autoheal,
        ui=g.ui,
        metrics=g.metrics,
        responses_ttl=int(g.responses_ttl),
        k8s=GatewayK8sPlan(replicas=g.k8s.replicas, expose=g.k8s.expose, namespace=g.k8s.namespace),
    )
    if g.autoheal:
        s.warnings.append(
            "gateway.autoheal: the autoheal container mounts the Docker socket (root on this host) "
            "so it can restart unhealthy backends"
        )
    if g.bind not in ("127.0.0.1", "::1"):
        s.warnings.append(
            f"gateway: published on {g.bind}:{g.port}, reachable beyond this machine; "
            "Docker-published ports bypass host firewalls"
        )
    return gateway

"""Kubernetes for `replicas: {min, max}` (docs/replicas.md, "On Kubernetes"): KEDA ScaledObjects on the same signal as
the on-demand controller's, read from the cluster's Prometheus.

Each copy stays a Deployment of one pod behind its own Service (the gateway keeps a conversation on its copy and
skips a copy that is gone, as with `replicas: N`). Copies 1..min are plain Deployments; every other copy's Deployment
has a ScaledObject that scales it between 0 and 1 pod:

- copy i > max(min, 1): on while the requests waiting per running copy (vLLM's `vllm:num_requests_waiting`,
  averaged over the model's running copies) have stayed above `waiting` for `up_after`, and copies 1..i-1 run (so
  copies start in order, one step per signal); off `idle` s after that stops (KEDA's cooldownPeriod);
- copy 1 of min 0: on while the gateway answered any request for the model in the last `idle` s (its own counter,
  request_counters.py; the first request is refused with 503 while the pod starts, as the copy is not there yet).

Why KEDA: vLLM's production-stack chart and KServe autoscale vLLM with KEDA's Prometheus trigger on exactly this
metric; a HorizontalPodAutoscaler on an external metric needs a metrics adapter (prometheus-adapter) configured per
metric, and cannot scale to 0 without the HPAScaleToZero feature gate. KEDA scales 0 <-> 1 itself and hands 1 <-> N to
the HPA it creates.
"""

from __future__ import annotations

import dataclasses

from ....shipped.gateway_hooks.request_counters import REQUESTS
from ...plan import ModelPlan, Plan
from .objects import labels

KEDA_API = "keda.sh/v1alpha1"
POLLING_SECONDS = 15  # KEDA's default polling interval, written out
KEDA_RELEASE = "KEDA v2.20.2"  # whose CRD the tests check the ScaledObjects against (tests/unit/fixtures/keda)


def prometheus_url(plan: Plan) -> str:
    """The cluster's Prometheus (kube-prometheus-stack's prometheus-operated Service in metrics.k8s's namespace)."""
    return f"http://prometheus-operated.{plan.metrics.k8s.prometheus_namespace}.svc:9090"


def _waiting(served: str) -> str:
    return f'vllm:num_requests_waiting{{model_name="{served}"}}'


def query(m: ModelPlan) -> tuple[str, str]:
    """The PromQL a copy's ScaledObject reads, and the value above which it is on."""
    assert m.scale is not None
    if m.scale.min == 0 and max(m.replica, 1) == 1:
        window = f"{int(m.scale.idle)}s"
        return f'sum(increase({REQUESTS}_total{{requested_model="{m.served_name}"}}[{window}]))', "0"
    before = max(m.replica, 1) - 1  # copies that must run before this one starts
    w = _waiting(m.served_name)
    per_copy = f"sum({w}) / count({w})"
    if m.scale.up_after > 0:  # above the threshold for all of up_after: its lowest value in that window
        per_copy = f"min_over_time(({per_copy})[{int(m.scale.up_after)}s:])"
    return f"({per_copy}) and on() (count({w}) >= {before})", str(m.scale.waiting)


def scaled_object(m: ModelPlan, plan: Plan) -> dict:
    """Scales copy `m`'s Deployment between 0 and 1 pod on its query (KEDA's Prometheus trigger)."""
    assert m.scale is not None
    promql, threshold = query(m)
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": m.name, "labels": labels("backend", m.name)},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": m.name},
            "minReplicaCount": 0,
            "maxReplicaCount": 1,
            "pollingInterval": POLLING_SECONDS,
            "cooldownPeriod": int(m.scale.idle),  # on -> off only after `idle` s without the signal
            "triggers": [
                {
                    "type": "prometheus",
                    "name": "queue" if m.by_load else "requests",
                    "metadata": {
                        "serverAddress": prometheus_url(plan),
                        "query": promql,
                        "threshold": threshold,
                        "activationThreshold": threshold,
                        "ignoreNullValues": "true",  # no series (no copy runs yet): 0
                    },
                }
            ],
        },
    }


def follows_load(m: ModelPlan) -> bool:
    """A copy above the range's min: KEDA starts and stops it."""
    return m.scale is not None and max(m.replica, 1) > m.scale.min


def k8s_plan(plan: Plan) -> Plan:
    """The plan as Kubernetes runs it: the copies KEDA scales are plain backends (the gateway reaches each through
    its Service; no on-demand controller here)."""
    models = tuple(dataclasses.replace(m, on_demand=None) if follows_load(m) else m for m in plan.models)
    controller = plan.controller if any(m.on_demand for m in models) else None
    return dataclasses.replace(plan, models=models, controller=controller)


def with_scaling(m: ModelPlan, plan: Plan, objects: list[dict]) -> list[dict]:
    """A copy's objects, and its ScaledObject when KEDA scales it (its Deployment then leaves `replicas` to KEDA:
    a `kubectl apply` does not reset a scaled copy)."""
    if not follows_load(m):
        return objects
    for o in objects:
        if o["kind"] == "Deployment":
            o["spec"].pop("replicas", None)
    return [*objects, scaled_object(m, plan)]


def scaling_warnings(plan: Plan) -> list[str]:
    """What a cluster needs for the ScaledObjects (printed by `make k8s`)."""
    scaled = list(dict.fromkeys(m.entry for m in plan.models if follows_load(m)))
    if not scaled:
        return []
    return [
        f"{', '.join(scaled)}: copies follow the load through KEDA ScaledObjects (docs/replicas.md): the cluster needs "
        f"KEDA 2.x (checked against {KEDA_RELEASE}) and a Prometheus at {prometheus_url(plan)} that scrapes the "
        "backends and the gateway (metrics.k8s.service_monitor: true)"
    ]

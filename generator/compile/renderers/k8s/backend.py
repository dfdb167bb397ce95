"""One model -> its cache volume claim, Deployment, ClusterIP Service and NetworkPolicy."""

from __future__ import annotations

import math
import posixpath

from ....errors import Problem
from ...gateway_process import BACKEND_ENV
from ...load.parser_repairs import MOUNT as REPAIRS_MOUNT
from ...load.schema import BACKEND_CACHES
from ...plan import K8sToleration, ModelPlan, Plan
from ..parser_repairs import repairs_digest
from .gpus import gpu_limits
from .objects import (
    GATEWAY,
    HF_TOKEN_SECRET,
    container_security,
    http_probe,
    key_ref,
    labels,
    pod_defaults,
    scrape_annotations,
    selector,
)

WORKDIR = "/workspace"  # the backend's working directory: relative model paths resolve under it
# where the vLLM image keeps downloads, and torch.compile / CUDA graph caches (as in compose)
HF_CACHE, VLLM_CACHE = BACKEND_CACHES["hf-cache"], BACKEND_CACHES["vllm-cache"]
LIVENESS_PERIOD = 10  # seconds between liveness probes: restart_when_hung / 10 failures in a row restart the pod
STARTUP_MINUTES = 30  # a first start downloads weights and compiles (compose: start_period 30m)
# the repaired vLLM parsers (k8s/parser-repairs/), for the backends that run one; a fixed name (no content hash):
# the backends' pod annotation rolls them when the modules change, not when a header's models.yml digest does
REPAIRS_CONFIG_MAP = "vllm-parser-repairs"


def cache_claim(m: ModelPlan) -> str:
    return f"{m.name}-cache"


def local_weights(m: ModelPlan) -> str | None:
    """Where a model served from a local path (not a Hugging Face repo id) lives in the pod, or None.

    Hub ids are `name` or `org/name` and never start with '.' or '/'; anything else is a path."""
    if m.model.startswith(("/", ".")) or m.model.count("/") > 1:
        return posixpath.normpath(posixpath.join(WORKDIR, m.model))
    return None


def local_adapters(m: ModelPlan) -> dict[str, str]:
    """Where each LoRA adapter given as a directory lives in the pod: {adapter name: path}, like local weights."""
    return {a.name: posixpath.normpath(posixpath.join(WORKDIR, a.source)) for a in m.adapters if a.local}


def backend_problems(plan: Plan) -> list[Problem]:
    problems = []
    for m in plan.models:
        if not m.name[0].isalpha():
            problems.append(
                Problem(
                    plan.source,
                    m.name,
                    f"Kubernetes Service names must start with a letter; rename the model (e.g. m-{m.name})",
                )
            )
        if m.model.startswith("~"):
            problems.append(
                Problem(
                    plan.source,
                    f"{m.name}.command",
                    f"{m.model}: `~` means a different home in a pod; use an absolute path",
                )
            )
        for a in m.adapters:
            if a.source.startswith("~"):
                problems.append(
                    Problem(
                        plan.source,
                        f"{m.entry}.adapters.{a.name}.path",
                        f"{a.source}: `~` means a different home in a pod; use an absolute path",
                    )
                )
    return problems


def _env(m: ModelPlan, plan: Plan) -> list[dict]:
    env: dict[str, dict] = {
        "VLLM_API_KEY": key_ref("VLLM_API_KEY", m.api_key_env),
        "HF_TOKEN": {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": "HF_TOKEN", "optional": True}},
        },
    }
    if not plan.gateway.backend_internet:
        env["HF_HUB_OFFLINE"] = {"name": "HF_HUB_OFFLINE", "value": "1"}
    env.update(
        {k: {"name": k, "value": v} for k, v in {**BACKEND_ENV, **m.env}.items()}
    )  # models.yml wins, as in compose
    return list(env.values())


def _volumes(m: ModelPlan) -> tuple[list[dict], list[dict]]:
    mounts: list[dict] = [
        {"name": "cache", "mountPath": HF_CACHE, "subPath": "huggingface"},
        {"name": "cache", "mountPath": VLLM_CACHE, "subPath": "vllm"},
        {"name": "shm", "mountPath": "/dev/shm"},  # compose uses ipc: host; NCCL and workers need shared memory
    ]
    if weights := local_weights(m):
        mounts.append({"name": "cache", "mountPath": weights, "subPath": "weights"})
    for name, path in local_adapters(m).items():  # on the same PVC, copied in like the weights
        mounts.append({"name": "cache", "mountPath": path, "subPath": f"adapters/{name}"})
    volumes = [
        {"name": "cache", "persistentVolumeClaim": {"claimName": cache_claim(m)}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
    ]
    if m.parser_repairs:  # the plugin its flags name
        mounts.append({"name": "parser-repairs", "mountPath": REPAIRS_MOUNT, "readOnly": True})
        volumes.append({"name": "parser-repairs", "configMap": {"name": REPAIRS_CONFIG_MAP}})
    return mounts, volumes


def _wait_for_weights(m: ModelPlan, weights: str | None) -> dict:
    """Init container that holds the pod until the weights (config.json) and the local LoRA adapters
    (adapter_config.json) are copied in (docs/kubernetes.md, local weights)."""
    wanted = ([f"{weights}/config.json"] if weights else []) + [
        f"{p}/adapter_config.json" for p in local_adapters(m).values()
    ]
    script = (
        'for f in "$@"; do until [ -f "$f" ]; do echo "waiting for $f '
        '(copy the files in: docs/kubernetes.md, local weights)"; sleep 10; done; done'
    )
    mounts = ([{"name": "cache", "mountPath": weights, "subPath": "weights"}] if weights else []) + [
        {"name": "cache", "mountPath": path, "subPath": f"adapters/{name}"} for name, path in local_adapters(m).items()
    ]
    return {
        "name": "wait-for-weights",
        "image": m.image,
        "command": ["sh", "-c", script, "sh", *wanted],
        "volumeMounts": mounts,
        "securityContext": container_security(),
    }


def claim(m: ModelPlan) -> dict:
    """The cache volume: weights downloaded once survive restarts. One per backend (a replica of a model has its
    own Deployment and claim), so ReadWriteOnce does."""
    spec: dict = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": m.k8s.cache_size}},
    }
    if m.k8s.storage_class:
        spec["storageClassName"] = m.k8s.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": cache_claim(m), "labels": labels("backend", m.name)},
        "spec": spec,
    }


def deployment(m: ModelPlan, plan: Plan) -> dict:
    mounts, volumes = _volumes(m)
    container: dict = {
        "name": "vllm",
        "image": m.image,
        "command": ["vllm", "serve"],
        "args": list(m.serve_args),  # the same flags as compose (with --served-model-name and --port)
        "ports": [{"name": "http", "containerPort": m.port, "protocol": "TCP"}],
        "env": _env(m, plan),
        "volumeMounts": mounts,
        "startupProbe": http_probe("/health", 10, 5, STARTUP_MINUTES * 6),
        "readinessProbe": http_probe("/health", 10, 5, 3),
        "securityContext": container_security(),
    }
    if m.restart_when_hung:  # the kubelet restarts it once /health fails that long (compile/load/hung.py)
        container["livenessProbe"] = http_probe(
            "/health", LIVENESS_PERIOD, 3, math.ceil(m.restart_when_hung / LIVENESS_PERIOD)
        )
    requests = {k: v for k, v in (("cpu", m.k8s.cpu), ("memory", m.k8s.memory)) if v}
    resources: dict[str, dict] = {"requests": requests} if requests else {}  # limits: GPU counts
    if limits := gpu_limits(m, plan):
        resources["limits"] = limits
    if resources:
        container["resources"] = resources
    pod: dict = {**pod_defaults(), "containers": [container], "volumes": volumes}
    weights = local_weights(m)
    if weights or local_adapters(m):
        container["workingDir"] = WORKDIR
        pod["initContainers"] = [_wait_for_weights(m, weights)]
    if m.k8s.node_selector:
        pod["nodeSelector"] = dict(m.k8s.node_selector)
    if m.k8s.tolerations:
        pod["tolerations"] = [_toleration(t) for t in m.k8s.tolerations]
    annotations = {"llm-gateway/model": m.model, "llm-gateway/served-model-name": m.served_name}
    if m.description:
        annotations["llm-gateway/description"] = m.description
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": m.name, "labels": labels("backend", m.name), "annotations": annotations},
        "spec": {
            # one pod per backend: a model's replicas are Deployments of their own (<model>-1, -2, ...), each behind
            # its own Service, so the gateway can keep a conversation on one and skip a dead one (docs/replicas.md)
            "replicas": 1,
            # the old pod must free its GPUs (and its ReadWriteOnce cache) before the new one starts
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector("backend", m.name)},
            "template": {"metadata": _pod_metadata(m, plan), "spec": pod},
        },
    }


def _pod_metadata(m: ModelPlan, plan: Plan) -> dict:
    meta: dict = {"labels": labels("backend", m.name)}
    annotations = scrape_annotations(m.port, plan.metrics.enabled)  # vLLM serves /metrics without a key
    if m.parser_repairs:  # vLLM imports the repairs at start: new ones roll the pod
        annotations["llm-gateway/parser-repairs"] = repairs_digest()
    if annotations:
        meta["annotations"] = annotations
    return meta


def _toleration(t: K8sToleration) -> dict:
    out = {
        "key": t.key,
        "operator": t.operator,
        "value": t.value,
        "effect": t.effect,
        "tolerationSeconds": t.toleration_seconds,
    }
    return {k: v for k, v in out.items() if v is not None}


def service(m: ModelPlan) -> dict:
    """ClusterIP only: the gateway reaches the backend at http://<model name>:<port>."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": m.name, "labels": labels("backend", m.name)},
        "spec": {
            "type": "ClusterIP",
            "selector": selector("backend", m.name),
            "ports": [{"name": "http", "port": m.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def network_policy(m: ModelPlan, plan: Plan) -> dict:
    """Only gateway pods may connect to the backend (kubelet probes from the node stay allowed); with metrics on,
    also the cluster's Prometheus pods (metrics.k8s: their namespace and labels), for /metrics. They reach the same
    port as the gateway, but vLLM's API (/v1, ...) still needs the backend's key, which only the gateway holds."""
    port = [{"protocol": "TCP", "port": m.port}]
    ingress = [{"from": [{"podSelector": {"matchLabels": selector("gateway", GATEWAY)}}], "ports": port}]
    if plan.metrics.enabled:
        k = plan.metrics.k8s
        ingress.append(
            {
                "from": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": k.prometheus_namespace}},
                        "podSelector": {"matchLabels": dict(k.prometheus_pod_labels)},
                    }
                ],
                "ports": port,
            }
        )
    spec: dict = {
        "podSelector": {"matchLabels": selector("backend", m.name)},
        "policyTypes": ["Ingress"],
        "ingress": ingress,
    }
    if not plan.gateway.backend_internet:
        spec["policyTypes"].append("Egress")
        spec["egress"] = []  # gateway.backend_internet: false: no connection out at all
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{m.name}-from-gateway-only", "labels": labels("backend", m.name)},
        "spec": spec,
    }


def backend_objects(m: ModelPlan, plan: Plan) -> list[dict]:
    return [claim(m), deployment(m, plan), service(m), network_policy(m, plan)]

"""Shared pieces of the Kubernetes objects: names, labels, probes, key references."""

from __future__ import annotations

PART_OF = "llm-gateway"
KEYS_SECRET = "llm-gateway-keys"  # made by kustomize's secretGenerator from k8s/secrets.env
PEOPLE_SECRET = "llm-gateway-people"  # from k8s/people-keys.json: sha256 of each person's key -> name
HF_TOKEN_SECRET = "hf-token"  # optional, created by the user for gated models (docs/kubernetes.md)
GATEWAY = "litellm"  # the gateway's Deployment and Service (a reserved model name, so no clash)


def labels(component: str, instance: str) -> dict[str, str]:
    """Recommended labels; `instance` is the model's name in models.yml (or `litellm`)."""
    return {
        "app.kubernetes.io/name": {"gateway": "litellm", "redis": "redis"}.get(component, "vllm"),
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "llm-gateway-generator",
    }


def selector(component: str, instance: str) -> dict[str, str]:
    """The immutable subset Deployments, Services and NetworkPolicies select on."""
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/instance": instance,
    }


def key_ref(env: str, secret_key: str, optional: bool = False) -> dict:
    """An environment variable read from the generated Secret: no value in any manifest."""
    ref: dict = {"name": KEYS_SECRET, "key": secret_key}
    if optional:
        ref["optional"] = True
    return {"name": env, "valueFrom": {"secretKeyRef": ref}}


def http_probe(path: str, period: int, timeout: int, failures: int) -> dict:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def pod_defaults() -> dict:
    """Pod settings every pod of the stack gets."""
    return {
        # Kubernetes would inject <SERVICE>_PORT=tcp://... for every Service of the namespace; a model
        # named `vllm` would then set VLLM_PORT, which vLLM reads as its own setting and exits.
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,  # nothing here talks to the Kubernetes API
    }


def container_security() -> dict:
    return {"allowPrivilegeEscalation": False}  # compose's no-new-privileges


def scrape_annotations(port: int, enabled: bool) -> dict[str, str]:
    """The prometheus.io/* pod annotations most cluster Prometheus setups discover targets by."""
    if not enabled:
        return {}
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}

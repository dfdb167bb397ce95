"""The LiteLLM gateway on Kubernetes: Deployment, Service, and the config its ConfigMap holds."""

from __future__ import annotations

from ....shipped.gateway_hooks.people import KEYS_FILE
from ...gateway_process import (
    CONFIG_DIR,
    DRAIN_TIMEOUT,
    GATEWAY_METRICS_PORT,
    GATEWAY_START_BUDGET,
    gateway_args,
    gateway_command,
    gateway_env,
    redis_env,
)
from ...plan import ModelPlan, Plan
from .objects import (
    GATEWAY,
    PEOPLE_SECRET,
    container_security,
    http_probe,
    key_ref,
    labels,
    pod_defaults,
    scrape_annotations,
    selector,
)

PEOPLE_DIR = "/etc/litellm-people"  # the people Secret's mount (its file: people-keys.json)
CONFIG_MAP = "litellm-config"  # made by kustomize's configMapGenerator from k8s/gateway/
SERVICE_TYPES = {"none": "ClusterIP", "loadbalancer": "LoadBalancer", "nodeport": "NodePort"}
# bench/README.md: one worker's RSS was 323 MB at start and 362 MB at peak over a 10-minute soak
MEMORY_REQUEST_MI, MEMORY_LIMIT_MI = 512, 1024
# workers: auto in a pod: one per CPU of the node the pod may use (no CPU limit is set), at most what
# this memory limit holds (gateway_start.py: (4096 - 350) / 400 = 9 workers)
AUTO_MEMORY_LIMIT_MI = 4096


def resources(workers: int | str) -> dict:
    if workers == "auto":
        return {
            "requests": {"cpu": "1", "memory": f"{MEMORY_REQUEST_MI}Mi"},
            "limits": {"memory": f"{AUTO_MEMORY_LIMIT_MI}Mi"},
        }
    return {
        "requests": {"cpu": str(workers), "memory": f"{MEMORY_REQUEST_MI * workers}Mi"},
        "limits": {"memory": f"{MEMORY_LIMIT_MI * workers}Mi"},
    }


def service_api_base(m: ModelPlan) -> str:
    """The model's Service by its short DNS name (resolves in whatever namespace the stack is applied to): compose's
    URL for a single-host model; a model on nodes too (its Service selects the leader), where compose has the
    leader's address."""
    return f"http://{m.name}:{m.port}/v1"


STARTUP_PERIOD = 5  # seconds between the gateway's start-up probes
SHUTDOWN_MARGIN = 15  # seconds a stopping gateway pod has past its requests' drain: LiteLLM's own shutdown steps


def deployment(plan: Plan) -> dict:
    g = plan.gateway
    env = [key_ref(g.master_key_env, g.master_key_env)]
    env += [key_ref(name, name) for name in dict.fromkeys(m.api_key_env for m in plan.models)]  # one key per model
    # hosted models' provider keys: the admin's to put in secrets.env; optional, so a missing one fails only its model
    env += [key_ref(name, name, optional=True) for name in plan.provider_key_envs]
    env += [{"name": k, "value": v} for k, v in gateway_env(g).items()]
    if plan.redis:  # the stack's Redis Service (k8s/redis.yaml)
        env += [{"name": k, "value": v} for k, v in redis_env(plan.redis.service, plan.redis.port).items()]
        env.append(key_ref(plan.redis.password_env, plan.redis.password_env))
    mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    volumes: list[dict] = [{"name": "config", "configMap": {"name": CONFIG_MAP}}]
    if plan.people:  # the hashes of people's keys, from their own Secret (never in the ConfigMap)
        env.append({"name": "GATEWAY_PEOPLE_KEYS", "value": f"{PEOPLE_DIR}/{KEYS_FILE}"})
        mounts.append({"name": "people", "mountPath": PEOPLE_DIR, "readOnly": True})
        volumes.append({"name": "people", "secret": {"secretName": PEOPLE_SECRET}})
    container = {
        "name": "litellm",
        "image": g.image,
        "command": gateway_command(CONFIG_DIR),  # resolves `--num_workers auto` in the pod, then runs LiteLLM
        "args": gateway_args(g, f"{CONFIG_DIR}/config.yaml"),
        # metrics: LiteLLM's metrics process (no key check): declared for scrapers, deliberately not in the
        # Service (with expose: loadbalancer every Service port would face the outside)
        "ports": [
            {"name": "http", "containerPort": g.port, "protocol": "TCP"},
            {"name": "metrics", "containerPort": GATEWAY_METRICS_PORT, "protocol": "TCP"},
        ],
        "env": env,
        "volumeMounts": mounts,
        "resources": resources(g.workers),
        # up to GATEWAY_START_BUDGET to import LiteLLM and start its workers (compose: its start_period)
        "startupProbe": http_probe("/health/liveliness", STARTUP_PERIOD, 5, GATEWAY_START_BUDGET // STARTUP_PERIOD),
        "livenessProbe": http_probe("/health/liveliness", 15, 5, 3),
        "readinessProbe": http_probe("/health/readiness", 10, 5, 3),
        "securityContext": container_security(),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": GATEWAY, "labels": labels("gateway", GATEWAY)},
        "spec": {
            "replicas": g.k8s.replicas,  # the config is stateless (no database, no cache): any number works
            "selector": {"matchLabels": selector("gateway", GATEWAY)},
            "template": {
                "metadata": {
                    "labels": labels("gateway", GATEWAY),
                    **_annotations(scrape_annotations(GATEWAY_METRICS_PORT, plan.metrics.enabled)),
                },
                "spec": {
                    **pod_defaults(),
                    # a pod replaced by a rollout finishes its requests (GRACEFUL_SHUTDOWN_TIMEOUT, gateway_env) before
                    # Kubernetes' SIGKILL (its default 30 s would cut a long stream)
                    "terminationGracePeriodSeconds": DRAIN_TIMEOUT + SHUTDOWN_MARGIN,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def _annotations(annotations: dict[str, str]) -> dict:
    return {"annotations": annotations} if annotations else {}


def service(plan: Plan) -> dict:
    g = plan.gateway
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": GATEWAY, "labels": labels("gateway", GATEWAY)},
        "spec": {
            "type": SERVICE_TYPES[g.k8s.expose],
            "selector": selector("gateway", GATEWAY),
            "ports": [{"name": "http", "port": g.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def gateway_objects(plan: Plan) -> list[dict]:
    return [deployment(plan), service(plan)]

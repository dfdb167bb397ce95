"""The stack's Redis on Kubernetes (plan.redis): Deployment, ClusterIP Service, NetworkPolicy (gateway pods only).

One pod, its data in an emptyDir (counters restart with the pod); the password from the keys Secret, given to
redis-server as config on stdin, never on a command line. The same shape as the compose service."""

from __future__ import annotations

from ...plan import Plan
from ..compose import redis_command
from .objects import GATEWAY, container_security, key_ref, labels, pod_defaults, selector

REDIS_FILE = "redis.yaml"  # under k8s/


def deployment(plan: Plan) -> dict:
    r = plan.required_redis()
    probe = {
        "exec": {
            "command": ["sh", "-c", f'REDISCLI_AUTH="${r.password_env}" redis-cli -p {r.port} ping | grep -q PONG']
        },
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }
    container = {
        "name": "redis",
        "image": r.image,
        "command": ["sh", "-c", redis_command("$" + r.password_env, r.port, r.hz)],
        "ports": [{"name": "redis", "containerPort": r.port, "protocol": "TCP"}],
        "env": [key_ref(r.password_env, r.password_env)],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
        "readinessProbe": probe,
        "livenessProbe": probe,
        "securityContext": container_security(),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": r.service, "labels": labels("redis", r.service)},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector("redis", r.service)},
            "template": {
                "metadata": {"labels": labels("redis", r.service)},
                "spec": {**pod_defaults(), "containers": [container], "volumes": [{"name": "data", "emptyDir": {}}]},
            },
        },
    }


def service(plan: Plan) -> dict:
    r = plan.required_redis()
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": r.service, "labels": labels("redis", r.service)},
        "spec": {
            "type": "ClusterIP",
            "selector": selector("redis", r.service),
            "ports": [{"name": "redis", "port": r.port, "targetPort": "redis", "protocol": "TCP"}],
        },
    }


def network_policy(plan: Plan) -> dict:
    r = plan.required_redis()
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{r.service}-from-gateway-only", "labels": labels("redis", r.service)},
        "spec": {
            "podSelector": {"matchLabels": selector("redis", r.service)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": selector("gateway", GATEWAY)}}],
                    "ports": [{"protocol": "TCP", "port": r.port}],
                }
            ],
        },
    }


def redis_objects(plan: Plan) -> list[dict]:
    return [deployment(plan), service(plan), network_policy(plan)]

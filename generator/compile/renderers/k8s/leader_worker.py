"""A model on `nodes:` -> a LeaderWorkerSet (kubernetes-sigs/lws, leaderworkerset.x-k8s.io/v1): one group of one
leader pod and nodes - 1 worker pods, scheduled, failed and recreated as a unit (docs/multinode.md).

The pods are the single-node Deployment's pod (backend.deployment: the same image, flags, environment, probes, GPU
limits, shared memory, placement), with each node's flags added (plan.NodesPlan.args): the leader serves the API at
the model's Service and port and meets the workers at $(LWS_LEADER_ADDRESS) (the LWS controller sets it and
$(LWS_WORKER_INDEX) in every pod; Kubernetes expands $(VAR) in args); the workers run headless: no port, no probe, no
key. Each pod gets its own cache volume (volumeClaimTemplates: the weights live on every node). The Service selects
the leader only; the NetworkPolicy lets the group's pods reach each other (NCCL / gloo pick their ports), the gateway
the leader's API.
"""

from __future__ import annotations

import copy

from ...plan import ModelPlan, NodesPlan, Plan
from .backend import claim, deployment, network_policy, service
from .objects import selector

API_VERSION = "leaderworkerset.x-k8s.io/v1"
LWS_RELEASE = "v0.10.0"  # the CRD the manifests are validated against (tests/unit/fixtures/lws/SOURCE.md)
LWS_INSTALL = f"kubectl apply --server-side -f https://github.com/kubernetes-sigs/lws/releases/download/{LWS_RELEASE}/manifests.yaml"
LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"  # set by the LWS controller in every pod of the group
WORKER_INDEX = "$(LWS_WORKER_INDEX)"  # 0 on the leader, 1..size-1 on the workers
LEADER_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"  # "0" on the leader pod
# kustomize rewrites a hashed Secret's name only in the kinds it knows; this file tells it where a LeaderWorkerSet
# names one (the leader's VLLM_API_KEY), so `kubectl apply -k` keeps working (kustomization.yaml `configurations:`)
KUSTOMIZE_CONFIG = "kustomizeconfig/leaderworkerset.yaml"


def required_nodes(m: ModelPlan) -> NodesPlan:
    if m.nodes is None:
        raise ValueError(f"{m.name} is on one node: no LeaderWorkerSet")
    return m.nodes


def _node_pod(template: dict, node_args: tuple[str, ...], leader: bool) -> dict:
    pod = copy.deepcopy(template)
    spec = pod["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "cache"]  # the group's claim template's instead
    container = spec["containers"][0]
    container["args"] = [*container["args"], *node_args]
    if not leader:  # headless: no API, no /health, no /metrics, no key
        for key in ("ports", "startupProbe", "readinessProbe", "livenessProbe"):
            container.pop(key, None)
        container["env"] = [e for e in container["env"] if e["name"] != "VLLM_API_KEY"]
        pod["metadata"].pop("annotations", None)
    pod["metadata"]["labels"] = {**pod["metadata"]["labels"], "llm-gateway/node-role": "leader" if leader else "worker"}
    return pod


def leader_worker_set(m: ModelPlan, plan: Plan) -> dict:
    nodes = required_nodes(m)
    single = deployment(m, plan)  # the one-node pod every node starts from
    template = single["spec"]["template"]
    cache = claim(m)
    return {
        "apiVersion": API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": {
            **single["metadata"],
            "annotations": {**single["metadata"]["annotations"], "llm-gateway/nodes": str(nodes.count)},
        },
        "spec": {
            "replicas": 1,  # one group: the model's nodes (copies of a model on nodes are not generated yet)
            # the workers start with the leader: vLLM's leader waits for every node to join before it serves
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": nodes.count,
                # one pod fails, the group is recreated: a vLLM that lost a node cannot continue
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _node_pod(template, nodes.args(0, LEADER_ADDRESS), leader=True),
                "workerTemplate": _node_pod(template, nodes.args(WORKER_INDEX, LEADER_ADDRESS), leader=False),
                "volumeClaimTemplates": [{"metadata": {"name": "cache"}, "spec": cache["spec"]}],
            },
        },
    }


def leader_service(m: ModelPlan) -> dict:
    """The model's Service, on the leader pod only (the workers serve no API)."""
    svc = service(m)
    svc["spec"]["selector"] = {**svc["spec"]["selector"], LEADER_LABEL: "0"}
    return svc


def group_policy(m: ModelPlan, plan: Plan) -> dict:
    """The single-node policy (gateway -> leader's port, Prometheus) plus the group's pods to each other, both ways."""
    policy = network_policy(m, plan)
    group = [{"podSelector": {"matchLabels": selector("backend", m.name)}}]
    policy["spec"]["ingress"].append({"from": group})
    if "egress" in policy["spec"]:  # gateway.backend_internet: false: only the group, and DNS for the leader's name
        dns = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
        policy["spec"]["egress"] = [{"to": group}, {"ports": dns}]
    return policy


def group_objects(m: ModelPlan, plan: Plan) -> list[dict]:
    return [leader_worker_set(m, plan), leader_service(m), group_policy(m, plan)]


def kustomize_config() -> dict:
    """Where a LeaderWorkerSet names the generated Secret (kustomize `nameReference`)."""
    paths = [
        f"spec/leaderWorkerTemplate/{t}/spec/containers/env/valueFrom/secretKeyRef/name"
        for t in ("leaderTemplate", "workerTemplate")
    ]
    return {
        "nameReference": [{"kind": "Secret", "fieldSpecs": [{"kind": "LeaderWorkerSet", "path": p} for p in paths]}]
    }

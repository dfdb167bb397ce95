"""A model on `nodes:` in compose (docs/multinode.md): one compose file per host. The leader (node 0) is the model's
service in compose/docker-compose.yml, beside the gateway; each other node gets compose/nodes/<model>/node-<i>.yml,
a headless vLLM to start on host i (`docker compose -f ... up -d`).

Every node runs with the host's network (`network_mode: host`): NCCL and gloo connect the nodes on ports they pick,
which a bridge network would have to publish one by one. The leader listens on its host's address (models.yml
`nodes.hosts[0]`), where the gateway (and Prometheus) reach it and the workers meet it (--master-addr, --master-port);
its API still wants the model's key. The workers serve no API and get no key.
"""

from __future__ import annotations

import copy

from ...errors import Problem
from ..load.schema import BACKEND_CACHES
from ..plan import ModelPlan, NodesPlan, Plan

NODES_DIR = "compose/nodes"


def node_file(m: ModelPlan, rank: int) -> str:
    return f"{NODES_DIR}/{m.name}/node-{rank}.yml"


def _nodes(m: ModelPlan) -> NodesPlan:
    if m.nodes is None or not m.nodes.hosts:
        raise ValueError(f"{m.name}: no nodes with addresses (nodes_problems refuses it first)")
    return m.nodes


def nodes_problems(plan: Plan) -> list[Problem]:
    """compose needs each node's address: the leader's is where the gateway and the workers reach it."""
    return [
        Problem(
            plan.source,
            f"{m.entry}.nodes",
            f"the compose target needs each node's address: write nodes: {{hosts: [<leader>, ...]}} with "
            f"{m.nodes.count} addresses, the leader first (Kubernetes needs none: `make k8s`)",
        )
        for m in plan.models
        if m.nodes and not m.nodes.hosts
    ]


def as_leader(m: ModelPlan, service: dict) -> dict:
    """The model's single-host service (compose.model_service) as node 0: host network, listening on its address."""
    nodes = _nodes(m)
    leader = {k: v for k, v in service.items() if k != "networks"}
    leader["network_mode"] = "host"
    leader["command"] = [*service["command"], "--host", nodes.hosts[0], *nodes.args(0, nodes.hosts[0])]
    return leader


def worker_service(m: ModelPlan, leader: dict, rank: int) -> dict:
    """Node `rank` (1..): the leader's service, headless: no key, no port to probe, no depends_on (another file)."""
    nodes = _nodes(m)
    worker = copy.deepcopy({k: v for k, v in leader.items() if k not in ("healthcheck", "depends_on", "profiles")})
    worker["command"] = [*leader["command"][: leader["command"].index("--host")], *nodes.args(rank, nodes.hosts[0])]
    worker["environment"] = {k: v for k, v in leader["environment"].items() if k != "VLLM_API_KEY"}
    # paths relative to compose/ (the parser repairs, models.yml volumes): this file is three folders deeper
    worker["volumes"] = [f"../../{v}" if v.startswith(".") else v for v in leader["volumes"]]
    if "labels" in worker:
        worker["labels"] = {k: v for k, v in worker["labels"].items() if k != "autoheal"}  # no autoheal on that host
    return worker


def node_documents(plan: Plan, services: dict[str, dict]) -> dict[str, dict]:
    """{path: compose document} for every node but the leader of every model on nodes. `services`: the main
    compose file's services (the leaders already as_leader)."""
    docs: dict[str, dict] = {}
    for m in plan.models:
        if not m.nodes:
            continue
        leader = services[m.name]
        for rank in range(1, m.nodes.count):
            name = f"{m.name}-node-{rank}"
            named = sorted({v.source for v in m.volumes if v.named})
            docs[node_file(m, rank)] = {
                "name": f"llm-gateway-{name}",
                "services": {name: worker_service(m, leader, rank)},
                "volumes": {v: {} for v in [*BACKEND_CACHES, *named]},
            }
    return docs

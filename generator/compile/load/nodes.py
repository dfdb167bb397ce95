"""models.yml `nodes:`: a model larger than one host, served by one vLLM per node as one group (docs/multinode.md).

The leader (node 0) serves the API and joins the gateway; the other nodes run headless. They meet through vLLM's
multiprocessing backend across nodes (vLLM 0.32: --nnodes, --node-rank, --master-addr, --master-port, --headless),
which the generator writes per node: the command says only what every node runs (the model, the parallel sizes).
`gpus:` are each node's, so tensor x pipeline parallel size = nodes x len(gpus). The fit check (fit.py) is per GPU,
with the weights split over tensor x pipeline parallel size, so it holds per node too.

Two steps: `check` (before gpus.place, which then counts each node's GPUs) and `plan` (after backends.plan: the
leader's backend carries the NodesPlan every target renders from).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..plan import NodesPlan
from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Finding, Model, State

# what the generator writes per node; a command that sets one would give every node the same value
PER_NODE_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless")
BACKEND = "mp"  # vLLM's multiprocessing executor across nodes (--nnodes); Ray would need a cluster of its own


def _size(cmd: ServeCommand, flag: str) -> int:
    return int(cmd.value(flag) or 1)


def parallel_problems(name: str, cmd: ServeCommand, nodes: int, gpus: int) -> list[Finding]:
    """Tensor x pipeline parallel size against the nodes' GPUs (`gpus` per node; 0: CPU nodes)."""
    tp, pp = _size(cmd, "--tensor-parallel-size"), _size(cmd, "--pipeline-parallel-size")
    if _size(cmd, "--data-parallel-size") > 1:
        return [
            (
                (name, "command"),
                f"--data-parallel-size {cmd.value('--data-parallel-size')} with nodes: {nodes}: data parallel "
                "across nodes (--data-parallel-address, --data-parallel-size-local) is not generated yet; split "
                "the model with --tensor-parallel-size inside a node and --pipeline-parallel-size across nodes, "
                "or serve copies with replicas:",
            )
        ]
    world = tp * pp
    want = nodes * gpus if gpus else None
    if want is not None and world != want:
        return [
            (
                (name, "command"),
                f"tensor x pipeline parallel size is {tp} x {pp} = {world}, but nodes: {nodes} x gpus: {gpus} "
                f"per node = {want} GPUs; use --tensor-parallel-size {gpus} --pipeline-parallel-size {nodes} "
                "(tensor parallel inside a node, pipeline parallel across nodes)",
            )
        ]
    if world % nodes or world < nodes:
        return [
            (
                (name, "command"),
                f"tensor x pipeline parallel size {tp} x {pp} = {world} does not split over nodes: {nodes} "
                f"(each node runs {world} / {nodes} ranks); e.g. --pipeline-parallel-size {nodes}",
            )
        ]
    return []


def flag_problems(name: str, cmd: ServeCommand, nodes: int) -> list[Finding]:
    """Flags the generator writes per node, and an executor other than the one that spans nodes."""
    findings: list[Finding] = []
    for flag in PER_NODE_FLAGS:
        if cmd.last(flag) is None:
            continue
        if nodes > 1:
            fix = f"remove {flag}: `nodes:` makes the generator write it for each node"
        elif flag in ("--nnodes", "--node-rank", "--master-addr"):
            fix = f"remove {flag} and say `nodes: N` instead (the generator writes each node's command)"
        else:
            fix = f"remove {flag} (a backend of the stack serves the API; headless nodes come from `nodes:`)"
        if flag == "--nnodes" and nodes == 1 and _size(cmd, "--nnodes") == 1:
            continue  # --nnodes 1 says nothing
        findings.append(((name, "command"), f"{flag} in the command: {fix}"))
    backend = cmd.value("--distributed-executor-backend")
    if nodes > 1 and backend not in (None, BACKEND):
        findings.append(
            (
                (name, "command"),
                f"--distributed-executor-backend {backend} with nodes: {nodes}: the nodes meet through vLLM's "
                f"multiprocessing backend (--nnodes); remove the flag or write "
                f"--distributed-executor-backend {BACKEND}",
            )
        )
    return findings


def replicas_problems(name: str, replicas: int, nodes: int) -> list[Finding]:
    if replicas == 1:
        return []
    return [
        (
            (name, "replicas"),
            f"replicas: {replicas} of a model on nodes: {nodes} is not generated yet (each copy a group of "
            "nodes); set replicas: 1, or give each copy an entry of its own",
        )
    ]


def check(s: State, m: Model) -> None:
    """`nodes:` and the command's parallel flags; a model whose sizes do not match its nodes stops here."""
    nodes = m.entry.nodes.size if m.entry.nodes else 1
    found = flag_problems(m.name, m.cmd, nodes)
    if nodes > 1:
        gpus = m.entry.gpus
        per_node = 0 if not gpus or isinstance(gpus[0], list) else len(gpus)
        found += replicas_problems(m.name, m.entry.copies, nodes)
        found += parallel_problems(m.name, m.cmd, nodes, per_node)
        tp = _size(m.cmd, "--tensor-parallel-size")
        if not found and per_node and tp > per_node:
            s.warnings.append(
                f"{m.name}: --tensor-parallel-size {tp} spans nodes ({per_node} GPUs each): every layer then waits "
                f"on the network; --tensor-parallel-size {per_node} --pipeline-parallel-size {nodes} keeps tensor "
                "parallelism inside a node"
            )
    s.findings += found
    if found:
        m.stopped = True


def plan(s: State, m: Model) -> None:
    """The leader's backend carries the nodes: how many, their addresses, where they meet."""
    if not m.entry.nodes:
        return
    n = m.entry.nodes
    if any(b.on_demand for b in m.backends):
        s.findings.append(
            (
                (m.name, "on_demand"),
                f"a model on nodes: {n.size} is always on (its nodes start and stop as one group); set "
                "on_demand: false for it",
            )
        )
        return
    nodes = NodesPlan(
        count=n.size,
        hosts=tuple(n.hosts),
        port=n.port,
        backend_flag=m.cmd.value("--distributed-executor-backend") is None,
    )
    for i, backend in enumerate(m.backends):
        planned = dataclasses.replace(backend, nodes=nodes)
        s.backends[s.backends.index(backend)] = planned
        m.backends[i] = planned

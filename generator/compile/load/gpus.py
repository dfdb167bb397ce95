"""A model's GPUs (`gpus:`): as many as tensor x pipeline x data parallel size, none twice; with `replicas: N`,
split in order into one set per replica, or one list per replica. `gpus: []` runs on CPU. How much of each GPU the
models on it take: gpu_memory.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Finding, Model, State


def world_size(cmd: ServeCommand, nodes: int = 1) -> int:
    """The GPUs one host gives the model: tensor x pipeline x data parallel size, over its `nodes:` (nodes.py checks
    that they divide)."""
    size = 1
    for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"):
        size *= int(cmd.value(flag) or 1)
    return size // nodes


def gpu_count(name: str, cmd: ServeCommand, gpus: list[int], nodes: int = 1) -> list[Finding]:
    if len(set(gpus)) != len(gpus):
        return [((name, "gpus"), f"gpus {gpus} lists a GPU twice")]
    size = world_size(cmd, nodes)
    if gpus and size != len(gpus):
        return [
            (
                (name, "gpus"),
                f"{len(gpus)} GPU(s) {gpus} but tensor x pipeline x data parallel size is {size}; "
                f"give exactly {size} GPU(s) or change --tensor-parallel-size/--pipeline-parallel-size",
            )
        ]
    return []


def replica_gpus(
    name: str, cmd: ServeCommand, gpus: list[int] | list[list[int]], replicas: int, nodes: int = 1
) -> tuple[list[tuple[int, ...]], list[Finding]]:
    """Each replica's GPUs: `gpus` split in order into chunks of tensor x pipeline x data parallel size, or one
    list per replica; every replica's list then passes gpu_count. [] (CPU): `replicas` processes, no GPU."""
    nested = bool(gpus) and isinstance(gpus[0], list)
    # the schema takes either GPUs or lists of them, never both: one of these two is `gpus`, the other empty
    lists = [g for g in gpus if isinstance(g, list)]
    flat = [g for g in gpus if not isinstance(g, list)]
    if nested:
        if len(gpus) != replicas:
            fix = (
                f"set replicas: {len(gpus)}"
                if replicas == 1
                else f"give {replicas} lists (one per replica) or set replicas: {len(gpus)}"
            )
            return [], [((name, "gpus"), f"gpus gives {len(gpus)} list(s) of GPUs for replicas: {replicas}; {fix}")]
        sets = [tuple(g) for g in lists]
    elif not flat or replicas == 1:
        sets = [tuple(flat)] * replicas
    else:
        size = world_size(cmd)
        if len(set(flat)) != len(flat):
            return [], [((name, "gpus"), f"gpus {flat} lists a GPU twice")]
        if len(flat) != replicas * size:
            return [], [
                (
                    (name, "gpus"),
                    f"{len(flat)} GPU(s) {flat} do not split into {replicas} replicas of {size} GPU(s) each "
                    f"(tensor x pipeline x data parallel size {size}): give {replicas * size} GPUs, one list "
                    f"per replica (e.g. gpus: [[0, 1], [2, 3]]), or change replicas",
                )
            ]
        sets = [tuple(flat[i * size : (i + 1) * size]) for i in range(replicas)]
    findings: list[Finding] = []
    for i, chunk in enumerate(sets):
        for path, msg in gpu_count(name, cmd, list(chunk), nodes):
            findings.append(((name, "gpus", i) if nested else path, f"replica {i + 1}: {msg}" if replicas > 1 else msg))
    return sets, findings


def place(s: State, m: Model) -> None:
    """Each replica's GPUs (on a model with `nodes:`, each node's); a model whose GPUs do not split stops here."""
    nodes = m.entry.nodes.size if m.entry.nodes else 1
    m.gpu_sets, found = replica_gpus(m.name, m.cmd, m.entry.gpus, m.entry.copies, nodes)
    s.findings += found
    if not m.gpu_sets:
        m.stopped = True

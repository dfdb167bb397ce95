"""models.yml `replicas: N`: each model's backend names (<model>-1..N past one replica), names that collide or run
past a host name's length, and what one copy per model assumes (a fixed --port, on-demand loading). Each replica's
GPUs are gpus.py's; its port ports.py's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Finding, Model, State


def replica_names(models: dict[str, int]) -> tuple[dict[str, list[str]], list[Finding]]:
    """Each model's backend names (<model>-1..N past one replica; the model's own name for one), and the names
    that collide with another model or run past a DNS label's 63 characters."""
    names = {model: [model] if n == 1 else [f"{model}-{i}" for i in range(1, n + 1)] for model, n in models.items()}
    findings: list[Finding] = []
    for model, n in models.items():
        if n == 1:
            continue
        for replica in names[model]:
            if replica in models:
                findings.append(
                    ((model, "replicas"), f"its replica {replica} has the name of another model; rename one of them")
                )
            elif len(replica) > 63:
                findings.append(
                    (
                        (model,),
                        f"its replica name {replica} is longer than 63 characters (a host "
                        f"name); shorten the model's name",
                    )
                )
    return names, findings


def replica_problems(name: str, replicas: int, cmd: ServeCommand, on_demand: bool) -> list[Finding]:
    """What one copy per model assumes: a fixed --port, on-demand loading."""
    if replicas == 1:
        return []
    findings: list[Finding] = []
    if cmd.value("--port"):
        findings.append(
            (
                (name, "command"),
                f"--port {cmd.value('--port')} would give all {replicas} replicas one "
                "port; remove it and use `port:` (replica i listens on port + i - 1) or "
                "leave the ports to the generator",
            )
        )
    if on_demand:
        findings.append(
            (
                (name, "replicas"),
                "on-demand models run one copy (the controller loads and unloads one "
                "backend per model); set replicas: 1 or remove on_demand",
            )
        )
    return findings


def name_backends(s: State) -> None:
    s.backend_names, found = replica_names({name: entry.copies for name, entry in s.file.models.items()})
    s.findings += found


def check(s: State, m: Model) -> None:
    ranged = not isinstance(m.entry.replicas, int)  # a range: autoscale.py says what its on_demand means
    s.findings += replica_problems(m.name, m.entry.copies, m.cmd, m.backends[-1].on_demand is not None and not ranged)

"""The backends' ports: the ones an entry sets (`port:` or --port), the ones the generator gives (from
FIRST_AUTO_PORT, past every port an entry sets and the gateway's), and that no two backends share one.
(The metrics' and the on-demand controller's ports are checked with their blocks: metrics.py, on_demand.py.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..plan import ModelPlan

if TYPE_CHECKING:
    from .state import Finding, Model, State

FIRST_AUTO_PORT = 8001


@dataclass
class Ports:
    """What the port concerns keep between models."""

    explicit: set[int] = field(default_factory=set)  # every port an entry sets (each replica's)
    next: int = FIRST_AUTO_PORT  # the next port to give, unless it is taken


def explicit(s: State, m: Model) -> None:
    """The port the entry sets, for each replica (`port:` and --port must agree): never given to another backend."""
    cmd, entry = m.cmd, m.entry
    port_flag = cmd.value("--port")
    if port_flag and entry.port and int(port_flag) != entry.port:
        s.findings.append(((m.name, "port"), f"port {entry.port} disagrees with --port {port_flag}; keep one"))
    port = int(port_flag) if port_flag else entry.port or None
    if port is not None:
        s.ports.explicit.update(port + i for i in range(entry.copies))


def assign(s: State, m: Model, replica: int) -> int:
    """The port of the model's backend number `replica` (1..N): --port, else `port:` + replica - 1, else the next
    free one."""
    port = int(m.cmd.value("--port") or 0) or (m.entry.port + replica - 1 if m.entry.port else 0)
    if not port:
        while s.ports.next in s.ports.explicit or s.ports.next == s.file.gateway.port:
            s.ports.next += 1
        port, s.ports.next = s.ports.next, s.ports.next + 1
    return port


def not_the_gateways(s: State, m: Model, plan: ModelPlan) -> None:
    if plan.port == s.file.gateway.port:
        s.findings.append(((m.name,), f"port {plan.port} is the gateway's port; pick another"))


def unique(models: list[ModelPlan]) -> list[Finding]:
    """Served names and ports: one per model (the replicas of one model share its served name)."""
    findings: list[Finding] = []
    for attr, label in (("served_name", "served model name"), ("port", "port")):
        seen: dict = {}
        for m in models:
            value = getattr(m, attr)
            if value in seen and (attr == "port" or seen[value].entry != m.entry):
                findings.append(
                    ((m.entry,), f"{label} {value!r} is already used by {seen[value].name}; make it unique")
                )
            seen.setdefault(value, m)
    return findings


def check(s: State) -> None:
    """No two backends share a served name (but a model's replicas) or a port."""
    s.findings += unique(s.backends)

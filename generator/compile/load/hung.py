"""models.yml `restart_when_hung`: how long a backend may stay hung before the stack restarts it (each backend's
ModelPlan.restart_when_hung, seconds; None: never).

Hung is what the gateway calls hung (gateway_hooks/backend_health.py): its port accepts connections, /health does
not answer. The gateway stops sending to it within seconds and lets it back the moment it answers again, so a
restart is never what gets a client answered: it only brings the copy back when it stays silent. Hence the default,
5 minutes: a restart is a whole model load (minutes on a GPU, the weights read again), and a stall that ends by
itself (the API server's event loop held by a huge prompt's tokenization, a long compile) must not cost one; a
minute is the least taken. The renderers turn it into compose's healthcheck (renderers/compose.py: the container
ends itself, its restart policy starts it) and a Kubernetes liveness probe (renderers/k8s/backend.py). On-demand
models have none: the controller kills a hung one at once and loads it again on the next request.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import Model, State

DEFAULT = 300.0  # seconds (the module docstring says why)
LEAST = 60.0  # a shorter wait restarts backends through stalls that end by themselves


def plan(s: State, m: Model) -> None:
    """Each backend of `m` gets its restart_when_hung (after backends.plan)."""
    given = m.entry.restart_when_hung
    on_demand = m.entry.on_demand not in (None, False)
    if given is not None and given > 0 and on_demand:
        s.findings.append(
            (
                (m.name, "restart_when_hung"),
                "an on-demand model's hung backend is killed by the on-demand controller within seconds and loaded "
                "again on the next request (docs/on-demand.md); remove restart_when_hung",
            )
        )
        return
    if given is not None and 0 < given < LEAST:
        s.findings.append(
            (
                (m.name, "restart_when_hung"),
                f"{given:g}s is too short: a stall that ends by itself would cost a whole model load; "
                f"give {LEAST / 60:g}m or more (the default is {DEFAULT / 60:g}m), or off",
            )
        )
        return
    seconds = None if on_demand or given == 0 else (given or DEFAULT)
    planned = {id(b): dataclasses.replace(b, restart_when_hung=seconds) for b in m.backends}
    m.backends[:] = planned.values()
    s.backends[:] = [planned.get(id(b), b) for b in s.backends]

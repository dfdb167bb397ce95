"""models.yml `replicas: {min, max}`: copies that follow the load (docs/replicas.md, "Copies that follow the load").

The model gets `max` backends, named and placed as `replicas: max` (replicas.py, gpus.py, ports.py). Copies 1..min
always run; every other copy is an on-demand backend (OnDemandPlan, unload: stop, idle: the range's `idle`) that the
on-demand controller starts when the model's queue grows and stops when the copy is idle; with min 0 the first copy
loads on the first request, as an on-demand model. Each backend carries the ScalePlan (the renderers: the controller's
config, Kubernetes' KEDA ScaledObjects).

A copy that starts with the load needs GPUs nobody else holds: its GPUs may be shared only with on-demand models of one
group, which it then joins (loading it first unloads that group's model: an idle on-demand model gives its GPUs to a
busy model's copies, and gets them back once the copy stopped).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..plan import ModelPlan, OnDemandPlan, ScalePlan
from .schema import ReplicaRange

if TYPE_CHECKING:
    from .state import Finding, Model, State


def range_problems(name: str, user_on_demand: bool) -> list[Finding]:
    """What a range rules out: the model's own `on_demand:` (the range decides when copies run)."""
    if user_on_demand:
        return [
            (
                (name, "on_demand"),
                "a model whose replicas is a range is started and stopped by its load: remove on_demand "
                "(replicas: {min: 0, max: N} loads the first copy on a request and unloads it when idle)",
            )
        ]
    return []


def scaled(backends: list[ModelPlan], r: ReplicaRange) -> list[ModelPlan]:
    """Each copy with the range; copies above min on demand (the controller starts and stops them)."""
    scale = ScalePlan(min=r.min, max=r.max, waiting=r.waiting, up_after=r.up_after, idle=r.idle)
    out = []
    for i, b in enumerate(backends, start=1):
        od = None if i <= r.min else OnDemandPlan(group=b.name, idle_timeout=r.idle, unload="stop")
        out.append(dataclasses.replace(b, scale=scale, on_demand=od))
    return out


def plan(s: State, m: Model) -> None:
    """The range of model `m` on each of its backends (after backends.plan and replicas.check)."""
    r = m.entry.replicas
    if not isinstance(r, ReplicaRange):
        return
    found = range_problems(m.name, "on_demand" in m.entry.model_fields_set and m.entry.on_demand is not None)
    s.findings += found
    if found:
        return
    new = scaled(m.backends, r)
    for old, b in zip(m.backends, new):
        s.backends[s.backends.index(old)] = b
    m.backends = new


def gpu_collisions(backends: list[ModelPlan]) -> tuple[dict[str, str], list[Finding]]:
    """Each by-load copy's group: its own, or the one on-demand group whose models share its GPUs; a copy whose GPUs
    an always-on backend, another model's copy or two groups hold is a finding naming both."""
    groups: dict[str, str] = {}
    findings: list[Finding] = []
    for copy in backends:
        if copy.scale is None or copy.on_demand is None or not copy.gpus:
            continue
        others = [b for b in backends if b.entry != copy.entry and set(b.gpus) & set(copy.gpus)]
        blocking = [b for b in others if b.on_demand is None or b.scale is not None]
        shared = sorted({b.on_demand.group for b in others if b.on_demand is not None and b.scale is None})
        if blocking:
            b = blocking[0]
            findings.append(
                (
                    (copy.entry, "gpus"),
                    f"copy {copy.name} (started with the load) would take GPU(s) "
                    f"{sorted(set(b.gpus) & set(copy.gpus))}, which {b.name} holds"
                    f"{'' if b.on_demand is None else ' (another model started with its load)'}: give {copy.entry}'s "
                    f"extra copies GPUs of their own, or put {b.entry} on demand (on_demand: {{group: ...}}) so they "
                    "take turns",
                )
            )
        elif len(shared) > 1:
            findings.append(
                (
                    (copy.entry, "gpus"),
                    f"copy {copy.name} shares GPUs with the on-demand groups {', '.join(shared)}: it can take turns "
                    "with one group only; put those models in one group or give the copy other GPUs",
                )
            )
        elif shared:
            groups[copy.name] = shared[0]
    return groups, findings


def share_gpus(s: State) -> None:
    """Copies started with the load join the on-demand group whose GPUs they take (before the memory rule, which
    reads the groups)."""
    groups, found = gpu_collisions(s.backends)
    s.findings += found
    for i, b in enumerate(s.backends):
        if b.name in groups and b.on_demand is not None:
            s.backends[i] = dataclasses.replace(b, on_demand=dataclasses.replace(b.on_demand, group=groups[b.name]))

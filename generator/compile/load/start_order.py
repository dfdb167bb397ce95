"""The start order (docs/rules.md, "GPUs shared by several models"): who must be healthy before each backend starts.
Models sharing a GPU start one after the other (file order), plus models.yml `start_after:`; no cycles; on-demand
models take part as their unload says."""

from __future__ import annotations

import dataclasses
import difflib
import graphlib
from typing import TYPE_CHECKING

from ..plan import ModelPlan

if TYPE_CHECKING:
    from .state import Finding, State


def start_order(
    models: list[ModelPlan], explicit: dict[str, list[str]], backends: dict[str, list[str]]
) -> tuple[dict[str, tuple[str, ...]], list[Finding]]:
    """Who must be healthy before each backend starts: the previous backend (file order) on every GPU it
    shares (vLLM instances profiling memory at the same time break each other), plus `start_after:`.

    `explicit`: each models.yml name's `start_after` as written (models.yml names); `backends`: each models.yml
    name's backends in file order (its replicas, or itself). Entries are checked against models.yml names, so a
    finding points at the entry's own index and names models; naming a replicated model waits for every replica,
    and a replica waits for what its model waits for.

    On-demand models are not started with the stack, so no always-on model waits for one: on each GPU the
    always-on models come first; `unload: sleep` models (compose starts them, the controller puts them to sleep)
    follow them; `unload: stop` models take no part (the controller starts them when a request comes)."""
    order = {b: i for i, b in enumerate(b for names in backends.values() for b in names)}
    owner = {b: name for name, names in backends.items() for b in names}
    deps: dict[str, set[str]] = {m.name: set() for m in models}
    on_demand = {m.entry for m in models if m.on_demand}
    last_on: dict[int, str] = {}
    chained = [m for m in models if not m.on_demand] + [
        m for m in models if m.on_demand and m.on_demand.unload == "sleep"
    ]
    for m in chained:
        for gpu in m.gpus:
            if gpu in last_on:
                deps[m.name].add(last_on[gpu])
            last_on[gpu] = m.name
    findings: list[Finding] = []
    for name, wanted in explicit.items():
        if name in on_demand and wanted:
            findings.append(
                (
                    (name, "start_after"),
                    f"{name} is on demand: the controller loads it when a request asks for it, after the "
                    "always-on models, so it has no start order; remove start_after",
                )
            )
            continue
        mine = [b for b in backends.get(name, ()) if b in deps]
        for i, other in enumerate(wanted):
            where = (name, "start_after", i)
            if other == name:
                findings.append((where, f"{name} cannot wait for itself; remove it from start_after"))
            elif other not in backends:
                if other in owner:
                    hint = (
                        f"{other} is a replica of {owner[other]}; write {owner[other]!r} "
                        f"(start_after waits for every replica)"
                    )
                elif close := difflib.get_close_matches(other, list(backends), n=1):
                    hint = f"did you mean {close[0]!r}?"
                else:
                    hint = f"models: {', '.join(backends)}"
                findings.append((where, f"unknown model {other!r}; {hint}"))
            elif other in on_demand:
                findings.append(
                    (
                        where,
                        f"{other} is on demand: it is not started with the stack, so {name} "
                        f"would wait for it; remove it from start_after (or make {other} always on)",
                    )
                )
            else:
                for backend in mine:
                    deps[backend].update(b for b in backends[other] if b in deps)
    try:
        tuple(graphlib.TopologicalSorter(deps).static_order())
    except graphlib.CycleError as exc:
        cycle = [owner.get(b, b) for b in exc.args[1]]
        cycle = [n for i, n in enumerate(cycle) if i == 0 or n != cycle[i - 1]]  # a model's replicas: one step
        findings.append(
            (
                (cycle[0], "start_after"),
                f"start order has a cycle: {' -> '.join(cycle)} (each waits for the next to be healthy, "
                "so none would ever start); remove one of these start_after entries",
            )
        )
    return {n: tuple(sorted(d, key=order.__getitem__)) for n, d in deps.items()}, findings


def order(s: State) -> None:
    """Each backend's start_after: a replica waits for what its model waits for; naming a replicated model waits for
    all its replicas."""
    explicit = {name: list(e.start_after) for name, e in s.file.models.items()}
    after, found = start_order(s.backends, explicit, s.backend_names)
    s.findings += found
    s.backends = [dataclasses.replace(m, start_after=after[m.name]) for m in s.backends]

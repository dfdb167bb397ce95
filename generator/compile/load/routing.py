"""models.yml `fallbacks:`, `context_fallbacks:`, `aliases:` and `list_aliases:` -> the plan's routes between models
(docs/routing.md). Every rule here is a finding naming the model and the field:

- a fallback names a model of this file (its models.yml name or its served name; else the closest names), not the
  model itself, each once;
- a fallback serves what its model serves: a chat model's fallback is a chat model, an embedding model's an
  embedding model (a reranker's a reranker);
- fallbacks form no cycle (a -> b -> a): LiteLLM follows a fallback's own fallbacks;
- context fallbacks are for chat models, and each has a larger context than its model (else it could not take
  what its model cannot);
- an alias is no model's name, served name, adapter's name or other alias: clients could not tell them apart.

Warnings (the stack still works): a fallback that takes no tools for a model that does (requests with tools skip it).
"""

from __future__ import annotations

import dataclasses
import difflib
import graphlib
from typing import TYPE_CHECKING

from ..plan import ModelPlan
from .schema import HostedEntry, ModelEntry
from .sizes import fmt_tokens

if TYPE_CHECKING:
    from .state import Finding, State


def served_names(models: list[ModelPlan]) -> dict[str, str]:
    """What a fallback may name -> the model's served name: its models.yml name and its served name."""
    return {m.entry: m.served_name for m in models} | {m.served_name: m.served_name for m in models}


def _targets(
    name: str, field: str, wanted: list[str], served: dict[str, str], own: str
) -> tuple[dict[str, int], list[Finding]]:
    """The served names `wanted` names, in order, each with its index in the field (where its findings point)."""
    chosen: dict[str, int] = {}
    findings: list[Finding] = []
    for i, target in enumerate(wanted):
        if target not in served:
            close = difflib.get_close_matches(target, list(served), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"the models are: {', '.join(sorted(served))}"
            findings.append(((name, field, i), f"{target!r} is not a model of this file; {hint}"))
        elif served[target] == own:
            findings.append(((name, field, i), f"{target!r} is this model itself; name another model"))
        elif served[target] in chosen:
            findings.append(((name, field, i), f"{target!r} is named twice; keep one"))
        else:
            chosen[served[target]] = i
    return chosen, findings


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _cycle(graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib gives it predecessor-first, the first node again last
    return None


def routes(
    entries: dict[str, ModelEntry | HostedEntry], models: list[ModelPlan]
) -> tuple[list[ModelPlan], list[Finding], list[str]]:
    """Each backend with its model's fallbacks, context fallbacks and aliases (served names); findings; warnings."""
    served = served_names(models)
    by_served = {m.served_name: m for m in models}  # a replicated model: any replica (they share all of this)
    findings: list[Finding] = []
    warnings: list[str] = []
    planned: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for name, entry in entries.items():
        own = served.get(name)
        if own is None:  # its plan was not built (a finding elsewhere says why)
            continue
        model = by_served[own]
        fallbacks, found = _targets(name, "fallbacks", entry.fallbacks, served, own)
        findings += found
        # a hosted model has none: its API is not asked to count a prompt (max_tokens_clamp.py)
        wanted = getattr(entry, "context_fallbacks", [])
        context_fallbacks, found = _targets(name, "context_fallbacks", wanted, served, own)
        findings += found
        for target, i in fallbacks.items():
            other = by_served[target]
            if other.kind != model.kind:
                findings.append(
                    (
                        (name, "fallbacks", i),
                        f"{target} is {_a(other.kind)} model and {name} {_a(model.kind)} model: a fallback must "
                        "serve the same kind of request",
                    )
                )
            elif model.takes_tools and not other.takes_tools:
                warnings.append(f"{name}.fallbacks: {target} takes no tools: requests with tools skip it")
        if context_fallbacks and model.pooling:
            findings.append(
                (
                    (name, "context_fallbacks"),
                    f"{name} is {_a(model.kind)} model: context fallbacks are for chat models (a prompt over an "
                    "embedding model's context is cut or refused by the model)",
                )
            )
        for target, i in context_fallbacks.items():
            other = by_served[target]
            if other.pooling:
                findings.append(
                    ((name, "context_fallbacks", i), f"{target} is {_a(other.kind)} model, not a chat model")
                )
            elif other.context <= model.context:
                findings.append(
                    (
                        (name, "context_fallbacks", i),
                        f"{target} holds {fmt_tokens(other.context)} tokens, not more than {name}'s "
                        f"{fmt_tokens(model.context)}: a context fallback must have a larger context",
                    )
                )
        planned[own] = (tuple(fallbacks), tuple(context_fallbacks))
    cycle = _cycle({own: fb for own, (fb, _) in planned.items()})
    if cycle:
        first = next(m.entry for m in models if m.served_name == cycle[0])
        findings.append(((first, "fallbacks"), f"fallbacks go round in a cycle: {' -> '.join(cycle)}; break it"))
    aliases, found = _aliases(entries, models)
    findings += found
    out = [
        dataclasses.replace(
            m,
            fallbacks=planned.get(m.served_name, ((), ()))[0],
            context_fallbacks=planned.get(m.served_name, ((), ()))[1],
            aliases=aliases.get(m.entry, ()),
            list_aliases=entries[m.entry].list_aliases if m.entry in entries else False,
        )
        for m in models
    ]
    return out, findings, warnings


def _aliases(
    entries: dict[str, ModelEntry | HostedEntry], models: list[ModelPlan]
) -> tuple[dict[str, tuple[str, ...]], list[Finding]]:
    taken = (
        {m.served_name: f"the served name of {m.entry}" for m in models}
        | {m.entry: f"the model {m.entry}" for m in models}
        | {a.name: f"an adapter of {m.entry}" for m in models for a in m.adapters}
    )
    findings: list[Finding] = []
    out: dict[str, tuple[str, ...]] = {}
    for name, entry in entries.items():
        mine: list[str] = []
        for i, alias in enumerate(entry.aliases):
            if alias in taken:
                findings.append(
                    (
                        (name, "aliases", i),
                        f"alias {alias!r} is already {taken[alias]}; clients could not tell them apart: rename it",
                    )
                )
                continue
            taken[alias] = f"an alias of {name}"
            mine.append(alias)
        out[name] = tuple(mine)
    return out, findings


def route(s: State) -> None:
    """Every backend and hosted model with its routes."""
    routed, found, warned = routes({**s.file.models, **s.file.hosted}, [*s.backends, *s.hosted])
    s.backends, s.hosted = routed[: len(s.backends)], routed[len(s.backends) :]
    s.findings += found
    s.warnings += warned

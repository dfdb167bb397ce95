"""models.yml `people:` (docs/keys.md): one PersonPlan each, its `models:` names resolved to served names (a
models.yml name, served name, adapter or alias; a name that is none of them is a finding with the closest names).
Whether the stack runs a Redis for their counters is loader.needs_redis's to decide."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plan import ModelPlan, PersonPlan
from .schema import ModelsFile, Person

if TYPE_CHECKING:
    from .state import Finding, State


def _people_plan(file: ModelsFile, models: list[ModelPlan]) -> tuple[tuple[PersonPlan, ...], list[Finding]]:
    """models.yml `people:` -> PersonPlans; a model name that is neither a models.yml name nor a served name is a
    finding with the closest names."""
    import difflib

    served = (
        {m.name: m.served_name for m in models}
        | {m.served_name: m.served_name for m in models}
        | {a.name: a.name for m in models for a in m.adapters}
        | {alias: m.served_name for m in models for alias in m.aliases}
    )
    people, findings = [], []
    for name, entry in file.people.items():
        entry = entry or Person()
        allowed: tuple[str, ...] | None = None
        if entry.models is not None:
            chosen: list[str] = []
            for i, model in enumerate(entry.models):
                if model in served:
                    chosen.append(served[model])
                    continue
                close = difflib.get_close_matches(model, list(served), n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"the models are: {', '.join(sorted(served))}"
                findings.append((("people", name, "models", i), f"{model!r} is not a model of this file; {hint}"))
            allowed = tuple(dict.fromkeys(chosen))
        people.append(
            PersonPlan(
                name=name,
                models=allowed,
                rpm=entry.rpm,
                tpm=entry.tpm,
                parallel=entry.parallel,
                tokens_per_day=entry.tokens_per_day,
                tokens_per_month=entry.tokens_per_month,
                stored_responses=entry.stored_responses,
                description=entry.description.strip(),
            )
        )
    return tuple(people), findings


def plan(s: State) -> tuple[PersonPlan, ...]:
    """Everyone's plan, with every model and hosted model to choose from; a finding stops the plan here."""
    people, found = _people_plan(s.file, [*s.backends, *s.hosted])
    s.findings += found
    s.stop_on_findings()
    return people

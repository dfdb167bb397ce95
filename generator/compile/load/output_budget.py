"""A chat model's output budget: `litellm.max_tokens` (the model's, else defaults'), which must be below the context
(the prompt needs room), else half the context. The gateway's clamp keeps every request's below it too. A pooling
model has none (pooling.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .pooling import CHAT
from .sizes import fmt_tokens

if TYPE_CHECKING:
    from .state import Finding, Model, State


def max_tokens_for(name: str, requested: int | None, context: int) -> tuple[int, bool, list[Finding]]:
    """Per-model max_tokens: below the context (the prompt needs room), else half of it."""
    if requested is None:
        return max(1, context // 2), True, []
    if requested >= context:
        return (
            requested,
            False,
            [
                (
                    (name, "litellm", "max_tokens"),
                    f"max_tokens {fmt_tokens(requested)} is not below --max-model-len "
                    f"{fmt_tokens(context)}: every request would ask for the whole context or "
                    f"more and the prompt would not fit; set max_tokens to at most "
                    f"{fmt_tokens(context // 2)} (half the context) or raise --max-model-len",
                )
            ],
        )
    return requested, False, []


def plan(s: State, m: Model) -> None:
    if m.kind.kind == CHAT:  # a pooling model generates no text: no output budget, no sampling defaults
        requested = m.entry.litellm.max_tokens or s.file.defaults.litellm.max_tokens
        m.max_tokens, m.max_tokens_derived, found = max_tokens_for(m.name, requested, m.context)
        s.findings += found

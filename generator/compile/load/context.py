"""A model's context (the tokens of prompt and answer together): --max-model-len, else `context_length:` (they must
agree), else what vLLM derives from the model's config (fit.config_context); never unknown. And the warning for a
context above what the model's config allows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import fit
from .sizes import fmt_tokens, parse_size
from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Finding, Model, State


def context_of(
    name: str, cmd: ServeCommand, context_length: int | None, derived: tuple[int, str] | None = None, unknown: str = ""
) -> tuple[int | None, str, list[Finding]]:
    """The model's context: --max-model-len, else `context_length:`, else what vLLM derives from the model's
    config (`derived`: tokens and where from; `unknown`: why there is none). Never unknown.
    Returns (context, where it came from when derived, else "", problems)."""
    raw = cmd.value("--max-model-len")
    flag_len = None if raw is None or raw.strip().lower() in ("auto", "-1") else parse_size(raw)
    if flag_len is not None and context_length is not None and flag_len != context_length:
        return (
            None,
            "",
            [
                (
                    (name, "context_length"),
                    f"context_length {fmt_tokens(context_length)} disagrees with --max-model-len "
                    f"{fmt_tokens(flag_len)}; keep one of them",
                )
            ],
        )
    context = flag_len or context_length
    if context is not None:
        return context, "", []
    if derived is not None:
        return derived[0], derived[1], []
    why = "is `auto`" if raw is not None else "is missing"
    return (
        None,
        "",
        [
            (
                (name, "command"),
                f"--max-model-len {why}, so the context (and a safe max_tokens) is unknown"
                + (f", and the model's config gives none ({unknown})" if unknown else "")
                + "; add `--max-model-len 16K` to the command or `context_length: 16K` to the entry",
            )
        ],
    )


def context_above_model(
    name: str, cmd: ServeCommand, context: int, derived: tuple[int, str] | None, env: dict[str, str]
) -> list[str]:
    """Warnings: a context above what the model's config allows (vLLM refuses it, or serves less)."""
    if derived is None or context <= derived[0]:
        return []
    raw = cmd.value("--max-model-len")
    if raw is not None and raw.strip().lower() not in ("auto", "-1"):
        if str(env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")).lower() in ("1", "true"):
            return []
        return [
            f"{name}: --max-model-len {fmt_tokens(context)} is above the model's {fmt_tokens(derived[0])} "
            f"({derived[1]}): vLLM refuses to start unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is in its env"
        ]
    return [
        f"{name}: context_length {fmt_tokens(context)} is above the model's {fmt_tokens(derived[0])} "
        f"({derived[1]}), which is all vLLM will serve; lower context_length to it"
    ]


def resolve(s: State, m: Model) -> None:
    """The model's context and where it came from; a model without one stops here (its finding says why)."""
    cmd, meta = m.cmd, m.meta
    derived = fit.config_context(meta.config, meta.tokenizer_max) if meta.config is not None else None
    unknown = (
        meta.missing
        if meta.config is None
        else (f"its config.json has none of {', '.join(fit.MAX_LEN_KEYS[:3])}, ...; vLLM would assume 2048")
    )
    context, context_from, found = context_of(m.name, cmd, m.entry.context_length, derived, unknown)
    s.findings += found
    if context is None:
        m.stopped = True
        return
    auto = (cmd.value("--max-model-len") or "").strip().lower() in ("auto", "-1")
    if context_from:
        context_from += f"; {meta.label}" + (
            "; with --max-model-len auto vLLM takes this when it fits, else less" if auto else ""
        )
    m.config_context, m.context, m.context_from, m.auto_context = derived, context, context_from, auto


def warn(s: State, m: Model) -> None:
    s.warnings += context_above_model(m.name, m.cmd, m.context, m.config_context, m.backends[-1].env)

"""Each model's `vllm serve` command: parsed against the pinned vLLM's flag catalog (vllm_command.py; a command that
does not parse is a problem and stops the model), and what its flags risk (--trust-remote-code: a warning)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import Problem
from .vllm_command import FlagError, parse_serve_command

if TYPE_CHECKING:
    from .state import Model, State


def parse(s: State, m: Model) -> None:
    try:
        m.command = parse_serve_command(m.entry.command, s.catalog)
    except FlagError as exc:
        what = f"{m.name}.command" + (f" {exc.flag}" if exc.flag else "")
        s.problems.append(Problem(s.src.where((m.name, "command")), what, str(exc)))
        m.stopped = True


def warn(s: State, m: Model) -> None:
    if m.cmd.enabled("--trust-remote-code"):
        s.warnings.append(
            f"{m.name}: --trust-remote-code runs Python code shipped with {m.cmd.model}; "
            "only keep it for repositories you trust"
        )

"""Tool calls: --enable-auto-tool-choice needs a --tool-call-parser (vLLM refuses to start without one); a parser
without auto tool choice is a warning (vLLM refuses tool_choice=auto, the OpenAI default). Which parsers the pinned
vLLM gets wrong: parser_support.py; the repaired ones a backend loads: parser_repairs.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Finding, Model, State


def tool_flags(name: str, cmd: ServeCommand) -> tuple[list[Finding], list[str]]:
    errors, warnings = [], []
    parser = cmd.value("--tool-call-parser")
    if cmd.enabled("--enable-auto-tool-choice") and not parser:
        errors.append(
            (
                (name, "command"),
                "--enable-auto-tool-choice needs --tool-call-parser (e.g. hermes, glm47, qwen3_coder); "
                "without it vLLM refuses to start",
            )
        )
    if parser and not cmd.enabled("--enable-auto-tool-choice"):
        warnings.append(
            f"{name}: --tool-call-parser {parser} without --enable-auto-tool-choice: "
            "requests with tool_choice=auto (the OpenAI default) will be refused by vLLM"
        )
    return errors, warnings


def check(s: State, m: Model) -> None:
    found, warned = tool_flags(m.name, m.cmd)
    s.findings += found
    s.warnings += warned

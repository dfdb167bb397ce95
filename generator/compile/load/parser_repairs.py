"""Which backends run the stack's repaired vLLM parsers (generator/shipped/parser_repairs/), and the flags loading them.

A backend whose tool-call parser (with --enable-auto-tool-choice: vLLM runs it only then) or reasoning parser is one
the pinned vLLM gets wrong (`repairs_for`) gets `--tool-parser-plugin` and/or `--reasoning-parser-plugin` PLUGIN_PATH
after its flags; the plugin re-registers the repaired classes under the upstream names, so the command's own
--tool-call-parser / --reasoning-parser stay. ModelPlan.parser_repairs names the parsers it runs repaired: the
renderers put the folder at MOUNT for it (compose: ../parser-repairs mounted read-only; Kubernetes: a ConfigMap; the
local runtime maps MOUNT to its own copy), and the summary says why.

A command that passes a plugin flag of its own keeps it: that repair is left out, with a warning. The plugin registers
every repair and vLLM imports the tool plugin before the reasoning one, so ours as the reasoning plugin would replace
the tool parser a plugin of the command's own gave: a repaired reasoning parser is then left out too.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ...shipped.parser_repairs import PLUGIN, Repair, repairs_for
from ..plan import ModelPlan
from .parser_support import VLLM_VERSION
from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import State

MOUNT = "/opt/parser-repairs"  # where a backend finds the folder: the same path in compose and Kubernetes
PLUGIN_PATH = f"{MOUNT}/{PLUGIN}"
TOOL_PLUGIN = "--tool-parser-plugin"


def repairs_of(m: ModelPlan) -> list[Repair]:
    """The repairs backend `m`'s parsers call for, tool-call first (a tool parser counts only with auto tool choice)."""
    return repairs_for(m.tool_parser if m.auto_tool_choice else None, m.reasoning_parser)


def run_by(m: ModelPlan) -> list[Repair]:
    """The repairs backend `m` runs (ModelPlan.parser_repairs), as records."""
    return [r for r in repairs_of(m) if r.parser in m.parser_repairs]


def _kept_out_by(r: Repair, cmd: ServeCommand, wanted: list[Repair]) -> str:
    """The command's own plugin flag that keeps repair `r` out ("": none)."""
    if cmd.last(r.plugin_flag) is not None:
        return r.plugin_flag
    if r.kind == "reasoning" and cmd.last(TOOL_PLUGIN) is not None and any(w.kind == "tool-call" for w in wanted):
        return TOOL_PLUGIN  # ours, imported after it, would register the repaired tool parser over the one it gives
    return ""


def with_repairs(models: list[ModelPlan], commands: dict[str, ServeCommand]) -> tuple[list[ModelPlan], list[str]]:
    """Every backend with the plugin flags and parser_repairs of the repairs it runs (replicas and on-demand backends
    alike: they are backends); a warning per model whose command keeps a repair out with a plugin flag of its own."""
    planned, warnings = [], {}
    for m in models:
        cmd, wanted = commands[m.entry], repairs_of(m)
        run, flags = [], []
        for r in wanted:
            if own := _kept_out_by(r, cmd, wanted):
                repair = f"the stack's repair of vLLM {VLLM_VERSION}'s {r.parser} {r.kind} parser ({r.why})"
                warnings[(m.entry, r.kind)] = f"{m.entry}: the command's own {own} {cmd.value(own)} " + (
                    f"replaces {repair}"
                    if own == r.plugin_flag
                    else f"keeps out {repair} too: the stack's plugin, loaded after it, would replace its tool parser"
                )
                continue
            run.append(r.parser)
            flags += [r.plugin_flag, PLUGIN_PATH]
        planned.append(dataclasses.replace(m, flag_args=(*m.flag_args, *flags), parser_repairs=tuple(run)))
    return planned, list(warnings.values())


def apply(s: State) -> None:
    """The stack's repaired vLLM parsers, on every backend that runs one."""
    s.backends, warned = with_repairs(s.backends, s.commands())
    s.warnings += warned

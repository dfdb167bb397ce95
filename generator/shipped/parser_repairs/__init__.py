"""Repaired vLLM parsers, shipped to the backends whose models name a parser the pinned vLLM gets wrong.

vLLM loads `vllm_parser_repairs.py` as a parser plugin (--tool-parser-plugin, --reasoning-parser-plugin); it
registers one repaired_*.py module per repair under the upstream parser's name. The renderers copy this folder
into the stack (compose: mounted read-only into the backend; Kubernetes: a ConfigMap; the local runtime: the
generated parser-repairs/ folder) and add the plugin flags to the models that need them. REPAIRS is plain data the
compiler reads (which parser, which flag, why); nothing here imports vLLM until `load()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLUGIN = "vllm_parser_repairs.py"  # the file vLLM imports; it imports the rest by plain name


@dataclass(frozen=True)
class Repair:
    kind: str  # "tool-call" | "reasoning": which of the model's parsers
    parser: str  # the upstream name models.yml passes (--tool-call-parser / --reasoning-parser)
    module: str  # the repaired_*.py module beside this file
    why: str  # what the upstream parser gets wrong, in a few words (make regenerate's summary)

    @property
    def plugin_flag(self) -> str:
        return "--tool-parser-plugin" if self.kind == "tool-call" else "--reasoning-parser-plugin"


_MULTI = "calls cut or lost when several tokens arrive in one streamed delta"
REPAIRS: tuple[Repair, ...] = (
    Repair("tool-call", "deepseek_v3", "repaired_deepseek_v3", _MULTI),
    Repair("tool-call", "deepseek_v31", "repaired_deepseek_v31", _MULTI),
    Repair("tool-call", "llama3_json", "repaired_llama3_json", _MULTI + '; a call without arguments streamed as ""'),
    Repair("tool-call", "llama4_json", "repaired_llama3_json", _MULTI + '; a call without arguments streamed as ""'),
    Repair("reasoning", "deepseek_r1", "repaired_deepseek_r1", "<think> streamed into the reasoning"),
    Repair("reasoning", "kimi_k2", "repaired_kimi_k2", "a turn after a tool result streams its reasoning as text"),
)


def repairs_for(tool_parser: str | None, reasoning_parser: str | None) -> list[Repair]:
    """The repairs a model with these parsers runs, tool-call first."""
    return [r for r in REPAIRS if (tool_parser if r.kind == "tool-call" else reasoning_parser) == r.parser]


def files() -> dict[str, str]:
    """This folder's modules, by file name, as the renderers copy them (this file excluded: vLLM never reads it)."""
    return {p.name: p.read_text() for p in sorted(HERE.glob("*.py")) if p.name != "__init__.py"}


def load() -> None:
    """Register the repairs in this process as vLLM's launcher does with the plugin flags (the parser fuzz)."""
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    ToolParserManager.import_tool_parser(str(HERE / PLUGIN))
    ReasoningParserManager.import_reasoning_parser(str(HERE / PLUGIN))

"""The tool-call and reasoning wire formats our users' models speak, one module per family.

Each module defines FAMILY, a `Family` record: the marker strings (added tokens, special or not, as the family's
real tokenizer has them), the chat template (written here from the family's published template: how tools, tool
results and reasoning history are rendered) and `render`, the text the model emits for a conformance turn
(generator/demo/conformance.py) in its format. family_model.py builds a tiny model from it that vLLM serves with
the family's parsers; the script player (script_player.py) makes it say exactly that text.
No dependencies (vLLM's interpreter and the tests import it).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..conformance import Turn


@dataclass(frozen=True)
class Family:
    name: str  # the model folder (.cache/demo-models/family-<name>) and its served name
    title: str  # "GLM-4.7"
    tool_parser: str  # vLLM --tool-call-parser
    reasoning_parser: str | None  # vLLM --reasoning-parser; None: the format has no reasoning
    special_tokens: tuple[str, ...]  # added tokens marked special (dropped from decoded text, seen by id)
    added_tokens: tuple[str, ...]  # added tokens not special (markers the real tokenizer has as one token)
    eos: str  # the token that ends a turn (config eos_token_id)
    chat_template: str
    tool_result_opener: str  # prompt text that opens a tool result (the player answers `after-tool` past it)
    user_opener: str  # prompt text that opens a user turn
    render: Callable[[Turn], str]  # what the model emits for a turn, up to and with its end token
    stop_tokens: tuple[str, ...] = ()  # more tokens that end generation (generation_config eos_token_id)
    bos: str | None = None
    extra_flags: tuple[str, ...] = ()  # more `vllm serve` flags the family needs
    source: str = ""  # where the facts come from (template, parser source)
    notes: tuple[str, ...] = field(default_factory=tuple)  # what cannot run here, and why
    # a family whose real vocabulary vLLM needs (gpt-oss: harmony renders the prompt itself) builds its own files:
    # name -> bytes, scripts.json included (family_model.scripts_json); None: the scripted BPE and a 1-layer Llama
    files: Callable[[Family], dict[str, bytes]] | None = None

    thinks: bool = True  # False: the reasoning parser is served but the scripts are non-thinking turns
    parallel_calls: bool = True  # False: one call per turn (gpt-oss: <|call|> ends the generation)

    @property
    def has_reasoning(self) -> bool:
        """Whether the family's scripts reason (conformance.scripts_for)."""
        return self.reasoning_parser is not None and self.thinks


def names() -> list[str]:
    """Every family: the modules of this folder, by name."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def family(name: str) -> Family:
    return importlib.import_module(f"{__name__}.{name}").FAMILY


def families() -> list[Family]:
    return [family(n) for n in names()]


def tojson(value: Any) -> str:
    """JSON as the families' templates write it (ensure_ascii off, ', ' and ': ' separators)."""
    return json.dumps(value, ensure_ascii=False)

"""kimi_k2 reasoning (Kimi-K2-Thinking), repaired: an earlier turn's </think> in the prompt does not end this turn's
reasoning.

vLLM decides from the prompt whether the turn it generates starts inside reasoning: its parser engine walks the
prompt back from the end and stops at the first reasoning marker, or at a turn boundary where the engine config
names them (GLM-4.7's does). kimi_k2's config names none, so after a tool result the walk reaches the assistant
turn before it, finds its </think>, and takes this turn's reasoning as already over: the new <think> block is
streamed as answer text. Here the config names Kimi's turn openers as boundaries; nothing else changes.
"""

from __future__ import annotations

import dataclasses
import functools

from vllm.parser.engine.adapters import make_adapters
from vllm.parser.kimi_k2 import KimiK2Parser, kimi_k2_config
from vllm.reasoning import ReasoningParserManager

KIMI_TURNS = frozenset(("<|im_system|>", "<|im_user|>", "<|im_assistant|>"))


@functools.cache
def repaired_config(thinking: bool = True):
    return dataclasses.replace(kimi_k2_config(thinking), turn_boundary_tokens=KIMI_TURNS)


class RepairedKimiK2Parser(KimiK2Parser):
    def __init__(self, tokenizer, tools=None, **kwargs):
        chat = kwargs.get("chat_template_kwargs", {}) or {}
        thinking, enable = chat.get("thinking"), chat.get("enable_thinking")
        on = True if thinking is None and enable is None else bool(thinking) or bool(enable)  # as KimiK2Parser
        kwargs.setdefault("parser_engine_config", repaired_config(thinking=on))
        super().__init__(tokenizer, tools, **kwargs)


RepairedKimiK2ReasoningParser, _ = make_adapters(RepairedKimiK2Parser)
ReasoningParserManager.register_module("kimi_k2", force=True, module=RepairedKimiK2ReasoningParser)

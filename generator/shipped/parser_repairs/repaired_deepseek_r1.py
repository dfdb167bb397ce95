"""deepseek_r1 reasoning (DeepSeek-R1, R1-0528), repaired: the opening <think> never reaches the reasoning.

Upstream's `BaseThinkingReasoningParser.extract_reasoning_streaming` strips <think> when it arrives alone, or in one
delta with </think>; when it arrives with more reasoning but not </think> (several tokens per delta: the first delta
of every such turn), the whole delta, <think> included, is sent as reasoning. Here that one case sends what follows
<think>; every other case is upstream's.
"""

from __future__ import annotations

from vllm.entrypoints.generate.base.protocol import DeltaMessage
from vllm.reasoning import ReasoningParserManager
from vllm.reasoning.deepseek_r1_reasoning_parser import DeepSeekR1ReasoningParser


class RepairedDeepSeekR1ReasoningParser(DeepSeekR1ReasoningParser):
    def extract_reasoning_streaming(
        self,
        previous_text,
        current_text,
        delta_text,
        previous_token_ids,
        current_token_ids,
        delta_token_ids,
    ):
        if (
            len(delta_token_ids) > 1
            and self.start_token_id in delta_token_ids
            and self.start_token_id not in previous_token_ids
            and self.end_token_id not in delta_token_ids
            and self.start_token in delta_text
        ):
            reasoning = delta_text.partition(self.start_token)[2]
            return DeltaMessage(reasoning=reasoning) if reasoning else None
        return super().extract_reasoning_streaming(
            previous_text, current_text, delta_text, previous_token_ids, current_token_ids, delta_token_ids
        )


ReasoningParserManager.register_module("deepseek_r1", force=True, module=RepairedDeepSeekR1ReasoningParser)

"""deepseek_v31 (DeepSeek-V3.1), repaired: streamed calls as a diff of the text so far (repaired_calls.py).

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGUMENTS<｜tool▁call▁end｜>...

Upstream's whole-answer parsing is kept; only `extract_tool_calls_streaming` is replaced. A call's name is known at
<｜tool▁sep｜>, its arguments are the text after it (the end marker is one token: no tail to hold back).
"""

from __future__ import annotations

from repaired_calls import Progress
from repaired_deepseek_v3 import DeepSeekCalls
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager
from vllm.tool_parsers.deepseekv31_tool_parser import DeepSeekV31ToolParser


class RepairedDeepSeekV31ToolParser(DeepSeekCalls, DeepSeekV31ToolParser):
    def call_progress(self, call: str) -> Progress:
        """What the text of one call (after its begin marker) shows so far."""
        whole = self.tool_call_regex.match(self.tool_call_start_token + call)
        if whole:
            return Progress(whole.group("function_name"), whole.group("function_arguments"), done=True)
        name, sep, arguments = call.partition("<｜tool▁sep｜>")
        return Progress(name, arguments) if sep else Progress(None)


ToolParserManager.register_module("deepseek_v31", force=True, module=RepairedDeepSeekV31ToolParser)

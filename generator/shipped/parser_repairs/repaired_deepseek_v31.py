"""deepseek_v31 (DeepSeek-V3.1), repaired: streamed calls as a diff of the text so far (repaired_calls.py).

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGUMENTS<｜tool▁call▁end｜>...

Upstream's whole-answer parsing is kept; only `extract_tool_calls_streaming` is replaced. A call's name is known at
<｜tool▁sep｜>, its arguments are the text after it (the end marker is one token: no tail to hold back).
"""

from __future__ import annotations

from repaired_calls import CallStream, Progress
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager
from vllm.tool_parsers.deepseekv31_tool_parser import DeepSeekV31ToolParser


class RepairedDeepSeekV31ToolParser(DeepSeekV31ToolParser):
    def call_progress(self, call: str) -> Progress:
        whole = self.tool_call_regex.match(self.tool_call_start_token + call)
        if whole:
            return Progress(whole.group("function_name"), whole.group("function_arguments"), done=True)
        name, sep, arguments = call.partition("<｜tool▁sep｜>")
        return Progress(name, arguments) if sep else Progress(None)

    def extract_tool_calls_streaming(
        self,
        previous_text,
        current_text,
        delta_text,
        previous_token_ids,
        current_token_ids,
        delta_token_ids,
        request,
    ):
        stream = self.__dict__.setdefault("_stream", CallStream(self))
        content, begun, calls = current_text.partition(self.tool_calls_start_token)
        parts = calls.split(self.tool_call_start_token)[1:] if begun else []
        return stream.delta(content, [self.call_progress(p) for p in parts])


ToolParserManager.register_module("deepseek_v31", force=True, module=RepairedDeepSeekV31ToolParser)

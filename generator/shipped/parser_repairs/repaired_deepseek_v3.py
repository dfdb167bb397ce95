"""deepseek_v3 (DeepSeek-V3, R1, R1-0528), repaired: streamed calls as a diff of the text so far (repaired_calls.py).

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGUMENTS\\n```<｜tool▁call▁end｜>...

Upstream's whole-answer parsing (`extract_tool_calls`, its regex) is kept; `extract_tool_calls_streaming` is
replaced (repaired_calls.DiffStreaming). What a delta shows of a call: its name once the line after <｜tool▁sep｜>
has ended, its arguments as far as they go, less a tail that may be the start of the closing fence. DeepSeekCalls
(the answer's layout) serves V3.1 too.
"""

from __future__ import annotations

from repaired_calls import DiffStreaming, Progress
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager
from vllm.tool_parsers.deepseekv3_tool_parser import DeepSeekV3ToolParser

FENCE = "\n```json\n"
CLOSE = "\n```"


def held_back(arguments: str, close: str) -> str:
    """`arguments` without a tail that could be the start of `close` (sent once the next delta shows it is not)."""
    for k in range(min(len(close), len(arguments)), 0, -1):
        if arguments.endswith(close[:k]):
            return arguments[:-k]
    return arguments


class DeepSeekCalls(DiffStreaming):
    """The calls of a DeepSeek answer: content, then <｜tool▁calls▁begin｜> and one <｜tool▁call▁begin｜> per call."""

    def progress(self, text: str) -> tuple[str, list[Progress]]:
        content, begun, calls = text.partition(self.tool_calls_start_token)
        parts = calls.split(self.tool_call_start_token)[1:] if begun else []
        return content, [self.call_progress(p) for p in parts]


class RepairedDeepSeekV3ToolParser(DeepSeekCalls, DeepSeekV3ToolParser):
    def call_progress(self, call: str) -> Progress:
        """What the text of one call (after its begin marker) shows so far."""
        whole = self.tool_call_regex.match(self.tool_call_start_token + call)
        if whole:
            return Progress(whole.group("function_name"), whole.group("function_arguments"), done=True)
        _, sep, rest = call.partition("<｜tool▁sep｜>")
        name, fence, arguments = rest.partition(FENCE)
        if not sep or not fence:
            return Progress(None)
        return Progress(name, held_back(arguments, CLOSE))


ToolParserManager.register_module("deepseek_v3", force=True, module=RepairedDeepSeekV3ToolParser)

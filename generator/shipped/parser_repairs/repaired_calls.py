"""Streamed tool calls as a diff of the text so far: the one streaming method the repaired tool-call parsers share.

vLLM 0.32's deepseek_v3, deepseek_v31 and llama3_json parsers stream by updating state from each delta's text (a
cursor per call, the arguments diffed between one delta and the next). When several tokens arrive in one delta
(speculative decoding, --stream-interval above 1, a busy server), that state skips a step: a call's name and its
first arguments in one delta lose the arguments, the tail before a call's end marker is cut, two calls in one delta
become one, the whole turn in one delta becomes none (docs/parsers.md). vLLM's own parser engine (GLM-4.7, Kimi,
MiniMax...) avoids this by parsing the whole text so far at every delta and sending what is new; `CallStream` does
the same for these three formats: each repaired parser only says, for the text so far, what is content and what is
known of each call (`DiffStreaming.progress`), and `CallStream.delta` sends the difference from what was sent before.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm.entrypoints.generate.base.protocol import DeltaFunctionCall, DeltaMessage, DeltaToolCall
from vllm.renderers.chat_utils import make_tool_call_id


@dataclass
class Progress:
    """What the text so far shows of one call. `arguments` may only grow from one delta to the next (a parser
    leaves out what could still change: a half-written end fence), and is the whole of them once `done`."""

    name: str | None  # None until the whole name is known
    arguments: str = ""
    done: bool = False


class CallStream:
    """Per stream: what was sent of the content and of each call; `delta` sends the rest. It keeps the upstream
    parsers' `prev_tool_call_arr` and `streamed_args_for_tool` in step, which vLLM's end-of-stream flush reads."""

    def __init__(self, parser):
        self.parser = parser
        self.content_sent = 0
        self.names_sent = 0

    def delta(self, content: str, calls: list[Progress]) -> DeltaMessage | None:
        """A DeltaMessage with what `content` and `calls` hold beyond what was sent, or None when nothing is new."""
        parser, pieces = self.parser, []
        new_content = content[self.content_sent :]
        self.content_sent = len(content)
        for index, call in enumerate(calls):
            if index >= self.names_sent:
                if call.name is None:
                    break  # later calls wait for this one's name: calls are sent in order
                parser.prev_tool_call_arr.append({"name": call.name, "arguments": ""})
                parser.streamed_args_for_tool.append("")
                self.names_sent += 1
                fn = DeltaFunctionCall(name=call.name)
                pieces.append(DeltaToolCall(index=index, type="function", id=make_tool_call_id(), function=fn))
            arguments = call.arguments or ("{}" if call.done else "")  # a call without arguments has {}
            sent = parser.streamed_args_for_tool[index]
            if len(arguments) > len(sent):
                more = arguments[len(sent) :]
                if pieces and pieces[-1].index == index and pieces[-1].function is not None:
                    pieces[-1].function.arguments = more  # the name and the first arguments in one piece
                else:
                    pieces.append(DeltaToolCall(index=index, function=DeltaFunctionCall(arguments=more)))
                parser.streamed_args_for_tool[index] = arguments
            parser.prev_tool_call_arr[index]["arguments"] = parser.streamed_args_for_tool[index]
        parser.current_tool_id = self.names_sent - 1
        if not pieces and not new_content:
            return None
        return DeltaMessage(content=new_content or None, tool_calls=pieces)


class DiffStreaming:
    """Mixin for a ToolParser: its `extract_tool_calls_streaming` is the diff of `progress(text so far)`."""

    def progress(self, text: str) -> tuple[str, list[Progress]]:
        """The content and what is known of each call in `text`, the tool-call text so far."""
        raise NotImplementedError

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
        return stream.delta(*self.progress(current_text))

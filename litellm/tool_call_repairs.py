# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""LiteLLM proxy hook: streamed tool calls repaired where the pinned vLLM's parsers get them wrong.

Found by the parser conformance matrix (tests/integration/parsers/, docs/parsers.md; the records are
generator/compile/load/parser_support.py's findings with status "repaired"). Each repair is local to one stream,
so it is right with any number of gateway workers. Only streams of requests that sent tools are touched; the rest
pass through as they come.

- A streamed call with no arguments delta at all: vLLM 0.32's llama3_json parser streams a zero-argument call
  with arguments "" (`if cur_arguments:` treats {} as nothing to send), and its end-of-stream flush fills in only
  the last call. Clients get "" where JSON is due: on /v1/chat/completions the chunk that ends the stream is
  preceded by a delta of "{}" for each such call; on /v1/responses the call's done events and the final response
  carry "{}" instead of "".
- /v1/messages streamed with a named tool_choice: vLLM ends a named tool_choice's stream with finish_reason "stop"
  (OpenAI's own word for it), which LiteLLM translates to stop_reason "end_turn" although tool_use blocks were
  sent; Anthropic clients (Claude Code) act on "tool_use". The message_delta says "tool_use" when a tool_use block
  was streamed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

EMPTY_ARGS = "{}"


class StreamState:
    """What one stream has shown so far."""

    def __init__(self) -> None:
        self.args_seen: dict[int, bool] = {}  # chat: call index -> any arguments delta seen
        self.tool_use = False  # messages: a tool_use block was started
        self.pending = b""  # messages: bytes of an SSE event not yet complete


def chat_chunks(chunk: Any, state: StreamState) -> list[Any]:
    """A chat completion chunk, preceded by a "{}" arguments delta for the calls that never had one when this
    chunk ends the stream."""
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return [chunk]
    choice = choices[0]
    for call in getattr(choice.delta, "tool_calls", None) or []:
        index = getattr(call, "index", 0) or 0
        args = getattr(getattr(call, "function", None), "arguments", None)
        state.args_seen[index] = state.args_seen.get(index, False) or bool(args)
    missing = [i for i, seen in state.args_seen.items() if not seen]
    if not choice.finish_reason or not missing:
        return [chunk]
    from litellm.types.utils import ChatCompletionDeltaToolCall, Delta, Function

    fill = chunk.model_copy(deep=True)
    fill.choices[0].finish_reason = None
    fill.choices[0].delta = Delta(
        tool_calls=[
            ChatCompletionDeltaToolCall(index=i, function=Function(arguments=EMPTY_ARGS, name=None), type="function")
            for i in missing
        ]
    )
    for i in missing:
        state.args_seen[i] = True
    return [fill, chunk]


def _fill_arguments(item: Any) -> None:
    if getattr(item, "type", None) == "function_call" and getattr(item, "arguments", None) == "":
        item.arguments = EMPTY_ARGS


def responses_event(event: Any) -> Any:
    """A Responses stream event, with "" arguments of a finished function call made "{}"."""
    kind = getattr(event, "type", None)
    if kind == "response.function_call_arguments.done" and getattr(event, "arguments", None) == "":
        event.arguments = EMPTY_ARGS
    elif kind == "response.output_item.done":
        _fill_arguments(getattr(event, "item", None))
    elif kind == "response.completed":
        for item in getattr(getattr(event, "response", None), "output", None) or []:
            _fill_arguments(item)
    return event


def messages_bytes(data: bytes, state: StreamState) -> bytes:
    """Anthropic SSE bytes, complete events only (a partial one waits for the rest), with the message_delta's
    stop_reason "tool_use" once a tool_use block was streamed."""
    data = state.pending + data
    cut = data.rfind(b"\n\n") + 2
    state.pending, data = data[cut:], data[:cut]
    if b'"tool_use"' in data and b"content_block_start" in data:
        state.tool_use = True
    if not state.tool_use or b"end_turn" not in data:
        return data
    out = []
    for event in data.split(b"\n\n"):
        lines = event.split(b"\n")
        for n, line in enumerate(lines):
            if line.startswith(b"data:") and b"end_turn" in line:
                body = json.loads(line[5:])
                delta = body.get("delta") if body.get("type") == "message_delta" else None
                if isinstance(delta, dict) and delta.get("stop_reason") == "end_turn":
                    delta["stop_reason"] = "tool_use"
                    lines[n] = b"data: " + json.dumps(body, separators=(",", ":")).encode()
        out.append(b"\n".join(lines))
    return b"\n\n".join(out)


class ToolCallRepairs(CustomLogger):
    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict
    ) -> AsyncGenerator[Any, None]:
        if not request_data.get("tools"):
            async for chunk in response:
                yield chunk
            return
        state = StreamState()
        async for chunk in response:
            if isinstance(chunk, (bytes, bytearray, str)):
                out = messages_bytes(chunk.encode() if isinstance(chunk, str) else bytes(chunk), state)
                if out:
                    yield out
            elif hasattr(chunk, "choices"):
                for part in chat_chunks(chunk, state):
                    yield part
            else:
                yield responses_event(chunk)
        if state.pending:
            yield state.pending


repair_instance = ToolCallRepairs()

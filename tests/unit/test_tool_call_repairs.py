"""The gateway's stream repairs (generator/shipped/gateway_hooks/tool_call_repairs.py), loaded as LiteLLM loads
them, on the chunk types each API's stream carries: a streamed call that never got arguments gets "{}", a
/v1/messages stream with tool_use blocks ends with stop_reason tool_use, everything else passes unchanged, and a
request without tools is not looked at."""

from __future__ import annotations

import asyncio
import json

from litellm.types.llms.openai import FunctionCallArgumentsDoneEvent, OutputItemDoneEvent, ResponseCompletedEvent
from litellm.types.utils import ChatCompletionDeltaToolCall, Delta, Function, ModelResponseStream, StreamingChoices

from tests.unit.test_gateway_hooks import load_like_litellm

repairs = load_like_litellm("tool_call_repairs")
TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]


def run(chunks, request_data):
    async def collect():
        async def source():
            for c in chunks:
                yield c

        return [
            c
            async for c in repairs.repair_instance.async_post_call_streaming_iterator_hook(None, source(), request_data)
        ]

    return asyncio.run(collect())


def chat_chunk(tool_calls=None, finish=None) -> ModelResponseStream:
    return ModelResponseStream(
        id="c", model="m", choices=[StreamingChoices(index=0, delta=Delta(tool_calls=tool_calls), finish_reason=finish)]
    )


def call(index, name=None, arguments=None):
    return ChatCompletionDeltaToolCall(
        index=index,
        id=f"call_{index}" if name else None,
        type="function",
        function=Function(name=name, arguments=arguments),
    )


def arguments_by_index(chunks) -> dict[int, str]:
    joined: dict[int, str] = {}
    for c in chunks:
        for tc in c.choices[0].delta.tool_calls or []:
            joined[tc.index] = joined.get(tc.index, "") + (tc.function.arguments or "")
    return joined


def test_a_chat_call_without_arguments_gets_an_empty_object_before_the_end():
    chunks = [
        chat_chunk([call(0, "get_time", "")]),
        chat_chunk([call(1, "get_weather", '{"city": "Paris"}')]),
        chat_chunk(finish="tool_calls"),
    ]
    out = run(chunks, {"tools": TOOLS})
    assert arguments_by_index(out) == {0: "{}", 1: '{"city": "Paris"}'}
    assert out[-1].choices[0].finish_reason == "tool_calls" and len(out) == 4
    assert [c.choices[0].finish_reason for c in out[:-1]] == [None, None, None]


def test_a_chat_stream_whose_calls_have_arguments_is_unchanged():
    chunks = [chat_chunk([call(0, "get_time", "{}")]), chat_chunk(finish="tool_calls")]
    assert run(chunks, {"tools": TOOLS}) == chunks


def test_a_request_without_tools_passes_through_untouched():
    chunks = [chat_chunk([call(0, "get_time", "")]), chat_chunk(finish="stop"), b"event: x\ndata: {}\n\n"]
    assert run(chunks, {"messages": []}) == chunks


def test_responses_function_calls_that_end_empty_end_with_an_empty_object():
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_time",
        "arguments": "",
        "status": "completed",
    }
    events = [
        FunctionCallArgumentsDoneEvent(
            type="response.function_call_arguments.done", item_id="fc_1", output_index=0, arguments=""
        ),
        OutputItemDoneEvent(type="response.output_item.done", output_index=0, item=item),
        ResponseCompletedEvent(
            type="response.completed",
            response={
                "id": "r",
                "object": "response",
                "created_at": 0,
                "status": "completed",
                "model": "m",
                "output": [dict(item)],
                "tool_choice": "auto",
                "tools": [],
                "parallel_tool_calls": True,
            },
        ),
    ]
    out = run(events, {"tools": TOOLS})
    assert out[0].arguments == "{}"
    assert out[1].item["arguments"] == "{}" if isinstance(out[1].item, dict) else out[1].item.arguments == "{}"
    output = out[2].response["output"] if isinstance(out[2].response, dict) else out[2].response.output
    first = output[0]
    assert (first["arguments"] if isinstance(first, dict) else first.arguments) == "{}"


def sse(event: str, body: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


def stop_reason(chunks) -> str:
    text = b"".join(chunks).decode()
    delta = next(json.loads(line[6:]) for line in text.splitlines() if '"message_delta"' in line)
    return delta["delta"]["stop_reason"]


END_TURN = sse(
    "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}
)
TOOL_USE = sse(
    "content_block_start",
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
    },
)


def test_a_messages_stream_with_tool_use_blocks_stops_for_tool_use():
    out = run([sse("message_start", {"type": "message_start"}), TOOL_USE, END_TURN], {"tools": TOOLS})
    assert stop_reason(out) == "tool_use"


def test_events_split_across_chunks_are_rejoined_before_they_are_read():
    whole = TOOL_USE + END_TURN
    out = run([whole[:30], whole[30:70], whole[70:]], {"tools": TOOLS})
    assert stop_reason(out) == "tool_use" and b"".join(out).count(b"\n\n") == 2


def test_a_messages_stream_of_text_keeps_end_turn():
    text = sse(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    assert stop_reason(run([text, END_TURN], {"tools": TOOLS})) == "end_turn"

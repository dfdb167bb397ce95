"""Tool calls survive vLLM's tool parser and LiteLLM, streamed and not, for every tool_choice."""

from __future__ import annotations

import json

import pytest

from generator.demo.script import TOOL_CALL, WEATHER_TOOL

from .helpers import ASK_WEATHER, collect_stream

TOOL_CHOICES = {
    "auto": "auto",
    "required": "required",
    "named": {"type": "function", "function": {"name": "get_weather"}},
}


def _check_call(gateway, model, name: str, arguments: str) -> None:
    assert name == "get_weather"
    args = json.loads(arguments)  # must be valid JSON, not text leaked from the parser
    assert isinstance(args, dict) and args.get("city")
    if gateway.scripts.get(model.served_name) == "tool-caller":
        assert args == TOOL_CALL["arguments"]


@pytest.mark.parametrize("choice", TOOL_CHOICES, ids=list(TOOL_CHOICES))
def test_tool_call(gateway, tool_model, choice):
    reply = gateway.client().chat.completions.create(
        model=tool_model.served_name, messages=ASK_WEATHER, tools=[WEATHER_TOOL], tool_choice=TOOL_CHOICES[choice]
    )
    message = reply.choices[0].message
    assert message.tool_calls, f"no tool_calls; content was {message.content!r}"
    call = message.tool_calls[0]
    assert call.id and call.type == "function"
    _check_call(gateway, tool_model, call.function.name, call.function.arguments)
    assert "<tool_call>" not in (message.content or "")


@pytest.mark.parametrize("choice", TOOL_CHOICES, ids=list(TOOL_CHOICES))
def test_streamed_tool_call(gateway, tool_model, choice):
    stream = gateway.client().chat.completions.create(
        model=tool_model.served_name,
        messages=ASK_WEATHER,
        tools=[WEATHER_TOOL],
        tool_choice=TOOL_CHOICES[choice],
        stream=True,
    )
    content, _, calls, _ = collect_stream(stream)
    assert calls, f"no streamed tool_calls; content was {content!r}"
    _check_call(gateway, tool_model, calls[0]["name"], calls[0]["arguments"])
    assert "<tool_call>" not in content


def test_multi_turn_with_a_tool_result(gateway, tool_model):
    client = gateway.client()
    first = client.chat.completions.create(model=tool_model.served_name, messages=ASK_WEATHER, tools=[WEATHER_TOOL])
    call = first.choices[0].message.tool_calls[0]
    messages = ASK_WEATHER + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "sunny"})},
    ]
    second = client.chat.completions.create(model=tool_model.served_name, messages=messages, tools=[WEATHER_TOOL])
    message = second.choices[0].message
    assert second.choices[0].finish_reason in ("stop", "tool_calls", "length")
    assert message.content or message.tool_calls

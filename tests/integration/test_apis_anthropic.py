"""/v1/messages and /v1/messages/count_tokens through the gateway with the official Anthropic SDK
(as Claude Code uses them), streamed and not: tool calls arrive as tool_use blocks with their input
intact (LiteLLM #25321), reasoning arrives as thinking blocks, max_tokens is clamped with the
x-gateway-max-tokens-clamped header, a prompt longer than the context and tools sent to a model
without a tool parser get one clear 400, and count_tokens is answered from the model's own backend.
Every number comes from the plan."""

from __future__ import annotations

import anthropic
import pytest

from generator.demo.script import ANSWER_TEXT, REASONING_TEXT, TOOL_CALL, WEATHER_TOOL

from .helpers import ASK_WEATHER, clamp_note, too_long_text

TOOL = {
    "name": "get_weather",
    "description": WEATHER_TOOL["function"]["description"],
    "input_schema": WEATHER_TOOL["function"]["parameters"],
}
CLAUDE_CODE_MAX_TOKENS = 32000  # what Claude Code sends on every request


def _scripted(gateway, model, kind: str) -> bool:
    return gateway.scripts.get(model.served_name) == kind


def _check_tool_use(gateway, model, message) -> None:
    uses = [b for b in message.content if b.type == "tool_use"]
    assert uses, f"no tool_use block; content was {message.content!r}"
    assert uses[0].id and uses[0].name == "get_weather"
    assert isinstance(uses[0].input, dict) and uses[0].input.get("city")
    if _scripted(gateway, model, "tool-caller"):
        assert uses[0].input == TOOL_CALL["arguments"]
    assert not any("<tool_call>" in b.text for b in message.content if b.type == "text")
    assert message.stop_reason == "tool_use"


def test_messages_tool_call(gateway, tool_model):
    message = gateway.anthropic().messages.create(
        model=tool_model.served_name, max_tokens=256, messages=ASK_WEATHER, tools=[TOOL]
    )
    _check_tool_use(gateway, tool_model, message)


def test_messages_streamed_tool_call(gateway, tool_model):
    partial = []
    with gateway.anthropic().messages.stream(
        model=tool_model.served_name, max_tokens=256, messages=ASK_WEATHER, tools=[TOOL]
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                partial.append(event.delta.partial_json)
        message = stream.get_final_message()
    _check_tool_use(gateway, tool_model, message)
    assert partial, "the tool input was not streamed as input_json_delta"


def test_messages_tool_result_turn(gateway, tool_model):
    client = gateway.anthropic()
    first = client.messages.create(model=tool_model.served_name, max_tokens=256, messages=ASK_WEATHER, tools=[TOOL])
    use = next(b for b in first.content if b.type == "tool_use")
    messages = ASK_WEATHER + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 21 C"}]},
    ]
    second = client.messages.create(model=tool_model.served_name, max_tokens=256, messages=messages, tools=[TOOL])
    assert second.content and second.stop_reason in ("end_turn", "tool_use", "max_tokens")


def _check_thinking(gateway, model, thinking: str, text: str) -> None:
    assert thinking, "no thinking"
    assert "<think>" not in text and "</think>" not in text, text
    if _scripted(gateway, model, "reasoner"):
        assert thinking.strip() == REASONING_TEXT and text.strip() == ANSWER_TEXT


def test_messages_reasoning_is_a_thinking_block(gateway, reasoning_model):
    message = gateway.anthropic().messages.create(
        model=reasoning_model.served_name, max_tokens=256, messages=ASK_WEATHER
    )
    thinking = "".join(b.thinking for b in message.content if b.type == "thinking")
    text = "".join(b.text for b in message.content if b.type == "text")
    _check_thinking(gateway, reasoning_model, thinking, text)


def test_messages_streamed_reasoning_is_thinking(gateway, reasoning_model):
    thinking, text = [], []
    with gateway.anthropic().messages.stream(
        model=reasoning_model.served_name, max_tokens=256, messages=ASK_WEATHER
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "thinking_delta":
                thinking.append(event.delta.thinking)
            elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                text.append(event.delta.text)
    _check_thinking(gateway, reasoning_model, "".join(thinking), "".join(text))


def test_messages_thinking_sent_back_is_accepted(gateway, reasoning_model):
    client = gateway.anthropic()
    first = client.messages.create(model=reasoning_model.served_name, max_tokens=256, messages=ASK_WEATHER)
    messages = ASK_WEATHER + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "And tomorrow?"},
    ]
    second = client.messages.create(model=reasoning_model.served_name, max_tokens=256, messages=messages)
    assert any(b.type == "text" for b in second.content)


# --- the clamp -------------------------------------------------------------------------------------


@pytest.mark.parametrize("asked", ["claude-code", "twice-the-context"])
def test_messages_max_tokens_is_clamped(gateway, model, asked):
    asked = CLAUDE_CODE_MAX_TOKENS if asked == "claude-code" else model.context * 2
    if asked < model.context:
        pytest.skip(f"{model.served_name} holds {model.context} tokens: {asked} fits without a clamp")
    raw = gateway.anthropic().messages.with_raw_response.create(
        model=model.served_name, max_tokens=asked, messages=[{"role": "user", "content": "Say hello."}]
    )
    message = raw.parse()
    assert clamp_note(raw.headers) == (asked, model.context - message.usage.input_tokens)


def test_messages_max_tokens_is_clamped_when_streaming(gateway, model):
    asked = model.context * 2
    with gateway.anthropic().messages.with_streaming_response.create(
        model=model.served_name, max_tokens=asked, stream=True, messages=[{"role": "user", "content": "Say hello."}]
    ) as raw:
        note = clamp_note(raw.headers)
        # the input count: message_start's (Anthropic), else the final message_delta's (LiteLLM's
        # translation sends 0 at the start and the real count at the end)
        counts = [
            e.message.usage.input_tokens if e.type == "message_start" else e.usage.input_tokens
            for e in raw.parse()
            if e.type in ("message_start", "message_delta")
        ]
    assert counts and max(c or 0 for c in counts) > 0, "no input token count in the stream"
    assert note == (asked, model.context - max(c or 0 for c in counts))


def test_a_request_that_fits_is_not_clamped(gateway, model):
    raw = gateway.anthropic().messages.with_raw_response.create(
        model=model.served_name, max_tokens=16, messages=[{"role": "user", "content": "Say hello."}]
    )
    assert clamp_note(raw.headers) is None


# --- one clear 400 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_prompt_longer_than_the_context_is_one_clear_400(gateway, model, stream):
    text = too_long_text(gateway, model)
    with pytest.raises(anthropic.BadRequestError) as err:
        result = gateway.anthropic().messages.create(
            model=model.served_name,
            max_tokens=CLAUDE_CODE_MAX_TOKENS,
            messages=[{"role": "user", "content": text}],
            stream=stream,
        )
        if stream:
            list(result)
    message = err.value.body["error"]["message"]
    assert message.startswith("prompt is ") and f"{model.served_name} holds {model.context} tokens" in message
    assert int(message.split()[2]) > model.context
    assert "context_window_fallback" not in message and "litellm" not in message.lower(), message


# --- count_tokens ----------------------------------------------------------------------------------

SYSTEM = "You are terse."


def test_count_tokens_is_the_backends_own_count(gateway, model):
    """The count equals the prompt tokens vLLM reports for the same conversation as chat: the
    model's own tokenizer and template, so it came from the backend (LiteLLM alone would count with
    tiktoken, or ask Anthropic's servers, LiteLLM #29764)."""
    counted = (
        gateway.anthropic()
        .messages.count_tokens(model=model.served_name, system=SYSTEM, messages=ASK_WEATHER)
        .input_tokens
    )
    served = (
        gateway.client()
        .chat.completions.create(
            model=model.served_name, max_tokens=1, messages=[{"role": "system", "content": SYSTEM}, *ASK_WEATHER]
        )
        .usage.prompt_tokens
    )
    assert counted == served


def test_count_tokens_counts_a_prompt_longer_than_the_context(gateway, model):
    """Claude Code counts to decide when to compact: the count must work past the context too."""
    text = too_long_text(gateway, model)
    counted = (
        gateway.anthropic()
        .messages.count_tokens(model=model.served_name, messages=[{"role": "user", "content": text}])
        .input_tokens
    )
    assert counted > model.context


def test_count_tokens_for_a_model_not_served_here_is_a_404_not_a_forward(gateway):
    with pytest.raises(anthropic.NotFoundError) as err:
        gateway.anthropic().messages.count_tokens(model="claude-sonnet-4-5", messages=ASK_WEATHER)
    assert "not served here" in err.value.body["error"]["message"]


def test_count_tokens_needs_the_key(gateway):
    with pytest.raises(anthropic.AuthenticationError):
        gateway.anthropic(key="sk-wrong").messages.count_tokens(
            model=gateway.plan.models[0].served_name, messages=ASK_WEATHER
        )

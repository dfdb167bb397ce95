"""Reasoning stays out of `content`: vLLM's reasoning parser output reaches the client separately."""

from __future__ import annotations

from generator.demo.script import ANSWER_TEXT, REASONING_TEXT

from .helpers import collect_stream, reasoning_of

ASK = [{"role": "user", "content": "Is it sunny in Paris?"}]


def test_reasoning_is_separated(gateway, reasoning_model):
    message = (
        gateway.client().chat.completions.create(model=reasoning_model.served_name, messages=ASK).choices[0].message
    )
    reasoning = reasoning_of(message)
    assert reasoning, f"no reasoning_content; content was {message.content!r}"
    assert "<think>" not in (message.content or "") and "</think>" not in (message.content or "")
    if gateway.scripts.get(reasoning_model.served_name) == "reasoner":
        assert reasoning.strip() == REASONING_TEXT
        assert message.content == ANSWER_TEXT


def test_streamed_reasoning_is_separated(gateway, reasoning_model):
    stream = gateway.client().chat.completions.create(model=reasoning_model.served_name, messages=ASK, stream=True)
    content, reasoning, _, finish = collect_stream(stream)
    assert reasoning, f"no reasoning_content in the stream; content was {content!r}"
    assert "<think>" not in content and "</think>" not in content
    assert finish in ("stop", "length")
    if gateway.scripts.get(reasoning_model.served_name) == "reasoner":
        assert reasoning.strip() == REASONING_TEXT
        assert content == ANSWER_TEXT

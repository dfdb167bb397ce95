"""Small helpers shared by the integration tests."""

from __future__ import annotations


ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]


def reasoning_of(obj) -> str | None:
    """LiteLLM exposes vLLM's `reasoning` as `reasoning_content` (message or delta)."""
    extra = getattr(obj, "model_extra", None) or {}
    return getattr(obj, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")


def collect_stream(stream):
    """Join a streamed chat completion: content, reasoning, tool calls by index, finish reason."""
    content, reasoning, calls, finish = [], [], {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.content:
            content.append(delta.content)
        if r := reasoning_of(delta):
            reasoning.append(r)
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"name": "", "arguments": ""})
            if tc.function and tc.function.name:
                slot["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                slot["arguments"] += tc.function.arguments
        finish = choice.finish_reason or finish
    return "".join(content), "".join(reasoning), [calls[i] for i in sorted(calls)], finish

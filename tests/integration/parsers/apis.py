"""The three APIs a client speaks, driven with the official SDKs, each answer boiled down to what the matrix checks.

`ask` sends one conformance turn's request (chat completions, responses or messages; streamed or whole; with a
tool_choice) and returns `Seen`: the reasoning, the calls (id, name, arguments as JSON text) in order, the answer
text, the finish reason in chat-completions words, and for streams how many times each call's name was announced
and whether its argument deltas added up to its final arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from generator.demo.conformance import REASONING, SCRIPTS, TOOLS, Turn, selector

from ..helpers import reasoning_of

APIS = ("chat", "responses", "messages")
MODES = ("whole", "streamed")
CHOICES = ("auto", "required", "named")
NAMED = "get_weather"  # the tool a named tool_choice names (the first call of one-call / two-calls)


@dataclass
class Seen:
    reasoning: str = ""
    calls: list[dict] = field(default_factory=list)  # {"id", "name", "arguments"}, in order
    text: str = ""
    finish: str | None = None  # "tool_calls" | "stop" | "length" (each API's word mapped)
    names_announced: list[int] = field(default_factory=list)  # streamed: per call, how many deltas carried its name
    deltas_add_up: list[bool] = field(default_factory=list)  # streamed: per call, argument deltas == final arguments


def history(script: str, parallel_calls: bool) -> tuple[str, Turn | None]:
    """The user's words for `script`; for after-tool, the earlier turn (two calls) whose results come back."""
    if script == "after-tool":  # the results of the one call a family that calls one at a time made
        earlier = "two-calls" if parallel_calls else "one-call"
        return f"Weather in Paris and Tokyo? {selector(earlier)}", SCRIPTS[earlier]
    return f"Please help. {selector(script)}", None


RESULTS = ('{"temperature": 21, "sky": "sunny"}', '{"temperature": 12, "sky": "rain"}')


# --- chat completions --------------------------------------------------------------------------------------------


def chat_tools():
    return [{"type": "function", "function": {"name": n, **t}} for n, t in TOOLS.items()]


def chat_messages(words: str, earlier: Turn | None, has_reasoning: bool) -> list[dict]:
    messages = [{"role": "user", "content": words}]
    if earlier:
        ids = [f"call_{i}" for i in range(len(earlier.calls))]
        assistant = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for i, c in zip(ids, earlier.calls)
            ],
        }
        if has_reasoning:
            assistant["reasoning_content"] = REASONING
        messages.append(assistant)
        messages += [{"role": "tool", "tool_call_id": i, "content": r} for i, r in zip(ids, RESULTS)]
    return messages


def chat(gateway, model: str, words, earlier, has_reasoning, choice, stream) -> Seen:
    tool_choice = {"auto": "auto", "required": "required", "named": {"type": "function", "function": {"name": NAMED}}}[
        choice
    ]
    kw = dict(
        model=model, messages=chat_messages(words, earlier, has_reasoning), tools=chat_tools(), tool_choice=tool_choice
    )
    client = gateway.client()
    if not stream:
        choice_ = client.chat.completions.create(**kw).choices[0]
        m = choice_.message
        return Seen(
            reasoning=reasoning_of(m) or "",
            text=m.content or "",
            finish=choice_.finish_reason,
            calls=[
                {"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in m.tool_calls or []
            ],
        )
    seen, slots = Seen(), {}
    for chunk in client.chat.completions.create(**kw, stream=True):
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        seen.text += c.delta.content or ""
        seen.reasoning += reasoning_of(c.delta) or ""
        for tc in c.delta.tool_calls or []:
            slot = slots.setdefault(tc.index, {"id": "", "name": "", "arguments": "", "named": 0})
            slot["id"] = slot["id"] or (tc.id or "")
            if tc.function and tc.function.name:
                slot["name"] += tc.function.name
                slot["named"] += 1
            if tc.function and tc.function.arguments:
                slot["arguments"] += tc.function.arguments
        seen.finish = c.finish_reason or seen.finish
    for i in sorted(slots):
        seen.names_announced.append(slots[i].pop("named"))
        seen.calls.append(slots[i])
        seen.deltas_add_up.append(True)  # chat streams only deltas: their sum is the call
    return seen


# --- responses ---------------------------------------------------------------------------------------------------


def responses_input(words: str, earlier: Turn | None, has_reasoning: bool):
    if not earlier:
        return words
    items: list[dict] = [{"role": "user", "content": words}]
    if has_reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": "rs_0",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": REASONING}],
            }
        )
    ids = [f"call_{i}" for i in range(len(earlier.calls))]
    items += [
        {"type": "function_call", "call_id": i, "name": c.name, "arguments": json.dumps(c.arguments)}
        for i, c in zip(ids, earlier.calls)
    ]
    items += [{"type": "function_call_output", "call_id": i, "output": r} for i, r in zip(ids, RESULTS)]
    return items


def _responses_seen(output, status) -> Seen:
    seen = Seen()
    for item in output:
        if item.type == "reasoning":
            seen.reasoning += "".join(c.text for c in (item.content or []) if getattr(c, "text", None))
            seen.reasoning += "".join(s.text for s in (item.summary or []) if getattr(s, "text", None))
        elif item.type == "function_call":
            seen.calls.append({"id": item.call_id, "name": item.name, "arguments": item.arguments})
        elif item.type == "message":
            seen.text += "".join(c.text for c in item.content if getattr(c, "type", "") == "output_text")
    seen.finish = "tool_calls" if seen.calls else ("stop" if status == "completed" else status)
    return seen


def responses(gateway, model: str, words, earlier, has_reasoning, choice, stream) -> Seen:
    tool_choice = {"auto": "auto", "required": "required", "named": {"type": "function", "name": NAMED}}[choice]
    kw = dict(
        model=model,
        input=responses_input(words, earlier, has_reasoning),
        tool_choice=tool_choice,
        tools=[{"type": "function", "name": n, **t} for n, t in TOOLS.items()],
    )
    client = gateway.client()
    if not stream:
        reply = client.responses.create(**kw)
        return _responses_seen(reply.output, reply.status)
    deltas: dict[int, str] = {}
    named: dict[int, int] = {}
    with client.responses.stream(**kw) as events:
        for event in events:
            if event.type == "response.function_call_arguments.delta":
                deltas[event.output_index] = deltas.get(event.output_index, "") + event.delta
            elif event.type == "response.output_item.added" and event.item.type == "function_call":
                named[event.output_index] = named.get(event.output_index, 0) + 1
        final = events.get_final_response()
    seen = _responses_seen(final.output, final.status)
    for index, item in enumerate(final.output):
        if item.type == "function_call":
            seen.names_announced.append(named.get(index, 0))
            # the deltas of a call, when any were sent, must add up to its final arguments
            seen.deltas_add_up.append(index not in deltas or _same_json(deltas[index], item.arguments))
    return seen


# --- messages (Anthropic) ----------------------------------------------------------------------------------------


def messages_history(words: str, earlier: Turn | None, has_reasoning: bool) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": words}]
    if earlier:
        ids = [f"toolu_{i}" for i in range(len(earlier.calls))]
        blocks: list[dict] = [{"type": "thinking", "thinking": REASONING, "signature": ""}] if has_reasoning else []
        blocks += [
            {"type": "tool_use", "id": i, "name": c.name, "input": c.arguments} for i, c in zip(ids, earlier.calls)
        ]
        messages.append({"role": "assistant", "content": blocks})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": i, "content": r} for i, r in zip(ids, RESULTS)],
            }
        )
    return messages


STOP = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length", "stop_sequence": "stop"}


def _message_seen(message) -> Seen:
    seen = Seen(finish=STOP.get(message.stop_reason, message.stop_reason))
    for b in message.content:
        if b.type == "thinking":
            seen.reasoning += b.thinking
        elif b.type == "text":
            seen.text += b.text
        elif b.type == "tool_use":
            seen.calls.append({"id": b.id, "name": b.name, "arguments": json.dumps(b.input)})
    return seen


def messages(gateway, model: str, words, earlier, has_reasoning, choice, stream) -> Seen:
    tool_choice = {"auto": {"type": "auto"}, "required": {"type": "any"}, "named": {"type": "tool", "name": NAMED}}
    kw = dict(
        model=model,
        max_tokens=512,
        messages=messages_history(words, earlier, has_reasoning),
        tool_choice=tool_choice[choice],
        tools=[{"name": n, "description": t["description"], "input_schema": t["parameters"]} for n, t in TOOLS.items()],
    )
    client = gateway.anthropic()
    if not stream:
        return _message_seen(client.messages.create(**kw))
    partial: dict[int, str] = {}
    named: dict[int, int] = {}
    with client.messages.stream(**kw) as events:
        for event in events:
            if event.type == "content_block_start" and event.content_block.type == "tool_use":
                named[event.index] = named.get(event.index, 0) + 1
            elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                partial[event.index] = partial.get(event.index, "") + event.delta.partial_json
        final = events.get_final_message()
    seen = _message_seen(final)
    for index, block in enumerate(final.content):
        if block.type == "tool_use":
            seen.names_announced.append(named.get(index, 0))
            seen.deltas_add_up.append(_same_json(partial.get(index) or "{}", json.dumps(block.input)))
    return seen


def _same_json(a: str, b: str) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return False


def ask(
    api: str,
    gateway,
    model: str,
    script: str,
    has_reasoning: bool,
    choice: str,
    stream: bool,
    parallel_calls: bool = True,
) -> Seen:
    words, earlier = history(script, parallel_calls)
    return {"chat": chat, "responses": responses, "messages": messages}[api](
        gateway, model, words, earlier, has_reasoning, choice, stream
    )

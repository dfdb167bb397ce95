"""What the family models say (generator/demo/families/): the turns of the parser conformance matrix, word for word.

A family model (family_model.py) speaks one tool-call / reasoning wire format (GLM-4.7, Llama 3 JSON, ...); which
of these turns it emits is chosen by the prompt: the last selector (`[script two-calls]`) in it, unless a tool
result comes after that selector (then `after-tool`); no selector: `think-call` (a family without a reasoning
parser: `one-call`). The same turns, rendered in each family's format, are what the tests expect back from every
API (tests/integration/parsers/). No dependencies: the tests, the model builder (vLLM's interpreter) and the
script player inside vLLM import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The tools the scripts call, as JSON schemas of their parameters: the types matter, a parser that coerces a value
# against the request's schema (GLM's <arg_value> text) must get the same JSON back whatever API sent the tools.
TOOLS: dict[str, dict[str, Any]] = {
    "get_weather": {
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
    "get_time": {
        "description": "The current time where the user is",
        "parameters": {"type": "object", "properties": {}},
    },
    "record": {
        "description": "Record an observation with typed fields",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "urgent": {"type": "boolean"},
                "options": {"type": "object", "properties": {"depth": {"type": "integer"}, "mode": {"type": "string"}}},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["text", "count", "ratio", "urgent", "options", "tags"],
        },
    },
}


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One assistant turn: reasoning (or none), then tool calls in order, or a plain answer."""

    reasoning: str | None = None
    calls: tuple[Call, ...] = ()
    answer: str | None = None
    needs: frozenset[str] = field(default_factory=frozenset)  # "reasoning": only for a family with a reasoning parser


REASONING = "The user wants the weather, so I will call the tool."
ANSWER = "It is 21 degrees and sunny in Paris."
PARIS = Call("get_weather", {"city": "Paris", "unit": "celsius"})
TYPED = Call(
    "record",
    {
        # quotes, a newline, non-ASCII (2, 3 and 4 UTF-8 bytes... and CJK)
        "text": 'She said "hi"\nthen left: café ☕ 東京',
        "count": 42,
        "ratio": 0.25,
        "urgent": True,
        "options": {"depth": 2, "mode": "fast"},
        "tags": ["a", "b c"],
    },
)

SCRIPTS: dict[str, Turn] = {
    "one-call": Turn(calls=(PARIS,)),
    "typed-args": Turn(calls=(TYPED,)),
    "two-calls": Turn(calls=(PARIS, Call("get_weather", {"city": "Tokyo", "unit": "celsius"}))),
    "no-args": Turn(calls=(Call("get_time", {}),)),  # a call without arguments (vllm-project/vllm#44326)
    # a call without arguments, then one with (vllm-project/vllm#44326, #47901)
    "zero-args": Turn(calls=(Call("get_time", {}), PARIS)),
    "think-call": Turn(reasoning=REASONING, calls=(PARIS,), needs=frozenset({"reasoning"})),
    "think-answer": Turn(
        reasoning="The user says hello; no tool is needed.",
        answer="Hello! How can I help?",
        needs=frozenset({"reasoning"}),
    ),
    "after-tool": Turn(answer=ANSWER),
}
AFTER_TOOL = "after-tool"  # the turn after a tool result, whatever the selector before it

# The real coding agents' runs (tests/integration/agents/): reasoning, then a call of one of the agent's OWN harmless
# tools (a model under vLLM's glm47 grammar can only call a tool the request declares); then, after the agent's
# tool result, `after-tool`'s answer. Not part of the matrix.
AGENT_CALLS = {  # each a harmless tool of the agent's own; what it answers (or refuses) goes back to the model
    "opencode": Call("bash", {"command": "ls"}),
    "claude-code": Call("Read", {"file_path": "/etc/hostname"}),
    "codex": Call("exec_command", {"cmd": "ls"}),
}
AGENT_SCRIPTS: dict[str, Turn] = {
    f"agent-{agent}": Turn(reasoning=REASONING, calls=(call,), needs=frozenset({"reasoning"}))
    for agent, call in AGENT_CALLS.items()
}


def selector(script: str) -> str:
    """The words of a prompt that choose `script`."""
    return f"[script {script}]"


def default_script(has_reasoning: bool) -> str:
    return "think-call" if has_reasoning else "one-call"


def scripts_for(has_reasoning: bool, parallel_calls: bool = True, agents: bool = False) -> dict[str, Turn]:
    """The scripts a family speaks: those needing reasoning only where its format has reasoning, those with two
    calls only where a turn can hold more than one (gpt-oss stops after each call); with `agents`, the agents' too
    (the model holds them; the matrix does not ask them)."""
    every = {**SCRIPTS, **AGENT_SCRIPTS} if agents else SCRIPTS
    return {
        n: t
        for n, t in every.items()
        if ("reasoning" not in t.needs or has_reasoning) and (parallel_calls or len(t.calls) <= 1)
    }


def choose(
    prompt_text: str, has_reasoning: bool, tool_result_opener: str, user_opener: str, parallel_calls: bool = True
) -> str:
    """The script a prompt asks for (the script player's rule, on the prompt as the chat template rendered it): the
    last selector's; `after-tool` when a tool result opens after both it and the last user turn's opener (a system
    prompt that describes the tool-result format comes before every user turn)."""
    last, chosen = -1, default_script(has_reasoning)
    for name in scripts_for(has_reasoning, parallel_calls, agents=True):
        at = prompt_text.rfind(selector(name))
        if at > last:
            last, chosen = at, name
    if prompt_text.rfind(tool_result_opener) > max(last, prompt_text.rfind(user_opener)):
        return AFTER_TOOL
    return chosen

"""The shapes of well-formed request bodies, one per API, as Hypothesis strategies, for the fuzz test.

A subset of the public OpenAI and Anthropic request schemas: the fields clients send, with the types those APIs
document, kept small (short texts, budgets of at most 8 tokens) so that a well-formed request costs the CPU backend
little. The fuzz test then breaks them (a field replaced by any JSON, something inside replaced, a required field
dropped, the body replaced). Written with Hypothesis's own `fixed_dictionaries(required, optional=...)`:
hypothesis-jsonschema 0.23.1 (its last release) fails inside Hypothesis 6.170 ("'many' object has no attribute
'more'"), so JSON Schema documents are not drawn from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class Body:
    """A strategy of well-formed bodies, and the names of the fields it may hold and must hold."""

    strategy: st.SearchStrategy
    fields: tuple[str, ...]
    required: tuple[str, ...]


def body(required: dict, optional: dict) -> Body:
    return Body(
        st.fixed_dictionaries(required, optional=optional), tuple(sorted({*required, *optional})), tuple(required)
    )


def obj(required: dict, optional: dict | None = None) -> st.SearchStrategy:
    return st.fixed_dictionaries(required, optional=optional or {})


TEXT = st.text(max_size=24)
WORD = st.text(min_size=1, max_size=24)
NAME = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
BUDGET = st.integers(1, 8)
TEMPERATURE = st.floats(0, 1.5)
TOP_P = st.floats(0.01, 1)
STOP = TEXT | st.lists(st.text(min_size=1, max_size=8), max_size=2)
PARAMETERS = st.just({"type": "object", "properties": {}})


# Every type field the shapes below hold, of every API: the fuzz test's "type" breakage puts one where another was
# (a type known in some other position) or an unknown word, in every position that has a type.
TYPES = (
    "text",
    "image_url",
    "input_audio",
    "refusal",
    "thinking",
    "input_text",
    "output_text",
    "input_image",
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
    "function",
    "tool_use",
    "tool_result",
    "image",
    "document",
    "file",
    "json_object",
)


# OpenAI chat fields (and vLLM's own) the shapes here leave out: the fuzz test adds them, and the other APIs' fields,
# to every API's bodies (LiteLLM 1.108.7 handed such fields to the OpenAI SDK's completions call on /v1/completions,
# a 500; vLLM 0.32 answers a structured_outputs that is no object with a 500)
MORE_FIELDS = (
    "parallel_tool_calls",
    "functions",
    "function_call",
    "reasoning_effort",
    "verbosity",
    "modalities",
    "audio",
    "prediction",
    "web_search_options",
    "store",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
    "top_logprobs",
    "logprobs",
    "metadata",
    "structured_outputs",
)


def parts(part: st.SearchStrategy) -> st.SearchStrategy:
    return TEXT | st.lists(part, min_size=1, max_size=2)


def chat(models: list[str]) -> Body:
    part = obj({"type": st.just("text"), "text": TEXT})
    call = obj(
        {"id": st.just("c1"), "type": st.just("function"), "function": obj({"name": NAME, "arguments": st.just("{}")})}
    )
    message = (
        obj({"role": st.sampled_from(["system", "developer", "user"]), "content": parts(part)})
        | obj({"role": st.just("assistant"), "content": parts(part)}, {"tool_calls": st.lists(call, max_size=1)})
        | obj({"role": st.just("tool"), "tool_call_id": st.just("c1"), "content": parts(part)})
    )
    tool = obj(
        {"type": st.just("function"), "function": obj({"name": NAME}, {"description": TEXT, "parameters": PARAMETERS})}
    )
    return body(
        {"model": st.sampled_from(models), "messages": st.lists(message, min_size=1, max_size=3), "max_tokens": BUDGET},
        {
            "max_completion_tokens": BUDGET,
            "temperature": TEMPERATURE,
            "top_p": TOP_P,
            "n": st.just(1),
            "seed": st.integers(0, 2**31),
            "stop": STOP,
            "stream": st.booleans(),
            "stream_options": obj({}, {"include_usage": st.booleans()}),
            "tools": st.lists(tool, max_size=2),
            "tool_choice": st.sampled_from(["auto", "none"]),
            "response_format": obj({"type": st.sampled_from(["text", "json_object"])}),
            "logit_bias": st.dictionaries(st.integers(1, 999).map(str), st.integers(-5, 5), max_size=2),
            "user": TEXT,
        },
    )


def completions(models: list[str]) -> Body:
    return body(
        {
            "model": st.sampled_from(models),
            "prompt": WORD | st.lists(WORD, min_size=1, max_size=3),
            "max_tokens": BUDGET,
        },
        {
            "temperature": TEMPERATURE,
            "top_p": TOP_P,
            "n": st.just(1),
            "best_of": st.just(1),
            "echo": st.booleans(),
            "stop": STOP,
            "stream": st.booleans(),
            "logprobs": st.integers(0, 2),
            "seed": st.integers(0, 2**31),
        },
    )


def responses(models: list[str]) -> Body:
    part = obj({"type": st.just("input_text"), "text": TEXT})
    said = obj({"type": st.just("output_text"), "text": TEXT})
    item = (
        obj({"role": st.sampled_from(["user", "system", "developer"]), "content": parts(part)})
        | obj({"type": st.just("message"), "role": st.just("user"), "content": st.lists(part, min_size=1, max_size=2)})
        | obj(
            {
                "type": st.just("message"),
                "role": st.just("assistant"),
                "content": st.lists(said, min_size=1, max_size=2),
            }
        )
        | obj({"type": st.just("function_call"), "name": NAME, "arguments": st.just("{}"), "call_id": st.just("c1")})
        | obj({"type": st.just("function_call_output"), "call_id": st.just("c1"), "output": TEXT})
        | obj({"type": st.just("reasoning"), "summary": st.just([])})
    )
    tool = obj({"type": st.just("function"), "name": NAME}, {"parameters": PARAMETERS})
    return body(
        {
            "model": st.sampled_from(models),
            "input": WORD | st.lists(item, min_size=1, max_size=3),
            "max_output_tokens": BUDGET,
        },
        {
            "instructions": TEXT,
            "temperature": TEMPERATURE,
            "top_p": TOP_P,
            "stream": st.booleans(),
            "store": st.just(False),
            "tools": st.lists(tool, max_size=2),
            "tool_choice": st.sampled_from(["auto", "none"]),
        },
    )


BLOCK_TEXT = obj({"type": st.just("text"), "text": WORD})
ANTHROPIC_MESSAGES = st.lists(
    obj({"role": st.just("user"), "content": WORD | st.lists(BLOCK_TEXT, min_size=1, max_size=2)})
    | obj(
        {
            "role": st.just("assistant"),
            "content": st.lists(
                BLOCK_TEXT
                | obj({"type": st.just("thinking"), "thinking": WORD})
                | obj({"type": st.just("tool_use"), "id": st.just("t1"), "name": NAME, "input": st.just({})}),
                min_size=1,
                max_size=2,
            ),
        }
    )
    | obj(
        {
            "role": st.just("user"),
            "content": st.lists(
                obj(
                    {
                        "type": st.just("tool_result"),
                        "tool_use_id": st.just("t1"),
                        "content": WORD | st.lists(BLOCK_TEXT, min_size=1, max_size=2),
                    }
                ),
                min_size=1,
                max_size=1,
            ),
        }
    ),
    min_size=1,
    max_size=3,
)
ANTHROPIC_TOOLS = st.lists(obj({"name": NAME, "input_schema": PARAMETERS}, {"description": TEXT}), max_size=2)


def messages(models: list[str]) -> Body:
    return body(
        {"model": st.sampled_from(models), "messages": ANTHROPIC_MESSAGES, "max_tokens": BUDGET},
        {
            "system": TEXT | st.lists(obj({"type": st.just("text"), "text": TEXT}), max_size=1),
            "temperature": st.floats(0, 1),
            "top_p": TOP_P,
            "top_k": st.integers(1, 50),
            "stop_sequences": st.lists(st.text(min_size=1, max_size=8), max_size=2),
            "stream": st.booleans(),
            "tools": ANTHROPIC_TOOLS,
            "tool_choice": obj({"type": st.sampled_from(["auto", "none"])}),
        },
    )


def count_tokens(models: list[str]) -> Body:
    return body(
        {"model": st.sampled_from(models), "messages": ANTHROPIC_MESSAGES}, {"system": TEXT, "tools": ANTHROPIC_TOOLS}
    )


def embeddings(models: list[str]) -> Body:
    return body(
        {
            "model": st.sampled_from(models),
            "input": WORD | st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=3),
        },
        {
            "encoding_format": st.sampled_from(["float", "base64"]),
            "dimensions": st.integers(1, 64),
            "user": TEXT,
        },
    )


# API -> (path, well-formed bodies for the served model names)
APIS: dict[str, tuple[str, Callable[[list[str]], Body]]] = {
    "chat": ("/v1/chat/completions", chat),
    "completions": ("/v1/completions", completions),
    "responses": ("/v1/responses", responses),
    "messages": ("/v1/messages", messages),
    "count_tokens": ("/v1/messages/count_tokens", count_tokens),
    "embeddings": ("/v1/embeddings", embeddings),
}

"""Requests the gateway guard must pass (GOOD, one per API) and refuse (BAD: a change to a GOOD body and the
400's message): the unit tests check request_shapes.py with them, the integration tests the real gateway.
The BAD cases are wrong types and shapes of the kinds issue 31's probes found answered with a 5xx or a reset
connection before the guard checked every API (response_format, content parts, tools, prompt, input, ...)."""

from __future__ import annotations

HELLO = [{"role": "user", "content": "Say hello."}]
# a well-formed body per API for the demo models, small enough to cost the backend little (the guard tests and the
# fuzz test's bounds add one field to it)
BASE = {
    "chat": {"messages": HELLO, "max_tokens": 4},
    "completions": {"prompt": "Say hello.", "max_tokens": 4},
    "responses": {"input": "Say hello.", "max_output_tokens": 4},
    "messages": {"messages": HELLO, "max_tokens": 4},
    "count_tokens": {"messages": HELLO},
    "embeddings": {"input": "Say hello."},
}

GOOD = {
    "chat": {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "refusal", "refusal": "no"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "1", "content": "ok"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "tool_choice": "auto",
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
        "stop": ["x"],
        "logit_bias": {"1": -100},
        "chat_template_kwargs": {"enable_thinking": False},
        "vllm_own_field": 1,
    },
    "completions": {"model": "m", "prompt": ["a", "b"], "max_tokens": 3, "echo": False, "logprobs": 2, "best_of": 1},
    "responses": {
        "model": "m",
        "instructions": "be brief",
        "max_output_tokens": 9,
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
            {"type": "reasoning", "summary": [], "encrypted_content": "..."},
            {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "p"},
            {"type": "custom_tool_call_output", "call_id": "p", "output": "done"},
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {}}, {"type": "web_search"}],
        "tool_choice": {"type": "function", "name": "f"},
        "reasoning": {"effort": "low"},
        "include": ["x"],
    },
    "messages": {
        "model": "m",
        "max_tokens": 5,
        "system": [{"type": "text", "text": "s", "cache_control": {}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": ""},
                    {"type": "redacted_thinking", "data": "x"},
                    {"type": "tool_use", "id": "u", "name": "f", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "u",
                        "content": [{"type": "text", "text": "ok"}, {"type": "tool_reference", "tool_name": "f"}],
                    }
                ],
            },
        ],
        "tools": [{"name": "f", "input_schema": {}}, {"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "tool", "name": "f"},
        "stop_sequences": ["x"],
        "thinking": {"type": "enabled", "budget_tokens": 9},
    },
    "count_tokens": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "system": "s"},
    "embeddings": {"model": "m", "input": [[1, 2], [3]], "encoding_format": "float", "dimensions": 8},
}


BAD = [  # (api, field: value, the message); each from a probe that got a 5xx or a reset, or the list
    ("chat", {"messages": "hi"}, "`messages` must be a non-empty list of {role, content} objects"),
    ("chat", {"messages": []}, "`messages` must be a non-empty list"),
    ("chat", {"messages": [{"content": "x"}]}, "`messages[0].role` is required"),
    (
        "chat",
        {"messages": [{"role": "user", "content": 5}]},
        "`messages[0].content` must be a string, a list of content parts",
    ),
    (
        "chat",
        {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
        "`messages[0].content[0].text` is required",
    ),
    ("chat", {"messages": [{"role": "user", "content": [5]}]}, "`messages[0].content[0]` must be a content part"),
    (
        "chat",
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]},
        "`messages[0].tool_calls[0].function.arguments` must be a string",
    ),
    ("chat", {"tools": True}, "`tools` must be a list of {type: function"),
    ("chat", {"tools": [{"type": "function"}]}, "`tools[0].function` is required"),
    ("chat", {"tool_choice": "sometimes"}, "`tool_choice` must be auto, none, required"),
    ("chat", {"response_format": "json"}, "`response_format` must be {type: text | json_object | json_schema"),
    (
        "chat",
        {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
        "`response_format.json_schema.name` is required",
    ),
    ("chat", {"max_tokens": "many"}, "`max_tokens` must be an integer of at least 1"),
    ("chat", {"max_tokens": -5}, "`max_tokens` must be an integer of at least 1"),
    ("chat", {"n": 0}, "`n` must be an integer of at least 1"),
    ("chat", {"temperature": [1]}, "`temperature` must be a number"),
    ("chat", {"stream": "yes"}, "`stream` must be true or false"),
    ("chat", {"stream_options": []}, "`stream_options` must be an object"),
    ("chat", {"stop": [1]}, "`stop` must be a string or a list of strings"),
    ("chat", {"logit_bias": {"1": "up"}}, "`logit_bias` must be an object of token id -> bias"),
    ("chat", {"model": 7}, "`model` must be a string"),
    ("completions", {"prompt": 5}, "`prompt` must be a non-empty string or a non-empty list of strings"),
    ("completions", {"prompt": []}, "`prompt` must be a non-empty string or a non-empty list of strings"),
    ("completions", {"prompt": [{"a": 1}]}, "`prompt[0]` must be a non-empty string"),
    (
        "completions",
        {"prompt": [137]},
        "`prompt[0]` must be a non-empty string (this gateway does not take token ids)",
    ),  # the fuzz test: a 500
    (
        "completions",
        {"prompt": ["hi", ""], "stream": True},
        "`prompt[1]` must be a non-empty string",
    ),  # the fuzz test: a 500
    (
        "messages",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},  # the fuzz test: a 500
        "`messages[0].content[0].text` must be a string with non-whitespace text",
    ),
    (
        "messages",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": " \n"}]}]},  # the fuzz test: a 500
        "`messages[0].content[0].text` must be a string with non-whitespace text",
    ),
    ("completions", {"best_of": "2"}, "`best_of` must be an integer of at least 1"),
    (
        "completions",
        {"messages": [{"role": "user", "content": "hi"}]},
        "`messages` must be absent",
    ),  # the route walk: a 500
    ("completions", {"logprobs": True}, "`logprobs` must be an integer"),
    # chat fields LiteLLM handed the OpenAI SDK's completions call: each a 500 (the fuzz test's added fields)
    (
        "completions",
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
        "`tools` must be absent: tool calls are made on /v1/chat/completions",
    ),
    ("completions", {"tool_choice": "auto"}, "`tool_choice` must be absent"),
    ("messages", {"response_format": -7}, "`response_format` must be"),  # the fuzz test's added fields: a 500
    ("chat", {"structured_outputs": "x"}, "`structured_outputs` must be an object"),  # vLLM's own 500
    ("completions", {"structured_outputs": [1]}, "`structured_outputs` must be an object"),
    ("responses", {"structured_outputs": -7}, "`structured_outputs` must be an object"),
    ("messages", {"structured_outputs": "x"}, "`structured_outputs` must be an object"),
    ("completions", {"response_format": {"type": "json_object"}}, "`response_format` must be absent"),
    ("completions", {"max_completion_tokens": 4}, "`max_completion_tokens` must be absent: /v1/completions takes"),
    ("completions", {"reasoning_effort": "low"}, "`reasoning_effort` must be absent: a /v1/chat/completions field"),
    ("responses", {"input": 5}, "`input` must be a string or a list of input items"),
    ("responses", {"input": [{"role": "user", "content": 5}]}, "`input[0].content` must be a string or a list"),
    ("responses", {"input": [{"type": "function_call", "name": "f"}]}, "`input[0].arguments` is required"),
    ("responses", {"input": [7]}, "`input[0]` must be an input item"),
    ("responses", {"tools": [{"type": "function"}]}, "`tools[0].name` is required"),
    ("responses", {"tools": "all"}, "`tools` must be a list of tools"),
    ("responses", {"max_output_tokens": 0}, "`max_output_tokens` must be an integer of at least 1"),
    ("responses", {"text": {"format": "json"}}, "`text.format` must be {type"),
    ("responses", {"conversation": "conv_123"}, "`conversation` must be absent: this gateway keeps no conversations"),
    ("responses", {"conversation": {"id": "conv_123"}}, "continue with `previous_response_id`"),
    ("messages", {"messages": "x"}, "`messages` must be a non-empty list of {role, content} objects"),
    ("messages", {"messages": [{"role": 5, "content": "x"}]}, "`messages[0].role` must be a string"),
    (
        "messages",
        {"messages": [{"role": "user", "content": [{"type": "tool_use", "name": "f"}]}]},
        "`messages[0].content[0].id` is required",
    ),
    ("messages", {"system": 5}, "`system` must be a string or a list of text blocks"),
    ("messages", {"tools": [{"name": "f"}]}, "`tools[0]` must be a tool {name, input_schema}"),
    ("messages", {"tool_choice": "auto"}, "`tool_choice` must be {type: auto | any | tool | none"),
    ("messages", {"max_tokens": 0}, "`max_tokens` must be an integer of at least 1"),
    ("messages", {"stop_sequences": "x"}, "`stop_sequences` must be a list of strings"),
    ("count_tokens", {"messages": {}}, "`messages` must be a non-empty list"),
    ("count_tokens", {"model": None}, "`model` is required"),
    ("embeddings", {"input": 5}, "`input` must be a non-empty string, list of strings"),
    ("embeddings", {"input": ""}, "`input` must be a non-empty string"),
    ("embeddings", {"input": [["a"]]}, "`input` must be"),
    ("embeddings", {"input": [[]]}, "`input` must be a non-empty string"),  # the fuzz test (seed 7): a 500
    ("embeddings", {"encoding_format": "hex"}, "`encoding_format` must be one of float, base64"),
    # a content type unknown in its position (issue 48: a user message's was LiteLLM's 500, others its 400 or text)
    (
        "chat",
        {"messages": [{"role": "user", "content": [{"type": "bogus"}]}]},
        "`messages[0].content[0].type` must be one of text, image_url, input_audio, audio_url, video_url",
    ),
    (
        "chat",
        {"messages": [{"role": "user", "content": [{"type": "file", "file": {}}]}]},
        "`messages[0].content[0].type` must be one of text, image_url",
    ),
    (
        "chat",
        {"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": "x"}]}]},
        "`messages[0].content[0].type` must be one of text",
    ),
    (
        "chat",
        {"messages": [{"role": "assistant", "content": [{"type": "bogus"}]}]},
        "`messages[0].content[0].type` must be one of text, refusal, thinking",
    ),
    (
        "chat",
        {"messages": [{"role": "tool", "tool_call_id": "1", "content": [{"type": "bogus"}]}]},
        "`messages[0].content[0].type` must be one of text",
    ),
    (
        "chat",
        {"messages": [{"role": "developer", "content": [{"type": 3}]}]},
        "`messages[0].content[0]` must be a content part",
    ),
    (
        "responses",
        {"input": [{"role": "user", "content": [{"type": "bogus"}]}]},
        "`input[0].content[0].type` must be one of input_text, output_text, input_image, refusal",
    ),
    ("responses", {"input": [{"type": "bogus"}]}, "`input[0].type` must be one of message, function_call"),
    (
        "messages",
        {"messages": [{"role": "user", "content": [{"type": "bogus"}]}]},
        "`messages[0].content[0].type` must be one of text, image, tool_use, tool_result, thinking",
    ),
    (
        "messages",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "bogus"}]}],
                }
            ]
        },
        "`messages[0].content[0].content[0].type` must be one of text, image, document",
    ),
    (
        "messages",
        {"tool_choice": {"type": "thinking"}},
        "`tool_choice.type` must be one of auto, any, tool, none",
    ),  # the fuzz test: a 500
    (
        "chat",
        {"response_format": {"type": "xml"}},
        "`response_format.type` must be one of json_schema, text, json_object",
    ),
    (
        "responses",
        {"text": {"format": {"type": "xml"}}},
        "`text.format.type` must be one of text, json_object, json_schema",
    ),
    (
        "count_tokens",
        {"messages": [{"role": "user", "content": [{"type": "bogus"}]}]},
        "`messages[0].content[0].type` must be one of text, image",
    ),
]


def bounded(bounds) -> list[tuple[str, str]]:
    """(api, bound) for each API that takes the bounded field: /v1/completions takes no tools (a 400 of its own)."""
    return [(api, bound) for api in BASE for bound in bounds if (api, bound) != ("completions", "tools")]

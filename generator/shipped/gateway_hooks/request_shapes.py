"""The shape of a request body on each API the gateway serves, as tables: the field, what it must be.

``problem(api, body)`` names the first field that is wrong (with its path, e.g. ``messages[2].content[0].text``)
and what it must be, or returns None. gateway_guard.py answers it as a 400 before LiteLLM reads the body.
Checks only types and shapes (what LiteLLM, vLLM or an SDK would crash on or misread); values are the
backend's business, and fields not in a table pass through (vLLM takes many of its own).
Standard library only: unit tests and the fuzz test import it alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeGuard

Check = Callable[[object, str], "str | None"]  # (value, its path) -> "`path` must be ..." or None


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def kind(test: Callable[[object], bool], what: str) -> Check:
    return lambda v, at: None if test(v) else f"`{at}` must be {what}"


STRING = kind(lambda v: isinstance(v, str), "a string")
NAME = kind(lambda v: isinstance(v, str) and v != "", "a non-empty string")
NUMBER = kind(_is_number, "a number")
INTEGER = kind(_is_int, "an integer")
POSITIVE = kind(lambda v: _is_int(v) and v >= 1, "an integer of at least 1")
BOOL = kind(lambda v: isinstance(v, bool), "true or false")
OBJECT = kind(lambda v: isinstance(v, dict), "an object")
STRINGS = kind(lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), "a list of strings")
STOP = kind(
    lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(s, str) for s in v)),
    "a string or a list of strings",
)
LOGIT_BIAS = kind(
    lambda v: isinstance(v, dict) and all(_is_number(b) for b in v.values()), "an object of token id -> bias (a number)"
)
# non-empty: LiteLLM 1.108.7 answers an embeddings `input: [[]]` with a 500 ("list index out of range")
TOKENS = kind(
    lambda v: isinstance(v, list) and len(v) > 0 and all(_is_int(t) for t in v), "a non-empty list of token ids"
)


def absent(why: str) -> Check:
    """A field this API does not take, whatever its value, null too (`fields` asks it about a null one): `at` must
    be absent, and why."""
    check = kind(lambda v: False, f"absent: {why}")
    check.even_null = True  # type: ignore[attr-defined]  # a function's attribute, read by fields()
    return check


def one_of(*values: str) -> Check:
    return kind(lambda v: v in values, "one of " + ", ".join(values))


def either(what: str, *checks: Check) -> Check:
    """Any one of the checks passes; else, when exactly one alternative fits the value's outer shape, its complaint
    about something inside it (e.g. `messages[0].content[1].text`); else `at` must be `what`."""

    def check(v: object, at: str) -> str | None:
        whys = [c(v, at) for c in checks]
        if None in whys:
            return None
        inner = [w for w in whys if w and not w.startswith(f"`{at}` ")]
        return inner[0] if len(inner) == 1 else f"`{at}` must be {what}"

    return check


def list_of(item: Check, what: str, min_items: int = 0) -> Check:
    def check(v: object, at: str) -> str | None:
        if not isinstance(v, list) or len(v) < min_items:
            return f"`{at}` must be {what}"
        for i, x in enumerate(v):
            if (why := item(x, f"{at}[{i}]")) is not None:
                return why
        return None

    return check


def fields(spec: dict[str, Check], required: tuple[str, ...] = (), what: str = "an object") -> Check:
    """An object whose listed fields (when present and not null) pass their checks; `required` ones must be there."""

    def check(v: object, at: str) -> str | None:
        if not isinstance(v, dict):
            return f"`{at}` must be {what}" if at else "the body must be a JSON object"
        for key in required:
            if v.get(key) is None:
                return f"`{_join(at, key)}` is required"
        for key, sub in spec.items():
            if key not in v or (v[key] is None and not getattr(sub, "even_null", False)):
                continue
            if (why := sub(v[key], _join(at, key))) is not None:
                return why
        return None

    return check


def tagged(tag: str, variants: dict[str, Check], what: str, closed: bool = False) -> Check:
    """An object with a string `tag` (e.g. "type"); a known tag's variant checks the rest. Other tags pass, or, when
    `closed`, are refused naming the tags taken there (LiteLLM 1.108.7 answers some unknown content types with a 500,
    maps others silently to text)."""

    def check(v: object, at: str) -> str | None:
        if not isinstance(v, dict) or not isinstance(v.get(tag), str):
            return f"`{at}` must be {what}"
        variant = variants.get(v[tag])
        if variant is None:
            return f"`{_join(at, tag)}` must be one of {', '.join(variants)}" if closed else None
        return variant(v, at)

    return check


def by_field(key: str, variants: dict[str, Check], other: Check) -> Check:
    """An object checked by the variant its `key` field's value picks (e.g. a message by its role), else `other`."""

    def check(v: object, at: str) -> str | None:
        value = v.get(key) if isinstance(v, dict) else None
        picked = variants.get(value) if isinstance(value, str) else None
        return (picked or other)(v, at)

    return check


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def shape(checks: Check) -> Callable[[dict], str | None]:
    return lambda body: checks(body, "")


# --- OpenAI chat completions --------------------------------------------------------------------------------
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
URL = either("a string URL or {url}", STRING, fields({"url": STRING}, ("url",)))
TEXT_PART = fields({"text": STRING}, required=("text",))
# The content part types taken in each message position: what OpenAI's API documents there and vLLM 0.32 reads
# (vllm/renderers/chat_utils.py: MM_PARSER_MAP; "file" it does not); a media part still needs a model that takes it
# (vLLM answers 400 "... is not a multimodal model").
CHAT_PARTS = {
    "user": {
        "text": TEXT_PART,
        "image_url": fields({"image_url": URL}, required=("image_url",)),
        "input_audio": fields(
            {"input_audio": fields({"data": STRING, "format": STRING}, ("data",))}, required=("input_audio",)
        ),
        "audio_url": fields({"audio_url": URL}, required=("audio_url",)),
        "video_url": fields({"video_url": URL}, required=("video_url",)),
    },
    "assistant": {
        "text": TEXT_PART,
        "refusal": fields({"refusal": STRING}, required=("refusal",)),
        "thinking": fields({"thinking": STRING}, required=("thinking",)),
    },
    "system": {"text": TEXT_PART},
    "developer": {"text": TEXT_PART},
    "tool": {"text": TEXT_PART},
}


def chat_content(parts: dict[str, Check]) -> Check:
    return either(
        "a string, a list of content parts {type, ...} or null",
        STRING,
        list_of(tagged("type", parts, "a content part {type, ...}", closed=True), "a list"),
    )


TOOL_CALL = fields(
    {"id": STRING, "type": STRING, "function": fields({"name": NAME, "arguments": STRING}, ("name",))},
    required=("function",),
    what="{id, type: function, function: {name, arguments}}",
)
MESSAGE_FIELDS: dict[str, Check] = {
    "role": one_of(*CHAT_ROLES),
    "name": STRING,
    "tool_calls": list_of(TOOL_CALL, "a list of tool calls"),
    "tool_call_id": STRING,
    "reasoning_content": STRING,
}
CHAT_MESSAGE = by_field(
    "role",
    {
        role: fields(
            {**MESSAGE_FIELDS, "content": chat_content(parts)}, required=("role",), what="an object {role, content}"
        )
        for role, parts in CHAT_PARTS.items()
    },
    fields({**MESSAGE_FIELDS, "content": STRING}, required=("role",), what="an object {role, content}"),
)
FUNCTION = fields(
    {"name": NAME, "description": STRING, "parameters": OBJECT, "strict": BOOL}, ("name",), what="{name, parameters}"
)
CHAT_TOOL = fields(
    {"type": STRING, "function": FUNCTION},
    required=("function",),
    what="{type: function, function: {name, parameters}}",
)
CHAT_TOOL_CHOICE = either(
    "auto, none, required or {type: function, function: {name}}",
    one_of("auto", "none", "required"),
    fields({"type": STRING, "function": fields({"name": NAME}, ("name",))}, ("function",)),
)
RESPONSE_FORMAT = tagged(
    "type",
    {
        "json_schema": fields(
            {"json_schema": fields({"name": NAME, "schema": OBJECT, "strict": BOOL}, ("name",), what="{name, schema}")},
            required=("json_schema",),
        ),
        "text": fields({}),
        "json_object": fields({}),
        "structural_tag": fields({}),  # the last: vLLM's own
    },
    "{type: text | json_object | json_schema, ...}",
    closed=True,
)
STREAM_OPTIONS = fields({"include_usage": BOOL, "continuous_usage_stats": BOOL})

SAMPLING = {  # fields the OpenAI APIs (and vLLM's extensions of them) share
    "model": STRING,
    "user": STRING,
    "metadata": OBJECT,
    "stream": BOOL,
    "stream_options": STREAM_OPTIONS,
    "temperature": NUMBER,
    "top_p": NUMBER,
    "min_p": NUMBER,
    "presence_penalty": NUMBER,
    "frequency_penalty": NUMBER,
    "repetition_penalty": NUMBER,
    "top_k": INTEGER,
    "seed": INTEGER,
    "n": POSITIVE,
    "max_tokens": POSITIVE,
    "stop": STOP,
    "logit_bias": LOGIT_BIAS,
    # vLLM's own; anything but an object is vLLM 0.32's 500 ("'int' object has no attribute 'get'") on every API
    "structured_outputs": OBJECT,
}
CHAT = shape(
    fields(
        {
            **SAMPLING,
            "messages": list_of(CHAT_MESSAGE, "a non-empty list of {role, content} objects", min_items=1),
            "max_completion_tokens": POSITIVE,
            "logprobs": BOOL,
            "top_logprobs": INTEGER,
            "parallel_tool_calls": BOOL,
            "tools": list_of(CHAT_TOOL, "a list of {type: function, function: {name, parameters}}"),
            "tool_choice": CHAT_TOOL_CHOICE,
            "response_format": RESPONSE_FORMAT,
            "reasoning_effort": STRING,
            "chat_template_kwargs": OBJECT,
        },
        required=("model", "messages"),
    )
)

# --- OpenAI (legacy) completions ----------------------------------------------------------------------------
# token ids: LiteLLM 1.108.7 cannot pass them on to a vLLM backend ("Unmapped prompt format", a 500); an empty
# prompt streamed: vLLM's "The decoder prompt cannot be empty" comes mid-stream, and LiteLLM makes it a 500
PROMPT = either(
    "a non-empty string or a non-empty list of strings",
    NAME,
    list_of(
        kind(lambda v: isinstance(v, str) and v != "", "a non-empty string (this gateway does not take token ids)"),
        "",
        min_items=1,
    ),
)

# OpenAI chat fields LiteLLM 1.108.7 hands the OpenAI SDK's completions.create() as arguments on /v1/completions,
# which takes none of them: each was a 500 ("got an unexpected keyword argument"), found by the fuzz test's added
# fields. tests/unit/test_request_guard.py checks this list against LiteLLM's own list of chat fields.
TOOLS_ELSEWHERE = absent("tool calls are made on /v1/chat/completions, /v1/responses or /v1/messages")
CHAT_ONLY = {
    **dict.fromkeys(("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"), TOOLS_ELSEWHERE),
    "response_format": absent("/v1/completions takes vLLM's `structured_outputs` (or use /v1/chat/completions)"),
    "max_completion_tokens": absent("/v1/completions takes `max_tokens`"),
    "top_logprobs": absent("/v1/completions takes `logprobs`, an integer"),
    **dict.fromkeys(
        (
            "reasoning_effort",
            "thinking",
            "verbosity",
            "modalities",
            "audio",
            "prediction",
            "web_search_options",
            "include_server_side_tool_invocations",
            "store",
            "service_tier",
            "safety_identifier",
            "prompt_cache_key",
            "prompt_cache_retention",
        ),
        absent("a /v1/chat/completions field, not taken on /v1/completions"),
    ),
}
COMPLETIONS = shape(
    fields(
        {
            **SAMPLING,
            "prompt": PROMPT,
            "best_of": POSITIVE,
            "logprobs": INTEGER,
            "echo": BOOL,
            "suffix": STRING,
            # LiteLLM 1.108.7 passes its own messages on as well: a 500 "got multiple values for keyword argument"
            "messages": absent("/v1/completions takes `prompt` (messages go to /v1/chat/completions)"),
            **CHAT_ONLY,
        },
        required=("model", "prompt"),
    )
)

# --- OpenAI responses ---------------------------------------------------------------------------------------
RESPONSES_PART = tagged(
    "type",
    {
        "input_text": fields({"text": STRING}, ("text",)),
        "output_text": fields({"text": STRING}, ("text",)),
        "input_image": fields({"image_url": STRING, "file_id": STRING, "detail": STRING}),
        "refusal": fields({"refusal": STRING}, ("refusal",)),
    },
    "a content part {type, ...}",
    closed=True,
)
RESPONSES_MESSAGE = fields(
    {
        "role": one_of("user", "assistant", "system", "developer"),
        "content": either("a string or a list of content parts {type, ...}", STRING, list_of(RESPONSES_PART, "")),
    },
    required=("role", "content"),
)
RESPONSES_ITEMS = tagged(
    "type",
    {
        "message": RESPONSES_MESSAGE,
        "function_call": fields(
            {"name": NAME, "arguments": STRING, "call_id": STRING}, ("name", "arguments", "call_id")
        ),
        "function_call_output": fields(
            {"call_id": STRING, "output": either("", STRING, list_of(OBJECT, ""))}, ("call_id", "output")
        ),
        "reasoning": fields({"summary": list_of(OBJECT, "a list")}),
        # Codex's freeform tools (apply_patch) and the web search it may have done: LiteLLM's translation reads both
        "custom_tool_call": fields({"name": NAME, "input": STRING, "call_id": STRING}, ("name", "call_id")),
        "custom_tool_call_output": fields({"call_id": STRING}, ("call_id",)),
        "web_search_call": fields({}),
    },
    "an input item {type, ...}",
    closed=True,
)


def responses_item(v: object, at: str) -> str | None:
    """An input item: {type, ...}, or a message {role, content} (its type may be left out)."""
    if isinstance(v, dict) and "type" in v:
        return RESPONSES_ITEMS(v, at)
    what = "an input item: a message {role, content} or {type, ...}"
    return RESPONSES_MESSAGE(v, at) if isinstance(v, dict) else f"`{at}` must be {what}"


RESPONSES_ITEM: Check = responses_item
RESPONSES_TOOL = tagged(
    "type",
    {
        "function": fields({"name": NAME, "parameters": OBJECT, "description": STRING, "strict": BOOL}, ("name",)),
    },
    "a tool {type: function, name, parameters}",
)
RESPONSES = shape(
    fields(
        {
            "model": STRING,
            "user": STRING,
            "metadata": OBJECT,
            "stream": BOOL,
            "store": BOOL,
            "background": BOOL,
            "temperature": NUMBER,
            "top_p": NUMBER,
            "top_k": INTEGER,
            "min_p": NUMBER,
            "seed": INTEGER,
            "presence_penalty": NUMBER,
            "frequency_penalty": NUMBER,
            "repetition_penalty": NUMBER,
            "structured_outputs": OBJECT,
            "input": either(
                "a string or a list of input items (messages {role, content} or {type, ...})",
                STRING,
                list_of(RESPONSES_ITEM, ""),
            ),
            "instructions": STRING,
            "max_output_tokens": POSITIVE,
            "top_logprobs": INTEGER,
            "tools": list_of(RESPONSES_TOOL, "a list of tools {type, ...}"),
            "tool_choice": either(
                "auto, none, required or {type, ...}", one_of("auto", "none", "required"), tagged("type", {}, "")
            ),
            "parallel_tool_calls": BOOL,
            "previous_response_id": STRING,
            # LiteLLM 1.108.7 serves no /v1/conversations and vLLM ignores the field: the context would be lost
            # without a word, so it is refused (continue with previous_response_id: docs/apis.md)
            "conversation": absent(
                "this gateway keeps no conversations; continue with `previous_response_id` (docs/apis.md)"
            ),
            "include": STRINGS,
            "truncation": STRING,
            "text": fields(
                {
                    "format": tagged(
                        "type",
                        {
                            "text": fields({}),
                            "json_object": fields({}),
                            "json_schema": fields({"name": STRING, "schema": OBJECT}),
                        },
                        "{type: text | json_object | json_schema, ...}",
                        closed=True,
                    )
                }
            ),
            "reasoning": fields({"effort": STRING, "summary": STRING}),
        },
        required=("model", "input"),
    )
)

# --- Anthropic messages (and count_tokens) ------------------------------------------------------------------
SOURCE_BLOCK = fields(
    {"source": fields({"type": STRING, "media_type": STRING, "data": STRING, "url": STRING}, ("type",))}, ("source",)
)
# inside a tool_result: what Claude Code's tools return (text, an image it read, a document; tool search's references)
RESULT_BLOCKS: dict[str, Check] = {
    "text": fields({"text": STRING}, ("text",)),
    "image": SOURCE_BLOCK,
    "document": SOURCE_BLOCK,
    "search_result": fields({}),
    "tool_reference": fields({}),
}
BLOCK = tagged(
    "type",
    {
        # Anthropic refuses text blocks without non-whitespace text; LiteLLM drops them (empty or blank), and a message
        # left empty is a 500 in its translation
        "text": fields(
            {"text": kind(lambda v: isinstance(v, str) and v.strip() != "", "a string with non-whitespace text")},
            ("text",),
        ),
        "image": SOURCE_BLOCK,
        "tool_use": fields({"id": STRING, "name": NAME, "input": OBJECT}, ("id", "name", "input")),
        "tool_result": fields(
            {
                "tool_use_id": STRING,
                "is_error": BOOL,
                "content": either(
                    "a string or a list of blocks {type, ...}",
                    STRING,
                    list_of(tagged("type", RESULT_BLOCKS, "a block {type, ...}", closed=True), ""),
                ),
            },
            ("tool_use_id",),
        ),
        "thinking": fields({"thinking": STRING, "signature": STRING}, ("thinking",)),
        "redacted_thinking": fields({"data": STRING}),
        "document": SOURCE_BLOCK,
        # Anthropic's server tools (web search) as Claude Code sends them back in its history
        "server_tool_use": fields({"id": STRING, "name": NAME}, ("id", "name")),
        "web_search_tool_result": fields({"tool_use_id": STRING}, ("tool_use_id",)),
    },
    "a content block {type, ...}",
    closed=True,
)
ANTHROPIC_MESSAGE = fields(
    {
        # a string, not only user/assistant: Claude Code 2.1 sends other roles too (LiteLLM's adapter takes them)
        "role": STRING,
        "content": either("a string or a list of content blocks {type, ...}", STRING, list_of(BLOCK, "")),
    },
    required=("role", "content"),
    what="an object {role, content}",
)
ANTHROPIC_TOOL = either(
    "a tool {name, input_schema} or a server tool {type, name}",
    fields({"name": NAME, "input_schema": OBJECT, "description": STRING}, ("name", "input_schema")),
    fields({"type": NAME, "name": NAME}, ("type", "name")),
)
MESSAGES_FIELDS: dict[str, Check] = {
    "model": STRING,
    "metadata": OBJECT,
    "messages": list_of(ANTHROPIC_MESSAGE, "a non-empty list of {role, content} objects", min_items=1),
    "system": either(
        "a string or a list of text blocks {type: text, text}",
        STRING,
        list_of(fields({"type": one_of("text"), "text": STRING}, ("type", "text")), ""),
    ),
    "tools": list_of(ANTHROPIC_TOOL, "a list of tools {name, input_schema}"),
    # closed: another type (e.g. "thinking") is LiteLLM 1.108.7's 500 "Incompatible tool choice param" (the fuzz test)
    "tool_choice": tagged(
        "type",
        {"auto": fields({}), "any": fields({}), "tool": fields({"name": NAME}, ("name",)), "none": fields({})},
        "{type: auto | any | tool | none, ...}",
        closed=True,
    ),
    "thinking": fields({"type": STRING, "budget_tokens": INTEGER}),
}
MESSAGES = shape(
    fields(
        {
            **MESSAGES_FIELDS,
            "max_tokens": POSITIVE,
            "stop_sequences": STRINGS,
            "stream": BOOL,
            "temperature": NUMBER,
            "top_p": NUMBER,
            "top_k": INTEGER,
            # chat fields LiteLLM passes on to the chat call it makes: a response_format that is no {type, ...} was
            # its 500 "Unsupported response_format type" (the fuzz test's added fields, 2026-11-28)
            "response_format": RESPONSE_FORMAT,
            "structured_outputs": OBJECT,
        },
        required=("model", "messages"),
    )
)
COUNT_TOKENS = shape(fields(MESSAGES_FIELDS, required=("model", "messages")))

# --- OpenAI embeddings --------------------------------------------------------------------------------------
EMBEDDINGS = shape(
    fields(
        {
            "model": STRING,
            "user": STRING,
            "dimensions": POSITIVE,
            "encoding_format": one_of("float", "base64"),
            "input": either(
                "a non-empty string, list of strings, list of token ids or list of token id lists",
                NAME,
                list_of(STRING, "", min_items=1),
                list_of(INTEGER, "", min_items=1),
                list_of(TOKENS, "", min_items=1),
            ),
        },
        required=("model", "input"),
    )
)

# --- rerank (Cohere / Jina shape; LiteLLM's /rerank, /v1/rerank, /v2/rerank) -----------------------------------
RERANK_DOCUMENT = either("a string or an object {text}", STRING, OBJECT)
RERANK = shape(
    fields(
        {
            "model": STRING,
            "query": NAME,
            "top_n": POSITIVE,
            "return_documents": BOOL,
            "rank_fields": STRINGS,
            "documents": list_of(RERANK_DOCUMENT, "a non-empty list of strings or objects {text}", min_items=1),
        },
        required=("model", "query", "documents"),
    )
)

# API name -> (the paths it is served on, its check). Paths are matched by their end, so that LiteLLM's
# aliases (/chat/completions, /v1/chat/completions, /openai/deployments/<m>/chat/completions) share one check.
APIS: dict[str, tuple[tuple[str, ...], Callable[[dict], str | None]]] = {
    "chat": (("/chat/completions",), CHAT),
    "completions": (("/completions",), COMPLETIONS),
    "responses": (("/responses",), RESPONSES),
    "count_tokens": (("/messages/count_tokens",), COUNT_TOKENS),
    "messages": (("/messages",), MESSAGES),
    "embeddings": (("/embeddings",), EMBEDDINGS),
    "rerank": (("/rerank",), RERANK),
}


def api_of(path: str) -> str | None:
    """The API a POST path is, by its end (first match wins: chat before completions)."""
    path = path.rstrip("/")
    for name, (ends, _) in APIS.items():
        if path.endswith(ends):
            return name
    return None


def problem(api: str, body: object) -> str | None:
    """The first thing wrong with this API's request body, or None."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    return APIS[api][1](body)

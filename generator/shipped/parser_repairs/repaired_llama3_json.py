"""llama3_json (Llama 3.1, 3.2, 3.3 JSON tool calls), repaired: streamed calls as a diff of the text so far
(repaired_calls.py).

    {"name": "NAME", "parameters": ARGUMENTS}; {"name": ...}

Upstream's whole-answer parsing is kept; only `extract_tool_calls_streaming` is replaced. Upstream streams the
arguments by re-serialising a partial-JSON parse and diffing it against the last one; this reads the objects' text
instead: a call's name once its string is whole, its arguments as the raw text of the "parameters" (or "arguments")
value so far, which only grows. As upstream, the answer is calls only when it starts with <|python_tag|> or "{".
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from repaired_calls import DiffStreaming, Progress
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager
from vllm.tool_parsers.llama_tool_parser import Llama3JsonToolParser

WHITESPACE = " \t\r\n"
SCALAR_END = WHITESPACE + ",}]"


def skip(text: str, i: int, chars: str = WHITESPACE) -> int:
    while i < len(text) and text[i] in chars:
        i += 1
    return i


def value_end(text: str, start: int) -> int | None:
    """The index just past the JSON value that starts at text[start]; None while it is not whole yet."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
                if depth == 0:
                    return i + 1
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        elif depth == 0 and c in SCALAR_END:
            return i  # a number, true, false or null ends where something else begins
    return None


def members(text: str, start: int) -> Iterator[tuple[str, int, int | None]]:
    """(key, where its value starts, where it ends or None) of the object at text[start], as far as it goes."""
    i = start + 1
    while True:
        i = skip(text, i, WHITESPACE + ",")
        if i >= len(text) or text[i] != '"':
            return
        key_end = value_end(text, i)
        if key_end is None:
            return
        colon = skip(text, key_end)
        if colon >= len(text) or text[colon] != ":":
            return
        value = skip(text, colon + 1)
        if value >= len(text):
            return
        end = value_end(text, value)
        yield json.loads(text[i:key_end]), value, end
        if end is None:
            return
        i = end


def call_progress(text: str, start: int, done: bool) -> Progress:
    name, arguments = None, ""
    for key, value, end in members(text, start):
        if key == "name" and end is not None and text[value] == '"':
            name = json.loads(text[value:end])
        elif key in ("parameters", "arguments"):
            arguments = text[value:end] if end is not None else text[value:]
    return Progress(name, arguments, done=done)


class RepairedLlama3JsonToolParser(DiffStreaming, Llama3JsonToolParser):
    def progress(self, text: str) -> tuple[str, list[Progress]]:
        if not (text.startswith(self.bot_token) or text.startswith("{")):
            return text, []
        calls, i = [], len(self.bot_token) if text.startswith(self.bot_token) else 0
        while True:
            i = skip(text, i, WHITESPACE + ";")
            if i >= len(text) or text[i] != "{":
                break
            end = value_end(text, i)
            calls.append(call_progress(text, i, done=end is not None))
            if end is None:
                break
            i = end
        return "", calls


ToolParserManager.register_module(["llama3_json", "llama4_json"], force=True, module=RepairedLlama3JsonToolParser)

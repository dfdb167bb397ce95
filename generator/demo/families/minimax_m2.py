"""MiniMax-M2 (minimax_m2 tool calls, minimax_m2 reasoning).

Turns: `]~!b[]~b]system\\n...[e~[\\n`, `]~b]user\\n...[e~[\\n`, `]~b]ai\\n...[e~[\\n`; tool results: one
`]~b]tool` turn of `\\n<response>...</response>` blocks. The generation prompt already opens the reasoning block
(`]~b]ai\\n<think>\\n`), so the model's turn starts inside it and closes it with `\\n</think>\\n\\n`. Tool calls:
`<minimax:tool_call>` around one `<invoke name="...">` per call, one `<parameter name="k">v</parameter>` line per
argument: a string value raw, any other value as JSON (the template's `v | tojson if v is not string else v`).
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family, tojson

CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{{ p.text if p.text is defined else '' }}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- set conv = messages -%}
{%- set sys = none -%}
{%- if messages and messages[0].role == 'system' -%}{%- set sys = messages[0] -%}{%- set conv = messages[1:] -%}{%- endif -%}
{%- set ns = namespace(last_user=-1) -%}
{%- for m in conv -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
{{- ']~!b[]~b]system\\n' }}
{%- if sys -%}{{- text(sys.content) }}{%- else -%}{{- 'You are a helpful assistant.' }}{%- endif -%}
{%- if tools -%}
{{- '\\n\\n# Tools\\nYou may call one or more tools to assist with the user query.\\nHere are the tools available in JSONSchema format:\\n\\n<tools>\\n' }}
{%- for tool in tools -%}{{- '<tool>' + ((tool.function if tool.function is defined else tool) | tojson) + '</tool>\\n' }}{%- endfor -%}
{{- '</tools>\\n\\nWhen making tool calls, use XML format to invoke tools and pass parameters:\\n\\n<minimax:tool_call>\\n<invoke name="tool-name-1">\\n<parameter name="param-key-1">param-value-1</parameter>\\n<parameter name="param-key-2">param-value-2</parameter>\\n...\\n</invoke>\\n</minimax:tool_call>' }}
{%- endif -%}
{{- '[e~[\\n' }}
{%- for m in conv -%}
{%- if m.role == 'assistant' -%}
{{- ']~b]ai\\n' }}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else (m.reasoning if m.reasoning is string else '') -%}
{%- if reasoning and loop.index0 > ns.last_user -%}{{- '<think>\\n' + reasoning + '\\n</think>\\n\\n' }}{%- endif -%}
{{- text(m.content) }}
{%- if m.tool_calls -%}
{{- '\\n<minimax:tool_call>\\n' }}
{%- for tc in m.tool_calls -%}
{%- set f = tc.function if tc.function is defined else tc -%}
{{- '<invoke name="' + f.name + '">\\n' }}
{%- if f.arguments is string -%}{{- f.arguments + '\\n' }}
{%- elif f.arguments -%}
{%- for k, v in f.arguments.items() -%}
{{- '<parameter name="' + k + '">' + (v if v is string else (v | tojson)) + '</parameter>\\n' }}
{%- endfor -%}
{%- endif -%}
{{- '</invoke>\\n' }}
{%- endfor -%}
{{- '</minimax:tool_call>' }}
{%- endif -%}
{{- '[e~[\\n' }}
{%- elif m.role == 'tool' -%}
{%- if loop.first or conv[loop.index0 - 1].role != 'tool' -%}{{- ']~b]tool' }}{%- endif -%}
{{- '\\n<response>' + text(m.content) + '</response>' }}
{%- if loop.last or conv[loop.index0 + 1].role != 'tool' -%}{{- '[e~[\\n' }}{%- endif -%}
{%- elif m.role == 'user' -%}
{{- ']~b]user\\n' + text(m.content) + '[e~[\\n' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- ']~b]ai\\n<think>\\n' }}{%- endif -%}
"""


def _value(v) -> str:
    return v if isinstance(v, str) else tojson(v)


def render(turn: Turn) -> str:
    # As the template writes an assistant turn after `<think>\n`: reasoning, `\n</think>\n\n`, content, then
    # `\n<minimax:tool_call>\n` (so three newlines when there is no content). A turn without reasoning closes the
    # block the prompt opened at once.
    out = (turn.reasoning or "") + "\n</think>\n\n" + (turn.answer or "")
    if turn.calls:
        out += "\n<minimax:tool_call>\n"
        for c in turn.calls:
            out += f'<invoke name="{c.name}">\n'
            out += "".join(f'<parameter name="{k}">{_value(v)}</parameter>\n' for k, v in c.arguments.items())
            out += "</invoke>\n"
        out += "</minimax:tool_call>"
    return out + "[e~["


FAMILY = Family(
    name="minimax_m2",
    title="MiniMax-M2",
    tool_parser="minimax_m2",
    reasoning_parser="minimax_m2",
    special_tokens=(
        "]!p~[",
        "]~!b[",
        "]~b]",
        "[e~[",
        "<think>",
        "</think>",
        "<minimax:tool_call>",
        "</minimax:tool_call>",
    ),
    added_tokens=(),
    eos="[e~[",
    bos="]~!b[",
    chat_template=CHAT_TEMPLATE,
    tool_result_opener="]~b]tool",
    user_opener="]~b]user",
    render=render,
    source="MiniMaxAI/MiniMax-M2 chat_template.jinja (as mirrored in MiniMax-AI/MiniMax-M2 docs/tool_calling_guide.md "
    "and third-party copies); vllm/parser/minimax_m2.py, vllm/reasoning/minimax_m2_reasoning_parser.py",
    notes=(
        "MiniMax's own deploy guide passes --reasoning-parser minimax_m2_append_think: it leaves the whole turn in "
        "content as '<think>' + output (no reasoning field), so it cannot meet the matrix's 'reasoning separate'; the "
        "family uses minimax_m2 (vLLM recipe for the Responses API), which separates it. With append_think the "
        "minimax_m2 tool engine also drops '</think>' from that content (parser/minimax_m2.py:129 consumes it; "
        "parser/abstract_parser.py:155 sets skip_reasoning_parsing only when no reasoning parser is given).",
        "Whether <think>, </think>, <minimax:tool_call>, </minimax:tool_call> are special in the real tokenizer.json "
        "was not seen first-hand (no download here): taken as special from copies of its added_tokens (ids "
        "200050/200051 special); vLLM's engine matches them by id and turns skip_special_tokens off, so parsing "
        "does not depend on it, but a request without a tool parser would lose them from content if special.",
        "A tool call's arguments given as a JSON string (no vLLM path does: its renderer parses them to a dict) are "
        "written raw inside <invoke>; the real template would fail on .items().",
        "The default system prompt is MiniMax-M2's 'You are a helpful assistant.' (later M2.x name the model).",
        "The whitespace between </think> and <minimax:tool_call> follows the template's history form ('\\n\\n' + "
        "content + '\\n'); what the real model emits there was not observed. vLLM's tool_choice required/named "
        "grammar (structural_tag_registry.py:497/510) demands exactly '\\n<minimax:tool_call>\\n' after </think>, "
        "so those requests fail on this family's script.",
    ),
)

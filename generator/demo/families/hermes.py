"""Qwen3 (hermes tool calls, qwen3 reasoning): the demo's own pair, in the family machinery.

Tool calls: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, one block per call, separated by a
newline; reasoning in `<think>...</think>` at the start of every turn, empty when the model does not think (Qwen3's
template does not open it in the generation prompt). Tool results: a user turn of `<tool_response>` blocks.
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family, tojson

CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{{ p.text if p.text is defined else '' }}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages and messages[0].role == 'system' %}{{- text(messages[0].content) + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif messages and messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + text(messages[0].content) + '<|im_end|>\\n' }}
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'system' and loop.first %}
{%- elif m.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\\n<tool_response>\\n' + text(m.content) + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- elif m.role == 'assistant' %}
{{- '<|im_start|>assistant\\n' }}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else (m.reasoning if m.reasoning is string else '') %}
{%- if reasoning %}{{- '<think>\\n' + reasoning.strip() + '\\n</think>\\n\\n' }}{%- endif %}
{{- text(m.content) }}
{%- for tc in (m.tool_calls or []) %}
{%- set f = tc.function if tc.function is defined else tc %}
{%- if loop.first and text(m.content) %}{{- '\\n' }}{%- elif not loop.first %}{{- '\\n' }}{%- endif %}
{{- '<tool_call>\\n{"name": "' + f.name + '", "arguments": ' }}
{%- if f.arguments is string %}{{- f.arguments }}{%- else %}{{- f.arguments | tojson }}{%- endif %}
{{- '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- else %}
{{- '<|im_start|>' + m.role + '\\n' + text(m.content) + '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""


def render(turn: Turn) -> str:
    # Qwen3 in thinking mode always writes a think block, an empty one when it does not think
    out = f"<think>\n{turn.reasoning or ''}\n</think>\n\n"
    out += "\n".join(
        '<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>' % (c.name, tojson(c.arguments)) for c in turn.calls
    )
    return out + (turn.answer or "") + "<|im_end|>"


FAMILY = Family(
    name="hermes",
    title="Qwen3",
    tool_parser="hermes",
    reasoning_parser="qwen3",
    special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
    added_tokens=("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"),
    eos="<|im_end|>",
    stop_tokens=("<|endoftext|>",),
    chat_template=CHAT_TEMPLATE,
    tool_result_opener="<tool_response>",
    user_opener="<|im_start|>user",
    render=render,
    source="Qwen3's tokenizer_config.json chat template; vllm/tool_parsers/hermes_tool_parser.py, vllm/parser/qwen3.py",
)

"""Qwen3-Coder (qwen3_coder tool calls, no reasoning): XML calls, one `<tool_call>` block per call.

`<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>`; a value is text
(strings bare, numbers / booleans as written, objects and arrays as JSON), typed by vLLM against the request's schema.
The tools are listed in the system prompt as XML (`<function><name>...`); tool results are a user turn of
`<tool_response>` blocks. The Instruct models do not think: no reasoning parser, the template drops reasoning history.
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family, tojson

CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{{ p.text if p.text is defined else '' }}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- macro extra_keys(d, handled) -%}
{%- if d is mapping -%}{%- for k in d if k not in handled -%}
{%- if d[k] is mapping or (d[k] is sequence and d[k] is not string) -%}{{- '\\n<' ~ k ~ '>' ~ (d[k] | tojson) ~ '</' ~ k ~ '>' }}
{%- else -%}{{- '\\n<' ~ k ~ '>' ~ (d[k] | string) ~ '</' ~ k ~ '>' }}{%- endif -%}
{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- if messages and messages[0].role == 'system' %}{%- set system_message = text(messages[0].content) %}{%- set loop_messages = messages[1:] %}
{%- else %}{%- set loop_messages = messages %}{%- endif %}
{%- if system_message is defined %}{{- '<|im_start|>system\\n' + system_message }}
{%- elif tools %}{{- '<|im_start|>system\\nYou are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.' }}
{%- endif %}
{%- if tools %}
{{- '\\n\\n# Tools\\n\\nYou have access to the following functions:\\n\\n<tools>' }}
{%- for tool in tools %}
{%- set t = tool.function if tool.function is defined else tool %}
{{- '\\n<function>\\n<name>' ~ t.name ~ '</name>' }}
{%- if t.description is defined %}{{- '\\n<description>' ~ (t.description | trim) ~ '</description>' }}{%- endif %}
{{- '\\n<parameters>' }}
{%- if t.parameters is mapping and t.parameters.properties is mapping %}
{%- for pname, pfields in t.parameters.properties | items %}
{{- '\\n<parameter>\\n<name>' ~ pname ~ '</name>' }}
{%- if pfields.type is defined %}{{- '\\n<type>' ~ (pfields.type | string) ~ '</type>' }}{%- endif %}
{%- if pfields.description is defined %}{{- '\\n<description>' ~ (pfields.description | trim) ~ '</description>' }}{%- endif %}
{{- extra_keys(pfields, ['name', 'type', 'description']) }}
{{- '\\n</parameter>' }}
{%- endfor %}
{%- endif %}
{{- extra_keys(t.parameters, ['type', 'properties']) }}
{{- '\\n</parameters>' }}
{{- '\\n</function>' }}
{%- endfor %}
{{- '\\n</tools>\\n\\nIf you choose to call a function ONLY reply in the following format with NO suffix:\\n\\n<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n<parameter=example_parameter_2>\\nThis is the value for the second parameter\\nthat can span\\nmultiple lines\\n</parameter>\\n</function>\\n</tool_call>\\n\\n<IMPORTANT>\\nReminder:\\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\\n- Required parameters MUST be specified\\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\\n</IMPORTANT>' }}
{%- endif %}
{%- if system_message is defined or tools %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- for m in loop_messages %}
{%- if m.role == 'assistant' and m.tool_calls %}
{{- '<|im_start|>assistant' }}
{%- if text(m.content) | trim %}{{- '\\n' + (text(m.content) | trim) + '\\n' }}{%- endif %}
{%- for tc in m.tool_calls %}
{%- set f = tc.function if tc.function is defined else tc %}
{{- '\\n<tool_call>\\n<function=' + f.name + '>\\n' }}
{%- if f.arguments is mapping %}
{%- for k, v in f.arguments | items %}
{{- '<parameter=' + k + '>\\n' }}
{{- (v | tojson) if (v is mapping or (v is sequence and v is not string)) else (v | string) }}
{{- '\\n</parameter>\\n' }}
{%- endfor %}
{%- endif %}
{{- '</function>\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif m.role == 'tool' %}
{%- if loop.first or loop_messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user\\n' }}{%- endif %}
{{- '<tool_response>\\n' + text(m.content) + '\\n</tool_response>\\n' }}
{%- if loop.last or loop_messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- else %}
{{- '<|im_start|>' + m.role + '\\n' + text(m.content) + '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""


def value(v) -> str:
    """A parameter value as the model writes it: strings bare, JSON for the rest (booleans `true`, not the
    template's Python `True`: the model writes JSON literals, and vLLM's schema coercion reads both)."""
    return v if isinstance(v, str) else tojson(v)


def call(c) -> str:
    params = "".join(f"<parameter={k}>\n{value(v)}\n</parameter>\n" for k, v in c.arguments.items())
    return f"<tool_call>\n<function={c.name}>\n{params}</function>\n</tool_call>"


def render(turn: Turn) -> str:
    return "\n".join(call(c) for c in turn.calls) + (turn.answer or "") + "<|im_end|>"


FAMILY = Family(
    name="qwen3_coder",
    title="Qwen3-Coder",
    tool_parser="qwen3_coder",
    reasoning_parser=None,
    special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
    added_tokens=("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"),
    eos="<|im_end|>",
    stop_tokens=("<|endoftext|>",),
    chat_template=CHAT_TEMPLATE,
    tool_result_opener="<tool_response>",
    user_opener="<|im_start|>user",
    render=render,
    source="Qwen3-Coder-30B-A3B/480B-A35B-Instruct tokenizer_config.json chat template (vLLM "
    "examples/tool_chat_template_qwen3coder.jinja); vllm/parser/qwen3.py, "
    "vllm/tool_parsers/qwen3_engine_tool_parser.py",
    notes=(
        "The published template writes a history boolean as Python `True` (`| string`); render() writes `true`.",
        "The published template drops reasoning history and cannot render arguments given as a JSON string "
        "(`| items` on a str); vLLM always passes a dict, this template skips a string's parameters.",
    ),
)

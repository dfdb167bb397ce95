"""GLM-4.7 (glm47 tool calls, glm45 reasoning): GLM-4.7-Flash as `vllm serve --tool-call-parser glm47
--reasoning-parser glm45` runs it.

Tool calls: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`, no newlines anywhere
(GLM-4.5/4.6 had them), consecutive calls back to back; a string value is written raw, any other value as JSON
(`tojson(ensure_ascii=False)`). The generation prompt `<|assistant|><think>` already opens the reasoning, so the
model writes `REASONING</think>` and then the answer or the calls; a turn without reasoning is an empty one
(`</think>` straight away). A turn has no end marker of its own: the model stops on the next role token,
`<|observation|>` after tool calls, `<|user|>` after an answer (generation_config eos_token_id: <|endoftext|>,
<|user|>, <|observation|>). Tool results: one `<|observation|>` for a run of tool messages, each result in
`<tool_response>...</tool_response>`. Reasoning of assistant turns before the last user turn is dropped (`</think>`
alone), as GLM-4.7's template does unless clear_thinking=false.
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family, tojson

CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c is iterable and c is not mapping -%}{%- for p in c -%}{%- if p is string -%}{{ p }}{%- elif p.text is defined -%}{{ p.text }}{%- endif -%}{%- endfor -%}{%- elif c -%}{{ c }}{%- endif -%}
{%- endmacro -%}
{{- '[gMASK]<sop>' }}
{%- if tools %}
{{- '<|system|>\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\\n' }}
{%- for tool in tools %}{{- (tool | tojson) + '\\n' }}{%- endfor %}
{{- '</tools>\\n\\nFor each function call, output the function name and arguments within the following XML format:\\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>' }}
{%- endif %}
{%- set ns = namespace(last_user=-1) %}
{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}{%- endfor %}
{%- for m in messages %}
{%- if m.role == 'user' %}
{{- '<|user|>' + text(m.content) }}
{%- elif m.role == 'system' %}
{{- '<|system|>' + text(m.content) }}
{%- elif m.role == 'assistant' %}
{%- set content = text(m.content) %}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else (m.reasoning if m.reasoning is string else '') %}
{%- if not reasoning and '</think>' in content %}
{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
{%- set content = content.split('</think>')[-1].lstrip('\\n') %}
{%- endif %}
{{- '<|assistant|>' }}
{%- if ((clear_thinking is defined and not clear_thinking) or loop.index0 > ns.last_user) and reasoning %}
{{- '<think>' + reasoning.strip() + '</think>' }}
{%- else %}
{{- '</think>' }}
{%- endif %}
{{- content.strip() }}
{%- for tc in (m.tool_calls or []) %}
{%- set f = tc.function if tc.function is defined else tc %}
{{- '<tool_call>' + f.name }}
{%- if f.arguments is mapping %}
{%- for k, v in f.arguments.items() %}
{{- '<arg_key>' + k + '</arg_key><arg_value>' + (v if v is string else (v | tojson)) + '</arg_value>' }}
{%- endfor %}
{%- elif f.arguments %}{{- f.arguments }}
{%- endif %}
{{- '</tool_call>' }}
{%- endfor %}
{%- elif m.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|observation|>' }}{%- endif %}
{{- '<tool_response>' + text(m.content) + '</tool_response>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|assistant|>' + ('</think>' if (enable_thinking is defined and not enable_thinking) else '<think>') }}
{%- endif %}
"""


def _value(v) -> str:
    return v if isinstance(v, str) else tojson(v)


def render(turn: Turn) -> str:
    out = (turn.reasoning or "") + "</think>"
    for c in turn.calls:
        out += (
            "<tool_call>"
            + c.name
            + "".join(f"<arg_key>{k}</arg_key><arg_value>{_value(v)}</arg_value>" for k, v in c.arguments.items())
            + "</tool_call>"
        )
    out += turn.answer or ""
    return out + ("<|observation|>" if turn.calls else "<|user|>")


FAMILY = Family(
    name="glm47",
    title="GLM-4.7",
    tool_parser="glm47",
    reasoning_parser="glm45",
    special_tokens=(
        "<|endoftext|>",
        "[MASK]",
        "[gMASK]",
        "[sMASK]",
        "<sop>",
        "<eop>",
        "<|system|>",
        "<|user|>",
        "<|assistant|>",
        "<|observation|>",
    ),
    added_tokens=(
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
        "/nothink",
    ),
    eos="<|endoftext|>",
    stop_tokens=("<|user|>", "<|observation|>"),
    chat_template=CHAT_TEMPLATE,
    tool_result_opener="<|observation|>",
    user_opener="<|user|>",
    render=render,
    source="GLM-4.7(-Flash) chat_template.jinja, tokenizer_config.json and generation_config.json (zai-org); "
    "vllm/parser/glm47_moe.py, vllm/tool_parsers/glm47_moe_tool_parser.py, "
    "vllm/reasoning/glm47_moe_reasoning_parser.py",
    notes=(
        "every turn opens with `</think>` (thinking on, GLM-4.7's default): with chat_template_kwargs "
        "enable_thinking=false the prompt already ends `</think>` and the real model would not write it again; the "
        "script player cannot tell, and vLLM's glm47 parser (thinking off: no think terminals) then returns "
        "`</think>` as content",
        "tool_calls whose arguments are a JSON string (not what vLLM's renderer passes: it parses them to a "
        "dict) are written raw after the name: Jinja cannot parse JSON, the real template would fail on them",
        "tool message content given as a list of parts is joined as text (the real template writes one "
        "<tool_response> per item); vLLM's renderer turns it into a string first",
    ),
)

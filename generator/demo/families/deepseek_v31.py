"""DeepSeek-V3.1 (deepseek_v31 tool calls, deepseek_v3 reasoning).

A call is `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>`, calls chained without separator inside
`<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>`, the turn ending with <｜end▁of▁sentence｜>. Thinking is a
per-request switch (chat_template_kwargs {"thinking": true}): the generation prompt ends `<｜Assistant｜><think>`
(the model writes `REASONING</think>ANSWER`) or, by default, `<｜Assistant｜></think>` (the model answers at once).
vLLM's deepseek_v3 reasoning parser reads the same switch: R1-style parsing with it, none (identity) without it.
Tool results are `<｜tool▁output▁begin｜>...<｜tool▁output▁end｜>`, and the model continues right after them.
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family, tojson

# vLLM examples/tool_chat_template_deepseekv31.jinja (DeepSeek-V3.1's template plus the tool list), compacted.
# Past turns' reasoning is dropped as there: each assistant turn after a user turn opens `<｜Assistant｜></think>`.
CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{{ p.text if p.text is defined else '' }}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- macro args(a) -%}{%- if a is string -%}{{ a }}{%- else -%}{{ a | tojson }}{%- endif -%}{%- endmacro -%}
{%- if thinking is not defined %}{%- set thinking = false %}{%- endif %}
{%- set ns = namespace(is_first=false, is_tool=false, system_prompt='', is_first_sp=true, is_last_user=false) %}
{%- for m in messages %}
{%- if m.role == 'system' %}
{%- if ns.is_first_sp %}{%- set ns.system_prompt = ns.system_prompt + text(m.content) %}{%- set ns.is_first_sp = false %}
{%- else %}{%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + text(m.content) %}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if tools is defined and tools is not none %}
{%- set tool_ns = namespace(text='## Tools\\nYou have access to the following tools:\\n') %}
{%- for tool in tools %}{%- set tool_ns.text = tool_ns.text + (tool | tojson) %}{%- endfor %}
{%- set tool_ns.text = tool_ns.text + "IMPORTANT: ALWAYS adhere to this exact format for tool use:\\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\\n\\nWhere:\\n\\n- `tool_call_name` must be an exact match to one of the available tools\\n- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\\n- For multiple tool calls, chain them directly without separators or spaces\\n" %}
{%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + tool_ns.text %}
{%- endif %}
{{- bos_token + ns.system_prompt }}
{%- for m in messages %}
{%- set content = text(m.content) %}
{%- if m.role == 'user' %}
{%- set ns.is_tool = false %}{%- set ns.is_first = false %}{%- set ns.is_last_user = true %}
{{- '<｜User｜>' + content }}
{%- elif m.role == 'assistant' and m.tool_calls %}
{%- if ns.is_last_user %}{{- '<｜Assistant｜></think>' }}{%- endif %}
{%- set ns.is_last_user = false %}{%- set ns.is_first = false %}{%- set ns.is_tool = false %}
{%- for tc in m.tool_calls %}
{%- set f = tc.function if tc.function is defined else tc %}
{%- set call = '<｜tool▁call▁begin｜>' + f.name + '<｜tool▁sep｜>' + args(f.arguments) + '<｜tool▁call▁end｜>' %}
{%- if not ns.is_first %}{{- content + '<｜tool▁calls▁begin｜>' + call }}{%- set ns.is_first = true %}
{%- else %}{{- call }}{%- endif %}
{%- endfor %}
{{- '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>' }}
{%- elif m.role == 'assistant' %}
{%- if ns.is_last_user %}
{{- '<｜Assistant｜>' + ('<think>' if (m.prefix is defined and m.prefix and thinking) else '</think>') }}
{%- endif %}
{%- set ns.is_last_user = false %}
{%- if ns.is_tool %}{{- content + '<｜end▁of▁sentence｜>' }}{%- set ns.is_tool = false %}
{%- else %}
{%- if '</think>' in content %}{%- set content = content.split('</think>', 1)[1] %}{%- endif %}
{{- content + '<｜end▁of▁sentence｜>' }}
{%- endif %}
{%- elif m.role == 'tool' %}
{%- set ns.is_last_user = false %}{%- set ns.is_tool = true %}
{{- '<｜tool▁output▁begin｜>' + content + '<｜tool▁output▁end｜>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt and ns.is_last_user and not ns.is_tool %}
{{- '<｜Assistant｜>' + ('<think>' if thinking else '</think>') }}
{%- endif %}
"""

EOS = "<｜end▁of▁sentence｜>"


def render(turn: Turn) -> str:
    # a turn with reasoning is a thinking-mode turn (the prompt opened <think>); one without, a non-thinking turn
    out = turn.reasoning + "</think>" if turn.reasoning else ""
    if turn.calls:
        out += (
            "<｜tool▁calls▁begin｜>"
            + "".join(
                "<｜tool▁call▁begin｜>%s<｜tool▁sep｜>%s<｜tool▁call▁end｜>" % (c.name, tojson(c.arguments))
                for c in turn.calls
            )
            + "<｜tool▁calls▁end｜>"
        )
    return out + (turn.answer or "") + EOS


FAMILY = Family(
    name="deepseek_v31",
    title="DeepSeek-V3.1",
    tool_parser="deepseek_v31",
    reasoning_parser="deepseek_v3",
    # DeepSeek-V3.1 tokenizer_config.json: only BOS/EOS/pad are special
    special_tokens=("<｜begin▁of▁sentence｜>", EOS, "<｜▁pad▁｜>"),
    added_tokens=(
        "<think>",
        "</think>",
        "<｜User｜>",
        "<｜Assistant｜>",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁outputs▁begin｜>",
        "<｜tool▁outputs▁end｜>",
        "<｜tool▁output▁begin｜>",
        "<｜tool▁output▁end｜>",
        "<｜tool▁sep｜>",
    ),
    eos=EOS,
    bos="<｜begin▁of▁sentence｜>",
    chat_template=CHAT_TEMPLATE,
    tool_result_opener="<｜tool▁output▁begin｜>",
    user_opener="<｜User｜>",
    render=render,
    source="vLLM examples/tool_chat_template_deepseekv31.jinja (DeepSeek-V3.1's template with the tool list); "
    "vllm/tool_parsers/deepseekv31_tool_parser.py, vllm/reasoning/deepseek_v3_reasoning_parser.py",
    thinks=False,  # V3.1 calls tools in non-thinking mode only (its model card): the scripts are non-thinking turns
    notes=(
        'Thinking is per request (chat_template_kwargs {"thinking": true}), and V3.1\'s model card supports '
        "tool calls in non-thinking mode only: the matrix runs its scripts in non-thinking mode, the default, "
        "with the deepseek_v3 reasoning parser served as users serve it (it passes such turns through).",
    ),
)

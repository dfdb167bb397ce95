"""DeepSeek-R1-0528 (deepseek_v3 tool calls, deepseek_r1 reasoning).

A call is `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```<｜tool▁call▁end｜>`, calls
`\\n`-separated inside `<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>`, the turn ending with <｜end▁of▁sentence｜>.
R1-0528's template ends the prompt at `<｜Assistant｜>` (the user turn writes it; it no longer opens `<think>` as
the first R1 template did), so the model writes `<think>\\n...\\n</think>\\n\\n` itself, every turn: a turn
without reasoning has an empty think block. After tool results the prompt ends at `<｜tool▁outputs▁end｜>` with
no assistant marker.
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family, tojson

# vLLM examples/tool_chat_template_deepseekr1.jinja (R1-0528's own template plus the tool list in the system
# prompt, which vLLM's docs pair with --tool-call-parser deepseek_v3 for R1-0528). Reasoning history is dropped,
# as there (`content.split('</think>')[-1]`).
CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{{ p.text if p.text is defined else '' }}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- macro args(a) -%}{%- if a is string -%}{{ a }}{%- else -%}{{ a | tojson }}{%- endif -%}{%- endmacro -%}
{%- set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true, is_last_user=false) %}
{%- for m in messages %}
{%- if m.role == 'system' %}
{%- if ns.is_first_sp %}{%- set ns.system_prompt = ns.system_prompt + text(m.content) %}{%- set ns.is_first_sp = false %}
{%- else %}{%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + text(m.content) %}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if tools is defined and tools is not none %}
{%- set tool_ns = namespace(text='You are a helpful assistant with tool calling capabilities. When a tool call is needed, you MUST use the following format to issue the call:\\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>FUNCTION_NAME\\n```json\\n{"param1": "value1", "param2": "value2"}\\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>\\n\\nMake sure the JSON is valid.## Tools\\n\\n### Function\\n\\nYou have the following functions available:\\n\\n') %}
{%- for tool in tools %}{%- set tool_ns.text = tool_ns.text + '\\n```json\\n' + (tool | tojson) + '\\n```\\n' %}{%- endfor %}
{%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + tool_ns.text %}
{%- endif %}
{{- bos_token + ns.system_prompt }}
{%- for m in messages %}
{%- set content = text(m.content) %}
{%- if m.role == 'user' %}
{%- set ns.is_tool = false %}{%- set ns.is_first = false %}{%- set ns.is_last_user = true %}
{{- '<｜User｜>' + content + '<｜Assistant｜>' }}
{%- elif m.role == 'assistant' %}
{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1] %}{%- endif %}
{%- set ns.is_last_user = false %}
{%- if m.tool_calls %}
{%- if ns.is_tool %}{{- '<｜tool▁outputs▁end｜>' }}{%- endif %}
{%- set ns.is_first = false %}{%- set ns.is_tool = false %}{%- set ns.is_output_first = true %}
{%- for tc in m.tool_calls %}
{%- set f = tc.function if tc.function is defined else tc %}
{%- set call = '<｜tool▁call▁begin｜>' + (tc.type if tc.type is defined and tc.type else 'function') + '<｜tool▁sep｜>' + f.name + '\\n```json\\n' + args(f.arguments) + '\\n```<｜tool▁call▁end｜>' %}
{%- if not ns.is_first %}{{- content + '<｜tool▁calls▁begin｜>' + call }}{%- set ns.is_first = true %}
{%- else %}{{- '\\n' + call }}{%- endif %}
{%- endfor %}
{{- '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>' }}
{%- elif ns.is_tool %}
{{- '<｜tool▁outputs▁end｜>' + content + '<｜end▁of▁sentence｜>' }}{%- set ns.is_tool = false %}
{%- else %}
{{- content + '<｜end▁of▁sentence｜>' }}
{%- endif %}
{%- elif m.role == 'tool' %}
{%- set ns.is_last_user = false %}{%- set ns.is_tool = true %}
{%- if ns.is_output_first %}{{- '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + content + '<｜tool▁output▁end｜>' }}{%- set ns.is_output_first = false %}
{%- else %}{{- '\\n<｜tool▁output▁begin｜>' + content + '<｜tool▁output▁end｜>' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if ns.is_tool %}{{- '<｜tool▁outputs▁end｜>' }}{%- endif %}
{%- if add_generation_prompt and not ns.is_last_user and not ns.is_tool %}{{- '<｜Assistant｜>' }}{%- endif %}
"""

EOS = "<｜end▁of▁sentence｜>"


def render(turn: Turn) -> str:
    out = "<think>\n" + (turn.reasoning or "") + "\n</think>\n\n"
    if turn.calls:
        out += (
            "<｜tool▁calls▁begin｜>"
            + "\n".join(
                "<｜tool▁call▁begin｜>function<｜tool▁sep｜>%s\n```json\n%s\n```<｜tool▁call▁end｜>"
                % (c.name, tojson(c.arguments))
                for c in turn.calls
            )
            + "<｜tool▁calls▁end｜>"
        )
    return out + (turn.answer or "") + EOS


FAMILY = Family(
    name="deepseek_r1",
    title="DeepSeek-R1-0528",
    tool_parser="deepseek_v3",
    reasoning_parser="deepseek_r1",
    # DeepSeek-V3/R1 tokenizer_config.json: only BOS/EOS/pad are special; <think>, the role and the tool markers
    # are plain added tokens (vLLM's deepseek_v3 parser finds them in the decoded text, so they must survive it)
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
    source="vLLM examples/tool_chat_template_deepseekr1.jinja and DeepSeek-R1-0528's tokenizer_config.json "
    "chat template; vllm/tool_parsers/deepseekv3_tool_parser.py, vllm/reasoning/deepseek_r1_reasoning_parser.py",
    notes=(
        "R1-0528's own template lists no tools (users put them in the system prompt); the tool list here is "
        "vLLM's example template's.",
        "Reasoning history is dropped as in the real template, so reasoning_content never reaches the prompt.",
        "Text is as R1 writes it: reasoning comes back as '\\n...\\n' and an answer as '\\n\\n...' (the "
        "newlines around </think> stay in the parsed fields); a turn without reasoning is "
        "'<think>\\n\\n</think>\\n\\n'.",
    ),
)

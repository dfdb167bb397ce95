"""Llama 3.1 / 3.2 JSON tool calls (llama3_json), no reasoning.

A call is `{"name": ..., "parameters": {...}}` right after the assistant header, the turn ending with <|eot_id|>;
two calls in one turn are `; `-separated (the only multi-call form vLLM's llama3_json parser reads). Tools go in
the first user turn (tools_in_user_message defaults to true), tool results are `ipython` turns of
`{"output": ...}`. Every marker is a special token in Llama 3's tokenizer, so <|python_tag|> (which the model may
put before a call) never reaches the parser's text: it is left out here.
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family, tojson

# vLLM examples/tool_chat_template_llama3.1_json.jinja (Meta's Llama 3.1 template), compacted; differences: a
# fixed date unless date_string is passed (the real one uses strftime_now), and several tool calls in one
# assistant turn are written `; `-joined where the real one raises "This model only supports single tool-calls".
CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{%- if p.text is defined -%}{{ (p.text | trim) + ('\\n' if not loop.last else '') }}{%- endif -%}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{{- bos_token }}
{%- if custom_tools is defined %}{%- set tools = custom_tools %}{%- endif %}
{%- if tools_in_user_message is not defined %}{%- set tools_in_user_message = true %}{%- endif %}
{%- if date_string is not defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %}
{%- if tools is not defined or not tools %}{%- set tools = none %}{%- endif %}
{%- if messages and messages[0].role == 'system' %}
{%- set system_message = text(messages[0].content) | trim %}
{%- set messages = messages[1:] %}
{%- elif tools is not none %}
{%- set system_message = "You are a helpful assistant with tool calling capabilities. Only reply with a tool call if the function exists in the library provided by the user. If it doesn't exist, just reply directly in natural language. When you receive a tool call response, use the output to format an answer to the original user question." %}
{%- else %}
{%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if tools is not none %}{{- "Environment: ipython\\n" }}{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
{{- 'You have access to the following functions. To call a function, please respond with JSON for a function call. Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.\\n\\n' }}
{%- for t in tools %}{{- (t | tojson(indent=4)) + "\\n\\n" }}{%- endfor %}
{%- endif %}
{{- system_message + "<|eot_id|>" }}
{%- if tools_in_user_message and tools is not none %}
{%- if messages | length == 0 %}{{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}{%- endif %}
{%- set first_user_message = text(messages[0].content) | trim %}
{%- set messages = messages[1:] %}
{{- '<|start_header_id|>user<|end_header_id|>\\n\\n' }}
{{- 'Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\\n\\n' }}
{{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.\\n\\n' }}
{%- for t in tools %}{{- (t | tojson(indent=4)) + "\\n\\n" }}{%- endfor %}
{{- first_user_message + "<|eot_id|>" }}
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'tool' or m.role == 'ipython' %}
{{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" + ({"output": text(m.content)} | tojson) + "<|eot_id|>" }}
{%- elif m.role == 'assistant' and m.tool_calls %}
{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- for tc in m.tool_calls %}
{%- set f = tc.function if tc.function is defined else tc %}
{%- if not loop.first %}{{- '; ' }}{%- endif %}
{{- '{"name": "' + (f.name | trim) + '", "parameters": ' }}
{%- if f.arguments is string %}{{- f.arguments }}{%- else %}{{- f.arguments | tojson }}{%- endif %}
{{- '}' }}
{%- endfor %}
{{- '<|eot_id|>' }}
{%- else %}
{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + (text(m.content) | trim) + '<|eot_id|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}
"""


def render(turn: Turn) -> str:
    calls = "; ".join('{"name": "%s", "parameters": %s}' % (c.name, tojson(c.arguments)) for c in turn.calls)
    return calls + (turn.answer or "") + "<|eot_id|>"


FAMILY = Family(
    name="llama3_json",
    title="Llama 3.1/3.2 JSON",
    tool_parser="llama3_json",
    reasoning_parser=None,
    # Llama 3.1's tokenizer_config.json: every added token (128000-128255) is special
    special_tokens=(
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<|python_tag|>",
        "<|finetune_right_pad_id|>",
    ),
    added_tokens=(),
    eos="<|eot_id|>",
    stop_tokens=("<|eom_id|>", "<|end_of_text|>"),
    bos="<|begin_of_text|>",
    chat_template=CHAT_TEMPLATE,
    tool_result_opener="<|start_header_id|>ipython<|end_header_id|>",
    user_opener="<|start_header_id|>user<|end_header_id|>",
    render=render,
    source="vLLM examples/tool_chat_template_llama3.1_json.jinja (= Meta's Llama 3.1 template); Llama 3.1 "
    "tokenizer_config.json / generation_config.json (eos 128001, 128008, 128009); "
    "vllm/tool_parsers/llama_tool_parser.py",
    notes=(
        "Llama 3.1/3.2 were trained on one call per turn: the published templates raise on two tool calls "
        "in a history turn; here they render `; `-joined, the form vLLM's parser splits on "
        "(llama_tool_parser.py streaming: start_idx += end_idx + len('; ')).",
        "<|python_tag|> and <|eom_id|> (the built-in-tool path) are not emitted: JSON custom-tool calls end "
        "with <|eot_id|>, and <|python_tag|> is special, so vLLM drops it from the text the parser reads.",
        "Date line fixed at 26 Jul 2024 (the real template uses strftime_now) so prompts are reproducible.",
    ),
)

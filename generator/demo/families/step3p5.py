"""Step-3.5 (step3p5 tool calls and reasoning): Qwen3-Coder's XML calls after an always-open think block.

The generation prompt already opens the reasoning (`<|im_start|>assistant\\n<think>\\n`) and there is no switch to
turn it off: the model writes its reasoning, `\\n</think>\\n`, then content and `<tool_call>` blocks with no separator
between them (`</tool_call><tool_call>`), as the template renders history. Calls are
`<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>`. The tools are
listed as JSON in the system prompt; tool results are one `tool_response` turn of `<tool_response>` blocks. Reasoning
history is kept only for assistant turns after the last user query.
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family
from .qwen3_coder import call  # Step-3.5 writes its calls in Qwen3-Coder's XML, values as there

CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c is mapping -%}{{ c['value'] if 'value' in c else c['text'] }}
{%- elif c -%}{%- for p in c -%}{%- if p.type == 'text' -%}{{ p['value'] if 'value' in p else p['text'] }}{%- endif -%}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{{- bos_token }}
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- text(messages[0].content) + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n\\nYou have access to the following functions in JSONSchema format:\\n\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools>\\n\\nIf you choose to call a function ONLY reply in the following format with NO suffix:\\n\\n<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n<parameter=example_parameter_2>\\nThis is the value for the second parameter\\nthat can span\\nmultiple lines\\n</parameter>\\n</function>\\n</tool_call>\\n\\n<IMPORTANT>\\nReminder:\\n- Function calls MUST follow the specified format: an inner <function=...>\\n...\\n</function> block must be nested within <tool_call>\\n...\\n</tool_call> XML tags\\n- Required parameters MUST be specified\\n</IMPORTANT><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + text(messages[0].content) + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(last_query=messages | length - 1, found=false) %}
{%- for m in messages[::-1] %}
{%- if not ns.found and m.role == 'user' %}{%- set ns.last_query = messages | length - 1 - loop.index0 %}{%- set ns.found = true %}{%- endif %}
{%- endfor %}
{%- for m in messages %}
{%- set content = text(m.content) %}
{%- if m.role == 'user' or (m.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' }}
{%- elif m.role == 'assistant' %}
{%- if m.reasoning_content is string %}{%- set reasoning = m.reasoning_content %}
{%- elif m.reasoning is string %}{%- set reasoning = m.reasoning %}
{%- elif '</think>' in content %}
{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
{%- set content = content.split('</think>')[-1].lstrip('\\n') %}
{%- else %}{%- set reasoning = '' %}{%- endif %}
{%- if loop.index0 > ns.last_query and reasoning %}
{{- '<|im_start|>assistant\\n<think>\\n' + reasoning + '\\n</think>\\n' + content }}
{%- else %}
{{- '<|im_start|>assistant\\n' + content }}
{%- endif %}
{%- for tc in (m.tool_calls or []) %}
{%- set f = tc.function if tc.function is defined else tc %}
{{- '<tool_call>\\n<function=' + f.name + '>\\n' }}
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
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>tool_response\\n' }}{%- endif %}
{{- '<tool_response>' + content + '</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n<think>\\n' }}
{%- endif %}
"""


def render(turn: Turn) -> str:
    # The prompt ends in `<think>\n`: a turn without reasoning closes an empty think block.
    out = f"{turn.reasoning or ''}\n</think>\n"
    return out + "".join(call(c) for c in turn.calls) + (turn.answer or "") + "<|im_end|>"


FAMILY = Family(
    name="step3p5",
    title="Step-3.5",
    tool_parser="step3p5",
    reasoning_parser="step3p5",
    special_tokens=("<｜begin▁of▁sentence｜>", "<|im_start|>", "<|im_end|>"),
    added_tokens=("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"),
    eos="<|im_end|>",
    bos="<｜begin▁of▁sentence｜>",
    chat_template=CHAT_TEMPLATE,
    tool_result_opener="<|im_start|>tool_response",
    user_opener="<|im_start|>user",
    render=render,
    source="Step-3.5-Flash chat template (llama.cpp models/templates/stepfun-ai-Step-3.5-Flash.jinja); "
    "vllm/parser/step3p5.py over vllm/parser/qwen3.py, vllm/tool_parsers/step3p5_tool_parser.py, "
    "vllm/reasoning/step3p5_engine_reasoning_parser.py",
    notes=(
        "Step-3.5's tokenizer_config.json was not available here: which markers are special, and the bos/eos "
        "strings, are assumed (ChatML markers special, think/tool markers plain added tokens); the vLLM parser "
        "matches the think and tool markers by token id either way.",
        "The published template writes a history boolean as Python `True` (`| string`); render() writes `true`.",
        "Arguments given as a JSON string (not a dict) render without parameters: Jinja cannot parse JSON; vLLM "
        "always passes a dict.",
    ),
)

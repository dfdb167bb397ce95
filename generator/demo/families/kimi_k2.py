"""Kimi-K2-Thinking (kimi_k2 tool calls, kimi_k2 reasoning).

Turns: `<|im_{user,assistant,system}|>NAME<|im_middle|>...<|im_end|>`, no newlines between turns; the tools are declared
first in a `<|im_system|>tool_declare<|im_middle|>` turn as compact JSON of the OpenAI `tools` array. A tool result is a
system-class turn named after the tool: `## Return of <tool_call_id>\\n<content>`. The generation prompt does not open
the reasoning block: the model writes `<think>...</think>` itself (history turns before the last plain answer keep an
empty `<think></think>`). Tool calls: `<|tool_calls_section_begin|>`, per call `<|tool_call_begin|>functions.NAME:IDX
<|tool_call_argument_begin|>{JSON}<|tool_call_end|>`, then `<|tool_calls_section_end|>`; the header is the call id.
"""

from __future__ import annotations

from ..conformance import Turn
from . import Family, tojson

CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{{ p.text if p.text is defined else '' }}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- macro role(m) -%}
{%- set name = m.name if m.name is string and m.name else m.role -%}
{%- if m.role == 'user' -%}{{ '<|im_user|>' + name + '<|im_middle|>' }}
{%- elif m.role == 'assistant' -%}{{ '<|im_assistant|>' + name + '<|im_middle|>' }}
{%- else -%}{{ '<|im_system|>' + name + '<|im_middle|>' }}{%- endif -%}
{%- endmacro -%}
{%- macro calls(m) -%}
{{- '<|tool_calls_section_begin|>' }}
{%- for tc in m.tool_calls -%}
{%- set f = tc.function if tc.function is defined else tc -%}
{%- set id = tc.id if tc.id is string and tc.id else 'functions.' + f.name + ':' + (loop.index0 | string) -%}
{{- '<|tool_call_begin|>' + id + '<|tool_call_argument_begin|>' }}
{%- if f.arguments is string -%}{{- f.arguments }}{%- else -%}{{- (f.arguments or {}) | tojson }}{%- endif -%}
{{- '<|tool_call_end|>' }}
{%- endfor -%}
{{- '<|tool_calls_section_end|>' }}
{%- endmacro -%}
{%- set ns = namespace(last_answer=-1) -%}
{%- for m in messages -%}{%- if m.role == 'assistant' and not m.tool_calls -%}{%- set ns.last_answer = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- if tools -%}{{- '<|im_system|>tool_declare<|im_middle|>' + (tools | tojson(separators=(',', ':'))) + '<|im_end|>' }}{%- endif -%}
{%- if not messages or messages[0].role != 'system' -%}
{{- '<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>' }}
{%- endif -%}
{%- for m in messages -%}
{{- role(m) }}
{%- if m.role == 'assistant' -%}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else (m.reasoning if m.reasoning is string else '') -%}
{{- '<think>' + (reasoning if loop.index0 > ns.last_answer else '') + '</think>' + text(m.content) }}
{%- if m.tool_calls -%}{{- calls(m) }}{%- endif -%}
{%- elif m.role == 'tool' -%}
{{- '## Return of ' + (m.tool_call_id or '') + '\\n' + text(m.content) }}
{%- else -%}
{{- text(m.content) }}
{%- endif -%}
{{- '<|im_end|>' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_assistant|>assistant<|im_middle|>' }}{%- endif -%}
"""


def render(turn: Turn) -> str:
    # Kimi-K2-Thinking always opens a think block; a turn without reasoning leaves it empty, as history turns do.
    out = f"<think>{turn.reasoning or ''}</think>"
    if turn.calls:
        out += "<|tool_calls_section_begin|>"
        out += "".join(
            f"<|tool_call_begin|>functions.{c.name}:{i}<|tool_call_argument_begin|>{tojson(c.arguments)}"
            "<|tool_call_end|>"
            for i, c in enumerate(turn.calls)
        )
        out += "<|tool_calls_section_end|>"
    return out + (turn.answer or "") + "<|im_end|>"


FAMILY = Family(
    name="kimi_k2",
    title="Kimi-K2-Thinking",
    tool_parser="kimi_k2",
    reasoning_parser="kimi_k2",
    special_tokens=(
        "[BOS]",
        "[EOS]",
        "<|im_end|>",
        "<|im_user|>",
        "<|im_assistant|>",
        "[EOT]",
        "<|im_system|>",
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
        "<|im_middle|>",
        "<think>",
        "</think>",
    ),
    added_tokens=(),
    eos="<|im_end|>",
    stop_tokens=("[EOS]",),
    bos="[BOS]",
    chat_template=CHAT_TEMPLATE,
    tool_result_opener="## Return of ",
    user_opener="<|im_user|>",
    render=render,
    source="moonshotai/Kimi-K2-Thinking chat_template.jinja and tokenizer_config.json (added_tokens_decoder, as "
    "described in MoonshotAI/Kimi-K2 docs/tool_call_guidance.md and copies); vllm/parser/kimi_k2.py, "
    "vllm/tool_parsers/kimi_k2_tool_parser.py, vllm/reasoning/kimi_k2_reasoning_parser.py",
    notes=(
        "The real tokenizer is tiktoken (tiktoken.model + tokenization_kimi.py, trust_remote_code): not buildable "
        "here without its files. The family model uses the shared byte-level BPE with every Kimi marker as a special "
        "added token; that is faithful for the parser (it matches markers by token id and needs "
        "skip_special_tokens off, which kimi_k2 sets when tools are given), not for ordinary text's token split.",
        "Whether <think>/</think> are special in K2-Thinking's tokenizer_config was not seen first-hand; taken "
        "as special like every other Kimi marker.",
        "The call index in functions.NAME:IDX restarts at 0 in each rendered turn; the real model may continue the "
        "conversation's count (vLLM's kimi_k2 id type counts the history's calls). The parser passes the header "
        "through as the call id either way.",
        "Kimi-K2-Instruct users pass only --tool-call-parser kimi_k2 (no reasoning): same call format, no think "
        "block; not a separate family here.",
    ),
)

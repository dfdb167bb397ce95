"""gpt-oss (harmony: vLLM's `openai` tool parser and `openai_gptoss` reasoning parser).

Served, a gpt-oss model is not rendered with its chat template: vLLM sees config.json's model_type "gpt_oss"
(vllm/renderers/online_renderer.py, `use_harmony`) and renders the prompt with the oss-harmony library
(vllm/entrypoints/openai/parser/harmony_utils.py), and parses the output token ids with harmony's StreamableParser
(vllm/parser/harmony.py). So the model must speak the real o200k_harmony token ids: oss-harmony embeds that
vocabulary (no download; its ordinary tokens are byte-identical to o200k_base.tiktoken, sha256 446a9538...), the
builder writes it as tokenizer.json. The template below is the published one's facts (used by /tokenize-style
paths and for the record), not what vLLM's chat completions send.

Output after the generation prompt `<|start|>assistant`: `<|channel|>analysis<|message|>...<|end|>` then, per call,
`<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{compact JSON}<|call|>`, or
an answer `<|channel|>final<|message|>...<|return|>`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..conformance import Turn
from . import Family

CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{{ p.text if p.text is defined else '' }}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- macro ts(s, ind) -%}
{%- if s.type == 'string' and s.enum -%}{{ '"' + s.enum | join('" | "') + '"' }}
{%- elif s.type == 'string' -%}string
{%- elif s.type in ('number', 'integer') -%}number
{%- elif s.type == 'boolean' -%}boolean
{%- elif s.type == 'array' and s['items'] and s['items'].type in ('string', 'number', 'integer', 'boolean') -%}{{ ('number' if s['items'].type == 'integer' else s['items'].type) + '[]' }}
{%- elif s.type == 'array' -%}any[]
{%- elif s.type == 'object' and s.properties -%}{{ '{\\n' }}
{%- for k, v in s.properties.items() -%}{{ ind + '    ' + k + ('' if k in (s.required or []) else '?') + ': ' + ts(v, ind + '    ') + ',\\n' }}{%- endfor -%}
{{ ind + '    }' }}
{%- elif s.type == 'object' -%}object
{%- else -%}any
{%- endif -%}
{%- endmacro -%}
{%- set sysmsg = messages and messages[0].role in ('system', 'developer') %}
{{- '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\\nKnowledge cutoff: 2024-06\\nCurrent date: ' + strftime_now('%Y-%m-%d') + '\\n\\nReasoning: ' + (reasoning_effort or 'medium') + '\\n\\n# Valid channels: analysis, commentary, final. Channel must be included for every message.' }}
{%- if tools %}{{- "\\nCalls to these tools must go to the commentary channel: 'functions'." }}{%- endif %}
{{- '<|end|>' }}
{%- if sysmsg or tools %}
{{- '<|start|>developer<|message|>' }}
{%- if sysmsg %}{{- '# Instructions\\n\\n' + text(messages[0].content) + ('\\n\\n' if tools else '') }}{%- endif %}
{%- if tools %}
{{- '# Tools\\n\\n## functions\\n\\nnamespace functions {\\n\\n' }}
{%- for t in tools %}{%- set f = t.function if t.function is defined else t %}
{{- '// ' + (f.description or '') + '\\ntype ' + f.name + ' = (_: {\\n' }}
{%- for k, v in ((f.parameters or {}).properties or {}).items() -%}
{{- k + ('' if k in (f.parameters.required or []) else '?') + ': ' + ts(v, '') + ',\\n' }}
{%- endfor %}
{{- '}) => any;\\n\\n' }}
{%- endfor %}
{{- '} // namespace functions' }}
{%- endif %}
{{- '<|end|>' }}
{%- endif %}
{%- set ns = namespace(last_final=-1, names={}) %}
{%- for m in messages %}{%- if m.role == 'assistant' and not m.tool_calls %}{%- set ns.last_final = loop.index0 %}{%- endif %}{%- endfor %}
{%- for m in messages %}
{%- if sysmsg and loop.first %}
{%- elif m.role == 'assistant' %}
{%- set reasoning = m.reasoning if m.reasoning is string else (m.reasoning_content if m.reasoning_content is string else (m.thinking if m.thinking is string else '')) %}
{%- if m.tool_calls %}
{%- if text(m.content) %}{{- '<|start|>assistant<|channel|>commentary<|message|>' + text(m.content) + '<|end|>' }}{%- endif %}
{%- if reasoning and loop.index0 > ns.last_final %}{{- '<|start|>assistant<|channel|>analysis<|message|>' + reasoning + '<|end|>' }}{%- endif %}
{%- for tc in m.tool_calls %}{%- set f = tc.function if tc.function is defined else tc %}
{{- '<|start|>assistant to=functions.' + f.name + '<|channel|>commentary json<|message|>' }}
{{- f.arguments if f.arguments is string else (f.arguments | tojson) }}
{{- '<|call|>' }}
{%- endfor %}
{%- else %}
{{- '<|start|>assistant<|channel|>final<|message|>' + text(m.content) + '<|end|>' }}
{%- endif %}
{%- elif m.role == 'tool' %}
{%- set ns2 = namespace(name='') %}
{%- for p in messages[:loop.index0] %}{%- for tc in (p.tool_calls or []) %}{%- if tc.id == m.tool_call_id %}{%- set ns2.name = (tc.function if tc.function is defined else tc).name %}{%- endif %}{%- endfor %}{%- endfor %}
{{- '<|start|>functions.' + ns2.name + '<|channel|>commentary to=assistant<|message|>' + text(m.content) + '<|end|>' }}
{%- else %}
{{- '<|start|>' + m.role + '<|message|>' + text(m.content) + '<|end|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}
"""


def _args(arguments: dict) -> str:
    # gpt-oss writes compact JSON (the harmony guide's `{"location":"San Francisco"}`)
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def render(turn: Turn) -> str:
    parts = []
    if turn.reasoning:
        parts.append(f"<|channel|>analysis<|message|>{turn.reasoning}<|end|>")
    calls = [
        f"<|channel|>commentary to=functions.{c.name} <|constrain|>json<|message|>{_args(c.arguments)}"
        for c in turn.calls
    ]
    # <|call|> stops generation (generation_config eos_token_id): one call per turn (parallel_calls=False)
    if len(calls) > 1:
        raise ValueError("gpt-oss calls one tool per turn")
    parts += [calls[0] + "<|call|>"] if calls else []
    if turn.answer is not None:
        parts.append(f"<|channel|>final<|message|>{turn.answer}<|return|>")
    return "<|start|>assistant".join(parts)


# o200k_base's split pattern (tiktoken_ext/openai_public.py o200k_base pat_str; o200k_harmony reuses it)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # o200k_base.tiktoken
FIRST_SPECIAL, LAST_SPECIAL = 199998, 200018  # <|startoftext|> .. <|endofprompt|>, as gpt-oss's tokenizer.json
VOCAB = 201088  # config vocab_size (padded)
# the smallest GptOssForCausalLM vLLM's CPU backend loads: hidden and intermediate sizes divisible by 32
# (fused_moe/experts/cpu_moe.py output_alignment), head_dim one of cpu_attn.py's supported sizes
HIDDEN, HEAD_DIM, INTERMEDIATE, EXPERTS = 32, 32, 32, 1


def _safetensors_bf16(tensors: Mapping[str, tuple[tuple[int, ...], float]]) -> bytes:
    """A safetensors file of bf16 tensors, each all zeros or all ones: name -> (shape, value)."""
    import numpy as np

    header: dict[str, dict] = {"__metadata__": {"format": "pt"}}
    blobs, at = [], 0
    for name, (shape, value) in sorted(tensors.items()):
        blob = np.full(shape, 0x3F80 if value == 1 else 0, "<u2").tobytes()  # bf16 1.0 / 0.0
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return len(head).to_bytes(8, "little") + head + b"".join(blobs)


def build_files(fam: Family) -> dict[str, bytes]:
    """The model folder: o200k_harmony's tokenizer.json (from oss-harmony's embedded vocabulary, no download),
    a 1-layer GptOssForCausalLM in bf16 (all zeros but the norms: every logit 0, the script player decides)."""
    import base64
    import hashlib

    import openai_harmony
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from ..family_model import scripts_json

    enc = openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)
    ranks = {bytes(enc._inner.decode_bytes([i])): i for i in range(FIRST_SPECIAL)}
    tiktoken_file = b"".join(base64.b64encode(b) + b" %d\n" % i for b, i in ranks.items())
    if hashlib.sha256(tiktoken_file).hexdigest() != O200K_SHA256:
        raise ValueError("oss-harmony's vocabulary is not o200k_base")
    specials = {i: enc.decode([i]) for i in range(FIRST_SPECIAL, LAST_SPECIAL + 1)}

    class Converter(TikTokenConverter):
        def load_tiktoken_bpe(self, _url):
            return ranks

    tok = Converter(pattern=O200K_PATTERN, extra_special_tokens=list(specials.values())).converted()
    tid = {t: i for i, t in specials.items()}

    def js(obj: dict) -> bytes:
        return (json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode()

    stops = [tid[fam.eos]] + [tid[t] for t in fam.stop_tokens]
    config = {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "torch_dtype": "bfloat16",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": 1,
        "num_attention_heads": 1,
        "num_key_value_heads": 1,
        "head_dim": HEAD_DIM,
        "num_local_experts": EXPERTS,
        "num_experts_per_tok": 1,
        "experts_per_token": 1,
        "sliding_window": 128,
        "layer_types": ["sliding_attention"],
        "max_position_embeddings": 131072,
        "initial_context_length": 4096,
        "rms_norm_eps": 1e-5,
        "swiglu_limit": 7.0,
        "tie_word_embeddings": False,
        "attention_bias": True,
        "hidden_act": "silu",
        "router_aux_loss_coef": 0.9,
        "output_router_logits": False,
        "rope_theta": 150000,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
        "bos_token_id": tid[fam.bos],
        "eos_token_id": tid[fam.eos],
        "pad_token_id": tid["<|endoftext|>"],
        # as gpt-oss-20b's config; without it transformers 5 warns of a Mistral regex (tokenization_utils_tokenizers)
        "transformers_version": "4.55.0.dev0",
    }
    p, q, e, i2 = "model.layers.0.", (HEAD_DIM,), EXPERTS, 2 * INTERMEDIATE
    weights = {
        "model.embed_tokens.weight": ((VOCAB, HIDDEN), 0),
        "lm_head.weight": ((VOCAB, HIDDEN), 0),
        "model.norm.weight": ((HIDDEN,), 1),
        p + "input_layernorm.weight": ((HIDDEN,), 1),
        p + "post_attention_layernorm.weight": ((HIDDEN,), 1),
        p + "self_attn.sinks": ((1,), 0),
        p + "self_attn.o_proj.weight": ((HIDDEN, HEAD_DIM), 0),
        p + "self_attn.o_proj.bias": ((HIDDEN,), 0),
        p + "mlp.router.weight": ((e, HIDDEN), 0),
        p + "mlp.router.bias": ((e,), 0),
        # transformers' GptOssExperts layout: gate_up_proj [E, H, 2I] (gate, up interleaved), down_proj [E, I, H]
        p + "mlp.experts.gate_up_proj": ((e, HIDDEN, i2), 0),
        p + "mlp.experts.gate_up_proj_bias": ((e, i2), 0),
        p + "mlp.experts.down_proj": ((e, INTERMEDIATE, HIDDEN), 0),
        p + "mlp.experts.down_proj_bias": ((e, HIDDEN), 0),
        **{
            f"{p}self_attn.{x}_proj.{w}": ((HEAD_DIM, HIDDEN) if w == "weight" else q, 0)
            for x in "qkv"
            for w in ("weight", "bias")
        },
    }
    return {
        "config.json": js(config),
        "generation_config.json": js(
            {"bos_token_id": tid[fam.bos], "eos_token_id": stops, "pad_token_id": tid["<|endoftext|>"]}
        ),
        "tokenizer.json": tok.to_str().encode(),
        "tokenizer_config.json": js(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": fam.bos,
                "eos_token": fam.eos,
                "pad_token": "<|endoftext|>",
                "model_max_length": 131072,
                "clean_up_tokenization_spaces": False,
                "chat_template": fam.chat_template,
                "added_tokens_decoder": {
                    str(i): {
                        "content": t,
                        "lstrip": False,
                        "normalized": False,
                        "rstrip": False,
                        "single_word": False,
                        "special": True,
                    }
                    for i, t in specials.items()
                },
            }
        ),
        "special_tokens_map.json": js({"bos_token": fam.bos, "eos_token": fam.eos, "pad_token": "<|endoftext|>"}),
        "scripts.json": js(scripts_json(fam, tok, set(stops), tid[fam.eos])),
        "model.safetensors": _safetensors_bf16(weights),
    }


FAMILY = Family(
    name="gpt_oss",
    title="gpt-oss",
    tool_parser="openai",
    reasoning_parser="openai_gptoss",
    special_tokens=(
        "<|startoftext|>",
        "<|endoftext|>",
        "<|return|>",
        "<|constrain|>",
        "<|channel|>",
        "<|start|>",
        "<|end|>",
        "<|message|>",
        "<|call|>",
        "<|endofprompt|>",
    ),
    added_tokens=(),
    eos="<|return|>",
    stop_tokens=("<|endoftext|>", "<|call|>"),
    bos="<|startoftext|>",
    chat_template=CHAT_TEMPLATE,
    files=build_files,
    tool_result_opener="<|start|>functions.",
    user_opener="<|start|>user",
    render=render,
    source="openai/gpt-oss-20b tokenizer_config.json + chat_template.jinja + generation_config.json; "
    "vllm/parser/harmony.py, vllm/entrypoints/openai/parser/harmony_utils.py, oss-harmony 0.0.11",
    notes=(
        "Builds its own files (build_files): model_type gpt_oss (a 1-layer GptOssForCausalLM, bf16, hidden 32, one "
        "expert, not the real 2880 / 32 experts / mxfp4) and the real o200k_harmony ids from oss-harmony's embedded "
        "encoding, not family_model.py's Llama with the two-byte BPE.",
        "vLLM renders gpt_oss prompts with harmony, not this template; reasoning history is read from `reasoning` "
        "only (harmony_utils.py parse_chat_input_to_harmony_message).",
        "Real gpt-oss emits one call per generation (<|call|> is a stop token): its scripts hold one call each "
        "(parallel_calls=False), so the two-call scripts are not asked of it.",
    ),
    parallel_calls=False,
)

"""Build a tiny, deterministic "scripted" LLM that vLLM can serve on a CPU.

The trick: a 1-layer ``LlamaForCausalLM`` whose attention and MLP projections
are all zero, so the block adds nothing and the residual stream simply carries
the token embedding through to the final norm.  Each token of a script gets
its own unit vector ``e_k`` as embedding (every other token shares ``e_0``), so
the final hidden state is ``c * e_k`` and ``lm_head`` row ``j`` reads it off:
putting ``5.0`` at ``lm_head[next(tok), k]`` makes the model a *bigram table* --
the next token is a fixed function of the current token only.  Chaining such
pairs gives a "script", e.g. for the reasoner::

    "\\n" -> <think> -> REASONING_TEXT -> </think> -> ANSWER_TEXT -> <|im_end|>

The prompt always ends with ``<|im_start|>assistant\\n`` so generation starts
from the ``"\\n"`` byte token.  Every token that is not in the script maps to
``<|im_end|>`` (EOS).  The winning logit is 40 (RMSNorm scales ``e_k`` by
sqrt(64)) so output is deterministic even with sampling at temperature 1.

Agent-sized prompts (30-80 KB of system prompt and tool schemas) must prefill
in seconds on a CPU, so the model is as cheap per token as vLLM allows: one
layer, one attention head of the smallest size the CPU backend takes (32), a
64-wide residual stream, and a tokenizer that packs two bytes per token: byte-
level BPE with the 256 byte symbols plus one merge for every pair of printable
ASCII characters (95 x 95; newlines never merge, so the prompt still ends with
the ``"\\n"`` token), applied to whole text runs (no pre-split into words).
Added tokens: ChatML specials, ``<think>``/``<tool_call>`` tags and a few whole
phrases, so one script step emits one whole sentence.  Attention cost grows
with the square of the prompt's tokens: 2 bytes per token and 1/24 of the
previous model's attention width take a 76 KB prompt from minutes to seconds.

The tool call is emitted as ``<tool_call>``, ``{"name": "get_weather",
"arguments": ``, the arguments JSON, ``}``, ``</tool_call>``: the same text as
one JSON phrase, but split where vLLM's hermes structural tag (used for
``tool_choice`` = "required" / named function, and for ``strict`` tools) lets
xgrammar's token mask accept it; a single whole-call token gets masked out.

Only numpy, safetensors and json are used (no torch), e.g.::

    python -m generator.demo.scripted_model /tmp/scripted/reasoner --script reasoner
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from .script import ANSWER_TEXT, REASONING_TEXT, SCRIPTS, TOOL_ARGS_JSON, TOOL_CALL, TOOL_CALL_JSON, TOOL_CALL_PREFIX  # noqa: F401

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED_TOKENS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    REASONING_TEXT,
    ANSWER_TEXT,
    TOOL_CALL_PREFIX,
    TOOL_ARGS_JSON,
]

N_LAYERS, N_HEADS, N_KV_HEADS, HEAD_DIM = 1, 1, 1, 32  # 32: the smallest head vLLM's CPU attention takes
HIDDEN, INTERMEDIATE = 64, 64
MAX_POS = 131072  # 128K: room for a coding agent's system prompt, tools and a few turns
NL, CLOSE_BRACE = 10, 125  # byte b has token id b

# ids 256...: one merge per pair of printable ASCII characters (space included, newline never)
PRINTABLE = range(0x20, 0x7F)
FIRST_MERGE_ID = 256
# then the added tokens (the tokenizers library numbers them after the model's vocab, whatever the file says)
ADDED_BASE_ID = FIRST_MERGE_ID + len(PRINTABLE) ** 2
TOKEN_ID = {t: ADDED_BASE_ID + k for k, t in enumerate(SPECIAL_TOKENS + ADDED_TOKENS)}
BOS_ID, EOS_ID = TOKEN_ID["<|endoftext|>"], TOKEN_ID["<|im_end|>"]
VOCAB_SIZE = max(TOKEN_ID.values()) + 1
# a request's logit_bias that bans the end tokens: past its script the model answers max_tokens tokens of whatever
# comes next (tests that need a long answer; with ignore_eos alone it repeats the end token, a stream of one
# repeated chunk, which LiteLLM stops)
NO_END_LOGIT_BIAS = {str(BOS_ID): -100, str(EOS_ID): -100}

CHAT_TEMPLATE = """\
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{{ p.text if p.text is defined else '' }}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages and messages[0].role == 'system' %}{{- text(messages[0].content) + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n\\nYou may call functions. Signatures within <tools></tools>:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools>\\n\\nReturn each call as <tool_call>{"name": <name>, "arguments": <args>}</tool_call><|im_end|>\\n' }}
{%- elif messages and messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + text(messages[0].content) + '<|im_end|>\\n' }}
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'system' and loop.first %}
{%- elif m.role == 'tool' %}
{{- '<|im_start|>user\\n<tool_response>\\n' + text(m.content) + '\\n</tool_response><|im_end|>\\n' }}
{%- elif m.role == 'assistant' %}
{{- '<|im_start|>assistant\\n' + text(m.content) }}
{%- for tc in (m.tool_calls or []) %}
{%- set f = tc.function if tc.function is defined else tc %}
{{- '<tool_call>{"name": "' + f.name + '", "arguments": ' }}
{%- if f.arguments is string %}{{- f.arguments }}{%- else %}{{- f.arguments | tojson }}{%- endif %}
{{- '}</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- else %}
{{- '<|im_start|>' + m.role + '\\n' + text(m.content) + '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""  # noqa: E501 - a chat template: a line of Jinja per line, as the real models' templates have them


def _script(script: str) -> dict[int, int]:
    """The bigram table: token id -> next token id (all others -> EOS)."""
    t = TOKEN_ID
    if script == "reasoner":
        chain = [NL, t["<think>"], t[REASONING_TEXT], t["</think>"], t[ANSWER_TEXT]]
    elif script == "tool-caller":
        chain = [NL, t["<tool_call>"], t[TOOL_CALL_PREFIX], t[TOOL_ARGS_JSON], CLOSE_BRACE, t["</tool_call>"]]
    elif script == "plain":
        chain = [NL, t[ANSWER_TEXT]]
    else:
        raise ValueError(f"unknown script {script!r}; expected one of {SCRIPTS}")
    return dict(zip(chain, chain[1:] + [EOS_ID]))


def _weights(script: str, layers: int = N_LAYERS) -> bytes:
    f32 = np.float32
    table = _script(script)
    # residual slot of each script token; slot 0 is shared by every other token (-> EOS)
    slot = {tok: k for k, tok in enumerate(sorted(table), start=1)}
    assert len(slot) < HIDDEN
    embed = np.zeros((VOCAB_SIZE, HIDDEN), f32)
    embed[:, 0] = 1.0
    lm_head = np.zeros((VOCAB_SIZE, HIDDEN), f32)
    lm_head[EOS_ID, 0] = 5.0
    for tok, k in slot.items():
        embed[tok] = 0.0
        embed[tok, k] = 1.0
        lm_head[table[tok], k] = 5.0
    return llama_safetensors(embed, lm_head, layers)


def llama_safetensors(embed: np.ndarray, lm_head: np.ndarray, layers: int = N_LAYERS) -> bytes:
    """The 1-layer Llama's weights with these embedding and output matrices; attention and MLP all zero (the
    module docstring), so more `layers` answer the same (a two-layer copy splits into two pipeline stages: the
    two-node test, docs/multinode.md). Shared with family_model.py."""
    from safetensors.numpy import save as st_save  # here: the tokenizer's unit tests run without it

    f32 = np.float32
    q, kv = N_HEADS * HEAD_DIM, N_KV_HEADS * HEAD_DIM
    tensors = {
        "model.embed_tokens.weight": embed,
        "model.norm.weight": np.ones(HIDDEN, f32),
        "lm_head.weight": lm_head,
    }
    for n in range(layers):
        p = f"model.layers.{n}."
        tensors.update(
            {
                p + "input_layernorm.weight": np.ones(HIDDEN, f32),
                p + "post_attention_layernorm.weight": np.ones(HIDDEN, f32),
                p + "self_attn.q_proj.weight": np.zeros((q, HIDDEN), f32),
                p + "self_attn.k_proj.weight": np.zeros((kv, HIDDEN), f32),
                p + "self_attn.v_proj.weight": np.zeros((kv, HIDDEN), f32),
                p + "self_attn.o_proj.weight": np.zeros((HIDDEN, q), f32),
                p + "mlp.gate_proj.weight": np.zeros((INTERMEDIATE, HIDDEN), f32),
                p + "mlp.up_proj.weight": np.zeros((INTERMEDIATE, HIDDEN), f32),
                p + "mlp.down_proj.weight": np.zeros((HIDDEN, INTERMEDIATE), f32),
            }
        )
    return st_save(dict(sorted(tensors.items())), metadata={"format": "pt"})


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character mapping."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _tokenizer_json() -> dict:
    return bpe_tokenizer_json([(t, t in SPECIAL_TOKENS) for t in SPECIAL_TOKENS + ADDED_TOKENS])


def bpe_tokenizer_json(added_tokens: list[tuple[str, bool]]) -> dict:
    """The two-bytes-per-token byte-level BPE (the module docstring) with `added_tokens` ((content, special), in
    order) numbered from ADDED_BASE_ID. Shared with family_model.py."""
    byte_char = _bytes_to_unicode()
    vocab = {byte_char[b]: b for b in range(256)}
    merges = [(byte_char[a], byte_char[b]) for a in PRINTABLE for b in PRINTABLE]
    for k, (a, b) in enumerate(merges):
        vocab[a + b] = FIRST_MERGE_ID + k
    added = [
        {
            "id": ADDED_BASE_ID + k,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": special,
        }
        for k, (t, special) in enumerate(added_tokens)
    ]
    # no regex pre-split: merges run over whole text runs, so words of odd length cost no extra token
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [f"{a} {b}" for a, b in merges],
        },
    }


def _tokenizer_config() -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": False,
        "add_eos_token": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": MAX_POS,
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {
            str(TOKEN_ID[t]): {
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": t in SPECIAL_TOKENS,
            }
            for t in SPECIAL_TOKENS + ADDED_TOKENS
        },
        "chat_template": CHAT_TEMPLATE,
    }


def _config(layers: int = N_LAYERS) -> dict:
    return {**llama_config(VOCAB_SIZE, BOS_ID, EOS_ID), "num_hidden_layers": layers}


def llama_config(vocab_size: int, bos_id: int, eos_id: int | list[int]) -> dict:
    """config.json of the 1-layer Llama. Shared with family_model.py."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": N_LAYERS,
        "num_attention_heads": N_HEADS,
        "num_key_value_heads": N_KV_HEADS,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": MAX_POS,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": bos_id,
    }


def _files(script: str, layers: int = N_LAYERS) -> dict[str, bytes]:
    def js(obj: dict) -> bytes:
        return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()

    return {
        "config.json": js(_config(layers)),
        "generation_config.json": js({"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "pad_token_id": BOS_ID}),
        "tokenizer.json": js(_tokenizer_json()),
        "tokenizer_config.json": js(_tokenizer_config()),
        "special_tokens_map.json": js({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
        "model.safetensors": _weights(script, layers),
    }


def build_model(out_dir: Path, script: str, layers: int = N_LAYERS) -> Path:
    """Write the scripted model for ``script`` into ``out_dir`` and return it (`layers`: its zero layers, the same
    answers; 2: one per pipeline stage of the two-node test).

    Idempotent: files whose bytes already match are left untouched.
    """
    return write_model(Path(out_dir), _files(script, layers), "SCRIPT", script)


def write_model(out_dir: Path, files: dict[str, bytes], marker: str, label: str) -> Path:
    """Write a model's files into `out_dir`, each only when its bytes differ (via a temp file, so a reader never
    sees half a file), then `marker`: `label` and the digest of all of them. Shared with pooling_models.py."""
    for name, data in files.items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != data:
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
    digest = hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()
    (out_dir / marker).write_text(f"{label} {digest}\n")
    return out_dir


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path, help="model directory; with --all, the parent of one per script")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--script", choices=SCRIPTS, default="reasoner")
    group.add_argument("--all", action="store_true", help="build every script into OUT_DIR/<script>")
    ap.add_argument("--layers", type=int, default=N_LAYERS, help="zero layers (same answers; 2: two pipeline stages)")
    args = ap.parse_args(argv)
    for script in SCRIPTS if args.all else (args.script,):
        print(build_model(args.out_dir / script if args.all else args.out_dir, script, args.layers))


if __name__ == "__main__":
    main()

"""Header-only safetensors checkpoints built from a published config.json (tests/unit/fixtures/fit/SOURCE.md).

Every tensor an architecture has (names and shapes as transformers/vLLM load them) is listed from the
config; the files hold only the safetensors header (8-byte length + JSON) with the data_offsets a real
file would have, and no tensor data. An AWQ checkpoint is derived from the same list in the AutoAWQ GEMM
format (what vLLM's `awq` / `awq_marlin` load): each quantized Linear of shape [out, in] becomes
  qweight int32 [in, out / 8]          eight 4-bit weights packed in each int32
  qzeros  int32 [in / group, out / 8]  eight 4-bit zero points packed in each int32
  scales  fp16  [in / group, out]
with `group` = quantization_config.group_size; everything else (embeddings, norms, the MoE router,
lm_head) stays in 16 bits.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "F8_E4M3": 1}
SHARD_BYTES = 5 * 10**9  # transformers' default max_shard_size ("5GB")
Tensor = tuple[str, str, list[int]]  # name, safetensors dtype, shape


def _linear(prefix: str, out: int, inp: int, dtype: str, bias: bool = False) -> list[Tensor]:
    return [(f"{prefix}.weight", dtype, [out, inp])] + ([(f"{prefix}.bias", dtype, [out])] if bias else [])


def dense_layout(cfg: dict, dtype: str = "BF16") -> list[Tensor]:
    """Llama, Qwen2 (q/k/v biases) and Qwen3 (q/k norms) decoders."""
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or h // heads
    bias = cfg.get("attention_bias", cfg["model_type"] == "qwen2")
    out = [("model.embed_tokens.weight", dtype, [cfg["vocab_size"], h])]
    for i in range(layers):
        p = f"model.layers.{i}"
        out += _linear(f"{p}.self_attn.q_proj", heads * hd, h, dtype, bias)
        out += _linear(f"{p}.self_attn.k_proj", kv * hd, h, dtype, bias)
        out += _linear(f"{p}.self_attn.v_proj", kv * hd, h, dtype, bias)
        out += _linear(f"{p}.self_attn.o_proj", h, heads * hd, dtype)
        if cfg["model_type"] == "qwen3":
            out += [(f"{p}.self_attn.q_norm.weight", dtype, [hd]), (f"{p}.self_attn.k_norm.weight", dtype, [hd])]
        out += _linear(f"{p}.mlp.gate_proj", inter, h, dtype) + _linear(f"{p}.mlp.up_proj", inter, h, dtype)
        out += _linear(f"{p}.mlp.down_proj", h, inter, dtype)
        out += [(f"{p}.input_layernorm.weight", dtype, [h]), (f"{p}.post_attention_layernorm.weight", dtype, [h])]
    out.append(("model.norm.weight", dtype, [h]))
    if not cfg.get("tie_word_embeddings"):
        out.append(("lm_head.weight", dtype, [cfg["vocab_size"], h]))
    return out


def glm4_moe_lite_layout(cfg: dict, dtype: str = "BF16") -> list[Tensor]:
    """GLM-4.7-Flash (Glm4MoeLiteForCausalLM): DeepSeek-V2-style MLA attention, MoE after the first
    `first_k_dense_replace` dense layers; the MTP layer (num_nextn_predict_layers) is not counted."""
    h, layers, heads = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    q_lora, kv_lora, rope = cfg["q_lora_rank"], cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
    nope, v = cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    moe, experts = cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    out = [("model.embed_tokens.weight", dtype, [cfg["vocab_size"], h])]
    for i in range(layers):
        p = f"model.layers.{i}"
        out += _linear(f"{p}.self_attn.q_a_proj", q_lora, h, dtype)
        out.append((f"{p}.self_attn.q_a_layernorm.weight", dtype, [q_lora]))
        out += _linear(f"{p}.self_attn.q_b_proj", heads * (nope + rope), q_lora, dtype)
        out += _linear(f"{p}.self_attn.kv_a_proj_with_mqa", kv_lora + rope, h, dtype)
        out.append((f"{p}.self_attn.kv_a_layernorm.weight", dtype, [kv_lora]))
        out += _linear(f"{p}.self_attn.kv_b_proj", heads * (nope + v), kv_lora, dtype)
        out += _linear(f"{p}.self_attn.o_proj", h, heads * v, dtype)
        if i < cfg["first_k_dense_replace"]:
            mlps = [(f"{p}.mlp", cfg["intermediate_size"])]
        else:
            out += [
                (f"{p}.mlp.gate.weight", dtype, [experts, h]),
                (f"{p}.mlp.gate.e_score_correction_bias", dtype, [experts]),
            ]
            mlps = [(f"{p}.mlp.experts.{e}", moe) for e in range(experts)]
            mlps.append((f"{p}.mlp.shared_experts", moe * cfg["n_shared_experts"]))
        for m, inter in mlps:
            out += _linear(f"{m}.gate_proj", inter, h, dtype) + _linear(f"{m}.up_proj", inter, h, dtype)
            out += _linear(f"{m}.down_proj", h, inter, dtype)
        out += [(f"{p}.input_layernorm.weight", dtype, [h]), (f"{p}.post_attention_layernorm.weight", dtype, [h])]
    out.append(("model.norm.weight", dtype, [h]))
    out.append(("lm_head.weight", dtype, [cfg["vocab_size"], h]))
    return out


def layout(cfg: dict, dtype: str = "BF16") -> list[Tensor]:
    if cfg["model_type"] == "glm4_moe_lite":
        return glm4_moe_lite_layout(cfg, dtype)
    return dense_layout(cfg, dtype)


def parameters(tensors: list[Tensor]) -> int:
    return sum(math.prod(shape) for _, _, shape in tensors)


def awq(tensors: list[Tensor], group: int, bits: int = 4) -> list[Tensor]:
    """AutoAWQ GEMM: every decoder `*_proj` Linear quantized, the rest in float16."""
    pack = 32 // bits
    out: list[Tensor] = []
    for name, _, shape in tensors:
        if name.startswith("model.layers.") and name.endswith("_proj.weight") and ".mlp.gate." not in name:
            o, i = shape
            assert o % pack == 0 and i % group == 0, (name, shape)
            base = name.removesuffix(".weight")
            out += [
                (f"{base}.qweight", "I32", [i, o // pack]),
                (f"{base}.qzeros", "I32", [i // group, o // pack]),
                (f"{base}.scales", "F16", [i // group, o]),
            ]
        else:
            out.append((name, "F16", shape))
    return out


def nbytes(tensors: list[Tensor]) -> int:
    return sum(math.prod(shape) * DTYPE_BYTES[dtype] for _, dtype, shape in tensors)


def _header(tensors: list[Tensor]) -> bytes:
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        size = math.prod(shape) * DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the format pads the header to 8 bytes
    return struct.pack("<Q", len(blob)) + blob


def header_only_files(tensors: list[Tensor], single: bool = False) -> dict[str, bytes]:
    """{filename: bytes}: model.safetensors, or ~5 GB shards plus model.safetensors.index.json, as
    `save_pretrained` names them; each file only a header."""
    if single:
        return {"model.safetensors": _header(tensors)}
    shards: list[list[Tensor]] = [[]]
    size = 0
    for t in tensors:
        b = math.prod(t[2]) * DTYPE_BYTES[t[1]]
        if shards[-1] and size + b > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(t)
        size += b
    n = len(shards)
    names = [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
    files = {name: _header(shard) for name, shard in zip(names, shards)}
    index = {
        "metadata": {"total_size": nbytes(tensors)},
        "weight_map": {t[0]: name for name, shard in zip(names, shards) for t in shard},
    }
    files["model.safetensors.index.json"] = json.dumps(index, indent=2).encode()
    return files


def write(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory

"""Will the model fit? Weights + one full --max-model-len sequence of KV cache, from the model's metadata.

The metadata (config.json and safetensors headers, never tensor data) comes from generator/compile/load/model_files.py:
from disk, from the cache of an earlier Hub fetch, or from the Hub. Without it the check says it was skipped.
This module computes the estimate and the verdict, and the context vLLM derives from a config; `judge` checks one
backend in build_plan's pipeline (a backend that does not fit is a finding).

The estimate is a lower bound of what vLLM needs (activations, CUDA graphs and the sampler come on top),
so a model it refuses cannot start; one it accepts may still need a larger fraction.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..plan import ModelPlan
from .gpu_memory import CONTEXT_OVERHEAD, gpu_memory_of
from .model_files import ModelFiles, Weights
from .pooling import CHAT
from .sizes import GIB, fmt_bytes
from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Model, State

DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
ATTENTION_LAYER_TYPES = {"full_attention", "attention", "sliding_attention", "chunked_attention"}


def kv_dtype_bytes(kv_cache_dtype: str, serving: float) -> float:
    """Bytes per cached element for --kv-cache-dtype (scales of the quantized formats left out)."""
    name = kv_cache_dtype.lower()
    if name == "auto":
        return serving
    if name in DTYPE_BYTES:
        return DTYPE_BYTES[name]
    if "k8v4" in name:
        return 0.75
    if "k3v4" in name:
        return 0.4375
    if "3bit" in name:
        return 0.375
    if "4" in name:  # int4_per_token_head, nvfp4*, *_4bit*
        return 0.5
    return 1.0  # fp8*, int8_per_token_head


@dataclass(frozen=True)
class Estimate:
    weights: int  # bytes once loaded, whole model
    weights_source: str
    kv_per_token: int  # bytes per token of context, whole model (full-attention layers)
    kv_split: int  # how many GPUs share the KV heads (1 for MLA: its latent is replicated)
    layer_split: int  # pipeline stages
    dtype_note: str
    kv_windowed_per_token: int = 0  # bytes per token of the sliding-window layers, up to `window` tokens
    window: int = 0

    def per_gpu(self, context: int, tp: int) -> tuple[float, float]:
        """(weights, KV of one full sequence) per GPU with this tensor x pipeline split."""
        kv = self.kv_per_token * context + self.kv_windowed_per_token * min(context, self.window)
        return self.weights / (tp * self.layer_split), kv / (self.kv_split * self.layer_split)


def text_config(config: dict) -> dict:
    """The language model's part of a config (multimodal configs nest it), over the top level."""
    text = config.get("text_config") or config.get("llm_config")
    return {**config, **text} if isinstance(text, dict) else config


def _quantization(cfg: dict) -> str:
    """ "awq 4-bit", "fp8", ... from quantization_config; "" for a checkpoint that is not quantized."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, dict):
        return "quantized" if qc else ""
    bits = qc.get("bits") or qc.get("w_bit") or qc.get("weight_bits") or qc.get("num_bits")
    return f"{qc.get('quant_method') or 'quantized'}{f' {bits}-bit' if isinstance(bits, int) else ''}"


def estimate(config: dict, weights: Weights, cmd: ServeCommand) -> Estimate | str:
    """The estimate, or why there is none (a sentence)."""
    cfg = text_config(config)
    ckpt_dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").removeprefix("torch.")
    ckpt = DTYPE_BYTES.get(ckpt_dtype, 2)
    wanted = (cmd.value("--dtype") or "auto").lower()
    serving = (2 if ckpt == 4 else ckpt) if wanted == "auto" else DTYPE_BYTES.get(wanted, 2)  # auto: fp32 -> 16-bit
    quantized = _quantization(cfg)
    loaded = weights.stored  # a quantized checkpoint loads as stored: its real tensor sizes (packed ints, scales)
    if not quantized and serving != ckpt:  # vLLM casts floating tensors to the serving dtype
        floating = weights.floating if weights.floating >= 0 else weights.stored
        loaded = weights.stored - floating + floating * serving // ckpt
    online = (cmd.value("--quantization") or "").lower()
    if not quantized and online.startswith("fp8"):
        loaded //= 2  # online fp8: linear layers at 1 byte (embeddings stay 16-bit: a slight underestimate)
    layers = cfg.get("num_hidden_layers") or cfg.get("n_layer") or cfg.get("num_layers")
    heads = cfg.get("num_attention_heads") or cfg.get("n_head")
    if not layers or not heads:
        return "config.json has no num_hidden_layers/num_attention_heads"
    kv_bytes = kv_dtype_bytes(cmd.value("--kv-cache-dtype") or "auto", serving)
    tp = int(cmd.value("--tensor-parallel-size") or 1)
    pp = int(cmd.value("--pipeline-parallel-size") or 1)
    layer_types = cfg.get("layer_types") or cfg.get("layers_block_type")
    windowed, window = 0, int(cfg.get("sliding_window") or 0)
    if isinstance(layer_types, list):  # hybrids: only attention layers keep a KV cache
        layers = sum(1 for t in layer_types if t in ATTENTION_LAYER_TYPES) or layers
        if window:  # sliding-window layers keep at most `sliding_window` tokens
            windowed = sum(1 for t in layer_types if t == "sliding_attention")
            layers -= windowed
    if cfg.get("kv_lora_rank"):  # MLA (DeepSeek, GLM-4.7-Flash): one latent + rope key per token and layer
        per_layer = (cfg["kv_lora_rank"] + cfg.get("qk_rope_head_dim", 64)) * kv_bytes
        split = 1
    else:
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
        kv_heads = cfg.get("num_key_value_heads") or heads
        per_layer = 2 * kv_heads * head_dim * kv_bytes
        split = min(tp, kv_heads)  # beyond kv_heads GPUs, vLLM replicates heads
    note = f"{quantized} checkpoint" if quantized else f"{ckpt_dtype} checkpoint"
    if windowed:
        note += f", {windowed} sliding-window layers ({window} tokens)"
    if online:
        note += f", --quantization {online}"
    return Estimate(loaded, weights.source, int(layers * per_layer), split, pp, note, int(windowed * per_layer), window)


# vLLM 0.32 `_get_and_verify_max_len` (vllm/config/model.py) and `derive_max_model_len_and_key`:
# the smallest of these keys of the text config, `model_max_length` winning when set.
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# RoPE types whose max_position_embeddings is already the scaled length (vLLM does not multiply by `factor`)
ROPE_ALREADY_SCALED = {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def config_context(config: dict, tokenizer_max: int | None = None) -> tuple[int, str] | None:
    """(tokens, where from) as vLLM 0.32 derives the context when --max-model-len is absent (or `auto`, as
    its upper bound): the length keys of the config, capped by the tokenizer's model_max_length, times the
    RoPE scaling factor. None when the config has no length key (vLLM would assume 2048)."""
    cfg = text_config(config)
    lengths = {k: cfg[k] for k in MAX_LEN_KEYS if _number(cfg.get(k))}
    if not lengths:
        return None
    key = "model_max_length" if "model_max_length" in lengths else min(lengths, key=lengths.__getitem__)
    n, what = lengths[key], f"config.json {key} {int(lengths[key])}"
    if tokenizer_max and tokenizer_max < n:
        n, what = tokenizer_max, f"tokenizer_config.json model_max_length {tokenizer_max}"
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    params = []
    if isinstance(rope, dict):  # one dict, or one per layer type
        params = (
            [p for p in rope.values() if isinstance(p, dict) and p]
            if all(isinstance(v, dict) or v is None for v in rope.values())
            else [rope]
        )
    if params and "gemma3" not in str(cfg.get("model_type", "")):
        factor, kind = 1.0, ""
        for p in params:
            kind = str(p.get("rope_type") or p.get("type") or "default")
            if kind not in ROPE_ALREADY_SCALED:
                factor = p.get("factor", factor)
        if _number(factor) and factor != 1:
            n, what = n * factor, f"{what} x RoPE scaling factor {factor:g} ({kind})"
        if any((p.get("rope_type") or p.get("type")) == "longrope" for p in params) and _number(
            cfg.get("original_max_position_embeddings")
        ):  # vLLM: shorter sequences stay unscaled
            n, what = (
                cfg["original_max_position_embeddings"],
                (f"config.json original_max_position_embeddings {cfg['original_max_position_embeddings']} (longrope)"),
            )
    return int(n), what


@dataclass(frozen=True)
class Verdict:
    fits: bool | None  # None: not checked against a memory budget
    line: str  # for the summary
    problem: str = ""  # when it does not fit: numbers and fixes
    weights: int | None = None  # bytes of the whole model's weights once loaded, when the estimate ran


def check(
    files: ModelFiles,
    cmd: ServeCommand,
    gpus: tuple[int, ...],
    context: int,
    fraction: float,
    gpu_memory: int | None,
    env: dict[str, str],
    kv_cache: bool = True,
) -> Verdict:
    """`kv_cache` False for a pooling model (embedding, rerank): it keeps no KV cache across requests, so only
    its weights are compared with the budget (vLLM's profiling decides the rest)."""
    if files.config is None or files.weights is None:
        return Verdict(None, f"skipped: {files.missing or 'no metadata'}")
    est = estimate(files.config, files.weights, cmd)
    if isinstance(est, str):
        return Verdict(None, f"skipped: {est} ({files.label})")
    tp = int(cmd.value("--tensor-parallel-size") or 1)
    if not kv_cache:
        est = dataclasses.replace(
            est, kv_per_token=0, kv_windowed_per_token=0, dtype_note=f"{est.dtype_note}, pooling: no KV cache counted"
        )
    verdict = _check(est, files, cmd, gpus, context, fraction, gpu_memory, env, tp)
    return dataclasses.replace(verdict, weights=est.weights)


def _check(
    est: Estimate,
    files: ModelFiles,
    cmd: ServeCommand,
    gpus: tuple[int, ...],
    context: int,
    fraction: float,
    gpu_memory: int | None,
    env: dict[str, str],
    tp: int,
) -> Verdict:
    weights, seq = est.per_gpu(context, tp)
    what = (
        f"weights {fmt_bytes(weights)} + KV {fmt_bytes(seq)} for one {context}-token sequence "
        f"({fmt_bytes(est.kv_per_token)}/token, {est.dtype_note})"
    )
    if len(gpus) > 1:
        what += " per GPU"
    source = f"; {files.label}"
    if not gpus:
        space = env.get("VLLM_CPU_KVCACHE_SPACE")
        if space and float(space) * GIB < seq:
            return Verdict(
                False,
                f"does not fit: {what}{source}",
                (
                    f"one {context}-token sequence needs {fmt_bytes(seq)} of KV cache but VLLM_CPU_KVCACHE_SPACE is "
                    f"{space} GiB; raise it to {math.ceil(seq / GIB)} or lower --max-model-len to "
                    f"{_tokens(float(space) * GIB / seq * context)}"
                ),
            )
        return Verdict(None, f"{what}; no GPU check (gpus: []){source}")
    if gpu_memory is None:
        return Verdict(None, f"{what}; not checked: set gpu_memory to compare with the GPU{source}")
    budget = fraction * gpu_memory
    need = weights + seq
    if need <= budget:
        return Verdict(True, f"fits: {what} <= {fraction:.2f} x {fmt_bytes(gpu_memory)} = {fmt_bytes(budget)}{source}")
    fixes = []
    if need <= gpu_memory - CONTEXT_OVERHEAD:
        fixes.append(f"raise --gpu-memory-utilization to {math.ceil(need / gpu_memory * 100) / 100:.2f}")
    if budget > weights:
        fixes.append(f"lower --max-model-len to {_tokens((budget - weights) / seq * context)}")
    if kv_dtype_bytes(cmd.value("--kv-cache-dtype") or "auto", 2) > 1 and weights + seq / 2 <= budget:
        fixes.append("use --kv-cache-dtype fp8 (halves the KV cache)")
    more = 2 * tp
    fixes.append(f"spread it over more GPUs (--tensor-parallel-size {more} with {more} gpus)")
    problem = (
        f"does not fit: --gpu-memory-utilization {fraction:.2f} of {fmt_bytes(gpu_memory)} = {fmt_bytes(budget)}"
        f"{' per GPU' if len(gpus) > 1 else ''}, but {what} = {fmt_bytes(need)} ({files.label}, "
        f"{est.weights_source}); " + ", or ".join(fixes)
    )
    return Verdict(False, f"does not fit: {what} > {fmt_bytes(budget)}{source}", problem)


def _tokens(n: float) -> str:
    """A --max-model-len value at most n: whole K when possible."""
    n = int(n)
    return f"{n // 1024}K" if n >= 1024 else str(max(n, 0))


def _fit(
    m: ModelPlan, cmd: ServeCommand, meta: ModelFiles, fraction: float, memory: int | dict[int, int] | None
) -> Verdict:
    """The fit check for one model; a config of another shape makes it a skip, never a crash."""
    sizes = [gpu_memory_of(memory, g) for g in m.gpus]
    known = [s for s in sizes if s is not None]
    smallest = min(known) if known and len(known) == len(sizes) else None
    try:
        return check(meta, cmd, m.gpus, m.context, fraction, smallest, m.env, kv_cache=m.kind == CHAT)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error) as exc:  # a file of another shape
        return Verdict(None, f"skipped: could not read the model's files ({type(exc).__name__}: {exc})")


def judge(s: State, m: Model, plan: ModelPlan, replica: int, fraction: float) -> Verdict:
    """The fit check of backend `plan` (the model, or its replica number `replica`) in its fraction of its GPUs."""
    verdict = _fit(plan, m.cmd, m.meta, fraction, s.file.gpu_memory)
    if verdict.problem:
        s.findings.append(
            (
                (m.name, "command"),
                (f"replica {replica}: " if m.entry.copies > 1 else "")
                + verdict.problem
                + (
                    "; with --max-model-len auto vLLM would shorten the context to what fits, "
                    "but the gateway must know it: set --max-model-len"
                    if m.auto_context and m.context_from
                    else ""
                ),
            )
        )
    return verdict

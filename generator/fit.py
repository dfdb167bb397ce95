"""Will the model fit? Weights + one full --max-model-len sequence of KV cache, from files on disk only.

Reads the model's `config.json` and its safetensors *headers* (or `model.safetensors.index.json`): never
tensor data, never the network. The model is found as a local path (as `vllm serve` takes it) or in the
Hugging Face cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`, the
variables huggingface_hub itself reads). When nothing is on disk, the check says it was skipped.

The estimate is a lower bound of what vLLM needs (activations, CUDA graphs and the sampler come on top),
so a model it refuses cannot start; one it accepts may still need a larger fraction.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .sizes import GIB, fmt_bytes
from .vllm_command import ServeCommand

# Each vLLM instance holds its CUDA context (measured 0.46-0.49 GiB on an H100, vLLM 0.22) on top of
# `--gpu-memory-utilization x total`, and vLLM refuses to start when the GPU's free memory (after its own
# context exists) is below its fraction: the second of two 0.5 instances saw 38.59 of 79.18 GiB free.
CONTEXT_OVERHEAD = GIB // 2  # per instance; rules.gpu_memory adds it for every model on a GPU

DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
SAFETENSORS_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8,
                           "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
FLOAT_TENSORS = {"F64", "F32", "F16", "BF16"}  # cast to the serving dtype at load; quantized ints are not
MAX_HEADER = 100 * 2**20  # a safetensors header larger than this is not one
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


def hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def find_model_dir(model: str, revision: str | None = None, cache: Path | None = None) -> Path | None:
    """The directory holding the model's config.json: the path itself, or its HF cache snapshot."""
    local = Path(model).expanduser()
    if (local / "config.json").is_file():
        return local
    if model.count("/") != 1 or local.is_absolute():
        return None
    repo = (cache or hf_cache_dir()) / ("models--" + model.replace("/", "--"))
    ref = repo / "refs" / (revision or "main")
    rev = ref.read_text().strip() if ref.is_file() else revision
    if rev and (repo / "snapshots" / rev / "config.json").is_file():
        return repo / "snapshots" / rev
    if revision is None:  # no refs/main (e.g. copied caches): the newest snapshot with a config
        snaps = sorted((p for p in (repo / "snapshots").glob("*") if (p / "config.json").is_file()),
                       key=lambda p: p.stat().st_mtime)
        return snaps[-1] if snaps else None
    return None


def safetensors_header(path: Path) -> dict:
    """The JSON header of a .safetensors file: 8-byte little-endian length, then JSON. No tensor data."""
    with path.open("rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        if size > MAX_HEADER:
            raise ValueError(f"{path.name}: header of {size} bytes; not a safetensors file")
        return json.loads(fh.read(size))


@dataclass(frozen=True)
class Weights:
    stored: int  # bytes as the checkpoint holds them
    floating: int  # bytes of floating-point tensors among them (cast to the serving dtype at load); -1 unknown
    source: str  # "headers of N files" or "index"


def weights_on_disk(model_dir: Path) -> Weights | None:
    """Sum of tensor sizes from the safetensors headers, else the index's total_size."""
    index = model_dir / "model.safetensors.index.json"
    index_data = json.loads(index.read_text()) if index.is_file() else None
    if index_data is not None:
        files = sorted({model_dir / f for f in index_data.get("weight_map", {}).values()})
    else:
        files = sorted(model_dir.glob("*.safetensors"))
    if files and all(f.is_file() for f in files):
        stored = floating = 0
        for f in files:
            for name, t in safetensors_header(f).items():
                if name == "__metadata__":
                    continue
                begin, end = t["data_offsets"]
                stored += end - begin
                floating += (end - begin) if t["dtype"] in FLOAT_TENSORS else 0
        return Weights(stored, floating, f"safetensors headers of {len(files)} file(s)")
    total = (index_data or {}).get("metadata", {}).get("total_size")
    if total:
        return Weights(int(total), -1, index.name)
    return None


@dataclass(frozen=True)
class Estimate:
    model_dir: Path
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


def _config(model_dir: Path) -> dict:
    config = json.loads((model_dir / "config.json").read_text())
    text = config.get("text_config") or config.get("llm_config")
    return {**config, **text} if isinstance(text, dict) else config


def estimate(model_dir: Path, cmd: ServeCommand) -> Estimate | str:
    """The estimate, or why there is none (a sentence)."""
    cfg = _config(model_dir)
    weights = weights_on_disk(model_dir)
    if weights is None:
        return f"no safetensors weights or index in {model_dir}"
    ckpt_dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").removeprefix("torch.")
    ckpt = DTYPE_BYTES.get(ckpt_dtype, 2)
    wanted = (cmd.value("--dtype") or "auto").lower()
    serving = (2 if ckpt == 4 else ckpt) if wanted == "auto" else DTYPE_BYTES.get(wanted, 2)  # auto: fp32 -> 16-bit
    quantized = "quantization_config" in cfg
    loaded = weights.stored
    if not quantized and serving != ckpt:  # vLLM casts floating tensors to the serving dtype
        floating = weights.floating if weights.floating >= 0 else weights.stored
        loaded = weights.stored - floating + floating * serving // ckpt
    online = (cmd.value("--quantization") or "").lower()
    if not quantized and online.startswith("fp8"):
        loaded //= 2  # online fp8: linear layers at 1 byte (embeddings stay 16-bit: a slight underestimate)
    layers = cfg.get("num_hidden_layers") or cfg.get("n_layer") or cfg.get("num_layers")
    heads = cfg.get("num_attention_heads") or cfg.get("n_head")
    if not layers or not heads:
        return f"{model_dir / 'config.json'} has no num_hidden_layers/num_attention_heads"
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
    note = f"{'quantized ' if quantized else ''}{ckpt_dtype} checkpoint"
    if windowed:
        note += f", {windowed} sliding-window layers ({window} tokens)"
    if online:
        note += f", --quantization {online}"
    return Estimate(model_dir, loaded, weights.source, int(layers * per_layer), split, pp, note,
                    int(windowed * per_layer), window)


@dataclass(frozen=True)
class Verdict:
    fits: bool | None  # None: not checked against a memory budget
    line: str  # for the summary
    problem: str = ""  # when it does not fit: numbers and fixes


def check(cmd: ServeCommand, gpus: tuple[int, ...], context: int, fraction: float,
          gpu_memory: int | None, env: dict[str, str], cache: Path | None = None) -> Verdict:
    model_dir = find_model_dir(cmd.model, cmd.value("--revision"), cache)
    if model_dir is None:
        return Verdict(None, f"skipped: no config.json for {cmd.model} on disk (local path or {cache or hf_cache_dir()})")
    est = estimate(model_dir, cmd)
    if isinstance(est, str):
        return Verdict(None, f"skipped: {est}")
    tp = int(cmd.value("--tensor-parallel-size") or 1)
    weights, seq = est.per_gpu(context, tp)
    what = (f"weights {fmt_bytes(weights)} + KV {fmt_bytes(seq)} for one {context}-token sequence "
            f"({fmt_bytes(est.kv_per_token)}/token, {est.dtype_note})")
    if len(gpus) > 1:
        what += " per GPU"
    if not gpus:
        space = env.get("VLLM_CPU_KVCACHE_SPACE")
        if space and float(space) * GIB < seq:
            return Verdict(False, f"does not fit: {what}", (
                f"one {context}-token sequence needs {fmt_bytes(seq)} of KV cache but VLLM_CPU_KVCACHE_SPACE is "
                f"{space} GiB; raise it to {math.ceil(seq / GIB)} or lower --max-model-len to "
                f"{_tokens(float(space) * GIB / seq * context)}"))
        return Verdict(None, f"{what}; no GPU check (gpus: [])")
    if gpu_memory is None:
        return Verdict(None, f"{what}; not checked: set gpu_memory to compare with the GPU")
    budget = fraction * gpu_memory
    need = weights + seq
    if need <= budget:
        return Verdict(True, f"fits: {what} <= {fraction:.2f} x {fmt_bytes(gpu_memory)} = {fmt_bytes(budget)}")
    fixes = []
    if need <= gpu_memory - CONTEXT_OVERHEAD:
        fixes.append(f"raise --gpu-memory-utilization to {math.ceil(need / gpu_memory * 100) / 100:.2f}")
    if budget > weights:
        fixes.append(f"lower --max-model-len to {_tokens((budget - weights) / seq * context)}")
    if kv_dtype_bytes(cmd.value("--kv-cache-dtype") or "auto", 2) > 1 and weights + seq / 2 <= budget:
        fixes.append("use --kv-cache-dtype fp8 (halves the KV cache)")
    more = 2 * tp
    fixes.append(f"spread it over more GPUs (--tensor-parallel-size {more} with {more} gpus)")
    problem = (f"does not fit: --gpu-memory-utilization {fraction:.2f} of {fmt_bytes(gpu_memory)} = {fmt_bytes(budget)}"
               f"{' per GPU' if len(gpus) > 1 else ''}, but {what} = {fmt_bytes(need)} (from {est.model_dir}, "
               f"{est.weights_source}); " + ", or ".join(fixes))
    return Verdict(False, f"does not fit: {what} > {fmt_bytes(budget)}", problem)


def _tokens(n: float) -> str:
    """A --max-model-len value at most n: whole K when possible."""
    n = int(n)
    return f"{n // 1024}K" if n >= 1024 else str(max(n, 0))

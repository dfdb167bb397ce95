"""The fit check: weights + one full --max-model-len sequence against the model's share of its GPU(s),
from real published config.json files (tests/unit/fixtures/fit/SOURCE.md) and fake weights metadata."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from generator.compile.load import fit, model_files
from generator.compile.load.sizes import parse_size
from generator.compile.load.vllm_command import load_catalog, parse_serve_command

FIXTURES = Path(__file__).parent / "fixtures" / "fit"
GIB = 2**30


def header_only_shards(model_dir: Path, dtype: str = "BF16") -> None:
    """Write the index's shards as .safetensors files holding only a header: tensors whose
    data_offsets add up to the index's total_size, and no tensor data."""
    index = json.loads((model_dir / "model.safetensors.index.json").read_text())
    total = index["metadata"]["total_size"]
    shards: dict[str, list[str]] = {}
    for name, shard in index["weight_map"].items():
        shards.setdefault(shard, []).append(name)
    share = total // len(shards)
    for i, (shard, names) in enumerate(sorted(shards.items())):
        size = share if i < len(shards) - 1 else total - share * (len(shards) - 1)
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for k, name in enumerate(names):
            part = size // len(names) if k < len(names) - 1 else size - offset
            header[name] = {"dtype": dtype, "shape": [part // 2], "data_offsets": [offset, offset + part]}
            offset += part
        blob = json.dumps(header).encode()
        (model_dir / shard).write_bytes(struct.pack("<Q", len(blob)) + blob)


@pytest.fixture
def model_dir(tmp_path):
    def _copy(name: str) -> Path:
        return Path(shutil.copytree(FIXTURES / name, tmp_path / name))

    return _copy


def meta(path: Path | str, flags: str = "") -> model_files.ModelFiles:
    """What the loader finds for `vllm serve PATH` (disk here: the unit tests are offline)."""
    return model_files.gather({"m": parse_serve_command(f"vllm serve {path} {flags}", load_catalog())})["m"]


def estimate(path: Path, flags: str) -> fit.Estimate:
    files = meta(path)
    return fit.estimate(files.config, files.weights, parse_serve_command(f"vllm serve x {flags}", load_catalog()))


def verdict(path: Path | str, flags: str, gpus=(0,), util=0.9, memory: int | None = 80 * GIB, env=None):
    cmd = parse_serve_command(f"vllm serve {path} {flags}", load_catalog())
    context = parse_size(cmd.value("--max-model-len"))
    return fit.check(meta(path, flags), cmd, tuple(gpus), context, util, memory, env or {})


def test_safetensors_headers_are_summed_without_reading_tensor_data(model_dir):
    d = model_dir("qwen3-8b")
    header_only_shards(d)
    w = model_files.weights_on_disk(d)
    assert w.stored == 16_381_470_720 and w.floating == w.stored and "headers of 2 file(s)" in w.source
    assert sum(f.stat().st_size for f in d.glob("*.safetensors")) < 4096  # only headers on disk


def test_the_index_total_is_used_when_shards_are_not_on_disk(model_dir):
    w = model_files.weights_on_disk(model_dir("llama-3.1-70b"))
    assert (w.stored, w.source) == (141_107_412_992, "model.safetensors.index.json")


def test_kv_bytes_per_token_follow_the_config():
    qwen = estimate(FIXTURES / "qwen3-8b", "--max-model-len 8K")
    assert qwen.kv_per_token == 36 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head dim x bf16
    assert estimate(FIXTURES / "qwen3-8b", "--max-model-len 8K --kv-cache-dtype fp8").kv_per_token == 36 * 2 * 8 * 128
    llama = estimate(FIXTURES / "llama-3.1-70b", "--max-model-len 8K")
    assert llama.kv_per_token == 80 * 2 * 8 * (8192 // 64) * 2  # head dim from hidden size / heads
    glm = estimate(FIXTURES / "glm-4.7-flash", "--max-model-len 8K")
    assert glm.kv_per_token == 47 * (512 + 64) * 2 and glm.kv_split == 1  # MLA: one latent, replicated


def test_qwen3_8b_fits_its_share_of_an_h100(model_dir):
    v = verdict(model_dir("qwen3-8b"), "--max-model-len 32K", util=0.55)
    assert v.fits is True and v.line.startswith("fits: weights 15.3 GiB + KV 4.5 GiB for one 32768-token sequence")


def test_qwen3_8b_in_too_small_a_share_is_refused_with_numbers_and_fixes(model_dir):
    v = verdict(model_dir("qwen3-8b"), "--max-model-len 32K", util=0.2)
    assert v.fits is False
    assert "--gpu-memory-utilization 0.20 of 80 GiB = 16 GiB" in v.problem
    assert "weights 15.3 GiB + KV 4.5 GiB" in v.problem and "= 19.8 GiB" in v.problem
    assert "raise --gpu-memory-utilization to 0.25" in v.problem
    assert "lower --max-model-len to 5K" in v.problem
    assert "fp8" not in v.problem  # halving the KV cache would not be enough here


def test_an_fp8_kv_cache_is_honoured(model_dir):
    d = model_dir("qwen3-8b")
    bf16 = verdict(d, "--max-model-len 32K", util=0.22)
    assert bf16.fits is False and "use --kv-cache-dtype fp8" in bf16.problem
    assert verdict(d, "--max-model-len 32K --kv-cache-dtype fp8", util=0.22).fits is True


def test_llama_70b_does_not_fit_one_h100_and_more_gpus_is_the_fix(model_dir):
    d = model_dir("llama-3.1-70b")
    v = verdict(d, "--max-model-len 32K")
    assert v.fits is False and "weights 131.4 GiB" in v.problem
    assert "raise" not in v.problem and "--max-model-len" not in v.problem.split(";")[1]
    assert "--tensor-parallel-size 2 with 2 gpus" in v.problem
    assert verdict(d, "--max-model-len 32K -tp 2", gpus=(0, 1)).fits is True


def test_llama_70b_on_two_gpus_with_a_128k_context_is_refused_and_a_shorter_one_suggested(model_dir):
    d = model_dir("llama-3.1-70b")
    v = verdict(d, "--max-model-len 128K -tp 2", gpus=(0, 1))
    assert v.fits is False and "per GPU" in v.problem and "KV 20 GiB" in v.problem
    assert "lower --max-model-len to 40K" in v.problem
    assert verdict(d, "--max-model-len 128K -tp 4", gpus=(0, 1, 2, 3)).fits is True


def test_glm47_flash_mla_cache_is_not_split_by_tensor_parallelism(model_dir):
    d = model_dir("glm-4.7-flash")
    assert verdict(d, "--max-model-len 16K", util=0.9).fits is True
    small = verdict(d, "--max-model-len 16K", util=0.6)
    assert small.fits is False and "raise --gpu-memory-utilization to 0.71" in small.problem
    tp2 = verdict(d, "--max-model-len 16K -tp 2", gpus=(0, 1), util=0.6)
    assert tp2.fits is True and "KV 846 MiB" in tp2.line


def test_the_hugging_face_cache_is_searched(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--zai-org--GLM-4.7-Flash" / "snapshots" / "0123abc"
    shutil.copytree(FIXTURES / "glm-4.7-flash", snap)
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("0123abc")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert model_files.find_model_dir("zai-org/GLM-4.7-Flash") == snap
    assert verdict("zai-org/GLM-4.7-Flash", "--max-model-len 16K", util=0.6).fits is False


def test_nothing_on_disk_is_a_visible_skip_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    v = verdict("Qwen/Qwen3-8B", "--max-model-len 32K")
    assert v.fits is None and v.line.startswith("skipped: no config.json for Qwen/Qwen3-8B") and str(tmp_path) in v.line


def test_without_gpu_memory_it_estimates_but_does_not_judge(model_dir):
    v = verdict(model_dir("qwen3-8b"), "--max-model-len 32K", util=0.2, memory=None)
    assert v.fits is None and "weights 15.3 GiB" in v.line and "set gpu_memory" in v.line


def scripted_model(tmp_path: Path) -> Path:
    """The shape of the CPU demo's scripted models (generator/demo/scripted_model.py): float32, 2 layers."""
    d = tmp_path / "scripted"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 384,
                "num_hidden_layers": 2,
                "num_attention_heads": 6,
                "num_key_value_heads": 2,
                "head_dim": 64,
                "torch_dtype": "float32",
            }
        )
    )
    header = json.dumps({"w": {"dtype": "F32", "shape": [384, 384], "data_offsets": [0, 384 * 384 * 4]}}).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    return d


def test_cpu_models_get_an_estimate_and_the_cpu_kv_space_is_checked(tmp_path):
    d = scripted_model(tmp_path)
    ok = verdict(d, "--max-model-len 2048", gpus=(), env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    # float32 is served as 16-bit by vLLM's `auto` dtype: half the stored bytes, 2-byte KV
    assert ok.fits is None and ok.line.startswith("weights 288 KiB + KV 2 MiB") and "no GPU check (gpus: [])" in ok.line
    big = verdict(d, "--max-model-len 2M", gpus=(), env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert big.fits is False and "VLLM_CPU_KVCACHE_SPACE is 1 GiB" in big.problem and "raise it to 2" in big.problem
    assert "lower --max-model-len to 1024K" in big.problem


def test_a_refusal_stops_load_plan_naming_model_and_command(tmp_path, write, problems):
    d = tmp_path / "qwen3-8b"
    shutil.copytree(FIXTURES / "qwen3-8b", d)
    (msg,) = problems(
        f"gpu_memory: 80GiB\nqwen:\n  gpus: [0]\n  command: vllm serve {d} --max-model-len 32K "
        "--gpu-memory-utilization 0.2\n"
    )
    assert "qwen.command" in msg and "does not fit" in msg and "raise --gpu-memory-utilization to 0.25" in msg


def test_the_summary_line_is_in_the_plan(tmp_path, plan):
    d = scripted_model(tmp_path)
    (m,) = plan(f"cpu:\n  gpus: []\n  command: vllm serve {d} --max-model-len 2048\n").models
    assert m.fit.startswith("weights 288 KiB")


def test_sliding_window_layers_hold_at_most_their_window(tmp_path):
    d = tmp_path / "swa"
    d.mkdir()
    layers = ["sliding_attention", "full_attention"] * 12  # the pattern of gpt-oss / Gemma-style hybrids
    (d / "config.json").write_text(
        json.dumps(
            {
                "num_hidden_layers": 24,
                "num_attention_heads": 64,
                "head_dim": 64,
                "num_key_value_heads": 8,
                "sliding_window": 128,
                "layer_types": layers,
                "torch_dtype": "bfloat16",
            }
        )
    )
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 2**30}, "weight_map": {}}))
    est = estimate(d, "--max-model-len 128K")
    per_layer = 2 * 8 * 64 * 2
    assert est.kv_per_token == 12 * per_layer and "12 sliding-window layers (128 tokens)" in est.dtype_note
    assert est.per_gpu(131072, 1)[1] == 12 * per_layer * 131072 + 12 * per_layer * 128


def test_a_config_json_of_another_shape_is_a_skip_not_an_internal_error(tmp_path, plan):
    d = tmp_path / "odd"
    d.mkdir()
    (d / "config.json").write_text("[1, 2]")  # valid JSON, not an object
    (m,) = plan(f"gpu_memory: 80GiB\nodd:\n  gpus: [0]\n  command: vllm serve {d} --max-model-len 8K\n").models
    assert m.fit.startswith("skipped: could not read the model's files")

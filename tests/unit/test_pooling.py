"""Pooling models (embeddings, rerank): the kind from the command and the model's config, as vLLM 0.32 decides it,
and what follows from it in the plan, the LiteLLM config, the fit check and the client configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from generator.compile.load import pooling
from generator.compile.load.loader import load_plan
from generator.compile.load.vllm_command import load_catalog, parse_serve_command
from generator.compile.output import render_files
from generator.compile.renderers.clients import agent_models


def kind(flags: str = "", config: dict | None = None, st: bool = False) -> pooling.Kind:
    return pooling.model_kind(parse_serve_command(f"vllm serve org/m {flags}", load_catalog()), config, st)


def arch(name: str, **extra) -> dict:
    return {"architectures": [name], **extra}


@pytest.mark.parametrize(
    "config, expected",
    [
        (arch("LlamaForCausalLM"), "chat"),
        (arch("Qwen3ForCausalLM"), "chat"),
        (arch("BertModel"), "embedding"),  # vLLM's registry: a pooling class
        (arch("XLMRobertaModel"), "embedding"),
        (arch("SomeNewEncoderModel"), "embedding"),  # unknown to the registry: the suffix table (`Model` pools)
        (arch("SomeNewForCausalLM"), "chat"),
        (arch("BertForSequenceClassification", id2label={"0": "LABEL_0"}), "rerank"),  # a cross-encoder
        (arch("XLMRobertaForSequenceClassification", num_labels=1), "rerank"),
        (arch("HF_ColBERT"), "rerank"),  # late interaction: vLLM scores rerank, serves no /v1/embeddings
        (None, "chat"),  # no config read: the command alone decides
    ],
)
def test_the_kind_follows_the_architecture_as_vllm_decides_it(config, expected):
    assert kind(config=config).kind == expected


def test_llama_model_is_a_chat_model_in_vllm_although_its_name_ends_in_model():
    # the registry maps LlamaModel to LlamaForCausalLM, a text generation class: vLLM generates with it
    assert kind(config=arch("LlamaModel")).kind == "chat"


def test_a_sentence_transformers_model_pools_whatever_its_architecture():
    k = kind(config=arch("Qwen3ForCausalLM"), st=True)
    assert k.kind == "embedding" and "modules.json" in k.why


def test_modules_json_counts_only_with_a_pooling_module():
    assert pooling.sentence_pooling(
        [
            {"type": "sentence_transformers.models.Transformer"},
            {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"},
        ]
    )
    assert not pooling.sentence_pooling([{"type": "sentence_transformers.models.Transformer"}])
    assert not pooling.sentence_pooling(None) and not pooling.sentence_pooling({"type": "x"})


@pytest.mark.parametrize(
    "flags, config, expected",
    [
        ("--runner pooling", arch("Qwen3ForCausalLM"), "embedding"),  # converted to embeddings by default
        ("--convert embed", arch("Qwen3ForCausalLM"), "embedding"),
        ("--runner pooling", None, "embedding"),
        ("--convert classify", arch("Qwen3ForCausalLM", num_labels=1), "rerank"),
        ("--runner generate", arch("BertModel"), "chat"),
        (
            '--runner pooling --pooler-config \'{"task": "classify"}\'',
            arch("BertForSequenceClassification", num_labels=1),
            "rerank",
        ),
        # the Qwen3-Reranker recipe: a causal LM read as a 1-label classifier from two tokens
        (
            '--hf-overrides \'{"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": '
            '["no", "yes"], "is_original_qwen3_reranker": true}\'',
            arch("Qwen3ForCausalLM"),
            "rerank",
        ),
    ],
)
def test_the_command_decides_runner_and_convert(flags, config, expected):
    assert kind(flags, config).kind == expected


def test_the_summary_says_how_the_kind_was_found():
    assert "--runner pooling" in kind("--runner pooling", arch("Qwen3ForCausalLM")).why
    assert "BertModel" in kind(config=arch("BertModel")).why


@pytest.mark.parametrize(
    "config, labels",
    [
        (arch("BertForSequenceClassification"), 2),  # transformers' default: 2 labels
        (arch("BertForSequenceClassification", id2label={"0": "a", "1": "b", "2": "c"}), 3),
    ],
)
def test_a_classifier_of_several_labels_is_refused_with_the_fix(config, labels):
    k = kind(config=config)
    assert f"classifier of {labels} labels" in k.problem and "--convert embed" in k.problem


# --- through load_plan -------------------------------------------------------------------------------------


def model_dir(root: Path, name: str, config: dict, modules: list | None = None) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(
        json.dumps(
            {
                "max_position_embeddings": 512,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "hidden_size": 64,
                **config,
            }
        )
    )
    if modules is not None:
        (d / "modules.json").write_text(json.dumps(modules))
    return d


@pytest.fixture()
def models(tmp_path):
    emb = model_dir(tmp_path, "emb", arch("BertModel"))
    rr = model_dir(tmp_path, "rr", arch("BertForSequenceClassification", id2label={"0": "LABEL_0"}))
    st = model_dir(
        tmp_path,
        "st",
        arch("Qwen3ForCausalLM"),
        [{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}],
    )
    return tmp_path, emb, rr, st


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yml"
    path.write_text(text)
    return path


CHAT = """\
chat:
  gpus: []
  command: vllm serve org/chat --max-model-len 8K --enable-auto-tool-choice --tool-call-parser hermes
"""


def test_plan_and_litellm_entries_of_pooling_models(models):
    tmp, emb, rr, st = models
    path = write(
        tmp,
        "defaults:\n  litellm: {temperature: 0.7}\n"
        + CHAT
        + f"""\
embedder:
  gpus: []
  command: vllm serve {emb} --max-model-len 256
reranker:
  gpus: []
  command: vllm serve {rr} --max-model-len 256
st-embedder:
  gpus: []
  command: vllm serve {st} --max-model-len 512
""",
    )
    plan = load_plan(path)
    by = {m.name: m for m in plan.models}
    assert [by[n].kind for n in ("chat", "embedder", "reranker", "st-embedder")] == [
        "chat",
        "embedding",
        "rerank",
        "embedding",
    ]
    assert by["embedder"].litellm_params == {} and by["embedder"].max_tokens == 0  # no max_tokens, no sampling defaults
    assert by["chat"].litellm_params["temperature"] == 0.7
    config = yaml.safe_load(render_files(plan)["litellm/config.yaml"])
    entries = {e["model_name"]: e for e in config["model_list"]}
    assert entries["embedder"]["model_info"]["mode"] == "embedding"
    assert entries["reranker"]["model_info"]["mode"] == "rerank"
    assert entries["embedder"]["model_info"]["max_input_tokens"] == 256  # the context rule stays
    for name in ("embedder", "reranker"):
        assert "max_tokens" not in entries[name]["litellm_params"]
        assert "temperature" not in entries[name]["litellm_params"]
        assert entries[name]["litellm_params"]["model"] == f"hosted_vllm/{name}"
    assert "mode" not in entries["chat"]["model_info"]  # chat entries are as before
    assert [m.name for m in agent_models(plan)] == ["chat"]  # coding agents never see a pooling model


def test_sampling_defaults_and_generation_flags_on_a_pooling_model_are_refused(models, problems):
    tmp, emb, _, _ = models
    (a, b) = problems(f"""\
embedder:
  gpus: []
  command: vllm serve {emb} --max-model-len 256 --reasoning-parser qwen3
  litellm: {{temperature: 0.2}}
""")
    assert "embedder.litellm.temperature" in a + b and "embedding model" in a + b
    assert "--reasoning-parser would never apply" in a + b


def test_a_classifier_is_refused_naming_model_and_fix(tmp_path, problems):
    d = model_dir(tmp_path, "clf", arch("BertForSequenceClassification", id2label={"0": "a", "1": "b", "2": "c"}))
    (msg,) = problems(f"clf:\n  gpus: []\n  command: vllm serve {d} --max-model-len 256\n")
    assert "clf.command" in msg and "classifier of 3 labels" in msg


def test_the_fit_check_counts_no_kv_cache_for_a_pooling_model(tmp_path):
    from generator.compile.load import fit, model_files

    d = model_dir(tmp_path, "emb", arch("BertModel"))
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 2**30}, "weight_map": {}}))
    cmd = parse_serve_command(f"vllm serve {d} --max-model-len 512", load_catalog())
    files = model_files.gather({"m": cmd})["m"]
    chat = fit.check(files, cmd, (0,), 512, 0.9, 2 * 2**30, {})
    pooled = fit.check(files, cmd, (0,), 512, 0.9, 2 * 2**30, {}, kv_cache=False)
    assert "KV 0 B" not in chat.line and "no KV cache counted" in pooled.line and pooled.fits


def test_on_demand_and_kubernetes_carry_the_mode_too(models):
    from generator.compile.renderers.litellm import local_api_base, render_litellm

    tmp, emb, rr, _ = models
    pooled = f"""\
embedder:
  gpus: []
  command: vllm serve {emb} --max-model-len 256
reranker:
  gpus: []
  replicas: 2
  command: vllm serve {rr} --max-model-len 256
"""
    on_demand = load_plan(write(tmp, pooled.replace("  gpus: []\n", "  gpus: []\n  on_demand: true\n", 1)))
    entries = {e["model_name"]: e for e in render_litellm(on_demand, local_api_base)["model_list"]}
    assert entries["embedder"]["model_info"]["mode"] == "embedding"
    assert "/m/embedder/v1" in entries["embedder"]["litellm_params"]["api_base"]  # the controller proxies any path
    files = render_files(load_plan(write(tmp, pooled)), ("k8s",))
    assert any("mode: rerank" in text for rel, text in files.items() if rel.startswith("k8s/")), sorted(files)

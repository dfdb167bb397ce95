"""What a model serves: chat (text generation), embeddings or rerank, decided as vLLM 0.32 decides it.

One source of truth: the command (`--runner`, `--convert`, `--pooler-config`, `--hf-overrides`) and the model's own
files (config.json's architectures and labels, a sentence-transformers modules.json). There is no models.yml field
that could disagree with them. The decision is vLLM's (vllm/config/model.py `ModelConfig._get_runner_type`,
`_get_convert_type`, `get_pooling_task`; vllm/entrypoints/pooling `enable_scoring_api`), applied to tables that
`make catalog` takes from the pinned vLLM itself (data/vllm_architectures.json); vLLM is never imported here.

- runner: `--runner` when not auto; else pooling when `--convert` asks for a conversion; else pooling when the model
  is a sentence-transformers model with a Pooling module; else the registry's verdict for the first architecture
  it knows, else the architecture's name suffix (`...Model` pools, `...ForCausalLM` generates); else generate.
- task of a pooling model: `--pooler-config`'s task; `--convert embed|classify`; a pooling class's own task; the
  suffix table's convert type; else embed.
- kind for the gateway: embed -> embedding (vLLM also serves /rerank for it, scoring with cosine similarity);
  classify with one label (a cross-encoder) and token_embed (late interaction, ColBERT) -> rerank. Anything else
  (a classifier of N labels, token classification) is refused: LiteLLM has no route for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from .schema import ModelEntry
from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Finding, Model, State

ARCHITECTURES_PATH = Path(__file__).parent / "data" / "vllm_architectures.json"
CHAT, EMBEDDING, RERANK = "chat", "embedding", "rerank"  # ModelPlan.kind; the last two are LiteLLM's model_info.mode
GENERATION_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser", "--reasoning-parser")  # chat models' only


@dataclass(frozen=True)
class Tables:
    suffix_defaults: tuple[tuple[str, str, str], ...]  # (architecture suffix, runner, convert), first match wins
    sentence_pooling: frozenset[str]  # modules.json types of a sentence-transformers Pooling module
    architectures: dict[str, dict[str, str]]  # registry: arch -> {"runner": ..., "task": ... (pooling classes)}


@cache
def load_tables(path: Path = ARCHITECTURES_PATH) -> Tables:
    data = json.loads(path.read_text())
    return Tables(
        tuple(map(tuple, data["suffix_defaults"])),
        frozenset(data["sentence_transformers_pooling"]),
        data["architectures"],
    )


@dataclass(frozen=True)
class Kind:
    kind: str  # chat | embedding | rerank
    why: str  # how it was decided, for the summary ("" for an ordinary chat model)
    problem: str = ""  # a pooling model the gateway cannot serve: one sentence with the fix


def sentence_pooling(modules: object, tables: Tables | None = None) -> bool:
    """Does a sentence-transformers modules.json (parsed) have a Pooling module? (vLLM: get_pooling_config)"""
    kinds = (tables or load_tables()).sentence_pooling
    return isinstance(modules, list) and any(isinstance(m, dict) and m.get("type") in kinds for m in modules)


def _json_flag(cmd: ServeCommand, name: str) -> dict:
    """A JSON-valued flag (`--hf-overrides '{...}'`) as a dict; {} when absent or not an object."""
    raw = cmd.value(name)
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _suffix(arch: str, tables: Tables, runner: str | None = None) -> tuple[str, str] | None:
    for suffix, default_runner, convert in tables.suffix_defaults:
        if (runner is None or runner == default_runner) and arch.endswith(suffix):
            return default_runner, convert
    return None


def default_runner(architectures: list[str], st_pooling: bool, tables: Tables) -> tuple[str, str]:
    """(runner, why) for `--runner auto` without a conversion: vLLM's `_get_default_runner_type`."""
    if st_pooling:
        return "pooling", "its modules.json (sentence-transformers) has a Pooling module"
    for arch in architectures:
        known = tables.architectures.get(arch)
        if known:
            return known["runner"], f"{arch} is a {known['runner']} model in vLLM's registry"
        if (match := _suffix(arch, tables)) is not None:
            return match[0], f"architecture {arch}"
    return "generate", ""


def _convert(architectures: list[str], tables: Tables) -> tuple[str, str]:
    """(task, why) of a pooling model under `--convert auto`: vLLM's `_get_default_convert_type`, with a pooling
    class's own task for "none" (no conversion)."""
    for arch in architectures:
        known = tables.architectures.get(arch)
        if known and known["runner"] == "pooling":
            return known.get("task", "embed"), f"{arch}'s own task {known.get('task', 'embed')}"
        if (match := _suffix(arch, tables, "pooling")) is not None:
            return match[1], f"architecture {arch}"
    return "embed", "vLLM converts a model of another architecture to embeddings"


def num_labels(config: dict) -> int:
    """Labels of a classifier as vLLM sees them (transformers' default is 2; vLLM's `from_2_way_softmax`
    conversion (Qwen3-Reranker style) and Jina's VL ranker make 1)."""
    method = config.get("method")
    tokens = config.get("classifier_from_token")
    if config.get("is_original_qwen3_reranker") and isinstance(tokens, list) and len(tokens) == 2:
        return 1  # vLLM's Qwen3ForSequenceClassificationConfig makes it from_2_way_softmax
    if method == "from_2_way_softmax":
        return 1
    if method and isinstance(tokens, list):
        return len(tokens)
    if "JinaVLForRanking" in (config.get("architectures") or []):
        return 1
    labels = config.get("num_labels")
    if isinstance(labels, int) and not isinstance(labels, bool):
        return labels
    id2label = config.get("id2label")
    return len(id2label) if isinstance(id2label, dict) and id2label else 2


def model_kind(cmd: ServeCommand, config: dict | None, st_pooling: bool = False, tables: Tables | None = None) -> Kind:
    """The model's kind from its command and config (None: not read; then the command alone decides)."""
    tables = tables or load_tables()
    overrides = _json_flag(cmd, "--hf-overrides")
    config = {**(config or {}), **overrides}
    archs = [a for a in (config.get("architectures") or []) if isinstance(a, str)]
    runner_flag = (cmd.value("--runner") or "auto").lower()
    convert_flag = (cmd.value("--convert") or "auto").lower()
    if runner_flag != "auto":
        runner, why = runner_flag, f"--runner {runner_flag}"
    elif convert_flag not in ("auto", "none"):
        runner, why = "pooling", f"--convert {convert_flag}"
    else:
        runner, why = default_runner(archs, st_pooling, tables)
    if runner != "pooling":
        return Kind(CHAT, "")
    task = _json_flag(cmd, "--pooler-config").get("task")
    if isinstance(task, str):
        how = f"--pooler-config task {task}"
    elif convert_flag not in ("auto", "none"):
        task, how = convert_flag, f"--convert {convert_flag}"
    else:
        task, how = _convert(archs, tables)
    why = why if why == how else f"{why}; {how}" if why else how
    if task == "embed":
        return Kind(EMBEDDING, why)
    if task == "token_embed":
        return Kind(RERANK, f"{why} (late interaction: vLLM serves rerank, no /v1/embeddings)")
    if task == "classify":
        labels = num_labels(config)
        if labels == 1:
            return Kind(RERANK, f"{why}, 1 label (a cross-encoder)")
        return Kind(
            RERANK,
            why,
            f"vLLM would serve it as a classifier of {labels} labels ({why}), which the gateway "
            "cannot route (LiteLLM serves chat, embeddings and rerank; vLLM scores rerank only "
            "with a 1-label classifier): serve a cross-encoder (num_labels 1) or use --convert embed",
        )
    return Kind(
        EMBEDDING,
        why,
        f"vLLM would serve it for the pooling task {task} ({why}), which the gateway cannot "
        "route (LiteLLM serves chat, embeddings and rerank): use --convert embed or classify",
    )


def pooling_fields(name: str, kind: str, why: str, cmd: ServeCommand, entry: ModelEntry) -> list[Finding]:
    """An embedding or rerank model generates no text: a request default of its own (`litellm:`) or a tool or
    reasoning flag would never apply. (`defaults.litellm` is for the chat models: it is left out silently.)"""
    findings: list[Finding] = []
    what = f"{name} is {'an' if kind == 'embedding' else 'a'} {kind} model ({why}): it generates no text, so"
    for field in sorted(entry.litellm.model_dump(exclude_none=True)):
        findings.append(((name, "litellm", field), f"{what} `litellm.{field}` would never apply; remove it"))
    for flag in GENERATION_FLAGS:
        if cmd.enabled(flag):
            findings.append(((name, "command"), f"{what} {flag} would never apply; remove it"))
    return findings


def decide(s: State, m: Model) -> None:
    """The model's kind; a pooling model's refusals: a kind the gateway cannot route, what would never apply."""
    meta = m.meta
    m.kind = model_kind(m.cmd, meta.config, sentence_pooling(meta.modules))
    if m.kind.problem:
        s.findings.append(((m.name, "command"), m.kind.problem))
    if m.kind.kind != CHAT:
        s.findings += pooling_fields(m.name, m.kind.kind, m.kind.why, m.cmd, m.entry)

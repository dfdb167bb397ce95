"""A chat model's LoRA adapters (models.yml `adapters:`) -> their plans and the vLLM flags that serve them.

vLLM 0.32 serves adapters with `--enable-lora --lora-modules name=path ... --max-loras N --max-lora-rank R`:

- `--lora-modules` takes every adapter after one flag (nargs +; a second `--lora-modules` replaces the first), each
  as `name=path`, or as JSON (`{"name": ..., "path": ...}`) when the path holds a ',' (vllm/entrypoints/launchers/
  cli_args.py LoRAParserAction); a relative path is taken from vLLM's working directory, a Hub repo id is downloaded
  at its default branch (vllm/lora/utils.py get_adapter_absolute_path: no revision);
- `--max-loras`: adapters in one batch (vLLM's default 1); the generator writes the number of adapters unless the
  command sets it (fewer is valid: the others wait their turn);
- `--max-lora-rank`: one of vLLM's LoRAConfig.MaxLoRARanks (the catalog's choices); an adapter of a higher rank fails
  to load. The generator reads each adapter's rank (`r`, and the largest of `rank_pattern`) from its
  adapter_config.json when it is at hand (the path itself, the host side of a `volumes:` mount, or the Hugging Face
  cache) and writes the smallest allowed rank that holds them all.

Refusals (one line each, naming the model, the field and the fix) are findings; nothing here raises.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..plan import AdapterPlan, Mount
from . import model_files
from .output_budget import max_tokens_for
from .pooling import CHAT, EMBEDDING, Kind
from .schema import Adapter, Defaults, LitellmParams, ModelEntry
from .vllm_command import Catalog, ServeCommand
from .volumes import merged_volumes

if TYPE_CHECKING:
    from .state import Finding, Model, State

# vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter (vllm/entrypoints/serve/lora/api_router.py attach_router:
# absent unless this is on); `make apply` adds and removes adapters through them without a restart
RUNTIME_ENV = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
LORA_FLAGS = ("--enable-lora", "--lora-modules", "--max-loras", "--max-lora-rank")
CONFIG = "adapter_config.json"


def allowed_ranks(catalog: Catalog) -> tuple[int, ...]:
    """vLLM's accepted --max-lora-rank values, from the pinned vLLM's parser (the flag catalog)."""
    return tuple(sorted(int(c) for c in catalog.flags["--max-lora-rank"]["choices"]))


def config_rank(config: object) -> int | None:
    """The largest rank of a PEFT adapter_config.json: `r`, or a larger one of `rank_pattern`."""
    if not isinstance(config, dict):
        return None
    ranks = [
        config.get("r"),
        *((config.get("rank_pattern") or {}).values() if isinstance(config.get("rank_pattern"), dict) else ()),
    ]
    ranks = [r for r in ranks if isinstance(r, int) and not isinstance(r, bool) and r > 0]
    return max(ranks) if ranks else None


def _host_dirs(path: str, volumes: tuple[Mount, ...]) -> list[Path]:
    """Where a directory the backend names may be on this machine: the path itself, then the host side of the
    `volumes:` mount it lies under (a plain host path; ${VAR} sources are compose's to resolve)."""
    found = [Path(path).expanduser()]
    for v in volumes:
        if v.named or "$" in v.source or not (path == v.target or path.startswith(v.target.rstrip("/") + "/")):
            continue
        found.append(Path(v.source).expanduser() / os.path.relpath(path, v.target))
    return found


def read_rank(adapter: Adapter, volumes: tuple[Mount, ...]) -> tuple[int | None, str]:
    """(rank, where it was read) or (None, why not)."""
    if adapter.repo is not None:
        found = (
            model_files.cached_snapshot(adapter.repo, None, CONFIG) if model_files.is_repo_id(adapter.repo) else None
        )
        dirs = [found] if found else []
        nowhere = f"no {CONFIG} of {adapter.repo} in the Hugging Face cache ({model_files.hf_cache_dir()})"
    else:
        dirs = _host_dirs(adapter.path or "", volumes)
        nowhere = f"no {CONFIG} at {adapter.path}" + (" (nor at the host side of its volume)" if len(dirs) > 1 else "")
    for d in dirs:
        config = d / CONFIG
        if config.is_file():
            try:
                rank = config_rank(json.loads(config.read_text()))
            except (OSError, ValueError) as exc:
                return None, f"{config} could not be read ({type(exc).__name__}: {exc})"
            return (rank, f"from {config}") if rank else (None, f"{config} has no rank `r`")
    return None, nowhere


def lora_module(name: str, source: str) -> str:
    """One --lora-modules item: vLLM's `name=path`, or its JSON form when the path would break that form."""
    return f"{name}={source}" if "," not in source else json.dumps({"name": name, "path": source})


def lora_flags(
    name: str, cmd: ServeCommand, adapters: tuple[AdapterPlan, ...], catalog: Catalog
) -> tuple[tuple[str, ...], list[Finding], list[str]]:
    """(flags to add to the command, refusals, notes) for the adapters of model `name`."""
    if not adapters:
        return (), [], []
    findings: list[Finding] = []
    notes: list[str] = []
    flag = cmd.last("--enable-lora")
    if flag is not None and flag.negated:
        findings.append(
            (
                (name, "command"),
                "--no-enable-lora turns off the LoRA adapters listed in `adapters:`; "
                "remove it (the generator writes --enable-lora)",
            )
        )
    if cmd.last("--lora-modules") is not None:
        findings.append(
            (
                (name, "command"),
                "--lora-modules in the command and `adapters:` both list adapters: "
                "keep them in `adapters:` only (each becomes a gateway model) and "
                "remove --lora-modules",
            )
        )
    servers = cmd.value("--api-server-count")
    if servers is not None and servers.isdigit() and int(servers) > 1:
        findings.append(
            (
                (name, "command"),
                f"--api-server-count {servers} with `adapters:`: vLLM refuses runtime "
                "adapter loading (which `make apply` uses to add an adapter without a "
                "restart) with more than one API server; remove --api-server-count",
            )
        )
    ranks = allowed_ranks(catalog)
    known = [(a, a.rank) for a in adapters if a.rank is not None]  # (adapter, its rank)
    top = max(known, key=lambda k: k[1]) if known else None
    set_rank = cmd.value("--max-lora-rank")
    chosen: int | None = None  # the rank written, from the adapters whose rank is known
    out: list[str] = [] if cmd.enabled("--enable-lora") else ["--enable-lora"]
    out += ["--lora-modules", *(lora_module(a.name, a.source) for a in adapters)]
    if cmd.value("--max-loras") is None:
        out += ["--max-loras", str(len(adapters))]
    if set_rank is not None:
        for a, rank in known:
            if rank > int(set_rank):
                findings.append(
                    (
                        (name, "adapters", a.name),
                        f"adapter {a.name} has rank {rank} ({a.rank_from}), above the command's "
                        f"--max-lora-rank {set_rank}: vLLM would refuse to load it; raise --max-lora-rank "
                        f"to {next((r for r in ranks if r >= rank), ranks[-1])} or remove it and let the "
                        "generator choose",
                    )
                )
    elif top is not None:
        top_adapter, top_rank = top
        fits = [r for r in ranks if r >= top_rank]
        if not fits:
            findings.append(
                (
                    (name, "adapters", top_adapter.name),
                    f"adapter {top_adapter.name} has rank {top_rank} ({top_adapter.rank_from}), above the largest "
                    f"--max-lora-rank vLLM {catalog.vllm_version} accepts ({ranks[-1]}); serve an adapter of "
                    f"rank <= {ranks[-1]}",
                )
            )
        else:
            chosen = fits[0]
            out += ["--max-lora-rank", str(chosen)]
    unknown = [a for a in adapters if a.rank is None]
    if unknown and set_rank is None:
        default = catalog.flags["--max-lora-rank"]["default"]
        notes.append(
            f"{name}: the rank of {', '.join(a.name for a in unknown)} is unknown ("
            f"{'; '.join(a.rank_from for a in unknown)}): "
            + (
                f"--max-lora-rank {chosen} is from the others; "
                if chosen is not None
                else f"vLLM's default --max-lora-rank {default} applies; "
            )
            + "an adapter of a higher rank fails to load: set --max-lora-rank in the command"
        )
    return tuple(out), findings, notes


def adapter_plans(
    name: str,
    adapters: dict[str, Adapter],
    base_defaults: LitellmParams,
    own: LitellmParams,
    context: int,
    volumes: tuple[Mount, ...],
) -> tuple[tuple[AdapterPlan, ...], list[Finding]]:
    """Each adapter's plan: its rank, and its request defaults (defaults.litellm, then the base's `litellm:`, then
    its own), with a max_tokens below the base's context."""
    plans, findings = [], []
    for adapter_name, a in adapters.items():
        if a.revision is not None:
            findings.append(
                (
                    (name, "adapters", adapter_name, "revision"),
                    "vLLM 0.32 downloads an adapter repo's default branch only (no revision for "
                    f"--lora-modules): download it (`hf download {a.repo or 'org/name'} --revision "
                    f"{a.revision} --local-dir DIR`) and give `path: DIR`, or remove `revision:`",
                )
            )
        params = {
            **base_defaults.model_dump(exclude_none=True),
            **own.model_dump(exclude_none=True),
            **a.litellm.model_dump(exclude_none=True),
        }
        max_tokens, derived, found = max_tokens_for(name, params.get("max_tokens"), context)
        if a.litellm.max_tokens is not None:  # an inherited one is the base's finding already
            findings += [((name, "adapters", adapter_name, *path[1:]), msg) for path, msg in found]
        rank, rank_from = read_rank(a, volumes)
        plans.append(
            AdapterPlan(
                name=adapter_name,
                source=a.path if a.path is not None else a.repo or "",
                local=a.path is not None,
                rank=rank,
                rank_from=rank_from,
                max_tokens=max_tokens,
                max_tokens_derived=derived,
                litellm_params=dict(sorted({**params, "max_tokens": max_tokens}.items())),
                description=a.description.strip(),
            )
        )
    return tuple(plans), findings


def served_adapters(
    name: str, entry: ModelEntry, defaults: Defaults, kind: Kind, cmd: ServeCommand, context: int, catalog: Catalog
) -> tuple[tuple[AdapterPlan, ...], tuple[str, ...], list[Finding], list[str]]:
    """Model `name`'s adapters: (their plans, the flags to add to its command, refusals, notes)."""
    if not entry.adapters:
        return (), (), [], []
    if kind.kind != CHAT:
        return (
            (),
            (),
            [
                (
                    (name, "adapters"),
                    f"{name} is {'an' if kind.kind == EMBEDDING else 'a'} {kind.kind} model "
                    f"({kind.why}): `adapters:` are for chat models (the gateway serves each "
                    "as a chat model); remove them",
                )
            ],
            [],
        )
    plans, findings = adapter_plans(
        name, entry.adapters, defaults.litellm, entry.litellm, context, merged_volumes(defaults.volumes, entry.volumes)
    )
    flags, found, notes = lora_flags(name, cmd, plans, catalog)
    return plans, flags, findings + found, notes


def name_problems(models: list, adapters: dict[str, tuple[AdapterPlan, ...]]) -> list[Finding]:
    """An adapter's name is a model name at the gateway: it may be no models.yml name, served name or other
    adapter's name (`models`: the ModelPlans; `adapters`: models.yml key -> its adapters)."""
    taken = {m.served_name: f"the served name of {m.entry}" for m in models} | {
        m.entry: f"the model {m.entry}" for m in models
    }
    findings = []
    for entry, plans in adapters.items():
        for a in plans:
            if a.name in taken:
                findings.append(
                    (
                        (entry, "adapters", a.name),
                        f"adapter name {a.name!r} is already {taken[a.name]}; "
                        "clients could not tell them apart: rename the adapter",
                    )
                )
            taken.setdefault(a.name, f"an adapter of {entry}")
    return findings


def serve(s: State, m: Model) -> None:
    """Model `m`'s adapters and the flags that serve them; an adapter whose rank is unknown is a note."""
    m.adapters, m.lora_args, found, notes = served_adapters(
        m.name, m.entry, s.file.defaults, m.kind, m.cmd, m.context, s.catalog
    )
    s.findings += found
    m.notes += notes


def unique(s: State) -> None:
    """No adapter takes a name clients already use for a model or another adapter."""
    s.findings += name_problems(s.backends, {m.entry: m.adapters for m in s.backends if m.adapters and m.replica <= 1})

"""Render every generated file to text, then write them all at once (temp files + rename) or diff them."""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

import yaml

from .plan import Plan
from .render_compose import render_compose
from .render_litellm import AUTH_MODULE, HOOK_MODULE, render_litellm

COMPOSE_FILE = "compose/docker-compose.yml"
LITELLM_FILE = "litellm/config.yaml"
HOOK_FILE = f"litellm/{HOOK_MODULE}.py"
AUTH_FILE = f"litellm/{AUTH_MODULE}.py"
ENV_FILE = "compose/.env"
ENV_HEADER = "# Keys for the gateway and the backends, made by `make regenerate`. Git-ignored: never commit."
HOOKS_DIR = Path(__file__).parent / "gateway_hooks"


GENERATED_MARK = b"# GENERATED from "


def header(plan: Plan) -> str:
    return (
        f"# GENERATED from {Path(plan.source).name} (sha256 {plan.source_digest[:16]}) by `python -m generator`;\n"
        f"# vLLM flags checked against vLLM {plan.vllm_version}. Do not edit: change models.yml, run `make regenerate`.\n"
    )


class _Dumper(yaml.SafeDumper):
    """Short lists of scalars inline (`[vllm, serve]`), everything else in block style."""


def _represent_list(dumper: yaml.SafeDumper, data: list):
    flow = all(isinstance(x, (str, int, float)) for x in data) and len(repr(data)) <= 60
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def dump_yaml(data: dict) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True)


def render_files(plan: Plan) -> dict[str, str]:
    """Relative path -> exact text. Same plan, same bytes."""
    files = {
        COMPOSE_FILE: header(plan) + dump_yaml(render_compose(plan)),
        LITELLM_FILE: header(plan) + dump_yaml(render_litellm(plan)),
        **gateway_modules(plan),
    }
    return files


def gateway_modules(plan: Plan) -> dict[str, str]:
    """Python modules the LiteLLM config names; copied next to config.yaml, where LiteLLM imports them."""
    modules = {AUTH_FILE: AUTH_MODULE}
    if plan.gateway.clamp_max_tokens:
        modules[HOOK_FILE] = HOOK_MODULE
    return {rel: header(plan) + (HOOKS_DIR / f"{mod}.py").read_text() for rel, mod in modules.items()}


def write_files(files: dict[str, str], out_dir: Path) -> list[str]:
    """Write every file to a temp name first; rename only when all are written. Returns changed paths."""
    staged: list[tuple[Path, Path]] = []
    changed = []
    try:
        for rel, text in files.items():
            target = out_dir / rel
            if target.exists() and target.read_text() == text:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.chmod(tmp, 0o644)
            staged.append((Path(tmp), target))
            changed.append(rel)
        for tmp, target in staged:
            os.replace(tmp, target)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    return changed


def stale_files(files: dict[str, str], out_dir: Path) -> list[str]:
    """Paths whose content on disk differs from what would be generated (missing and orphans count)."""
    return [rel for rel, text in files.items()
            if not (out_dir / rel).exists() or (out_dir / rel).read_text() != text] + orphans(files, out_dir)


def orphans(files: dict[str, str], out_dir: Path) -> list[str]:
    """Files we generated earlier (they carry our header) that the current plan no longer produces."""
    found = []
    for folder in sorted({Path(rel).parent for rel in files}):
        for path in sorted((out_dir / folder).glob("*")):
            rel = path.relative_to(out_dir).as_posix()
            if path.is_file() and rel not in files and path.read_bytes().startswith(GENERATED_MARK):
                found.append(rel)
    return found


def remove_orphans(files: dict[str, str], out_dir: Path) -> list[str]:
    removed = orphans(files, out_dir)
    for rel in removed:
        (out_dir / rel).unlink()
    return removed


def ensure_env_file(path: Path, names: tuple[str, ...]) -> list[str]:
    """Create or complete compose/.env (mode 600) with a random key per missing name; existing keys stay."""
    existing = read_env_file(path) if path.exists() else {}
    added = [n for n in names if not existing.get(n)]
    if not added:
        return []
    lines = path.read_text().splitlines() if path.exists() else [ENV_HEADER]
    lines = [ln for ln in lines if ln.partition("=")[0].strip() not in added]  # drop empty placeholders
    lines += [f"{n}={secrets.token_urlsafe(32)}" for n in added]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".env.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return added


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            values[key.strip()] = value.strip()
    return values

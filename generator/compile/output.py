"""Write the rendered files all at once (temp files + rename) or diff them; the keys file (.env)."""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

from .plan import Plan
from .renderers import COMPOSE_FILE, LITELLM_FILE, TARGETS  # noqa: F401  (re-exported for callers)
from .renderers.stack import ENV_FILE, ENV_HEADER  # noqa: F401  (re-exported for callers)
from .renderers.text import GENERATED_MARKS

# Kubernetes gets keys of its own (k8s/secrets.env, read by kustomize's secretGenerator), not
# compose/.env's: a cluster is another place keys are stored and seen (etcd, its admins); a key
# that leaks from one must not open the other. Copy a value across by hand to keep one key.


def checked_targets(target: str, out_dir: Path) -> tuple[str, ...]:
    """What --check covers: the target, plus other targets whose generated files exist under out_dir."""
    extra = [
        t.name
        for t in TARGETS.values()
        if t.name != target
        and t.marker
        and (out_dir / t.marker).is_file()
        and (out_dir / t.marker).read_bytes().startswith(GENERATED_MARKS)
    ]
    return (target, *extra)


def render_files(plan: Plan, targets: tuple[str, ...] = ("stack",)) -> dict[str, str]:
    """Relative path -> exact text for the chosen targets. Same plan, same bytes."""
    files: dict[str, str] = {}
    for target in targets:
        files.update(TARGETS[target].render(plan))
    return files


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
        for staged_tmp, target in staged:
            os.replace(staged_tmp, target)
    finally:
        for staged_tmp, _ in staged:
            staged_tmp.unlink(missing_ok=True)
    return changed


def stale_files(files: dict[str, str], out_dir: Path, folders: tuple[str, ...] = ()) -> list[str]:
    """Paths whose content on disk differs from what would be generated (missing and orphans count)."""
    return [
        rel for rel, text in files.items() if not (out_dir / rel).exists() or (out_dir / rel).read_text() != text
    ] + orphans(files, out_dir, folders)


def orphans(files: dict[str, str], out_dir: Path, folders: tuple[str, ...] = ()) -> list[str]:
    """Files we generated earlier (they carry our header) that the current plan no longer produces, in the folders
    it writes and in `folders` (a target's own: Target.folders)."""
    found = []
    for folder in sorted({Path(rel).parent for rel in files} | {Path(f) for f in folders}):
        for path in sorted((out_dir / folder).glob("*")):
            rel = path.relative_to(out_dir).as_posix()
            if path.is_file() and rel not in files and path.read_bytes().startswith(GENERATED_MARKS):
                found.append(rel)
    return found


def remove_orphans(files: dict[str, str], out_dir: Path, folders: tuple[str, ...] = ()) -> list[str]:
    removed = orphans(files, out_dir, folders)
    for rel in removed:
        (out_dir / rel).unlink()
    return removed


def ensure_env_file(path: Path, names: tuple[str, ...], header: str = ENV_HEADER) -> list[str]:
    """Create or complete a keys file (mode 600) with a random key per missing name; existing keys stay."""
    existing = read_env_file(path) if path.exists() else {}
    added = [n for n in names if not existing.get(n)]
    if not added:
        return []
    lines = path.read_text().splitlines() if path.exists() else [header]
    lines = [ln for ln in lines if ln.partition("=")[0].strip() not in added]  # drop empty placeholders
    lines += [f"{n}={secrets.token_urlsafe(32)}" for n in added]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".env.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return added


def missing_provider_keys(plan, keys_file: Path) -> list[str]:
    """A line per hosted model whose provider key is neither in `keys_file` nor in this environment (the admin's to
    set; the generator never makes one): its requests will fail until it is set."""
    written = read_env_file(keys_file) if keys_file.exists() else {}
    return [
        f"hosted model {m.name}: set {m.hosted.key_env} (its {m.hosted.provider} key) in {keys_file} or the "
        "environment the stack starts in; until then its requests fail"
        for m in plan.hosted
        if m.hosted and not (written.get(m.hosted.key_env) or os.environ.get(m.hosted.key_env))
    ]


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            values[key.strip()] = value.strip()
    return values

"""models.yml `volumes:` (defaults' and each model's): each list mounts a container path once and none on the stack's
caches; a backend gets defaults.volumes, then its own (its own replace a default at the same container path)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plan import Mount
from .schema import BACKEND_CACHES, VOLUME

if TYPE_CHECKING:
    from .state import Finding, Model, State


def _mount(text: str) -> Mount:
    m = VOLUME.match(text)
    if m is None:  # the schema checks the syntax first
        raise ValueError(f"{text!r} is not a volume (host:container[:ro|rw])")
    return Mount(m["source"], m["target"].rstrip("/") or "/", m["mode"] == "ro")


def volume_problems(where: str, entries: list[str]) -> list[Finding]:
    """One `volumes:` list (defaults' or a model's): no container path twice, none on the stack's caches."""
    findings: list[Finding] = []
    caches = {target: volume for volume, target in BACKEND_CACHES.items()}
    seen: set[str] = set()
    for i, text in enumerate(entries):
        target = _mount(text).target
        if target in caches:
            findings.append(
                (
                    (where, "volumes", i),
                    f"{target} is where the stack mounts its {caches[target]} "
                    "volume; mount yours elsewhere (e.g. /models)",
                )
            )
        elif target in seen:
            findings.append(((where, "volumes", i), f"{target} is mounted twice; keep one entry"))
        seen.add(target)
    return findings


def merged_volumes(defaults: list[str], own: list[str]) -> tuple[Mount, ...]:
    """defaults.volumes then the model's; a model's entry replaces a default with the same container path."""
    mounts = {m.target: m for m in map(_mount, [*defaults, *own])}
    return tuple(mounts.values())


def check_defaults(s: State) -> None:
    s.findings += volume_problems("defaults", s.file.defaults.volumes)


def check(s: State, m: Model) -> None:
    s.findings += volume_problems(m.name, m.entry.volumes)

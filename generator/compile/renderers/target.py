"""What a target is: one record per kind of generated output (stack, k8s, clients, ...).

Adding a target = writing its renderer module and one `Target(...)` in it, listed in renderers/__init__.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..plan import Plan


def _no_warnings(plan: Plan) -> list[str]:
    return []


@dataclass(frozen=True)
class Target:
    name: str  # `python -m generator NAME`
    render: Callable[[Plan], dict[str, str]]  # plan -> {relative path: exact text}; same plan, same bytes
    regenerate: str  # the command that rewrites its files: named in their headers and in --check's messages
    # the keys file its files read: (relative path, header line); None = it needs no keys
    keys_file: tuple[str, str] | None
    # a file it writes whose presence (with our header) makes a plain `--check` cover this target too
    marker: str | None = None
    # what the user must know before deploying (printed after writing, never fatal)
    warnings: Callable[[Plan], list[str]] = _no_warnings
    # where clients reach the gateway, for the summary (None: the summary's own local URL)
    gateway_url: Callable[[Plan], str] | None = None
    # folders only this target writes, written only when some feature needs them: searched for orphans even when the
    # plan writes nothing there (the feature turned off leaves none behind)
    folders: tuple[str, ...] = ()

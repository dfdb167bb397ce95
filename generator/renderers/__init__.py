"""Plan -> generated files. One module per output format; a *target* is a set of files written together.

Every target is a function `Plan -> {relative path: exact text}` (same plan, same bytes) registered
in TARGETS; `python -m generator --target NAME` writes it through output.py (all or nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..plan import Plan
from .clients import REGENERATE as CLIENTS_REGENERATE, clients_files
from .compose import render_compose
from .k8s import REGENERATE as K8S_REGENERATE, k8s_files, k8s_warnings
from .litellm import GATEWAY_MODULES, render_litellm
from .text import dump_yaml, header

COMPOSE_FILE = "compose/docker-compose.yml"
LITELLM_FILE = "litellm/config.yaml"
HOOKS_DIR = Path(__file__).resolve().parents[1] / "gateway_hooks"


def gateway_modules(plan: Plan, folder: str = "litellm", regenerate: str = "make regenerate") -> dict[str, str]:
    """Python modules the LiteLLM config names (and the ones they import), copied next to config.yaml,
    where LiteLLM loads them by path; they find each other through their own folder."""
    return {f"{folder}/{mod}.py": header(plan, regenerate=regenerate) + (HOOKS_DIR / f"{mod}.py").read_text()
            for mod in GATEWAY_MODULES}


def stack_files(plan: Plan) -> dict[str, str]:
    """The default target: the compose file, the LiteLLM config and its hooks."""
    return {
        COMPOSE_FILE: header(plan) + dump_yaml(render_compose(plan)),
        LITELLM_FILE: header(plan) + dump_yaml(render_litellm(plan)),
        **gateway_modules(plan),
    }


TARGETS: dict[str, Callable[[Plan], dict[str, str]]] = {"stack": stack_files, "k8s": k8s_files, "clients": clients_files}
# What a target wants the user to know before deploying (printed after writing, never fatal).
TARGET_WARNINGS: dict[str, Callable[[Plan], list[str]]] = {"k8s": k8s_warnings}
# The command that rewrites a target's files, named in --check's stale messages.
REGENERATE: dict[str, str] = {"stack": "make regenerate", "k8s": K8S_REGENERATE, "clients": CLIENTS_REGENERATE}

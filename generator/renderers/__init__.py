"""Plan -> generated files. One module per output format; a *target* is a set of files written together.

Every target is a function `Plan -> {relative path: exact text}` (same plan, same bytes) registered
in TARGETS; `python -m generator --target NAME` writes it through output.py (all or nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..plan import Plan
from .clients import clients_files
from .compose import render_compose
from .litellm import AUTH_MODULE, HOOK_MODULE, render_litellm
from .text import dump_yaml, header

COMPOSE_FILE = "compose/docker-compose.yml"
LITELLM_FILE = "litellm/config.yaml"
HOOK_FILE = f"litellm/{HOOK_MODULE}.py"
AUTH_FILE = f"litellm/{AUTH_MODULE}.py"
HOOKS_DIR = Path(__file__).resolve().parents[1] / "gateway_hooks"


def gateway_modules(plan: Plan, folder: str = "litellm") -> dict[str, str]:
    """Python modules the LiteLLM config names; copied next to config.yaml, where LiteLLM imports them."""
    modules = {f"{folder}/{AUTH_MODULE}.py": AUTH_MODULE}
    if plan.gateway.clamp_max_tokens:
        modules[f"{folder}/{HOOK_MODULE}.py"] = HOOK_MODULE
    return {rel: header(plan) + (HOOKS_DIR / f"{mod}.py").read_text() for rel, mod in modules.items()}


def stack_files(plan: Plan) -> dict[str, str]:
    """The default target: the compose file, the LiteLLM config and its hooks."""
    return {
        COMPOSE_FILE: header(plan) + dump_yaml(render_compose(plan)),
        LITELLM_FILE: header(plan) + dump_yaml(render_litellm(plan)),
        **gateway_modules(plan),
    }


TARGETS: dict[str, Callable[[Plan], dict[str, str]]] = {"stack": stack_files, "clients": clients_files}

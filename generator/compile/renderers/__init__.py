"""Plan -> generated files. One module per output format; a *target* is a set of files written together.

Each target is one `Target` record (target.py) in its renderer module, listed here;
`python -m generator NAME` writes it through output.py (all or nothing).
"""

from __future__ import annotations

from . import clients, k8s, stack
from .litellm import gateway_modules
from .stack import COMPOSE_FILE, LITELLM_FILE
from .target import Target

TARGETS: dict[str, Target] = {t.name: t for t in (stack.TARGET, k8s.TARGET, clients.TARGET)}

__all__ = ["COMPOSE_FILE", "LITELLM_FILE", "TARGETS", "Target", "gateway_modules"]

"""The stack's repaired vLLM parsers (generator/shipped/parser_repairs/) as files beside the generated ones, for the
backends that run one (ModelPlan.parser_repairs, compile/load/parser_repairs.py): compose mounts REPAIRS_DIR at
load.parser_repairs.MOUNT, Kubernetes makes a ConfigMap of k8s/parser-repairs/, the local runtime writes its own copy
into its state dir. Nothing is written when no backend runs a repair."""

from __future__ import annotations

import hashlib

from ...shipped.parser_repairs import files
from ..plan import Plan
from .text import header

REPAIRS_DIR = "parser-repairs"  # compose: beside compose/ and litellm/; Kubernetes: k8s/parser-repairs/


def repair_files(plan: Plan, folder: str = REPAIRS_DIR, regenerate: str = "make regenerate") -> dict[str, str]:
    """{folder/<module>.py: header + module} when some backend runs a repair; {} otherwise."""
    if not any(m.parser_repairs for m in plan.models):
        return {}
    return {f"{folder}/{name}": header(plan, regenerate=regenerate) + text for name, text in files().items()}


def repairs_digest() -> str:
    """What a repaired backend loads at start (the modules, without the header, which names models.yml's digest): a
    new digest in its labels (compose) or pod annotations (Kubernetes) restarts it; a models.yml edit does not."""
    h = hashlib.sha256()
    for name, text in files().items():
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()[:16]

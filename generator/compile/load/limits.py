"""models.yml `limits:` (docs/limits.md): what a request to a model may ask, `defaults.limits` under the model's
own, field by field. The gateway's guard enforces them (generator/shipped/gateway_hooks/request_guard.py)."""

from __future__ import annotations

from ..plan import RequestLimits
from .schema import Limits


def limits_plan(defaults: Limits, own: Limits) -> RequestLimits:
    """`defaults.limits` under the model's `limits:`, field by field (the fields the model sets win)."""
    k = Limits(**{**defaults.model_dump(exclude_unset=True), **own.model_dump(exclude_unset=True)})
    return RequestLimits(n=k.n, best_of=k.best_of, tools=k.tools, logit_bias=k.logit_bias, request_bytes=k.request_size)

# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""Routes between models at run time (models.yml `fallbacks:` and `context_fallbacks:`, docs/routing.md): which model
takes a request its own cannot, and the count of each such hand-over. max_tokens_clamp.py calls it.

- **Context fallbacks** are decided here, before routing: a request whose prompt (counted by the model's backend)
  and output budget exceed its model's context goes to the first of the model's `context_fallbacks` that holds
  them, that the caller's key may use and, for a request with tools, that takes tools; when none holds them, the
  largest such one (its clamp lowers the budget). Without one, the request gets the 400 (or the clamp) it gets today.
- **Fallbacks on failure** are LiteLLM's router's (router_settings.fallbacks; the router skips a fallback the key may
  not use). Each attempt on a fallback is re-checked by `attempt_problem` and the clamp (max_tokens_clamp.py
  `async_pre_call_deployment_hook`): a fallback without tools for a request with tools, or one whose context the
  prompt alone fills, is skipped (the router goes on to the next).

Each hand-over is counted in ``gateway_fallbacks_total{model, fallback, reason}`` (reason: ``context`` or ``error``),
written by the worker into PROMETHEUS_MULTIPROC_DIR beside the other metrics; `make status` shows it per model.
The answer names its model in ``x-gateway-fallback: <asked>-><answered>`` (and LiteLLM's ``x-litellm-model-group``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads the hooks by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import gateway_backends as gb  # noqa: E402

HEADER = "x-gateway-fallback"
HEADER_BYTES = HEADER.encode()
COUNTER = "gateway_fallbacks"  # prometheus_client adds _total
CONTEXT_FALLBACKS = "gateway_context_fallbacks"  # model_info (renderers/litellm.py)
ALL_MODELS = ("all-proxy-models", "*")  # what LiteLLM's key `models` uses for "every model"

_counter: Any = None


def may_use(allowed: object, model: str) -> bool:
    """The caller's key may ask `model`: LiteLLM's key `models` (empty: every model)."""
    if not isinstance(allowed, (list, tuple, set)) or not allowed:
        return True
    return model in allowed or any(a in allowed for a in ALL_MODELS)


def context_target(rt: Any, model: str, deps: list, need: int, tools: bool, allowed: object) -> tuple[str, list] | None:
    """The model (and its deployments) that takes a request needing `need` tokens of context in place of `model`:
    the first of its context fallbacks that holds it, else the largest usable one; None when none is usable."""
    names = next((n for d in deps if isinstance(n := gb.info(d).get(CONTEXT_FALLBACKS), list)), [])
    usable: list[tuple[int, str, list]] = []
    for name in names:
        theirs = gb.deployments(rt, str(name))
        if not theirs or not may_use(allowed, str(name)):
            continue
        if tools and not all(gb.takes_tools(d) for d in theirs):
            continue
        context = gb.config_context(rt, str(name), theirs) or 0
        if context >= need:
            return str(name), theirs
        usable.append((context, str(name), theirs))
    if not usable:
        return None
    _, name, theirs = max(usable, key=lambda u: u[0])
    return name, theirs


# LiteLLM 1.108.7 writes the model the client asked into the answer's `model`, unless the router fell back or this
# flag of its metadata is set (common_request_processing.should_return_raw_model_name); then the answer keeps the
# backend's own name, which is the fallback's served name (vLLM --served-model-name)
RAW_MODEL_NAME = "_complexity_router_return_raw_model_name"


def name_the_answerer(data: dict) -> None:
    """The answer to `data`, which a context fallback took, names the model that answered, not the one asked."""
    for key in ("litellm_metadata", "metadata"):  # never a new `metadata`: the Responses API forwards that one
        if isinstance(data.get(key), dict):
            data[key][RAW_MODEL_NAME] = True
            return


def answered_by(headers: object) -> str | None:
    """The model that answered, from an ASGI response's headers, when a fallback did (HEADER: asked->answered)."""
    for name, value in headers if isinstance(headers, (list, tuple)) else ():
        if name.lower() == HEADER_BYTES:
            return value.decode("latin-1").rpartition("->")[2] or None
    return None


def falls_back(rt: Any, model: object) -> bool:
    """`model` has fallbacks on failure (LiteLLM's router_settings.fallbacks: [{model: [fallback, ...]}])."""
    return isinstance(model, str) and any(
        isinstance(item, dict) and item.get(model) for item in (getattr(rt, "fallbacks", None) or [])
    )


def attempt_of(kwargs: dict) -> tuple[str, str] | None:
    """(model asked, model tried) when this call of LiteLLM's router is an attempt on a fallback; None otherwise
    (the router keeps them in `metadata` for chat and completions, in `litellm_metadata` for the other APIs)."""
    for key in ("metadata", "litellm_metadata"):
        meta = kwargs.get(key)
        if isinstance(meta, dict) and "model_group" in meta:
            if not meta.get("attempted_fallbacks"):
                return None
            asked, tried = meta.get("original_model_group"), meta.get("model_group")
            if isinstance(asked, str) and isinstance(tried, str) and asked != tried:
                return asked, tried
            return None
    return None


def count(model: str, fallback: str, reason: str) -> None:
    """One hand-over from `model` to `fallback` (never breaks a request)."""
    global _counter
    try:
        if _counter is None:
            from prometheus_client import Counter  # multiprocess mode: PROMETHEUS_MULTIPROC_DIR is set in the workers

            _counter = Counter(
                COUNTER,
                "Requests a model's fallback answered (models.yml fallbacks / context_fallbacks)",
                ["model", "fallback", "reason"],
            )
        _counter.labels(model, fallback, reason).inc()
    except Exception:  # noqa: BLE001  a metric never breaks a request
        pass

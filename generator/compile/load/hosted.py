"""models.yml entries with `provider:` -> hosted models (docs/routing.md#hosted-models): an API somebody else serves,
behind this gateway with the guard, clamp, people's `models:`, limits, usage, metrics and status of the others.

What the entry does not say is read from LiteLLM's model map (the JSON file the installed LiteLLM ships, read as
data: importing LiteLLM for it would cost seconds per generation): the context (max_input_tokens), the output budget
(max_output_tokens) and tool support. A model the map does not know needs `context_length:`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..plan import HostedSpec, ModelPlan
from .limits import limits_plan
from .output_budget import max_tokens_for
from .schema import Defaults, HostedEntry

if TYPE_CHECKING:
    from .state import Finding, State

LITELLM_PREFIX = {"openai": "openai", "anthropic": "anthropic", "openai-compatible": "openai"}
MODEL_MAP = "model_prices_and_context_window_backup.json"  # beside LiteLLM's __init__.py


@functools.cache
def model_map() -> dict:
    """LiteLLM's model map ({} when LiteLLM is not installed here)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return {}
    try:
        return json.loads((Path(spec.origin).parent / MODEL_MAP).read_text())
    except (OSError, ValueError):
        return {}


def route(entry: HostedEntry) -> str:
    """LiteLLM's name for the model: its provider's route (an OpenAI-compatible API is LiteLLM's openai/ with
    api_base)."""
    return f"{LITELLM_PREFIX[entry.provider]}/{entry.model}"


def known(entry: HostedEntry) -> dict:
    """What LiteLLM's map says of this model, or {}."""
    found = model_map()
    for key in (entry.model, route(entry)):
        if isinstance(found.get(key), dict):
            return found[key]
    return {}


def hosted_plans(entries: dict[str, HostedEntry], defaults: Defaults) -> tuple[list[ModelPlan], list[Finding]]:
    """One ModelPlan per hosted entry; findings name model and field."""
    plans: list[ModelPlan] = []
    findings: list[Finding] = []
    for name, entry in entries.items():
        info = known(entry)
        context = entry.context_length or info.get("max_input_tokens")
        if not isinstance(context, int) or context < 2:
            findings.append(
                (
                    (name, "context_length"),
                    f"LiteLLM's model map does not know {entry.provider} model {entry.model!r}: "
                    "set `context_length:` (its context in tokens)",
                )
            )
            continue
        requested = entry.litellm.max_tokens or defaults.litellm.max_tokens or info.get("max_output_tokens")
        max_tokens, derived, found = max_tokens_for(name, requested if isinstance(requested, int) else None, context)
        findings += found
        params = {
            **defaults.litellm.model_dump(exclude_none=True),
            **entry.litellm.model_dump(exclude_none=True),
            "max_tokens": max_tokens,
        }
        tools = entry.tools if entry.tools is not None else bool(info.get("supports_function_calling"))
        plans.append(
            ModelPlan(
                name=name,
                served_name=name,
                model=entry.model,
                flag_args=(),
                description=entry.description.strip(),
                image="",
                env={},
                gpus=(),
                port=0,
                context=context,
                max_tokens=max_tokens,
                max_tokens_derived=derived,
                tool_parser=None,
                reasoning_parser=None,
                auto_tool_choice=tools,
                trust_remote_code=False,
                litellm_params=dict(sorted(params.items())),
                api_key_env=entry.api_key_env,
                limits=limits_plan(defaults.limits, entry.limits),
                hosted=HostedSpec(
                    provider=entry.provider,
                    model=entry.model,
                    api_base=entry.api_base,
                    key_env=entry.api_key_env,
                    route=route(entry),
                    context_from="" if entry.context_length else "LiteLLM's model map",
                    # LiteLLM's openai/ route asks <api_base>/responses for the Responses and Messages APIs, which
                    # OpenAI serves and an OpenAI-compatible API mostly does not (both were its 404)
                    chat_only=entry.provider == "openai-compatible",
                ),
            )
        )
    return plans, findings


def plan(s: State) -> None:
    s.hosted, found = hosted_plans(s.file.hosted, s.file.defaults)
    s.findings += found

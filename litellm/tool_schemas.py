# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""Tool schemas reach this stack's vLLM backends as the client sent them (gateway_guard.py installs it at load).

LiteLLM 1.108.7 passes the tools of every chat request to a `hosted_vllm/` model (and of every `/v1/messages`
request, translated to chat) through `remove_additional_properties` and `remove_strict_from_schema`
(`HostedVLLMChatConfig.map_openai_params`; LiteLLM issues 6088 and 6136: a vLLM of 2024 refused them). Both walk the
whole tool, in place, so they also delete what the schema says:

- every key named `strict` at any depth: a tool parameter named `strict` vanishes from `properties` while it stays
  in `required`, and the model is never told it exists;
- every `additionalProperties: false`: the model may add arguments the tool refuses, and vLLM's guided decoding
  (tool_choice "required" or a named tool) no longer holds it to the declared ones.

vLLM 0.32 takes both (`strict` is a field of its FunctionDefinition; `additionalProperties` is JSON Schema its
guided decoding honours), and `/v1/responses` already reaches it untouched (LiteLLM forwards it as it is). So at load
the two names in LiteLLM's hosted_vllm module, and only there (a hosted provider keeps LiteLLM's cleaning), are
replaced by one that returns the tools as they came. GATEWAY_LITELLM_TOOL_SCHEMAS=litellm keeps LiteLLM's.
"""

from __future__ import annotations

import importlib
import os

MODULE = "litellm.llms.hosted_vllm.chat.transformation"
CLEANERS = ("remove_additional_properties", "remove_strict_from_schema")


def as_sent(tools):
    """The tools as the client sent them."""
    return tools


def install() -> bool:
    """Replace LiteLLM's two schema cleaners for this stack's backends; True when replaced (False: switched off, or
    a LiteLLM without them, which then keeps its own)."""
    if os.environ.get("GATEWAY_LITELLM_TOOL_SCHEMAS") == "litellm":
        return False
    try:
        module = importlib.import_module(MODULE)
    except ImportError:
        return False
    if not all(callable(getattr(module, name, None)) for name in CLEANERS):
        return False
    for name in CLEANERS:
        setattr(module, name, as_sent)
    return True

"""tool_schemas.py, in-process on LiteLLM's own translation: a chat request's tools (and a /v1/messages request's,
translated) leave LiteLLM for a `hosted_vllm/` backend as the client sent them (a parameter named `strict`,
`additionalProperties: false`, the function's `strict`); with GATEWAY_LITELLM_TOOL_SCHEMAS=litellm, LiteLLM's own
cleaning, which this test sees delete them; a hosted provider keeps LiteLLM's cleaning either way."""

from __future__ import annotations

import copy
import importlib

import pytest

from tests.unit.test_gateway_hooks import load_like_litellm

LINT = {  # a tool as a coding agent declares it: strict, closed, with a parameter named `strict`
    "type": "function",
    "function": {
        "name": "lint",
        "description": "Lint a file.",
        "strict": True,
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "path": {"type": "string"},
                "strict": {"type": "boolean", "description": "fail on warnings"},
                "rules": {"type": "object", "additionalProperties": False, "properties": {"max": {"type": "integer"}}},
            },
            "required": ["path", "strict"],
        },
    },
}


@pytest.fixture
def cleaners(monkeypatch):
    """LiteLLM's hosted_vllm module with LiteLLM's own two cleaners (from litellm.utils: a gateway_guard loaded
    earlier in this process installed tool_schemas for good), whatever it held restored after the test."""
    import litellm.utils

    module = importlib.import_module("litellm.llms.hosted_vllm.chat.transformation")
    for name in ("remove_additional_properties", "remove_strict_from_schema"):
        monkeypatch.setattr(module, name, getattr(litellm.utils, name))
    return module


def sent_to_vllm(tools: list) -> list:
    from litellm.llms.hosted_vllm.chat.transformation import HostedVLLMChatConfig

    return HostedVLLMChatConfig().map_openai_params({"tools": tools}, {}, "tool-caller", False)["tools"]


def test_a_chat_requests_tools_reach_vllm_as_sent(cleaners, monkeypatch):
    monkeypatch.delenv("GATEWAY_LITELLM_TOOL_SCHEMAS", raising=False)
    assert load_like_litellm("tool_schemas").install() is True
    tools = [copy.deepcopy(LINT)]
    assert sent_to_vllm(tools) == [LINT]
    assert tools == [LINT]  # nor changed in place (LiteLLM's cleaning edits the client's dicts)


def test_litellms_cleaning_deletes_a_parameter_and_the_closed_schemas(cleaners, monkeypatch):
    monkeypatch.setenv("GATEWAY_LITELLM_TOOL_SCHEMAS", "litellm")
    assert load_like_litellm("tool_schemas").install() is False
    function = sent_to_vllm([copy.deepcopy(LINT)])[0]["function"]
    parameters = function["parameters"]
    assert "strict" not in function and "additionalProperties" not in parameters
    assert "strict" not in parameters["properties"] and "strict" in parameters["required"]  # required, undeclared


def test_a_messages_requests_tools_reach_vllm_as_sent(cleaners, monkeypatch):
    """/v1/messages: the gateway's route translates with LiteLLM's Anthropic adapter (messages_route.as_chat), then
    the same hosted_vllm step."""
    monkeypatch.delenv("GATEWAY_LITELLM_TOOL_SCHEMAS", raising=False)
    load_like_litellm("tool_schemas").install()
    schema = copy.deepcopy(LINT["function"]["parameters"])
    anthropic = {"model": "tool-caller", "max_tokens": 16, "messages": [{"role": "user", "content": "lint a.py"}],
                 "tools": [{"name": "lint", "description": "Lint a file.", "input_schema": schema}]}  # fmt: skip
    chat, _ = load_like_litellm("messages_route").as_chat(anthropic)
    assert sent_to_vllm(chat["tools"])[0]["function"]["parameters"] == LINT["function"]["parameters"]


def test_a_hosted_provider_keeps_litellms_cleaning(cleaners, monkeypatch):
    monkeypatch.delenv("GATEWAY_LITELLM_TOOL_SCHEMAS", raising=False)
    load_like_litellm("tool_schemas").install()
    import litellm.utils

    watsonx = importlib.import_module("litellm.llms.watsonx.chat.transformation")
    assert cleaners.remove_strict_from_schema is not litellm.utils.remove_strict_from_schema  # replaced here
    assert watsonx.remove_strict_from_schema is litellm.utils.remove_strict_from_schema  # not there

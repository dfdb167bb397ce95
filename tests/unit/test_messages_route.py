"""messages_route.py: which /v1/messages requests it takes (the rest are LiteLLM's route's), that its chat request is
LiteLLM's own translation, and that it is put in front of LiteLLM's route once. What it answers is checked through
the real gateway: tests/integration/test_apis_anthropic.py and the parser matrix's /v1/messages cells."""

from __future__ import annotations

import copy

import pytest

from tests.unit.test_gateway_hooks import load_like_litellm

TOOLS = [
    {"name": "get_weather", "description": "the weather", "input_schema": {"type": "object", "properties": {}}},
    {"name": "x" * 80, "description": "a name over chat's 64 characters", "input_schema": {"type": "object"}},
]
PLAIN = {
    "model": "local",
    "max_tokens": 256,
    "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
    ],
    "tools": TOOLS,
    "tool_choice": {"type": "auto"},
    "thinking": {"type": "enabled", "budget_tokens": 128},
    "temperature": 0.2,
    "top_p": 0.9,
    "top_k": 20,
    "stop_sequences": ["END"],
    "metadata": {"user_id": "someone"},
    "stream": True,
}


class Router:
    model_list = [
        {"model_name": "local", "litellm_params": {"model": "hosted_vllm/local", "api_base": "http://a:1/v1"}},
        {"model_name": "local", "litellm_params": {"model": "hosted_vllm/local", "api_base": "http://b:1/v1"}},
        {
            "model_name": "claude",
            "litellm_params": {"model": "anthropic/claude-x"},
            "model_info": {"gateway_hosted": "anthropic"},
        },
        {"model_name": "mixed", "litellm_params": {"model": "hosted_vllm/mixed", "api_base": "http://c:1/v1"}},
        {
            "model_name": "mixed",
            "litellm_params": {"model": "openai/gpt-x"},
            "model_info": {"gateway_hosted": "openai"},
        },
    ]

    def get_model_list(self, model_name):
        return [d for d in self.model_list if d["model_name"] == model_name]


@pytest.fixture
def route(monkeypatch):
    module = load_like_litellm("messages_route")
    monkeypatch.setattr(module.gb, "router", lambda: Router())
    return module


def test_it_takes_plain_messages_api_requests_to_the_stacks_own_backends(route):
    assert route.eligible(PLAIN)
    assert route.eligible({"model": "local", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})


@pytest.mark.parametrize(
    "change",
    [
        {"model": "claude"},  # a hosted model: LiteLLM's native Anthropic call
        {"model": "mixed"},  # one deployment hosted
        {"model": "nobody"},  # LiteLLM's route says what is wrong
        {"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}},  # LiteLLM's polyfill
        {"mcp_servers": [{"type": "url", "url": "http://x", "name": "x"}]},
        {"safeguards": {"dangerous_tool_use": "block"}},
        {"output_config": {"effort": "low"}},
        {"chat_template_kwargs": {"enable_thinking": False}},  # any field it does not know
        {"max_tokens": None},  # what the guard lets through and LiteLLM's route refuses
        {"messages": [{"role": "user", "content": [{"type": "compaction", "content": "earlier turns"}]}]},
    ],
)
def test_every_other_request_is_left_to_litellms_route(route, change):
    assert not route.eligible({**PLAIN, **change})


def test_its_chat_request_is_litellms_own_translation(route):
    """The chat request is what LiteLLM's handler makes for a hosted_vllm deployment (the served model's name, the
    provider among the extra kwargs), but for the model's name kept for the router and the provider left to it; tool
    names over 64 characters come back through LiteLLM's map."""
    from litellm.llms.anthropic.pass_through.adapters.handler import (
        LiteLLMMessagesToCompletionTransformationHandler as Handler,
    )

    sent = copy.deepcopy(PLAIN)
    chat, names = route.as_chat(sent)
    assert sent == PLAIN  # the request is not changed
    theirs, their_names = Handler._prepare_completion_kwargs(
        **{k: v for k, v in copy.deepcopy(PLAIN).items()}, extra_kwargs={"custom_llm_provider": "hosted_vllm"}
    )
    theirs = dict(theirs)
    assert theirs.pop("custom_llm_provider") == "hosted_vllm" and "custom_llm_provider" not in chat
    assert chat == theirs and names == their_names
    assert len(names) == 1 and list(names.values()) == ["x" * 80]
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert chat["messages"][0]["role"] == "system" and chat["tools"][0]["function"]["name"] == "get_weather"
    assert chat["messages"][-1] == {"role": "tool", "tool_call_id": "t1", "content": "sunny"}


def test_it_is_put_in_front_of_litellms_route_once(route, monkeypatch):
    from litellm.proxy.proxy_server import app

    before = list(app.router.routes)
    # another test's gateway_guard import may have installed it already (its own copy of this module)
    app.router.routes[:] = [r for r in before if getattr(r, "name", None) != route.NAME]
    try:
        monkeypatch.setenv(route.KEEP_ENV, "litellm")
        route.install()
        assert not any(getattr(r, "name", None) == route.NAME for r in app.router.routes)  # the A/B: LiteLLM's alone
        monkeypatch.delenv(route.KEEP_ENV)
        route.install()
        route.install()
        ours = [r for r in app.router.routes if getattr(r, "name", None) == route.NAME]
        assert len(ours) == 1 and app.router.routes[0] is ours[0]
        assert ours[0].path == "/v1/messages" and ours[0].methods == {"POST"}
    finally:
        app.router.routes[:] = before


def test_a_request_litellms_adapter_refuses_is_left_to_litellms_route(route):
    """The guard lets `messages: []` through (LiteLLM's route answers it with a 4xx); the adapter refuses it with a
    ValueError, which would be a 500 here: such a request goes to LiteLLM's route as before (the fuzz test found it)."""
    empty = {**PLAIN, "messages": []}
    assert route.eligible(empty)
    with pytest.raises(ValueError):
        route.as_chat(empty)
    assert route.translation(empty) is None
    assert route.translation({**PLAIN, "model": "claude"}) is None
    chat, names = route.translation(PLAIN)
    assert chat["model"] == "local" and list(names.values()) == ["x" * 80]

"""The gateway hooks, loaded the way LiteLLM loads them (by file path, from beside config.yaml), in
front of a fake router and a fake backend tokenizer: defaults, the clamp and the 400s per API."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest
from fastapi import HTTPException

from generator.renderers.litellm import GATEWAY_MODULES

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "litellm"
CONTEXT = 4096
DEFAULT_MAX = 512


def load_like_litellm(name: str):
    """litellm.proxy.types_utils.utils.get_instance_fn: spec_from_file_location + exec_module,
    without registering the module in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, GENERATED / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", GATEWAY_MODULES)
def test_every_generated_module_loads_the_way_litellm_loads_it(name):
    assert load_like_litellm(name) is not None


class FakeRouter:
    def __init__(self):
        self.model_list = [
            {"model_name": "thinker", "litellm_params": {"model": "hosted_vllm/thinker", "api_base": "http://t:1/v1",
                                                         "max_tokens": DEFAULT_MAX, "temperature": 0.6, "top_p": 0.9,
                                                         "top_k": 20, "stop": "END"},
             "model_info": {"max_input_tokens": CONTEXT, "supports_function_calling": False}},
            {"model_name": "caller", "litellm_params": {"model": "hosted_vllm/caller", "api_base": "http://c:1/v1",
                                                        "max_tokens": DEFAULT_MAX},
             "model_info": {"max_input_tokens": CONTEXT, "supports_function_calling": True}},
        ]

    def get_model_list(self, model_name):
        return [d for d in self.model_list if d["model_name"] == model_name]


@pytest.fixture
def hook(monkeypatch):
    """The clamp hook with a fake router; the backend counts one token per prompt character."""
    module = load_like_litellm("max_tokens_clamp")
    gb = module.gb
    monkeypatch.setattr(gb, "router", lambda: FakeRouter())
    monkeypatch.setattr(gb, "TEMPLATE_MARGIN", 0)
    calls = []

    def size(obj) -> int:
        return len(str(obj))

    async def tokenize(dep, payload):
        calls.append(("tokenize", payload))
        return size(payload.get("messages") or payload.get("prompt")), CONTEXT

    async def count_message_tokens(dep, body):
        calls.append(("count_tokens", body))
        return size(body.get("messages"))

    monkeypatch.setattr(gb, "tokenize", tokenize)
    monkeypatch.setattr(gb, "count_message_tokens", count_message_tokens)
    module.calls = calls
    return module


def run(hook, data, call_type, clamp=True):
    handler = hook.MaxTokensClamp(clamp=clamp)
    data = {"litellm_call_id": "call-1", **data}
    asyncio.run(handler.async_pre_call_hook(None, None, data, call_type))
    header = asyncio.run(handler.async_post_call_response_headers_hook(data, None, None))
    return data, (header or {}).get(hook.HEADER)


def big(n: int) -> str:
    return "x" * n


REQUESTS = {  # call type -> (request with a prompt of about n characters, its budget field)
    "acompletion": (lambda n: {"messages": [{"role": "user", "content": big(n)}]}, "max_tokens"),
    "atext_completion": (lambda n: {"prompt": big(n)}, "max_tokens"),
    "aresponses": (lambda n: {"input": big(n)}, "max_output_tokens"),
    "anthropic_messages": (lambda n: {"messages": [{"role": "user", "content": big(n)}]}, "max_tokens"),
}


@pytest.mark.parametrize("call_type", REQUESTS)
def test_a_budget_above_the_context_is_clamped_with_the_header(hook, call_type):
    make, budget = REQUESTS[call_type]
    data, header = run(hook, {"model": "caller", **make(1000), budget: 100_000}, call_type)
    asked, given = (int(x) for x in header.split("->"))
    assert asked == 100_000 and data[budget] == given
    assert CONTEXT - 1100 < given <= CONTEXT - 1000  # context minus the counted prompt


@pytest.mark.parametrize("call_type", REQUESTS)
def test_the_clamp_off_leaves_the_budget(hook, call_type):
    make, budget = REQUESTS[call_type]
    data, header = run(hook, {"model": "caller", **make(1000), budget: 100_000}, call_type, clamp=False)
    assert header is None and data[budget] == 100_000


@pytest.mark.parametrize("call_type", REQUESTS)
def test_a_prompt_that_fills_the_context_is_one_clear_400(hook, call_type):
    make, budget = REQUESTS[call_type]
    with pytest.raises(HTTPException) as err:
        run(hook, {"model": "caller", **make(CONTEXT + 10), budget: 10}, call_type)
    assert err.value.status_code == 400
    assert f", caller holds {CONTEXT} tokens" in err.value.detail and err.value.detail.startswith("prompt is ")


@pytest.mark.parametrize("call_type", REQUESTS)
def test_a_small_request_is_not_counted_nor_clamped(hook, call_type):
    make, budget = REQUESTS[call_type]
    data, header = run(hook, {"model": "caller", **make(10), budget: 16}, call_type)
    assert header is None and data[budget] == 16 and hook.calls == []


@pytest.mark.parametrize("call_type", REQUESTS)
def test_the_default_budget_is_applied_under_each_apis_own_name(hook, call_type):
    make, budget = REQUESTS[call_type]
    data, _ = run(hook, {"model": "thinker", **make(10)}, call_type)
    assert data[budget] == DEFAULT_MAX
    assert data["temperature"] == 0.6 and data["top_p"] == 0.9


def test_defaults_never_override_the_client(hook):
    data, _ = run(hook, {"model": "thinker", "input": "hi", "max_output_tokens": 7, "temperature": 0.0}, "aresponses")
    assert data["max_output_tokens"] == 7 and data["temperature"] == 0.0 and "max_tokens" not in data
    data, _ = run(hook, {"model": "thinker", "messages": [{"role": "user", "content": "hi"}],
                         "max_completion_tokens": 9}, "acompletion")
    assert data["max_completion_tokens"] == 9 and "max_tokens" not in data


def test_anthropic_stop_default_becomes_stop_sequences(hook):
    data, _ = run(hook, {"model": "thinker", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
                  "anthropic_messages")
    assert data["stop_sequences"] == ["END"] and "stop" not in data and data["top_k"] == 20


@pytest.mark.parametrize("call_type,tools", [
    ("acompletion", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
    ("aresponses", [{"type": "function", "name": "f", "parameters": {}}]),
    ("anthropic_messages", [{"name": "f", "input_schema": {"type": "object"}}]),
])
def test_tools_to_a_model_without_a_tool_parser_name_the_models_that_take_them(hook, call_type, tools):
    make, _ = REQUESTS[call_type]
    with pytest.raises(HTTPException) as err:
        run(hook, {"model": "thinker", **make(10), "tools": tools}, call_type)
    assert err.value.status_code == 400
    assert "thinker takes no tools" in err.value.detail and "caller" in err.value.detail
    run(hook, {"model": "caller", **make(10), "tools": tools}, call_type)  # the tool model takes them


def test_tool_choice_none_is_no_tool_use(hook):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    run(hook, {"model": "thinker", "messages": [{"role": "user", "content": "hi"}], "tools": tools,
               "tool_choice": "none"}, "acompletion")


def test_anthropic_requests_are_counted_by_the_backends_messages_endpoint(hook):
    run(hook, {"model": "caller", "max_tokens": 100_000, "messages": [{"role": "user", "content": big(1000)}]},
        "anthropic_messages")
    assert [kind for kind, _ in hook.calls] == ["count_tokens"]


def test_responses_input_is_counted_as_the_chat_vllm_renders(hook):
    items = [{"type": "message", "role": "user", "content": big(1000)},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]
    run(hook, {"model": "caller", "input": items, "instructions": "be brief", "max_output_tokens": 100_000,
               "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}, "aresponses")
    (kind, payload), = hook.calls
    roles = [m["role"] for m in payload["messages"]]
    assert kind == "tokenize" and roles[0] == "system" and "tool" in roles and "assistant" in roles
    assert payload["tools"][0]["function"]["name"] == "f" and payload["add_generation_prompt"] is True


def test_a_backend_that_cannot_count_gets_an_estimate_and_no_400(hook, monkeypatch):
    async def down(dep, payload):
        return None, None

    monkeypatch.setattr(hook.gb, "tokenize", down)
    data, header = run(hook, {"model": "caller", "prompt": big(CONTEXT - 100), "max_tokens": 1000}, "atext_completion")
    assert header is not None and data["max_tokens"] < 100  # clamped on the (higher) byte estimate
    data, header = run(hook, {"model": "caller", "prompt": big(CONTEXT * 2), "max_tokens": 10}, "atext_completion")
    assert data["max_tokens"] == 10  # no 400 on a guess: the backend answers for itself


def test_unknown_models_and_other_call_types_pass_untouched(hook):
    data, header = run(hook, {"model": "nope", "prompt": big(CONTEXT * 2), "max_tokens": 10}, "atext_completion")
    assert data["max_tokens"] == 10 and header is None
    data, header = run(hook, {"model": "caller", "input": big(CONTEXT * 2)}, "aembedding")
    assert "max_tokens" not in data and header is None

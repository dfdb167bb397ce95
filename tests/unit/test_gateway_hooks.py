"""The gateway hooks, loaded the way LiteLLM loads them (by file path, from beside config.yaml), in
front of a fake router and a fake backend tokenizer: defaults, the clamp and the 400s per API."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest
from fastapi import HTTPException
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.compile.renderers.litellm import GATEWAY_MODULES, PAGE_FILES

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


@pytest.mark.parametrize(
    "hook_name", ["async_pre_call_hook", "async_post_call_response_headers_hook", "async_post_call_failure_hook"]
)
def test_each_hook_is_defined_on_the_registered_class_itself(hook_name):
    """LiteLLM 1.108 calls the pre-call and response-headers hooks of a callback only when its own class
    defines them (`hook in vars(type(callback))`, proxy/utils.py): an inherited or mixed-in hook is never run."""
    module = load_like_litellm("max_tokens_clamp")
    for instance in (module.proxy_handler_instance, module.checks_only_instance):
        assert hook_name in vars(type(instance))


def test_the_header_hook_takes_the_call_info_litellm_passes():
    """LiteLLM passes `litellm_call_info` only to a header hook whose signature names it (else the older call)."""
    import inspect

    module = load_like_litellm("max_tokens_clamp")
    params = inspect.signature(module.proxy_handler_instance.async_post_call_response_headers_hook).parameters
    assert {"data", "user_api_key_dict", "response", "request_headers", "litellm_call_info"} <= set(params)


class FakeRouter:
    def __init__(self):
        self.model_list = [
            {
                "model_name": "thinker",
                "litellm_params": {
                    "model": "hosted_vllm/thinker",
                    "api_base": "http://t:1/v1",
                    "max_tokens": DEFAULT_MAX,
                    "temperature": 0.6,
                    "top_p": 0.9,
                    "top_k": 20,
                    "stop": "END",
                },
                "model_info": {"max_input_tokens": CONTEXT, "supports_function_calling": False},
            },
            {
                "model_name": "caller",
                "litellm_params": {
                    "model": "hosted_vllm/caller",
                    "api_base": "http://c:1/v1",
                    "max_tokens": DEFAULT_MAX,
                },
                "model_info": {"max_input_tokens": CONTEXT, "supports_function_calling": True},
            },
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
    data, _ = run(
        hook,
        {"model": "thinker", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 9},
        "acompletion",
    )
    assert data["max_completion_tokens"] == 9 and "max_tokens" not in data


def test_anthropic_stop_default_becomes_stop_sequences(hook):
    data, _ = run(
        hook,
        {"model": "thinker", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        "anthropic_messages",
    )
    assert data["stop_sequences"] == ["END"] and "stop" not in data and data["top_k"] == 20


@pytest.mark.parametrize(
    "call_type,tools",
    [
        ("acompletion", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
        ("aresponses", [{"type": "function", "name": "f", "parameters": {}}]),
        ("anthropic_messages", [{"name": "f", "input_schema": {"type": "object"}}]),
    ],
)
def test_tools_to_a_model_without_a_tool_parser_name_the_models_that_take_them(hook, call_type, tools):
    make, _ = REQUESTS[call_type]
    with pytest.raises(HTTPException) as err:
        run(hook, {"model": "thinker", **make(10), "tools": tools}, call_type)
    assert err.value.status_code == 400
    assert "thinker takes no tools" in err.value.detail and "caller" in err.value.detail
    run(hook, {"model": "caller", **make(10), "tools": tools}, call_type)  # the tool model takes them


def test_tool_choice_none_is_no_tool_use(hook):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    run(
        hook,
        {"model": "thinker", "messages": [{"role": "user", "content": "hi"}], "tools": tools, "tool_choice": "none"},
        "acompletion",
    )


def test_anthropic_requests_are_counted_as_anthropic_messages(hook):
    run(
        hook,
        {"model": "caller", "max_tokens": 100_000, "messages": [{"role": "user", "content": big(1000)}]},
        "anthropic_messages",
    )
    assert [kind for kind, _ in hook.calls] == ["count_tokens"]


def test_anthropic_messages_are_counted_as_the_chat_litellm_sends_for_them():
    gb = load_like_litellm("gateway_backends")
    payload = gb.messages_as_chat(
        {
            "model": "caller",
            "max_tokens": 5,
            "system": "be brief",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
            ],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        }
    )
    assert [m["role"] for m in payload["messages"]] == ["system", "user", "assistant", "tool"]
    assert payload["messages"][2]["tool_calls"][0]["function"]["name"] == "f"
    assert payload["tools"][0]["function"]["name"] == "f" and payload["add_generation_prompt"] is True


def test_responses_input_is_counted_as_the_chat_vllm_renders(hook):
    items = [
        {"type": "message", "role": "user", "content": big(1000)},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    run(
        hook,
        {
            "model": "caller",
            "input": items,
            "instructions": "be brief",
            "max_output_tokens": 100_000,
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        },
        "aresponses",
    )
    ((kind, payload),) = hook.calls
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


# --- the renderer: which hook, which files ----------------------------------------------------------


def _plan(tmp_path, clamp: bool):
    from generator.compile.load.loader import load_plan

    (tmp_path / "models.yml").write_text(f"""
gateway: {{clamp_max_tokens: {str(clamp).lower()}}}
m:
  gpus: []
  command: vllm serve x/y --max-model-len 4096
""")
    return load_plan(tmp_path / "models.yml")


@pytest.mark.parametrize("clamp,instance", [(True, "proxy_handler_instance"), (False, "checks_only_instance")])
def test_the_config_names_the_hook_with_or_without_the_clamp(tmp_path, clamp, instance):
    from generator.compile.renderers import gateway_modules
    from generator.compile.renderers.litellm import render_litellm

    plan = _plan(tmp_path, clamp)
    module, name = render_litellm(plan)["litellm_settings"]["callbacks"][0].split(".")
    assert hasattr(load_like_litellm(module), name)
    assert instance == name
    assert set(gateway_modules(plan)) == {  # defaults and 400s stay on
        *(f"litellm/{m}.py" for m in GATEWAY_MODULES),
        *(f"litellm/{name}" for name in PAGE_FILES),
    }


# --- /v1/messages/count_tokens ----------------------------------------------------------------------


class FakeRequest:
    def __init__(self, body, headers=None):
        self._body, self.headers = body, headers or {"x-api-key": "k"}

    async def json(self):
        return self._body


@pytest.fixture
def counter(monkeypatch):
    """The count_tokens module, with a fake router and an HTTP client that records every URL."""
    module = load_like_litellm("count_tokens")
    gb = module.gb
    monkeypatch.setattr(gb, "router", lambda: FakeRouter())
    posted = []

    class Client:
        is_closed = False

        async def post(self, url, json, headers):
            posted.append((url, json))
            import httpx

            return httpx.Response(200, json={"count": 42, "max_model_len": CONTEXT})

    monkeypatch.setattr(gb, "http", lambda: Client())
    module.posted = posted
    return module


async def _allow(request, key):
    return None


def _answer(counter, body, authorize=_allow):
    import json

    response = asyncio.run(counter.count_tokens(FakeRequest(body), authorize))
    return response.status_code, json.loads(response.body)


def test_count_tokens_asks_only_the_models_own_backend(counter):
    status, body = _answer(
        counter, {"model": "caller", "system": "be brief", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert (status, body) == (200, {"input_tokens": 42})
    ((url, sent),) = counter.posted
    assert url == "http://c:1/tokenize"  # the configured api_base of `caller`, nothing else
    assert sent["model"] == "caller" and sent["messages"][0] == {"role": "system", "content": "be brief"}


def test_count_tokens_for_an_unknown_model_contacts_nobody(counter):
    status, body = _answer(counter, {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 404 and body["error"]["type"] == "not_found_error" and "caller" in body["error"]["message"]
    assert counter.posted == []


def test_count_tokens_checks_the_key_first(counter):
    async def deny(request, key):
        raise HTTPException(status_code=401, detail="no")

    with pytest.raises(HTTPException):
        _answer(counter, {"model": "caller", "messages": [{"role": "user", "content": "hi"}]}, deny)
    assert counter.posted == []


def test_the_backend_client_ignores_proxy_variables(monkeypatch):
    """trust_env=False: HTTPS_PROXY and friends cannot send a prompt anywhere but the backend."""
    gb = load_like_litellm("gateway_backends")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert gb.http()._trust_env is False


def test_count_tokens_answers_messages_it_cannot_translate_with_a_400(counter, monkeypatch):
    """LiteLLM's translation raising on a malformed item is the client's error, not a bare 500."""

    def refuse(body):
        raise KeyError("content")

    monkeypatch.setattr(counter.gb, "messages_as_chat", refuse)
    status, body = _answer(counter, {"model": "caller", "messages": [{"role": "user"}]})
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    assert "cannot be counted" in body["error"]["message"] and counter.posted == []


def test_the_guard_replaces_litellms_per_request_otel_import_only_when_it_cannot_succeed(monkeypatch):
    """LiteLLM retries a failing `import litellm.integrations.otel.logger` on every request; the guard makes
    that function a no-op when the import fails at load (as here: no opentelemetry-sdk), and leaves it
    alone when asked to (GATEWAY_LITELLM_OTEL_SEED=keep) or when the import works."""
    import sys

    from litellm.proxy.auth import user_api_key_auth as auth

    original = auth._seed_request_destinations
    monkeypatch.setattr(auth, "_seed_request_destinations", original)  # restored after the test
    guard = load_like_litellm("litellm_cuts")
    monkeypatch.setattr(auth, "_seed_request_destinations", original)
    monkeypatch.setenv("GATEWAY_LITELLM_OTEL_SEED", "keep")
    assert guard.skip_failing_otel_seed() is False and auth._seed_request_destinations is original
    monkeypatch.delenv("GATEWAY_LITELLM_OTEL_SEED")
    with pytest.raises(Exception):  # noqa: B017 - any failure: gateway_guard catches Exception there too
        import litellm.integrations.otel.logger  # noqa: F401  fails in this environment, as in the images
    assert guard.skip_failing_otel_seed() is True and auth._seed_request_destinations is not original
    assert auth._seed_request_destinations(object(), None) is None
    monkeypatch.setattr(auth, "_seed_request_destinations", original)
    monkeypatch.setitem(sys.modules, "litellm.integrations.otel.logger", object())  # an importable OTel
    assert guard.skip_failing_otel_seed() is False and auth._seed_request_destinations is original


def test_a_backends_retry_after_reaches_the_client_as_retry_after(hook):
    """The on-demand controller's 503 + Retry-After: LiteLLM's exception for it carries the backend's answer; the
    failure hook gives the exception its own headers, which LiteLLM sends as they are (else only
    llm_provider-retry-after would reach the client, which no client's retry logic reads)."""
    import httpx
    import litellm

    answer = httpx.Response(
        503, headers={"Retry-After": "7"}, request=httpx.Request("POST", "http://c/m/a/v1/chat/completions")
    )
    exc = litellm.ServiceUnavailableError(
        message="model a is loading", llm_provider="hosted_vllm", model="a", response=answer
    )
    handler = hook.MaxTokensClamp(clamp=True)
    assert asyncio.run(handler.async_post_call_failure_hook({}, exc, None)) is None  # the error itself is unchanged
    assert exc.headers == {"retry-after": "7"} and exc.status_code == 503
    plain = litellm.ServiceUnavailableError(
        message="down", llm_provider="hosted_vllm", model="a", response=httpx.Response(503, request=answer.request)
    )
    asyncio.run(handler.async_post_call_failure_hook({}, plain, None))
    assert not getattr(plain, "headers", None)  # nothing to pass on: LiteLLM's own handling stays


@pytest.mark.parametrize(
    "path,allowed",
    [
        ("/health", False),
        ("/health/services", False),
        ("/health/latest", False),
        ("/health/readiness", True),
        ("/health/liveliness", True),
    ],
)
def test_a_persons_key_may_not_ask_health_which_makes_every_backend_generate(monkeypatch, path, allowed):
    """Issue 48: LiteLLM's /health runs a generation on every backend the key may use, counted by no limit."""
    import asyncio

    from fastapi import HTTPException
    from starlette.requests import Request

    guard = load_like_litellm("gateway_guard")
    ann = guard.people.Person("ann", frozenset({"reasoner"}), 10, None, None, None, None)
    monkeypatch.setattr(guard.people.DIRECTORY, "who", lambda key: ann if key == "ann-key" else None)
    monkeypatch.setenv(guard.MASTER_KEY_ENV, "master-key")

    def ask(key: str):
        request = Request({"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""})
        return asyncio.run(guard.user_api_key_auth(request, key))

    assert ask("master-key").user_id == "gateway-admin"
    if allowed:
        assert ask("ann-key").key_alias == "ann"
    else:
        with pytest.raises(HTTPException) as refused:
            ask("ann-key")
        assert refused.value.status_code == 403 and "master key" in refused.value.detail


def test_the_route_check_leaves_our_own_routes_to_their_own_key_check(monkeypatch):
    guard = load_like_litellm("gateway_guard")
    monkeypatch.setenv(guard.MASTER_KEY_ENV, "master-key")
    assert guard.route_problem("master-key", "/gateway/status") is None
    assert guard.route_problem("master-key", "/key/generate") is not None  # admin routes: off (gateway.admin_ui)
    assert guard.route_problem("master-key", "/health") is None


@pytest.mark.parametrize(
    "path,opens",
    [
        ("/v1/chat/completions", True),
        ("/chat/completions", True),
        ("/v1/responses", True),
        ("/v1/messages", True),
        ("/v1/messages/count_tokens", True),
        ("/v1/embeddings", True),
        ("/v1/rerank", True),
        ("/v1/models", True),
        ("/models", True),
        ("/v1/models/reasoner", True),
        ("/health/readiness", True),
        ("/health", False),
        ("/v1/model/info", False),
        ("/v1/files", False),
        ("/v1/audio/transcriptions", False),
        ("/v1/images/generations", False),
        ("/v1/responses/input_tokens", False),
        ("/models/reasoner:generateContent", False),
        ("/models/reasoner:countTokens", False),
        ("/v1/mcp/tools", False),
        ("/key/generate", False),
    ],
)
def test_a_persons_key_opens_the_inference_apis_and_the_model_list_only(monkeypatch, path, opens):
    guard = load_like_litellm("gateway_guard")
    ann = guard.people.Person("ann", None, None, None, None, None, None)
    monkeypatch.setattr(guard.people.DIRECTORY, "who", lambda key: ann if key == "ann-key" else None)
    assert (guard.route_problem("ann-key", path) is None) is opens


# what a request body holds: JSON as orjson reads it (the request guard's parser: no NaN or Infinity, which json.dumps
# would write and orjson writes as null)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_the_byte_bound_is_never_below_the_json_text_it_stands_for(payload):
    """byte_upper_bound measures json.dumps' text (the chat template renders tools with its separators) from orjson's
    compact text plus a byte per comma and colon, without writing it: never less (but a byte for a float with an
    exponent), so a prompt json.dumps' length would have had counted is not skipped."""
    import json

    def exponents(value) -> int:  # floats json.dumps writes as 1e-09 and orjson as 1e-9: a byte each
        if isinstance(value, float):
            return "e" in repr(value)
        if isinstance(value, dict):
            return sum(exponents(v) for v in value.values())
        return sum(exponents(v) for v in value) if isinstance(value, list) else 0

    gb = load_like_litellm("gateway_backends")
    text = json.dumps(payload, ensure_ascii=False, default=str).encode()
    assert gb.byte_upper_bound(payload) >= len(text) + gb.TEMPLATE_MARGIN - exponents(payload)
    assert (
        gb.byte_upper_bound({"messages": [{"role": "user", "content": "hi"}]})
        == len(json.dumps({"messages": [{"role": "user", "content": "hi"}]})) + gb.TEMPLATE_MARGIN
    )  # a plain prompt: the same figure as before


def test_litellms_responses_modules_get_the_same_type_hints_remembered(monkeypatch):
    """litellm_cuts.cache_type_hints: LiteLLM's /v1/responses modules evaluated a TypedDict's hints per request;
    now once per class, the same answer as typing's, a copy each time; other calls are typing's own."""
    import importlib
    import typing

    from litellm.types.llms.openai import ResponsesAPIOptionalRequestParams

    utils = importlib.import_module("litellm.responses.utils")
    monkeypatch.setattr(utils, "get_type_hints", typing.get_type_hints)  # as LiteLLM has it, whatever ran before
    monkeypatch.setenv("GATEWAY_LITELLM_TYPE_HINTS", "keep")
    guard = load_like_litellm("litellm_cuts")
    assert guard.cache_type_hints() == [] and utils.get_type_hints is typing.get_type_hints  # the bench's A/B
    monkeypatch.delenv("GATEWAY_LITELLM_TYPE_HINTS")
    assert "litellm.responses.utils" in guard.cache_type_hints()
    first = utils.get_type_hints(ResponsesAPIOptionalRequestParams)
    assert first == typing.get_type_hints(ResponsesAPIOptionalRequestParams) and "temperature" in first
    first.clear()  # a caller's change stays its own
    assert utils.get_type_hints(ResponsesAPIOptionalRequestParams) == typing.get_type_hints(
        ResponsesAPIOptionalRequestParams
    )
    assert utils.get_type_hints(guard.cache_type_hints) == typing.get_type_hints(guard.cache_type_hints)


def test_litellms_responses_type_adapter_is_made_once_per_type(monkeypatch):
    """litellm_cuts.RememberedTypeAdapters: LiteLLM built TypeAdapter(dict[str, object]) on every /v1/responses
    request; now once per type, validating as a new one does; other calls make a new one."""
    import importlib

    import pydantic

    utils = importlib.import_module("litellm.responses.utils")
    monkeypatch.setattr(utils, "TypeAdapter", pydantic.TypeAdapter)
    cuts = load_like_litellm("litellm_cuts")
    assert cuts.TYPE_ADAPTER_MODULE in cuts.cache_type_hints() and cuts.cache_type_hints() == []  # once
    remembered = utils.TypeAdapter
    adapter = remembered(dict[str, object])
    assert adapter is remembered(dict[str, object]) and isinstance(adapter, pydantic.TypeAdapter)
    assert adapter.validate_python({"a": [1]}, strict=True) == {"a": [1]}
    with pytest.raises(pydantic.ValidationError):
        adapter.validate_python(["not", "a", "dict"], strict=True)
    assert remembered(int, config=None) is not remembered(int, config=None)  # with options: a new one each call
    assert remembered(list[int]).validate_python([1]) == [1]


def test_a_local_backends_request_set_up_runs_in_the_loop_and_everything_else_on_the_pool(monkeypatch):
    """litellm_cuts.set_up_in_the_loop: the loop's default executor runs a listed set-up for a hosted_vllm model at
    once, on the loop's thread, in the context LiteLLM copied (a context variable it sets is seen, as on a thread);
    a hosted provider's set-up, an unlisted function and asyncio.to_thread go to a pool thread; an exception
    reaches the awaiting coroutine either way. The real set-ups are LiteLLM's: every API test runs through them."""
    import asyncio
    import contextvars
    import functools
    import threading

    cuts = load_like_litellm("litellm_cuts")
    assert len(cuts.set_up_functions()) == 3  # this LiteLLM has all three: none silently keeps its hop
    var = contextvars.ContextVar("var", default="unset")

    def set_up(**kw):
        if kw.get("fail"):
            raise ValueError("bad request")
        var.set("set by the set-up")
        return threading.get_ident(), var.get()

    def other(**kw):
        return threading.get_ident(), var.get()

    async def main():
        loop = asyncio.get_running_loop()
        executor = cuts.SetUpInTheLoop({set_up})
        loop.set_default_executor(executor)
        here = threading.get_ident()

        async def run(f, **kw):
            return await loop.run_in_executor(
                None, functools.partial(contextvars.copy_context().run, functools.partial(f, **kw))
            )

        assert await run(set_up, model="hosted_vllm/reasoner") == (here, "set by the set-up")
        assert (await run(set_up, model="reasoner", custom_llm_provider="hosted_vllm"))[0] == here
        assert (await run(set_up, model="openai/gpt-5"))[0] != here
        assert (await run(set_up, model="hosted_vllm/x", custom_llm_provider="openai"))[0] != here
        assert (await run(other, model="hosted_vllm/reasoner"))[0] != here
        assert (await asyncio.to_thread(threading.get_ident)) != here
        assert var.get() == "unset"  # the set-up ran in its copy of the context, as on a thread
        with pytest.raises(ValueError, match="bad request"):
            await run(set_up, model="hosted_vllm/reasoner", fail=True)
        executor.shutdown()

    asyncio.run(main())
    monkeypatch.setenv("GATEWAY_LITELLM_SETUP_THREAD", "keep")  # the bench's A/B: the loop keeps asyncio's pool
    loop = asyncio.new_event_loop()
    try:
        assert cuts.set_up_in_the_loop(loop) is None and loop._default_executor is None
        monkeypatch.delenv("GATEWAY_LITELLM_SETUP_THREAD")
        assert isinstance(cuts.set_up_in_the_loop(loop), cuts.SetUpInTheLoop)
        assert cuts.set_up_in_the_loop(loop) is None  # once: an executor already set is kept
    finally:
        loop.close()


def test_litellms_backend_body_and_tool_copies_through_orjson_are_the_same_json(monkeypatch):
    """litellm_cuts.orjson_for_litellms_json: the backend request's body (WireJson.dumps) holds the same JSON value as
    json's text, and what orjson cannot write is json's own text; json.dumps with options stays json's. The Anthropic
    tools' copies (copy_without_json) are json's round trip without the text: the same value in new containers, and
    LiteLLM's own round trip for what is not plain JSON. Installed on LiteLLM's two modules, once."""
    import importlib
    import json
    import math

    from bench.apis import request_body
    from bench.run import SCENARIOS

    cuts = load_like_litellm("litellm_cuts")
    wire = cuts.WireJson()
    bodies = [json.loads(request_body(s)) for s in SCENARIOS]
    odd = {"text": "é ü 中文 \u2028", "n": 1.5e-9, "neg": -0.0, "big": 2**63 - 1, "nested": [{"a": None, "b": True}]}
    for value in [*bodies, odd]:
        assert json.loads(wire.dumps(value)) == json.loads(json.dumps(value)) == value
        assert wire.dumps(value) != json.dumps(value) or value == {}  # orjson's text, not json's (no spaces)
    for value in ({"big": 2**70}, {"s": "\ud800"}, {1: "key not a string"}):  # orjson refuses: json's own text
        assert wire.dumps(value) == json.dumps(value)
    assert (
        wire.dumps({"a": 1}, indent=2) == json.dumps({"a": 1}, indent=2)
        and wire.JSONDecodeError is json.JSONDecodeError
    )

    copies = []

    def original(value):  # LiteLLM's json_copy_or_original, counting its calls
        copies.append(value)
        try:
            return json.loads(json.dumps(value, default=dict))
        except (TypeError, ValueError, RecursionError):
            return value

    copy = cuts.copy_without_json(original)
    tool = bodies[[s.api for s in SCENARIOS].index("messages")]["tools"][0]
    for value in (tool, odd, {"nan": float("nan"), "inf": [float("inf")]}):
        copied = copy(value)
        assert json.dumps(copied) == json.dumps(original(value)) and copied is not value
    copies.clear()
    assert copy(tool)["input_schema"] is not tool["input_schema"] and copies == []  # new containers, no json
    for value in ({"t": (1, 2)}, {1: "x"}, {"o": object()}, {"s": type("S", (str,), {})("x")}):
        copy(value)
        assert copies[-1] is value  # not plain JSON: LiteLLM's own round trip
    assert math.isnan(copy({"x": float("nan")})["x"])
    handler = importlib.import_module(cuts.WIRE_JSON_MODULE)
    tools = importlib.import_module(cuts.TOOL_COPY_MODULE)
    content = importlib.import_module(cuts.HTTPX_CONTENT_MODULE)
    monkeypatch.setattr(handler, "json", json)
    unpatched = getattr(tools.json_copy_or_original, "original", tools.json_copy_or_original)  # a guard loaded before
    monkeypatch.setattr(tools, "json_copy_or_original", unpatched)
    monkeypatch.setattr(content, "encode_json", getattr(content.encode_json, "original", content.encode_json))
    monkeypatch.setenv("GATEWAY_LITELLM_JSON", "keep")
    assert cuts.orjson_for_litellms_json() == [] and handler.json is json
    monkeypatch.delenv("GATEWAY_LITELLM_JSON")
    assert cuts.orjson_for_litellms_json() == [cuts.WIRE_JSON_MODULE, cuts.TOOL_COPY_MODULE, cuts.HTTPX_CONTENT_MODULE]
    assert isinstance(handler.json, cuts.WireJson) and hasattr(tools.json_copy_or_original, "original")
    assert hasattr(content.encode_json, "original")
    assert cuts.orjson_for_litellms_json() == []  # once


def test_httpx_json_bodies_through_orjson_are_httpxs_json_with_its_headers():
    """litellm_cuts.orjson_encode_json (LiteLLM's /v1/responses body goes through httpx's `json=`): the same JSON value
    and headers as httpx's own, its compact UTF-8 form; what orjson refuses is httpx's own answer (a text or its
    error); a real httpx request built with it carries that body."""
    import json

    import httpx
    from httpx._content import encode_json

    from bench.apis import request_body
    from bench.run import SCENARIOS

    cuts = load_like_litellm("litellm_cuts")
    ours = cuts.orjson_encode_json(encode_json)
    odd = {"text": "é ü 中文 \u2028", "n": 1.5e-9, "neg": -0.0, "big": 2**63 - 1, "nested": [{"a": None, "b": True}]}
    for value in [*(json.loads(request_body(s)) for s in SCENARIOS), odd, [], "x", 1]:
        (headers, stream), (their_headers, theirs) = ours(value), encode_json(value)
        body, their_body = b"".join(stream), b"".join(theirs)
        assert json.loads(body) == json.loads(their_body) == value
        assert headers == {**their_headers, "Content-Length": str(len(body))}
        assert body == their_body or value is odd  # the same text but for a float's spelling (1.5e-9, 1.5e-09)
    for value in ({"big": 2**70}, {1: "key not a string"}):  # orjson refuses: httpx's own text
        assert b"".join(ours(value)[1]) == b"".join(encode_json(value)[1])
    with pytest.raises(UnicodeEncodeError):  # httpx's own refusal
        ours({"s": "\ud800"})
    assert json.loads(b"".join(ours({"x": float("nan")})[1])) == {"x": None}  # the one difference (docstring)
    request = httpx.Request("POST", "http://backend/v1/responses", json=odd)
    assert json.loads(request.content) == odd


def test_the_cache_control_walks_run_only_on_a_body_that_has_that_key(monkeypatch):
    """litellm_cuts.skip_needless_cache_control_walks: LiteLLM removes Anthropic's cache_control keys from every
    message, input item and tool before a chat or Responses request goes to a backend; on a body without that key the
    walk is skipped (it would change nothing) and the same objects come back; with one, at any depth, the walk runs
    and removes it. Installed on LiteLLM's two classes, once; GATEWAY_LITELLM_CACHE_CONTROL=keep leaves them."""
    import importlib
    import json

    from bench.apis import request_body
    from bench.run import SCENARIOS

    cuts = load_like_litellm("litellm_cuts")
    walked = []

    def walk(self, model, items, tools=None):  # LiteLLM's walk, counting its calls
        walked.append(model)
        common = importlib.import_module("litellm.litellm_core_utils.prompt_templates.common_utils")
        for item in [*(items if isinstance(items, list) else []), *(tools or [])]:
            if isinstance(item, dict):
                common.filter_value_from_dict(item, "cache_control")
        return items, tools

    skipping = cuts.skip_walk_without_cache_control(walk)
    body = json.loads(request_body(next(s for s in SCENARIOS if s.api == "responses")))
    items, tools = body["input"], body["tools"]
    assert skipping(None, "m", items, tools) == (items, tools) and walked == []
    assert skipping(None, model="m", items=items, tools=tools) == (items, tools) and walked == []  # as LiteLLM calls
    assert skipping(None, "m", items=items) == (items, None) and walked == []
    assert skipping(None, "m", "just text") == ("just text", None) and walked == []
    marked = [{"role": "user", "content": [{"type": "input_text", "text": "hi", "cache_control": {"type": "x"}}]}]
    assert skipping(None, "m", marked, [{"name": "f", "deep": [{"cache_control": 1}]}]) == (
        [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        [{"name": "f", "deep": [{}]}],
    )
    assert walked == ["m"]
    assert skipping(None, "n", [{"text": "the words cache_control in a text"}]) and walked == ["m"]  # a value, no key
    assert skipping(None, "o", [{"o": object()}]) and walked == ["m", "o"]  # orjson cannot tell: the walk decides
    installed = []
    for module_name, class_name, method in cuts.CACHE_CONTROL_WALKS:
        cls = getattr(importlib.import_module(module_name), class_name)
        original = getattr(cls.__dict__[method], "original", cls.__dict__[method])  # a guard loaded before
        monkeypatch.setattr(cls, method, original)
        installed.append(f"{module_name}.{class_name}")
    monkeypatch.setenv("GATEWAY_LITELLM_CACHE_CONTROL", "keep")
    assert cuts.skip_needless_cache_control_walks() == []
    monkeypatch.delenv("GATEWAY_LITELLM_CACHE_CONTROL")
    assert cuts.skip_needless_cache_control_walks() == installed and cuts.skip_needless_cache_control_walks() == []
    from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig

    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}, "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": "hi"}]
    assert OpenAIGPTConfig().remove_cache_control_flag_from_messages_and_tools(
        model="m", messages=messages, tools=tools
    ) == (messages, [{"type": "function", "function": {"name": "f", "parameters": {}}}])
    from litellm.llms.openai.responses.transformation import OpenAIResponsesAPIConfig

    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    assert OpenAIResponsesAPIConfig().remove_cache_control_flag_from_input_and_tools(
        model="m", input=items, tools=None
    ) == (items, None)
    with pytest.raises(TypeError):  # an argument given twice: the walk's own error
        OpenAIGPTConfig().remove_cache_control_flag_from_messages_and_tools("m", messages, model="m")


def test_the_served_texts_litellm_reads_back_after_a_stream_are_not_recorded_and_nothing_generated_reads_them(
    monkeypatch, tmp_path
):
    """litellm_cuts.skip_unread_served_texts: after each stream LiteLLM reads the texts it served back from the chunks
    (a streamed /v1/messages: its Anthropic stream parsed and assembled again) for a logged response; the cut makes
    that a no-op, once, and GATEWAY_LITELLM_SERVED_TEXTS=keep leaves it. It is safe because no config the generator
    writes has a logger that reads the response, nor a guardrail: only these callbacks."""
    import datetime

    import yaml
    from litellm.litellm_core_utils.litellm_logging import Logging
    from litellm.litellm_core_utils.served_output_texts import SERVED_OUTPUT_TEXTS_KEY
    from litellm.proxy.utils import ProxyLogging

    from bench.mock import CONTENT, messages_stream_body
    from generator.compile.load.loader import load_plan
    from generator.compile.renderers import litellm as renderer

    cuts = load_like_litellm("litellm_cuts")
    _, class_name, method = cuts.SERVED_TEXTS_CLASS
    assert class_name == "ProxyLogging"
    record = ProxyLogging.__dict__[method].__func__
    monkeypatch.setattr(ProxyLogging, method, staticmethod(getattr(record, "original", record)))  # a guard loaded

    def recorded():  # what an Anthropic stream's end leaves in the logging object
        logging_obj = Logging(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            call_type="acompletion",
            start_time=datetime.datetime.now(),
            litellm_call_id="call",
            function_id="f",
        )
        frames = [frame.encode() + b"\n\n" for frame in messages_stream_body("m").split("\n\n") if frame]
        asyncio.run(ProxyLogging._record_served_stream_output({"litellm_logging_obj": logging_obj}, frames))
        return logging_obj.model_call_details.get(SERVED_OUTPUT_TEXTS_KEY)

    assert recorded() == (CONTENT,)  # LiteLLM's: the stream read back
    monkeypatch.setenv("GATEWAY_LITELLM_SERVED_TEXTS", "keep")
    assert cuts.skip_unread_served_texts() is False and recorded() == (CONTENT,)
    monkeypatch.delenv("GATEWAY_LITELLM_SERVED_TEXTS")
    assert cuts.skip_unread_served_texts() is True and cuts.skip_unread_served_texts() is False  # once
    assert recorded() is None

    doc = yaml.safe_load((ROOT / "models.yml").read_text())
    readers_of_counts = {
        renderer.HOOK_MODULE,
        "people",
        renderer.REPAIRS_MODULE,
        renderer.HEALTH_MODULE,
        renderer.ROUTING_MODULE,
        "prometheus",
    }
    for metrics in ("light", "full"):
        doc.setdefault("gateway", {})["metrics"] = metrics
        (tmp_path / "models.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
        config = renderer.render_litellm(load_plan(tmp_path / "models.yml"))
        settings = config["litellm_settings"]
        assert {c.split(".")[0] for c in settings["callbacks"]} <= readers_of_counts, settings["callbacks"]
        assert not {"success_callback", "failure_callback", "service_callback"} & set(settings)
        assert "guardrails" not in config and "guardrails" not in settings

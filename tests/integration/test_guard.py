"""The gateway guard through the real gateway in front of real backends: every API's malformed requests and
every bound of models.yml `limits:` get the 4xx they mean, and the cases issue 31 found (a 500 or a reset
connection before) stay fixed. The fuzz test (test_fuzz_apis.py) covers what these tables do not list."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.guard_cases import BAD, BASE, GOOD, HELLO, bounded
from tests.integration.fuzz_schemas import APIS


def post(gateway, path: str, body, **kw) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        gateway.url.removesuffix("/v1") + path,
        content=content,
        timeout=kw.pop("timeout", 60),
        headers={"Authorization": f"Bearer {gateway.key}", "Content-Type": "application/json"},
        **kw,
    )


def model(gateway) -> str:
    return gateway.plan.models[0].served_name


@pytest.mark.parametrize("api,change,message", BAD, ids=[f"{a}-{next(iter(c))}-{i}" for i, (a, c, _) in enumerate(BAD)])
def test_every_apis_wrong_types_and_shapes_are_a_400_naming_the_field(gateway, api, change, message):
    body = {k: v for k, v in {**GOOD[api], "model": model(gateway), **change}.items() if v is not None}
    r = post(gateway, APIS[api][0], body)
    assert r.status_code == 400 and message in r.text, f"{r.status_code}: {r.text[:300]}"


CLIENT_FIELDS = {  # field -> a value LiteLLM would act on
    "api_base": "http://127.0.0.1:9/v1",
    "base_url": "http://127.0.0.1:9/v1",
    "user_config": {"model_list": []},
    "mock_response": "http://127.0.0.1:9/v1",
    "client": [[], [], "x"],  # the fuzz test's find (2026-11-27): a 500 on completions
    "custom_llm_provider": "anthropic",  # LiteLLM spoke Anthropic's API to the backend
    "extra_body": {"n": 5},  # 5 choices past limits.n
    "extra_headers": {"Authorization": "Bearer x"},
    "headers": [],  # a 500
    "timeout": [],  # a 500
    "num_retries": 50,
    "request_timeout": "x",  # a 500 (2026-11-28)
    "deployment_id": "x",  # the backend's 401
}


@pytest.mark.parametrize("field", CLIENT_FIELDS)
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_client_side_routing_fields_are_a_400_not_a_500_or_a_reset(gateway, api, field):
    """Issue 31: LiteLLM 1.103.7 answered api_base/user_config with a 500 and base_url/mock_response with a reset;
    LiteLLM 1.108.7 takes `client`, `extra_body`, headers, timeouts and retries from a body as its own arguments."""
    body = {**GOOD[api], "model": model(gateway), field: CLIENT_FIELDS[field]}
    r = post(gateway, APIS[api][0], body)
    assert r.status_code == 400 and f"`{field}`" in r.text, r.text[:300]


@pytest.mark.parametrize(
    "api,body,message",
    [
        ("responses", {"input": 5}, "`input` must be a string or a list of input items"),
        ("messages", {"messages": "x", "max_tokens": 4}, "`messages` must be a non-empty list"),
        ("chat", {"messages": HELLO, "max_tokens": -1}, "`max_tokens` must be an integer of at least 1"),
        ("chat", {}, "`messages` is required"),
    ],
    ids=["responses-input-5", "messages-a-string", "negative-max-tokens", "no-messages"],
)
def test_issue_31_cases_are_a_clear_400(gateway, api, body, message):
    r = post(gateway, APIS[api][0], {"model": model(gateway), **body})
    assert r.status_code == 400 and message in r.text, f"{r.status_code}: {r.text[:300]}"


def test_embeddings_to_a_chat_model_name_the_model(gateway):
    r = post(gateway, "/v1/embeddings", {"model": model(gateway), "input": "hi"})
    assert r.status_code == 400 and f"{model(gateway)} is not an embedding model" in r.text, r.text[:300]


@pytest.mark.parametrize("api", APIS)
def test_a_body_over_the_size_limit_is_a_413_on_every_api(gateway, api):
    body = {"model": model(gateway), **BASE[api], "user": "x" * (17 * 1024 * 1024)}  # the demo's limit: 16 MiB
    r = post(gateway, APIS[api][0], body, timeout=120)
    assert r.status_code == 413 and "limits.request_size" in r.text, f"{r.status_code}: {r.text[:300]}"
    assert post(gateway, APIS["chat"][0], {"model": model(gateway), **BASE["chat"]}).status_code == 200


BOUNDS = {  # models.yml `limits:` field -> (request field, a value just past the demo's default bound, the bound)
    "n": ("n", 2, 1),
    "best_of": ("best_of", 2, 1),
    "tools": ("tools", [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)], 128),
    "logit_bias": ("logit_bias", {str(i): 1 for i in range(301)}, 300),
}
TOOLS_OF = {  # each API's own tool shape, so that only the count is wrong
    "responses": lambda i: {"type": "function", "name": f"f{i}", "parameters": {}},
    "messages": lambda i: {"name": f"f{i}", "input_schema": {}},
    "count_tokens": lambda i: {"name": f"f{i}", "input_schema": {}},
}


@pytest.mark.parametrize("api,bound", bounded(BOUNDS))
def test_past_each_bound_every_api_answers_400_naming_field_and_bound(gateway, api, bound):
    field, value, most = BOUNDS[bound]
    if field == "tools" and api in TOOLS_OF:
        value = [TOOLS_OF[api](i) for i in range(most + 1)]
    r = post(gateway, APIS[api][0], {"model": model(gateway), **BASE[api], field: value})
    assert r.status_code == 400, f"{r.status_code}: {r.text[:300]}"
    assert (
        f"`{field}` asks" in r.text
        and f"over the {most} that {model(gateway)} (limits.{bound} in models.yml)" in r.text
    )


LOGPROBS = {  # API -> a body asking more logprobs per token than the demo's backends compute (vLLM's default 20)
    "completions": ("logprobs", {"logprobs": 437}),
    "chat": ("top_logprobs", {"logprobs": True, "top_logprobs": 21}),
    "responses": ("top_logprobs", {"top_logprobs": 21}),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("api", LOGPROBS)
def test_more_logprobs_than_the_backend_computes_is_a_400_naming_the_field(gateway, api, stream):
    """The fuzz test found it (fuzz_regressions.jsonl): streamed, vLLM's refusal reached the client as LiteLLM's 500."""
    field, extra = LOGPROBS[api]
    r = post(gateway, APIS[api][0], {"model": model(gateway), **BASE[api], **extra, "stream": stream})
    assert r.status_code == 400, f"{r.status_code}: {r.text[:300]}"
    assert f"`{field}` asks" in r.text and "over the 20 that" in r.text and "--max-logprobs" in r.text
    ok = {**BASE[api], **extra, field: 2}
    assert post(gateway, APIS[api][0], {"model": model(gateway), **ok}).status_code == 200


BACKEND_REFUSALS = {  # a field vLLM refuses with a 400 only the backend can know -> what its message says
    "logit_bias": ({"logit_bias": {"999999999": 1}}, "out-of-vocab token ids"),
    "allowed_token_ids": ({"allowed_token_ids": [999999999]}, "out-of-vocab token id"),
    "structured_outputs": ({"structured_outputs": {"regex": "("}}, "invalid regex"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("case", BACKEND_REFUSALS)
def test_a_completions_request_the_backend_refuses_is_its_400_streamed_or_not(gateway, case, stream):
    """Streamed, vLLM sends its refusal as the stream's first event and LiteLLM 1.108.7's text-completion stream
    made it a 500 (MidStreamFallbackError); the failure hook gives the backend's own 400 and message."""
    extra, message = BACKEND_REFUSALS[case]
    r = post(
        gateway, APIS["completions"][0], {"model": model(gateway), **BASE["completions"], **extra, "stream": stream}
    )
    assert r.status_code == 400 and message in r.text, f"{r.status_code}: {r.text[:300]}"


@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/"),
        ("GET", "/ui/"),
        ("GET", "/ui/login"),
        ("GET", "/docs"),
        ("GET", "/redoc"),
        ("GET", "/openapi.json"),
        ("GET", "/_next/static/chunks/main.js"),
        ("GET", "/litellm-asset-prefix/_next/static/chunks/main.js"),
        ("GET", "/.well-known/litellm-ui-config"),
        ("POST", "/login"),
        ("POST", "/v2/login"),
        ("GET", "/fallback/login"),
        ("GET", "/sso/key/generate"),
        ("GET", "/get_image"),
    ],
)
def test_with_the_admin_ui_off_its_pages_logins_and_the_api_docs_are_a_404(gateway, method, path):
    """Issue 48: LiteLLM mounts its UI (and served its Swagger page at /, every admin route listed) to anyone, without
    a key, whatever DISABLE_ADMIN_UI says."""
    assert not gateway.plan.gateway.admin_ui
    r = httpx.request(
        method,
        gateway.url.removesuffix("/v1") + path,
        timeout=30,
        **({"data": {"username": "admin", "password": "x"}} if method == "POST" else {}),
    )
    assert r.status_code == 404 and "admin UI and API docs are off" in r.text, f"{r.status_code}: {r.text[:200]}"

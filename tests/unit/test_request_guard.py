"""The request guard (request_guard.py + request_shapes.py), loaded the way LiteLLM loads the gateway's modules
(by path, from beside the generated config.yaml), driven as the ASGI middleware it is, in front of a recording app."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.guard_cases import BAD, GOOD
from tests.unit.test_gateway_hooks import load_like_litellm

KEY = "sk-test-0123456789abcdef0123456789abcdef"
HELLO = [{"role": "user", "content": "hi"}]
LIMITS = {"n": 2, "best_of": 1, "tools": 3, "logit_bias": 4, "request_bytes": 4096}


class FakeRouter:
    model_list = [
        {"model_name": "m", "litellm_params": {"model": "hosted_vllm/m"}, "model_info": {"gateway_limits": LIMITS}},
        {
            "model_name": "big",
            "litellm_params": {"model": "hosted_vllm/big"},
            "model_info": {"gateway_limits": {**LIMITS, "request_bytes": 65536}},
        },
        {
            "model_name": "lora-cpu",
            "litellm_params": {"model": "hosted_vllm/lora-cpu"},
            "model_info": {"gateway_limits": LIMITS, "gateway_no_prompt_logprobs": True},
        },
        {
            "model_name": "emb",
            "litellm_params": {"model": "hosted_vllm/emb"},
            "model_info": {"mode": "embedding", "gateway_limits": LIMITS},
        },
        {
            "model_name": "rr",
            "litellm_params": {"model": "hosted_vllm/rr"},
            "model_info": {"mode": "rerank", "gateway_limits": LIMITS},
        },
    ]

    def get_model_list(self, model_name):
        return [d for d in self.model_list if d["model_name"] == model_name]


@pytest.fixture
def shapes():
    return load_like_litellm("request_shapes")


@pytest.fixture
def guard(monkeypatch):
    """post(path, body or bytes, headers) through the middleware -> (status, json, what the app behind received)."""
    module = load_like_litellm("request_guard")
    import gateway_backends as gb  # the copy the guard imports (beside it)

    monkeypatch.setattr(gb, "router", lambda: FakeRouter())
    monkeypatch.setattr(module, "litellm_refusal", lambda body, path: None)
    seen: list[dict] = []

    async def app(scope, receive, send):
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        seen.append({"body": body, "parsed": scope.get("parsed_body")})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"ok": true}'})

    middleware = module.RequestGuard(app, lambda k: (k or "").removeprefix("Bearer ") == KEY, "missing or invalid key")

    def post(path, body, headers=None):
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"} if headers is None else headers

        async def go():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=middleware), base_url="http://gw") as c:
                return await c.post(path, content=content, headers=headers)

        r = asyncio.run(go())
        return r.status_code, r.json(), seen[-1] if seen and r.status_code == 200 else None

    post.module = module
    return post


# --- request_shapes: every API's table ----------------------------------------------------------------------
@pytest.mark.parametrize("api", GOOD)
def test_well_formed_requests_of_every_api_pass(shapes, api):
    assert shapes.problem(api, GOOD[api]) is None


@pytest.mark.parametrize("api,change,message", BAD, ids=[f"{a}-{next(iter(c))}-{i}" for i, (a, c, _) in enumerate(BAD)])
def test_each_wrong_type_or_shape_names_the_field_and_what_it_must_be(shapes, api, change, message):
    body = {**GOOD[api], **change}
    body = {k: v for k, v in body.items() if v is not None}
    why = shapes.problem(api, body)
    assert why is not None and message in why, why


@pytest.mark.parametrize(
    "path,api",
    [
        ("/v1/chat/completions", "chat"),
        ("/chat/completions/", "chat"),
        ("/openai/deployments/m/chat/completions", "chat"),
        ("/v1/completions", "completions"),
        ("/v1/responses", "responses"),
        ("/v1/messages", "messages"),
        ("/v1/messages/count_tokens", "count_tokens"),
        ("/v1/embeddings", "embeddings"),
        ("/embeddings", "embeddings"),
        ("/v1/models", None),
        ("/v1/responses/abc/cancel", None),
        ("/v1/audio/transcriptions", None),
    ],
)
def test_every_alias_of_an_api_gets_its_check(shapes, path, api):
    assert shapes.api_of(path) == api


# --- request_guard: the middleware ----------------------------------------------------------------------------
def test_a_good_request_reaches_litellm_unchanged_and_parsed_once(guard):
    body = {"model": "m", "messages": HELLO}
    status, _, seen = guard("/v1/chat/completions", body)
    assert status == 200 and json.loads(seen["body"]) == body
    assert seen["parsed"] == (("model", "messages"), body)  # LiteLLM's parsed-body cache: it parses no second time


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer sk-wrong"}, {"x-api-key": "sk-wrong"}])
def test_without_the_key_a_401_before_the_body_is_parsed(guard, headers):
    status, answer, _ = guard("/v1/chat/completions", b"[not even json", headers)
    assert status == 401 and answer["error"]["message"] == "missing or invalid key"


def test_the_anthropic_key_header_opens_it_and_errors_come_in_anthropics_shape(guard):
    status, answer, _ = guard("/v1/messages", {"model": "m", "messages": "x"}, {"x-api-key": KEY})
    assert status == 400 and answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error"
    assert "`messages` must be a non-empty list" in answer["error"]["message"]


@pytest.mark.parametrize(
    "content,message",
    [
        (b"{this is not json", "the body is not JSON"),
        (b"", "the body is not JSON"),
        (b"[]", "the body must be a JSON object"),
        (b'"hi"', "the body must be a JSON object"),
        (b'{"model": "m", "messages": "\\ud800"}', "the body is not JSON"),  # a lone surrogate no backend can encode
    ],
)
def test_a_body_that_is_not_a_json_object_is_a_400(guard, content, message):
    status, answer, _ = guard("/v1/chat/completions", content)
    assert status == 400 and message in answer["error"]["message"], answer


def test_a_form_body_is_a_400_asking_for_json(guard):
    status, answer, _ = guard(
        "/v1/embeddings",
        b"model=m&input=x",
        {"Authorization": f"Bearer {KEY}", "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 400 and "send the body as JSON" in answer["error"]["message"]


@pytest.mark.parametrize(
    "field",
    [
        "api_base",
        "base_url",
        "user_config",
        "mock_response",
        "api_key",
        "model_list",
        "client",
        "custom_llm_provider",
        "extra_body",
        "headers",
        "extra_headers",
        "timeout",
        "stream_timeout",
        "max_retries",
        "num_retries",
        "request_timeout",
        "deployment_id",
        "default_headers",
        "organization",
    ],
)
def test_fields_that_choose_where_litellm_sends_the_request_are_a_400(guard, field):
    status, answer, _ = guard("/v1/chat/completions", {"model": "m", "messages": HELLO, field: "http://x"})
    assert status == 400 and f"`{field}` is not taken from a request" in answer["error"]["message"]
    assert answer["error"]["param"] == field


@pytest.mark.parametrize(
    "path,change,message",
    [
        ("/v1/chat/completions", {"n": 3}, "`n` asks 3, over the 2 that m (limits.n in models.yml) allows"),
        (
            "/v1/completions",
            {"best_of": 2},
            "`best_of` asks 2, over the 1 that m (limits.best_of in models.yml) allows",
        ),
        (
            "/v1/chat/completions",
            {"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(4)]},
            "`tools` asks 4 entries, over the 3 that m (limits.tools in models.yml) allows",
        ),
        (
            "/v1/responses",
            {"tools": [{"type": "function", "name": f"f{i}"} for i in range(4)]},
            "`tools` asks 4 entries",
        ),
        (
            "/v1/messages",
            {"tools": [{"name": f"f{i}", "input_schema": {}} for i in range(4)]},
            "`tools` asks 4 entries",
        ),
        ("/v1/completions", {"logit_bias": {str(i): 1 for i in range(5)}}, "`logit_bias` asks 5 entries, over the 4"),
    ],
)
def test_past_a_models_bound_a_400_names_the_field_and_the_bound(guard, path, change, message):
    base = {
        "/v1/chat/completions": {"messages": HELLO},
        "/v1/completions": {"prompt": "hi"},
        "/v1/responses": {"input": "hi"},
        "/v1/messages": {"messages": HELLO},
    }[path]
    status, answer, _ = guard(path, {"model": "m", **base, **change})
    text = answer["error"]["message"]
    assert status == 400 and message in text, text
    ok = {k: (v[:2] if isinstance(v, list) else {"1": 1} if isinstance(v, dict) else 1) for k, v in change.items()}
    assert guard(path, {"model": "m", **base, **ok})[0] == 200  # at or under the bound: on to LiteLLM


@pytest.mark.parametrize(
    "path,change,field",
    [
        ("/v1/completions", {"echo": True, "logprobs": 0}, "logprobs"),
        ("/v1/completions", {"prompt_logprobs": 1}, "prompt_logprobs"),
        ("/v1/chat/completions", {"echo": True, "logprobs": True, "top_logprobs": 2}, "top_logprobs"),
        ("/v1/chat/completions", {"prompt_logprobs": 0}, "prompt_logprobs"),
    ],
)
def test_a_prompts_logprobs_of_a_model_whose_backend_cannot_compute_them_is_a_400(guard, path, change, field):
    """vLLM 0.32 stops the engine of a CPU backend with LoRA over them (found by the fuzz test on the compose stack)."""
    base = {"/v1/chat/completions": {"messages": HELLO}, "/v1/completions": {"prompt": "hi"}}[path]
    status, answer, _ = guard(path, {"model": "lora-cpu", **base, **change})
    text = answer["error"]["message"]
    assert status == 400 and answer["error"]["param"] == field and "lora-cpu does not serve" in text, answer
    assert "LoRA adapters on CPU" in text and "docs/limits.md" in text
    assert guard(path, {"model": "m", **base, **change})[0] == 200  # another model's backend computes them
    answer_only = {k: v for k, v in change.items() if k not in ("echo", "prompt_logprobs")}  # the answer's logprobs
    assert guard(path, {"model": "lora-cpu", **base, **answer_only})[0] == 200


def test_a_body_over_the_models_size_is_a_413_and_over_every_models_is_not_kept(guard):
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]}
    status, answer, _ = guard("/v1/chat/completions", big)
    assert (
        status == 413 and "over the 4096 that m (limits.request_size in models.yml) takes" in answer["error"]["message"]
    )
    assert guard("/v1/chat/completions", {**big, "model": "big"})[0] == 200
    status, answer, _ = guard("/v1/chat/completions", {**big, "messages": [{"role": "user", "content": "x" * 70000}]})
    assert status == 413 and "over 65536 bytes, the most any model here takes" in answer["error"]["message"]


def test_unknown_models_and_other_routes_pass_to_litellm(guard):
    assert guard("/v1/chat/completions", {"model": "nope", "messages": HELLO, "n": 9})[0] == 200  # LiteLLM's 400
    assert guard("/v1/images/generations", b"[not json")[0] == 200  # not an API this guard knows


def test_litellms_own_body_check_is_answered_as_the_400_it_means(monkeypatch):
    module = load_like_litellm("request_guard")
    refusal = module.litellm_refusal(
        {"model": "m", "messages": HELLO, "aws_sts_endpoint": "http://x"}, "/v1/chat/completions"
    )
    assert refusal is not None and refusal.status == 400 and "aws_sts_endpoint" in refusal.message
    assert module.litellm_refusal({"model": "m", "messages": HELLO}, "/v1/chat/completions") is None


def test_embeddings_to_a_model_without_them_is_a_400_naming_the_model():
    """vLLM serves /v1/embeddings only for pooling models; a generative model's backend answers 404 Not Found."""
    hook = load_like_litellm("max_tokens_clamp")

    class NotFound(Exception):
        status_code = 404

    data = {"model": "chat-model", "proxy_server_request": {"url": "http://gw/v1/embeddings"}}
    answer = asyncio.run(hook.MaxTokensClamp().async_post_call_failure_hook(data, NotFound("Not Found"), None))
    assert answer.status_code == 400 and "chat-model is not an embedding model" in answer.detail
    chat = {**data, "proxy_server_request": {"url": "http://gw/v1/chat/completions"}}
    assert asyncio.run(hook.MaxTokensClamp().async_post_call_failure_hook(chat, NotFound("Not Found"), None)) is None


@pytest.mark.parametrize(
    "path,body,refused",
    [
        ("/v1/embeddings", {"model": "m", "input": "hi"}, "m is not an embedding model"),
        ("/v1/embeddings", {"model": "rr", "input": "hi"}, "rr is not an embedding model"),
        ("/v1/embeddings", {"model": "emb", "input": "hi"}, None),
        ("/v1/rerank", {"model": "m", "query": "q", "documents": ["a"]}, "m is not a rerank model"),
        ("/v2/rerank", {"model": "emb", "query": "q", "documents": ["a"]}, "emb is not a rerank model"),
        ("/v1/rerank", {"model": "rr", "query": "q", "documents": ["a"]}, None),
        ("/v1/embeddings", {"model": "no-such-model", "input": "hi"}, None),  # LiteLLM's own 400 names it
    ],
)
def test_embeddings_or_rerank_to_a_model_of_another_kind_is_a_400_before_its_backend(guard, path, body, refused):
    """The route walk saw such requests reach the backend (a 404 there); the config's model_info.mode says the kind."""
    status, answer, reached = guard(path, body)
    if refused:
        assert status == 400 and refused in answer["error"]["message"] and reached is None
    else:
        assert status == 200 and reached is not None


def test_a_model_named_in_the_path_counts_as_the_requests_model(guard):
    status, answer, _ = guard("/openai/deployments/m/chat/completions", {"messages": HELLO, "n": 3})
    assert status == 400 and "over the 2 that m" in answer["error"]["message"]
    status, _, seen = guard("/openai/deployments/m/chat/completions", {"messages": HELLO})
    assert status == 200 and seen["parsed"] is None and json.loads(seen["body"]) == {"messages": HELLO}


@pytest.mark.parametrize("started", [False, True])
def test_install_puts_the_guard_in_front_of_an_app_started_or_not(started):
    """LiteLLM loads custom auth inside its lifespan, after Starlette built the middleware stack."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    module = load_like_litellm("request_guard")

    async def chat(request):
        return JSONResponse(await request.json())

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with TestClient(app) as client:
        if not started:
            app.middleware_stack = None  # as before the first request
        module.install(lambda k: k == f"Bearer {KEY}", "no key", app)
        module.install(lambda k: False, "installed twice", app)  # once per process
        headers = {"Authorization": f"Bearer {KEY}"}
        assert (
            client.post("/v1/chat/completions", json={"model": "m", "messages": "x"}, headers=headers).status_code
            == 400
        )
        assert client.post("/v1/chat/completions", json={"model": "m", "messages": HELLO}, headers=headers).json() == {
            "model": "m",
            "messages": HELLO,
        }
        assert client.post("/v1/chat/completions", json={"model": "m", "messages": HELLO}).status_code == 401


def test_the_guard_reads_the_limits_the_renderer_wrote_through_litellms_own_router(plan, monkeypatch):
    """model_info.gateway_limits survives LiteLLM's Router (its model_info keeps fields it does not know)."""
    from litellm import Router

    from generator.compile.renderers.litellm import local_api_base, render_litellm

    p = plan("m:\n  gpus: []\n  command: vllm serve x/y --max-model-len 4096\n  limits: {n: 3, request_size: 8KiB}\n")
    monkeypatch.setenv("VLLM_API_KEY_M", "k")
    router = Router(model_list=render_litellm(p, local_api_base)["model_list"])
    module = load_like_litellm("request_guard")
    import gateway_backends as gb

    monkeypatch.setattr(gb, "router", lambda: router)
    assert module.model_limits("m") == {"n": 3, "best_of": 1, "tools": 128, "logit_bias": 300, "request_bytes": 8192}
    assert module.largest_request() == 8192


# --- gateway.metrics: light: the guard counts what it lets through -----------------------------------------------
def _count(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_light_metrics_count_each_request_let_through_by_model_and_status_and_nothing_else(guard, monkeypatch):
    import request_counters as counters  # the copy the guard imports (beside it)

    total, failed = f"{counters.REQUESTS}_total", f"{counters.FAILED}_total"
    before = _count(total, requested_model="m", status_code="200", api_key_alias="")
    monkeypatch.delenv(counters.ENV, raising=False)
    assert guard("/v1/chat/completions", {"model": "m", "messages": HELLO})[0] == 200  # full: not counted here
    assert _count(total, requested_model="m", status_code="200", api_key_alias="") == before
    monkeypatch.setenv(counters.ENV, "1")
    assert guard("/v1/chat/completions", {"model": "m", "messages": HELLO})[0] == 200
    assert guard("/openai/deployments/m/chat/completions", {"messages": HELLO})[0] == 200  # the model in the path
    assert _count(total, requested_model="m", status_code="200", api_key_alias="") == before + 2
    refused = _count(failed, requested_model="m", exception_status="400", exception_class="")
    assert guard("/v1/chat/completions", {"model": "m", "messages": "not a list"})[0] == 400  # the guard's own 400
    assert _count(failed, requested_model="m", exception_status="400", exception_class="") == refused  # as LiteLLM's
    import people  # the copy the guard imports: a person's request carries their name (the master key's: "")

    monkeypatch.setattr(people.DIRECTORY, "who", lambda key: people.Person("ann", None, *[None] * 5))
    ann = _count(total, requested_model="m", status_code="200", api_key_alias="ann")
    assert guard("/v1/chat/completions", {"model": "m", "messages": HELLO})[0] == 200
    assert _count(total, requested_model="m", status_code="200", api_key_alias="ann") == ann + 1


def through_the_guard(model: str, status: int, headers: list | None = None) -> int:
    """The status a chat request for `model` gets through the request guard, in front of an app that answers
    `status` with `headers` (light metrics counting)."""
    module = load_like_litellm("request_guard")

    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": status, "headers": headers or []})
        await send({"type": "http.response.body", "body": b"{}"})

    middleware = module.RequestGuard(app, lambda k: (k or "").removeprefix("Bearer ") == KEY, "no key")

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=middleware), base_url="http://gw") as c:
            return await c.post(
                "/v1/chat/completions",
                json={"model": model, "messages": HELLO},
                headers={"Authorization": f"Bearer {KEY}"},
            )

    return asyncio.run(go()).status_code


def test_light_metrics_count_an_error_answer_as_a_failure_with_its_status(monkeypatch):
    import request_counters as counters

    monkeypatch.setenv(counters.ENV, "1")
    label = {"requested_model": "m503", "exception_status": "503", "exception_class": ""}
    before = _count(f"{counters.FAILED}_total", **label)
    assert through_the_guard("m503", 503) == 503
    assert _count(f"{counters.FAILED}_total", **label) == before + 1


def behind_the_guard(reached: list, **options):
    """(the request guard in front of an app that records each path it is asked, ask(method, path, key))."""
    module = load_like_litellm("request_guard")

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    middleware = module.RequestGuard(app, lambda k: k in (f"Bearer {KEY}", "Bearer person"), "bad key", **options)

    def ask(method: str, path: str, key: str = f"Bearer {KEY}") -> httpx.Response:
        async def go():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=middleware), base_url="http://gw") as c:
                return await c.request(
                    method, path, content=b"username=admin&password=x", headers={"Authorization": key}
                )

        return asyncio.run(go())

    return ask


@pytest.mark.parametrize("hide_ui", [True, False])
@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/"),
        ("GET", "/ui/"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("POST", "/login"),
        ("GET", "/litellm-asset-prefix/_next/a.js"),
    ],
)
def test_with_the_ui_hidden_its_pages_and_the_docs_are_a_404_for_anyone(method, path, hide_ui):
    reached: list = []
    r = behind_the_guard(reached, hide_ui=hide_ui)(method, path)
    if hide_ui:
        assert r.status_code == 404 and "admin UI and API docs are off" in r.text and reached == []
    else:
        assert r.status_code == 200 and reached == [path]


@pytest.mark.parametrize(
    "path", ["/gateway/status", "/v1/models", "/health/readiness", "/healthz", "/uix", "/docsearch", "/v1/login"]
)
def test_hiding_the_ui_leaves_every_other_route_alone(path):
    module = load_like_litellm("request_guard")
    assert not module.is_ui_path(path)


def test_a_route_the_key_may_not_ask_is_a_403_before_litellm_sees_the_key():
    """LiteLLM's error path after custom auth put a person's raw key in its failure metric's hashed_api_key label (the
    people test found it on /health); the guard answers such routes itself."""

    def route_check(key, path):
        return "the master key's" if key == "Bearer person" and path == "/health" else None

    reached: list = []
    ask = behind_the_guard(reached, route_check=route_check)
    r = ask("GET", "/health", "Bearer person")
    assert r.status_code == 403 and "the master key's" in r.text and "person" not in r.text and reached == []
    assert ask("GET", "/health").status_code == 200
    assert ask("GET", "/health/readiness", "Bearer person").status_code == 200
    assert reached == ["/health", "/health/readiness"]


def test_light_metrics_count_a_fallbacks_answer_under_the_model_that_answered(monkeypatch):
    """A request to m500 that its fallback m200 answered (x-gateway-fallback): counted under m200, as its tokens are
    (people.py) and as LiteLLM's callback counts an answered request (its model_group)."""
    import request_counters as counters

    monkeypatch.setenv(counters.ENV, "1")
    labels = {"status_code": "200", "api_key_alias": ""}
    asked, answered = (_count(f"{counters.REQUESTS}_total", requested_model=m, **labels) for m in ("m500", "m200"))
    assert through_the_guard("m500", 200, [(b"x-gateway-fallback", b"m500->m200")]) == 200
    assert _count(f"{counters.REQUESTS}_total", requested_model="m200", **labels) == answered + 1
    assert _count(f"{counters.REQUESTS}_total", requested_model="m500", **labels) == asked


def test_a_field_an_api_does_not_take_is_refused_even_when_null(shapes):
    """`messages: null` on /v1/completions was a 500 (LiteLLM passed messages=None beside its own; found by the
    fuzz test's added fields); a null of a field the API takes is left to the backend's defaults."""
    body = {"model": "m", "prompt": "hi", "max_tokens": 4}
    assert "`messages` must be absent" in (shapes.problem("completions", {**body, "messages": None}) or "")
    assert shapes.problem("completions", {**body, "temperature": None}) is None


def test_every_chat_field_litellm_would_hand_the_sdks_completions_call_is_refused_on_completions():
    """LiteLLM 1.108.7 passes the OpenAI chat fields it knows (litellm.OPENAI_CHAT_COMPLETION_PARAMS) to the OpenAI
    SDK's completions.create() as arguments on /v1/completions: each one that call does not take was a 500. Every
    one is refused by the guard (a chat-only field, or one the gateway's config decides); a LiteLLM upgrade that
    adds a field fails here until request_shapes.CHAT_ONLY or the guard's CLIENT_CONTROL names it."""
    import inspect

    import litellm
    from openai.resources.completions import AsyncCompletions

    module = load_like_litellm("request_guard")
    taken = set(inspect.signature(AsyncCompletions.create).parameters)
    leaks = sorted(set(litellm.OPENAI_CHAT_COMPLETION_PARAMS) - taken - {"messages"})
    assert leaks, "the cross-check found nothing to check"
    body = {"model": "m", "prompt": "hi", "max_tokens": 4}
    unrefused = [
        f for f in leaks if f not in module.CLIENT_CONTROL and module.shapes.COMPLETIONS({**body, f: 1}) is None
    ]
    assert not unrefused, unrefused


def test_every_deployment_setting_litellm_takes_from_a_body_is_a_400_on_every_api():
    """LiteLLM 1.108.7 takes each field of its GenericLiteLLMParams from a request body as the deployment's setting
    (the fuzz test's `tpm: {...}` on /v1/completions was a 500): credentials, prices, limits. Every one, on every
    API, is refused naming it; a LiteLLM upgrade that adds one is refused with it."""
    from litellm.types.router import GenericLiteLLMParams

    module = load_like_litellm("request_guard")
    fields = sorted(GenericLiteLLMParams.model_fields)
    assert {"tpm", "rpm", "input_cost_per_token", "aws_secret_access_key", "vertex_credentials"} <= set(fields)
    passed = []
    for api, good in GOOD.items():
        assert module.judge(api, good, 100) is None, api
        for field in fields:
            refusal = module.judge(api, {**good, field: {"x": [1]}}, 100)
            if refusal is None or refusal.status != 400 or refusal.param != field:
                passed.append((api, field, refusal))
    assert not passed, passed[:5]

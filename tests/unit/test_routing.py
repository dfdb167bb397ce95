"""Routes between models (models.yml `fallbacks:`, `context_fallbacks:`, `aliases:`; docs/routing.md): every refusal of
compile/load/routing.py with its field, the plan, the LiteLLM config, golden files of examples/routing, and the
gateway hooks' share (fallbacks.py through max_tokens_clamp.py, the guard's alias), loaded the way LiteLLM loads them.
Through the real gateway: tests/integration/test_partial_availability.py and test_faults.py."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.renderers.litellm import CONTEXT_FALLBACKS, render_litellm
from tests.unit.golden import assert_golden
from tests.unit.test_gateway_hooks import load_like_litellm

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/routing/models.yml"


def model(name: str, context: str = "4K", extra: str = "", flags: str = "") -> str:
    return f"""
{name}:
  gpus: []
  command: vllm serve org/{name} --max-model-len {context} {flags}
{extra}"""


TOOLS = "--enable-auto-tool-choice --tool-call-parser hermes"
EMBED = "--runner pooling --convert embed"


# --- the rules ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            model("a", extra="  fallbacks: [bb]\n") + model("b"),
            "a.fallbacks.0: 'bb' is not a model of this file; did you mean 'b'?",
        ),
        (model("a", extra="  fallbacks: [a]\n"), "a.fallbacks.0: 'a' is this model itself; name another model"),
        (model("a", extra="  fallbacks: [b, b]\n") + model("b"), "a.fallbacks.1: 'b' is named twice; keep one"),
        (
            model("a", extra="  fallbacks: [e]\n") + model("e", "512", flags=EMBED),
            "a.fallbacks.0: e is an embedding model and a a chat model: a fallback must serve the same kind of request",
        ),
        (
            model("a", extra="  fallbacks: [b]\n")
            + model("b", extra="  fallbacks: [c]\n")
            + model("c", extra="  fallbacks: [a]\n"),
            "a.fallbacks: fallbacks go round in a cycle: a -> b -> c -> a; break it",
        ),
        (
            model("a", "8K", extra="  context_fallbacks: [b]\n") + model("b", "8K"),
            "a.context_fallbacks.0: b holds 8192 (8K) tokens, not more than a's 8192 (8K): "
            "a context fallback must have a larger context",
        ),
        (
            model("e", "512", flags=EMBED, extra="  context_fallbacks: [b]\n") + model("b", "8K", flags=EMBED),
            "e.context_fallbacks: e is an embedding model: context fallbacks are for chat models",
        ),
        (
            model("a", extra="  context_fallbacks: [e]\n") + model("e", "8K", flags=EMBED),
            "a.context_fallbacks.0: e is an embedding model, not a chat model",
        ),
        (
            model("a", extra="  aliases: [b]\n") + model("b"),
            "a.aliases.0: alias 'b' is already the model b; clients could not tell them apart: rename it",
        ),
        (
            model("a", extra="  aliases: [x]\n") + model("b", extra="  aliases: [x]\n"),
            "b.aliases.0: alias 'x' is already an alias of a; clients could not tell them apart: rename it",
        ),
        (
            model("a", extra="  aliases: [served-b]\n") + model("b", flags="--served-model-name served-b"),
            "a.aliases.0: alias 'served-b' is already the served name of b",
        ),
        (
            model("a", extra="  aliases: ['has space']\n"),
            "a.aliases.0",
        ),
    ],
    ids=[
        "unknown",
        "itself",
        "twice",
        "kind",
        "cycle",
        "context-not-larger",
        "context-on-pooling",
        "context-to-pooling",
        "alias-is-a-model",
        "alias-twice",
        "alias-is-a-served-name",
        "alias-pattern",
    ],
)
def test_each_refusal_names_the_model_and_field(problems, text, expected):
    found = problems(text)
    assert any(expected in p for p in found), found


def test_an_alias_may_not_be_an_adapters_name(problems, tmp_path):
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text('{"r": 8}')
    found = problems(
        model("a", extra=f"  adapters: {{terse: {{path: {lora}}}}}\n") + model("b", extra="  aliases: [terse]\n")
    )
    assert any("b.aliases.0: alias 'terse' is already an adapter of a" in p for p in found), found


def test_a_bad_route_is_exit_code_2_and_one_line_per_problem(write, tmp_path):
    path = write(model("a", extra="  fallbacks: [nope]\n"))
    run = subprocess.run(
        [sys.executable, "-m", "generator", "--models", str(path), "--out", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 2 and "a.fallbacks.0: 'nope' is not a model of this file" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "out").exists()


def test_a_fallback_without_tools_for_a_model_with_them_is_a_warning(plan):
    p = plan(model("a", flags=TOOLS, extra="  fallbacks: [b]\n") + model("b"))
    assert "a.fallbacks: b takes no tools: requests with tools skip it" in p.warnings


# --- the plan ----------------------------------------------------------------------------------------------------
def test_routes_name_served_names_in_file_order_and_people_may_name_aliases(plan):
    p = plan(
        model("a", extra="  fallbacks: [c, served-b]\n  context_fallbacks: [served-b]\n  aliases: [gpt-4o-mini]\n")
        + model("b", "16K", flags="--served-model-name served-b", extra="  aliases: [claude-x]\n  list_aliases: true\n")
        + model("c")
        + "people:\n  ann: {models: [gpt-4o-mini]}\n"
    )
    a, b, c = p.models
    assert (a.fallbacks, a.context_fallbacks, a.aliases, a.list_aliases) == (
        ("c", "served-b"),
        ("served-b",),
        ("gpt-4o-mini",),
        False,
    )
    assert (b.fallbacks, b.aliases, b.list_aliases) == ((), ("claude-x",), True) and c.aliases == ()
    assert p.aliases == {"gpt-4o-mini": "a", "claude-x": "served-b"}
    assert p.people[0].models == ("a",)


def test_every_replica_carries_its_models_routes(plan):
    p = plan(model("a", extra="  replicas: 2\n  fallbacks: [b]\n  aliases: [x]\n") + model("b"))
    assert [(m.name, m.fallbacks, m.aliases) for m in p.models[:2]] == [
        ("a-1", ("b",), ("x",)),
        ("a-2", ("b",), ("x",)),
    ]


# --- the LiteLLM config ------------------------------------------------------------------------------------------
def test_the_router_gets_fallbacks_aliases_and_no_fallback_for_a_clients_400(plan):
    p = plan(
        model("a", extra="  fallbacks: [b]\n  context_fallbacks: [b]\n  aliases: [x, y]\n")
        + model("b", "16K", extra="  aliases: [z]\n  list_aliases: true\n")
    )
    config = render_litellm(p)
    router = config["router_settings"]
    assert router["fallbacks"] == [{"a": ["b"]}] and router["fallback_on_unsupported_params"] is False
    assert router["context_window_fallbacks"] == router["content_policy_fallbacks"] == [{"a": []}]
    assert router["model_group_alias"] == {
        "x": {"model": "a", "hidden": True},
        "y": {"model": "a", "hidden": True},
        "z": {"model": "b", "hidden": False},
    }
    info = {e["model_name"]: e["model_info"] for e in config["model_list"]}
    assert info["a"][CONTEXT_FALLBACKS] == ["b"] and CONTEXT_FALLBACKS not in info["b"]


def test_without_routes_the_config_is_as_before(plan):
    config = render_litellm(plan(model("a") + model("b")))
    routes = {"fallbacks", "fallback_on_unsupported_params", "context_window_fallbacks", "model_group_alias"}
    assert not routes & set(config["router_settings"])
    assert all(CONTEXT_FALLBACKS not in e["model_info"] for e in config["model_list"])


def test_golden_files_of_the_routing_example(tmp_path):
    src = tmp_path / "models.yml"  # a copy named models.yml: the header is the same wherever the repo lives
    shutil.copy(EXAMPLE, src)
    files = render_files(load_plan(src))
    assert_golden({f"routing/{rel}": text for rel, text in files.items() if rel.endswith((".yml", ".yaml"))})
    config = yaml.safe_load(files["litellm/config.yaml"])
    assert config["router_settings"]["fallbacks"] == [
        {"qwen3-8b": ["glm47-flash", "gpt-mini"]},
        {"glm47-flash": ["gpt-mini"]},
        {"small-chat": ["qwen3-8b"]},
    ]
    compose = yaml.safe_load(files["compose/docker-compose.yml"])
    assert "gpt-mini" not in compose["services"]  # a hosted model: no container
    assert compose["services"]["litellm"]["environment"]["OPENAI_API_KEY"] == "${OPENAI_API_KEY:-}"


# --- hosted models -----------------------------------------------------------------------------------------------
def hosted(name: str, extra: str = "", provider: str = "openai", model_name: str = "gpt-4o-mini") -> str:
    return f"""
{name}:
  provider: {provider}
  model: {model_name}
  api_key_env: PROVIDER_KEY
{extra}"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            hosted("h", provider="openai-compatible", model_name="m"),
            "h: provider openai-compatible needs `api_base:`",
        ),
        (hosted("h", "  gpus: [0]\n"), "h.gpus: unknown field 'gpus'; valid: provider, model, api_base"),
        (hosted("h", provider="groq"), "h.provider: Input should be 'openai', 'anthropic' or 'openai-compatible'"),
        (hosted("h", "  api_base: ftp://x\n"), "h.api_base: 'ftp://x' is not an http(s) URL"),
        (
            hosted("h", model_name="not-in-the-map"),
            "h.context_length: LiteLLM's model map does not know openai model 'not-in-the-map': set `context_length:`",
        ),
        (hosted("h", "  litellm: {max_tokens: 200K}\n"), "h.litellm.max_tokens: max_tokens 204800 (200K) is not below"),
        (model("a", extra="  fallbacks: [hh]\n") + hosted("h"), "a.fallbacks.0: 'hh' is not a model of this file"),
    ],
    ids=["no-base", "gpus", "provider", "url", "unknown-model", "budget", "typo"],
)
def test_each_hosted_refusal_names_the_model_and_field(problems, text, expected):
    found = problems(text)
    assert any(expected in p for p in found), found


def test_a_hosted_model_takes_what_litellms_map_knows_and_what_models_yml_says(plan):
    p = plan(
        model("a", flags=TOOLS, extra="  fallbacks: [mini, lab]\n  context_fallbacks: [mini]\n")
        + hosted("mini", "  aliases: [gpt4]\n")
        + hosted(
            "lab",
            "  api_base: http://10.0.0.5:8000/v1/\n  context_length: 32K\n  litellm: {max_tokens: 1K}\n",
            provider="openai-compatible",
            model_name="llama",
        )
        + "people:\n  ann: {models: [gpt4, lab]}\n"
    )
    assert [m.name for m in p.models] == ["a"] and [m.name for m in p.hosted] == ["mini", "lab"]
    mini, lab = p.hosted
    assert (mini.context, mini.max_tokens, mini.takes_tools, mini.hosted.context_from) == (
        128000,
        16384,
        True,
        "LiteLLM's model map",
    )
    assert (lab.context, lab.max_tokens, lab.takes_tools, lab.hosted.api_base) == (
        32768,
        1024,
        False,
        "http://10.0.0.5:8000/v1",
    )
    assert p.models[0].fallbacks == ("mini", "lab") and p.aliases == {"gpt4": "mini"}
    assert p.people[0].models == ("mini", "lab") and p.provider_key_envs == ("PROVIDER_KEY",)
    assert "PROVIDER_KEY" not in p.secret_envs  # the admin's to set, never a random one
    assert "a.fallbacks: lab takes no tools: requests with tools skip it" in p.warnings
    config = render_litellm(p)
    entries = {e["model_name"]: e for e in config["model_list"]}
    assert entries["mini"]["litellm_params"]["model"] == "openai/gpt-4o-mini"
    assert "api_base" not in entries["mini"]["litellm_params"]
    assert entries["lab"]["litellm_params"]["api_base"] == "http://10.0.0.5:8000/v1"
    assert entries["lab"]["litellm_params"]["api_key"] == "os.environ/PROVIDER_KEY"
    assert entries["lab"]["model_info"]["gateway_hosted"] == "openai-compatible"
    # an OpenAI-compatible API is asked for chat completions only (the Responses and Messages APIs bridged to them:
    # LiteLLM's openai/ route would ask it for /v1/responses), OpenAI itself for its own Responses API too
    assert (lab.hosted.chat_only, mini.hosted.chat_only) == (True, False)
    assert entries["lab"]["litellm_params"]["use_chat_completions_api"] is True
    assert "use_chat_completions_api" not in entries["mini"]["litellm_params"]
    assert config["litellm_settings"]["use_chat_completions_url_for_anthropic_messages"] is True
    assert "use_chat_completions_url_for_anthropic_messages" not in render_litellm(plan(model("a")))["litellm_settings"]


def test_a_hosted_key_is_a_warning_until_it_is_set_in_the_keys_file_or_the_environment(plan, tmp_path, monkeypatch):
    from generator.compile.output import missing_provider_keys

    p = plan(model("a") + hosted("mini"))
    keys = tmp_path / ".env"
    monkeypatch.delenv("PROVIDER_KEY", raising=False)
    assert missing_provider_keys(p, keys) == [
        f"hosted model mini: set PROVIDER_KEY (its openai key) in {keys} or the environment the stack starts in; "
        "until then its requests fail"
    ]
    monkeypatch.setenv("PROVIDER_KEY", "sk-x")
    assert missing_provider_keys(p, keys) == []
    monkeypatch.delenv("PROVIDER_KEY")
    keys.write_text("PROVIDER_KEY=sk-y\n")
    assert missing_provider_keys(p, keys) == []


def test_kubernetes_gives_the_gateway_the_hosted_key_as_an_optional_secret(plan):
    from generator.compile.renderers.k8s.gateway import gateway_objects

    p = plan(model("a") + hosted("mini"))
    env = next(o for o in gateway_objects(p) if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in env["env"]}
    assert refs["PROVIDER_KEY"] == {"name": "llm-gateway-keys", "key": "PROVIDER_KEY", "optional": True}
    assert "optional" not in refs["LITELLM_MASTER_KEY"]


# --- the gateway hooks -------------------------------------------------------------------------------------------
SMALL, BIG, HUGE = 4096, 16384, 65536


def dep(name: str, context: int, tools: bool = True, max_tokens: int = 512, fallbacks: list | None = None) -> dict:
    info: dict = {"max_input_tokens": context, "supports_function_calling": tools}
    if fallbacks:
        info[CONTEXT_FALLBACKS] = fallbacks
    return {
        "model_name": name,
        "litellm_params": {"model": f"hosted_vllm/{name}", "api_base": f"http://{name}:1/v1", "max_tokens": max_tokens},
        "model_info": info,
    }


class Router:
    def __init__(self, *deps: dict, aliases: dict | None = None, fallbacks: list | None = None):
        self.model_list = list(deps)
        self.model_group_alias = aliases or {}
        self.fallbacks = fallbacks or []  # router_settings.fallbacks

    def get_model_list(self, model_name):
        return [d for d in self.model_list if d["model_name"] == model_name]


ROUTER = Router(
    dep("small", SMALL, max_tokens=256, fallbacks=["big", "notools", "huge"]),
    dep("notools", HUGE // 2, tools=False),
    dep("big", BIG, max_tokens=1000),
    dep("huge", HUGE, max_tokens=2000),
    fallbacks=[{"small": ["big"]}],
)


@pytest.fixture
def hook(monkeypatch):
    """The clamp hook with ROUTER; every backend counts one token per prompt character."""
    module = load_like_litellm("max_tokens_clamp")
    monkeypatch.setattr(module.gb, "router", lambda: ROUTER)
    monkeypatch.setattr(module.gb, "TEMPLATE_MARGIN", 0)
    counted: list[tuple] = []
    monkeypatch.setattr(module.fallbacks, "count", lambda *a: counted.append(a))

    async def tokenize(dep, payload):
        return len(str(payload.get("messages"))), dep["model_info"]["max_input_tokens"]

    monkeypatch.setattr(module.gb, "tokenize", tokenize)
    module.counted = counted
    return module


def chat(n: int, **extra) -> dict:
    return {"model": "small", "messages": [{"role": "user", "content": "x" * n}], "litellm_call_id": "c1", **extra}


def pre_call(hook, data: dict, models: list[str] | None = None) -> tuple[dict, dict]:
    handler = hook.MaxTokensClamp()
    key = type("Key", (), {"models": models or []})()
    asyncio.run(handler.async_pre_call_hook(key, None, data, "acompletion"))
    return data, asyncio.run(handler.async_post_call_response_headers_hook(data, None, None)) or {}


def test_a_prompt_that_fits_stays_on_its_model(hook):
    data, headers = pre_call(hook, chat(100))
    assert data["model"] == "small" and data["max_tokens"] == 256 and headers == {} and hook.counted == []


def test_a_prompt_over_the_context_goes_to_the_first_fallback_that_holds_it_with_its_defaults(hook):
    data, headers = pre_call(hook, chat(SMALL + 100))  # over small's 4K with small's 256 default budget
    assert data["model"] == "big" and headers[hook.fallbacks.HEADER] == "small->big"
    assert data["max_tokens"] == 1000  # big's default, not small's
    assert hook.counted == [("small", "big", "context")]


def test_the_budget_counts_too_and_the_largest_takes_what_none_holds_clamped(hook):
    data, _ = pre_call(hook, chat(100, max_tokens=BIG))  # 100 + 16K > big's 16K: notools' 32K holds it
    assert data["model"] == "notools" and data["max_tokens"] == BIG
    data, headers = pre_call(hook, chat(100, max_tokens=10 * HUGE))  # none holds it: the largest, clamped
    assert data["model"] == "huge" and headers[hook.HEADER].startswith(f"{10 * HUGE}->")


def test_a_request_with_tools_skips_a_fallback_without_them_and_a_key_only_its_models(hook):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    data, _ = pre_call(hook, chat(SMALL + 100, tools=tools, max_tokens=20_000))
    assert data["model"] == "huge"  # notools holds it but takes no tools; big does not hold it
    data, _ = pre_call(hook, chat(SMALL + 100, max_tokens=20_000))
    assert data["model"] == "notools"
    data, _ = pre_call(hook, chat(SMALL + 100), models=["small", "huge"])
    assert data["model"] == "huge"


def test_without_a_usable_fallback_a_prompt_that_fills_the_context_is_the_400_it_was(hook):
    with pytest.raises(Exception) as err:
        pre_call(hook, chat(SMALL + 100), models=["small"])
    assert "prompt is" in str(err.value.detail) and "small holds 4096 tokens" in str(err.value.detail)


def attempt(asked: str, tried: str, fallbacks: int = 1, **request) -> dict:
    return {
        "model": f"hosted_vllm/{tried}",
        "litellm_call_id": "c1",
        "metadata": {"model_group": tried, "original_model_group": asked, "attempted_fallbacks": fallbacks},
        **request,
    }


def test_an_attempt_that_is_not_a_fallbacks_is_left_alone(hook):
    handler = hook.MaxTokensClamp()
    kwargs = attempt("small", "small", 0, messages=[{"role": "user", "content": "x" * SMALL}], max_tokens=10**6)
    assert asyncio.run(handler.async_pre_call_deployment_hook(kwargs, "acompletion")) is None
    assert kwargs["max_tokens"] == 10**6


def test_a_fallback_attempt_is_clamped_to_its_context_and_named_in_a_header(hook):
    handler = hook.MaxTokensClamp()
    kwargs = attempt("small", "big", messages=[{"role": "user", "content": "x" * 1000}], max_tokens=BIG)
    out = asyncio.run(handler.async_pre_call_deployment_hook(kwargs, "acompletion"))
    assert out["max_tokens"] < BIG and out["max_tokens"] + 1000 <= BIG
    headers = asyncio.run(handler.async_post_call_response_headers_hook({"litellm_call_id": "c1"}, None, None))
    assert headers[hook.fallbacks.HEADER] == "small->big"


def test_a_fallback_attempt_the_request_does_not_fit_is_refused_so_the_router_tries_the_next(hook):
    from fastapi import HTTPException

    handler = hook.MaxTokensClamp()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(HTTPException, match="takes no tools"):
        asyncio.run(
            handler.async_pre_call_deployment_hook(attempt("small", "notools", tools=tools, messages=[]), "acompletion")
        )
    long = [{"role": "user", "content": "x" * (BIG + 10)}]
    with pytest.raises(HTTPException, match="big holds 16384 tokens"):
        asyncio.run(handler.async_pre_call_deployment_hook(attempt("small", "big", messages=long), "acompletion"))


def test_an_answer_a_fallback_gave_is_marked_to_name_it_in_the_proxys_own_request(hook):
    """The router's attempt carries a copy of the request's metadata; what a stream's events name (LiteLLM renames
    them to the model asked unless marked) is read from the proxy's data, which the pre-call hook saw."""
    handler = hook.MaxTokensClamp()
    proxy_data = chat(100, litellm_metadata={})
    asyncio.run(handler.async_pre_call_hook(type("Key", (), {"models": []})(), None, proxy_data, "acompletion"))
    other = {**chat(100, litellm_metadata={}), "model": "big", "litellm_call_id": "c2"}  # big has no fallbacks
    asyncio.run(handler.async_pre_call_hook(type("Key", (), {"models": []})(), None, other, "acompletion"))
    assert list(handler._may_fall_back) == ["c1"]  # only a request that may fall back is kept, until answered
    asyncio.run(handler.async_pre_call_deployment_hook(attempt("small", "big", messages=[]), "acompletion"))
    assert proxy_data["litellm_metadata"] == {hook.fallbacks.RAW_MODEL_NAME: True}
    asyncio.run(handler.async_post_call_response_headers_hook(proxy_data, None, None))
    assert not handler._may_fall_back
    asyncio.run(handler.async_pre_call_hook(type("Key", (), {"models": []})(), None, chat(100), "acompletion"))
    asyncio.run(handler.async_post_call_failure_hook(chat(100), ValueError("down"), None))
    assert not handler._may_fall_back  # a failed request is forgotten too


def test_the_router_reports_an_attempt_in_either_metadata(hook):
    meta = {"model_group": "b", "original_model_group": "a", "attempted_fallbacks": 2}
    assert hook.fallbacks.attempt_of({"litellm_metadata": meta}) == ("a", "b")
    assert hook.fallbacks.attempt_of({"metadata": {**meta, "attempted_fallbacks": 0}}) is None
    assert hook.fallbacks.attempt_of({}) is None


def test_the_guard_puts_the_aliased_models_name_in_the_body(monkeypatch):
    guard = load_like_litellm("request_guard")
    import gateway_backends as gb  # the guard imports it from beside itself

    monkeypatch.setattr(gb, "router", lambda: Router(dep("small", SMALL), aliases={"gpt-4o-mini": {"model": "small"}}))
    received: list[bytes] = []

    async def app(scope, receive, send):
        received.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    middleware = guard.RequestGuard(app, key_is_valid=lambda k: True, key_problem="no")
    body = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"authorization", b"Bearer k"), (b"content-type", b"application/json")],
    }
    messages = iter([{"type": "http.request", "body": body, "more_body": False}])

    async def receive():
        return next(messages)

    async def send(message):
        pass

    asyncio.run(middleware(scope, receive, send))
    assert b'"model":"small"' in received[0] and scope["parsed_body"][1]["model"] == "small"


def test_a_persons_key_lists_only_the_aliases_asked_to_be_listed(monkeypatch):
    guard = load_like_litellm("gateway_guard")
    aliases = {"x": {"model": "a", "hidden": True}, "y": {"model": "a", "hidden": False}, "z": {"model": "b"}}
    monkeypatch.setattr(guard.gateway_backends, "router", lambda: Router(aliases=aliases))
    person = guard.people.Person("ann", frozenset({"a"}), None, None, None, None, None)
    assert guard.person_models(person) == ["a", "y"]
    assert guard.person_models(person._replace(models=None)) == []


def test_a_hosted_api_is_never_asked_to_count_a_prompt_the_estimate_clamps(hook, monkeypatch):
    api = dep("api", SMALL)
    api["model_info"]["gateway_hosted"] = "openai"
    monkeypatch.setattr(hook.gb, "router", lambda: Router(api))

    async def tokenize(dep, payload):
        raise AssertionError("a hosted API was asked to count")

    monkeypatch.setattr(hook.gb, "tokenize", tokenize)
    data, headers = pre_call(hook, {**chat(SMALL // 2, max_tokens=SMALL), "model": "api"})
    assert data["model"] == "api" and 0 < data["max_tokens"] < SMALL // 2 and hook.HEADER in headers


def test_a_hosted_apis_failure_names_the_model_and_its_api_a_clients_400_stays(hook, monkeypatch):
    api = dep("api", SMALL)
    api["model_info"]["gateway_hosted"] = "openai-compatible"
    api["litellm_params"]["api_base"] = "http://10.0.0.5:8000/v1"
    monkeypatch.setattr(hook.gb, "router", lambda: Router(api, dep("small", SMALL)))

    class APIConnectionError(Exception):
        status_code = 500

    class Refused(Exception):
        status_code = 401

    class BadRequest(Exception):
        status_code = 400

    out = hook.hosted_failure({"model": "api"}, APIConnectionError("Connection error."))
    assert (
        out.status_code == 502 and out.detail == "hosted model api: its API at http://10.0.0.5:8000/v1 did not answer"
    )
    assert "refused the gateway's key" in hook.hosted_failure({"model": "api"}, Refused("no")).detail
    assert hook.hosted_failure({"model": "api"}, BadRequest("bad")) is None
    assert hook.hosted_failure({"model": "small"}, APIConnectionError("Connection error.")) is None


def test_status_asks_a_hosted_api_its_model_list_with_the_providers_headers(monkeypatch):
    gb = load_like_litellm("gateway_backends")
    monkeypatch.setenv("PROVIDER_KEY", "sk-secret")
    claude = {"litellm_params": {"api_key": "os.environ/PROVIDER_KEY"}, "model_info": {"gateway_hosted": "anthropic"}}
    assert gb.hosted_request(claude) == (
        "https://api.anthropic.com/v1/models",
        {"anthropic-version": "2023-06-01", "x-api-key": "sk-secret"},
    )
    lab = {"litellm_params": {"api_key": "os.environ/PROVIDER_KEY", "api_base": "http://h:1/v1/"}, "model_info": {}}
    lab["model_info"]["gateway_hosted"] = "openai-compatible"
    assert gb.hosted_request(lab) == ("http://h:1/v1/models", {"Authorization": "Bearer sk-secret"})


def test_a_backends_400_inside_a_streams_error_chain_is_answered_as_that_400(hook):
    """A streamed /v1/completions refusal reaches the failure hook as LiteLLM's 500 wrapping the OpenAI SDK's
    error with the body vLLM sent; the hook answers its 400, message and field, and writes them on the exception
    (the completions route answers from the exception's own fields)."""
    import httpx
    import openai

    sdk = openai.APIError(
        "refused", httpx.Request("POST", "http://b/v1/completions"), body={"message": "bad bias", "code": 400}
    )
    sdk.body["param"] = "logit_bias"
    inner = RuntimeError("APIConnectionError")
    inner.__cause__ = sdk
    outer = RuntimeError("litellm.InternalServerError: MidStreamFallbackError")
    outer.original_exception = inner
    outer.status_code = 500
    handler = hook.MaxTokensClamp()
    answer = asyncio.run(handler.async_post_call_failure_hook({"model": "small"}, outer, None))
    assert (answer.status_code, answer.detail, answer.param) == (400, "bad bias", "logit_bias")
    assert (outer.status_code, outer.message, outer.param) == (400, "bad bias", "logit_bias")
    down = openai.APIError("down", httpx.Request("POST", "http://b"), body={"message": "x", "code": 503})
    assert asyncio.run(handler.async_post_call_failure_hook({"model": "small"}, down, None)) is None  # not a 400

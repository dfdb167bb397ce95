"""The gateway's page (generator/shipped/gateway_hooks/gateway_page.py and its three files): what /gateway/me tells
a person and the admin, the headers every answer carries, the files' rules (no inline script, text never written as
HTML), `gateway.ui`, the report route's interval, and the slowed 401 of a wrong key. In a real browser through the real
gateway: tests/integration/test_people.py, test_faults.py, test_partial_availability.py."""

from __future__ import annotations

import asyncio
import re

import pytest

from generator.compile.gateway_process import UI_ENV, gateway_env
from generator.compile.renderers.litellm import PAGE_FILES, gateway_modules
from generator.compile.renderers.text import GENERATED_MARKS
from tests.unit.test_gateway_hooks import GENERATED, load_like_litellm
from tests.unit.test_routing import Router, dep


@pytest.fixture
def page(monkeypatch):
    module = load_like_litellm("gateway_page")
    pooled = {
        "model_name": "embed",
        "litellm_params": {"model": "hosted_vllm/embed"},
        "model_info": {"mode": "embedding", "max_input_tokens": 512},
    }
    chat = dep("chat", 4096, max_tokens=256)
    chat["model_info"] |= {"supports_reasoning": True, "max_output_tokens": 256, module.DESCRIPTION: "<b>bold</b>"}
    adapter = dep("terse", 4096, max_tokens=100)
    adapter["model_info"][module.ADAPTER_OF] = "chat"
    rt = Router(
        chat,
        adapter,
        pooled,
        dep("other", 8192),
        aliases={"gpt-4o-mini": "chat", "hidden": {"model": "chat", "hidden": True}},
    )
    monkeypatch.setattr(module.gb, "router", lambda: rt)
    return module


def person(module, name="ann", models=("chat", "embed")):
    return module.people.Person(name, frozenset(models) if models else None, 10, None, 2, 1000, None)


def test_a_person_sees_their_models_only_with_what_each_takes(page, monkeypatch):
    asked = []

    async def gateway(person=None):
        asked.append(person)
        metrics = {"people": {"ann": {"chat": {"requests": 3.0}}, "bob": {"other": {"requests": 9.0}}}}
        budgets = {
            "ann": {"day": 40, "month": 40, "limits": {"day": 1000}},
            "bob": {"day": 1, "month": 1, "limits": {}},
        }
        return {"metrics": metrics, "budgets": budgets, "metrics_error": None}

    monkeypatch.setattr(page.gateway_status, "gateway", gateway)
    me = asyncio.run(page.me(person(page)))
    assert asked == ["ann"]  # only her tokens this day and month are read from Redis
    assert me["admin"] is False and me["person"] == "ann"
    cards = {m["name"]: m for m in me["models"]}
    assert list(cards) == ["chat", "embed"]  # not `other` or the adapter `terse`: not in ann's models
    assert cards["chat"] == {
        "name": "chat",
        "kind": "chat",
        "base": None,
        "description": "<b>bold</b>",  # as text: the page writes it with textContent
        "context": 4096,
        "max_output_tokens": 256,
        "tools": True,
        "reasoning": True,
        "hosted": None,
        "nodes": None,  # one host (a model on nodes: how many, tests/unit/test_nodes.py)
        "aliases": ["gpt-4o-mini"],  # listed aliases only
    }
    assert (cards["embed"]["kind"], cards["embed"]["context"], cards["embed"]["max_output_tokens"]) == (
        "embedding",
        512,
        None,
    )
    assert me["limits"] == {
        "rpm": 10,
        "tpm": None,
        "parallel": 2,
        "tokens_per_day": 1000,
        "tokens_per_month": None,
        "stored_responses": None,
    }
    # status_report.usage's rows, as `make usage` prints them, for ann alone: nothing about bob
    assert me["usage"] == [
        {"person": "ann", "model": "chat", "requests": 3.0, "input_tokens": 0.0, "output_tokens": 0.0},
        {
            "person": "ann",
            "model": "(budget)",
            "tokens_today": 40,
            "tokens_this_month": 40,
            "stored_responses": None,  # no Redis here: none stored
            "stored_bytes": None,
            "limits": {"day": 1000},
        },
    ]
    assert "bob" not in repr(me)


def test_the_admin_sees_every_model_and_kind(page):
    me = asyncio.run(page.me(None))
    assert me["admin"] is True and "usage" not in me and "limits" not in me
    kinds = {m["name"]: m["kind"] for m in me["models"]}
    assert kinds == {"chat": "chat", "embed": "embedding", "other": "chat", "terse": "adapter"}
    assert next(m for m in me["models"] if m["name"] == "terse")["base"] == "chat"


def test_every_page_answer_forbids_inline_and_outside_script(page):
    for name in page.ASSETS:
        answer = page.asset(name)
        csp = answer.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe" not in csp
        assert answer.headers["x-content-type-options"] == "nosniff" and answer.headers["cache-control"] == "no-store"
        assert answer.body.startswith(GENERATED_MARKS)  # the generated copy, with its header
    assert page.asset("").media_type.startswith("text/html")


def test_the_page_has_no_inline_script_style_or_outside_url():
    html = (GENERATED / "gateway_page.html").read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script src="page.js" defer>']
    assert not re.search(r"\son[a-z]+=", html) and " style=" not in html and "<style" not in html
    for text in (html, (GENERATED / "gateway_page.js").read_text(), (GENERATED / "gateway_page.css").read_text()):
        assert not re.search(r"(src|href)=\"(https?:)?//", text) and "@import" not in text and "url(" not in text


def test_the_script_never_writes_text_as_html():
    script = (GENERATED / "gateway_page.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
    assert "localStorage" not in script and "document.cookie" not in script  # the key: session storage only
    assert "sessionStorage.setItem(STORE, key)" in script


def test_the_page_files_carry_the_generated_header(tmp_path):
    from generator.compile.load.loader import load_plan

    plan = load_plan(GENERATED.parent / "models.yml")
    files = gateway_modules(plan)
    for name in PAGE_FILES:
        text = files[f"litellm/{name}"]
        assert text.encode().startswith(GENERATED_MARKS) and "GENERATED from models.yml" in text.splitlines()[0]
    assert files["litellm/gateway_page.html"].splitlines()[2] == "<!DOCTYPE html>"


def test_gateway_ui_false_turns_the_page_off(monkeypatch, tmp_path):
    from generator.compile.load.loader import load_plan

    models = tmp_path / "models.yml"
    models.write_text("gateway: {ui: false}\nm: {gpus: [], command: vllm serve a/b --max-model-len 4096}\n")
    assert gateway_env(load_plan(models).gateway)[UI_ENV] == "0"
    models.write_text("m: {gpus: [], command: vllm serve a/b --max-model-len 4096}\n")
    assert UI_ENV not in gateway_env(load_plan(models).gateway)
    module = load_like_litellm("gateway_page")
    monkeypatch.setenv(UI_ENV, "0")
    assert not module.enabled()
    monkeypatch.delenv(UI_ENV)
    assert module.enabled()


def test_the_report_interval_is_bounded():
    route = load_like_litellm("gateway_status")
    assert [route.interval_of(v) for v in (None, "2", "-1", "99", "nan", "x")] == [1.0, 2.0, 0.0, 10.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("path", "headers", "waits"),
    [
        ("/gateway/me", [(b"authorization", b"Bearer wrong")], True),
        ("/v1/chat/completions", [(b"x-api-key", b"wrong")], True),
        ("/gateway/me", [], False),  # no key: nothing was guessed
        ("/v1/chat/completions", [], False),
    ],
)
def test_a_wrong_key_waits_before_its_401(monkeypatch, path, headers, waits):
    guard = load_like_litellm("request_guard")
    slept: list[float] = []

    async def sleep(seconds):
        slept.append(seconds)

    monkeypatch.setattr(guard.asyncio, "sleep", sleep)
    sent: list[dict] = []

    async def app(scope, receive, send):  # what the middleware lets through (no key: the route's own 401)
        await send({"type": "http.response.start", "status": 401, "headers": []})

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    middleware = guard.RequestGuard(app, key_is_valid=lambda k: False, key_problem="no")
    method = "POST" if path.startswith("/v1") else "GET"
    asyncio.run(middleware({"type": "http", "method": method, "path": path, "headers": headers}, receive, send))
    assert sent[0]["status"] == 401
    assert slept == ([guard.WRONG_KEY_DELAY] if waits else [])

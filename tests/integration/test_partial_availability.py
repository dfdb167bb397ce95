"""A stack with one broken model: `up` reports it (exit code, last log lines) and exits non-zero, the
gateway and the healthy model keep serving, and requests for the broken one fail fast and clearly.

The same stack routes between its models (models.yml `fallbacks:`, `context_fallbacks:`, `aliases:`; docs/routing.md):
the broken model falls back to the good one, a small-context model sends a prompt over its context to the good one,
on chat, responses and messages, for the master key and not for a person whose `models:` leave the good one out.
(A fallback under load, its model killed and back: tests/integration/test_faults.py, on the shared stack.)

It also serves a model on two nodes (models.yml `nodes: 2`, docs/multinode.md): a two-layer copy of the scripted
reasoner, pipeline parallel 2 over gloo on loopback, the leader (node 0) serving the API behind the gateway and node 1
a headless vLLM process of its own, answering on every API as one model (folded in here: no gateway start of its own).

Runs its own small CPU stack through `python -m generator.operate.runtime up/down`, on free ports (never the
session stack's, a demo's or another checkout's), next to it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from generator.compile.load.loader import load_plan
from generator.compile.output import read_env_file
from generator.demo.script import ANSWER_TEXT, REASONING_TEXT
from generator.operate.keys import LOCAL_HEADER, person_key, write_hashes
from generator.operate.runtime.ports import free_ports
from generator.shipped.gateway_hooks.status_report import BUDGET_ROW

from . import fake_backend
from .conftest import DEMO_MODELS, ROOT

HELLO = [{"role": "user", "content": "Say hello."}]
SMALL_CONTEXT = 2048
HOSTED_KEY_ENV = "HOSTED_API_KEY"
HOSTED_KEY = "hosted-" + secrets.token_urlsafe(16)  # the provider's key: never in a generated file or a log
LONG = "word " * 1500  # ~4,500 of the scripted tokenizer's tokens: over small's context, far under good's
APIS = ("chat", "responses", "messages")
# models.yml text the gateway's page must show as text (a script that ran would set the page's title)
SCRIPT_DESCRIPTION = "Hosted <script>document.title='run'</script> <b>stand-in</b>"


def _models_yml(
    demo_model,
    gateway_port: int,
    good_port: int,
    broken_port: int,
    small_port: int,
    api_port: int,
    gone_port: int,
    split: tuple[str, int, int],
) -> str:
    split_model, split_port, meet_port = split
    env = "".join(f"    {k}: {v!r}\n" for k, v in demo_model.env.items())
    return f"""
gateway: {{port: {gateway_port}, workers: 1}}  # one gateway worker: ~8 CPU-s less to start; the demo stack tests 2
people:
  sam: {{models: [broken, small, hosted-api, split]}}  # not good: no fallback for sam (and no limit: no Redis)
  pat: {{models: [broken, good]}}               # broken's fallback too
hosted-api:                  # a hosted model: a stand-in API on this machine that wants its own key
  description: {SCRIPT_DESCRIPTION!r}
  provider: openai-compatible
  model: fake
  api_base: http://127.0.0.1:{api_port}/v1
  api_key_env: {HOSTED_KEY_ENV}
  context_length: 8K
  tools: true                # the stand-in calls the first tool it is given
gone-api:                    # a hosted model whose API does not answer
  provider: openai-compatible
  model: fake
  api_base: http://127.0.0.1:{gone_port}/v1
  api_key_env: {HOSTED_KEY_ENV}
  context_length: 8K
broken:                      # a path with no model: vLLM exits at start-up
  gpus: []
  env:
{env}  command: vllm serve .cache/demo-models/no-such-model --max-model-len 2048 --enforce-eager --port {broken_port}
  fallbacks: [good]
small:                       # the demo model with a small context
  gpus: []
  env:
{env}  command: vllm serve {demo_model.model} --max-model-len {SMALL_CONTEXT} --enforce-eager --port {small_port}
  context_fallbacks: [good]
  fallbacks: [good]          # never for its own context-window 400 (test below)
  aliases: [gpt-4o-mini]     # hidden from /v1/models
  litellm: {{max_tokens: 64}}
good:
  gpus: []
  start_after: [broken]      # a failed model holds no memory: the next one still starts
  env:
{env}  command: vllm serve {demo_model.model} --max-model-len {demo_model.context} --enforce-eager --port {good_port}
  aliases: [claude-haiku]
  list_aliases: true
split:                       # one model on two nodes: two vLLM processes, pipeline parallel 2 (docs/multinode.md)
  gpus: []
  nodes: {{count: 2, port: {meet_port}}}
  port: {split_port}
  # not the demo's environment: no forked engine (the nodes' executor spans processes), and no TORCH_COMPILE_DISABLE or
  # --enforce-eager: vLLM's CPU worker then skips the warm-up pass that sizes the tensors a pipeline stage receives,
  # and the second stage fails the first request; dynamo with the eager backend warms up in seconds
  env: {{VLLM_CPU_KVCACHE_SPACE: "1", OMP_NUM_THREADS: "1", HF_HUB_OFFLINE: "1"}}
  command: >-
    vllm serve {split_model} --max-model-len 4K --pipeline-parallel-size 2 --reasoning-parser qwen3
    --compilation-config '{{"mode": 2, "backend": "eager"}}'
  litellm: {{max_tokens: 128}}
"""


def _runtime(*args: str, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    vllm_python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    extra = ["--vllm-python", vllm_python] if args[0] == "up" else []
    return subprocess.run(
        [sys.executable, "-m", "generator.operate.runtime", *args, *extra],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def partial_stack(tmp_path_factory):
    if os.environ.get("GATEWAY_URL"):
        pytest.skip("starts its own local CPU stack")
    tmp = tmp_path_factory.mktemp("partial")
    demo = load_plan(DEMO_MODELS).models[0]
    # never the session stack's, a demo's or another checkout's; nothing listens on gone_port
    gateway_port, good, broken, small, api_port, gone_port, split_port, meet_port = free_ports(8)
    # the scripted reasoner with two (zero) layers: one per pipeline stage, the same answers
    vllm_python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    split_model = tmp / "reasoner-2-layers"
    build = [
        vllm_python,
        "-m",
        "generator.demo.scripted_model",
        str(split_model),
        "--script",
        "reasoner",
        "--layers",
        "2",
    ]
    subprocess.run(build, cwd=ROOT, check=True, capture_output=True, timeout=120)
    (tmp / "models.yml").write_text(
        _models_yml(
            demo, gateway_port, good, broken, small, api_port, gone_port, (str(split_model), split_port, meet_port)
        )
    )
    state = tmp / "state"
    # the hosted model's stand-in API; its key reaches the gateway through the environment `up` runs in
    api = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.fake_backend", "ok", str(api_port), HOSTED_KEY], cwd=ROOT
    )
    try:
        up = _runtime(
            "up",
            "--models",
            str(tmp / "models.yml"),
            "--state-dir",
            str(state),
            timeout=900,
            env={HOSTED_KEY_ENV: HOSTED_KEY},
        )
        yield up, state, gateway_port
    finally:
        api.kill()
        api.wait(timeout=10)
        recorded = json.loads((state / "state.json").read_text())["procs"] if (state / "state.json").exists() else []
        sessions = [p["sid"] for p in recorded]
        _runtime("down", "--state-dir", str(state), timeout=120)
        left = [p.pid for p in psutil.process_iter() if _sid(p.pid) in sessions]
        assert not left, f"`down` left processes running: {left}"


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def test_up_reports_the_broken_model_with_exit_code_and_log_lines_and_exits_non_zero(partial_stack):
    up, state, gateway_port = partial_stack
    assert up.returncode == 1, up.stderr[-3000:]
    out = up.stderr
    assert "failed: broken exited with code" in out and "1 of 4 model(s) failed to start: broken" in out
    last_line = [line for line in (state / "logs" / "broken.log").read_text().splitlines() if line.strip()][-1]
    assert last_line.strip()[:60] in out  # the log's last lines are in the report
    assert "good: ready" in out and "split: ready" in out and "split-node-1: starting (headless" in out
    serving = "small, good, split, hosted-api (hosted), gone-api (hosted)"
    assert f"gateway ready at http://127.0.0.1:{gateway_port}/v1 serving {serving}" in out
    assert HOSTED_KEY_ENV not in out  # its key was in the environment: no warning


@pytest.fixture(scope="module")
def keys(partial_stack) -> dict[str, str]:
    """The master key, sam's and pat's (made as `make key` makes them; the gateway reads them within seconds)."""
    _, state, gateway_port = partial_stack
    plan = load_plan(state.parent / "models.yml")
    out = {person.name: person_key(state / ".env", person, LOCAL_HEADER) for person in plan.people}
    write_hashes(plan, state / ".env", state / "litellm")
    out["master"] = read_env_file(state / ".env")["LITELLM_MASTER_KEY"]
    deadline = time.monotonic() + 15
    while ask(gateway_port, out["sam"], "chat", "small", HELLO_TEXT)[0] == 401 and time.monotonic() < deadline:
        time.sleep(0.5)
    return out


HELLO_TEXT = "Say hello."


REQUESTS = {  # api -> (text, output budget) -> (path, body without the model)
    "chat": lambda text, n: (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": text}], "max_tokens": n},
    ),
    "responses": lambda text, n: ("/v1/responses", {"input": text, "max_output_tokens": n}),
    "messages": lambda text, n: ("/v1/messages", {"messages": [{"role": "user", "content": text}], "max_tokens": n}),
}


def ask(port: int, key: str, api: str, model: str, text: str, budget: int = 32, **extra) -> tuple[int, dict, dict]:
    """(status, headers, body) of one request on `api`; the prompt is `text`."""
    path, body = REQUESTS[api](text, budget)
    # a hang would end in a timeout, not in the assertions
    r = httpx.post(
        f"http://127.0.0.1:{port}{path}",
        json={"model": model, **body, **extra},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    return r.status_code, dict(r.headers), r.json()


def prompt_tokens(api: str, body: dict) -> int:
    usage = body["usage"]
    return usage["prompt_tokens"] if api == "chat" else usage["input_tokens"]


def test_the_healthy_model_is_served_and_the_broken_one_fails_fast_and_clearly_without_its_fallback(
    partial_stack, keys
):
    _, _, port = partial_stack
    status, _, _ = ask(port, keys["master"], "chat", "good", HELLO_TEXT)
    assert status == 200
    # sam may not use broken's fallback: the broken model's own error, fast
    start = time.monotonic()
    status, headers, body = ask(port, keys["sam"], "chat", "broken", HELLO_TEXT)
    assert 500 <= status < 600 and "x-gateway-fallback" not in headers, (status, body)
    assert "Cannot connect" in body["error"]["message"] and time.monotonic() - start < 10, body  # as before


@pytest.mark.parametrize("api", APIS)
def test_a_down_models_requests_are_answered_by_its_fallback(partial_stack, keys, api):
    _, _, port = partial_stack
    status, headers, body = ask(port, keys["master"], api, "broken", HELLO_TEXT)
    assert status == 200, body
    assert headers["x-gateway-fallback"] == "broken->good" and headers["x-litellm-model-group"] == "good"
    assert body["model"] == "good"  # the answer names the model that answered


def stream(port: int, key: str, api: str, model: str, **extra) -> tuple[dict, list[dict]]:
    """(headers, every JSON event) of a streamed answer on `api`."""
    path, body = REQUESTS[api](HELLO_TEXT, 32)
    with httpx.stream(
        "POST",
        f"http://127.0.0.1:{port}{path}",
        json={"model": model, **body, **extra, "stream": True},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    ) as r:
        assert r.status_code == 200, r.read()
        return dict(r.headers), [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]


def named_models(events: list[dict]) -> list[str]:
    """Every `model` the events name: each chat chunk's, the Responses API's response.created / response.completed
    response's, the Messages API's message_start message's."""
    holders = [event.get("response") or event.get("message") or event for event in events]
    return [h["model"] for h in holders if isinstance(h, dict) and "model" in h]


def streamed_text(api: str, events: list[dict]) -> str:
    """The text the events carry, from their deltas (chat's, the Responses API's output_text, the Messages API's
    text_delta)."""
    if api == "chat":
        return "".join((c.get("delta") or {}).get("content") or "" for e in events for c in e.get("choices") or [])
    return "".join(
        e["delta"] if e.get("type") == "response.output_text.delta" else e["delta"].get("text", "")
        for e in events
        if e.get("type") in ("response.output_text.delta", "content_block_delta")
    )


@pytest.mark.parametrize("api", APIS)
def test_a_down_models_streamed_answers_name_the_fallback_in_every_event(partial_stack, keys, api):
    """A client that streams reads the model from the events, not the body: each event that names a model names
    the one that answered (LiteLLM's Anthropic stream named the model asked for in message_start)."""
    _, _, port = partial_stack
    headers, events = stream(port, keys["master"], api, "broken")
    named = named_models(events)
    assert headers["x-gateway-fallback"] == "broken->good"
    assert named and set(named) == {"good"}, named


@pytest.mark.parametrize("api", APIS)
def test_a_prompt_over_the_context_is_answered_by_the_context_fallback_within_its_budget(partial_stack, keys, api):
    _, _, port = partial_stack
    good = next(m for m in load_plan(partial_stack[1].parent / "models.yml").models if m.name == "good")
    status, headers, body = ask(port, keys["master"], api, "small", LONG, budget=10 * good.context)
    assert status == 200, body
    assert headers["x-gateway-fallback"] == "small->good" and body["model"] == "good"
    asked, given = headers["x-gateway-max-tokens-clamped"].split("->")
    assert int(asked) == 10 * good.context and int(given) == good.context - prompt_tokens(api, body)
    assert prompt_tokens(api, body) > SMALL_CONTEXT


@pytest.mark.parametrize("api", APIS)
def test_without_a_usable_context_fallback_the_prompt_is_the_400_it_was(partial_stack, keys, api):
    _, _, port = partial_stack
    status, headers, body = ask(port, keys["sam"], api, "small", LONG)  # sam may not use good
    assert status == 400 and "x-gateway-fallback" not in headers, body
    assert f"small holds {SMALL_CONTEXT} tokens" in body["error"]["message"], body


def test_a_backends_own_context_window_error_is_not_sent_to_the_fallback(partial_stack, keys):
    """A batch of prompts is not counted before routing (max_tokens_clamp.py): small's vLLM answers its 400 for the
    long one. That is the client's request, not a failure: LiteLLM would send a context-window error to `fallbacks:`
    unless told not to (router_settings.context_window_fallbacks)."""
    _, _, port = partial_stack
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/completions",
        json={"model": "small", "prompt": [LONG, "hi"], "max_tokens": 16},
        headers={"Authorization": f"Bearer {keys['master']}"},
        timeout=60,
    )
    assert r.status_code == 400 and "x-gateway-fallback" not in r.headers, (r.status_code, r.text[:300])
    assert r.headers.get("x-litellm-model-group") in (None, "small")


def test_an_alias_is_its_model_for_everyone_who_may_use_it_and_listed_only_when_asked(partial_stack, keys):
    _, _, port = partial_stack
    for key in (keys["master"], keys["sam"]):
        status, headers, body = ask(port, key, "chat", "gpt-4o-mini", HELLO_TEXT)
        assert status == 200 and body["model"] == "small" and headers["x-litellm-model-group"] == "small", body
    status, _, body = ask(port, keys["sam"], "messages", "claude-haiku", HELLO_TEXT)  # good's: not sam's
    assert status == 403 and "good" in body["error"]["message"], body
    status, _, body = ask(port, keys["master"], "messages", "claude-haiku", HELLO_TEXT)
    assert status == 200 and body["model"] == "good", body

    def listed(key: str) -> list[str]:
        r = httpx.get(f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        return sorted(m["id"] for m in r.json()["data"])

    every = ["broken", "claude-haiku", "gone-api", "good", "hosted-api", "small", "split"]
    assert listed(keys["master"]) == every  # gpt-4o-mini: not listed
    assert listed(keys["sam"]) == ["broken", "hosted-api", "small", "split"]


def test_a_hosted_model_answers_a_persons_key_and_its_key_is_in_no_file_or_log(partial_stack, keys):
    _, state, port = partial_stack
    for key in (keys["master"], keys["sam"]):
        status, _, body = ask(port, key, "chat", "hosted-api", HELLO_TEXT)
        assert status == 200 and body["choices"][0]["message"]["content"] == "ok", body
    for api in ("responses", "messages"):  # the stand-in serves chat completions only, as many such APIs do (404s)
        status, _, body = ask(port, keys["sam"], api, "hosted-api", HELLO_TEXT)
        text = body["output"][-1]["content"][0]["text"] if api == "responses" else body["content"][0]["text"]
        assert status == 200 and text == "ok", body
        assert streamed_text(api, stream(port, keys["sam"], api, "hosted-api")[1]) == "Hello there"  # the stand-in's
    leaked = [p for p in state.rglob("*") if p.is_file() and p.name != ".env" and HOSTED_KEY.encode() in p.read_bytes()]
    assert not leaked, leaked


TOOLS = {  # api -> the get_weather tool in that API's shape
    "chat": {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    "responses": {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
    "messages": {"name": "get_weather", "input_schema": {"type": "object"}},
}


def tool_call_of(api: str, body: dict) -> tuple[str, dict]:
    """(name, arguments) of the one tool call in an answer on `api`."""
    if api == "chat":
        call = body["choices"][0]["message"]["tool_calls"][0]["function"]
        return call["name"], json.loads(call["arguments"])
    if api == "responses":
        (call,) = [item for item in body["output"] if item["type"] == "function_call"]
        return call["name"], json.loads(call["arguments"])
    (call,) = [block for block in body["content"] if block["type"] == "tool_use"]
    return call["name"], call["input"]


def streamed_tool_call(api: str, events: list[dict]) -> tuple[str, dict]:
    """(name, arguments) of the one tool call a streamed answer on `api` carries, put together from its events."""
    if api == "chat":
        calls = [
            c for e in events for ch in e.get("choices") or [] for c in (ch.get("delta") or {}).get("tool_calls") or []
        ]
        name = next(c["function"]["name"] for c in calls if c.get("function", {}).get("name"))
        return name, json.loads("".join(c["function"].get("arguments") or "" for c in calls))
    if api == "responses":
        done = next(e for e in events if e.get("type") == "response.completed")
        return tool_call_of(api, done["response"])
    start = next(
        e for e in events if e.get("type") == "content_block_start" and e["content_block"]["type"] == "tool_use"
    )
    pieces = [e["delta"]["partial_json"] for e in events if (e.get("delta") or {}).get("type") == "input_json_delta"]
    return start["content_block"]["name"], json.loads("".join(pieces))


@pytest.mark.parametrize("api", APIS)
def test_a_hosted_models_tool_call_reaches_each_api_intact_streamed_or_not(partial_stack, keys, api):
    """The stand-in answers a call of get_weather (its arguments streamed in two pieces): Claude Code's, Codex's and
    opencode's APIs each get that call, name and arguments, as the API sent it to chat completions."""
    _, _, port = partial_stack
    expected = ("get_weather", json.loads(fake_backend.TOOL_ARGUMENTS))
    status, _, body = ask(port, keys["sam"], api, "hosted-api", "Weather in Paris?", tools=[TOOLS[api]])
    assert status == 200 and tool_call_of(api, body) == expected, body
    _, events = stream(port, keys["sam"], api, "hosted-api", tools=[TOOLS[api]])
    assert streamed_tool_call(api, events) == expected, events


def test_a_hosted_api_that_does_not_answer_is_a_clear_5xx_naming_it_and_nothing_else_is_touched(partial_stack, keys):
    _, _, port = partial_stack
    start = time.monotonic()
    status, _, body = ask(port, keys["master"], "chat", "gone-api", HELLO_TEXT)
    assert status == 502 and body["error"]["message"].startswith("hosted model gone-api: its API at http://"), body
    assert "did not answer" in body["error"]["message"] and time.monotonic() - start < 10
    assert ask(port, keys["master"], "chat", "good", HELLO_TEXT)[0] == 200
    assert ask(port, keys["master"], "chat", "hosted-api", HELLO_TEXT)[0] == 200


def test_status_shows_each_hosted_api_reachable_or_not_with_its_latency(partial_stack, keys):
    _, state, port = partial_stack
    run = subprocess.run(
        [sys.executable, "-m", "generator.operate.status", "--state-dir", str(state), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows = {m["name"]: m for m in json.loads(run.stdout)["models"]}
    assert rows["hosted-api"]["state"] == "healthy" and " answered 200 in " in rows["hosted-api"]["reason"], rows
    assert rows["gone-api"]["state"] == "down" and "did not answer" in rows["gone-api"]["reason"], rows
    assert rows["hosted-api"]["gpus"] is None and rows["good"]["state"] == "healthy"


def test_status_counts_what_each_models_fallbacks_answered(partial_stack, keys):
    """After the tests above: the route `make status` reads counts the hand-overs per pair and reason."""
    _, _, port = partial_stack
    r = httpx.get(
        f"http://127.0.0.1:{port}/gateway/status", headers={"Authorization": f"Bearer {keys['master']}"}, timeout=30
    )
    fallbacks = r.json()["gateway"]["metrics"]["fallbacks"]
    assert fallbacks["broken"]["good"]["error"] >= len(APIS), fallbacks
    assert fallbacks["small"]["good"]["context"] >= len(APIS), fallbacks
    assert set(fallbacks) == {"broken", "small"}, fallbacks


def test_usage_counts_a_fallbacks_answer_under_the_model_that_answered(partial_stack, keys):
    """pat asks broken, good answers: pat's request and its tokens are good's (one row, not a request without tokens
    under broken and tokens without a request under good); the hand-over itself is counted per pair above."""
    _, _, port = partial_stack
    status, headers, body = ask(port, keys["pat"], "chat", "broken", HELLO_TEXT)
    assert status == 200 and headers["x-gateway-fallback"] == "broken->good", body
    deadline = time.monotonic() + 10  # tokens are counted by LiteLLM's success callback, after the answer is sent
    while True:
        r = httpx.get(
            f"http://127.0.0.1:{port}/gateway/report", headers={"Authorization": f"Bearer {keys['master']}"}, timeout=30
        )
        # pat's usage rows, one per model (every stack has a Redis now, stored responses: each person also gets the
        # row of their tokens this day and month, model BUDGET_ROW, without requests)
        rows = [row for row in r.json()["people"] if row["person"] == "pat" and row["model"] != BUDGET_ROW]
        if sum(row["output_tokens"] for row in rows) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [(row["model"], row["requests"]) for row in rows] == [("good", 1)], rows
    assert rows[0]["input_tokens"] == body["usage"]["prompt_tokens"], (rows, body["usage"])
    assert rows[0]["output_tokens"] == body["usage"]["completion_tokens"], (rows, body["usage"])


def test_a_persons_page_shows_models_yml_text_as_text(partial_stack, keys):
    """sam's page in a real browser: his models only (hosted included, each of its kind), and a description with
    `<script>` and `<b>` in models.yml shown as those characters: nothing of it runs or renders."""
    from selenium.webdriver.common.by import By

    from tests.integration.browser import chromium, page_errors, sign_in, table, wait_for

    with chromium() as driver:
        sign_in(driver, f"http://127.0.0.1:{partial_stack[2]}", keys["sam"])
        rows = {r[0]: r for r in wait_for(lambda: table(driver, "models"), what="sam's models")}
        assert list(rows) == ["broken", "hosted-api", "small", "split"]
        assert rows["hosted-api"][1] == "chat (hosted)" and rows["hosted-api"][6] == SCRIPT_DESCRIPTION
        assert rows["split"][1] == "chat (2 nodes)"  # one model, with its nodes
        assert rows["small"][2:4] == [f"{SMALL_CONTEXT:,}", "64"] and rows["small"][6] == ""  # its alias is hidden
        assert driver.title == "LLM gateway" and not driver.find_elements(By.CSS_SELECTOR, "#models script, #models b")
        assert page_errors(driver) == []
    head = httpx.head(f"http://127.0.0.1:{partial_stack[2]}/gateway/", timeout=10)  # `curl -I` answered 405 once
    assert head.status_code == 200 and "script-src 'self'" in head.headers["content-security-policy"]


def answer_and_reasoning(api: str, body: dict) -> tuple[str, str]:
    """(the answer's text, its reasoning) of a non-streamed answer on `api`."""
    if api == "chat":
        message = body["choices"][0]["message"]
        return message["content"], message.get("reasoning_content") or ""
    if api == "responses":
        text = "".join(c["text"] for item in body["output"] if item["type"] == "message" for c in item["content"])
        thought = "".join(
            s["text"] for item in body["output"] if item["type"] == "reasoning" for s in item.get("summary") or []
        ) or "".join(
            c["text"] for item in body["output"] if item["type"] == "reasoning" for c in item.get("content") or []
        )
        return text, thought
    return (
        "".join(b["text"] for b in body["content"] if b["type"] == "text"),
        "".join(b["thinking"] for b in body["content"] if b["type"] == "thinking"),
    )


@pytest.mark.parametrize("api", APIS)
def test_a_model_on_two_nodes_answers_every_api_through_the_gateway(partial_stack, keys, api):
    """Two vLLM processes as two nodes of one model (pipeline parallel 2, gloo on loopback): the leader serves the
    API, node 1 runs headless; through the real gateway the answer and its reasoning arrive apart on every API."""
    _, state, port = partial_stack
    status, _, body = ask(port, keys["sam"], api, "split", HELLO_TEXT, budget=100)
    assert status == 200, body
    text, thought = answer_and_reasoning(api, body)
    assert text.strip() == ANSWER_TEXT and thought.strip() == REASONING_TEXT, body
    node = (state / "logs" / "split-node-1.log").read_text()
    assert "headless multiproc executor" in node and "PP rank 1" in node  # the second stage ran in that process
    assert "PP rank 0" in (state / "logs" / "split.log").read_text()


def test_status_shows_the_model_on_nodes_as_one_row_with_its_nodes(partial_stack, keys):
    _, _, port = partial_stack
    r = httpx.get(f"http://127.0.0.1:{port}/gateway/report", headers={"Authorization": f"Bearer {keys['master']}"})
    rows = {row["name"]: row for row in r.json()["models"]}
    assert rows["split"]["state"] == "healthy" and rows["split"]["nodes"] == 2, rows["split"]
    assert not any(name.startswith("split-") for name in rows) and rows["good"]["nodes"] is None


def test_the_cpu_demo_models_get_a_fit_estimate_from_their_files():
    cwd = os.getcwd()
    os.chdir(ROOT)  # the demo's model paths are relative to the repo root
    try:
        plan = load_plan(DEMO_MODELS)
    finally:
        os.chdir(cwd)
    for m in plan.models:
        assert m.fit.startswith("weights ") and "/token" in m.fit and "no GPU check (gpus: [])" in m.fit, m.fit

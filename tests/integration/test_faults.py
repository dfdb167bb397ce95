"""Faults: a backend dies, hangs or drops a stream; malformed requests. The gateway must stay up,
fail fast and clearly (or answer from the model's fallback), and recover without a restart."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.compile.load.loader import load_plan
from generator.operate.runtime.local import LocalStack
from generator.operate.runtime.ports import free_ports
from tests.integration.browser import chromium, page_errors, page_states, screenshot, sign_in, wait_for

ROOT = Path(__file__).resolve().parents[2]
HELLO = [{"role": "user", "content": "Say hello."}]
TIMEOUT = 4  # the fake stack's request_timeout and stream_timeout, seconds
MODES = ("ok", "hang", "cut")
# the fake models: name -> (the fake backend's mode, more vllm serve flags); `tools` takes tools (a parser)
FAKES = {
    **{mode: (mode, "") for mode in MODES},
    "tools": ("ok", " --enable-auto-tool-choice --tool-call-parser hermes"),
}


def _fake_models(gateway_port: int, fakes: dict[str, int]) -> str:
    """The fake stack's models.yml, on free ports (never a demo's or another checkout's)."""
    # one gateway worker: ~8 CPU-s less to start; the demo stack tests 2
    return f"""
gateway: {{port: {gateway_port}, request_timeout: {TIMEOUT}, stream_timeout: {TIMEOUT}, workers: 1}}
""" + "".join(
        f"""
{name}:
  gpus: []
  command: vllm serve fake/{name} --max-model-len 4096 --port {port}{FAKES[name][1]}
"""
        for name, port in fakes.items()
    )


def _wait_http(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


@pytest.fixture(scope="module")
def fakes(tmp_path_factory):
    """A real LiteLLM gateway, generated config, in front of misbehaving fake backends."""
    if os.environ.get("GATEWAY_URL"):
        pytest.skip(
            "starts its own local gateway in front of fake backends; tests nothing of the deployment at GATEWAY_URL"
        )
    tmp = tmp_path_factory.mktemp("faults")
    gateway_port, *ports = free_ports(1 + len(FAKES))
    fakes = dict(zip(FAKES, ports))
    (tmp / "models.yml").write_text(_fake_models(gateway_port, fakes))
    plan = load_plan(tmp / "models.yml")
    backends = [
        subprocess.Popen([sys.executable, "-m", "tests.integration.fake_backend", FAKES[name][0], str(port)], cwd=ROOT)
        for name, port in fakes.items()
    ]
    stack = LocalStack(plan, tmp / "state", vllm_python="(not used)")
    try:
        for port in fakes.values():
            _wait_http(f"http://127.0.0.1:{port}/health")
        stack.start_gateway()
        yield stack
    finally:
        stack.stop()
        for b in backends:
            b.kill()  # the hanging one would wait for its sleeping handler
            b.wait(timeout=10)


def _client(stack: LocalStack, timeout: float = 60) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.gateway_url}/v1", api_key=stack.master_key, timeout=timeout, max_retries=0)


def test_a_hanging_backend_is_cut_off_by_the_timeout(fakes):
    start = time.monotonic()
    with pytest.raises(openai.APIStatusError) as err:
        _client(fakes).chat.completions.create(model="hang", messages=HELLO)
    elapsed = time.monotonic() - start
    assert err.value.status_code in (408, 500, 502, 503, 504)
    assert elapsed < TIMEOUT + 6, f"took {elapsed:.1f}s with a {TIMEOUT}s timeout"
    assert _client(fakes).chat.completions.create(model="ok", messages=HELLO).choices[0].message.content == "ok"


def test_a_hanging_backend_is_cut_off_when_streaming(fakes):
    start = time.monotonic()
    with pytest.raises((openai.APIError, httpx.HTTPError)):
        for _ in _client(fakes).chat.completions.create(model="hang", messages=HELLO, stream=True):
            pass
    assert time.monotonic() - start < TIMEOUT + 6


def test_a_stream_cut_midway_raises_instead_of_ending_quietly(fakes):
    received = []
    with pytest.raises((openai.APIError, httpx.HTTPError)):
        for chunk in _client(fakes).chat.completions.create(model="cut", messages=HELLO, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert "".join(received) in ("", "Hello", "Hello there")


# a stream its backend dropped after its first bytes (a crash, or a hung backend the gateway cut off: backend_health.py)
# ends with the API's own error event, which each SDK raises: never a stream that just stops
CUT_STREAMS = {
    "chat": ("/v1/chat/completions", {"messages": HELLO}, lambda last: "error" in last),
    "messages": ("/v1/messages", {"messages": HELLO, "max_tokens": 20}, lambda last: last.get("type") == "error"),
    "responses": ("/v1/responses", {"input": "Say hello."}, lambda last: last.get("type") == "response.failed"),
}


@pytest.mark.parametrize("api", CUT_STREAMS)
def test_a_stream_cut_after_its_first_bytes_ends_with_the_apis_error_event(fakes, api):
    path, body, is_error = CUT_STREAMS[api]
    data = []
    with httpx.stream(
        "POST",
        f"{fakes.gateway_url}{path}",
        json={"model": "cut", "stream": True, **body},
        headers={"Authorization": f"Bearer {fakes.master_key}"},
        timeout=30,
    ) as r:
        assert r.status_code == 200  # the answer had begun: its status was sent
        data = [line[6:] for line in r.iter_lines() if line.startswith("data: ") and line != "data: [DONE]"]
    assert "Hello" in "".join(data[:-1]), data  # what came before the cut reached the client
    last = json.loads(data[-1])
    assert is_error(last), f"{api}: the stream ended with {data[-1][:300]}"


MALFORMED = {
    "not-json": b"{this is not json",
    "empty-body": b"",
    "json-array": b"[]",
    "messages-is-a-string": json.dumps({"model": "ok", "messages": "hi"}).encode(),
    "no-messages": json.dumps({"model": "ok"}).encode(),
    "model-is-a-number": json.dumps({"model": 7, "messages": HELLO}).encode(),
    "max-tokens-is-text": json.dumps({"model": "ok", "messages": HELLO, "max_tokens": "many"}).encode(),
    "temperature-is-a-list": json.dumps({"model": "ok", "messages": HELLO, "temperature": [1]}).encode(),
    "message-without-role": json.dumps({"model": "ok", "messages": [{"content": "x"}]}).encode(),
    "tools-is-not-a-list": json.dumps({"model": "ok", "messages": HELLO, "tools": True}).encode(),
    "huge-body": json.dumps({"model": "ok", "messages": [{"role": "user", "content": "x" * 20_000_000}]}).encode(),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_requests_get_4xx_not_5xx(fakes, body):
    r = httpx.post(
        f"{fakes.gateway_url}/v1/chat/completions",
        content=body,
        timeout=60,
        headers={"Authorization": f"Bearer {fakes.master_key}", "Content-Type": "application/json"},
    )
    assert 400 <= r.status_code < 500, f"{r.status_code}: {r.text[:300]}"
    assert httpx.get(f"{fakes.gateway_url}/health/liveliness", timeout=5).status_code == 200


@pytest.mark.parametrize(
    "path,body",
    [
        ("/v1/chat/completions", {"messages": HELLO, "tools": [{"type": "function", "function": {"name": "f"}}]}),
        ("/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {}}]}),
        ("/v1/messages", {"max_tokens": 16, "messages": HELLO, "tools": [{"name": "f", "input_schema": {}}]}),
    ],
    ids=["chat", "responses", "messages"],
)
def test_tools_to_models_without_a_tool_parser_are_a_clear_400_before_the_backend(fakes, path, body):
    """`ok` has no tool parser (the demo's models all do): the gateway says so itself, and which model takes tools."""
    r = httpx.post(
        f"{fakes.gateway_url}{path}",
        json={"model": "ok", **body},
        timeout=60,
        headers={"Authorization": f"Bearer {fakes.master_key}"},
    )
    assert r.status_code == 400, r.text
    assert "ok takes no tools" in r.text and "send tools to one of: tools" in r.text, r.text


LINT_SCHEMA = {  # a coding agent's tool: closed (additionalProperties: false), with a parameter named `strict`
    "type": "object",
    "additionalProperties": False,
    "properties": {"path": {"type": "string"}, "strict": {"type": "boolean", "description": "fail on warnings"}},
    "required": ["path", "strict"],
}
TOOL_ASKS = {  # path -> the request, with the tool in that API's shape
    "/v1/chat/completions": {"messages": HELLO, "tools": [{"type": "function", "function": {
        "name": "lint", "strict": True, "parameters": LINT_SCHEMA}}]},
    "/v1/messages": {"max_tokens": 16, "messages": HELLO, "tools": [{"name": "lint", "input_schema": LINT_SCHEMA}]},
}  # fmt: skip


@pytest.mark.parametrize("path", TOOL_ASKS, ids=["chat", "messages"])
def test_a_tools_schema_reaches_the_backend_as_the_client_sent_it(fakes, path):
    """tool_schemas.py: LiteLLM alone deletes the parameter named `strict` and `additionalProperties: false` on the
    way to a vLLM backend; through the gateway the backend gets the schema the client sent (and the call back)."""
    r = httpx.post(
        f"{fakes.gateway_url}{path}",
        json={"model": "tools", **TOOL_ASKS[path]},
        timeout=60,
        headers={"Authorization": f"Bearer {fakes.master_key}"},
    )
    assert r.status_code == 200 and "lint" in r.text, r.text
    port = next(m.port for m in fakes.plan.models if m.name == "tools")
    got = httpx.get(f"http://127.0.0.1:{port}/last-request", timeout=10).json()
    function = got["tools"][0]["function"]
    assert function["parameters"] == LINT_SCHEMA, function
    assert function.get("strict") is (True if path == "/v1/chat/completions" else None), function


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", 40)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    field=st.sampled_from(["messages", "model", "max_tokens", "temperature", "tools", "tool_choice", "stream", "n"]),
    value=JSONISH,
)
def test_fuzzed_fields_never_give_5xx(fakes, field, value):
    body = {"model": "ok", "messages": HELLO, field: value}
    r = httpx.post(
        f"{fakes.gateway_url}/v1/chat/completions",
        json=body,
        timeout=30,
        headers={"Authorization": f"Bearer {fakes.master_key}"},
    )
    assert r.status_code < 500, f"{field}={value!r} -> {r.status_code}: {r.text[:300]}"


BODIES = {  # one request per API, sent to the killed model under load
    "/chat/completions": {"messages": HELLO, "max_tokens": 16},
    "/responses": {"input": "Say hello.", "max_output_tokens": 16},
    "/messages": {"messages": HELLO, "max_tokens": 16},
}
AFTER_KILL = 24  # requests sent to the killed model after it died


def _ask(gateway, path: str, model: str) -> tuple[int | str, str, float]:
    """(status or the error that lost the request, the model group that answered, seconds) of one request."""
    start = time.monotonic()
    try:
        r = httpx.post(
            gateway.url + path,
            json={"model": model, **BODIES[path]},
            headers={"Authorization": f"Bearer {gateway.key}"},
            timeout=60,
        )
    except httpx.HTTPError as exc:  # a reset or a hang: the request is lost
        return type(exc).__name__, "", time.monotonic() - start
    return r.status_code, r.headers.get("x-litellm-model-group", ""), time.monotonic() - start


@pytest.fixture
def admin_page(gateway):
    """The gateway's page in a real browser, signed in with the master key: the admin's view of the stack."""
    if gateway.stack is None:
        pytest.skip("needs a local stack (this session's or the running `make demo`), not GATEWAY_URL")
    with chromium() as driver:
        sign_in(driver, gateway.url.removesuffix("/v1"), gateway.key)
        yield driver
        assert page_errors(driver) == []


def test_a_killed_backend_under_load_is_answered_by_its_fallback_or_fails_fast_and_recovers(gateway, admin_page):
    """Kill one real vLLM backend while requests for it keep arriving on chat, responses and messages. With
    `fallbacks:` (the CPU demo's reasoner: docs/routing.md) none is lost and its fallback answers every one sent after
    the kill; without, each gets a fast 5xx. The other model keeps answering, `make status` reads the dead one down,
    and once the backend is back the gateway serves it again without a restart. (A person who may not use the
    fallback, and a model down from the start: tests/integration/test_partial_availability.py.) The admin's page, open
    in a real browser all along, shows the dead backend down within 15 s and healthy again once it is back."""
    if gateway.stack is None:
        pytest.skip("needs a local stack (this session's or the running `make demo`), not GATEWAY_URL")
    if len(gateway.plan.models) < 2:
        pytest.skip("needs two models")
    victim, other = gateway.plan.models[0], gateway.plan.models[1]
    fallback = victim.fallbacks[0] if victim.fallbacks else None
    client = gateway.client(timeout=60)

    def ask(model):
        start = time.monotonic()
        try:
            client.chat.completions.create(model=model.served_name, messages=HELLO, max_tokens=16)
            return "ok", time.monotonic() - start
        except openai.APIStatusError as exc:
            return exc.status_code, time.monotonic() - start

    healthy = {m.served_name: "healthy" for m in gateway.plan.models}
    assert _states(gateway) == healthy
    wait_for(lambda: page_states(admin_page) == healthy, 20, "the admin's page: every model healthy")
    screenshot(admin_page, "page-admin")
    answers: list[tuple[str, float, int | str, str, float]] = []  # (path, sent, status, answered by, seconds)
    killed = threading.Event()
    after_kill = iter(range(AFTER_KILL))
    lock = threading.Lock()

    def load(path: str) -> None:
        while True:
            with lock:
                if killed.is_set() and next(after_kill, None) is None:
                    return
            answers.append((path, time.monotonic(), *_ask(gateway, path, victim.served_name)))

    try:
        with concurrent.futures.ThreadPoolExecutor(len(BODIES)) as pool:
            running = [pool.submit(load, path) for path in BODIES]
            while len(answers) < len(BODIES) * 2:  # the load is on: every API answered by the model itself
                time.sleep(0.05)
            gateway.stack.kill(victim.name)
            killed.set()
            dead_at = time.monotonic()
            wait_for(lambda: page_states(admin_page)[victim.served_name] == "down", 15, "the page: the killed one down")
            for f in running:
                f.result()
        # `make status` (the gateway's /gateway/status route) reads it down within 15 s; the other stays healthy
        while (states := _states(gateway))[victim.served_name] != "down" and time.monotonic() - dead_at < 15:
            time.sleep(0.5)
        assert states == {victim.served_name: "down", other.served_name: "healthy"}, states
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            alive = list(pool.map(ask, [other] * 8))
        assert all(r == "ok" for r, _ in alive), alive
        after = [a for a in answers if a[1] > dead_at]
        assert {a[0] for a in after} == set(BODIES), answers
        if fallback:  # none lost, in flight at the kill or sent after it; the fallback answers those sent after
            assert {a[2] for a in answers} == {200} and {a[3] for a in after} == {fallback}, answers
        else:  # each a 5xx, fast
            assert all(isinstance(a[2], int) and 500 <= a[2] < 600 for a in after), after
        assert max(a[4] for a in after) < 10, f"the dead backend's requests took up to {max(a[4] for a in after):.1f}s"
    finally:
        gateway.stack.start_backend(victim.name, wait=False)
        loading = _states_while_loading(gateway, victim)
    # while it loads, status never calls it healthy before vLLM's own /health does
    assert loading[-1] == "healthy" and set(loading[:-1]) <= {"down"}, loading
    wait_for(lambda: page_states(admin_page) == healthy, 15, "the admin's page: the backend healthy again")
    deadline = time.monotonic() + 30  # the router tries the model itself first again: no cooldown for it
    while (got := _ask(gateway, "/chat/completions", victim.served_name))[:2] != (200, victim.served_name):
        assert time.monotonic() < deadline, f"the gateway did not serve the backend again after it came back: {got}"
        time.sleep(0.5)
    for path in BODIES:
        assert _ask(gateway, path, victim.served_name)[:2] == (200, victim.served_name)


def _states(gateway) -> dict[str, str]:
    r = httpx.get(
        gateway.url.removesuffix("/v1") + "/gateway/status",
        timeout=30,
        headers={"Authorization": f"Bearer {gateway.key}"},
    )
    r.raise_for_status()
    return {m["name"]: m["state"] for m in r.json()["models"]}


def _states_while_loading(gateway, model, timeout: float = 600) -> list[str]:
    """The route's state for `model` every second until it reads healthy; each `healthy` is checked
    against the backend's own /health at that moment."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _states(gateway)[model.served_name]
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == "healthy":
            assert httpx.get(f"http://127.0.0.1:{model.port}/health", timeout=5).status_code == 200
            return seen
        time.sleep(1)
    raise AssertionError(f"{model.name} not healthy after {timeout:.0f}s; states seen: {seen}")


def test_a_hung_lone_backend_is_refused_503_within_seconds_and_serves_again_once_it_answers(gateway):
    """A backend that hangs (its process group stopped: the port accepts, nothing answers) behind a model with no
    replica and no fallback (the CPU demo's tool-caller): every request to it, sent while it hangs on chat, responses
    and messages, whole and streamed, is answered 503 naming the model and why, with Retry-After, within 15 s (the
    gateway's timeouts are 600 s and 120 s: its own probes find the hang, backend_health.py); `make status` reads
    it hung; once it runs again it serves without a restart (docs/replicas.md, "A hung backend")."""
    if gateway.stack is None:
        pytest.skip("needs a local stack (this session's or the running `make demo`), not GATEWAY_URL")
    lone = [m for m in gateway.plan.models if not m.fallbacks and m.on_demand is None]
    if not lone:
        pytest.skip("needs a model without fallbacks")
    victim = lone[0]
    (proc,) = [p for p in gateway.stack.procs if p.name == victim.name and p.alive()]
    assert _ask(gateway, "/chat/completions", victim.served_name)[:2] == (200, victim.served_name)

    def ask(path: str, stream: bool) -> tuple[int | str, str, str, float]:
        start = time.monotonic()
        try:
            r = httpx.post(
                gateway.url + path,
                json={"model": victim.served_name, **BODIES[path], **({"stream": True} if stream else {})},
                headers={"Authorization": f"Bearer {gateway.key}"},
                timeout=60,
            )
        except httpx.HTTPError as exc:
            return type(exc).__name__, "", "", time.monotonic() - start
        return r.status_code, r.headers.get("retry-after", ""), r.text, time.monotonic() - start

    os.killpg(proc.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(2 * len(BODIES)) as pool:
            asks = [(path, stream) for path in BODIES for stream in (False, True)]
            asked = [pool.submit(ask, path, stream) for path, stream in asks]
            while (state := _states(gateway)[victim.served_name]) != "hung" and time.monotonic() - stopped < 15:
                time.sleep(0.5)
            answers = [f.result() for f in asked]
        assert state == "hung", f"status read {victim.served_name} {state!r} 15 s after it hung"
        for (path, _), (status, retry_after, text, seconds) in zip(asks, answers):
            # /v1/messages: LiteLLM 1.108.7 builds the answer's headers itself, without the exception's Retry-After
            # (a gap docs/replicas.md names)
            assert status == 503 and (retry_after or path == "/messages") and seconds < 15, (path, status, text[:300])
            assert victim.served_name in text and "hung" in text, text[:300]
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 30  # the first probe that gets an answer lets it back: no restart
    while (got := _ask(gateway, "/chat/completions", victim.served_name))[:2] != (200, victim.served_name):
        assert time.monotonic() < deadline, f"{victim.served_name} not served again 30 s after it ran again: {got}"
        time.sleep(0.5)
    for path in BODIES:
        assert _ask(gateway, path, victim.served_name)[:2] == (200, victim.served_name)

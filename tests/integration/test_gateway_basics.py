"""The gateway's OpenAI surface: model list, plain and streamed chat, auth, errors."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from generator.demo.script import ANSWER_TEXT
from generator.operate.runtime.local import FORK_SERVER as VLLM_FORK_SERVER
from generator.shipped.gateway_hooks.gateway_supervisor import (
    FORK_SERVER,
    supervised_workers,
)
from generator.shipped.on_demand import cpu_backend_patches
from tests import proc_probe

from .helpers import collect_stream, fork_server_of

HELLO = [{"role": "user", "content": "Say hello."}]


def test_models_endpoint_lists_exactly_the_models_in_models_yml(gateway):
    listed = {m.id for m in gateway.client().models.list()}
    assert listed == {m.served_name for m in gateway.plan.models} | {
        a.name for m in gateway.plan.models for a in m.adapters
    }


def test_plain_chat(gateway, model):
    reply = gateway.client().chat.completions.create(model=model.served_name, messages=HELLO, max_tokens=64)
    message = reply.choices[0].message
    assert message.content or message.tool_calls
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert reply.usage.completion_tokens <= 64
    if gateway.scripts.get(model.served_name) in ("reasoner", "plain"):
        assert message.content == ANSWER_TEXT


def test_streamed_chat_matches_the_plain_answer(gateway, model):
    client = gateway.client()
    plain = client.chat.completions.create(model=model.served_name, messages=HELLO, max_tokens=64, temperature=0)
    stream = client.chat.completions.create(
        model=model.served_name, messages=HELLO, max_tokens=64, temperature=0, stream=True
    )
    content, _, calls, finish = collect_stream(stream)
    assert finish in ("stop", "length", "tool_calls")
    assert content == (plain.choices[0].message.content or "")
    assert bool(calls) == bool(plain.choices[0].message.tool_calls)


def test_a_json_schema_response_format_gets_json_of_that_schema(gateway, direct_model):
    """Structured output through the gateway (vLLM's xgrammar; on the CPU without triton, which the CPU venv and
    image leave out: docker/lock.sh). A reasoning model's grammar starts after its reasoning: not asked here."""
    model = direct_model
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    reply = gateway.client().chat.completions.create(
        model=model.served_name,
        messages=HELLO,
        max_tokens=64,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    )
    content, finish = reply.choices[0].message.content, reply.choices[0].finish_reason
    if finish == "length":  # a scripted model, whose logits mean nothing, pads its JSON with whitespace to the budget
        assert content.lstrip().startswith("{"), content  # (a compose stack's scripted models are not known as such)
        return
    assert finish == "stop", finish
    answer = json.loads(content)
    assert set(answer) == {"a"} and isinstance(answer["a"], int), content


@pytest.mark.parametrize("key", [None, "sk-wrong-key"], ids=["no-key", "wrong-key"])
def test_requests_without_the_right_key_get_401(gateway, key):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    model = gateway.plan.models[0].served_name
    r = httpx.post(
        f"{gateway.url}/chat/completions", headers=headers, timeout=30, json={"model": model, "messages": HELLO}
    )
    assert r.status_code == 401, r.text
    assert httpx.get(f"{gateway.url}/models", headers=headers, timeout=30).status_code == 401


def test_unknown_model_gets_a_clear_4xx(gateway):
    with pytest.raises(openai.APIStatusError) as err:
        gateway.client().chat.completions.create(model="no-such-model", messages=HELLO)
    assert 400 <= err.value.status_code < 500
    assert "no-such-model" in str(err.value)


def test_max_tokens_above_the_context_is_clamped_or_refused_never_5xx(gateway, model):
    """Coding agents send max_tokens = the whole context; the gateway must not turn that into a 5xx or a hang."""
    client = gateway.client(timeout=60)
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=model.served_name, messages=HELLO, max_tokens=model.context * 2
        )
    except openai.APIStatusError as exc:
        assert 400 <= exc.status_code < 500, exc
        assert not gateway.plan.gateway.clamp_max_tokens, "the clamp is on: this request should have been clamped"
        return
    assert gateway.plan.gateway.clamp_max_tokens, "a request above the context was accepted without the clamp"
    header = raw.headers.get("x-gateway-max-tokens-clamped")
    assert header, "clamped requests must say so in x-gateway-max-tokens-clamped"
    before, after = (int(x) for x in header.split("->"))
    assert before == model.context * 2 and 0 < after < model.context
    assert raw.parse().choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_max_tokens_equal_to_the_context_is_clamped_when_streaming(gateway, model):
    if not gateway.plan.gateway.clamp_max_tokens:
        pytest.skip("gateway.clamp_max_tokens is off in this models.yml")
    client = gateway.client(timeout=60)
    with client.chat.completions.with_streaming_response.create(
        model=model.served_name, messages=HELLO, max_tokens=model.context, stream=True
    ) as raw:
        assert raw.headers.get("x-gateway-max-tokens-clamped", "").startswith(f"{model.context}->")
        _, _, _, finish = collect_stream(raw.parse())
    assert finish in ("stop", "length", "tool_calls")


def test_a_request_that_fits_is_not_clamped(gateway, model):
    raw = gateway.client().chat.completions.with_raw_response.create(
        model=model.served_name, messages=HELLO, max_tokens=16
    )
    assert "x-gateway-max-tokens-clamped" not in raw.headers


@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/key/list"),
        ("POST", "/key/generate"),
        ("GET", "/user/list"),
        ("GET", "/config/yaml"),
        ("GET", "/global/spend/logs"),
    ],
)
def test_admin_routes_are_closed_even_with_the_master_key(gateway, method, path):
    if gateway.plan.gateway.admin_ui:
        pytest.skip("gateway.admin_ui is on in this models.yml")
    root = gateway.url.removesuffix("/v1")
    r = httpx.request(method, f"{root}{path}", headers={"Authorization": f"Bearer {gateway.key}"}, json={}, timeout=30)
    assert r.status_code in (403, 404), f"{path}: {r.status_code} {r.text[:200]}"


def test_the_gateway_runs_the_worker_count_it_resolved_at_start(gateway):
    """The supervisor printed the count gateway_start.py resolved (auto: this process's CPUs, at most what
    memory holds), and that many uvicorn workers serve; the whole suite runs through them (2 on a 2-core machine)."""
    import os
    import re

    import psutil

    if gateway.stack is None:
        pytest.skip("a gateway this session did not start (GATEWAY_URL): tests/compose checks the container's")
    proc = next(p for p in gateway.stack.procs if p.name == "gateway")
    line = next(x for x in proc.log.read_text().splitlines() if x.startswith("gateway-supervisor: gateway: "))
    n = int(re.match(r"gateway-supervisor: gateway: (\d+) worker\(s\)", line).group(1))
    setting = gateway.plan.gateway.workers
    if setting == "auto":
        holds = int(re.search(r"holds (\d+) at", line).group(1))
        assert n == min(len(os.sched_getaffinity(0)), holds) and "CPUs in its affinity" in line, line
    else:
        assert n == setting, line
    workers = supervised_workers(proc.pid)
    assert len(workers) == (n if n > 1 else 0), (line, workers)  # with one worker uvicorn serves in the parent
    if n == 1:
        return
    # forked from one fork server, itself a fork of the gateway process made once it had imported LiteLLM
    # (gateway_serve.py), not spawned: none imported it again, not even the fork server
    (server,) = {psutil.Process(w).ppid() for w in workers}
    serving = psutil.Process(server).ppid()
    assert psutil.Process(server).cmdline() == psutil.Process(serving).cmdline(), psutil.Process(server).cmdline()
    assert FORK_SERVER.decode() not in " ".join(psutil.Process(server).cmdline())  # not multiprocessing's own
    assert all(psutil.Process(w).cmdline() == psutil.Process(server).cmdline() for w in workers), workers
    # pydantic's compiled core mapped in it says LiteLLM was imported before the fork (a bare fork server has none)
    assert "_pydantic_core" in Path(f"/proc/{server}/maps").read_text(), "the fork server did not import LiteLLM"
    assert not any("spawn_main" in " ".join(c.cmdline()) for c in psutil.Process(proc.pid).children(recursive=True))


def test_each_cpu_backend_is_a_fork_of_one_vllm_fork_server_that_imported_vllm(gateway):
    """CPU_BACKEND_FORK backends (the CPU examples) are forked from the stack's vLLM fork server
    (generator/shipped/on_demand/vllm_fork.py), which imported vLLM once for all of them: none was spawned. Each
    backend's engine is forked and runs one gloo polling thread, not 13 (cpu_backend_patches.py)."""
    import psutil

    if gateway.stack is None:
        pytest.skip("a gateway this session did not start (GATEWAY_URL): compose runs one container per backend")
    backends = [p for p in gateway.stack.procs if p.name in {m.name for m in gateway.plan.models}]
    forked = [m.name for m in gateway.plan.models if cpu_backend_patches.enabled(m.env)]
    assert forked, "the CPU demo's models set CPU_BACKEND_FORK: nothing here would be checked"
    servers = {p.name: fork_server_of(p.pid) for p in backends if p.name in forked}
    assert None not in servers.values() and len(servers) == len(forked), servers
    (server,) = {s.pid for s in servers.values()}  # one environment, one server
    assert any(p.pid == server and p.name.startswith(VLLM_FORK_SERVER) for p in gateway.stack.procs)
    assert "libtorch" in Path(f"/proc/{server}/maps").read_text(), "the fork server did not import vLLM"
    for p in backends:
        if p.name in forked:
            family = proc_probe.processes([p.pid, *(c.pid for c in psutil.Process(p.pid).children(recursive=True))])
            assert not proc_probe.spawned(family), family
            assert sum(f["gloo"] for f in family) == 1, (p.name, family)


def test_a_connection_idle_past_an_sdks_keep_alive_still_takes_a_request(gateway):
    """The gateway keeps an idle connection longer than clients do (httpx, the OpenAI and Anthropic SDKs: 5 s), so it
    is the client that closes it: with uvicorn's 5 s, a request sent on a connection the gateway was closing got
    "Server disconnected without sending a response" (a CI run's fuzz test, 4 of 2,000). Two requests on one socket,
    6 s apart."""
    import socket
    import time
    from urllib.parse import urlsplit

    url = urlsplit(gateway.url)
    request = (
        f"GET /v1/models HTTP/1.1\r\nHost: {url.hostname}\r\nAuthorization: Bearer {gateway.key}\r\n\r\n"
    ).encode()
    with socket.create_connection((url.hostname, url.port), timeout=30) as s:
        answers = []
        for pause in (0, 6):
            time.sleep(pause)
            s.sendall(request)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(65536)
                assert chunk, f"the gateway closed the connection after {pause} s idle"
                head += chunk
            answers.append(head.split(b"\r\n", 1)[0])
            length = int(
                next(
                    line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
                )
            )
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < length:
                body += s.recv(65536)
        assert answers == [b"HTTP/1.1 200 OK"] * 2

"""Small helpers shared by the integration tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]


def reasoning_of(obj) -> str | None:
    """LiteLLM exposes vLLM's `reasoning` as `reasoning_content` (message or delta)."""
    extra = getattr(obj, "model_extra", None) or {}
    return getattr(obj, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")


def collect_stream(stream):
    """Join a streamed chat completion: content, reasoning, tool calls by index, finish reason."""
    content, reasoning, calls, finish = [], [], {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.content:
            content.append(delta.content)
        if r := reasoning_of(delta):
            reasoning.append(r)
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"name": "", "arguments": ""})
            if tc.function and tc.function.name:
                slot["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                slot["arguments"] += tc.function.arguments
        finish = choice.finish_reason or finish
    return "".join(content), "".join(reasoning), [calls[i] for i in sorted(calls)], finish


HEADER = "x-gateway-max-tokens-clamped"
UNIT = "The quick brown fox jumps over the lazy dog near the river bank. "  # one repeated sentence


def clamp_note(headers) -> tuple[int, int] | None:
    """(asked, given) from the gateway's x-gateway-max-tokens-clamped header, or None."""
    value = headers.get(HEADER)
    return tuple(int(x) for x in value.split("->")) if value else None


_sizes: dict[tuple[str, str], tuple[int, float]] = {}


def _chat_prompt_tokens(client, model: str, text: str) -> int:
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}], max_tokens=1
    ).usage.prompt_tokens


def text_of(gateway, model, tokens: int) -> str:
    """A user message whose chat prompt is about `tokens` tokens of `model`'s own tokenizer, sized
    through the gateway (the backend's usage counts), so no bytes-per-token ratio is assumed."""
    key = (gateway.url, model.served_name)
    if key not in _sizes:
        client = gateway.client()
        one = _chat_prompt_tokens(client, model.served_name, UNIT)
        more = _chat_prompt_tokens(client, model.served_name, UNIT * 11)  # fits any context >= 1K tokens
        _sizes[key] = (one, (more - one) / 10)
    base, per_unit = _sizes[key]
    return UNIT * max(1, round(1 + (tokens - base) / per_unit))


def too_long_text(gateway, model) -> str:
    """A prompt that alone is longer than the model's context (by a tenth)."""
    return text_of(gateway, model, model.context + model.context // 10 + 16)


def fork_server_of(pid: int | None = None, port: int | None = None):
    """The vLLM fork server (generator/shipped/on_demand/vllm_fork.py) the backend `pid` (or the one listening on
    127.0.0.1:`port`: its API server, or the engine it forked, which holds the socket too and may be the one the
    OS names) was forked from; None when it was spawned."""
    import psutil

    pids = (
        [pid]
        if pid is not None
        else [
            c.pid
            for c in psutil.net_connections("tcp")
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
        ]
    )
    for p in pids:
        for parent in psutil.Process(p).parents()[:2]:  # the API server's parent, or its engine's grandparent
            if "--fork-server" in parent.cmdline():
                return parent
    return None


def run_status(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m generator.operate.status --json --interval 1 *args` as a user runs it (`make status JSON=1`)."""
    return subprocess.run(
        [sys.executable, "-m", "generator.operate.status", "--json", "--interval", "1", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def status_json(gateway, *extra: str) -> tuple[int, dict]:
    """`status --json` pointed at this gateway (GATEWAY_URL, GATEWAY_KEY), with its models.yml."""
    env = {**os.environ, "GATEWAY_URL": gateway.url, "GATEWAY_KEY": gateway.key}
    out = run_status("--models", gateway.plan.source, *extra, env=env)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def responses_turn(client, model: str, text: str, previous: str | None, stream: bool, max_output_tokens: int = 64):
    """One /v1/responses turn (stored: the default), continuing `previous` by previous_response_id; streamed, the
    final response the stream ends with."""
    ask = {"model": model, "input": text, "max_output_tokens": max_output_tokens}
    if previous:
        ask["previous_response_id"] = previous
    if not stream:
        return client.responses.create(**ask)
    with client.responses.stream(**ask) as events:
        for _ in events:
            pass
        return events.get_final_response()

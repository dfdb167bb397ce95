"""A fast mock OpenAI backend: nginx answering with constant bodies (compiled, one worker, no logs).

The benchmark must measure the gateway, not the mock: nginx serves thousands of requests per
second on one core, so it never limits the figures. One port per bench model: the plain one
answers a chat completion with JSON, the streaming one with an SSE stream (LiteLLM only asks a
backend to stream when the client did, so the two never mix); /v1/responses and /v1/messages likewise (the latter for
the direct arm: the gateway sends vLLM chat for it), count_tokens, and vLLM's /tokenize, which count_tokens.py asks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import httpx

CONTENT = "Hello from the mock backend."


def completion_body(model: str) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": CONTENT}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
        },
        separators=(",", ":"),
    )


def responses_body(model: str) -> str:
    """A /v1/responses answer (LiteLLM sends the Responses API to a hosted_vllm backend as it is)."""
    return json.dumps(
        {
            "id": "resp_bench",
            "object": "response",
            "created_at": 1700000000,
            "status": "completed",
            "model": model,
            "output": [
                {
                    "type": "message",
                    "id": "msg_bench",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": CONTENT, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        },
        separators=(",", ":"),
    )


def messages_body(model: str) -> str:
    """An Anthropic Messages answer (the direct arm's: the gateway translates /v1/messages to chat for vLLM)."""
    return json.dumps(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": CONTENT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 7},
        },
        separators=(",", ":"),
    )


TOKENS = 19_000  # what the mock's /tokenize and count_tokens say (count_tokens.py asks /tokenize)


def tokenize_body() -> str:
    return json.dumps({"count": TOKENS, "max_model_len": 131072, "tokens": [], "token_strs": None})


def _events(events: list[tuple[str, dict]]) -> str:
    return "".join(f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n" for kind, data in events)


def responses_stream_body(model: str) -> str:
    """A streamed /v1/responses answer, the events vLLM sends (LiteLLM passes the Responses API through)."""
    done = json.loads(responses_body(model))
    item = done["output"][0]
    ids = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    events: list[tuple[str, dict]] = [
        ("response.created", {"response": {**done, "status": "in_progress", "output": []}}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}}),
        ("response.content_part.added", {**ids, "part": {"type": "output_text", "text": "", "annotations": []}}),
    ]
    words = CONTENT.split(" ")
    events += [("response.output_text.delta", {**ids, "delta": w if i == 0 else " " + w}) for i, w in enumerate(words)]
    events += [
        ("response.output_text.done", {**ids, "text": CONTENT}),
        ("response.content_part.done", {**ids, "part": item["content"][0]}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": done}),
    ]
    return _events([(k, {"type": k, "sequence_number": n, **d}) for n, (k, d) in enumerate(events)])


def messages_stream_body(model: str) -> str:
    """A streamed Anthropic Messages answer (the direct arm's)."""
    message = {**json.loads(messages_body(model)), "content": [], "stop_reason": None}
    events: list[tuple[str, dict]] = [
        ("message_start", {"message": message}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    words = CONTENT.split(" ")
    events += [
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": w if i == 0 else " " + w}})
        for i, w in enumerate(words)
    ]
    events += [
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 7}}),
        ("message_stop", {}),
    ]
    return _events([(k, {"type": k, **d}) for k, d in events])


def stream_body(model: str) -> str:
    def chunk(delta: dict, finish: str | None) -> str:
        return (
            "data: "
            + json.dumps(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion.chunk",
                    "created": 1700000000,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                },
                separators=(",", ":"),
            )
            + "\n\n"
        )

    words = CONTENT.split(" ")
    parts = [chunk({"role": "assistant", "content": ""}, None)]
    parts += [chunk({"content": w if i == 0 else " " + w}, None) for i, w in enumerate(words)]
    parts.append(chunk({}, "stop"))
    return "".join(parts) + "data: [DONE]\n\n"


def _nginx_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _server(port: int, stream: bool, model: str) -> str:
    """One port's answers: chat completions (every path but these), /v1/responses and /v1/messages (JSON, or SSE on
    the streaming port), count_tokens and vLLM's /tokenize (count_tokens.py asks it)."""
    models = json.dumps({"object": "list", "data": []})
    sse, js = "text/event-stream", "application/json"
    answers = {
        "/health": None,
        "/v1/models": (js, models),
        "/tokenize": (js, tokenize_body()),
        "/v1/messages/count_tokens": (js, json.dumps({"input_tokens": TOKENS})),
        "/v1/responses": (sse, responses_stream_body(model)) if stream else (js, responses_body(model)),
        "/v1/messages": (sse, messages_stream_body(model)) if stream else (js, messages_body(model)),
    }
    lines = [
        f"    location = {path} {{ default_type {a[0]}; return 200 {_nginx_string(a[1])}; }}"
        if a
        else f"    location = {path} {{ return 200; }}"
        for path, a in answers.items()
    ]
    chat = (sse, stream_body(model)) if stream else (js, completion_body(model))
    return f"""
  server {{
    listen 127.0.0.1:{port} backlog=4096;
{chr(10).join(lines)}
    location / {{ default_type {chat[0]}; return 200 {_nginx_string(chat[1])}; }}
  }}"""


def nginx_conf(state: Path, json_port: int, sse_port: int, model: str = "mock") -> str:
    return f"""# written by bench/mock.py
worker_processes 1;
daemon off;
pid {state}/nginx.pid;
error_log {state}/nginx-error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  client_max_body_size 64m;
  client_body_buffer_size 1m;
  client_body_temp_path {state}/body;
  proxy_temp_path {state}/proxy;
  fastcgi_temp_path {state}/fastcgi;
  uwsgi_temp_path {state}/uwsgi;
  scgi_temp_path {state}/scgi;
{_server(json_port, False, model)}
{_server(sse_port, True, model)}
}}
"""


class MockError(RuntimeError):
    pass


class NginxMock:
    """nginx on two loopback ports; `cpus` pins it (taskset) away from the gateway under test."""

    def __init__(self, state: Path, json_port: int, sse_port: int, cpus: set[int] | None = None):
        self.state, self.json_port, self.sse_port, self.cpus = state.resolve(), json_port, sse_port, cpus
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def binary() -> str:
        found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
        if not found:
            raise MockError(
                "nginx not found: the benchmark's mock backend is nginx "
                "(`apt-get install nginx-light`, or `make bench`, which installs it when run as root)"
            )
        return found

    def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        conf = self.state / "nginx.conf"
        conf.write_text(nginx_conf(self.state, self.json_port, self.sse_port))
        cmd = [self.binary(), "-c", str(conf), "-p", str(self.state), "-e", str(self.state / "nginx-error.log")]
        if self.cpus:
            cmd = ["taskset", "-c", ",".join(map(str, sorted(self.cpus))), *cmd]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else b""  # (a pipe: always there)
                raise MockError(f"nginx exited: {err.decode(errors='replace').strip()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.json_port}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise MockError("nginx did not answer on /health within 10 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> NginxMock:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

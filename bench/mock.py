"""A fast mock OpenAI backend: nginx answering with constant bodies (compiled, one worker, no logs).

The benchmark must measure the gateway, not the mock: nginx serves thousands of requests per
second on one core, so it never limits the figures. One port per bench model: the plain one
answers a chat completion with JSON, the streaming one with an SSE stream (LiteLLM only asks a
backend to stream when the client did, so the two never mix).
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


def _server(port: int, content_type: str, body: str) -> str:
    models = json.dumps({"object": "list", "data": []})
    return f"""
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location = /health {{ return 200; }}
    location = /v1/models {{ default_type application/json; return 200 {_nginx_string(models)}; }}
    location = /v1/responses {{ default_type application/json; return 200 {_nginx_string(responses_body("mock"))}; }}
    location / {{ default_type {content_type}; return 200 {_nginx_string(body)}; }}
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
{_server(json_port, "application/json", completion_body(model))}
{_server(sse_port, "text/event-stream", stream_body(model))}
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

"""Media URLs a client names are never fetched by a backend unless models.yml lists their host
(generator/compile/load/media.py). Two levels, both with a local listener that must never be contacted:

1. vLLM's own code with the generated command line (tests/integration/media_probe.py: vLLM's server parser,
   its ModelConfig and the media connector a request uses): the URL is refused before any connection; without
   the generated flag, the same vLLM does connect (the control: this test can see a fetch). A listed host is
   fetched, and its redirect elsewhere is not followed.
2. Through the real gateway to the real vLLM CPU backends: chat, responses and messages requests with image
   URLs. The demo's scripted models are text-only, so vLLM refuses an image part before it would fetch one
   whatever the flag says: this level checks that nothing on the path (LiteLLM included) fetches the URL,
   not the flag (level 1 does).
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
from pathlib import Path

import httpx
import psutil
import pytest

from generator.compile.load.loader import load_plan
from generator.compile.load.media import FLAG
from generator.operate.runtime.local import VLLM_ENTRYPOINT, LocalStack

from .conftest import DEMO_MODELS, ROOT

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)  # 1x1


class Listener:
    """An HTTP server that records every connection (and answers a PNG, or a redirect to `redirect`)."""

    def __init__(self, host: str = "127.0.0.1", redirect: str | None = None):
        self.hits: list[str] = []
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                listener.hits.append(self.path)
                if redirect:
                    self.send_response(302)
                    self.send_header("Location", redirect)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PNG)))
                self.end_headers()
                self.wfile.write(PNG)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener():
    made = []

    def make(**kw) -> Listener:
        made.append(Listener(**kw))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture
def host_vllm():
    """Level 1 runs vLLM's own code on this machine (.venv-vllm), whatever gateway the session tests: against a
    deployment (GATEWAY_URL: the compose run) it would only repeat what `make test` ran."""
    if os.environ.get("GATEWAY_URL"):
        pytest.skip("runs the host's vLLM, not the deployment at GATEWAY_URL: `make test` runs it")


def _vllm_python() -> str:
    python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    if not Path(python).exists():
        pytest.fail(f"no vLLM interpreter at {python}: run `make venv-vllm`")
    return python


def probe(argv: list[str], env: dict[str, str], urls: list[str]) -> dict:
    out = subprocess.run(
        [
            _vllm_python(),
            str(ROOT / "tests/integration/media_probe.py"),
            json.dumps({"argv": argv, "env": env, "urls": urls}),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def backend_argv(plan, name: str) -> tuple[list[str], dict[str, str]]:
    """The backend's command line after the entrypoint and its environment, as the local runtime starts it."""
    m = next(m for m in plan.models if m.name == name)
    cmd = LocalStack(plan, ROOT / ".cache/media-test-state", "python")._backend(m).cmd
    return cmd[1 + len(VLLM_ENTRYPOINT) :], dict(m.env)


def without_media_flag(argv: list[str]) -> list[str]:
    i = argv.index(FLAG)
    end = i + 1
    while end < len(argv) and not argv[end].startswith("--"):
        end += 1
    return argv[:i] + argv[end:]


def host_address() -> str | None:
    """An IPv4 address of this machine other than loopback (a host a models.yml may list)."""
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


def test_vllm_started_with_the_generated_command_refuses_a_media_url_without_connecting(host_vllm, listener):
    target = listener()
    plan = load_plan(DEMO_MODELS)
    argv, env = backend_argv(plan, plan.models[0].name)
    url = f"{target.url}/cat.png"
    got = probe(argv, env, [url, url.replace("127.0.0.1", "LOCALHOST"), "http://NO-MEDIA-URLS.invalid/x.png"])
    print("\nthe generated command, media URLs:", json.dumps(got, indent=1))
    assert all(
        r.startswith("refused: ValueError: The URL must be from one of the allowed domains")
        for r in got["urls"].values()
    ), got
    assert target.hits == [], "the backend connected to a URL a client named"
    # the control: the same vLLM, the same command without the generated flag, fetches it
    control = probe(without_media_flag(argv), env, [url])
    assert control["urls"][url] == "fetched" and control["allowed_media_domains"] is None, control
    assert target.hits == ["/cat.png"]


def test_a_listed_host_is_fetched_and_its_redirect_elsewhere_is_not_followed(host_vllm, listener, tmp_path):
    host = host_address()
    if host is None:
        pytest.skip("no non-loopback IPv4 address on this machine to list as a media host")
    elsewhere = listener()  # 127.0.0.1: not listed
    listed = listener(host=host)
    redirecting = listener(host=host, redirect=f"{elsewhere.url}/secret.png")
    text = (
        DEMO_MODELS.read_text().replace("gateway:\n", "gateway:\n  backend_internet: false\n")
        + f"\n  media: {{domains: [{host}]}}\n"
    )  # the last model's own media
    (tmp_path / "models.yml").write_text(text)
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        plan = load_plan(tmp_path / "models.yml")
    finally:
        os.chdir(cwd)
    last = plan.models[-1]
    assert last.media_domains == (host,) and last.env["VLLM_MEDIA_URL_ALLOW_REDIRECTS"] == "0"
    argv, env = backend_argv(plan, last.name)
    got = probe(argv, env, [f"{listed.url}/ok.png", f"{redirecting.url}/moved.png", f"{elsewhere.url}/direct.png"])
    assert got["urls"][f"{listed.url}/ok.png"] == "fetched", got
    assert got["urls"][f"{redirecting.url}/moved.png"].startswith("refused"), got
    assert got["urls"][f"{elsewhere.url}/direct.png"].startswith("refused: ValueError"), got
    print("\nlisted host, its redirect, an unlisted host:", json.dumps(got, indent=1))
    assert listed.hits == ["/ok.png"] and redirecting.hits == ["/moved.png"] and elsewhere.hits == []


def test_through_the_gateway_no_api_fetches_a_media_url(gateway, listener):
    """Every API of the gateway, an image URL in the request: nobody (gateway or backend) connects to it."""
    target = listener()
    url = f"{target.url}/cat.png"
    model = gateway.plan.models[0].served_name
    headers = {"Authorization": f"Bearer {gateway.key}"}
    base = gateway.url.removesuffix("/v1")
    requests = {
        "/v1/chat/completions": {
            "model": model,
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in this picture?"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
        },
        "/v1/responses": {
            "model": model,
            "max_output_tokens": 16,
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is in this picture?"},
                        {"type": "input_image", "image_url": url},
                    ],
                }
            ],
        },
        "/v1/messages": {
            "model": model,
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in this picture?"},
                        {"type": "image", "source": {"type": "url", "url": url}},
                    ],
                }
            ],
        },
    }
    answers = {}
    for path, body in requests.items():
        r = httpx.post(base + path, json=body, headers=headers, timeout=120)
        answers[path] = (r.status_code, r.text[:300])
    print("\nimage URL requests through the gateway:", json.dumps(answers, indent=1))
    assert target.hits == [], f"something fetched the client's media URL: {target.hits}; answers: {answers}"
    assert all(400 <= code < 500 for code, _ in answers.values()), answers

"""generator/shipped/gateway_hooks/graceful_shutdown.py: a stopping worker answers a request a client sends it on a
connection it just accepted or on an idle keep-alive one, with `Connection: close`; the last test runs a real
uvicorn."""

from __future__ import annotations

import dataclasses
import socket
import sys
import threading
import time
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "generator/shipped/gateway_hooks"))
import graceful_shutdown
import pytest


class Cycle:
    def __init__(self, complete: bool):
        self.response_complete, self.keep_alive, self.response_started = complete, True, complete
        self.default_headers = [(b"server", b"uvicorn")]


class Transport:
    closing = False

    def is_closing(self):
        return self.closing


class Loop:
    def __init__(self):
        self.later = []

    def call_later(self, delay, fn):
        self.later.append((delay, fn))


class Protocol:
    def __init__(self, cycle):
        self.cycle, self.loop, self.transport, self.closed = cycle, Loop(), Transport(), 0

    def data_received(self, data):  # uvicorn's: a request starts a new cycle
        self.cycle = Cycle(complete=False)

    def shutdown(self):  # uvicorn's: close unless a request is in progress
        if self.cycle is None or self.cycle.response_complete:
            self.closed += 1
            self.transport.closing = True
        else:
            self.cycle.keep_alive = False


graceful_shutdown._patch(Protocol)


@pytest.mark.parametrize("cycle", [None, Cycle(complete=True)], ids=["fresh", "idle keep-alive"])
def test_a_connection_without_a_request_gets_time_for_one_answered_with_connection_close(cycle):
    p = Protocol(cycle)
    p.shutdown()
    assert p.closed == 0 and p.loop.later[0][0] == graceful_shutdown.GRACE  # uvicorn alone closes it here
    p.data_received(b"POST /v1/chat/completions ...")  # its request arrives meanwhile
    assert p.cycle.keep_alive is False and (b"connection", b"close") in p.cycle.default_headers
    p.loop.later[0][1]()
    assert p.closed == 0  # answered, then closed by uvicorn after the response


def test_a_request_before_the_shutdown_is_left_as_it_is():
    p = Protocol(None)
    p.data_received(b"GET /health ...")
    assert p.cycle.keep_alive is True and (b"connection", b"close") not in p.cycle.default_headers


def test_a_fresh_connection_that_sends_nothing_is_closed_after_the_grace():
    p = Protocol(None)
    p.shutdown()
    p.loop.later[0][1]()
    assert p.closed == 1


def test_a_busy_connection_is_closed_after_its_response_which_says_so_when_it_has_not_started():
    busy = Protocol(Cycle(complete=False))
    busy.shutdown()
    assert busy.closed == 0 and busy.cycle.keep_alive is False and not busy.loop.later
    assert (b"connection", b"close") in busy.cycle.default_headers
    streaming = Protocol(Cycle(complete=False))
    streaming.cycle.response_started = True  # its headers are sent: only the close after it
    streaming.shutdown()
    assert streaming.cycle.keep_alive is False and (b"connection", b"close") not in streaming.cycle.default_headers


def test_the_grace_outlasts_httpxs_keep_alive_expiry():
    import httpx

    assert graceful_shutdown.GRACE > httpx.Limits().keepalive_expiry  # the OpenAI SDK's and LiteLLM's client


def test_the_patch_is_applied_once_and_to_the_pinned_uvicorn():
    before = Protocol.shutdown
    graceful_shutdown._patch(Protocol)
    assert Protocol.shutdown is before
    graceful_shutdown.install()
    from uvicorn.protocols.http.h11_impl import H11Protocol

    assert H11Protocol.shutdown._answers_accepted


async def _app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _exchange(sock: socket.socket) -> bytes:
    sock.sendall(b"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n")
    data = b""
    while not data.endswith(b"ok"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_a_real_uvicorn_answers_an_idle_keep_alive_connection_after_its_shutdown_began():
    """The pinned uvicorn, the h11 protocol the gateway runs: one keep-alive request, then the server is told to stop,
    then the same connection's next request: answered (200, Connection: close), then the connection closes."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            _app,
            host="127.0.0.1",
            port=port,
            http="h11",
            lifespan="off",
            log_level="warning",
            timeout_graceful_shutdown=30,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        first = _exchange(sock)
        assert first.startswith(b"HTTP/1.1 200") and b"connection: close" not in first.lower()
        server.should_exit = True  # what SIGTERM does to an old worker in a rolling reload
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(  # the server has begun its shutdown (uvicorn alone: closed)
            getattr(c, "_gateway_stopping", False) for c in list(server.server_state.connections)
        ):
            time.sleep(0.02)
        second = _exchange(sock)
        assert second.startswith(b"HTTP/1.1 200"), second  # uvicorn alone: b"" (closed at the shutdown)
        assert b"connection: close" in second.lower(), second
        assert sock.recv(10) == b""  # closed after the answer
    thread.join(timeout=graceful_shutdown.GRACE + 10)
    assert not thread.is_alive()


def test_a_stopping_worker_lets_its_requests_run_for_an_hour_and_a_timeout_change_does_not_recreate_it(monkeypatch):
    """LiteLLM's CLI gives uvicorn GracefulShutdownManager.get_timeout() as timeout_graceful_shutdown: past it a
    stopping worker (a rolling reload) cancels what it still serves. Its default, 30 s, cut a long stream on a reload;
    the generated environment (compose, the local runtime, Kubernetes) sets an hour, whatever request_timeout says (an
    environment that followed it would recreate the gateway when it changes)."""
    from litellm.proxy.shutdown.graceful_shutdown_manager import GracefulShutdownManager

    from generator.compile.gateway_process import DRAIN_TIMEOUT, gateway_env
    from generator.compile.load.loader import load_plan

    monkeypatch.delenv("GRACEFUL_SHUTDOWN_TIMEOUT", raising=False)
    assert GracefulShutdownManager.get_timeout() == 30  # LiteLLM 1.108.7's default, shorter than a long answer
    gateway = load_plan(Path(__file__).resolve().parents[2] / "models.yml").gateway
    for name, value in gateway_env(gateway).items():
        monkeypatch.setenv(name, value)
    assert GracefulShutdownManager.get_timeout() == DRAIN_TIMEOUT == 3600
    assert gateway_env(dataclasses.replace(gateway, request_timeout=5)) == gateway_env(gateway)

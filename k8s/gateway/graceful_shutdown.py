# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""A worker that is being stopped answers every request a client sends it in the next seconds (uvicorn 0.54.0, pinned).

uvicorn's graceful shutdown (a rolling reload of the workers, a pod or container stop) stops accepting,
lets every request in progress finish (a stream runs to its end), but closes at once every connection
that has no request in progress: one it accepted a moment ago whose request it has not read yet, and an
idle keep-alive connection, on which the client may be sending its next request at that very moment.
Either client gets "Server disconnected without sending a response" (or a reset), for a request the
gateway never read: measured 1 of ~150 fresh-connection requests during a compose reload, and 2 requests
of two keep-alive OpenAI-SDK clients (no retries) over two reloads of the local stack.

Here such a connection gets GRACE seconds: a request that arrives on it is answered with `Connection:
close` (the client opens its next connection to a worker that is not stopping), and the connection is
closed once the response is sent; a connection that sends nothing is closed after GRACE. A response in
progress whose headers are not sent yet says `Connection: close` too (uvicorn closes after it without
saying so, and a client may reuse the connection in that instant). A stopping worker therefore exits at
most GRACE seconds later than it would. Imported by gateway_guard, so every worker patches itself at start.
"""

from __future__ import annotations

# seconds a connection without a request in progress has to send one once its worker stops: longer than httpx's
# keep-alive expiry (5 s; the OpenAI SDK, LiteLLM), so a connection closed here is one such a client no longer reuses
GRACE = 6.0
CLOSE = (b"connection", b"close")


def _in_progress(cycle) -> bool:
    return cycle is not None and not cycle.response_complete


def _closing(cycle) -> None:
    """The response of `cycle` ends its connection, and says so before it starts (`Connection: close`)."""
    cycle.keep_alive = False
    if not cycle.response_started and CLOSE not in cycle.default_headers:
        cycle.default_headers = [*cycle.default_headers, CLOSE]


def _patch(protocol_class) -> None:
    original = protocol_class.shutdown
    if getattr(original, "_answers_accepted", False):
        return
    received = protocol_class.data_received

    def shutdown(self) -> None:
        if _in_progress(self.cycle):  # a request in progress: answered, then closed (uvicorn), and says so if it can
            original(self)
            _closing(self.cycle)
            return
        self._gateway_stopping = True  # no request in progress: fresh, or an idle keep-alive connection

        def later() -> None:  # a request arrived and is running: it closes after its response; else close now
            if not _in_progress(self.cycle) and not self.transport.is_closing():
                original(self)

        self.loop.call_later(GRACE, later)

    def data_received(self, data: bytes) -> None:
        received(self, data)  # parses the request; a new one gets its cycle here, before its app runs
        if getattr(self, "_gateway_stopping", False) and _in_progress(self.cycle):
            _closing(self.cycle)

    shutdown._answers_accepted = True  # type: ignore[attr-defined]  # a marker on the function: patched once
    protocol_class.shutdown = shutdown
    protocol_class.data_received = data_received


def install() -> None:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    _patch(H11Protocol)
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools not installed (the gateway image and venv): h11 only
        return
    _patch(HttpToolsProtocol)


install()

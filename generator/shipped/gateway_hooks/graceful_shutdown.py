"""A worker that is being stopped answers the requests it has already accepted (uvicorn 0.54.0, pinned).

uvicorn's graceful shutdown (a rolling reload of the workers, a pod or container stop) stops accepting,
lets every request in progress finish (a stream runs to its end), but closes at once every connection
that has no request in progress, including one it accepted a moment ago whose request it has not read
yet: that client gets "Server disconnected without sending a response". Measured on the CPU compose
stack: 1 of ~150 requests sent during a rolling reload. Here such a connection gets GRACE seconds for its
request, which is then answered (and the connection closed after it). Idle keep-alive connections are
closed at once, as before. Imported by gateway_guard, so every worker patches itself at start.
"""

from __future__ import annotations

GRACE = 3.0  # seconds a freshly accepted connection has to send its request once the worker stops


def _patch(protocol_class) -> None:
    original = protocol_class.shutdown
    if getattr(original, "_answers_accepted", False):
        return

    def shutdown(self) -> None:
        if self.cycle is not None:  # a request in progress, or an idle keep-alive connection: as uvicorn does
            original(self)
            return

        def later() -> None:  # its request arrived and is running: close after the response; else close now
            if self.cycle is not None and not self.cycle.response_complete:
                self.cycle.keep_alive = False
            elif not self.transport.is_closing():
                original(self)

        self.loop.call_later(GRACE, later)

    shutdown._answers_accepted = True
    protocol_class.shutdown = shutdown


def install() -> None:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    _patch(H11Protocol)
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools not installed (the gateway image): h11 only
        return
    _patch(HttpToolsProtocol)


install()

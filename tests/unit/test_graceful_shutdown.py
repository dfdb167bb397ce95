"""generator/shipped/gateway_hooks/graceful_shutdown.py: a stopping worker answers a connection it just accepted."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "generator/shipped/gateway_hooks"))
import graceful_shutdown  # noqa: E402


class Cycle:
    def __init__(self, complete: bool):
        self.response_complete, self.keep_alive = complete, True


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

    def shutdown(self):  # uvicorn's: close unless a request is in progress
        if self.cycle is None or self.cycle.response_complete:
            self.closed += 1
            self.transport.closing = True
        else:
            self.cycle.keep_alive = False


graceful_shutdown._patch(Protocol)


def test_a_fresh_connection_gets_time_for_its_request_and_is_answered():
    p = Protocol(None)
    p.shutdown()
    assert p.closed == 0 and p.loop.later[0][0] == graceful_shutdown.GRACE  # uvicorn alone closes it here
    p.cycle = Cycle(complete=False)  # its request arrived meanwhile
    p.loop.later[0][1]()
    assert p.closed == 0 and p.cycle.keep_alive is False  # answered, then closed


def test_a_fresh_connection_that_sends_nothing_is_closed_after_the_grace():
    p = Protocol(None)
    p.shutdown()
    p.loop.later[0][1]()
    assert p.closed == 1


def test_idle_keep_alive_and_busy_connections_are_handled_as_uvicorn_does():
    idle, busy = Protocol(Cycle(complete=True)), Protocol(Cycle(complete=False))
    idle.shutdown(), busy.shutdown()
    assert idle.closed == 1 and not idle.loop.later
    assert busy.closed == 0 and busy.cycle.keep_alive is False


def test_the_patch_is_applied_once_and_to_the_pinned_uvicorn():
    before = Protocol.shutdown
    graceful_shutdown._patch(Protocol)
    assert Protocol.shutdown is before
    graceful_shutdown.install()
    from uvicorn.protocols.http.h11_impl import H11Protocol
    assert H11Protocol.shutdown._answers_accepted

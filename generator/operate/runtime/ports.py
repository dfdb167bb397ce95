"""Free loopback ports for what a local stack starts on ports of its own choosing (its Redis, the gateway's
metrics port, the test suite's stacks): random picks from a range below the kernel's ephemeral range.

Why not the kernel's pick (bind to port 0): every bind(0) and every outgoing connection on the machine draws from
the ephemeral range (32768-60999 on Linux), and a port picked that way is free only until someone else draws it.
vLLM itself picks its engine's ports with bind(0) and binds them seconds later; a test session on two pytest-xdist
workers picks for one stack while the other starts a dozen servers. A picked port that a backend binds only when it
is loaded on demand, minutes later, was then answered by another test's server. Below the ephemeral range nobody
draws at random but us; `FREE_PORT_RANGE` narrows it (tests/conftest.py gives each xdist worker its own slice).
"""

from __future__ import annotations

import os
import random
import socket

DEFAULT_RANGE = (20000, 32767)  # inclusive; Linux's ephemeral range starts at 32768 (ip_local_port_range)
RANGE_ENV = "FREE_PORT_RANGE"  # "LOW-HIGH", inclusive: where this process picks
TRIES = 2000
_handed_out: set[int] = set()  # this process never hands out one port twice (a pick is bound later, by a child)


def port_range() -> tuple[int, int]:
    """(low, high), inclusive: FREE_PORT_RANGE, else DEFAULT_RANGE."""
    value = os.environ.get(RANGE_ENV, "")
    if not value:
        return DEFAULT_RANGE
    try:
        low, high = (int(part) for part in value.split("-"))
    except ValueError:
        raise ValueError(f"{RANGE_ENV}={value!r}: expected LOW-HIGH, e.g. 20000-26383") from None
    if not 1024 <= low <= high <= 65535:
        raise ValueError(f"{RANGE_ENV}={value!r}: expected 1024 <= LOW <= HIGH <= 65535")
    return low, high


def _bindable(port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
        return sock
    except OSError:
        sock.close()
        return None


def free_ports(count: int) -> list[int]:
    """`count` different loopback ports nobody listens on now, never one this process handed out before; all are
    held while picking, so they differ."""
    low, high = port_range()
    held: list[socket.socket] = []
    found: list[int] = []
    try:
        for _ in range(TRIES):
            port = random.randint(low, high)
            if port in _handed_out or port in found:
                continue
            if (sock := _bindable(port)) is not None:
                held.append(sock)
                found.append(port)
                if len(found) == count:
                    _handed_out.update(found)
                    return found
    finally:
        for sock in held:
            sock.close()
    raise OSError(f"no {count} free port(s) found in {TRIES} random tries in {low}-{high} ({RANGE_ENV})")


def free_port() -> int:
    """One loopback port nobody listens on now (see free_ports)."""
    return free_ports(1)[0]


def consecutive_free_ports(count: int) -> int:
    """The first of `count` consecutive free loopback ports (a model with `replicas: N` and `port: P` listens on
    P..P+N-1), none handed out before."""
    low, high = port_range()
    for _ in range(TRIES):
        first = random.randint(low, max(low, high - count + 1))
        ports = range(first, first + count)
        if ports[-1] > high or any(p in _handed_out for p in ports):
            continue
        held = [sock for p in ports if (sock := _bindable(p)) is not None]
        for sock in held:
            sock.close()
        if len(held) == count:
            _handed_out.update(ports)
            return first
    raise OSError(f"no {count} consecutive free ports found in {TRIES} random tries in {low}-{high} ({RANGE_ENV})")

"""The gateway worker's garbage collection: never inside an allocation, only at points where a collection is safe.

CPython 3.10/3.11 can crash in the contextvars HAMT: an automatic garbage collection starts inside whatever allocates
a container, so it can run while ContextVar.set allocates a HAMT node; a finalizer or weakref callback of that
collection that sets a context variable again frees the node being copied (python/cpython#148891; fix proposed in
PR #148928; this machine's 3.11.7 and the gateway image's Debian 3.11.2 have it; 3.12 runs collections between
bytecodes instead and is not affected). Gateway workers died of it (SIGSEGV in hamt_node_bitmap_assoc) in CI runs
under the fuzz test's load, cutting the requests they held; collecting less often (gen0 after 50,000 allocations)
only made it rarer (docs/limits.md).

So a gateway worker does what 3.12 does: automatic collection is off (`gc.disable()`; CPython still counts
allocations), and `collect_if_due()` collects, by CPython's generational rule on these thresholds (without its
guard that skips a full collection while few objects are new to the oldest generation), from places that allocate
no HAMT node: the request guard's first line on every request, and a timer on the worker's event loop
every TICK seconds (LiteLLM's background tasks make garbage between requests too). The objects of the imports so far
(LiteLLM, the hooks) are frozen: no collection traverses them again. Only in a process gateway_serve.py started
(`served()`) and on a running event loop: any other process that imports the hooks (a unit test) keeps CPython's
collector. Standard library only.
"""

from __future__ import annotations

import asyncio
import gc
import os

from gateway_serve import served  # beside this file (standard library only)

THRESHOLDS = (50_000, 10, 10)  # gen0 after 50,000 net container allocations (CPython: 700): a LiteLLM request makes
# thousands, so a collection every few requests instead of several per request; gen1 and gen2 as CPython's
TICK = 1.0  # seconds between the event loop's own checks

_armed_in: int | None = None  # the pid whose event loop runs the timer (a forked process arms its own)


def collect_if_due() -> int | None:
    """Collect the oldest generation whose count is past its threshold (CPython's rule, without its guard on full
    collections), if any; which one."""
    counts = gc.get_count()
    if counts[0] < THRESHOLDS[0]:
        return None
    generation = 0
    while generation < 2 and counts[generation + 1] >= THRESHOLDS[generation + 1]:
        generation += 1
    gc.collect(generation)
    return generation


def _tick(loop: asyncio.AbstractEventLoop) -> None:
    collect_if_due()
    loop.call_later(TICK, _tick, loop)


def arm() -> bool:
    """In a gateway worker (gateway_serve.served()) on its running event loop: freeze what is imported, turn
    automatic collection off and start the loop's timer, once per process. False when not armed (CPython's own)."""
    global _armed_in
    if _armed_in == os.getpid():
        return True
    if not served():
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    _armed_in = os.getpid()
    gc.freeze()
    gc.disable()
    loop.call_later(TICK, _tick, loop)
    return True


def safe_point() -> None:
    """Where the request guard starts each request: arm if the import could not, and collect if due."""
    if arm():
        collect_if_due()


arm()  # LiteLLM imports the hooks in its start-up, on the worker's loop; else the guard's first request arms it

"""The gateway worker's garbage collector settings, applied on import (gateway_guard imports this in every worker).

CPython 3.10/3.11 can crash in the contextvars HAMT: a garbage collection that runs while ContextVar.set allocates
a HAMT node, and a finalizer or weakref callback of that collection setting a context variable again, frees the
node being copied (python/cpython#148891; fix proposed in PR #148928; this machine's 3.11.7 and the gateway
image's Debian 3.11.2 have it). A gateway worker died of it (SIGSEGV in hamt_node_bitmap_assoc, the same
instruction both times) in two CI runs under the fuzz test's load, cutting the requests it held (docs/limits.md).
Fewer collections make that window rarer: the youngest generation is collected after THRESHOLD0 net container
allocations instead of CPython's 700 (a LiteLLM request allocates thousands: several collections per request
before, one every few requests now); reference counting still frees at once everything outside a cycle. And the
objects of the imports so far (LiteLLM, the hooks) are frozen: no collection traverses them again. A mitigation,
not the fix; the fix is CPython's. Standard library only.
"""

from __future__ import annotations

import gc

THRESHOLD0 = 50_000


def apply() -> None:
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(THRESHOLD0, older, oldest)


apply()

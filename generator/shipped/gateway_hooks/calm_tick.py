"""uvicorn's server loop woken once a second instead of ten times, its exit still seen at once.

uvicorn 0.54's ``Server.main_loop`` sleeps 0.1 s between ticks: ten wake-ups a second in every idle server, to check
``should_exit`` and, every tenth tick, to renew the Date header. Measured on this project's 2-core VM, an idle bare
uvicorn app used 1.6-2.2 % of a core (each wake-up ~1.6 ms of CPU, cold), as much as an idle vLLM API server's
whole idle cost: the stack runs one uvicorn per gateway worker and per vLLM backend, and a CI run keeps several of
them idle for most of its 20 minutes (docs/testing.md, "Idle CPU").

`calm(Server)` makes the loop tick every INTERVAL (1 s), each tick a tenth one (Date header and uvicorn's request
limit as before: renewed each second). ``should_exit`` becomes a property whose setter wakes the loop, so a signal
(uvicorn's own handler sets it), vLLM's watchdog or LiteLLM setting it ends the loop as promptly as before, not up
to a second later. Applied by gateway_serve.py (the gateway's workers) and cpu_backend_patches.py (the CPU examples'
vLLM backends). Standard library only; a uvicorn whose Server has no ``main_loop``/``on_tick`` is left as it is.
"""

from __future__ import annotations

import asyncio
from typing import Any

INTERVAL = 1.0  # seconds between ticks (uvicorn: 0.1)
TICKS_PER_SECOND = 10  # uvicorn's: on_tick renews the Date header when counter % 10 == 0
WRAP = 864000  # uvicorn's counter wraps here


def calm(server_cls: Any, interval: float = INTERVAL) -> bool:
    """Patch uvicorn's Server class (once); False when its loop is not the one this knows."""
    if getattr(server_cls, "_calm_tick", False):
        return True
    if not callable(getattr(server_cls, "main_loop", None)) or not callable(getattr(server_cls, "on_tick", None)):
        return False
    if isinstance(getattr(server_cls, "should_exit", None), property):
        return False  # someone else's property: leave it

    async def main_loop(self: Any) -> None:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        self.__dict__["_calm_wake"] = (loop, wake)
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + TICKS_PER_SECOND) % WRAP
            if not self.should_exit:  # set between two ticks: on at once
                try:
                    await asyncio.wait_for(wake.wait(), interval)
                except TimeoutError:
                    pass
            should_exit = await self.on_tick(counter)

    def get_should_exit(self: Any) -> bool:
        return self.__dict__.get("_calm_should_exit", False)

    def set_should_exit(self: Any, value: bool) -> None:
        self.__dict__["_calm_should_exit"] = value
        waiting = self.__dict__.get("_calm_wake")
        if value and waiting is not None:
            loop, wake = waiting
            try:  # from a signal handler or another thread as well as from the loop itself
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop has closed: nothing waits
                pass

    server_cls.main_loop = main_loop
    server_cls.should_exit = property(get_should_exit, set_should_exit)
    server_cls._calm_tick = True
    return True

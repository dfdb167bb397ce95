# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
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
vLLM backends). `calm_parent` does the same for the gateway's uvicorn parent (gateway_serve.py). Standard library
only; a uvicorn whose classes are not the ones this knows is left as it is.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Any

INTERVAL = 1.0  # seconds between ticks (uvicorn: 0.1)
PARENT_INTERVAL = 2.0  # seconds between the parent's looks at its signals and workers (uvicorn: 0.5)
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


def calm_parent(multiprocess_cls: Any, signals: Any, logger: Any, interval: float = PARENT_INTERVAL) -> bool:
    """Patch uvicorn's parent of several workers (uvicorn.supervisors.multiprocess.Multiprocess, once): it looks at
    its signals and its workers every `interval` s instead of every 0.5 s (each look pings every worker over a pipe,
    which wakes the worker's pong thread too: a 2-worker gateway's parent woke 5.5 times a second), and a signal
    wakes it at once, so SIGHUP (a reload) and SIGTERM are handled as promptly as before. A worker that died is
    replaced at the next look (within `interval`). `signals`: uvicorn's SIGNALS (the ones it handles); `logger`:
    uvicorn's, for its own start and stop lines. False when the class is not the one this knows."""
    if getattr(multiprocess_cls, "_calm_tick", False):
        return True
    needed = ("run", "init_processes", "handle_signals", "keep_subprocess_alive", "terminate_all", "join_all")
    if not all(callable(getattr(multiprocess_cls, name, None)) for name in needed):
        return False
    init = multiprocess_cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        wake = self.__dict__["_calm_wake"] = threading.Event()
        queue = self.signal_queue

        def queued(sig: int, frame: Any) -> None:
            queue.append(sig)
            wake.set()

        for sig in signals:
            signal.signal(sig, queued)

    def run(self: Any) -> None:
        logger.info(f"Started parent process [{os.getpid()}]")
        self.init_processes()
        wake = self._calm_wake
        while not self.should_exit.is_set():
            wake.wait(interval)
            wake.clear()  # before the queue is read: a signal from now on wakes the next wait
            self.handle_signals()
            self.keep_subprocess_alive()
        self.terminate_all()
        self.join_all()
        logger.info(f"Stopping parent process [{os.getpid()}]")

    multiprocess_cls.__init__ = __init__
    multiprocess_cls.run = run
    multiprocess_cls._calm_tick = True
    return True

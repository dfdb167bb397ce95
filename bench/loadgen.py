"""Load generation with aiohttp: sequential (closed loop, one at a time) and open loop at a fixed rate.

Open loop: request i is due at start + i/rate whatever happened to earlier ones, and its latency
runs from that due time, so a slow gateway cannot slow the clock (no coordinated omission).
For a stream the latency is the time to the first body chunk; the rest is read and checked too (it must hold the API's
end of stream: chat's [DONE], the Responses API's response.completed, Anthropic's message_stop).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass

import aiohttp

from .procs import tree_cpu_s
from .stats import PointStats, point_stats


@dataclass(frozen=True)
class Target:
    url: str
    headers: dict[str, str]
    body: bytes
    stream: bool
    end: bytes = b"[DONE]"  # what ends a whole stream of this API (bench.apis.STREAM_END)


class LoadGen:
    def __init__(self, timeout_s: float = 10.0, max_connections: int = 512):
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.max_connections = max_connections
        self.session: aiohttp.ClientSession | None = None
        self.failures: Counter[str] = Counter()  # what went wrong, for the report

    async def __aenter__(self) -> LoadGen:
        # idle connections are dropped before uvicorn's 5 s keep-alive ends, so a request never
        # goes out on a connection the server is closing (a client-side race, not a gateway error)
        connector = aiohttp.TCPConnector(limit=self.max_connections, keepalive_timeout=3)
        self.session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
        return self

    async def __aexit__(self, *exc) -> None:
        if self.session is not None:
            await self.session.close()

    @property
    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            raise RuntimeError("LoadGen sends requests only inside `async with LoadGen() as gen`")
        return self.session

    async def _one(self, target: Target, due: float) -> float | None:
        """Seconds from `due` to the answer (stream: to its first chunk); None for any failure."""
        try:
            async with self._session.post(target.url, data=target.body, headers=target.headers) as resp:
                if target.stream:
                    first = await resp.content.readany()
                    latency = time.perf_counter() - due
                    rest = await resp.read()
                    ok = resp.status == 200 and target.end in first + rest
                else:
                    await resp.read()
                    latency = time.perf_counter() - due
                    ok = resp.status == 200
                if not ok:
                    self.failures[f"HTTP {resp.status}"] += 1
                return latency if ok else None
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            self.failures[type(e).__name__] += 1
            return None

    async def latencies(self, target: Target, count: int) -> tuple[list[float], int]:
        """One request at a time: (latencies in seconds of the answered ones, number of failures)."""
        latencies, errors = [], 0
        for _ in range(count):
            result = await self._one(target, time.perf_counter())
            if result is None:
                errors += 1
            else:
                latencies.append(result)
        return latencies, errors

    async def sequential(self, target: Target, count: int) -> PointStats:
        start = time.perf_counter()
        latencies, errors = await self.latencies(target, count)
        return point_stats(0, latencies, errors, time.perf_counter() - start)

    async def open_loop(self, target: Target, rate: float, duration_s: float) -> PointStats:
        count = max(1, int(rate * duration_s))
        start = time.perf_counter() + 0.01
        tasks = []
        for i in range(count):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self._one(target, due)))
        results = await asyncio.gather(*tasks)
        window = max(time.perf_counter() - start, duration_s)
        latencies = [r for r in results if r is not None]
        return point_stats(rate, latencies, len(results) - len(latencies), window)

    async def closed_loop(self, target: Target, concurrency: int, duration_s: float) -> PointStats:
        """`concurrency` requests always in flight for `duration_s`: the rate an arm sustains (capacity)."""
        latencies: list[float] = []
        errors = 0
        start = time.perf_counter()
        stop = start + duration_s

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < stop:
                result = await self._one(target, time.perf_counter())
                if result is None:
                    errors += 1
                else:
                    latencies.append(result)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return point_stats(0, latencies, errors, time.perf_counter() - start)

    async def closed_loop_cpu(
        self, target: Target, concurrency: int, duration_s: float, pid: int | None
    ) -> tuple[PointStats, float]:
        """closed_loop, and the CPU seconds process `pid` and its children used meanwhile (0 without a pid)."""
        before = tree_cpu_s(pid) if pid else 0.0
        stats = await self.closed_loop(target, concurrency, duration_s)
        return stats, (tree_cpu_s(pid) - before) if pid else 0.0

    async def open_loop_cpu(
        self, target: Target, rate: float, duration_s: float, pid: int | None
    ) -> tuple[PointStats, float]:
        """open_loop, and the CPU seconds process `pid` and its children used meanwhile."""
        before = tree_cpu_s(pid) if pid else 0.0
        stats = await self.open_loop(target, rate, duration_s)
        return stats, (tree_cpu_s(pid) - before) if pid else 0.0

    async def warm_up(self, target: Target, count: int = 50) -> None:
        await asyncio.gather(*(self._one(target, time.perf_counter()) for _ in range(count)))

"""Copies that follow the load (models.yml `replicas: {min, max}`, docs/replicas.md): which copies of a model serve
now, as the on-demand controller says, so that replica_routing.py never picks a copy that is stopped, starting or
draining, and picks a new copy as soon as it serves.

A copy above min is reached through the controller (its api_base is ``http://<controller>/m/<copy>/v1``); the
controller's ``GET /status`` holds, per scaled model, each copy's state (``running``, ``starting``, ``draining``,
``stopped``, ``failed``) and which copies only the load starts (``by_load``). A by-load copy that is not running is left
out of the routing choice. The answer is kept CACHE_SECONDS per process (every worker asks on its own: the controller
is the one authority, nothing is shared between workers here); a controller that does not answer within TIMEOUT
leaves every copy in (the controller then refuses a copy that is not serving with a 503, which the router retries
on another copy: the way without this module).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping

import httpx

CACHE_SECONDS = 1.0
TIMEOUT = 0.5
_THROUGH_CONTROLLER = re.compile(r"^(https?://[^/]+)/m/([^/]+)/v1/?$")

Fetch = Callable[[str], Awaitable[dict | None]]


def controller_of(deployment: Mapping) -> tuple[str, str] | None:
    """(the controller's root, the copy's name) of a deployment the gateway reaches through the controller."""
    params = deployment.get("litellm_params")
    base = params.get("api_base") if isinstance(params, Mapping) else None
    match = _THROUGH_CONTROLLER.match(str(base or ""))
    return (match.group(1), match.group(2)) if match else None


def not_serving(status: Mapping) -> set[str]:
    """The by-load copies the controller's /status says are not running."""
    out: set[str] = set()
    for model in (status.get("scaling") or {}).values():
        copies = model.get("copies") or {}
        out |= {name for name in model.get("by_load") or () if copies.get(name) != "running"}
    return out


async def _get(url: str) -> dict | None:
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            r = await client.get(url)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


class Serving:
    def __init__(self, fetch: Fetch = _get, clock: Callable[[], float] = time.monotonic) -> None:
        self.fetch, self.clock = fetch, clock
        self._cache: dict[str, tuple[float, set[str]]] = {}

    async def left_out(self, deployments: list) -> set[str]:
        """Names of the copies among `deployments` that are not serving now (empty when nothing is known)."""
        roots = {c[0] for d in deployments if isinstance(d, Mapping) and (c := controller_of(d))}
        out: set[str] = set()
        for root in roots:
            at, names = self._cache.get(root, (float("-inf"), set()))
            if self.clock() - at >= CACHE_SECONDS:
                status = await self.fetch(f"{root}/status")
                names = not_serving(status) if status is not None else set()
                self._cache[root] = (self.clock(), names)
            out |= names
        return out

# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make k8s`.
"""The stack's Redis as the gateway's hooks reach it (people's budgets, the replicas' placement).

The address and password come from the gateway's environment, the same variables LiteLLM's coordination Redis
reads (REDIS_HOST / REDIS_PORT / REDIS_PASSWORD: generator/compile/gateway_process.py writes them); a stack that
needs no Redis (loader.needs_redis) has no REDIS_HOST. `redis` is a LiteLLM dependency.
"""

from __future__ import annotations

import os
from typing import Any


def client(timeout: float) -> Any:
    """A new asyncio client of the stack's Redis (connects on first use), or None when the stack has none.
    `timeout`: seconds for connecting and for each reply."""
    if not os.environ.get("REDIS_HOST"):
        return None
    import redis.asyncio as aioredis

    return aioredis.Redis(
        host=os.environ["REDIS_HOST"],
        port=int(os.environ.get("REDIS_PORT") or 6379),
        password=os.environ.get("REDIS_PASSWORD") or None,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )

"""What every bench command sets up first: the bench plan, the CPU split, nginx; torn down after."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from generator.compile.load.loader import load_plan
from generator.compile.plan import Plan

from .mock import NginxMock

# another models.yml (other ports) so two benches can run on one machine: BENCH_MODELS=... make bench
MODELS = Path(os.environ.get("BENCH_MODELS") or Path(__file__).with_name("models.yml"))


# every CPU this run may use, read before bench_session pins the load generator (whose children inherit
# its affinity): a gateway meant to run on every CPU is started with this set explicitly
ALL_CPUS = frozenset(os.sched_getaffinity(0))


def split_cpus() -> tuple[frozenset[int] | None, frozenset[int] | None]:
    """(load generator + mock, gateway): half the CPUs each, so they do not take turns on one core."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    half = len(cpus) // 2
    return frozenset(cpus[:half]), frozenset(cpus[half:])


def model_port(plan: Plan, name: str) -> int:
    return next(m.port for m in plan.models if m.name == name)


@contextmanager
def bench_session(models: Path, state_dir: Path) -> Iterator[tuple[Plan, frozenset[int] | None, frozenset[int] | None]]:
    """Load the bench models.yml, pin this process (the load generator) to the client CPUs and start
    nginx on them; yields (plan, client CPUs, gateway CPUs). Raises ConfigError or MockError.
    SIGTERM ends the run through the clean-up, so no nginx or gateway is left behind."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    plan = load_plan(models)
    client_cpus, gateway_cpus = split_cpus()
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    with NginxMock(
        state_dir / "nginx", model_port(plan, "mock"), model_port(plan, "mock-stream"), set(client_cpus or ())
    ):
        yield plan, client_cpus, gateway_cpus

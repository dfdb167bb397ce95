"""Start LiteLLM's proxy with its worker count resolved where it runs: ``python3 gateway_start.py ARGS...``.

The gateway container (official ghcr.io/berriai/litellm image or the local one) and the local runtime
run this file, shipped beside the hooks, instead of the ``litellm`` CLI. It replaces
``--num_workers auto`` with the number of CPUs this process may use, found here, at start (not on the
machine that generated the files): its CPU affinity (cpuset, taskset) and its cgroup's CPU quota (v2
``cpu.max`` or v1 ``cpu.cfs_quota_us``, e.g. compose ``cpus:`` or a Kubernetes CPU limit), capped by
what its memory budget holds (the cgroup memory limit, else the host's available memory) at the
measured resident size of a LiteLLM worker (bench/README.md). An explicit number is kept as it is.
It prints one line naming the count and why, then runs LiteLLM's proxy CLI (what the image's ``litellm``
command runs) in this process with the same arguments, its workers forked from a fork server that imported
LiteLLM once (gateway_serve.py beside it).
Standard library only: it runs before LiteLLM.

The gateway's metrics process (GATEWAY_METRICS_PORT set) is started here too, beside LiteLLM rather than by
it: gateway_metrics.py, shipped beside this file, serving the workers' PROMETHEUS_MULTIPROC_DIR. LiteLLM's CLI
can start its own (``--prometheus_metrics_port``) but waits at most 30 s (a constant) for it to answer before
it starts any worker, and exits when that passes: on a busy box (CI: a gateway pinned to one core that vLLM
starts shared) that server's import of LiteLLM alone took longer, and the gateway never started. Started
here, it serves at once and the gateway's start waits on nothing; the supervisor keeps it across gateway
restarts. Without prometheus_client in this interpreter, LiteLLM's CLI is asked to start its own instead.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import tempfile

# Measured (bench/README.md, "Workers"; docs/pins.md): with --num_workers N > 1 the parent process (it
# imports the whole proxy too) and multiprocessing's resource tracker hold ~330 MiB; each uvicorn worker
# ~325 MiB at start, and on LiteLLM 1.108.7 403-409 MiB after the coding agents' tests (1.103.7: ~365 MiB
# after a 10-minute soak). 450 MiB keeps ~10 % headroom over that peak.
PARENT_MIB = 350
WORKER_MIB = 450
MAX_AUTO_WORKERS = 64  # gateway.workers' own upper bound
UNLIMITED = 2**60  # a cgroup v1 "no limit" is 2**63 rounded down to a page


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _cgroup_dirs(root: str) -> tuple[list[str], list[str]]:
    """(v2 directories, v1 cpu-controller directories) of this process's cgroup and its parents, deepest
    first. Inside a container with its own cgroup namespace the path is "/", i.e. the mount root."""
    v2: list[str] = []
    v1: list[str] = []
    for line in (_read(f"{root}/proc/self/cgroup") or "").splitlines():
        hier, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hier == "0" and controllers == "":
            base = f"{root}/sys/fs/cgroup"
            target = v2
        elif "cpu" in controllers.split(","):
            base = next(
                (
                    f"{root}/sys/fs/cgroup/{d}"
                    for d in ("cpu,cpuacct", "cpu", "cpuacct,cpu")
                    if os.path.isdir(f"{root}/sys/fs/cgroup/{d}")
                ),
                f"{root}/sys/fs/cgroup/cpu",
            )
            target = v1
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            d = "/".join([base, *parts[:depth]])
            if os.path.isdir(d) and d not in target:
                target.append(d)
    return v2, v1


def cpu_quota(root: str = "") -> float | None:
    """The tightest CPU quota on this process's cgroup or its parents, in CPUs; None when there is none."""
    v2, v1 = _cgroup_dirs(root)
    quotas = []
    for d in v2:
        parts = (_read(f"{d}/cpu.max") or "max").split()
        if parts[0] != "max" and len(parts) == 2 and float(parts[1]) > 0:
            quotas.append(float(parts[0]) / float(parts[1]))
    for d in v1:
        quota, period = _read(f"{d}/cpu.cfs_quota_us"), _read(f"{d}/cpu.cfs_period_us")
        if quota and period and int(quota) > 0 and int(period) > 0:
            quotas.append(int(quota) / int(period))
    return min(quotas) if quotas else None


def memory_limit(root: str = "") -> int | None:
    """The tightest cgroup memory limit in bytes (v2 memory.max, v1 memory.limit_in_bytes); None for none."""
    limits = []
    v2, _ = _cgroup_dirs(root)
    for d in v2:
        value = _read(f"{d}/memory.max")
        if value and value != "max":
            limits.append(int(value))
    for line in (_read(f"{root}/proc/self/cgroup") or "").splitlines():
        hier, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            parts = [p for p in path.split("/") if p]
            for depth in range(len(parts), -1, -1):
                value = _read("/".join([f"{root}/sys/fs/cgroup/memory", *parts[:depth], "memory.limit_in_bytes"]))
                if value and int(value) < UNLIMITED:
                    limits.append(int(value))
    return min(limits) if limits else None


def available_memory(root: str = "") -> int | None:
    """The host's MemAvailable in bytes (what this process could take without a cgroup limit)."""
    for line in (_read(f"{root}/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def affinity() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def auto_workers(cpus: int, quota: float | None, mem_limit: int | None, mem_available: int | None) -> tuple[int, str]:
    """(workers, why): one per usable CPU (affinity, and the quota rounded up), at most what memory holds."""
    usable = cpus if quota is None else max(1, min(cpus, math.ceil(quota - 1e-9)))
    why = f"{cpus} CPUs in its affinity" + ("" if quota is None else f", cgroup CPU quota {quota:g}")
    budget, source = (
        (mem_limit, "cgroup memory limit") if mem_limit is not None else (mem_available, "available memory")
    )
    workers = min(usable, MAX_AUTO_WORKERS)
    if budget is not None:
        fits = max(1, (budget // 2**20 - PARENT_MIB) // WORKER_MIB)
        why += f"; {source} {budget / 2**30:.1f} GiB holds {fits} at {WORKER_MIB} MiB each"
        workers = min(workers, fits)
    return workers, why


def resolve(args: list[str], root: str = "") -> tuple[list[str], str]:
    """The arguments with `--num_workers auto` replaced by a number, and the line that says which and why."""
    args = list(args)
    at = args.index("--num_workers") + 1 if "--num_workers" in args else None
    if at is None or at >= len(args):
        return args, "gateway: 1 worker (LiteLLM's default: no --num_workers)"
    if args[at] != "auto":
        return args, f"gateway: {args[at]} worker(s) (gateway.workers: {args[at]} in models.yml)"
    n, why = auto_workers(affinity(), cpu_quota(root), memory_limit(root), available_memory(root))
    args[at] = str(n)
    return args, f"gateway: {n} worker(s) (gateway.workers: auto: {why})"


METRICS_PORT_ENV = (
    "GATEWAY_METRICS_PORT"  # set by the generator (gateway_process.metrics_env); read by gateway_status.py
)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # where each worker writes its samples (prometheus_client's variable)
LITELLM_PORT_ENV = "PROMETHEUS_METRICS_PORT"  # LiteLLM's CLI: --prometheus_metrics_port (it then starts its server)
# LiteLLM's own default for the folder (proxy_cli.maybe_setup_prometheus_multiproc_dir); it wipes it at every start
DEFAULT_MULTIPROC = os.path.join(tempfile.gettempdir(), "litellm_prometheus_multiproc")
HERE = os.path.dirname(os.path.abspath(__file__))


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args[:-1] else None


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def metrics_command(args: list[str], env: dict[str, str]) -> list[str] | None:
    """gateway_metrics.py on GATEWAY_METRICS_PORT, on the gateway's own --host (LiteLLM's: HOST, else
    0.0.0.0), serving env's PROMETHEUS_MULTIPROC_DIR; None when the gateway serves no metrics."""
    port = env.get(METRICS_PORT_ENV)
    if not port:
        return None
    host = option(args, "--host") or env.get("HOST") or "0.0.0.0"
    return [
        sys.executable,
        os.path.join(HERE, "gateway_metrics.py"),
        "--host",
        host,
        "--port",
        port,
        "--dir",
        env.get(MULTIPROC_ENV) or DEFAULT_MULTIPROC,
    ]


def start_metrics(args: list[str], env=os.environ) -> subprocess.Popen | None:
    """Start the metrics process (see the module's docstring) and return it; None when there is nothing to
    serve, or when LiteLLM's CLI is to start its own (no prometheus_client here: PROMETHEUS_METRICS_PORT).
    `env` (this process's environment, which the gateway inherits) gets the folder the workers write to."""
    if not env.get(METRICS_PORT_ENV):
        return None
    env.setdefault(MULTIPROC_ENV, DEFAULT_MULTIPROC)  # the workers write where the server reads
    # made here: LiteLLM makes it only when it starts its own server, and a worker cannot count without it
    os.makedirs(env[MULTIPROC_ENV], exist_ok=True)
    if not has("prometheus_client"):
        env[LITELLM_PORT_ENV] = env[METRICS_PORT_ENV]
        return None
    env.pop(LITELLM_PORT_ENV, None)  # one server on the port: LiteLLM's CLI would start a second one
    command = metrics_command(args, dict(env))
    if command is None:  # no port (as checked above)
        return None
    return subprocess.Popen(command, env=dict(env))


def main(argv: list[str]) -> None:
    args, line = resolve(argv)
    print(line, file=sys.stderr, flush=True)
    start_metrics(args)  # its parent is this process, which becomes the gateway: it lives as long as the gateway
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import gateway_serve  # beside this file: LiteLLM in this process, its workers from a fork server

    gateway_serve.main(args)


if __name__ == "__main__":
    main(sys.argv[1:])

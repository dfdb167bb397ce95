"""gateway_start.py (shipped beside the hooks, run by the gateway container and the local runtime):
`--num_workers auto` resolved from the CPUs and memory the process may use, read from a fake /proc and
/sys/fs/cgroup tree (cgroup v2 and v1), and every other argument passed through unchanged."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


@pytest.fixture(scope="module")
def start():
    """The generated copy, loaded by path as the container runs it (no package, standard library only)."""
    spec = importlib.util.spec_from_file_location("gateway_start", ROOT / "litellm" / "gateway_start.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree(tmp_path: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return str(tmp_path)


MEMINFO = {"proc/meminfo": "MemTotal: 25000000 kB\nMemAvailable: 20971520 kB\n"}  # 20 GiB available


def test_cgroup_v2_quota_in_a_container_rounds_up(tmp_path, start):
    root = tree(
        tmp_path,
        {
            "proc/self/cgroup": "0::/\n",
            "sys/fs/cgroup/cpu.max": "150000 100000\n",
            "sys/fs/cgroup/memory.max": "max\n",
            **MEMINFO,
        },
    )
    assert start.cpu_quota(root) == 1.5 and start.memory_limit(root) is None
    n, why = start.auto_workers(8, start.cpu_quota(root), start.memory_limit(root), start.available_memory(root))
    assert n == 2 and "cgroup CPU quota 1.5" in why and "available memory 20.0 GiB" in why


def test_cgroup_v2_the_tightest_of_the_process_cgroup_and_its_parents_wins(tmp_path, start):
    root = tree(
        tmp_path,
        {
            "proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
            "sys/fs/cgroup/kubepods/cpu.max": "400000 100000\n",
            "sys/fs/cgroup/kubepods/pod1/cpu.max": "300000 100000\n",
            "sys/fs/cgroup/kubepods/pod1/ctr/cpu.max": "max 100000\n",
            "sys/fs/cgroup/kubepods/pod1/ctr/memory.max": str(2 * GIB),
        },
    )
    assert start.cpu_quota(root) == 3.0
    assert start.memory_limit(root) == 2 * GIB


def test_cgroup_v1_quota_and_memory_limit(tmp_path, start):
    root = tree(
        tmp_path,
        {
            "proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000",
            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
            "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": str(1536 * 2**20),
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712",
        },
    )
    assert start.cpu_quota(root) == 2.0
    assert start.memory_limit(root) == 1536 * 2**20


def test_no_cgroup_limits_means_the_affinity(tmp_path, start):
    root = tree(
        tmp_path,
        {"proc/self/cgroup": "0::/user.slice\n", "sys/fs/cgroup/user.slice/cpu.max": "max 100000\n", **MEMINFO},
    )
    assert start.cpu_quota(root) is None
    assert start.auto_workers(6, None, None, start.available_memory(root))[0] == 6


def test_memory_caps_the_count_at_the_measured_size_per_worker(start):
    # 2 GiB: (2048 - 350 parent) // 450 per worker = 3, on 16 CPUs
    n, why = start.auto_workers(16, None, 2 * GIB, None)
    assert n == 3 and "cgroup memory limit 2.0 GiB holds 3 at 450 MiB each" in why
    assert start.auto_workers(16, None, 256 * 2**20, None)[0] == 1  # never below one


def test_only_auto_is_replaced_and_every_other_argument_passes_through(start):
    args = ["--config", "/etc/litellm/config.yaml", "--port", "4000", "--num_workers", "3", "--host", "0.0.0.0"]
    assert start.resolve(args)[0] == args
    assert "3 worker(s) (gateway.workers: 3" in start.resolve(args)[1]
    auto = [*args[:5], "auto", *args[6:]]
    resolved, line = start.resolve(auto)
    n = int(resolved[5])
    assert resolved[:5] + resolved[6:] == args[:5] + args[6:]
    assert 1 <= n <= len(os.sched_getaffinity(0)) and line.startswith(
        f"gateway: {n} worker(s) (gateway.workers: auto: "
    )


def test_the_supervisor_runs_and_rolls_the_worker_count_it_resolved(monkeypatch, capsys):
    """Compose and the local runtime start gateway_supervisor.py (generated copy, beside gateway_start.py):
    it resolves `auto` once, says so, runs that number and expects that many workers in a rolling reload."""
    spec = importlib.util.spec_from_file_location("gateway_supervisor", ROOT / "litellm" / "gateway_supervisor.py")
    supervisor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(supervisor)
    monkeypatch.setattr(supervisor.gateway_start, "affinity", lambda: 3)
    monkeypatch.setattr(supervisor.gateway_start, "cpu_quota", lambda root="": None)
    monkeypatch.setattr(supervisor.gateway_start, "memory_limit", lambda root="": None)
    monkeypatch.setattr(supervisor.gateway_start, "available_memory", lambda root="": 20 * GIB)
    s = supervisor.Supervisor(["litellm", "--config", str(ROOT / "litellm" / "config.yaml"), "--num_workers", "auto"])
    assert s.cmd[-2:] == ["--num_workers", "3"] and s.workers == 3
    assert "gateway: 3 worker(s) (gateway.workers: auto: 3 CPUs in its affinity" in capsys.readouterr().out
    fixed = supervisor.Supervisor(["litellm", "--num_workers", "2"])
    assert fixed.cmd[-1] == "2" and fixed.workers == 2


def test_the_metrics_server_command_takes_the_gateways_host_and_port_and_folder(start):
    env = {"GATEWAY_METRICS_PORT": "4001", "PROMETHEUS_MULTIPROC_DIR": "/m"}
    cmd = start.metrics_command(["--config", "c.yaml", "--host", "127.0.0.1"], env)
    assert cmd[1:] == [
        str(ROOT / "litellm" / "gateway_metrics.py"),
        "--host",
        "127.0.0.1",
        "--port",
        "4001",
        "--dir",
        "/m",
    ]
    assert start.metrics_command([], {**env, "HOST": "10.0.0.2"})[3] == "10.0.0.2"  # LiteLLM's own HOST variable
    assert start.metrics_command([], {"GATEWAY_METRICS_PORT": "4001"})[3:] == [
        "0.0.0.0",
        "--port",
        "4001",
        "--dir",
        start.DEFAULT_MULTIPROC,
    ]  # LiteLLM's defaults
    assert start.metrics_command(["--host", "127.0.0.1"], {}) is None  # no metrics: nothing to start


def test_without_prometheus_client_in_this_python_litellms_cli_is_asked_to_start_its_own(start, monkeypatch, tmp_path):
    env = {"GATEWAY_METRICS_PORT": "4001", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "m")}
    monkeypatch.setattr(start, "has", lambda module: module != "prometheus_client")
    assert start.start_metrics([], env) is None and env["PROMETHEUS_METRICS_PORT"] == "4001"
    assert (tmp_path / "m").is_dir()  # the workers write there whoever serves it
    assert start.start_metrics([], {}) is None  # no GATEWAY_METRICS_PORT: no metrics at all


def test_an_inherited_litellm_metrics_port_is_dropped_when_ours_serves(start, monkeypatch, tmp_path):
    """A PROMETHEUS_METRICS_PORT from the caller's environment would make LiteLLM's CLI start a second server on
    the same port (and fail when it cannot bind it): the gateway does not inherit it."""
    env = {"GATEWAY_METRICS_PORT": "4001", "PROMETHEUS_METRICS_PORT": "4001", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    started = []
    monkeypatch.setattr(start.subprocess, "Popen", lambda cmd, env: started.append((cmd, env)) or "process")
    assert start.start_metrics(["--host", "127.0.0.1"], env) == "process"
    assert "PROMETHEUS_METRICS_PORT" not in env and "PROMETHEUS_METRICS_PORT" not in started[0][1]
    assert started[0][0][2:] == ["--host", "127.0.0.1", "--port", "4001", "--dir", str(tmp_path)]


def _metrics(port: int) -> str | None:
    import httpx

    try:
        r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
        return r.text if r.status_code == 200 else None
    except httpx.HTTPError:
        return None


def test_the_supervisor_runs_the_metrics_server_beside_the_gateway_restarts_it_and_ends_it(tmp_path):
    """A real supervisor (the generated copy) in front of a stand-in gateway that counts 3 requests in its
    PROMETHEUS_MULTIPROC_DIR, as a LiteLLM worker does, then sleeps: the metrics process serves that count on
    GATEWAY_METRICS_PORT, comes back when killed (GATEWAY_METRICS_RESTART_GAP after its start), and is gone once the
    supervisor stops. The stand-in gets no PROMETHEUS_METRICS_PORT (LiteLLM's CLI would start a second server and
    wait on it)."""
    import json
    import signal
    import subprocess
    import sys
    import time

    import psutil

    from generator.operate.runtime.ports import free_port

    port = free_port()
    env_file = tmp_path / "gateway-env.json"
    stand_in = (
        "import json, os, sys, time; from prometheus_client import Counter; "
        "Counter('stand_in_requests', 'requests').inc(3); "
        "open(sys.argv[1], 'w').write(json.dumps(dict(os.environ))); time.sleep(600)"
    )
    gateway = [sys.executable, "-c", stand_in, str(env_file)]
    env = {
        **os.environ,
        "GATEWAY_METRICS_PORT": str(port),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        "GATEWAY_RELOAD_POLL": "0.2",
        "GATEWAY_METRICS_RESTART_GAP": "2",
    }
    env.pop("PROMETHEUS_METRICS_PORT", None)
    sup = subprocess.Popen(
        [sys.executable, str(ROOT / "litellm" / "gateway_supervisor.py"), *gateway],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def wait_for(check, what: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value := check():
                return value
            assert sup.poll() is None, f"the supervisor exited while waiting for {what}"
            time.sleep(0.1)
        raise AssertionError(f"no {what} within {timeout}s")

    def server() -> int | None:
        for child in psutil.Process(sup.pid).children():
            try:
                if child.status() != psutil.STATUS_ZOMBIE and "gateway_metrics.py" in " ".join(child.cmdline()):
                    return child.pid
            except psutil.Error:  # exited meanwhile
                continue
        return None

    try:
        seen = json.loads(wait_for(lambda: env_file.exists() and env_file.read_text(), "stand-in gateway"))
        assert "PROMETHEUS_METRICS_PORT" not in seen and seen["GATEWAY_METRICS_PORT"] == str(port)
        assert "stand_in_requests_total 3.0" in wait_for(lambda: _metrics(port), "metrics on the port")
        first = server()
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: (p := server()) and p != first and _metrics(port), "restarted metrics server")
        assert "stand_in_requests_total 3.0" in _metrics(port)  # the samples outlive the server: they are files
    finally:
        sup.terminate()
        out = sup.communicate(timeout=60)[0]
    assert "its metrics process (pid" in out and "the metrics process exited with code -9; starting it again" in out
    deadline = time.monotonic() + 10
    while _metrics(port) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _metrics(port) is None, "the metrics server outlived its supervisor"

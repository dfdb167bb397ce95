"""tools/apt.sh, the project's one entry point to apt: concurrent calls take turns instead of failing on
dpkg's lock, a lock held by another process is waited for up to APT_LOCK_TIMEOUT, then one clear line.

Runs real apt-get against this machine's dpkg (root, as CI is): `hostname` is an installed, required package,
so an install changes nothing but still takes dpkg's lock as any install does."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APT = ROOT / "tools/apt.sh"
DPKG_LOCK = Path("/var/lib/dpkg/lock-frontend")
INSTALLED = "hostname"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="apt needs root (CI runs as root)")


def install(*, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(APT), "install", INSTALLED], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


class HeldLock:
    """dpkg's frontend lock held by this process (the fcntl lock apt and dpkg take), released after `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.fd = os.open(DPKG_LOCK, os.O_RDWR | os.O_CREAT, 0o640)
        fcntl.lockf(self.fd, fcntl.LOCK_EX)  # waits while another apt on this machine (not a test's) runs
        self.timer = threading.Timer(seconds, self.release)
        self.timer.start()

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the lock
            self.fd = -1


@pytest.fixture(autouse=True)
def own_queue(tmp_path, monkeypatch):
    """The tests' apt calls queue on a lock of their own: the project's apt steps running beside them on this
    machine (CI builds its images in the background) must not change what a test measures."""
    monkeypatch.setenv("APT_QUEUE_LOCK", str(tmp_path / "apt-queue.lock"))


@pytest.fixture
def held_lock():
    locks: list[HeldLock] = []
    yield lambda seconds: locks.append(HeldLock(seconds)) or locks[-1]
    for lock in locks:
        lock.timer.cancel()
        lock.release()


def test_two_concurrent_installs_both_succeed():
    procs = [
        subprocess.Popen([str(APT), "install", INSTALLED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in results), results


def test_a_lock_held_for_a_while_is_waited_for(held_lock):
    held_lock(5)  # past apt.sh's first retries (every 2 s) and apt-get's own lock wait
    start = time.monotonic()
    run = install(env={"APT_LOCK_TIMEOUT": "120"})
    waited = time.monotonic() - start
    assert run.returncode == 0, run.stderr
    assert waited >= 4.5, f"returned after {waited:.1f}s while the lock was held for 5s"


def test_a_lock_held_past_the_timeout_fails_with_one_clear_line(held_lock):
    held_lock(30)
    start = time.monotonic()
    run = install(env={"APT_LOCK_TIMEOUT": "3"})
    assert run.returncode == 1
    assert time.monotonic() - start < 25  # gave up at the timeout, not when the lock went
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("apt: gave up after 3s waiting for apt's lock")
    assert f"held by process {os.getpid()}" in lines[0] and "APT_LOCK_TIMEOUT" in lines[0]


def test_the_projects_own_calls_queue_on_one_lock(tmp_path):
    """While one of the project's apt steps runs (its queue lock held), another waits its turn, then runs."""
    queue = tmp_path / "apt.lock"
    with open(queue, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        proc = subprocess.Popen(
            [str(APT), "install", INSTALLED],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "APT_QUEUE_LOCK": str(queue)},
        )
        time.sleep(3)
        assert proc.poll() is None, "ran while another project apt step held the queue"
    assert proc.wait(timeout=300) == 0, proc.stderr.read()


def test_an_unknown_package_fails_naming_it():
    run = subprocess.run(
        [str(APT), "install", "no-such-package-llm-gateway"], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 1
    assert "could not install no-such-package-llm-gateway" in run.stderr, run.stderr


def test_usage_errors_exit_2():
    assert subprocess.run([str(APT), "frobnicate"], capture_output=True).returncode == 2
    assert subprocess.run([str(APT), "install"], capture_output=True).returncode == 2

""".ci/leftovers.py: which processes count as started from the checkout once CI's tests are over (a Python of its
environments wherever it runs, anything naming a path inside it), and that a real one left behind is found."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ci_leftovers", ROOT / ".ci/leftovers.py")
leftovers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(leftovers)

CLONE = "/tmp/ci2"


def test_a_python_of_the_checkouts_environments_counts_wherever_it_runs():
    spawned = ["/tmp/ci2/.venv/bin/python", "-c", "from multiprocessing.spawn import spawn_main"]
    assert leftovers.from_checkout(spawned, "/tmp/pytest-of-root/x (deleted)", CLONE)
    assert leftovers.from_checkout([".venv/bin/python", "-m", "pytest"], CLONE, CLONE)
    assert leftovers.from_checkout([".venv-vllm/bin/vllm", "serve", "m"], CLONE, CLONE)


def test_a_command_naming_a_path_inside_counts():
    assert leftovers.from_checkout(["/usr/sbin/nginx", "-c", "/tmp/ci2/.cache/nginx.conf"], "/", CLONE)


def test_other_processes_do_not():
    assert not leftovers.from_checkout(["bash", ".ci/run"], CLONE, CLONE)  # the run itself
    assert not leftovers.from_checkout(["python3", ".ci/cpu.py", "sample", ".cache/ci-cpu.log"], CLONE, CLONE)
    assert not leftovers.from_checkout(["/tmp/ci20/.venv/bin/python"], "/", CLONE)  # another checkout
    assert not leftovers.from_checkout(["/usr/bin/dockerd"], "/", CLONE)
    assert not leftovers.from_checkout([], None, CLONE)  # a kernel thread


def test_a_process_left_running_is_found_and_fails_the_check(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path / "marker")])
    try:
        found = subprocess.run(
            [sys.executable, str(ROOT / ".ci/leftovers.py"), str(tmp_path)], capture_output=True, text=True
        )
    finally:
        sleeper.kill()
        sleeper.wait()
    assert found.returncode == 1 and str(sleeper.pid) in found.stdout, found.stdout

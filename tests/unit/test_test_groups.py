"""`make test`'s two pytest-xdist workers: every test of the shared stack on ONE worker in collection order, the unit
and docs tests a file at a time beside them, then each file (or folder) with a stack of its own (tests/conftest.py:
OWN) as a unit of its own, longest first, after the unit and docs files.
pytest 9.2 silently broke that grouping (pytest-xdist issue #1386): this fails if a pytest or xdist upgrade does it
again, or if the grouping changes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

from conftest import ROOT

CONFTEST = f"""
import json, os, sys
import pytest
sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import pytest_collection_modifyitems  # noqa: F401  (the hook under test)

@pytest.fixture
def gateway():
    return None

@pytest.fixture(autouse=True)
def where(request, tmp_path_factory):
    yield
    with open(os.environ["GROUPS_OUT"], "a") as out:
        out.write(json.dumps([request.node.nodeid.split("@")[0], os.environ.get("PYTEST_XDIST_WORKER")]) + "\\n")
"""


def test_the_stack_tests_run_on_one_worker_in_order_and_the_unit_files_beside_them_then_the_own_stacks(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    files = {
        "tests/unit/test_a.py": 4,
        "tests/unit/test_b.py": 4,
        "tests/docs/test_c.py": 4,
        "tests/integration/test_d.py": 3,
        "tests/bench/test_e.py": 3,
        "tests/integration/test_f.py": 3,
        "tests/k8s/test_g.py": 2,
        "tests/integration/test_on_demand.py": 2,
        "tests/integration/test_replicas.py": 2,
    }
    for name, count in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        # the shared stack's tests take a while, the others none: the worker of the unit and docs files is free first
        pause = 0.5 if name in ("tests/integration/test_d.py", "tests/integration/test_f.py") else 0
        (tmp_path / name).write_text(
            f"import pytest, time\n@pytest.mark.parametrize('i', range({count}))\n"
            f"def test_one(i):\n    time.sleep({pause})\n"
        )
    out = tmp_path / "groups.jsonl"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "--no-loadscope-reorder",
            "tests",
        ],
        cwd=tmp_path,
        env={"GROUPS_OUT": str(out), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    ran = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(ran) == sum(files.values())
    stacks = ("tests/integration/test_d.py", "tests/integration/test_f.py")
    workers = defaultdict(set)
    for nodeid, worker in ran:
        path = nodeid.split("::")[0]
        workers["stacks" if path in stacks else path].add(worker)
    assert len(workers) == 8 and all(len(w) == 1 for w in workers.values()), dict(workers)  # one worker per unit
    assert set().union(*workers.values()) == {"gw0", "gw1"}, dict(workers)  # and both workers had work
    stack_tests = [nodeid.split("::")[0] for nodeid, _ in ran if nodeid.startswith(stacks)]
    assert stack_tests == ["tests/integration/test_d.py"] * 3 + ["tests/integration/test_f.py"] * 3, (
        stack_tests
    )  # in collection order
    light_worker = next(worker for nodeid, worker in ran if nodeid.startswith("tests/unit/"))
    assert light_worker not in workers["stacks"], dict(workers)
    on_it = [nodeid.split("::")[0] for nodeid, worker in ran if worker == light_worker]
    assert on_it[-9:] == (
        ["tests/integration/test_replicas.py"] * 2
        + ["tests/integration/test_on_demand.py"] * 2
        + ["tests/bench/test_e.py"] * 3
        + ["tests/k8s/test_g.py"] * 2
    ), on_it  # after the unit and docs files, beside the shared stack's tests, longest first (conftest.py's OWN)

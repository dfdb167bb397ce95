"""`make test`'s two pytest-xdist workers keep a test file together, and every test of the shared demo stack (the
`gateway` fixture) together whatever its file (tests/conftest.py). pytest 9.2 silently broke that grouping
(pytest-xdist issue #1386): this fails if a pytest or xdist upgrade does it again."""

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


def test_a_file_and_the_demo_stacks_tests_each_run_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("a", "b", "c", "d"):  # each: 4 tests without the gateway, 2 with it
        (tmp_path / f"test_{name}.py").write_text(
            "import pytest\n"
            "@pytest.mark.parametrize('i', range(4))\ndef test_plain(i):\n    pass\n"
            "@pytest.mark.parametrize('i', range(2))\ndef test_stack(gateway, i):\n    pass\n")
    out = tmp_path / "groups.jsonl"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                          "loadgroup", "--no-loadscope-reorder", str(tmp_path)], cwd=tmp_path,
                         env={"GROUPS_OUT": str(out), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    workers = defaultdict(set)
    for nodeid, worker in map(json.loads, out.read_text().splitlines()):
        group = "demo-stack" if "test_stack" in nodeid else nodeid.split("::")[0]
        workers[group].add(worker)
    assert len(workers) == 5 and sum(len(w) for w in workers.values()) == 5, dict(workers)  # one worker per group
    assert set().union(*workers.values()) == {"gw0", "gw1"}, dict(workers)  # and both workers had work

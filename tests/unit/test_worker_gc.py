"""The gateway worker's garbage collector settings (generator/shipped/gateway_hooks/worker_gc.py): a worker that
loads the generated hooks, as LiteLLM does at its start, collects its youngest generation after THRESHOLD0
allocations, not CPython's 700, and has frozen what it imported (CPython's HAMT crash: docs/limits.md)."""

import subprocess
import sys
from pathlib import Path

from generator.shipped.gateway_hooks import worker_gc

ROOT = Path(__file__).resolve().parents[2]


def test_a_worker_that_loads_the_generated_hooks_collects_less_often_and_has_frozen_its_imports():
    script = (
        "import gc, sys; before = gc.get_threshold()[0]; sys.path.insert(0, '.'); import gateway_guard; "
        "print(before, gc.get_threshold()[0], gc.get_freeze_count() > 10000)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT / "litellm",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["700", str(worker_gc.THRESHOLD0), "True"]

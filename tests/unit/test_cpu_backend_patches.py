"""The CPU examples' patches for tiny backends (generator/shipped/on_demand/cpu_backend_patches.py) on the real torch
and vLLM of .venv-vllm, imported the way the vllm-cpu image's .pth imports it (a top-level module, `install()`):
with CPU_BACKEND_FORK=1 the 13 gloo groups vLLM makes share one polling thread and still reduce, and the CPU
platform forks its engine (two groups made with torch's own class beside them add their two threads: the count
sees them), and uvicorn's server loop ticks once a second (calm_tick.py, beside it in the image). Without the
variable, install() adds no hook. The running backends: tests/integration/test_gateway_basics.py (local) and
tests/compose/test_compose.py (the image)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.shipped.on_demand import cpu_backend_patches

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm/bin/python"
PROBE = r"""
import json, os, sys, time
from datetime import timedelta
sys.path[:0] = [sys.argv[1], sys.argv[3]]  # as in the image: cpu_backend_patches and calm_tick in site-packages
import cpu_backend_patches
cpu_backend_patches.install()
import torch
import torch.distributed as dist
import vllm.platforms.cpu as cpu
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
groups = [dist.new_group([0], backend="gloo") for _ in range(12)]  # vLLM's 12 besides the world's
ones = torch.ones(2)
for g in groups:
    dist.all_reduce(ones, group=g)
def loops():  # a new gloo thread names itself once it runs: count until the count holds for 0.3 s (5 s at most)
    tasks, seen, end = "/proc/self/task", [], time.monotonic() + 5
    while len(seen) < 4 or len(set(seen[-4:])) > 1 and time.monotonic() < end:
        seen.append(sum(open(f"{tasks}/{t}/comm").read().strip() == "gloo_tcp_loop" for t in os.listdir(tasks)))
        time.sleep(0.1)
    return seen[-1]
shared = loops()
torch_own = dist.distributed_c10d.ProcessGroupGloo.__mro__[1]  # the class the patch derived from
store = dist.FileStore(sys.argv[2] + "-own", 1)
own = [torch_own(dist.PrefixStore(str(i), store), 0, 1, timedelta(seconds=60)) for i in range(2)]
check = cpu.CpuPlatform.check_and_update_config.__func__.__name__
import uvicorn.server
calm = getattr(uvicorn.server.Server, "_calm_tick", False)
print(json.dumps({"loops": shared, "with_own": loops(), "reduced": ones.tolist(), "check": check, "calm": calm}))
for g in groups:
    dist.destroy_process_group(g)
dist.destroy_process_group()
"""


def test_every_gloo_group_shares_one_thread_and_the_engine_is_forked(tmp_path):
    if not VLLM_PYTHON.exists():
        pytest.fail(".venv-vllm is absent: `make venv-vllm` (make test installs it first)")
    out = subprocess.run(
        [
            str(VLLM_PYTHON),
            "-c",
            PROBE,
            str(Path(cpu_backend_patches.__file__).parent),
            str(tmp_path / "store"),
            str(Path(cpu_backend_patches.__file__).parents[1] / "gateway_hooks"),
        ],  # fmt: skip
        env={**os.environ, "OMP_NUM_THREADS": "1", cpu_backend_patches.ENV: "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen == {"loops": 1, "with_own": 3, "reduced": [1.0, 1.0], "check": "forking", "calm": True}


def test_install_adds_a_hook_only_with_the_variable_and_it_patches_a_module_once_imported(tmp_path, monkeypatch):
    (tmp_path / "standin_platform.py").write_text("VALUE = 'imported'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    before = list(sys.meta_path)
    cpu_backend_patches.install({})
    assert sys.meta_path == before
    monkeypatch.setattr(cpu_backend_patches, "PATCHES", {"standin_platform": lambda m: setattr(m, "VALUE", "patched")})
    cpu_backend_patches.install({cpu_backend_patches.ENV: "1"})
    cpu_backend_patches.install({cpu_backend_patches.ENV: "1"})  # a second .pth run adds no second hook
    assert len(sys.meta_path) == len(before) + 1
    monkeypatch.delitem(sys.modules, "standin_platform", raising=False)
    import standin_platform

    assert standin_platform.VALUE == "patched"
    assert sys.meta_path == before, "the hook leaves once every patch ran"

"""What a tiny CPU backend changes in vLLM and torch when its env sets CPU_BACKEND_FORK=1 (the CPU examples' scripted
models: one compute thread each, docs/testing.md). Three patches, all for processes that would otherwise cost CPU
seconds for nothing on a machine running many such backends:

1. `fork_engines`: vLLM's engine process is forked from its API server, not spawned. vLLM 0.32's CPU platform forces
   VLLM_WORKER_MULTIPROC_METHOD=spawn (`platforms/cpu.py`), which imports vLLM and torch again in the engine:
   ~12 CPU-s of a ~27 CPU-s start here.
2. `share_gloo_device`: every torch.distributed gloo process group of the process shares one gloo device. vLLM makes
   13 groups even for one CPU rank (world, tp, pp, dp, ep, ..., a CPU and a "device" group each), and each gloo
   device runs a thread that wakes every 10 ms (gloo's tcp Loop: epoll_wait(..., 10)): an idle backend used ~3 % of
   a core, 0.27 CPU-s per 10 s measured; one device, 0.04. Groups on one device is gloo's design (a device carries
   many contexts' pairs), as torch's own split_group does.
3. `calm_uvicorn`: the API server's uvicorn loop ticks once a second instead of ten times (gateway_hooks/calm_tick.py,
   which the gateway's workers use too): an idle backend's API server used ~2.7 % of a core with nothing asking it,
   most of it those wake-ups (docs/testing.md, "Idle CPU").

Applied by the local runtime's vLLM fork server and its spawned fallback (vllm_fork.py, directly), and in the
vllm-cpu image (docker/vllm-cpu/) by a .pth file that calls `install()` at every interpreter start: with the
variable set, each patch runs once its module is imported (an import hook); without it, nothing happens. A real
CPU box leaves the variable out: it binds OpenMP threads to cores, which a forked engine would inherit wrongly.
Standard library only at import (the image imports this module in every Python process).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import Any

ENV = "CPU_BACKEND_FORK"  # in a model's env: "1" = the patches below (and the local runtime's fork server)


def enabled(env: Mapping[str, str] = os.environ) -> bool:
    return env.get(ENV) == "1"


def fork_engines(cpu: Any = None) -> None:
    """vLLM's engine process forked from its API server (patch 1); `cpu` = vllm.platforms.cpu if imported."""
    if cpu is None:
        cpu = importlib.import_module("vllm.platforms.cpu")
    check = cpu.CpuPlatform.check_and_update_config.__func__

    def forking(cls, vllm_config):
        check(cls, vllm_config)
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "fork"

    cpu.CpuPlatform.check_and_update_config = classmethod(forking)


def share_gloo_device(c10d: Any = None) -> None:
    """Every gloo process group made after this shares one device (patch 2); `c10d` =
    torch.distributed.distributed_c10d if imported. The device is made at the first group, so a process forked
    before any group (an engine from its API server) makes its own."""
    if c10d is None:
        c10d = importlib.import_module("torch.distributed.distributed_c10d")
    gloo: Any = c10d.ProcessGroupGloo
    devices: list = []

    class SharedDeviceGloo(gloo):  # torch builds gloo groups from this module's name (_new_process_group_helper)
        def __init__(self, store, rank, size, timeout=None):
            if not devices:
                devices.append(gloo.create_default_device())
            options = gloo._Options()
            options._devices = devices
            if timeout is not None:
                options._timeout = timeout
            super().__init__(store, rank, size, options)

    c10d.ProcessGroupGloo = SharedDeviceGloo


def calm_uvicorn(server_module: Any = None) -> None:
    """uvicorn's Server ticking once a second (patch 3); `server_module` = uvicorn.server if imported."""
    if server_module is None:
        server_module = importlib.import_module("uvicorn.server")
    try:  # the repository's module (the local runtime), else the copy beside this file (the vllm-cpu image)
        from ..gateway_hooks import calm_tick  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        import calm_tick  # type: ignore[import-not-found,no-redef,unused-ignore]
    calm_tick.calm(server_module.Server)


def apply() -> None:
    """The patches now (vLLM, torch and uvicorn imported here)."""
    fork_engines()
    share_gloo_device()
    calm_uvicorn()


PATCHES = {
    "vllm.platforms.cpu": fork_engines,
    "torch.distributed.distributed_c10d": share_gloo_device,
    "uvicorn.server": calm_uvicorn,
}


class _AfterImport:
    """A meta path finder that runs a patch on a module right after its first import: it finds the module's spec
    with the other finders and wraps that spec's loader's exec_module."""

    def __init__(self, patches: dict) -> None:
        self.patches = dict(patches)

    def find_spec(self, name, path, target=None):
        patch = self.patches.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        del self.patches[name]
        if not self.patches:
            sys.meta_path.remove(self)
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]  # a file loader is made per spec
        return spec


def install(env: Mapping[str, str] = os.environ) -> None:
    """The image's .pth calls this at every interpreter start: the patches run as their modules are imported."""
    if enabled(env) and not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(PATCHES))

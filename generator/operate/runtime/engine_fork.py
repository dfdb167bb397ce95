"""`vllm serve` with its engine process forked from the API server instead of spawned: the local runtime's
entry point for a model whose env sets ENGINE_FORK_ENV=1 (the CPU examples). Runs under vLLM's interpreter.

vLLM 0.32's CPU platform sets VLLM_WORKER_MULTIPROC_METHOD=spawn for every CPU server
(`platforms/cpu.py` check_and_update_config), so the engine process imports vLLM and torch again: ~12 of a tiny
CPU model's ~27 CPU-s to start (measured: 27.6 -> 15.3 CPU-s, 27 -> 15 s to ready, docs/testing.md). Spawn is
what a real CPU box wants (its workers bind OpenMP threads to cores after the fork); the CPU examples run one
thread per backend with the worker inside the engine process (OMP_NUM_THREADS=1,
VLLM_ENABLE_V1_MULTIPROCESSING=0), so nothing is bound before the fork. The flags are vllm serve's, unchanged.
"""

from __future__ import annotations

import os
import runpy
import sys

ENGINE_FORK_ENV = "LOCAL_ENGINE_FORK"  # in a model's env: "1" = start it through this module (local runtime)


def main() -> None:
    import vllm.platforms.cpu as cpu

    check = cpu.CpuPlatform.check_and_update_config.__func__

    def forking(cls, vllm_config):
        check(cls, vllm_config)
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "fork"

    cpu.CpuPlatform.check_and_update_config = classmethod(forking)
    sys.argv[0] = "vllm"
    runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

"""The committed flag catalog is what the pinned vLLM's own argument parser says."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _vllm_python() -> str | None:
    if os.environ.get("VLLM_PYTHON"):
        return os.environ["VLLM_PYTHON"]
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    venv = ROOT / ".venv-vllm/bin/python"
    return str(venv) if venv.exists() else None


def test_catalog_matches_the_installed_vllm_parser():
    python = _vllm_python()
    if python is None:
        pytest.skip("vLLM is not importable here and .venv-vllm is absent (run `make venv-vllm`)")
    run = subprocess.run(
        [python, "-m", "generator.compile.load.catalog_build", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]

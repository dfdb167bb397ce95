"""Golden-file comparison shared by every target's tests: tests/golden/<relative path>."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def assert_golden(files: dict[str, str]) -> None:
    """Each file equals its golden copy; UPDATE_GOLDEN=1 rewrites the copies (then review the diff)."""
    for rel, text in files.items():
        golden = GOLDEN / rel
        if os.environ.get("UPDATE_GOLDEN"):
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(text)
        assert golden.exists(), f"missing {golden}: run with UPDATE_GOLDEN=1"
        assert golden.read_text() == text, f"{rel} changed: review, then UPDATE_GOLDEN=1"


def example_files(example: Path, tmp: Path) -> dict[str, str]:
    """What `make regenerate` and `make k8s` write for an example models.yml (copied into `tmp` first)."""
    from generator.compile.load.loader import load_plan
    from generator.compile.output import render_files

    src = tmp / "models.yml"
    shutil.copy(example, src)
    return render_files(load_plan(src), ("stack", "k8s"))


def assert_yaml_golden(name: str, files: dict[str, str]) -> None:
    """An example's generated YAML against tests/golden/<name>/ (the Prometheus and gateway config copies left out:
    the other examples' goldens hold them)."""
    assert_golden(
        {
            f"{name}/{rel}": text
            for rel, text in files.items()
            if rel.endswith((".yml", ".yaml")) and not rel.startswith(("prometheus/", "k8s/gateway/config"))
        }
    )

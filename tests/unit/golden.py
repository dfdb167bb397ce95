"""Golden-file comparison shared by every target's tests: tests/golden/<relative path>."""

from __future__ import annotations

import os
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

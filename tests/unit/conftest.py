from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from generator.errors import ConfigError
from generator.loader import load_plan

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def write(tmp_path):
    """write(yaml_text) -> path of a models.yml holding it (dedented)."""
    def _write(text: str, name: str = "models.yml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path
    return _write


@pytest.fixture
def problems(write):
    """problems(yaml_text) -> the one-line problems load_plan reports (fails if it accepts the file)."""
    def _problems(text: str) -> list[str]:
        with pytest.raises(ConfigError) as err:
            load_plan(write(text))
        return [str(p) for p in err.value.problems]
    return _problems


@pytest.fixture
def plan(write):
    return lambda text: load_plan(write(text))

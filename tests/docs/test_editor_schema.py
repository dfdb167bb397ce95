"""An editor picks up schema/models.schema.json through the modeline of models.yml and the examples: the real
YAML language server (tests/docs/editor.py, pinned, from npm into .cache/editor) finds no problem in the
committed files, underlines the known-bad ones, completes field names and shows their descriptions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs import editor

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "models.yml", *sorted((ROOT / "examples").glob("*/models.yml"))]


@pytest.fixture(scope="module")
def session():
    try:
        server = editor.ensure()
    except editor.NpmUnreachable as exc:
        pytest.skip(f"{editor.PIN[0]} not installed and npm cannot fetch it: {exc}")
    session = editor.Editor(server)
    yield session
    session.close()


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_editor_finds_nothing_wrong_in_the_committed_files(session, path):
    assert session.open(path, path.read_text()) == []


def test_the_editor_underlines_what_the_generator_would_refuse(session):
    path = ROOT / "examples/cpu-demo/models.yml"  # its modeline: a path relative to the file, as committed
    text = path.read_text() + (
        "bad-model:\n  command: vllm serve org/m\n  gpus: 0\n  gpu_memory_utilization: 0.9\n"
        "  on_demand: {unload: pause}\n  litellm: {max_tokens: 8KB}\n"
    )
    first = len(path.read_text().splitlines())
    found = {d["range"]["start"]["line"] - first: d["message"] for d in session.open(path, text)}
    assert set(found) == {2, 3, 4, 5}, found
    assert "array" in found[2]  # gpus: 0
    assert "gpu_memory_utilization" in found[3]  # a typo'd field
    assert "stop" in found[4] and "sleep" in found[4]  # unload: pause
    assert "integer" in found[5]  # 8KB: neither a number nor a size vLLM reads


def test_the_editor_completes_fields_and_shows_their_description(session):
    path = ROOT / "models.yml"
    text = "# yaml-language-server: $schema=schema/models.schema.json\nm1:\n  command: vllm serve org/m\n  \n"
    session.open(path, text)
    labels = session.complete(path, 3, 2)
    assert {"gpus", "litellm", "on_demand", "context_length"} <= set(labels), labels
    assert "command" not in labels  # already there
    assert "GPU indexes" in session.hover(path, 2, 4) or "vllm serve" in session.hover(path, 2, 4)

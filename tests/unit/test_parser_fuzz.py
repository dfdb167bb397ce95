"""The parser fuzz: every family's conformance scripts fed to its vLLM parsers in-process, cut into deltas of every
size from 1 to 16 tokens, at every boundary and at random (tests/unit/parser_feed.py, in vLLM's interpreter); the
streamed answer must be the scripted turn, as the whole one is. With the repairs the stack ships
(generator/shipped/parser_repairs/) every family passes; each repair has a case vLLM's own parser gets wrong and
the repair alone gets right, so a repair vLLM no longer needs fails here (docs/parsers.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from generator.demo.families import names
from generator.shipped.parser_repairs import REPAIRS

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm/bin/python"
SEEDS = 4  # random cuts per script and request shape, beside the 16 fixed sizes and every two-way cut


@pytest.fixture(scope="module")
def fuzzed() -> dict:
    if not VLLM_PYTHON.exists():
        pytest.fail(".venv-vllm is absent: `make venv-vllm` (make unit and make test install it first)")
    missing = [n for n in names() if not (ROOT / ".cache/demo-models" / f"family-{n}" / "scripts.json").exists()]
    if missing:
        pytest.fail(f"family models not built: {missing}: `make demo-models`")
    out = subprocess.run(
        [str(VLLM_PYTHON), "-m", "tests.unit.parser_feed", "--seeds", str(SEEDS), "--repair-cases"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("family", names())
def test_every_script_streams_as_its_whole_turn_at_any_delta_size(fuzzed, family):
    report = fuzzed["families"][family]
    assert report["cases"] >= 300, report["cases"]  # every script x 2 request shapes x ~40 cuts at least
    shown = [f"{f['script']} ({f['shape']}, {f['cut']}): {f['problem']}" for f in report["failures"][:10]]
    assert not report["failures"], f"{len(report['failures'])} of {report['cases']} streams wrong: {shown}"


def test_each_repair_is_needed_and_enough(fuzzed):
    """vLLM's own parser gets its case wrong (when it no longer does, the repair can go), the repair alone right."""
    cases = fuzzed["repair_cases"]
    assert {c["repair"] for c in cases} == {r.module for r in REPAIRS}, "a repair without a case of its own"
    for c in cases:
        assert c["upstream"] is not None, f"vLLM's own parser now gets {c['case']} right: is {c['repair']} needed?"
        assert c["repaired"] is None, f"{c['repair']} on {c['case']}: {c['repaired']}"

""".ci/cpu.py's report: the cores' busy time split among the test files that ran (CI's per-file CPU report)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cpu_module():
    spec = importlib.util.spec_from_file_location("ci_cpu", ROOT / ".ci/cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_samples_busy_time_is_split_among_the_files_running_by_how_long_each_ran(tmp_path, capsys, monkeypatch):
    cpu = cpu_module()
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    log, timeline = tmp_path / "cpu.log", tmp_path / "tests.jsonl"
    # three 10 s samples: 100 %, 50 %, 100 % of 2 cores = 20, 10 and 20 CPU-s
    log.write_text("start 1000.0\n10 100 2\nproc 10 pytest=5\n20 50 1\nmark 20 quick-start\n30 100 2\n40 100 2\n")
    timeline.write_text(
        "\n".join(
            json.dumps(t)
            for t in (
                {"file": "tests/a.py", "start": 1000, "end": 1015},
                {"file": "tests/b.py", "start": 1005, "end": 1030},
            )
        )
        + "\n"
    )
    cpu.report(log, timeline)
    out = capsys.readouterr().out
    held = {
        line.rsplit(None, 2)[0].split("ci: cpu:", 1)[1].strip(): float(line.split()[-2])
        for line in out.splitlines()
        if "tests/" in line or "no test running" in line
    }
    # a: 10/15 of 20 + 5/15 of 10; b: 5/15 of 20 + 10/15 of 10 + 20; the last sample: no test
    assert held == {"tests/a.py": 17.0, "tests/b.py": 33.0, "(no test running)": 20.0}, out

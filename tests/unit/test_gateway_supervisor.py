"""The gateway supervisor's reading of a rolling restart (check_rolling) and of its own lines (reload_outcome), on
scripted worker sets and a scripted clock: uvicorn's restart as it goes (a new worker per old one, started before the
old one is ended), one uvicorn gives up, and one uvicorn has not begun yet. The real restart runs in
tests/unit/test_gateway_serve.py and through `make apply` in tests/compose/test_apply.py and test_pooling.py."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from generator.shipped.gateway_hooks import gateway_supervisor as sup

OLD = {101, 102}


@pytest.fixture
def rolled(monkeypatch, capsys):
    """run(steps): a supervisor mid-restart of OLD onto digest "new", fed [(seconds since the SIGHUP, workers)];
    returns what it said."""

    def run(steps: list[tuple[float, set[int]]]) -> list[str]:
        s = sup.Supervisor(["litellm", "--num_workers", "2"])
        s.child = SimpleNamespace(pid=1)
        clock = {"now": 0.0}
        monkeypatch.setattr(sup.time, "monotonic", lambda: clock["now"])
        s.rolling, s.left = ("new", set(OLD), 2, 0.0), set(OLD)
        capsys.readouterr()
        for t, workers in steps:
            clock["now"] = t
            monkeypatch.setattr(sup, "workers_of", lambda pid, w=workers: set(w))
            if s.rolling:
                s.check_rolling(s.rolling)
        return [line.removeprefix(f"{sup.NAME}: ") for line in capsys.readouterr().out.splitlines()]

    return run


def test_uvicorns_restart_one_worker_at_a_time_is_reloaded(rolled):
    said = rolled(
        [
            (1, OLD),
            (2, OLD | {201}),  # the first replacement starts...
            (9, OLD | {201}),
            (10, {102, 201}),  # ...serves, the old one ended
            (10.5, {102, 201, 202}),
            (30, {201, 202}),
        ]
    )
    assert said[-1].startswith("reloaded new in 30.0s (2 new workers)"), said
    assert not any("failed" in line for line in said), said


def test_a_restart_begun_late_is_no_failure_and_one_never_begun_is(rolled):
    """uvicorn's parent acts on SIGHUP between its pings of the workers, each waited for up to its healthcheck
    timeout: on a busy box the first replacement can come seconds after the signal. No new worker seen in 30 s: one
    that failed at once and ended between two looks (or uvicorn began none); the old workers still serve."""
    said = rolled([(t / 10, OLD) for t in range(0, 250)] + [(25, OLD | {201}), (26, {102, 201})])
    assert not any("failed" in line for line in said), said
    said = rolled([(t / 10, OLD) for t in range(0, 320)])
    assert said == [
        "reload failed new: no new worker started in 30s (or one ended unseen); 2 of 2 workers keep the "
        "previous config (see the errors above)"
    ], said


def test_a_replacement_that_ends_before_it_serves_is_a_failed_reload(rolled):
    said = rolled([(1, OLD | {201}), (5, OLD), (6, OLD), (8, OLD), (9, OLD), (20, OLD)])
    failed = [line for line in said if line.startswith("reload failed new")]
    assert failed == [
        "reload failed new: new worker 201 ended before it served; 2 of 2 workers keep the previous "
        "config (see the errors above)"
    ], said


def test_a_second_replacement_that_ends_leaves_one_worker_on_the_previous_config(rolled):
    said = rolled([(1, OLD | {201}), (3, {102, 201}), (4, {102, 201, 202}), (6, {102, 201}), (10, {102, 201})])
    assert any(line.startswith("reload failed new: new worker 202") and "1 of 2 workers" in line for line in said), said


def test_a_worker_missed_for_one_look_is_not_a_failure(rolled):
    """/proc read while a process starts or ends can miss it: one poll without it is not the end."""
    said = rolled(
        [(1, OLD | {201}), (2, OLD), (3, OLD | {201}), (4, {102, 201}), (5, {102, 201, 202}), (6, {201, 202})]
    )
    assert said[-1].startswith("reloaded new"), said


def test_the_outcome_of_a_reload_is_read_from_the_log_with_the_gateways_reasons():
    log = "\n".join(
        [
            "gateway-supervisor: config old -> new: rolling restart of 2 workers (SIGHUP)",
            "\x1b[32mLiteLLM: Proxy initialized with Config, Set models:\x1b[0m",
            "12:00:01 - LiteLLM Proxy:INFO: a line that says nothing of the restart",
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "yaml.scanner.ScannerError: mapping values are not allowed here",
            "New child process [201] was not ready in time; keeping worker [101] and aborting the restart.",
            "gateway-supervisor: reload failed new: new worker 201 ended before it served; 2 of 2 workers keep the "
            "previous config (see the errors above)",
        ]
    )
    assert sup.reload_outcome(log, "other") is None
    done, said = sup.reload_outcome(log, "new")
    assert not done
    assert said.startswith("reload failed new: new worker 201 ended before it served")
    assert "yaml.scanner.ScannerError: mapping values are not allowed here" in said
    assert "New child process [201] was not ready in time" in said
    assert "LiteLLM Proxy:INFO" not in said and "\x1b" not in said
    assert sup.reload_outcome("gateway-supervisor: reloaded new in 2.0s (2 new workers)\n", "new") == (
        True,
        "reloaded new in 2.0s (2 new workers)",
    )
    assert sup.reload_outcome("gateway-supervisor: reloaded newer in 2.0s\n", "new") is None


def test_children_from_the_kernels_list_are_those_a_walk_of_proc_finds():
    """children() reads /proc/PID/task/*/children (10 looks a second while workers roll); the walk of every process's
    stat, its fallback, finds the same processes with the same command lines; an ended pid has none."""
    import os
    import subprocess

    kids = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    try:
        # Popen returns once the child's exec has closed its pipe, which the kernel does before it sets the new
        # command line: until then /proc says b"" (both reads must see the same)
        deadline = time.monotonic() + 10
        while not all(Path(f"/proc/{k.pid}/cmdline").read_bytes() for k in kids):
            assert time.monotonic() < deadline, "a child never showed its command line"
            time.sleep(0.01)
        found = sup.children(os.getpid())
        assert {k.pid for k in kids} <= set(found) and found == sup._children_by_walk(os.getpid())
        assert found[kids[0].pid] == b"sleep\x0030\x00"
    finally:
        for k in kids:
            k.kill()
            k.wait()
    assert sup.children(kids[0].pid) == {}


def test_the_digest_reads_the_files_again_only_when_one_changed(tmp_path, monkeypatch):
    (tmp_path / "config.yaml").write_text("# GENERATED from models.yml (sha 1)\n# by make regenerate\nmodel_list: []\n")
    (tmp_path / "hook.py").write_text("X = 1\n")
    (tmp_path / "notes.txt").write_text("not watched\n")
    reads = []
    read_text = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self.name) or read_text(self, *a, **k))
    first = sup.digest(tmp_path)
    assert sorted(reads) == ["config.yaml", "hook.py"]
    reads.clear()
    assert [sup.digest(tmp_path) for _ in range(3)] == [first] * 3 and reads == []  # unchanged: no file read
    new = tmp_path / ".hook.py.tmp"  # the generator's way: a temp file renamed in (same size, same content)
    new.write_text("X = 2\n")
    new.rename(tmp_path / "hook.py")
    second = sup.digest(tmp_path)
    assert second != first and "hook.py" in reads
    reads.clear()
    with open(tmp_path / "hook.py", "r+") as f:  # an edit in place, same size
        f.write("X = 3\n")
    os.utime(tmp_path / "hook.py", ns=(1, 1))  # even with its mtime set back: ctime moves
    third = sup.digest(tmp_path)
    assert third not in (first, second) and "hook.py" in reads
    header_only = tmp_path / ".config.tmp"  # only the generator's header changed: the same digest, as before
    header_only.write_text("# GENERATED from models.yml (sha 2)\n# by make regenerate\nmodel_list: []\n")
    header_only.rename(tmp_path / "config.yaml")
    assert sup.digest(tmp_path) == third
    (tmp_path / "extra.py").write_text("")
    assert sup.digest(tmp_path) != third  # a new module

"""bench/profile.py's reading of py-spy's collapsed stacks: what counts as ours, what is the trunk, which process
served, and when a profile is refused (the miniature run is tests/bench/test_bench_smoke.py)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from bench.profile import merge, summarise

SERVE = "<module> (/x/gateway_serve.py:1);main (/x/gateway_serve.py:10);Runner.run (/py/asyncio/runners.py:9)"
GUARD = "RequestGuard.__call__ (/x/litellm/request_guard.py:40)"
AUTH = "user_api_key_auth (/x/litellm/gateway_guard.py:90)"
ROUTER = "Router.acompletion (/v/site-packages/litellm/router.py:900)"
SUPERVISOR = "<module> (/x/litellm/gateway_supervisor.py:1);loop (/x/litellm/gateway_supervisor.py:260)"


def test_ours_counts_our_work_not_the_frames_that_wrap_every_request():
    s = summarise(f"{SERVE};{GUARD};{ROUTER} 6\n{SERVE};{GUARD};{AUTH} 3\n{SERVE};{GUARD} 1\n", top=10)
    assert s["samples"] == 10 and s["guard_samples"] == 10
    assert s["ours_pct"] == 40.0  # the guard's auth (3) and the guard's own line (1), not the router under it
    assert s["self_by_place_pct"] == {"litellm": 60.0, "ours": 40.0}
    listed = dict(s["top_inclusive_pct"])
    assert "Router.acompletion (router.py)" in listed and "RequestGuard.__call__ (request_guard.py)" in listed
    assert not {"main (gateway_serve.py)", "Runner.run (runners.py)"} & set(listed)  # the trunk is not listed


def test_a_torn_stack_is_counted_apart_and_not_in_the_shares():
    # py-spy --nonblocking reads a running process: a stack read while it changed lacks its root frames
    s = summarise(f"{SERVE};{GUARD};{ROUTER} 3\n{ROUTER} 5\n{GUARD};{AUTH} 2\n", top=10)
    assert (s["samples"], s["partial_samples"]) == (3, 7)
    assert s["self_by_place_pct"] == {"litellm": 100.0} and s["ours_pct"] == 0.0


def test_a_process_that_served_nothing_is_left_out_and_said(tmp_path: Path):
    worker, supervisor = tmp_path / "1.txt", tmp_path / "2.txt"
    worker.write_text(f"{SERVE};{GUARD};{ROUTER} 5\n")
    supervisor.write_text(f"{SUPERVISOR} 7\n")
    console = Console(record=True, width=200)
    collapsed, per_pid = merge({1: worker, 2: supervisor}, console)
    assert per_pid == {1: 5, 2: 7}
    assert summarise(collapsed, 5)["samples"] == 5
    assert "process 2: 7 samples, none in request_guard: it served nothing, left out" in console.export_text()

"""The local runtime's process handling, with small stand-in processes (no vLLM): start order, failures
reported with exit code and log lines, taken ports refused up front, `down` through wrapper scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import pytest
import yaml
from rich.console import Console

from generator.compile.renderers import LITELLM_FILE
from generator.operate.runtime import local
from generator.operate.runtime.local import FORK_SERVER, LocalStack, StackError
from generator.operate.runtime.ports import free_port
from generator.operate.runtime.processes import Proc, port_problem, stop_recorded
from generator.shipped.on_demand import vllm_fork

# /health answers 200 after `delay` seconds; until then the port is closed, like a loading vLLM
HEALTH_SERVER = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@pytest.fixture
def stack(tmp_path, plan):
    # free ports, never the defaults: the integration stack may be running on 4000/8001 in the same session
    p = plan(
        f"a:\n  gpus: []\n  port: {free_port()}\n  command: vllm serve o/a --max-model-len 8K\n"
        f"gateway: {{port: {free_port()}}}\n"
    )
    s = LocalStack(p, tmp_path / "state", vllm_python=sys.executable)
    s.state_dir.mkdir(parents=True)
    yield s
    s.stop(grace=2)


def server(stack: LocalStack, name: str, delay: float = 0.5, waits_for: tuple[str, ...] = ()) -> Proc:
    port = free_port()
    return Proc(
        name,
        [sys.executable, "-c", HEALTH_SERVER, str(port), str(delay)],
        stack.state_dir / f"{name}.log",
        f"http://127.0.0.1:{port}/health",
        waits_for=waits_for,
    )


def crasher(stack: LocalStack, name: str) -> Proc:
    code = (
        "import sys; print('loading weights'); "
        "print('ValueError: No available memory for the cache blocks'); sys.exit(3)"
    )
    return Proc(name, [sys.executable, "-c", code], stack.state_dir / f"{name}.log", "http://127.0.0.1:9/health")


def test_each_process_starts_only_after_the_ones_it_waits_for_and_a_failure_is_reported(stack):
    first, broken = server(stack, "first", delay=1.5), crasher(stack, "broken")
    second = server(stack, "second", waits_for=("first",))
    after_broken = server(stack, "after-broken", waits_for=("broken",))
    failures = stack._watch([first, broken, second, after_broken], timeout=60, fail_fast=False)
    started = {p.name: psutil.Process(p.pid).create_time() for p in (first, second)}
    # first cannot answer /health before its 1.5 s sleep: a second launched earlier would have started too soon
    assert started["second"] >= started["first"] + 1.5
    assert first.ready_after is not None and second.ready_after is not None
    assert after_broken.ready_after is not None  # a failed process holds no GPU memory: the next one starts
    (failure,) = failures
    assert failure.name == "broken" and failure.exit_code == 3 and "exited with code 3" in failure.reason
    assert "No available memory for the cache blocks" in failure.last_lines and str(failure.log) in str(failure)


def test_a_backend_that_is_late_is_stopped_and_reported_and_its_dependents_never_start(stack):
    slow = server(stack, "slow", delay=600)
    after = server(stack, "after", waits_for=("slow",))
    failures = stack._watch([slow, after], timeout=2, fail_fast=False)
    assert [f.name for f in failures] == ["slow", "after"]
    assert "not ready after 2s (stopped)" in failures[0].reason and not slow.alive()
    assert "never started: still waiting for slow" in failures[1].reason and after.popen is None


def test_a_taken_port_is_refused_before_anything_starts_naming_the_process(stack):
    port = stack.plan.models[0].port
    holder = subprocess.Popen([sys.executable, "-c", HEALTH_SERVER, str(port), "0"])
    try:
        deadline = time.monotonic() + 20
        while port_problem(port, "x") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(StackError) as err:
            stack.start(timeout=5, partial=True)
        msg = str(err.value)
        assert f"port {port} (a) is already in use by pid {holder.pid} ({sys.executable} -c" in msg
        assert "give a another port in models.yml" in msg
        assert stack.procs == [] and not (stack.state_dir / "logs").exists()  # nothing was started
    finally:
        holder.kill()
        holder.wait()


def test_down_ends_processes_started_through_a_wrapper_script_and_their_children(stack, tmp_path):
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    code = "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
    proc = Proc("backend", [str(wrapper), "-c", code], tmp_path / "backend.log", "")
    stack._spawn(proc, {})
    deadline = time.monotonic() + 10
    while len(psutil.Process(proc.pid).children()) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    members = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children()]
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[:-1]
    assert [c.decode() for c in cmdline] != proc.cmd  # exec replaced the wrapper: command lines do not match
    assert stop_recorded(stack.state_dir, grace=5) == 2
    proc.popen.wait(timeout=5)
    assert not any(m.is_running() and m.status() != psutil.STATUS_ZOMBIE for m in members)
    assert not (stack.state_dir / "state.json").exists()


def _backend_with_an_engine(stack: LocalStack, tmp_path: Path) -> tuple[Proc, psutil.Process]:
    """A stand-in backend whose 'engine' (a child in its session) outlives it once the 'API server' is killed."""
    code = "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
    proc = Proc("backend", [sys.executable, "-c", code], tmp_path / "backend.log", "")
    stack._spawn(proc, {})
    deadline = time.monotonic() + 10
    while not psutil.Process(proc.pid).children() and time.monotonic() < deadline:
        time.sleep(0.05)
    (engine,) = psutil.Process(proc.pid).children()
    os.kill(proc.pid, 9)  # the API server goes; its engine is re-parented to init, still in the session
    proc.popen.wait(timeout=5)
    assert engine.is_running() and os.getsid(engine.pid) == proc.pid
    return proc, engine


def test_down_ends_what_is_left_of_a_session_whose_leader_was_killed(stack, tmp_path):
    _, engine = _backend_with_an_engine(stack, tmp_path)
    assert stop_recorded(stack.state_dir, grace=5) == 1
    assert not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE


def test_stop_ends_what_is_left_of_a_session_whose_leader_was_killed(stack, tmp_path):
    _, engine = _backend_with_an_engine(stack, tmp_path)
    stack.stop(grace=5)
    psutil.wait_procs([engine], timeout=5)
    assert not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE


def test_down_leaves_a_process_that_reused_a_recorded_pid_alone(tmp_path):
    stranger = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        (tmp_path / "state.json").write_text(
            json.dumps(
                {
                    "procs": [
                        {
                            "name": "old",
                            "pid": stranger.pid,
                            "sid": stranger.pid,
                            "started": 1.0,
                            "cmd": ["sleep", "600"],
                        }
                    ]
                }
            )
        )
        assert stop_recorded(tmp_path, grace=1) == 0
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_backends_see_only_their_gpus(plan, tmp_path):
    p = plan(
        "gpu_memory: 80GiB\ng:\n  gpus: [2, 3]\n  command: vllm serve o/g --max-model-len 8K -tp 2\n"
        "c:\n  gpus: []\n  command: vllm serve o/c --max-model-len 8K\n"
    )
    s = LocalStack(p, tmp_path / "s2", vllm_python=sys.executable)
    envs = {m.name: s._backend(m).env for m in p.models}
    assert envs["g"]["CUDA_VISIBLE_DEVICES"] == "2,3" and envs["c"]["CUDA_VISIBLE_DEVICES"] == ""


def test_a_failed_gateway_stops_the_start_and_leaves_nothing_running(plan, tmp_path):
    sleeper = tmp_path / "vllm-that-loads-forever"
    sleeper.write_text("#!/bin/sh\nexec sleep 600\n")
    broken_gateway = tmp_path / "gateway-that-crashes"
    broken_gateway.write_text("#!/bin/sh\necho 'ImportError: no litellm here' >&2\nexit 4\n")
    for f in (sleeper, broken_gateway):
        f.chmod(0o755)
    p = plan(
        f"a:\n  gpus: []\n  command: vllm serve o/a --max-model-len 8K --port {free_port()}\n"
        f"gateway: {{port: {free_port()}}}\n"
    )
    s = LocalStack(p, tmp_path / "state", vllm_python=str(sleeper), gateway_python=str(broken_gateway))
    with pytest.raises(StackError) as err:
        s.start(timeout=120, partial=True)
    assert "gateway exited with code 4" in str(err.value) and "no litellm here" in str(err.value)
    assert s.procs == [] and not [c for c in _live_children() if "600" in c]


def _live_children() -> list[str]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                found.append(" ".join(child.cmdline()))
        except psutil.Error:
            pass
    return found


# stands in for both interpreters: serves 200 on every path at the `--port` of its command line
FAKE_SERVER = """#!{python}
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), H).serve_forever()
"""


def test_up_again_reuses_a_healthy_stack_of_the_same_file_and_not_a_changed_or_broken_one(plan, tmp_path):
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_SERVER.format(python=sys.executable))
    fake.chmod(0o755)
    text = (
        f"a:\n  gpus: []\n  port: {free_port()}\n  command: vllm serve o/a --max-model-len 8K\n"
        f"gateway: {{port: {free_port()}}}\n"
    )
    state = tmp_path / "state"
    first = LocalStack(plan(text), state, vllm_python=str(fake), gateway_python=str(fake))
    first.start(timeout=60)
    try:
        again = LocalStack.attach(plan(text), state, str(fake), gateway_python=str(fake))
        assert again is not None and sorted(p.pid for p in again.procs) == sorted(p.pid for p in first.procs)
        assert LocalStack.attach(plan(text.replace("8K", "4K")), state, str(fake), gateway_python=str(fake)) is None
        again.kill("a")  # through the attached handle, as the fault tests do on a shared `make demo` stack
        assert not [p for p in first.procs if p.name == "a"][0].alive()
        assert LocalStack.attach(plan(text), state, str(fake), gateway_python=str(fake)) is None
    finally:
        first.stop(grace=2)


# stands in for vLLM: the on-demand stand-in backend (sleep mode, /stats), on the `--port` of its command line
FAKE_VLLM = """#!{python}
import os, sys
args = sys.argv
os.execv({python!r}, [{python!r}, {standin!r}, args[args.index("--port") + 1], args[args.index("--model") + 1]])
"""


def on_demand(p, names, group="g", idle=0.0, port=None):
    """The plan with these models on demand (as the loader marks them) and a controller."""
    from dataclasses import replace

    from generator.compile.plan import ControllerPlan, OnDemandPlan

    models = tuple(replace(m, on_demand=OnDemandPlan(group, idle, "stop")) if m.name in names else m for m in p.models)
    return replace(p, models=models, controller=ControllerPlan(port=port or free_port(), load_timeout=30))


def test_on_demand_models_are_left_to_the_controller_which_starts_them_on_request_and_down_ends_them(plan, tmp_path):
    fake = tmp_path / "fake-vllm"
    fake.write_text(FAKE_VLLM.format(python=sys.executable, standin=str(Path(__file__).parent / "standin_backend.py")))
    fake.chmod(0o755)
    p = on_demand(
        plan(
            f"a:\n  gpus: []\n  port: {free_port()}\n  command: vllm serve o/a --max-model-len 8K\n"
            f"b:\n  gpus: []\n  port: {free_port()}\n  command: vllm serve o/b --max-model-len 8K\n"
            f"  start_after: [a]\n"
            f"gateway: {{port: {free_port()}}}\n"
        ),
        {"a", "b"},
    )
    s = LocalStack(p, tmp_path / "state", vllm_python=str(fake))
    a = p.models[0]
    gateway_config = yaml.safe_load(s.gateway_files()[LITELLM_FILE])  # what the local gateway is started with
    assert (
        s.always_on == ()
        and gateway_config["model_list"][0]["litellm_params"]["api_base"]
        == f"http://127.0.0.1:{p.controller.port}/m/a/v1"
    )
    config = s.controller_config()
    ma = config["models"]["a"]
    assert config["port"] == p.controller.port and config["host"] == "127.0.0.1"
    assert ma["argv"] == s._backend(a).cmd and ma["url"] == f"http://127.0.0.1:{a.port}" and ma["group"] == "g"
    assert "VLLM_API_KEY" not in ma["env"] and ma["api_key_env"] == a.api_key_env  # no key in the file
    assert s._backend(p.models[1]).waits_for == ()  # an on-demand model waits for no one
    assert "/m/a/v1" in s.gateway_files()["litellm/config.yaml"]
    controller = s._controller()
    s._spawn(controller, controller.env)
    try:
        s._wait([controller], 30)
        r = httpx.post(
            f"{s.controller_url}/m/a/v1/chat/completions",
            json={"messages": []},
            timeout=30,
            headers={"Authorization": f"Bearer {s.keys()[a.api_key_env]}"},
        )
        assert r.status_code == 200 and r.json()["backend"] == "o/a", r.text
        backend = r.json()["pid"]
        assert json.loads((s.state_dir / "state.json").read_text())["procs"][0]["name"] == "on-demand"
        assert stop_recorded(s.state_dir, grace=10) >= 2  # `down`: the controller and the backend it started
        assert not psutil.pid_exists(backend) or psutil.Process(backend).status() == psutil.STATUS_ZOMBIE
    finally:
        s.stop(grace=10)


def test_stop_ends_the_controller_and_its_backends(plan, tmp_path):
    fake = tmp_path / "fake-vllm"
    fake.write_text(FAKE_VLLM.format(python=sys.executable, standin=str(Path(__file__).parent / "standin_backend.py")))
    fake.chmod(0o755)
    p = on_demand(
        plan(
            f"a:\n  gpus: []\n  port: {free_port()}\n  command: vllm serve o/a --max-model-len 8K\n"
            f"gateway: {{port: {free_port()}}}\n"
        ),
        {"a"},
    )
    s = LocalStack(p, tmp_path / "state", vllm_python=str(fake))
    controller = s._controller()
    s._spawn(controller, controller.env)
    s._wait([controller], 30)
    r = httpx.post(f"{s.controller_url}/m/a/v1/chat/completions", json={"messages": []}, timeout=30)
    backend = r.json()["pid"]
    s.stop(grace=15)
    assert not psutil.pid_exists(backend) or psutil.Process(backend).status() == psutil.STATUS_ZOMBIE
    assert "controller stopped" in (s.state_dir / "logs" / "on-demand.log").read_text()


# --- two stacks, one machine: each stop removes its own state only (issue 32) ---------------------------
def _fake_stack(plan, tmp_path, state: Path) -> LocalStack:
    fake = tmp_path / "fake-python"
    if not fake.exists():
        fake.write_text(FAKE_SERVER.format(python=sys.executable))
        fake.chmod(0o755)
    text = (
        f"a:\n  gpus: []\n  port: {free_port()}\n  command: vllm serve o/a --max-model-len 8K\n"
        f"gateway: {{port: {free_port()}}}\n"
    )
    return LocalStack(plan(text), state, vllm_python=str(fake), gateway_python=str(fake))


def test_two_stacks_side_by_side_each_stop_removes_only_its_own_state(plan, tmp_path):
    one, two = _fake_stack(plan, tmp_path, tmp_path / "one"), _fake_stack(plan, tmp_path, tmp_path / "two")
    one.start(timeout=60)
    try:
        two.start(timeout=60)
        try:
            ids = [json.loads((s.state_dir / "state.json").read_text())["stack_id"] for s in (one, two)]
            assert ids == [one.stack_id, two.stack_id] and one.stack_id != two.stack_id
        finally:
            two.stop(grace=2)
        assert not (two.state_dir / "state.json").exists()
        assert json.loads((one.state_dir / "state.json").read_text())["stack_id"] == one.stack_id
        assert all(p.alive() for p in one.procs)
    finally:
        one.stop(grace=2)
    assert not (one.state_dir / "state.json").exists()


def test_a_stack_stopping_in_a_state_dir_that_records_another_stack_leaves_that_record(plan, tmp_path):
    running = _fake_stack(plan, tmp_path, tmp_path / "state")
    running.start(timeout=60)
    try:
        before = (running.state_dir / "state.json").read_text()
        other = _fake_stack(plan, tmp_path, tmp_path / "state")  # e.g. a test stack pointed at the demo's state dir
        other.stop(grace=2)
        assert (running.state_dir / "state.json").read_text() == before
        assert stop_recorded(running.state_dir, grace=5) == 3  # `down` finds the running stack's processes, Redis too
    finally:
        running.stop(grace=2)


def test_a_stack_refuses_to_start_over_the_record_of_another_running_stack(plan, tmp_path):
    running = _fake_stack(plan, tmp_path, tmp_path / "state")
    running.start(timeout=60)
    try:
        other = _fake_stack(plan, tmp_path, tmp_path / "state")
        with pytest.raises(StackError) as err:
            other.start(timeout=60)
        assert f"{running.state_dir} holds the state of another stack that is still running" in str(err.value)
        assert "python -m generator.operate.runtime down --state-dir" in str(err.value) and other.procs == []
        assert json.loads((running.state_dir / "state.json").read_text())["stack_id"] == running.stack_id
    finally:
        running.stop(grace=2)


def test_attach_adopts_the_recorded_id_so_the_attached_handle_stops_and_removes_the_state(plan, tmp_path):
    first = _fake_stack(plan, tmp_path, tmp_path / "state")
    first.start(timeout=60)
    try:
        again = LocalStack.attach(first.plan, first.state_dir, first.vllm_python, gateway_python=first.gateway_python)
        assert again is not None and again.stack_id == first.stack_id
        again.stop(grace=2)
        assert not (first.state_dir / "state.json").exists()
    finally:
        first.stop(grace=2)


def test_a_state_file_from_before_ids_counts_as_ours_when_it_records_only_our_processes(plan, tmp_path):
    first = _fake_stack(plan, tmp_path, tmp_path / "state")
    first.start(timeout=60)
    try:
        state = json.loads((first.state_dir / "state.json").read_text())
        del state["stack_id"]  # as an older runtime wrote it
        (first.state_dir / "state.json").write_text(json.dumps(state))
        stranger = _fake_stack(plan, tmp_path, tmp_path / "state")
        assert not stranger.owns_state() and "another stack that is still running" in stranger._other_stack_running()
        assert first.owns_state() and first._other_stack_running() is None
    finally:
        first.stop(grace=2)
    assert not (first.state_dir / "state.json").exists()


# vLLM's interpreter for the fork tests: the real fork server (vllm_fork.py) with the stand-in for vLLM
# (tests/fork_standin.py) as what it imports and runs; a spawned backend runs the stand-in too
FORK_PYTHON = """#!{python}
import os, sys
args = sys.argv[1:]
if "--fork-server" in args:
    args += ["--module", "tests.fork_standin"]
elif args[:2] == ["-m", "generator.shipped.on_demand.vllm_fork"]:
    args = ["-m", "tests.fork_standin", *args[2:]]
os.execv({python!r}, [{python!r}, *args])
"""


def test_engine_fork_backends_are_forked_from_one_server_and_spawned_when_it_is_gone(tmp_path, plan, monkeypatch):
    from generator.operate.runtime.local import FORK_SERVER

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)  # the stand-in is imported as tests.fork_standin
    fake = tmp_path / "vllm-python"
    fake.write_text(FORK_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    env = '  env: {CPU_BACKEND_FORK: "1"}\n'
    p = plan(
        f"a:\n  gpus: []\n  port: {free_port()}\n  command: vllm serve o/a --max-model-len 8K\n{env}"
        f"b:\n  gpus: []\n  port: {free_port()}\n  command: vllm serve o/b --max-model-len 8K\n{env}"
        f"gateway: {{port: {free_port()}}}\n"
    )
    stack = LocalStack(p, tmp_path / "state", vllm_python=str(fake))
    stack.state_dir.mkdir(parents=True)
    try:
        procs = [stack._backend(m) for m in p.models]
        assert stack._watch(procs, timeout=60, fail_fast=True) == ()
        (server,) = [x for x in stack.procs if x.name.startswith(FORK_SERVER)]  # one environment, one server
        assert [psutil.Process(x.pid).ppid() for x in procs] == [server.pid] * 2
        recorded = json.loads((stack.state_dir / "state.json").read_text())
        assert {e["name"] for e in recorded["procs"]} == {"a", "b", server.name}
        assert all(os.getsid(x.pid) == x.pid for x in procs)  # session leaders: `down` ends them by session
        seen = json.loads(procs[0].log.read_text().splitlines()[0])
        assert (
            seen["argv"][1:] == list(procs[0].fork_args)
            and seen["env"]["VLLM_API_KEY"] == stack.keys()[p.models[0].api_key_env]
        )

        stack.kill("a")
        stack.kill(server.name)
        stack.start_backend("a", timeout=60)  # a new server for it
        (again,) = [x for x in stack.procs if x.name.startswith(FORK_SERVER)]
        a = next(x for x in stack.procs if x.name == "a")
        assert again.pid != server.pid and psutil.Process(a.pid).ppid() == again.pid

        long_state = tmp_path / ("x" * 90) / "state"  # too long a path for a Unix socket: a private folder in /tmp
        deep = LocalStack(p, long_state, vllm_python=str(fake))._backend(p.models[1]).fork_socket
        assert deep is not None and Path(deep).parent.parent == Path(tempfile.gettempdir()), deep
    finally:
        stack.stop(grace=2)
    assert not any(x.alive() for x in procs) and not server.alive() and not again.alive()
    # the backends' TMPDIRs, the one of the backend killed with its server too (vllm_fork.py)
    assert not Path(vllm_fork.scratch_root(again.cmd[-1])).exists()

    broken = tmp_path / "broken-python"  # a fork server that dies at start: the backend is spawned, with a line
    broken.write_text(
        FORK_PYTHON.format(python=sys.executable).replace('args += ["--module", "tests.fork_standin"]', "sys.exit(1)")
    )
    broken.chmod(0o755)
    console = Console(record=True, width=200)
    spawned = LocalStack(p, tmp_path / "state2", vllm_python=str(broken), console=console)
    spawned.state_dir.mkdir(parents=True)
    try:
        proc = spawned._backend(p.models[1])
        assert spawned._watch([proc], timeout=60, fail_fast=True) == ()
        assert psutil.Process(proc.pid).ppid() == os.getpid()  # spawned by this process, not forked
        said = console.export_text()
        assert "b: no vLLM fork server answers" in said and "started as a process of its own" in said, said
    finally:
        spawned.stop(grace=2)


def test_down_from_another_process_removes_the_recorded_fork_servers_files(tmp_path):
    """`runtime down` (local.down): besides the processes (stop_recorded), each recorded fork server's socket and the
    root of its backends' TMPDIRs (a backend killed with its server leaves its folder there)."""
    sock = tmp_path / "fork" / "abc.sock"
    sock.parent.mkdir()
    sock.touch()
    root = Path(vllm_fork.scratch_root(str(sock)))
    (root / "left-by-a-killed-backend").mkdir(parents=True)
    gone = {"name": f"{FORK_SERVER}-abc", "pid": 2**22 + 1, "sid": 2**22 + 1, "started": 1.0, "cmd": ["py", str(sock)]}
    (tmp_path / "state.json").write_text(json.dumps({"procs": [gone]}))
    assert local.down(tmp_path, grace=1) == 0  # its process is gone already
    assert not sock.exists() and not root.exists() and not (tmp_path / "state.json").exists()

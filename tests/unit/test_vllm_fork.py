"""The vLLM fork server (generator/shipped/on_demand/vllm_fork.py) with a stand-in for vLLM (tests/fork_standin.py):
each child is exactly the process its request describes, Popen's view of it is right, and every way of not having a
server ends in ForkUnavailable (the caller then spawns). The real vLLM behind it: every CPU stack of the integration
tests (tests/integration/test_gateway_basics.py checks the demo's backends are forks)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.shipped.on_demand import vllm_fork

ROOT = Path(__file__).resolve().parents[2]


def start_server(sock: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "generator.shipped.on_demand.vllm_fork",
            "--fork-server",
            str(sock),
            "--module",
            "tests.fork_standin",
        ],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # SIGINT as a terminal gives it, whatever the launcher did: a shell's `cmd &` without job control (`nohup
        # make test &`) ignores it, the children inherit that, and the SIGINT test's child would never end
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    sock = tmp_path_factory.mktemp("fork") / "s.sock"
    proc = start_server(sock)
    deadline = time.monotonic() + 30  # the tests that connect by hand (not through fork(), which waits) need it bound
    while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sock.exists(), f"the fork server bound no socket (exit {proc.poll()})"
    yield sock, proc
    proc.kill()
    proc.wait(10)
    shutil.rmtree(
        vllm_fork.scratch_root(str(sock)), ignore_errors=True
    )  # as the runtime's stop does (none if no child ran)


def report(log: Path) -> dict:
    return json.loads(log.read_text().splitlines()[0])


def test_a_child_is_the_process_its_request_describes(server, tmp_path):
    sock, proc = server
    log = tmp_path / "b.log"
    env = {"PATH": os.environ["PATH"], "ONLY_THIS": "1", "PYTHONPATH": str(ROOT)}
    child = vllm_fork.fork(str(sock), ["exit", "3"], env, str(tmp_path), str(log))
    assert child.wait(30) == 3 and child.poll() == 3 and child.returncode == 3
    seen = report(log)
    assert seen["argv"] == ["vllm", "exit", "3"]
    assert seen["cwd"] == str(tmp_path)
    scratch = seen["env"]["TMPDIR"]  # a folder of its own, gone once it ended
    assert seen["env"] == {**env, "TMPDIR": scratch}  # exactly the request's, nothing of the server's
    assert Path(scratch).parent == Path(vllm_fork.scratch_root(str(sock))) and not Path(scratch).exists()
    assert seen["pid"] == child.pid and seen["ppid"] == proc.pid
    assert seen["sid"] == child.pid  # session=True: a session leader, as Popen(start_new_session=True)
    assert log.read_text().splitlines()[1] == "to stderr"  # both streams in the log


def test_a_child_outside_a_session_keeps_the_servers_with_a_group_of_its_own(server, tmp_path):
    sock, proc = server
    child = vllm_fork.fork(str(sock), ["exit", "0"], {}, str(tmp_path), str(tmp_path / "b.log"), session=False)
    assert child.wait(30) == 0
    seen = report(tmp_path / "b.log")
    assert seen["sid"] == os.getsid(proc.pid) and seen["pgid"] == child.pid


def test_a_running_child_polls_none_and_a_killed_one_reports_its_signal(server, tmp_path):
    sock, _ = server
    children = [
        vllm_fork.fork(str(sock), ["sleep", "60"], {}, str(tmp_path), str(tmp_path / f"{i}.log")) for i in range(3)
    ]
    assert [c.poll() for c in children] == [None] * 3
    with pytest.raises(subprocess.TimeoutExpired):
        children[0].wait(0.5)
    for sig, c in zip((signal.SIGKILL, signal.SIGTERM, signal.SIGINT), children):
        os.killpg(c.pid, sig)
    assert children[0].wait(30) == -signal.SIGKILL
    assert children[1].wait(30) == -signal.SIGTERM
    assert children[2].wait(30) != 0  # Python's own SIGINT handler: KeyboardInterrupt
    # each one's TMPDIR is gone, a killed one's too (the server removes it when it reaps the child); the
    # server reports the exit after it removed it
    scratch = [report(tmp_path / f"{i}.log")["env"]["TMPDIR"] for i in range(3)]
    assert len(set(scratch)) == 3 and not any(Path(s).exists() for s in scratch), scratch


def test_an_engine_forked_by_a_backend_ends_when_the_backends_api_server_is_killed(server, tmp_path):
    """SIGKILL of a backend's API server takes its engine with it (issue 58: the engine, re-parented to init, kept
    the backend's port); the fork server and the backend's session are left as they were."""
    sock, proc = server
    log = tmp_path / "b.log"
    child = vllm_fork.fork(str(sock), ["engine", "60"], {"PYTHONPATH": str(ROOT)}, str(tmp_path), str(log))
    deadline = time.monotonic() + 20
    while (not log.exists() or '{"engine"' not in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    engine = next(json.loads(line)["engine"] for line in log.read_text().splitlines() if line.startswith('{"engine"'))
    assert os.getsid(engine) == child.pid
    os.kill(child.pid, signal.SIGKILL)  # the API server only, as `kill -9 <its pid>`
    assert child.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while Path(f"/proc/{engine}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    survived = Path(f"/proc/{engine}").exists()
    if survived:
        os.kill(engine, signal.SIGKILL)
    assert not survived, "the engine outlived its API server"
    assert proc.poll() is None  # the server serves on


def test_a_child_that_outlives_its_server_is_still_followed(tmp_path):
    sock = tmp_path / "s.sock"
    proc = start_server(sock)
    try:
        child = vllm_fork.fork(str(sock), ["sleep", "60"], {}, str(tmp_path), str(tmp_path / "b.log"))
    finally:
        proc.kill()
        proc.wait(10)
    assert child.poll() is None  # it runs on without the server
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(30) == vllm_fork.UNKNOWN_EXIT  # its status went to init
    shutil.rmtree(vllm_fork.scratch_root(str(sock)))  # its TMPDIR is left: what a stack's stop removes


def test_no_server_is_fork_unavailable(tmp_path):
    started = time.monotonic()
    with pytest.raises(vllm_fork.ForkUnavailable, match="no vLLM fork server answers"):
        vllm_fork.fork(str(tmp_path / "none.sock"), [], {}, str(tmp_path), str(tmp_path / "b.log"), alive=lambda: False)
    assert time.monotonic() - started < 5  # a dead server is not waited for
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(tmp_path / "stale.sock"))  # bound, never listening: a dead server's socket file
    with pytest.raises(vllm_fork.ForkUnavailable):
        vllm_fork.fork(str(tmp_path / "stale.sock"), [], {}, str(tmp_path), str(tmp_path / "b.log"), server_wait=0.5)


def test_a_bad_request_is_refused_and_the_server_serves_on(server, tmp_path):
    sock, _ = server
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(str(sock))
    conn.sendall(b'{"args": "not a list"}\n')
    assert "bad request" in json.loads(conn.makefile().readline())["error"]
    conn.close()
    child = vllm_fork.fork(str(sock), ["exit", "0"], {}, str(tmp_path), str(tmp_path / "b.log"))
    assert child.wait(30) == 0


def test_the_socket_is_the_owners_only(server):
    sock, _ = server
    assert (sock.stat().st_mode & 0o777) == 0o600


def test_a_process_group_is_running_until_its_last_member_is_gone_or_a_zombie():
    """process_group.running_group / group_members: what the controller's unload waits on (an engine that outlives
    its API server holds the listening socket) and what a ForkedProcess asks once its server is gone."""
    from generator.shipped.on_demand.process_group import group_members, running_group

    leader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)",
        ],
        process_group=0,
    )
    try:
        deadline = time.monotonic() + 20
        while len(group_members(leader.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        (child,) = set(group_members(leader.pid)) - {leader.pid}
        assert running_group(leader.pid) == running_group(child) == leader.pid
        leader.kill()  # a zombie until reaped: not running, while its child runs on in the group
        deadline = time.monotonic() + 20
        while running_group(leader.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running_group(leader.pid) is None and group_members(leader.pid) == [child]
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(10)
    deadline = time.monotonic() + 20
    while group_members(leader.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(leader.pid) == [] and group_members(None) == []


def test_a_process_whose_main_thread_ended_runs_while_another_thread_holds_its_port():
    """A killed vLLM's main thread can end before its other threads; /proc then says "Z" for the process while its
    last thread still frees the memory and holds the listening socket (an idle-unloaded model whose port still
    answered, in CI). running_group counts it until its last thread is gone, so the unload waits for the port."""
    from generator.operate.runtime.ports import free_port
    from generator.shipped.on_demand.process_group import group_members, running_group

    port = free_port()
    script = (
        "import ctypes, socket, sys, threading, time\n"
        f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen()\n"
        "threading.Thread(target=lambda: (sys.stdin.readline(), s.close())).start()\n"
        "print('ready', flush=True)\n"
        "ctypes.CDLL(None).pthread_exit(None)  # the main thread ends (ctypes lets the GIL go first)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, process_group=0
    )
    try:
        assert proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 20
        while open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the main thread never ended"
            time.sleep(0.02)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # its port still answers
        assert running_group(proc.pid) == proc.pid and group_members(proc.pid) == [proc.pid]
        proc.stdin.write("\n")  # the last thread closes the socket and ends: now it is gone
        proc.stdin.flush()
        assert proc.wait(20) == 0
        assert running_group(proc.pid) is None and group_members(proc.pid) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_an_exit_that_comes_with_the_pid_is_not_lost(tmp_path):
    """A child that ends at once (a backend that fails at start-up) can have its exit line sent before the client
    read the pid's: both come in one read. Its exit code is the child's, not UNKNOWN_EXIT (seen in CI as 255 for
    `exit 3`, under load)."""
    import threading

    path = tmp_path / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def answer_both_at_once():
        conn, _ = listener.accept()
        conn.makefile("rb").readline()
        conn.sendall(b'{"pid": 4194300}\n{"exit": 3}\n')
        conn.close()

    server = threading.Thread(target=answer_both_at_once)
    server.start()
    try:
        child = vllm_fork.fork(str(path), ["exit", "3"], {}, str(tmp_path), str(tmp_path / "c.log"), server_wait=5)
        assert child.wait(5) == 3 and child.poll() == 3
    finally:
        server.join(5)
        listener.close()

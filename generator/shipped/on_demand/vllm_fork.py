"""vLLM backends forked from one warm interpreter: how the local runtime and the on-demand controller start a model
whose env sets CPU_BACKEND_FORK=1 (the CPU examples' tiny scripted models).

Importing vLLM's API server costs ~13 CPU-s here, a scripted model's whole start ~15 (docs/testing.md). A local
stack's fork server imports it once; each backend the runtime or the controller starts afterwards is a fork of that
server running `vllm serve` with its own flags, environment, working directory and log.

    python -m generator.shipped.on_demand.vllm_fork --fork-server SOCKET   # the server, under vLLM's interpreter
    python -m generator.shipped.on_demand.vllm_fork <vllm serve flags>      # one backend, no server (the fallback)

Both also apply cpu_backend_patches.py: vLLM's engine process forked from its API server, not spawned, and one gloo
device (one polling thread) for all of a process's torch.distributed groups; and the engine ends with its API server
(process_group.children_die_with_this_process: a killed API server left its engine holding the port).

Why this is safe only for the CPU examples: the server is one thread when it forks (checked), and what torch and vLLM
read from the environment when imported (OMP_NUM_THREADS, TORCH_COMPILE_DISABLE, logging) is the server's. The
runtime starts one server per distinct model environment (`import_env`), so each backend forks from a server started
with its own settings. A real CPU box binds OpenMP threads to cores and keeps vLLM's spawn (leave the variable out).

The protocol (standard library only: the controller's copy in a container has nothing else): one connection per
backend on a Unix socket the runtime keeps in the stack's state dir (mode 700; the peer's uid is checked too). The
client sends one JSON line {"args", "env", "cwd", "log", "session"}; the server answers {"pid": N} once the child
runs and {"exit": code} when it ends (Popen's returncode: -N for signal N). The connection is the client's handle:
`ForkedProcess` gives Popen's pid / poll / wait / returncode over it. A child with "session": true is a session
leader (as Popen's start_new_session, for the runtime's state.json); false keeps it in the server's session with a
process group of its own (the controller's backends: `runtime down` ends the server's session, and them with it).
Each child runs with a TMPDIR of its own that the server makes and that is removed when the child ends.
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import json
import os
import select
import selectors
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

from . import cpu_backend_patches
from .process_group import children_die_with_this_process, running_group

PER_BACKEND_ENV = ("VLLM_API_KEY", "CUDA_VISIBLE_DEVICES")  # set per backend at its fork; the rest is the server's
SERVE_MODULE = "vllm.entrypoints.launchers.api_server.entry"  # its main() is `vllm serve` (as api_server's __main__)
# imported by the server too, so that no child imports them: what main() and the engine's start import (measured)
WARM_MODULES = ("uvloop", "vllm.entrypoints.serve.utils.api_utils", "vllm.entrypoints.launchers.cli_args")
MAX_SOCKET_PATH = 100  # a Unix socket path holds 107 bytes (sun_path); a longer state dir spawns its backends
# each child's TMPDIR, made by the server in its scratch_root, removed when the child ends (by the child, or by the
# server for a killed one; the runtime removes the root when it stops the server): vLLM 0.32's engine leaves its
# torch.distributed FileStore (`vllm_dist_<uuid>`) in the temp folder when its process ends without Python's
# shutdown, as a forked engine does (os._exit); every backend start left one in /tmp
SCRATCH_PREFIX = "vllm-backends-"
UNKNOWN_EXIT = 255  # a child that ended after its server did: its status went to init, not to us
SERVER_START_WAIT = 60.0  # seconds a client waits for a just-started server's socket to appear


class ForkUnavailable(OSError):
    """No fork server answers on that socket (none started, or it ended): the caller spawns the backend instead."""


def scratch_root(socket_path: str) -> str:
    """The folder the server on `socket_path` makes its children's TMPDIRs in (short: vLLM puts sockets there)."""
    digest = hashlib.sha256(os.path.abspath(socket_path).encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), SCRATCH_PREFIX + digest)


def _child_scratch(root: str) -> str:
    """A new TMPDIR for a child, in `root` when that is this user's private folder, else one of its own."""
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)  # again each time: a stack's stop removes it
        mode = os.lstat(root)
        if stat.S_ISDIR(mode.st_mode) and mode.st_uid == os.getuid() and not mode.st_mode & 0o077:
            return tempfile.mkdtemp(dir=root)
    except OSError:
        pass
    return tempfile.mkdtemp(prefix=SCRATCH_PREFIX)  # someone else's (or a link): never used


def import_env(env: dict[str, str]) -> dict[str, str]:
    """The part of a backend's environment its fork server must have been started with."""
    return {k: v for k, v in env.items() if k not in PER_BACKEND_ENV}


# --- the client --------------------------------------------------------------------------------------------------


class ForkedProcess:
    """A backend forked by the server, seen as a subprocess.Popen: pid, poll(), wait(timeout), returncode."""

    def __init__(self, conn: socket.socket, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._conn: socket.socket | None = conn
        self._buf = b""

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if timeout is not None and left <= 0:  # (left is 1.0 without a timeout)
                raise subprocess.TimeoutExpired(f"forked backend {self.pid}", timeout)
            self._read(left)
        return self.returncode

    def _exited(self) -> bool:
        """The server's exit line, once it is whole in the buffer (it may have come with the pid: a child that
        ended at once)."""
        if b"\n" not in self._buf:
            return False
        self.returncode = int(json.loads(self._buf.split(b"\n", 1)[0])["exit"])
        self._close()
        return True

    def _read(self, timeout: float) -> None:
        if self._exited():
            return
        if self._conn is None:  # the server ended first: the OS says whether the child still runs
            if running_group(self.pid) is None:
                self.returncode = UNKNOWN_EXIT
            elif timeout:
                time.sleep(timeout)
            return
        if not select.select([self._conn], [], [], timeout)[0]:
            return
        try:
            data = self._conn.recv(4096)
        except OSError:
            data = b""
        if data:
            self._buf += data
            self._exited()
            return
        self._close()
        self._read(0)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __del__(self) -> None:
        self._close()


def fork(
    socket_path: str,
    args: list[str],
    env: dict[str, str],
    cwd: str,
    log: str,
    session: bool = True,
    alive=None,
    server_wait: float = SERVER_START_WAIT,
    answer_wait: float = 600,
) -> ForkedProcess:
    """Ask the server on `socket_path` for a backend running `vllm serve *args` with exactly `env`, in `cwd`, its
    output appended to `log`. Waits up to `server_wait` s for the socket to accept (a server just started binds it
    first; `alive()`, when given, says whether it still can) and up to `answer_wait` s for the child (a new server
    answers once it has imported vLLM). ForkUnavailable when nothing answers."""
    deadline = time.monotonic() + server_wait
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(socket_path)
            break
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            conn.close()
            if time.monotonic() > deadline or (alive is not None and not alive()):
                raise ForkUnavailable(f"no vLLM fork server answers on {socket_path} ({exc.strerror})") from None
            time.sleep(0.2)
    request = {"args": list(args), "env": dict(env), "cwd": cwd, "log": log, "session": session}
    conn.settimeout(answer_wait)
    try:
        conn.sendall(json.dumps(request).encode() + b"\n")
        answer = b""
        while b"\n" not in answer:
            chunk = conn.recv(4096)
            if not chunk:
                raise ForkUnavailable(f"the vLLM fork server on {socket_path} ended before it forked")
            answer += chunk
    except ForkUnavailable:
        conn.close()
        raise
    except OSError as exc:  # TimeoutError included
        conn.close()
        raise ForkUnavailable(f"vLLM fork server {socket_path}: {exc}") from exc
    line, rest = answer.split(b"\n", 1)
    reply = json.loads(line)
    if "pid" not in reply:
        conn.close()
        raise ForkUnavailable(f"the vLLM fork server on {socket_path} refused: {reply.get('error')}")
    conn.settimeout(None)
    proc = ForkedProcess(conn, int(reply["pid"]))
    proc._buf = rest
    return proc


# --- the server --------------------------------------------------------------------------------------------------


def run_serve(args: list[str], module: str = SERVE_MODULE) -> int:
    """`vllm serve *args` in this process (`module`'s main(), as `python -m vllm.entrypoints.openai.api_server` runs
    it); the exit code."""
    sys.argv = ["vllm", *args]
    try:
        importlib.import_module(module).main()
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever ends the backend: its traceback in the log, exit code 1
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _child(request: dict, inherited: list[int], module: str) -> None:
    """In the forked child: become the backend the request describes, run it, exit with its code."""
    code = 1
    try:
        os.setsid() if request.get("session", True) else os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        for fd in inherited:
            try:
                os.close(fd)
            except OSError:
                pass
        out = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ["TMPDIR"] = request["scratch"]
        tempfile.tempdir = None  # the server's, cached: read TMPDIR again
        try:  # `ps` shows the backend, not the server it came from (vLLM names its own processes the same way)
            import setproctitle

            setproctitle.setproctitle(" ".join(["vllm", "serve", *request["args"]])[:400])
        except ImportError:
            pass
        children_die_with_this_process()  # its engine (forked from it: cpu_backend_patches) ends with it
        code = run_serve(list(request["args"]), module)
    except BaseException:  # noqa: BLE001 - the forked child never returns into the server: traceback, os._exit
        traceback.print_exc()
    finally:
        shutil.rmtree(request["scratch"], ignore_errors=True)
        os._exit(code)


def serve(socket_path: str, module: str = SERVE_MODULE) -> None:
    """Bind `socket_path` (so clients can queue at once), import `module` (vLLM's API server: the cost every backend
    shares), then fork a child per request and report each child's exit to the connection that asked for it."""
    try:
        os.unlink(socket_path)  # a dead server's socket: this server replaces it
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    os.chmod(socket_path, 0o600)
    listener.listen(64)
    started = time.monotonic()
    if module == SERVE_MODULE:
        cpu_backend_patches.apply()
        for warm in WARM_MODULES:
            importlib.import_module(warm)
    importlib.import_module(module)
    try:  # set up here, while the environment is the one the process started with: it moves argv's memory
        import setproctitle

        setproctitle.getproctitle()
    except ImportError:
        pass
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # a fork copies one thread: a lock another one held would stay held in every backend
        sys.exit(f"vllm_fork: {threads} threads after importing {module}; a fork server must have one")
    gc.collect()
    gc.freeze()  # the imported objects stay out of the children's collections: their pages stay shared
    print(
        f"vllm_fork: {module} imported in {time.monotonic() - started:.1f}s; forking backends on {socket_path}",
        flush=True,
    )
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, tuple[socket.socket, str]] = {}  # pid -> (its client's connection, its scratch TMPDIR)
    sel = selectors.EpollSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    uid = os.getuid()
    scratch = scratch_root(socket_path)
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                conn, _ = listener.accept()
                request = _request(conn, uid)
                if request is None:
                    conn.close()
                    continue
                request["scratch"] = _child_scratch(scratch)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(
                        request,
                        [
                            listener.fileno(),
                            wake_r,
                            wake_w,
                            sel.fileno(),
                            conn.fileno(),
                            *(c.fileno() for c, _ in children.values()),
                        ],
                        module,
                    )
                children[pid] = (conn, request["scratch"])
                _send(conn, {"pid": pid})
                print(f"vllm_fork: pid {pid}: vllm serve {' '.join(request['args'])[:200]}", flush=True)
            else:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
        _reap(children)


def _request(conn: socket.socket, uid: int) -> dict | None:
    """The client's one JSON line, if the client runs as this server's user; None (and a line why) otherwise."""
    peer_uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    if peer_uid != uid:
        print(f"vllm_fork: refused a client of uid {peer_uid}", flush=True)
        return None
    conn.settimeout(10)
    try:
        line = conn.makefile("rb").readline()
        request = json.loads(line)
        if not isinstance(request.get("args"), list) or not isinstance(request.get("env"), dict):
            raise ValueError("args and env are required")
        request["cwd"], request["log"] = str(request["cwd"]), str(request["log"])
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        _send(conn, {"error": f"bad request: {exc}"})
        return None
    conn.settimeout(None)
    return request


def _send(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the client went away; its backend runs on


def _reap(children: dict[int, tuple[socket.socket, str]]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if (child := children.pop(pid, None)) is not None:
            conn, scratch = child
            shutil.rmtree(scratch, ignore_errors=True)  # a killed child's (one that ended removed its own)
            _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            conn.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--fork-server"]:
        module = argv[3] if argv[2:3] == ["--module"] else SERVE_MODULE  # --module: the tests' stand-in
        serve(argv[1], module)
        return 0
    cpu_backend_patches.apply()
    children_die_with_this_process()
    return run_serve(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Run a Plan as local processes: one vLLM OpenAI server per model and the LiteLLM proxy (processes.py
holds the OS side: sessions, stopping, logs, ports).

Everything binds to 127.0.0.1. Keys are made per stack and kept in STATE_DIR/.env (mode 600).
The gateway's metrics process (gateway_metrics.py, which the supervisor starts) gets a free loopback port of its
own per start and a PROMETHEUS_MULTIPROC_DIR in STATE_DIR (LiteLLM wipes that folder at start: a
shared /tmp default would let two local stacks erase each other's metrics); both are in state.json.

On-demand models (models.yml `on_demand:`) are not started with the stack: the on-demand controller
(`python -m generator.shipped.on_demand`, the gateway's interpreter) starts and stops them as requests come and go,
from the config this runtime writes to STATE_DIR/on-demand.json (their command lines, environment without
keys, logs); the gateway reaches them through it (http://127.0.0.1:<controller port>/m/<model>/v1). The
controller runs in its own session with its backends in it: `down` ends them with it.

Start-up: ports are checked first (a taken port is refused, naming its process); the gateway starts at
once; each backend starts when the models in its `start_after` are healthy (or have failed: a dead
process holds no GPU memory), so models sharing a GPU start one after another. A backend that fails is
reported (name, exit code, last log lines) and the rest keeps running.

The stack records each process it started in STATE_DIR/state.json with its session id and start time;
`down` ends every process of those sessions, whatever their command line (a `--vllm-python` wrapper
that execs python included), and skips a pid that was reused by someone else. The file also holds the
stack's id: a stack writes and removes only a state.json with its own id, and refuses to start in a state
dir that records another stack still running (its record would be lost, and with it `down`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from rich.console import Console
from rich.live import Live
from rich.table import Table

from ...compile.gateway_process import (
    BACKEND_ENV,
    METRICS_PORT_ENV,
    gateway_args,
    gateway_env,
    metrics_env,
    redis_env,
    serve_command,
)
from ...compile.load.parser_repairs import MOUNT as REPAIRS_MOUNT
from ...compile.output import ensure_env_file, read_env_file
from ...compile.plan import ModelPlan, Plan
from ...compile.renderers import LITELLM_FILE, gateway_modules
from ...compile.renderers.litellm import SUPERVISOR_MODULE, local_api_base, people_file, render_litellm, supervisor_file
from ...compile.renderers.on_demand import controller_config
from ...compile.renderers.parser_repairs import REPAIRS_DIR, repair_files
from ...compile.renderers.text import dump_yaml, header
from ...shipped.on_demand import cpu_backend_patches, vllm_fork
from ..keys import write_hashes
from . import redis
from .ports import free_port
from .processes import (
    Proc,
    end_session,
    port_problem,
    session_processes,
    signal_group,
    started_at,
    stop_processes,
    stop_recorded,
    tail,
)

VLLM_ENTRYPOINT = ["-m", "vllm.entrypoints.openai.api_server"]  # `vllm serve` with the same flags
# the same, its engine forked: the spawned fallback of a CPU_BACKEND_FORK backend that no fork server took
ENGINE_FORK_ENTRYPOINT = ["-m", "generator.shipped.on_demand.vllm_fork"]
HEADLESS_ENTRYPOINT = ["-m", "generator.operate.runtime.vllm_headless"]  # `vllm serve --headless`: a model's node
FORK_SERVER = "vllm-fork"  # a fork server's process name: vllm-fork-<its environment's digest> (state.json, logs/)
FORK_TMP_PREFIX = "llm-gateway-fork-"  # a deep state dir's fork sockets: a private folder in /tmp, named so
CONTROLLER = "on-demand"  # the controller's process name (state.json, logs/on-demand.log)
CONTROLLER_FILE = "on-demand.json"
REDIS = "redis"  # the stack's Redis process (state.json, logs/redis.log), when plan.redis
KEYS_HEADER = "# Keys of the local stack, made by `python -m generator.operate.runtime up`. Never commit."


class StackError(RuntimeError):
    """The stack could not start (a port is taken, the gateway failed, or a backend failed when every one
    is required); the message names the process and carries its last log lines."""

    def __init__(self, message: str, failures: tuple[Failure, ...] = ()):
        super().__init__(message)
        self.failures = failures


def _still_running(entry: dict) -> bool:
    """A process state.json records is still the one that was started (not gone, not a reused pid)."""
    now, then = started_at(entry.get("pid")), entry.get("started")
    return now is not None and then is not None and abs(now - then) <= 1


@dataclass(frozen=True)
class Failure:
    """A process that did not come up: what happened, and the end of its log."""

    name: str
    reason: str  # "exited with code 1", "not ready after 900s (stopped)", "never started: ..."
    exit_code: int | None
    log: Path
    last_lines: str

    def __str__(self) -> str:
        return f"{self.name} {self.reason}; last lines of {self.log}:\n{self.last_lines}"


@dataclass
class LocalStack:
    plan: Plan
    state_dir: Path
    vllm_python: str
    gateway_python: str = sys.executable
    gateway_cpus: frozenset[int] | None = None  # pin the gateway (taskset), e.g. away from a load generator
    console: Console = field(default_factory=lambda: Console(stderr=True))
    procs: list[Proc] = field(default_factory=list)
    metrics_port: int | None = None  # the gateway's metrics process, chosen when the gateway starts
    redis_port: int | None = None  # the stack's Redis (plan.redis), chosen when it starts
    # this stack in state.json: stop removes only a state file that records this id (attach adopts the recorded one)
    stack_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        # absolute, so the same stack has the same command lines whoever starts or attaches to it
        self.state_dir = Path(self.state_dir).absolute()
        self.vllm_python = os.path.abspath(self.vllm_python)

    # --- keys and files -------------------------------------------------------------------------
    @property
    def env_path(self) -> Path:
        return self.state_dir / ".env"

    def keys(self) -> dict[str, str]:
        """Per-stack random keys, created once and reused (mode 600 from the start, as compose/.env)."""
        ensure_env_file(self.env_path, self.plan.secret_envs, KEYS_HEADER)
        keys = read_env_file(self.env_path)
        return {n: keys[n] for n in self.plan.secret_envs}

    @property
    def master_key(self) -> str:
        return self.keys()[self.plan.gateway.master_key_env]

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.plan.gateway.port}"

    def gateway_files(self, api_base: Callable[[ModelPlan], str] | None = None) -> dict[str, str]:
        """Same renderer as the compose target, with loopback backends: {path in the state dir: text}."""
        api_base = api_base or local_api_base
        return {
            LITELLM_FILE: header(self.plan) + dump_yaml(render_litellm(self.plan, api_base)),
            **gateway_modules(self.plan),
            **people_file(self.plan),
            **supervisor_file(self.plan),
        }

    def write_gateway_config(self, api_base: Callable[[ModelPlan], str] | None = None) -> Path:
        for rel, text in self.gateway_files(api_base).items():
            (self.state_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.state_dir / rel).write_text(text)
        if self.plan.people:  # the hashes of the keys `make key LOCAL=1` keeps in STATE_DIR/.env
            write_hashes(self.plan, self.env_path, (self.state_dir / LITELLM_FILE).parent)
        return self.state_dir / LITELLM_FILE

    @functools.cached_property  # the plan is fixed per stack: rendered once, not at every start and restart
    def backend_files(self) -> dict[str, str]:
        """The repaired vLLM parsers the backends' flags name (compose's parser-repairs/), {} when none runs one:
        {path in the state dir: text}."""
        return repair_files(self.plan)

    def write_backend_files(self) -> None:
        for rel, text in self.backend_files.items():
            (self.state_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.state_dir / rel).write_text(text)

    def on_host(self, args: tuple[str, ...]) -> tuple[str, ...]:
        """A backend's flags with the container's REPAIRS_MOUNT/... paths turned into this stack's copy of the files."""
        folder = str(self.state_dir / REPAIRS_DIR)
        return tuple(folder + a[len(REPAIRS_MOUNT) :] if a.startswith(REPAIRS_MOUNT + "/") else a for a in args)

    @functools.cached_property  # the plan and paths are fixed per stack: rendered once, not at every spawn
    def digest(self) -> str:
        """What the running processes were started from: every command line, the gateway's files and
        environment. Equal digests = `up` would start exactly what runs (so it reuses it)."""
        config = str(self.state_dir / LITELLM_FILE)
        what = {
            "backends": [self._backend(m).cmd for m in self.plan.models],
            "nodes": [p.cmd for m in self.plan.models for p in self._nodes(m)],
            "gateway": self._gateway(Path(config)).cmd,
            "gateway_env": self.gateway_env(),
            "files": self.gateway_files(),
            "env": {m.name: m.env for m in self.plan.models},
        }
        if controller := self.controller_config():  # absent without on-demand models: the same digest as before
            what["controller"] = controller
        if backend_files := self.backend_files:  # the same: absent when no backend runs a repaired parser
            what["backend_files"] = backend_files
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()

    @classmethod
    def attach(cls, plan: Plan, state_dir: Path, vllm_python: str, **kw) -> LocalStack | None:
        """The stack an earlier `up` left running for this same plan, with handles on its processes (so
        `kill`, `start_backend` and `stop` work on it); None unless every process it recorded is still
        the one it started and the gateway and every backend answer their health check."""
        stack = cls(plan, state_dir, vllm_python, **kw)
        try:
            state = json.loads((state_dir / "state.json").read_text())
        except (OSError, ValueError):
            return None
        if state.get("digest") != stack.digest:
            return None
        stack.stack_id = state.get("stack_id") or stack.stack_id
        if metrics_url := state.get("metrics_url"):  # kept when the fault tests restart a backend through us
            stack.metrics_port = int(metrics_url.rsplit(":", 1)[1].split("/")[0])
        stack.redis_port = state.get("redis_port")
        expected = {
            "gateway",
            *(m.name for m in stack.always_on),
            *([CONTROLLER] if plan.controller else []),
            *([REDIS] if plan.redis else []),
        }
        health = {
            "gateway": f"{stack.gateway_url}/health/liveliness",
            **{m.name: f"http://127.0.0.1:{m.port}/health" for m in stack.always_on},
            **({CONTROLLER: stack.controller_url + "/healthz"} if plan.controller else {}),
        }
        for entry in state.get("procs", []):
            if (entry["name"] in expected or entry["name"].startswith(FORK_SERVER)) and started_at(
                entry["pid"]
            ) == entry.get("started"):
                stack.procs.append(
                    Proc(
                        entry["name"],
                        entry["cmd"],
                        state_dir / "logs" / f"{entry['name']}.log",
                        health.get(entry["name"], ""),
                        pid=entry["pid"],
                        started=entry["started"],
                    )
                )
        if {p.name for p in stack.procs} - {p.name for p in stack.procs if p.name.startswith(FORK_SERVER)} != expected:
            return None
        if plan.redis and not (
            stack.redis_port and redis.ping(stack.redis_port, stack.keys()[plan.redis.password_env])
        ):
            return None
        try:  # 10 s: a healthy gateway on a loaded machine (a test run's other stacks starting) can take seconds
            with httpx.Client(timeout=10) as client:
                if not all(client.get(p.health_url).status_code == 200 for p in stack.procs if p.health_url):
                    return None
        except httpx.HTTPError:
            return None
        return stack

    # --- on-demand models -----------------------------------------------------------------------
    @property
    def always_on(self) -> tuple[ModelPlan, ...]:
        """The models the stack starts itself (on-demand ones are the controller's)."""
        return tuple(m for m in self.plan.models if m.on_demand is None or self.plan.controller is None)

    @property
    def controller_url(self) -> str:
        assert self.plan.controller is not None
        return f"http://127.0.0.1:{self.plan.controller.port}"

    def controller_config(self) -> dict | None:
        """The controller's on-demand.json (generator/shipped/on_demand/config.py): the fields of the compose target's,
        plus how to start each backend here (argv, env without its key, cwd, log); None without on-demand models."""
        c = self.plan.controller
        if c is None or not self.plan.on_demand:
            return None
        config = controller_config(self.plan, lambda m: f"http://127.0.0.1:{m.port}")  # the compose target's fields
        for m in self.plan.on_demand:
            proc = self._backend(m)
            config["models"][m.name].update(
                argv=proc.cmd,
                cwd=os.getcwd(),
                log=str(proc.log),
                env={k: v for k, v in proc.env.items() if k != "VLLM_API_KEY"},
            )  # the controller sets the key itself
            if proc.fork_socket:  # forked from the stack's fork server, in its session (`down` ends it)
                config["models"][m.name]["fork"] = {"socket": proc.fork_socket, "args": list(proc.fork_args)}
        return {**config, "host": "127.0.0.1", "docker_socket": False}

    def _controller(self) -> Proc:
        path = self.state_dir / CONTROLLER_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.controller_config(), indent=1) + "\n")
        keys = self.keys()
        env = {m.api_key_env: keys[m.api_key_env] for m in self.plan.on_demand}
        return Proc(
            CONTROLLER,
            [self.gateway_python, "-m", "generator.shipped.on_demand", "--config", str(path)],
            self.state_dir / "logs" / f"{CONTROLLER}.log",
            self.controller_url + "/healthz",
            env=env,
        )

    # --- processes ------------------------------------------------------------------------------
    def _backend(self, m: ModelPlan) -> Proc:
        # a model on nodes is never forked: its nodes' engines run vLLM's multiprocessing executor across them
        forked = cpu_backend_patches.enabled(m.env) and m.nodes is None
        leader = m.nodes.args(0, "127.0.0.1") if m.nodes else ()  # node 0 of a model on nodes: it serves the API
        args = ("--model", m.model, *self.on_host(m.flag_args), "--host", "127.0.0.1", *leader)
        cmd = [self.vllm_python, *(ENGINE_FORK_ENTRYPOINT if forked else VLLM_ENTRYPOINT), *args]
        # only its own GPUs, as compose's device_ids; "" (none) for gpus: [] (vLLM's CPU build ignores it)
        env = {
            **BACKEND_ENV,
            **m.env,
            "VLLM_API_KEY": self.keys()[m.api_key_env],
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, m.gpus)),
        }
        always = {x.name for x in self.always_on}  # an on-demand model is never waited for (it starts on a request)
        return Proc(
            m.name,
            cmd,
            self.state_dir / "logs" / f"{m.name}.log",
            f"http://127.0.0.1:{m.port}/health",
            env=env,
            waits_for=tuple(w for w in m.start_after if w in always),
            fork_socket=self._fork_socket(env) if forked else None,
            fork_args=args,
        )

    def _nodes(self, m: ModelPlan) -> list[Proc]:
        """The other nodes of a model on `nodes:` (docs/multinode.md), each a headless vLLM on this host meeting the
        leader (_backend) on 127.0.0.1 at nodes.port: started before it, stopped with the stack, never probed (no
        API: the leader answers once every node joined)."""
        if m.nodes is None:
            return []
        env = {**BACKEND_ENV, **m.env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, m.gpus))}
        return [
            Proc(
                f"{m.name}-node-{rank}",
                [
                    self.vllm_python,
                    *HEADLESS_ENTRYPOINT,
                    "--model",
                    m.model,
                    *self.on_host(m.flag_args),
                    *m.nodes.args(rank, "127.0.0.1"),
                ],
                self.state_dir / "logs" / f"{m.name}-node-{rank}.log",
                "",
                env=env,
            )
            for rank in range(1, m.nodes.count)
        ]

    def _start_nodes(self, models: list[ModelPlan] | tuple[ModelPlan, ...]) -> None:
        for m in models:
            for proc in self._nodes(m):
                self._spawn(proc, proc.env)
                self.console.print(f"{proc.name}: starting (headless; {m.name} serves once its nodes joined)")

    # --- the vLLM fork servers (CPU_BACKEND_FORK models: generator/shipped/on_demand/vllm_fork.py) ------------------
    def _fork_socket(self, env: dict[str, str]) -> str | None:
        """The socket of the fork server for backends of this environment (one server per distinct environment:
        what torch and vLLM read at import is the server's); None when the state dir's path is too long for one."""
        digest = hashlib.sha256(json.dumps(vllm_fork.import_env(env), sort_keys=True).encode()).hexdigest()[:12]
        path = self.state_dir / "fork" / f"{digest}.sock"
        if len(str(path).encode()) > vllm_fork.MAX_SOCKET_PATH:  # a deep state dir: a private folder in /tmp instead
            where = hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:16]
            path = Path(tempfile.gettempdir()) / f"{FORK_TMP_PREFIX}{where}" / f"{digest}.sock"
        return str(path) if len(str(path).encode()) <= vllm_fork.MAX_SOCKET_PATH else None

    def _fork_server(self, proc: Proc) -> Proc | None:
        """The running fork server `proc` forks from, started now if this stack has none for its socket yet."""
        if proc.fork_socket is None:
            return None
        name = f"{FORK_SERVER}-{Path(proc.fork_socket).stem}"
        if server := next((p for p in self.procs if p.name == name and p.alive()), None):
            return server
        folder = Path(proc.fork_socket).parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = folder.lstat()
        if folder.is_symlink() or mode.st_uid != os.getuid() or mode.st_mode & 0o077:  # someone else's: never used
            self.console.print(f"[yellow]{folder} is not this user's private folder: {proc.name} is not forked[/]")
            return None
        server = Proc(
            name,
            [self.vllm_python, *ENGINE_FORK_ENTRYPOINT, "--fork-server", proc.fork_socket],
            self.state_dir / "logs" / f"{name}.log",
            "",
        )
        self._spawn(server, vllm_fork.import_env(proc.env))
        self.console.print(f"{name}: imports vLLM once; the backends of its environment fork from it")
        return server

    def _start_fork_servers(self) -> None:
        """Before the backends (the on-demand ones too): the servers' imports run beside the gateway's."""
        for m in self.plan.models:
            self._fork_server(self._backend(m))

    def _gateway(self, config: Path) -> Proc:
        g = self.plan.gateway
        # the supervisor (beside the config) runs LiteLLM and reloads it when the files there change
        cmd = [
            self.gateway_python,
            str(config.parent / f"{SUPERVISOR_MODULE}.py"),
            *serve_command(str(config.parent), self.gateway_python),
            *gateway_args(g, str(config)),
            "--host",
            "127.0.0.1",
        ]
        if self.gateway_cpus:
            cmd = ["taskset", "-c", ",".join(map(str, sorted(self.gateway_cpus))), *cmd]
        return Proc("gateway", cmd, self.state_dir / "logs" / "gateway.log", f"{self.gateway_url}/health/liveliness")

    def _spawn(self, proc: Proc, env: dict[str, str]) -> None:
        if problem := self._other_stack_running():  # before anything runs: its record would be overwritten
            raise StackError(problem)
        proc.log.parent.mkdir(parents=True, exist_ok=True)
        if proc.fork_socket is not None and (server := self._fork_server(proc)):
            try:
                proc.popen = vllm_fork.fork(
                    proc.fork_socket,
                    list(proc.fork_args),
                    {**os.environ, **env},
                    os.getcwd(),
                    str(proc.log),
                    alive=server.alive,
                )
            except vllm_fork.ForkUnavailable as exc:
                self.console.print(f"[yellow]{proc.name}: {exc}; started as a process of its own[/]")
        if proc.popen is None:
            with proc.log.open("ab") as log:
                proc.popen = subprocess.Popen(
                    proc.cmd,
                    env={**os.environ, **env},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    cwd=os.getcwd(),
                )
        proc.pid = proc.popen.pid
        proc.started = started_at(proc.pid)
        self.procs.append(proc)
        self._save_state()

    def _save_state(self) -> None:
        # pid = session id (start_new_session); its start time tells our process from a later reuse of the pid
        state = {
            "stack_id": self.stack_id,
            "gateway_url": self.gateway_url,
            "models": str(Path(self.plan.source).resolve()),
            "digest": self.digest,
            "metrics_url": f"http://127.0.0.1:{self.metrics_port}/metrics" if self.metrics_port else None,
            "redis_port": self.redis_port,
            "procs": [
                {"name": p.name, "pid": p.pid, "sid": p.pid, "started": p.started, "cmd": p.cmd} for p in self.procs
            ],
        }
        (self.state_dir / "state.json").write_text(json.dumps(state, indent=1))

    def ports(self) -> dict[int, str]:
        controller = {self.plan.controller.port: CONTROLLER} if self.plan.controller and self.plan.on_demand else {}
        nodes = {m.nodes.port: f"{m.name} (where its nodes meet)" for m in self.plan.models if m.nodes}
        return {self.plan.gateway.port: "gateway", **{m.port: m.name for m in self.plan.models}, **controller, **nodes}

    def start(self, timeout: float = 900, partial: bool = False) -> tuple[Failure, ...]:
        """Start the gateway at once and each backend after its `start_after` models; wait until every
        backend is ready or has failed. partial=False: any failure stops everything and raises StackError;
        partial=True: failed backends are returned and the rest keeps running. A taken port or a failed
        gateway always raises, with nothing left running."""
        taken = [problem for port, who in self.ports().items() if (problem := port_problem(port, who))]
        if taken:
            raise StackError("\n".join(taken))
        try:
            self.write_backend_files()  # before any backend starts: the controller's on-demand ones too
            self.start_redis()
            gateway = self.start_gateway(wait=False)
            self.console.print("gateway: starting (it never waits for a backend)")
            self._start_fork_servers()
            controller = [self._controller()] if self.controller_config() else []
            if controller:
                self.console.print(
                    f"{CONTROLLER}: starting (loads {', '.join(m.name for m in self.plan.on_demand)} on request)"
                )
            self._start_nodes(self.always_on)
            failures = self._run([*controller, *(self._backend(m) for m in self.always_on)], gateway, timeout)
        except BaseException:
            self.stop()
            raise
        if failures and not partial:
            self.stop()
            raise StackError("\n".join(map(str, failures)), failures)
        return failures

    def start_backend(self, name: str, wait: bool = True, timeout: float = 600) -> None:
        """Start (or restart, after `kill`) one model's vLLM process."""
        self.start_backends([name], wait, timeout)

    def start_backends(self, names: list[str], wait: bool = True, timeout: float = 600) -> None:
        """Start (or restart, after `kill`) these models' vLLM processes side by side, as `plan` now says."""
        procs = [self._backend(m) for m in self.plan.models if m.name in names]
        self.write_backend_files()
        self._start_nodes([m for m in self.plan.models if m.name in names])
        for proc in procs:
            self._spawn(proc, proc.env)
        if wait:
            self._wait(procs, timeout)

    def start_redis(self, timeout: float = 30) -> None:
        """The stack's Redis (plan.redis), before the gateway (whose config names it): a free loopback port, the
        stack's REDIS_PASSWORD; ready when it answers PING to that password. Nothing without plan.redis."""
        if self.plan.redis is None:
            return
        binary = redis.server_binary()
        if binary is None:
            raise StackError(
                f"this stack needs a Redis (docs/keys.md) and redis-server is not installed: {redis.INSTALL_HINT}"
            )
        self.redis_port = free_port()
        password = self.keys()[self.plan.redis.password_env]
        config = redis.write_config(self.state_dir / REDIS, self.redis_port, password, self.plan.redis.hz)
        proc = Proc(REDIS, [binary, str(config)], self.state_dir / "logs" / f"{REDIS}.log", "")
        self._spawn(proc, {})
        deadline = time.monotonic() + timeout
        while not redis.ping(self.redis_port, password):
            if not proc.alive() or time.monotonic() > deadline:
                reason = (
                    f"exited with code {proc.exit_code}" if not proc.alive() else f"not answering after {timeout:.0f}s"
                )
                raise StackError(str(Failure(REDIS, reason, proc.exit_code, proc.log, tail(proc.log))))
            time.sleep(0.1)
        self.console.print(f"{REDIS}: ready on 127.0.0.1:{self.redis_port}")

    def start_gateway(self, api_base: Callable[[ModelPlan], str] | None = None, wait: bool = True) -> Proc:
        if problem := port_problem(self.plan.gateway.port, "gateway"):
            raise StackError(problem)
        if self.plan.redis and self.redis_port is None:  # a gateway started alone (a bench, a test): its Redis first
            self.start_redis()
        proc = self._gateway(self.write_gateway_config(api_base or local_api_base))
        env = {**self.keys(), **self.provider_keys(), **self.gateway_env()}
        if self.plan.redis and self.redis_port:
            env.update(redis_env("127.0.0.1", self.redis_port))
        if METRICS_PORT_ENV in env:  # the generated gateway (a bench variant may have none)
            env.update(self.local_metrics_env())
        self._spawn(proc, env)
        if wait:
            self._wait([proc], 180)
        return proc

    def gateway_env(self) -> dict[str, str]:
        return gateway_env(self.plan.gateway)

    def provider_keys(self) -> dict[str, str]:
        """Hosted models' keys: from this stack's keys file, else the environment `up` runs in (never made here)."""
        written = read_env_file(self.env_path) if self.env_path.exists() else {}
        return {n: v for n in self.plan.provider_key_envs if (v := written.get(n) or os.environ.get(n))}

    def local_metrics_env(self) -> dict[str, str]:
        """This stack's own metrics port and folder instead of the container's fixed ones."""
        self.metrics_port = free_port()
        folder = (self.state_dir / "prometheus").resolve()
        folder.mkdir(parents=True, exist_ok=True)
        return {**metrics_env(self.metrics_port), "PROMETHEUS_MULTIPROC_DIR": str(folder)}

    def kill(self, name: str) -> None:
        """Kill one process of this stack at once (SIGKILL), as a crash would; for fault tests. A model on nodes: its
        other nodes too (one group: a restart starts them all again, start_backends)."""
        group = {name, *(n.name for m in self.plan.models if m.name == name for n in self._nodes(m))}
        procs = [p for p in self.procs if p.name in group and p.alive()]
        for p in procs:
            members = session_processes(p.pid, p.started)  # what it started too: its port is free once they are gone
            signal_group(p.pid, signal.SIGKILL)
            if p.popen:
                p.popen.wait(timeout=30)
            else:  # attached: another process started it (and init reaps it)
                deadline = time.monotonic() + 30
                while p.alive() and time.monotonic() < deadline:
                    time.sleep(0.1)
            psutil.wait_procs(members, timeout=30)
        self.procs = [p for p in self.procs if p not in procs]
        self._save_state()

    def _wait(self, procs: list[Proc], timeout: float) -> None:
        """Wait for these already started processes; the first that exits or is late raises StackError."""
        failures = self._watch(procs, timeout, fail_fast=True)
        if failures:
            raise StackError(str(failures[0]), failures)

    def _run(self, backends: list[Proc], gateway: Proc, timeout: float) -> tuple[Failure, ...]:
        """Start backends as their `waits_for` allow; watch them and the gateway; return the failures.
        A failed gateway raises: without it nothing is served."""
        failures = self._watch([gateway, *backends], timeout, fail_fast=False, critical=gateway.name)
        gateway_failed = [f for f in failures if f.name == gateway.name]
        if gateway_failed:
            raise StackError(str(gateway_failed[0]), failures)
        return failures

    def _watch(self, procs: list[Proc], timeout: float, fail_fast: bool, critical: str = "") -> tuple[Failure, ...]:
        """Start each not yet started process once its `waits_for` are ready or failed, poll health until
        all are ready or failed or `timeout`; stop at the first failure (fail_fast) or that of `critical`."""
        start = time.monotonic()
        by_name = {p.name: p for p in procs}
        failures: list[Failure] = []

        def fail(p: Proc, reason: str) -> None:
            p.failed = reason
            failures.append(Failure(p.name, reason, p.exit_code, p.log, tail(p.log)))

        for p in procs:
            if p.popen is None and p.waits_for:
                self.console.print(f"{p.name}: waits for {', '.join(p.waits_for)} to be healthy (start order)")
        try:
            with (
                httpx.Client(timeout=2) as client,
                Live(self._table(procs, start), console=self.console, refresh_per_second=2, transient=False) as live,
            ):
                while True:
                    for p in procs:
                        if p.popen is None and p.failed is None:
                            deps = [by_name[d] for d in p.waits_for if d in by_name]
                            if all(d.ready_after is not None or d.failed for d in deps):
                                done = [f"{d.name} {'ready' if d.ready_after is not None else 'failed'}" for d in deps]
                                live.console.print(f"{p.name}: starting" + (f" ({', '.join(done)})" if done else ""))
                                self._spawn(p, p.env)
                            continue
                        if p.ready_after is not None or p.failed:
                            continue
                        if not p.alive():
                            fail(p, f"exited with code {p.exit_code} before it was ready")
                            live.console.print(f"[red]{p.name}: {p.failed}[/]")
                            continue
                        try:
                            if client.get(p.health_url).status_code == 200:
                                p.ready_after = time.monotonic() - start
                                live.console.print(f"{p.name}: ready after {p.ready_after:.0f}s")
                        except httpx.HTTPError:
                            pass
                    live.update(self._table(procs, start))
                    if failures and (fail_fast or any(f.name == critical for f in failures)):
                        break
                    if all(p.ready_after is not None or p.failed for p in procs):
                        break
                    if time.monotonic() - start > timeout:
                        for p in procs:
                            if p.ready_after is None and not p.failed:
                                if p.popen is None:
                                    fail(
                                        p,
                                        f"never started: still waiting for {', '.join(p.waits_for)} "
                                        f"after {timeout:.0f}s",
                                    )
                                else:
                                    stop_processes([p])  # a half-started backend would hold memory and a port
                                    fail(p, f"not ready after {timeout:.0f}s (stopped)")
                        live.update(self._table(procs, start))
                        break
                    time.sleep(1)
        finally:
            if not self.console.is_terminal:
                self.console.print()  # Live leaves the last table without a newline in logs
        return tuple(failures)

    @staticmethod
    def _table(procs: list[Proc], start: float) -> Table:
        table = Table("process", "status", "log", box=None)
        now = time.monotonic() - start
        for p in procs:
            if p.failed:
                status = f"[red]{p.failed}[/]"
            elif p.ready_after is not None:
                status = f"[green]ready[/] after {p.ready_after:.0f}s"
            elif p.popen is None:
                status = f"[dim]waits for {', '.join(p.waits_for)}[/]"
            elif not p.alive():
                status = "[red]exited[/]"
            else:
                status = f"[yellow]starting[/] {now:.0f}s"
            table.add_row(p.name, status, str(p.log))
        return table

    def stop(self, grace: float = 15) -> None:
        """End exactly the processes this stack started (their whole process groups; the controller's
        session, where its backends run, too: it stops them itself on SIGTERM, this ends what outlived it)."""
        # the controller's session and the fork servers' hold the on-demand backends (vllm_fork.py)
        controllers = [(p.pid, p.started) for p in self.procs if p.name == CONTROLLER or p.name.startswith(FORK_SERVER)]
        ours = self.owns_state()
        sockets = [Path(p.cmd[-1]) for p in self.procs if p.name.startswith(FORK_SERVER)]
        stop_processes(self.procs, grace)
        for sid, started in controllers:
            end_session(sid, started)
        for socket_path in sockets:
            remove_fork_files(socket_path)
        self.procs.clear()
        if ours:
            (self.state_dir / "state.json").unlink(missing_ok=True)

    def recorded(self) -> dict | None:
        """What STATE_DIR/state.json records (None: no file, or not readable as JSON)."""
        try:
            return json.loads((self.state_dir / "state.json").read_text())
        except (OSError, ValueError):
            return None

    def owns_state(self) -> bool:
        """state.json records this stack (a file without an id, written before ids, counts as ours when
        every process it records is one of ours)."""
        state = self.recorded()
        if state is None:
            return False
        if "stack_id" in state:
            return state["stack_id"] == self.stack_id
        mine = {(p.pid, p.started) for p in self.procs}
        return all((e.get("pid"), e.get("started")) in mine for e in state.get("procs", []))

    def _other_stack_running(self) -> str | None:
        """Why this state dir is taken: state.json records another stack with a live process; else None."""
        state = self.recorded()
        if not state or self.owns_state():
            return None
        alive = [e["name"] for e in state.get("procs", []) if _still_running(e)]
        if not alive:
            return None
        return (
            f"{self.state_dir} holds the state of another stack that is still running ({', '.join(alive)}; "
            f"gateway {state.get('gateway_url')}): stop it with `python -m generator.operate.runtime down --state-dir "
            f"{self.state_dir}`, or give this stack another state dir"
        )

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def remove_fork_files(socket_path: Path) -> None:
    """What a stopped fork server leaves: its socket, its folder when that is the one in /tmp, and the root of its
    children's TMPDIRs (vllm_fork.scratch_root)."""
    socket_path.unlink(missing_ok=True)
    shutil.rmtree(vllm_fork.scratch_root(str(socket_path)), ignore_errors=True)
    if socket_path.parent.name.startswith(FORK_TMP_PREFIX):
        shutil.rmtree(socket_path.parent, ignore_errors=True)


def down(state_dir: Path, grace: float = 15) -> int:
    """`runtime down` (another process than the one that started the stack): stop_recorded, then the files of the
    fork servers state.json recorded. How many processes it stopped."""
    try:
        procs = json.loads((state_dir / "state.json").read_text())["procs"]
    except (OSError, ValueError, KeyError):
        procs = []
    sockets = [Path(p["cmd"][-1]) for p in procs if p.get("name", "").startswith(FORK_SERVER) and p.get("cmd")]
    stopped = stop_recorded(state_dir, grace)
    for socket_path in sockets:
        remove_fork_files(socket_path)
    return stopped

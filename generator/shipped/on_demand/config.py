"""The controller's config file (on-demand.json), as the generator (compose: renderers/on_demand.py) or the
local runtime (runtime/local.py) writes it, read into plain data. Keys stay out of it: each backend's
key is read from the controller's environment (`api_key_env`), as the gateway reads it.

    {"port": 4002, "queue": 64, "load_timeout": 900, "drain_timeout": 300,
     "models": {"<name>": {"group": "g", "idle_timeout": 600, "unload": "stop" | "sleep",
                           "url": "http://<host>:<port>", "service": "<compose service>",
                           "api_key_env": "VLLM_API_KEY_X", "gpus": [0],
                           # local runtime only: how to start the backend as a process
                           "argv": [...], "env": {...}, "cwd": "/abs", "log": "/abs/x.log",
                           # ... forked from the stack's vLLM fork server (vllm_fork.py) when it answers
                           "fork": {"socket": "/abs/fork/x.sock", "args": [...]}}},
     # `replicas: {min, max}` models (scaling.py): "scaling": {"<model>": {"min": 1, "max": 3, "waiting": 2,
     #     "up_after": 30, "idle": 300, "copies": [{"name": "<model>-1", "url": "http://...", "managed": false}, ...]}}
     #     (a managed copy is also under "models", with "by_load": true unless it is min 0's first copy)
     # optional: "host" (default 0.0.0.0), "compose_project" (Docker driver; else $COMPOSE_PROJECT_NAME),
     #           "docker_socket": true (the generator's models.yml setting: /var/run/docker.sock), false (no
     #           Docker: the sleep driver only), or the socket's path}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .policy import ModelSpec, Settings
from .scaling import ScaleSpec, parse_scale

DOCKER_SOCKET = "/var/run/docker.sock"


def _socket(value: object) -> str | None:
    if value is True:
        return DOCKER_SOCKET
    return None if value is False or value is None else str(value)


class ConfigProblem(ValueError):
    """The config file is unreadable or lacks a field: one line naming the file and field."""


@dataclass(frozen=True)
class ModelConfig:
    name: str
    group: str
    idle_timeout: float
    unload: str  # stop | sleep
    url: str  # backend root, no /v1
    service: str = ""
    api_key_env: str = ""
    gpus: tuple[int, ...] = ()
    argv: tuple[str, ...] = ()  # set: the backend is a local process
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    log: str | None = None
    fork_socket: str | None = None  # local runtime: forked from this vLLM fork server (vllm_fork.py) ...
    fork_args: tuple[str, ...] = ()  # ... with these `vllm serve` flags (argv is the fallback)
    by_load: bool = False  # a copy of a `replicas: {min, max}` model started by the load (scaling.py)

    @property
    def spec(self) -> ModelSpec:
        return ModelSpec(self.name, self.group, self.idle_timeout, self.unload, self.gpus, self.by_load)


@dataclass(frozen=True)
class ControllerConfig:
    port: int
    queue: int
    load_timeout: float
    drain_timeout: float
    models: dict[str, ModelConfig]
    host: str = "0.0.0.0"
    compose_project: str | None = None
    docker_socket: str | None = DOCKER_SOCKET  # None: models.yml did not give the controller the socket
    scaling: dict[str, ScaleSpec] = field(default_factory=dict)  # models of `replicas: {min, max}` (scaling.py)
    # a loaded backend is hung after 2 probes of /health in a row that connected and got no answer within
    # hung_probe_timeout, one every hung_probe_interval: as the gateway finds always-on ones (backend_health.py)
    hung_probe_interval: float = 1.0
    hung_probe_timeout: float = 3.0

    @property
    def settings(self) -> Settings:
        return Settings(self.queue, self.load_timeout, self.drain_timeout)


def parse_config(data: dict, source: str = "config") -> ControllerConfig:
    def need(obj: dict, key: str, where: str):
        if key not in obj:
            raise ConfigProblem(f"{source}: {where}{key} is missing")
        return obj[key]

    models = {}
    for name, m in need(data, "models", "").items():
        where = f"models.{name}."
        unload = need(m, "unload", where)
        if unload not in ("stop", "sleep"):
            raise ConfigProblem(f"{source}: {where}unload is {unload!r}; use stop or sleep")
        models[name] = ModelConfig(
            name=name,
            group=need(m, "group", where),
            idle_timeout=float(need(m, "idle_timeout", where)),
            unload=unload,
            url=str(need(m, "url", where)).rstrip("/").removesuffix("/v1"),
            service=m.get("service", name),
            api_key_env=m.get("api_key_env", ""),
            gpus=tuple(m.get("gpus", ())),
            argv=tuple(m.get("argv", ())),
            env=dict(m.get("env", {})),
            cwd=m.get("cwd"),
            log=m.get("log"),
            fork_socket=(m.get("fork") or {}).get("socket"),
            fork_args=tuple((m.get("fork") or {}).get("args", ())),
            by_load=bool(m.get("by_load", False)),
        )
    return ControllerConfig(
        port=int(need(data, "port", "")),
        queue=int(data.get("queue", 64)),
        load_timeout=float(data.get("load_timeout", 900)),
        drain_timeout=float(data.get("drain_timeout", 300)),
        models=models,
        host=data.get("host", "0.0.0.0"),
        compose_project=data.get("compose_project"),
        docker_socket=_socket(data.get("docker_socket", True)),
        scaling={name: _scale(name, s, source) for name, s in data.get("scaling", {}).items()},
        hung_probe_interval=float(data.get("hung_probe_interval", 1.0)),
        hung_probe_timeout=float(data.get("hung_probe_timeout", 3.0)),
    )


def _scale(name: str, data: dict, source: str) -> ScaleSpec:
    try:
        return parse_scale(name, data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigProblem(f"{source}: scaling.{name}: {type(exc).__name__}: {exc}") from None


def load_config(path: str | Path) -> ControllerConfig:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigProblem(f"{path}: cannot read the controller config ({exc})") from None
    return parse_config(data, str(path))

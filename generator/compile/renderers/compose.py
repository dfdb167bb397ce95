"""Plan -> docker compose document: one vLLM service per model on an internal network, one LiteLLM gateway."""

from __future__ import annotations

from ...errors import Problem
from ..gateway_process import (
    BACKEND_ENV,
    CONFIG_DIR,
    GATEWAY_METRICS_PORT,
    GATEWAY_START_BUDGET,
    gateway_args,
    gateway_env,
    redis_env,
    serve_command,
)
from ..load.parser_repairs import MOUNT as REPAIRS_MOUNT
from ..load.schema import AUTOHEAL_IMAGE, BACKEND_CACHES
from ..plan import ModelPlan, Plan
from . import hung_check
from .compose_nodes import as_leader
from .dashboard import GRAFANA, GRAFANA_DASHBOARDS, GRAFANA_DATA, GRAFANA_DIR, GRAFANA_PORT, GRAFANA_PROVISIONING
from .litellm import CONTROLLER_SERVICE, SUPERVISOR_MODULE, supervisor_digest
from .metrics import CONTAINER_CONFIG, CONTAINER_DATA, DATA_VOLUME, DCGM, PROMETHEUS, PROMETHEUS_DIR, PROMETHEUS_PORT
from .on_demand import CONFIG_FILE, PACKAGE_DIR, PACKAGE_MOUNT, controller_digest
from .parser_repairs import REPAIRS_DIR, repairs_digest

ON_DEMAND_PROFILE = "on-demand"  # compose profile of the backends the controller starts (unload: stop)
DOCKER_SOCKET = "/var/run/docker.sock"

ENV_HINT = "run make regenerate to create compose/.env"


def secret_ref(env: str) -> str:
    """Compose interpolation from compose/.env: the value never appears in a generated file."""
    return f"${{{env}:?{ENV_HINT}}}"


def probe_script(port: int, path: str, host: str = "127.0.0.1") -> str:
    """Passes when GET http://127.0.0.1:<port><path> answers 200: bash's /dev/tcp and builtins only, no program
    started beside bash (bash is in the backend, gateway and controller images; curl is not guaranteed). Docker's
    exec of it costs ~40 ms of CPU, a python3 probe ~80 ms (docs/compose.md). `$$` is Compose's escape for a `$`
    the container sees."""
    return (
        f"exec 3<>/dev/tcp/{host}/{port} && printf 'GET {path} HTTP/1.0\\r\\n\\r\\n' >&3 "
        '&& read -r _ code _ <&3 && [[ "$$code" == 200* ]]'
    )


def _healthcheck(port: int, path: str, timeout: str, retries: int, start_period: str, host: str | None = None) -> dict:
    # no `start_interval`: Docker Engine < 25 (Debian's docker.io 20.10) refuses the whole service with it; a 10 s
    # interval finds a ready container soon enough (each probe: a bash start in it, ~40 ms of CPU with Docker's exec)
    return {
        "test": ["CMD", "bash", "-c", probe_script(port, path, host or "127.0.0.1")],
        "interval": "10s",
        "timeout": timeout,
        "retries": retries,
        "start_period": start_period,
    }


def _hardening() -> dict:
    return {"restart": "unless-stopped", "security_opt": ["no-new-privileges:true"]}


def model_service(m: ModelPlan, plan: Plan) -> dict:
    env = {"VLLM_API_KEY": secret_ref(m.api_key_env), "HF_TOKEN": "${HF_TOKEN:-}", **BACKEND_ENV}
    if not plan.gateway.backend_internet:
        env["HF_HUB_OFFLINE"] = "1"
    env.update(m.env)
    volumes = [f"{v}:{target}" for v, target in BACKEND_CACHES.items()] + [str(v) for v in m.volumes]
    if m.parser_repairs:  # the plugin its flags name (an on-demand backend's container is this service's too)
        volumes.append(f"../{REPAIRS_DIR}:{REPAIRS_MOUNT}:ro")
    service: dict = {
        "image": m.image,
        "entrypoint": ["vllm", "serve"],
        "command": list(m.serve_args),
        "environment": env,
        "ipc": "host",
        "volumes": volumes,
        "networks": ["backends", "egress"] if plan.gateway.backend_internet else ["backends"],
        # 15 retries = 150 s of failed probes before a started backend is called unhealthy; a 30-minute start
        # period: a first start downloads weights and compiles
        # (a model on nodes: its leader listens on its host's address, not loopback: compose_nodes.as_leader)
        "healthcheck": _healthcheck(
            m.port, "/health", timeout="10s", retries=15, start_period="30m", host=m.compose_host if m.nodes else None
        ),
        **_hardening(),
    }
    # the check ends the container once hung that long; the restart policy starts it again. Not a copy only the load
    # starts (autoscale.py): the on-demand controller starts and stops that container, and kills it when it hangs
    if m.restart_when_hung and m.on_demand is None:
        service["healthcheck"]["test"] = hung_check.test(
            m.port, m.restart_when_hung, (m.compose_host if m.nodes else None) or "127.0.0.1"
        )
        service["init"] = True  # Docker's tini as PID 1: the check may end vLLM, never PID 1 (hung_check.py)
    if m.on_demand and m.on_demand.unload == "stop":
        # Not started by `docker compose up`: the controller starts and stops this container (Docker API, by its
        # compose labels) when requests come and go. A profile, not `scale: 0`: `up` never creates, starts or
        # removes a service whose profile is inactive (a loaded model survives `up -d` / `make apply`), while
        # `scale: 0` would make every `up` remove the running container. Naming the service activates its
        # profile: `docker compose create <name>` makes the container the controller starts (docs/on-demand.md).
        service["profiles"] = [ON_DEMAND_PROFILE]
    if m.start_after:  # co-located vLLMs profiling memory at once break each other: start them in turn.
        # required: false: a dependency that exits or turns unhealthy holds no GPU memory, so compose
        # warns and starts this one anyway; one broken model does not keep the next from serving
        service["depends_on"] = {d: {"condition": "service_healthy", "required": False} for d in m.start_after}
    if m.gpus:
        service["deploy"] = {
            "resources": {
                "reservations": {
                    "devices": [{"driver": "nvidia", "device_ids": [str(g) for g in m.gpus], "capabilities": ["gpu"]}]
                }
            }
        }
    labels = {"org.llm-gateway.description": m.description} if m.description else {}
    if plan.gateway.autoheal:
        labels["autoheal"] = "true"
    if m.parser_repairs:  # vLLM imports the repairs at start: new ones change the label, compose recreates it
        labels["org.llm-gateway.parser-repairs"] = repairs_digest()
    if labels:
        service["labels"] = labels
    return service


def gateway_service(plan: Plan) -> dict:
    g = plan.gateway
    env = {g.master_key_env: secret_ref(g.master_key_env), **gateway_env(g)}
    env.update({m.api_key_env: secret_ref(m.api_key_env) for m in plan.models})
    # hosted models' provider keys, from the environment compose runs in or compose/.env (the admin sets them);
    # empty when unset: the stack starts, that model's requests fail with its provider's 401
    env.update({name: f"${{{name}:-}}" for name in plan.provider_key_envs})
    if plan.redis:
        env.update(
            {
                **redis_env(plan.redis.service, plan.redis.port),
                plan.redis.password_env: secret_ref(plan.redis.password_env),
            }
        )
    bind = f"[{g.bind}]" if ":" in g.bind else g.bind
    return {
        "image": g.image,
        # the supervisor runs the image's own entrypoint and reloads it when ../litellm changes (a folder
        # mount: files renamed into it are seen); a new supervisor changes the label: compose recreates
        "entrypoint": ["python3", f"{CONFIG_DIR}/{SUPERVISOR_MODULE}.py", *serve_command(CONFIG_DIR)],
        "command": gateway_args(g, f"{CONFIG_DIR}/config.yaml"),
        "environment": env,
        "ports": [f"{bind}:{g.port}:{g.port}"],
        # LiteLLM's metrics process (no key check): for containers of the stack only, never published
        "expose": [str(GATEWAY_METRICS_PORT)],
        "volumes": [f"../litellm:{CONFIG_DIR}:ro"],
        "networks": ["backends", "frontend"],
        # GATEWAY_START_BUDGET: a recreated gateway on a busy box (backends starting beside it) took 110 s to answer,
        # 60 s + 5 failed probes were not enough and `make apply` failed; a ready gateway is healthy at its first probe
        "healthcheck": _healthcheck(
            g.port, "/health/liveliness", timeout="5s", retries=5, start_period=f"{GATEWAY_START_BUDGET}s"
        ),
        "labels": {"org.llm-gateway.supervisor": supervisor_digest()},
        **_hardening(),
    }


REDIS_DATA = "redis-data"  # named volume: counters that outlive a restart (a person's tokens this day/month)


def redis_command(password_env: str, port: int, hz: int) -> str:
    """redis-server (PID 1: it gets the stop signal) with its password read from the environment and given as
    config on stdin (`-`, a here-document): never on a command line, where `ps` on the host would show it.
    Append-only file in /data; no RDB snapshots; `hz` as the plan says."""
    return (
        f"exec redis-server - --port {port} --dir /data --appendonly yes --save '' --protected-mode no"
        f" --hz {hz} <<EOF\n"
        f"requirepass ${password_env}\nEOF\n"
    )


def redis_service(plan: Plan) -> dict:
    """The stack's Redis (plan.redis): on the backend network only, never published; the gateway's workers share
    their counters there. `sh -c`: the official image's entrypoint and docker/redis (Debian's package) alike."""
    r = plan.required_redis()
    return {
        "image": r.image,
        "entrypoint": ["sh", "-c", redis_command("$" + r.password_env, r.port, r.hz)],
        "environment": {r.password_env: secret_ref(r.password_env)},
        "volumes": [f"{REDIS_DATA}:/data"],
        "networks": ["backends"],
        "healthcheck": {
            # REDISCLI_AUTH: redis-cli's password variable (no -a on a command line)
            "test": ["CMD-SHELL", f'REDISCLI_AUTH="$${r.password_env}" redis-cli -p {r.port} ping | grep -q PONG'],
            "interval": "10s",
            "timeout": "5s",
            "retries": 3,
            "start_period": "10s",
        },
        **_hardening(),
    }


def controller_service(plan: Plan) -> dict:
    """The on-demand controller: the gateway's api_base for on-demand models; loads a model when a request asks
    for it (starts its container, or wakes it from vLLM's sleep mode), unloads it when idle or when its group
    needs room. Same image as the gateway (Python + aiohttp); its modules come from ../on-demand. Backend network
    only, never published; the Docker socket only with on_demand.docker_socket (SECURITY.md), never the gateway's."""
    c = plan.required_controller()
    env = {"PYTHONPATH": PACKAGE_MOUNT, **{m.api_key_env: secret_ref(m.api_key_env) for m in plan.on_demand}}
    volumes = [f"../litellm:{CONFIG_DIR}:ro", f"../{PACKAGE_DIR}:{PACKAGE_MOUNT}:ro"]
    if c.docker_socket:
        volumes.append(f"{DOCKER_SOCKET}:{DOCKER_SOCKET}")
    return {
        "image": plan.gateway.image,
        "entrypoint": ["python3", "-m", "generator.shipped.on_demand"],
        "command": ["--config", f"{CONFIG_DIR}/{CONFIG_FILE.rpartition('/')[2]}"],
        "environment": env,
        "volumes": volumes,
        "networks": ["backends"],
        "healthcheck": _healthcheck(c.port, "/healthz", timeout="5s", retries=5, start_period="30s"),
        # a new config or new modules change the label: compose (and `make apply`) recreates the controller
        "labels": {"org.llm-gateway.on-demand": controller_digest(plan)},
        **_hardening(),
    }


def autoheal_service() -> dict:
    """`restart: unless-stopped` ignores a container that runs but is unhealthy (a hung engine); this does not."""
    return {
        "image": AUTOHEAL_IMAGE,
        "environment": {
            "AUTOHEAL_CONTAINER_LABEL": "autoheal",
            "AUTOHEAL_INTERVAL": "30",
            "AUTOHEAL_START_PERIOD": "1800",
        },
        "volumes": ["/var/run/docker.sock:/var/run/docker.sock"],
        "network_mode": "none",
        **_hardening(),
    }


def _published(bind: str, host_port: int, container_port: int) -> str:
    return f"{f'[{bind}]' if ':' in bind else bind}:{host_port}:{container_port}"


def _wget(url: str) -> list[str]:
    # busybox wget is in the Prometheus and Grafana images (no python3 there)
    return ["CMD", "wget", "-q", "-O", "/dev/null", url]


def prometheus_service(plan: Plan) -> dict:
    """Prometheus on the backend network (it scrapes the backends and the gateway's internal metrics port)
    and on `frontend`, the only kind of network Docker publishes a port from: its UI on metrics.bind."""
    m = plan.metrics
    return {
        "image": m.image,
        "command": [
            f"--config.file={CONTAINER_CONFIG}/prometheus.yml",
            f"--storage.tsdb.path={CONTAINER_DATA}",
            f"--storage.tsdb.retention.time={m.retention}",
            f"--storage.tsdb.retention.size={m.retention_size}",
            f"--web.listen-address=:{PROMETHEUS_PORT}",
        ],
        "ports": [_published(m.bind, m.port, PROMETHEUS_PORT)],
        "volumes": [f"../{PROMETHEUS_DIR}:{CONTAINER_CONFIG}:ro", f"{DATA_VOLUME}:{CONTAINER_DATA}"],
        "networks": ["backends", "frontend"],
        "healthcheck": {
            "test": _wget(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready"),
            "interval": "15s",
            "timeout": "5s",
            "retries": 3,
            "start_period": "60s",
        },
        **_hardening(),
    }


def dcgm_service(plan: Plan) -> dict:
    """NVIDIA's GPU exporter. It sees every GPU (`count: all`), so its `gpu` label is the host's GPU index, the
    number models.yml's `gpus:` uses. No SYS_ADMIN: the profiling (DCP) metrics need it, memory and use do not."""
    return {
        "image": plan.metrics.gpu_exporter_image,
        "deploy": {
            "resources": {"reservations": {"devices": [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]}}
        },
        "networks": ["backends"],
        **_hardening(),
    }


def grafana_service(plan: Plan) -> dict:
    """Grafana (opt-in) with the Prometheus datasource and the generated dashboard, provisioned read-only.
    Only on `frontend` (it reaches Prometheus there, never a backend); login admin / the generated password."""
    m, g = plan.metrics, plan.metrics.grafana
    return {
        "image": g.image,
        "environment": {
            "GF_SECURITY_ADMIN_USER": "admin",
            "GF_SECURITY_ADMIN_PASSWORD": secret_ref(g.password_env),  # read at Grafana's first start only
            "GF_USERS_ALLOW_SIGN_UP": "false",
            "GF_AUTH_ANONYMOUS_ENABLED": "false",
            "GF_ANALYTICS_REPORTING_ENABLED": "false",
            "GF_ANALYTICS_CHECK_FOR_UPDATES": "false",
            "GF_ANALYTICS_CHECK_FOR_PLUGIN_UPDATES": "false",
        },
        "ports": [_published(m.bind, g.port, GRAFANA_PORT)],
        "volumes": [
            f"../{GRAFANA_DIR}/provisioning:{GRAFANA_PROVISIONING}:ro",
            f"../{GRAFANA_DIR}/dashboards:{GRAFANA_DASHBOARDS}:ro",
            f"{GRAFANA_DATA}:/var/lib/grafana",
        ],
        "networks": ["frontend"],
        "healthcheck": {
            "test": _wget(f"http://127.0.0.1:{GRAFANA_PORT}/api/health"),
            "interval": "15s",
            "timeout": "5s",
            "retries": 3,
            "start_period": "60s",
        },
        **_hardening(),
    }


def metrics_services(plan: Plan) -> dict[str, dict]:
    if not plan.metrics.enabled:
        return {}
    services = {PROMETHEUS: prometheus_service(plan)}
    if plan.metrics.gpu_exporter:
        services[DCGM] = dcgm_service(plan)
    if plan.grafana:
        services[GRAFANA] = grafana_service(plan)
    return services


def compose_problems(plan: Plan) -> list[Problem]:
    """What only compose cannot do: start/stop an on-demand container without the Docker socket."""
    if plan.controller is None or plan.controller.docker_socket:
        return []
    scaled = list(dict.fromkeys(m.entry for m in plan.on_demand if m.scale is not None))  # replicas: {min, max}
    return [
        Problem(
            plan.source,
            f"{m.name}.on_demand.unload",
            "on_demand unload: stop in compose needs the controller to start/stop containers: set "
            "on_demand.docker_socket: true (see SECURITY.md) or use unload: sleep on a GPU model",
        )
        for m in plan.on_demand
        if m.on_demand is not None and m.on_demand.unload == "stop" and m.scale is None
    ] + [
        Problem(
            plan.source,
            f"{name}.replicas",
            "copies that follow the load in compose need the on-demand controller to start/stop their containers: "
            "set on_demand.docker_socket: true (see SECURITY.md), or a fixed count (replicas: N)",
        )
        for name in scaled
    ]


def render_compose(plan: Plan) -> dict:
    services = {
        m.name: as_leader(m, model_service(m, plan)) if m.nodes else model_service(m, plan) for m in plan.models
    }
    services["litellm"] = gateway_service(plan)
    if plan.redis:
        services[plan.redis.service] = redis_service(plan)
        # the gateway's config names a coordination Redis: LiteLLM fails its start without one
        services["litellm"]["depends_on"] = {plan.redis.service: {"condition": "service_healthy"}}
    if plan.controller:
        services[CONTROLLER_SERVICE] = controller_service(plan)
    if plan.gateway.autoheal:
        services["autoheal"] = autoheal_service()
    services.update(metrics_services(plan))
    named = sorted({v.source for m in plan.models for v in m.volumes if v.named})  # from models.yml volumes:
    networks = {"backends": {"internal": True}, "frontend": {}}
    if plan.gateway.backend_internet:
        networks["egress"] = {}  # model downloads only; nothing is published
    return {
        "name": "llm-gateway",
        "services": services,
        "networks": networks,
        "volumes": {
            v: {} for v in [*BACKEND_CACHES, *_metrics_volumes(plan), *([REDIS_DATA] if plan.redis else []), *named]
        },
    }


def _metrics_volumes(plan: Plan) -> list[str]:
    """Prometheus's TSDB (bounded by metrics.retention / retention_size) and Grafana's database."""
    if not plan.metrics.enabled:
        return []
    return [DATA_VOLUME, *([GRAFANA_DATA] if plan.grafana else [])]

"""How the LiteLLM gateway process is started, for every target (compose service, local process).

One place for its environment and command-line flags, so the container and the local runtime run
the same tuned gateway the benchmark measured (bench/README.md has the figures behind each value).
"""

from __future__ import annotations

from ..shipped.gateway_hooks.gateway_start import METRICS_PORT_ENV
from .plan import GatewayPlan

CONFIG_DIR = "/etc/litellm"  # where the gateway container sees config.yaml and its hook modules (read-only)
WORKER_START_TIMEOUT = 180  # seconds (see gateway_args)
# seconds a gateway may take to answer its first health probe before compose marks it unhealthy (start_period) or
# Kubernetes restarts it (startupProbe): measured 110 s for a recreated 2-worker gateway on 2 busy cores
GATEWAY_START_BUDGET = 300
# The gateway's Prometheus metrics (LiteLLM's `prometheus` callback, or the guard's counters), served by the
# gateway's metrics process (gateway_metrics.py, which gateway_start.py starts beside LiteLLM) on this container
# port (METRICS_PORT_ENV): never published, reached only from inside the stack (Prometheus on the backend network,
# the gateway's own /gateway/status route). It sums every worker's samples (PROMETHEUS_MULTIPROC_DIR, which
# LiteLLM wipes at each start).
GATEWAY_METRICS_PORT = 4001  # schema.py refuses it as gateway.port
# No outbound fetch of LiteLLM's price map at start (air-gapped boxes, and a faster start).
# LiteLLM's own usage telemetry (1.108: a middleware on every request, a runtime that exports to a
# database table or to LITELLM_TELEMETRY_ENDPOINT) vetoed outright: no setting or database turns it on.
# AIOHTTP_KEEPALIVE_TIMEOUT: the gateway drops an idle connection to a backend after 4 s, before vLLM's server does
# (VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s); with LiteLLM's 15 s a request could be written to a connection vLLM was
# closing and fail with a 500 "Can not write request body" (seen once in 8,000 fuzzed requests on the CPU demo).
BASE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY_DISABLED": "True",
    "AIOHTTP_KEEPALIVE_TIMEOUT": "4",
}
# ... and each backend keeps an idle connection 30 s (vLLM's default 5 s), so the client always closes first: a
# 1 s margin was not enough on busy cores (a CI run: one 500 "Server disconnected" in ~400 parser-matrix cells, the
# gateway's 4 s timer late) and LiteLLM's httpx paths keep connections 5 s. models.yml's `env` still wins.
BACKEND_ENV = {"VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "30"}


def admin_env(admin_ui: bool) -> dict[str, str]:
    """LiteLLM's UI and our guard's admin-route switch, both off unless models.yml turns them on; off, LiteLLM's API
    docs too (Swagger at /, ReDoc, /openapi.json: every route, admin ones included, to anyone without a key). The UI's
    pages and assets LiteLLM mounts whatever DISABLE_ADMIN_UI says: the request guard answers them 404."""
    if admin_ui:
        return {"GATEWAY_ADMIN_ROUTES": "1"}
    return {"DISABLE_ADMIN_UI": "True", "NO_DOCS": "True", "NO_REDOC": "True", "NO_OPENAPI": "True"}


UI_ENV = "GATEWAY_UI"  # "0": the gateway's page is off (gateway.ui: false; gateway_hooks/gateway_page.py)
RESPONSES_TTL_ENV = "GATEWAY_RESPONSES_TTL"  # seconds a stored response is kept (gateway_hooks/response_store.py)
LIGHT_METRICS_ENV = "GATEWAY_LIGHT_METRICS"  # gateway.metrics: light: the request guard counts (request_counters.py)


def metrics_env(port: int = GATEWAY_METRICS_PORT, level: str = "full") -> dict[str, str]:
    """The metrics process on `port` (the same --host as the gateway: 127.0.0.1 for local processes);
    the status route reads the same variable to find it. It serves what the workers write to
    PROMETHEUS_MULTIPROC_DIR: LiteLLM's prometheus callback's series (full) or the guard's counters (light)."""
    return {METRICS_PORT_ENV: str(port), **({LIGHT_METRICS_ENV: "1"} if level == "light" else {})}


# LiteLLM's GRACEFUL_SHUTDOWN_TIMEOUT (1.108.7: uvicorn's timeout_graceful_shutdown, and how long a stopping worker
# waits for its requests to drain): seconds a stopping worker (a rolling reload, a pod's rollout) lets its requests
# run before it cancels them. LiteLLM's default, 30 s, cut a long stream mid-answer on a reload (a CI run: "peer
# closed connection without sending complete message body"). An hour: a stream is bounded by no total timeout (the
# gateway's request_timeout bounds each read), and an agent's long answer runs for minutes. A constant, not
# request_timeout: a changed timeout would change the gateway's environment and so recreate it, cutting requests.
DRAIN_TIMEOUT = 3600
GRACEFUL_SHUTDOWN_ENV = "GRACEFUL_SHUTDOWN_TIMEOUT"


def gateway_env(g: GatewayPlan) -> dict[str, str]:
    """Environment besides the keys. LITELLM_LOG=ERROR (the default) also silences uvicorn's
    per-request access log: measured 9% less gateway CPU per request than LiteLLM's default."""
    return {
        **BASE_ENV,
        GRACEFUL_SHUTDOWN_ENV: str(DRAIN_TIMEOUT),
        "LITELLM_LOG": g.log_level.upper(),
        **admin_env(g.admin_ui),
        **metrics_env(level=g.metrics),
        **({} if g.ui else {UI_ENV: "0"}),
        RESPONSES_TTL_ENV: str(g.responses_ttl),
    }


# Where the gateway finds the stack's Redis (plan.redis): LiteLLM's own variable names; the password's variable is
# plan.redis.password_env (REDIS_PASSWORD), a secret from the keys file. The config reads all three
# (renderers/litellm.py: redis_settings).
REDIS_HOST_ENV = "REDIS_HOST"
REDIS_PORT_ENV = "REDIS_PORT"


def redis_env(host: str, port: int) -> dict[str, str]:
    """The gateway's Redis address (compose: the `redis` service; local: 127.0.0.1 and the port the runtime took)."""
    return {REDIS_HOST_ENV: host, REDIS_PORT_ENV: str(port)}


START_MODULE = "gateway_start"  # generator/shipped/gateway_hooks/gateway_start.py, shipped beside the hooks


def gateway_command(config_dir: str, python: str = "python3") -> list[str]:
    """Where no supervisor runs (Kubernetes pods): gateway_start.py resolves `--num_workers auto` in the
    container (its CPUs and memory), prints the count, then execs LiteLLM's CLI with the same arguments.
    (Compose and the local runtime start gateway_supervisor.py, which resolves it the same way.)
    python3 is in the official image (its health check uses it too) and in ours."""
    return [python, f"{config_dir}/{START_MODULE}.py"]


SERVE_MODULE = "gateway_serve"  # generator/shipped/gateway_hooks/gateway_serve.py: LiteLLM, workers from a fork server


def serve_command(config_dir: str, python: str = "python3") -> list[str]:
    """What the supervisor starts (compose, the local runtime), followed by gateway_args: LiteLLM's proxy CLI in
    that process, its uvicorn workers forked from a fork server that imported LiteLLM once, instead of each importing
    it again (gateway_serve.py). Not the image's entrypoint (`exec litellm "$@"`), which would spawn them."""
    return [python, f"{config_dir}/{SERVE_MODULE}.py"]


# Seconds the gateway keeps a client's idle connection (uvicorn's default 5 s): longer than any common client keeps
# one (httpx and the OpenAI / Anthropic SDKs 5 s, Node 5 s, aiohttp 15 s, Go 90 s), so the client always closes first.
# With 5 s against httpx's 5 s, a request sent on a connection the gateway was closing got "Server disconnected
# without sending a response" (a CI run: 4 of 2,000 fuzzed requests, on busy cores).
CLIENT_KEEPALIVE = 120


def gateway_args(g: GatewayPlan, config_path: str) -> list[str]:
    """Arguments to LiteLLM's proxy CLI (after serve_command or gateway_command)."""
    # uvicorn's default 5 s: a worker must answer its parent's ping within it (else it is killed and
    # restarted) and a replacement must be serving within it on a rolling reload (else the reload is
    # dropped). A LiteLLM worker imports for 5-60 s before it can answer (measured, 2 busy cores): with
    # 5 s, two workers on a loaded box were killed and restarted in a loop, and every reload was dropped.
    return [
        "--config",
        config_path,
        "--port",
        str(g.port),
        "--num_workers",
        str(g.workers),
        "--timeout_worker_healthcheck",
        str(WORKER_START_TIMEOUT),
        "--keepalive_timeout",
        str(CLIENT_KEEPALIVE),
    ]

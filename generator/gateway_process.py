"""How the LiteLLM gateway process is started, for every target (compose service, local process).

One place for its environment and command-line flags, so the container and the local runtime run
the same tuned gateway the benchmark measured (bench/README.md has the figures behind each value).
"""

from __future__ import annotations

from .plan import GatewayPlan

CONFIG_DIR = "/etc/litellm"  # where the gateway container sees config.yaml and its hook modules (read-only)
# The gateway's Prometheus metrics (LiteLLM's `prometheus` callback, served by its --prometheus_metrics_port
# process) on this container port: never published, scraped by Prometheus on the backend network.
GATEWAY_METRICS_PORT = 4001
# No outbound fetch of LiteLLM's price map at start (air-gapped boxes, and a faster start).
BASE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def admin_env(admin_ui: bool) -> dict[str, str]:
    """LiteLLM's UI and our guard's admin-route switch, both off unless models.yml turns them on."""
    return {"GATEWAY_ADMIN_ROUTES": "1"} if admin_ui else {"DISABLE_ADMIN_UI": "True"}


def gateway_env(g: GatewayPlan) -> dict[str, str]:
    """Environment besides the keys. LITELLM_LOG=ERROR (the default) also silences uvicorn's
    per-request access log: measured 9% less gateway CPU per request than LiteLLM's default."""
    return {**BASE_ENV, "LITELLM_LOG": g.log_level.upper(), **admin_env(g.admin_ui)}


START_MODULE = "gateway_start"  # generator/gateway_hooks/gateway_start.py, shipped beside the hooks
# uvicorn (>= 0.37) kills a worker that does not answer its supervisor's ping within this many seconds
# and starts another. Its default, 5 s, is shorter than a spawned LiteLLM worker takes to import on a
# busy small host (measured 10-20 s here): with --num_workers > 1 the workers were killed and restarted
# forever. It is also how long a SIGHUP-restarted worker may take to become ready.
WORKER_HEALTHCHECK_S = 120


def gateway_command(config_dir: str, python: str = "python3") -> list[str]:
    """What runs instead of the image's entrypoint: gateway_start.py resolves `--num_workers auto` in the
    container (its CPUs and memory), prints the count, then execs LiteLLM's CLI with the same arguments.
    python3 is in the official image (its health check uses it too) and in ours."""
    return [python, f"{config_dir}/{START_MODULE}.py"]


def gateway_args(g: GatewayPlan, config_path: str) -> list[str]:
    """Arguments to LiteLLM's proxy CLI, passed through gateway_start.py (which resolves `auto`)."""
    return ["--config", config_path, "--port", str(g.port), "--num_workers", str(g.workers),
            "--timeout_worker_healthcheck", str(WORKER_HEALTHCHECK_S)]

"""Plan -> what the on-demand controller (generator/shipped/on_demand/) reads: litellm/on-demand.json, and in compose
the controller's own modules, copied into on-demand/ (the gateway's image has Python but not this project).

Written only when some model is on demand (models.yml `on_demand:`). The config names every on-demand model's
backend (URL, compose service, GPUs, the variable holding its key: never a key) and the controller's limits.
The local runtime calls controller_config() with its own backend_url (loopback ports).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from ..plan import ModelPlan, Plan
from .text import header, json_header

CONFIG_FILE = "litellm/on-demand.json"  # beside the gateway's config; the controller mounts the folder read-only
PACKAGE_DIR = "on-demand"  # compose: the controller's modules, mounted read-only at PACKAGE_MOUNT
PACKAGE_MOUNT = (
    "/opt/on-demand"  # on the controller's PYTHONPATH: `python3 -m generator.shipped.on_demand` imports them
)
SOURCE = (
    Path(__file__).resolve().parents[2] / "shipped" / "on_demand"
)  # generator/shipped/on_demand/ (the controller's package)


def compose_backend_url(m: ModelPlan) -> str:
    """A backend as the controller container sees it: its service name on the backend network."""
    return f"http://{m.name}:{m.port}"


def controller_config(plan: Plan, backend_url: Callable[[ModelPlan], str] = compose_backend_url) -> dict:
    """The controller's settings and its models; `backend_url(m)` -> "http://host:port" of m's vLLM (no /v1)."""
    c = plan.required_controller()
    return {
        "port": c.port,
        "queue": c.queue,
        "load_timeout": c.load_timeout,
        "drain_timeout": c.drain_timeout,
        "docker_socket": c.docker_socket,
        "models": {
            m.name: {
                "group": od.group,
                "idle_timeout": od.idle_timeout,
                "unload": od.unload,
                "url": backend_url(m),
                "service": m.name,  # compose service: its container carries com.docker.compose.service=<this>
                "served_name": m.served_name,
                "api_key_env": m.api_key_env,
                "gpus": list(m.gpus),
                **({"by_load": True} if m.by_load else {}),  # started by its model's queue, never by a request
            }
            for m in plan.on_demand
            if (od := m.on_demand) is not None  # every one of them
        },
        **({"scaling": scaling_config(plan, backend_url)} if any(m.scale for m in plan.models) else {}),
    }


def scaling_config(plan: Plan, backend_url: Callable[[ModelPlan], str]) -> dict:
    """Per model of `replicas: {min, max}` (the controller's scaling.py): its range, signal and timing, and every
    copy's backend in order (the always-on ones too: their vllm:num_requests_waiting counts)."""
    out: dict[str, dict] = {}
    for m in plan.models:
        if m.scale is None:
            continue
        entry = out.setdefault(
            m.entry,
            {
                "min": m.scale.min,
                "max": m.scale.max,
                "waiting": m.scale.waiting,
                "up_after": m.scale.up_after,
                "idle": m.scale.idle,
                "copies": [],
            },
        )
        entry["copies"].append({"name": m.name, "url": backend_url(m), "managed": m.on_demand is not None})
    return out


def config_text(
    plan: Plan, backend_url: Callable[[ModelPlan], str] = compose_backend_url, regenerate: str = "make regenerate"
) -> str:
    return json.dumps({**json_header(plan, regenerate), **controller_config(plan, backend_url)}, indent=2) + "\n"


def package_files(plan: Plan, regenerate: str = "make regenerate") -> dict[str, str]:
    """generator/shipped/on_demand/**.py copied under on-demand/generator/, each with the header (a comment: a module's
    docstring stays its first statement)."""
    files = {
        f"{PACKAGE_DIR}/generator/__init__.py": header(plan, regenerate=regenerate)
        + '"""The on-demand controller, copied for its container."""\n',
        f"{PACKAGE_DIR}/generator/shipped/__init__.py": header(plan, regenerate=regenerate)
        + '"""Code that runs inside the stack; here only the on-demand controller."""\n',
    }
    for path in sorted(SOURCE.rglob("*.py")) if SOURCE.is_dir() else []:
        rel = path.relative_to(SOURCE).as_posix()
        files[f"{PACKAGE_DIR}/generator/shipped/on_demand/{rel}"] = (
            header(plan, regenerate=regenerate) + path.read_text()
        )
    return files


def controller_digest(plan: Plan) -> str:
    """What the controller runs: its config (without the header) and its modules. A new digest in the compose
    service's labels makes compose recreate the controller (it reads both once, at start)."""
    h = hashlib.sha256(json.dumps(controller_config(plan), sort_keys=True).encode())
    for path in sorted(SOURCE.rglob("*.py")) if SOURCE.is_dir() else []:
        h.update(path.relative_to(SOURCE).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def on_demand_files(plan: Plan) -> dict[str, str]:
    """The stack target's part: nothing unless some model is on demand."""
    if plan.controller is None:
        return {}
    return {CONFIG_FILE: config_text(plan), **package_files(plan)}

"""The local runtime's `make apply` for adapters: a running LocalStack takes a models.yml whose only change is the
LoRA adapter lists of its models, without a restart (generator/operate/live_adapters.py): the added adapters are
loaded into their backends (127.0.0.1:<port>, the backend's key), the gateway reloads its new config (rolling, no
cut with gateway.workers >= 2), then the removed adapters are unloaded. The backends keep the command they were
started with (the old --lora-modules): a restart of the stack starts them from the new plan."""

from __future__ import annotations

import time

from ...compile.plan import Plan
from ...compile.renderers import LITELLM_FILE
from ...shipped.gateway_hooks.gateway_supervisor import digest as gateway_digest
from ...shipped.gateway_hooks.gateway_supervisor import reload_outcome
from ..live_adapters import LiveUpdate, call, http_post, live_update, load_calls, unload_calls
from .local import LocalStack, StackError


def _backend_def(stack: LocalStack, plan: Plan, name: str) -> dict:
    m = next(m for m in plan.models if m.name == name)
    proc = stack._backend(m)
    return {"command": proc.cmd, "environment": proc.env, "health": proc.health_url}


def live_updates(stack: LocalStack, plan: Plan) -> dict[str, LiveUpdate]:
    """{backend: its update} taking the running stack to `plan`; StackError when anything else changes (the local
    runtime restarts the stack for that: `up` with the new models.yml)."""
    old, new = {m.name for m in stack.plan.models}, {m.name for m in plan.models}
    if old != new:
        raise StackError(f"models added or removed ({', '.join(sorted(old ^ new))}): restart the stack")
    updates = {}
    for name in sorted(old):
        a, b = _backend_def(stack, stack.plan, name), _backend_def(stack, plan, name)
        if a == b:
            continue
        if (update := live_update(a, b)) is None:
            raise StackError(f"{name}: its backend changes beyond its adapters: restart the stack")
        updates[name] = update
    return updates


def wait_reload(stack: LocalStack, offset: int, timeout: float) -> str:
    """The supervisor's line for the gateway files now in the state dir, written after byte `offset` of its log."""
    want = gateway_digest((stack.state_dir / LITELLM_FILE).parent)
    log = stack.state_dir / "logs" / "gateway.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with log.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        if outcome := reload_outcome(text, want):
            done, said = outcome
            if not done:
                raise StackError(f"gateway: {said}")
            return said
        time.sleep(0.5)
    raise StackError(f"gateway: no reload of {want} reported within {timeout:.0f}s")


def apply_adapters(stack: LocalStack, plan: Plan, timeout: float = 600) -> list[str]:
    """Load, reload the gateway, unload; one line per step done. The stack's plan is `plan` afterwards."""
    updates = live_updates(stack, plan)
    keys = stack.keys()
    posts = {
        name: http_post(f"http://127.0.0.1:{m.port}", keys[m.api_key_env])
        for m in plan.models
        if (name := m.name) in updates
    }
    lines = [line for name, u in updates.items() for line in call(posts[name], load_calls(u), name)]
    log = stack.state_dir / "logs" / "gateway.log"
    offset = log.stat().st_size if log.exists() else 0
    before = gateway_digest((stack.state_dir / LITELLM_FILE).parent)
    stack.plan = plan
    stack.write_gateway_config()
    if gateway_digest((stack.state_dir / LITELLM_FILE).parent) != before:  # an adapter's new path alone: same files
        lines.append("gateway: " + wait_reload(stack, offset, timeout))
    lines += [line for name, u in updates.items() for line in call(posts[name], unload_calls(u), name)]
    lines += [f"{name}: {later} at its next restart" for name, u in updates.items() for later in u.later]
    return lines

"""On-demand models (models.yml `on_demand:`, docs/on-demand.md): each model's OnDemandPlan (its `on_demand:` over
`defaults.on_demand`; `unload: sleep` adds vLLM's sleep mode), what sleep needs (a GPU, no --no-enable-sleep-mode),
the controller's plan and port, and what sleeping costs (a note). The memory rule per set of models that can be
resident together is gpu_memory.py's; their start order start_order.py's."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..plan import ControllerPlan, ModelPlan, OnDemandPlan
from .schema import ModelEntry, ModelsFile, OnDemand
from .sizes import fmt_bytes
from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Finding, Model, State


def on_demand_problems(name: str, plan: OnDemandPlan, gpus: tuple[int, ...], cmd: ServeCommand) -> list[Finding]:
    """A model's `on_demand:` against its command and GPUs."""
    if plan.unload != "sleep":
        return []
    if not gpus:
        return [
            (
                (name, "on_demand", "unload"),
                "unload: sleep needs a GPU: the CPU build of vLLM refuses --enable-sleep-mode (gpus: []); "
                "use unload: stop",
            )
        ]
    flag = cmd.last("--enable-sleep-mode")
    if flag is not None and flag.negated:
        return [
            (
                (name, "command"),
                "--no-enable-sleep-mode turns off the sleep mode that on_demand unload: sleep "
                "needs; remove it (the generator adds --enable-sleep-mode)",
            )
        ]
    return []


def controller_port(port: int, gateway_port: int, models: list[ModelPlan]) -> list[Finding]:
    """The on-demand controller listens beside the gateway and the backends (locally: on 127.0.0.1)."""
    if port == gateway_port:
        return [(("on_demand", "port"), f"port {port} is the gateway's port; pick another (e.g. 4002)")]
    for m in models:
        if m.port == port:
            return [(("on_demand", "port"), f"port {port} is {m.name}'s port; pick another (e.g. 4002)")]
    return []


def _on_demand_entry(entry: ModelEntry, file: ModelsFile) -> OnDemand | None:
    """The model's `on_demand:` over `defaults.on_demand`, field by field; `on_demand: false` opts a model out."""
    if "on_demand" in entry.model_fields_set and entry.on_demand is None:
        return None  # `on_demand: false` (or empty) beats the defaults
    if entry.on_demand is None and file.defaults.on_demand is None:
        return None
    merged = {
        **(file.defaults.on_demand.model_dump(exclude_unset=True) if file.defaults.on_demand else {}),
        **(entry.on_demand.model_dump(exclude_unset=True) if entry.on_demand else {}),
    }
    return OnDemand(**merged)


def _with_on_demand(
    m: ModelPlan, entry: ModelEntry, cmd: ServeCommand, file: ModelsFile
) -> tuple[ModelPlan, list[Finding]]:
    """The model's OnDemandPlan; `unload: sleep` adds --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1 (vLLM serves
    /sleep and /wake_up only in dev mode)."""
    od = _on_demand_entry(entry, file)
    if od is None:
        return m, []
    plan = OnDemandPlan(group=od.group or m.name, idle_timeout=od.idle, unload=od.unload)
    findings = on_demand_problems(m.name, plan, m.gpus, cmd)
    if plan.unload != "sleep" or findings:
        return dataclasses.replace(m, on_demand=plan), findings
    flags = m.flag_args if cmd.enabled("--enable-sleep-mode") else (*m.flag_args, "--enable-sleep-mode")
    env = dict(sorted({**m.env, "VLLM_SERVER_DEV_MODE": "1"}.items()))
    return dataclasses.replace(m, on_demand=plan, flag_args=flags, env=env), findings


def _sleep_notes(models: list[ModelPlan], weights: dict[str, int | None]) -> list[str]:
    """What vLLM's sleep level 1 costs: the weights move to host RAM while the model sleeps."""
    notes = []
    for m in models:
        if m.on_demand and m.on_demand.unload == "sleep":
            size = weights.get(m.name)
            need = (
                f"about {fmt_bytes(size)} (its weights)"
                if size
                else "about the model's weight size (the fit check could not read its files)"
            )
            notes.append(
                f"{m.name}: on_demand unload: sleep (vLLM sleep level 1) moves the weights to host RAM while "
                f"it sleeps: keep {need} of RAM free for it"
            )
    return notes


def apply(s: State, m: Model, plan: ModelPlan) -> ModelPlan:
    """Backend `plan` of model `m`, loaded on demand when its entry (or defaults) says so."""
    plan, found = _with_on_demand(plan, m.entry, m.cmd, s.file)
    s.findings += found
    return plan


def controller(s: State) -> ControllerPlan | None:
    """The on-demand controller, when a model is on demand: its port is neither the gateway's nor a backend's. And
    what each sleeping model costs in host RAM (a note)."""
    if not any(m.on_demand for m in s.backends):
        return None
    c = s.file.on_demand
    plan = ControllerPlan(
        port=c.port,
        queue=c.queue,
        load_timeout=c.load_timeout,
        drain_timeout=c.drain_timeout,
        docker_socket=c.docker_socket,
    )
    s.findings += controller_port(plan.port, s.file.gateway.port, s.backends)
    s.notes += _sleep_notes(s.backends, {b: w for m in s.models for b, w in m.weights.items()})
    return plan

"""The three arms: the mock directly, LiteLLM with its default settings, and the generated gateway.

Both gateways are started the way `generator.operate.runtime` starts one (same process, same readiness
wait), pinned to the same CPUs; they differ only in config file, command-line flags and environment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console

from generator.compile.gateway_process import BASE_ENV
from generator.compile.plan import ModelPlan, Plan
from generator.compile.renderers import gateway_modules
from generator.compile.renderers.litellm import local_api_base, model_entry, supervisor_file
from generator.compile.renderers.text import dump_yaml
from generator.operate.runtime.local import LocalStack
from generator.operate.runtime.processes import Proc

from .apis import Scenario, request_body
from .loadgen import Target
from .session import ALL_CPUS

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Arm:
    name: str  # direct | default | generated
    base_url: str
    key: str
    pid: int | None = None  # the gateway process (its CPU time is read), None for direct

    def target(
        self, body: bytes, stream: bool, direct_port: int | None = None, path: str = CHAT_PATH, end: bytes = b"[DONE]"
    ) -> Target:
        base = f"http://127.0.0.1:{direct_port}" if direct_port else self.base_url
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        if path.startswith("/v1/messages"):  # as Anthropic's SDK (Claude Code) sends it
            headers = {"x-api-key": self.key, "anthropic-version": "2023-06-01", "Content-Type": "application/json"}
        return Target(base + path, headers, body, stream, end)

    def scenario_target(self, s: Scenario, direct_port: int | None = None) -> Target:
        return self.target(request_body(s), s.stream, direct_port, s.path, s.end)


def default_config(plan: Plan, api_base, model_info: bool = False) -> dict:
    """What a LiteLLM user writes first: the models and a master key, every other setting LiteLLM's default.
    `model_info`: add the generated model_info (context sizes), which the max_tokens clamp hook reads."""
    entries = []
    for m in plan.models:
        entry = {
            "model_name": m.served_name,
            "litellm_params": {
                "model": f"hosted_vllm/{m.served_name}",
                "api_base": api_base(m),
                "api_key": f"os.environ/{m.api_key_env}",
                **m.litellm_params,
            },
        }
        if model_info:
            entry["model_info"] = model_entry(m, plan, api_base)["model_info"]
        entries.append(entry)
    return {
        "model_list": entries,
        "general_settings": {"master_key": f"os.environ/{plan.gateway.master_key_env}"},
    }


@dataclass
class VariantGateway(LocalStack):
    """LocalStack's gateway start with another config, flags and environment: LiteLLM's defaults
    (the empty variant) or one tuning step (bench/tune.py)."""

    config: dict | None = None  # None: default_config()
    extra_args: tuple[str, ...] = ()
    env_overrides: dict[str, str] = field(default_factory=dict)
    workers: int | str | None = None  # None: LiteLLM's default; "auto" as models.yml's gateway.workers

    def write_gateway_config(self, api_base: Callable[[ModelPlan], str] | None = None) -> Path:
        path = self.state_dir / "litellm" / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            dump_yaml(self.config if self.config is not None else default_config(self.plan, api_base or local_api_base))
        )
        # hooks a variant may name, and the supervisor every local gateway runs under
        for rel, text in {**gateway_modules(self.plan), **supervisor_file(self.plan)}.items():
            (self.state_dir / rel).write_text(text)
        return path

    def gateway_env(self) -> dict[str, str]:
        return {**BASE_ENV, **self.env_overrides}

    # BASE_ENV: no price-map fetch (offline start only)

    def _gateway(self, config: Path) -> Proc:
        proc = super()._gateway(config)
        at = proc.cmd.index("--num_workers")
        if self.workers is None:
            del proc.cmd[at : at + 2]
        else:
            proc.cmd[at + 1] = str(self.workers)
        proc.cmd.extend(self.extra_args)
        return proc


def start_gateways(plan: Plan, state: Path, cpus: frozenset[int] | None, console: Console) -> dict[str, LocalStack]:
    """{arm: gateway}, all running; the caller stops them. `generated` (1 worker) and `default` run on the
    gateway CPUs; `generated-2w` (2 workers) on every CPU, beside the load generator, as a host's
    gateway shares its cores. Ports: the bench plan's gateway port, +1, +2."""

    def on(port_offset: int, workers) -> Plan:
        return replace(plan, gateway=replace(plan.gateway, port=plan.gateway.port + port_offset, workers=workers))

    gateways = {
        "default": VariantGateway(on(1, 1), state / "default", gateway_cpus=cpus, vllm_python="", console=console),
        "generated": LocalStack(on(0, 1), state / "generated", gateway_cpus=cpus, vllm_python="", console=console),
        "generated-2w": LocalStack(
            on(2, 2), state / "generated-2w", gateway_cpus=ALL_CPUS, vllm_python="", console=console
        ),
    }
    try:
        for stack in gateways.values():
            stack.start_gateway()
    except BaseException:
        stop_all(gateways.values())  # ends exactly what each started, also one that never became ready
        raise
    return gateways


def stop_all(stacks: Iterable[LocalStack]) -> None:
    """Stop every one, also when an earlier stop raised (SIGTERM's exit, a closed stdout): ExitStack runs each callback
    and raises the first error after the last."""
    with contextlib.ExitStack() as stops:
        for stack in stacks:
            stops.callback(stack.stop)

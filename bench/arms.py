"""The three arms: the mock directly, LiteLLM with its default settings, and the generated gateway.

Both gateways are started the way `generator.runtime` starts one (same process, same readiness
wait), pinned to the same CPUs; they differ only in the config file and the command-line flags.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from generator.output import dump_yaml
from generator.plan import ModelPlan, Plan
from generator.runtime.local import LocalStack, Proc

from .loadgen import Target

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Arm:
    name: str  # direct | default | generated
    base_url: str
    key: str

    def target(self, body: bytes, stream: bool, direct_port: int | None = None) -> Target:
        base = f"http://127.0.0.1:{direct_port}" if direct_port else self.base_url
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        return Target(base + CHAT_PATH, headers, body, stream)


def default_config(plan: Plan, api_base) -> dict:
    """What a LiteLLM user writes first: the models and a master key, every other setting LiteLLM's default."""
    return {
        "model_list": [{"model_name": m.served_name,
                        "litellm_params": {"model": f"hosted_vllm/{m.served_name}", "api_base": api_base(m),
                                           "api_key": f"os.environ/{m.api_key_env}", **m.litellm_params}}
                       for m in plan.models],
        "general_settings": {"master_key": f"os.environ/{plan.gateway.master_key_env}"},
    }


class DefaultGateway(LocalStack):
    """LocalStack's gateway start, with LiteLLM's defaults instead of the generated config and flags."""

    def write_gateway_config(self, api_base) -> Path:
        config = self.state_dir / "litellm" / "default.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(dump_yaml(default_config(self.plan, api_base)))
        return config

    def _gateway(self, config: Path) -> Proc:
        proc = super()._gateway(config)
        at = proc.cmd.index("--num_workers")
        del proc.cmd[at:at + 2]  # LiteLLM's default worker count
        return proc


def start_gateways(plan: Plan, state: Path, default_port: int, cpus: frozenset[int] | None,
                   console: Console) -> tuple[LocalStack, LocalStack]:
    """(generated, default), both running. The caller stops them."""
    generated = LocalStack(plan, state / "generated", vllm_python="", gateway_cpus=cpus, console=console)
    default_plan = replace(plan, gateway=replace(plan.gateway, port=default_port))
    default = DefaultGateway(default_plan, state / "default", vllm_python="", gateway_cpus=cpus, console=console)
    try:
        for stack in (generated, default):
            stack.start_gateway()
    except BaseException:
        for stack in (generated, default):
            stack.stop()  # ends exactly what each started, also one that never became ready
        raise
    return generated, default


def model_by_name(plan: Plan, name: str) -> ModelPlan:
    return next(m for m in plan.models if m.name == name)

"""The default target: compose/docker-compose.yml, litellm/config.yaml and the hook modules beside it."""

from __future__ import annotations

from ..plan import Plan
from .compose import render_compose
from .litellm import gateway_modules, render_litellm, supervisor_file
from .target import Target
from .text import dump_yaml, header

COMPOSE_FILE = "compose/docker-compose.yml"
LITELLM_FILE = "litellm/config.yaml"
ENV_FILE = "compose/.env"
ENV_HEADER = "# Keys for the gateway and the backends, made by `make regenerate`. Git-ignored: never commit."


def stack_files(plan: Plan) -> dict[str, str]:
    return {
        COMPOSE_FILE: header(plan) + dump_yaml(render_compose(plan)),
        LITELLM_FILE: header(plan) + dump_yaml(render_litellm(plan)),
        **gateway_modules(plan),
        **supervisor_file(plan),
    }


TARGET = Target("stack", stack_files, regenerate="make regenerate", keys_file=(ENV_FILE, ENV_HEADER))

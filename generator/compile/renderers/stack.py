"""The default target: compose/docker-compose.yml, litellm/config.yaml and the hook modules beside it; with
`metrics:` on (the default) prometheus/ (and grafana/ when it is opted in), which the compose file mounts; with
on-demand models litellm/on-demand.json and on-demand/ (the controller's config and modules); with a backend that
runs a repaired vLLM parser parser-repairs/ (the parser plugin its service mounts)."""

from __future__ import annotations

from ...errors import ConfigError
from ..plan import Plan
from .compose import compose_problems, render_compose
from .compose_nodes import NODES_DIR, node_documents, nodes_problems
from .dashboard import grafana_files
from .litellm import gateway_modules, people_file, render_litellm, supervisor_file
from .metrics import PROMETHEUS_FILE, RULES_FILE, prometheus_config, recording_rules
from .on_demand import on_demand_files
from .parser_repairs import REPAIRS_DIR, repair_files
from .target import Target
from .text import dump_yaml, header

COMPOSE_FILE = "compose/docker-compose.yml"
LITELLM_FILE = "litellm/config.yaml"
ENV_FILE = "compose/.env"
ENV_HEADER = "# Keys for the gateway and the backends, made by `make regenerate`. Git-ignored: never commit."


def stack_files(plan: Plan) -> dict[str, str]:
    problems = compose_problems(plan) + nodes_problems(plan)
    if problems:
        raise ConfigError(problems)
    compose = render_compose(plan)
    return {
        COMPOSE_FILE: header(plan) + dump_yaml(compose),
        # a model on nodes: one compose file per other host (compose_nodes.py)
        **{path: header(plan) + dump_yaml(doc) for path, doc in node_documents(plan, compose["services"]).items()},
        LITELLM_FILE: header(plan) + dump_yaml(render_litellm(plan)),
        **gateway_modules(plan),
        **people_file(plan),
        **metrics_files(plan),
        **supervisor_file(plan),
        **on_demand_files(plan),
        **repair_files(plan),
    }


def metrics_files(plan: Plan) -> dict[str, str]:
    if not plan.metrics.enabled:
        return {}
    files = {
        PROMETHEUS_FILE: header(plan) + dump_yaml(prometheus_config(plan)),
        RULES_FILE: header(plan) + dump_yaml(recording_rules(plan)),
    }
    return {**files, **grafana_files(plan)}


TARGET = Target(
    "stack",
    stack_files,
    regenerate="make regenerate",
    keys_file=(ENV_FILE, ENV_HEADER),
    folders=(REPAIRS_DIR, NODES_DIR),
)

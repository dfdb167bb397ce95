"""models.yml -> Plan: parse, then one concern after the other, and every problem found before anything is written.

build_plan is the pipeline (docs/architecture.md, "The pipeline"): each concern is a module of this package that owns
its checks (findings: a path in models.yml and a message with the fix), its warnings and notes, and its part of the
plan; they share one state.State, which holds what the concerns before them found.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..plan import GatewayPlan, ModelPlan, PersonPlan, Plan, RedisPlan
from . import (
    adapters,
    autoscale,
    backends,
    commands,
    context,
    gateway,
    gpu_memory,
    gpus,
    hosted,
    hung,
    media,
    metrics,
    model_files,
    nodes,
    on_demand,
    output_budget,
    parser_repairs,
    parser_support,
    people,
    pooling,
    ports,
    replicas,
    routing,
    start_order,
    tools,
    volumes,
)
from .parse import parse_file
from .state import State
from .vllm_command import Catalog, load_catalog
from .yaml_source import Source, load_source


def build_plan(src: Source, catalog: Catalog | None = None, notify: Callable[[str], None] | None = None) -> Plan:
    """models.yml's source -> Plan (docs/architecture.md, "The pipeline"); `notify` gets a line before anything slow."""
    s = State(src, parse_file(src), catalog or load_catalog())
    volumes.check_defaults(s)
    for m in s.models:  # what each entry says, before any model file is read
        for concern in (volumes.check, commands.parse, ports.explicit):
            if not m.stopped:  # a concern that finds the model cannot be planned stops it (its finding says why)
                concern(s, m)
    replicas.name_backends(s)
    model_files.read(s, notify)  # before any model is planned: a context left to vLLM comes from the model's config
    for m in s.models:  # each model's concerns, in this order
        for concern in (
            model_files.check,  # the repo and revision exist
            context.resolve,  # --max-model-len, context_length or the model's config
            pooling.decide,  # chat, embedding or rerank
            output_budget.plan,  # max_tokens, below the context
            adapters.serve,  # LoRA adapters and their flags
            tools.check,  # tool-call flags
            nodes.check,  # a model across hosts: its parallel sizes against its nodes' GPUs
            gpus.place,  # each replica's GPUs (each node's)
            backends.plan,  # each backend (the model, or each replica): port, plan, on-demand, fit
            nodes.plan,  # the leader's backend carries its nodes
            autoscale.plan,  # replicas: {min, max}: copies above min on demand, started by the load
            hung.plan,  # how long a hung backend waits for a restart
            replicas.check,  # what one copy per model assumes
            context.warn,  # then the model's warnings: a context above the model's,
            media.warn,  # media hosts,
            parser_support.warn,  # parsers the pinned vLLM gets wrong,
            commands.warn,  # --trust-remote-code
        ):
            if not m.stopped:
                concern(s, m)
    parser_repairs.apply(s)  # then the concerns across models: the repaired vLLM parsers a backend loads
    ports.check(s)  # served names and ports: one per model
    adapters.unique(s)  # adapter names
    autoscale.share_gpus(s)  # copies started by the load: GPUs of their own, or of one on-demand group
    gpu_memory.rule(s)  # the models sharing a GPU fit in it
    hosted.plan(s)  # hosted models (`provider:`)
    routing.route(s)  # fallbacks, context fallbacks, aliases
    start_order.order(s)  # who waits for whom
    gateway_plan = gateway.plan(s)  # the parts of the plan the file's blocks make
    metrics_plan = metrics.plan(s)
    controller = on_demand.controller(s)
    s.stop_on_findings()  # every problem at once: no plan while one stands
    people_plan = people.plan(s)  # (its problems are reported when the rest is right)
    return Plan(
        source=src.path,
        source_digest=src.digest,
        vllm_version=s.catalog.vllm_version,
        models=tuple(s.backends),
        gateway=gateway_plan,
        warnings=tuple(s.warnings),
        notes=(*s.notes, *(note for m in s.models for note in m.notes)),  # the file's notes, then each model's
        metrics=metrics_plan,
        controller=controller,
        people=people_plan,
        redis=RedisPlan(s.file.gateway.redis_image) if needs_redis(people_plan, s.backends, gateway_plan) else None,
        hosted=tuple(s.hosted),
    )


def needs_redis(people: tuple[PersonPlan, ...], models: list[ModelPlan], gateway: GatewayPlan) -> bool:
    """THE one place that decides whether the stack runs a Redis (local runtime, compose, Kubernetes) and the
    gateway is pointed at it. A feature that needs state shared by the gateway's workers or replicas adds its
    condition here (`or ...`); nothing else looks at it. Today: stored /v1/responses answers (gateway.responses_ttl
    above 0, the default: response_store.py); a person with a limit that must be counted; a model with replicas
    (where a new conversation goes, by the requests in flight on each replica: replica_routing.py)."""
    return gateway.responses_ttl > 0 or any(p.counted for p in people) or any(m.replicas > 1 for m in models)


def load_plan(path: Path | str, catalog: Catalog | None = None, notify: Callable[[str], None] | None = None) -> Plan:
    """The one entry point: read models.yml, validate everything, return the plan or raise ConfigError."""
    return build_plan(load_source(path), catalog, notify)

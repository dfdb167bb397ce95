"""models.yml -> Plan: parse, validate every rule, and collect all problems before anything is written."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ...errors import ConfigError, Problem
from ..plan import (
    AdapterPlan,
    ControllerPlan,
    GatewayK8sPlan,
    GatewayPlan,
    GrafanaPlan,
    K8sToleration,
    MetricsK8sPlan,
    MetricsPlan,
    ModelK8sPlan,
    ModelPlan,
    OnDemandPlan,
    PersonPlan,
    Plan,
    RedisPlan,
)
from . import adapters as lora
from . import fit, model_files, parser_repairs, pooling, routing, rules
from .hosted import hosted_plans
from .media import media_env, media_flags, media_warnings
from .parser_support import parser_warnings
from .schema import (
    GPU_LISTS,
    MODEL_NAME,
    RESERVED_NAMES,
    TOP_LEVEL,
    HostedEntry,
    Limits,
    Media,
    Metrics,
    ModelEntry,
    ModelK8s,
    ModelsFile,
    OnDemand,
    Person,
)
from .sizes import fmt_bytes
from .vllm_command import Catalog, FlagError, ServeCommand, load_catalog, parse_serve_command
from .yaml_source import Source, load_source

FIRST_AUTO_PORT = 8001


def _schema_problems(src: Source, exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = err["loc"]
        path = tuple(p for p in (loc[1:] if loc and loc[0] in ("models", "hosted") else loc) if p not in GPU_LISTS)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown field {path[-1]!r}" + _field_hint(path, bool(loc) and loc[0] == "hosted")
        elif err["type"] == "missing":
            msg = f"required field {path[-1]!r} is missing"
        elif err["type"] in ("model_type", "dict_type"):
            msg = (
                f"expected a mapping of fields (name: value lines), "
                f"got {type(err['input']).__name__} {err['input']!r:.40}"
            )
        problems.append(Problem(src.where(path), ".".join(map(str, path)), msg))
    return problems


def _field_hint(path: tuple, hosted: bool = False) -> str:
    import difflib

    from .schema import (
        Controller,
        Defaults,
        Gateway,
        GatewayK8s,
        Grafana,
        LitellmParams,
        MetricsK8s,
        ModelK8s,
        Toleration,
    )

    parent = path[-3] if len(path) > 2 and isinstance(path[-2], int) else path[-2] if len(path) > 1 else ""
    top: dict[str, type[BaseModel]] = {"gateway": GatewayK8s, "metrics": MetricsK8s}
    k8s = top.get(str(path[0]), ModelK8s)
    on_demand = Controller if len(path) == 2 else OnDemand  # top-level block, or a model's (or defaults')
    if path[0] == "people" and len(path) == 3:
        close = difflib.get_close_matches(str(path[-1]), list(Person.model_fields), n=1)
        return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(Person.model_fields)}"
    if len(path) > 3 and path[-3] == "adapters":  # <model>.adapters.<name>.<field>
        from .schema import Adapter

        close = difflib.get_close_matches(str(path[-1]), list(Adapter.model_fields), n=1)
        return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(Adapter.model_fields)}"
    sections: dict[str, type[BaseModel]] = {
        "litellm": LitellmParams,
        "gateway": Gateway,
        "defaults": Defaults,
        "metrics": Metrics,
        "grafana": Grafana,
        "k8s": k8s,
        "tolerations": Toleration,
        "on_demand": on_demand,
        "media": Media,
        "limits": Limits,
    }
    blocks: dict[str, type[BaseModel]] = {"gateway": Gateway, "metrics": Metrics}
    entry: type[BaseModel] = HostedEntry if hosted else ModelEntry
    owner = sections.get(str(parent)) or blocks.get(str(path[0]), entry)
    close = difflib.get_close_matches(str(path[-1]), list(owner.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(owner.model_fields)}"


def _name_problems(src: Source) -> list[Problem]:
    problems = []
    for name in src.data:
        if name in RESERVED_NAMES - set(TOP_LEVEL):
            problems.append(
                Problem(
                    src.where((name,)), str(name), f"{name!r} is the name of a service of the stack; rename the model"
                )
            )
        elif name not in RESERVED_NAMES and not (isinstance(name, str) and MODEL_NAME.match(name)):
            problems.append(
                Problem(
                    src.where((name,)),
                    str(name),
                    "model names become service and host names: use lowercase letters, digits "
                    "and '-', starting and ending with a letter or digit (e.g. qwen3-8b)",
                )
            )
    return problems


def _is_hosted(entry: object) -> bool:
    """An entry with `provider:` is a hosted model (schema.HostedEntry), any other a self-hosted one."""
    return isinstance(entry, dict) and "provider" in entry


def _parse(src: Source) -> ModelsFile:
    problems = _name_problems(src)
    doc = {k: v for k, v in src.data.items() if k in TOP_LEVEL}
    entries = {k: v for k, v in src.data.items() if k not in RESERVED_NAMES}
    doc["hosted"] = {k: v for k, v in entries.items() if _is_hosted(v)}
    doc["models"] = {k: v for k, v in entries.items() if not _is_hosted(v)}
    if not entries and not problems:
        problems.append(
            Problem(src.where(()), "", "no models: add at least one `name: {command: vllm serve ..., gpus: [...]}`")
        )
    try:
        parsed = ModelsFile.model_validate(doc)
    except ValidationError as exc:
        raise ConfigError(problems + _schema_problems(src, exc)) from None
    if problems:
        raise ConfigError(problems)
    return parsed


def _model_plan(
    name: str,
    entry: ModelEntry,
    cmd: ServeCommand,
    file: ModelsFile,
    port: int,
    context: int,
    max_tokens: int,
    derived: bool,
    backend: str,
    gpus: tuple[int, ...],
    replica: int,
    kind: pooling.Kind,
    adapters: tuple[AdapterPlan, ...] = (),
    lora_args: tuple[str, ...] = (),
) -> ModelPlan:
    """The plan of one backend of model `name`: the model itself, or its replica number `replica` (1..N) named
    `backend`, on `gpus` and `port`."""
    served = cmd.value("--served-model-name") or name
    flag_args = [*cmd.args, *lora_args]
    if cmd.last("--served-model-name") is None:
        flag_args += ["--served-model-name", served]
    if cmd.last("--port") is None:
        flag_args += ["--port", str(port)]
    domains = tuple((entry.media if entry.media is not None else file.defaults.media).domains)
    flag_args += media_flags(domains)
    params = (
        {
            **file.defaults.litellm.model_dump(exclude_none=True),
            **entry.litellm.model_dump(exclude_none=True),
            "max_tokens": max_tokens,
        }
        if kind.kind == pooling.CHAT
        else {}
    )
    return ModelPlan(
        name=backend,
        served_name=served,
        model=cmd.model,
        flag_args=tuple(flag_args),
        description=entry.description.strip(),
        image=entry.image or file.defaults.image,
        # adapters: vLLM's runtime adapter routes on, for `make apply` (models.yml's env may turn them off)
        env=media_env(
            domains, dict(sorted({**(lora.RUNTIME_ENV if adapters else {}), **file.defaults.env, **entry.env}.items()))
        ),
        gpus=gpus,
        port=port,
        context=context,
        max_tokens=max_tokens,
        max_tokens_derived=derived,
        kind=kind.kind,
        kind_from=kind.why,
        tool_parser=cmd.value("--tool-call-parser"),
        reasoning_parser=cmd.value("--reasoning-parser"),
        auto_tool_choice=cmd.enabled("--enable-auto-tool-choice"),
        trust_remote_code=cmd.enabled("--trust-remote-code"),
        litellm_params=dict(sorted(params.items())),
        api_key_env="VLLM_API_KEY_" + name.upper().replace("-", "_"),
        k8s=_k8s_plan(file.defaults.k8s, entry.k8s),
        volumes=rules.merged_volumes(file.defaults.volumes, entry.volumes),
        media_domains=domains,
        limits=rules.limits_plan(file.defaults.limits, entry.limits),
        replica_of=name if entry.replicas > 1 else "",
        replica=replica if entry.replicas > 1 else 0,
        replicas=entry.replicas,
        adapters=adapters,
    )


def _k8s_plan(defaults: ModelK8s, own: ModelK8s) -> ModelK8sPlan:
    """`defaults.k8s` under the model's `k8s:`, field by field (the fields the model sets win)."""
    k = ModelK8s(**{**defaults.model_dump(exclude_unset=True), **own.model_dump(exclude_unset=True)})
    return ModelK8sPlan(
        node_selector=dict(sorted(k.node_selector.items())),
        tolerations=tuple(K8sToleration(**t.model_dump()) for t in k.tolerations),
        storage_class=k.storage_class,
        cache_size=k.cache_size,
        gpu_resource=k.gpu_resource,
        cpu=k.cpu,
        memory=k.memory,
    )


def build_plan(src: Source, catalog: Catalog | None = None, notify: Callable[[str], None] | None = None) -> Plan:
    """`notify` gets a line before anything slow (reading model metadata from the Hub)."""
    catalog = catalog or load_catalog()
    file = _parse(src)
    findings: list[rules.Finding] = []
    warnings: list[str] = []
    models: list[ModelPlan] = []
    fractions: dict[str, float] = {}
    explicit_ports: set[int] = set()
    commands: dict[str, ServeCommand] = {}
    flag_problems: list[Problem] = []
    weights: dict[str, int | None] = {}  # bytes of each model's weights, when the fit check could read them
    lora_notes: list[str] = []  # adapters whose rank is unknown
    findings += rules.volume_problems("defaults", file.defaults.volumes)
    for name, entry in file.models.items():
        findings += rules.volume_problems(name, entry.volumes)
        try:
            commands[name] = cmd = parse_serve_command(entry.command, catalog)
        except FlagError as exc:
            what = f"{name}.command" + (f" {exc.flag}" if exc.flag else "")
            flag_problems.append(Problem(src.where((name, "command")), what, str(exc)))
            continue
        port_flag = cmd.value("--port")
        if port_flag and entry.port and int(port_flag) != entry.port:
            findings.append(((name, "port"), f"port {entry.port} disagrees with --port {port_flag}; keep one"))
        port = int(port_flag) if port_flag else entry.port or None
        if port is not None:
            explicit_ports.update(port + i for i in range(entry.replicas))
    names, found = rules.replica_names({name: entry.replicas for name, entry in file.models.items()})
    findings += found
    owner = {backend: name for name, backends in names.items() for backend in backends}
    # read before any plan is built: a context left to vLLM comes from the model's config
    files = model_files.gather(commands, notify)
    auto_port = FIRST_AUTO_PORT
    for name, entry in file.models.items():
        if name not in commands:  # its command did not parse (flag_problems)
            continue
        cmd = commands[name]
        meta = files[name]
        if meta.problem:
            findings.append(((name, "command"), meta.problem))
        derived = fit.config_context(meta.config, meta.tokenizer_max) if meta.config is not None else None
        unknown = (
            meta.missing
            if meta.config is None
            else (f"its config.json has none of {', '.join(fit.MAX_LEN_KEYS[:3])}, ...; vLLM would assume 2048")
        )
        context, context_from, found = rules.context_of(name, cmd, entry.context_length, derived, unknown)
        findings += found
        if context is None:
            continue
        auto = (cmd.value("--max-model-len") or "").strip().lower() in ("auto", "-1")
        if context_from:
            context_from += f"; {meta.label}" + (
                "; with --max-model-len auto vLLM takes this when it fits, else less" if auto else ""
            )
        kind = pooling.model_kind(cmd, meta.config, pooling.sentence_pooling(meta.modules))
        if kind.problem:
            findings.append(((name, "command"), kind.problem))
        if kind.kind == pooling.CHAT:
            requested = entry.litellm.max_tokens or file.defaults.litellm.max_tokens
            max_tokens, derived_max, found = rules.max_tokens_for(name, requested, context)
        else:  # no output budget, no sampling defaults: a pooling model generates no text
            max_tokens, derived_max, found = 0, False, rules.pooling_fields(name, kind.kind, kind.why, cmd, entry)
        findings += found
        adapters, lora_args, found, noted = lora.served_adapters(
            name, entry, file.defaults, kind, cmd, context, catalog
        )
        findings += found
        lora_notes += noted
        found, warned = rules.tool_flags(name, cmd)
        findings += found
        warnings += warned
        gpu_sets, found = rules.replica_gpus(name, cmd, entry.gpus, entry.replicas)
        findings += found
        if not gpu_sets:
            continue
        fraction = float(cmd.value("--gpu-memory-utilization") or catalog.flags["--gpu-memory-utilization"]["default"])
        for i, (backend, gpus) in enumerate(zip(names[name], gpu_sets), start=1):
            port = int(cmd.value("--port") or 0) or (entry.port + i - 1 if entry.port else 0)
            if not port:
                while auto_port in explicit_ports or auto_port == file.gateway.port:
                    auto_port += 1
                port, auto_port = auto_port, auto_port + 1
            fractions[backend] = fraction
            plan = _model_plan(
                name,
                entry,
                cmd,
                file,
                port,
                context,
                max_tokens,
                derived_max,
                backend,
                gpus,
                i,
                kind,
                adapters,
                lora_args,
            )
            # vLLM refuses more logprobs per token than this: the guard answers it 400 first (a stream's would be a 500)
            plan = dataclasses.replace(
                plan, max_logprobs=int(cmd.value("--max-logprobs") or catalog.flags["--max-logprobs"]["default"])
            )
            plan, found = _with_on_demand(plan, entry, cmd, file)
            findings += found
            verdict = _fit(plan, cmd, meta, fraction, file.gpu_memory)
            if verdict.problem:
                findings.append(
                    (
                        (name, "command"),
                        (f"replica {i}: " if entry.replicas > 1 else "")
                        + verdict.problem
                        + (
                            "; with --max-model-len auto vLLM would shorten the context to what fits, "
                            "but the gateway must know it: set --max-model-len"
                            if auto and context_from
                            else ""
                        ),
                    )
                )
            plan = dataclasses.replace(plan, fit=verdict.line, context_from=context_from, memory_fraction=fraction)
            weights[backend] = verdict.weights
            if plan.port == file.gateway.port:
                findings.append(((name,), f"port {plan.port} is the gateway's port; pick another"))
            models.append(plan)
        findings += rules.replica_problems(name, entry.replicas, cmd, plan.on_demand is not None)
        warnings += rules.context_above_model(name, cmd, context, derived, plan.env)
        warnings += media_warnings(name, plan.media_domains, file.gateway.backend_internet, plan.env)
        warnings += parser_warnings(name, plan.tool_parser, plan.reasoning_parser)
        if plan.trust_remote_code:
            warnings.append(
                f"{name}: --trust-remote-code runs Python code shipped with {plan.model}; "
                "only keep it for repositories you trust"
            )
    models, warned = parser_repairs.with_repairs(models, commands)  # the stack's repaired vLLM parsers
    warnings += warned
    findings += rules.unique(models)
    findings += lora.name_problems(models, {m.entry: m.adapters for m in models if m.adapters and m.replica <= 1})
    findings += rules.gpu_memory_sets(models, fractions, catalog, file.gpu_memory)
    hosted, found = hosted_plans(file.hosted, file.defaults)
    findings += found
    routed, found, warned = routing.routes({**file.models, **file.hosted}, [*models, *hosted])
    models, hosted = routed[: len(models)], routed[len(models) :]
    findings += found
    warnings += warned
    # a replica waits for what its model waits for; naming a replicated model waits for all its replicas
    after, found = rules.start_order(models, {name: list(e.start_after) for name, e in file.models.items()}, names)
    findings += found
    findings += rules.metrics_ports(file.metrics, file.gateway.port)
    controller = None
    if any(m.on_demand for m in models):
        c = file.on_demand
        controller = ControllerPlan(
            port=c.port,
            queue=c.queue,
            load_timeout=c.load_timeout,
            drain_timeout=c.drain_timeout,
            docker_socket=c.docker_socket,
        )
        findings += rules.controller_port(controller.port, file.gateway.port, models)
    models = [dataclasses.replace(m, start_after=after[m.name]) for m in models]
    if findings or flag_problems:
        located = dict.fromkeys(
            ((owner.get(path[0], path[0]), *path[1:]) if path else path, msg) for path, msg in findings
        )  # a replica's finding points at its model's entry
        raise ConfigError(
            flag_problems + [Problem(src.where(path), ".".join(map(str, path)), msg) for path, msg in located]
        )
    g = file.gateway
    gateway = GatewayPlan(
        port=g.port,
        bind=g.bind,
        image=g.image,
        workers=g.workers,
        log_level=g.log_level,
        clamp_max_tokens=g.clamp_max_tokens,
        request_timeout=g.request_timeout,
        stream_timeout=g.stream_timeout,
        backend_internet=g.backend_internet,
        admin_ui=g.admin_ui,
        autoheal=g.autoheal,
        ui=g.ui,
        metrics=g.metrics,
        k8s=GatewayK8sPlan(replicas=g.k8s.replicas, expose=g.k8s.expose, namespace=g.k8s.namespace),
    )
    if g.autoheal:
        warnings.append(
            "gateway.autoheal: the autoheal container mounts the Docker socket (root on this host) "
            "so it can restart unhealthy backends"
        )
    if g.bind not in ("127.0.0.1", "::1"):
        warnings.append(
            f"gateway: published on {g.bind}:{g.port}, reachable beyond this machine; "
            "Docker-published ports bypass host firewalls"
        )
    metrics, warned = _metrics_plan(file.metrics, models)
    warnings += warned
    people, found = _people_plan(file, [*models, *hosted])
    if found:
        raise ConfigError([Problem(src.where(path), ".".join(map(str, path)), msg) for path, msg in found])
    notes = []
    if file.gpu_memory is None and any(m.gpus for m in models):
        notes.append(
            f"gpu_memory is not set: the memory rule assumed {rules.DEFAULT_GPU_MEMORY // 2**30} GiB per GPU "
            "and the fit check only estimated; add `gpu_memory: 80GiB` (your GPUs' size) to models.yml"
        )
    notes += _sleep_notes(models, weights)
    notes += lora_notes
    redis = RedisPlan(image=g.redis_image) if needs_redis(people, models) else None
    return Plan(
        source=src.path,
        source_digest=src.digest,
        vllm_version=catalog.vllm_version,
        models=tuple(models),
        gateway=gateway,
        warnings=tuple(warnings),
        notes=tuple(notes),
        metrics=metrics,
        controller=controller,
        people=people,
        redis=redis,
        hosted=tuple(hosted),
    )


def needs_redis(people: tuple[PersonPlan, ...], models: list[ModelPlan]) -> bool:
    """THE one place that decides whether the stack runs a Redis (local runtime, compose, Kubernetes) and the
    gateway is pointed at it. A feature that needs state shared by the gateway's workers or replicas adds its
    condition here (`or ...`); nothing else looks at it. Today: a person with a limit that must be counted; a model
    with replicas (where a new conversation goes, by the requests in flight on each replica: replica_routing.py)."""
    return any(p.counted for p in people) or any(m.replicas > 1 for m in models)


def _people_plan(file: ModelsFile, models: list[ModelPlan]) -> tuple[tuple[PersonPlan, ...], list[rules.Finding]]:
    """models.yml `people:` -> PersonPlans; a model name that is neither a models.yml name nor a served name is a
    finding with the closest names."""
    import difflib

    served = (
        {m.name: m.served_name for m in models}
        | {m.served_name: m.served_name for m in models}
        | {a.name: a.name for m in models for a in m.adapters}
        | {alias: m.served_name for m in models for alias in m.aliases}
    )
    people, findings = [], []
    for name, entry in file.people.items():
        entry = entry or Person()
        allowed: tuple[str, ...] | None = None
        if entry.models is not None:
            chosen: list[str] = []
            for i, model in enumerate(entry.models):
                if model in served:
                    chosen.append(served[model])
                    continue
                close = difflib.get_close_matches(model, list(served), n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"the models are: {', '.join(sorted(served))}"
                findings.append((("people", name, "models", i), f"{model!r} is not a model of this file; {hint}"))
            allowed = tuple(dict.fromkeys(chosen))
        people.append(
            PersonPlan(
                name=name,
                models=allowed,
                rpm=entry.rpm,
                tpm=entry.tpm,
                parallel=entry.parallel,
                tokens_per_day=entry.tokens_per_day,
                tokens_per_month=entry.tokens_per_month,
                description=entry.description.strip(),
            )
        )
    return tuple(people), findings


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
) -> tuple[ModelPlan, list[rules.Finding]]:
    """The model's OnDemandPlan; `unload: sleep` adds --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1 (vLLM serves
    /sleep and /wake_up only in dev mode)."""
    od = _on_demand_entry(entry, file)
    if od is None:
        return m, []
    plan = OnDemandPlan(group=od.group or m.name, idle_timeout=od.idle, unload=od.unload)
    findings = rules.on_demand_problems(m.name, plan, m.gpus, cmd)
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


def _metrics_plan(m: Metrics, models: list[ModelPlan]) -> tuple[MetricsPlan, list[str]]:
    """models.yml `metrics:` -> MetricsPlan (its ports were checked with the other rules)."""
    warnings = []
    if m.enabled and m.bind not in ("127.0.0.1", "::1"):
        warnings.append(
            f"metrics: Prometheus published on {m.bind}:{m.port}, reachable beyond this machine with no "
            "login (it shows every model, target and label); Docker-published ports bypass host firewalls"
        )
    g = m.grafana
    plan = MetricsPlan(
        enabled=m.enabled,
        port=m.port,
        bind=m.bind,
        scrape_interval=m.scrape_interval,
        retention=m.retention,
        retention_size=m.retention_size,
        image=m.image,
        gpu_exporter=m.gpu_exporter and any(x.gpus for x in models),
        gpu_exporter_image=m.gpu_exporter_image,
        grafana=GrafanaPlan(enabled=g.enabled, port=g.port, image=g.image),
        k8s=MetricsK8sPlan(
            service_monitor=m.k8s.service_monitor,
            service_monitor_labels=dict(sorted(m.k8s.service_monitor_labels.items())),
            prometheus_namespace=m.k8s.prometheus_namespace,
            prometheus_pod_labels=dict(sorted(m.k8s.prometheus_pod_labels.items())),
        ),
    )
    return plan, warnings


def _fit(
    m: ModelPlan, cmd: ServeCommand, meta: model_files.ModelFiles, fraction: float, memory: int | dict[int, int] | None
) -> fit.Verdict:
    """The fit check for one model; a config of another shape makes it a skip, never a crash."""
    sizes = [rules.gpu_memory_of(memory, g) for g in m.gpus]
    known = [s for s in sizes if s is not None]
    smallest = min(known) if known and len(known) == len(sizes) else None
    try:
        return fit.check(meta, cmd, m.gpus, m.context, fraction, smallest, m.env, kv_cache=m.kind == pooling.CHAT)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error) as exc:  # a file of another shape
        return fit.Verdict(None, f"skipped: could not read the model's files ({type(exc).__name__}: {exc})")


def load_plan(path: Path | str, catalog: Catalog | None = None, notify: Callable[[str], None] | None = None) -> Plan:
    """The one entry point: read models.yml, validate everything, return the plan or raise ConfigError."""
    return build_plan(load_source(path), catalog, notify)

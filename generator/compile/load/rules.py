"""Rules that need more than one field or more than one model. Each returns (path, message) pairs."""

from __future__ import annotations

import difflib
import graphlib
import itertools
from collections import defaultdict

from ..plan import ModelPlan, Mount, OnDemandPlan, RequestLimits
from .fit import CONTEXT_OVERHEAD
from .schema import BACKEND_CACHES, VOLUME, Limits, ModelEntry
from .sizes import GIB, fmt_bytes, parse_size
from .vllm_command import Catalog, ServeCommand

Finding = tuple[tuple, str]  # (path in models.yml, message)


def fmt_tokens(n: int) -> str:
    if n % 1024 == 0 and n >= 1024:
        return f"{n} ({n // 1024}K)"
    if n % 1000 == 0 and n >= 1000:
        return f"{n} ({n // 1000}k)"
    return str(n)


def context_of(
    name: str, cmd: ServeCommand, context_length: int | None, derived: tuple[int, str] | None = None, unknown: str = ""
) -> tuple[int | None, str, list[Finding]]:
    """The model's context: --max-model-len, else `context_length:`, else what vLLM derives from the model's
    config (`derived`: tokens and where from; `unknown`: why there is none). Never unknown.
    Returns (context, where it came from when derived, else "", problems)."""
    raw = cmd.value("--max-model-len")
    flag_len = None if raw is None or raw.strip().lower() in ("auto", "-1") else parse_size(raw)
    if flag_len is not None and context_length is not None and flag_len != context_length:
        return (
            None,
            "",
            [
                (
                    (name, "context_length"),
                    f"context_length {fmt_tokens(context_length)} disagrees with --max-model-len "
                    f"{fmt_tokens(flag_len)}; keep one of them",
                )
            ],
        )
    context = flag_len or context_length
    if context is not None:
        return context, "", []
    if derived is not None:
        return derived[0], derived[1], []
    why = "is `auto`" if raw is not None else "is missing"
    return (
        None,
        "",
        [
            (
                (name, "command"),
                f"--max-model-len {why}, so the context (and a safe max_tokens) is unknown"
                + (f", and the model's config gives none ({unknown})" if unknown else "")
                + "; add `--max-model-len 16K` to the command or `context_length: 16K` to the entry",
            )
        ],
    )


def context_above_model(
    name: str, cmd: ServeCommand, context: int, derived: tuple[int, str] | None, env: dict[str, str]
) -> list[str]:
    """Warnings: a context above what the model's config allows (vLLM refuses it, or serves less)."""
    if derived is None or context <= derived[0]:
        return []
    raw = cmd.value("--max-model-len")
    if raw is not None and raw.strip().lower() not in ("auto", "-1"):
        if str(env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")).lower() in ("1", "true"):
            return []
        return [
            f"{name}: --max-model-len {fmt_tokens(context)} is above the model's {fmt_tokens(derived[0])} "
            f"({derived[1]}): vLLM refuses to start unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is in its env"
        ]
    return [
        f"{name}: context_length {fmt_tokens(context)} is above the model's {fmt_tokens(derived[0])} "
        f"({derived[1]}), which is all vLLM will serve; lower context_length to it"
    ]


def max_tokens_for(name: str, requested: int | None, context: int) -> tuple[int, bool, list[Finding]]:
    """Per-model max_tokens: below the context (the prompt needs room), else half of it."""
    if requested is None:
        return max(1, context // 2), True, []
    if requested >= context:
        return (
            requested,
            False,
            [
                (
                    (name, "litellm", "max_tokens"),
                    f"max_tokens {fmt_tokens(requested)} is not below --max-model-len "
                    f"{fmt_tokens(context)}: every request would ask for the whole context or "
                    f"more and the prompt would not fit; set max_tokens to at most "
                    f"{fmt_tokens(context // 2)} (half the context) or raise --max-model-len",
                )
            ],
        )
    return requested, False, []


GENERATION_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser", "--reasoning-parser")


def pooling_fields(name: str, kind: str, why: str, cmd: ServeCommand, entry: ModelEntry) -> list[Finding]:
    """An embedding or rerank model generates no text: a request default of its own (`litellm:`) or a tool or
    reasoning flag would never apply. (`defaults.litellm` is for the chat models: it is left out silently.)"""
    findings: list[Finding] = []
    what = f"{name} is {'an' if kind == 'embedding' else 'a'} {kind} model ({why}): it generates no text, so"
    for field in sorted(entry.litellm.model_dump(exclude_none=True)):
        findings.append(((name, "litellm", field), f"{what} `litellm.{field}` would never apply; remove it"))
    for flag in GENERATION_FLAGS:
        if cmd.enabled(flag):
            findings.append(((name, "command"), f"{what} {flag} would never apply; remove it"))
    return findings


def tool_flags(name: str, cmd: ServeCommand) -> tuple[list[Finding], list[str]]:
    errors, warnings = [], []
    parser = cmd.value("--tool-call-parser")
    if cmd.enabled("--enable-auto-tool-choice") and not parser:
        errors.append(
            (
                (name, "command"),
                "--enable-auto-tool-choice needs --tool-call-parser (e.g. hermes, glm47, qwen3_coder); "
                "without it vLLM refuses to start",
            )
        )
    if parser and not cmd.enabled("--enable-auto-tool-choice"):
        warnings.append(
            f"{name}: --tool-call-parser {parser} without --enable-auto-tool-choice: "
            "requests with tool_choice=auto (the OpenAI default) will be refused by vLLM"
        )
    return errors, warnings


def world_size(cmd: ServeCommand) -> int:
    size = 1
    for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"):
        size *= int(cmd.value(flag) or 1)
    return size


def gpu_count(name: str, cmd: ServeCommand, gpus: list[int]) -> list[Finding]:
    if len(set(gpus)) != len(gpus):
        return [((name, "gpus"), f"gpus {gpus} lists a GPU twice")]
    size = world_size(cmd)
    if gpus and size != len(gpus):
        return [
            (
                (name, "gpus"),
                f"{len(gpus)} GPU(s) {gpus} but tensor x pipeline x data parallel size is {size}; "
                f"give exactly {size} GPU(s) or change --tensor-parallel-size/--pipeline-parallel-size",
            )
        ]
    return []


def replica_gpus(
    name: str, cmd: ServeCommand, gpus: list[int] | list[list[int]], replicas: int
) -> tuple[list[tuple[int, ...]], list[Finding]]:
    """Each replica's GPUs: `gpus` split in order into chunks of tensor x pipeline x data parallel size, or one
    list per replica; every replica's list then passes gpu_count. [] (CPU): `replicas` processes, no GPU."""
    nested = bool(gpus) and isinstance(gpus[0], list)
    # the schema takes either GPUs or lists of them, never both: one of these two is `gpus`, the other empty
    lists = [g for g in gpus if isinstance(g, list)]
    flat = [g for g in gpus if not isinstance(g, list)]
    if nested:
        if len(gpus) != replicas:
            fix = (
                f"set replicas: {len(gpus)}"
                if replicas == 1
                else f"give {replicas} lists (one per replica) or set replicas: {len(gpus)}"
            )
            return [], [((name, "gpus"), f"gpus gives {len(gpus)} list(s) of GPUs for replicas: {replicas}; {fix}")]
        sets = [tuple(g) for g in lists]
    elif not flat or replicas == 1:
        sets = [tuple(flat)] * replicas
    else:
        size = world_size(cmd)
        if len(set(flat)) != len(flat):
            return [], [((name, "gpus"), f"gpus {flat} lists a GPU twice")]
        if len(flat) != replicas * size:
            return [], [
                (
                    (name, "gpus"),
                    f"{len(flat)} GPU(s) {flat} do not split into {replicas} replicas of {size} GPU(s) each "
                    f"(tensor x pipeline x data parallel size {size}): give {replicas * size} GPUs, one list "
                    f"per replica (e.g. gpus: [[0, 1], [2, 3]]), or change replicas",
                )
            ]
        sets = [tuple(flat[i * size : (i + 1) * size]) for i in range(replicas)]
    findings: list[Finding] = []
    for i, chunk in enumerate(sets):
        for path, msg in gpu_count(name, cmd, list(chunk)):
            findings.append(((name, "gpus", i) if nested else path, f"replica {i + 1}: {msg}" if replicas > 1 else msg))
    return sets, findings


def replica_names(models: dict[str, int]) -> tuple[dict[str, list[str]], list[Finding]]:
    """Each model's backend names (<model>-1..N past one replica; the model's own name for one), and the names
    that collide with another model or run past a DNS label's 63 characters."""
    names = {model: [model] if n == 1 else [f"{model}-{i}" for i in range(1, n + 1)] for model, n in models.items()}
    findings: list[Finding] = []
    for model, n in models.items():
        if n == 1:
            continue
        for replica in names[model]:
            if replica in models:
                findings.append(
                    ((model, "replicas"), f"its replica {replica} has the name of another model; rename one of them")
                )
            elif len(replica) > 63:
                findings.append(
                    (
                        (model,),
                        f"its replica name {replica} is longer than 63 characters (a host "
                        f"name); shorten the model's name",
                    )
                )
    return names, findings


def replica_problems(name: str, replicas: int, cmd: ServeCommand, on_demand: bool) -> list[Finding]:
    """What one copy per model assumes: a fixed --port, on-demand loading."""
    if replicas == 1:
        return []
    findings: list[Finding] = []
    if cmd.value("--port"):
        findings.append(
            (
                (name, "command"),
                f"--port {cmd.value('--port')} would give all {replicas} replicas one "
                "port; remove it and use `port:` (replica i listens on port + i - 1) or "
                "leave the ports to the generator",
            )
        )
    if on_demand:
        findings.append(
            (
                (name, "replicas"),
                "on-demand models run one copy (the controller loads and unloads one "
                "backend per model); set replicas: 1 or remove on_demand",
            )
        )
    return findings


DEFAULT_GPU_MEMORY = 16 * GIB  # assumed when models.yml has no gpu_memory: small GPUs make the rule stricter


def gpu_memory_of(memory: int | dict[int, int] | None, gpu: int) -> int | None:
    return memory.get(gpu) if isinstance(memory, dict) else memory


def gpu_memory(
    models: list[ModelPlan], fractions: dict[str, float], catalog: Catalog, memory: int | dict[int, int] | None = None
) -> list[Finding]:
    """Per GPU: every fraction of the GPU's memory plus each instance's context overhead must fit."""
    return [finding for _, _, finding in _gpu_memory(models, fractions, catalog, memory)]


def _gpu_memory(
    models: list[ModelPlan],
    fractions: dict[str, float],
    catalog: Catalog,
    memory: int | dict[int, int] | None = None,
    asleep: dict[int, list[str]] | None = None,
) -> list[tuple[int, frozenset[str], Finding]]:
    """gpu_memory's findings with the GPU and the models on it. `models`: what is loaded at once; `asleep`: per
    GPU, models that are loaded but asleep (vLLM sleep mode): no fraction, but their process keeps its CUDA
    context."""
    per_gpu: dict[int, list[str]] = defaultdict(list)
    for m in models:
        for gpu in m.gpus:
            per_gpu[gpu].append(m.name)
    on_demand = {m.name for m in models if m.on_demand}
    findings: list[tuple[int, frozenset[str], Finding]] = []
    default = catalog.flags["--gpu-memory-utilization"]["default"]
    for gpu, names in sorted(per_gpu.items()):
        total = gpu_memory_of(memory, gpu)
        if total is None and isinstance(memory, dict):
            findings.append(
                (
                    gpu,
                    frozenset(),
                    (
                        (names[0], "gpus"),
                        f"GPU {gpu} is not in gpu_memory (it lists GPU(s) "
                        f"{', '.join(map(str, sorted(memory)))}); add `{gpu}: 80GiB` (its size) to gpu_memory",
                    ),
                )
            )
            continue
        assumed = total is None
        total = total or DEFAULT_GPU_MEMORY
        sleeping = (asleep or {}).get(gpu, [])
        instances = len(names) + len(sleeping)
        share = sum(fractions[n] for n in names)
        headroom = CONTEXT_OVERHEAD * instances
        need = share * total + headroom
        if need <= total:
            continue
        parts = " + ".join(f"{n} {fractions[n]:.2f}" for n in names)
        last = names[-1]
        room = (total - headroom - sum(fractions[n] for n in names[:-1]) * total) / total
        fix = f"lower {last} to {int(room * 100) / 100:.2f}" if room >= 0.01 else "lower the others' fractions"
        fix += " or move a model to another GPU"
        loaded = [n for n in names if n in on_demand]
        when = ""
        if loaded:  # one set of models that can be resident together (gpu_memory_sets)
            when = f" when {', '.join(names[:-1])} and {names[-1]} are loaded together" if len(names) > 1 else ""
            if len(loaded) > 1:
                fix = (
                    f"put {', '.join(loaded[:-1])} and {loaded[-1]} in one group (on_demand: {{group: gpu{gpu}}}) "
                    f"so they take turns, or {fix}"
                )
            elif len(names) > 1:
                fix += f" ({loaded[0]} cannot fit even alone with the always-on models)"
        size = (
            f"{fmt_bytes(total)}, assumed: gpu_memory is not set; add `gpu_memory: 80GiB` (your GPUs' size) "
            f"at the top of models.yml"
            if assumed
            else fmt_bytes(total)
        )
        defaulted = [n for n in names if fractions[n] == default]
        note = f" (vLLM {catalog.vllm_version} defaults to {default})" if defaulted else ""
        sleepers = f", {len(sleeping)} of them asleep ({', '.join(sleeping)})" if sleeping else ""
        findings.append(
            (
                gpu,
                frozenset(names),
                (
                    (last, "gpus"),
                    f"GPU {gpu} is over-committed{when}: --gpu-memory-utilization {parts} = {share:.2f}{note} of "
                    f"{size}, plus a headroom of {fmt_bytes(CONTEXT_OVERHEAD)} per instance x {instances}"
                    f"{sleepers} that vLLM needs besides its fraction (its CUDA context) = {fmt_bytes(need)} > "
                    f"{fmt_bytes(total)}; {fix}",
                ),
            )
        )
    return findings


MAX_SETS = 4096  # per GPU: sets looked at for the smallest failing ones; past it the worst set is reported
MAX_REPORTED = 3  # per GPU: failing sets named one by one; the rest are counted in one more line


def gpu_memory_sets(
    models: list[ModelPlan], fractions: dict[str, float], catalog: Catalog, memory: int | dict[int, int] | None = None
) -> list[Finding]:
    """The memory rule for each set of models that can be resident together (every always-on model plus at most
    one model of each on-demand group), not the whole file: models of one on-demand group take turns. A sleeping
    model (unload: sleep, not the loaded one of its group) keeps its process, so its CUDA context counts.

    GPU by GPU (the rule is per GPU, and any choice of at most one model per group on one GPU can happen):
    the worst set (per group, the choice that needs most) fits -> every set fits; else the smallest failing
    sets are reported, each naming its models."""
    if not any(m.on_demand for m in models):
        return gpu_memory(models, fractions, catalog, memory)
    order = {m.name: i for i, m in enumerate(models)}
    findings: list[Finding] = []
    for gpu in sorted({g for m in models for g in m.gpus}):
        on_gpu = [m for m in models if gpu in m.gpus]
        always = [m for m in on_gpu if not m.on_demand]
        groups: dict[str, list[ModelPlan]] = defaultdict(list)
        for m in on_gpu:
            if m.on_demand:
                groups[m.on_demand.group].append(m)
        sleepers = [m.name for m in on_gpu if m.on_demand and m.on_demand.unload == "sleep"]

        # this iteration's always, gpu, sleepers and context bound as defaults (B023): the two functions are only
        # called within it, but a closure would read the loop's later values
        def check(
            choice: tuple[ModelPlan, ...],
            always: list[ModelPlan] = always,
            gpu: int = gpu,
            sleepers: list[str] = sleepers,
        ) -> Finding | None:
            loaded = {m.name for m in choice}
            members = sorted((*always, *choice), key=lambda m: order[m.name])
            asleep = {gpu: [n for n in sleepers if n not in loaded]}
            return next((f for g, _, f in _gpu_memory(members, fractions, catalog, memory, asleep) if g == gpu), None)

        context = CONTEXT_OVERHEAD / (gpu_memory_of(memory, gpu) or DEFAULT_GPU_MEMORY)

        def need(
            m: ModelPlan | None, group: list[ModelPlan], sleepers: list[str] = sleepers, context: float = context
        ) -> float:
            """What a group's choice (m loaded, or None) adds on this GPU, as a share of it."""
            processes = sum(1 for x in group if x is not m and x.name in sleepers) + (m is not None)
            return (fractions[m.name] if m else 0.0) + processes * context

        worst = tuple(w for ms in groups.values() if (w := max([None, *ms], key=lambda x: need(x, ms))) is not None)
        worst_finding = check(worst)
        if worst_finding is None:
            continue
        failing = _smallest_failing(list(groups.values()), check)
        findings += failing[:MAX_REPORTED] or [worst_finding]  # none within MAX_SETS: the worst set stands for them
        if len(failing) > MAX_REPORTED:
            findings.append(
                (
                    (on_gpu[-1].name, "gpus"),
                    f"GPU {gpu}: {len(failing) - MAX_REPORTED} more set(s) of models that cannot be loaded "
                    f"together{' (and maybe more: not all sets were looked at)' if len(failing) >= MAX_SETS else ''}; "
                    f"put the on-demand models of GPU {gpu} in fewer groups (on_demand: {{group: gpu{gpu}}}) "
                    "so they take turns, or lower their --gpu-memory-utilization",
                )
            )
    return findings


def _smallest_failing(groups: list[list[ModelPlan]], check) -> list[Finding]:
    """Sets of at most one model per group, smallest first, skipping supersets of a failing set (they say
    nothing new); at most MAX_SETS looked at."""
    failing: list[frozenset[str]] = []
    findings: list[Finding] = []
    looked = 0
    for k in range(len(groups) + 1):
        for chosen in itertools.combinations(groups, k):
            for choice in itertools.product(*chosen):
                names = frozenset(m.name for m in choice)
                if any(f <= names for f in failing):
                    continue
                looked += 1
                if looked > MAX_SETS:
                    return findings
                if (finding := check(choice)) is not None:
                    failing.append(names)
                    findings.append(finding)
    return findings


def start_order(
    models: list[ModelPlan], explicit: dict[str, list[str]], backends: dict[str, list[str]]
) -> tuple[dict[str, tuple[str, ...]], list[Finding]]:
    """Who must be healthy before each backend starts: the previous backend (file order) on every GPU it
    shares (vLLM instances profiling memory at the same time break each other), plus `start_after:`.

    `explicit`: each models.yml name's `start_after` as written (models.yml names); `backends`: each models.yml
    name's backends in file order (its replicas, or itself). Entries are checked against models.yml names, so a
    finding points at the entry's own index and names models; naming a replicated model waits for every replica,
    and a replica waits for what its model waits for.

    On-demand models are not started with the stack, so no always-on model waits for one: on each GPU the
    always-on models come first; `unload: sleep` models (compose starts them, the controller puts them to sleep)
    follow them; `unload: stop` models take no part (the controller starts them when a request comes)."""
    order = {b: i for i, b in enumerate(b for names in backends.values() for b in names)}
    owner = {b: name for name, names in backends.items() for b in names}
    deps: dict[str, set[str]] = {m.name: set() for m in models}
    on_demand = {m.entry for m in models if m.on_demand}
    last_on: dict[int, str] = {}
    chained = [m for m in models if not m.on_demand] + [
        m for m in models if m.on_demand and m.on_demand.unload == "sleep"
    ]
    for m in chained:
        for gpu in m.gpus:
            if gpu in last_on:
                deps[m.name].add(last_on[gpu])
            last_on[gpu] = m.name
    findings: list[Finding] = []
    for name, wanted in explicit.items():
        if name in on_demand and wanted:
            findings.append(
                (
                    (name, "start_after"),
                    f"{name} is on demand: the controller loads it when a request asks for it, after the "
                    "always-on models, so it has no start order; remove start_after",
                )
            )
            continue
        mine = [b for b in backends.get(name, ()) if b in deps]
        for i, other in enumerate(wanted):
            where = (name, "start_after", i)
            if other == name:
                findings.append((where, f"{name} cannot wait for itself; remove it from start_after"))
            elif other not in backends:
                if other in owner:
                    hint = (
                        f"{other} is a replica of {owner[other]}; write {owner[other]!r} "
                        f"(start_after waits for every replica)"
                    )
                elif close := difflib.get_close_matches(other, list(backends), n=1):
                    hint = f"did you mean {close[0]!r}?"
                else:
                    hint = f"models: {', '.join(backends)}"
                findings.append((where, f"unknown model {other!r}; {hint}"))
            elif other in on_demand:
                findings.append(
                    (
                        where,
                        f"{other} is on demand: it is not started with the stack, so {name} "
                        f"would wait for it; remove it from start_after (or make {other} always on)",
                    )
                )
            else:
                for backend in mine:
                    deps[backend].update(b for b in backends[other] if b in deps)
    try:
        tuple(graphlib.TopologicalSorter(deps).static_order())
    except graphlib.CycleError as exc:
        cycle = [owner.get(b, b) for b in exc.args[1]]
        cycle = [n for i, n in enumerate(cycle) if i == 0 or n != cycle[i - 1]]  # a model's replicas: one step
        findings.append(
            (
                (cycle[0], "start_after"),
                f"start order has a cycle: {' -> '.join(cycle)} (each waits for the next to be healthy, "
                "so none would ever start); remove one of these start_after entries",
            )
        )
    return {n: tuple(sorted(d, key=order.__getitem__)) for n, d in deps.items()}, findings


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


def unique(models: list[ModelPlan]) -> list[Finding]:
    """Served names and ports: one per model (the replicas of one model share its served name)."""
    findings: list[Finding] = []
    for attr, label in (("served_name", "served model name"), ("port", "port")):
        seen: dict = {}
        for m in models:
            value = getattr(m, attr)
            if value in seen and (attr == "port" or seen[value].entry != m.entry):
                findings.append(
                    ((m.entry,), f"{label} {value!r} is already used by {seen[value].name}; make it unique")
                )
            seen.setdefault(value, m)
    return findings


def _mount(text: str) -> Mount:
    m = VOLUME.match(text)
    if m is None:  # the schema checks the syntax first
        raise ValueError(f"{text!r} is not a volume (host:container[:ro|rw])")
    return Mount(m["source"], m["target"].rstrip("/") or "/", m["mode"] == "ro")


def volume_problems(where: str, entries: list[str]) -> list[Finding]:
    """One `volumes:` list (defaults' or a model's): no container path twice, none on the stack's caches."""
    findings: list[Finding] = []
    caches = {target: volume for volume, target in BACKEND_CACHES.items()}
    seen: set[str] = set()
    for i, text in enumerate(entries):
        target = _mount(text).target
        if target in caches:
            findings.append(
                (
                    (where, "volumes", i),
                    f"{target} is where the stack mounts its {caches[target]} "
                    "volume; mount yours elsewhere (e.g. /models)",
                )
            )
        elif target in seen:
            findings.append(((where, "volumes", i), f"{target} is mounted twice; keep one entry"))
        seen.add(target)
    return findings


def merged_volumes(defaults: list[str], own: list[str]) -> tuple[Mount, ...]:
    """defaults.volumes then the model's; a model's entry replaces a default with the same container path."""
    mounts = {m.target: m for m in map(_mount, [*defaults, *own])}
    return tuple(mounts.values())


def metrics_ports(metrics, gateway_port: int) -> list[Finding]:
    """Prometheus's and Grafana's host ports: distinct from each other and from the gateway's."""
    if not metrics.enabled:
        return []
    findings: list[Finding] = []
    if metrics.port == gateway_port:
        findings.append((("metrics", "port"), f"port {metrics.port} is the gateway's port; pick another (e.g. 9090)"))
    g = metrics.grafana
    if g.enabled and g.port in (gateway_port, metrics.port):
        owner = "the gateway's" if g.port == gateway_port else "Prometheus's (metrics.port)"
        findings.append((("metrics", "grafana", "port"), f"port {g.port} is {owner} port; pick another (e.g. 3000)"))
    return findings


def limits_plan(defaults: Limits, own: Limits) -> RequestLimits:
    """`defaults.limits` under the model's `limits:`, field by field (the fields the model sets win)."""
    k = Limits(**{**defaults.model_dump(exclude_unset=True), **own.model_dump(exclude_unset=True)})
    return RequestLimits(n=k.n, best_of=k.best_of, tools=k.tools, logit_bias=k.logit_bias, request_bytes=k.request_size)

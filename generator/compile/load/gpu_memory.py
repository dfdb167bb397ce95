"""The memory rule (docs/rules.md, "GPUs shared by several models"): on each GPU, the --gpu-memory-utilization
fractions of the models on it plus each instance's CUDA context (CONTEXT_OVERHEAD) must fit in its memory
(`gpu_memory:`, else DEFAULT_GPU_MEMORY, with a note). With on-demand models, per set of models that can be resident
together. Each model's own fit in its fraction: fit.py."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import TYPE_CHECKING

from ..plan import ModelPlan
from .sizes import GIB, fmt_bytes
from .vllm_command import Catalog

if TYPE_CHECKING:
    from .state import Finding, State

# Each vLLM instance holds its CUDA context (measured 0.46-0.49 GiB on an H100, vLLM 0.22) on top of
# `--gpu-memory-utilization x total`, and vLLM refuses to start when the GPU's free memory (after its own
# context exists) is below its fraction: the second of two 0.5 instances saw 38.59 of 79.18 GiB free.
CONTEXT_OVERHEAD = GIB // 2  # per instance; the memory rule adds it for every model on a GPU
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


def rule(s: State) -> None:
    """The memory rule on every GPU; without `gpu_memory:` it assumed DEFAULT_GPU_MEMORY, which a note says."""
    fractions = {m.name: m.memory_fraction for m in s.backends}
    s.findings += gpu_memory_sets(s.backends, fractions, s.catalog, s.file.gpu_memory)
    if s.file.gpu_memory is None and any(m.gpus for m in s.backends):
        s.notes.append(
            f"gpu_memory is not set: the memory rule assumed {DEFAULT_GPU_MEMORY // 2**30} GiB per GPU "
            "and the fit check only estimated; add `gpu_memory: 80GiB` (your GPUs' size) to models.yml"
        )

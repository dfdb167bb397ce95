"""GPUs on Kubernetes: whole devices per pod, so a GPU that models.yml shares needs time-slicing.

models.yml pins models to GPU indexes and may put two models on one GPU (their memory fractions
checked to fit). The NVIDIA device plugin hands out whole GPUs (`nvidia.com/gpu`); asking for one
per model would silently need more GPUs than the file meant. With the plugin's time-slicing and
`renameByDefault: true`, each GPU is also advertised N times as `nvidia.com/gpu.shared`: a model
that shares its GPU in models.yml asks for those instead, and the target says so in a warning.
A shared model that needs several GPUs is refused: time-slices of one pod may be the same GPU.
"""

from __future__ import annotations

from collections import defaultdict

from ....errors import Problem
from ...plan import ModelPlan, Plan

WHOLE_GPU = "nvidia.com/gpu"
SHARED_GPU = "nvidia.com/gpu.shared"  # device plugin time-slicing with renameByDefault: true


def sharing(plan: Plan) -> dict[int, list[str]]:
    """GPU index -> the models pinned to it, for GPUs that more than one model uses."""
    users: dict[int, list[str]] = defaultdict(list)
    for m in plan.models:
        for gpu in m.gpus:
            users[gpu].append(m.name)
    return {gpu: names for gpu, names in sorted(users.items()) if len(names) > 1}


def shares_a_gpu(m: ModelPlan, plan: Plan) -> bool:
    return any(m.name in names for names in sharing(plan).values())


def gpu_resource(m: ModelPlan, plan: Plan) -> str:
    return m.k8s.gpu_resource or (SHARED_GPU if shares_a_gpu(m, plan) else WHOLE_GPU)


def gpu_limits(m: ModelPlan, plan: Plan) -> dict[str, int]:
    """`resources.limits` for the GPUs: as many as models.yml gives the model (= its parallel size)."""
    return {gpu_resource(m, plan): len(m.gpus)} if m.gpus else {}


def gpu_problems(plan: Plan) -> list[Problem]:
    problems = []
    for m in plan.models:
        if len(m.gpus) > 1 and shares_a_gpu(m, plan) and gpu_resource(m, plan) == SHARED_GPU:
            problems.append(
                Problem(
                    plan.source,
                    f"{m.name}.gpus",
                    f"{m.name} needs {len(m.gpus)} GPUs (tensor/pipeline/data parallel) and shares "
                    "one of them with another model: Kubernetes time-slices of one pod may all be "
                    "the same GPU, so this cannot be expressed; give it GPUs of its own in models.yml, "
                    f"or set `k8s: {{gpu_resource: {WHOLE_GPU}}}` to claim whole GPUs for it",
                )
            )
    return problems


def gpu_warnings(plan: Plan) -> list[str]:
    warnings = []
    for gpu, names in sharing(plan).items():
        slices = [n for n in names if gpu_resource(next(m for m in plan.models if m.name == n), plan) == SHARED_GPU]
        whole = [n for n in names if n not in slices]
        if slices:
            warnings.append(
                f"GPU {gpu} is shared by {', '.join(names)} in models.yml; Kubernetes hands out whole GPUs, so "
                f"{', '.join(slices)} request {SHARED_GPU} (a time-slice) instead of {WHOLE_GPU}. The cluster needs "
                "the NVIDIA device plugin (or GPU Operator) with time-slicing, renameByDefault: true and "
                f"{len(names)} replicas of that GPU, or these pods stay Pending (docs/kubernetes.md, GPU sharing)"
            )
        if whole:
            resources = sorted({gpu_resource(m, plan) for m in plan.models if m.name in whole})
            warnings.append(
                f"GPU {gpu}: {', '.join(whole)} request {', '.join(resources)} (k8s.gpu_resource) "
                f"although models.yml shares GPU {gpu} among {', '.join(names)}: each gets a device "
                "of its own, more GPUs than the file meant"
            )
    return warnings

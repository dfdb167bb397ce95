"""Each backend's plan: the model itself, or each of its `replicas: N` (<model>-1..N), on its GPUs (gpus.place) and
its port (ports.assign), with everything the model's concerns decided (context, kind, output budget, adapters), its
flags, environment, request defaults, volumes, limits and Kubernetes placement; then, per backend, on-demand
loading (on_demand.py), vLLM's --max-logprobs, the fit check (fit.py) and the gateway's port (ports.py)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..plan import AdapterPlan, K8sToleration, ModelK8sPlan, ModelPlan
from . import adapters as lora
from . import fit, on_demand, pooling, ports
from .limits import limits_plan
from .media import media_env, media_flags
from .schema import ModelEntry, ModelK8s, ModelsFile
from .vllm_command import ServeCommand
from .volumes import merged_volumes

if TYPE_CHECKING:
    from .state import Model, State


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
        volumes=merged_volumes(file.defaults.volumes, entry.volumes),
        media_domains=domains,
        limits=limits_plan(file.defaults.limits, entry.limits),
        replica_of=name if entry.copies > 1 else "",
        replica=replica if entry.copies > 1 else 0,
        replicas=entry.copies,
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


def plan(s: State, m: Model) -> None:
    """Every backend of model `m`, in order (s.backends, m.backends)."""
    cmd = m.cmd
    fraction = float(cmd.value("--gpu-memory-utilization") or s.catalog.flags["--gpu-memory-utilization"]["default"])
    for i, (backend, gpus) in enumerate(zip(s.backend_names[m.name], m.gpu_sets), start=1):
        port = ports.assign(s, m, i)
        plan = _model_plan(
            m.name,
            m.entry,
            cmd,
            s.file,
            port,
            m.context,
            m.max_tokens,
            m.max_tokens_derived,
            backend,
            gpus,
            i,
            m.kind,
            m.adapters,
            m.lora_args,
        )
        # vLLM refuses more logprobs per token than this: the guard answers it 400 first (a stream's would be a 500)
        plan = dataclasses.replace(
            plan, max_logprobs=int(cmd.value("--max-logprobs") or s.catalog.flags["--max-logprobs"]["default"])
        )
        plan = on_demand.apply(s, m, plan)
        verdict = fit.judge(s, m, plan, i, fraction)
        plan = dataclasses.replace(plan, fit=verdict.line, context_from=m.context_from, memory_fraction=fraction)
        m.weights[backend] = verdict.weights
        ports.not_the_gateways(s, m, plan)
        m.backends.append(plan)
        s.backends.append(plan)

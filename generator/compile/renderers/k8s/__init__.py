"""Plan -> Kubernetes manifests under k8s/, applied with one `kubectl apply -k k8s/`.

    k8s/kustomization.yaml   namespace, the files below, a Secret from secrets.env, a ConfigMap from gateway/
    k8s/namespace.yaml       the namespace everything lives in
    k8s/gateway.yaml         LiteLLM Deployment + Service
    k8s/gateway/*            config.yaml (api_base = each model's Service) and the two hook modules
    k8s/models/<name>.yaml   per model: cache PVC, Deployment, ClusterIP Service, NetworkPolicy; a model on `nodes:`:
                             a LeaderWorkerSet (its pods' caches from claim templates), Service, NetworkPolicy
    k8s/kustomizeconfig/     with a LeaderWorkerSet: where it names the hashed Secret, for kustomize
    k8s/parser-repairs/*     when a backend runs a repaired vLLM parser: the plugin, a ConfigMap that backend mounts
    k8s/redis.yaml           when the stack needs a Redis (plan.redis): Deployment, Service, NetworkPolicy
    k8s/monitoring.yaml      with metrics.k8s.service_monitor: ServiceMonitors (Prometheus Operator) + metrics Service
    k8s/secrets.env          the keys (git-ignored, mode 600, made by the CLI; never in a manifest)

Same Plan as compose and LiteLLM; problems only Kubernetes has (a shared multi-GPU model, a name
that is no Service name, an on-demand model) are ConfigErrors, so the CLI exits 2 and writes nothing.
"""

from __future__ import annotations

from ....errors import ConfigError, Problem
from ....shipped.gateway_hooks.people import KEYS_FILE
from ...load.schema import VLLM_IMAGE
from ...plan import Plan
from ..litellm import gateway_modules, people_file, render_litellm
from ..parser_repairs import REPAIRS_DIR, repair_files
from ..target import Target
from ..text import dump_yaml, header
from .autoscale import k8s_plan, scaling_warnings, with_scaling
from .backend import REPAIRS_CONFIG_MAP, backend_objects, backend_problems, local_adapters, local_weights
from .gateway import CONFIG_MAP, gateway_objects, service_api_base
from .gpus import gpu_problems, gpu_warnings
from .leader_worker import KUSTOMIZE_CONFIG, LWS_INSTALL, group_objects, kustomize_config
from .monitoring import MONITORING_FILE, monitoring_objects
from .objects import GATEWAY, KEYS_SECRET, PART_OF, PEOPLE_SECRET
from .redis import REDIS_FILE, redis_objects

K8S_DIR = "k8s"
SECRETS_FILE = "secrets.env"  # read by kustomize's secretGenerator, relative to k8s/
ENV_FILE = f"{K8S_DIR}/{SECRETS_FILE}"
ENV_HEADER = (
    "# Keys for the Kubernetes gateway and backends, made by `make k8s`; kustomize turns them into "
    f"the Secret {KEYS_SECRET}. Git-ignored: never commit."
)
CUDA_IMAGE = VLLM_IMAGE.rpartition(":")[0]  # vllm/vllm-openai: the CUDA build, whatever the tag
REGENERATE = "make k8s"  # named in every header


def _header(plan: Plan) -> str:
    return header(plan, regenerate=REGENERATE)


def documents(plan: Plan, objects: list[dict]) -> str:
    return _header(plan) + "---\n".join(dump_yaml(o) for o in objects)


def namespace(plan: Plan) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": plan.gateway.k8s.namespace, "labels": {"app.kubernetes.io/part-of": PART_OF}},
    }


def kustomization(
    plan: Plan, model_files: list[str], config_files: list[str], repair_files: list[str] | None = None
) -> dict:
    repairs = (
        [{"name": REPAIRS_CONFIG_MAP, "files": repair_files, "options": {"disableNameSuffixHash": True}}]
        if repair_files
        else []
    )
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": plan.gateway.k8s.namespace,
        "resources": ["namespace.yaml", "gateway.yaml", *model_files],
        # generated names get a hash of their content: a new key or config rolls the pods that use it (the repaired
        # parsers' ConfigMap keeps its name: backend.REPAIRS_CONFIG_MAP)
        "configMapGenerator": [{"name": CONFIG_MAP, "files": config_files}, *repairs],
        **({"configurations": [KUSTOMIZE_CONFIG]} if any(m.nodes for m in plan.models) else {}),
        "secretGenerator": [
            {"name": KEYS_SECRET, "envs": [SECRETS_FILE], "type": "Opaque"},
            # hashes of people's keys (make key K8S=1 / make k8s write it): a new one rolls the gateway
            *([{"name": PEOPLE_SECRET, "files": [KEYS_FILE], "type": "Opaque"}] if plan.people else []),
        ],
    }


def gateway_config(plan: Plan) -> dict[str, str]:
    """k8s/gateway/: the LiteLLM config with Service DNS names, and the hook modules it imports."""
    return {
        f"{K8S_DIR}/gateway/config.yaml": _header(plan) + dump_yaml(render_litellm(plan, service_api_base)),
        **gateway_modules(plan, f"{K8S_DIR}/gateway", REGENERATE),
        **people_file(plan, f"{K8S_DIR}/gateway", REGENERATE),
    }


def on_demand_problems(plan: Plan) -> list[Problem]:
    """Loading on demand is a controller of compose and the local runtime; nothing here maps it."""
    return [
        Problem(
            plan.source,
            f"{m.name}.on_demand",
            "the Kubernetes target cannot load models on demand (scale-to-zero needs e.g. KEDA's HTTP "
            "add-on, which is not generated); remove on_demand for `make k8s` (compose, litellm and clients "
            "still support it)",
        )
        for m in plan.on_demand
    ]


def k8s_files(plan: Plan) -> dict[str, str]:
    plan = k8s_plan(plan)  # replicas: {min, max}: KEDA starts and stops the copies (autoscale.py)
    problems = on_demand_problems(plan) + backend_problems(plan) + gpu_problems(plan)
    if problems:
        raise ConfigError(problems)
    config = gateway_config(plan)
    models = {
        f"{K8S_DIR}/models/{m.name}.yaml": documents(
            plan, group_objects(m, plan) if m.nodes else with_scaling(m, plan, backend_objects(m, plan))
        )
        for m in plan.models
    }
    if plan.metrics.enabled and plan.metrics.k8s.service_monitor:
        models[f"{K8S_DIR}/{MONITORING_FILE}"] = documents(plan, monitoring_objects(plan))
    if plan.redis:
        models[f"{K8S_DIR}/{REDIS_FILE}"] = documents(plan, redis_objects(plan))
    repairs = repair_files(plan, f"{K8S_DIR}/{REPAIRS_DIR}", REGENERATE)
    root = len(K8S_DIR) + 1
    return {
        f"{K8S_DIR}/kustomization.yaml": _header(plan)
        + dump_yaml(
            kustomization(
                plan, [rel[root:] for rel in models], [rel[root:] for rel in config], [rel[root:] for rel in repairs]
            )
        ),
        f"{K8S_DIR}/namespace.yaml": documents(plan, [namespace(plan)]),
        f"{K8S_DIR}/gateway.yaml": documents(plan, gateway_objects(plan)),
        **config,
        **models,
        **repairs,
        **(
            {f"{K8S_DIR}/{KUSTOMIZE_CONFIG}": _header(plan) + dump_yaml(kustomize_config())}
            if any(m.nodes for m in plan.models)
            else {}
        ),
    }


def gateway_url(plan: Plan) -> str:
    g = plan.gateway
    return f"http://{GATEWAY}.{g.k8s.namespace}.svc:{g.port}/v1 in the cluster (outside: kubectl port-forward)"


def k8s_warnings(plan: Plan) -> list[str]:
    """What the user must know before applying (printed by the CLI, never fatal)."""
    warnings = gpu_warnings(plan)
    for m in plan.models:
        if m.nodes:
            warnings.append(
                f"{m.name}: runs on {m.nodes.count} nodes as a LeaderWorkerSet, which needs the LWS controller in the "
                f"cluster ({LWS_INSTALL}; docs/multinode.md)"
            )
        if weights := local_weights(m):
            warnings.append(
                f"{m.name}: serves the local path {m.model}, which pods do not have; its pod waits "
                f"until the files are copied to {weights} on its volume (docs/kubernetes.md, local weights)"
            )
        if adapters := local_adapters(m):
            warnings.append(
                f"{m.name}: serves the local LoRA adapter(s) {', '.join(adapters)}, which pods do not have; "
                f"its pod waits until they are copied to {', '.join(adapters.values())} on its volume "
                "(docs/kubernetes.md, local weights)"
            )
        if m.volumes:
            warnings.append(
                f"{m.name}: volumes: ({', '.join(map(str, m.volumes))}) are compose mounts and are not "
                "rendered here; in Kubernetes the weights live on the model's PVC (docs/kubernetes.md, local weights)"
            )
        if not m.gpus and m.image.startswith(CUDA_IMAGE + ":"):
            warnings.append(
                f"{m.name}: no GPU, but {m.image} is vLLM's CUDA build; set `image:` to a CPU build "
                "of vLLM that your nodes can pull"
            )
    if plan.metrics.enabled and plan.metrics.k8s.service_monitor:
        warnings.append(
            "metrics.k8s.service_monitor: k8s/monitoring.yaml holds ServiceMonitors, which need the "
            "Prometheus Operator's CRDs (kube-prometheus-stack); its Prometheus selects them by label "
            "(metrics.k8s.service_monitor_labels, e.g. {release: kube-prometheus-stack})"
        )
    warnings += scaling_warnings(plan)
    if plan.gateway.k8s.expose != "none":
        warnings.append(
            f"gateway.k8s.expose: {plan.gateway.k8s.expose}: the gateway is reachable from outside the "
            "cluster (its master key still guards every request); use TLS in front of it"
        )
    return warnings


TARGET = Target(
    "k8s",
    k8s_files,
    regenerate=REGENERATE,
    keys_file=(ENV_FILE, ENV_HEADER),
    marker=f"{K8S_DIR}/kustomization.yaml",
    warnings=k8s_warnings,
    gateway_url=gateway_url,
    folders=(f"{K8S_DIR}/{REPAIRS_DIR}", f"{K8S_DIR}/kustomizeconfig"),
)

__all__ = ["ENV_FILE", "ENV_HEADER", "K8S_DIR", "REGENERATE", "TARGET", "gateway_url", "k8s_files", "k8s_warnings"]

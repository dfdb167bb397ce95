"""The k8s target: manifests valid for current Kubernetes, keyless, GPUs as the file meant, golden files.

Refresh the golden files after an intended change:
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_k8s.py
"""

from __future__ import annotations

import base64
import shutil
import stat
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from generator.cli import main
from generator.compile.gateway_process import DRAIN_TIMEOUT
from generator.compile.load.loader import load_plan
from generator.compile.output import ENV_FILE, read_env_file, render_files
from generator.compile.renderers.k8s import ENV_FILE as K8S_ENV_FILE
from generator.compile.renderers.k8s import k8s_warnings
from generator.compile.renderers.litellm import GATEWAY_MODULES, PAGE_FILES
from tests.unit.golden import GOLDEN, assert_golden

ROOT = Path(__file__).resolve().parents[2]
CPU_DEMO = ROOT / "examples/cpu-demo/models.yml"
# The three Kubernetes minors upstream supports now (kubernetes-validate 1.37.0 ships schemas up to 1.37).
K8S_VERSIONS = ("1.35", "1.36", "1.37")
KUBECTL = shutil.which("kubectl")

EVERYTHING = """\
defaults:
  k8s: {storage_class: fast-ssd, node_selector: {nvidia.com/gpu.product: NVIDIA-L40S}}
gateway:
  port: 4000
  backend_internet: false
  clamp_max_tokens: false
  k8s: {replicas: 3, expose: loadbalancer, namespace: ai}
big:
  gpus: [0, 1, 2, 3]
  replicas: 2
  command: vllm serve org/big --max-model-len 32K -tp 2
  k8s:
    cache_size: 500Gi
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
small:
  gpus: [4]
  command: vllm serve /models/small --max-model-len 8K
  k8s: {node_selector: {pool: a100}, cpu: 4, memory: 32Gi}
"""


def copy_as_models_yml(src: Path, tmp: Path) -> Path:
    """A copy named models.yml, so the header is the same wherever the repo lives."""
    dst = tmp / "models.yml"
    shutil.copy(src, dst)
    return dst


def manifests(files: dict[str, str]) -> list[dict]:
    """Every Kubernetes object in the generated files (kustomization.yaml is kustomize's, not the API's)."""
    return [
        doc
        for rel, text in sorted(files.items())
        if rel.endswith(".yaml") and not rel.startswith(("k8s/gateway/", "k8s/kustomization", "k8s/kustomizeconfig/"))
        for doc in yaml.safe_load_all(text)
    ]


def by_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def validate_all(docs: list[dict]) -> None:
    assert docs
    for version in K8S_VERSIONS:
        for doc in docs:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(
                    f"{doc['kind']}/{doc['metadata']['name']} invalid for Kubernetes {version}: "
                    f"{exc.message} at {'.'.join(map(str, exc.path))}"
                )


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> dict[str, str]:
    return render_files(load_plan(copy_as_models_yml(ROOT / "models.yml", tmp_path_factory.mktemp("src"))), ("k8s",))


@pytest.fixture(scope="module")
def repo_docs(repo) -> list[dict]:
    return manifests(repo)


def k8s_of(path: Path) -> dict[str, str]:
    return render_files(load_plan(path), ("k8s",))


# --- schema validity ---------------------------------------------------------------------------


def test_the_validator_catches_a_wrong_manifest(repo_docs):
    """So a pass below means something: a misspelt field and a wrong type both fail."""
    dep = next(d for d in repo_docs if d["kind"] == "Deployment")
    for broken in ({**dep, "spec": {**dep["spec"], "replica": 1}}, {**dep, "spec": {**dep["spec"], "replicas": "one"}}):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)


def test_repo_manifests_validate_against_current_kubernetes(repo_docs):
    validate_all(repo_docs)
    kinds = sorted(d["kind"] for d in repo_docs)
    assert kinds == sorted(
        ["Namespace", "Deployment", "Service"]
        + ["PersistentVolumeClaim", "Deployment", "Service", "NetworkPolicy"] * 3
        + ["Deployment", "Service", "NetworkPolicy"]  # the stack's Redis: stored responses (gateway.responses_ttl)
    )


def test_cpu_demo_manifests_validate(tmp_path):
    validate_all(manifests(k8s_of(copy_as_models_yml(CPU_DEMO, tmp_path))))


def test_every_k8s_setting_renders_valid_manifests(write):
    files = k8s_of(write(EVERYTHING))
    docs = manifests(files)
    validate_all(docs)
    deps, claims = by_kind(docs, "Deployment"), by_kind(docs, "PersistentVolumeClaim")
    big, small = deps["big-1"]["spec"], deps["small"]["spec"]
    # replicas: 2 -> two Deployments of one pod each (a Service each: the gateway picks the replica)
    assert big["replicas"] == 1 and deps["big-2"]["spec"]["replicas"] == 1 and "big" not in deps
    assert {"big-1", "big-2"} <= by_kind(docs, "Service").keys() and deps["litellm"]["spec"]["replicas"] == 3
    assert big["template"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert big["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}  # from defaults
    assert small["template"]["spec"]["nodeSelector"] == {"pool": "a100"}  # the model's own wins
    assert small["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "4", "memory": "32Gi"},
        "limits": {"nvidia.com/gpu": 1},
    }
    for replica in ("big-1", "big-2"):  # a claim each: ReadWriteOnce does
        assert claims[f"{replica}-cache"]["spec"] == {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "fast-ssd",
            "resources": {"requests": {"storage": "500Gi"}},
        }
    assert claims["small-cache"]["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert by_kind(docs, "Service")["litellm"]["spec"]["type"] == "LoadBalancer"
    assert by_kind(docs, "Namespace").keys() == {"ai"}
    assert yaml.safe_load(files["k8s/kustomization.yaml"])["namespace"] == "ai"
    policy = by_kind(docs, "NetworkPolicy")["big-1-from-gateway-only"]["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"] and policy["egress"] == []  # backend_internet: false
    env = {e["name"]: e.get("value") for e in big["template"]["spec"]["containers"][0]["env"]}
    assert env["HF_HUB_OFFLINE"] == "1"
    # clamp off: the hook module still ships (tools/prompt checks and defaults), without the clamp
    assert yaml.safe_load(files["k8s/gateway/config.yaml"])["litellm_settings"]["callbacks"] == [
        "max_tokens_clamp.checks_only_instance",
        "backend_health.health_instance",
        "replica_routing.routing_instance",
    ]
    warnings = " ".join(k8s_warnings(load_plan(write(EVERYTHING))))
    assert "ReadWriteMany" not in warnings and "reachable from outside the cluster" in warnings


# --- golden files, determinism, the committed k8s/ ------------------------------------------


def test_golden_files(repo):
    # the hook modules are verbatim copies of generator/shipped/gateway_hooks
    assert_golden({rel: text for rel, text in repo.items() if rel.endswith(".yaml")})
    on_disk = {p.relative_to(GOLDEN).as_posix() for p in (GOLDEN / "k8s").rglob("*.yaml")}
    assert on_disk == {rel for rel in repo if rel.endswith(".yaml")}, "stale golden files under tests/golden/k8s"


def test_the_committed_k8s_files_are_up_to_date():
    assert main(["k8s", "--models", str(ROOT / "models.yml"), "--out", str(ROOT), "--check", "-q"]) == 0, (
        "run `make k8s`"
    )


def test_same_input_same_bytes_and_a_second_run_writes_nothing(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert main(["k8s", "--models", str(ROOT / "models.yml"), "--out", str(out), "-q"]) == 0

    def generated(d):
        return {
            p.relative_to(d).as_posix(): p.read_bytes()
            for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != "secrets.env"
        }

    assert generated(a) == generated(b) and len(generated(a)) == 8 + len(GATEWAY_MODULES) + len(PAGE_FILES)
    capsys.readouterr()
    assert main(["k8s", "--models", str(ROOT / "models.yml"), "--out", str(a), "-q"]) == 0
    assert "already up to date" in capsys.readouterr().out


# --- keys ----------------------------------------------------------------------------------------


def test_no_key_in_any_manifest_and_keys_are_kept_apart_from_compose(tmp_path):
    good = str(ROOT / "models.yml")
    assert main(["--models", good, "--out", str(tmp_path), "-q"]) == 0  # compose/.env first
    assert main(["k8s", "--models", good, "--out", str(tmp_path), "-q"]) == 0
    env_path = tmp_path / K8S_ENV_FILE
    keys = read_env_file(env_path)
    assert set(keys) == set(load_plan(good).secret_envs) and all(len(v) >= 32 for v in keys.values())
    assert stat.S_IMODE(env_path.stat().st_mode) == 0o600
    assert not set(keys.values()) & set(read_env_file(tmp_path / ENV_FILE).values())  # own keys, not compose's
    forms = [f for v in keys.values() for f in (v, base64.b64encode(v.encode()).decode())]
    for path in (tmp_path / "k8s").rglob("*"):
        if path.is_file() and path != env_path:
            text = path.read_text()
            assert not any(f in text for f in forms), f"a key is in {path}"
    assert main(["k8s", "--models", good, "--out", str(tmp_path), "-q"]) == 0
    assert read_env_file(env_path) == keys  # reused


def test_the_k8s_target_does_not_create_compose_keys(tmp_path):
    assert main(["k8s", "--models", str(ROOT / "models.yml"), "--out", str(tmp_path), "-q"]) == 0
    assert not (tmp_path / ENV_FILE).exists() and not (tmp_path / "compose").exists()


def test_every_key_comes_from_the_generated_secret(repo, repo_docs):
    kustomization = yaml.safe_load(repo["k8s/kustomization.yaml"])
    (gen,) = kustomization["secretGenerator"]
    assert gen["envs"] == ["secrets.env"]
    plan = load_plan(ROOT / "models.yml")
    deps = by_kind(repo_docs, "Deployment")
    gateway_env = deps["litellm"]["spec"]["template"]["spec"]["containers"][0]["env"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in gateway_env if "valueFrom" in e}
    assert set(refs) == set(plan.secret_envs)  # the master key and every backend key, nothing else
    assert all(r == {"name": gen["name"], "key": name} for name, r in refs.items())
    for m in plan.models:
        env = deps[m.name]["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {
            "name": "VLLM_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": gen["name"], "key": m.api_key_env}},
        } in env
        assert not any("KEY" in e["name"] and "value" in e for e in env)  # a backend sees only its own key


# --- GPUs --------------------------------------------------------------------------------------


def gpu_limits(docs: list[dict]) -> dict[str, dict]:
    """Each backend's resource limits (the gateway's and the Redis Deployment left out)."""
    return {
        name: d["spec"]["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
        for name, d in by_kind(docs, "Deployment").items()
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "backend"
    }


def test_gpus_as_the_file_meant_whole_ones_and_time_slices_for_the_shared_gpu(repo_docs):
    assert gpu_limits(repo_docs) == {
        "glm47-flash": {"nvidia.com/gpu": 1},
        "qwen3-8b": {"nvidia.com/gpu.shared": 1},
        "small-chat": {"nvidia.com/gpu.shared": 1},
    }
    (warning,) = k8s_warnings(load_plan(ROOT / "models.yml"))
    assert "GPU 1 is shared by qwen3-8b, small-chat" in warning and "time-slicing" in warning
    assert "renameByDefault: true" in warning and "2 replicas of that GPU" in warning


def test_a_multi_gpu_model_asks_for_as_many_whole_gpus(write):
    docs = manifests(
        k8s_of(write("m:\n  gpus: [0, 1, 2, 3]\n  command: vllm serve o/m --max-model-len 8K -tp 2 -pp 2\n"))
    )
    assert gpu_limits(docs) == {"m": {"nvidia.com/gpu": 4}}
    assert by_kind(docs, "Deployment")["m"]["spec"]["strategy"] == {"type": "Recreate"}


def test_never_more_whole_gpus_than_the_file_names(write, tmp_path):
    """Whole GPUs requested <= distinct GPUs in models.yml, for the repo file and a crowded one."""
    crowded = write(
        "a:\n  gpus: [0]\n  command: vllm serve o/a --max-model-len 8K --gpu-memory-utilization 0.3\n"
        "b:\n  gpus: [0]\n  command: vllm serve o/b --max-model-len 8K --gpu-memory-utilization 0.3\n"
        "c:\n  gpus: [0]\n  command: vllm serve o/c --max-model-len 8K --gpu-memory-utilization 0.3\n"
        "d:\n  gpus: [1, 2]\n  command: vllm serve o/d --max-model-len 8K -tp 2\n",
        name="crowded.yml",
    )
    for path in (copy_as_models_yml(ROOT / "models.yml", tmp_path), crowded):
        plan = load_plan(path)
        whole = sum(limits.get("nvidia.com/gpu", 0) for limits in gpu_limits(manifests(k8s_of(path))).values())
        assert whole <= len({g for m in plan.models for g in m.gpus})
    assert gpu_limits(manifests(k8s_of(crowded)))["c"] == {"nvidia.com/gpu.shared": 1}


def test_a_shared_multi_gpu_model_is_refused_exit_2_nothing_written(write, tmp_path, capsys):
    bad = write(
        "a:\n  gpus: [0, 1]\n  command: vllm serve o/a --max-model-len 8K -tp 2 --gpu-memory-utilization 0.5\n"
        "b:\n  gpus: [1]\n  command: vllm serve o/b --max-model-len 8K --gpu-memory-utilization 0.4\n"
    )
    out = tmp_path / "out"
    assert main(["k8s", "--models", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "a.gpus" in err and "time-slices" in err and "gpu_resource: nvidia.com/gpu" in err
    assert err.strip().splitlines()[-1] == "nothing was written" and not out.exists()
    assert main(["--models", str(bad), "--out", str(out), "-q"]) == 0  # compose can pin it: only k8s refuses


def test_claiming_whole_gpus_for_a_shared_gpu_is_said_out_loud(write):
    path = write(
        "a:\n  gpus: [0, 1]\n  command: vllm serve o/a --max-model-len 8K -tp 2 --gpu-memory-utilization 0.5\n"
        "  k8s: {gpu_resource: nvidia.com/gpu}\n"
        "b:\n  gpus: [1]\n  command: vllm serve o/b --max-model-len 8K --gpu-memory-utilization 0.4\n"
    )
    assert gpu_limits(manifests(k8s_of(path))) == {"a": {"nvidia.com/gpu": 2}, "b": {"nvidia.com/gpu.shared": 1}}
    assert any(
        "a request nvidia.com/gpu (k8s.gpu_resource)" in w and "more GPUs than the file meant" in w
        for w in k8s_warnings(load_plan(path))
    )


def test_cpu_models_ask_for_no_gpu_and_wait_for_their_local_weights(tmp_path):
    path = copy_as_models_yml(CPU_DEMO, tmp_path)
    docs = manifests(k8s_of(path))
    assert gpu_limits(docs) == {"reasoner": {}, "tool-caller": {}}
    pod = by_kind(docs, "Deployment")["reasoner"]["spec"]["template"]["spec"]
    (vllm,), (init,) = pod["containers"], pod["initContainers"]
    weights = "/workspace/.cache/demo-models/reasoner"
    assert vllm["workingDir"] == "/workspace" and vllm["args"][0] == ".cache/demo-models/reasoner"
    assert {"name": "cache", "mountPath": weights, "subPath": "weights"} in vllm["volumeMounts"]
    assert init["volumeMounts"] == [{"name": "cache", "mountPath": weights, "subPath": "weights"}]
    assert init["command"][-1] == f"{weights}/config.json" and "until [ -f" in init["command"][2]
    warnings = " ".join(k8s_warnings(load_plan(path)))
    assert "local path .cache/demo-models/reasoner" in warnings and "CUDA build" in warnings


def test_hub_models_get_no_weights_volume(repo_docs):
    for dep in by_kind(repo_docs, "Deployment").values():
        assert "initContainers" not in dep["spec"]["template"]["spec"]


# --- backends: same vLLM command as compose, probes, only the gateway reaches them ---------------


def test_backends_run_the_compose_command_with_probes_and_a_cache(repo, repo_docs, tmp_path):
    compose = yaml.safe_load(
        render_files(load_plan(copy_as_models_yml(ROOT / "models.yml", tmp_path)))["compose/docker-compose.yml"]
    )
    deps, services, claims = (by_kind(repo_docs, k) for k in ("Deployment", "Service", "PersistentVolumeClaim"))
    for m in load_plan(ROOT / "models.yml").models:
        pod = deps[m.name]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert (
            c["command"] == compose["services"][m.name]["entrypoint"]
            and c["args"] == compose["services"][m.name]["command"]
        )
        assert c["ports"] == [{"name": "http", "containerPort": m.port, "protocol": "TCP"}]
        start = c["startupProbe"]
        assert start["httpGet"] == {"path": "/health", "port": "http"}
        assert start["periodSeconds"] * start["failureThreshold"] >= 30 * 60  # a 30-minute first load
        assert c["readinessProbe"]["httpGet"]["path"] == c["livenessProbe"]["httpGet"]["path"] == "/health"
        assert {"name": "shm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
        assert {"name": "cache", "persistentVolumeClaim": {"claimName": f"{m.name}-cache"}} in pod["volumes"]
        assert claims[f"{m.name}-cache"]["spec"]["resources"]["requests"]["storage"] == "100Gi"
        assert pod["enableServiceLinks"] is False and pod["automountServiceAccountToken"] is False
        assert deps[m.name]["metadata"]["labels"]["app.kubernetes.io/instance"] == m.name
        assert services[m.name]["spec"]["type"] == "ClusterIP"
        assert services[m.name]["spec"]["ports"][0]["port"] == m.port


def test_backends_accept_only_the_gateway_and_nothing_is_exposed(repo_docs):
    deps, services = by_kind(repo_docs, "Deployment"), by_kind(repo_docs, "Service")
    policies = by_kind(repo_docs, "NetworkPolicy")
    gateway_pods = deps["litellm"]["spec"]["template"]["metadata"]["labels"]
    assert all(s["spec"]["type"] == "ClusterIP" for s in services.values())
    assert not [d for d in repo_docs if d["kind"] in ("Ingress", "HTTPRoute", "Gateway")]
    assert len(policies) == len(deps) - 1
    for name, dep in deps.items():
        if name in ("litellm", "redis"):  # the stack's Redis (test_redis.py): the gateway's only
            continue
        (policy,) = [
            p["spec"]
            for p in policies.values()
            if p["spec"]["podSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
        ]
        rule, scraper = policy["ingress"]  # the gateway; the cluster's Prometheus (metrics.k8s), /metrics only
        assert scraper == {
            "from": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                }
            ],
            "ports": rule["ports"],
        }
        (source,) = rule["from"]
        assert set(source) == {"podSelector"}  # pods of this namespace only; no namespace or IP block
        assert source["podSelector"]["matchLabels"].items() <= gateway_pods.items()
        backend_pods = dep["spec"]["template"]["metadata"]["labels"]
        assert not source["podSelector"]["matchLabels"].items() <= backend_pods.items()  # backends don't match it
        assert rule["ports"] == [
            {"protocol": "TCP", "port": dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]}
        ]


# --- gateway -------------------------------------------------------------------------------------


def test_gateway_reads_its_config_from_the_configmap_with_service_dns_backends(repo, repo_docs):
    kustomization = yaml.safe_load(repo["k8s/kustomization.yaml"])
    (gen,) = kustomization["configMapGenerator"]
    assert gen["files"] == [
        "gateway/config.yaml",
        *(f"gateway/{mod}.py" for mod in GATEWAY_MODULES),
        *(f"gateway/{name}" for name in PAGE_FILES),
    ]
    config = yaml.safe_load(repo["k8s/gateway/config.yaml"])
    assert config["general_settings"]["custom_auth"] == "gateway_guard.user_api_key_auth"
    assert config["litellm_settings"]["callbacks"] == [
        "max_tokens_clamp.proxy_handler_instance",
        "tool_call_repairs.repair_instance",
        "backend_health.health_instance",
    ]  # its models take tools; its backends are probed for hangs
    services = by_kind(repo_docs, "Service")
    for entry in config["model_list"]:
        name = entry["model_name"]
        assert entry["litellm_params"]["api_base"] == f"http://{name}:{services[name]['spec']['ports'][0]['port']}/v1"
    for mod in GATEWAY_MODULES:
        assert repo[f"k8s/gateway/{mod}.py"].endswith((ROOT / f"generator/shipped/gateway_hooks/{mod}.py").read_text())
    dep = by_kind(repo_docs, "Deployment")["litellm"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["volumes"] == [{"name": "config", "configMap": {"name": gen["name"]}}]
    assert c["volumeMounts"] == [{"name": "config", "mountPath": "/etc/litellm", "readOnly": True}]
    assert c["args"][:2] == ["--config", "/etc/litellm/config.yaml"]
    assert c["livenessProbe"]["httpGet"]["path"] == c["startupProbe"]["httpGet"]["path"] == "/health/liveliness"
    assert c["readinessProbe"]["httpGet"]["path"] == "/health/readiness"
    assert {"name": "DISABLE_ADMIN_UI", "value": "True"} in c["env"]


def test_the_kustomization_names_every_generated_file(repo):
    kustomization = yaml.safe_load(repo["k8s/kustomization.yaml"])
    named = set(kustomization["resources"]) | set(kustomization["configMapGenerator"][0]["files"])
    assert {f"k8s/{rel}" for rel in named} == set(repo) - {"k8s/kustomization.yaml"}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed: `kubectl kustomize` cannot be run")
def test_kubectl_kustomize_builds_it_and_every_object_validates(tmp_path):
    assert main(["k8s", "--models", str(ROOT / "models.yml"), "--out", str(tmp_path), "-q"]) == 0
    run = subprocess.run([KUBECTL, "kustomize", str(tmp_path / "k8s")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    docs = list(yaml.safe_load_all(run.stdout))
    validate_all(docs)
    (secret,) = by_kind(docs, "Secret").values()
    (config_map,) = by_kind(docs, "ConfigMap").values()
    keys = read_env_file(tmp_path / K8S_ENV_FILE)
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == keys
    assert set(config_map["data"]) == {"config.yaml", *(f"{mod}.py" for mod in GATEWAY_MODULES), *PAGE_FILES}
    assert all(d["metadata"].get("namespace") == "llm-gateway" for d in docs if d["kind"] != "Namespace")
    refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for d in by_kind(docs, "Deployment").values()
        for e in d["spec"]["template"]["spec"]["containers"][0]["env"]
        if "valueFrom" in e
    }
    assert refs == {secret["metadata"]["name"], "hf-token"}  # the hashed name, rewritten everywhere
    gateway = by_kind(docs, "Deployment")["litellm"]["spec"]["template"]["spec"]
    assert gateway["volumes"][0]["configMap"]["name"] == config_map["metadata"]["name"]


# --- bad input, checks -------------------------------------------------------------------------


def test_a_name_that_is_no_service_name_is_refused(write, tmp_path, capsys):
    bad = write("8b-chat:\n  gpus: [0]\n  command: vllm serve o/m --max-model-len 8K\n")
    assert main(["k8s", "--models", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "8b-chat: Kubernetes Service names must start with a letter" in err and not (tmp_path / "out").exists()


def test_k8s_fields_are_checked_with_suggestions(problems):
    found = problems("""\
        gateway:
          k8s: {replica: 2, expose: ingress}
        m1:
          gpus: [0]
          command: vllm serve o/m --max-model-len 8K
          k8s:
            cache_size: 100GB
            nodeselector: {}
            node_selector: {gpu: true}
            tolerations: [{key: nvidia.com/gpu, operater: Exists}, {operator: Exists, value: x}]
        """)
    text = "\n".join(found)
    assert "gateway.k8s.replica: unknown field 'replica'; did you mean 'replicas'?" in text
    assert "gateway.k8s.expose" in text and "'none', 'loadbalancer' or 'nodeport'" in text
    assert "m1.k8s.cache_size: '100GB' is not a Kubernetes quantity such as 100Gi or 500m" in text
    assert "m1.k8s.nodeselector: unknown field 'nodeselector'; did you mean 'node_selector'?" in text
    assert "m1.k8s.node_selector.gpu: YAML reads this as true/false; quote it" in text
    assert "m1.k8s.tolerations.0.operater: unknown field 'operater'; did you mean 'operator'?" in text
    assert "m1.k8s.tolerations.1: operator Exists takes no value" in text
    assert all("models.yml:" in line.split(": ")[0] for line in found)  # each with its line


def test_cpu_and_memory_requests(plan):
    (m,) = plan(
        "m1:\n  gpus: [0]\n  command: vllm serve o/m --max-model-len 8K\n  k8s: {cpu: 500m, memory: 1.5Gi}\n"
    ).models
    assert (m.k8s.cpu, m.k8s.memory) == ("500m", "1.5Gi")


def test_defaults_k8s_merge_under_the_models_own(plan):
    p = plan(
        "defaults:\n  k8s: {storage_class: a, cache_size: 5Gi}\n"
        "m1:\n  gpus: [0]\n  command: vllm serve o/m --max-model-len 8K\n  k8s: {storage_class: b}\n"
        "m2:\n  gpus: [1]\n  command: vllm serve o/n --max-model-len 8K\n"
    )
    (m1, m2) = p.models
    assert (m1.k8s.storage_class, m1.k8s.cache_size) == ("b", "5Gi") and (m2.k8s.storage_class, m2.k8s.cache_size) == (
        "a",
        "5Gi",
    )


@pytest.mark.parametrize("where", ["m1:\n  k8s: {replicas: 2}\n", "defaults:\n  k8s: {replicas: 2}\nm1:\n"])
def test_k8s_replicas_is_refused_naming_the_move_to_replicas(problems, where):
    """One field for copies of a model (`replicas:`, every target): the old Kubernetes-only one is an error
    naming the move, never a second count that could disagree."""
    (msg,) = problems(where + "  gpus: [0]\n  command: vllm serve o/m --max-model-len 8K\n")
    assert ".k8s: k8s.replicas has moved: write `replicas: N` on the model itself" in msg and "docs/replicas.md" in msg


def test_check_covers_k8s_when_it_was_generated(tmp_path, capsys):
    good = str(ROOT / "models.yml")
    assert main(["--models", good, "--out", str(tmp_path), "-q"]) == 0
    assert main(["--models", good, "--out", str(tmp_path), "--check"]) == 0  # no k8s/ yet: stack only
    assert main(["k8s", "--models", good, "--out", str(tmp_path), "-q"]) == 0
    assert main(["--models", good, "--out", str(tmp_path), "--check"]) == 0
    model = tmp_path / "k8s/models/small-chat.yaml"
    model.write_text(model.read_text().replace("replicas: 1", "replicas: 2"))
    capsys.readouterr()
    assert main(["--models", good, "--out", str(tmp_path), "--check"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()  # only the edited file; compose/ is fine
    assert line.startswith("stale: k8s/models/small-chat.yaml differs from what") and line.endswith("run `make k8s`")
    stray = tmp_path / "k8s/models/gone.yaml"
    stray.write_text(model.read_text())  # a model removed from models.yml: its manifest is an orphan
    assert main(["k8s", "--models", good, "--out", str(tmp_path), "-q"]) == 0
    assert not stray.exists() and (tmp_path / K8S_ENV_FILE).exists()
    assert main(["--models", good, "--out", str(tmp_path), "--check"]) == 0


def test_a_hand_written_k8s_folder_is_not_checked(tmp_path):
    good = str(ROOT / "models.yml")
    assert main(["--models", good, "--out", str(tmp_path), "-q"]) == 0
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s/kustomization.yaml").write_text("resources: [mine.yaml]\n")
    assert main(["--models", good, "--out", str(tmp_path), "--check"]) == 0


# --- fuzz: any models.yml gives valid manifests or exit 2 with nothing written ------------------

from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.unit.test_fuzz_models_yml import mutated_documents  # noqa: E402

K8S_VALUES = st.fixed_dictionaries(
    {},
    optional={
        "cache_size": st.sampled_from(["10Gi", "1.5T", "100GB", "", "7"]),
        "storage_class": st.sampled_from(["standard", "Fast_SSD", "a.b-c"]),
        "node_selector": st.dictionaries(
            st.sampled_from(["pool", "nvidia.com/gpu.product", "bad key"]),
            st.sampled_from(["a100", "", True, 3, "x" * 70]),
            max_size=2,
        ),
        "tolerations": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "key": st.sampled_from(["nvidia.com/gpu", "dedicated"]),
                    "operator": st.sampled_from(["Exists", "Equal", "In"]),
                    "value": st.sampled_from(["gpu", "a b"]),
                    "effect": st.sampled_from(["NoSchedule", "NoExecute", "Never"]),
                    "toleration_seconds": st.integers(-1, 60),
                },
            ),
            max_size=2,
        ),
        "gpu_resource": st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "gpu"]),
        "memory": st.sampled_from(["8Gi", "8GB", 4]),
        "cpu": st.sampled_from(["500m", 2, "two"]),
        "replica": st.just(1),
    },
)


@st.composite
def k8s_documents(draw) -> str:
    doc = yaml.safe_load(draw(mutated_documents()))
    if not isinstance(doc, dict):
        return yaml.safe_dump(doc)
    for name in draw(st.lists(st.sampled_from(sorted(doc)), max_size=3)):
        if isinstance(doc[name], dict):
            doc[name]["k8s"] = (
                draw(K8S_VALUES)
                if name != "gateway"
                else draw(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "replicas": st.integers(0, 3),
                            "expose": st.sampled_from(["none", "nodeport", "ingress"]),
                            "namespace": st.sampled_from(["ai", "Bad", "llm-gateway"]),
                        },
                    )
                )
            )
    return yaml.safe_dump(doc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=k8s_documents())
def test_any_models_yml_gives_valid_manifests_or_exit_2_and_nothing(tmp_path_factory, capsys, text):
    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "models.yml").write_text(text)
    code = main(["k8s", "--models", str(tmp / "models.yml"), "--out", str(tmp / "out"), "-q"])
    err = capsys.readouterr().err
    event(f"exit {code}")
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        assert not (tmp / "out").exists() and err.strip().splitlines()[-1] == "nothing was written"
        return
    files = {p.relative_to(tmp / "out").as_posix(): p.read_text() for p in (tmp / "out").rglob("*") if p.is_file()}
    for doc in manifests(files):
        kubernetes_validate.validate(doc, K8S_VERSIONS[-1], strict=True)


def test_compose_volumes_are_named_in_a_warning_not_silently_dropped(tmp_path):
    """The compose example bind-mounts its weights; Kubernetes has no such mount and must say so."""
    plan = load_plan(ROOT / "examples/cpu-compose/models.yml")
    warnings = [w for w in k8s_warnings(plan) if "volumes:" in w]
    assert [w.split(":")[0] for w in warnings] == ["reasoner", "tool-caller"]
    assert all("/models:ro" in w and "not rendered" in w for w in warnings)


def test_a_gateway_pod_replaced_by_a_rollout_finishes_its_requests_before_it_is_killed(repo_docs):
    pod = by_kind(repo_docs, "Deployment")["litellm"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    # LiteLLM lets a stopping worker's requests run GRACEFUL_SHUTDOWN_TIMEOUT s; Kubernetes kills the pod after
    # terminationGracePeriodSeconds (its default 30 s would cut a long stream)
    assert int(env["GRACEFUL_SHUTDOWN_TIMEOUT"]) == DRAIN_TIMEOUT == 3600
    assert pod["terminationGracePeriodSeconds"] > DRAIN_TIMEOUT

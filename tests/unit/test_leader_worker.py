"""A model on `nodes:` on Kubernetes: a LeaderWorkerSet valid against the pinned LWS CRD (tests/unit/fixtures/lws), pod
templates valid against current Kubernetes, the leader serving the API behind the model's Service, headless workers,
the group restarted as one, and kustomize told where the LeaderWorkerSet names the hashed Secret."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.renderers.k8s import k8s_warnings
from tests.unit.test_k8s import K8S_VERSIONS, by_kind, manifests, validate_all
from tests.unit.test_metrics import _closed

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/multinode/models.yml"
CRD_SCHEMA = Path(__file__).parent / "fixtures/lws/leaderworkerset-v1.schema.json"


@pytest.fixture(scope="module")
def schema() -> dict:
    return _closed(json.loads(CRD_SCHEMA.read_text()))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    src = tmp_path_factory.mktemp("src") / "models.yml"
    shutil.copy(EXAMPLE, src)
    return render_files(load_plan(src), ("k8s",))


@pytest.fixture(scope="module")
def docs(files) -> list[dict]:
    return manifests(files)


def lws_of(docs: list[dict]) -> dict:
    (lws,) = [d for d in docs if d["kind"] == "LeaderWorkerSet"]
    return lws


def pod_template(template: dict, name: str) -> dict:
    """A pod template as the core API's PodTemplate, for kubernetes-validate."""
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}, "template": template}


def test_the_leader_worker_set_validates_against_the_pinned_crd_and_kubernetes(docs, schema):
    lws = lws_of(docs)
    jsonschema.validate(lws, schema)
    t = lws["spec"]["leaderWorkerTemplate"]
    for version in K8S_VERSIONS:
        for role in ("leaderTemplate", "workerTemplate"):
            kubernetes_validate.validate(pod_template(t[role], role.lower()), version, strict=True)
    validate_all([d for d in docs if d["kind"] != "LeaderWorkerSet"])  # the rest: Deployments, Services, policies
    assert not any(d["kind"] == "Deployment" and d["metadata"]["name"] == "deepseek-r1" for d in docs)


def test_the_schema_refuses_a_wrong_leader_worker_set(docs, schema):
    """So a pass above means something: a misspelt field, a wrong type, an unknown restart policy."""
    lws = lws_of(docs)
    spec = lws["spec"]
    lwt = spec["leaderWorkerTemplate"]
    for broken in (
        {**spec, "leaderWorkerTemplat": lwt},
        {**spec, "leaderWorkerTemplate": {**lwt, "size": "two"}},
        {**spec, "leaderWorkerTemplate": {**lwt, "restartPolicy": "Always"}},
        {**spec, "leaderWorkerTemplate": {**lwt, "workerTemplate": {**lwt["workerTemplate"], "spek": {}}}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**lws, "spec": broken}, schema)


def test_leader_serves_the_api_workers_run_headless_and_the_group_restarts_as_one(docs):
    spec = lws_of(docs)["spec"]
    lwt = spec["leaderWorkerTemplate"]
    assert lwt["size"] == 2 and lwt["restartPolicy"] == "RecreateGroupOnPodRestart" and spec["replicas"] == 1
    (leader,) = lwt["leaderTemplate"]["spec"]["containers"]
    (worker,) = lwt["workerTemplate"]["spec"]["containers"]
    la, wa = leader["args"], worker["args"]
    assert la[: la.index("--nnodes")] == wa[: wa.index("--nnodes")]  # every node runs the model's own flags
    assert la[la.index("--nnodes") :] == [
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "$(LWS_LEADER_ADDRESS)", "--master-port", "29501",
        "--distributed-executor-backend", "mp",
    ]  # fmt: skip
    assert wa[wa.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)" and wa[-1] == "--headless"
    assert "--headless" not in la and "-tp" not in la and la[la.index("--tensor-parallel-size") + 1] == "8"
    # the leader: port, probes, key; the workers: none of them (no API)
    assert leader["ports"][0]["containerPort"] == 8001 and "readinessProbe" in leader and "startupProbe" in leader
    assert not {"ports", "startupProbe", "readinessProbe", "livenessProbe"} & worker.keys()
    assert "VLLM_API_KEY" in {e["name"] for e in leader["env"]} - {e["name"] for e in worker["env"]}
    # every node: its 8 GPUs, shared memory, NCCL's interface, a cache volume of its own
    for pod, c in ((lwt["leaderTemplate"], leader), (lwt["workerTemplate"], worker)):
        assert c["resources"]["limits"] == {"nvidia.com/gpu": 8}
        assert {"name": "shm", "emptyDir": {"medium": "Memory"}} in pod["spec"]["volumes"]
        assert "cache" not in {v["name"] for v in pod["spec"]["volumes"]}
        assert {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"} in c["env"]
    assert lwt["volumeClaimTemplates"][0]["metadata"]["name"] == "cache"
    assert "prometheus.io/scrape" not in lwt["workerTemplate"]["metadata"].get("annotations", {})


def test_the_service_reaches_the_leader_and_the_group_reaches_itself(docs, files):
    svc = by_kind(docs, "Service")["deepseek-r1"]
    assert svc["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    leader_labels = lws_of(docs)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]
    assert {k: v for k, v in svc["spec"]["selector"].items() if not k.startswith("leaderworkerset")}.items() <= (
        leader_labels.items()
    )
    policy = by_kind(docs, "NetworkPolicy")["deepseek-r1-from-gateway-only"]["spec"]
    group = policy["ingress"][-1]
    assert group == {"from": [{"podSelector": {"matchLabels": policy["podSelector"]["matchLabels"]}}]}
    assert "http://deepseek-r1:8001/v1" in files["k8s/gateway/config.yaml"]  # the gateway: the leader's Service


def test_without_backend_internet_the_group_still_reaches_itself_and_dns(write):
    text = EXAMPLE.read_text().replace("gpu_memory: 80GiB", "gpu_memory: 80GiB\ngateway: {backend_internet: false}")
    text += "\nsmall-chat:\n  gpus: []\n  command: vllm serve Qwen/Qwen2.5-1.5B-Instruct --max-model-len 8k\n"
    docs = manifests(render_files(load_plan(write(text)), ("k8s",)))
    policy = by_kind(docs, "NetworkPolicy")["deepseek-r1-from-gateway-only"]["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["egress"][0] == {"to": [{"podSelector": {"matchLabels": policy["podSelector"]["matchLabels"]}}]}
    assert policy["egress"][1] == {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    validate_all([d for d in docs if d["kind"] == "NetworkPolicy"])
    # single-node models keep no egress at all
    assert by_kind(docs, "NetworkPolicy")["small-chat-from-gateway-only"]["spec"]["egress"] == []


def test_kustomize_learns_where_the_leader_worker_set_names_the_secret(files, docs):
    kustomization = yaml.safe_load(files["k8s/kustomization.yaml"])
    (config_file,) = kustomization["configurations"]
    config = yaml.safe_load(files[f"k8s/{config_file}"])
    lws = lws_of(docs)
    for spec in config["nameReference"][0]["fieldSpecs"]:
        assert spec["kind"] == "LeaderWorkerSet"
        node: object = lws
        for part in spec["path"].split("/"):  # kustomize walks lists item by item
            node = [x.get(part) for x in node if part in x] if isinstance(node, list) else node.get(part)  # type: ignore[union-attr]
            if isinstance(node, list) and node and isinstance(node[0], list):
                node = [y for x in node for y in x]
        if "leaderTemplate" in spec["path"]:
            assert "llm-gateway-keys" in node  # the leader's VLLM_API_KEY


def test_a_file_without_nodes_gets_no_kustomize_config(tmp_path):
    files = render_files(load_plan(ROOT / "examples/cpu-demo/models.yml"), ("k8s",))
    assert "configurations" not in yaml.safe_load(files["k8s/kustomization.yaml"])
    assert not any("kustomizeconfig" in rel for rel in files)


def test_the_controller_is_named_in_a_warning():
    (w,) = [w for w in k8s_warnings(load_plan(EXAMPLE)) if "LeaderWorkerSet" in w]
    assert "deepseek-r1: runs on 2 nodes" in w and "lws/releases/download/v0.10.0/manifests.yaml" in w

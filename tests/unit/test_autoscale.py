"""`replicas: {min, max}`: copies that follow the load. The range's checks (through load_plan, on the message a person
reads), its plan, the controller's config, and what compose and Kubernetes get: golden files for the 4-GPU example,
every Kubernetes object valid (core kinds against Kubernetes' schemas, KEDA's ScaledObject against its CRD, vendored
in tests/unit/fixtures/keda/ from KEDA v2.20.2)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.renderers.on_demand import controller_config
from tests.unit.golden import assert_yaml_golden, example_files
from tests.unit.test_k8s import manifests, validate_all
from tests.unit.test_metrics import _closed

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/autoscale/models.yml"
KEDA_CRD = Path(__file__).parent / "fixtures/keda/keda.sh_scaledobjects.yaml"  # SOURCE.md beside it
ONE_GPU = "vllm serve org/m --max-model-len 8K --gpu-memory-utilization 0.45"


def model(replicas: str, gpus: str = "[0, 1, 2]", name: str = "m1", extra: str = "") -> str:
    return f"{name}:\n  gpus: {gpus}\n  replicas: {replicas}\n  command: {ONE_GPU}\n{extra}"


def test_a_range_gives_max_copies_those_above_min_started_by_the_load(plan):
    p = plan(model("{min: 1, max: 3, waiting: 4, up_after: 10s, idle: 2m}"))
    assert [(m.name, m.gpus, m.on_demand is not None, m.by_load) for m in p.models] == [
        ("m1-1", (0,), False, False),
        ("m1-2", (1,), True, True),
        ("m1-3", (2,), True, True),
    ]
    scale = p.models[0].scale
    assert scale is not None and (scale.min, scale.max, scale.waiting, scale.up_after, scale.idle) == (1, 3, 4, 10, 120)
    assert {m.on_demand.idle_timeout for m in p.models[1:] if m.on_demand} == {120}
    assert p.controller is not None and p.replicated == ("m1",)  # the controller starts them; the gateway routes


def test_defaults_need_no_tuning(plan):
    p = plan(model("{max: 2}", gpus="[0, 1]"))
    scale = p.models[0].scale
    assert scale is not None and (scale.min, scale.waiting, scale.up_after, scale.idle) == (1, 2, 30, 300)


def test_min_0_loads_the_first_copy_on_a_request(plan):
    p = plan(model("{min: 0, max: 2}", gpus="[0, 1]"))
    assert [(m.name, m.on_demand is not None, m.by_load) for m in p.models] == [
        ("m1-1", True, False),
        ("m1-2", True, True),
    ]
    single = plan(model("{min: 0, max: 1}", gpus="[0]")).models
    assert [(m.name, m.on_demand is not None, m.by_load) for m in single] == [("m1", True, False)]


def test_a_plain_count_keeps_meaning_a_fixed_count(plan):
    p = plan(model("3"))
    assert all(m.scale is None and m.on_demand is None for m in p.models) and len(p.models) == 3


@pytest.mark.parametrize(
    ("replicas", "message"),
    [
        (
            "{min: 2, max: 2}",
            "m1.replicas: min 2 is not below max 2: give max above min, or a fixed count (replicas: 2)",
        ),
        ("{min: 1}", "m1.replicas.max: required field 'max' is missing"),
        ("{min: 1, max: 3, wait: 2}", "m1.replicas.wait: unknown field 'wait'; did you mean 'waiting'?"),
        ("{min: -1, max: 3}", "m1.replicas.min: Input should be greater than or equal to 0"),
    ],
)
def test_every_field_is_checked(problems, replicas, message):
    assert any(message in p for p in problems(model(replicas))), problems(model(replicas))


def test_gpus_split_into_one_set_per_copy_up_to_max(problems):
    (line,) = problems(model("{min: 1, max: 3}", gpus="[0, 1]"))
    assert "m1.gpus: gpus gives" in line or "do not split into 3 replicas" in line


def test_on_demand_with_a_range_is_refused_with_the_fix(problems):
    (line,) = problems(model("{min: 1, max: 2}", gpus="[0, 1]", extra="  on_demand: true\n"))
    assert (
        "m1.on_demand: a model whose replicas is a range is started and stopped by its load: remove on_demand" in line
    )


def test_a_copy_on_an_always_on_models_gpu_is_an_error_naming_both(problems):
    text = model("{min: 1, max: 2}", gpus="[0, 1]") + f"other:\n  gpus: [1]\n  command: {ONE_GPU}\n"
    lines = problems(text)
    assert any(
        "m1.gpus: copy m1-2 (started with the load) would take GPU(s) [1], which other holds" in p
        and "put other on demand" in p
        for p in lines
    ), lines


def test_a_copy_on_an_on_demand_groups_gpu_joins_the_group(plan):
    text = model("{min: 1, max: 2}", gpus="[0, 1]") + (
        f"other:\n  gpus: [1]\n  command: {ONE_GPU}\n  on_demand: {{group: gpu1}}\n"
    )
    p = plan(text)
    groups = {m.name: m.on_demand.group for m in p.models if m.on_demand}
    assert groups == {"m1-2": "gpu1", "other": "gpu1"}  # they take turns on GPU 1


def test_the_controller_config_names_every_copy_and_the_signal(plan):
    p = plan(model("{min: 1, max: 2, waiting: 3, up_after: 5s, idle: 20s}", gpus="[0, 1]"))
    config = controller_config(p)
    assert config["scaling"] == {
        "m1": {
            "min": 1,
            "max": 2,
            "waiting": 3,
            "up_after": 5.0,
            "idle": 20.0,
            "copies": [
                {"name": "m1-1", "url": "http://m1-1:8001", "managed": False},
                {"name": "m1-2", "url": "http://m1-2:8002", "managed": True},
            ],
        }
    }
    assert config["models"]["m1-2"]["by_load"] is True and "m1-1" not in config["models"]
    assert "VLLM_API_KEY" not in json.dumps(config["models"]["m1-2"]).replace("VLLM_API_KEY_M1", "")


# --- the 4-GPU example: compose and Kubernetes ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> dict[str, str]:
    return example_files(EXAMPLE, tmp_path_factory.mktemp("autoscale"))


def test_example_golden(example):
    assert_yaml_golden("autoscale", example)


def test_example_compose_starts_min_copies_and_leaves_the_rest_to_the_controller(example):
    services = yaml.safe_load(example["compose/docker-compose.yml"])["services"]
    assert "profiles" not in services["qwen3-8b-1"]
    assert {n: services[n].get("profiles") for n in ("qwen3-8b-2", "qwen3-8b-3", "coder")} == dict.fromkeys(
        ("qwen3-8b-2", "qwen3-8b-3", "coder"), ["on-demand"]
    )
    assert "on-demand" in services


def scaled_object_schema() -> dict:
    crd = yaml.safe_load(KEDA_CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]


def test_example_kubernetes_objects_are_valid_keda_included(example):
    docs = manifests({rel: text for rel, text in example.items() if rel.startswith("k8s/")})
    keda = [d for d in docs if d["kind"] == "ScaledObject"]
    validate_all([d for d in docs if d["kind"] != "ScaledObject"])
    schema = _closed(scaled_object_schema())
    for d in keda:
        jsonschema.validate(d, schema)
    assert sorted(d["metadata"]["name"] for d in keda) == ["coder", "qwen3-8b-2", "qwen3-8b-3"]
    broken = copy.deepcopy(keda[0])
    broken["spec"]["minReplicas"] = 0  # HPA's spelling, not KEDA's: the check must catch it
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    deps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert deps["qwen3-8b-1"]["spec"]["replicas"] == 1 and "replicas" not in deps["qwen3-8b-2"]["spec"]


def test_kubernetes_scales_on_the_same_signal(example):
    by_name = {
        d["metadata"]["name"]: d
        for d in manifests({rel: text for rel, text in example.items() if rel.startswith("k8s/models/")})
        if d["kind"] == "ScaledObject"
    }
    third = by_name["qwen3-8b-3"]["spec"]
    (trigger,) = third["triggers"]
    assert (
        trigger["type"] == "prometheus"
        and 'vllm:num_requests_waiting{model_name="qwen3-8b"}' in trigger["metadata"]["query"]
    )
    assert "[30s:]" in trigger["metadata"]["query"] and ">= 2" in trigger["metadata"]["query"]  # after copies 1, 2
    assert (third["minReplicaCount"], third["maxReplicaCount"], third["cooldownPeriod"]) == (0, 1, 600)
    (coder,) = by_name["coder"]["spec"]["triggers"]
    assert 'requested_model="coder"' in coder["metadata"]["query"] and "[900s]" in coder["metadata"]["query"]
    config = yaml.safe_load(example["k8s/gateway/config.yaml"].split("\n", 2)[2])
    bases = {
        e["model_info"].get("gateway_replica", e["model_name"]): e["litellm_params"]["api_base"]
        for e in config["model_list"]
    }
    assert bases["qwen3-8b-2"] == "http://qwen3-8b-2:8002/v1"  # no controller on Kubernetes: each copy's Service


def test_render_files_for_k8s_alone(tmp_path):
    src = tmp_path / "models.yml"
    src.write_text(EXAMPLE.read_text())
    assert "k8s/models/qwen3-8b-3.yaml" in render_files(load_plan(src), ("k8s",))


def test_compose_needs_the_docker_socket_for_the_copies_and_says_so_on_the_range(write, capsys):
    from generator.cli import main

    path = write(model("{min: 1, max: 2}", gpus="[0, 1]"))
    out = path.parent / "out"
    assert main(["--models", str(path), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "m1.replicas: copies that follow the load in compose need the on-demand controller" in err, err
    assert "m1-2.on_demand" not in err and not (out / "compose").exists()


def test_make_k8s_says_what_the_cluster_needs(tmp_path):
    from generator.compile.renderers.k8s import k8s_warnings

    src = tmp_path / "models.yml"
    src.write_text(EXAMPLE.read_text())
    (line,) = [w for w in k8s_warnings(load_plan(src)) if "KEDA" in w]
    assert line.startswith("qwen3-8b, coder: copies follow the load through KEDA ScaledObjects (docs/replicas.md)")
    assert "http://prometheus-operated.monitoring.svc:9090" in line and "KEDA v2.20.2" in line

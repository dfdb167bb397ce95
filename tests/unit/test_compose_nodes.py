"""A model on `nodes:` on plain hosts (renderers/compose_nodes.py, docs/multinode.md): the leader in the gateway's
compose file, one compose file per other host, host networking, the addresses from models.yml; goldens of
examples/multinode (compose, LiteLLM and Kubernetes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from generator.cli import main
from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.renderers import hung_check
from tests.unit.golden import assert_yaml_golden, example_files

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/multinode/models.yml"
SCHEMA = ROOT.parent / "shared/schemas/compose-spec.json"
NODE_FILE = "compose/nodes/deepseek-r1/node-1.yml"
SMALL = "\nsmall-chat:\n  gpus: []\n  command: vllm serve Qwen/Qwen2.5-1.5B-Instruct --max-model-len 8k\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    return example_files(EXAMPLE, tmp_path_factory.mktemp("src"))


def test_golden_files(files):
    assert_yaml_golden("multinode", files)


def test_every_hosts_file_matches_the_compose_specification(files):
    if not SCHEMA.exists():
        pytest.skip(f"Compose JSON schema not found at {SCHEMA} (it lives in ../shared/schemas)")
    import jsonschema

    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    for rel in ("compose/docker-compose.yml", NODE_FILE):
        validator.validate(yaml.safe_load(files[rel]))
    broken = yaml.safe_load(files[NODE_FILE])
    broken["services"]["deepseek-r1-node-1"]["network_mod"] = "host"
    with pytest.raises(jsonschema.ValidationError):  # control: a misspelt key is refused
        validator.validate(broken)


def test_the_leader_runs_beside_the_gateway_and_each_other_host_gets_a_headless_node(files):
    main_file = yaml.safe_load(files["compose/docker-compose.yml"])
    leader = main_file["services"]["deepseek-r1"]
    (worker,) = yaml.safe_load(files[NODE_FILE])["services"].values()
    assert [rel for rel in files if rel.startswith("compose/nodes/")] == [NODE_FILE]  # 2 nodes: one other host
    lc, wc = leader["command"], worker["command"]
    assert lc[: lc.index("--host")] == wc[: wc.index("--nnodes")]  # the same model and flags on every node
    assert lc[lc.index("--host") :] == [
        "--host", "10.0.0.11", "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.11",
        "--master-port", "29501", "--distributed-executor-backend", "mp",
    ]  # fmt: skip
    assert wc[wc.index("--nnodes") :] == [
        "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.11", "--master-port", "29501",
        "--distributed-executor-backend", "mp", "--headless",
    ]  # fmt: skip
    # host networking on both (NCCL / gloo pick their ports), shared memory, each host's 8 GPUs
    for s in (leader, worker):
        assert s["network_mode"] == "host" and "networks" not in s and s["ipc"] == "host"
        assert s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == [str(g) for g in range(8)]
    # the leader: probed on its address, with its key; the worker: no API, no key, no probe
    assert leader["healthcheck"]["test"] == hung_check.test(8001, 300, "10.0.0.11")  # restart_when_hung: 5m
    assert "VLLM_API_KEY" in leader["environment"] and "VLLM_API_KEY" not in worker["environment"]
    assert "healthcheck" not in worker and "ports" not in worker and "ports" not in leader
    # paths relative to compose/ are relative to the node file's folder there
    assert "../parser-repairs:/opt/parser-repairs:ro" in leader["volumes"]
    assert "../../../parser-repairs:/opt/parser-repairs:ro" in worker["volumes"]
    # the gateway reaches the leader at its address
    config = yaml.safe_load(files["litellm/config.yaml"])
    bases = {e["model_name"]: e["litellm_params"]["api_base"] for e in config["model_list"]}
    assert bases == {"deepseek-r1": "http://10.0.0.11:8001/v1"}


def test_three_nodes_three_files_and_prometheus_scrapes_the_leader_other_models_as_ever(write):
    text = EXAMPLE.read_text().replace("hosts: [10.0.0.11, 10.0.0.12]", "hosts: [a.lan, b.lan, c.lan]") + SMALL
    text = text.replace("--pipeline-parallel-size 2", "--pipeline-parallel-size 3")
    files = render_files(load_plan(write(text)))
    assert sorted(rel for rel in files if rel.startswith("compose/nodes/")) == [
        "compose/nodes/deepseek-r1/node-1.yml",
        "compose/nodes/deepseek-r1/node-2.yml",
    ]
    (node2,) = yaml.safe_load(files["compose/nodes/deepseek-r1/node-2.yml"])["services"].values()
    assert node2["command"][node2["command"].index("--node-rank") + 1] == "2"
    prometheus = yaml.safe_load(files["prometheus/prometheus.yml"])
    targets = [t for job in prometheus["scrape_configs"] for c in job.get("static_configs", []) for t in c["targets"]]
    assert "a.lan:8001" in targets and "deepseek-r1:8001" not in targets and "small-chat:8002" in targets
    # a model on one host: its service on the backend network, its service name in the gateway's config
    compose = yaml.safe_load(files["compose/docker-compose.yml"])
    assert compose["services"]["small-chat"]["networks"] == ["backends", "egress"]
    assert "network_mode" not in compose["services"]["small-chat"]
    assert "api_base: http://small-chat:8002/v1" in files["litellm/config.yaml"]


def test_compose_needs_the_addresses_kubernetes_does_not(write, tmp_path, capsys):
    path = write(EXAMPLE.read_text().replace("hosts: [10.0.0.11, 10.0.0.12]", "count: 2"))
    out = tmp_path / "out"
    assert main(["--models", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "deepseek-r1.nodes" in err and "the compose target needs each node's address" in err
    assert "nodes: {hosts: [<leader>, ...]} with 2 addresses" in err and not (out / "compose").exists()
    assert main(["k8s", "--models", str(path), "--out", str(out)]) == 0

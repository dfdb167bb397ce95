"""models.yml `nodes:`: a model across hosts (compile/load/nodes.py, docs/multinode.md): the parallel sizes against
every node's GPUs, the flags the generator writes per node, and what such a model cannot be (yet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.cli import main
from generator.compile.load.loader import load_plan
from generator.compile.plan import NodesPlan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/multinode/models.yml"
# a model on one host beside the one on nodes (the example has none: its hosts' GPUs are all the big model's)
SMALL = "\nsmall-chat:\n  gpus: []\n  command: vllm serve Qwen/Qwen2.5-1.5B-Instruct --max-model-len 8k\n"

TWO_NODES = """\
big:
  nodes: 2
  gpus: [0, 1, 2, 3, 4, 5, 6, 7]
  command: vllm serve org/big --max-model-len 32K -tp 8 -pp 2{extra}
"""


def test_the_example_plans_one_backend_with_its_two_nodes():
    plan = load_plan(EXAMPLE)
    big = next(m for m in plan.models if m.name == "deepseek-r1")
    assert big.nodes == NodesPlan(count=2, hosts=("10.0.0.11", "10.0.0.12"), port=29501)
    assert big.gpus == tuple(range(8))  # each node's
    assert [m.name for m in plan.models] == ["deepseek-r1"]  # one model, not one per node
    # the command keeps what every node runs; the per-node flags come from the renderers
    assert "--nnodes" not in big.flag_args and "--headless" not in big.flag_args


def test_each_nodes_flags_leader_serves_workers_headless():
    n = NodesPlan(count=3, hosts=(), port=29600)
    assert n.args(0, "lead") == (
        "--nnodes", "3", "--node-rank", "0", "--master-addr", "lead", "--master-port", "29600",
        "--distributed-executor-backend", "mp",
    )  # fmt: skip
    assert n.args(2, "lead")[-1] == "--headless" and n.args(2, "lead")[3] == "2"
    assert n.args("$(LWS_WORKER_INDEX)", "$(LWS_LEADER_ADDRESS)")[-1] == "--headless"
    assert "--distributed-executor-backend" not in NodesPlan(count=2, backend_flag=False).args(1, "a")


def test_parallel_sizes_must_cover_every_nodes_gpus_naming_model_and_fix(problems, write, capsys):
    (msg,) = problems(TWO_NODES.format(extra="").replace("-pp 2", "-pp 1"))
    assert "big.command" in msg
    assert "tensor x pipeline parallel size is 8 x 1 = 8, but nodes: 2 x gpus: 8 per node = 16 GPUs" in msg
    assert "use --tensor-parallel-size 8 --pipeline-parallel-size 2" in msg
    # make regenerate: exit 2, the same line, nothing written
    out = write(TWO_NODES.format(extra="").replace("-pp 2", "-pp 4")).parent / "out"
    assert main(["--models", str(out.parent / "models.yml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "8 x 4 = 32, but nodes: 2 x gpus: 8 per node = 16 GPUs" in err and not out.exists()


def test_right_sizes_pass_and_tensor_parallel_across_nodes_is_a_warning(plan):
    assert plan(TWO_NODES.format(extra="")).models[0].nodes.count == 2
    p = plan(TWO_NODES.format(extra="").replace("-tp 8 -pp 2", "-tp 16"))
    assert any("--tensor-parallel-size 16 spans nodes (8 GPUs each)" in w for w in p.warnings)


def test_cpu_nodes_need_ranks_that_split_over_the_nodes(problems, plan):
    cpu = "m:\n  nodes: 2\n  gpus: []\n  command: vllm serve org/m --max-model-len 4K{flags}\n"
    (msg,) = problems(cpu.format(flags=""))
    assert "1 x 1 = 1 does not split over nodes: 2" in msg and "--pipeline-parallel-size 2" in msg
    assert plan(cpu.format(flags=" -pp 2")).models[0].nodes.count == 2


@pytest.mark.parametrize(
    "extra, expected",
    [
        (" --nnodes 2", "--nnodes in the command: remove --nnodes: `nodes:` makes the generator write it"),
        (" --node-rank 1", "--node-rank in the command: remove --node-rank"),
        (" --master-addr 10.0.0.1", "--master-addr in the command"),
        (" --headless", "--headless in the command"),
        (" --distributed-executor-backend ray", "--distributed-executor-backend ray with nodes: 2"),
        (" -dp 2", "--data-parallel-size 2 with nodes: 2: data parallel across nodes"),
        (" --nnode 2", "unknown vLLM 0.32.0 flag --nnode; did you mean --nnodes?"),  # a typo, before anything starts
    ],
)
def test_per_node_flags_and_other_executors_are_refused(problems, extra, expected):
    found = problems(TWO_NODES.format(extra=extra))
    assert any(expected in p for p in found), found


def test_a_single_host_model_says_nodes_instead_of_nnodes(problems, plan):
    (msg,) = problems("m:\n  gpus: [0]\n  command: vllm serve org/m --max-model-len 4K --nnodes 2\n")
    assert "say `nodes: N` instead" in msg
    assert (
        plan("m:\n  gpus: [0]\n  nodes: 1\n  command: vllm serve org/m --max-model-len 4K --nnodes 1\n").models[0].nodes
        is None
    )


@pytest.mark.parametrize(
    "field, expected",
    [
        ("  replicas: 2\n", "replicas: 2 of a model on nodes: 2 is not generated yet"),
        ("  on_demand: true\n", "a model on nodes: 2 is always on"),
        ("  nodes: {count: 3, hosts: [a, b]}\n", "count: 3 but 2 host(s)"),
        ("  nodes: {hosts: [a, a]}\n", "lists an address twice"),
        ("  nodes: {port: 29500}\n", "give the number of nodes"),
        ("  nodes: {count: 2, hostz: [a, b]}\n", "hostz"),
    ],
)
def test_what_a_model_on_nodes_cannot_be(problems, field, expected):
    text = TWO_NODES.format(extra="").replace("  nodes: 2\n", "" if field.startswith("  nodes") else "  nodes: 2\n")
    found = problems(text + field)
    assert any(expected in p for p in found), found


def test_the_fit_check_is_per_gpu_of_every_node(tmp_path, write):
    """Llama-3.1-70B (131 GiB of weights) on one 80 GiB GPU per node: one node cannot hold it, two can (pipeline
    parallel 2: half the layers each)."""
    import shutil

    d = Path(shutil.copytree(ROOT / "tests/unit/fixtures/fit/llama-3.1-70b", tmp_path / "llama"))
    from tests.unit.test_fit import header_only_shards

    header_only_shards(d)
    text = f"gpu_memory: 80GiB\nm:\n  nodes: 2\n  gpus: [0]\n  command: vllm serve {d} --max-model-len 8K -pp 2\n"
    (m,) = load_plan(write(text)).models
    assert "fits" in m.fit and "weights 65.7 GiB" in m.fit, m.fit


def test_status_and_the_page_show_one_model_with_its_nodes(write):
    """make status: one row for the model (not one per node), each node's GPUs times its nodes; the route and the
    page read the count from the generated config's model_info (the gateway does not see models.yml)."""
    import yaml
    from rich.console import Console

    from generator.compile.renderers.litellm import NODES, render_litellm
    from generator.operate import status
    from tests.unit.test_gateway_hooks import load_like_litellm
    from tests.unit.test_status import _sample

    plan = load_plan(write(EXAMPLE.read_text() + SMALL))
    (entry,) = [e for e in render_litellm(plan)["model_list"] if e["model_name"] == "deepseek-r1"]
    assert entry["model_info"][NODES] == 2
    gb = load_like_litellm("gateway_backends")
    assert gb.nodes(entry) == 2 and gb.nodes({"model_info": {}}) is None
    page = load_like_litellm("gateway_page")
    assert page.model_card("deepseek-r1", entry, [])["nodes"] == 2

    after = _sample(2.0, 10, 4, 7)
    after["models"] = [{**after["models"][0], "name": "deepseek-r1", "model": "deepseek-r1", "nodes": 2}]
    rep = status.report(None, after, status.Target("http://127.0.0.1:4000", "k", plan, "test"))
    rows = {m["name"]: m for m in rep["models"]}
    assert list(rows) == ["deepseek-r1", "small-chat"]
    assert rows["deepseek-r1"]["nodes"] == 2 and rows["deepseek-r1"]["gpus"] == list(range(8))
    assert rows["small-chat"]["nodes"] is None
    console = Console(width=160, record=True)
    console.print(status.render(rep))
    assert "0,1,2,3,4,5,6,7 x 2 nodes" in console.export_text()
    yaml.safe_dump(rep)  # plain data (JSON=1)


def test_the_local_runtime_starts_the_leader_as_the_backend_and_each_other_node_headless(plan, tmp_path):
    """What `make demo`'s runtime runs for a model on nodes (its processes run in
    tests/integration/test_partial_availability.py): node 0 is the model's backend with the leader's flags (probed,
    never forked), node 1 a headless vLLM of its own (no key, no probe); the meeting port is checked like the others."""
    from generator.operate.runtime.local import HEADLESS_ENTRYPOINT, LocalStack

    text = (
        "m:\n  nodes: {count: 2, port: 29600}\n  gpus: []\n  env: {CPU_BACKEND_FORK: '1'}\n"
        "  command: vllm serve org/m --max-model-len 4K -pp 2\n"
    )
    stack = LocalStack(plan(text), tmp_path / "state", vllm_python="/v/python")
    (m,) = stack.plan.models
    leader = stack._backend(m)
    assert leader.fork_socket is None and leader.health_url.endswith("/health")
    assert leader.cmd[-10:] == [
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "29600",
        "--distributed-executor-backend", "mp",
    ]  # fmt: skip
    (node,) = stack._nodes(m)
    assert node.name == "m-node-1" and node.health_url == "" and "VLLM_API_KEY" not in node.env
    assert node.cmd[:3] == ["/v/python", *HEADLESS_ENTRYPOINT] and node.cmd[-1] == "--headless"
    assert node.cmd[node.cmd.index("--node-rank") + 1] == "1"
    assert stack.ports()[29600] == "m (where its nodes meet)"


def test_killing_a_model_on_nodes_ends_its_whole_group(plan, tmp_path, monkeypatch):
    """The local runtime's kill (faults, `make apply`'s restart): the leader and its other nodes, never another
    model's processes; start_backends then starts the group again."""
    import subprocess

    from generator.operate.runtime.local import LocalStack
    from generator.operate.runtime.processes import Proc

    text = (
        "m:\n  nodes: 2\n  gpus: []\n  command: vllm serve org/m --max-model-len 4K -pp 2\n"
        "other:\n  gpus: []\n  command: vllm serve org/o --max-model-len 4K\n"
    )
    stack = LocalStack(plan(text), tmp_path / "state", vllm_python="/v/python")
    monkeypatch.setattr(stack, "_save_state", lambda: None)
    sleepers = {}
    for name in ("m", "m-node-1", "other"):
        popen = subprocess.Popen(["sleep", "60"], start_new_session=True)
        sleepers[name] = Proc(name, ["sleep"], tmp_path / f"{name}.log", "", popen=popen, pid=popen.pid)
    stack.procs = list(sleepers.values())
    try:
        stack.kill("m")
        assert [p.name for p in stack.procs] == ["other"] and sleepers["other"].alive()
        assert not sleepers["m"].alive() and not sleepers["m-node-1"].alive()
    finally:
        for p in sleepers.values():
            p.popen.kill()
            p.popen.wait()

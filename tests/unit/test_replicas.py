"""`replicas: N`: the GPU split, the per-replica rules (memory, ports, start order, names) and their errors,
through load_plan, asserting on the message a person reads."""

from __future__ import annotations

import pytest

TP2 = "vllm serve org/m --max-model-len 8K -tp 2 --gpu-memory-utilization 0.45"


def model(
    command: str = TP2, gpus: str = "[0, 1, 2, 3]", replicas: int | None = 2, name: str = "m1", extra: str = ""
) -> str:
    count = f"  replicas: {replicas}\n" if replicas is not None else ""
    return f"{name}:\n  gpus: {gpus}\n{count}  command: {command}\n{extra}"


def test_the_gpu_list_is_split_in_order_by_tensor_parallel_size(plan):
    p = plan(model())
    assert [(m.name, m.gpus, m.replica, m.replica_of) for m in p.models] == [
        ("m1-1", (0, 1), 1, "m1"),
        ("m1-2", (2, 3), 2, "m1"),
    ]
    assert {m.served_name for m in p.models} == {"m1"} and [m.name for m in p.served] == ["m1-1"]
    assert {m.api_key_env for m in p.models} == {"VLLM_API_KEY_M1"}  # one key per model
    assert p.secret_envs == ("LITELLM_MASTER_KEY", "VLLM_API_KEY_M1", "REDIS_PASSWORD")  # the placement's Redis
    assert p.replicated == ("m1",)


def test_tensor_x_pipeline_parallel_size_is_the_chunk(plan):
    p = plan(
        model(
            "vllm serve org/m --max-model-len 8K -tp 2 -pp 2 --gpu-memory-utilization 0.4",
            gpus="[0, 1, 2, 3, 4, 5, 6, 7]",
        )
    )
    assert [m.gpus for m in p.models] == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_one_list_per_replica(plan):
    p = plan(model(gpus="[[3, 2], [0, 1]]"))
    assert [m.gpus for m in p.models] == [(3, 2), (0, 1)]


def test_a_list_that_does_not_divide_names_the_model_and_the_fix(problems):
    (msg,) = problems(model(gpus="[0, 1, 2]"))
    assert "m1.gpus" in msg
    assert "3 GPU(s) [0, 1, 2] do not split into 2 replicas of 2 GPU(s) each" in msg
    assert "give 4 GPUs" in msg and "[[0, 1], [2, 3]]" in msg


def test_per_replica_lists_must_match_the_count_and_the_parallel_size(problems):
    (msg,) = problems(model(gpus="[[0, 1], [2, 3], [4, 5]]"))
    assert "m1.gpus" in msg and "3 list(s) of GPUs for replicas: 2" in msg
    (msg,) = problems(model(gpus="[[0, 1], [2]]"))
    assert "replica 2:" in msg and "size is 2" in msg
    (msg,) = problems(model(gpus="[[0, 1], [2, 3]]", replicas=None))
    assert "set replicas: 2" in msg


def test_a_gpu_twice_in_the_flat_list_is_refused(problems):
    (msg,) = problems(model(gpus="[0, 1, 1, 2]"))
    assert "lists a GPU twice" in msg


def test_cpu_replicas_start_n_processes_on_their_own_ports(plan):
    p = plan(
        model("vllm serve org/m --max-model-len 8K", gpus="[]", replicas=3)
        + model("vllm serve org/n --max-model-len 8K", gpus="[]", replicas=None, name="other")
    )
    assert [(m.name, m.gpus, m.port) for m in p.models] == [
        ("m1-1", (), 8001),
        ("m1-2", (), 8002),
        ("m1-3", (), 8003),
        ("other", (), 8004),
    ]
    assert [a for m in p.models[:3] for a in m.flag_args if a.isdigit()] == ["8001", "8002", "8003"]


def test_an_explicit_port_counts_up_per_replica_and_never_collides(plan, problems):
    p = plan(
        model(gpus="[]", command="vllm serve org/m --max-model-len 8K", extra="  port: 9000\n")
        + model("vllm serve org/n --max-model-len 8K", gpus="[]", replicas=None, name="b")
    )
    assert [m.port for m in p.models] == [9000, 9001, 8001]
    msgs = "\n".join(
        problems(
            model(gpus="[]", command="vllm serve org/m --max-model-len 8K", extra="  port: 9000\n")
            + model("vllm serve org/n --max-model-len 8K", gpus="[]", replicas=None, name="b", extra="  port: 9001\n")
        )
    )
    assert "port 9001 is already used by m1-2" in msgs


def test_a_port_flag_with_replicas_is_refused(problems):
    msgs = problems(model("vllm serve org/m --max-model-len 8K --port 9000", gpus="[]"))
    assert any("m1.command" in m and "--port 9000 would give all 2 replicas one port" in m for m in msgs)


def test_on_demand_with_replicas_is_refused_clearly(problems):
    (msg,) = problems(model("vllm serve org/m --max-model-len 8K", gpus="[]", extra="  on_demand: true\n"))
    assert "m1.replicas" in msg and "on-demand models run one copy" in msg and "set replicas: 1" in msg


def test_the_memory_rule_holds_per_replica(problems):
    """Two replicas given the same GPU add up there like two models would."""
    (msg,) = problems(model("vllm serve org/m --max-model-len 8K --gpu-memory-utilization 0.6", gpus="[[0], [0]]"))
    assert "GPU 0 is over-committed" in msg and "m1-1 0.60 + m1-2 0.60" in msg and "m1.gpus" in msg


def test_replicas_sharing_a_gpu_start_in_turn_and_start_after_a_replicated_model_waits_for_all(plan):
    p = plan(
        model("vllm serve org/m --max-model-len 8K --gpu-memory-utilization 0.3", gpus="[[0], [0]]")
        + model(
            "vllm serve org/n --max-model-len 8K --gpu-memory-utilization 0.3",
            gpus="[1]",
            replicas=None,
            name="later",
            extra="  start_after: [m1]\n",
        )
    )
    after = {m.name: m.start_after for m in p.models}
    assert after == {"m1-1": (), "m1-2": ("m1-1",), "later": ("m1-1", "m1-2")}


def test_a_replica_name_that_is_another_model_is_refused(problems):
    msgs = "\n".join(
        problems(
            model(gpus="[]", command="vllm serve org/m --max-model-len 8K")
            + model("vllm serve org/n --max-model-len 8K", gpus="[]", replicas=None, name="m1-2")
        )
    )
    assert "m1.replicas" in msgs and "its replica m1-2 has the name of another model" in msgs


@pytest.mark.parametrize("value", [0, 65, "two", True])
def test_replicas_is_a_count_from_1_to_64(problems, value):
    (msg,) = problems(model(gpus="[]", command="vllm serve org/m --max-model-len 8K", replicas=value))
    assert "m1.replicas" in msg


def test_one_replica_is_the_model_itself(plan):
    (m,) = plan(model(gpus="[0]", command="vllm serve org/m --max-model-len 8K", replicas=1)).models
    assert (m.name, m.replica, m.replica_of, m.replicas) == ("m1", 0, "", 1)


def cpu(name: str, extra: str = "", replicas: int | None = None) -> str:
    return model("vllm serve org/m --max-model-len 8K", gpus="[]", replicas=replicas, name=name, extra=extra)


def test_a_start_after_error_points_at_its_own_entry_after_a_replicated_model(problems):
    """start_after: [a, nope] with a replicated `a`: the error is entry 1 (not 2: a's replicas are one entry)."""
    (msg,) = problems(cpu("a", replicas=2) + cpu("b", "  start_after: [a, nope]\n"))
    assert "b.start_after.1: unknown model 'nope'; models: a, b" in msg
    (msg,) = problems(cpu("a", replicas=3) + cpu("b", "  start_after: [a, b]\n"))
    assert "b.start_after.1: b cannot wait for itself" in msg


def test_a_replicated_model_waiting_for_itself_is_one_clear_error(problems):
    (msg,) = problems(cpu("a", "  start_after: [a]\n", replicas=2))
    assert "a.start_after.0: a cannot wait for itself" in msg


def test_a_cycle_through_a_replicated_model_names_models(problems):
    (msg,) = problems(cpu("a", "  start_after: [b]\n", replicas=2) + cpu("b", "  start_after: [a]\n"))
    assert "start order has a cycle" in msg and ("a -> b -> a" in msg or "b -> a -> b" in msg) and "a-1" not in msg


def test_a_replica_name_in_start_after_names_its_model(problems):
    (msg,) = problems(cpu("a", replicas=2) + cpu("b", "  start_after: [a-2]\n"))
    assert "b.start_after.0: unknown model 'a-2'; a-2 is a replica of a; write 'a'" in msg


def test_the_summary_title_counts_models_and_says_how_many_backends(plan):
    from generator.compile.summary import title

    assert title(plan(cpu("a", replicas=3) + cpu("b") + cpu("c"))) == "3 model(s) (5 backends)"
    assert title(plan(cpu("a") + cpu("b"))) == "2 model(s)"

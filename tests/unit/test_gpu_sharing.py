"""Models that share a GPU: start order (start_after, compose depends_on) and the per-GPU memory rule.

The memory cases are the ones measured on an H100 80GB with vLLM (issue 11): 0.45 + 0.45 and 0.6 + 0.38
both came up; 0.5 + 0.5 was refused by vLLM ("Free memory on device ... (38.59/79.18 GiB) on startup is
less than desired GPU memory utilization (0.5, 39.59 GiB)").
"""

import pytest

from generator.compile.renderers.compose import render_compose


def model(name: str, gpus: str = "[0]", util: float | None = None, extra: str = "") -> str:
    flag = f" --gpu-memory-utilization {util}" if util is not None else ""
    return f"{name}:\n  gpus: {gpus}\n  command: vllm serve org/{name} --max-model-len 8K{flag}\n{extra}"


def one(command: str, extra: str = "", name: str = "m1", gpus: str = "[0]") -> str:
    return f"{name}:\n  gpus: {gpus}\n  command: {command}\n{extra}"


H100 = "gpu_memory: 80GiB\n"


@pytest.mark.parametrize("a, b", [(0.45, 0.45), (0.6, 0.38)])
def test_pairs_that_vllm_started_on_an_h100_are_accepted(plan, a, b):
    p = plan(H100 + model("big", util=a) + model("small", util=b))
    assert [m.name for m in p.models] == ["big", "small"]


def test_half_and_half_is_refused_as_vllm_did_naming_gpu_fractions_headroom_and_fix(problems):
    (msg,) = problems(H100 + model("qwen3-8b", util=0.5) + model("small-chat", util=0.5))
    assert "small-chat.gpus" in msg and "GPU 0" in msg
    assert "qwen3-8b 0.50 + small-chat 0.50 = 1.00" in msg and "80 GiB" in msg
    assert "512 MiB per instance x 2" in msg and "81 GiB > 80 GiB" in msg
    assert "lower small-chat to 0.48" in msg  # (80 - 2 x 0.5 - 40) / 80 = 0.4875


def test_the_suggested_fraction_is_accepted(plan):
    plan(H100 + model("qwen3-8b", util=0.5) + model("small-chat", util=0.48))


def test_a_single_model_also_needs_room_for_its_context(problems):
    (msg,) = problems(H100 + model("solo", util=0.999))
    assert "GPU 0 is over-committed" in msg and "lower solo to 0.99" in msg


def test_without_gpu_memory_a_conservative_size_is_assumed_and_said(problems, plan):
    (msg,) = problems(model("a", util=0.5) + model("b", util=0.45))
    assert "16 GiB, assumed: gpu_memory is not set" in msg and "gpu_memory: 80GiB" in msg
    p = plan(model("a", util=0.45) + model("b", util=0.45))
    assert any("assumed 16 GiB per GPU" in n for n in p.notes)


def test_per_gpu_sizes_apply_to_their_gpu_and_a_missing_gpu_is_named(problems, plan):
    sized = "gpu_memory: {0: 80GiB, 1: 4GiB}\n"
    plan(sized + model("a", util=0.6) + model("b", util=0.38))
    (msg,) = problems(sized + model("a", "[1]", 0.45) + model("b", "[1]", 0.45))
    assert "GPU 1" in msg and "4 GiB" in msg
    (msg,) = problems(sized + model("a", "[2]", 0.5))
    assert "a.gpus" in msg and "GPU 2 is not in gpu_memory" in msg and "`2: 80GiB`" in msg


@pytest.mark.parametrize("value, hint", [("80GB", "80GiB"), ("lots", "like 80GiB"), ("{x: 80GiB}", "GPU index")])
def test_gpu_memory_values_are_checked(problems, value, hint):
    (msg,) = problems(f"gpu_memory: {value}\n" + model("a", util=0.5))
    assert "gpu_memory" in msg and hint in msg


def test_models_sharing_a_gpu_start_in_file_order_others_at_once(plan):
    p = plan(
        H100
        + model("glm", "[0]", 0.9)
        + model("qwen", "[1]", 0.55)
        + model("small", "[1]", 0.35)
        + model("wide", "[0, 1]", 0.04, "  start_after: []\n").replace("--max-model-len 8K", "--max-model-len 8K -tp 2")
    )
    after = {m.name: m.start_after for m in p.models}
    assert after == {"glm": (), "qwen": (), "small": ("qwen",), "wide": ("glm", "small")}


def test_compose_chains_shared_gpus_with_service_healthy_and_the_gateway_waits_for_nobody(plan):
    p = plan(H100 + model("glm", "[0]", 0.9) + model("qwen", "[1]", 0.55) + model("small", "[1]", 0.35))
    services = render_compose(p)["services"]
    assert services["small"]["depends_on"] == {"qwen": {"condition": "service_healthy", "required": False}}
    assert "depends_on" not in services["glm"] and "depends_on" not in services["qwen"]
    assert services["litellm"]["depends_on"] == {"redis": {"condition": "service_healthy"}}  # stored responses only


def test_explicit_start_after_orders_cpu_models(plan):
    p = plan(model("a", "[]") + model("b", "[]", extra="  start_after: [a]\n"))
    assert [m.start_after for m in p.models] == [(), ("a",)]


def test_start_after_names_are_checked(problems):
    msgs = "\n".join(problems(model("reasoner", "[]") + model("b", "[]", extra="  start_after: [reasonr, b]\n")))
    assert "b.start_after.0" in msgs and "unknown model 'reasonr'; did you mean 'reasoner'?" in msgs
    assert "b.start_after.1" in msgs and "cannot wait for itself" in msgs


def test_a_start_order_cycle_is_refused(problems):
    (msg,) = problems(model("a", "[]", extra="  start_after: [b]\n") + model("b", "[]", extra="  start_after: [a]\n"))
    assert "cycle" in msg and ("a -> b -> a" in msg or "b -> a -> b" in msg)


def test_a_cycle_through_a_shared_gpu_is_refused(problems):
    # b waits for a (GPU 0, file order); a waiting for b closes the loop
    (msg,) = problems(H100 + model("a", util=0.4, extra="  start_after: [b]\n") + model("b", util=0.4))
    assert "cycle" in msg


def test_gpu_memory_over_one_is_refused_naming_gpu_and_models(problems):
    text = one("vllm serve org/a --max-model-len 8K --gpu-memory-utilization 0.6", name="a") + one(
        "vllm serve org/b --max-model-len 8K --gpu-memory-utilization 0.5", name="b"
    )
    (msg,) = problems(text)
    assert "GPU 0 is over-committed" in msg and "1.10" in msg and "a 0.60" in msg and "b 0.50" in msg


def test_vllms_default_memory_fraction_counts_when_the_flag_is_absent(problems):
    text = one("vllm serve org/a --max-model-len 8K --gpu-memory-utilization 0.2", name="a") + one(
        "vllm serve org/b --max-model-len 8K", name="b"
    )
    (msg,) = problems(text)
    assert "b 0.92" in msg and "defaults to 0.92" in msg


def test_models_on_different_gpus_do_not_add_up(plan):
    text = one("vllm serve org/a --max-model-len 8K", name="a") + one(
        "vllm serve org/b --max-model-len 8K", name="b", gpus="[1]"
    )
    assert [m.port for m in plan(text).models] == [8001, 8002]

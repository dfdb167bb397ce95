"""Which replica serves a request (generator/shipped/gateway_hooks/replica_routing.py) and the failover the
generated router settings give, on LiteLLM's own Router in-process with a live stand-in backend and a dead port."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
from collections import Counter
from pathlib import Path

import litellm
import pytest
import yaml
from aiohttp.test_utils import TestServer

from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.operate.runtime.ports import free_port
from tests.unit.golden import assert_yaml_golden
from tests.unit.golden import example_files as rendered_example
from tests.unit.standin_backend import make_app

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "generator/shipped/gateway_hooks"
EXAMPLE = ROOT / "examples/replicas/models.yml"
CPU_EXAMPLE = ROOT / "examples/cpu-replicas/models.yml"


def hook_module(name: str):
    """A gateway hook module as LiteLLM loads it: by path, from beside config.yaml (a fresh copy at each call)."""
    spec = importlib.util.spec_from_file_location(name, HOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _routing():
    return hook_module("replica_routing")


rr = _routing()


def deps(*names: str) -> list[dict]:
    return [{"model_name": "m", "model_info": {"id": f"id-{n}", rr.REPLICA: n}} for n in names]


def picked(found: list[dict]) -> list[str]:
    return [rr.replica_of(d) for d in found]


# --- the choice --------------------------------------------------------------------------------


def test_a_session_header_keeps_a_conversation_on_one_replica_and_spreads_sessions():
    three = deps("m-1", "m-2", "m-3")
    seen = Counter()
    for i in range(300):
        request = {"metadata": {"session_id": f"session-{i}"}}
        first = picked(rr.choose(three, request))
        assert len(first) == 1 and all(picked(rr.choose(three, request)) == first for _ in range(3))
        seen[first[0]] += 1
    assert set(seen) == {"m-1", "m-2", "m-3"} and min(seen.values()) > 60  # about 100 each


def test_the_choice_depends_on_the_replicas_not_on_their_order_or_on_the_process():
    """A pure function of key and live replicas: every worker and every gateway replica picks the same."""
    request = {"metadata": {"session_id": "abc"}}
    assert picked(rr.choose(deps("m-1", "m-2"), request)) == picked(rr.choose(deps("m-2", "m-1"), request))
    assert picked(rr.choose(deps("m-1", "m-2"), request)) == picked(_routing().choose(deps("m-1", "m-2"), request))


def test_a_dead_replica_moves_only_its_own_conversations():
    three, two = deps("m-1", "m-2", "m-3"), deps("m-1", "m-3")
    for i in range(100):
        request = {"metadata": {"session_id": f"s{i}"}}
        (before,) = picked(rr.choose(three, request))
        (after,) = picked(rr.choose(two, request))
        assert after == before or before == "m-2"


def test_a_retry_leaves_out_the_replica_the_request_failed_on():
    request = {"metadata": {"session_id": "abc"}}
    (first,) = rr.choose(deps("m-1", "m-2"), request)
    request["metadata"]["previous_models"] = [{"deployment_id": first["model_info"]["id"], "exception_type": "X"}]
    (second,) = rr.choose(deps("m-1", "m-2"), request)
    assert second is not first
    # every replica failed once: all may be tried again (the router's cooldown decides)
    request["metadata"]["previous_models"].append({"deployment_id": second["model_info"]["id"]})
    assert len(rr.choose(deps("m-1", "m-2"), request)) == 1


def test_the_key_is_the_session_then_prompt_cache_key_then_the_leading_messages():
    generated = {"metadata": {"session_id": "x", rr.GENERATED: True}, "prompt_cache_key": "pck"}
    assert rr.conversation_key(generated) == "cache-key:pck"  # a session id LiteLLM made up is no session
    assert rr.conversation_key({"litellm_metadata": {"session_id": "s"}, "prompt_cache_key": "p"}) == "session:s"
    turn1 = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
    turn3 = turn1 + [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}]
    other = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "bye"}]
    assert rr.conversation_key({}, turn1) == rr.conversation_key({}, turn3) != rr.conversation_key({}, other)
    # Anthropic (`system` apart), Responses (`instructions` + `input`), completions (`prompt`)
    assert rr.conversation_key({"system": "s", "messages": turn1[1:]}) != rr.conversation_key({"messages": turn1[1:]})
    assert rr.conversation_key({"instructions": "i", "input": "hello"}).startswith("leading:")
    assert rr.conversation_key({"prompt": "x" * 20000}) == rr.conversation_key({"prompt": "x" * 10000 + "y"})
    assert rr.conversation_key({}) is None


def test_lone_models_and_single_live_replicas_are_left_to_the_router():
    lone = [{"model_name": "a", "model_info": {"id": "1"}}, {"model_name": "a", "model_info": {"id": "2"}}]
    assert rr.choose(lone, {"metadata": {"session_id": "s"}}) == lone
    assert picked(rr.choose(deps("m-1"), {"metadata": {"session_id": "s"}})) == ["m-1"]


# --- what the renderer writes --------------------------------------------------------------------


@pytest.fixture(scope="module")
def example_files(tmp_path_factory) -> dict[str, str]:
    return rendered_example(EXAMPLE, tmp_path_factory.mktemp("src"))


def test_golden_files_of_the_replicas_example(example_files):
    assert_yaml_golden("replicas", example_files)


def test_one_deployment_per_replica_under_one_name_with_failover_settings(example_files):
    config = yaml.safe_load(example_files["litellm/config.yaml"])
    entries = [e for e in config["model_list"] if e["model_name"] == "qwen3-8b"]
    assert [e["litellm_params"]["api_base"] for e in entries] == [
        "http://qwen3-8b-1:8001/v1",
        "http://qwen3-8b-2:8002/v1",
    ]
    assert [e["model_info"]["gateway_replica"] for e in entries] == ["qwen3-8b-1", "qwen3-8b-2"]
    assert all(e["model_info"]["allowed_fails_policy"]["InternalServerErrorAllowedFails"] == 0 for e in entries)
    (lone,) = [e for e in config["model_list"] if e["model_name"] == "small-chat"]
    assert "gateway_replica" not in lone["model_info"] and lone["model_info"]["allowed_fails"] >= 1
    router = config["router_settings"]
    assert router["disable_cooldowns"] is False and set(router["model_group_retry_policy"]) == {"qwen3-8b"}
    assert router["model_group_retry_policy"]["qwen3-8b"]["TimeoutErrorRetries"] == 0
    assert "replica_routing.routing_instance" in config["litellm_settings"]["callbacks"]
    services = yaml.safe_load(example_files["compose/docker-compose.yml"])["services"]
    assert {"qwen3-8b-1", "qwen3-8b-2", "small-chat"} <= services.keys() and "qwen3-8b" not in services
    gpus = [
        services[f"qwen3-8b-{i}"]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] for i in (1, 2)
    ]
    assert gpus == [["0", "1"], ["2", "3"]]


def test_clients_list_a_replicated_model_once(tmp_path):
    src = tmp_path / "models.yml"
    shutil.copy(CPU_EXAMPLE, src)
    files = render_files(load_plan(src), ("clients",))
    opencode = yaml.safe_load(files["clients/opencode.json"]) if "clients/opencode.json" in files else {}
    text = "\n".join(files.values())
    assert "plain-1" not in text and "plain-2" not in text
    if opencode:
        assert list(next(iter(opencode["provider"].values()))["models"]) == ["plain"]


# --- failover on LiteLLM's own Router: one live replica, one dead port ---------------------------


def _router(config: dict, bases: dict[str, str]) -> litellm.Router:
    model_list = []
    for entry in config["model_list"]:
        entry = {**entry, "litellm_params": {**entry["litellm_params"]}}
        entry["litellm_params"]["api_base"] = bases[entry["model_info"].get("gateway_replica") or entry["model_name"]]
        entry["litellm_params"]["api_key"] = "k"
        model_list.append(entry)
    settings = {k: v for k, v in config["router_settings"].items()}
    return litellm.Router(model_list=model_list, **settings)


@pytest.fixture
def two_replicas(tmp_path):
    """examples/cpu-replicas' config plus a lone model, on LiteLLM's Router: plain-1 live, plain-2 and lone dead."""
    text = CPU_EXAMPLE.read_text() + (
        "lone:\n  gpus: []\n  command: vllm serve .cache/demo-models/reasoner --max-model-len 8K\n"
    )
    src = tmp_path / "models.yml"
    src.write_text(text)
    return yaml.safe_load(render_files(load_plan(src))["litellm/config.yaml"])


async def _run(config: dict, requests: int):
    server = TestServer(make_app("plain"), host="127.0.0.1")
    await server.start_server()
    dead = f"http://127.0.0.1:{free_port()}/v1"
    router = _router(config, {"plain-1": f"http://127.0.0.1:{server.port}/v1", "plain-2": dead, "lone": dead})
    saved = litellm.callbacks
    litellm.callbacks = [rr.routing_instance]
    try:

        async def one(i: int):
            messages = [{"role": "user", "content": f"conversation {i}"}]
            if i % 2:
                stream = await router.acompletion(model="plain", messages=messages, stream=True, max_tokens=2)
                return "".join([c.choices[0].delta.content or "" async for c in stream])
            answer = await router.acompletion(model="plain", messages=messages, max_tokens=2)
            return answer.choices[0].message.content

        answers = await asyncio.gather(*(one(i) for i in range(requests)), return_exceptions=True)
        lone = []
        for _ in range(8):
            try:
                await router.acompletion(model="lone", messages=[{"role": "user", "content": "hi"}])
            except Exception as exc:  # noqa: BLE001
                lone.append(exc)
        return answers, lone
    finally:
        litellm.callbacks = saved
        await server.close()


def test_no_request_fails_when_a_replica_is_dead_and_a_lone_model_is_never_cooled_down(two_replicas, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY_PLAIN", "k")
    answers, lone = asyncio.run(_run(two_replicas, 24))
    to_dead = [
        i
        for i in range(24)
        if picked(rr.choose(deps("plain-1", "plain-2"), {}, [{"role": "user", "content": f"conversation {i}"}]))
        == ["plain-2"]
    ]
    assert len(to_dead) >= 4  # the hash sent these to the dead replica first: they were retried on the live one
    failed = [a for a in answers if isinstance(a, BaseException)]
    assert not failed, failed[:3]
    assert all(isinstance(a, str) and a for a in answers)
    # the lone model's dead backend: its own error every time, never "no deployments available" (a cooldown)
    assert len(lone) == 8 and not any(
        "No deployments available" in str(e) or isinstance(e, litellm.RateLimitError) for e in lone
    ), [str(e)[:200] for e in lone]


def test_embeddings_and_rerank_requests_spread_over_the_replicas():
    """A replicated pooling model (issue 29 part 4): a batch of embeddings or a rerank body has no conversation, so
    every live replica stays eligible and the router's shuffle spreads them; one text (`input` a string, read like a
    Responses API input) picks a replica by its hash, so different texts spread too; a failed replica is skipped."""
    two = deps("emb-1", "emb-2")
    for body in ({"input": ["a text", "another"]}, {"query": "q", "documents": ["d1", "d2"], "top_n": 1}):
        assert picked(rr.choose(two, body)) == ["emb-1", "emb-2"]
        failed = {**body, "metadata": {"previous_models": [{"deployment_id": "id-emb-1"}]}}
        assert picked(rr.choose(two, failed)) == ["emb-2"]
    seen = Counter(picked(rr.choose(two, {"input": f"text {i}"}))[0] for i in range(100))
    assert set(seen) == {"emb-1", "emb-2"}

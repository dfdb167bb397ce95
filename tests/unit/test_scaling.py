"""The on-demand controller's scaling of `replicas: {min, max}` copies (shipped/on_demand/scaling.py and the policy's
by-load copies), with a fake clock and no I/O."""

from __future__ import annotations

import json

from generator.shipped.on_demand.config import parse_config
from generator.shipped.on_demand.metrics import metrics_text
from generator.shipped.on_demand.policy import Load, ModelSpec, Policy, Refuse, State, Unload
from generator.shipped.on_demand.scaling import CopySpec, Scaler, ScaleSpec, waiting_in

SPEC = ScaleSpec(
    "m",
    min=1,
    max=3,
    waiting=2,
    up_after=10,
    idle=60,
    copies=(CopySpec("m-1", "http://a", False), CopySpec("m-2", "http://b", True), CopySpec("m-3", "http://c", True)),
)
STOPPED = {"m-2": "stopped", "m-3": "stopped"}


def test_a_copy_starts_only_after_the_queue_stayed_above_the_threshold_for_up_after():
    s = Scaler({"m": SPEC})
    assert s.step(SPEC, STOPPED, waiting=5, queued=0, now=0) is None  # above: the clock starts
    assert s.step(SPEC, STOPPED, waiting=5, queued=0, now=9) is None
    copy, reason = s.step(SPEC, STOPPED, waiting=5, queued=0, now=10) or ("", "")
    assert copy == "m-2" and reason == "5 request(s) waiting on 1 copy(ies): 5.0 per copy > 2 for 10s"


def test_a_dip_below_the_threshold_restarts_the_wait():
    s = Scaler({"m": SPEC})
    s.step(SPEC, STOPPED, waiting=5, queued=0, now=0)
    assert s.step(SPEC, STOPPED, waiting=2, queued=0, now=5) is None  # 2 per copy is not above 2
    assert s.step(SPEC, STOPPED, waiting=5, queued=0, now=12) is None
    assert s.step(SPEC, STOPPED, waiting=5, queued=0, now=22) is not None


def test_one_step_at_a_time_per_running_copy_and_never_past_max():
    s = Scaler({"m": SPEC})
    loading = {"m-2": "loading", "m-3": "stopped"}
    assert s.step(SPEC, loading, waiting=50, queued=0, now=0) is None and s.step(SPEC, loading, 50, 0, 100) is None
    two = {"m-2": "loaded", "m-3": "stopped"}
    assert s.step(SPEC, two, waiting=4, queued=0, now=200) is None  # 2 per copy on 2 copies
    s.step(SPEC, two, waiting=6, queued=0, now=300)
    assert s.step(SPEC, two, waiting=6, queued=0, now=310) == (
        "m-3",
        "6 request(s) waiting on 2 copy(ies): 3.0 per copy > 2 for 10s",
    )
    full = {"m-2": "loaded", "m-3": "loaded"}
    s.step(SPEC, full, waiting=60, queued=0, now=400)
    assert s.step(SPEC, full, waiting=60, queued=0, now=500) is None


def test_min_0_scales_nothing_while_no_copy_runs():
    spec = ScaleSpec("z", 0, 2, 1, 0, 60, (CopySpec("z-1", "http://a", True), CopySpec("z-2", "http://b", True)))
    s = Scaler({"z": spec})
    assert s.step(spec, {"z-1": "stopped", "z-2": "stopped"}, waiting=0, queued=9, now=0) is None  # z-1 loads on them
    assert s.step(spec, {"z-1": "loaded", "z-2": "stopped"}, waiting=3, queued=0, now=1) == (
        "z-2",
        "3 request(s) waiting on 1 copy(ies): 3.0 per copy > 1 for 0s",
    )


def test_a_by_load_copy_refuses_at_once_and_loads_when_wanted_then_unloads_when_idle():
    p = Policy([ModelSpec("m-2", "m-2", 60, by_load=True)])
    p.request("m-2", 0)
    (refused,) = p.actions()
    assert isinstance(refused, Refuse) and refused.status == 503 and refused.retry_after == 1
    assert p.want("m-2", 1) and not p.want("m-2", 1)  # once
    (load,) = p.actions()
    assert isinstance(load, Load) and p.models["m-2"].state is State.LOADING
    p.loaded("m-2", 30)
    p.request("m-2", 31)
    p.actions()
    p.tick(80)
    assert p.actions() == []  # in flight: not idle
    p.release("m-2", 90)
    p.tick(149)
    assert p.actions() == []
    p.tick(150)
    (unload,) = p.actions()
    assert isinstance(unload, Unload) and unload.reason == "idle 60s" and unload.cut == 0


def test_a_draining_copy_sends_new_requests_elsewhere_and_ends_those_in_flight():
    p = Policy([ModelSpec("m-2", "m-2", 10, by_load=True)])
    p.want("m-2", 0)
    p.loaded("m-2", 1)
    p.request("m-2", 2)
    p.actions()
    p.models["m-2"].last_used = -100  # idle by the clock, but one request still in flight
    p._start_unload(p.models["m-2"], 3, "idle 10s")
    assert p.actions() == [] and p.models["m-2"].state is State.DRAINING  # waits for it
    p.request("m-2", 4)
    (refused,) = p.actions()
    assert isinstance(refused, Refuse) and refused.status == 503
    p.release("m-2", 5)
    (unload,) = p.actions()
    assert isinstance(unload, Unload) and unload.cut == 0


def test_decisions_are_kept_and_counted_for_status_and_metrics():
    s = Scaler({"m": SPEC})
    s.record("m-2", "up", "5 waiting", wall=1000.0)
    s.record("m-2", "down", "idle 60s", wall=2000.0)
    s.record("other", "down", "idle", wall=3000.0)  # not a copy of a ranged model: ignored
    status = s.status({"m-2": "draining", "m-3": "stopped"})
    assert status["m"] == {
        "min": 1,
        "max": 3,
        "by_load": ["m-2", "m-3"],
        "copies": {"m-1": "running", "m-2": "draining", "m-3": "stopped"},
        "last": {"at": 2000.0, "action": "down", "copy": "m-2", "reason": "idle 60s"},
        "events": {"up": 1, "down": 1},
    }
    text = metrics_text({"m-2": State.DRAINING}, s.events).decode()
    assert 'llm_gateway_scaling_events_total{direction="up",model="m"} 1.0' in text


def test_waiting_is_read_from_vllms_metrics():
    text = (
        "# HELP vllm:num_requests_waiting Number of requests waiting.\n"
        '# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_running{engine="0",model_name="m"} 1.0\n'
    )
    assert waiting_in(text) == 3.0 and waiting_in("") == 0.0


def test_the_config_reads_the_scaling_block():
    config = parse_config(
        {
            "port": 1,
            "models": {
                "m-2": {"group": "m-2", "idle_timeout": 60, "unload": "stop", "url": "http://b/v1", "by_load": True}
            },
            "scaling": {
                "m": {
                    "min": 1,
                    "max": 2,
                    "waiting": 2,
                    "up_after": 0,
                    "idle": 60,
                    "copies": [{"name": "m-1", "url": "http://a", "managed": False}],
                }
            },
        }
    )
    assert config.models["m-2"].spec.by_load and config.scaling["m"].copies[0] == CopySpec("m-1", "http://a", False)


def test_status_shows_the_range_copies_and_last_decision_in_one_line():
    import httpx

    from generator.shipped.gateway_hooks import status_report
    from generator.shipped.on_demand.server import SCALING_HEADER

    s = Scaler({"m": SPEC})
    s.record("m-2", "up", "5 request(s) waiting on 1 copy(ies): 5.0 per copy > 2 for 10s", wall=0.0)
    view = {"model": "m", **s.status({"m-2": "loading", "m-3": "stopped"})["m"]}
    line = status_report.scaling_line(view)
    assert line.startswith("copies 1-3 follow the load: m-1 running, m-2 starting, m-3 stopped; last: up m-2 at ")
    assert line.endswith("(5 request(s) waiting on 1 copy(ies): 5.0 per copy > 2 for 10s); 1 up, 0 down")
    # what the gateway's status route reads from the controller's answer to a copy's /health
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "generator/shipped/gateway_hooks"))
    import gateway_status

    health = httpx.Response(503, headers={SCALING_HEADER: json.dumps(view)}, json={"state": "loading"})
    assert gateway_status.scaling_of(health) == view
    assert gateway_status.scaling_of(httpx.Response(200)) is None


# --- the gateway's side: replica_routing.py leaves out the copies the controller says are not serving ---------------


def test_the_routing_leaves_out_a_by_load_copy_until_it_serves():
    import asyncio

    from tests.unit.test_replica_routing import hook_module, picked

    rr, sc = hook_module("replica_routing"), hook_module("scaled_copies")
    controller = "http://on-demand:4002"
    deployments = [
        {
            "model_name": "m",
            "model_info": {"id": "id-m-1", rr.REPLICA: "m-1"},
            "litellm_params": {"api_base": "http://m-1:8001/v1"},
        },
        {
            "model_name": "m",
            "model_info": {"id": "id-m-2", rr.REPLICA: "m-2"},
            "litellm_params": {"api_base": f"{controller}/m/m-2/v1"},
        },
    ]
    answers = {"copies": {"m-1": "running", "m-2": "starting"}}
    asked: list[str] = []
    clock = [0.0]

    async def fetch(url: str):
        asked.append(url)
        return {"scaling": {"m": {**answers, "by_load": ["m-2"]}}}

    serving = sc.Serving(fetch, clock=lambda: clock[0])

    class NoRedis(rr.Placement):
        def _redis(self):
            return None

    def route(i: int) -> list[str]:
        request = {"messages": [{"role": "user", "content": f"conversation {i}"}]}
        return picked(asyncio.run(rr.route(NoRedis(), deployments, request, None, serving)))

    assert {tuple(route(i)) for i in range(20)} == {("m-1",)}  # starting: every conversation to copy 1
    assert asked == [f"{controller}/status"]  # asked once a second at most
    answers["copies"]["m-2"] = "running"
    clock[0] = 1.0
    assert {tuple(route(i)) for i in range(40)} == {("m-1",), ("m-2",)}  # serving: both take conversations
    answers["copies"]["m-2"] = "draining"
    clock[0] = 2.0
    assert {tuple(route(i)) for i in range(20)} == {("m-1",)}

    async def silent(url: str):
        return None  # the controller does not answer: nothing is left out (it refuses, the router retries)

    assert asyncio.run(sc.Serving(silent).left_out(deployments)) == set()
    assert sc.not_serving({"scaling": {"z": {"copies": {"z": "stopped"}, "by_load": []}}}) == set()  # min 0: a
    # request loads it


def test_a_copy_takes_the_gpus_of_an_idle_on_demand_model_of_its_group_and_gives_them_back():
    from generator.shipped.on_demand.policy import YIELD_AFTER, Admit

    p = Policy([ModelSpec("m-2", "gpu1", 60, by_load=True), ModelSpec("other", "gpu1", 600)])
    p.request("other", 0)
    (load,) = p.actions()
    p.loaded("other", 10)
    p.actions()  # its request admitted
    assert not p.want("m-2", 11)  # in use: the copy does not take its GPUs
    p.release("other", 12)
    assert not p.want("m-2", 12 + YIELD_AFTER - 1)  # used a moment ago
    assert p.want("m-2", 12 + YIELD_AFTER)  # idle: it drains and unloads, then the copy loads
    (unload,) = p.actions()
    assert isinstance(unload, Unload) and unload.model == "other" and unload.reason == "group gpu1: m-2 needs it"
    p.unloaded("other", 50)
    (load,) = p.actions()
    assert isinstance(load, Load) and load.model == "m-2"
    p.loaded("m-2", 60)
    p.request("other", 70)  # back: the copy gives the GPUs back (drained first), the request waits for the load
    (unload,) = p.actions()
    assert isinstance(unload, Unload) and unload.model == "m-2"
    p.unloaded("m-2", 71)
    (load,) = p.actions()
    assert isinstance(load, Load) and load.model == "other"
    p.loaded("other", 80)
    assert isinstance(p.actions()[0], Admit)

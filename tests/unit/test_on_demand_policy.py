"""The on-demand controller's decision core (generator/shipped/on_demand/policy.py), on a fake clock: no I/O."""

from __future__ import annotations

import pytest

from generator.shipped.on_demand.policy import Admit, Load, ModelSpec, Policy, Refuse, Settings, State, Unload


def make(*specs: ModelSpec, **settings) -> Policy:
    return Policy(list(specs), Settings(**settings))


def spec(name: str, group: str = "g", idle: float = 0, unload: str = "stop", gpus: tuple[int, ...] = ()) -> ModelSpec:
    return ModelSpec(name, group, idle, unload, gpus)


def kinds(actions) -> list[tuple]:
    out = []
    for a in actions:
        if isinstance(a, Admit):
            out.append(("admit", a.waiter.model))
        elif isinstance(a, Refuse):
            out.append(("refuse", a.waiter.model, a.status))
        elif isinstance(a, Load):
            out.append(("load", a.model) + (("wake",) if a.wake else ()))
        elif isinstance(a, Unload):
            out.append(("unload", a.model, a.how) + ((f"cut {a.cut}",) if a.cut else ()))
    return out


def loaded(p: Policy, name: str, now: float = 0) -> None:
    """Bring `name` to loaded through the public events, then forget the actions and its request."""
    p.request(name, now)
    assert ("load", name) in kinds(p.actions())
    p.loaded(name, now)
    p.actions()
    p.release(name, now)


def test_a_request_for_a_stopped_model_queues_and_loads_it_then_goes_through():
    p = make(spec("a"))
    w = p.request("a", 0)
    assert kinds(p.actions()) == [("load", "a")]
    assert p.models["a"].state is State.LOADING
    p.request("a", 1)  # a second one during the load just waits (one load)
    assert p.actions() == []
    p.loaded("a", 40)
    acts = p.actions()
    assert kinds(acts) == [("admit", "a"), ("admit", "a")] and acts[0].waiter is w  # FIFO
    assert p.models["a"].in_flight == 2 and p.models["a"].load_seconds == 40


def test_a_request_for_a_loaded_model_goes_through_at_once_and_counts_in_flight():
    p = make(spec("a"))
    loaded(p, "a")
    p.request("a", 5)
    assert kinds(p.actions()) == [("admit", "a")]
    assert p.models["a"].in_flight == 1 and p.models["a"].last_used == 5
    p.release("a", 9)
    assert p.models["a"].in_flight == 0 and p.models["a"].last_used == 9  # last use = end of the request


def test_a_full_queue_refuses_with_503_and_retry_after():
    p = make(spec("a"), queue=2)
    p.request("a", 0), p.request("a", 0)
    p.actions()
    p.request("a", 1)
    (refusal,) = p.actions()
    assert isinstance(refusal, Refuse) and refusal.status == 503 and refusal.retry_after >= 1
    assert "model a" in refusal.message and "queue: 2" in refusal.message


def test_retry_after_follows_the_last_load_time():
    p = make(spec("a", idle=10), queue=1)
    loaded(p, "a", 0)
    p.tick(100)  # idle -> unload
    p.actions()
    p.unloaded("a", 101)
    p.request("a", 200)  # loads again; last load took 0 s in loaded(): use a real one
    p.actions()
    p.models["a"].load_seconds = 60
    p.request("a", 210)
    (refusal,) = p.actions()
    assert refusal.retry_after == 50  # 60 s load, 10 s of it gone


def test_loading_a_model_first_drains_the_loaded_member_of_its_group():
    p = make(spec("a"), spec("b"))
    loaded(p, "a")
    p.request("a", 1)
    p.actions()  # one request of a in flight
    p.request("b", 2)
    assert p.actions() == []  # no load of b while a still answers
    assert p.models["a"].state is State.DRAINING
    p.request("a", 3)  # a new request for a draining model waits for a's next load
    assert p.actions() == [] and len(p.models["a"].queue) == 1
    p.release("a", 4)
    assert kinds(p.actions()) == [("unload", "a", "stop")]
    p.tick(5)
    assert p.actions() == []  # nothing starts while the unload runs
    p.unloaded("a", 6)
    assert kinds(p.actions()) == [("load", "b")]  # b asked first: b first
    p.loaded("b", 50)
    assert kinds(p.actions()) == [("admit", "b")]
    assert p.models["a"].state is State.STOPPED and p.models["a"].unload_seconds == 2


def test_a_drain_past_drain_timeout_is_cut():
    p = make(spec("a"), spec("b"), drain_timeout=30)
    loaded(p, "a")
    p.request("a", 0)
    p.request("b", 1)
    p.actions()
    p.tick(20)
    assert p.actions() == []
    p.tick(31)
    assert kinds(p.actions()) == [("unload", "a", "stop", "cut 1")]


def test_never_two_swaps_at_once_in_a_group_nor_on_a_shared_gpu():
    # x and y: different groups on GPU 0 (their swaps serialize); z: its own GPU, loads alongside
    p = make(spec("x", "gx", gpus=(0,)), spec("y", "gy", gpus=(0,)), spec("z", "gz", gpus=(1,)))
    p.request("x", 0), p.request("y", 0), p.request("z", 0)
    assert kinds(p.actions()) == [("load", "x"), ("load", "z")]
    p.loaded("x", 10)
    assert kinds(p.actions()) == [("admit", "x"), ("load", "y")]


def test_two_models_of_one_group_are_never_both_loaded_whatever_the_order_of_events():
    p = make(spec("a"), spec("b"), spec("c"))
    t = 0.0
    seen = []
    events = ["a", "b", "c", "a", "b", "c", "c", "a"]
    pending: list = []
    for name in events:
        t += 1
        p.request(name, t)
        for _ in range(20):  # carry out every action at once, in order
            acts = p.actions()
            if not acts:
                break
            for a in acts:
                t += 1
                if isinstance(a, Load):
                    p.loaded(a.model, t)
                elif isinstance(a, Unload):
                    p.unloaded(a.model, t)
                elif isinstance(a, Admit):
                    pending.append(a.waiter.model)
            seen.append(sorted(n for n, m in p.models.items() if m.holds_room))
            while pending:
                p.release(pending.pop(), t)
    assert all(len(s) <= 1 for s in seen), seen


def test_waiters_past_the_load_timeout_get_503_not_a_hang():
    p = make(spec("a"), load_timeout=100)
    p.request("a", 0)
    p.actions()
    p.tick(99)
    assert p.actions() == []
    p.tick(100)
    (refusal,) = p.actions()
    assert isinstance(refusal, Refuse) and refusal.status == 503 and refusal.retry_after >= 1
    assert "load timeout (100s" in refusal.message


def test_an_idle_model_unloads_after_its_idle_timeout_only_with_nothing_in_flight():
    p = make(spec("a", idle=20))
    loaded(p, "a", 0)
    p.request("a", 10)
    p.actions()
    p.tick(40)
    assert p.actions() == []  # in flight: not idle
    p.release("a", 41)
    p.tick(60)
    assert p.actions() == []
    p.tick(61)
    assert kinds(p.actions()) == [("unload", "a", "stop")]
    assert p.models["a"].unload_reason == "idle 20s"


def test_idle_timeout_0_never_unloads_for_idleness():
    p = make(spec("a", idle=0))
    loaded(p, "a")
    p.tick(1e9)
    assert p.actions() == []


def test_idle_unloads_go_least_recently_used_first_one_at_a_time_per_lane():
    p = make(spec("a", "g1", idle=10, gpus=(0,)), spec("b", "g2", idle=10, gpus=(0,)))
    loaded(p, "b", 0)
    loaded(p, "a", 0)
    p.request("a", 5), p.release("a", 5)
    p.actions()
    p.tick(100)
    assert kinds(p.actions()) == [("unload", "b", "stop")]  # b: last used at 0, a at 5
    p.unloaded("b", 101)
    assert kinds(p.actions()) == [("unload", "a", "stop")]


def test_a_failed_load_refuses_its_waiters_naming_the_cause_and_the_next_request_retries():
    p = make(spec("a"), spec("b", "other"))
    loaded(p, "b")
    p.request("a", 0)
    p.actions()
    p.load_failed("a", "exited with code 2: error: unrecognized arguments: --bogus", 12)
    (refusal,) = p.actions()
    assert refusal.status == 502 and "model a failed to load" in refusal.message and "--bogus" in refusal.message
    assert p.models["a"].state is State.FAILED and p.status(13)["a"]["last_error"].endswith("--bogus")
    p.request("b", 13)
    assert kinds(p.actions()) == [("admit", "b")]  # the other model keeps serving
    p.request("a", 14)
    assert kinds(p.actions()) == [("load", "a")]  # retried


def test_a_crashed_backend_is_loaded_again_by_the_next_request():
    p = make(spec("a"))
    loaded(p, "a")
    p.lost("a", "connection refused", 3)
    assert p.models["a"].state is State.FAILED
    p.request("a", 4)
    assert kinds(p.actions()) == [("load", "a")]


@pytest.mark.parametrize("unload", ["stop", "sleep"])
def test_a_hung_backend_is_killed_at_once_with_its_requests_and_the_waiting_one_loads_it_again(unload):
    p = make(spec("a", unload=unload), drain_timeout=300)
    loaded(p, "a")
    p.request("a", 1)  # in flight on the backend that then hangs
    p.actions()
    p.hung("a", "connected, /health silent for 6s", 8)
    assert kinds(p.actions()) == [("unload", "a", "kill", "cut 1")]  # not a 300 s drain: it would never end
    assert p.models["a"].state is State.DRAINING and "hung" in p.status(8)["a"]["last_error"]
    p.hung("a", "again", 9)  # the next probe round while it is killed: nothing more
    p.request("a", 9)  # waits: the kill is under way
    assert kinds(p.actions()) == []
    p.release("a", 9)  # the cut request ends
    p.unloaded("a", 10)
    assert p.models["a"].state is State.LOADING  # stopped (not asleep: a hung process answers no /sleep), reloading
    assert kinds(p.actions()) == [("load", "a")]
    p.loaded("a", 20)
    assert kinds(p.actions()) == [("admit", "a")] and p.models["a"].last_error is None


def test_only_a_loaded_backend_can_be_hung():
    p = make(spec("a"))
    p.hung("a", "silent", 1)  # stopped: probes never ask it, and a late finding changes nothing
    p.request("a", 2)
    assert kinds(p.actions()) == [("load", "a")]
    p.hung("a", "silent", 3)  # loading: its /health is not up yet
    assert kinds(p.actions()) == [] and p.models["a"].state is State.LOADING


def test_sleep_models_go_to_sleep_and_wake_instead_of_a_cold_start():
    p = make(spec("a", unload="sleep"), spec("b", unload="sleep"))
    loaded(p, "a")
    p.request("b", 1)
    assert kinds(p.actions()) == [("unload", "a", "sleep")]
    p.unloaded("a", 2)
    assert p.models["a"].state is State.ASLEEP and kinds(p.actions()) == [("load", "b")]
    p.loaded("b", 3)
    p.actions()
    p.release("b", 3)
    p.request("a", 4)
    assert kinds(p.actions()) == [("unload", "b", "sleep")]
    p.unloaded("b", 5)
    assert kinds(p.actions()) == [("load", "a", "wake")]


def test_release_after_a_cut_never_goes_below_zero():
    p = make(spec("a"), spec("b"), drain_timeout=1)
    loaded(p, "a")
    p.request("a", 0)
    p.request("b", 0)
    p.tick(2)
    p.unloaded("a", 3)
    p.release("a", 4)
    p.release("a", 4)
    assert p.models["a"].in_flight == 0


@pytest.mark.parametrize("gpus_a,gpus_b,lanes", [((0,), (1,), 2), ((0, 1), (1,), 1), ((), (), 2)])
def test_groups_sharing_a_gpu_index_share_a_lane(gpus_a, gpus_b, lanes):
    p = make(spec("a", "g1", gpus=gpus_a), spec("b", "g2", gpus=gpus_b))
    assert len(p.lanes) == lanes


def test_backends_found_running_at_start_are_adopted_and_a_crowded_group_sheds_the_least_recently_used():
    p = make(spec("a", idle=30), spec("b"), spec("c", "other"))
    p.adopt("a", 0)
    assert p.actions() == [] and p.models["a"].state is State.LOADED
    p.adopt("b", 1)  # compose started both members of group g
    assert kinds(p.actions()) == [("unload", "a", "stop")]  # a: used least recently
    p.request("b", 2)
    assert kinds(p.actions()) == [("admit", "b")]
    p.adopt("c", 3, asleep=True)
    assert p.models["c"].state is State.ASLEEP and p.actions() == []


def test_an_adopted_model_unloads_when_idle_counting_from_its_adoption():
    p = make(spec("a", idle=30))
    p.adopt("a", 100)
    p.tick(129)
    assert p.actions() == []
    p.tick(130)
    assert kinds(p.actions()) == [("unload", "a", "stop")]


def test_a_load_that_fails_at_the_load_timeout_gives_its_first_waiters_503_and_the_later_ones_502():
    p = make(spec("a"), load_timeout=100)
    p.request("a", 0)
    p.request("a", 50)
    p.actions()
    p.load_failed("a", "not ready after 100s (the load timeout), stopped", 100)  # before any tick at 100
    first, second = p.actions()
    assert (
        first.status == 503
        and first.retry_after >= 1
        and "load timeout (100s; its load failed: not ready" in first.message
    )
    assert second.status == 502 and second.message.startswith("model a failed to load: not ready after 100s")

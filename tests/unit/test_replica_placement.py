"""Least-loaded placement of new conversations in the stack's Redis (replica_routing.Placement), against a real
redis-server (Debian's, as the local runtime runs it): the shared in-flight counts, the conversation's claim, the
fallback when Redis is gone, and the release from LiteLLM's own success/failure events through its Router."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections import Counter

import litellm
import pytest
import redis as redis_sync
import yaml
from aiohttp.test_utils import TestServer

from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.plan import RedisPlan
from generator.operate.runtime import redis as stack_redis_runtime
from generator.operate.runtime.ports import free_port
from tests.unit.standin_backend import make_app
from tests.unit.test_replica_routing import CPU_EXAMPLE, _router, _routing, deps, picked

rr = _routing()
PASSWORD = "test-password"


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory):
    binary = stack_redis_runtime.server_binary()
    if binary is None:
        pytest.fail(f"no redis-server: {stack_redis_runtime.INSTALL_HINT}")
    port = free_port()
    config = stack_redis_runtime.write_config(tmp_path_factory.mktemp("redis"), port, PASSWORD, RedisPlan("").hz)
    proc = subprocess.Popen([binary, str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not stack_redis_runtime.ping(port, PASSWORD):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server did not answer (exit code {proc.poll()})")
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def redis_db(redis_port):
    db = redis_sync.Redis(port=redis_port, password=PASSWORD)
    db.flushall()
    yield db
    db.close()


def placement(port: int) -> rr.Placement:
    import redis.asyncio as aioredis

    return rr.Placement(
        lambda: aioredis.Redis(
            port=port, password=PASSWORD, socket_timeout=rr.REDIS_TIMEOUT, socket_connect_timeout=rr.REDIS_TIMEOUT
        )
    )


def request(session: str, call: str | None = None) -> dict:
    return {"metadata": {"session_id": session}, "litellm_call_id": call or uuid.uuid4().hex}


async def place(p, replicas, req, live=None) -> str:
    offered = deps(*replicas) if live is None else deps(*live)
    (chosen,) = picked(await rr.route(p, offered, req))
    return chosen


def test_a_new_conversation_goes_to_the_least_loaded_replica_and_its_turns_follow(redis_port, redis_db):
    async def main():
        p = placement(redis_port)
        busy = [request("busy") for _ in range(3)]
        first = [await place(p, ["m-1", "m-2"], r) for r in busy]
        assert len(set(first)) == 1  # one conversation: one replica, however many of its requests are in flight
        (other,) = {"m-1", "m-2"} - set(first)
        for i in range(5):  # every new conversation: the idle replica, and its next turns stay there
            turn1 = request(f"new-{i}")
            assert await place(p, ["m-1", "m-2"], turn1) == other
            await p.release("m", other, turn1["litellm_call_id"])
            turn2 = request(f"new-{i}")
            assert await place(p, ["m-1", "m-2"], turn2) == other
            await p.release("m", other, turn2["litellm_call_id"])
        assert await p.loads(["m-1", "m-2"]) == {first[0]: 3, other: 0}
        for r in busy:
            await p.release("m", first[0], r["litellm_call_id"])
        assert await p.loads(["m-1", "m-2"]) == {first[0]: 0, other: 0}

    asyncio.run(main())


def test_concurrent_new_conversations_from_two_workers_split_evenly(redis_port, redis_db):
    """Two processes' worth of clients (one each), 8 conversations arriving at once: 4 and 4 (a reading of load
    that is not atomic with the choice would send them all to one replica)."""

    async def main():
        workers = [placement(redis_port), placement(redis_port)]
        chosen = await asyncio.gather(*(place(workers[i % 2], ["m-1", "m-2"], request(f"c{i}")) for i in range(8)))
        assert Counter(chosen) == {"m-1": 4, "m-2": 4}
        three = await asyncio.gather(
            *(place(workers[i % 2], ["a-1", "a-2", "a-3"], request(f"d{i}")) for i in range(9))
        )
        assert Counter(three) == {"a-1": 3, "a-2": 3, "a-3": 3}

    asyncio.run(main())


def test_idle_replicas_tie_and_the_hash_breaks_the_tie(redis_port, redis_db):
    """Requests one after another (nothing in flight): the conversation's rendezvous choice, so conversations
    spread as before and both replicas get some."""

    async def main():
        p = placement(redis_port)
        seen = Counter()
        for i in range(40):
            req = request(f"s{i}")
            chosen = await place(p, ["m-1", "m-2"], req)
            assert [chosen] == picked(rr.choose(deps("m-1", "m-2"), req))
            await p.release("m", chosen, req["litellm_call_id"])
            seen[chosen] += 1
        assert min(seen.values()) >= 8

    asyncio.run(main())


def test_a_dead_replica_moves_the_claim_and_the_conversation_stays_where_it_moved(redis_port, redis_db):
    async def main():
        p = placement(redis_port)
        home = await place(p, ["m-1", "m-2", "m-3"], request("conv"))
        alive = [n for n in ("m-1", "m-2", "m-3") if n != home]
        moved = await place(p, alive, request("conv"), live=alive)
        assert moved == rr.preference("session:conv", alive)[0]  # the next in the conversation's hash order
        assert await place(p, ["m-1", "m-2", "m-3"], request("conv")) == moved  # back: it holds the newer prefix

    asyncio.run(main())


def test_an_overloaded_replica_hands_its_conversation_on(redis_port, redis_db):
    async def main():
        p = placement(redis_port)
        home = await place(p, ["m-1", "m-2"], request("conv"))
        for _ in range(rr.OVERLOAD_MARGIN - 2):  # load up home, the other idle: still below 2 x 0 + margin
            await place(p, ["m-1", "m-2"], request("conv"))
        assert await place(p, ["m-1", "m-2"], request("conv")) == home  # margin - 1 in flight before it
        assert await place(p, ["m-1", "m-2"], request("conv")) != home  # margin in flight: overloaded

    asyncio.run(main())


def test_a_retry_counts_once_on_the_replica_it_moved_to(redis_port, redis_db):
    async def main():
        p = placement(redis_port)
        req = request("conv", "call-1")
        first = await place(p, ["m-1", "m-2"], req)
        again = await place(p, ["m-1", "m-2"], req)  # the router asks again for the same attempt
        assert again == first and await p.loads(["m-1", "m-2"]) == {first: 1, ({"m-1", "m-2"} - {first}).pop(): 0}
        req["metadata"]["previous_models"] = [{"deployment_id": f"id-{first}"}]
        retried = await place(p, ["m-1", "m-2"], req)
        assert retried != first and await p.loads(["m-1", "m-2"]) == {first: 0, retried: 1}

    asyncio.run(main())


def test_a_count_left_on_a_replica_in_cooldown_goes_with_the_retry_or_the_release(redis_port, redis_db):
    """The router leaves a replica in cooldown out of what it offers: a retry elsewhere (or the request's end)
    still drops the request's count there, so the replica is not seen busy when it is back."""

    async def main():
        p = placement(redis_port)
        req = request("conv", "call-1")
        first = await place(p, ["m-1", "m-2"], req)
        (other,) = {"m-1", "m-2"} - {first}
        assert await place(p, [other], req, live=[other]) == other  # first in cooldown: not even offered
        assert await p.loads(["m-1", "m-2"]) == {first: 0, other: 1}
        req2 = request("conv2", "call-2")
        assert await place(p, ["m-1", "m-2"], req2)
        await p.release("m", other, "call-2")  # the event names one replica: every replica drops it
        assert sum((await p.loads(["m-1", "m-2"])).values()) == 1

    asyncio.run(main())


def test_a_reservation_never_released_ends_at_its_deadline(redis_port, redis_db, monkeypatch):
    """A worker that died mid-request: its count goes at the request timeout, no later."""

    async def main():
        p = placement(redis_port)
        monkeypatch.setattr(litellm, "request_timeout", 0.3)
        chosen = await place(p, ["m-1", "m-2"], request("conv"))
        assert (await p.loads([chosen]))[chosen] == 1
        await asyncio.sleep(0.5)
        assert (await p.loads([chosen]))[chosen] == 0
        again = await place(p, ["m-1", "m-2"], request("other"))  # a placement drops the expired members
        assert redis_db.zcard(rr.inflight_key(chosen)) == (chosen == again)
        assert 0 < redis_db.ttl(rr.inflight_key(again)) <= 61  # an idle replica's set goes too
        assert 0 < redis_db.ttl(rr.claim_key("m", "session:conv")) <= rr.CLAIM_TTL

    asyncio.run(main())


def test_without_redis_the_stateless_hash_decides_and_redis_is_left_alone_for_a_while(capsys):
    """Redis down (nothing listens on its port): every request still gets the rendezvous choice, the first one
    logs one line, the next ones do not wait for Redis at all."""

    async def main():
        p = placement(free_port())
        for i in range(5):
            req = request(f"s{i}")
            assert picked(await rr.route(p, deps("m-1", "m-2"), req)) == picked(rr.choose(deps("m-1", "m-2"), req))
        assert p._redis() is None  # backing off: no connection attempt per request

    asyncio.run(main())
    assert capsys.readouterr().err.count("routing by hash") == 1
    # a stack without Redis (no REDIS_HOST): the same choice, silently
    none = rr.Placement(lambda: None)
    req = request("x")
    assert picked(asyncio.run(rr.route(none, deps("m-1", "m-2"), req))) == picked(rr.choose(deps("m-1", "m-2"), req))


def test_the_hash_placement_flag_keeps_a_group_stateless(redis_port, redis_db):
    """model_info gateway_placement: hash (the benchmark's baseline arm): no claim, no count."""
    offered = [{**d, "model_info": {**d["model_info"], rr.PLACEMENT: "hash"}} for d in deps("m-1", "m-2")]
    req = request("conv")
    assert picked(asyncio.run(rr.route(placement(redis_port), offered, req))) == picked(rr.choose(offered, req))
    assert redis_db.dbsize() == 0


# --- through LiteLLM's Router: its success and failure events release the counts -------------------------------


def test_litellm_success_and_failure_events_release_what_the_placement_counted(
    redis_port, redis_db, tmp_path, monkeypatch
):
    monkeypatch.setenv("VLLM_API_KEY_PLAIN", "k")
    src = tmp_path / "models.yml"
    src.write_text(CPU_EXAMPLE.read_text())
    config = yaml.safe_load(render_files(load_plan(src))["litellm/config.yaml"])

    async def main():
        live = TestServer(make_app("plain"), host="127.0.0.1")
        await live.start_server()
        dead = f"http://127.0.0.1:{free_port()}/v1"
        router = _router(config, {"plain-1": f"http://127.0.0.1:{live.port}/v1", "plain-2": dead})
        routing = rr.ReplicaRouting(placement(redis_port))
        # LiteLLM keeps one callback per class in its event lists (logging_callback_manager): a ReplicaRouting an
        # earlier test of this process registered (test_replica_routing's, test_backend_health's) would get this
        # test's events, and this one none. The lists are emptied for the test and put back after it.
        lists = ("input_callback", "success_callback", "failure_callback", "_async_success_callback")
        lists += ("_async_failure_callback", "callbacks")
        saved = {name: getattr(litellm, name) for name in lists}
        litellm.logging_callback_manager._reset_all_callbacks()
        litellm.callbacks = [routing]
        try:

            async def one(i: int):
                kw = {
                    "model": "plain",
                    "messages": [{"role": "user", "content": f"conversation {i}"}],
                    "max_tokens": 2,
                    "litellm_call_id": str(uuid.uuid4()),
                }  # the proxy sets one per request
                if i % 2:
                    stream = await router.acompletion(stream=True, **kw)
                    return "".join([c.choices[0].delta.content or "" async for c in stream])
                return (await router.acompletion(**kw)).choices[0].message.content

            answers = await asyncio.gather(*(one(i) for i in range(16)), return_exceptions=True)
            # LiteLLM logs success after the answer (streams: after the last chunk), in tasks of its own: up to 10 s
            # for them on a busy machine
            deadline = time.monotonic() + 10
            while (loads := await routing.placement.loads(["plain-1", "plain-2"])) != {"plain-1": 0, "plain-2": 0}:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            return answers, loads
        finally:
            for name, value in saved.items():
                setattr(litellm, name, value)
            await live.close()

    answers, loads = asyncio.run(main())
    assert all(isinstance(a, str) and a for a in answers), [a for a in answers if not isinstance(a, str)][:3]
    assert loads == {"plain-1": 0, "plain-2": 0}  # every count released: the dead replica's by its failures
    assert redis_db.zcard(rr.inflight_key("plain-1")) == 0 and redis_db.zcard(rr.inflight_key("plain-2")) == 0
    assert len(redis_db.keys(rr.KEY_PREFIX + "claim:plain:*")) == 16

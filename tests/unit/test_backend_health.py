"""Hung backends (generator/shipped/gateway_hooks/backend_health.py, issue 58) in-process: stand-in backends that
accept connections and never answer (as a SIGSTOPped vLLM), LiteLLM 1.108.7's own Router with the generated config
of examples/cpu-replicas plus a lone model, and a real redis-server for what two workers share. The real thing (vLLM
processes stopped with SIGSTOP behind the real gateway): tests/integration/test_replicas.py."""

from __future__ import annotations

import asyncio
import time

import httpx
import litellm
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.unit.test_replica_placement import PASSWORD, redis_db, redis_port  # noqa: F401  (fixtures)
from tests.unit.test_replica_routing import HOOKS, _router, _routing, hook_module, two_replicas  # noqa: F401  (fixture)

rr = _routing()


bh = hook_module("backend_health")  # as LiteLLM loads it: by path, from beside config.yaml
bh.PROBE_TIMEOUT = 0.4  # a probe that connected and got nothing for 0.4 s is silent (3 s in a gateway)


def standin(name: str) -> tuple[web.Application, dict]:
    """A backend whose /health and chat answer at once, or never while state["hung"] (a stopped process: the
    connection is accepted, nothing comes back)."""
    state = {"hung": False, "served": 0}

    async def wait_while_hung() -> None:
        while state["hung"]:
            await asyncio.sleep(0.05)

    async def health(request: web.Request) -> web.Response:
        await wait_while_hung()
        return web.Response(text="")

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        await wait_while_hung()
        state["served"] += 1
        message = {"role": "assistant", "content": name}
        if not body.get("stream"):
            return web.json_response(
                {"id": "x", "object": "chat.completion", "created": 0, "model": name,
                 "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
            )  # fmt: skip
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": name,
                 "choices": [{"index": 0, "delta": {"content": name}, "finish_reason": "stop"}]}  # fmt: skip
        await resp.write(f"data: {__import__('json').dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_post("/v1/chat/completions", chat)
    return app, state


async def rounds(monitor, found: dict[str, str], stop: asyncio.Event) -> None:
    while not stop.is_set():
        await monitor.round(found)
        await asyncio.sleep(0.1)


async def _hang_and_come_back(config: dict) -> dict:
    servers, states = {}, {}
    for name in ("plain-1", "plain-2", "lone"):
        app, states[name] = standin(name)
        servers[name] = TestServer(app, host="127.0.0.1")
        await servers[name].start_server()
    roots = {name: f"http://127.0.0.1:{s.port}" for name, s in servers.items()}
    router = _router(config, {name: root + "/v1" for name, root in roots.items()})
    monitor = bh.Monitor(connect=lambda: None)
    saved = litellm.callbacks
    litellm.callbacks = [bh.BackendHealth(monitor), rr.routing_instance]
    stop = asyncio.Event()
    prober = asyncio.create_task(rounds(monitor, {root: name for name, root in roots.items()}, stop))
    out: dict = {}
    try:

        async def one(model: str, i: int) -> tuple[str | BaseException, float]:
            begun = time.monotonic()
            messages = [{"role": "user", "content": f"conversation {i}"}]
            try:
                if i % 2:
                    stream = await router.acompletion(model=model, messages=messages, stream=True, max_tokens=2)
                    text = "".join([c.choices[0].delta.content or "" async for c in stream])
                else:
                    text = (await router.acompletion(model=model, messages=messages, max_tokens=2)).choices[0]
                    text = text.message.content
                return text, time.monotonic() - begun
            except Exception as exc:  # noqa: BLE001
                return exc, time.monotonic() - begun

        await asyncio.sleep(0.3)  # the monitor's first rounds: every backend answers
        states["plain-2"]["hung"] = states["lone"]["hung"] = True
        waiting = asyncio.gather(*(one("plain", i) for i in range(12)), one("lone", 0))
        out["waiting"] = await asyncio.wait_for(waiting, 20)  # (without the cut: each waits 600 s)
        out["hung"] = dict(monitor.hung)
        out["cuts"] = monitor.cuts
        out["lone_new"] = await one("lone", 1)  # asked while hung: refused at once, no connection
        out["why"] = bh.why_unavailable("lone", [{"litellm_params": {"api_base": roots["lone"] + "/v1"}}], monitor)
        states["plain-2"]["hung"] = states["lone"]["hung"] = False
        deadline = time.monotonic() + 10
        while monitor.hung and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        out["hung_after"] = dict(monitor.hung)
        before = states["plain-2"]["served"]
        out["after"] = [await one("lone", 2)]
        # (plain-2 may still be in LiteLLM's cooldown of its cut requests' failures: cooldown_time, 5 s)
        deadline, i = time.monotonic() + 12, 100
        while states["plain-2"]["served"] == before and time.monotonic() < deadline:
            out["after"] += await asyncio.gather(*(one("plain", i + k) for k in range(4)))
            i += 4
            await asyncio.sleep(0.5)
        out["plain-2 served after"] = states["plain-2"]["served"] - before
        out["roots"] = roots
    finally:
        stop.set()
        await prober
        await monitor.close()
        litellm.callbacks = saved
        for s in servers.values():
            await s.close()
    return out


def test_requests_waiting_on_a_hung_backend_go_elsewhere_and_it_comes_back_when_it_answers(two_replicas, monkeypatch):  # noqa: F811
    monkeypatch.setenv("VLLM_API_KEY_PLAIN", "k")
    out = asyncio.run(_hang_and_come_back(two_replicas))
    plain, (lone, lone_waited) = out["waiting"][:-1], out["waiting"][-1]
    # every replicated request answered, those that waited on plain-2 by plain-1 after the cut, within seconds
    assert all(a == "plain-1" or a == "plain-2" for a, _ in plain), [a for a, _ in plain]
    assert all(a == "plain-1" for a, _ in plain if a != "plain-2") and out["cuts"] > 0
    assert max(t for _, t in plain) < 8, [round(t, 1) for _, t in plain]
    assert set(out["hung"]) == {out["roots"]["plain-2"], out["roots"]["lone"]}
    # the lone model's request that waited: cut, failed as the backend's failure (the gateway then answers 503)
    assert isinstance(lone, Exception) and lone_waited < 8, (lone, lone_waited)
    new, new_waited = out["lone_new"]
    assert isinstance(new, litellm.ServiceUnavailableError) and new_waited < 1
    assert "model lone cannot answer now: its backend lone is hung since " in str(new)
    assert "(connected, /health silent for " in out["why"]
    # back by itself: not hung, both replicas serve again, the lone model answers
    assert out["hung_after"] == {}
    assert all(isinstance(a, str) for a, _ in out["after"]) and out["plain-2 served after"] > 0


def test_a_hung_model_is_a_503_naming_it_with_retry_after(monkeypatch):
    monitor = bh.Monitor(connect=lambda: None, clock=lambda: 1000.0 + 9)
    monitor.hung = {"http://lone:8000": 1000.0}
    monitor.names = {"http://lone:8000": "lone"}
    dep = {"model_name": "lone", "litellm_params": {"api_base": "http://lone:8000/v1"}, "model_info": {}}

    class Rt:
        model_list = [dep]

    monkeypatch.setattr(bh.gb, "router", lambda: Rt())
    answer = bh.hung_failure({"model": "lone"}, litellm.InternalServerError("cut", "hosted_vllm", "lone"), monitor)
    assert answer is not None and answer.status_code == 503 and answer.headers == {"Retry-After": "10"}
    when = time.strftime("%H:%M:%S", time.localtime(1000.0))
    assert answer.detail == (
        f"model lone cannot answer now: its backend lone is hung since {when} (connected, /health silent for 9 s); "
        "retry after 10 s"
    )
    assert bh.hung_failure({"model": "lone"}, litellm.BadRequestError("bad", "lone", "hosted_vllm"), monitor) is None
    monitor.hung = {}
    assert bh.hung_failure({"model": "lone"}, litellm.InternalServerError("x", "hosted_vllm", "lone"), monitor) is None


def test_one_workers_finding_is_every_workers_and_an_answer_ends_it(redis_port, redis_db):  # noqa: F811
    import redis.asyncio as aioredis

    def connect():
        return aioredis.Redis(port=redis_port, password=PASSWORD, socket_timeout=0.5, socket_connect_timeout=0.5)

    async def run() -> list:
        a, b = bh.Monitor(connect=connect), bh.Monitor(connect=connect)
        outcomes = {"a": bh.SILENT, "b": bh.SILENT}

        async def probe_a(root):
            return outcomes["a"]

        async def probe_b(root):
            return outcomes["b"]

        a.probe, b.probe = probe_a, probe_b  # type: ignore[method-assign]
        found = {"http://127.0.0.1:9": "m-1"}
        seen = []
        await a.round(found)
        await a.round(found)  # a: silent twice in a row, hung
        await b.round(found)  # b: silent once only, hung all the same (a's mark)
        seen.append((set(a.hung), set(b.hung)))
        outcomes["b"] = bh.ANSWERED  # b's probe gets an answer: over, for a too
        await b.round(found)
        outcomes["a"] = bh.SILENT
        a.silent.clear()
        await a.round(found)
        seen.append((set(a.hung), set(b.hung)))
        for m in (a, b):
            await m._client.aclose()
            await m.close()
        return seen

    (first, second) = asyncio.run(run())
    assert first == ({"http://127.0.0.1:9"}, {"http://127.0.0.1:9"})
    assert second == (set(), set())


def test_cut_ends_a_request_waiting_on_a_silent_server_and_leaves_others():
    async def run():
        app, state = standin("x")
        state["hung"] = True
        hung, other = TestServer(app, host="127.0.0.1"), TestServer(standin("y")[0], host="127.0.0.1")
        await hung.start_server()
        await other.start_server()
        async with httpx.AsyncClient(timeout=60) as client:
            waiting = asyncio.create_task(client.get(f"http://127.0.0.1:{hung.port}/health"))
            await asyncio.sleep(0.3)
            kept = await client.get(f"http://127.0.0.1:{other.port}/health")  # a kept-alive connection elsewhere
            begun = time.monotonic()
            n = bh.cut(await bh.peers(f"http://127.0.0.1:{hung.port}"))
            with pytest.raises(httpx.TransportError):
                await waiting
            waited = time.monotonic() - begun
            again = await client.get(f"http://127.0.0.1:{other.port}/health")
        state["hung"] = False
        await hung.close()
        await other.close()
        return n, waited, kept.status_code, again.status_code

    n, waited, kept, again = asyncio.run(run())
    assert n == 1 and waited < 2 and kept == again == 200


def test_a_probe_tells_an_answer_from_silence_from_a_closed_port():
    async def run():
        app, state = standin("x")
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        root = f"http://127.0.0.1:{server.port}"
        monitor = bh.Monitor(connect=lambda: None)
        seen = [await monitor.probe(root)]
        state["hung"] = True
        begun = time.monotonic()
        seen.append(await monitor.probe(root))
        waited = time.monotonic() - begun
        state["hung"] = False
        seen.append(await monitor.probe(root))  # the same client answers again after a silence
        await server.close()
        seen.append(await monitor.probe(root))  # nothing listens: down, not hung
        await monitor.close()
        return seen, waited

    seen, waited = asyncio.run(run())
    assert seen == [bh.ANSWERED, bh.SILENT, bh.ANSWERED, bh.DOWN]
    assert bh.PROBE_TIMEOUT <= waited < bh.PROBE_TIMEOUT + 1


def test_status_reads_hung_with_when_and_for_how_long():
    when = time.strftime("%H:%M:%S", time.localtime(5000.0))
    assert bh.reason(5000.0, now=5009.4) == f"hung since {when} (connected, /health silent for 9 s)"


def test_the_probes_skip_hosted_and_on_demand_models_and_probe_an_adapters_backend_once():
    class Rt:
        model_list = [
            {"model_name": "a", "litellm_params": {"api_base": "http://a:8000/v1"}, "model_info": {}},
            {
                "model_name": "a-lora",
                "litellm_params": {"api_base": "http://a:8000/v1"},
                "model_info": {"gateway_adapter_of": "a"},
            },  # fmt: skip
            {
                "model_name": "r",
                "litellm_params": {"api_base": "http://r-1:8000/v1"},
                "model_info": {"gateway_replica": "r-1"},
            },  # fmt: skip
            {"model_name": "od", "litellm_params": {"api_base": "http://on-demand:4002/m/od/v1"}, "model_info": {}},
            {
                "model_name": "gpt",
                "litellm_params": {"api_base": "https://api.openai.com/v1"},
                "model_info": {"gateway_hosted": "openai"},
            },  # fmt: skip
        ]

        def get_model_list(self, model_name):
            return [d for d in self.model_list if d["model_name"] == model_name]

    assert bh.targets(Rt()) == {"http://a:8000": "a", "http://r-1:8000": "r-1"}

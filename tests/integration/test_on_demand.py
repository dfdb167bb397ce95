"""On-demand models for real: two vLLM CPU backends (examples/cpu-on-demand/models.yml: the demo's models) in ONE
group behind the on-demand controller and the real LiteLLM gateway, started by the local runtime from that file
(`pytest -m on_demand`).

One stack, one test, in steps, to keep real loads few (each is 40-140 s of CPU here):
  1. A is stopped; two clients ask for it at once (plain + streamed): both wait through its load and succeed;
  2. a stream of A is under way when B is asked for: A drains (its stream runs to the end), unloads, B loads;
  3. two clients alternate B, A (plain and streamed) at once: every request succeeds;
  4. a third model whose start fails (a bad flag in its command line) answers a clear error naming the
     model and vLLM's own complaint, while A keeps serving;
  5. A, idle, unloads after its idle_timeout.
A second test on the same stack: copies that follow the load. `replicas: {min: 0, max: 1}` (zero): the first request
loads it, idle it unloads; `replicas: {min: 1, max: 2}` (scaled: the demo's reasoner with one sequence at a time, so a
burst queues): a burst of clients queues on copy 1, the controller starts copy 2 and both serve; once idle, copy 2
drains and stops, copy 1 keeps serving; no request fails, no stream is cut.
Throughout, a sampler reads the controller's /status every 0.5 s: A and B are never loaded (or loading,
or draining) at the same time. Load and unload times are printed and written to
.cache/on-demand-timings.json; they are measurements, not pass/fail conditions.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.plan import ControllerPlan, OnDemandPlan
from generator.demo.scripted_model import NO_END_LOGIT_BIAS
from generator.operate.runtime.local import LocalStack
from generator.operate.runtime.ports import consecutive_free_ports, free_ports
from tests.integration.helpers import UNIT, fork_server_of, run_status

pytestmark = pytest.mark.on_demand

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/cpu-on-demand/models.yml"
A, B, BROKEN = "reasoner", "tool-caller", "broken"
SCALED = "scaled"  # replicas: {min: 1, max: 2}: copies scaled-1 (always on) and scaled-2 (started by the load)
ZERO = "zero"  # replicas: {min: 0, max: 1}: loaded by a request, unloaded when idle
SCALED_IDLE = 10  # seconds
BURST_TOKENS = 96  # per request of the burst
IDLE = 20  # seconds
HELLO = [{"role": "user", "content": "Say hello."}]
BUSY = {"loading", "loaded", "draining"}
LONG_ANSWER = 400  # tokens


class Stack(LocalStack):
    """The runtime as it is, but the broken model's command line gets a flag vLLM does not know (the loader
    would refuse it in models.yml, so it is added where the controller reads it)."""

    def controller_config(self):
        config = super().controller_config()
        broken = config["models"][BROKEN]
        broken["argv"].append("--no-such-flag")
        broken["fork"]["args"].append("--no-such-flag")  # forked from the stack's fork server (CPU_BACKEND_FORK)
        return config


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if os.environ.get("GATEWAY_URL"):
        pytest.skip("starts its own local stack with on-demand models")
    vllm_python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    if not Path(vllm_python).exists():
        pytest.fail(f"no vLLM interpreter at {vllm_python}: run `make venv-vllm`")
    # free ports, not the example's 4100/4102/8101/8102: a user may be trying the example (or another checkout
    # testing) at the same time
    gateway_port, controller_port, *ports = free_ports(5)
    ports = dict(zip((A, B, BROKEN), ports))
    tmp = tmp_path_factory.mktemp("on-demand")
    # the user's example, through models.yml's own syntax (loader -> plan -> runtime): its two models in one
    # group; here a 20 s idle timeout and a third model, alone in its group, whose start fails
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["gateway"] = {
        **doc["gateway"],
        "port": gateway_port,
        "request_timeout": 900,
        "stream_timeout": 900,
        "workers": 1,
    }  # one gateway worker: ~8 CPU-s less to start; the demo stack tests 2
    doc["on_demand"] = {**doc["on_demand"], "port": controller_port}
    doc["defaults"]["on_demand"] = {"group": "pair", "idle": f"{IDLE}s"}
    doc[BROKEN] = {
        **doc[B],
        "description": "starts with a flag vLLM refuses",
        "port": ports[BROKEN],
        "on_demand": {"group": "solo", "idle": 0},
    }
    # copies that follow the load: one sequence at a time (a burst queues in vLLM), scaled at once, 10 s idle
    doc[SCALED] = {
        **doc[A],
        "description": "copies follow the load",
        "replicas": {"min": 1, "max": 2, "waiting": 1, "up_after": "0s", "idle": f"{SCALED_IDLE}s"},
        "command": doc[A]["command"].rstrip() + " --max-num-seqs 1\n",
    }
    doc[ZERO] = {
        **doc[A],
        "description": "no copy while idle",
        "replicas": {"min": 0, "max": 1, "idle": f"{SCALED_IDLE}s"},
    }
    ports[ZERO] = free_ports(1)[0]
    ports[SCALED] = consecutive_free_ports(2)  # copy i listens on port + i - 1
    for name in ports:
        doc[name]["port"] = ports[name]
        doc[name]["command"] = doc[name]["command"].replace(".cache/demo-models", str(ROOT / ".cache/demo-models"))
    (tmp / "models.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    plan = load_plan(tmp / "models.yml")
    assert {m.name: (m.port, m.on_demand.group, m.by_load) for m in plan.models if m.on_demand} == {
        A: (ports[A], "pair", False),
        B: (ports[B], "pair", False),
        BROKEN: (ports[BROKEN], "solo", False),
        f"{SCALED}-2": (ports[SCALED] + 1, f"{SCALED}-2", True),  # loaded by the queue
        ZERO: (ports[ZERO], ZERO, False),  # min 0: loaded by a request
    }
    assert [m.port for m in plan.models if m.name == f"{SCALED}-1" and m.on_demand is None] == [ports[SCALED]]
    assert (plan.gateway.port, plan.controller.port) == (gateway_port, controller_port)
    cwd = os.getcwd()
    os.chdir(ROOT)
    s = Stack(plan, tmp / "state", vllm_python)
    try:
        s.start(timeout=300)
        yield s
    finally:
        s.stop()
        os.chdir(cwd)
        left = [n for n, p in {**ports, f"{SCALED}-2": ports[SCALED] + 1}.items() if _port_open(p)]
        assert not left, f"still listening after stop: {left}"


class Sampler(threading.Thread):
    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.samples, self.halt = url, [], threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self.halt.is_set():
                try:
                    self.samples.append((time.monotonic(), client.get(self.url + "/status").json()["models"]))
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)

    def both_busy(self) -> list:
        return [
            (t, {n: m["state"] for n, m in s.items()})
            for t, s in self.samples
            if s[A]["state"] in BUSY and s[B]["state"] in BUSY
        ]


def test_two_models_of_one_group_take_turns_through_the_gateway(stack):
    client = openai.OpenAI(base_url=f"{stack.gateway_url}/v1", api_key=stack.master_key, timeout=900, max_retries=0)
    ports = {m.name: m.port for m in stack.plan.models if m.on_demand}  # (not scaled-1: min 1, always on)
    status = lambda: httpx.get(f"{stack.controller_url}/status", timeout=10).json()["models"]  # noqa: E731

    def plain(model: str) -> str:
        r = client.chat.completions.create(model=model, messages=HELLO, max_tokens=32)
        assert r.choices[0].message is not None
        return r.choices[0].finish_reason

    def streamed(model: str, messages=HELLO, max_tokens: int = 32, **extra) -> str | None:
        """The finish reason of a streamed answer (None: it ended without one)."""
        finish = None
        for chunk in client.chat.completions.create(
            model=model, messages=messages, max_tokens=max_tokens, stream=True, **extra
        ):
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
        return finish

    assert {n: m["state"] for n, m in status().items()} == {
        A: "stopped",
        B: "stopped",
        BROKEN: "stopped",
        f"{SCALED}-2": "stopped",
        ZERO: "stopped",
    }
    assert not any(_port_open(p) for p in ports.values())  # nothing on demand started with the stack
    sampler = Sampler(stack.controller_url)
    sampler.start()
    steps: dict[str, float] = {}
    try:
        # 1. two clients at once while A loads: both wait and succeed
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = [pool.submit(plain, A), pool.submit(streamed, A)]
            assert [f.result() for f in first] and all(f.result() for f in first), "a request during the load failed"
        steps["1: A loaded, both waiting requests answered"] = time.monotonic() - t
        assert any(s[A]["state"] == "loading" and s[A]["queued"] >= 1 for _, s in sampler.samples)

        # 2. B asked for while a stream of A runs: the stream runs to its end, then A unloads and B loads. A long
        #    answer keeps it in flight: past its script, end tokens banned (a ~60 KB prompt alone once prefilled and
        #    answered on an idle box between two 20 ms polls of the controller)
        t = time.monotonic()
        long_prompt = [{"role": "user", "content": "Say hello. " + UNIT * 900}]  # ~60 KB
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            a = pool.submit(
                streamed,
                A,
                long_prompt,
                max_tokens=LONG_ANSWER,
                logit_bias=NO_END_LOGIT_BIAS,
                extra_body={"ignore_eos": True},
            )
            deadline = time.monotonic() + 120
            while status()[A]["in_flight"] < 1:
                assert time.monotonic() < deadline and not a.done(), "the stream of A never reached the controller"
                time.sleep(0.02)
            b = pool.submit(plain, B)
            drain_seen = False
            while not a.done():
                s = status()[A]
                drain_seen |= s["state"] == "draining" and s["in_flight"] >= 1
                time.sleep(0.1)
            assert a.result() == "length", "the stream of A did not run to its end (all its max_tokens)"
            steps[f"2a: A's stream of {LONG_ANSWER} tokens ended (B waiting)"] = time.monotonic() - t
            assert b.result()
        steps["2: A drained and unloaded, B loaded and answered"] = time.monotonic() - t

        # 3. two clients alternating B, A at once (plain and streamed): B is loaded (step 2), so the switch to A
        #    happens while both clients wait (one real load here: each costs ~30 s of CPU)
        t = time.monotonic()
        barrier = threading.Barrier(2)

        def client_run(calls):
            out = []
            for fn, model in calls:
                barrier.wait(timeout=900)
                out.append(fn(model))
            return out

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            x = pool.submit(client_run, [(plain, B), (streamed, A)])
            y = pool.submit(client_run, [(streamed, B), (plain, A)])
            assert all(x.result()) and all(y.result())
        steps["3: B, A alternated by two clients"] = time.monotonic() - t

        # 4. a model that cannot start: a clear error; A keeps serving
        t = time.monotonic()
        with pytest.raises(openai.APIStatusError) as err:
            plain(BROKEN)
        message = str(err.value)
        assert "model broken failed to load" in message and "unrecognized arguments: --no-such-flag" in message, message
        assert status()[BROKEN]["state"] == "failed" and "--no-such-flag" in status()[BROKEN]["last_error"]
        assert plain(A) and status()[A]["state"] == "loaded"
        assert fork_server_of(port=ports[A]) is not None, "A was spawned, not forked from the stack's vLLM fork server"
        steps["4: broken model failed"] = time.monotonic() - t

        # 5. A unloads once idle for IDLE seconds
        t = time.monotonic()
        deadline = t + IDLE + 120
        while status()[A]["state"] != "stopped":
            assert time.monotonic() < deadline, status()[A]
            time.sleep(0.5)
        steps[f"5: A idle-unloaded (idle_timeout {IDLE}s)"] = time.monotonic() - t
        assert not _port_open(ports[A]) and not _port_open(ports[B])
        # what a user sees: `make status` (python -m generator.operate.status) on this stack shows the controller's
        # states
        out = run_status("--state-dir", str(stack.state_dir))
        states = {m["name"]: m["state"] for m in json.loads(out.stdout)["models"]}
        scaled = {n: states.pop(n) for n in (f"{SCALED}-1", f"{SCALED}-2", ZERO)}
        assert scaled == {f"{SCALED}-1": "healthy", f"{SCALED}-2": "stopped", ZERO: "stopped"}, out.stdout
        assert states == {A: "stopped", B: "stopped", BROKEN: "failed"}, out.stdout
        assert out.returncode == 1, "a failed model makes status exit 1; stopped ones do not"
        # `make status MODELS=<this file>`: the same stack, with its own key (not compose/.env's: "unauthorized")
        out = run_status("--models", stack.plan.source, "--state-dir", str(stack.state_dir))
        again = {m["name"]: m["state"] for m in json.loads(out.stdout)["models"]}
        assert {n: s for n, s in again.items() if n in states} == states, out.stdout
    finally:
        sampler.halt.set()
        sampler.join()
    assert not sampler.both_busy(), f"A and B were both loaded at once: {sampler.both_busy()[:5]}"

    log = (stack.state_dir / "logs" / "on-demand.log").read_text()
    timings = {
        "loads": [(m, float(s)) for m, s in re.findall(r"INFO (\S+): loaded in ([\d.]+)s", log)],
        "unloads": [(m, float(s)) for m, s in re.findall(r"INFO (\S+): unloaded in ([\d.]+)s", log)],
        "failed_loads": [(m, float(s)) for m, s in re.findall(r"ERROR (\S+): load failed after ([\d.]+)s", log)],
        "steps": {k: round(v, 1) for k, v in steps.items()},
        "status_samples": len(sampler.samples),
        "drain_seen_with_a_stream_in_flight": drain_seen,
    }
    (ROOT / ".cache").mkdir(exist_ok=True)
    (ROOT / ".cache/on-demand-timings.json").write_text(json.dumps(timings, indent=1))
    print("\non-demand timings:", json.dumps(timings, indent=1))


def _served(port: int) -> float:
    """Requests a vLLM copy finished (its own vllm:request_success_total, summed over finish reasons)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))


def test_copies_follow_the_load_through_the_gateway(stack):
    """min 0: the first request loads the model, idle it unloads. min 1, max 2: a burst queues on copy 1, copy 2
    starts and serves; idle, copy 2 drains and stops, copy 1 stays; every request answered whole, every stream to its
    end."""
    client = openai.OpenAI(base_url=f"{stack.gateway_url}/v1", api_key=stack.master_key, timeout=900, max_retries=0)
    one, two = f"{SCALED}-1", f"{SCALED}-2"
    port = {m.name: m.port for m in stack.plan.models}
    status = lambda: httpx.get(f"{stack.controller_url}/status", timeout=10).json()  # noqa: E731
    steps: dict[str, float] = {}

    def ask(model: str, i: int, tokens: int = 16) -> str | None:
        """A plain or a streamed answer of `tokens` tokens (its finish reason: None would be a cut stream)."""
        messages = [{"role": "user", "content": f"Say hello, {i}."}]
        # all `tokens`, end tokens banned: a request long enough to queue behind another, few requests for the CPU
        long = {"max_tokens": tokens, "logit_bias": NO_END_LOGIT_BIAS, "extra_body": {"ignore_eos": True}}
        if i % 2:
            r = client.chat.completions.create(model=model, messages=messages, **long)
            return r.choices[0].finish_reason
        finish = None
        for chunk in client.chat.completions.create(model=model, messages=messages, stream=True, **long):
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
        return finish

    # 1. min 0: nothing runs; the first request loads it
    t = time.monotonic()
    assert status()["models"][ZERO]["state"] == "stopped" and not _port_open(port[ZERO])
    assert ask(ZERO, 1) is not None and status()["models"][ZERO]["state"] == "loaded"
    steps["1: min 0: the first request loaded it"] = time.monotonic() - t

    # 2. a burst: 3 clients asking in turn while copy 1 takes one sequence at a time (2 wait: above 1 per copy); copy
    #    2 starts and serves
    t = time.monotonic()
    assert status()["models"][two]["state"] == "stopped" and _port_open(port[one])  # min 1: copy 1 runs
    done = threading.Event()
    results: list[str | None] = []

    def client_loop(k: int) -> None:
        i = k
        while not done.is_set():
            results.append(ask(SCALED, i, BURST_TOKENS))
            i += 3

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        clients = [pool.submit(client_loop, k) for k in range(3)]
        deadline = time.monotonic() + 600
        at_load: dict[str, float] = {}  # each copy's requests served when copy 2 became ready
        try:
            while not (at_load and _served(port[two]) >= 4):
                assert time.monotonic() < deadline, status()
                assert not any(c.done() for c in clients), [c.exception() for c in clients if c.done()]
                if not at_load and status()["models"][two]["state"] == "loaded":
                    at_load = {one: _served(port[one]), two: _served(port[two])}
                    steps["2a: copy 2 ready"] = time.monotonic() - t
                time.sleep(0.5)
        finally:
            done.set()
        for c in clients:
            c.result()
    steps["2: burst until copy 2 served 4 requests"] = time.monotonic() - t
    served = {one: _served(port[one]), two: _served(port[two])}
    assert served[one] >= 1 and served[two] >= 4, served
    served_after = {c: served[c] - at_load[c] for c in served}  # a measurement: how the two shared the load
    assert results and all(r == "length" for r in results), results  # every request answered, every stream whole
    s = status()["scaling"][SCALED]
    assert s["events"]["up"] >= 1 and s["last"]["action"] == "up" and s["last"]["copy"] == two
    assert "per copy > 1" in s["last"]["reason"], s

    # 3. idle: copy 2 drains and stops, copy 1 stays (min 1); the min 0 model unloads
    t = time.monotonic()
    deadline = t + SCALED_IDLE + 120
    while (status()["models"][two]["state"], status()["models"][ZERO]["state"]) != ("stopped", "stopped"):
        assert time.monotonic() < deadline, status()["models"]
        time.sleep(0.5)
    steps[f"3: copy 2 and the min 0 model stopped after {SCALED_IDLE}s idle"] = time.monotonic() - t
    s = status()["scaling"][SCALED]
    assert s["copies"] == {one: "running", two: "stopped"} and s["events"]["down"] >= 1, s
    assert s["last"] == {**s["last"], "action": "down", "copy": two, "reason": f"idle {SCALED_IDLE}s"}, s
    assert not _port_open(port[two]) and not _port_open(port[ZERO]) and _port_open(port[one])
    assert ask(SCALED, 1) is not None  # copy 1 serves on
    metrics = httpx.get(f"{stack.controller_url}/metrics", timeout=10).text
    for direction in ("up", "down"):
        assert f'llm_gateway_scaling_events_total{{direction="{direction}",model="{SCALED}"}} 1.0' in metrics, metrics
    # `make status`: each copy's state, the range and the last decision with its reason
    out = run_status("--state-dir", str(stack.state_dir))
    rows = {m["name"]: m for m in json.loads(out.stdout)["models"]}
    assert (rows[one]["state"], rows[two]["state"]) == ("healthy", "stopped"), out.stdout
    assert f"copies 1-2 follow the load: {one} running, {two} stopped; last: down {two}" in rows[two]["reason"]
    report = {"steps": steps, "served": served, "served_after_copy_2_ready": served_after, "requests": len(results)}
    print("\ncopies that follow the load:", json.dumps(report))


# --- what a client sees through the real gateway when the controller refuses (stand-in backends: no vLLM) ---
FAKE_VLLM = """#!{python}
import os, sys, time
args = sys.argv
time.sleep(float(os.environ.get("STANDIN_START_DELAY", "0")))
os.execv({python!r}, [{python!r}, {standin!r}, args[args.index("--port") + 1], args[args.index("--model") + 1],
                      *[a for a in args if a == "--no-such-flag"]])
"""


class BrokenStack(LocalStack):
    def controller_config(self):
        config = super().controller_config()
        config["models"]["broken"]["argv"].append("--no-such-flag")
        return config


@pytest.fixture(scope="module")
def standin_stack(tmp_path_factory):
    import sys

    if os.environ.get("GATEWAY_URL"):
        pytest.skip("starts its own local stack with on-demand models")
    tmp = tmp_path_factory.mktemp("on-demand-standin")
    fake = tmp / "fake-vllm"
    fake.write_text(FAKE_VLLM.format(python=sys.executable, standin=str(ROOT / "tests/unit/standin_backend.py")))
    fake.chmod(0o755)
    gateway_port, controller_port, *ports = free_ports(6)  # never an example's, a demo's or another checkout's
    # one gateway worker: ~8 CPU-s less to start; the demo stack tests 2
    (tmp / "models.yml").write_text(
        f"gateway: {{port: {gateway_port}, workers: 1}}\n"
        + "".join(
            f"{name}:\n  gpus: []\n  command: vllm serve o/{name} --max-model-len 8K --port {port}\n"
            f"  env: {{STANDIN_START_DELAY: '{delay}'}}\n"
            for (name, delay), port in zip((("fast", 0), ("slow", 6), ("never", 120), ("broken", 0)), ports)
        )
    )
    plan = load_plan(tmp / "models.yml")
    plan = replace(
        plan,
        models=tuple(replace(m, on_demand=OnDemandPlan(m.name, 0, "stop")) for m in plan.models),
        controller=ControllerPlan(port=controller_port, queue=1, load_timeout=15, drain_timeout=30),
    )
    s = BrokenStack(plan, tmp / "state", str(fake))
    try:
        s.start(timeout=120)
        yield s
    finally:
        s.stop()


def _post(stack, model: str, **body) -> httpx.Response:
    return httpx.post(
        f"{stack.gateway_url}/v1/chat/completions",
        timeout=120,
        headers={"Authorization": f"Bearer {stack.master_key}"},
        json={"model": model, "messages": HELLO, "max_tokens": 8, **body},
    )


def test_through_the_gateway_a_model_streams_after_its_load(standin_stack):
    with httpx.stream(
        "POST",
        f"{standin_stack.gateway_url}/v1/chat/completions",
        timeout=120,
        headers={"Authorization": f"Bearer {standin_stack.master_key}"},
        json={"model": "fast", "messages": HELLO, "max_tokens": 5, "stream": True},
    ) as r:
        assert r.status_code == 200
        lines = [ln for ln in r.iter_lines() if ln.startswith("data:")]
    assert lines[-1] == "data: [DONE]" and sum('"t' in ln for ln in lines) == 5


def test_through_the_gateway_a_full_queue_is_a_503(standin_stack):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(_post, standin_stack, "slow")
        deadline = time.monotonic() + 30
        while httpx.get(f"{standin_stack.controller_url}/status").json()["models"]["slow"]["queued"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = _post(standin_stack, "slow")
        print("\nqueue full, through the gateway:", r.status_code, dict(r.headers), r.text[:400])
        assert r.status_code == 503, r.text
        assert int(r.headers["retry-after"]) >= 1  # the controller's, as Retry-After (clients' retry logic reads it)
        assert "model slow is loading: 1 requests already wait for it (queue: 1)" in r.text
        assert waiting.result().status_code == 200


def test_through_the_gateway_a_load_timeout_is_a_503_naming_the_model_not_a_hang(standin_stack):
    start = time.monotonic()
    r = _post(standin_stack, "never")
    print("\nload timeout, through the gateway:", r.status_code, dict(r.headers), r.text[:400])
    assert time.monotonic() - start < 15 + 10
    assert r.status_code == 503 and "model never did not become ready within the load timeout (15s" in r.text, r.text
    assert int(r.headers["retry-after"]) >= 1


def test_through_the_gateway_a_failed_load_names_the_model_and_the_cause(standin_stack):
    r = _post(standin_stack, "broken")
    print("\nfailed load, through the gateway:", r.status_code, r.text[:400])
    assert r.status_code >= 500 and "model broken failed to load" in r.text
    assert "unrecognized arguments: --no-such-flag" in r.text
    assert _post(standin_stack, "fast").status_code == 200

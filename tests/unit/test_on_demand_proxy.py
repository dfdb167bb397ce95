"""The on-demand controller as a process (`python -m generator.shipped.on_demand`), in front of stand-in backends
(tests/unit/standin_backend.py) that its LocalProcesses driver starts and stops: loading on a request,
the streaming proxy, the queue, drains, failures, idle unloads, vLLM sleep mode, and SIGTERM."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from generator.operate.runtime.ports import free_port
from generator.shipped.on_demand.metrics import STATE_METRIC

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STANDIN = HERE / "standin_backend.py"
KEY = "Bearer sk-backend-test"


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Controller:
    def __init__(self, tmp: Path, models: dict[str, dict], **settings):
        self.port = free_port()
        self.ports = {}
        cfg_models = {}
        for name, m in models.items():
            port = free_port()
            self.ports[name] = port
            argv = [sys.executable, str(STANDIN), str(port), name, *m.pop("args", [])]
            cfg_models[name] = {
                "group": m.pop("group", "g"),
                "idle_timeout": m.pop("idle", 0),
                "unload": m.pop("unload", "stop"),
                "url": f"http://127.0.0.1:{port}",
                "service": name,
                "api_key_env": "",
                "gpus": m.pop("gpus", []),
                "argv": argv,
                "env": {},
                "cwd": str(ROOT),
                "log": str(tmp / "logs" / f"{name}.log"),
            }
        config = {
            "port": self.port,
            "queue": 64,
            "load_timeout": 30,
            "drain_timeout": 30,
            "host": "127.0.0.1",
            **settings,
            "models": cfg_models,
        }
        (tmp / "on-demand.json").write_text(json.dumps(config))
        self.log = (tmp / "controller.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "generator.shipped.on_demand", "--config", str(tmp / "on-demand.json")],
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.tmp = tmp
        deadline = time.monotonic() + 20
        while not port_open(self.port):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.logs()
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        return (self.tmp / "controller.log").read_text()

    def status(self) -> dict:
        return httpx.get(f"{self.url}/status", timeout=5).json()["models"]

    def state(self, name: str) -> str:
        return self.status()[name]["state"]

    def chat(self, name: str, timeout: float = 30, **body) -> httpx.Response:
        return httpx.post(
            f"{self.url}/m/{name}/v1/chat/completions",
            timeout=timeout,
            headers={"Authorization": KEY},
            json={"model": name, "messages": [{"role": "user", "content": "hi"}], **body},
        )

    def wait_state(self, name: str, state: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while (seen := self.state(name)) != state:
            assert time.monotonic() < deadline, f"{name} is {seen}, not {state}, after {timeout}s\n{self.logs()}"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                pass
        # whatever is left of its session (it should be nothing: asserted in the SIGTERM test)
        for p in psutil.process_iter():
            try:
                if os.getsid(p.pid) == self.proc.pid:
                    p.kill()
            except (psutil.Error, OSError):
                pass
        self.log.close()


@pytest.fixture
def controller(tmp_path):
    made = []

    def make(models: dict[str, dict], **settings) -> Controller:
        folder = tmp_path / f"c{len(made)}"
        folder.mkdir()
        c = Controller(folder, models, **settings)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


def test_get_health_and_models_of_an_unloaded_model_answer_503_with_its_state_and_load_nothing(controller):
    c = controller({"a": {}})
    for path in ("health", "v1/models", "metrics"):
        r = httpx.get(f"{c.url}/m/a/{path}", timeout=5)
        assert r.status_code == 503 and r.json()["state"] == "stopped", r.text
        assert r.headers["x-on-demand-state"] == "stopped"  # what the gateway's status route reads
    time.sleep(1)
    assert c.state("a") == "stopped" and not port_open(c.ports["a"])
    assert "GET /health while stopped: 503, not loading it" in c.logs()
    assert httpx.get(f"{c.url}/m/nope/health", timeout=5).status_code == 404


def _states(c: Controller) -> dict[str, str]:
    """model -> state, read from the controller's /metrics (the series at 1 of the state set)."""
    r = httpx.get(f"{c.url}/metrics", timeout=5)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text
    on = [
        s for f in text_string_to_metric_families(r.text) for s in f.samples if s.name == STATE_METRIC and s.value == 1
    ]
    assert len(on) == len({s.labels["model"] for s in on}), r.text  # one state per model
    return {s.labels["model"]: s.labels["state"] for s in on}


def test_metrics_give_each_models_state_stopped_until_a_request_loads_it(controller):
    """What Prometheus scrapes so that an unloaded model reads "stopped", not "down" (prometheus/rules.yml)."""
    c = controller({"a": {}, "b": {}})
    assert _states(c) == {"a": "stopped", "b": "stopped"}
    assert c.chat("a").status_code == 200
    assert _states(c) == {"a": "loaded", "b": "stopped"}
    assert not port_open(c.ports["b"])  # reading the metrics loads nothing


def test_a_request_loads_the_model_and_streams_through_chunk_by_chunk_with_its_headers(controller):
    c = controller({"a": {}})
    r = c.chat("a")
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ok from a"
    assert r.json()["auth"] == KEY  # Authorization passed through
    assert c.state("a") == "loaded" and c.status()["a"]["load_seconds"] is not None
    health = httpx.get(f"{c.url}/m/a/health", timeout=5)
    assert health.status_code == 200 and health.headers["x-on-demand-state"] == "loaded"  # loaded: forwarded
    arrivals = []
    with httpx.stream(
        "POST",
        f"{c.url}/m/a/v1/chat/completions",
        timeout=30,
        headers={"Authorization": KEY},
        json={"model": "a", "messages": [], "stream": True, "max_tokens": 6, "delay": 0.4},
    ) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        for line in s.iter_lines():
            if line.startswith("data:"):
                arrivals.append((time.monotonic(), line))
    assert arrivals[-1][1] == "data: [DONE]" and len(arrivals) == 8
    assert arrivals[-1][0] - arrivals[0][0] > 1.5  # chunks came as they were made, not in one piece at the end
    assert c.status()["a"]["in_flight"] == 0


def test_a_client_that_goes_away_mid_stream_lowers_in_flight_and_the_backend_request_ends(controller):
    c = controller({"a": {}})
    assert c.chat("a").status_code == 200
    with httpx.stream(
        "POST",
        f"{c.url}/m/a/v1/chat/completions",
        timeout=30,
        json={"messages": [], "stream": True, "max_tokens": 100, "delay": 0.2},
    ) as s:
        lines = s.iter_lines()  # kept: a dropped iterator closes the response
        next(lines)
        assert c.status()["a"]["in_flight"] == 1
    deadline = time.monotonic() + 5
    while c.status()["a"]["in_flight"] != 0:
        assert time.monotonic() < deadline, c.status()
        time.sleep(0.1)
    deadline = time.monotonic() + 5
    while httpx.get(f"http://127.0.0.1:{c.ports['a']}/stats").json()["cut"] != 1:
        assert time.monotonic() < deadline, "the backend never saw its client go"
        time.sleep(0.1)


def test_a_full_queue_gets_503_with_retry_after_and_the_queued_ones_are_served(controller):
    c = controller({"a": {"args": ["--start-delay", "3"]}}, queue=2)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        queued = [pool.submit(c.chat, "a") for _ in range(2)]
        deadline = time.monotonic() + 5
        while c.status()["a"]["queued"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = c.chat("a")
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
        assert "model a is loading: 2 requests already wait for it (queue: 2)" in r.json()["error"]["message"]
        assert [f.result().status_code for f in queued] == [200, 200]


def test_a_waiter_past_the_load_timeout_gets_503_and_retry_after_not_a_hang(controller):
    c = controller({"a": {"args": ["--start-delay", "30"]}}, load_timeout=2)
    start = time.monotonic()
    r = c.chat("a")
    assert r.status_code == 503 and r.headers.get("retry-after"), r.text
    assert "did not become ready within the load timeout (2s" in r.json()["error"]["message"]
    assert time.monotonic() - start < 6
    c.wait_state("a", "failed")  # the load itself gave up too, and stopped the process
    assert "not ready after 2s (the load timeout), stopped; last log line: " in c.status()["a"]["last_error"]


def test_a_model_of_the_group_drains_before_the_other_loads_and_its_stream_runs_to_the_end(controller):
    c = controller({"a": {}, "b": {}})
    assert c.chat("a").status_code == 200
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            samples.append({n: s["state"] for n, s in c.status().items()})
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    lines: list[str] = []
    try:
        with httpx.stream(
            "POST",
            f"{c.url}/m/a/v1/chat/completions",
            timeout=30,
            json={"messages": [], "stream": True, "max_tokens": 10, "delay": 0.3},
        ) as s:
            it = s.iter_lines()
            lines.append(next(it))
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                b = pool.submit(c.chat, "b")
                time.sleep(1)
                assert c.state("a") == "draining" and c.status()["b"]["queued"] == 1 and not b.done()
                lines += list(it)
                assert b.result().status_code == 200 and b.result().json()["backend"] == "b"
    finally:
        stop.set()
        sampler.join()
    assert [ln for ln in lines if ln.startswith("data:")][-1] == "data: [DONE]"
    assert c.state("a") == "stopped" and not port_open(c.ports["a"])
    busy = {"loading", "loaded", "draining"}
    assert all(sum(s in busy for s in snap.values()) <= 1 for snap in samples), samples
    assert any(snap["a"] == "draining" for snap in samples) and any(snap["b"] == "loading" for snap in samples)


def test_a_failed_load_gives_a_clear_error_the_others_keep_serving_and_the_next_request_retries(controller):
    c = controller({"bad": {"group": "solo", "args": ["--no-such-flag"]}, "a": {"group": "other"}})
    assert c.chat("a").status_code == 200
    r = c.chat("bad")
    assert r.status_code == 502, r.text
    message = r.json()["error"]["message"]
    assert message.startswith("model bad failed to load: exited with code 2 before it was ready: ")
    assert "unrecognized arguments: --no-such-flag" in message
    assert c.state("bad") == "failed" and "--no-such-flag" in c.status()["bad"]["last_error"]
    assert c.chat("a").status_code == 200
    assert c.chat("bad").status_code == 502  # retried (and failed again)
    assert c.logs().count("bad: loading") == 2


@pytest.mark.parametrize("unload", ["stop", "sleep"])
def test_a_hung_backend_is_killed_its_request_cut_and_the_next_request_loads_it_again(controller, unload):
    """A loaded backend stopped with SIGSTOP (as a hung GPU engine: its port accepts, nothing answers): the request
    waiting on it ends within seconds (a 502 the gateway fails over from), the process is killed (a sleep-mode one
    too: a hung process answers no /sleep), and the next request starts a new one."""
    c = controller({"a": {"unload": unload}}, hung_probe_interval=0.2, hung_probe_timeout=0.5)
    pid = c.chat("a").json()["pid"]
    os.killpg(pid, signal.SIGSTOP)  # its group: the driver starts each backend in its own
    start = time.monotonic()
    cut = c.chat("a", timeout=30)
    assert cut.status_code == 502 and time.monotonic() - start < 5, (cut.status_code, time.monotonic() - start)
    assert "hung" in c.status()["a"]["last_error"], c.status()
    assert "a: hung (connected, /health silent for" in c.logs()
    c.wait_state("a", "stopped")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    again = c.chat("a")
    assert again.status_code == 200 and again.json()["pid"] != pid
    assert c.status()["a"]["last_error"] is None


def test_an_idle_model_unloads_after_its_idle_timeout(controller):
    c = controller({"a": {"idle": 1}})
    assert c.chat("a").status_code == 200
    c.wait_state("a", "stopped", timeout=10)
    assert not port_open(c.ports["a"]) and "unloading (stop, idle 1s)" in c.logs()


def test_sleep_models_sleep_and_are_woken_before_a_request_is_forwarded(controller):
    c = controller({"s": {"unload": "sleep"}, "t": {"unload": "sleep"}})
    first = c.chat("s").json()
    assert c.chat("t").status_code == 200  # s goes to sleep for t
    assert c.state("s") == "asleep"
    stats = httpx.get(f"http://127.0.0.1:{c.ports['s']}/stats").json()
    assert stats["asleep"] and stats["sleeps"] == 1
    r = c.chat("s", timeout=15)  # the stand-in hangs chats while asleep: this passes only if s was woken first
    assert r.status_code == 200 and r.json()["pid"] == first["pid"]  # woken, not restarted
    stats = httpx.get(f"http://127.0.0.1:{c.ports['s']}/stats").json()
    assert stats["wakes"] == 1 and not stats["asleep"] and c.state("t") == "asleep"
    assert "s: waking up" in c.logs()


def test_sigterm_stops_the_controller_and_every_backend_it_started(controller):
    c = controller({"a": {"group": "x"}, "b": {"group": "y"}})
    assert c.chat("a").status_code == 200 and c.chat("b").status_code == 200
    pids = [httpx.get(f"http://127.0.0.1:{c.ports[n]}/stats").json()["pid"] for n in ("a", "b")]
    c.proc.send_signal(signal.SIGTERM)
    assert c.proc.wait(20) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled, once shut down
    assert "controller stopped" in c.logs()
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


def test_a_bad_config_is_one_line_naming_the_file_and_field_and_exit_2(tmp_path):
    path = tmp_path / "on-demand.json"
    path.write_text(
        json.dumps(
            {"port": 1, "models": {"a": {"group": "g", "idle_timeout": 0, "unload": "nap", "url": "http://x:1"}}}
        )
    )
    r = subprocess.run(
        [sys.executable, "-m", "generator.shipped.on_demand", "--config", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.strip() == f"error: {path}: models.a.unload is 'nap'; use stop or sleep"
    path.write_text(json.dumps({"port": 1, "models": {"a": {"group": "g"}}}))
    r = subprocess.run(
        [sys.executable, "-m", "generator.shipped.on_demand", "--config", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.strip().endswith("on-demand.json: models.a.unload is missing")


def test_the_cause_of_a_failed_start_is_the_last_line_that_reads_like_an_error():
    from generator.shipped.on_demand.drivers import last_error_line

    log = "INFO loading\nValueError: No available memory for the cache blocks\nINFO shutting down\n\n"
    assert last_error_line(log) == "ValueError: No available memory for the cache blocks"
    assert last_error_line("INFO a\nINFO b\n") == "INFO b" and last_error_line("") == "(empty log)"


def test_a_client_that_goes_away_while_waiting_leaves_the_queue_and_the_load_goes_on(controller):
    # the load outlasts the bound below: the queue must empty because the client left, not because the load ended
    # (with a 3 s load this passed while a cancelled waiter stayed queued: its cancelled future raised in admit())
    c = controller({"a": {"args": ["--start-delay", "10"]}}, load_timeout=60)
    with pytest.raises(httpx.TimeoutException):
        c.chat("a", timeout=1)
    deadline = time.monotonic() + 5
    while (s := c.status()["a"])["queued"] != 0:
        assert time.monotonic() < deadline, s
        time.sleep(0.05)
    assert s["state"] == "loading", s
    c.wait_state("a", "loaded", timeout=40)
    assert c.status()["a"]["in_flight"] == 0 and c.chat("a").status_code == 200
